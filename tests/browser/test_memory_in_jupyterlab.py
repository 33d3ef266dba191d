"""End to end in a real browser: the memory timeline widget in JupyterLab, hover and click synced with Python.

The notebook written here loads a copy of the hand-made snapshot tests/fixtures/memory/segments.json
(frames added to its two allocations, so the bands have stacks to show) and shows
`w = show_memory(snap, simulator=True)`. In headless Chromium: hovering a band shows its stack in the
page; a click on the timeline selects the nearest event, the state panel Python sends back shows that
event (its pending block and the simulator's explanation), and Python reads `w.selected_event`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from .lab import append_and_run, open_and_run_all, screenshot_on_failure

pytestmark = pytest.mark.browser

LAB_BUNDLES = ("memory",)
SNAPSHOT = Path(__file__).resolve().parents[1] / "fixtures" / "memory" / "segments.json"
SCREENSHOT = Path("/tmp/memory_widget.png")
STACKS = {  # event index of each alloc in segments.json → the frames the copy gives it
    1: [{"filename": "train.py", "line": 21, "name": "forward"}, {"filename": "train.py", "line": 40, "name": "step"}],
    3: [{"filename": "comm.py", "line": 7, "name": "all_reduce_side_stream"}],
}
CLICK_EVENT = 4  # free_requested of the stream-0 block, left pending (record_stream) until event 8

NOTEBOOK_SOURCE = """\
import json
from torchlens_widgets import load_snapshot, show_memory

snap = load_snapshot("snapshot.json")
w = show_memory(snap, simulator=True)
w"""
PRINT_SOURCE = 'print(json.dumps({"selected": w.selected_event, "panel": w.state()["index"], "hovered": w.hovered_band}))'

WIDGET = ".jp-OutputArea-output .tlw-memory-widget"
TIMELINE = f"{WIDGET} svg.tlw-mw-timeline"
JS_FITTED = """(sel) => {
  const root = document.querySelector(sel);
  const svg = root && root.querySelector('svg.tlw-mw-timeline');
  return !!svg && Math.abs(root.getBoundingClientRect().width - Number(svg.getAttribute('width'))) < 24;
}"""


def write_notebook(root: Path) -> str:
    """The notebook the `lab` fixture serves, with its snapshot next to it (see conftest.py)."""
    import nbformat

    raw = json.loads(SNAPSHOT.read_text())
    for i, frames in STACKS.items():
        raw["device_traces"][0][i]["frames"] = frames
    (root / "snapshot.json").write_text(json.dumps(raw))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(NOTEBOOK_SOURCE)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "memory_e2e.ipynb")
    return "memory_e2e.ipynb"


def test_memory_widget_hover_and_click_sync_with_python(page, lab, request):
    from playwright.sync_api import expect

    t0 = time.monotonic()
    with screenshot_on_failure(page, lab, request.node.name):
        open_and_run_all(page, lab, 90_000, 60_000)
        # the page asks Python to lay the picture out at its width; wait until it has come back
        page.wait_for_function(JS_FITTED, arg=WIDGET, timeout=30_000)

        view = page.locator(TIMELINE)
        expect(view).to_have_count(1, timeout=30_000)
        expect(view).to_be_visible()
        widget = page.locator(WIDGET)
        assert page.locator(".jp-OutputArea-output img").count() == 0, "the static fallback was shown"
        expect(view.locator("g.bd")).to_have_count(2)

        # 1. Hover the 15 MB band (band 1, allocated at event 3): its stack shows in the page.
        tip = widget.locator(".tlw-mw-tip")
        view.locator('g.bd[data-band="1"] rect.band').first.hover()
        expect(tip).to_be_visible()
        expect(tip).to_contain_text("all_reduce_side_stream (comm.py:7)")
        expect(tip).to_contain_text("14.3 MiB")
        view.locator('g.bd[data-band="0"] rect.band').first.hover()
        expect(tip).to_contain_text("forward (train.py:21)")

        # 2. Click the timeline where event 4 is: the state panel shows event 4 with its pending block.
        model = json.loads(append_and_run(page, "print(json.dumps(w.model['col_event']))", "cols")
                           .locator(".jp-OutputArea-output").first.inner_text())
        col = model.index(CLICK_EVENT) + len([c for c in model if c == CLICK_EVENT]) // 2
        box = view.bounding_box()
        assert box is not None
        scale = box["width"] / float(view.get_attribute("width"))  # 1: the picture is laid out at the page's width
        view.click(position={"x": (72 + col + 0.5) * scale, "y": (26 + 200) * scale})
        state = widget.locator(f'svg.tlw-mw-state[data-event="{CLICK_EVENT}"]')
        expect(state).to_have_count(1, timeout=15_000)
        expect(state.locator("text.ttl")).to_contain_text(f"after event {CLICK_EVENT} (the marked line): free_requested")
        expect(state.locator("rect.seg")).to_have_count(2)
        expect(state.locator("rect.blk.b-pending")).to_have_count(1)
        expect(state).to_contain_text("record_stream")
        mark = widget.locator("path.mark")  # a vertical line has no area, so check that it is placed and shown
        assert mark.evaluate("m => m.style.display") == "" and mark.get_attribute("d").endswith("V286")
        widget.screenshot(path=str(SCREENSHOT))

        # 3. Python reads the selection the click made.
        out = append_and_run(page, PRINT_SOURCE, "print-state").locator(".jp-OutputArea-output")
        got = json.loads(out.first.inner_text().strip())
        assert got["selected"] == CLICK_EVENT and got["panel"] == CLICK_EVENT, got

        # 4. Python → page: select_event redraws the panel.
        append_and_run(page, "w.select_event(8); None", "select-from-python")
        expect(widget.locator('svg.tlw-mw-state[data-event="8"]')).to_have_count(1)
    elapsed = time.monotonic() - t0
    assert elapsed < 180, f"the browser test took {elapsed:.0f} s, over its 3-minute budget"
