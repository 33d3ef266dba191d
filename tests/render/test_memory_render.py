"""The memory timeline picture: geometry worked out by hand, downsampling keeps peaks, caps and aggregation, text."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from torchlens_widgets.lenses.memory import load_snapshot
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
    assert b0["stack"] == "forward (train.py:10)\n… 1 library frame (torch)"  # the learner's frame first
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
    assert m["legend"][-1]["label"] == "2 smaller allocations (grey area)"


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
    from torchlens_widgets.lenses.allocator import CachingAllocatorSim, replay
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


def test_colours_come_from_the_theme_through_classes() -> None:
    """Dark theme: no colour is written into the picture; fills and strokes are theme variables set by CSS."""
    from torchlens_widgets.render.theme import STYLE as THEME

    seg = load_snapshot(SNAPSHOTS / "segments.json")
    m = memory_model(seg)
    svg = memory_svg(m, memory_state_model(seg, 4, m))
    assert 'class="tlw-mem tlw-theme"' in svg and svg.count(THEME) == 1, "the theme CSS once, in the root's <style>"
    assert not re.search(r"#[0-9a-fA-F]{3,6}\b", svg.replace(THEME, "")), "a hard-coded colour"
    assert not re.search(r'\s(fill|stroke)="', svg), "a presentation attribute (they do not resolve var())"
    assert [b["cls"] for b in m["bands"]] == ["f-size4", "f-size4"]  # 2 MB and 15 MB: both "< 16 MiB"


def test_legend_says_what_colours_lines_and_marks_mean_and_fits_the_width() -> None:
    seg = load_snapshot(SNAPSHOTS / "segments.json")
    for width in (960, 480, 320):
        m = memory_model(load_snapshot(SNAPSHOTS / "plain.json"), max_bands=1, width=width)
        labels = [i["label"] for i in m["legend"]]
        assert any("colour = block size" in x for x in labels)
        assert [i["cls"] for i in m["legend"] if i["kind"] == "line"] == ["c c-res", "c c-act", "c c-all"]
        assert any(x.startswith("active:") and "dashed" in x for x in labels)
        for item in m["legend"]:  # every entry ends inside the picture (10 px monospace: ~6.1 px a character)
            end = item["x"] + (18 if item["kind"] != "head" else 0) + len(item["label"]) * 6.1
            assert end <= width - 4, (width, item)
        for line in m["note_lines"]:
            assert 8 + len(line["text"]) * 6.1 <= width - 4, (width, line)
        assert m["height"] > max(i["y"] for i in m["legend"] + m["note_lines"])
    st = memory_state_model(seg, 4, memory_model(seg, width=480), width=480)
    assert "the marked line" in st["title"] and len(st["title_lines"]) > 1
    assert all(20 + len(t["text"]) * 6.7 <= 480 for t in st["title_lines"])
    assert [k["label"] for k in st["keys"] if k["kind"] == "box"] == ["allocated", "free pending", "free, cached for reuse"]



def test_stacks_show_the_learners_frames_first_and_fold_library_frames() -> None:
    from torchlens_widgets.lenses.memory import Frame
    from torchlens_widgets.render.memory import _stack_text

    site = "/usr/lib/python3.12/site-packages"
    frames = [Frame(f"{site}/torch/nn/modules/linear.py", 125, "forward"),
              Frame(f"{site}/torch/nn/modules/module.py", 1775, "_call_impl"),
              Frame("/tmp/ipykernel_4242/3190.py", 7, "step"),
              Frame(f"{site}/IPython/core/interactiveshell.py", 3577, "run_code"),
              Frame("/home/me/train.py", 40, "main"),
              Frame(f"{site}/ipykernel/kernelbase.py", 400, "dispatch_shell"),
              Frame("/usr/lib/python3.12/asyncio/events.py", 88, "_run")]
    text = _stack_text(frames).splitlines()
    assert text[:2] == ["step (<cell>:7)", "main (/home/me/train.py:40)"]
    assert text[2:] == ["… 5 library frames (torch, IPython, ipykernel, python)"]
    only_lib = _stack_text(frames[:2]).splitlines()  # nothing of the learner's: shown as it is
    assert only_lib[0].startswith("forward (") and len(only_lib) == 2
    m = memory_model(load_snapshot({"device_traces": [[ev("alloc", 1, 10) | {"frames": [f.to_dict() for f in frames]}]]}))
    assert m["bands"][0]["stack"].startswith("step (<cell>:7)") and "<title>" in memory_svg(m)
    assert "step (&lt;cell&gt;:7)" in memory_svg(m).split("<title>")[1], "the static tooltip too"


def test_has_time_says_whether_the_wall_clock_axis_can_be_drawn() -> None:
    assert memory_model(load_snapshot(SNAPSHOTS / "segments.json"))["has_time"] is True
    no_times = load_snapshot({"device_traces": [[ev("alloc", 1, 10), ev("alloc", 2, 10)]]})
    assert memory_model(no_times)["has_time"] is False


def test_pictures_of_several_runs_can_share_one_y_scale_and_have_titles() -> None:
    plain = load_snapshot(SNAPSHOTS / "plain.json")
    m = memory_model(plain, y_max=8 << 20, title="plan A")
    assert m["y_max"] >= 8 << 20 and m["y_ticks"][-1]["label"] == fmt_y(m["y_max"])
    assert m["title"] == "plan A: 7 events, 3 allocations" and ">plan A: 7 events" in memory_svg(m)
    assert memory_model(plain, y_max=0)["y_max"] == memory_model(plain)["y_max"]  # never lower than the data
    with pytest.raises(ValueError, match="y_max"):
        memory_model(plain, y_max=-1)


def fmt_y(b: int) -> str:
    from torchlens_widgets.render.memory import fmt_bytes

    return fmt_bytes(b)
