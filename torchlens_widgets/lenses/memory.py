"""The memory lens: CUDA memory snapshots and CPU profiler memory events, as plain data.

Two sources feed one shape. `load_snapshot` reads what ``torch.cuda.memory._snapshot()`` returns (a
dict, a pickle written by ``torch.cuda.memory._dump_snapshot``, or a gzip-compressed pickle / JSON
file); `profile_memory` runs one call under ``torch.profiler`` with memory profiling on the CPU. Both
give a `MemorySnapshot`: `events` (the allocator's trace), `timeline()` (allocated / active / reserved
bytes after every event), `allocations()` (one band per allocation) and `state_at(i)` (segments and
blocks after event i, rebuilt from the trace).

Facts the replay relies on (torch 2.13, ``c10/cuda/CUDACachingAllocator.cpp``, ``torch/csrc/cuda``):

- A trace entry's ``size`` is the *requested* size (``alloc``, ``free_requested`` and
  ``free_completed`` all report ``block->requested_size``), so the trace's "allocated" is torch's
  ``requested_bytes``, not the 512-byte-rounded ``allocated_bytes``; rounding and split remainders show
  as free space in `state_at`.
- ``free_requested`` ends an allocation (torch's ``allocated_bytes`` drops there); the block stays
  *active* until ``free_completed`` (immediately after, or later when ``record_stream`` made the block
  wait for other streams). ``segment_alloc`` / ``segment_free`` (cudaMalloc / cudaFree) and
  ``segment_map`` / ``segment_unmap`` (expandable segments) change reserved bytes.
- ``oom`` carries ``device_free`` instead of ``addr``; ``snapshot`` marks when a snapshot was taken.
- The trace is a ring buffer (``max_entries``): early events may be gone. A free of an address never
  allocated in the trace is counted as *pre-existing* (live from before the trace) and the timeline
  says ``truncated=True``; blocks and segments in the final state that the trace never created are
  pre-existing too. Nothing here raises on such traces.
- Unknown keys are kept in ``extra``, unknown actions become ``'unknown'`` (the original name kept in
  ``raw_action``), missing frames become ``()``; every such repair adds a line to ``notes``.

On the CPU, torch's profiler (``profile_memory=True``) reports every allocation and free with its
exact size, and its private memory profiler (``prof._memory_profile()``) assigns categories
(parameter, optimizer state, input, temporary, activation, gradient, autograd detail). The CPU
allocator caches nothing, so reserved equals allocated there. Kineto prints ``USDT: ...
profiler_start/stop`` lines (and a CPUAllocator warning about blocks of unknown size) on file
descriptor 2; `profile_memory` captures fd 2 while the profiler runs, drops those lines and writes
any other output back to ``sys.stderr``, so notebooks stay clean.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from .files import gunzip_bounded, read_bounded

__all__ = [
    "ACTIONS",
    "Allocation",
    "Block",
    "BlockState",
    "CudaUnavailableError",
    "Frame",
    "MemoryEvent",
    "MemoryProfile",
    "MemorySnapshot",
    "MemoryState",
    "Segment",
    "SegmentState",
    "SnapshotError",
    "Timeline",
    "load_snapshot",
    "profile_memory",
    "snapshot",
    "start_recording",
    "stop_recording",
]

#: Trace actions torch 2.13 writes, in the order of its ``TraceEntry::Action`` enum.
ACTIONS = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "oom",
    "snapshot",
)
BLOCK_STATES = ("active_allocated", "active_pending_free", "inactive")
NO_CUDA = "no CUDA device: load a recorded snapshot with load_snapshot(...) or use the simulator"

Kind = Literal["cuda", "cpu"]
_SEGMENT_KEYS = frozenset(
    "device address total_size allocated_size active_size requested_size stream segment_type "
    "segment_pool_id is_expandable frames blocks".split()
)
_BLOCK_KEYS = frozenset("address size requested_size state frames".split())
_EVENT_KEYS = frozenset("action addr size stream time_us frames device_free".split())
_TOP_KEYS = frozenset(("segments", "device_traces", "allocator_settings"))
# torch's own keys this lens does not draw: kept in .extra without a note (external_annotations, torch ≥ 2.6:
# the annotations recorded with the trace)
_TORCH_KEYS_KEPT = frozenset(("external_annotations",))


class SnapshotError(ValueError):
    """Raised when input is not a memory snapshot at all; the message says what was expected."""


class CudaUnavailableError(RuntimeError):
    """Raised by the live helpers when torch has no CUDA device."""


# ------------------------------------------------------------------------------ parsed snapshot data


@dataclass(frozen=True)
class Frame:
    """One stack frame; snapshot frames list the innermost call first."""

    filename: str
    line: int
    name: str

    def __str__(self) -> str:
        return f"{self.name} ({self.filename}:{self.line})" if self.filename else self.name

    def to_dict(self) -> dict[str, Any]:
        return {"filename": self.filename, "line": self.line, "name": self.name}


@dataclass(frozen=True)
class Block:
    """A block of a segment in the final snapshot: allocated, waiting for other streams, or free."""

    address: int
    size: int
    requested_size: int
    state: str
    frames: tuple[Frame, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "size": self.size,
            "requested_size": self.requested_size,
            "state": self.state,
            "frames": [f.to_dict() for f in self.frames],
        }


@dataclass(frozen=True)
class Segment:
    """One cudaMalloc'd (or, if expandable, mapped) range in the final snapshot and its blocks."""

    device: int
    address: int
    total_size: int
    allocated_size: int
    active_size: int
    requested_size: int
    stream: int
    segment_type: str
    segment_pool_id: tuple[int, ...]
    is_expandable: bool
    blocks: tuple[Block, ...]
    frames: tuple[Frame, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "address": self.address,
            "total_size": self.total_size,
            "allocated_size": self.allocated_size,
            "active_size": self.active_size,
            "requested_size": self.requested_size,
            "stream": self.stream,
            "segment_type": self.segment_type,
            "segment_pool_id": list(self.segment_pool_id),
            "is_expandable": self.is_expandable,
            "frames": [f.to_dict() for f in self.frames],
            "blocks": [b.to_dict() for b in self.blocks],
        }


@dataclass(frozen=True)
class MemoryEvent:
    """One allocator trace entry; `index` is its position in `MemorySnapshot.events`."""

    index: int
    action: str
    addr: int | None
    size: int
    stream: int = 0
    time_us: float | None = None
    frames: tuple[Frame, ...] = ()
    device_free: int | None = None  # oom only: what CUDA still reported free
    raw_action: str | None = None  # the original name when `action` is 'unknown'
    category: str | None = None  # CPU profiler only: what torch's memory profiler says the tensor is
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "index": self.index,
            "action": self.action,
            "addr": self.addr,
            "size": self.size,
            "stream": self.stream,
            "time_us": self.time_us,
            "frames": [f.to_dict() for f in self.frames],
        }
        for k in ("device_free", "raw_action", "category"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        return d


# ------------------------------------------------------------------------------ derived data


@dataclass(frozen=True)
class Allocation:
    """One allocation's lifetime as event indices: a band from `start` to `end`.

    `start` is None for an allocation made before the trace began (`preexisting`); `end` is the
    ``free_requested`` (or, without one, ``free_completed``) index, None while still allocated at the
    end; `completed` is the ``free_completed`` index. Sizes are the trace's (requested) sizes.
    """

    addr: int
    size: int
    stream: int
    start: int | None
    end: int | None
    completed: int | None
    frames: tuple[Frame, ...] = ()
    category: str | None = None
    preexisting: bool = False

    @property
    def stack(self) -> str:
        """The allocating stack as text, innermost frame first (empty when none was recorded)."""
        return "\n".join(str(f) for f in self.frames)

    def allocated_at(self, i: int) -> bool:
        """Whether the allocation is held after event i."""
        return (self.start is None or self.start <= i) and (self.end is None or i < self.end)

    def pending_at(self, i: int) -> bool:
        """Whether its free was requested but not completed after event i (``record_stream``)."""
        return self.end is not None and self.end <= i and (self.completed is None or i < self.completed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "addr": self.addr,
            "size": self.size,
            "stream": self.stream,
            "start": self.start,
            "end": self.end,
            "completed": self.completed,
            "frames": [f.to_dict() for f in self.frames],
            "stack": self.stack,
            "category": self.category,
            "preexisting": self.preexisting,
        }


@dataclass(frozen=True)
class Timeline:
    """Bytes after every event: allocated (requested bytes), active (allocated + pending free), reserved.

    `truncated` is True when the trace freed memory it never saw allocated (the ring buffer dropped the
    start); `preexisting_*` are the bytes held before the first event, inferred from such frees and from
    the final segments.
    """

    time_us: list[float | None]
    allocated: list[int]
    active: list[int]
    reserved: list[int]
    truncated: bool
    preexisting_allocated: int
    preexisting_reserved: int
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.allocated)

    @property
    def peak_allocated(self) -> int:
        return max(self.allocated, default=self.preexisting_allocated)

    @property
    def peak_reserved(self) -> int:
        return max(self.reserved, default=self.preexisting_reserved)

    def to_dict(self) -> dict[str, Any]:
        return {
            "time_us": list(self.time_us),
            "allocated": list(self.allocated),
            "active": list(self.active),
            "reserved": list(self.reserved),
            "truncated": self.truncated,
            "preexisting_allocated": self.preexisting_allocated,
            "preexisting_reserved": self.preexisting_reserved,
            "peak_allocated": self.peak_allocated,
            "peak_reserved": self.peak_reserved,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class BlockState:
    """A block at one moment: 'active' (allocated), 'pending' (free requested, not completed) or 'free'."""

    address: int
    size: int
    state: Literal["active", "pending", "free"]
    allocation: int | None = None  # index into `MemorySnapshot.allocations()`

    def to_dict(self) -> dict[str, Any]:
        return {"address": self.address, "size": self.size, "state": self.state, "allocation": self.allocation}


@dataclass(frozen=True)
class SegmentState:
    """A reserved range at one moment with blocks tiling it exactly (gaps are 'free')."""

    address: int
    size: int
    stream: int
    expandable: bool
    preexisting: bool
    blocks: tuple[BlockState, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "size": self.size,
            "stream": self.stream,
            "expandable": self.expandable,
            "preexisting": self.preexisting,
            "blocks": [b.to_dict() for b in self.blocks],
        }


@dataclass(frozen=True)
class MemoryState:
    """The allocator after event `index`: segments with their blocks, plus held blocks no known segment contains."""

    index: int
    segments: tuple[SegmentState, ...]
    unplaced: tuple[BlockState, ...] = ()

    def blocks(self, state: str | None = None) -> list[BlockState]:
        """All blocks in address order, optionally only those in one state."""
        out = [b for s in self.segments for b in s.blocks] + list(self.unplaced)
        return sorted((b for b in out if state is None or b.state == state), key=lambda b: b.address)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "segments": [s.to_dict() for s in self.segments],
            "unplaced": [b.to_dict() for b in self.unplaced],
        }


@dataclass
class _Range:
    """A reserved address range's life in event indices (a segment, or a mapped piece of an expandable one)."""

    addr: int
    size: int
    stream: int
    expandable: bool
    start: int | None
    end: int | None = None
    #: the allocator pool it belongs to ("small"/"large" and the pool id), when the snapshot says; None: unknown
    pool: tuple[Any, ...] | None = None

    def alive_at(self, i: int) -> bool:
        return (self.start is None or self.start <= i) and (self.end is None or i < self.end)


@dataclass
class _Replay:
    timeline: Timeline
    allocations: list[Allocation]
    ranges: list[_Range]


# ------------------------------------------------------------------------------ the snapshot


class MemorySnapshot:
    """One device's memory snapshot: final `segments`, the trace `events`, and what follows from them."""

    kind: Kind = "cuda"

    def __init__(
        self,
        segments: Sequence[Segment],
        events: Sequence[MemoryEvent],
        *,
        device: int | None = 0,
        devices: Sequence[int] = (),
        allocator_settings: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
        notes: Sequence[str] = (),
        has_final_state: bool = True,
    ) -> None:
        self.segments: list[Segment] = list(segments)
        self.events: list[MemoryEvent] = list(events)
        self.device = device
        self.devices = list(devices)
        self.allocator_settings: dict[str, Any] | None = None if allocator_settings is None else dict(allocator_settings)
        self.extra: dict[str, Any] = dict(extra or {})
        self.notes: list[str] = list(notes)
        self.has_final_state = has_final_state
        self._replay: _Replay | None = None

    def __len__(self) -> int:
        return len(self.events)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(device={self.device}, segments={len(self.segments)}, "
            f"events={len(self.events)}, notes={len(self.notes)})"
        )

    # -------------------------------------------------------------- derived views

    def timeline(self) -> Timeline:
        """Allocated, active and reserved bytes after every event (see `Timeline`)."""
        return self._replayed().timeline

    def allocations(self) -> list[Allocation]:
        """One band per allocation, in order of first appearance (pre-existing ones inferred from frees included)."""
        return list(self._replayed().allocations)

    def state_at(self, i: int) -> MemoryState:
        """Segments and blocks after event `i` (negative counts from the end), rebuilt from the trace."""
        n = len(self.events)
        if not -n <= i < n:
            raise IndexError(f"event index {i} is out of range; this trace has events 0..{n - 1}")
        i %= n
        rep = self._replayed()
        held: list[tuple[int, int, str, int]] = []  # addr, size, state, allocation index
        for k, a in enumerate(rep.allocations):
            if a.allocated_at(i):
                held.append((a.addr, a.size, "active", k))
            elif a.pending_at(i):
                held.append((a.addr, a.size, "pending", k))
        held.sort()
        segments = _merge_ranges([r for r in rep.ranges if r.alive_at(i)])
        out: list[SegmentState] = []
        placed: set[int] = set()
        for addr, size, stream, expandable, pre in segments:
            blocks: list[BlockState] = []
            cursor = addr
            for k, (baddr, bsize, state, ai) in enumerate(held):
                if k in placed or baddr < addr or baddr + bsize > addr + size:
                    continue
                if baddr < cursor:  # overlapping bands: a broken trace; show it unplaced rather than lie
                    continue
                if baddr > cursor:
                    blocks.append(BlockState(cursor, baddr - cursor, "free"))
                blocks.append(BlockState(baddr, bsize, state, ai))  # type: ignore[arg-type]
                placed.add(k)
                cursor = baddr + bsize
            if cursor < addr + size:
                blocks.append(BlockState(cursor, addr + size - cursor, "free"))
            out.append(SegmentState(addr, size, stream, expandable, pre, tuple(blocks)))
        unplaced = tuple(
            BlockState(a, s, st, ai)  # type: ignore[arg-type]
            for k, (a, s, st, ai) in enumerate(held)
            if k not in placed
        )
        return MemoryState(i, tuple(out), unplaced)

    def to_dict(self, *, derived: bool = True) -> dict[str, Any]:
        """JSON-ready data: the parsed snapshot and, with `derived`, the timeline and allocation bands."""
        d: dict[str, Any] = {
            "kind": self.kind,
            "device": self.device,
            "devices": list(self.devices),
            "segments": [s.to_dict() for s in self.segments],
            "events": [e.to_dict() for e in self.events],
            "allocator_settings": _jsonable(self.allocator_settings),
            "extra": _jsonable(self.extra),
            "notes": list(self.notes),
        }
        if derived:
            d["timeline"] = self.timeline().to_dict()
            d["allocations"] = [a.to_dict() for a in self.allocations()]
        return d

    # -------------------------------------------------------------- the replay

    def _initial_allocations(self) -> list[Allocation]:
        """Allocations known to exist before the first event other than through the trace (CPU profiler)."""
        return []

    def _replayed(self) -> _Replay:
        if self._replay is None:
            self._replay = self._replay_trace()
        return self._replay

    def _replay_trace(self) -> _Replay:
        notes: list[str] = []
        n = len(self.events)
        d_alloc = [0] * n  # change of allocated bytes at each event
        d_active = [0] * n
        d_reserved = [0] * n
        bands: list[dict[str, Any]] = []
        live: dict[int, int] = {}  # addr -> band index, allocated or pending
        ranges: list[_Range] = []
        base_alloc = base_active = base_reserved = 0
        unknown_frees = unknown_segment_frees = pending_before = 0
        truncated = False
        for a in self._initial_allocations():
            live[a.addr] = len(bands)
            bands.append(_band_dict(a))
            base_alloc += a.size
            base_active += a.size

        def end_band(k: int, i: int, completed: bool) -> None:
            b = bands[k]
            if b["end"] is None:
                b["end"] = i
                d_alloc[i] -= b["size"]
            if completed:
                b["completed"] = i
                d_active[i] -= b["size"]
                del live[b["addr"]]

        for e in self.events:
            i, act, addr, size = e.index, e.action, e.addr, e.size
            if act == "alloc" and addr is not None:
                if addr in live:
                    notes.append(f"event {i}: alloc at {addr:#x}, which was still held; its free is missing, "
                                 "so the old allocation is ended here")
                    end_band(live[addr], i, completed=True)
                live[addr] = len(bands)
                bands.append(dict(addr=addr, size=size, stream=e.stream, start=i, end=None, completed=None,
                                  frames=e.frames, category=e.category, preexisting=False))
                d_alloc[i] += size
                d_active[i] += size
            elif act in ("free_requested", "free_completed") and addr is not None:
                done = act == "free_completed"
                if addr in live:
                    end_band(live[addr], i, completed=done)
                elif done:  # requested before the trace began: it was active, not allocated
                    truncated = True
                    pending_before += 1
                    base_active += size
                    d_active[i] -= size
                else:
                    truncated = True
                    unknown_frees += 1
                    base_alloc += size
                    base_active += size
                    live[addr] = len(bands)
                    bands.append(dict(addr=addr, size=size, stream=e.stream, start=None, end=None, completed=None,
                                      frames=e.frames, category=e.category, preexisting=True))
                    end_band(live[addr], i, completed=False)
            elif act in ("segment_alloc", "segment_map") and addr is not None:
                ranges.append(_Range(addr, size, e.stream, act == "segment_map", start=i))
                d_reserved[i] += size
            elif act in ("segment_free", "segment_unmap") and addr is not None:
                freed = _cut_ranges(ranges, addr, size, i)
                d_reserved[i] -= freed
                if freed < size:
                    truncated = True
                    unknown_segment_frees += 1
                    missing = size - freed
                    base_reserved += missing
                    d_reserved[i] -= missing
                    for lo, hi in _uncovered(addr, addr + size, [r for r in ranges if r.end == i]):
                        ranges.append(_Range(lo, hi - lo, e.stream, act == "segment_unmap", start=None, end=i))
        if unknown_frees or pending_before:
            notes.append(f"the trace frees {unknown_frees + pending_before} allocation(s) it never saw allocated: "
                         "the ring buffer dropped the start (or recording began late); they count as pre-existing")
        if unknown_segment_frees:
            notes.append(f"the trace releases {unknown_segment_frees} segment(s) it never saw reserved; "
                         "they count as pre-existing")

        # Reconcile with the final state: held blocks and reserved ranges the trace never created existed all along.
        if self.has_final_state and self.kind == "cuda":
            extra_alloc, extra_active, extra_res = self._reconcile(bands, live, ranges, notes)
            base_alloc += extra_alloc
            base_active += extra_active
            base_reserved += extra_res

        allocated, active, reserved = _running(base_alloc, d_alloc), _running(base_active, d_active), _running(
            base_reserved, d_reserved)
        if self.kind == "cpu":
            reserved = list(allocated)
            base_reserved = base_alloc
        if self.has_final_state and self.kind == "cuda" and self.segments:
            self._check_final(allocated, active, reserved, notes)
        tl = Timeline(
            time_us=[e.time_us for e in self.events],
            allocated=allocated,
            active=active,
            reserved=reserved,
            truncated=truncated,
            preexisting_allocated=base_alloc,
            preexisting_reserved=base_reserved,
            notes=tuple(notes),
        )
        return _Replay(tl, [Allocation(**b) for b in bands], ranges)

    def _reconcile(
        self, bands: list[dict[str, Any]], live: dict[int, int], ranges: list[_Range], notes: list[str]
    ) -> tuple[int, int, int]:
        """Add final-state blocks and segment ranges the trace never created as pre-existing; return their bytes."""
        add_alloc = add_active = add_res = 0
        n_blocks = n_pending = 0
        for seg in self.segments:
            for b in seg.blocks:
                if b.state == "inactive" or b.address in live:
                    continue
                if b.state == "active_allocated":
                    live[b.address] = len(bands)
                    bands.append(dict(addr=b.address, size=b.requested_size, stream=seg.stream, start=None, end=None,
                                      completed=None, frames=b.frames, category=None, preexisting=True))
                    add_alloc += b.requested_size
                    n_blocks += 1
                else:
                    n_pending += 1
                add_active += b.requested_size
        for r in ranges:  # an event's range gets the pool of the final segment it lies in, if any
            if r.pool is None:
                seg_of = next((seg for seg in self.segments
                               if seg.address <= r.addr < seg.address + seg.total_size), None)
                if seg_of is not None:
                    r.pool = (seg_of.segment_type, *seg_of.segment_pool_id)
        end_live = [r for r in ranges if r.end is None]
        n_ranges = 0
        for seg in self.segments:
            for lo, hi in _uncovered(seg.address, seg.address + seg.total_size, end_live):
                ranges.append(_Range(lo, hi - lo, seg.stream, seg.is_expandable, start=None,
                                     pool=(seg.segment_type, *seg.segment_pool_id)))
                add_res += hi - lo
                n_ranges += 1
        if n_blocks or n_pending:
            notes.append(f"{n_blocks + n_pending} block(s) held in the final snapshot were allocated before the "
                         f"trace began ({add_active} bytes); they count as pre-existing")
        if n_ranges:
            notes.append(f"{n_ranges} reserved range(s) in the final snapshot were reserved before the trace began "
                         f"({add_res} bytes); they count as pre-existing")
        return add_alloc, add_active, add_res

    def _check_final(self, allocated: list[int], active: list[int], reserved: list[int], notes: list[str]) -> None:
        """Say so when the replayed end state disagrees with the final segments (the trace is then unreliable)."""
        want = (
            sum(b.requested_size for s in self.segments for b in s.blocks if b.state == "active_allocated"),
            sum(b.requested_size for s in self.segments for b in s.blocks if b.state != "inactive"),
            sum(s.total_size for s in self.segments),
        )
        got = (allocated[-1], active[-1], reserved[-1]) if allocated else want
        for what, w, g in zip(("allocated", "active", "reserved"), want, got):
            if w != g:
                notes.append(f"replayed {what} bytes at the last event ({g}) differ from the final segments ({w}); "
                             "the trace and the segments may come from different moments")


def _band_dict(a: Allocation) -> dict[str, Any]:
    return dict(addr=a.addr, size=a.size, stream=a.stream, start=a.start, end=a.end, completed=a.completed,
                frames=a.frames, category=a.category, preexisting=a.preexisting)


def _running(base: int, deltas: list[int]) -> list[int]:
    out, total = [], base
    for d in deltas:
        total += d
        out.append(total)
    return out


def _cut_ranges(ranges: list[_Range], addr: int, size: int, i: int) -> int:
    """End the live parts of `ranges` inside [addr, addr+size) at event i, keeping the parts outside; bytes cut."""
    lo, hi = addr, addr + size
    cut = 0
    for r in list(ranges):
        if r.end is not None or r.addr >= hi or r.addr + r.size <= lo:
            continue
        r.end = i
        a, b = max(lo, r.addr), min(hi, r.addr + r.size)
        cut += b - a
        for plo, phi in ((r.addr, a), (b, r.addr + r.size)):
            if phi > plo:
                ranges.append(_Range(plo, phi - plo, r.stream, r.expandable, start=i, pool=r.pool))
    return cut


def _uncovered(lo: int, hi: int, ranges: Sequence[_Range]) -> Iterator[tuple[int, int]]:
    """The parts of [lo, hi) that no range covers."""
    cursor = lo
    for r in sorted(ranges, key=lambda r: r.addr):
        if r.addr + r.size <= cursor or r.addr >= hi:
            continue
        if r.addr > cursor:
            yield cursor, r.addr
        cursor = max(cursor, r.addr + r.size)
    if cursor < hi:
        yield cursor, hi


def _merge_ranges(ranges: list[_Range]) -> list[tuple[int, int, int, bool, bool]]:
    """Live ranges as segments: mapped pieces of one expandable segment that touch are one segment.

    Pieces known to be from different pools (a small-pool reservation next to a large expandable one)
    never merge, even when their addresses touch: they are different segments to the allocator. A piece
    whose pool is unknown (mapped and unmapped within the trace) joins its neighbour.
    """
    out: list[list[Any]] = []
    pools: list[tuple[Any, ...] | None] = []
    for r in sorted(ranges, key=lambda r: r.addr):
        last = out[-1] if out else None
        if (last is not None and r.expandable and last[3] and last[0] + last[1] == r.addr and last[2] == r.stream
                and (pools[-1] is None or r.pool is None or pools[-1] == r.pool)):
            last[1] += r.size
            last[4] = last[4] and r.start is None
            pools[-1] = pools[-1] or r.pool
        else:
            out.append([r.addr, r.size, r.stream, r.expandable, r.start is None])
            pools.append(r.pool)
    return [tuple(x) for x in out]  # type: ignore[misc]


# ------------------------------------------------------------------------------ loading


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain data only: a snapshot is dicts, lists, tuples, strings and numbers."""

    def find_class(self, module: str, name: str) -> Any:
        raise SnapshotError(
            f"this pickle refers to {module}.{name}; a memory snapshot holds plain data only, so it is not "
            "loaded. If you trust the file, unpickle it yourself and pass the dict to load_snapshot."
        )


def _read_bytes(data: bytes, origin: str) -> Any:
    if data[:2] == b"\x1f\x8b":
        data = gunzip_bounded(data, origin, SnapshotError)
    if data[:1] == b"\x80":
        try:
            return _PlainUnpickler(io.BytesIO(data)).load()
        except SnapshotError:
            raise
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
                RecursionError, MemoryError, OverflowError) as exc:
            raise SnapshotError(
                f"{origin} is a damaged pickle ({type(exc).__name__}: {exc}); write the snapshot again with "
                "torch.cuda.memory._dump_snapshot(path)"
            ) from None
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise SnapshotError(f"{origin} is nested too deeply to be a memory snapshot; load the file that "
                            "torch.cuda.memory._dump_snapshot(path) wrote") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SnapshotError(
            f"{origin} is neither a pickle nor JSON (optionally gzip-compressed): {exc}. Write snapshots with "
            "torch.cuda.memory._dump_snapshot(path) or json.dump(torch.cuda.memory._snapshot(), f)."
        ) from None


def load_snapshot(obj: Any, *, device: int | None = None) -> MemorySnapshot:
    """Read a CUDA memory snapshot: the dict ``torch.cuda.memory._snapshot()`` returns, or a file holding it.

    Files may be pickles (``torch.cuda.memory._dump_snapshot``) or JSON, either gzip-compressed; pickles
    are read as plain data only. A snapshot covers all devices; the lens shows one: `device`, or the
    one with trace events (the lowest such, with a note, when several have them).
    """
    if isinstance(obj, MemorySnapshot):
        return obj
    if isinstance(obj, (str, os.PathLike)):
        path = Path(obj)
        if not path.is_file():
            raise SnapshotError(f"no snapshot file at {str(path)!r}; pass a path written by "
                                "torch.cuda.memory._dump_snapshot, or the dict itself")
        obj = _read_bytes(read_bounded(path, repr(str(path)), SnapshotError), repr(str(path)))
    elif isinstance(obj, (bytes, bytearray)):
        obj = _read_bytes(bytes(obj), "these bytes")
    if not isinstance(obj, Mapping):
        raise SnapshotError(f"expected a snapshot dict (from torch.cuda.memory._snapshot()), a path or bytes, "
                            f"got {type(obj).__name__}")
    if "segments" not in obj and "device_traces" not in obj:
        raise SnapshotError(f"this dict has neither 'segments' nor 'device_traces' (keys: {sorted(map(str, obj))[:10]}); "
                            "it is not a torch.cuda.memory._snapshot() result")
    if device is not None and (type(device) is not int or device < 0):
        raise SnapshotError(f"device must be a CUDA device index (0, 1, ...), got {device!r}")
    try:
        return _parse(obj, device)
    except SnapshotError:
        raise
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
        # a field of the wrong kind deep inside (a NaN size, a string pool id, a nested list where a number
        # belongs): the snapshot was not written by torch, or was edited
        raise SnapshotError(
            f"this snapshot is malformed ({type(exc).__name__}: {exc}); load one written by "
            "torch.cuda.memory._dump_snapshot or the dict torch.cuda.memory._snapshot() returns"
        ) from None


def _parse(raw: Mapping[str, Any], device: int | None) -> MemorySnapshot:
    notes: list[str] = []
    seg_raw = raw.get("segments")
    traces_raw = raw.get("device_traces")
    if not isinstance(seg_raw, list):
        if seg_raw is not None:
            notes.append(f"'segments' is a {type(seg_raw).__name__}, not a list; ignored")
        else:
            notes.append("no 'segments': the final state is unknown, so the timeline starts from the trace alone")
        seg_raw = []
    if not isinstance(traces_raw, list):
        if traces_raw is not None:
            notes.append(f"'device_traces' is a {type(traces_raw).__name__}, not a list; ignored")
        else:
            notes.append("no 'device_traces': history was not recorded (record with start_recording())")
        traces_raw = []
    _check_work(seg_raw, traces_raw)
    segs_all = [s for s in (_parse_segment(x, k, notes) for k, x in enumerate(seg_raw)) if s is not None]
    negative = [s for s in segs_all if s.device < 0]
    if negative:
        notes.append(f"{len(negative)} segment(s) name a negative device; skipped")
        segs_all = [s for s in segs_all if s.device >= 0]
    with_events = [d for d, t in enumerate(traces_raw) if isinstance(t, list) and t]
    devices = sorted({s.device for s in segs_all} | set(with_events))
    if device is None:
        device = with_events[0] if with_events else (devices[0] if devices else 0)
        if len(with_events) > 1:
            notes.append(f"devices {with_events} have trace events; showing device {device} "
                         "(pass device=... to load_snapshot for another)")
    elif devices and device not in devices:
        raise SnapshotError(f"device {device} is not in this snapshot; it has devices {devices}")
    trace = traces_raw[device] if device < len(traces_raw) and isinstance(traces_raw[device], list) else []
    events = [_parse_event(x, k, notes) for k, x in enumerate(trace)]
    settings = raw.get("allocator_settings")
    extra = {k: v for k, v in raw.items() if k not in _TOP_KEYS}
    unknown = sorted(str(k) for k in extra if k not in _TORCH_KEYS_KEPT)
    if unknown:
        notes.append(f"kept unknown top-level keys in .extra: {unknown}")
    return MemorySnapshot(
        [s for s in segs_all if s.device == device],
        events,
        device=device,
        devices=devices,
        allocator_settings=settings if isinstance(settings, Mapping) else None,
        extra=extra,
        notes=_dedupe(notes),
        has_final_state="segments" in raw and isinstance(raw.get("segments"), list),
    )


#: The most segments + blocks + events + stack frames a snapshot may hold. Real ones stay far below
#: (100k trace entries of 30 frames is 3M); a small crafted pickle can reference one dict millions of
#: times, which would otherwise take minutes and gigabytes to convert.
MAX_SNAPSHOT_ITEMS = 10_000_000


def _check_work(seg_raw: list[Any], traces_raw: list[Any]) -> None:
    """Count what parsing would convert, cheaply (lengths only), and refuse past MAX_SNAPSHOT_ITEMS."""
    def too_much(what: str) -> SnapshotError:
        return SnapshotError(
            f"this snapshot holds more than {MAX_SNAPSHOT_ITEMS:,} {what} to convert (a recording this size, "
            "or a crafted file that repeats one entry many times); record a shorter trace "
            "(start_recording(max_entries=...)) or load a snapshot of one device")

    def length(v: Any) -> int:
        return len(v) if isinstance(v, list) else 0

    seen: set[int] = set()
    refs = 0

    def note(entry: Any) -> None:
        """Count one reference to an entry: a snapshot torch writes never holds one entry twice, while a small
        crafted pickle can reference one block 9 million times (under the item bound, yet 99 s to convert)."""
        nonlocal refs
        refs += 1
        seen.add(id(entry))
        if refs > 100_000 and refs > 2 * len(seen):
            raise SnapshotError("this snapshot references the same entries over and over (more than twice as many "
                                "references as entries): a crafted file, not one torch.cuda.memory._dump_snapshot "
                                "wrote; load a snapshot torch wrote")

    items = len(seg_raw) + sum(length(t) for t in traces_raw)
    for seg in seg_raw:
        if isinstance(seg, Mapping):
            note(seg)
            items += length(seg.get("blocks")) + length(seg.get("frames"))
        if items > MAX_SNAPSHOT_ITEMS:
            raise too_much("segments, blocks and events")
    for seg in seg_raw:
        blocks = seg.get("blocks") if isinstance(seg, Mapping) else None
        for b in blocks if isinstance(blocks, list) else ():
            if isinstance(b, Mapping):
                note(b)
            items += length(b.get("frames")) if isinstance(b, Mapping) else 0
            if items > MAX_SNAPSHOT_ITEMS:
                raise too_much("blocks and stack frames")
    for t in traces_raw:
        for e in t if isinstance(t, list) else ():
            if isinstance(e, Mapping):
                note(e)
            items += length(e.get("frames")) if isinstance(e, Mapping) else 0
            if items > MAX_SNAPSHOT_ITEMS:
                raise too_much("events and stack frames")


def _dedupe(notes: list[str]) -> list[str]:
    return list(dict.fromkeys(notes))


def _int(d: Mapping[str, Any], key: str, default: int, notes: list[str], where: str) -> int:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        if key in d:
            notes.append(f"{where}: '{key}' is {v!r}, not a number; used {default}")
        return default
    return int(v)


def _frames(v: Any, notes: list[str], where: str) -> tuple[Frame, ...]:
    if not isinstance(v, list):
        return ()
    out = []
    for f in v:
        if isinstance(f, Mapping) and "name" in f:
            line = f.get("line", 0)
            out.append(Frame(str(f.get("filename", "")), int(line) if isinstance(line, (int, float)) else 0,
                             str(f["name"])))
        else:
            notes.append(f"{where}: skipped malformed frames (expected dicts with filename, line, name)")
    return tuple(out)


def _parse_segment(s: Any, k: int, notes: list[str]) -> Segment | None:
    where = f"segment {k}"
    if not isinstance(s, Mapping):
        notes.append(f"{where} is not a dict; skipped")
        return None
    address = _int(s, "address", 0, notes, where)
    blocks: list[Block] = []
    cursor = address
    for j, b in enumerate(s.get("blocks") or []):
        bw = f"{where} block {j}"
        if not isinstance(b, Mapping):
            notes.append(f"{bw} is not a dict; skipped")
            continue
        size = _int(b, "size", 0, notes, bw)
        state = str(b.get("state", "inactive"))
        if state == "active_awaiting_free":  # the name torch's docstring uses; the C++ writes active_pending_free
            state = "active_pending_free"
        if state not in BLOCK_STATES:
            notes.append(f"{bw}: unknown state {state!r} kept as is")
        baddr = _int(b, "address", cursor, notes, bw)  # snapshots before torch 2.1 had no block addresses
        blocks.append(Block(baddr, size, _int(b, "requested_size", size, notes, bw), state,
                            _frames(b.get("frames"), notes, bw), {x: v for x, v in b.items() if x not in _BLOCK_KEYS}))
        cursor = baddr + size
    pool = s.get("segment_pool_id", (0, 0))
    return Segment(
        device=_int(s, "device", 0, notes, where),
        address=address,
        total_size=_int(s, "total_size", sum(b.size for b in blocks), notes, where),
        allocated_size=_int(s, "allocated_size", 0, notes, where),
        active_size=_int(s, "active_size", 0, notes, where),
        requested_size=_int(s, "requested_size", 0, notes, where),
        stream=_int(s, "stream", 0, notes, where),
        segment_type=str(s.get("segment_type", "large")),
        segment_pool_id=tuple(int(x) for x in pool) if isinstance(pool, (list, tuple)) else (0, 0),
        is_expandable=bool(s.get("is_expandable", False)),
        blocks=tuple(blocks),
        frames=_frames(s.get("frames"), notes, where),
        extra={x: v for x, v in s.items() if x not in _SEGMENT_KEYS},
    )


def _parse_event(e: Any, k: int, notes: list[str]) -> MemoryEvent:
    where = f"event {k}"
    if not isinstance(e, Mapping):
        notes.append(f"{where} is not a dict; kept as 'unknown'")
        return MemoryEvent(k, "unknown", None, 0, raw_action=repr(e)[:80])
    action = str(e.get("action", "unknown"))
    raw_action = None
    if action not in ACTIONS:
        notes.append(f"{where}: unknown action {action!r} kept as 'unknown'; it changes nothing in the replay")
        raw_action, action = action, "unknown"
    addr = e.get("addr")
    if action in ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
                  "segment_unmap") and not isinstance(addr, int):
        notes.append(f"{where}: {action} without an address; it changes nothing in the replay")
        addr = None
    t = e.get("time_us")
    extra = {x: v for x, v in e.items() if x not in _EVENT_KEYS}
    dfree = e.get("device_free")
    return MemoryEvent(
        index=k,
        action=action,
        addr=addr if isinstance(addr, int) else None,
        size=_int(e, "size", 0, notes, where),
        stream=_int(e, "stream", 0, notes, where),
        time_us=float(t) if isinstance(t, (int, float)) else None,
        frames=_frames(e.get("frames"), notes, where),
        device_free=int(dfree) if isinstance(dfree, (int, float)) else None,
        raw_action=raw_action,
        extra=extra,
    )


def _jsonable(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


# ------------------------------------------------------------------------------ live CUDA helpers


def _require_cuda() -> None:
    if not torch.cuda.is_available():
        raise CudaUnavailableError(NO_CUDA)


def start_recording(max_entries: int = 100_000, *, stacks: Literal["python", "all"] = "python") -> None:
    """Record every CUDA allocator event (ring buffer of `max_entries`) with Python stacks; see `snapshot`."""
    _require_cuda()
    if max_entries < 1:
        raise ValueError(f"max_entries must be at least 1, got {max_entries}")
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks=stacks, max_entries=max_entries)


def stop_recording() -> None:
    """Stop recording allocator history (what was recorded stays in the next snapshot's trace until cleared)."""
    _require_cuda()
    torch.cuda.memory._record_memory_history(enabled=None)


def snapshot(device: int | None = None) -> MemorySnapshot:
    """Take a live CUDA memory snapshot now (``torch.cuda.memory._snapshot()``) and read it."""
    _require_cuda()
    return load_snapshot(torch.cuda.memory._snapshot(), device=device)


# ------------------------------------------------------------------------------ CPU profiler memory

_NOISE = (
    re.compile(r"^USDT:.*profiler_(start|stop)\s*$"),
    re.compile(r"^\[W.*CPUAllocator\.cpp:\d+\] Memory block of unknown size"),
)
_PYFRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<name>.+)$")


@contextmanager
def _quiet_fd2(dropped: list[str]) -> Iterator[None]:
    """Capture file descriptor 2; afterwards drop Kineto's noise lines and write the rest back to sys.stderr."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace")
            keep: list[str] = []
            for line in text.splitlines(keepends=True):
                (dropped if any(p.search(line) for p in _NOISE) else keep).append(line)
            if keep:
                sys.stderr.write("".join(keep))
                sys.stderr.flush()


class MemoryProfile(MemorySnapshot):
    """CPU memory of one profiled call: the allocator's events with categories, drawn like a CUDA trace.

    Events are ``alloc`` and ``free_completed`` (the CPU allocator frees at once; there are no segments
    and reserved equals allocated). Tensors alive before the call that torch's memory profiler knows
    (parameters, inputs, optimizer state) are pre-existing allocations with their categories.
    `result` is what the call returned.
    """

    kind: Kind = "cpu"

    def __init__(self, events: Sequence[MemoryEvent], *, preexisting: Sequence[Allocation] = (),
                 result: Any = None, notes: Sequence[str] = ()) -> None:
        super().__init__([], events, device=None, devices=[], notes=notes, has_final_state=False)
        self.preexisting = list(preexisting)
        self.result = result

    def _initial_allocations(self) -> list[Allocation]:
        return list(self.preexisting)

    def categories(self) -> dict[str, int]:
        """Bytes per category over all allocations (pre-existing included); 'unknown' where torch gave none."""
        out: dict[str, int] = {}
        for a in self.allocations():
            key = a.category or "unknown"
            out[key] = out.get(key, 0) + a.size
        return out

    def to_dict(self, *, derived: bool = True) -> dict[str, Any]:
        d = super().to_dict(derived=derived)
        if derived:
            d["categories"] = self.categories()
        return d


def profile_memory(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> MemoryProfile:
    """Run ``fn(*args, **kwargs)`` once under ``torch.profiler`` with memory profiling; return its CPU memory.

    Categories come from torch's private memory profiler; should it fail (it is not a public API) the
    events are still returned, without categories, and `notes` says why.
    """
    from torch.profiler import ProfilerActivity, profile

    if not callable(fn):
        raise TypeError(f"profile_memory expects a callable (e.g. a training step), got {type(fn).__name__}")
    notes: list[str] = []
    dropped: list[str] = []
    with _quiet_fd2(dropped):
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                     with_stack=True) as prof:
            result = fn(*args, **kwargs)
        events, preexisting = _profile_events(prof, notes)
    if any("unknown size" in line for line in dropped):
        notes.append("memory allocated before profiling was freed during the call; torch does not report its size, "
                     "so those frees are missing (e.g. last step's gradients freed by zero_grad)")
    return MemoryProfile(events, preexisting=preexisting, result=result, notes=notes)


def _profile_events(prof: Any, notes: list[str]) -> tuple[list[MemoryEvent], list[Allocation]]:
    from torch._C._profiler import _EventType

    try:
        mp = prof._memory_profile()
        tree_events = list(mp._op_tree.dfs())
    except Exception as exc:  # private API: degrade to raw events without categories
        notes.append(f"torch's memory profiler failed ({type(exc).__name__}: {exc}); no categories")
        mp = None
        tree_events = _all_events(prof.profiler.kineto_results.experimental_event_tree())
    raw = [ev for ev in tree_events if ev.typed[0] == _EventType.Allocation]
    raw.sort(key=lambda ev: ev.start_time_ns)
    others = sum(1 for ev in raw if ev.typed[1].device.type != "cpu")
    if others:
        notes.append(f"{others} allocator event(s) on other devices are left out; this profile is CPU memory")
    raw = [ev for ev in raw if ev.typed[1].device.type == "cpu" and ev.typed[1].alloc_size != 0]
    t0 = raw[0].start_time_ns if raw else 0
    events = []
    for k, ev in enumerate(raw):
        f = ev.typed[1]
        size = int(f.alloc_size)
        events.append(MemoryEvent(
            index=k,
            action="alloc" if size > 0 else "free_completed",
            addr=int(f.ptr),
            size=abs(size),
            time_us=(ev.start_time_ns - t0) / 1000,
            frames=_event_frames(ev),
            category=_category(mp, f) if mp is not None else None,
            extra={"op": _innermost_op(ev)},
        ))
    return events, _preexisting(mp, notes) if mp is not None else []


def _all_events(roots: Sequence[Any]) -> list[Any]:
    out, stack = [], list(roots)
    while stack:
        ev = stack.pop()
        out.append(ev)
        stack.extend(ev.children)
    return out


def _event_frames(ev: Any) -> tuple[Frame, ...]:
    """Python frames enclosing a profiler event, innermost first; torch ops appear as frames without a file."""
    out = []
    p = ev.parent
    while p is not None:
        m = _PYFRAME.match(p.name)
        if m:
            out.append(Frame(m["file"], int(m["line"]), m["name"]))
        elif p.name.startswith("aten::") or "Backward" in p.name:
            out.append(Frame("", 0, p.name))
        p = p.parent
    return tuple(out)


def _innermost_op(ev: Any) -> str | None:
    p = ev.parent
    while p is not None:
        if "::" in p.name or "Backward" in p.name:
            return str(p.name)
        p = p.parent
    return None


def _category(mp: Any, alloc: Any) -> str | None:
    """The memory profiler's category for an allocation: its first version's, else the earliest any version has."""
    from torch.profiler._memory_profiler import TensorKey

    key = TensorKey.from_allocation(alloc)
    if key is None:
        return None
    cat = mp._categories.get(key, 0)
    if cat is None:
        element = mp._categories._values.get(key.id)
        if element is not None:
            versions = sorted((v, c.name) for (k, v), c in element.by_version.items() if k == key)
            if versions:
                return versions[0][1].lower()
        return None
    return str(cat.name).lower()


def _preexisting(mp: Any, notes: list[str]) -> list[Allocation]:
    """Tensors alive before the call that torch's memory profiler saw used (parameters, inputs, optimizer state)."""
    from torch.profiler._memory_profiler import Action, TensorKey

    try:
        timeline = mp.timeline
    except Exception as exc:
        notes.append(f"torch's memory timeline failed ({type(exc).__name__}: {exc}); pre-existing tensors unknown")
        return []
    out, seen = [], set()
    for _t, action, (key, version), size in timeline:
        if action != Action.PREEXISTING or not isinstance(key, TensorKey) or key.device.type != "cpu":
            continue
        if key.storage.ptr in seen or size <= 0:
            continue
        seen.add(key.storage.ptr)
        cat = mp._categories.get(key, version)
        out.append(Allocation(addr=int(key.storage.ptr), size=int(size), stream=0, start=None, end=None,
                              completed=None, category=None if cat is None else str(cat.name).lower(),
                              preexisting=True))
    return out
