"""Notebook 19's exercise checks, without a notebook: references pass visible and hidden cases; wrong suites, rules
and pins fail saying where, a hidden case is named by its number only, and the check's variants and reference can
be told apart or copied by neither a test suite nor an answer."""

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
    if b.is_prerelease or e.is_prerelease:
        if b.public != e.public:
            broken.add("torch")
    elif b.release[:2] != e.release[:2]:
        broken.add("torch")
    if built["cxx11_abi"] != env["cxx11_abi"]:
        broken.add("cxx11_abi")
    py, abi = built["python"].split("-")
    need, have = int(py.removeprefix("cp")[1:]), int(env["python"].removeprefix("cp")[1:])
    if (abi == "abi3" and have < need) or (abi != "abi3" and have != need):
        broken.add("python")
    if built["platform"] != env["platform"]:
        broken.add("platform")
    return broken


HIDDEN_ROWS = [
    (n19.built("2.13.0"), n19.env(py="cp310")), (n19.built("2.13.2+cu126", py="cp39-abi3"), n19.env(py="cp314")),
    (n19.built("2.14.0rc1"), n19.env("2.14.0")), (n19.built("2.13.0", py="cp39-cp39"), n19.env(py="cp310")),
    (n19.built("2.13.0"), n19.env("2.13.0.post1")),
]


def pyproject(torch: str = "torch==2.13.*", python: str = 'requires-python = ">=3.10"\n') -> str:
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


HIDDEN_VERSIONS = [("torch", "2.13.12+cu128"), ("torch", "2.14.0.dev20260101"), ("torch", "2.12.0"),
                   ("torch", "2.130.0"), ("python", "3.14"), ("python", "3.8")]


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


def test_release_candidates_taken_for_releases_fail_on_a_numbered_hidden_row(verdict) -> None:  # type: ignore[no-untyped-def]
    def dev_only(built, env):  # type: ignore[no-untyped-def]
        from packaging.version import Version

        broken = what_breaks(built, env) - {"torch"}
        b, e = Version(built["torch"]), Version(env["torch"])
        if (b.public != e.public) if (b.is_devrelease or e.is_devrelease) else (b.release[:2] != e.release[:2]):
            broken.add("torch")
        return broken

    assert verdict("19-compat-matrix", lambda c: n19.compat_matrix(c, dev_only)) is None
    message = verdict("19-compat-matrix", lambda c: n19.compat_matrix(c, dev_only, hidden=HIDDEN_ROWS))
    assert message.startswith("hidden case 3:"), message
    head = message.split("\nHint")[0]
    assert head == "hidden case 3: 1 entry missing, 0 unexpected", head


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
        "2.13.0": True, "2.13.1": True, "2.13.9": True, "2.13.0+cpu": True, "2.12.9": False, "2.14.0": False,
        "3.0.0": False, "2.1.3": False}
    assert [n19._admits(k, v) for k, v in HIDDEN_VERSIONS] == [True, False, False, False, True, False]


def test_pins_that_stop_at_2_13_9_fail_on_a_numbered_hidden_version(verdict) -> None:  # type: ignore[no-untyped-def]
    answer = pyproject(torch="torch>=2.13,<=2.13.9")
    assert verdict("19-pin-versions", lambda c: n19.pin_versions(c, answer)) is None
    message = verdict("19-pin-versions", lambda c: n19.pin_versions(c, answer, hidden=HIDDEN_VERSIONS))
    assert message.startswith("hidden case 1: which torch versions the package runs with"), message
    assert "2.13.12" not in message


def test_unpinned_and_pythonless_projects_fail_saying_which(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("19-pin-versions", lambda c: n19.pin_versions(c, pyproject(torch="torch>=2.13")))
    assert "which torch versions the package runs with['2.14.0']: expected False, got True" in message
    assert "does not say which Python" in verdict("19-pin-versions", lambda c: n19.pin_versions(
        c, pyproject(python="")))
    assert "give the pyproject.toml text" in verdict("19-pin-versions", lambda c: n19.pin_versions(c, None))
