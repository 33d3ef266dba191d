"""Notebook 01 (the runtime): which aten ops reach the dispatcher, and where a kernel overtakes the overhead.

Each function grades one exercise inside `with check(...) as c:`. Called without `hidden` it runs the visible
cases; the source notebook's hidden block calls it again with `hidden=[...]`, extra cases as data, which a
failure names by number only and never with their expected value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from ...lenses.dispatch import dispatch_trace
from ...lenses.meters import OpCounter
from ._cases import named as _named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["count_aten_ops", "crossover", "layer_counts", "line", "linear_ops"]

LINEAR_OPS_HINTS = (
    "record only the last line of the step, with a TorchDispatchMode entered after the layer and the input "
    "exist, and name each op by its overload packet (str(func.overloadpacket), e.g. 'aten.addmm')",
    "the backward pass runs inside the mode too: the engine seeds the gradient, runs sum's backward, computes "
    "the weight (and bias) gradients, and AccumulateGrad hands each gradient over to .grad",
    "without a bias F.linear multiplies with mm instead of the fused addmm; the bias gradient is a sum over "
    "the batch and a view; each AccumulateGrad runs a detach",
)


def _linear_ops(bias: bool, input_grad: bool) -> set[str]:
    layer = torch.nn.Linear(4, 3, bias=bias)
    inp = torch.randn(2, 4, requires_grad=input_grad)
    with OpCounter() as rec:
        layer(inp).sum().backward()
    return {"aten." + name for name in rec.ops}


def linear_ops(c: Check, answer: Any, hidden: Iterable[tuple[bool, bool]] | None = None) -> None:
    """`linear_ops(bias, input_grad)`: the set of aten packets one `nn.Linear` step sends to the dispatcher."""
    mine = c.watch(answer, "linear_ops")
    for what, (bias, input_grad) in _named(hidden, ((True, False),), lambda case: "linear_ops(bias={}, input_grad={})"
                                           .format(*case)):
        c.equal(mine(bias, input_grad), _linear_ops(bias, input_grad), what=what, hint=LINEAR_OPS_HINTS, secret=True)


CROSSOVER_HINTS = (
    "the straight line goes through two points only: the one at the smallest size and the one at the largest "
    "size, whatever order the measurements come in",
    "the slope of that line is per_element and its value at n = 0 is the overhead; the answer is the first "
    "whole n at which per_element * n reaches the overhead: round up, never below 1, and return an int",
    "a slope that is zero or negative means the kernel never overtakes the overhead: return None",
)


def _crossover(sizes: Sequence[float], seconds: Sequence[float]) -> int | None:
    (n0, t0), (n1, t1) = min(zip(sizes, seconds)), max(zip(sizes, seconds))
    per_element = (t1 - t0) / (n1 - n0)
    if per_element <= 0:
        return None
    return max(1, math.ceil((t0 - per_element * n0) / per_element))


def line(overhead: float, per_element: float, sizes: Sequence[int]) -> tuple[Sequence[int], Sequence[float]]:
    """A synthetic case: the per-call times `overhead + per_element * n` at `sizes` (same sequence type)."""
    seconds = [overhead + per_element * n for n in sizes]
    return sizes, tuple(seconds) if isinstance(sizes, tuple) else seconds


# The visible case: per-call times of a 2 µs overhead and 0.3 ns per element, at sizes 1 to 10^7.
CROSSOVER_CASES = (line(2e-6, 3e-10, tuple(10**k for k in range(8))),)


def _copy(values: Sequence[float]) -> Sequence[float]:
    return tuple(values) if isinstance(values, tuple) else list(values)


def crossover(c: Check, answer: Any, hidden: Iterable[tuple[Sequence[float], Sequence[float]]] | None = None) -> None:
    """`crossover(sizes, seconds)`: the first size at which a line through the smallest and largest size's
    times has per-element time reach the overhead (None when it never does). Plain arithmetic: no tensor op."""
    mine = c.watch(answer, "crossover", allow_aten=set())
    for what, (sizes, seconds) in _named(hidden, CROSSOVER_CASES, lambda case: "crossover (2 µs overhead, 0.3 ns "
                                         "per element, sizes 1 to 10^7)"):
        got = mine(_copy(sizes), _copy(seconds))  # a fresh copy: an answer may sort in place
        c.that(got is None or type(got) is int, f"{what}: return a Python int (or None), got {type(got).__name__}",
               CROSSOVER_HINTS)
        c.equal(got, _crossover(sizes, seconds), what=what, hint=CROSSOVER_HINTS, secret=hidden is not None)


PREDICT_HINTS = (
    "count one aten op per tensor operation, then look again at the two calls in the expression that are not "
    "exactly one op each (section 2 traced both)",
    "reshape of a transposed tensor cannot be a view, so it is more than one op; .float() on a float32 tensor "
    "is less than one",
    "the transpose, then two ops for the copying reshape, then mul, add, relu and sum; .float() adds none",
)
COUNT_HINTS = (
    "count every operator call that reaches a TorchDispatchMode while fn() runs, one per call",
    "keep only ops whose func.namespace is 'aten'; an op that runs twice counts twice; start from zero on every "
    "call of count_aten_ops",
    "Python-level calls are not operators: a call that emits no aten op (x.float() on float32) counts 0",
)
# What each workload runs, as source: compiled under a file name of its own, so an answer may call it.
WORKLOADS = MappingProxyType({
    "expression": "(x.t().reshape(-1) * 2 + 1).relu().float().sum()",
    "twice": "(x + 1) + (x + 1)",
    "free": "x.float().contiguous()",
    "forward and backward": "(x @ w).sum().backward()",
    "optimizer step": "opt.step()",
    "none": "None",
    "matmul": "x3 @ w",
    "float": "w.float()",
    "linear": "F.relu(F.linear(x3, w.T, b)).shape",
    "twice on w": "(w + 1) + (w + 1)",
})


def _workload(name: str, grade_id: str) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(1)
    x, x3, w = torch.randn(3, 4, generator=g), torch.randn(5, 2, 4, generator=g), torch.randn(4, 3, generator=g)
    model = torch.nn.Linear(4, 2)
    model(torch.randn(3, 4, generator=g)).sum().backward()
    names = {"torch": torch, "F": F, "x": x, "x3": x3, "b": torch.randn(3, generator=g),
             "w": torch.randn(4, 2, requires_grad=True) if name == "forward and backward" else w,
             "opt": torch.optim.SGD(model.parameters(), lr=0.1)}
    return eval(compile("lambda: " + WORKLOADS[name], f"<{grade_id} workload: {name}>", "eval"), names)


def _aten_count(fn: Callable[[], Any]) -> int:
    with OpCounter() as rec:
        fn()
    return sum(rec.ops.values())


def count_aten_ops(c: Check, answer: Any, predicted: Any, hidden: Sequence[str] | None = None) -> None:
    """`count_aten_ops(fn)`: the aten op calls one `fn()` sends to the dispatcher; `predicted`: that count for
    the expression, predicted before running it. Workloads are named by their key in WORKLOADS."""
    if hidden is None:
        c.equal(predicted, _aten_count(_workload("expression", "01-op-count")), what="PREDICTED_OPS",
                hint=PREDICT_HINTS, secret=True)
    mine = c.watch(answer, "count_aten_ops")
    for what, name in _named(hidden, ("expression", "twice", "free"), lambda name: f"count_aten_ops({WORKLOADS[name]})"):
        c.equal(mine(_workload(name, "01-op-count")), _aten_count(_workload(name, "01-op-count")), what=what,
                hint=COUNT_HINTS, secret=hidden is not None)


LAYER_HINTS = (
    "enter a TorchFunctionMode and a TorchDispatchMode around one fn() call and count what each one receives",
    "the first number counts every call the TorchFunctionMode receives (functions, methods, attribute reads; "
    "it is off inside its own handler, so nested calls are not counted); the second counts only ops in the "
    "aten namespace, one per call",
    "answer (python_calls, aten_ops) in that order, fresh counts for every call of layer_counts",
)


def _layers(fn: Callable[[], Any]) -> tuple[int, int]:
    with dispatch_trace(modules=False) as tr:
        fn()
    return len(tr.calls), sum(1 for op in tr.ops if op.packet.startswith("aten."))


def layer_counts(c: Check, answer: Any, hidden: Sequence[str] | None = None) -> None:
    """`layer_counts(fn)`: (calls a TorchFunctionMode sees, aten ops a TorchDispatchMode sees) for one `fn()`."""
    mine = c.watch(answer, "layer_counts")
    for what, name in _named(hidden, ("matmul",), lambda name: f"layer_counts({WORKLOADS[name]})"):
        c.equal(mine(_workload(name, "01-layer-counts")), _layers(_workload(name, "01-layer-counts")), what=what,
                hint=LAYER_HINTS, secret=hidden is not None)
