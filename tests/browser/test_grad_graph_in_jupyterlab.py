"""End to end in a real browser: the grad_fn graph widget in JupyterLab, clicks and steps synced with Python.

A notebook written here builds a small MLP, records its backward and shows
`w = show_grad_graph(loss, params=model, recording=rec)`. In headless Chromium: a node click shows
its details and sets `w.selected`; "next step" moves the running-node highlight and sets `w.step`;
Python's `w.step_to(...)` moves it back; "focus ±1" makes Python send a smaller picture.
Server and browser come from conftest.py; notebook helpers from the stride browser test.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from .lab import append_and_run, open_and_run_all, screenshot_on_failure

pytestmark = pytest.mark.browser

LAB_BUNDLES = ("gradgraph",)
SCREENSHOT = Path("/tmp/gradgraph_widget.png")

NOTEBOOK_SOURCE = """\
import json
import torch
from torch import nn
from torchlens_widgets import record_backward, show_grad_graph

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
loss = model(torch.randn(5, 3)).pow(2).mean()
rec = record_backward(loss)
w = show_grad_graph(loss, params=model, recording=rec)
w"""
PRINT_SOURCE = 'print(json.dumps({"selected": w.selected, "step": w.step, "running": w.running()}))'

# The MLP's graph, walked by hand (BFS over next_functions from the loss; tests/widgets/test_grad_graph_widget.py
# checks the same ids): 4 is ReluBackward0; the backward runs 0 Mean, 1 Pow, 2 Addmm, 3 2.bias, 5 T, 7 2.weight, ...
CLICK_NODE, CLICK_NAME = 4, "ReluBackward0"
RUN_ORDER = [0, 1, 2, 3, 5, 7]
FOCUS_NODES = {2, 4, 6}  # ReluBackward0 and its neighbours (one hop)

VIEW = ".jp-OutputArea-output .tlw-gradgraph-widget svg.tlw-grad"
WIDGET = ".jp-OutputArea-output .tlw-gradgraph-widget"
SELECTED = re.compile(r"(^|\s)tlw-gselected(\s|$)")


def write_notebook(root: Path) -> str:
    """The notebook the `lab` fixture serves (see conftest.py)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(NOTEBOOK_SOURCE)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    name = "grad_graph_e2e.ipynb"
    nbformat.write(nb, root / name)
    return name


def read_state(page, tag: str) -> dict:
    out = append_and_run(page, PRINT_SOURCE, tag).locator(".jp-OutputArea-output")
    out.first.wait_for()
    return json.loads(out.first.inner_text().strip())


def running_ids(view) -> list[str]:
    return [g.get_attribute("data-node") for g in view.locator(".tlw-running").all()]


def test_grad_graph_widget_click_and_step_sync_with_python(page, lab, request):
    from playwright.sync_api import expect

    t0 = time.monotonic()
    with screenshot_on_failure(page, lab, request.node.name):
        open_and_run_all(page, lab, 90_000, 60_000)

        # The widget's own view (not the static SVG fallback), one node group per graph node.
        view = page.locator(VIEW)
        expect(view).to_have_count(1, timeout=30_000)
        expect(view).to_be_visible()
        widget = page.locator(WIDGET)
        assert page.locator(".jp-OutputArea-output img").count() == 0, "the static fallback was shown"
        expect(view.locator("g.tlw-gnode")).to_have_count(11)
        expect(widget.locator(".tlw-step-label")).to_have_text("before backward (steps 0–10)")

        # 1. Click a node: the details panel names it, and Python's w.selected is its id.
        node = view.locator(f'g.tlw-gnode[data-node="{CLICK_NODE}"]')
        node.click()
        expect(node).to_have_class(__import__("re").compile(r"(^|\s)tlw-gselected(\s|$)"))
        expect(widget.locator(".tlw-details .tlw-d-name")).to_have_text(f"#{CLICK_NODE} {CLICK_NAME}")
        expect(widget.locator(".tlw-details .tlw-saved-row")).to_have_count(1)  # the relu's saved result
        state = read_state(page, "print-selected")
        assert state["selected"] == CLICK_NODE, f"Python sees selected={state['selected']}, the click was on {CLICK_NODE}"
        assert state["step"] == -1

        # 2. Step: the running highlight moves from node to node in the recorded order; Python follows.
        assert running_ids(view) == [], "a node is marked running before backward"
        nxt = widget.locator('button[data-action="next"]')
        nxt.click()
        expect(view.locator(".tlw-running")).to_have_count(1)
        before = running_ids(view)
        nxt.click()
        expect(view.locator(f'.tlw-running[data-node="{RUN_ORDER[1]}"]')).to_have_count(1)
        after = running_ids(view)
        assert before == [str(RUN_ORDER[0])] and after == [str(RUN_ORDER[1])] and before != after
        expect(widget.locator(".tlw-step-label")).to_have_text("step 1/10: PowBackward0")
        widget.screenshot(path=str(SCREENSHOT))
        state = read_state(page, "print-step")
        assert state == {"selected": CLICK_NODE, "step": 1, "running": RUN_ORDER[1]}, state

        # 3. Python -> browser: step_to moves the highlight; a leaf receiving .grad is marked.
        append_and_run(page, "w.step_to(5); None", "step-from-python")
        expect(view.locator(f'.tlw-running[data-node="{RUN_ORDER[5]}"]')).to_have_count(1)
        expect(view.locator(f'.tlw-grad-leaf[data-node="{RUN_ORDER[5]}"]')).to_have_count(1)

        # 4. Focus ±1 hop around the selected node: Python recomputes and the page redraws the smaller picture.
        widget.locator(".tlw-details input.tlw-hops").fill("1")
        widget.locator('.tlw-details button[data-action="focus"]').click()
        expect(view.locator("g.tlw-gnode")).to_have_count(len(FOCUS_NODES))
        shown = {int(g.get_attribute("data-node")) for g in view.locator("g.tlw-gnode").all()}
        assert shown == FOCUS_NODES
        out = append_and_run(page, "print(w.focus, w.hops, len(w.model['nodes']))", "print-focus")
        assert out.locator(".jp-OutputArea-output").first.inner_text().split() == [str(CLICK_NODE), "1", "3"]
    elapsed = time.monotonic() - t0
    assert elapsed < 180, f"the browser test took {elapsed:.0f} s, over its 3-minute budget"
