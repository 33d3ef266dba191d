"""Two views of the compiler part of the course in a real JupyterLab, sharing one server, one notebook and one
page (the notebook runs once): the Triton program grid, a live widget (click a program: its elements and
masked-off lanes are drawn, its accesses listed by source line, and the selection reaches Python; Python's
`select` moves it back), and the compile trace, plain HTML (click a graph break's marker: torch's explanation
and hint open). Both read in JupyterLab's light and dark themes: every text at 4.5:1 or more, none under
10 px, none outside the output. Screenshots: /tmp/shots/{tgrid,compile}-{light,dark}.png.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .contrast import low_contrast, set_lab_theme, text_contrast
from .lab import append_and_run, screenshot_on_failure
from .test_memory_dark_theme import JS_CLIPPED

pytestmark = pytest.mark.browser

LAB_BUNDLES = ("tgrid",)
SHOTS = Path("/tmp/shots")
VIEWPORT = {"width": 1100, "height": 1000}
MIN_PX = 10
SELECTED = re.compile(r"(^|\s)sel(\s|$)")

GRID_SOURCE = """\
import torch
import triton
import triton.language as tl
from torchlens_widgets import show_program_grid

@triton.jit
def double_e2e(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)

grid_e2e = show_program_grid(double_e2e, (3,), torch.arange(10.), torch.zeros(10), 10, BLOCK=4)
grid_e2e"""
COMPILE_SOURCE = """\
from torchlens_widgets import show_compile

def breaks_e2e(x):
    y = x * 2
    print("a graph break")
    return y + 1

show_compile(breaks_e2e, torch.randn(4), backend="eager")"""

# The shared clipping check, also skipping what a closed <details> holds (Chromium lays it out, hidden).
JS_CLIPPED_SHOWN = JS_CLIPPED.replace(
    "e.closest('[hidden]')", "e.closest('[hidden]') || (e.closest('details:not([open])') && !e.closest('summary'))")
assert JS_CLIPPED_SHOWN != JS_CLIPPED, "test_memory_dark_theme.JS_CLIPPED changed: update the closed-<details> rule"

GRID = ".jp-OutputArea-output .tlw-tgrid-widget"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
JS_ACTIVE_CELL = "() => window.jupyterapp.shell.currentWidget.content.activeCellIndex"
JS_OUTPUT_TYPES = """(i) => {
  const outputs = window.jupyterapp.shell.currentWidget.content.widgets[i].model.outputs;
  const types = [];
  for (let k = 0; k < outputs.length; k++) types.push(Object.keys(outputs.get(k).toJSON().data || {}));
  return types;
}"""
COMPILE = ".jp-OutputArea-output .tlw-compile"


def write_notebook(root: Path) -> str:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(GRID_SOURCE), nbformat.v4.new_code_cell(COMPILE_SOURCE)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "grid_compile.ipynb")
    return "grid_compile.ipynb"


def _reads_in_both_themes(page, selector: str, name: str) -> dict[str, float]:
    """Contrast, size and clipping of every text of the first `selector`, light then dark; screenshots."""
    SHOTS.mkdir(exist_ok=True)
    worst = {}
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        set_lab_theme(page, theme)
        short = "dark" if "Dark" in theme else "light"
        page.locator(selector).first.scroll_into_view_if_needed()
        page.locator(selector).first.screenshot(path=str(SHOTS / f"{name}-{short}.png"))
        texts = text_contrast(page, selector)
        assert len(texts) >= 8, (name, theme, texts)
        low = low_contrast(texts)
        assert not low, f"{name} in {theme}: text under 4.5:1: {low[:8]}"
        small = [t for t in texts if t["size"] < MIN_PX - 0.05]
        assert not small, f"{name} in {theme}: text under {MIN_PX} px: {small[:8]}"
        clipped = page.evaluate(JS_CLIPPED_SHOWN, selector)
        assert not clipped, f"{name} in {theme}: text beyond the visible box: {clipped[:8]}"
        worst[short] = min(t["ratio"] for t in texts)
    set_lab_theme(page, "JupyterLab Light")
    return worst


def test_grid_widget_click_shows_the_program_and_syncs_to_python(nb_page, lab, request):
    from playwright.sync_api import expect

    page = nb_page
    with screenshot_on_failure(page, lab, request.node.name):
        view = page.locator(GRID).first
        expect(view.locator(".tlw-tg")).to_be_visible(timeout=30_000)  # the widget's own view, not the fallback
        output = page.locator(".jp-OutputArea-output", has=page.locator(GRID)).first
        expect(output.locator(".tlw-tgrid")).to_have_count(0)  # the static HTML gave way to the live view
        saved = page.evaluate(JS_OUTPUT_TYPES, 0)  # ... but stays in the saved output, for readers without a kernel
        assert any({WIDGET_VIEW, "text/html", "text/plain"} <= set(types) for types in saved), saved
        pids = view.locator(".pids .tlw-pid")
        expect(pids).to_have_count(3)
        expect(view.locator('.tlw-pid[data-pid="0"]')).to_have_class(SELECTED)
        expect(view.locator('.tlw-pid[data-pid="2"]')).to_have_class(re.compile(r"(^|\s)part(\s|$)"))

        # click the last program: its loaded and stored elements, and the masked-off lanes past the end
        view.locator('.tlw-pid[data-pid="2"]').click()
        expect(view.locator('.tlw-pid[data-pid="2"]')).to_have_class(SELECTED)
        expect(view.locator('.tlw-pid[data-pid="0"]')).not_to_have_class(SELECTED)
        expect(view.locator(".detail .head")).to_contain_text("program (2,)")
        for i in (8, 9):
            expect(view.locator(f'.c[data-tensor="x_ptr"][data-i="{i}"]')).to_have_class(re.compile(r"(^|\s)ld(\s|$)"))
            expect(view.locator(f'.c[data-tensor="out_ptr"][data-i="{i}"]')).to_have_class(re.compile(r"(^|\s)st(\s|$)"))
        for i in (10, 11):
            expect(view.locator(f'.c[data-tensor="x_ptr"][data-i="{i}"]')).to_have_class(re.compile(r"(^|\s)mk(\s|$)"))
        expect(view.locator('.c[data-tensor="x_ptr"][data-i="0"]')).to_have_class(re.compile(r"(^|\s)oth(\s|$)"))
        rows = view.locator("tr.tlw-acc")
        expect(rows).to_have_count(2)
        expect(rows.first).to_contain_text("tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)")
        expect(rows.first).to_contain_text("8..9")
        rows.nth(1).click()  # pick out the store: the load's cells dim
        expect(view.locator('.c[data-tensor="x_ptr"][data-i="8"]')).to_have_class(re.compile(r"(^|\s)dim(\s|$)"))
        expect(view.locator('.c[data-tensor="out_ptr"][data-i="8"]')).not_to_have_class(re.compile(r"(^|\s)dim(\s|$)"))
        rows.nth(1).click()

        # browser -> Python, then Python -> browser
        out = append_and_run(page, "print(grid_e2e.program)", "grid-read").locator(".jp-OutputArea-output")
        expect(out).to_have_text("(2,)")
        append_and_run(page, "grid_e2e.select(1); None", "grid-set")
        expect(view.locator('.tlw-pid[data-pid="1"]')).to_have_class(SELECTED)
        expect(view.locator('.c[data-tensor="x_ptr"][data-i="4"]')).to_have_class(re.compile(r"(^|\s)ld(\s|$)"))

        # the arrow keys step through the programs, and JupyterLab does not take them to move between cells
        view.locator('.tlw-pid[data-pid="1"]').click()  # focuses the grid (and makes its cell the active one)
        active = page.evaluate(JS_ACTIVE_CELL)
        page.keyboard.press("ArrowDown")
        expect(view.locator('.tlw-pid[data-pid="2"]')).to_have_class(SELECTED)
        assert page.evaluate(JS_ACTIVE_CELL) == active, "ArrowDown in the grid moved the notebook's active cell"

        worst = _reads_in_both_themes(page, GRID, "tgrid")
    print("program grid, lowest contrast:", worst)


def test_compile_view_opens_a_graph_break_with_torchs_explanation(nb_page, lab, request):
    from playwright.sync_api import expect

    page = nb_page
    with screenshot_on_failure(page, lab, request.node.name):
        view = page.locator(COMPILE).first
        expect(view).to_be_visible(timeout=30_000)
        expect(view).to_contain_text("1 graph break")
        line = view.locator(".ln", has=page.locator(".brk"))
        expect(line).to_have_count(1)
        expect(line).to_contain_text('print("a graph break")')
        why = view.locator("details.why").first
        explanation = why.locator("div").first
        expect(why).not_to_have_attribute("open", "")
        expect(explanation).to_be_hidden()

        why.locator("summary.brk").click()  # the marker under the line that broke the graph
        expect(why).to_have_attribute("open", "")
        expect(explanation).to_be_visible()
        expect(explanation).to_contain_text("builtin operator print")  # torch's `print`, set as code
        expect(explanation.locator("code", has_text="print")).to_be_visible()
        expect(why.locator("li").first).to_be_visible()
        expect(why.locator("li").first).to_contain_text("print")

        worst = _reads_in_both_themes(page, COMPILE, "compile")
    print("compile trace, lowest contrast:", worst)
