"""Notebook 10 (kernel to operator): a kernel that walks every float32 layout through its strides, contract tests that
catch planted bugs, a predicted contract grid, and a contract case the matrix lacks (type promotion).

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`).

What a C++ kernel ran is read as in notebook 09 (`exercises.n09`): every call the check makes runs under torch's
profiler (it sees the aten ops a kernel calls through the dispatcher), and the built library's imported symbols say
what its code can call at all, on any input: ATen called past the dispatcher (`at::cpu::add`), which no recorder
sees, or an op kept for the inputs the check does not try.
"""

from __future__ import annotations

import builtins
import importlib.util
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch

from ...lenses import contract as contract_lens
from ..integrity import clean
from ._cases import errors_by_type, named
from .n09 import _only_allowed_calls, _recorded_call

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["contract_tests", "fix_kernel", "predict_grid", "promotion_case"]

_F32 = torch.float32


def _pristine(module: types.ModuleType) -> types.ModuleType:
    """A private copy of a lens, run again from its own file: the checks here first load at the first test cell, after
    answer cells that could have replaced a function of the public module (or one it calls)."""
    name = f"{__name__}_{module.__name__.rsplit('.', 1)[1]}"  # an exercise module's name: the checks protect it
    spec = importlib.util.spec_from_file_location(name, module.__file__)
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    sys.modules[name] = copy  # dataclasses look their module up while the file runs
    spec.loader.exec_module(copy)
    return copy


_contract = _pristine(contract_lens)  # the contract matrix these checks measure with
contract_cases, contract_matrix = _contract.contract_cases, _contract.contract_matrix
# torch.testing's float32 tolerances, as the contract matrix compares
_RTOL, _ATOL = 1.3e-6, 1e-5


# --- 10-fix-kernel ------------------------------------------------------------------------------------------------

FIX_HINTS = (
    "element i is at memory position i only in a contiguous tensor: for any other layout compute each element's "
    "position from its index, the sum of index times stride over the dimensions, for x and for y separately",
    "walk the multi-index over x.sizes() with the last dimension fastest; const_data_ptr<float>() already points at "
    "the storage offset; allocate the result with at::empty from x's sizes and options, which is contiguous whatever "
    "x's layout (empty_like keeps a transposed one)",
    "keep one counter per dimension: after each element add one to the last counter and, when a counter reaches its "
    "dimension's size, set it to zero and carry one into the counter before it; a 0-d tensor has no counters and one "
    "element",
)
FIX_ALLOWED = frozenset({"aten::empty", "aten::empty_like", "aten::empty_strided"})
FIX_RULE = ("walk the inputs through their own strides and write the a * x + y loop yourself: no copy (.contiguous(), "
            "clone, copy_) and no arithmetic op; only allocation ops are allowed")
FIX_PROBE = ("e = torch.empty(0); OPS.scale_add(e, e, 1.0); t = torch.randn(4, 6)[:, ::2]; OPS.scale_add(t, t, 1.0); "
             "OPS.scale_add(torch.randn(1, 3).expand(4, 3), torch.randn(4, 3), 1.0); "
             "OPS.scale_add(torch.tensor(1.0), torch.tensor(2.0), 1.0)")
FIX_DATA = frozenset({"baseline", "dtype", "layout", "size", "aliasing"})  # the matrix's data cases
# (the example's shape, a): every data case of the float32 contract matrix is run for each
FIX_VISIBLE = (((3, 4), 1.5), ((8,), -2.0))


def _example(shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(sum(shape))
    return torch.randn(*shape, generator=g), torch.randn(*shape, generator=g)


def _close(c: Check, got: torch.Tensor, expected: torch.Tensor, what: str, secret: bool, hint: Sequence[str]) -> None:
    """`got` matches `expected` in dtype and shape, and in values within float32's tolerance. A visible mismatch names
    how many values differ and the first (index, both values); a hidden one says which property is wrong only."""
    c.that(got.dtype == expected.dtype, f"{what}: the result's dtype is {str(got.dtype).replace('torch.', '')}"
           + ("" if secret else f", expected {str(expected.dtype).replace('torch.', '')}"), hint)
    c.that(tuple(got.shape) == tuple(expected.shape), f"{what}: the result's shape is not right" if secret else
           f"{what}: the result has shape {list(got.shape)}, expected {list(expected.shape)}", hint)
    c.that(got.device == expected.device, f"{what}: the result is on {got.device}, expected the inputs' device", hint)
    if not got.numel():
        return
    with clean():
        far = ~torch.isclose(got.detach(), expected.detach(), rtol=_RTOL, atol=_ATOL)
        count = int(far.sum())
        if count and not secret:
            first = tuple(int(i) for i in far.nonzero()[0])
            e, g = float(expected[first]), float(got[first])
    if count and secret:
        c.fail(f"{what}: {count} of {got.numel()} values are not a * x + y", hint)
    if count:
        where = f" at index {list(first)}" if first else ""
        c.fail(f"{what}: {count} of {got.numel()} values differ from a * x + y; the first{where}: expected {e:.6g}, "
               f"got {g:.6g}", hint)


def fix_kernel(c: Check, source: Any, hidden: Iterable[tuple[tuple[int, ...], float]] | None = None) -> None:
    """`SCALE_ADD_SOURCE`: `scale_add(x, y, a)` returns a new float32 tensor a * x + y for every data case of the
    float32 contract matrix (layouts, sizes, aliasing), reading the inputs through their strides: it leaves them alone,
    refuses float64, and runs no aten op but allocation (no copy, no arithmetic): on every call (profiled) and in its
    compiled code (imported symbols). A case is (the example's shape, a); hidden ones are numbered."""
    secret = hidden is not None
    report = c.build("scale_add", source, register={"scale_add": "scale_add(Tensor x, Tensor y, float a) -> Tensor"},
                     hint=FIX_HINTS, probe=None if secret else FIX_PROBE)
    _only_allowed_calls(c, "scale_add", report, FIX_ALLOWED, FIX_RULE, FIX_HINTS)
    op, event = c.ops.scale_add, f"{c.ops.name}::scale_add"
    for label, (shape, a) in named(hidden, FIX_VISIBLE, lambda case: f"{case[0]} inputs, a = {case[1]}"):
        a = float(a)
        for case in contract_cases(_example(tuple(shape)), dtypes=(_F32,)):
            if case.group not in FIX_DATA:
                continue
            x, y = case.make()
            what = f"scale_add on {label}, case {case.name!r}"
            x0, y0 = x.clone(), y.clone()
            with clean():
                expected = a * x0 + y0
            got, ran = _recorded_call(c, op, event, (x, y, a), what, secret, FIX_HINTS)
            c.that(ran <= FIX_ALLOWED, f"{what} ran {', '.join(sorted(ran - FIX_ALLOWED))}: {FIX_RULE}", FIX_HINTS)
            got = c.tensor(got, what)
            for name, now, before in (("x", x, x0), ("y", y, y0)):
                c.equal(now, before, what=f"{what}: its input {name} afterwards (it must stay unchanged)",
                        hint=FIX_HINTS)
            if got.numel():
                c.shares_storage(got, x, expected=False, what=f"{what}: the result and x", hint=FIX_HINTS)
                c.shares_storage(got, y, expected=False, what=f"{what}: the result and y", hint=FIX_HINTS)
            _close(c, got, expected, what, secret, FIX_HINTS)
    if not secret:
        f64 = torch.ones(3, dtype=torch.float64)
        c.rejects(op, f64, f64.clone(), 1.0, what="float64 inputs", hint=FIX_HINTS)


# --- 10-contract-tests --------------------------------------------------------------------------------------------

CONTRACT_HINTS = (
    "for each kind of input (a transposed view, a step-2 slice, a view at a storage offset, an expanded tensor, empty "
    "and 0-d tensors, the same tensor passed twice) compare op's result with 2.0 * x + y computed on copies of the "
    "inputs",
    "also check that op returned a new tensor (not one sharing an input's memory) and that its inputs still hold "
    "their values afterwards",
)
CONTRACT_RESULT_HINTS = ("return a plain list: the names of the tests that failed, [] when every test passed",)
# The ops under test, compiled under a file name of their own (an answer may call them, not the exercise module).
# Each is handed to the answer in one shell, `op(x, y)`, with the same code, name and no defaults or closure: the
# answer tells them apart only by running them.
CONTRACT_OPS = MappingProxyType({
    "correct": "def op(a, b):\n    return 2.0 * a + b\n",
    "ignores strides": '''
def _dense(t):  # reads memory in stored order, as a pointer loop does
    return torch.as_strided(t, t.shape, torch.empty(t.shape).stride(), t.storage_offset()) if t.numel() else t


def op(a, b):
    return 2.0 * _dense(a) + _dense(b)
''',
    "ignores the storage offset": "def op(a, b):\n    return 2.0 * torch.as_strided(a, a.shape, a.stride(), 0) + b\n",
    "writes into x": "def op(a, b):\n    return a.mul_(2.0).add_(b)\n",
    "wrong on empty input": "def op(a, b):\n    return (2.0 * a + b) if a.numel() else torch.zeros(1)\n",
    "returns float64": "def op(a, b):\n    return (2.0 * a + b).double()\n",
    "is wrong when x is y": '''
def op(a, b):
    if a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr():
        return 2.0 * a  # forgets y when it is the same tensor as x
    return 2.0 * a + b
''',
})
# the visible bugs; the correct op is run before, between and after them (an answer that counts its calls gains nothing)
CONTRACT_VISIBLE = ("ignores strides", "ignores the storage offset", "writes into x", "wrong on empty input")
_OPS_FILE = "<the ops 10-contract-tests hands to your tests>"
_SHELL = compile("def op(x, y):\n    return _impl(x, y)\n", _OPS_FILE, "exec").co_consts[0]


def _op(name: str) -> Callable[..., Any]:
    """A fresh `op(x, y)` for the named variant."""
    space: dict[str, Any] = {"torch": torch, "__builtins__": builtins}
    exec(compile(CONTRACT_OPS[name], _OPS_FILE, "exec"), space)
    shell = types.FunctionType(_SHELL, {"_impl": space["op"], "__builtins__": builtins}, "op")
    shell.__qualname__ = "op"
    return shell


def _found(c: Check, got: Any, what: str) -> list[Any]:
    """The answer's list of failed tests, as a plain list (a list of its own class could say anything)."""
    c.that(type(got) is list, f"{what} returned {type(got).__name__}, expected a list of the failed tests' names",
           CONTRACT_RESULT_HINTS)
    return list(got)


def _order(bugs: Sequence[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    """(label, variant): the correct op first, again after every second bug, and last."""
    yield "", "correct"
    for k, bug in enumerate(bugs):
        yield bug
        if k % 2 == 1:
            yield "", "correct"
    if len(bugs) % 2:
        yield "", "correct"


def contract_tests(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`my_contract_tests(op)`: [] for a correct `2.0 * x + y` (every time it is asked), and at least one failed test
    for each op with a planted bug, built without the contract lens. Hidden cases name `CONTRACT_OPS`."""
    mine = c.watch(answer, "my_contract_tests", escapes=True, forbid=[contract_lens, _contract],
                   hint=CONTRACT_HINTS)
    bugs = list(named(hidden, CONTRACT_VISIBLE, lambda name: f"an op that {name}"))
    for label, variant in _order(bugs):
        with errors_by_type(c, label or "my_contract_tests(a correct op)", hidden is not None):
            got = _found(c, mine(_op(variant)), "my_contract_tests(op)")
        if variant == "correct":
            shown = [n for n in got if type(n) is str][:5]
            c.that(not got, f"your tests fail a correct op: {shown!r}"
                   + (f" and {len(got) - len(shown)} more" if len(got) > len(shown) else ""), CONTRACT_HINTS)
        else:
            c.that(bool(got), f"your tests pass {label}" if hidden is None else
                   f"your tests pass the op of {label}, which has a planted bug", CONTRACT_HINTS)


# --- 10-predict-grid ----------------------------------------------------------------------------------------------

GRID_HINTS = (
    "go through the cases one by one: which inputs does a TORCH_CHECK refuse (dtype? contiguity?), and what happens "
    "when there is no data at all (meta and fake tensors)?",
    "an expanded tensor, a transposed view and a step-2 slice are all non-contiguous; a view at a storage offset, an "
    "empty tensor and a 0-d tensor can be contiguous; a catch-all kernel also runs for meta inputs",
)
STRICT_SOURCE = r"""
at::Tensor axpy_strict(const at::Tensor& x, const at::Tensor& y, double a) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "float32 only");
  TORCH_CHECK(x.is_contiguous() && y.is_contiguous(), "contiguous inputs only");
  TORCH_CHECK(x.sizes() == y.sizes(), "same shape only");
  at::Tensor out = at::empty_like(x);
  const float* px = x.const_data_ptr<float>();
  const float* py = y.const_data_ptr<float>();
  float* po = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) po[i] = static_cast<float>(a) * px[i] + py[i];
  return out;
}
"""
GRID_EXAMPLE = (3, 4)  # the visible example's shape; hidden cases are other shapes, drawn after it


def _grid(c: Check, shape: tuple[int, ...], generator: torch.Generator) -> set[str]:
    op = c.ops.axpy_strict
    ex = (torch.randn(*shape, generator=generator), torch.randn(*shape, generator=generator))
    report = contract_matrix(lambda a, b: op(a, b, 2.0), lambda a, b: 2.0 * a + b, ex)
    return {r.name for r in report.failures()}


def predict_grid(c: Check, answer: Any, hidden: Iterable[tuple[int, ...]] | None = None) -> None:
    """`PREDICT_STRICT_FAILS`: the names of the contract cases `STRICT_SOURCE` fails (secret); the grid is the
    kernel's, not the example's: hidden cases are other example shapes, with the same verdicts."""
    c.that(type(answer) in (set, frozenset) and all(type(n) is str for n in answer),
           "PREDICT_STRICT_FAILS: give a set of case names (strings)", GRID_HINTS)
    predicted = set(answer)
    c.build("axpy_strict", STRICT_SOURCE, register={"axpy_strict": "axpy_strict(Tensor x, Tensor y, float a) -> Tensor"})
    g = torch.Generator().manual_seed(10)
    actual = _grid(c, GRID_EXAMPLE, g)
    if hidden is None:
        c.equal(predicted, actual, what="the failing cases", hint=GRID_HINTS, secret=True)
        return
    for label, shape in named(hidden, (), str):
        actual = _grid(c, tuple(shape), g)
        missing, extra = len(actual - predicted), len(predicted - actual)
        c.that(not missing and not extra, f"the failing cases for {label}: {missing} missing from your set, {extra} "
               "in it that pass", GRID_HINTS)


# --- 10-promotion-case --------------------------------------------------------------------------------------------

PROMOTION_HINTS = (
    "every case of the matrix gives x and y one dtype; yours needs two different dtypes, on which torch promotes "
    "(the result gets the dtype torch.promote_types gives for the two)",
    "a case where x has the wider dtype catches an op that keeps y's dtype, and the reverse; one case catches every "
    "op that keeps or casts to one input's dtype only when the promoted dtype is neither input's",
    "ask torch.promote_types about pairs of floating dtypes: one pair of 16-bit dtypes gives a third dtype",
)
PROMOTION_RESULT_HINTS = ("return the inputs of your case as a tuple of two plain tensors (x, y)",)
# The correct op and the planted bugs: each passes every case of the standard matrix (one dtype for x and y).
PROMOTION_OPS = MappingProxyType({
    "correct": "def op(a, b):\n    return 2.0 * a + b\n",
    "gives the result x's dtype": "def op(a, b):\n    return (2.0 * a + b).to(a.dtype)\n",
    "gives the result y's dtype": "def op(a, b):\n    return (2.0 * a + b).to(b.dtype)\n",
    "casts y to x's dtype first": "def op(a, b):\n    return 2.0 * a + b.to(a.dtype)\n",
    "casts x to y's dtype first": "def op(a, b):\n    return 2.0 * a.to(b.dtype) + b\n",
})
PROMOTION_VISIBLE = ("gives the result x's dtype",)
PROMOTION_EXAMPLE, PROMOTION_HIDDEN_EXAMPLE = (3, 4), (2, 5)  # the example tensors' shape, visible and hidden
_PROMOTION_FILE = "<the ops 10-promotion-case runs your case on>"


def _promotion_op(name: str) -> Callable[..., Any]:
    space: dict[str, Any] = {"torch": torch, "__builtins__": builtins}
    exec(compile(PROMOTION_OPS[name], _PROMOTION_FILE, "exec"), space)
    return space["op"]


def _case_inputs(c: Check, got: Any, what: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The answer's case as two plain tensors (a subclass could report any dtype)."""
    c.that(type(got) in (tuple, list) and len(got) == 2 and all(type(t) is torch.Tensor for t in got),
           f"{what} returned {type(got).__name__}"
           + (f" of {len(got)}" if type(got) in (tuple, list) else "")
           + ", expected a tuple of two plain tensors (x, y)", PROMOTION_RESULT_HINTS)
    return got[0].detach(), got[1].detach()


def promotion_case(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`promotion_case(x, y)`: from the matrix's example tensors, the inputs of a case the standard matrix lacks. Run
    through the contract matrix's comparison, a correct `2.0 * x + y` passes it (every time it is asked) and the op
    with the planted bug fails it; hidden cases name other ops of `PROMOTION_OPS`, each with its planted bug."""
    secret = hidden is not None
    mine = c.watch(answer, "promotion_case", forbid=[contract_lens, _contract], hint=PROMOTION_HINTS)
    bugs = list(named(hidden, PROMOTION_VISIBLE, lambda name: f"an op that {name}"))
    shape = PROMOTION_HIDDEN_EXAMPLE if secret else PROMOTION_EXAMPLE
    for label, variant in _order(bugs):
        with errors_by_type(c, "promotion_case(x, y)", secret):
            x, y = _case_inputs(c, mine(*_example(shape)), "promotion_case(x, y)")
        case = _contract.Case("your case", "promotion", lambda x=x, y=y: (x.clone(), y.clone()))
        report = contract_matrix(_promotion_op(variant), lambda a, b: 2.0 * a + b, _example(shape), cases=[case],
                                 opcheck=False)
        (result,) = report.results
        c.that(not result.detail.startswith("skipped:"), "the reference 2.0 * x + y cannot run on your case"
               + ("" if secret else f" ({result.detail.removeprefix('skipped: the reference ')})")
               + ": give inputs torch can compute it on", PROMOTION_HINTS)
        if variant == "correct":
            c.that(result.passed, "your case fails a correct op" + ("" if secret else f": {result.detail}"),
                   PROMOTION_HINTS)
        else:
            c.that(not result.passed, f"your case passes {label}" if not secret else
                   f"your case passes the op of {label}, which has a planted bug", PROMOTION_HINTS)
