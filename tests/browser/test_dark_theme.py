"""The stride diagram, dispatch trace and grad graph read in JupyterLab's light and dark themes.

One notebook shows each widget live (values that used to be clipped in the stride cells, a dispatch trace
with long dispatch-key lists, a grad graph with a hooked node and a recorded backward). In headless
Chromium at a 1,100 px window, for each theme and widget: every text reaches 4.5:1 against what is under
it (text colour alpha blended), none is drawn under 10 px, and none reaches past the widget's visible box.
Screenshots: /tmp/shots/{stride,dispatch,gradgraph}-{light,dark}.png. (The memory timeline has its own
test, test_memory_dark_theme.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .contrast import low_contrast, set_lab_theme, text_contrast
from .lab import open_and_run_all, screenshot_on_failure
from .test_memory_dark_theme import JS_CLIPPED

pytestmark = pytest.mark.browser

LAB_BUNDLES = ("stride", "dispatch", "gradgraph")
SHOTS = Path("/tmp/shots")
VIEWPORT = {"width": 1100, "height": 1000}
MIN_PX = 10
SOURCE = """\
import torch
from torch import nn
from torchlens_widgets import dispatch_trace, dispatch_widget, record_backward, show_grad_graph, stride_diagram

torch.manual_seed(0)
x = torch.randn(3, 4) * 1000
stride_diagram(x, x.t(), names=["x", "x.t()"])
"""
DISPATCH = """\
model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
inp = torch.randn(2, 4)
with dispatch_trace(model) as tr:
    model(inp.t().contiguous().t()).sum()
dispatch_widget(tr)
"""
GRAD = """\
w = torch.randn(3, requires_grad=True)
y = (w * 2).exp()
y.grad_fn.register_hook(lambda gi, go: None)  # a hooked node: dashed outline, in the legend
loss = y.sum()
rec = record_backward(loss, retain_graph=True)
show_grad_graph(loss, recording=rec)
"""
WIDGETS = {
    "stride": ".jp-OutputArea-output .tlw-stride-widget",
    "dispatch": ".jp-OutputArea-output .tlw-dispatch",
    "gradgraph": ".jp-OutputArea-output .tlw-gradgraph-widget",
}


def write_notebook(root: Path) -> str:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in (SOURCE, DISPATCH, GRAD)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "themes.ipynb")
    return "themes.ipynb"


@pytest.fixture
def page(browser):
    """A page at a 1,100 px wide window (the size the course promises to read well at)."""
    context = browser.new_context(viewport=VIEWPORT)
    p = context.new_page()
    p.set_default_timeout(30_000)
    try:
        yield p
    finally:
        context.close()


def test_widgets_read_in_light_and_dark(page, lab, request):
    from playwright.sync_api import expect

    worst: dict[str, float] = {}
    with screenshot_on_failure(page, lab, request.node.name):
        open_and_run_all(page, lab, 120_000, 60_000)
        for sel in WIDGETS.values():
            expect(page.locator(sel).first).to_be_visible(timeout=30_000)
        SHOTS.mkdir(exist_ok=True)
        for theme in ("JupyterLab Light", "JupyterLab Dark"):
            set_lab_theme(page, theme)
            short = "dark" if "Dark" in theme else "light"
            for name, sel in WIDGETS.items():
                page.locator(sel).first.scroll_into_view_if_needed()
                page.locator(sel).first.screenshot(path=str(SHOTS / f"{name}-{short}.png"))
                texts = text_contrast(page, sel)
                assert len(texts) >= 8, (name, texts)
                low = low_contrast(texts)
                assert not low, f"{name} in {theme}: text under 4.5:1: {low[:8]}"
                small = [t for t in texts if t["size"] < MIN_PX - 0.05]
                assert not small, f"{name} in {theme}: text under {MIN_PX} px: {small[:8]}"
                clipped = page.evaluate(JS_CLIPPED, sel)
                if name == "dispatch":  # rows below scroll vertically by design; only the width must fit
                    clipped = [c for c in clipped if c["right"] > c["visible_right"] + 1]
                assert not clipped, f"{name} in {theme}: text beyond the visible box: {clipped[:8]}"
                worst[f"{name}-{short}"] = min(t["ratio"] for t in texts)
        # selection and hooks look different: click the hooked node, its outline turns solid accent
        hooked = page.locator(WIDGETS["gradgraph"] + " g.hooked.tlw-gnode").first
        expect(page.locator(WIDGETS["gradgraph"] + " g.lg.hooked")).to_have_count(1)
        hooked.click()
        expect(page.locator(WIDGETS["gradgraph"] + " g.hooked.tlw-gselected")).to_have_count(1)
        dash = hooked.locator("rect").evaluate("(r) => getComputedStyle(r).strokeDasharray")
        assert dash in ("none", ""), f"a selected hooked node keeps the hook's dashes: {dash}"
        other = page.locator(WIDGETS["gradgraph"] + " g.lg.hooked rect").evaluate("(r) => getComputedStyle(r).strokeDasharray")
        assert other not in ("none", ""), "the legend's hooked sample is dashed"
        page.locator(WIDGETS["gradgraph"]).first.screenshot(path=str(SHOTS / "gradgraph-dark-selected-hooked.png"))
        # scrolled sideways (a narrower window), the op column stays in view
        page.set_viewport_size({"width": 700, "height": 1000})
        scroll = page.locator(WIDGETS["dispatch"] + " .tlw-scroll").first
        # JupyterLab lays its panels out again a frame or more after the window changes (slower on a busy machine)
        page.wait_for_function("(sel) => { const s = document.querySelector(sel); "
                               "return s !== null && s.scrollWidth > s.clientWidth; }",
                               arg=WIDGETS["dispatch"] + " .tlw-scroll", timeout=15_000)
        shift = scroll.evaluate("(s) => { s.scrollLeft = s.scrollWidth; return s.scrollLeft; }")
        assert shift > 0, "at 700 px the dispatch table should need sideways scrolling"
        first = scroll.evaluate(
            "(s) => { const r = s.getBoundingClientRect(); return [...s.querySelectorAll('tbody td:first-child')]"
            ".slice(0, 5).map((td) => td.getBoundingClientRect().left - r.left); }")
        assert first and all(-1 <= x <= 1 for x in first), f"op column moved out of view when scrolled: {first}"
        page.locator(WIDGETS["dispatch"]).first.screenshot(path=str(SHOTS / "dispatch-scrolled-700px.png"))
    print("lowest contrast per widget and theme:", worst)
