"""End to end in a real browser: notebook 02 in JupyterLab, the stride widget's own view, click -> Python.

Runs every cell of notebook 02 in headless Chromium, checks that the StrideDiagram views were drawn by
the widget's JavaScript (not the static SVG fallback), clicks an element of a known widget, checks the
DOM highlights the storage cell it reads, and reads the widget's `selection` back from Python.
"""

from __future__ import annotations

import json
import re
import time
from contextlib import contextmanager

import pytest

pytestmark = pytest.mark.browser

RUN_ALL_TIMEOUT_S = 120
CELL_TIMEOUT_S = 30
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

JS_KERNEL_IDLE = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.sessionContext || !panel.content || !panel.content.model) return false;
  const ctx = panel.sessionContext;
  const kernel = ctx.session && ctx.session.kernel;
  return ctx.isReady && !!kernel && kernel.status === 'idle' && kernel.connectionStatus === 'connected';
}"""

JS_RUN = """async ([command, timeoutMs]) => {
  const app = window.jupyterapp;
  const timeout = new Promise((_, reject) =>
    setTimeout(() => reject(new Error(`${command} did not finish in ${timeoutMs} ms`)), timeoutMs));
  return await Promise.race([app.commands.execute(command), timeout]);
}"""

JS_APPEND_CELL = """([source, tag]) => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  const n = nb.model.sharedModel.cells.length;
  nb.model.sharedModel.insertCell(n, {cell_type: 'code', source});
  return n;
}"""

JS_MARK_AND_SELECT = """([index, tag]) => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  const cell = nb.widgets[index];
  if (!cell) return false;
  cell.node.setAttribute('data-tlw-e2e', tag);
  nb.activeCellIndex = index;
  nb.deselectAll();
  return nb.activeCell === cell;
}"""

# Every code cell executed, the kernel idle, no cell still queued/running.
JS_ALL_EXECUTED = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  if (!kernel || kernel.status !== 'idle') return false;
  for (const cell of panel.content.widgets) {
    if (cell.model.type !== 'code') continue;
    if (cell.model.executionCount === null) return false;
    if (cell.model.executionState && cell.model.executionState !== 'idle') return false;
  }
  return true;
}"""

# Error outputs of cells not tagged raises-exception: [cell index, ename, evalue].
JS_ERRORS = """() => {
  const out = [];
  window.jupyterapp.shell.currentWidget.content.widgets.forEach((cell, i) => {
    if (cell.model.type !== 'code') return;
    const tags = cell.model.getMetadata('tags') || [];
    if (tags.includes('raises-exception')) return;
    const outputs = cell.model.outputs;
    for (let k = 0; k < outputs.length; k++) {
      const o = outputs.get(k).toJSON();
      if (o.output_type === 'error') out.push([i, o.ename, o.evalue]);
    }
  });
  return out;
}"""


@contextmanager
def screenshot_on_failure(page, lab, name: str):
    try:
        yield
    except Exception as exc:
        shot = lab.tmp / f"{name}-failure.png"
        try:
            page.screenshot(path=str(shot), full_page=True)
            where = f"screenshot: {shot}"
        except Exception as shot_exc:  # the page may be gone
            where = f"no screenshot ({shot_exc!r})"
        raise AssertionError(
            f"{exc}\n\n{where}\nserver log: {lab.log}\n--- server log tail ---\n{lab.log_tail(2000)}"
        ) from exc


def wait_kernel_idle(page, timeout_s: float = 60) -> None:
    page.wait_for_function(JS_KERNEL_IDLE, timeout=timeout_s * 1000, polling=200)


def append_and_run(page, source: str, tag: str):
    """Append a code cell, run it, wait for the kernel to finish it; return a locator of the cell."""
    index = page.evaluate(JS_APPEND_CELL, [source, tag])
    page.wait_for_function(
        "(i) => window.jupyterapp.shell.currentWidget.content.widgets.length > i", arg=index, polling=100
    )
    assert page.evaluate(JS_MARK_AND_SELECT, [index, tag]), f"could not make the appended cell {index} active"
    page.evaluate(JS_RUN, ["notebook:run-cell", CELL_TIMEOUT_S * 1000])
    page.wait_for_function(JS_ALL_EXECUTED, timeout=CELL_TIMEOUT_S * 1000, polling=100)
    errors = page.evaluate(JS_ERRORS)
    assert not errors, f"cells raised: {errors}"
    return page.locator(f'[data-tlw-e2e="{tag}"]')


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
        page.goto(lab.lab_url(), wait_until="domcontentloaded", timeout=60_000)
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_function("() => !!window.jupyterapp", timeout=30_000)
        wait_kernel_idle(page)

        # 1. Run the whole notebook as a learner would; every code cell must run without an error.
        page.evaluate(JS_RUN, ["notebook:run-all-cells", RUN_ALL_TIMEOUT_S * 1000])
        page.wait_for_function(JS_ALL_EXECUTED, timeout=30_000, polling=200)
        errors = page.evaluate(JS_ERRORS)
        assert not errors, f"notebook cells raised: {errors}"

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
