"""Notebook 19 (shipping an operator): a test suite that catches what opcheck misses, the compatibility matrix of
a built wheel, and the version pins of its pyproject.toml.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`).
"""

from __future__ import annotations

import shutil
import tempfile
import types
from collections.abc import Iterable
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ...lenses import package as package_lens
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["built", "compat_matrix", "env", "pin_versions", "test_suite"]

SUITE_HINTS = (
    "opcheck (with inputs that require grad, in both dtypes) finds registration bugs only; compare the values "
    "with a*x + y yourself, and the gradients with what autograd should give",
    "value tests belong on inputs that break pointer loops: a transposed view, a step-2 slice, an expanded tensor, "
    "a view at a storage offset; compare on copies taken before the call, and check that the inputs are "
    "unchanged afterwards",
    "torch.testing.assert_close compares values and dtype; torch.autograd.gradcheck (float64 inputs that require "
    "grad) compares the registered gradient with finite differences",
)

# Every operator the suite runs on, correct or with a planted bug, comes from this one template: the same function
# names, signatures and lines (no defaults), compiled under one file name; only the expressions differ. A suite
# can tell them apart by what they compute, never by how they look (see lenses.package.run_suite).
_OPERATOR = '''
def load(t):
    return LOAD
def kernel(x, y, a):
    return KERNEL
def fake(x, y, a):
    return torch.empty_like(x)
def setup(ctx, inputs, output):
    ctx.a = inputs[2]
def backward(ctx, grad):
    return BACKWARD
lib = torch.library.Library(ns, "DEF")
lib.define("scale_add(Tensor x, Tensor y, float a) -> Tensor")
lib.impl("scale_add", kernel, "CPU")
FAKE
AUTOGRAD
op = getattr(torch.ops, ns).scale_add.default
'''
_REGISTER_FAKE = 'torch.library.register_fake(ns + "::scale_add", fake, lib=lib)'
_REGISTER_AUTOGRAD = 'torch.library.register_autograd(ns + "::scale_add", backward, setup_context=setup, lib=lib)'


def _operator(kernel: str = "a * load(x) + load(y)", load: str = "t", backward: str = "grad * ctx.a, grad, None",
              fake: bool = True, autograd: bool = True) -> str:
    return (_OPERATOR.replace("LOAD", load).replace("KERNEL", kernel).replace("BACKWARD", backward)
            .replace("FAKE", _REGISTER_FAKE if fake else "pass")
            .replace("AUTOGRAD", _REGISTER_AUTOGRAD if autograd else "pass"))


_DENSE = "t.as_strided(t.shape, torch.empty(t.shape).stride(), t.storage_offset()) if t.numel() else t"
CORRECT_OPERATOR = _operator()
PLANTED_BUGS = MappingProxyType({
    "has no fake kernel": _operator(fake=False),
    "has no autograd formula": _operator(autograd=False),
    "computes a*x - y": _operator(kernel="a * load(x) - load(y)"),
    "registers a gradient that forgets a": _operator(backward="grad, grad, None"),
    "writes the result into x": _operator(kernel="load(x).mul_(a).add_(load(y))"),
    "reads memory as if every input were contiguous": _operator(load=_DENSE),
    "computes float64 inputs in float32": _operator(kernel="a * load(x).float() + load(y).float()"),
})
VISIBLE_BUGS = ("has no fake kernel", "has no autograd formula", "computes a*x - y")


def test_suite(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`TEST_SUITE`: a pytest module whose tests take the operator as the fixture `op`; run once against a correct
    scale_add and the planted bugs (hidden: more bugs, by name), it must pass the first and fail each bug."""
    c.that(type(answer) is str and bool(answer.strip()), "TEST_SUITE: give the test module's source as a string",
           SUITE_HINTS)
    cases = list(named(hidden, VISIBLE_BUGS, lambda bug: f"an op that {bug}"))
    keys = [f"bug {k}" for k in range(len(cases))]
    run = package_lens.run_suite(str.__str__(answer), {"correct": CORRECT_OPERATOR,
                                                       **{k: PLANTED_BUGS[bug] for k, (_, bug) in zip(keys, cases)}})
    c.that(run.error is None, f"{run.error}; the end of pytest's output:\n{run.output[-800:]}", SUITE_HINTS)
    bad = run.failed("correct")
    c.that(not bad, "your suite fails a correct scale_add: " + "; ".join(
        f"{t}: {run.messages['correct'].get(t, '')[:160]}" for t in bad[:3]), SUITE_HINTS)
    c.that(run.passed("correct"), "no test of your suite passed on a correct scale_add (were they all skipped?)",
           SUITE_HINTS)
    for key, (label, _) in zip(keys, cases):
        if hidden is None:
            c.that(bool(run.failed(key)), f"your suite passes {label}", SUITE_HINTS)
        else:
            c.that(bool(run.failed(key)), f"{label}: every test of your suite passes on one of the planted bugs",
                   SUITE_HINTS)


COMPAT_HINTS = (
    "go rule by rule through the table in section 4 and add the key of every rule that fails; several can fail "
    "at once",
    "compare torch releases as numbers (2.13 is not 2.1), ignore the +local label and the patch number, but treat "
    "a dev or rc version as matching only itself; compare Python versions as numbers too (3.9 < 3.10)",
    "an abi3 wheel built for cp310 runs on cp310 and on every newer CPython; a cp311-cp311 wheel only on cp311",
)
COPY_HINTS = ("write the rules yourself: the check compares the code your answer runs with its own",)
_KEYS = ("torch", "cxx11_abi", "python", "platform")


def built(torch: str, abi: bool = True, py: str = "cp310-abi3", plat: str = "linux_x86_64") -> tuple[Any, ...]:
    """A wheel, as a row of the matrix: (torch version, C++11 ABI, Python-ABI tags, platform tag)."""
    return (torch, abi, py, plat)


def env(torch: str = "2.13.0", abi: bool = True, py: str = "cp311", plat: str = "linux_x86_64") -> tuple[Any, ...]:
    """An environment, as a row of the matrix: (torch version, C++11 ABI, interpreter tag, platform tag)."""
    return (torch, abi, py, plat)


COMPAT_ROWS = (
    (built("2.13.0+cpu"), env()), (built("2.13.0+cpu"), env("2.14.0", py="cp312")),
    (built("2.13.1"), env("2.13.4+cu128", py="cp313")), (built("2.13.0"), env("2.1.3")),
    (built("2.13.0", abi=False), env()), (built("2.13.0", py="cp311-cp311"), env(py="cp312")),
    (built("2.13.0", py="cp310-abi3"), env(py="cp39")), (built("2.13.0", plat="linux_aarch64"), env()),
    (built("2.14.0.dev20260101"), env("2.14.0.dev20260102")),
    (built("2.12.0", abi=False, py="cp311-cp311", plat="macosx_11_0_arm64"), env(py="cp312")),
)

# The reference rules, compiled under a file name of their own: no source for inspect.getsource to copy, and a
# watched answer that calls them, or a copy of their code, fails.
_REFERENCE = '''
def broken_rules(b, e):
    from packaging.version import Version

    out = set()
    vb, ve = Version(b["torch"]), Version(e["torch"])
    exact = vb.is_prerelease or ve.is_prerelease
    if (vb.public != ve.public) if exact else (vb.release[:2] != ve.release[:2]):
        out.add("torch")
    if b["cxx11_abi"] is not e["cxx11_abi"]:
        out.add("cxx11_abi")
    tag, kind = b["python"].split("-")
    lo, at = (int(t[3:]) for t in (tag, e["python"]))
    if at < lo or (at > lo and kind != "abi3"):
        out.add("python")
    if b["platform"] != e["platform"]:
        out.add("platform")
    return out
'''
_space: dict[str, Any] = {}
exec(compile(_REFERENCE, "<reference of 19-compat-matrix>", "exec"), _space)
_broken_rules: Any = _space.pop("broken_rules")
del _space


def _codes(fn: Any) -> Iterable[bytes]:
    """The bytecode of `fn` and of the functions defined inside it."""
    code = getattr(fn, "__code__", None)
    stack = [code] if isinstance(code, types.CodeType) else []
    while stack:
        code = stack.pop()
        yield code.co_code
        stack += [k for k in code.co_consts if isinstance(k, types.CodeType)]


def _copies_a_reference(answer: Any, reference: Any) -> bool:
    """True when a function the answer reaches (itself, its closure, the globals it names, a few levels deep) has
    the bytecode of `reference`'s body (names aside): the check's code re-executed under another name or file."""
    theirs = reference.__code__.co_code
    seen, todo = set(), [(answer, 0)]
    while todo:
        fn, depth = todo.pop()
        fn = getattr(fn, "__func__", fn)
        if not isinstance(fn, types.FunctionType) or id(fn) in seen:
            continue
        seen.add(id(fn))
        if any(code == theirs for code in _codes(fn)):
            return True
        if depth < 3:
            names = {n for code in [fn.__code__] for n in code.co_names}
            todo += [(fn.__globals__.get(n), depth + 1) for n in names]
            todo += [(cell.cell_contents, depth + 1) for cell in fn.__closure__ or ()
                     if _cell_filled(cell)]
    return False


def _cell_filled(cell: types.CellType) -> bool:
    try:
        return cell.cell_contents is not cell
    except ValueError:   # an empty cell
        return False


def compat_matrix(c: Check, answer: Any, hidden: Iterable[tuple[tuple[Any, ...], tuple[Any, ...]]] | None = None
                  ) -> None:
    """`what_breaks(built, env)`: the set of keys whose rule of the compatibility table breaks, on every row
    (hidden: more (built(...), env(...)) rows)."""
    c.that(callable(answer), "what_breaks should be a function", COMPAT_HINTS)
    c.that(not _copies_a_reference(answer, _broken_rules),
           "what_breaks runs a copy of the check's own code", COPY_HINTS)
    mine = c.watch(answer, "what_breaks", escapes=True, forbid=[package_lens, _broken_rules], hint=COMPAT_HINTS)
    rows = named(hidden, COMPAT_ROWS, lambda row: "what_breaks(built={}, env={})".format(
        *(dict(zip(_KEYS, side)) for side in row)))
    for label, (b, e) in rows:
        got = mine(dict(zip(_KEYS, b)), dict(zip(_KEYS, e)))   # fresh dicts: the answer may change its own
        expected = _broken_rules(dict(zip(_KEYS, b)), dict(zip(_KEYS, e)))   # only after the answer returned
        c.equal(got, expected, what=label, hint=COMPAT_HINTS, secret=hidden is not None)


PIN_HINTS = (
    "a requirement is a name and a version specifier; write one for the running torch, the same one for the build, "
    "and a Requires-Python",
    "'>=2.13' lets 2.14 in, and so does '~=2.13' (it means >=2.13, ==2.*); '==2.13.0' shuts out 2.13.1. A wildcard "
    "on the minor release or an upper bound does it",
    "the build requirements live in [build-system] requires; the runtime ones in [project] dependencies; the Python "
    "version in [project] requires-python",
)
# What the pins must admit: every 2.13 release of torch (local labels included), CPython 3.10 and newer.
PIN_RULES = MappingProxyType({"torch": "==2.13.*", "python": ">=3.10"})
PIN_VERSIONS = MappingProxyType({
    "torch": ("2.13.0", "2.13.1", "2.13.9", "2.13.0+cpu", "2.12.9", "2.14.0", "3.0.0", "2.1.3"),
    "python": ("3.10", "3.11", "3.13", "3.9"),
})
_PIN_WHAT = MappingProxyType({
    ("torch", "admits"): "which torch versions the package runs with",
    ("torch", "build_admits"): "which torch versions the package builds with",
    ("python", "python_admits"): "which Pythons the package installs on",
})


def _admits(kind: str, version: str) -> bool:
    from packaging.specifiers import SpecifierSet  # packaging comes with pip and setuptools, which this notebook needs
    from packaging.version import Version

    return SpecifierSet(PIN_RULES[kind]).contains(Version(version), prereleases=True)


def _read_project(c: Check, text: str, probe: dict[str, list[str]]) -> dict[str, Any]:
    c.that("cmdclass" not in text, "your project replaces setuptools' commands (cmdclass): the pins must do the work",
           PIN_HINTS)
    tmp = Path(tempfile.mkdtemp(prefix="nb19-pins-"))
    try:
        (tmp / "pyproject.toml").write_text(text)
        (tmp / "src" / "nb19_shipop").mkdir(parents=True)
        (tmp / "src" / "nb19_shipop" / "__init__.py").write_text("")
        return package_lens.project_metadata(tmp, probe=probe)
    except package_lens.PackageError as exc:
        c.fail(f"setuptools could not read your project: {str(exc)[-600:]}", PIN_HINTS)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def pin_versions(c: Check, answer: Any, hidden: Iterable[tuple[str, str]] | None = None) -> None:
    """`PYPROJECT`: the package's pyproject.toml with torch pinned to 2.13.* for the run and the build and
    Requires-Python >= 3.10, read through setuptools' build backend (hidden: more ("torch" | "python", version)
    probes)."""
    c.that(type(answer) is str, "PYPROJECT: give the pyproject.toml text as a string", PIN_HINTS)
    cases = list(hidden) if hidden is not None else []
    probe = {kind: list(PIN_VERSIONS[kind]) + [v for k, v in cases if k == kind] for kind in PIN_VERSIONS}
    meta = _read_project(c, str.__str__(answer), probe)
    c.equal(str(meta["name"]).lower().replace("_", "-"), "nb19-shipop", what="the package name", hint=PIN_HINTS)
    c.equal(meta["version"], "0.1.0", what="the version", hint=PIN_HINTS)
    found = {("torch", "admits"): meta["admits"]["torch"], ("torch", "build_admits"): meta["build_admits"]["torch"],
             ("python", "python_admits"): meta["python_admits"]}
    missing = {("torch", "admits"): "the package does not depend on torch at run time",
               ("torch", "build_admits"): "the build requirements do not name torch",
               ("python", "python_admits"): "the package does not say which Python it needs"}
    for where, admitted in found.items():
        kind = where[0]
        c.that(admitted is not None, missing[where], PIN_HINTS)
        if hidden is None:
            c.equal({v: admitted[v] for v in PIN_VERSIONS[kind]}, {v: _admits(kind, v) for v in PIN_VERSIONS[kind]},
                    what=_PIN_WHAT[where], hint=PIN_HINTS)
            continue
        for number, (case_kind, version) in enumerate(cases, 1):
            if case_kind == kind:
                c.equal(admitted[version], _admits(kind, version), what=f"hidden case {number}: {_PIN_WHAT[where]}",
                        hint=PIN_HINTS, secret=True)
