"""Does the allocator simulator do what the real CUDA caching allocator did? Replays a recorded trace and
compares every decision: which segment each request landed in and at what offset, and every segment the
allocator created, mapped, released or unmapped — addresses made relative, since the two address spaces differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .allocator import replay

DECISIONS = ("alloc", "segment_alloc", "segment_free", "segment_map", "segment_unmap", "oom")


@dataclass(frozen=True)
class ReplayMatch:
    """The comparison: `exact` when every decision agrees; else each differing step, recorded vs simulated."""

    decisions: int
    differences: tuple[str, ...]
    settings: dict[str, Any]

    @property
    def exact(self) -> bool:
        return not self.differences

    def summary(self) -> str:
        if self.exact:
            return f"the simulator made all {self.decisions} decisions of the recording exactly"
        shown = "\n  ".join(self.differences[:10])
        more = f"\n  ... {len(self.differences) - 10} more" if len(self.differences) > 10 else ""
        return f"{len(self.differences)} of {self.decisions} decisions differ:\n  {shown}{more}"


def settings_of(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The simulator settings a snapshot was recorded under (its ``allocator_settings``, torch ≥ 2.6)."""
    raw = snapshot.get("allocator_settings") or {}
    out: dict[str, Any] = {}
    if raw.get("expandable_segments"):
        out["expandable_segments"] = True
    if raw.get("max_split_size", -1) not in (-1, None) and raw["max_split_size"] < 2**63 - 1:
        out["max_split_size_mb"] = raw["max_split_size"] // 2**20
    if raw.get("garbage_collection_threshold"):
        out["garbage_collection_threshold"] = raw["garbage_collection_threshold"]
    divisions = {int(k): v for k, v in (raw.get("roundup_power2_divisions") or {}).items() if v}
    if divisions:
        out["roundup_power2_divisions"] = divisions
    return out


def decisions(trace: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """Each allocator decision of a trace with addresses made relative: (action, size, segment number, offset).

    Segments are numbered in the order they appear; an expandable segment's mapping that continues a
    segment's mapped range belongs to that segment.
    """
    segments: list[list[int]] = []  # [base, end) per segment, in order of appearance
    out: list[tuple[Any, ...]] = []

    def locate(addr: int) -> tuple[int | None, int | None]:
        for i, (base, end) in enumerate(segments):
            if base <= addr < end:
                return i, addr - base
        return None, None

    for ev in trace:
        action, addr, size = ev.get("action"), ev.get("addr", 0), ev.get("size", 0)
        if action not in DECISIONS:
            continue
        if action == "segment_alloc":
            segments.append([addr, addr + size])
            out.append((action, size, len(segments) - 1, 0))
        elif action == "segment_map":
            joined = next((i for i, s in enumerate(segments) if s[1] == addr or s[0] <= addr < s[1]), None)
            if joined is None:
                segments.append([addr, addr + size])
                joined = len(segments) - 1
            segments[joined][1] = max(segments[joined][1], addr + size)
            out.append((action, size, joined, addr - segments[joined][0]))
        elif action in ("segment_free", "segment_unmap"):
            index, offset = locate(addr)
            out.append((action, size, index, offset))
        elif action == "oom":
            out.append((action, size, None, None))
        else:
            index, offset = locate(addr)
            out.append((action, size, index, offset))
    return out


def _first_differences(recorded: list[tuple[Any, ...]], simulated: list[tuple[Any, ...]]) -> list[str]:
    diffs = []
    for i in range(max(len(recorded), len(simulated))):
        r = recorded[i] if i < len(recorded) else None
        s = simulated[i] if i < len(simulated) else None
        if r != s:
            diffs.append(f"decision {i}: recorded {_text(r)}, simulated {_text(s)}")
    return diffs


def _text(d: tuple[Any, ...] | None) -> str:
    if d is None:
        return "nothing"
    action, size, seg, offset = d
    where = f" in segment {seg} at offset {offset:,}" if seg is not None else ""
    return f"{action} of {size:,} B{where}"


def match_recording(snapshot: Mapping[str, Any], device: int = 0, **settings: Any) -> ReplayMatch:
    """Replay `snapshot`'s recorded trace on the simulator (under the settings it was recorded with, updated
    by `settings`, e.g. ``capacity`` for a run capped by set_per_process_memory_fraction) and compare."""
    trace = snapshot["device_traces"][device]
    used = {**settings_of(snapshot), **settings}
    sim = replay(trace, **used)
    recorded = decisions(trace)
    simulated = decisions(sim.trace())
    if "oom" not in {d[0] for d in recorded}:
        simulated = [d for d in simulated if d[0] != "oom"]
    return ReplayMatch(len(recorded), tuple(_first_differences(recorded, simulated)), used)
