"""The memory timeline picture: geometry worked out by hand, downsampling keeps peaks, caps and aggregation, text."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from torchlens_widgets.memory import load_snapshot
from torchlens_widgets.render.memory import (
    _block_widths,
    _pack,
    event_explanations,
    memory_model,
    memory_state_model,
    memory_svg,
    memory_text,
)

SNAPSHOTS = Path(__file__).resolve().parents[1] / "fixtures" / "memory"


def ev(action: str, addr: int, size: int, t: float | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"action": action, "addr": addr, "size": size, "stream": 0, "frames": []}
    if t is not None:
        d["time_us"] = t
    return d


def synthetic(n: int, seed: int = 0) -> dict[str, Any]:
    """n events: allocations and frees of random sizes at distinct addresses."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    live: list[tuple[int, int]] = []
    addr = 1 << 20
    while len(events) < n:
        if live and rng.random() < 0.5:
            a, s = live.pop(rng.randrange(len(live)))
            events.append(ev("free_requested", a, s))
            events.append(ev("free_completed", a, s))
        else:
            s = rng.randint(1, 1 << 20)
            live.append((addr, s))
            events.append(ev("alloc", addr, s) | {"frames": [{"filename": "f.py", "line": 1, "name": "g"}]})
            addr += 1 << 21
    return {"device_traces": [events[:n]]}


def test_plain_geometry_by_hand() -> None:
    m = memory_model(load_snapshot(SNAPSHOTS / "plain.json"))
    # plot: x from 72, 960 - 72 - 28 = 860 px wide; 7 events → a cell is 860/7 px
    assert m["plot"] == {"x": 72.0, "y": 26.0, "w": 860.0, "h": 260.0}
    # the highest curve is reserved (2 MiB); ~4 ticks → 512 KiB steps; 2 MiB × 1.04 rounds up to 5 steps
    assert m["y_max"] == 5 * 512 * 1024
    assert [t["label"] for t in m["y_ticks"]] == ["0 B", "512.0 KiB", "1.0 MiB", "1.5 MiB", "2.0 MiB", "2.5 MiB"]
    b0 = m["bands"][0]  # 1000 B: allocated at event 1, free requested at 3, completed at 4
    assert (b0["x"], b0["w"], b0["pw"]) == (round(72 + 860 / 7, 1), round(2 * 860 / 7, 1), round(860 / 7, 1))
    assert b0["stack"] == "linear (torch/nn/functional.py:2380)\nforward (train.py:10)"
    b1 = m["bands"][1]  # 512 B from event 2 to the end, stacked on the 1000 B band (first fit)
    assert b1["x"] == round(72 + 2 * 860 / 7, 1) and b1["w"] == round(5 * 860 / 7, 1) and b1["pw"] == 0
    y_of = lambda b: round(26 + 260 - 260 * b / m["y_max"], 1)  # noqa: E731
    assert b1["y"] == y_of(1000 + 512)
    b2 = m["bands"][2]  # 700 B from event 5: the 1000 B band is gone, so it sits at offset 0
    assert b2["y"] == y_of(700)
    # reserved is flat at 2 MiB from event 0: one horizontal line across the columns
    y_res = f"{y_of(2 * 1024 * 1024):g}"
    assert m["curves"][0]["d"] == f"M72.5 {y_res}L931.5 {y_res}"
    assert m["col_event"][0] == 0 and m["col_event"][-1] == 6 and len(m["col_event"]) == 860


def test_first_fit_packing_by_hand() -> None:
    bands = [(0, 0, 10, 100), (1, 0, 5, 50), (2, 6, 12, 40), (3, 6, 8, 30), (4, 11, 20, 60)]
    # 0 at 0; 1 on top (100); at 6 band 1 is gone: 2 takes 100, 3 goes above it (140); at 11 band 0 is gone: 4 fits at 0
    assert _pack(bands) == {0: 0, 1: 100, 2: 100, 3: 140, 4: 0}


def test_downsampling_keeps_a_one_event_peak() -> None:
    events = []
    for i in range(5000):
        events += [ev("alloc", 1000 + i, 1024), ev("free_requested", 1000 + i, 1024), ev("free_completed", 1000 + i, 1024)]
    events[7500] = ev("alloc", 1 << 30, 8 << 20)  # a one-event 8 MiB spike replaces an allocation
    events[7501] = ev("free_requested", 1 << 30, 8 << 20)
    events[7502] = ev("free_completed", 1 << 30, 8 << 20)
    m = memory_model(load_snapshot({"device_traces": [events]}))
    peak_y = round(26 + 260 - 260 * (8 << 20) / m["y_max"], 1)
    ys = [float(y) for y in re.findall(r"[ML][\d.]+ ([\d.]+)", m["curves"][2]["d"])]
    assert min(ys) == peak_y, "the allocated curve's highest point is the 8 MiB spike"
    assert m["stats"]["peak_allocated"] == 8 << 20
    assert m["notes"][0].startswith("curves: 15,000 events in 860 pixel columns")


def test_bands_are_capped_and_the_rest_aggregated_and_said() -> None:
    m = memory_model(load_snapshot(SNAPSHOTS / "plain.json"), max_bands=1)
    assert [b["size"] for b in m["bands"]] == [1000]
    assert m["others"]["allocations"] == 2 and m["others"]["d"].endswith("Z")
    assert m["others"]["peak_bytes"] == 1212  # 512 + 700 held by the two undrawn allocations after event 5
    assert any("the other 2 are the grey area" in n for n in m["notes"])
    assert m["legend"][-1]["label"] == "2 smaller"


def test_100k_events_payload_under_3_mb() -> None:
    m = memory_model(load_snapshot(synthetic(100_000)), max_bands=300)
    payload = len(json.dumps(m))
    assert payload <= 3_000_000, payload
    assert len(m["bands"]) == 300 and m["stats"]["aggregated"] == m["stats"]["allocations"] - 300
    assert len(m["col_event"]) == 860


def test_time_axis_and_fallback() -> None:
    seg = load_snapshot(SNAPSHOTS / "segments.json")  # time_us 1..9
    m = memory_model(seg, x_axis="time")
    assert m["x_axis"] == "time" and m["x_ticks"][0] == {"x": 72.0, "label": "0 ms"}
    assert m["bands"][1]["x"] == round(72 + 860 * (4 - 1) / 8, 1)  # the 15 MB alloc at 4 µs of 1..9 µs
    no_times = load_snapshot({"device_traces": [[ev("alloc", 1, 10), ev("alloc", 2, 10)]]})
    m2 = memory_model(no_times, x_axis="time")
    assert m2["x_axis"] == "event" and any("evenly spaced" in n for n in m2["notes"])


def test_state_model_and_block_widths() -> None:
    seg = load_snapshot(SNAPSHOTS / "segments.json")
    m = memory_model(seg)
    st = memory_state_model(seg, 4, m)
    assert [r["label"] for r in st["rows"]] == ["2.0 MiB s0", "20.0 MiB s7"]
    assert [(b["state"], b["size"]) for b in st["rows"][0]["blocks"]] == [("pending", 2_000_000), ("free", 97_152)]
    assert st["x"] == round(72 + 860 * 4.5 / 10, 1) and st["explanation"] is None
    assert "pass simulator=" in st["lines"][0]["text"]
    # a held block keeps 3 px even in a huge segment; free space shrinks to make room
    assert _block_widths([(1000, "active"), (2096152, "free")], 2097152, 860) == [3.0, 857.0]
    assert _block_widths([(1, "active"), (1, "pending")], 2, 4) == [2.0, 2.0]
    with pytest.raises(IndexError, match="out of range"):
        memory_state_model(seg, 10, m)


def test_event_explanations_walk_log_and_trace_together() -> None:
    log = [SimpleNamespace(action=a, size=s) for a, s in [
        ("segment_alloc", 2 << 20), ("alloc", 100), ("free_requested", 100), ("free_completed", 100),
        ("segment_free", 2 << 20), ("oom", 5)]]
    trace = [{"action": "segment_alloc", "size": 2 << 20}, {"action": "alloc", "size": 100},
             {"action": "free_requested", "size": 100}, {"action": "free_completed", "size": 100},
             {"action": "free_requested", "size": 7},  # a free the simulator skipped (allocated before the trace)
             {"action": "segment_free", "size": 2 << 20}, {"action": "alloc", "size": 5}, {"action": "snapshot", "size": 0}]
    assert event_explanations(trace, log) == [None, (0, 2), (2, 3), (3, 4), None, (4, 5), (5, 6), None]


def test_text_is_deterministic_without_addresses_or_times() -> None:
    snap = load_snapshot(SNAPSHOTS / "truncated.json")
    m = memory_model(snap, x_axis="time")
    st = memory_state_model(snap, 4, m, ["block at 0x7f0000000000 (1,024 B) back on the free list"])
    text = memory_text(m, st)
    assert text == memory_text(memory_model(snap, x_axis="time"), st)
    assert "0x" not in text and " ms" not in text and "<addr>" in text
    assert text.splitlines()[0] == "MemoryTimeline: 6 events (CUDA trace), 4 allocations"
    svg = memory_svg(m, st)
    assert svg.startswith("<svg") and svg.count('class="mark"') == 1


def test_bad_input_says_what_to_do() -> None:
    with pytest.raises(TypeError, match="load_snapshot"):
        memory_model({"device_traces": []})
    snap = load_snapshot(SNAPSHOTS / "plain.json")
    with pytest.raises(ValueError, match="x_axis"):
        memory_model(snap, x_axis="wall")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_bands"):
        memory_model(snap, max_bands=-1)
    with pytest.raises(ValueError, match="width"):
        memory_model(snap, width=100)


def test_a_recorded_oom_gets_the_simulators_oom_explanation() -> None:
    """Found by the notebook 07 author: the OOM's reason used to land on the next alloc."""
    from torchlens_widgets.allocator import CachingAllocatorSim, replay
    from torchlens_widgets.render.memory import event_explanations

    mib = 1 << 20
    sim = CachingAllocatorSim()
    for s in (100, 110, 120):
        a = sim.malloc(s * mib)
        sim.free(a)
        sim.malloc(2 * mib)
    capped = replay(sim.trace(), capacity=200 * mib)
    trace = capped.trace()
    spans = event_explanations(trace, capped.log)
    for ev, span in zip(trace, spans):
        if span is None:
            continue
        acts = [capped.log[k].action for k in range(*span)]
        if ev["action"] == "oom":
            assert acts[-1] == "oom"
        else:
            assert "oom" not in acts, (ev, acts)
    assert any(ev["action"] == "oom" for ev in trace)
