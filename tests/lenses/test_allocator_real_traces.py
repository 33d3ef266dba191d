"""The simulator must replay real CUDA allocator recordings exactly (tools/record_snapshots.py makes them)."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path
from typing import Any

import pytest

from torchlens_widgets.lenses.allocator import replay
from torchlens_widgets.lenses.memory import load_snapshot

SNAPSHOTS = sorted((Path(__file__).parents[2] / "torchlens_widgets" / "data" / "snapshots").glob("*.pickle.gz"))


def test_recorded_snapshots_are_present_or_the_reason_is_given() -> None:
    if not SNAPSHOTS:
        pytest.skip(
            "no GPU-recorded snapshots are committed yet: the sessions so far had no GPU. "
            "Run tools/record_snapshots.py on a CUDA machine to add them."
        )


def _layout(segments: list[dict[str, Any]]) -> list[tuple[int, int, list[tuple[int, int, str]]]]:
    """(stream, total_size, [(offset, size, state)]) per segment, in address order."""
    out = []
    for seg in sorted(segments, key=lambda s: s["address"]):
        blocks = []
        for b in seg["blocks"]:
            state = "free" if b["state"] == "inactive" else "held"
            blocks.append((b["address"] - seg["address"], b["size"], state))
        out.append((seg["stream"], seg["total_size"], blocks))
    return out


def assert_replays_exactly(path: Path) -> None:
    """Replay a recording's device trace; segment sizes/order and the final block layout must match."""
    raw = load_snapshot(path)
    events = [_event_dict(e) for e in raw.events]
    sim = replay(events)
    recorded_segments = [e["size"] for e in events if e["action"] == "segment_alloc"]
    simulated_segments = [e.size for e in sim.log if e.action == "segment_alloc"]
    assert simulated_segments == recorded_segments, "segment sizes and order differ"
    real = [s if isinstance(s, dict) else _segment_dict(s) for s in raw.segments]
    strip = [(s, t, [(o, z) for o, z, _ in b]) for s, t, b in _layout(real)]
    assert [(s, t, [(o, z) for o, z, _ in b]) for s, t, b in _layout(sim.segments())] == strip, (
        "final segment layout (block offsets and sizes) differs"
    )


def _event_dict(e: Any) -> dict[str, Any]:
    return e if isinstance(e, dict) else {"action": e.action, "addr": e.addr, "size": e.size, "stream": e.stream}


def _segment_dict(s: Any) -> dict[str, Any]:
    return {
        "address": s.address, "total_size": s.total_size, "stream": s.stream,
        "blocks": [{"address": b.address, "size": b.size, "state": b.state} for b in s.blocks],
    }


@pytest.mark.parametrize("path", SNAPSHOTS, ids=[p.name for p in SNAPSHOTS])
def test_simulator_replays_a_real_recording_exactly(path: Path) -> None:
    assert_replays_exactly(path)


def test_the_comparison_itself_on_a_simulator_made_recording(tmp_path: Path) -> None:
    """Exercise the comparator in CI: a recording the simulator made must replay exactly; a changed one must not."""
    from torchlens_widgets.lenses.allocator import CachingAllocatorSim

    mib = 1 << 20
    sim = CachingAllocatorSim()
    hs = [sim.malloc(n) for n in (1, 512, 513, mib, mib + 1, 3 * mib, 13_200_000, 25 * mib)]
    sim.free(hs[1])
    sim.free(hs[3])
    sim.malloc(700_000)
    snap = {"segments": sim.segments(), "device_traces": [sim.trace()]}
    path = tmp_path / "self.pickle.gz"
    with gzip.open(path, "wb") as f:
        pickle.dump(snap, f)
    assert_replays_exactly(path)
    snap["segments"][0]["total_size"] += 2 * mib
    with gzip.open(path, "wb") as f:
        pickle.dump(snap, f)
    with pytest.raises(AssertionError, match="layout"):
        assert_replays_exactly(path)
