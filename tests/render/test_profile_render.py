"""The profile timeline and table: well-formed XHTML, themed, one layout for the static SVG and the widget
(labextension/test/ptrace.test.ts draws the fixture written here and checks the same boxes), labels cut to
fit and never clipped, the selected op lit up, stacks and shapes on hover, and a deterministic text/plain.

Regenerate the fixture after an intended layout change:
    .venv/bin/python -c "from tests.render.test_profile_render import write_fixture; write_fixture()"
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from torchlens_widgets.lenses.profile import ProfileTrace, downsample, load_profile
from torchlens_widgets.render.profile import (
    CHAR_W,
    profile_html,
    profile_model,
    profile_svg,
    profile_text,
    short_label,
)

FIXTURES = Path(__file__).resolve().parents[2] / "labextension" / "test" / "fixtures"
SVG = "{http://www.w3.org/2000/svg}"


def _span(name: str, cat: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 7, "tid": tid, "args": args}


def _py(name: str, ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
    return _span(name, "python_function", ts, dur, tid)


def sample(scale: float = 1.0) -> dict[str, Any]:
    """Two threads; a record_function range around nested ops; stacks and shapes; a long name."""
    s = scale
    return {"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 1, "args": {"name": "thread 1 (python)"}},
        _py("train.py(10): <module>", 0, 1000 * s),
        _py("train.py(3): step", 5 * s, 900 * s),
        _py("<built-in function linear>", 20 * s, 400 * s),
        _span("forward", "user_annotation", 10 * s, 500 * s),
        _span("aten::linear", "cpu_op", 25 * s, 390 * s, **{"Input Dims": [[8, 16], [32, 16], [32]]}),
        _span("aten::addmm", "cpu_op", 60 * s, 300 * s, **{"Input Dims": [[32], [8, 16], [16, 32], [], []]}),
        _span("aten::relu", "cpu_op", 430 * s, 60 * s, **{"Input Dims": [[8, 32]]}),
        _span("autograd::engine::evaluate_function: AddmmBackward0", "cpu_op", 520 * s, 380 * s),
        _span("aten::mm", "cpu_op", 530 * s, 120 * s),
        _span("aten::mm", "cpu_op", 700 * s, 150 * s),
        _span("aten::add_", "cpu_op", 600 * s, 200 * s, tid=2),
        _span("aten::zero_", "cpu_op", 610 * s, 4 * s, tid=2),
    ]}


def _parse(html: str) -> ET.Element:
    return ET.fromstring(re.sub(r"<style>(.*?)</style>", r"<style><![CDATA[\1]]></style>", html, flags=re.S))


@pytest.fixture(scope="module")
def trace() -> ProfileTrace:
    return load_profile(sample())


def test_html_is_xhtml_themed_and_has_the_table_beside_the_timeline(trace: ProfileTrace) -> None:
    html = profile_html(trace)
    root = _parse(html)
    assert "tlw-theme" in root.attrib["class"].split() and "background: var(--tlw-bg)" in root.attrib["style"]
    outside_style = re.sub(r"<style>.*?</style>", "", html, flags=re.S)
    assert not re.search(r"#[0-9a-fA-F]{3,6}\b|rgb\(", outside_style)
    rows = [tr.attrib["data-name"] for tr in root.iter("tr") if "data-name" in tr.attrib]
    assert rows[0] == "aten::addmm" and set(rows) == {a.name for a in trace.averages}
    assert root.find(f".//{SVG}svg") is not None


def test_static_boxes_follow_the_shared_layout(trace: ProfileTrace) -> None:
    m = profile_model(trace)
    svg = ET.fromstring(re.sub(r"<style>.*?</style>", "", profile_svg(m), flags=re.S))
    rects = [r for r in svg.iter(f"{SVG}rect") if "tlw-span" in r.attrib["class"]]
    assert len(rects) == len(m["spans"]) == len(trace.events)
    for r, s in zip(rects, m["spans"]):
        lane, depth, start, dur = s[:4]
        assert float(r.attrib["x"]) == round(m["left"] + start * m["scale"], 2)
        assert float(r.attrib["width"]) == round(max(dur * m["scale"], 1), 2)
        assert float(r.attrib["y"]) == m["lanes"][lane]["y"] + depth * m["row_h"] + 1
    kinds = {m["names"][s[4]]: r.attrib["class"].split()[1] for r, s in zip(rects, m["spans"])}
    assert kinds["forward"] == "tlw-range" and kinds["aten::mm"] == "tlw-op"
    assert [lane["rows"] for lane in m["lanes"]] == [3, 2]


def test_labels_fit_their_spans(trace: ProfileTrace) -> None:
    m = profile_model(trace, width=400)
    svg = ET.fromstring(re.sub(r"<style>.*?</style>", "", profile_svg(m), flags=re.S))
    spans = {round(float(r.attrib["x"]) + 2, 2): float(r.attrib["width"])
             for r in svg.iter(f"{SVG}rect") if "tlw-span" in r.attrib["class"]}
    labels = [t for t in svg.iter(f"{SVG}text") if t.attrib.get("class") == "tlw-label"]
    assert labels
    for t in labels:
        assert len(t.text or "") * CHAR_W + 4 <= spans[float(t.attrib["x"])] + 1e-9
    assert any((t.text or "").endswith("…") for t in labels)
    assert short_label("aten::addmm", 20) == "" and short_label("aten::addmm", 60) == "aten::a…"
    assert all(len(lane["short"]) * CHAR_W <= m["left"] - 8 for lane in m["lanes"])


def test_selected_op_lights_up_and_hover_shows_stack_and_shapes(trace: ProfileTrace) -> None:
    root = _parse(profile_html(trace, selected="aten::mm"))
    assert "tlw-pt-sel" in root.attrib["class"]
    lit = [r for r in root.iter(f"{SVG}rect") if "tlw-sel" in r.attrib.get("class", "")]
    assert len(lit) == 2 and all(r.find(f"{SVG}title").text.startswith("aten::mm ") for r in lit)
    assert [tr.attrib["data-name"] for tr in root.iter("tr") if "tlw-sel" in tr.attrib.get("class", "")] == ["aten::mm"]
    tip = next(r.find(f"{SVG}title").text for r in root.iter(f"{SVG}rect")
               if (r.find(f"{SVG}title") is not None and r.find(f"{SVG}title").text.startswith("aten::addmm")))
    assert "inputs: [32], [8, 16], [16, 32], -, -" in tip
    assert tip.splitlines()[2:] == ["  <built-in function linear>", "  train.py(3): step", "  train.py(10): <module>"]
    assert "tlw-pt-sel" not in _parse(profile_html(trace, selected="no such op")).attrib["class"]


def test_text_is_deterministic_without_times(trace: ProfileTrace) -> None:
    text = profile_text(trace, selected="aten::mm")
    assert text == profile_text(load_profile(sample(scale=1.37)), selected="aten::mm")
    assert "aten::mm ×2  ← selected" in text and "record_function ranges: forward" in text
    assert "µs" not in text and "0x" not in text
    assert text.splitlines()[0].startswith("profile (saved trace): 9 spans on 2 threads")


def test_downsampled_pictures_say_what_was_left_out() -> None:
    big = {"traceEvents": [_span("step", "user_annotation", 0, 10_000)]
           + [_span("aten::add", "cpu_op", 1 + 2 * k, 1 + (k % 2)) for k in range(3000)]}
    small = downsample(load_profile(big), 500)
    html = profile_html(small)
    assert "left out 2,501 of 3,001 spans" in html
    assert "downsampled: 2,501 spans left out" in profile_text(small)
    capped = profile_model(load_profile(big), max_spans=100)
    assert len(capped["spans"]) == 100 and "drawing 100 of 3,001 spans" in capped["notes"][0]
    with pytest.raises(TypeError, match="profile trace"):
        profile_model({"kind": "lanes"})


def fixture_model() -> dict[str, Any]:
    return profile_model(load_profile(sample()), width=600)


def write_fixture() -> None:
    m = fixture_model()
    (FIXTURES / "ptrace_model.json").write_text(json.dumps(m, indent=1, ensure_ascii=False) + "\n")
    (FIXTURES / "ptrace_model.svg").write_text(profile_svg(m, "aten::mm") + "\n")


def test_the_widget_fixture_is_current() -> None:
    m = fixture_model()
    assert json.loads((FIXTURES / "ptrace_model.json").read_text()) == json.loads(json.dumps(m))
    assert (FIXTURES / "ptrace_model.svg").read_text() == profile_svg(m, "aten::mm") + "\n"


def test_a_row_whose_spans_are_more_than_its_calls_says_why() -> None:
    """torch counts aten::mul inside aten::mul (its only child) as one call: 2 spans, 1 call; the tip says so."""
    from torchlens_widgets.render.profile import calls_tip

    doc = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 1, "dur": 8},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 20, "dur": 5}]}
    row = next(r for r in profile_model(load_profile(doc))["table"] if r["name"] == "aten::mul")
    assert (row["count"], row["drawn"]) == (1, 2)
    assert "2 spans for 1 calls" in calls_tip(row) and "only child" in calls_tip(row)
    assert "2 spans for 1 calls" in profile_html(load_profile(doc))
    assert calls_tip({"category": "cpu_op", "count": 3, "drawn": 3}) == "cpu_op"
