"""The simulator must replay real CUDA allocator recordings exactly (tools/record_gpu.py records them on a GPU).

Every decision is compared (which segment and offset each request got, every segment created, mapped or
released), then the final layout of every segment; a mismatch lists each differing decision.
"""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path
from typing import Any

import pytest

from torchlens_widgets.lenses.allocator import CachingAllocatorSim, replay
from torchlens_widgets.lenses.replay_match import decisions, match_recording

SNAPSHOTS = sorted((Path(__file__).parents[2] / "torchlens_widgets/data/recorded/allocator").glob("*.pickle.gz"))
MiB = 1 << 20
# tools/gpu_scenarios/allocator.py::out_of_memory capped the process with set_per_process_memory_fraction,
# which a snapshot does not record: the simulator gets the same cap as its capacity
CAPACITY = {"out_of_memory": 256 * MiB}


def _load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rb") as f:
        return pickle.load(f)


def _layout(segments: list[dict[str, Any]]) -> list[tuple[int, int, int, list[tuple[int, int, bool]]]]:
    """(address, stream, total size, [(offset, size, free)]) per segment, in address order."""
    return [(s["address"], s["stream"], s["total_size"],
             [(b["address"] - s["address"] if "address" in b else None, b["size"], b["state"] == "inactive")
              for b in s["blocks"]])
            for s in sorted(segments, key=lambda s: s["address"])]


def test_the_recordings_are_here() -> None:
    assert len(SNAPSHOTS) >= 10, "record them with python tools/record_gpu.py --only allocator on a GPU machine"


@pytest.mark.parametrize("path", SNAPSHOTS, ids=[p.name.split(".")[0] for p in SNAPSHOTS])
def test_simulator_makes_every_decision_of_a_real_recording(path: Path) -> None:
    snap = _load(path)
    name = path.name.split(".")[0]
    capacity = {"capacity": CAPACITY[name]} if name in CAPACITY else {}
    match = match_recording(snap, **capacity)
    assert match.exact, match.summary()
    assert match.decisions >= 4
    if not snap.get("allocator_settings", {}).get("expandable_segments"):
        sim = replay(snap["device_traces"][0], **match.settings)
        real = [{**s, "blocks": [{**b, "address": b.get("address", s["address"] + sum(
            x["size"] for x in s["blocks"][:i]))} for i, b in enumerate(s["blocks"])]} for s in snap["segments"]]
        assert _layout(sim.segments()) == _layout(real), "final segment layout (block offsets and sizes) differs"


def test_the_comparison_finds_a_planted_difference() -> None:
    """A recording the simulator made replays exactly; the same with one request moved does not, and says where."""
    sim = CachingAllocatorSim()
    hs = [sim.malloc(n) for n in (1, 512, 513, MiB, MiB + 1, 3 * MiB, 13_200_000, 25 * MiB)]
    sim.free(hs[1])
    sim.free(hs[3])
    sim.malloc(700_000)
    snap = {"segments": sim.segments(), "device_traces": [sim.trace()]}
    assert match_recording(snap).exact
    trace = [dict(e) for e in snap["device_traces"][0]]
    last = max(i for i, e in enumerate(trace) if e["action"] == "alloc")
    trace[last]["addr"] += 512
    moved = match_recording({"device_traces": [trace]})
    assert not moved.exact and "at offset" in moved.summary() and "recorded alloc of 700,000 B" in moved.summary()


def test_decisions_are_relative_to_segments_in_order_of_appearance() -> None:
    trace = [{"action": "segment_alloc", "addr": 9000, "size": 100}, {"action": "alloc", "addr": 9010, "size": 5},
             {"action": "segment_alloc", "addr": 1000, "size": 50}, {"action": "alloc", "addr": 1000, "size": 5},
             {"action": "free_requested", "addr": 9010, "size": 5}]
    assert decisions(trace) == [("segment_alloc", 100, 0, 0), ("alloc", 5, 0, 10), ("segment_alloc", 50, 1, 0),
                                ("alloc", 5, 1, 0)]


def test_a_replay_under_other_settings_never_overlaps_segments() -> None:
    """Recorded cudaMalloc addresses and the simulator's own can meet when the settings change the segments made."""
    def variable_batches() -> list[dict[str, Any]]:
        sim = CachingAllocatorSim()
        kept = []
        for m in (30, 26, 35, 24, 33, 37, 28):
            x, hidden = sim.malloc(m * MiB + 123 * 1024), sim.malloc(m * MiB + 123 * 1024)
            kept.append(sim.malloc(2 * MiB))
            sim.free(x)
            sim.free(hidden)
        return sim.trace()

    sim = replay(variable_batches(), capacity=150 * MiB, max_split_size_mb=20)
    spans = sorted((s["address"], s["address"] + s["total_size"]) for s in sim.segments())
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False))
