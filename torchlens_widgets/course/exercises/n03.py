"""Notebook 03 (layout and copies): a column z-score with no hidden copy, contiguity from the numbers, and what a
view and its copy cost in bytes.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch
import torch._prims_common as prims

from ...lenses.copies import count_copies
from ...lenses.layout import layout
from ...lenses.timing import one_thread
from ._cases import named, numbered

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["column_zscores", "contiguity", "view_and_copy_bytes"]

COPY_HINTS = (
    "find the line of column_zscores_slow that copies (the detector above names the op): why can that line "
    "not be a view, and how often does it run?",
    "x.t() is not contiguous, so flattening it copies all of x, once per column, and writing into out[:, j] is "
    "a copy_ too. Reduce down the rows, where each column already is (the dim= argument), instead of moving data",
    "keep each statistic as one row of d numbers and let broadcasting read it with stride 0; materialising it "
    "(expand(...).contiguous(), repeat, a transposed copy) is a copy again",
)
VALUE_HINTS = (
    "compare your result with column_zscores_slow on a small input: shape, dtype, then each column's values",
    "subtract each column's mean and divide by each column's unbiased standard deviation (torch.std's default, "
    "correction=1); keep the input's dtype",
)
SPEED_HINTS = ("the time of the slow version goes into copies of x: find them first", *COPY_HINTS[1:])


def _zscores(x: torch.Tensor) -> torch.Tensor:
    """Computed differently from any answer: float64 std_mean, then back to the input's dtype."""
    spread, centre = torch.std_mean(x.double(), dim=0)
    return ((x.double() - centre) / spread).to(x.dtype)


def _slow_baseline(x: torch.Tensor) -> torch.Tensor:
    """The notebook's slow version, kept here: the one in the notebook can be rebound."""
    n, d = x.shape
    out = torch.empty_like(x)
    for j in range(d):
        col = x.t().reshape(-1)[j * n:(j + 1) * n]
        out[:, j] = (col - col.mean()) / col.std()
    return out


# Inputs by name: (seed, shape, dtype, what is done to the fresh tensor). Each call makes fresh values.
ZSCORE_INPUTS = MappingProxyType({
    "randn(8192, 32)": (3, (8192, 32), torch.float32, "as is"),
    "randn(6, 5)": (4, (6, 5), torch.float32, "as is"),
    "float64 300 x 40": (6, (300, 40), torch.float64, "as is"),
    "transposed 500 x 24": (7, (24, 500), torch.float32, "transposed"),
    "strided 25 x 7 slice": (8, (50, 7), torch.float32, "every other row"),
    "columns of very different scales": (9, (40, 3), torch.float32, "scaled"),
})


def _zscore_input(name: str) -> torch.Tensor:
    seed, shape, dtype, how = ZSCORE_INPUTS[name]
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    if how == "transposed":
        return t.t()
    if how == "every other row":
        return t[::2]
    if how == "scaled":
        return t * torch.tensor([1.0, 1e3, 1e-3]) + torch.tensor([0.0, 50.0, 0.0])
    return t


def column_zscores(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`column_zscores(x)`: each column standardised (unbiased std), with zero copies counted at the profiler's
    level and, on the visible cases, at least 2x as fast as the slow version on one thread."""
    mine = c.watch(answer, "column_zscores")
    for label, name in named(hidden, ("randn(8192, 32)", "randn(6, 5)"), lambda name: f"column_zscores({name})"):
        x = _zscore_input(name)  # fresh values each time: the first call on them is the one counted
        c.copy_count(answer, x, expected=0, what=label, hint=COPY_HINTS, listing=hidden is None)
        got = c.tensor(mine(_zscore_input(name)), label)  # recorded: no check helper, no escape
        c.equal(got, _zscores(x), what=label, rel_tol=1e-5, hint=VALUE_HINTS, secret=hidden is not None)
    if hidden is None:
        with one_thread():  # a busy core cannot stall a single-threaded kernel mid-measurement
            c.faster(answer, _slow_baseline, at_least=2.0, what="column_zscores", hint=SPEED_HINTS,
                     inputs=_fresh_timing_input, rel_tol=1e-5)


_TIMING_SEEDS = itertools.count(1000)


def _fresh_timing_input() -> tuple[torch.Tensor]:
    """New values for each timed call: an answer that remembers its last input and result gains nothing."""
    return (torch.randn(8192, 32, generator=torch.Generator().manual_seed(next(_TIMING_SEEDS))),)


CONTIGUITY_HINTS = (
    "contiguous in an order means: walking the dimensions fastest first steps through storage one element at a "
    "time, with no gaps. Which dimensions is a walk never stepped along?",
    "walk the dimensions from fastest to slowest (row-major: last to first; channels_last: C, W, H, N) with an "
    "expected stride starting at 1; each dimension of size > 1 must have exactly that stride, which then grows "
    "by its size; size-1 dimensions are skipped",
    "a tensor with no elements is contiguous; only 4-D tensors can be channels_last; a 0-d tensor is contiguous",
)
NUMBERS_ONLY = ("decide from the shape and stride numbers yourself: the check records every aten op and every call "
                "into torch's contiguity helpers",)
_CONTIGUITY_HELPERS = ("is_contiguous", "is_contiguous_or_false", "is_channels_last_contiguous",
                       "is_channels_last_contiguous_2d", "is_channels_last_contiguous_3d",
                       "is_contiguous_for_memory_format", "is_contiguous_for_memory_format_or_false",
                       "is_non_overlapping_and_dense_or_false", "suggest_memory_format",
                       "check_contiguous_sizes_strides")


Passed = list[tuple[str, torch.Tensor, Callable[[Any], Any]]]  # (name, view, how its shape and stride are passed)


def _as_tuples(views: Mapping[str, torch.Tensor]) -> Passed:
    return [(name, v, tuple) for name, v in views.items()]


def _as_lists(views: Mapping[str, torch.Tensor]) -> Passed:
    return [(name, v, list) for name, v in views.items()]


def _gallery() -> dict[str, torch.Tensor]:
    """The notebook's gallery, A to L, made here."""
    base = torch.zeros(2, 3, 4, 5)
    cl = base.contiguous(memory_format=torch.channels_last)
    return {
        "A": base, "B": cl, "C": torch.zeros(2, 1, 4, 5), "D": torch.zeros(2, 3, 1, 1),
        "E": torch.zeros(2, 3, 4, 1).contiguous(memory_format=torch.channels_last), "F": base[:, :1],
        "G": base.permute(0, 2, 3, 1), "H": cl[..., :2], "I": cl[:1, :, :1, :1],
        "J": torch.zeros(1, 3, 1, 5).expand(4, 3, 1, 5), "K": torch.zeros(3, 4, 5), "L": torch.zeros(0, 3, 4, 5),
    }


def _random_dense_layouts(seed: int, n: int) -> dict[str, torch.Tensor]:
    """Dense in a random dimension order, with a few strides disturbed; sizes 0 and 1 included."""
    rng, out = random.Random(seed), {}
    for k in range(n):
        nd = rng.choice([0, 1, 2, 3, 4, 4, 4, 4, 5])
        shape = [rng.choice([0, 1, 1, 2, 3]) if rng.random() < 0.4 else rng.randint(1, 5) for _ in range(nd)]
        order = list(range(nd))
        rng.shuffle(order)
        stride, acc = [0] * nd, 1
        for d in reversed(order):
            stride[d] = acc
            acc *= max(shape[d], 1)
        for d in range(nd):
            if rng.random() < 0.15:
                stride[d] = rng.randint(0, 7)
        out[f"random layout {k}"] = torch.empty_strided(shape, stride)
    return out


def contiguity(c: Check, answer: Any, hidden: Iterable[int] | None = None) -> None:
    """`contiguity(shape, stride)`: (is_contiguous, is_channels_last_contiguous) from the numbers alone, on the
    gallery; each hidden case is a seed of 300 random layouts, passed as lists."""
    mine = c.watch(answer, "contiguity", allow_aten=set(), hint=NUMBERS_ONLY, forbid=[
        torch.Tensor.is_contiguous, torch.empty_strided, torch.as_strided,
        *(getattr(prims, n) for n in _CONTIGUITY_HELPERS if hasattr(prims, n))])

    def hidden_views(seed: int) -> Passed:
        return _as_lists(_random_dense_layouts(seed, 300))

    for label, (name, v, convert) in numbered(hidden, _as_tuples(_gallery()), hidden_views):
        shape, stride = convert(v.shape), convert(v.stride())
        call = label or f"contiguity({shape}, {stride})"
        expected = (v.is_contiguous(), v.is_contiguous(memory_format=torch.channels_last))
        got = mine(shape, stride)
        c.that(type(got) in (tuple, list) and len(got) == 2, f"{call} must return a pair of bools, got {got!r}")
        where = label or f"{name}: is_contiguous() as predicted by {call}"
        c.equal(got[0], expected[0], what=where, hint=CONTIGUITY_HINTS, secret=bool(label))
        where = label or f"{name}: is_contiguous(memory_format=torch.channels_last) as predicted by {call}"
        c.equal(got[1], expected[1], what=where, hint=CONTIGUITY_HINTS, secret=bool(label))


BYTES_HINTS = (
    "the storage must reach the farthest element the view can address; a copy writes one item per logical "
    "element, and only when .contiguous() has work to do",
    "the farthest element sits (size - 1) * stride cells past the first, summed over the dimensions; the storage "
    "needs that many cells plus one (none at all when any size is 0), times the item size. A stride-0 "
    "dimension adds no storage but multiplies what a copy writes",
    ".contiguous() copies only when the tensor is not already row-major contiguous (a channels_last tensor is "
    "not); return two plain ints",
)
BYTES_NUMBERS_ONLY = ("work from the shape, stride and itemsize numbers: the check records every aten op and every "
                      "call into torch's layout helpers",)


def _visible_views() -> dict[str, torch.Tensor]:
    return {
        "torch.randn(1, 1024).expand(4096, 1024)": torch.randn(1, 1024).expand(4096, 1024),
        "an int64 (3, 1) expanded to (3, 5)": torch.zeros(3, 1, dtype=torch.int64).expand(3, 5),
        "torch.zeros(4, 6).t()": torch.zeros(4, 6).t(),
        "torch.zeros(4, 6)[:, :2]": torch.zeros(4, 6)[:, :2],
        "a contiguous float16 (2, 3)": torch.zeros(2, 3, dtype=torch.float16),
        "a channels_last (2, 3, 4, 5)": torch.zeros(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),
    }


def _random_strided_views(seed: int, n: int) -> dict[str, torch.Tensor]:
    """Any strides (overlapping and gapped ones included), five dtypes, some row-major contiguous."""
    rng, out = random.Random(seed), {}
    dtypes = [torch.float32, torch.float64, torch.float16, torch.int8, torch.int64]
    for k in range(n):
        nd = rng.randint(0, 4)
        shape = [rng.choice([0, 1, 2, 3, 6]) if rng.random() < 0.3 else rng.randint(1, 6) for _ in range(nd)]
        stride = [rng.choice([0, 1, 2, 3, 5, 8, 13, 40]) for _ in range(nd)]
        if rng.random() < 0.4:
            acc = 1
            for d in reversed(range(nd)):
                stride[d] = acc
                acc *= max(shape[d], 1)
        out[f"random view {k}"] = torch.empty_strided(shape, stride, dtype=rng.choice(dtypes))
    out["a 0-d tensor"] = torch.tensor(2.5)
    out["a (1, 1) view with odd strides"] = torch.empty_strided((1, 1), (7, 3))
    return out


def _torch_bytes(v: torch.Tensor) -> tuple[int, int]:
    fresh = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype)
    return layout(fresh).storage_nbytes, count_copies(lambda: fresh.contiguous()).bytes_copied


def view_and_copy_bytes(c: Check, answer: Any, hidden: Iterable[int] | None = None) -> None:
    """`view_and_copy_bytes(shape, stride, itemsize)`: (storage bytes, bytes .contiguous() copies) from the numbers
    alone; each hidden case is a seed of 200 random strided views (and two odd ones), passed as lists."""
    mine = c.watch(answer, "view_and_copy_bytes", allow_aten=set(), hint=BYTES_NUMBERS_ONLY, forbid=[
        torch.Tensor.is_contiguous, torch.empty_strided, torch.as_strided, torch.Tensor.untyped_storage,
        count_copies, layout,
        *(getattr(prims, n) for n in ("is_contiguous", "is_contiguous_or_false",
                                      "is_non_overlapping_and_dense_or_false", "check_contiguous_sizes_strides",
                                      "is_contiguous_for_memory_format") if hasattr(prims, n))])
    def hidden_views(seed: int) -> Passed:
        return _as_lists(_random_strided_views(seed, 200))

    for label, (name, v, convert) in numbered(hidden, _as_tuples(_visible_views()), hidden_views):
        args = (convert(v.shape), convert(v.stride()), v.element_size())
        call = label or "view_and_copy_bytes(" + ", ".join(map(repr, args)) + ")"
        got = mine(*args)
        c.that(type(got) in (tuple, list) and len(got) == 2 and all(type(g) is int for g in got),
               f"{call} must return a pair of ints, got {got!r}", hint=BYTES_HINTS[-1:])
        storage, copied = _torch_bytes(v)
        c.equal(got[0], storage, what=label or f"{name}: storage bytes from {call}", hint=BYTES_HINTS,
                secret=bool(label))
        c.equal(got[1], copied, what=label or f"{name}: bytes .contiguous() copies, from {call}",
                hint=BYTES_HINTS, secret=bool(label))
