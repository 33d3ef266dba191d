"""Notebook 19's exercise checks, without a notebook: references pass visible and hidden cases; wrong suites, rules,
pins and stable-ABI operators fail saying where, a hidden case is named by its number only, and the check's variants
and reference can be told apart or copied by neither a test suite nor an answer."""

from __future__ import annotations

import inspect

import pytest

from torchlens_widgets.course.exercises import n19

TEST_SUITE = r'''
import pytest
import torch


def _pair(dtype=torch.float32, requires_grad=False):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, generator=g, dtype=dtype)
    y = torch.randn(3, 4, generator=g, dtype=dtype)
    return x.requires_grad_(requires_grad), y.requires_grad_(requires_grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_registration(op, dtype):
    x, y = _pair(dtype, requires_grad=True)
    torch.library.opcheck(op, (x, y, 1.5))


LAYOUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.t().contiguous().t(),
    "every other column": lambda t: torch.cat([t, t], 1)[:, ::2],
    "expanded": lambda t: t[:1].expand(3, 4),
    "storage offset": lambda t: torch.cat([t.reshape(-1), t.reshape(-1)])[5:17].view(3, 4),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_values(op, layout, dtype):
    x, y = (LAYOUTS[layout](t) for t in _pair(dtype))
    x0, y0 = x.clone(), y.clone()
    out = op(x, y, 1.5)
    torch.testing.assert_close(out, 1.5 * x0 + y0)
    assert torch.equal(x, x0) and torch.equal(y, y0)
    assert out.untyped_storage().data_ptr() not in (x.untyped_storage().data_ptr(), y.untyped_storage().data_ptr())


GRADIENTS


def test_gradients(op):
    x, y = _pair(torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: op(a, b, 1.5), (x, y))
'''
HIDDEN_BUGS = ["registers a gradient that forgets a", "writes the result into x",
               "reads memory as if every input were contiguous", "computes float64 inputs in float32"]


def what_breaks(built, env):  # type: ignore[no-untyped-def]
    from packaging.version import Version

    broken = set()
    b, e = Version(built["torch"]), Version(env["torch"])
    if built["stable"] is None:
        if b != e:
            broken.add("torch")
    elif e.release[:2] < Version(built["stable"]).release[:2]:
        broken.add("torch")
    py, abi = built["python"].split("-")
    need, have = int(py.removeprefix("cp")[1:]), int(env["python"].removeprefix("cp")[1:])
    if (abi == "abi3" and have < need) or (abi != "abi3" and have != need):
        broken.add("python")
    if not any(tag in env["platforms"] for tag in built["platform"].split(".")):
        broken.add("platform")
    return broken


HIDDEN_ROWS = [
    (n19.built("2.13.0+cpu", stable="2.10"), n19.env("2.14.0.dev20260101")), (n19.built("2.13.0"), n19.env("2.13.0+cpu")),
    (n19.built("2.13.0", stable="2.12"), n19.env("2.12.0", plats=n19.MUSL)),
    (n19.built("2.13.0", plat="linux_x86_64"), n19.env("2.13.0")),
    (n19.built("2.13.0", py="cp39-abi3", plat="manylinux_2_17_x86_64"), n19.env("2.13.0", py="cp314", plats=n19.linux(17))),
    (n19.built("2.13.0+cpu"), n19.env("2.13.0.post1+cpu")),
]


def pyproject(torch: str = "torch==2.13.0", python: str = 'requires-python = ">=3.10"\n') -> str:
    return f'''
[build-system]
requires = ["setuptools>=64", "{torch}"]
build-backend = "setuptools.build_meta"

[project]
name = "nb19-shipop"
version = "0.1.0"
{python}dependencies = ["{torch}"]

[tool.setuptools.packages.find]
where = ["src"]
'''


HIDDEN_VERSIONS = [("torch", "2.13.0+cu126"), ("torch", "2.13.0.post1"), ("torch", "2.13.0rc1"),
                   ("torch", "2.13.12"), ("python", "3.14"), ("python", "3.8")]


def test_the_reference_suite_passes_visible_and_hidden_bugs(verdict) -> None:  # type: ignore[no-untyped-def]
    suite = TEST_SUITE.replace("GRADIENTS", "")
    assert verdict("19-test-suite", lambda c: (n19.test_suite(c, suite), n19.test_suite(c, suite, hidden=HIDDEN_BUGS))) is None


def test_a_suite_without_gradients_fails_on_a_numbered_hidden_bug(verdict) -> None:  # type: ignore[no-untyped-def]
    suite = TEST_SUITE.replace("GRADIENTS", "").split("\n\ndef test_gradients")[0]
    message = verdict("19-test-suite", lambda c: n19.test_suite(c, suite, hidden=HIDDEN_BUGS))
    assert message.startswith("hidden case 1: every test of your suite passes"), message
    assert "gradient" not in message.split("Hint")[0]


def test_a_suite_that_reads_the_operators_code_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    peek = '''
def _fingerprint(op):
    import gc
    return [f.__code__.co_names for f in gc.get_objects() if type(f).__name__ == "function"
            and f.__module__ is None and f.__globals__.get("ns") == op.namespace]


def test_looks(op):
    assert all("float" not in names and "mul_" not in names for names in _fingerprint(op))
'''
    message = verdict("19-test-suite", lambda c: n19.test_suite(c, TEST_SUITE.replace("GRADIENTS", peek)))
    assert "looked inside an operator under test" in message


def test_a_suite_that_reads_the_sources_from_the_plugin_finds_none(verdict) -> None:  # type: ignore[no-untyped-def]
    cheat = '''import sys


def _source(op):
    plugin = next(m for n, m in sys.modules.items() if n.startswith("_tlw_plugin_"))
    for fn in vars(plugin).values():
        for cell in getattr(fn, "__closure__", None) or ():
            value = cell.cell_contents
            if isinstance(value, dict) and "variants" in value:
                return value["variants"][op.namespace]
    raise LookupError("no sources")


def test_source(op):
    source = _source(op)
    assert "a * load(x) + load(y)" in source and "float()" not in source and "register_fake" in source
'''
    message = verdict("19-test-suite", lambda c: n19.test_suite(c, cheat))
    assert "your suite fails a correct scale_add" in message and "no sources" in message


def test_the_variants_look_alike_but_for_their_expressions() -> None:
    lines = {len(source.splitlines()) for source in (n19.CORRECT_OPERATOR, *n19.PLANTED_BUGS.values())}
    assert lines == {len(n19.CORRECT_OPERATOR.splitlines())}
    for source in n19.PLANTED_BUGS.values():
        assert [ln.split("return")[0] for ln in source.splitlines()] == [
            ln.split("return")[0] for ln in n19.CORRECT_OPERATOR.splitlines()] or "pass" in source


def test_a_suite_that_is_not_text_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    class Text(str):
        pass

    message = verdict("19-test-suite", lambda c: n19.test_suite(c, Text("def test_x(op):\n    pass\n")))
    assert "give the test module's source as a string" in message


def test_the_reference_rules_pass_visible_and_hidden_rows(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("19-compat-matrix", lambda c: (n19.compat_matrix(c, what_breaks),
                                                  n19.compat_matrix(c, what_breaks, hidden=HIDDEN_ROWS))) is None


def test_a_public_version_match_fails_on_a_numbered_hidden_row(verdict) -> None:  # type: ignore[no-untyped-def]
    def public_only(built, env):  # type: ignore[no-untyped-def]
        from packaging.version import Version

        broken = what_breaks(built, env) - {"torch"}
        b, e = Version(built["torch"]), Version(env["torch"])
        if (b.release != e.release) if built["stable"] is None else (e.release[:2] < Version(built["stable"]).release[:2]):
            broken.add("torch")
        return broken

    message = verdict("19-compat-matrix", lambda c: n19.compat_matrix(c, public_only))
    assert message.startswith("what_breaks(built={'torch': '2.13.0+cpu', 'stable': None"), message
    assert "'2.13.0+cu128'" in message
    message = verdict("19-compat-matrix", lambda c: n19.compat_matrix(c, public_only, hidden=HIDDEN_ROWS))
    assert message.startswith("hidden case 2:"), message
    head = message.split("\nHint")[0]
    assert head == "hidden case 2: 1 entry missing, 0 unexpected", head


def test_platform_tags_compared_for_equality_fail_on_a_visible_row(verdict) -> None:  # type: ignore[no-untyped-def]
    def equal_platform(built, env):  # type: ignore[no-untyped-def]
        broken = what_breaks(built, env) - {"platform"}
        if built["platform"] != env["platforms"][0]:
            broken.add("platform")
        return broken

    message = verdict("19-compat-matrix", lambda c: n19.compat_matrix(c, equal_platform))
    assert message.startswith("what_breaks(built={'torch': '2.13.0+cpu'"), message
    assert "a glibc 2.36 Linux's tags" in message


def test_the_platform_lists_are_what_packaging_gives() -> None:
    from packaging.tags import sys_tags

    here = [t for t in dict.fromkeys(t.platform for t in sys_tags()) if t != "any"]
    if here[:2] == ["linux_x86_64", "manylinux_2_36_x86_64"]:   # the machine the notebook's outputs come from
        assert tuple(here) == n19.linux(36)
    assert n19.linux(17)[-3:] == ("manylinux_2_6_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64")
    assert "manylinux2014_x86_64" in n19.linux(17) and "manylinux_2_18_x86_64" not in n19.linux(17)


def test_the_reference_rules_cannot_be_copied_or_called(verdict) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OSError):
        inspect.getsource(n19._broken_rules)
    space: dict = {}
    exec(compile(n19._REFERENCE.replace("broken_rules", "what_breaks"), "<mine>", "exec"), space)
    assert "a copy of the check's own code" in verdict("19-compat-matrix", lambda c: n19.compat_matrix(
        c, space["what_breaks"]))

    exec(compile("def through(built, env):\n    return what_breaks(built, env)\n", "<cell>", "exec"), space)
    through = space["through"]
    assert "a copy of the check's own code" in verdict("19-compat-matrix", lambda c: n19.compat_matrix(c, through))
    assert "asks you not to use" in verdict("19-compat-matrix", lambda c: n19.compat_matrix(
        c, lambda built, env: n19._broken_rules(built, env)))


def test_a_list_or_a_set_subclass_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    class Anything(set):  # type: ignore[type-arg]
        def __eq__(self, other):  # type: ignore[no-untyped-def]
            return True

    assert "expected a set" in verdict("19-compat-matrix", lambda c: n19.compat_matrix(c, lambda b, e: Anything()))
    assert "expected a set" in verdict("19-compat-matrix", lambda c: n19.compat_matrix(
        c, lambda b, e: sorted(what_breaks(b, e))))


def test_the_reference_pins_pass_visible_and_hidden_versions(verdict) -> None:  # type: ignore[no-untyped-def]
    answer = pyproject()
    assert verdict("19-pin-versions", lambda c: (n19.pin_versions(c, answer),
                                                 n19.pin_versions(c, answer, hidden=HIDDEN_VERSIONS))) is None


def test_the_expected_admissions_are_the_notebooks_tables() -> None:
    assert {v: n19._admits("torch", v) for v in n19.PIN_VERSIONS["torch"]} == {
        "2.13.0": True, "2.13.0+cpu": True, "2.13.0+cu128": True, "2.13.1": False, "2.12.9": False, "2.14.0": False,
        "3.0.0": False, "2.1.3": False}
    assert [n19._admits(k, v) for k, v in HIDDEN_VERSIONS] == [True, False, False, False, True, False]


def test_a_range_up_to_2_13_1_fails_on_a_numbered_hidden_version(verdict) -> None:  # type: ignore[no-untyped-def]
    answer = pyproject(torch="torch>=2.13.0,<2.13.1")
    assert verdict("19-pin-versions", lambda c: n19.pin_versions(c, answer)) is None
    message = verdict("19-pin-versions", lambda c: n19.pin_versions(c, answer, hidden=HIDDEN_VERSIONS))
    assert message.startswith("hidden case 2: which torch versions the package runs with"), message
    assert "post1" not in message


def test_unpinned_and_pythonless_projects_fail_saying_which(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("19-pin-versions", lambda c: n19.pin_versions(c, pyproject(torch="torch==2.13.*")))
    assert "which torch versions the package runs with['2.13.1']: expected False, got True" in message
    message = verdict("19-pin-versions", lambda c: n19.pin_versions(c, pyproject(torch="torch===2.13.0")))
    assert "which torch versions the package runs with['2.13.0+cpu']: expected True, got False" in message
    assert "does not say which Python" in verdict("19-pin-versions", lambda c: n19.pin_versions(
        c, pyproject(python="")))
    assert "give the pyproject.toml text" in verdict("19-pin-versions", lambda c: n19.pin_versions(c, None))


ROW_SUM = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

using torch::stable::Tensor;
using torch::headeronly::ScalarType;

template <typename T>
void sum_rows(const Tensor& x, Tensor& out) {
  const T* px = x.const_data_ptr<T>();
  T* po = out.mutable_data_ptr<T>();
  const int64_t rows = x.size(0), cols = x.size(1);
  for (int64_t i = 0; i < rows; ++i) {
    T acc = 0;
    for (int64_t j = 0; j < cols; ++j) acc += px[i * cols + j];
    po[i] = acc;
  }
}

Tensor row_sum(Tensor x) {
  STD_TORCH_CHECK(x.dim() == 2, "row_sum: x must be 2-D, got ", x.dim(), "-D");
  Tensor xc = torch::stable::contiguous(x);
  Tensor out = torch::stable::new_empty(xc, {xc.size(0)});
  if (xc.scalar_type() == ScalarType::Float) {
    sum_rows<float>(xc, out);
  } else if (xc.scalar_type() == ScalarType::Double) {
    sum_rows<double>(xc, out);
  } else {
    STD_TORCH_CHECK(false, "row_sum: float32 or float64 only");
  }
  return out;
}

STABLE_TORCH_LIBRARY(nb19_rows, m) {
  m.def("row_sum(Tensor x) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(nb19_rows, CPU, m) {
  m.impl("row_sum", TORCH_BOX(&row_sum));
}
"""
HIDDEN_ROW_SUMS = [(0, 3, "float32", "contiguous"), (3, 0, "float64", "contiguous"), (64, 33, "float64", "storage offset"),
                   (7, 5, "float32", "expanded"), (1, 1, "float64", "transposed")]


def test_the_reference_row_sum_passes_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("19-stable-op", lambda c: (n19.stable_op(c, ROW_SUM),
                                              n19.stable_op(c, ROW_SUM, hidden=HIDDEN_ROW_SUMS))) is None


def test_a_row_sum_that_trusts_a_unit_column_stride_fails_on_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    lazy = ROW_SUM.replace("Tensor xc = torch::stable::contiguous(x);",
                           "Tensor xc = x.stride(1) == 1 ? x : torch::stable::contiguous(x);")
    assert verdict("19-stable-op", lambda c: n19.stable_op(c, lazy)) is None
    message = verdict("19-stable-op", lambda c: n19.stable_op(c, lazy, hidden=HIDDEN_ROW_SUMS))
    assert message.startswith("hidden case 4:"), message
    assert "expanded" not in message and "7x5" not in message


def test_a_row_sum_on_the_ordinary_api_or_with_a_cxx_symbol_of_torch_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    aten = "#include <ATen/ops/sum.h>\n" + ROW_SUM
    message = verdict("19-stable-op", lambda c: n19.stable_op(c, aten))
    assert "did not compile with -DTORCH_TARGET_VERSION" in message and "#error" in message, message
    declared = ROW_SUM.replace("using torch::stable::Tensor;", "#include <string>\nnamespace c10 { void setThreadName("
                               "std::string name); }\nusing torch::stable::Tensor;").replace(
        "  Tensor xc =", '  c10::setThreadName("rows");\n  Tensor xc =')
    message = verdict("19-stable-op", lambda c: n19.stable_op(c, declared))
    assert "asks the loader for 1 C++ symbols of torch" in message and "c10::setThreadName" in message, message


def test_a_row_sum_that_calls_torchs_sum_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    borrowed = ROW_SUM.replace("  if (xc.scalar_type() == ScalarType::Float) {",
                               "  return torch::stable::sum(xc, std::vector<int64_t>{1});\n"
                               "  if (xc.scalar_type() == ScalarType::Float) {")
    message = verdict("19-stable-op", lambda c: n19.stable_op(c, borrowed))
    assert "ran aten::" in message and "aten::sum" in message, message

