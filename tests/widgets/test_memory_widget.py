"""The memory timeline widget's Python side: factory inputs, selection → state panel, axis switch, simulator, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import traitlets
from torch import nn

from torchlens_widgets.lenses.allocator import replay
from torchlens_widgets.lenses.memory import load_snapshot, profile_memory
from torchlens_widgets.widgets.memory import MemoryTimelineWidget, show_memory

SNAPSHOTS = Path(__file__).resolve().parents[1] / "fixtures" / "memory"
SEGMENTS = SNAPSHOTS / "segments.json"


def test_factory_accepts_path_dict_and_snapshot() -> None:
    raw = json.loads(SEGMENTS.read_text())
    for src in (SEGMENTS, raw, load_snapshot(raw)):
        w = show_memory(src)
        assert isinstance(w, MemoryTimelineWidget)
        assert w.model["n_events"] == 10 and [b["size"] for b in w.model["bands"]] == [2_000_000, 15_000_000]
        assert w.selected_event is None and w.panel == {}


def test_select_event_sends_only_that_events_state() -> None:
    w = show_memory(SEGMENTS)
    st = w.select_event(4)
    assert w.selected_event == 4 and st == w.state() == w.panel and st["index"] == 4
    # after event 4 the stream-0 block's free is pending (record_stream); the stream-7 block is still active
    assert [[b["state"] for b in r["blocks"]] for r in st["rows"]] == [["pending", "free"], ["active", "free"]]
    assert "segments" not in w.model and "events" not in w.model, "the timeline trait carries no per-event state"
    w.select_event(-1)  # negative counts from the end
    assert w.selected_event == 9 and w.state()["rows"] == []  # both segments released by then
    w.select_event(None)
    assert w.panel == {}
    with pytest.raises(ValueError, match="select_event"):
        w.state()
    with pytest.raises(IndexError, match="0..9"):
        w.select_event(10)


def test_a_click_from_the_page_recomputes_the_panel() -> None:
    w = show_memory(SEGMENTS)
    w.selected_event = 6  # what the page's click sets
    assert w.panel["index"] == 6 and "free_completed" in w.panel["title"]


def test_x_axis_switch_recomputes_the_model_and_keeps_the_selection() -> None:
    w = show_memory(SEGMENTS, selected_event=3)
    x_event = w.panel["x"]
    w.x_axis = "time"
    assert w.model["x_axis"] == "time" and w.panel["index"] == 3
    assert w.panel["x"] == round(72 + 860 * (4 - 1) / 8, 1) != x_event  # event 3 is at 4 µs of 1..9 µs
    with pytest.raises(traitlets.TraitError, match="'event' or 'time'"):
        w.x_axis = "wall"
    w.hovered_band = 1
    with pytest.raises(traitlets.TraitError, match="not drawn"):
        w.hovered_band = 5


def test_simulator_explains_each_event() -> None:
    w = show_memory(SEGMENTS, simulator=True)
    st = w.select_event(3)  # 15 MB alloc on stream 7: the simulator opens a new 16 MiB segment
    assert st["explanation"][0].startswith("cudaMalloc of a 16 MiB segment")
    assert "requests ≥ 10 MiB get their size rounded up to 2 MiB" in st["explanation"][1]
    assert any(line["text"].startswith("simulator:") for line in st["lines"])
    assert w.explain(0) == []  # the recorded segment_alloc: the simulator decides at the alloc
    assert "the simulator takes its own segment decisions" in w.select_event(0)["lines"][0]["text"]
    events = [e.to_dict() for e in w.snapshot.events]
    sim = replay(events, max_split_size_mb=20)
    assert show_memory(SEGMENTS, simulator=sim).simulator is sim
    assert show_memory(SEGMENTS, simulator={"max_split_size_mb": 20}).explain(1)


def test_cpu_profile_of_a_training_step_coloured_by_category() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 64)

    def step() -> None:
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    prof = profile_memory(step)
    w = show_memory(prof, max_bands=20)
    assert w.model["source"] == "cpu" and w.model["stats"]["categories"]
    labels = {item["label"] for item in w.model["legend"]}
    assert "parameter" in labels and "gradient" in labels
    assert len(w.model["bands"]) <= 20
    st = w.select_event(len(prof.events) // 2)
    assert [r["label"] for r in st["rows"]] == ["CPU heap"]
    with pytest.raises(ValueError, match="CPU profile"):
        show_memory(prof, simulator=True)


def test_mime_bundle_has_svg_and_deterministic_text() -> None:
    w = show_memory(SEGMENTS, simulator=True, selected_event=4)
    data, _meta = w._repr_mimebundle_()
    assert data["image/svg+xml"].startswith("<svg") and 'class="mark"' in data["image/svg+xml"]
    text = data["text/plain"]
    assert text == repr(w) == show_memory(SEGMENTS, simulator=True, selected_event=4).static_text()
    assert "0x" not in text and "selected event 4" in text and "record_stream" in text


def test_bad_input_says_what_to_do() -> None:
    with pytest.raises(ValueError, match="no trace events"):
        show_memory({"segments": [], "device_traces": [[]]})
    with pytest.raises(TypeError, match="simulator must be"):
        show_memory(SEGMENTS, simulator="yes")


def test_the_page_sets_the_width_and_python_lays_the_picture_out_again() -> None:
    w = show_memory(SEGMENTS, selected_event=4, title="one step")
    assert w.fit_width and w.width == 960 and w.model["width"] == 960
    assert w.model["title"].startswith("one step: 10 events")
    w.width = 640  # what the page sends when the output area is 640 px wide
    assert w.model["width"] == 640 and w.model["plot"]["w"] == 640 - 72 - 28 and w.panel["width"] == 640
    assert w.model["title"].startswith("one step:"), "the title survives a new layout"
    assert max(i["x"] for i in w.model["legend"]) < 640
    with pytest.raises(traitlets.TraitError, match="width"):
        w.width = 100
    fixed = show_memory(SEGMENTS, width=700)
    assert not fixed.fit_width and fixed.model["width"] == 700
