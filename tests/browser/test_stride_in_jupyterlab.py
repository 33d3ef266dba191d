"""End to end in a real browser: notebook 02 in JupyterLab, the stride widget's own view, click -> Python.

Runs every cell of notebook 02 in headless Chromium, checks that the StrideDiagram views were drawn by
the widget's JavaScript (not the static SVG fallback), clicks an element of a known widget, checks the
DOM highlights the storage cell it reads, and reads the widget's `selection` back from Python.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from .lab import append_and_run, open_and_run_all, screenshot_on_failure

pytestmark = pytest.mark.browser

RUN_ALL_TIMEOUT_S = 120
SELECTED = re.compile(r"(^|\s)tlw-selected(\s|$)")

# The widget's own view: the anywidget render() marks its element and draws an <svg class="tlw-stride">
# with .tlw-cell/.tlw-element groups. The fallback is an image/svg+xml output (an <img> in Lab), never this.
VIEW = ".jp-OutputArea-output .tlw-stride-widget > svg.tlw-stride"

WIDGET_SOURCE = """\
import json
import torch
from torchlens_widgets import stride_diagram
x_e2e = torch.arange(6.).reshape(2, 3)
w_e2e = stride_diagram(x_e2e, x_e2e.t(), names=["x_e2e", "xt_e2e"])
w_e2e"""
# Clicked: element 1 (row-major) of tensor 1, i.e. xt_e2e[0, 1] == x_e2e[1, 0], which reads storage cell 3.
CLICK_TENSOR, CLICK_E, CLICK_CELL = 1, 1, 3
PRINT_SOURCE = "print(json.dumps(w_e2e.selection, sort_keys=True))"
SET_FROM_PYTHON_SOURCE = "w_e2e.select_cell(w_e2e.selection['storage'], 0); None"

def expected_selection() -> dict:
    """The selection a click on CLICK_TENSOR/CLICK_E implies, computed by the Python API on the same diagram."""
    import torch

    from torchlens_widgets import stride_diagram

    x = torch.arange(6.0).reshape(2, 3)
    w = stride_diagram(x, x.t(), names=["x_e2e", "xt_e2e"])
    sel = w.select_element(CLICK_TENSOR, CLICK_E)
    assert sel["cell"] == CLICK_CELL and sel["elements"] == [[0, 3], [1, 1]], sel  # x[1, 0] and xt[0, 1]
    return json.loads(json.dumps(sel))


def test_stride_widget_renders_and_clicks_sync_to_python(page, lab, request):
    from playwright.sync_api import expect

    t0 = time.monotonic()
    with screenshot_on_failure(page, lab, request.node.name):
        # 1. Run the whole notebook as a learner would; every code cell must run without an error.
        open_and_run_all(page, lab, RUN_ALL_TIMEOUT_S * 1000, 30_000)

        # 2. The notebook's stride diagrams are the widget's live SVG, with storage cells and elements.
        views = page.locator(VIEW)
        expect(views.first).to_be_visible(timeout=30_000)
        assert views.count() >= 1
        first = views.first
        assert first.locator(".tlw-cell").count() > 0, "no .tlw-cell storage cells in the notebook's widget"
        assert first.locator(".tlw-element").count() > 0, "no .tlw-element tensor elements in the notebook's widget"
        expect(first.locator(".tlw-cell").first).to_be_visible()
        expect(first.locator(".tlw-element").first).to_be_visible()

        # 3. A widget of known content, bound to a known name: click an element of xt_e2e.
        expected = expected_selection()
        cell = append_and_run(page, WIDGET_SOURCE, "widget")
        view = cell.locator(VIEW)
        expect(view).to_have_count(1, timeout=30_000)
        expect(view).to_be_visible()
        assert cell.locator(".jp-OutputArea-output img, .jp-RenderedSVG").count() == 0, "the static fallback was shown"
        assert view.locator(".tlw-selected").count() == 0, "something is selected before any click"

        element = view.locator(f'.tlw-element[data-tensor="{CLICK_TENSOR}"][data-e="{CLICK_E}"]')
        expect(element).to_have_attribute("data-cell", str(CLICK_CELL))
        element.click()

        storage_cell = view.locator(f'.tlw-cell[data-storage="{expected["storage"]}"][data-cell="{CLICK_CELL}"]')
        expect(storage_cell).to_have_class(SELECTED)
        for t, e in expected["elements"]:
            expect(view.locator(f'.tlw-element[data-tensor="{t}"][data-e="{e}"]')).to_have_class(SELECTED)
        expect(view.locator(".tlw-selected")).to_have_count(1 + len(expected["elements"]))
        cell.locator(".jp-OutputArea-output").first.screenshot(path="/tmp/browser_widget.png")

        # 4. Browser -> Python: the kernel's widget has the selection the click implies.
        out = append_and_run(page, PRINT_SOURCE, "print").locator(".jp-OutputArea-output")
        expect(out).to_have_count(1)
        text = out.inner_text().strip()
        assert json.loads(text) == expected, f"Python sees selection {text}, the click implies {expected}"

        # 5. Python -> browser: a selection set in the kernel moves the highlight.
        append_and_run(page, SET_FROM_PYTHON_SOURCE, "set")
        expect(view.locator(f'.tlw-cell[data-storage="{expected["storage"]}"][data-cell="0"]')).to_have_class(SELECTED)
        expect(storage_cell).not_to_have_class(SELECTED)
    elapsed = time.monotonic() - t0
    assert elapsed < 180, f"the browser test took {elapsed:.0f} s, over its 3-minute budget"
