"""A simulator of PyTorch's CUDA caching allocator that explains every decision it takes, on CPU.

`CachingAllocatorSim` follows the rules of ``c10/cuda/CUDACachingAllocator.cpp`` (now the shared
``CachingDeviceAllocator`` implementation) and ``c10/core/AllocatorConfig.{h,cpp}`` of PyTorch 2.13,
re-stated here in our own words. Its events are shaped like the ``device_traces`` entries of
``torch.cuda.memory._snapshot()`` and its ``segments()`` like that snapshot's ``'segments'``, so a
replay can be put next to a real recording. Sizes are bytes; addresses are fake but deterministic.

Constants (all from ``c10/core/AllocatorConfig.h`` unless noted):

- ``MIN_BLOCK_SIZE = 512``: every request is rounded up to a multiple of 512 B (``kMinBlockSize``).
- ``SMALL_SIZE = 1 MiB``: requests up to 1 MiB go to the small pool, larger ones to the large pool (``kSmallSize``).
- ``SMALL_BUFFER = 2 MiB``: a small-pool segment (``kSmallBuffer``), also the small expandable page size.
- ``LARGE_BUFFER = 20 MiB``: the segment for large requests below ``MIN_LARGE_ALLOC`` and the large
  expandable page size (``kLargeBuffer`` / ``large_segment_size`` default, 20971520).
- ``MIN_LARGE_ALLOC = 10 MiB``: from here on a request gets its own segment (``kMinLargeAlloc``),
  rounded up to a multiple of ``ROUND_LARGE = 2 MiB`` (``kRoundLarge``).
- ``max_split_size_mb`` must be ≥ 20 and ``max_non_split_rounding_mb`` defaults to 20
  (``AllocatorConfig.cpp``: ``parseMaxSplitSize``, constructor); ``roundup_power2_divisions`` has 16
  intervals, one per power of two from 1 MiB to 64 GiB (``kRoundUpPowerOfTwoIntervals``).

Simplifications (the rest follows the C++ step by step):

- One device, no CUDA graphs / private memory pools, no free-memory callbacks, settings fixed at
  construction. ``capacity`` plays the part of ``allowed_memory_maximum`` (a per-process memory
  fraction times the device memory): a new segment fails when reserved + segment size > capacity.
  Without a capacity, cudaMalloc never fails. Real cudaMalloc can also fail from device
  fragmentation or other processes; the simulator cannot see those.
- Streams are plain integers. ``record_stream`` uses are events; ``sync(stream)`` says that stream's
  work is done and reclaims the pending blocks at once (torch notices at the next ``malloc``, its
  ``process_events``; the resulting block layout is the same, only the ``free_completed`` event comes
  earlier). ``empty_cache`` and the out-of-memory path synchronise every stream, as torch does.
- ``garbage_collection_threshold`` is modelled exactly, because torch measures a cached block's age
  in calls to its free-block search, not in time: it acts only when ``capacity`` is set (torch: only
  when a memory fraction is set) and frees unsplit large cached blocks older than the average age.
- Expandable segments: one growing segment per (pool, stream) that maps 2 MiB (small) or 20 MiB (large)
  pages on demand, re-uses the lowest free address range, and unmaps wholly free pages on
  ``empty_cache``. Its virtual reservation is 1.125 × capacity (torch: 1.125 × device memory), or
  1 TiB without a capacity. As in torch, expandable segments do not count in ``segment.*`` or
  ``inactive_split*`` stats, and ``segments()`` lists one entry per contiguous mapped range.
- Addresses: segments are placed at increasing 2 MiB-aligned addresses from ``BASE_ADDRESS`` and
  are never re-used (real cudaMalloc may hand an address out again).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

__all__ = [
    "AllocatorError",
    "AllocatorEvent",
    "EventLog",
    "CachingAllocatorSim",
    "SimulatedOOM",
    "counterfactual",
    "replay",
    "round_size",
]

KiB = 1024
MiB = 1024 * 1024
GiB = 1024 * MiB
MIN_BLOCK_SIZE = 512
SMALL_SIZE = 1 * MiB
SMALL_BUFFER = 2 * MiB
LARGE_BUFFER = 20 * MiB
MIN_LARGE_ALLOC = 10 * MiB
ROUND_LARGE = 2 * MiB
POW2_INTERVALS = 16  # 1 MiB, 2 MiB, ..., 32 GiB and above
MIN_SPLIT_SIZE_MB = LARGE_BUFFER // MiB
BASE_ADDRESS = 0x7F00_0000_0000
DEFAULT_VIRTUAL = 1 << 40  # expandable reservation without a capacity

_SHIFT = 64  # free-block key: size << 64 | address, so ints sort like (size, address)
_MASK = (1 << _SHIFT) - 1
# stat indices: stat * 3 + (0 all, 1 small pool, 2 large pool) in flat lists
_ALLOCATION, _SEGMENT, _ACTIVE, _INACTIVE_SPLIT, _ALLOCATED_BYTES, _RESERVED_BYTES, _ACTIVE_BYTES = 0, 3, 6, 9, 12, 15, 18
_INACTIVE_SPLIT_BYTES, _REQUESTED_BYTES = 21, 24
_STAT_NAMES = (
    "allocation",
    "segment",
    "active",
    "inactive_split",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "requested_bytes",
)
_POOL_NAMES = ("all", "small_pool", "large_pool")


class AllocatorError(ValueError):
    """Bad use of the simulator (unknown handle, double free, bad setting); the message says what to do."""


#: The largest request the simulator takes (1 PiB): anything above is a units mistake, not a device.
MAX_REQUEST = 1 << 50


class SimulatedOOM(RuntimeError):
    """The simulated device ran out of memory after freeing cached segments; carries the state then."""

    def __init__(self, message: str, stats: dict[str, int], segments: list[dict[str, Any]], event_index: int):
        super().__init__(message)
        self.stats = stats
        self.segments = segments
        self.event_index = event_index


# ------------------------------------------------------------------------------------------ size rules


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _pow2_division_ceil(size: int, divisions: int) -> int:
    """Round `size` up to the next of `divisions` equal steps between its two surrounding powers of two.

    Models ``roundup_power2_next_division``: powers of two stay; the step is floor_pow2(size) divided
    by floor_pow2(divisions); a zero step gives the next power of two.
    """
    if _is_pow2(size):
        return size
    floor = 1 << (size.bit_length() - 1)
    step = floor >> (divisions.bit_length() - 1)
    if step == 0:
        return floor << 1
    low = size & ~(step - 1)
    return size if low == size else low + step


def _divisions_table(setting: int | Mapping[int | str, int] | list[int] | None) -> list[int]:
    """The 16-interval table of ``roundup_power2_divisions`` as the config parser builds it.

    Dict keys are interval starts in MB (powers of two) or ``">"``, as in ``[64:8,256:4,>:1]``; the
    first key also covers all smaller sizes; intervals never named keep 0 (no power-of-two rounding).
    Checked against c10's ``AllocatorConfigTest`` expectations.
    """
    table = [0] * POW2_INTERVALS
    if setting is None:
        return table
    if isinstance(setting, bool):
        raise AllocatorError("roundup_power2_divisions must be an int, a {MB: divisions} dict or a list of 16 ints")
    if isinstance(setting, int):
        if not _is_pow2(setting):
            raise AllocatorError(f"roundup_power2_divisions={setting}: torch needs a power of two (e.g. 4)")
        return [setting] * POW2_INTERVALS
    if isinstance(setting, list):
        if len(setting) != POW2_INTERVALS or any(d != 0 and not _is_pow2(d) for d in setting):
            raise AllocatorError("a roundup_power2_divisions list needs 16 entries, each 0 or a power of two")
        return list(setting)
    if not isinstance(setting, Mapping):
        raise AllocatorError(f"roundup_power2_divisions={setting!r}: give an int, a {{MB: divisions}} dict "
                             "or a list of 16 ints, e.g. 4 or {64: 8, '>': 1}")
    first, last = True, 0
    for key, div in setting.items():
        if div != 0 and not _is_pow2(div):
            raise AllocatorError(f"roundup_power2_divisions[{key!r}]={div}: divisions must be 0 or a power of two")
        if key == ">":  # every interval after the last one named (all of them if none was)
            start = 0 if first else last + 1
            table[start:] = [div] * (POW2_INTERVALS - start)
            continue
        if not isinstance(key, int) or not _is_pow2(key):
            raise AllocatorError(f"roundup_power2_divisions key {key!r}: use a power-of-two size in MB or '>'")
        index = min(max(key.bit_length() - 1, 0), POW2_INTERVALS - 1)
        if first:  # the first interval given also covers every smaller one
            table[:index] = [div] * index
            first = False
        table[index] = div
        last = index
    return table


def _divisions_for(table: list[int], size: int) -> int:
    """Divisions for the power-of-two interval holding `size` (``AllocatorConfig::roundup_power2_divisions(size)``)."""
    index = (size.bit_length() - 1) - 20
    return table[min(max(index, 0), POW2_INTERVALS - 1)]


def round_size(size: int, roundup_power2_divisions: int | Mapping[int | str, int] | list[int] | None = None) -> int:
    """Bytes the allocator really hands out for a request of `size` bytes (``round_size``)."""
    return _round(size, _divisions_table(roundup_power2_divisions))


def _round(size: int, table: list[int]) -> int:
    if size < MIN_BLOCK_SIZE:
        return MIN_BLOCK_SIZE
    div = _divisions_for(table, size)
    if div > 1 and size > MIN_BLOCK_SIZE * div:
        return _pow2_division_ceil(size, div)
    return -(-size // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE


def allocation_size(size: int) -> int:
    """Segment size cudaMalloc'ed for a rounded request that found no cached block (``get_allocation_size``)."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


# ------------------------------------------------------------------------------------ data structures


class _SortedInts:
    """A sorted multiset-free set of ints kept in short sorted buckets: O(log n) search, O(√n) insert."""

    __slots__ = ("_lists", "_maxes")
    _LOAD = 256

    def __init__(self) -> None:
        self._lists: list[list[int]] = []
        self._maxes: list[int] = []

    def __len__(self) -> int:
        return sum(len(b) for b in self._lists)

    def __bool__(self) -> bool:
        return bool(self._maxes)

    def add(self, k: int) -> None:
        maxes, lists = self._maxes, self._lists
        if not maxes:
            lists.append([k])
            maxes.append(k)
            return
        i = bisect.bisect_left(maxes, k)
        if i == len(maxes):
            i -= 1
            bucket = lists[i]
            bucket.append(k)
            maxes[i] = k
        else:
            bucket = lists[i]
            bisect.insort(bucket, k)
        if len(bucket) > 2 * self._LOAD:
            tail = bucket[self._LOAD :]
            del bucket[self._LOAD :]
            lists.insert(i + 1, tail)
            maxes[i] = bucket[-1]
            maxes.insert(i + 1, tail[-1])

    def remove(self, k: int) -> None:
        maxes, lists = self._maxes, self._lists
        i = bisect.bisect_left(maxes, k)
        bucket = lists[i]
        j = bisect.bisect_left(bucket, k)
        del bucket[j]
        if not bucket:
            del lists[i]
            del maxes[i]
        elif j == len(bucket):
            maxes[i] = bucket[-1]

    def ceil(self, k: int) -> int | None:
        """Smallest member ≥ k, or None."""
        i = bisect.bisect_left(self._maxes, k)
        if i == len(self._maxes):
            return None
        bucket = self._lists[i]
        return bucket[bisect.bisect_left(bucket, k)]

    def iter_from(self, k: int) -> Iterator[int]:
        """Members ≥ k in ascending order (do not mutate while iterating)."""
        i = bisect.bisect_left(self._maxes, k)
        if i == len(self._maxes):
            return
        bucket = self._lists[i]
        yield from bucket[bisect.bisect_left(bucket, k) :]
        for bucket in self._lists[i + 1 :]:
            yield from bucket

    def iter_desc(self) -> Iterator[int]:
        for bucket in reversed(self._lists):
            yield from reversed(bucket)

    def __iter__(self) -> Iterator[int]:
        for bucket in self._lists:
            yield from bucket


class _Segment:
    """One cudaMalloc'ed segment, or one expandable segment's whole virtual reservation."""

    __slots__ = ("addr", "size", "stream", "small", "expandable", "page")

    def __init__(self, addr: int, size: int, stream: int, small: bool, expandable: bool, page: int) -> None:
        self.addr, self.size, self.stream, self.small = addr, size, stream, small
        self.expandable, self.page = expandable, page


class _Block:
    """A contiguous range of a segment: allocated, free (cached), pending (freed, still used) or unmapped."""

    __slots__ = (
        "addr", "size", "requested", "stream", "small", "seg", "prev", "next", "allocated",
        "stream_uses", "event_count", "handle", "mapped", "gc_base", "tree",
    )

    def __init__(self, addr: int, size: int, stream: int, small: bool, seg: _Segment, tree: _SortedInts) -> None:
        self.addr, self.size, self.stream, self.small, self.seg, self.tree = addr, size, stream, small, seg, tree
        self.requested = 0
        self.prev: _Block | None = None
        self.next: _Block | None = None
        self.allocated = False
        self.stream_uses: set[int] | None = None  # other streams using it (record_stream); only while allocated
        self.event_count = 0
        self.handle = -1
        self.mapped = True
        self.gc_base = 0

    @property
    def is_split(self) -> bool:
        return self.prev is not None or self.next is not None

    @property
    def reusable(self) -> bool:
        return not self.allocated and self.event_count == 0


class _Stat:
    __slots__ = ("current", "peak", "allocated", "freed")

    def __init__(self) -> None:
        self.current = self.peak = self.allocated = self.freed = 0

    def inc(self, n: int) -> None:
        self.current += n
        if self.current > self.peak:
            self.peak = self.current
        self.allocated += n

    def dec(self, n: int) -> None:
        self.current -= n
        self.freed += n


# ------------------------------------------------------------------------------------------- events


def _human(n: int) -> str:
    """Decimal, the way people say request sizes: 13.2 MB."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _mib(n: int) -> str:
    """Binary, the way the allocator thinks in segments: 14 MiB."""
    if n % MiB == 0:
        return f"{n // MiB} MiB"
    if n >= MiB:
        return f"{n / MiB:.2f} MiB"
    if n % KiB == 0:
        return f"{n // KiB} KiB"
    return f"{n:,} B"


class AllocatorEvent:
    """One allocator action, shaped like a ``device_traces`` entry, with the facts behind it and a lazy explanation."""

    __slots__ = ("index", "action", "addr", "size", "stream", "why")

    def __init__(self, index: int, action: str, addr: int, size: int, stream: int, why: dict[str, Any]) -> None:
        self.index, self.action, self.addr, self.size, self.stream, self.why = index, action, addr, size, stream, why

    def to_trace(self) -> dict[str, Any]:
        """The ``device_traces`` dict torch would record (an oom carries ``device_free`` instead of ``addr``)."""
        d: dict[str, Any] = {"action": self.action, "size": self.size, "stream": self.stream, "frames": []}
        d["device_free" if self.action == "oom" else "addr"] = self.addr
        return d

    @property
    def explanation(self) -> str:
        return _EXPLAIN[self.action](self)

    def __repr__(self) -> str:
        return f"AllocatorEvent({self.index}, {self.action!r}, addr={self.addr:#x}, size={self.size}, stream={self.stream})"


class EventLog(Sequence[AllocatorEvent]):
    """Read-only view of a simulator's events; builds `AllocatorEvent` objects only when asked (keeps replay fast)."""

    def __init__(self, events: list[tuple[str, int, int, int, Any]]) -> None:
        self._events = events

    def __len__(self) -> int:
        return len(self._events)

    @overload
    def __getitem__(self, i: int) -> AllocatorEvent: ...
    @overload
    def __getitem__(self, i: slice) -> list[AllocatorEvent]: ...
    def __getitem__(self, i: int | slice) -> AllocatorEvent | list[AllocatorEvent]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self._events)))]
        n = len(self._events)
        k = i + n if i < 0 else i
        action, addr, size, stream, why = self._events[k]
        return AllocatorEvent(k, action, addr, size, stream, why)


def _explain_alloc(e: AllocatorEvent) -> str:
    w = e.why
    orig, size = e.size, w["size"]
    parts = [f"{_human(orig)} request ({orig:,} B)"]
    if w["rounding"] == "min":
        parts.append(f"rounded up to the 512 B minimum block: {size:,} B")
    elif w["rounding"] == "pow2":
        parts.append(f"rounded up to the next of {w['divisions']} divisions between powers of two "
                     f"(roundup_power2_divisions): {size:,} B")
    elif size != orig:
        parts.append(f"rounded up to a multiple of 512 B: {size:,} B")
    else:
        parts.append(f"already a multiple of 512 B: {size:,} B")
    parts.append("small pool (≤ 1 MiB)" if size <= SMALL_SIZE else "large pool (> 1 MiB)")
    miss = w.get("miss")
    if w["source"] == "cache":
        parts.append(f"best fit on stream {e.stream}: cached free block of {w['block_size']:,} B at {w['block_addr']:#x}")
    else:
        if miss == "none":
            parts.append(f"no free block ≥ {size:,} B on stream {e.stream}")
        elif miss == "oversize":
            parts.append(f"smallest free block that fits ({w['candidate']:,} B) is ≥ max_split_size and the request "
                         "is not: such blocks are kept for oversize requests")
        elif miss == "too_big":
            parts.append(f"smallest free block that fits ({w['candidate']:,} B) exceeds the request by "
                         "≥ max_non_split_rounding (20 MiB): not used")
        if w.get("gc"):
            parts.append(f"garbage collection freed {_mib(w['gc'])} of old cached blocks")
        for step in w.get("retries", ()):
            parts.append(step)
        if w["source"] == "segment":
            seg = w["seg_size"]
            if size <= SMALL_SIZE:
                rule = "small requests share 2 MiB segments"
            elif size < MIN_LARGE_ALLOC:
                rule = "requests of 1–10 MiB get a 20 MiB segment"
            else:
                rule = "requests ≥ 10 MiB get their size rounded up to 2 MiB"
            parts.append(f"new {_mib(seg)} segment (cudaMalloc; {rule})")
        else:
            parts.append(f"expandable segment: mapped {_mib(w['mapped'])} more (pages of "
                         f"{'2' if size <= SMALL_SIZE else '20'} MiB)" if w["mapped"] else
                         "expandable segment: free mapped space suffices")
    rem = w["remainder"]
    if w["split"]:
        rule = "remainder ≥ 512 B" if (size <= SMALL_SIZE or w["expandable_rules"]) else "remainder > 1 MiB"
        parts.append(f"split: {rem:,} B stay free after it ({rule})")
    elif rem:
        if size <= SMALL_SIZE or w["expandable_rules"]:
            why = "remainder < 512 B"
        elif w["oversize"]:
            why = "requests ≥ max_split_size are never split"
        else:
            why = "remainder ≤ 1 MiB"
        parts.append(f"not split: the whole {size + rem:,} B block is used ({why})")
    return " → ".join(parts)


def _explain_free_requested(e: AllocatorEvent) -> str:
    handle, block_size, pending = e.why
    text = f"free of handle {handle} ({block_size:,} B block at {e.addr:#x}, stream {e.stream}) requested"
    if pending:
        others = ", ".join(str(s) for s in pending)
        return (text + f" → still used by stream(s) {others} (record_stream): the block stays active and is not "
                "reused until that work is done (sync or empty_cache)")
    return text + " → no other stream uses it: it returns to the cache now"


def _explain_free_completed(e: AllocatorEvent) -> str:
    small, block_size, merged_prev, merged_next, final_size, final_addr, whole_segment = e.why
    pool = "small" if small else "large"
    text = f"block at {e.addr:#x} ({block_size:,} B) back on the stream-{e.stream} free list of the {pool} pool"
    merged = []
    if merged_prev:
        merged.append(f"merged with the free block before it ({merged_prev:,} B)")
    if merged_next:
        merged.append(f"merged with the free block after it ({merged_next:,} B)")
    if merged:
        text += " → " + " and ".join(merged) + f" → one free block of {final_size:,} B at {final_addr:#x}"
    if whole_segment:
        text += " → the whole segment is free again (empty_cache could return it)"
    return text


def _explain_segment(e: AllocatorEvent) -> str:
    w = e.why
    verbs = {
        "segment_alloc": f"cudaMalloc of a {_mib(e.size)} segment at {e.addr:#x} for stream {e.stream}",
        "segment_free": f"cudaFree of the {_mib(e.size)} segment at {e.addr:#x} (stream {e.stream})",
        "segment_map": f"mapped {_mib(e.size)} of physical pages at {e.addr:#x} into the expandable segment of "
        f"stream {e.stream}",
        "segment_unmap": f"unmapped {_mib(e.size)} of wholly free pages at {e.addr:#x} (expandable segment, "
        f"stream {e.stream})",
    }
    return verbs[e.action] + (f" — {w['reason']}" if w.get("reason") else "")


def _explain_oom(e: AllocatorEvent) -> str:
    return e.why["message"]


_EXPLAIN = {
    "alloc": _explain_alloc,
    "free_requested": _explain_free_requested,
    "free_completed": _explain_free_completed,
    "segment_alloc": _explain_segment,
    "segment_free": _explain_segment,
    "segment_map": _explain_segment,
    "segment_unmap": _explain_segment,
    "oom": _explain_oom,
}


# ------------------------------------------------------------------------------------------ simulator


class CachingAllocatorSim:
    """The CUDA caching allocator of one device, simulated: malloc/free by handle, stats, segments, explanations."""

    def __init__(
        self,
        capacity: int | None = None,
        max_split_size_mb: int | None = None,
        roundup_power2_divisions: int | Mapping[int | str, int] | list[int] | None = None,
        garbage_collection_threshold: float | None = None,
        expandable_segments: bool = False,
        max_non_split_rounding_mb: int = MIN_SPLIT_SIZE_MB,
    ) -> None:
        if capacity is not None and (not isinstance(capacity, int) or capacity <= 0):
            raise AllocatorError(f"capacity={capacity!r}: give the device memory in bytes (a positive int) or None")
        for name, mb in (("max_split_size_mb", max_split_size_mb), ("max_non_split_rounding_mb", max_non_split_rounding_mb)):
            if mb is not None and (not isinstance(mb, int) or mb < MIN_SPLIT_SIZE_MB):
                raise AllocatorError(f"{name}={mb!r}: give an int ≥ {MIN_SPLIT_SIZE_MB} (MB), as torch requires, or None")
        if garbage_collection_threshold is not None and not 0.0 < garbage_collection_threshold < 1.0:
            raise AllocatorError("garbage_collection_threshold: give a fraction strictly between 0 and 1 (torch's check), "
                                 "e.g. 0.8, or None")
        self.capacity = capacity
        self.max_split_size_mb = max_split_size_mb
        self.max_split_size = max_split_size_mb * MiB if max_split_size_mb is not None else math.inf
        self.max_non_split_rounding = max_non_split_rounding_mb * MiB
        self.roundup_power2_divisions = roundup_power2_divisions
        self._div_table = _divisions_table(roundup_power2_divisions)
        self._no_divisions = all(d <= 1 for d in self._div_table)
        self.garbage_collection_threshold = garbage_collection_threshold
        self.expandable_segments = bool(expandable_segments)

        self._free: dict[tuple[bool, int], _SortedInts] = {}  # (small, stream) -> keys of reusable blocks
        self._unmapped: dict[tuple[bool, int], list[int]] = {}  # (small, stream) -> addresses of unmapped blocks
        self._by_addr: dict[int, _Block] = {}
        self._segments: dict[int, _Segment] = {}
        self._live: dict[int, _Block] = {}
        self._dead: dict[int, int] = {}  # freed handle -> index of its free_requested event
        self._outstanding: dict[int, deque[list[Any]]] = {}  # stream -> [[block, done], ...]
        self._next_handle = 1
        self._next_addr = BASE_ADDRESS
        self._driver_addresses: deque[int] = deque()  # replay: the recorded cudaMalloc results, in order
        self._foreign_addresses = False  # a segment sits at a recorded address, not one this simulator chose
        self._gc_calls = [0, 0]  # get_free_block calls per pool (large, small): the clock of block ages
        self._reserved = 0
        n_stats = 3 * len(_STAT_NAMES)
        self._cur, self._peak, self._acc = [0] * n_stats, [0] * n_stats, [0] * n_stats  # freed = acc - cur
        self._counters = {"num_alloc_retries": 0, "num_ooms": 0, "num_sync_all_streams": 0,
                          "num_device_alloc": 0, "num_device_free": 0}
        self._oversize_alloc = _Stat()
        self._oversize_seg = _Stat()
        self._events: list[tuple[str, int, int, int, Any]] = []
        self.replay_report: dict[str, int] = {}  # filled by replay()

    # ------------------------------------------------------------------ public API

    def malloc(self, size: int, stream: int = 0) -> int:
        """Allocate `size` bytes on `stream`; returns a handle. Follows ``DeviceCachingAllocator::malloc``."""
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise AllocatorError(f"size={size!r}: request a positive number of bytes (torch never calls the "
                                 "allocator for 0-byte tensors)")
        if size > MAX_REQUEST:
            raise AllocatorError(f"size={size:,} bytes is more than any device holds (the simulator takes up to "
                                 f"{MAX_REQUEST:,} bytes, 1 PiB); check the units: sizes are bytes")
        if isinstance(stream, bool) or not isinstance(stream, int):
            raise AllocatorError(f"stream={stream!r}: streams are integers in the simulator (use s.cuda_stream)")
        self.process_events()
        if self._no_divisions:
            rounded = -(-size // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE if size >= MIN_BLOCK_SIZE else MIN_BLOCK_SIZE
            kind = "512" if size >= MIN_BLOCK_SIZE else "min"
        else:
            rounded = _round(size, self._div_table)
            kind = self._rounding_kind(size, rounded)
        small = rounded <= SMALL_SIZE
        why: dict[str, Any] = {"size": rounded, "rounding": kind}
        block = self._get_free_block(small, stream, rounded, why)
        if block is not None:
            why["source"] = "cache"
            why["block_size"], why["block_addr"] = block.size, block.addr
        else:
            block = self._allocate_new(small, stream, rounded, why)
        return self._alloc_found_block(block, rounded, size, why).handle

    def free(self, handle: int) -> None:
        """Free a handle; with other-stream uses the block stays pending until they are done (``free``)."""
        block = self._block_of(handle, "free")
        self._free_requested(block, external=False)

    def record_stream(self, handle: int, stream: int) -> None:
        """Mark the allocation as used by `stream` too, so its memory is not reused before that work ends."""
        block = self._block_of(handle, "record_stream")
        if stream != block.stream:  # uses on the allocation stream need no event
            if block.stream_uses is None:
                block.stream_uses = set()
            block.stream_uses.add(stream)

    def sync(self, stream: int | None = None) -> None:
        """Declare the work on `stream` (or all streams) done, then reclaim blocks whose last use ended."""
        for s, queue in self._outstanding.items():
            if stream is None or s == stream:
                for entry in queue:
                    entry[1] = True
        self.process_events()

    def process_events(self) -> None:
        """Reclaim pending blocks whose streams are done, in each stream's order (``process_events``)."""
        for s in list(self._outstanding):
            queue = self._outstanding[s]
            while queue and queue[0][1]:
                block = queue.popleft()[0]
                block.event_count -= 1
                if block.event_count == 0:
                    self._free_block(block)
            if not queue:
                del self._outstanding[s]

    def empty_cache(self) -> None:
        """Wait for all streams, then return every wholly free segment to CUDA (``release_cached_blocks``)."""
        self._release_cached_blocks("empty_cache")

    def address(self, handle: int) -> int:
        """Fake device address of a live allocation."""
        return self._block_of(handle, "address").addr

    def explain(self, event_index: int) -> str:
        """The decision behind event `event_index` of `log`, in words."""
        n = len(self._events)
        if not -n <= event_index < n:
            raise AllocatorError(f"event {event_index} does not exist; the log has {n} events")
        return self.log[event_index].explanation

    @property
    def log(self) -> EventLog:
        """Every event so far, in order; items are `AllocatorEvent` objects built on access."""
        return EventLog(self._events)

    def trace(self) -> list[dict[str, Any]]:
        """All events as ``torch.cuda.memory._snapshot()['device_traces'][0]`` entries."""
        return [e.to_trace() for e in self.log]

    def stats(self) -> dict[str, int]:
        """Counters under ``torch.cuda.memory_stats()`` key names (``allocated_bytes.all.current`` ...)."""
        out: dict[str, int] = {}
        cur, peak, acc = self._cur, self._peak, self._acc
        for k, name in enumerate(_STAT_NAMES):
            for p, pool in enumerate(_POOL_NAMES):
                i = 3 * k + p
                out[f"{name}.{pool}.current"] = cur[i]
                out[f"{name}.{pool}.peak"] = peak[i]
                out[f"{name}.{pool}.allocated"] = acc[i]
                out[f"{name}.{pool}.freed"] = acc[i] - cur[i]
        for name, st in (("oversize_allocations", self._oversize_alloc), ("oversize_segments", self._oversize_seg)):
            for field in ("current", "peak", "allocated", "freed"):
                out[f"{name}.{field}"] = getattr(st, field)
        out.update(self._counters)
        out["max_split_size"] = -1 if self.max_split_size_mb is None else self.max_split_size_mb * MiB
        return out

    def segments(self) -> list[dict[str, Any]]:
        """Segments with their blocks, shaped like ``torch.cuda.memory._snapshot()['segments']``, by address."""
        out: list[dict[str, Any]] = []
        heads: list[_Block] = []
        for seg in self._segments.values():
            b: _Block | None = self._by_addr[seg.addr]
            if not seg.expandable:
                heads.append(self._by_addr[seg.addr])
                continue
            while b is not None:  # one entry per contiguous mapped range
                if b.mapped and (b.prev is None or not b.prev.mapped):
                    heads.append(b)
                b = b.next
        for head in sorted(heads, key=lambda h: h.addr):
            blocks = []
            total = allocated = active = requested = 0
            b = head
            while b is not None and b.mapped:
                is_active = b.allocated or b.event_count > 0 or bool(b.stream_uses)
                state = "active_allocated" if b.allocated else ("active_pending_free" if is_active else "inactive")
                blocks.append({"address": b.addr, "size": b.size, "requested_size": b.requested, "state": state,
                               "frames": []})
                total += b.size
                if b.allocated:
                    allocated += b.size
                if is_active:
                    active += b.size
                    requested += b.requested
                b = b.next
            out.append({
                "device": 0, "address": head.addr, "total_size": total, "allocated_size": allocated,
                "active_size": active, "requested_size": requested, "stream": head.stream,
                "segment_type": "small" if head.small else "large", "segment_pool_id": (0, 0),
                "is_expandable": head.seg.expandable, "frames": [], "blocks": blocks,
            })
        return out

    # ------------------------------------------------------------------ events and stats

    def _emit(self, action: str, addr: int, size: int, stream: int, why: Any) -> int:
        self._events.append((action, addr, size, stream, why))
        return len(self._events) - 1

    def _add(self, stat: int, small: bool, n: int) -> None:
        """Change one stat (all + its pool) by n, keeping peaks and the running total of increases."""
        cur = self._cur
        j = stat + (1 if small else 2)
        cur[stat] += n
        cur[j] += n
        if n > 0:
            acc, peak = self._acc, self._peak
            acc[stat] += n
            acc[j] += n
            if cur[stat] > peak[stat]:
                peak[stat] = cur[stat]
            if cur[j] > peak[j]:
                peak[j] = cur[j]

    def _rounding_kind(self, size: int, rounded: int) -> str:
        if size < MIN_BLOCK_SIZE:
            return "min"
        div = _divisions_for(self._div_table, size)
        if div > 1 and size > MIN_BLOCK_SIZE * div:
            return "pow2"
        return "512"

    def _block_of(self, handle: int, verb: str) -> _Block:
        if isinstance(handle, bool) or not isinstance(handle, int):
            raise AllocatorError(f"{verb}({handle!r}): pass the handle malloc() returned (an int), not a "
                                 f"{type(handle).__name__}")
        block = self._live.get(handle)
        if block is not None:
            return block
        if handle in self._dead:
            raise AllocatorError(f"{verb}({handle}): handle {handle} was already freed (event "
                                 f"{self._dead[handle]}); free each handle malloc() returned once")
        raise AllocatorError(f"{verb}({handle!r}): unknown handle; use a value returned by malloc()")

    # ------------------------------------------------------------------ free-block index

    def _tree(self, small: bool, stream: int) -> _SortedInts:
        """The free-block index of one (pool, stream); blocks keep a reference to theirs."""
        tree = self._free.get((small, stream))
        if tree is None:
            tree = self._free[(small, stream)] = _SortedInts()
        return tree

    def _insert_free(self, b: _Block) -> None:
        b.gc_base = self._gc_calls[b.small]
        b.tree.add(b.size << _SHIFT | b.addr)

    def _remove_free(self, b: _Block) -> None:
        b.tree.remove(b.size << _SHIFT | b.addr)

    def _pool_free_blocks(self, small: bool) -> list[_Block]:
        """Reusable blocks of a pool in torch's set order: (stream, size, address)."""
        out: list[_Block] = []
        for (is_small, _stream), tree in sorted(self._free.items(), key=lambda kv: kv[0][1]):
            if is_small == small:
                out.extend(self._by_addr[k & _MASK] for k in tree)
        return out

    def _set_addr(self, b: _Block, addr: int) -> None:
        del self._by_addr[b.addr]
        b.addr = addr
        self._by_addr[addr] = b

    # ------------------------------------------------------------------ malloc steps

    def _get_free_block(self, small: bool, stream: int, size: int, why: dict[str, Any]) -> _Block | None:
        """Best fit: the smallest cached block ≥ size on this (pool, stream), with the oversize rules (``get_free_block``)."""
        self._gc_calls[small] += 1
        why["miss"] = "none"
        tree = self._free.get((small, stream))
        key = tree.ceil(size << _SHIFT) if tree else None
        if tree is None or key is None:
            return None
        block = self._by_addr[key & _MASK]
        if block.seg.expandable and self.expandable_segments:
            # best fit counts the unmapped space after an expandable block as part of its size
            def grow(b: _Block) -> int:
                return b.size + (b.next.size if b.next is not None and not b.next.mapped else 0)
            for k in tree.iter_from(key + 1):
                nxt = self._by_addr[k & _MASK]
                if not block.seg.expandable or grow(nxt) >= grow(block):
                    break
                block = nxt
        if size < self.max_split_size <= block.size:
            why["miss"], why["candidate"] = "oversize", block.size
            return None
        if size >= self.max_split_size and block.size >= size + self.max_non_split_rounding:
            why["miss"], why["candidate"] = "too_big", block.size
            return None
        self._remove_free(block)
        return block

    def _allocate_new(self, small: bool, stream: int, size: int, why: dict[str, Any]) -> _Block:
        """No cached block: GC, then new memory, then release cached memory and retry, then OOM (``malloc``)."""
        seg_size = allocation_size(size)
        if self.garbage_collection_threshold and self.capacity is not None:
            freed = self._garbage_collect()
            if freed:
                why["gc"] = freed
        retries: list[str] = []
        block = self._alloc_block(small, stream, size, seg_size, why)
        if block is None and self._release_available_cached_blocks(small, stream, size):
            retries.append("released oversize cached blocks (max_split_size) and retried")
            block = self._alloc_block(small, stream, size, seg_size, why)
        if block is None:
            self._release_cached_blocks("retry after a failed allocation")
            self._counters["num_alloc_retries"] += 1
            retries.append("cudaMalloc failed → freed every wholly free cached segment and retried")
            block = self._alloc_block(small, stream, size, seg_size, why)
        why["retries"] = retries
        if block is None:
            self._oom(small, stream, size, seg_size)
        assert block is not None
        return block

    def _new_address(self, size: int) -> int:
        """Where cudaMalloc puts a new segment: the address a replayed recording's driver returned, else the next."""
        while self._driver_addresses:
            addr = self._driver_addresses.popleft()
            if not any(s.addr < addr + size and addr < s.addr + s.size for s in self._segments.values()):
                self._foreign_addresses = True
                return addr
        addr = self._next_addr
        if self._foreign_addresses:  # a recorded address may sit where the next one would go: step past it
            for seg in sorted(self._segments.values(), key=lambda seg: seg.addr):
                if seg.addr < addr + size and addr < seg.addr + seg.size:
                    addr = -(-(seg.addr + seg.size) // ROUND_LARGE) * ROUND_LARGE
        self._next_addr = addr + -(-size // ROUND_LARGE) * ROUND_LARGE
        return addr

    def _alloc_block(self, small: bool, stream: int, size: int, seg_size: int, why: dict[str, Any]) -> _Block | None:
        """cudaMalloc a new segment (or grow an expandable one) if the capacity allows (``alloc_block``)."""
        if self.capacity is not None and self._reserved + seg_size > self.capacity:
            return None
        if self.expandable_segments:
            mapped_before = self._reserved
            block = self._try_allocate_expandable_block(small, stream, size)
            why["source"], why["mapped"] = "expandable", self._reserved - mapped_before
            return block
        addr = self._new_address(seg_size)
        seg = _Segment(addr, seg_size, stream, small, False, seg_size)
        self._segments[addr] = seg
        block = _Block(addr, seg_size, stream, small, seg, self._tree(small, stream))
        self._by_addr[addr] = block
        self._reserved += seg_size
        self._add(_SEGMENT, small, 1)
        self._add(_RESERVED_BYTES, small, seg_size)
        if seg_size >= self.max_split_size:
            self._oversize_seg.inc(1)
        self._counters["num_device_alloc"] += 1
        self._emit("segment_alloc", addr, seg_size, stream, {"reason": f"no cached block for a {size:,} B request"})
        why["source"], why["seg_size"] = "segment", seg_size
        return block

    def _should_split(self, block: _Block, size: int) -> bool:
        """Small pool (or expandable mode): split if ≥ 512 B remain; large: if > 1 MiB remain and size < max_split."""
        remaining = block.size - size
        if block.small or self.expandable_segments:
            return remaining >= MIN_BLOCK_SIZE
        return size < self.max_split_size and remaining > SMALL_SIZE

    def _alloc_found_block(self, block: _Block, size: int, orig: int, why: dict[str, Any]) -> _Block:
        """Split off the remainder if the rules say so, mark allocated, count (``alloc_found_block``)."""
        split = self._should_split(block, size)
        why["split"], why["remainder"] = split, block.size - size
        why["expandable_rules"], why["oversize"] = self.expandable_segments, size >= self.max_split_size
        small = block.small
        already_split = block.is_split
        if split:
            rest = block
            block = _Block(rest.addr, size, rest.stream, small, rest.seg, rest.tree)
            block.prev, block.next = rest.prev, rest
            if rest.prev is not None:
                rest.prev.next = block
            rest.prev = block
            by_addr = self._by_addr
            by_addr[block.addr] = block
            rest.addr += size
            rest.size -= size
            by_addr[rest.addr] = rest
            rest.gc_base = self._gc_calls[small]
            rest.tree.add(rest.size << _SHIFT | rest.addr)
            if not block.seg.expandable:
                if already_split:
                    self._add(_INACTIVE_SPLIT_BYTES, small, -size)
                else:
                    self._add(_INACTIVE_SPLIT_BYTES, small, rest.size)
                    self._add(_INACTIVE_SPLIT, small, 1)
        elif already_split and not block.seg.expandable:
            self._add(_INACTIVE_SPLIT_BYTES, small, -block.size)
            self._add(_INACTIVE_SPLIT, small, -1)
        block.allocated = True
        block.requested = orig
        block.handle = self._next_handle
        self._next_handle += 1
        self._live[block.handle] = block
        if why.get("rounding") == "pow2":
            why["divisions"] = _divisions_for(self._div_table, orig)
        self._emit("alloc", block.addr, orig, block.stream, why)
        cur, peak, acc = self._cur, self._peak, self._acc
        j = 1 if small else 2
        n = block.size
        for i in (_ALLOCATION, _ALLOCATION + j, _ACTIVE, _ACTIVE + j):  # counts
            c = cur[i] = cur[i] + 1
            acc[i] += 1
            if c > peak[i]:
                peak[i] = c
        for i in (_ALLOCATED_BYTES, _ALLOCATED_BYTES + j, _ACTIVE_BYTES, _ACTIVE_BYTES + j):  # bytes
            c = cur[i] = cur[i] + n
            acc[i] += n
            if c > peak[i]:
                peak[i] = c
        for i in (_REQUESTED_BYTES, _REQUESTED_BYTES + j):
            c = cur[i] = cur[i] + orig
            acc[i] += orig
            if c > peak[i]:
                peak[i] = c
        if block.size >= self.max_split_size:
            self._oversize_alloc.inc(1)
        return block

    def _oom(self, small: bool, stream: int, size: int, seg_size: int) -> None:
        if self.capacity is None:  # no capacity: only an expandable segment's virtual reservation can run out
            message = (f"Simulated CUDA out of memory. Tried to allocate {_mib(seg_size)} (a {size:,} B request on "
                       f"stream {stream}), more than the expandable segment's virtual reservation "
                       f"({_mib(DEFAULT_VIRTUAL)} without a capacity) can map. Check the units (sizes are bytes), or "
                       "give the simulator a capacity= to model a real device.")
            self._counters["num_ooms"] += 1
            index = self._emit("oom", 0, size, stream, {"message": message})
            raise SimulatedOOM(message, self.stats(), self.segments(), index)
        free = self.capacity - self._reserved
        allocated = self._cur[_ALLOCATED_BYTES]
        hint = "max_split_size_mb" if self.expandable_segments else "expandable_segments=True or max_split_size_mb"
        message = (
            f"Simulated CUDA out of memory. Tried to allocate {_mib(seg_size)} (a {size:,} B request on stream "
            f"{stream}). Capacity {_mib(self.capacity)}, of which {_mib(free)} is free. Of the reserved memory "
            f"{_mib(allocated)} is allocated and {_mib(self._reserved - allocated)} is reserved but unallocated "
            "(free pieces of partly used segments, which cannot be returned). Cached whole segments were already "
            f"freed and the allocation retried. Try {hint} to reduce fragmentation, or free tensors first."
        )
        self._counters["num_ooms"] += 1
        index = self._emit("oom", free, size, stream, {"message": message})
        raise SimulatedOOM(message, self.stats(), self.segments(), index)

    # ------------------------------------------------------------------ free steps

    def _free_requested(self, block: _Block, external: bool) -> None:
        small = block.small
        block.allocated = False
        del self._live[block.handle]
        cur = self._cur
        j = 1 if small else 2
        cur[_ALLOCATION] -= 1
        cur[_ALLOCATION + j] -= 1
        cur[_ALLOCATED_BYTES] -= block.size
        cur[_ALLOCATED_BYTES + j] -= block.size
        if block.size >= self.max_split_size:
            self._oversize_alloc.dec(1)
        uses = block.stream_uses
        pending = ("(recorded trace)",) if external else (tuple(sorted(uses)) if uses else ())
        events = self._events
        events.append(("free_requested", block.addr, block.requested, block.stream,
                       (block.handle, block.size, pending)))
        self._dead[block.handle] = len(events) - 1
        if external:
            block.event_count += 1
        elif uses:
            for s in sorted(uses):  # insert_events: one event per stream that used the block
                block.event_count += 1
                self._outstanding.setdefault(s, deque()).append([block, False])
            block.stream_uses = None
        else:
            self._free_block(block)

    def _try_merge(self, dst: _Block, src: _Block | None) -> int:
        """Absorb the neighbour `src` into `dst` if it is free and mapped alike (``try_merge_blocks``)."""
        if src is None or not src.reusable or src.mapped != dst.mapped:
            return 0
        if dst.prev is src:
            dst.prev = src.prev
            if dst.prev is not None:
                dst.prev.next = dst
            self._set_addr(dst, src.addr)
        else:
            dst.next = src.next
            if dst.next is not None:
                dst.next.prev = dst
        if src.mapped:
            self._remove_free(src)
        else:
            self._unmapped[(src.small, src.stream)].remove(src.addr)
        if self._by_addr.get(src.addr) is src:
            del self._by_addr[src.addr]
        dst.size += src.size
        return src.size

    def _free_block(self, block: _Block) -> None:
        """Return a block to its pool and merge it with free neighbours in the same segment (``free_block``)."""
        small = block.small
        original = block.size
        addr, requested = block.addr, block.requested
        prev, nxt = block.prev, block.next
        was_split = prev is not None or nxt is not None
        merged_prev = self._try_merge(block, prev) if prev is not None and not prev.allocated else 0
        merged_next = self._try_merge(block, nxt) if nxt is not None and not nxt.allocated else 0
        block.gc_base = self._gc_calls[small]
        block.tree.add(block.size << _SHIFT | block.addr)
        split_now = block.prev is not None or block.next is not None
        expandable = block.seg.expandable
        self._events.append(("free_completed", addr, requested, block.stream,
                             (small, original, merged_prev, merged_next, block.size, block.addr,
                              was_split and not split_now and not expandable)))
        if not expandable:  # torch leaves expandable segments out of inactive_split
            net_blocks = -(merged_prev > 0) - (merged_next > 0) + split_now
            net_bytes = -merged_prev - merged_next + (block.size if split_now else 0)
            if net_blocks:
                self._add(_INACTIVE_SPLIT, small, net_blocks)
            if net_bytes:
                self._add(_INACTIVE_SPLIT_BYTES, small, net_bytes)
        cur = self._cur
        j = 1 if small else 2
        cur[_ACTIVE] -= 1
        cur[_ACTIVE + j] -= 1
        cur[_ACTIVE_BYTES] -= original
        cur[_ACTIVE_BYTES + j] -= original
        cur[_REQUESTED_BYTES] -= requested
        cur[_REQUESTED_BYTES + j] -= requested

    # ------------------------------------------------------------------ releasing memory

    def _release_block(self, block: _Block, reason: str) -> None:
        """cudaFree a whole cached segment (``release_block``)."""
        self._remove_free(block)
        del self._by_addr[block.addr]
        del self._segments[block.addr]
        self._reserved -= block.size
        self._add(_SEGMENT, block.small, -1)
        self._add(_RESERVED_BYTES, block.small, -block.size)
        if block.size >= self.max_split_size:
            self._oversize_seg.dec(1)
        self._counters["num_device_free"] += 1
        self._emit("segment_free", block.addr, block.size, block.stream, {"reason": reason})

    def _synchronize_and_free_events(self) -> None:
        self._counters["num_sync_all_streams"] += 1
        for queue in self._outstanding.values():
            for entry in queue:
                entry[1] = True
        self.process_events()

    def _release_cached_blocks(self, reason: str) -> None:
        """Sync all streams, then free every unsplit cached block, large pool then small (``release_cached_blocks``)."""
        self._synchronize_and_free_events()
        for small in (False, True):
            to_unmap = []
            for b in self._pool_free_blocks(small):
                if b.seg.expandable:
                    to_unmap.append(b)
                elif not b.is_split:
                    self._release_block(b, reason)
            for b in to_unmap:
                self._unmap_block(b, reason)

    def _release_available_cached_blocks(self, small: bool, stream: int, size: int) -> bool:
        """With max_split_size set: free one big enough oversize cached block, else the largest ones until enough."""
        if self.max_split_size_mb is None:
            return False
        mss = self.max_split_size_mb * MiB
        target = max(size, mss)
        tree = self._free.get((small, stream))
        if not tree:
            return False
        key = tree.ceil(target << _SHIFT)
        if key is not None and not self._by_addr[key & _MASK].seg.expandable:
            block = self._by_addr[key & _MASK]
            if not block.is_split:
                self._release_block(block, "max_split_size: oversize cached block released to make room")
                return True
        chosen, total = [], 0
        for k in tree.iter_desc():
            b = self._by_addr[k & _MASK]
            if total >= target or b.size < mss:
                break
            if not b.seg.expandable and not b.is_split:
                chosen.append(b)
                total += b.size
        for b in chosen:
            self._release_block(b, "max_split_size: oversize cached blocks released to make room")
        return total >= target

    def _garbage_collect(self) -> int:
        """Free unsplit large cached blocks older than the average age until under the threshold (GC)."""
        assert self.capacity is not None and self.garbage_collection_threshold is not None
        threshold = int(self.garbage_collection_threshold * self.capacity)
        if self._reserved <= threshold:
            return 0
        target = self._reserved - threshold
        clock = self._gc_calls[False]
        candidates = [b for b in self._pool_free_blocks(False) if not b.is_split]
        total_age = sum(clock - b.gc_base for b in candidates)
        count = len(candidates)
        reclaimed = 0
        freed_one = True
        while reclaimed < target and freed_one and count > 0:
            age_threshold = total_age / count
            freed_one = False
            keep = []
            for b in candidates:
                age = clock - b.gc_base
                if not b.seg.expandable and age >= age_threshold:
                    freed_one = True
                    reclaimed += b.size
                    total_age -= age
                    count -= 1
                    self._release_block(b, f"garbage collection: reserved memory above "
                                           f"{self.garbage_collection_threshold:g} × capacity; block unused for "
                                           f"{age} searches")
                else:
                    keep.append(b)
            candidates = keep
        return reclaimed

    # ------------------------------------------------------------------ expandable segments

    def _new_expandable(self, small: bool, stream: int) -> _Block:
        page = SMALL_BUFFER if small else LARGE_BUFFER
        virtual = self.capacity + self.capacity // 8 if self.capacity is not None else DEFAULT_VIRTUAL
        virtual = -(-virtual // page) * page
        addr = self._new_address(virtual)
        seg = _Segment(addr, virtual, stream, small, True, page)
        self._segments[addr] = seg
        block = _Block(addr, virtual, stream, small, seg, self._tree(small, stream))
        block.mapped = False
        self._by_addr[addr] = block
        bisect.insort(self._unmapped.setdefault((small, stream), []), addr)
        return block

    def _find_expandable_block(self, small: bool, stream: int, size: int) -> _Block:
        """Lowest address where free + unmapped space in a row can hold `size`, else a new reservation."""
        def room(b: _Block | None) -> bool:
            got = 0
            while got < size and b is not None and b.reusable:
                got += b.size
                b = b.next
            return got >= size
        for addr in self._unmapped.get((small, stream), []):
            c = self._by_addr[addr]
            if c.prev is not None and c.prev.reusable:
                c = c.prev
            if room(c):
                return c
        return self._new_expandable(small, stream)

    def _map_block(self, block: _Block, size: int) -> bool:
        """Map whole pages from the start of an unmapped block and merge with free neighbours (``map_block``)."""
        seg = block.seg
        end = seg.addr + -(-(block.addr + size - seg.addr) // seg.page) * seg.page
        mapped = min(end - block.addr, block.size)
        if self.capacity is not None and self._reserved + mapped > self.capacity:
            return False
        self._unmapped[(block.small, block.stream)].remove(block.addr)
        block.mapped = True
        if mapped < block.size:
            rest = _Block(block.addr + mapped, block.size - mapped, block.stream, block.small, seg, block.tree)
            rest.mapped = False
            rest.prev, rest.next = block, block.next
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = mapped
            self._by_addr[rest.addr] = rest
            bisect.insort(self._unmapped[(block.small, block.stream)], rest.addr)
        start = block.addr
        self._try_merge(block, block.prev)
        self._try_merge(block, block.next)
        self._insert_free(block)
        self._reserved += mapped
        self._add(_RESERVED_BYTES, block.small, mapped)
        self._counters["num_device_alloc"] += 1
        self._emit("segment_map", start, mapped, block.stream, {"reason": "expandable segment grows"})
        return True

    def _try_allocate_expandable_block(self, small: bool, stream: int, size: int) -> _Block | None:
        candidate = self._find_expandable_block(small, stream, size)
        if not candidate.mapped and not self._map_block(candidate, min(candidate.size, size)):
            return None
        while candidate.size < size:
            nxt = candidate.next
            if nxt is None or nxt.mapped:  # past the segment's virtual reservation: it cannot grow that far
                return None
            if not self._map_block(nxt, min(size - candidate.size, nxt.size)):
                return None
            candidate = nxt  # map_block merged the free candidate into nxt
        self._remove_free(candidate)
        return candidate

    def _unmap_block(self, block: _Block, reason: str) -> None:
        """Unmap the whole pages inside a free expandable block; drop the reservation if nothing stays mapped."""
        seg = block.seg
        first = seg.addr + -(-(block.addr - seg.addr) // seg.page) * seg.page
        last = seg.addr + ((block.addr + block.size - seg.addr) // seg.page) * seg.page
        if first >= last:
            return
        self._remove_free(block)
        key = (block.small, block.stream)
        if first > block.addr:
            before = _Block(block.addr, first - block.addr, block.stream, block.small, seg, block.tree)
            before.prev, before.next = block.prev, block
            if block.prev is not None:
                block.prev.next = before
            block.prev = before
            self._by_addr[before.addr] = before
            self._insert_free(before)
        end = block.addr + block.size
        if last < end:
            after = _Block(last, end - last, block.stream, block.small, seg, block.tree)
            after.prev, after.next = block, block.next
            if block.next is not None:
                block.next.prev = after
            block.next = after
            self._by_addr[after.addr] = after
            self._insert_free(after)
        if self._by_addr.get(block.addr) is block:
            del self._by_addr[block.addr]
        block.addr, block.size, block.mapped = first, last - first, False
        self._by_addr[first] = block
        self._try_merge(block, block.prev)
        self._try_merge(block, block.next)
        bisect.insort(self._unmapped.setdefault(key, []), block.addr)
        self._reserved -= last - first
        self._add(_RESERVED_BYTES, block.small, first - last)
        self._counters["num_device_free"] += 1
        self._emit("segment_unmap", first, last - first, block.stream, {"reason": reason})
        if not block.is_split:  # nothing mapped any more: give the reservation back
            self._unmapped[key].remove(block.addr)
            del self._by_addr[block.addr]
            del self._segments[seg.addr]

    # ------------------------------------------------------------------ replay helpers

    def _free_external(self, handle: int) -> None:
        """A recorded free whose completion comes later in the trace (the block was used on other streams)."""
        self._free_requested(self._block_of(handle, "free"), external=True)

    def _complete_external(self, block: _Block) -> None:
        if block.event_count > 0:
            block.event_count -= 1
            if block.event_count == 0:
                self._free_block(block)


# ---------------------------------------------------------------------------------------------- replay


def replay(trace_events: Iterable[Mapping[str, Any]], mirror_releases: bool = True, **settings: Any) -> CachingAllocatorSim:
    """Re-run a recorded ``device_traces`` list on a simulator with `settings`; the sim decides everything else.

    alloc / free_requested / free_completed drive the simulator (recorded addresses map to handles).
    segment_* and oom entries are the recorded allocator's own decisions and are not replayed, except
    that a run of segment_free/segment_unmap entries (the trace does not record ``empty_cache()`` itself)
    makes the simulator call ``empty_cache()`` when `mirror_releases` is true. A recorded segment_alloc's
    address becomes the simulator's next segment address (cudaMalloc's choice, not the caching allocator's:
    equal-size free blocks are taken lowest address first, so the order matters). With a `capacity`, an
    oom entry is replayed as the request that failed. Frees of addresses allocated before recording began
    are skipped and counted in ``sim.replay_report``, as are allocations that run out of memory under the
    new settings and recorded OOMs the simulator could serve.
    """
    unknown = set(settings) - set(_SETTINGS)
    if unknown:
        raise AllocatorError(f"unknown setting(s) {sorted(unknown)}; use the simulator's settings: {list(_SETTINGS)}")
    sim = CachingAllocatorSim(**settings)
    events = _checked_events(trace_events)
    handles: dict[int, int] = {}
    pending: dict[int, _Block] = {}
    report = {"events": len(events), "skipped_frees": 0, "failed_allocs": 0, "mirrored_releases": 0,
              "ooms_served": 0}
    skip_next = False
    in_release = False
    n = len(events)
    for i, ev in enumerate(events):
        if skip_next:
            skip_next = False
            continue
        action = ev.get("action")
        if action in ("segment_free", "segment_unmap"):
            if mirror_releases and not in_release:
                sim.empty_cache()
                report["mirrored_releases"] += 1
            in_release = True
            continue
        in_release = False
        if action == "segment_alloc" and not settings.get("expandable_segments"):
            sim._driver_addresses.append(ev["addr"])
        elif action == "oom" and sim.capacity is not None:
            try:
                sim.free(sim.malloc(ev["size"], ev.get("stream", 0)))
                report["ooms_served"] += 1
            except SimulatedOOM:
                pass
        elif action == "alloc":
            try:
                handles[ev["addr"]] = sim.malloc(ev["size"], ev.get("stream", 0))
            except SimulatedOOM:
                report["failed_allocs"] += 1
            sim._driver_addresses.clear()   # an address the simulator did not use belongs to no later segment
        elif action == "free_requested":
            addr = ev["addr"]
            h = handles.pop(addr, None)
            if h is None:
                report["skipped_frees"] += 1
                continue
            nxt = events[i + 1] if i + 1 < n else None
            if nxt is not None and nxt.get("action") == "free_completed" and nxt.get("addr") == addr:
                sim.free(h)
                skip_next = True
            else:
                pending[addr] = sim._live[h]
                sim._free_external(h)
        elif action == "free_completed":
            block = pending.pop(ev["addr"], None)
            if block is not None:
                sim._complete_external(block)
    sim.replay_report = report
    return sim


_SETTINGS = ("capacity", "max_split_size_mb", "roundup_power2_divisions", "garbage_collection_threshold",
             "expandable_segments", "max_non_split_rounding_mb")
_EVENT_HELP = ("replay() takes the trace entries of a memory snapshot (snapshot['device_traces'][device] or "
               "MemorySnapshot.events as dicts): each a dict with 'action' and, for alloc/free, an int 'addr' "
               "and 'size'")


def _checked_events(trace_events: Any) -> list[Mapping[str, Any]]:
    """The events as a list, each alloc/free one with int addr and size; AllocatorError saying which is not."""
    if isinstance(trace_events, (str, bytes, Mapping)) or not isinstance(trace_events, Iterable):
        raise AllocatorError(f"expected a list of trace events, got {type(trace_events).__name__}; {_EVENT_HELP}")
    events = trace_events if isinstance(trace_events, list) else list(trace_events)
    for i, ev in enumerate(events):
        if not isinstance(ev, Mapping):
            raise AllocatorError(f"event {i} is a {type(ev).__name__}, not a dict; {_EVENT_HELP}")
        if ev.get("action") in ("alloc", "free_requested", "free_completed"):
            for key in ("addr", "size") if ev["action"] == "alloc" else ("addr",):
                v = ev.get(key)
                if isinstance(v, bool) or not isinstance(v, int):
                    raise AllocatorError(f"event {i} ({ev['action']}): {key}={v!r} must be an int; {_EVENT_HELP}")
            stream = ev.get("stream", 0)
            if isinstance(stream, bool) or not isinstance(stream, int):
                raise AllocatorError(f"event {i} ({ev['action']}): stream={stream!r} must be an int; {_EVENT_HELP}")
    return events


def counterfactual(trace_events: Iterable[Mapping[str, Any]], **settings: Any) -> dict[str, int]:
    """Replay a trace under other settings: peak reserved and allocated bytes, segments at the end, OOMs."""
    sim = replay(trace_events, **settings)
    st = sim.stats()
    return {
        "reserved_peak": st["reserved_bytes.all.peak"],
        "allocated_peak": st["allocated_bytes.all.peak"],
        "segments": len(sim.segments()),
        "segments_peak": st["segment.all.peak"],
        "ooms": st["num_ooms"],
    }
