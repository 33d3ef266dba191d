"""Lanes picture: model coordinates follow the times, the SVG draws exactly the model, the text is exact."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from torchlens_widgets.lenses.asyncexec import StreamSim, load_trace
from torchlens_widgets.render.lanes import LEFT, RIGHT, display_name, lanes_model, lanes_svg, lanes_text

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lanes" / "step_trace.json"
SVG = "{http://www.w3.org/2000/svg}"


def item_program() -> StreamSim:
    sim = StreamSim(5)
    for name, us in (("a", 300), ("b", 200), ("c", 100)):
        sim.launch(name, us)
    sim.item("loss.item()")
    return sim


def two_stream_program() -> StreamSim:
    sim = StreamSim(5)
    side = sim.new_stream("side")
    sim.launch("produce", 100, stream=side)
    e = sim.event("ready")
    e.record(side)
    sim.default_stream.wait_event(e)
    sim.launch("consume <&>", 50)
    sim.nonzero()
    sim.synchronize()
    return sim


def test_model_coordinates_follow_the_times() -> None:
    m = lanes_model(item_program().timeline(), width=800)
    scale = (800 - LEFT - RIGHT) / 605
    assert m["end"] == 605 and m["scale"] == pytest.approx(scale)
    assert [(h["x"], h["w"], h["state"]) for h in m["host"]] == [
        (LEFT, round(5 * scale, 2), "running"), (round(LEFT + 5 * scale, 2), round(5 * scale, 2), "running"),
        (round(LEFT + 10 * scale, 2), round(5 * scale, 2), "running"),
        (round(LEFT + 15 * scale, 2), round(590 * scale, 2), "blocked")]
    assert [(k["x"], k["w"], k["lane"]) for k in m["device"]] == [
        (round(LEFT + 5 * scale, 2), round(300 * scale, 2), "d0:s0"),
        (round(LEFT + 305 * scale, 2), round(200 * scale, 2), "d0:s0"),
        (round(LEFT + 505 * scale, 2), round(100 * scale, 2), "d0:s0")]
    (sync,) = m["syncs"]
    assert (sync["x"], sync["x_end"], sync["name"], sync["waited"]) == (
        round(LEFT + 15 * scale, 2), round(LEFT + 605 * scale, 2), "loss.item()", 590)
    assert [t["t"] for t in m["ticks"]] == [0, 100, 200, 300, 400, 500, 600]
    assert m["summary"] == {"host_running": 15, "host_blocked": 590, "busy": {"d0:s0": 600}, "kernels": 3,
                            "syncs": 1, "hidden": 1, "explicit": 0}
    assert [ln["x1"] for ln in m["links"]] == [LEFT, round(LEFT + 5 * scale, 2), round(LEFT + 10 * scale, 2)]


def test_svg_is_well_formed_and_draws_the_model() -> None:
    sim = two_stream_program()
    m = lanes_model(sim.timeline())
    root = ET.fromstring(lanes_svg(m))
    assert root.tag == f"{SVG}svg" and root.get("width") == str(m["width"]) and root.get("height") == str(m["height"])
    rects = root.findall(f"{SVG}rect")
    host = [r for r in rects if "tlw-host" in (r.get("class") or "")]
    kern = [r for r in rects if "tlw-kernel" in (r.get("class") or "")]
    assert [(float(r.get("x") or 0), float(r.get("width") or 0), r.get("class")) for r in host] == [
        (h["x"], h["w"], f"tlw-host tlw-{h['state']}") for h in m["host"]]
    assert [(float(r.get("x") or 0), float(r.get("y") or 0), float(r.get("width") or 0)) for r in kern] == [
        (k["x"], k["y"], k["w"]) for k in m["device"]]
    lanes = [r for r in rects if r.get("class") == "tlw-lane"]
    assert [r.get("data-lane") for r in lanes] == ["host", "d0:s0", "d0:s1"]
    groups = root.findall(f"{SVG}g")
    syncs = [g for g in groups if "tlw-sync" in (g.get("class") or "")]
    assert [g.findtext(f"{SVG}text") for g in syncs] == [s["name"] for s in m["syncs"]] == [
        "torch.nonzero(x)", "torch.cuda.synchronize()"]
    assert [float(g.find(f"{SVG}line").get("x1") or 0) for g in syncs] == [s["x"] for s in m["syncs"]]  # type: ignore[union-attr]
    assert [g.get("class") for g in syncs] == ["tlw-sync tlw-hidden", "tlw-sync tlw-explicit"]
    marks = [g for g in groups if "tlw-mark" in (g.get("class") or "")]
    assert [g.get("class") for g in marks] == ["tlw-mark tlw-record", "tlw-mark tlw-wait"]
    titles = [r.findtext(f"{SVG}title") for r in kern]
    assert "consume <&> [105, 155] µs" in titles  # escaped in the file, intact once parsed


def test_svg_is_deterministic_and_labels_stay_inside() -> None:
    a, b = lanes_svg(two_stream_program().timeline()), lanes_svg(two_stream_program().timeline())
    assert a == b
    m = lanes_model(two_stream_program().timeline())
    last = m["syncs"][-1]  # torch.cuda.synchronize() sits at the right edge
    assert last["anchor"] == "end" and m["syncs"][0]["anchor"] == "start"


def test_text_for_the_item_program_is_exact() -> None:
    assert lanes_text(item_program().timeline()) == "\n".join([
        "async lanes (StreamSim model): 1 stream, 3 device spans, 1 sync (1 hidden, 0 explicit)",
        "host:",
        "  [0, 5]  running  launch a",
        "  [5, 10]  running  launch b",
        "  [10, 15]  running  launch c",
        "  [15, 605]  BLOCKED  loss.item()",
        "stream 0 (default stream):",
        "  [5, 305]  a",
        "  [305, 505]  b",
        "  [505, 605]  c",
        "syncs:",
        "  loss.item() — hidden (item): at 15 µs the host blocked 590 µs, waiting for c on stream 0 (default stream)",
        "totals: host running 15 µs, blocked 590 µs; device busy: stream 0 (default stream) 600 µs",
        "note: StreamSim model: per-stream FIFO, unbounded concurrency between streams, no copy engines; "
        "launch overhead 5 µs",
    ])


def test_text_without_times_keeps_only_order() -> None:
    text = lanes_text(item_program().timeline(), times=False)
    assert "[" not in text and "590" not in text and "totals" not in text
    assert "loss.item() — hidden (item): host blocked, waiting for c on stream 0 (default stream)" in text


def test_fixture_trace_renders_with_short_kernel_names() -> None:
    tl = load_trace(FIXTURE)
    text = lanes_text(tl)
    assert "  [318, 358]  at::native::vectorized_elementwise_kernel  ← aten::relu" in text
    assert "  [83, 383.5]  BLOCKED  aten::item" in text
    assert ("  aten::item — hidden (item): at 83 µs the host blocked 300.5 µs, waiting for "
            "Memcpy DtoH (Device -> Pageable)") in text
    assert "totals: host running 99.5 µs, blocked 349.5 µs; device busy: stream 7 364.5 µs, stream 20 100 µs" in text
    root = ET.fromstring(lanes_svg(tl))
    kernels = [r for r in root.iter(f"{SVG}rect") if "tlw-kernel" in (r.get("class") or "")]
    assert len(kernels) == 6 and kernels[3].get("class") == "tlw-kernel tlw-memcpy"
    full = kernels[1].findtext(f"{SVG}title") or ""
    assert full.startswith("void at::native::vectorized_elementwise_kernel<4") and full.endswith("← aten::relu")


def test_display_name() -> None:
    assert display_name("void at::native::reduce_kernel<512, 1>(int)") == "at::native::reduce_kernel"
    assert display_name("Memcpy DtoH (Device -> Pageable)") == "Memcpy DtoH (Device -> Pageable)"
    assert display_name("x" * 80) == "x" * 59 + "…"


def test_truncation_and_bad_input() -> None:
    sim = StreamSim(1)
    for k in range(10):
        sim.launch(f"k{k}", 3)
    m = lanes_model(sim.timeline(), max_spans=4)
    assert len(m["device"]) == 4 and len(m["host"]) == 4
    assert "showing the first 4 of 10 device spans" in m["notes"]
    with pytest.raises(TypeError, match="expected async lanes"):
        lanes_model({"kind": "stride"})
    with pytest.raises(ValueError, match="width must be at least"):
        lanes_model(sim.timeline(), width=100)
    empty = lanes_model(StreamSim().timeline())
    assert empty["end"] == 0 and empty["host"] == [] and ET.fromstring(lanes_svg(empty)) is not None


def test_sync_labels_too_close_for_two_rows_share_one_label() -> None:
    """Syncs a few pixels apart: labels go to the first free row, and one that finds no room is counted in the
    label of its namesake ("name ×2") instead of being printed over another."""
    from torchlens_widgets.lenses.asyncexec import StreamSim
    from torchlens_widgets.render.axis import CHAR_W
    from torchlens_widgets.render.lanes import lanes_model, lanes_svg

    sim = StreamSim(launch_overhead_us=5)
    sim.launch("matmul", 3000)
    sim.item("aten::item")
    for _ in range(3):
        sim.synchronize()
    m = lanes_model(sim.timeline())
    labels = [s["label"] for s in m["syncs"]]
    assert labels.count("") == 1 and labels.count("torch.cuda.synchronize() ×2") == 1, labels
    spans = sorted((s["row"], s["x"] - len(s["label"]) * CHAR_W if s["anchor"] == "end" else s["x"],
                    s["x"] if s["anchor"] == "end" else s["x"] + len(s["label"]) * CHAR_W)
                   for s in m["syncs"] if s["label"])
    assert all(a[2] <= b[1] for a, b in zip(spans, spans[1:], strict=False) if a[0] == b[0])   # no overlap in a row
    assert lanes_svg(m).count("×2") == 1
