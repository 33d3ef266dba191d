"""Notebook 13 (fusion): the bytes a chain moves eager and fused, a function made to fuse into one kernel (and
timed), predictions of how many kernels Inductor runs, and the tensors that cross a graph break.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). Every compile here starts from a fresh Dynamo state, with
Dynamo's, AOT autograd's and Inductor's settings as torch ships them (an answer cell may have changed one).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch

from ...lenses import compile_trace as compile_lens
from ...lenses import fusion as fusion_lens
from ...lenses.compile_trace import compile_trace
from ...lenses.fusion import eager_traffic, fused_traffic
from ...lenses.timing import one_thread, steady_heap
from ._cases import errors_by_type, named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["bytes_moved", "break_crossing", "fuse_standardise", "predict_kernels"]

# captured at import, before any answer cell runs: a rebound `time.perf_counter` or `dict` does not reach them
_clock = time.perf_counter
_median = statistics.median
_dict = dict
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_DTYPES = MappingProxyType({"float16": torch.float16, "float32": torch.float32, "float64": torch.float64})


def _as_shipped(entry: Any) -> Any:
    from torch.utils._config_module import _UNSET_SENTINEL

    for value in (entry.env_value_force, entry.env_value_default):
        if value is not _UNSET_SENTINEL:
            return value
    return entry.default


@contextlib.contextmanager
def _fresh_compiler(c: Check) -> Iterator[None]:
    """A fresh Dynamo state (no compiled code, no shape history), and Dynamo's, AOT autograd's and Inductor's
    settings as torch ships them, for the block: an answer cell may have compiled its function with another
    backend, or changed a setting (fusion limits, suppress_errors) that changes what the check sees."""
    import torch._dynamo
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    reset = torch._dynamo.reset
    if not getattr(getattr(reset, "__code__", None), "co_filename", "").startswith(_TORCH_DIR):
        c.fail("torch._dynamo.reset was replaced in this kernel, so this check cannot start its compiles afresh. "
               "Remove the line that replaced it (or restart the kernel), run your answer again, then this check.")
    reset()
    with contextlib.ExitStack() as stack:
        for config in (torch._dynamo.config, functorch_config, inductor_config):
            changed = {}
            for name, entry in config._config.items():
                if entry.alias is not None or getattr(entry, "deprecated", False):
                    continue
                shipped, now = _as_shipped(entry), getattr(config, name)
                with contextlib.suppress(Exception):
                    if now is not shipped and now != shipped:
                        changed[name] = shipped
            if changed:
                stack.enter_context(config.patch(changed))
        stack.enter_context(torch._dynamo.config.patch(capture_scalar_outputs=False))
        yield


# ---------------------------------------------------------------------------------------------------------------
# Exercise 1 · Count the bytes

BYTES_HINTS = (
    "list the kernels eager runs for gated (one per operation) and, for each, the tensors it reads and the one it "
    "writes; a broadcast b is read as its own cols elements",
    "eager: the add reads x and b and writes a full tensor; sigmoid reads g and writes one; the multiply reads both "
    "of those and writes the output. Fused: each input once, the output once",
)
BYTES_LENS_HINTS = ("count the bytes yourself: the check records calls into the course's fusion and compile lenses",)


def _gated(x: torch.Tensor, g: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The notebook's `gated`, kept here: the one in the notebook can be rebound."""
    return (x + b) * torch.sigmoid(g)


def _gated_inputs(rows: int, cols: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(rows * 7 + cols)
    return (torch.randn(rows, cols, generator=g).to(dtype), torch.randn(rows, cols, generator=g).to(dtype),
            torch.randn(cols, generator=g).to(dtype))


def bytes_moved(c: Check, eager_bytes: Any, fused_bytes: Any,
                hidden: Iterable[tuple[str, int, int, str]] | None = None) -> None:
    """`eager_bytes(rows, cols, itemsize)` and `fused_bytes(...)`: the bytes `gated` moves eager and fused, as the
    fusion lens accounts them, computed from the sizes alone (no tensor op, no lens). Cases are
    (which, rows, cols, dtype name); the hidden ones are numbered."""
    mine = {"eager": c.watch(eager_bytes, "eager_bytes", forbid=[fusion_lens, compile_lens], allow_aten=set(),
                             hint=BYTES_LENS_HINTS),
            "fused": c.watch(fused_bytes, "fused_bytes", forbid=[fusion_lens, compile_lens], allow_aten=set(),
                             hint=BYTES_LENS_HINTS)}
    visible = (("eager", 64, 32, "float32"), ("fused", 64, 32, "float32"))

    def describe(case: tuple[str, int, int, str]) -> str:
        which, rows, cols, dtype = case
        return f"{which}_bytes({rows}, {cols}, {_DTYPES[dtype].itemsize})"

    for label, (which, rows, cols, dtype) in named(hidden, visible, describe):
        got = mine[which](rows, cols, _DTYPES[dtype].itemsize)
        args = _gated_inputs(rows, cols, _DTYPES[dtype])
        if which == "eager":
            expected = eager_traffic(_gated, *args).bytes_moved
        else:
            with _fresh_compiler(c):
                expected = fused_traffic(_gated, *args).bytes_moved
        c.equal(got, expected, what=f"{label}" if hidden is None else f"{label}: {which}_bytes", hint=BYTES_HINTS,
                secret=hidden is not None)


# ---------------------------------------------------------------------------------------------------------------
# Exercise 2 · Make it fuse, and measure the speed-up

FUSE_HINTS = (
    "the break is where Python needs a tensor's values: which rows are constant (nonzero, then a Python loop over "
    "a list). Dynamo cannot know them without running the graph",
    "no row needs to be found: an operation that picks, element by element, between the deviation and 1 does the "
    "same for every row and stays in the graph",
    "look for torch's elementwise select (condition, value if true, value if false), applied to the whole column of "
    "deviations at once",
)
COMPILED_HINTS = ("compiled, your function must compute what it computes when it runs eagerly: the check compares "
                  "the compiled results too, on every input",)
SPEED_TARGET = 1.6  # eager reference time / compiled time
TIMED_SHAPE = (4096, 1024)
TIMED_REPEAT = 7  # timed calls per attempt, each on an input of its own (plus one warm-up)


def _reference(x: torch.Tensor) -> torch.Tensor:
    """The same values as `standardise`, computed another way (std with correction=0, an indexed write)."""
    s = x.std(dim=1, correction=0, keepdim=True)
    s[s == 0] = 1.0
    return (x - x.mean(1, keepdim=True)) / s


def _case(seed: int, rows: int, cols: int, constant_rows: Iterable[int] = (),
          narrow_rows: Iterable[int] = ()) -> torch.Tensor:
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)) * 3 + 1
    for r in narrow_rows:  # a small but nonzero spread
        x[r] = x[r] * 1e-3
    for r in constant_rows:
        x[r] = 2.5
    return x


def _timed_against_eager(c: Check, compiled: Callable[..., Any], seed: int) -> tuple[float, float]:
    """Median ms of the eager reference and of `compiled`, measured round-robin on one thread with a clock captured
    at import, every call on an input of its own (a result kept from an earlier call is not the answer); each
    compiled result is compared with the reference's on the same input."""
    inputs = [_case(seed + i, *TIMED_SHAPE) for i in range(TIMED_REPEAT + 1)]
    eager_times: list[float] = []
    fused_times: list[float] = []
    steady_heap()
    for i, x in enumerate(inputs):
        t0 = _clock()
        expected = _reference(x)
        t1 = _clock()
        got = compiled(x)
        t2 = _clock()
        if i:  # the first call of each warms up
            eager_times.append(t1 - t0)
            fused_times.append(t2 - t1)
        with torch.enable_grad():  # (timed under no_grad; a check compares with grad mode as it found it)
            c.equal(got, expected, rel_tol=1e-5, what=f"standardise_fusable compiled, on timed input {i + 1} of "
                    f"{len(inputs)} (a {TIMED_SHAPE[0]} x {TIMED_SHAPE[1]} input of its own)", hint=COMPILED_HINTS)
        del got, expected
    return _median(eager_times) * 1e3, _median(fused_times) * 1e3


def fuse_standardise(c: Check, answer: Any, hidden: Iterable[tuple[int, tuple[int, int], tuple[int, ...]]] | None = None
                     ) -> None:
    """`standardise_fusable(x)`: `standardise`'s values (a constant row divides by 1), compiled to one graph with no
    break and one Inductor kernel, and at least 1.6x faster than eager on a 4096 x 1024 input. Eager and compiled
    results are both compared, on every input. Hidden cases: (seed, shape, constant rows)."""
    c.that(callable(answer), f"standardise_fusable should be a function, got {type(answer).__name__}", FUSE_HINTS)
    mine = c.watch(answer, "standardise_fusable")
    if hidden is not None:
        for number, (seed, shape, constant) in enumerate(hidden, 1):
            x = _case(seed, *shape, constant_rows=constant)
            c.equal(mine(x.clone()), _reference(x), rel_tol=1e-5, what=f"hidden case {number}: standardise_fusable",
                    hint=FUSE_HINTS, secret=True)
            with _fresh_compiler(c):  # the program Dynamo is shown, run as captured
                got = torch.compile(answer, backend="eager")(x.clone())
            c.equal(got, _reference(x), rel_tol=1e-5, what=f"hidden case {number}: standardise_fusable, compiled",
                    hint=COMPILED_HINTS, secret=True)
        return
    x = _case(0, 6, 16, constant_rows=(2,), narrow_rows=(4,))
    what = "standardise_fusable(rows with a constant row and a narrow one)"
    with _fresh_compiler(c):
        trace = compile_trace(answer, x.clone())  # compiled as written (a watched call would be traced too)
    c.equal((trace.graph_count, trace.break_count), (1, 0), what="(graphs, breaks) when compiled", hint=FUSE_HINTS)
    c.equal(trace.result, _reference(x), rel_tol=1e-5, what=what + ", compiled", hint=FUSE_HINTS)
    c.equal(mine(x.clone()), _reference(x), rel_tol=1e-5, what=what, hint=FUSE_HINTS)
    with _fresh_compiler(c):
        fused = fused_traffic(answer, x.clone())
    full = max([n for _, n in fused.intermediates], default=0)
    c.that(fused.kernel_count == 1 and full < x.numel() * 4,
           f"Inductor made {fused.kernel_count} kernels and the largest intermediate is {full} bytes: the aim is one "
           "kernel that writes nothing full-size in between", FUSE_HINTS)
    eager_ms = fused_ms = 0.0
    with _fresh_compiler(c), one_thread(), torch.no_grad():
        compiled = torch.compile(answer)
        compiled(_case(4, *TIMED_SHAPE))  # compiled for the shape, on one thread, as it is timed
        for attempt in range(3):  # two more tries if a noisy spell hides the gain
            eager_ms, fused_ms = _timed_against_eager(c, compiled, seed=100 + 10 * attempt)
            if eager_ms >= SPEED_TARGET * fused_ms:
                break
    c.that(eager_ms >= SPEED_TARGET * fused_ms,
           f"compiled, yours took {fused_ms:.1f} ms against eager's {eager_ms:.1f} ms ({eager_ms / fused_ms:.1f}x); "
           f"the target is {SPEED_TARGET}x", FUSE_HINTS)


# ---------------------------------------------------------------------------------------------------------------
# Exercise 3 · Predict the kernels

KERNEL_HINTS = (
    "elementwise operations fuse with each other and with a reduction over the same rows; a library call (a matmul, "
    "a sort) is a kernel of its own on this CPU",
    "reading a tensor transposed is only a different index in the loop: it fuses; a row statistic followed by "
    "elementwise work on the same rows is section 5's pattern",
)


def shift_scale_relu(x: torch.Tensor) -> torch.Tensor:
    return ((x - 1) * 3).relu()


def rms_scaled(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-6)


def sorted_doubled(x: torch.Tensor) -> torch.Tensor:
    return torch.sort(x, dim=1).values * 2


def transposed_copy(x: torch.Tensor) -> torch.Tensor:
    return x.t().contiguous() * 2


def two_matmuls(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x @ w) @ w


KERNEL_FUNCTIONS = MappingProxyType({f.__name__: f for f in (shift_scale_relu, rms_scaled, sorted_doubled,
                                                              transposed_copy, two_matmuls)})


def _kernels(c: Check, name: str, shape: tuple[int, int], seed: int) -> int:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    args = (x, torch.randn(shape[1], shape[1], generator=g)) if name == "two_matmuls" else (x,)
    with _fresh_compiler(c):
        return fused_traffic(KERNEL_FUNCTIONS[name], *args).kernel_count


def predict_kernels(c: Check, predictions: Any, hidden: Iterable[tuple[str, tuple[int, int]]] | None = None) -> None:
    """`PREDICT_KERNELS`: a plain dict, function name -> the kernels Inductor runs for it on a 64 x 64 float32
    input (secret: revealed after repeated failures). Hidden cases: (function name, another input shape)."""
    c.that(type(predictions) is dict, "PREDICT_KERNELS should be the dict above (a plain dict), filled in, got "
           f"{type(predictions).__name__}", KERNEL_HINTS)
    mine = _dict(predictions)  # a copy: nothing the check reads later runs the answer's code
    c.that(all(type(k) is str for k in mine), "PREDICT_KERNELS's keys should be the functions' names, as text",
           KERNEL_HINTS)
    c.equal(sorted(mine), sorted(KERNEL_FUNCTIONS), what="the functions you predicted for", hint=KERNEL_HINTS)
    visible = [(name, (64, 64)) for name in KERNEL_FUNCTIONS]
    for label, (name, shape) in named(hidden, visible, lambda case: f"your prediction for {case[0]}"):
        got = mine[name]
        c.equal(got, _kernels(c, name, shape, 13), what=label if hidden is None else f"{label}: your prediction",
                hint=KERNEL_HINTS, secret=True)


# ---------------------------------------------------------------------------------------------------------------
# Exercise 4 · What crosses a graph break

CROSSING_HINTS = (
    "a graph break ends graph 0: every tensor the code after it still uses must be returned by graph 0 (written to "
    "memory) and taken by graph 1 (read back). Which locals are used after the break, and which of them did graph 0 "
    "make?",
    "an input the caller passed in is not written by graph 0, and a value used only before the break never leaves "
    "graph 0; name each crossing tensor as the function names it",
    "two tensors cross: one is as big as x, the other holds one number per row (keepdim keeps its shape (rows, 1))",
)
CROSSING_LENS_HINTS = ("work it out from the code: the check records calls into the course's fusion and compile "
                       "lenses",)


def _scaled_residual(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The notebook's `scaled_residual`, kept here: the one in the notebook can be rebound."""
    h = torch.tanh(x) * w
    r = h.sum(dim=1, keepdim=True)
    torch._dynamo.graph_break()
    return h / (1 + r.abs()) + x


def _crossing_expected(c: Check, rows: int, cols: int, dtype: torch.dtype) -> dict[str, int]:
    g = torch.Generator().manual_seed(rows * 31 + cols)
    x, w = torch.randn(rows, cols, generator=g).to(dtype), torch.randn(cols, generator=g).to(dtype)
    with _fresh_compiler(c):
        fused = fused_traffic(_scaled_residual, x, w)
    return {name: n for name, n in fused.intermediates if "." not in name}  # g0.buf3 stays inside graph 0


def break_crossing(c: Check, crossing: Any, hidden: Iterable[tuple[int, int, str]] | None = None) -> None:
    """`crossing(rows, cols, itemsize)`: a dict, tensor name -> bytes, of the tensors `scaled_residual` writes to
    memory in graph 0 and reads back in graph 1, for `x` (rows, cols) and `w` (cols,) of one dtype, from the code
    alone (no tensor op, no lens). Hidden cases: (rows, cols, dtype name)."""
    mine = c.watch(crossing, "crossing", forbid=[fusion_lens, compile_lens], allow_aten=set(), hint=CROSSING_LENS_HINTS)
    visible = ((64, 32, "float32"),)

    def describe(case: tuple[int, int, str]) -> str:
        rows, cols, dtype = case
        return f"crossing({rows}, {cols}, {_DTYPES[dtype].itemsize})"

    for label, (rows, cols, dtype) in named(hidden, visible, describe):
        with errors_by_type(c, label, hidden is not None):
            got = mine(rows, cols, _DTYPES[dtype].itemsize)
        c.that(type(got) is dict, f"{label}: should give a dict, tensor name -> bytes, got {type(got).__name__}",
               CROSSING_HINTS)
        got = _dict(got)
        c.that(all(type(k) is str for k in got), f"{label}: the dict's keys should be the tensors' names, as text",
               CROSSING_HINTS)
        expected = _crossing_expected(c, rows, cols, _DTYPES[dtype])
        c.equal(sorted(got), sorted(expected), what=f"{label}: the tensors that cross", hint=CROSSING_HINTS,
                secret=True)
        for name in sorted(expected):
            c.equal(got[name], expected[name], what=f"{label}: bytes of {name}", hint=CROSSING_HINTS,
                    secret=hidden is not None)
