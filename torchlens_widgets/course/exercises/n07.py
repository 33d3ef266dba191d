"""Notebook 07 (the caching allocator): the reserve predicted by hand, a fragmentation built on purpose, and
allocator settings that avoid an out-of-memory error.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). Everything is measured on the package's own simulator,
captured when the package is imported: a notebook's `CachingAllocatorSim` or `counterfactual` is never used.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ...lenses.allocator import AllocatorError, CachingAllocatorSim, counterfactual, replay
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["avoid_oom", "construct_fragmentation", "predict_reserved"]

MiB = 1024**2
# captured at import: the check's own handles on the simulator, whatever a notebook later does to its names
_Sim, _replay, _counterfactual = CachingAllocatorSim, replay, counterfactual
_sync, _trace, _stats, _segments = _Sim.sync, _Sim.trace, _Sim.stats, _Sim.segments
_empty_cache, _malloc, _explain = _Sim.empty_cache, _Sim.malloc, _Sim.explain
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")

Op = tuple[Any, ...]  # ("malloc", name, bytes) or ("free", name)

# The sequences as the notebook prints them (SEQUENCE_A, SEQUENCE_B): the check keeps its own copies.
SEQUENCES = MappingProxyType({
    "A": (("malloc", "a", 3_000_000), ("malloc", "b", 200_000), ("malloc", "c", 700_000), ("free", "a"),
          ("malloc", "d", 12_000_000), ("malloc", "e", 1_100_000), ("malloc", "f", 1_048_576),
          ("malloc", "g", 9_000_000)),
    "B": (("malloc", "a", 1_048_576), ("malloc", "b", 1_048_577), ("malloc", "c", 1_048_576), ("malloc", "d", 600),
          ("free", "b"), ("malloc", "e", 25_000_000)),
})
TUPLE_HINTS = ("write each prediction as a tuple of two ints, in that order: bytes first, then the segment count",)
RESERVED_HINTS = (
    "go through the sequence one request at a time: round it to 512 B, pick its pool (up to 1 MiB = "
    "1,048,576 B is small), and ask whether a cached free block of that pool is big enough before you "
    "count a new segment",
    "a freed block stays reserved and cached; a request takes the smallest cached free block of its pool "
    "that fits, and even a request of 10 MiB or more can be cut from a cached 20 MiB block. A miss creates "
    "2 MiB (small pool), 20 MiB (large pool, below 10 MiB) or the size rounded up to 2 MiB",
)


def _run(ops: Sequence[Op]) -> Any:
    sim, live = _Sim(), {}
    for op, name, *size in ops:
        if op == "malloc":
            live[name] = _malloc(sim, *size)
        else:
            sim.free(live.pop(name))
    return sim


def predict_reserved(c: Check, predicted: Any, hidden: Iterable[str] | None = None) -> None:
    """`PREDICTED_A` (`PREDICTED_B` in the hidden block): (reserved bytes, segments) at the end of a sequence of
    mallocs and frees on a fresh default allocator, worked out by hand (secret). Hidden: sequence names."""
    for label, name in named(hidden, ("A",), lambda name: f"sequence {name}"):
        sim = _run(SEQUENCES[name])
        expected = (_stats(sim)["reserved_bytes.all.current"], len(_segments(sim)))
        c.that(type(predicted) is tuple and len(predicted) == 2 and all(type(v) is int for v in predicted),
               f"{label}: expected a tuple of two ints (reserved_bytes, segments), got {_kind(predicted)}",
               TUPLE_HINTS)
        hints: tuple[str, ...] = RESERVED_HINTS
        if hidden is None:  # the last tier: the simulator's decisions for this (visible) sequence
            hints += ("the simulator's decision for every request of this sequence:\n" + "\n".join(
                "  " + _ADDRESS.sub("", _explain(sim, k)) for k in range(len(sim.log)) if sim.log[k].action == "alloc"),)
        if hidden is None:
            c.equal(predicted, expected, what=f"{label}: (reserved_bytes, segments)", secret=True, hint=hints)
            continue
        for k in range(2):  # hidden: which number is wrong, never the expected value (not even revealed later)
            c.that(int.__eq__(predicted[k], expected[k]), f"{label}: (reserved_bytes, segments)[{k}]: got "
                   f"{predicted[k]}, which is not right", hints)


def _kind(v: Any) -> str:
    """What the answer is, by type only (a repr would run the answer's own code)."""
    if type(v) in (tuple, list):
        return f"a {type(v).__name__} of " + (", ".join(type(x).__name__ for x in v) if len(v) <= 4 else
                                             f"{len(v)} values")
    return f"a {type(v).__name__}"


FRAG_HINTS = (
    "look at what empty_cache() could give back and at the sizes of the free pieces: draw(sim) shows both",
    "a segment goes back to CUDA only when all of it is free. Keep one small block alive in each of several "
    "segments, and make every free piece around it smaller than the request. Requests of 1-10 MiB get 20 MiB "
    "segments",
    "the large pool splits a block only if more than 1 MiB would remain, and a request takes the smallest cached "
    "block that fits: allocate all your blocks first and free the ones you do not keep afterwards, so that the "
    "kept blocks sit in separate segments. Size the free pieces from x_mib, or keep them all below 10 MiB",
)


def _mib(n: int) -> str:
    return f"{n / MiB:.2f} MiB"


def construct_fragmentation(c: Check, answer: Any, hidden: Iterable[int] | None = None) -> None:
    """`fragment(sim, x_mib)`: on a fresh simulator, at most 10 MiB allocated, at least 100 MiB reserved that
    empty_cache() cannot return, and no cached free block for x_mib MiB. Only the answer's mallocs and frees
    count (replayed on a new simulator). Hidden: other x_mib values."""
    mine = c.watch(answer, "fragment", allow_aten=set())  # the simulator only: no tensor ops
    for label, x_mib in named(hidden, (24,), lambda x: f"x_mib={x}"):
        yours = _Sim()
        mine(yours, x_mib)
        _sync(yours)  # every stream finishes: a pending free is no fragmentation
        sim = _replay(_trace(yours))  # your mallocs and frees, replayed: only they count
        _sync(sim)
        st = _stats(sim)
        allocated, reserved = st["allocated_bytes.all.current"], st["reserved_bytes.all.current"]
        c.that(allocated <= 10 * MiB, f"{label}: {_mib(allocated)} are still allocated; at most 10 MiB may be",
               FRAG_HINTS)
        c.that(reserved >= 100 * MiB, f"{label}: only {_mib(reserved)} are reserved; at least 100 MiB needed",
               FRAG_HINTS)
        _empty_cache(sim)
        after = _stats(sim)["reserved_bytes.all.current"]
        c.that(after >= 100 * MiB, f"{label}: empty_cache() returned {_mib(reserved - after)} (wholly free "
               f"segments are a cache, not fragmentation); {_mib(after)} stayed reserved", FRAG_HINTS)
        largest = max((b["size"] for s in _segments(sim) for b in s["blocks"] if b["state"] == "inactive"), default=0)
        seen = len(sim.log)
        _malloc(sim, x_mib * MiB)
        new = [e for e in sim.log[seen:] if e.action == "segment_alloc"]
        if hidden is None:
            said = (f"the request of {x_mib} MiB fitted a cached free block (the largest is {_mib(largest)}): "
                    + _ADDRESS.sub("", _explain(sim, -1)))
        else:  # the request's size is the hidden case's content
            said = "the request fitted one of your cached free blocks, so no new segment was needed"
        c.that(len(new) == 1, f"{label}: {said}", FRAG_HINTS)


SETTINGS = frozenset({"max_split_size_mb", "expandable_segments", "roundup_power2_divisions",
                      "garbage_collection_threshold"})
OOM_HINTS = (
    "read the OOM message printed above: how much is allocated, and how much is reserved but unallocated?",
    "the small predictions are cut from a big cached activation block and pin its segment, which can then never "
    "be returned. Which setting stops big cached blocks from being split for small requests, and which one lets "
    "a single segment grow in place?",
    "a split limit protects only cached blocks at least as large as the limit, so it must not exceed the "
    "activations you want to protect (torch accepts no limit below 20 MB); growing segments need no number. "
    "Power-of-two rounding and the garbage collector do not unpin a segment",
)
# (activations of each batch in MiB, device memory in MiB): the notebook's growing_batches trace
OOM_CASES = (((100, 110, 120, 130), 200),)


def _growing_trace(batch_mib: Sequence[int]) -> list[dict[str, Any]]:
    """growing_batches(...) of the notebook, recorded here: activations freed, 2 MiB of predictions kept per batch."""
    sim = _Sim()
    for m in batch_mib:
        sim.free(_malloc(sim, m * MiB))
        _malloc(sim, 2 * MiB)
    return list(_trace(sim))


def _plain_settings(c: Check, settings: Any) -> dict[str, int | float | bool]:
    """MY_SETTINGS as a new plain dict of plain values (exact types only: nothing of the answer's own runs later)."""
    c.that(type(settings) is dict, f"MY_SETTINGS must be a dict of allocator settings, got {type(settings).__name__}")
    items = list(dict.items(settings))
    c.that(all(type(k) is str for k, _ in items), "the keys of MY_SETTINGS must be the settings' names (str)")
    extra = {k for k, _ in items} - SETTINGS
    c.that(not extra, f"MY_SETTINGS has keys {sorted(extra)}; allowed are {sorted(SETTINGS)}")
    c.that(all(type(v) in (int, float, bool) for _, v in items),
           "the values of MY_SETTINGS must be numbers or True/False, as the simulator's keyword arguments take them")
    return {str(k): v for k, v in items}


def avoid_oom(c: Check, settings: Any, hidden: Iterable[tuple[Sequence[int], int]] | None = None) -> None:
    """`MY_SETTINGS`: allocator settings under which the growing-batches trace replays without an OOM at its
    memory limit. Hidden: (batch sizes in MiB, limit in MiB) of other traces of the same kind."""
    mine = _plain_settings(c, settings)
    def describe(case: tuple[Sequence[int], int]) -> str:
        return f"growing batches of {min(case[0])}-{max(case[0])} MiB, {case[1]} MiB limit"

    for label, (batch_mib, cap_mib) in named(hidden, OOM_CASES, describe):
        trace, capacity = _growing_trace(batch_mib), cap_mib * MiB
        base = _counterfactual(trace, capacity=capacity)
        if base["ooms"] < 1:  # the exercise itself: a case must fail with default settings
            raise AssertionError(f"{label}: the trace does not run out of memory with default settings")
        try:
            result = _counterfactual(trace, capacity=capacity, **mine)
        except AllocatorError as err:
            c.fail(f"the simulator rejects these settings: {err}")
        peak = f"; reserved peak {result['reserved_peak'] / MiB:.0f} MiB of {cap_mib} MiB" if hidden is None else ""
        c.that(result["ooms"] == 0, f"{label}: with {mine} the replay still ran out of memory {result['ooms']} "
               f"time(s) (defaults: {base['ooms']}){peak}", OOM_HINTS)
