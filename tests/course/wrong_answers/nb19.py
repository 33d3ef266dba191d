"""Wrong answers for notebook 19 (shipping an operator): each must fail its check for the reason in `expect`."""

from __future__ import annotations

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


def _breaks(body: str) -> str:
    return f"from packaging.version import Version\n\n\ndef what_breaks(built, env):\n{body}\n"


_TORCH_OK = """    broken = set()
    b, e = Version(built["torch"]), Version(env["torch"])
    if (b.public != e.public) if (b.is_prerelease or e.is_prerelease) else (b.release[:2] != e.release[:2]):
        broken.add("torch")
"""
_REST = """    if built["cxx11_abi"] != env["cxx11_abi"]:
        broken.add("cxx11_abi")
    if built["platform"] != env["platform"]:
        broken.add("platform")
"""
_PY_OK = """    py, abi = built["python"].split("-")
    need, have = int(py[3:]), int(env["python"][3:])
    if have < need or (have > need and abi != "abi3"):
        broken.add("python")
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


WRONG = {
    "19-test-suite": [
        Wrong("opcheck only", _suite(_OPCHECK), "your suite passes an op that computes a*x - y"),
        Wrong("opcheck and contiguous values only: misses the gradient", _suite(_OPCHECK + _VALUES),
              "your suite passes an op that registers a gradient that forgets a"),
        Wrong("a test that always passes", _suite("def test_ok(op):\n    assert op is not None\n"),
              "your suite passes an op that has no fake kernel", gaming=True),
        Wrong("ends the test process before pytest reports", _suite("import os\nos._exit(0)\n"),
              "ended before pytest could report", gaming=True),
    ],
    "19-compat-matrix": [
        Wrong("python tags compared as text", _breaks(_TORCH_OK + _REST + """    py, abi = built["python"].split("-")
    if (abi == "abi3" and env["python"] < py) or (abi != "abi3" and env["python"] != py):
        broken.add("python")
    return broken"""), "what_breaks(built="),
        Wrong("torch versions must be equal", _breaks("""    broken = set()
    if built["torch"] != env["torch"]:
        broken.add("torch")
""" + _REST + _PY_OK + "    return broken"), "what_breaks(built="),
        Wrong("torch compared by prefix", _breaks("""    broken = set()
    if not env["torch"].startswith(built["torch"][:3]):
        broken.add("torch")
""" + _REST + _PY_OK + "    return broken"), "what_breaks(built="),
        Wrong("nightlies treated as releases", _breaks("""    broken = set()
    if Version(built["torch"]).release[:2] != Version(env["torch"]).release[:2]:
        broken.add("torch")
""" + _REST + _PY_OK + "    return broken"), "what_breaks(built="),
        Wrong("abi3 treated like an exact tag", _breaks(_TORCH_OK + _REST + """    if built["python"].split("-")[0] != env["python"]:
        broken.add("python")
    return broken"""), "what_breaks(built="),
        Wrong("returns a list", _breaks(_TORCH_OK + _REST + _PY_OK + "    return sorted(broken)"), "expected a set"),
        Wrong("a set that equals anything", """class _Any(set):
    def __eq__(self, other):
        return True


def what_breaks(built, env):
    return _Any()
""", "expected a set", gaming=True),
        Wrong("calls the check's own reference", "def what_breaks(built, env):\n    return _expected(built, env)\n",
              "asks you not to use", gaming=True),
    ],
    "19-pin-versions": [
        Wrong("no pins (the draft)", _pyproject('["setuptools>=64", "torch"]', '["torch"]'),
              "which torch versions the package runs with"),
        Wrong("a lower bound only", _pyproject('["setuptools>=64", "torch>=2.13"]', '["torch>=2.13"]'),
              "which torch versions the package runs with"),
        Wrong("compatible release on the minor", _pyproject('["setuptools>=64", "torch~=2.13"]', '["torch~=2.13"]'),
              "which torch versions the package runs with"),
        Wrong("pinned to one patch release", _pyproject('["setuptools>=64", "torch==2.13.0"]', '["torch==2.13.0"]'),
              "which torch versions the package runs with"),
        Wrong("the build left unpinned", _pyproject('["setuptools>=64", "torch"]', '["torch==2.13.*"]'),
              "which torch versions the package builds with"),
        Wrong("no requires-python", _pyproject('["setuptools>=64", "torch==2.13.*"]', '["torch==2.13.*"]', python=""),
              "does not say which Python it needs"),
        Wrong("pins in a comment and a tool table only", _pyproject(
            '["setuptools>=64", "torch"]  # torch==2.13.*', '["torch"]  # torch==2.13.*',
            extra='\n[tool.pins]\ntorch = "==2.13.*"\n'), "which torch versions the package runs with", gaming=True),
        Wrong("not TOML", 'PYPROJECT = "dependencies: torch==2.13.*"\n', "setuptools could not read your project",
              gaming=True),
    ],
}
