"""Notebook 19 (shipping an operator): a test suite that catches what opcheck misses, the compatibility matrix of
a built wheel, the version pins of its pyproject.toml, and an operator built on the LibTorch stable ABI.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import types
from collections.abc import Iterable
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ...lenses import package as package_lens
from ._cases import errors_by_type, named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["MACOS_ARM", "MUSL", "built", "compat_matrix", "env", "linux", "pin_versions", "stable_op", "test_suite"]

SUITE_HINTS = (
    "opcheck (with inputs that require grad, in both dtypes) finds registration bugs only; compare the values "
    "with a*x + y yourself, and the gradients with what autograd should give",
    "value tests belong on inputs that break pointer loops: a transposed view, a step-2 slice, an expanded tensor, "
    "a view at a storage offset; compare on copies taken before the call, and check that the inputs are "
    "unchanged afterwards",
    "torch.testing.assert_close compares values and dtype; torch.autograd.gradcheck (float64 inputs that require "
    "grad) compares the registered gradient with finite differences",
)

# Every operator the suite runs on, correct or with a planted bug, comes from one template (lenses.package): the same
# function names, signatures and lines, compiled under one file name; only the expressions differ. A suite can tell
# them apart by what they compute, never by how they look (see lenses.package.run_suite).
_operator = package_lens.operator_source


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
    "go rule by rule through the compatibility matrix (the table before section 7) and add the key of every rule "
    "that fails; several can fail at once",
    "an ordinary (libtorch) build asks for C++ symbols: it is safe only with the very torch build it was compiled "
    "against, version and +local label alike; a stable-ABI build needs a torch at least as new as its target, "
    "compared as numbers (2.9 < 2.10); the platform works when it is one of the environment's tags",
    "an abi3 wheel built for cp310 runs on cp310 and on every newer CPython; a cp311-cp311 wheel only on cp311; a "
    "platform tag with dots (a.b) is several tags, any one of which may match",
)
COPY_HINTS = ("write the rules yourself: the check compares the code your answer runs with its own",)
_BUILT_KEYS = ("torch", "stable", "python", "platform")
_ENV_KEYS = ("torch", "python", "platforms")


def linux(glibc: int = 36, arch: str = "x86_64") -> tuple[str, ...]:
    """The platform tags pip accepts on a Linux with glibc 2.`glibc` (as `packaging.tags.sys_tags()` lists them, best
    first): the plain `linux_` tag, then every manylinux_2_N down to 2.5, with the legacy aliases."""
    alias = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags = [f"linux_{arch}"]
    for minor in range(glibc, 4, -1):
        tags.append(f"manylinux_2_{minor}_{arch}")
        if minor in alias:
            tags.append(f"{alias[minor]}_{arch}")
    return tuple(tags)


MACOS_ARM = ("macosx_14_0_arm64", "macosx_13_0_arm64", "macosx_12_0_arm64", "macosx_11_0_arm64",
             "macosx_14_0_universal2", "macosx_11_0_universal2")
MUSL = ("linux_x86_64", "musllinux_1_2_x86_64", "musllinux_1_1_x86_64")


def built(torch: str, stable: str | None = None, py: str = "cp310-abi3",
          plat: str = "manylinux_2_17_x86_64.manylinux2014_x86_64") -> tuple[Any, ...]:
    """A wheel, as a row of the matrix: (the torch it was compiled against, the stable-ABI target version or None
    for an ordinary libtorch build, its Python-ABI tags, its platform tag)."""
    return (torch, stable, py, plat)


def env(torch: str = "2.13.0+cpu", py: str = "cp311", plats: tuple[str, ...] = linux()) -> tuple[Any, ...]:
    """An environment, as a row of the matrix: (the installed torch, the interpreter's tag, the platform tags pip
    accepts there)."""
    return (torch, py, plats)


COMPAT_ROWS = (
    (built("2.13.0+cpu"), env()), (built("2.13.0+cpu"), env("2.13.1+cpu")),
    (built("2.13.0+cpu"), env("2.13.0+cu128")), (built("2.13.0+cpu", stable="2.10"), env("2.11.0+cu126", py="cp313")),
    (built("2.13.0+cpu", stable="2.10"), env("2.9.1")), (built("2.13.0", py="cp311-cp311"), env("2.13.0", py="cp312")),
    (built("2.13.0", py="cp310-abi3"), env("2.13.0", py="cp39")),
    (built("2.13.0", plat="manylinux_2_28_x86_64"), env("2.13.0")),
    (built("2.13.0", plat="manylinux_2_34_x86_64"), env("2.13.0", plats=linux(28))),
    (built("2.13.0", stable="2.12"), env("2.13.0", plats=MACOS_ARM)),
    (built("2.12.0", py="cp311-cp311", plat="macosx_11_0_arm64"), env("2.13.0", py="cp312")),
)

# The reference rules, compiled under a file name of their own: no source for inspect.getsource to copy, and a
# watched answer that calls them, or a copy of their code, fails.
_REFERENCE = '''
def broken_rules(b, e):
    from packaging.version import Version

    out = set()
    vb, ve = Version(b["torch"]), Version(e["torch"])
    if b["stable"] is None:
        if vb != ve:
            out.add("torch")
    elif ve.release[:2] < Version(b["stable"]).release[:2]:
        out.add("torch")
    tag, kind = b["python"].split("-")
    lo, at = (int(t[3:]) for t in (tag, e["python"]))
    if at < lo or (at > lo and kind != "abi3"):
        out.add("python")
    if not set(b["platform"].split(".")) & set(e["platforms"]):
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


def _describe_row(row: tuple[tuple[Any, ...], tuple[Any, ...]]) -> str:
    b, e = row
    names = {linux(): "a glibc 2.36 Linux's tags", linux(28): "a glibc 2.28 Linux's tags",
             MACOS_ARM: "an arm64 Mac's tags", MUSL: "a musl Linux's tags"}
    plats = names.get(tuple(e[2]), f"{len(e[2])} tags")
    return f"what_breaks(built={dict(zip(_BUILT_KEYS, b))}, env={{'torch': {e[0]!r}, 'python': {e[1]!r}, 'platforms': {plats}}})"


def compat_matrix(c: Check, answer: Any, hidden: Iterable[tuple[tuple[Any, ...], tuple[Any, ...]]] | None = None
                  ) -> None:
    """`what_breaks(built, env)`: the set of keys whose rule of the compatibility table breaks, on every row
    (hidden: more (built(...), env(...)) rows)."""
    c.that(callable(answer), "what_breaks should be a function", COMPAT_HINTS)
    c.that(not _copies_a_reference(answer, _broken_rules),
           "what_breaks runs a copy of the check's own code", COPY_HINTS)
    mine = c.watch(answer, "what_breaks", escapes=True, forbid=[package_lens, _broken_rules], hint=COMPAT_HINTS)
    for label, (b, e) in named(hidden, COMPAT_ROWS, _describe_row):
        def fresh(b: tuple[Any, ...] = b, e: tuple[Any, ...] = e) -> tuple[dict[str, Any], dict[str, Any]]:
            return dict(zip(_BUILT_KEYS, b)), {**dict(zip(_ENV_KEYS, e)), "platforms": list(e[2])}
        got = mine(*fresh())   # fresh dicts and lists: the answer may change its own
        expected = _broken_rules(*fresh())   # only after the answer returned
        c.equal(got, expected, what=label, hint=COMPAT_HINTS, secret=hidden is not None)


PIN_HINTS = (
    "a requirement is a name and a version specifier; write one for the running torch, the same one for the build, "
    "and a Requires-Python",
    "the library asks for the C++ symbols of one torch release: '>=2.13' and '~=2.13' let 2.14 in, a wildcard on "
    "2.13 lets 2.13.1 in, and '===' (arbitrary equality) compares text, so it shuts out 2.13.0+cpu",
    "the build requirements live in [build-system] requires; the runtime ones in [project] dependencies; the Python "
    "version in [project] requires-python",
)
# What the pins must admit: the torch release the library was compiled against, 2.13.0, under any local label (pip
# cannot tell the +cpu build from the +cu128 one: the package's import-time guard does), and CPython 3.10 and newer.
PIN_RULES = MappingProxyType({"torch": "==2.13.0", "python": ">=3.10"})
PIN_VERSIONS = MappingProxyType({
    "torch": ("2.13.0", "2.13.0+cpu", "2.13.0+cu128", "2.13.1", "2.12.9", "2.14.0", "3.0.0", "2.1.3"),
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
    """`PYPROJECT`: the package's pyproject.toml with torch pinned to the 2.13.0 release for the run and the build and
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


# --- 19-stable-op ------------------------------------------------------------------------------------------------

STABLE_HINTS = (
    "include only torch/csrc/stable/ and torch/headeronly/ headers (with TORCH_TARGET_VERSION set every other torch "
    "header refuses to compile), register with STABLE_TORCH_LIBRARY and STABLE_TORCH_LIBRARY_IMPL in the namespace "
    "nb19_rows, and hand the kernel to m.impl through TORCH_BOX",
    "torch::stable::Tensor has dim(), size(d), scalar_type() and const_data_ptr<T>(); torch::stable::contiguous "
    "gives the dense data of any view, torch::stable::new_empty(x, {n}) a new tensor of x's dtype; STD_TORCH_CHECK "
    "refuses an input with a message",
    "sum each row in a loop over the dense data, in the input's own dtype (float and double); a row of length 0 "
    "sums to 0, and 0 rows give an empty result",
)
STABLE_NAMESPACE = "nb19_rows"
#: What the answer's kernel may run inside: allocation and layout ops, nothing that computes the sums.
STABLE_ALLOWED = frozenset({"aten::contiguous", "aten::clone", "aten::copy_", "aten::empty", "aten::empty_like",
                            "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided", "aten::new_zeros",
                            "aten::zeros", "aten::zero_", "aten::fill_", "aten::to", "aten::_to_copy"})
#: Undefined symbols no stable-ABI library needs: a way round the stable C functions into the Python interpreter
#: or the dynamic loader.
_STABLE_FORBIDDEN = ("Py", "_Py", "dlsym", "dlopen", "dlvsym")
# Cases as data: (rows, columns, dtype, layout); the layouts are built from dense tensors in the check.
STABLE_VISIBLE = ((3, 4, "float32", "contiguous"), (5, 2, "float64", "transposed"),
                  (4, 6, "float32", "every other column"))
_DTYPES = MappingProxyType({"float32": "float", "float64": "double"})


def _stable_input(rows: int, cols: int, dtype: str, layout: str, seed: int) -> Any:
    import torch

    g = torch.Generator().manual_seed(seed)
    kind = getattr(torch, dtype)

    def dense(*shape: int) -> Any:
        return torch.rand(*shape, generator=g, dtype=torch.float64).mul_(2).sub_(1).to(kind)

    if layout == "transposed":
        return dense(cols, rows).t()
    if layout == "every other column":
        return dense(rows, 2 * cols)[:, ::2]
    if layout == "expanded":
        return dense(1, cols).expand(rows, cols)
    if layout == "storage offset":
        return dense(rows * cols + 3)[3:].view(rows, cols)
    return dense(rows, cols)


def _build_stable(c: Check, source: str, probe: str | None) -> Any:
    """Build the answer with the stable-ABI flags through the build lens (a subprocess; a probe makes the first
    calls there), load it here under a namespace of its own per source, and return its operators (torch.ops.NS)."""
    import hashlib

    from ...lenses import build as build_lens
    from ..markers import STUB_MESSAGE

    if STUB_MESSAGE in source or "YOUR CODE HERE" in source:
        raise NotImplementedError(STUB_MESSAGE)
    ns = f"tlw_rows_{hashlib.sha256(source.encode()).hexdigest()[:10]}"
    mine = re.sub(rf"\b{STABLE_NAMESPACE}\b", ns, source)
    try:
        report = build_lens.build_inline("row_sum", mine, headers=(), probe=probe and f"NS = {ns!r}\n{probe}",
                                         extra_cflags=["-O2", package_lens.STABLE_TARGET_2_10])
    except build_lens.BuildError as exc:
        c.fail(f"row_sum: {exc}", STABLE_HINTS)
    if not report.ok:
        where = "\n".join(f"  line {e.line}:{e.column}: {e.kind}: {e.message}\n      {e.code.strip()}"
                          for e in report.errors[:3])
        if not where:   # an error in a header the answer included: the compiler's own lines say which
            said = re.findall(r"^(\S+?):(\d+):\d+: (?:fatal )?error: (.*)$", report.log_tail, re.M)
            where = "\n".join(f"  {Path(f).name}:{n}: {m}" for f, n, m in said[:3])
        c.fail(f"row_sum did not compile with {package_lens.STABLE_TARGET_2_10}:\n{where}" if where else
               f"row_sum did not build; the end of the compiler's log:\n{report.log_tail[-600:]}", STABLE_HINTS)
    if report.probe_error is not None:
        c.fail(f"row_sum built, but {report.probe_error}", STABLE_HINTS)
    library = report.library or ""  # a report that built has its library
    cxx = package_lens.torch_cxx_symbols(library)
    c.that(not cxx, f"your library asks the loader for {len(cxx)} C++ symbols of torch (the first: {cxx[:1]}): "
                    "a stable-ABI library reaches torch through its C functions only", STABLE_HINTS)
    odd = [s for s in package_lens.dynamic_symbols(library) if s.startswith(_STABLE_FORBIDDEN)]
    c.that(not odd, f"your library needs {odd[:3]}: it must reach torch through the stable ABI alone", STABLE_HINTS)
    try:
        build_lens.load_built(report)
    except build_lens.BuildError as exc:
        c.fail(str(exc), STABLE_HINTS)
    import torch

    ops = getattr(torch.ops, ns)
    c.that(hasattr(ops, "row_sum"), f"no operator {STABLE_NAMESPACE}::row_sum was registered "
                                    f"(STABLE_TORCH_LIBRARY({STABLE_NAMESPACE}, m))", STABLE_HINTS)
    return ops


_STABLE_PROBE = '''
ops = getattr(torch.ops, NS)
if not hasattr(ops, "row_sum"):
    raise LookupError("no operator nb19_rows::row_sum was registered (STABLE_TORCH_LIBRARY(nb19_rows, m))")
ops.row_sum(torch.ones(3, 2))
ops.row_sum(torch.ones(0, 2, dtype=torch.float64))
'''


def stable_op(c: Check, source: Any, hidden: Iterable[tuple[int, int, str, str]] | None = None) -> None:
    """`ROW_SUM_SOURCE`: the C++ of `nb19_rows::row_sum(Tensor x) -> Tensor` on the LibTorch stable ABI, built with
    TORCH_TARGET_VERSION = 2.10: its library needs no C++ symbol of torch; it returns a new 1-D tensor of each row's
    sum, in x's dtype (float32, float64), for any layout, leaves x alone, runs no aten op that computes, and refuses
    an input that is not 2-D. A case is (rows, columns, dtype, layout); hidden ones are numbered."""
    import torch

    from ..integrity import clean

    c.that(type(source) is str, "ROW_SUM_SOURCE: give the C++ source as a string", STABLE_HINTS)
    secret = hidden is not None
    ops = _build_stable(c, str.__str__(source), None if secret else _STABLE_PROBE)   # the visible call probes first
    op = ops.row_sum
    for number, (label, (rows, cols, dtype, layout)) in enumerate(named(
            hidden, STABLE_VISIBLE, lambda k: f"row_sum of a {k[0]}x{k[1]} {k[2]} tensor ({k[3]})"), 1):
        c.that(dtype in _DTYPES and layout in ("contiguous", "transposed", "every other column", "expanded",
                                               "storage offset"), f"{label}: not a case this check knows")
        x = _stable_input(int(rows), int(cols), dtype, layout, seed=1000 + number)
        with clean():
            x0 = x.clone()
            expected = x0.double().sum(1).to(x0.dtype)
        with errors_by_type(c, label, secret):
            ran = {o for o in c.ops_inside(op, x) if o.startswith("aten::")}
            got = c.tensor(op(x), label)
        c.that(ran <= STABLE_ALLOWED, f"{label} ran {', '.join(sorted(ran - STABLE_ALLOWED))}: the sums must be your "
                                      "own loop (only allocation and layout ops may run)", STABLE_HINTS)
        c.equal(x, x0, what=f"{label}: x afterwards (it must stay unchanged)", hint=STABLE_HINTS)
        if got.numel() and x.numel():
            c.shares_storage(got, x, expected=False, what=f"{label}: the result and x", hint=STABLE_HINTS)
        tol = (1e-5, 1e-5) if dtype == "float32" else (1e-12, 1e-10)
        c.equal(got, expected, what=label, hint=STABLE_HINTS, rel_tol=tol[0], abs_tol=tol[1], secret=secret)
    if not secret:
        for bad, what in ((torch.ones(4), "a 1-D input"), (torch.ones(2, 3, 4), "a 3-D input")):
            c.rejects(op, bad, says=["2-D"], what=what, hint=STABLE_HINTS)
