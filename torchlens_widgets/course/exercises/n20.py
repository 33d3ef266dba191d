"""Notebook 20 (the capstone): read the profile, a fused operator, one graph with no break, one all-reduce bucket on
two (or three) ranks, and the end-to-end gain.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). The stages that use the learner's operator register it afresh
on every run (`_fresh_op`), under a namespace of their own.
"""

from __future__ import annotations

import inspect
import os
import re
import textwrap
import time
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from ...lenses import capstone
from ...lenses import distributed_scenarios as scenarios
from ...lenses.distributed import RankFailed, RankTimeout, run_ranks
from ...lenses.fusion import vector_isa
from ...lenses.memory import profile_memory
from ...lenses.meters import SavedMeter
from ...lenses.profile import record_profile
from ...lenses.timing import one_thread, steady_heap
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["data_parallel", "end_to_end", "fused_op", "hot_spot", "no_break"]

# captured at import, before any answer cell runs
_clock_ns = time.perf_counter_ns
_getsource = inspect.getsource
_dedent = textwrap.dedent

HOT_HINTS = (
    "the range is the widest of the three forward spans; the operator and the calls are rows of the table (self "
    "time and calls columns); backward nodes are spans whose name starts with autograd::engine::evaluate_function",
    "count calls in the table, not shapes in the picture: backward calls aten::mul too (the derivative of each "
    "product); every parameter's AccumulateGrad is a backward node of its own",
)
HOT_KEYS = ("longest forward range", "operator with the most self time", "calls of aten::mul", "backward nodes")
# (d, h, rows): the blocks a hidden case profiles; on another block only the counts must agree
HOT_COUNTS = ("calls of aten::mul", "backward nodes")


def _profile_truth(d: int, h: int, n: int) -> dict[str, Any]:
    model = capstone.GatedBlock(d, h)
    x, y = capstone.batch(3, n, d)
    with one_thread():
        capstone.step(model, x, y)
        # five runs, each range and op at its least disturbed: on a busy machine three could still mislead
        traces = [record_profile(capstone.step, model, x, y, with_stack=False) for _ in range(5)]
    ranges = {r: min(t.by_name(r)[0].duration for t in traces) for r in capstone.RANGES}
    per_trace = [{a.name: a.self_time for a in t.key_averages("cpu_op")} for t in traces]
    self_time = {name: min(p.get(name, 0.0) for p in per_trace) for name in per_trace[0]}   # least disturbed run
    table = {a.name: a for a in traces[0].key_averages()}
    return {
        "longest forward range": max(ranges, key=ranges.__getitem__),
        "operator with the most self time": max(self_time, key=self_time.__getitem__),
        "calls of aten::mul": table["aten::mul"].count,
        "backward nodes": sum(e.name.startswith("autograd::engine::evaluate_function") for e in traces[0].events),
    }


def hot_spot(c: Check, answer: Any, hidden: Iterable[tuple[int, int, int]] | None = None) -> None:
    """`READ_PROFILE`: four facts read off the profile of one `capstone.step` (secret predictions); hidden: other
    blocks (d, h, rows), on which the two counts must agree."""
    c.that(type(answer) is dict, f"READ_PROFILE should be the dict above, filled in (a plain dict), got "
           f"{type(answer).__name__}", HOT_HINTS)
    mine = {k: dict.__getitem__(answer, k) for k in list(dict.keys(answer))}   # read once, before any truth exists
    c.equal(sorted(mine, key=repr), sorted(HOT_KEYS), what="the keys of READ_PROFILE", hint=HOT_HINTS)
    if hidden is None:
        truth = _profile_truth(16, 1024, 1024)
        for key in HOT_KEYS:
            c.equal(mine[key], truth[key], what=f"READ_PROFILE[{key!r}]", hint=HOT_HINTS, secret=True)
        return
    for number, (d, h, n) in enumerate(hidden, 1):
        truth = _profile_truth(d, h, n)
        for key in HOT_COUNTS:
            c.equal(mine[key], truth[key], what=f"hidden case {number}: READ_PROFILE[{key!r}]", hint=HOT_HINTS,
                    secret=True)


FUSED_HINTS = (
    "start from notebook 11: custom_op with the name you are given, a fake registered on it, and register_autograd "
    "with a setup_context that saves what backward needs; the failing property is named above",
    "the kernel: PyTorch's own GELU is one operation, and the gate can be multiplied into its result in place; the "
    "fake: an empty tensor laid out as that result (empty_like keeps the input's layout); backward: aten has a "
    "gelu_backward(grad, input), and the gradient for v is the GELU itself times grad",
    "save only u and v in setup_context; recompute anything else in backward",
)
STAGE2_HINTS = ("pass stage 2's check first: the later stages register your operator with define_fused_op",)
# Python numbers are not a fused kernel: reading elements out of the tensors hides the work from the op count
SCALAR_ESCAPES = (torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.__float__)


def _fresh_op(c: Check, define: Any, stage: str, hint: Any) -> tuple[Any, str]:
    """The learner's operator, registered by `define(name)` under a namespace no earlier run used: (op, name)."""
    c.that(callable(define), "define_fused_op should be a function" if stage == "" else
           f"define_fused_op (stage 2) should be a function; {stage}", hint)
    ns = f"tlw_capstone_{os.getpid()}_{_clock_ns()}"
    name = f"{ns}::gelu_gate"
    try:
        define(name)
    except NotImplementedError:
        raise
    except Exception as exc:
        c.fail(f"define_fused_op({name!r}) raised {type(exc).__name__}: {exc}" if stage == "" else
               f"define_fused_op (stage 2) raised {type(exc).__name__}: {exc}", hint)
    op: Any = getattr(getattr(torch.ops, ns), "gelu_gate", None)
    c.that(op is not None, "define_fused_op(name) did not register an operator called 'gelu_gate' in the namespace "
           "it was given: pass `name` to torch.library.custom_op" if stage == "" else
           "define_fused_op (stage 2) did not register its operator under the name it was given; " + stage, hint)
    return op.default, name


def _inputs(kind: str, seed: int, shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(*shape, generator=g, dtype=dtype), torch.randn(*shape, generator=g, dtype=dtype)
    if kind == "transposed":
        return a.t(), b.t()
    if kind == "sliced":
        return a[:, ::2], b[:, ::2]
    return a, b


# (layout, seed, shape, dtype name) of the operator's value / gradient / opcheck cases
FUSED_CASES = (("contiguous", 1, (6, 5), "float32"), ("transposed", 2, (6, 5), "float32"))
FUSED_SIZES = ((256, 256),)   # rows x cols of the fused-kernel and saved-bytes measurements
_DTYPES = MappingProxyType({"float32": torch.float32, "float64": torch.float64})


def _differs(got: Any, want: torch.Tensor, rel_tol: float) -> str | None:
    """Which property of `got` differs from `want` (type, dtype, shape or values), without either's content."""
    from ..checks import strict_mismatch  # (the checks import this module)

    if type(got) is not torch.Tensor:
        return f"is {type(got).__name__}, not a plain tensor"
    if got.dtype != want.dtype:
        return "has the wrong dtype"
    if tuple(got.shape) != tuple(want.shape):
        return "has the wrong shape"
    return strict_mismatch(got, want, "", rel_tol) and "has the wrong values"


def _compare(c: Check, got: Any, want: Any, label: str, what: str, rel_tol: float, hidden: bool) -> None:
    if not hidden:
        c.equal(got, want, rel_tol=rel_tol, what=f"{what} on {label}", hint=FUSED_HINTS)
        return
    for k, (g, w) in enumerate(zip(got, want) if isinstance(want, tuple) else [(got, want)]):
        wrong = _differs(g, w, rel_tol)
        part = f" ({'u' if k == 0 else 'v'})" if isinstance(want, tuple) else ""
        c.that(wrong is None, f"{label}: {what}{part} {wrong}", FUSED_HINTS)


def _op_case(c: Check, op: Any, label: str, case: tuple[Any, ...], hidden: bool) -> None:
    kind, seed, shape, dtype_name = case
    dtype = _DTYPES[dtype_name]
    u, v = _inputs(kind, seed, tuple(shape), dtype)
    _compare(c, op(u, v), capstone.gelu_gate(u, v), label, "gelu_gate", 1e-5, hidden)
    ug, vg = u.detach().clone().requires_grad_(), v.detach().clone().requires_grad_()
    ur, vr = u.detach().clone().requires_grad_(), v.detach().clone().requires_grad_()
    grad = torch.randn(tuple(u.shape), generator=torch.Generator().manual_seed(seed + 1), dtype=dtype)
    op(ug, vg).backward(grad)
    capstone.gelu_gate(ur, vr).backward(grad)
    if not hidden:
        c.equal((ug.grad, vg.grad), (ur.grad, vr.grad), rel_tol=1e-4, what=f"the gradients (u, v) on {label}",
                hint=FUSED_HINTS)
    else:
        _compare(c, (ug.grad, vg.grad), (ur.grad, vr.grad), label, "the gradient", 1e-4, hidden)
    verdicts = torch.library.opcheck(op, (u.detach().requires_grad_(), v.detach().requires_grad_()),
                                     raise_exception=False)
    bad = {k: val for k, val in verdicts.items() if val != "SUCCESS"}
    if hidden:   # torch's own text names the case's shapes and dtypes
        c.that(not bad, f"opcheck on {label}: {', '.join(bad)} failed", FUSED_HINTS)
    c.that(not bad, f"opcheck on {label}: " + "; ".join(f"{k}: {str(val).splitlines()[0][:220]}"
                                                        for k, val in bad.items()), FUSED_HINTS)


def _stashed_bytes(node: Any, saved: set[Any]) -> int:
    """Bytes of the tensors (and Python numbers) kept as attributes of an autograd node, a level deep, leaving out
    storages already counted as saved."""
    seen: set[int] = set()
    total = 0
    values = list(vars(node).values()) if node is not None and hasattr(node, "__dict__") else []
    for value in values + [x for v in values if isinstance(v, (list, tuple)) for x in v]:
        if isinstance(value, torch.Tensor):
            ptr = value.untyped_storage().data_ptr()
            if ptr not in saved and ptr not in seen:
                seen.add(ptr)
                total += value.untyped_storage().nbytes()
        elif isinstance(value, (list, tuple)):
            total += 8 * sum(isinstance(x, (int, float)) for x in value)
    return total


def _fused(c: Check, op: Any, label: str, rows: int, cols: int, hidden: bool) -> None:
    u, v = _inputs("contiguous", 7, (rows, cols), torch.float32)
    forward = c.watch(op, "your operator's forward", forbid=SCALAR_ESCAPES, hint=FUSED_HINTS)
    _compare(c, forward(u, v), capstone.gelu_gate(u, v), label, "gelu_gate", 1e-5, hidden)
    ran = [o for o in c.ops_inside(op, u, v) if o.startswith("aten::")]
    c.that(len(ran) <= 3, f"the forward of your operator ran {len(ran)} aten operations on {label} "
           f"({', '.join(ran[:12])}{', ...' if len(ran) > 12 else ''}): a fused kernel runs at most 3", FUSED_HINTS)
    ug, vg = u.clone().requires_grad_(), v.clone().requires_grad_()
    with SavedMeter(inputs=[ug, vg]) as meter:
        out = op(ug, vg)
    # what backward keeps outside save_for_backward (attributes set on ctx) counts against the budget too
    stashed = _stashed_bytes(out.grad_fn, {p["storage"] for p in meter.packs})
    kept = meter.bytes() + stashed
    extra = f", and {stashed} bytes more as attributes of ctx" if stashed else ""
    if hidden:
        c.that(kept <= u.nbytes + v.nbytes, f"autograd saved {meter.storages} tensors for backward on {label}{extra}, "
               "more bytes than the two inputs hold", FUSED_HINTS)
    c.that(kept <= u.nbytes + v.nbytes, f"autograd saved {meter.storages} tensors ({meter.bytes()} bytes) for "
           f"backward on {label}{extra}; the budget is the two inputs, {u.nbytes + v.nbytes} bytes", FUSED_HINTS)
    # twice before one backward: state kept in a closure instead of on ctx belongs to the later call
    first, second = _inputs("transposed", 8, (cols, rows), torch.float32), _inputs("contiguous", 9, (rows, cols),
                                                                                   torch.float32)
    mine = [t.detach().clone().requires_grad_() for t in first]
    theirs = [t.detach().clone().requires_grad_() for t in first]
    later = [t.detach().clone().requires_grad_() for t in second]
    out_first = op(*mine)
    op(*later)
    out_first.sum().backward()
    capstone.gelu_gate(*theirs).sum().backward()
    _compare(c, (mine[0].grad, mine[1].grad), (theirs[0].grad, theirs[1].grad), label,
             "the gradient of a first call, backward run after a second call,", 1e-4, True)


def fused_op(c: Check, define: Any, hidden: Iterable[tuple[Any, ...]] | None = None) -> None:
    """`define_fused_op(name)`: registers GELU(u) * v as a custom operator with a fake and an autograd formula; its
    values, gradients and opcheck on each case, at most 3 aten ops forward and no more than its inputs saved.
    Hidden cases: (layout, seed, shape, dtype name) for values, or (rows, cols) for the fused measurements."""
    op, _ = _fresh_op(c, define, "", FUSED_HINTS)
    visible = [*FUSED_CASES, *FUSED_SIZES]

    def describe(case: tuple[Any, ...]) -> str:
        if len(case) == 2:
            return f"a {case[0]}x{case[1]} input"
        return f"{case[0]} {tuple(case[2])} {case[3]} inputs"

    for label, case in named(hidden, visible, describe):
        if len(case) == 2:
            _fused(c, op, label, *case, hidden is not None)
        else:
            _op_case(c, op, label, case, hidden is not None)


BREAK_HINTS = (
    "a graph break comes from something Dynamo cannot put in a graph: a tensor turned into a Python number or "
    "printed, an `if` on a tensor's value, a call Dynamo cannot trace; the operator itself compiles only if it has "
    "a fake (stage 2)",
    "write the loss as one expression of tensor operations: the two projections, your operator on them, the down "
    "projection plus the residual, and the mean squared error; return the tensor",
)
# (d, h, rows, seed): the blocks and batches fused_loss is compiled for
BREAK_CASES = ((16, 64, 32, 0),)


def no_break(c: Check, answer: Any, define: Any, hidden: Iterable[tuple[int, int, int, int]] | None = None) -> None:
    """`fused_loss(model, op, x, y)`: one graph, no break, the learner's operator in it and not the chain's erf, and
    the original loss in eager mode and compiled (hidden: more (d, h, rows, seed) blocks)."""
    from ...lenses.graph_breaks import graph_breaks  # imports torch._dynamo (seconds): only where a check compiles

    c.that(callable(answer), "fused_loss should be a function", BREAK_HINTS)
    op, name = _fresh_op(c, define, "pass stage 2's check first", BREAK_HINTS)
    mine = c.watch(answer, "fused_loss")
    for label, (d, h, n, seed) in named(hidden, BREAK_CASES, lambda k: f"a {k[0]} -> {k[1]} -> {k[0]} block on "
                                                                          f"{k[2]} rows"):
        model = capstone.GatedBlock(d, h, seed=seed)
        x, y = capstone.batch(seed, n, d)

        def loss_of(a: torch.Tensor, b: torch.Tensor, model: Any = model) -> Any:
            return answer(model, op, a, b)

        report = graph_breaks(loss_of, x, y)
        error = report.error if hidden is None else str(report.error).split(":")[0]   # Dynamo's text names sizes
        c.that(report.error is None, f"compiling fused_loss ({label}) failed: {error}", BREAK_HINTS)
        c.equal((report.graphs, report.graph_breaks), (1, 0), what=f"(graphs, graph breaks) of fused_loss ({label})",
                hint=BREAK_HINTS)
        c.that(report.calls(name), f"the compiled graph does not call your operator ({label}); it calls "
               f"{', '.join(report.ops[0]) if report.ops else 'nothing'}", BREAK_HINTS)
        c.that(not any(o in ("erf", "aten::erf") for g in report.ops for o in g),
               f"the compiled graph still runs the chain's erf ({label}): use the operator instead", BREAK_HINTS)
        with torch.no_grad():
            want = F.mse_loss(capstone.GatedBlock(d, h, seed=seed)(x), y)
        c.equal(c.tensor(mine(model, op, x, y), f"fused_loss ({label})").detach(), want, rel_tol=1e-5,
                what=f"fused_loss ({label})", hint=BREAK_HINTS)
        # what Dynamo runs, not only what eager runs (torch.compiler.is_compiling() could tell them apart)
        torch._dynamo.reset()
        try:
            compiled = torch.compile(loss_of, backend="eager", fullgraph=True)(x, y)
        finally:
            torch._dynamo.reset()
        c.equal(c.tensor(compiled, f"compiled fused_loss ({label})").detach(), want, rel_tol=1e-5,
                what=f"compiled fused_loss ({label})", hint=BREAK_HINTS)


DP_HINTS = (
    "after your function each gradient must be the average over the ranks: one all_reduce sums one tensor over the "
    "ranks, so every gradient has to be in that one tensor",
    "flatten every parameter's gradient and concatenate them into one tensor, all_reduce it once, divide by the world "
    "size, then copy each slice back into the .grad it came from (the concatenation is a copy)",
)
# ((d, h), rows per rank, iterations, world size)
DP_CASES = (((8, 32), 8, 2, 2),)


def _source_of(c: Check, fn: Any, what: str) -> str:
    try:
        return str(_dedent(_getsource(fn)))
    except (OSError, TypeError):
        c.fail(f"{what}: the check could not read its source; define it with `def` in a cell of this notebook",
               DP_HINTS)
        raise


def _dp_case(c: Check, source: str, label: str, case: tuple[Any, ...], hidden: bool) -> None:
    sizes, batch, iterations, world = case
    try:
        trace = run_ranks(scenarios.capstone_dp_step, world_size=world, timeout=60,
                          kwargs={"source": source, "sizes": list(sizes), "batch": batch, "iterations": iterations})
    except RankFailed as e:
        lines = re.findall(r'File "<your answer>", line (\d+)', e.traceback)
        said = f"a rank raised {e.exc_type}" if hidden else f"rank {e.rank} raised {e.exc_type}: {e.message}"
        c.fail(f"{label}: {said}" + (f" (line {lines[-1]} of your source)" if lines else ""), DP_HINTS)
        raise
    except RankTimeout as e:
        c.fail(f"{label}: " + ("the ranks did not finish in time" if hidden else str(e)), DP_HINTS)
        raise
    for r in trace.ranks:
        res = r.result
        c.that(res["direct_calls"] == 0, f"{label}: your code called torch.distributed's collectives itself "
               f"({res['direct_calls']} times); use the all_reduce you were given", DP_HINTS)
        c.that(res["op_calls"] == iterations, f"{label}: the block did not call your operator once per iteration"
               if hidden else f"{label}: the block called your operator {res['op_calls']} times in {iterations} "
               "iterations", DP_HINTS)
        for i, it in enumerate(res["iterations"]):
            where = label if hidden else f"{label}, rank {r.rank}, iteration {i + 1}"
            c.that(not it["missing"], f"{where}: no gradient for {', '.join(it['missing'])}", DP_HINTS)
            c.that(it["calls"] > 0, f"{where}: all_reduce never ran, so the ranks exchanged nothing; their batches "
                   "differ, so do their local gradients", DP_HINTS)
            c.that(it["calls"] == 1, f"{where}: all_reduce ran {it['calls']} times; the aim is one bucket, one call "
                   "for all the gradients", DP_HINTS)
            c.that(it["bytes"] == res["param_bytes"], f"{where}: all_reduce carried {it['bytes'] / res['param_bytes']:.2g}"
                   " times the bytes the gradients hold; each should travel once" if hidden else
                   f"{where}: all_reduce carried {it['bytes']} bytes; the gradients hold {res['param_bytes']} bytes, "
                   "each should travel once", DP_HINTS)
            c.that(it["max_diff"] <= 1e-5 * res["max_grad"], f"{where}: gradients differ from DDP's; yours are "
                   f"{it['ratio']:.3f} times DDP's in sum of |grad|" if hidden else f"{where}: gradients differ from "
                   f"DDP's by up to {it['max_diff']:.3g}; yours are {it['ratio']:.3f} times DDP's in sum of |grad|",
                   DP_HINTS)


def _no_reduce(tensor: Any) -> None:
    """The all_reduce of a world of one rank: nothing to add."""


def data_parallel(c: Check, answer: Any, define: Any,
                  hidden: Iterable[tuple[Any, ...]] | None = None) -> None:
    """`average_gradients(model, all_reduce, world_size)`: every gradient averaged over the ranks with one all_reduce
    of all of them, on real ranks running the learner's operator (hidden: ((d, h), rows, iterations, world size))."""
    c.that(callable(answer), "average_gradients should be a function", DP_HINTS)
    mine = c.watch(answer, "average_gradients")
    local = capstone.GatedBlock(4, 6)
    F.mse_loss(local(torch.ones(2, 4)), torch.zeros(2, 4)).backward()
    mine(local, _no_reduce, 1)   # once here first: an error surfaces quickly
    source = _source_of(c, define, "define_fused_op") + "\n\n" + _source_of(c, answer, "average_gradients")
    for label, case in named(hidden, DP_CASES, lambda k: f"a block {k[0][0]} -> {k[0][1]} -> {k[0][0]}, {k[1]} rows "
                                                         f"per rank"):
        _dp_case(c, source, label, case, hidden is not None)


E2E_HINTS = (
    "the step must do all of capstone.step's work (clear the gradients, loss, backward, return the loss) with your "
    "operator, inside a compiled function; the failing property is named above",
    "compile fused_loss once with torch.compile, outside the step function, and call the compiled function in every "
    "step; zero the gradients with set_to_none=True and run backward on the loss it returns",
)
E2E_TARGET, E2E_BUDGET = 1.25, 0.6
E2E_TIMED_BATCHES = 32   # distinct batches for the timed steps: each timed call gets one it has not seen


def _same_as_original(c: Check, loss: Any, model: Any, reference: Any, want: Any, label: str) -> None:
    def what(thing: str) -> str:
        return f"{label}: {thing}" if label.startswith("hidden case") else f"{thing} {label}"

    c.that(isinstance(loss, torch.Tensor), f"step(x, y) returned {type(loss).__name__}, not the loss", E2E_HINTS)
    c.equal(c.tensor(loss, "the loss").detach(), want.detach(), rel_tol=1e-4, abs_tol=1e-7, what=what("the loss"),
            hint=E2E_HINTS)
    for (n, p), q in zip(model.named_parameters(), reference.parameters()):
        c.that(p.grad is not None, f"{label}: {n} has no gradient after your step", E2E_HINTS)
        c.equal(p.grad, q.grad, rel_tol=1e-4, abs_tol=1e-6, what=what(f"the gradient of {n}"), hint=E2E_HINTS)


def end_to_end(c: Check, answer: Any, define: Any, hidden: Iterable[int] | None = None) -> dict[str, float]:
    """`make_fast_step(model, op)`: a compiled step with the learner's operator that gives the original loss and
    gradients, is at least E2E_TARGET x as fast as `capstone.step` and peaks at E2E_BUDGET of its memory. Every timed
    step runs on a batch of its own and its loss is compared with the original step's on that batch. Hidden: more
    batch seeds to check after the timing. Returns the ratio and the memory fraction measured."""
    c.that(callable(answer), "make_fast_step should be a function", E2E_HINTS)
    if hidden is not None:
        return _end_to_end_again(c, answer, define, hidden)
    steady_heap()
    with one_thread():
        torch._dynamo.reset()   # earlier runs of this check must not use up Dynamo's recompile limit
        op, name = _fresh_op(c, define, "pass stage 2's check first", E2E_HINTS)
        model, reference = capstone.GatedBlock(16, 1024), capstone.GatedBlock(16, 1024)
        fast = c.watch(answer, "make_fast_step")(model, op)
        c.that(callable(fast), f"make_fast_step should return a function, got {type(fast).__name__}", E2E_HINTS)
        x, y = capstone.batch(1, 1024, 16)
        _same_as_original(c, fast(x, y), model, reference, capstone.step(reference, x, y), "after one step")
        x, y = capstone.batch(2, 1024, 16)
        names = {e.name for e in record_profile(fast, x, y, with_stack=False).events}
        c.that(any(n.startswith("Torch-Compiled Region") for n in names), "one profiled step ran no compiled region: "
               "compile the loss with torch.compile", E2E_HINTS)
        c.that(name in names, "one profiled step never called your operator: the fast step must use `op`", E2E_HINTS)
        ratio = _timed(c, fast, reference)
        scalar = "" if vector_isa().bits else (" (Inductor found no vector instruction set on this CPU and writes "
                                               "scalar loops: the target needs a CPU with AVX2, AVX-512 or NEON)")
        c.that(ratio >= E2E_TARGET, f"your step is {ratio:.2f}x as fast as the original; the target is "
               f"{E2E_TARGET}x{scalar}", E2E_HINTS)
        x, y = capstone.batch(4, 1024, 16)
        peak = profile_memory(fast, x, y).timeline().peak_allocated
        eager = profile_memory(capstone.step, reference, x, y).timeline().peak_allocated
        c.that(peak <= E2E_BUDGET * eager, f"your step's peak was {peak / 2**20:.1f} MiB, {peak / eager:.0%} of the "
               f"original's {eager / 2**20:.1f} MiB; the budget is {E2E_BUDGET:.0%}", E2E_HINTS)
    return {"ratio": ratio, "memory": peak / eager}


def _timed(c: Check, fast: Callable[..., Any], reference: Any) -> float:
    """The best of up to three c.faster runs, each call of either step on a batch of its own (a step that remembers
    its inputs gains nothing); afterwards each timed loss must equal the original step's on the same batch."""
    batches = [capstone.batch(100 + k, 1024, 16) for k in range(E2E_TIMED_BATCHES)]
    got: list[Any] = []
    want: list[Any] = []

    def fast_call() -> None:
        got.append(fast(*batches[len(got) % len(batches)]))

    def slow_call() -> None:
        want.append(capstone.step(reference, *batches[len(want) % len(batches)]))

    ratio = 0.0
    for _ in range(3):   # two more tries if a busy spell hides the gain
        ratio = max(ratio, c.faster(fast_call, slow_call, at_least=0.0, what="your step", repeat=7))
        for k, (mine, theirs) in enumerate(zip(got, want)):
            c.that(isinstance(mine, torch.Tensor), f"timed step {k + 1} returned {type(mine).__name__}, not the loss",
                   E2E_HINTS)
            c.equal(c.tensor(mine, "the loss").detach(), theirs.detach(), rel_tol=1e-4, abs_tol=1e-7,
                    what=f"the loss of timed step {k + 1} (each on a batch of its own)", hint=E2E_HINTS)
        if ratio >= E2E_TARGET:
            break
        got.clear()
        want.clear()
    return ratio


def _end_to_end_again(c: Check, answer: Any, define: Any, hidden: Iterable[int]) -> dict[str, float]:
    """The hidden cases: a fresh step, then one step on the batch of each seed in turn, each compared with the
    original step on the same batches (a step that keeps the gradients, or replays the first, fails the second)."""
    with one_thread():
        torch._dynamo.reset()
        op, _ = _fresh_op(c, define, "pass stage 2's check first", E2E_HINTS)
        model, reference = capstone.GatedBlock(16, 1024), capstone.GatedBlock(16, 1024)
        fast = c.watch(answer, "make_fast_step")(model, op)
        c.that(callable(fast), f"make_fast_step should return a function, got {type(fast).__name__}", E2E_HINTS)
        for label, seed in named(list(hidden), (), str):
            x, y = capstone.batch(seed, 1024, 16)
            _same_as_original(c, fast(x, y), model, reference, capstone.step(reference, x, y), label)
    return {}
