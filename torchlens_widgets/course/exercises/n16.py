"""Notebook 16 (torch.compile): a function with no graph break, inputs prepared so that one compile serves every
batch size, the guard a change of input makes fail, predicted, and a Dynamo backend that counts graphs and ops.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). Every compile a check makes starts from a fresh Dynamo: its
caches reset, its settings (and AOT autograd's and symbolic shapes') as torch ships them, the default stance,
so nothing an answer cell switched for every later compile decides the result. What the compiled code returns
is checked, not only what the function returns eagerly, and every graph node must be one of torch's own ops.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import operator
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch

from ...lenses.compile_trace import compile_trace
from ._cases import named


def _checks() -> Any:
    """The checks module, looked up when a check runs: importing it here would make a cycle (it loads this package)."""
    from .. import checks

    return checks


if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["count_backend", "no_breaks", "no_recompiles", "predict_guard"]

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_dict_items = dict.items  # captured at import: the builtin's own method, whatever an answer's class overrides
# settings modules a compile reads (each loaded on first use: importing torch._dynamo costs seconds)
_CONFIGS = ("torch._dynamo.config", "torch._functorch.config", "torch.fx.experimental._config")
_PLAIN_FUNCTIONS = frozenset(id(v) for m in (operator, builtins) for v in vars(m).values() if callable(v))

# The check's own workloads, compiled per call under a file name of their own: an answer may call nothing defined
# in this module, and the notebook's functions of the same text are the learner's to call.
WORKLOADS = '''
def report_and_center(x):  # the notebook's function, without its print
    m = x.mean().item()
    y = x - m
    if y.abs().max() > 3:
        y = y.clamp(-3, 3)
    return y * 2


def model(x):
    return (x - x.mean(dim=0)) / (x.std(dim=0) + 1e-5)


def scaled(x, scale, mode):
    y = x * scale
    return y.sum() if mode == "sum" else y.amax()
'''


def _workloads(exercise: str) -> dict[str, Any]:
    space: dict[str, Any] = {}
    exec(compile(WORKLOADS, f"<workloads of {exercise}>", "exec"), space)
    return space


def _as_shipped(entry: Any) -> Any:
    """A setting's value as torch ships it in this environment: an environment variable's, else the default."""
    from torch.utils._config_module import _UNSET_SENTINEL

    for value in (entry.env_value_force, entry.env_value_default):
        if value is not _UNSET_SENTINEL:
            return value
    return entry.default


def _differs(now: Any, shipped: Any) -> bool:
    if now is shipped:
        return False
    try:
        return not (type(now) is type(shipped) and bool(now == shipped))
    except Exception:  # a value that cannot compare: count it as changed
        return True


def _torch_own(fn: Any) -> bool:
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    return code is not None and code.co_filename.startswith(_TORCH_DIR)


@contextlib.contextmanager
def fresh_dynamo() -> Iterator[None]:
    """For the block: Dynamo's caches reset, every setting of Dynamo, AOT autograd and symbolic shapes as torch
    ships it (an answer may have set capture_scalar_outputs, assume_static_by_default, recompile_limit, ...), and
    the default stance (not force_eager or eager_on_recompile)."""
    import importlib

    dynamo = importlib.import_module("torch._dynamo")
    reset, stance = dynamo.reset, dynamo.set_stance
    if not (_torch_own(reset) and isinstance(stance, type) and _torch_own(vars(stance).get("__init__"))):
        raise RuntimeError("torch._dynamo.reset or set_stance was replaced in this kernel")
    reset()
    with contextlib.ExitStack() as stack:
        for name in _CONFIGS:
            try:
                config = importlib.import_module(name)
            except ImportError:  # pragma: no cover - another torch
                continue
            changed = {}
            for key, entry in list(config._config.items()):
                if entry.alias is not None or entry.deprecated or entry.hide:
                    continue
                shipped = _as_shipped(entry)
                if _differs(getattr(config, key), shipped):
                    try:
                        changed[key] = copy.deepcopy(shipped)
                    except Exception:  # pragma: no cover - a default that cannot be copied
                        changed[key] = shipped
            if changed:
                stack.enter_context(config.patch(changed))
        stack.enter_context(stance("default"))
        try:
            yield
        finally:
            reset()


def _torch_node(op: str, target: Any) -> bool:
    """A graph node that runs one of torch's own operations (or Python's operators), not an opaque function of
    the learner's: a custom op, a function allowed in the graph, a module."""
    if op == "call_method":
        return isinstance(target, str) and callable(getattr(torch.Tensor, target, None))
    if op != "call_function":
        return False
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return target.namespace in ("aten", "prims")
    if id(target) in _PLAIN_FUNCTIONS:
        return True
    if getattr(target, "__code__", None) is not None or hasattr(target, "__wrapped__"):
        import inspect

        return _torch_own(inspect.unwrap(target))
    module = getattr(target, "__module__", None)
    return type(target).__name__ == "builtin_function_or_method" and isinstance(module, str) and (
        module == "torch" or module.startswith("torch."))


def _compiled_runs(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> tuple[list[Any], list[Any], int]:
    """Compile `fn` with a backend that keeps each graph's nodes and counts each run of a compiled graph, then call
    it on each of `calls`: (the compiled results, [(op, target), ...] per graph, graph runs)."""
    import torch._dynamo

    graphs: list[Any] = []
    runs = [0]

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        graphs.append([(n.op, n.target) for n in gm.graph.nodes if n.op.startswith("call_")])
        forward = gm.forward

        def run(*args: Any) -> Any:
            runs[0] += 1
            return forward(*args)
        return run

    compiled = torch._dynamo.optimize(backend)(fn)
    results = [compiled(*args) for args in calls]
    return results, graphs, runs[0]


def _hidden_safe(c: Check, label: str, secret: bool, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)`; for a hidden case an error fails naming its type only (torch's message can hold the
    case's shape)."""
    if not secret:
        return fn(*args, **kwargs)
    try:
        return fn(*args, **kwargs)
    except _checks().CheckFailed:
        raise
    except Exception as exc:
        c.fail(f"{label}: raised {type(exc).__name__}")


def _same_values(c: Check, got: Any, expected: torch.Tensor, what: str, hint: Any, secret: bool) -> None:
    """c.equal within 1e-5; for a hidden case without the dtype, shape or size (the comparison would print them)."""
    if not secret:
        c.equal(got, expected, what=what, rel_tol=1e-5, hint=hint)
        return
    c.that(type(got) is torch.Tensor, f"{what} is not a plain tensor", hint)
    c.that(got.dtype == expected.dtype, f"{what} has the wrong dtype", hint)
    c.that(tuple(got.shape) == tuple(expected.shape), f"{what} has the wrong shape", hint)
    c.that(_checks().strict_mismatch(got, expected, what, 1e-5) is None, f"{what}: the values are not right", hint)


# --- 16-no-breaks -----------------------------------------------------------------------------------------------

CENTER_HINTS = (
    "open the breaks of report_and_center above: each names the line that stops the graph; a tensor can stay a "
    "tensor (no .item()) and a branch on a value can become arithmetic on the whole tensor",
    "subtracting a 0-d tensor works as well as subtracting a float; and clamping values that are already inside "
    "[-3, 3] leaves them unchanged, so the if only decides something clamp decides by itself",
)
INSIDE_HINTS = (
    "the centering and the clamp must be operations of the captured graph, which Inductor could then fuse: no "
    "function kept opaque to Dynamo (a custom op, allow_in_graph), and the same program whether compiled or not",
)
CENTER_SEED = 16
# the visible input: randn(1000) * 2, drawn first from a generator seeded CENTER_SEED; a hidden case is
# (shape, dtype, shift, scale): (randn(shape) + shift) * scale, drawn next from the same generator, in order
CENTER_VISIBLE = ((1000,), torch.float32, 0.0, 2.0)


def _center_inputs(hidden: Sequence[tuple[Any, ...]] | None) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(CENTER_SEED)
    out = []
    for shape, dtype, shift, scale in (CENTER_VISIBLE, *(hidden or ())):
        out.append((torch.randn(*shape, generator=g, dtype=dtype) + shift) * scale)
    return out if hidden is None else out[1:]


def no_breaks(c: Check, answer: Any, hidden: Iterable[tuple[Any, ...]] | None = None) -> None:
    """`center(x)`: report_and_center's values for any floating-point x, eager and compiled, in one graph with no
    break (Dynamo fresh, capture_scalar_outputs off as shipped), the work done by at least three of torch's own
    operations inside that graph. Hidden: (shape, dtype, shift, scale) inputs."""
    c.that(callable(answer), f"center should be a function, got {type(answer).__name__}", CENTER_HINTS)
    mine = c.watch(answer, "center")
    reference = _workloads("16-no-breaks")["report_and_center"]
    cases = list(hidden) if hidden is not None else None
    labels = [label for label, _ in named(cases, ("a spread-out vector",), str)]
    secret = hidden is not None
    for label, x in zip(labels, _center_inputs(cases)):
        what = label if secret else f"center({label})"
        expected = reference(x.clone())
        got = _hidden_safe(c, what, secret, mine, x.clone())
        _same_values(c, got, expected, what, CENTER_HINTS, secret)
        with fresh_dynamo():
            trace = _hidden_safe(c, f"{what}, compiled,", secret, compile_trace, answer, x.clone(),
                                 backend="eager")
        c.equal((trace.graph_count, trace.break_count), (1, 0), what=f"(graphs, breaks) compiling {what}",
                hint=CENTER_HINTS)
        ops = len(trace.graphs[0].ops)
        c.that(ops >= 3, f"the graph of {what} holds {ops} operation(s): the work must happen inside the graph, not "
               "around it", CENTER_HINTS)
        _same_values(c, trace.result, expected, f"{what}, compiled (what the compiled code returned)", INSIDE_HINTS,
                     secret)
        with fresh_dynamo():
            results, graphs, _ = _hidden_safe(c, f"{what}, compiled,", secret, _compiled_runs, answer,
                                              [(x.clone(),)])
        _same_values(c, results[0], expected, f"{what}, compiled (what the compiled code returned)", INSIDE_HINTS,
                     secret)
        opaque = sorted({str(getattr(t, "__name__", t)) for g in graphs for op, t in g if not _torch_node(op, t)})
        c.that(not opaque, f"the graph of {what} calls {', '.join(opaque)}, which Dynamo keeps opaque: the work "
               "must be torch's own operations inside the graph", INSIDE_HINTS)


# --- 16-no-recompiles -------------------------------------------------------------------------------------------

PREPARE_HINTS = (
    "run it without prepare and read the recompile's reason: which guard failed, on which dimension? Then look for "
    "a way to tell Dynamo about that dimension before the first compile",
    "section 4's dynamic=True makes every dimension dynamic, but only where the compile is made, which is not yours "
    "here; its text names the per-tensor way to say that one dimension varies; the batch is dimension 0, and it "
    "must come back unchanged",
)
PREPARE_VISIBLE = ((6, 7, 9, 12, 20),)


def no_recompiles(c: Check, answer: Any, hidden: Iterable[Sequence[int]] | None = None) -> None:
    """`prepare(x)`: the batch itself, unchanged, prepared so that `model` over n x 4 batches of the sizes given
    compiles once (Dynamo fresh, its settings as shipped): no recompile, one graph, and every call run by it with
    the model's values. Hidden: more sequences of batch sizes."""
    c.that(callable(answer), f"prepare should be a function, got {type(answer).__name__}", PREPARE_HINTS)
    mine = c.watch(answer, "prepare")
    model = _workloads("16-no-recompiles")["model"]
    secret = hidden is not None
    for label, sizes in named(hidden, PREPARE_VISIBLE, lambda sizes: f"batch sizes {list(sizes)}"):
        batches = [int(n) for n in sizes]
        g = torch.Generator().manual_seed(sum(batches))
        calls = []
        for n in batches:
            x = torch.randn(n, 4, generator=g)
            before = x.clone()
            what = f"{label}: prepare(x)" if secret else f"prepare(x) for a {n}x4 batch"
            p = _hidden_safe(c, what, secret, mine, x)
            c.that(type(p) is torch.Tensor, f"{what} returned {type(p).__name__}, not a plain tensor", PREPARE_HINTS)
            if secret:
                c.that(tuple(p.shape) == tuple(before.shape) and _checks().strict_mismatch(p, before, what) is None,
                       f"{what} is not the batch itself, unchanged", PREPARE_HINTS)
            else:
                c.equal(p, before, what=f"{what} (the batch itself, unchanged)", hint=PREPARE_HINTS)
            calls.append((p,))
        with fresh_dynamo():
            trace = _hidden_safe(c, label, secret, compile_trace, model, calls=calls, backend="eager")
        c.equal((trace.recompile_count, trace.graph_count), (0, 1), what=f"(recompiles, graphs) over {label}",
                hint=PREPARE_HINTS)
        with fresh_dynamo():
            results, _, runs = _hidden_safe(c, label, secret, _compiled_runs, model, calls)
        c.that(runs == len(calls), f"over {label} the compiled graph ran for {runs} of the {len(calls)} calls: every "
               "call must run inside the one compiled graph", PREPARE_HINTS)
        for k, ((p,), got) in enumerate(zip(calls, results)):
            _same_values(c, got, model(p.clone()), f"{label}: the compiled model's result for call {k + 1}",
                         PREPARE_HINTS, secret)


# --- 16-predict-guard -------------------------------------------------------------------------------------------

GUARD_HINTS = (
    "a guard checks what the trace depended on: for a tensor its dtype, sizes, strides and whether it needs grad, "
    "never its values; for a Python number or string, its value",
    "a transposed view has the same sizes as a fresh 4x3 tensor but not the same strides",
)
GUARD_KINDS = ("none", "dtype", "size", "stride", "requires_grad", "value")
# each change: how the second call's arguments are made from a random tensor maker r and the first shape
CHANGES = MappingProxyType({
    "new random values": lambda r, s: (r(*s), 2.0, "sum"),
    "x.double()": lambda r, s: (r(*s).double(), 2.0, "sum"),
    "a 5x3 x": lambda r, s: (r(s[0] + 1, s[1]), 2.0, "sum"),
    "x transposed from a 3x4 tensor": lambda r, s: (r(s[1], s[0]).t(), 2.0, "sum"),
    "x.requires_grad_()": lambda r, s: (r(*s).requires_grad_(), 2.0, "sum"),
    "scale = 3.0": lambda r, s: (r(*s), 3.0, "sum"),
    'mode = "max"': lambda r, s: (r(*s), 2.0, "max"),
})


def _kind(trace: Any) -> str:
    if not trace.recompiles:
        return "none"
    why = trace.recompiles[0].reasons[0]
    for word in ("dtype", "size", "stride", "requires_grad"):
        if f"{word} mismatch" in why:
            return word
    return "value"


def _failed_guards(shape: tuple[int, int]) -> dict[str, str]:
    """What the recompile reports for each change, `scaled` first compiled for a `shape` x, 2.0 and "sum"."""
    scaled = _workloads("16-predict-guard")["scaled"]
    g = torch.Generator().manual_seed(len(shape))

    def r(*s: int) -> torch.Tensor:
        return torch.randn(*s, generator=g)

    base = (r(*shape), 2.0, "sum")
    changed = {k: make(r, shape) for k, make in CHANGES.items()}
    with fresh_dynamo():
        return {k: _kind(compile_trace(scaled, calls=[base, v], backend="eager")) for k, v in changed.items()}


def _judge_guards(c: Check, mine: dict[str, Any], hidden: Iterable[tuple[int, int]] | None) -> None:
    c.equal(sorted(mine), sorted(CHANGES), what="the changes you predicted for", hint=GUARD_HINTS)
    for k in CHANGES:
        c.that(mine[k] is None or type(mine[k]) is str, f"your prediction for {k}: one of "
               f"{', '.join(map(repr, GUARD_KINDS))}, as a plain string; got a {type(mine[k]).__name__}", GUARD_HINTS)
    for label, shape in named(hidden, ((4, 3),), lambda shape: ""):
        truth = _failed_guards((int(shape[0]), int(shape[1])))
        for k, v in truth.items():
            c.equal(mine[k], v, what=f"{label}: your prediction for {k}" if label else f"your prediction for {k}",
                    hint=GUARD_HINTS, secret=True)


def predict_guard(c: Check, predictions: Any, hidden: Iterable[tuple[int, int]] | None = None) -> None:
    """`PREDICT_FAILED_GUARD`: for each change of `scaled`'s second call, the guard the recompile reports (secret),
    against compiles the check makes (Dynamo fresh) from a 4x3 first call; hidden: other first shapes."""
    c.that(type(predictions) is dict, "PREDICT_FAILED_GUARD should be the dict above, filled in (a plain dict), got "
           f"{type(predictions).__name__}", GUARD_HINTS)
    pairs = list(_dict_items(predictions))
    c.that(all(type(k) is str for k, _ in pairs), "the keys of PREDICT_FAILED_GUARD should be the plain strings "
           "above", GUARD_HINTS)
    try:
        _judge_guards(c, dict(pairs), hidden)
    except _checks().CheckFailed as failure:
        # the expected values lived in the frames below: the traceback the kernel keeps must not hold them
        raise failure.with_traceback(None) from None


# --- 16-count-backend -------------------------------------------------------------------------------------------

BACKEND_HINTS = (
    "Dynamo calls a backend once per graph it captures, with the graph (a torch.fx.GraphModule) and example "
    "inputs, and runs whatever callable the backend returns each time the graph runs; the count belongs to the "
    "first of those two moments",
    "gm.graph.nodes lists the graph's nodes; each has .op: 'placeholder' (an input) and 'output' are not "
    "operations, while a torch function, a Tensor method and a submodule call are; each make_counting_backend() "
    "must start a list of its own",
    "the callable you return must run the graph itself (what backend='eager' returns is the GraphModule's own "
    "forward); count when the backend is called, not when the graph runs",
)
OPERATION_KINDS = ("call_function", "call_method", "call_module")
BACKEND_SEED = 160
BACKEND_VISIBLE = ("gelu_ish", "split_in_two")
# the check's workloads: each runs twice on a 6x6 input (a graph runs twice, but is compiled once)
BACKEND_WORKLOADS = '''
def gelu_ish(x):
    return x * torch.sigmoid(1.702 * x)


def split_in_two(x):
    y = x.cos() * 2
    torch._dynamo.graph_break()
    return y.relu().sum()


def methods(x):
    return (x.t().contiguous() @ x).relu().mean(dim=0)


def three_parts(x):
    a = x + 1
    torch._dynamo.graph_break()
    b = a * a
    torch._dynamo.graph_break()
    return b.sum()


def branchy(x):
    if x.sum() > 0:
        return torch.exp(x) - 1
    return x.neg()
'''


def _backend_workload(name: str) -> Any:
    space: dict[str, Any] = {"torch": torch}
    exec(compile(BACKEND_WORKLOADS, "<workloads of 16-count-backend>", "exec"), space)
    return space[name]


def _reference_counts(fn: Any, x: torch.Tensor) -> tuple[list[int], Any]:
    """(operations per graph, the eager result) for `fn(x)`, compiled afresh by the check's own backend."""
    counts: list[int] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        counts.append(sum(1 for n in gm.graph.nodes if n.op in OPERATION_KINDS))
        return gm.forward

    import torch._dynamo

    with fresh_dynamo():
        torch._dynamo.optimize(backend)(fn)(x.clone())
    return counts, fn(x.clone())


def count_backend(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`make_counting_backend()` -> (backend, counts): a Dynamo backend that appends to `counts` the number of
    operations (call_function, call_method, call_module nodes) of each graph it is given, once per graph, and
    returns a callable that runs the graph. Each workload is compiled with a new pair (Dynamo fresh) and run twice;
    the list must equal the check's own count and the compiled results eager's. Hidden: more workload names."""
    import torch._dynamo

    c.that(callable(answer), f"make_counting_backend should be a function, got {type(answer).__name__}",
           BACKEND_HINTS)
    mine = c.watch(answer, "make_counting_backend")
    secret = hidden is not None
    names = [str(n) for n in hidden] if hidden is not None else list(BACKEND_VISIBLE)
    for k, name in enumerate(names, 1):
        label = f"hidden case {k}" if secret else name
        fn = _backend_workload(name)
        g = torch.Generator().manual_seed(BACKEND_SEED + k)
        x = torch.randn(6, 6, generator=g)
        expected, eager = _reference_counts(fn, x)
        made = mine()
        c.that(type(made) is tuple and len(made) == 2, "make_counting_backend() should return a tuple "
               f"(backend, counts), got {type(made).__name__}", BACKEND_HINTS)
        backend, counts = made
        c.that(callable(backend), f"the backend should be a function, got {type(backend).__name__}", BACKEND_HINTS)
        c.that(type(counts) is list and not counts, "counts should start as an empty plain list, got "
               f"{counts!r}"[:120] if not secret else "counts should start as an empty plain list", BACKEND_HINTS)
        results = []
        with fresh_dynamo():
            compiled = torch._dynamo.optimize(backend)(fn)
            for _ in range(2):
                try:
                    results.append(compiled(x.clone()))
                except _checks().CheckFailed:
                    raise
                except Exception as exc:
                    inner = exc.__cause__ if exc.__cause__ is not None else exc
                    if isinstance(inner, NotImplementedError):
                        raise inner from None
                    c.fail(f"{label}: running it compiled with your backend raised {type(inner).__name__}",
                           BACKEND_HINTS)
        c.that(type(counts) is list, f"{label}: counts is no longer a plain list", BACKEND_HINTS)
        c.that(all(type(n) is int for n in counts), f"{label}: every entry of counts should be an int",
               BACKEND_HINTS)
        if secret:
            c.that(counts == expected, f"{label}: the operations per graph are not right", BACKEND_HINTS)
        else:
            c.equal(counts, expected, what=f"counts after compiling {name} and running it twice (operations per "
                    "graph, in capture order)", hint=BACKEND_HINTS)
        for run, got in enumerate(results, 1):
            _same_values(c, got, eager, f"{label}: run {run} compiled with your backend", BACKEND_HINTS, secret)
