"""Wrong answers for notebook 19 (shipping an operator): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.exercises.test_n19 import ROW_SUM
from tests.course.wrong_answers import Wrong


def _suite(body: str) -> str:
    return f'TEST_SUITE = r"""\nimport pytest\nimport torch\n\n{body}\n"""\n'


_OPCHECK = """
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_registration(op, dtype):
    x, y = torch.randn(3, 4, dtype=dtype, requires_grad=True), torch.randn(3, 4, dtype=dtype)
    torch.library.opcheck(op, (x, y, 1.5))
"""
_VALUES = """
def test_values(op):
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    torch.testing.assert_close(op(x, y, 1.5), 1.5 * x + y)
"""

# A cheater's suites: each fails an op whose code looks like a planted bug, without calling it.
_PLUGIN_SOURCES = """
import sys


def _source(op):
    plugin = next(m for n, m in sys.modules.items() if n.startswith("_tlw_plugin_"))
    for fn in vars(plugin).values():
        for cell in getattr(fn, "__closure__", None) or ():
            if isinstance(cell.cell_contents, dict) and "variants" in cell.cell_contents:
                return cell.cell_contents["variants"][op.namespace]


def test_source(op):
    source = _source(op)
    assert "a * x + y" in source and "register_fake" in source and "register_autograd" in source
    assert "grad * ctx.a" in source and "float()" not in source and "_dense" not in source
"""
_BY_CODE = _OPCHECK + """
import dis
import gc
import types


def test_code(op):
    for f in gc.get_objects():
        if isinstance(f, types.FunctionType) and f.__code__.co_filename.endswith(op.namespace + ">"):
            names, ops = set(f.__code__.co_names), {i.argrepr for i in dis.get_instructions(f)}
            assert not {"mul_", "float", "_dense"} & names and "-" not in ops
            if f.__code__.co_varnames[:2] == ("ctx", "grad"):
                assert "a" in names
"""


def _breaks(body: str) -> str:
    return f"from packaging.version import Version\n\n\ndef what_breaks(built, env):\n{body}\n"


_TORCH_OK = """    broken = set()
    b, e = Version(built["torch"]), Version(env["torch"])
    if (b != e) if built["stable"] is None else (e.release[:2] < Version(built["stable"]).release[:2]):
        broken.add("torch")
"""
_PLATFORM_OK = """    if not set(built["platform"].split(".")) & set(env["platforms"]):
        broken.add("platform")
"""
_PY_OK = """    py, abi = built["python"].split("-")
    need, have = int(py[3:]), int(env["python"][3:])
    if have < need or (have > need and abi != "abi3"):
        broken.add("python")
"""

_COPIED = """import inspect

from torchlens_widgets.course.exercises import n19 as _n19

try:
    _source = inspect.getsource(_n19._broken_rules)
except OSError:   # compiled from a string: the string is in the module
    _source = _n19._REFERENCE
exec(compile(_source.replace("def broken_rules", "def what_breaks"), "<my rules>", "exec"))
"""


def _pyproject(build: str, deps: str, python: str = 'requires-python = ">=3.10"\n', extra: str = "") -> str:
    return f'''PYPROJECT = """
[build-system]
requires = {build}
build-backend = "setuptools.build_meta"

[project]
name = "nb19-shipop"
version = "0.1.0"
{python}dependencies = {deps}
{extra}
[tool.setuptools.packages.find]
where = ["src"]
"""
'''


_ROW_SUM = ROW_SUM  # the in-process test's reference: the wrong answers below change one line of it


def _rows(source: str) -> str:
    return f'ROW_SUM_SOURCE = r"""{source}"""\n'


WRONG = {
    "19-test-suite": [
        Wrong("opcheck only", _suite(_OPCHECK), "your suite passes an op that computes a*x - y"),
        Wrong("opcheck and contiguous values only: misses the gradient", _suite(_OPCHECK + _VALUES),
              "hidden case 1: every test of your suite passes on one of the planted bugs"),
        Wrong("a test that always passes", _suite("def test_ok(op):\n    assert op is not None\n"),
              "your suite passes an op that has no fake kernel", gaming=True),
        Wrong("ends the test process before pytest reports", _suite("import os\nos._exit(0)\n"),
              "ended before pytest could report", gaming=True),
        Wrong("reads each variant's source from the checker's plugin", _suite(_PLUGIN_SOURCES),
              "your suite fails a correct scale_add", gaming=True),
        Wrong("tells the variants apart by their code", _suite(_BY_CODE), "looked inside an operator under test",
              gaming=True),
    ],
    "19-compat-matrix": [
        Wrong("python tags compared as text", _breaks(_TORCH_OK + _PLATFORM_OK + """    py, abi = built["python"].split("-")
    if (abi == "abi3" and env["python"] < py) or (abi != "abi3" and env["python"] != py):
        broken.add("python")
    return broken"""), "what_breaks(built="),
        Wrong("the same major.minor release taken as compatible", _breaks("""    broken = set()
    b, e = Version(built["torch"]), Version(env["torch"])
    if (b.release[:2] != e.release[:2]) if built["stable"] is None else (e.release[:2] < Version(built["stable"]).release[:2]):
        broken.add("torch")
""" + _PLATFORM_OK + _PY_OK + "    return broken"), "what_breaks(built="),
        Wrong("the local label (+cpu, +cu128) ignored", _breaks("""    broken = set()
    b, e = Version(built["torch"]), Version(env["torch"])
    if (b.public != e.public) if built["stable"] is None else (e.release[:2] < Version(built["stable"]).release[:2]):
        broken.add("torch")
""" + _PLATFORM_OK + _PY_OK + "    return broken"), "what_breaks(built="),
        Wrong("the stable target compared as text", _breaks("""    broken = set()
    if built["stable"] is None:
        if Version(built["torch"]) != Version(env["torch"]):
            broken.add("torch")
    elif env["torch"] < built["stable"]:
        broken.add("torch")
""" + _PLATFORM_OK + _PY_OK + "    return broken"), "what_breaks(built="),
        Wrong("a stable build treated like an ordinary one", _breaks("""    broken = set()
    if Version(built["torch"]) != Version(env["torch"]):
        broken.add("torch")
""" + _PLATFORM_OK + _PY_OK + "    return broken"), "what_breaks(built="),
        Wrong("platform tags compared for equality", _breaks(_TORCH_OK + _PY_OK + """    if built["platform"] not in (env["platforms"][0], env["platforms"][-1]):
        broken.add("platform")
    return broken"""), "what_breaks(built="),
        Wrong("a dotted platform tag taken as one tag", _breaks(_TORCH_OK + _PY_OK + """    if built["platform"] not in env["platforms"]:
        broken.add("platform")
    return broken"""), "what_breaks(built="),
        Wrong("abi3 treated like an exact tag", _breaks(_TORCH_OK + _PLATFORM_OK + """    if built["python"].split("-")[0] != env["python"]:
        broken.add("python")
    return broken"""), "what_breaks(built="),
        Wrong("returns a list", _breaks(_TORCH_OK + _PLATFORM_OK + _PY_OK + "    return sorted(broken)"), "expected a set"),
        Wrong("a set that equals anything", """class _Any(set):
    def __eq__(self, other):
        return True


def what_breaks(built, env):
    return _Any()
""", "expected a set", gaming=True),
        Wrong("calls the check's own reference", "from torchlens_widgets.course.exercises import n19 as _n19\n\n\n"
              "def what_breaks(built, env):\n    return _n19._broken_rules(built, env)\n", "asks you not to use",
              gaming=True),
        Wrong("re-runs the check's reference under a file name of its own", _COPIED,
              "what_breaks runs a copy of the check's own code", gaming=True),
    ],
    "19-pin-versions": [
        Wrong("no pins (the draft)", _pyproject('["setuptools>=64", "torch"]', '["torch"]'),
              "which torch versions the package runs with"),
        Wrong("a lower bound only", _pyproject('["setuptools>=64", "torch>=2.13"]', '["torch>=2.13"]'),
              "which torch versions the package runs with"),
        Wrong("every 2.13 patch release", _pyproject('["setuptools>=64", "torch==2.13.*"]', '["torch==2.13.*"]'),
              "which torch versions the package runs with['2.13.1']"),
        Wrong("compatible release on the patch", _pyproject('["setuptools>=64", "torch~=2.13.0"]', '["torch~=2.13.0"]'),
              "which torch versions the package runs with['2.13.1']"),
        Wrong("arbitrary equality shuts out the +cpu build", _pyproject('["setuptools>=64", "torch===2.13.0"]',
                                                                         '["torch===2.13.0"]'),
              "which torch versions the package runs with['2.13.0+cpu']"),
        Wrong("the build left unpinned", _pyproject('["setuptools>=64", "torch"]', '["torch==2.13.0"]'),
              "which torch versions the package builds with"),
        Wrong("no requires-python", _pyproject('["setuptools>=64", "torch==2.13.0"]', '["torch==2.13.0"]', python=""),
              "does not say which Python it needs"),
        Wrong("pins in a comment and a tool table only", _pyproject(
            '["setuptools>=64", "torch"]  # torch==2.13.0', '["torch"]  # torch==2.13.0',
            extra='\n[tool.pins]\ntorch = "==2.13.0"\n'), "which torch versions the package runs with", gaming=True),
        Wrong("not TOML", 'PYPROJECT = "dependencies: torch==2.13.0"\n', "setuptools could not read your project",
              gaming=True),
    ],
    "19-stable-op": [
        Wrong("sums a float64 row in float", _rows(_ROW_SUM.replace("    T acc = 0;", "    float acc = 0;")),
              "row_sum of a 5x2 float64 tensor (transposed): values differ"),
        Wrong("the ordinary API: ATen headers", _rows("#include <ATen/ops/sum.h>\n" + _ROW_SUM),
              "did not compile with -DTORCH_TARGET_VERSION", gaming=True),
        Wrong("declares a C++ function of torch itself", _rows(_ROW_SUM.replace(
            "using torch::stable::Tensor;",
            "#include <string>\nnamespace c10 { void setThreadName(std::string name); }\nusing torch::stable::Tensor;")
            .replace("  Tensor xc =", '  c10::setThreadName("rows");\n  Tensor xc =')),
              "C++ symbols of torch", gaming=True),
        Wrong("lets torch compute the sums", _rows(_ROW_SUM.replace(
            "  if (xc.scalar_type() == ScalarType::Float) {",
            "  return torch::stable::sum(xc, std::vector<int64_t>{1});\n  if (xc.scalar_type() == ScalarType::Float) {")),
              "ran aten::", gaming=True),
    ],
}
