"""show_profile: runs or reads a profile and returns the live widget, whose `selected` trait is the op lit up
(set by clicks or from Python, checked against the trace), whose model stays under 3 MB for a 100,000-span
trace (downsampled, saying what it left out), and whose mime bundle carries the static HTML and a
deterministic text/plain."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import traitlets
from torch.profiler import ProfilerActivity, profile, record_function

from torchlens_widgets.lenses.profile import ProfileError, ProfileTrace, load_profile
from torchlens_widgets.widgets.profile import ProfileWidget, show_profile

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
LIN = torch.nn.Linear(8, 4)


def step(x: torch.Tensor) -> torch.Tensor:
    with record_function("forward"):
        return LIN(x).relu().sum()


def synthetic_trace(n: int) -> dict[str, Any]:
    """A Chrome trace of `n` spans: steps (record_function) holding linear → addmm → mul chains."""
    events: list[dict[str, Any]] = []
    shapes = {"Input Dims": [[64, 128], [128, 256]]}
    t, k = 0.0, 0
    while len(events) < n:
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "ts": t, "dur": 400.0,
                       "pid": 1, "tid": 1, "args": {}})
        for j in range(min(33, (n - len(events)) // 3)):
            a = t + 1 + 12 * j
            events += [{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "ts": a, "dur": 10.5, "pid": 1, "tid": 1,
                        "args": shapes},
                       {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "ts": a + 1, "dur": 8.25, "pid": 1,
                        "tid": 1, "args": shapes},
                       {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "ts": a + 2, "dur": 3.0, "pid": 1, "tid": 1,
                        "args": shapes}]
        if len(events) < n and (n - len(events)) < 3:
            events += [{"ph": "X", "cat": "cpu_op", "name": "aten::item", "ts": t + 399, "dur": 0.5, "pid": 1,
                        "tid": 1, "args": {}} for _ in range(n - len(events))]
        t += 401
        k += 1
    return {"traceEvents": events}


def test_show_profile_runs_a_function_and_bundles_html_and_text() -> None:
    w = show_profile(step, torch.randn(2, 8))
    assert isinstance(w, ProfileWidget) and isinstance(w.trace, ProfileTrace)
    data, _ = w._repr_mimebundle_()
    assert WIDGET_VIEW in data
    assert data["text/html"].startswith('<div class="tlw-ptrace tlw-theme"')
    assert "aten::linear ×1" in data["text/plain"] and "record_function ranges: forward" in data["text/plain"]
    assert w.model["kind"] == "ptrace" and w.selected is None
    assert repr(w) == data["text/plain"]


def test_selected_is_checked_and_lights_up_the_static_picture() -> None:
    w = show_profile(load_profile(synthetic_trace(300)), selected="aten::mul")
    assert w.selected == "aten::mul" and "tlw-pt-sel" in w.static_html().split(">", 1)[0]
    assert "aten::mul ×99  ← selected" in w.static_text()
    assert w.select(None) is w and w.selected is None and "tlw-pt-sel" not in w.static_html().split(">", 1)[0]
    w.selected = "aten::addmm"
    assert 'class="tlw-row tlw-sel" data-name="aten::addmm"' in w.static_html()
    with pytest.raises(traitlets.TraitError, match="no op called 'aten::nope'"):
        w.selected = "aten::nope"
    with pytest.raises(ProfileError, match="names with the most self time"):
        w.select("aten::nope")


def test_show_profile_reads_files_profilers_and_traces(tmp_path: Path) -> None:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step(torch.randn(2, 8))
    live = show_profile(prof)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(synthetic_trace(50)))
    assert show_profile(path).trace.averages == load_profile(path).averages
    assert show_profile(live.trace).trace is live.trace
    with pytest.raises(ProfileError, match="takes the trace alone"):
        show_profile(live.trace, 3)
    with pytest.raises(ProfileError, match="ProfileTrace, a trace file"):
        show_profile(3.5)


def test_a_100k_span_trace_stays_under_the_size_budget() -> None:
    trace = load_profile(synthetic_trace(100_000))
    assert len(trace.events) == 100_000
    w = ProfileWidget(trace)
    payload = len(json.dumps(w.model).encode())
    assert payload <= 3 * 1024 * 1024, payload
    assert len(w.model["spans"]) == 20_000
    html = w.static_html()
    assert len(html.encode()) <= 800 * 1024
    assert "left out 99,400 of 100,000 spans" in html  # the static picture is sampled harder (600 spans)
    assert w.model["left_out"]["events"] == 80_000 and w.model["summary"]["events"] == 100_000
    counts = {r["name"]: r["count"] for r in w.model["table"]}
    assert counts["aten::mul"] == sum(e.name == "aten::mul" for e in trace.events)  # the table counts them all
