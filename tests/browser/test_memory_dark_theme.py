"""The memory timeline widget reads in JupyterLab's light and dark themes at a 1,100 px wide window.

The notebook shows `show_memory(snap, simulator=True, selected_event=4)` on a copy of the hand-made
snapshot tests/fixtures/memory/segments.json (stacks added), so the timeline, its legend and notes and
the state panel are all on screen. In headless Chromium, at 1,100 x 1,000 px with Lab's file browser
open, for each theme: every text reaches 4.5:1 against what is under it, no text is drawn smaller
than 10 px on screen, and no text reaches beyond the widget's visible box (nothing clipped). The band
tooltip is measured too, and a second widget on a trace without timestamps (its wall-clock button
disabled, with the reason shown). Screenshots: /tmp/shots/memory-{light,dark}[-tooltip|-no-times].png.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .contrast import low_contrast, set_lab_theme, text_contrast
from .lab import open_and_run_all, screenshot_on_failure
from .test_memory_in_jupyterlab import write_notebook as _write_segments_notebook

pytestmark = pytest.mark.browser

LAB_BUNDLES = ("memory",)
SHOTS = Path("/tmp/shots")
VIEWPORT = {"width": 1100, "height": 1000}
WIDGET = ".jp-OutputArea-output .tlw-memory-widget"
MIN_PX = 10

NOTEBOOK_SOURCE = """\
from torchlens_widgets import load_snapshot, show_memory

w = show_memory(load_snapshot("snapshot.json"), simulator=True, selected_event=4)
w"""
# a simulator-style trace without timestamps: the wall-clock button is disabled and says why
NO_TIMES_SOURCE = """\
events = [{"action": a, "addr": 4096 * (i % 3 + 1), "size": 1 << (12 + i), "stream": 0}
          for i, a in enumerate(["alloc", "alloc", "free_requested", "free_completed"])]
show_memory({"device_traces": [events]}, title="no timestamps")"""
NO_TIMES = "[data-tlw-no-times]"  # the second widget, tagged by the test

# The layout has settled: the page asked Python for its width and the picture came back at that width.
JS_SETTLED = """(sel) => {
  const root = document.querySelector(sel);
  const svg = root && root.querySelector('svg.tlw-mw-timeline');
  const state = root && root.querySelector('svg.tlw-mw-state');
  if (!svg || !state) return false;
  const room = root.getBoundingClientRect().width;
  return Math.abs(Math.max(room, 480) - Number(svg.getAttribute('width'))) < 24
    && svg.getAttribute('width') === state.getAttribute('width');
}"""

# Texts whose box reaches beyond what the widget shows: the widget's box, cut by every ancestor that clips.
JS_CLIPPED = """(sel) => {
  const root = document.querySelector(sel);
  const cut = (a, b) => ({left: Math.max(a.left, b.left), right: Math.min(a.right, b.right),
                          top: Math.max(a.top, b.top), bottom: Math.min(a.bottom, b.bottom)});
  const out = [];
  const area = root.closest('.jp-OutputArea-output').getBoundingClientRect();
  for (const e of root.querySelectorAll('*')) {
    if (!([...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()))) continue;
    if (e.tagName === 'style' || e.tagName === 'title' || e.closest('title')) continue;
    const cs = getComputedStyle(e);
    if (cs.display === 'none' || cs.visibility === 'hidden' || e.closest('[hidden]')) continue;
    const r = e.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) continue;
    let vis = cut(root.getBoundingClientRect(), area);
    for (let a = e.parentElement; a && a !== root; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX !== 'visible' || s.overflowY !== 'visible') vis = cut(vis, a.getBoundingClientRect());
    }
    if (r.left < vis.left - 1 || r.right > vis.right + 1 || r.top < vis.top - 1 || r.bottom > vis.bottom + 1)
      out.push({text: e.textContent.trim().slice(0, 50), right: Math.round(r.right), visible_right: Math.round(vis.right)});
  }
  return out;
}"""


def write_notebook(root: Path) -> str:
    import nbformat

    name = _write_segments_notebook(root)  # writes snapshot.json (with stacks) and its own notebook
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(NOTEBOOK_SOURCE), nbformat.v4.new_code_cell(NO_TIMES_SOURCE)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "memory_theme.ipynb")
    assert name != "memory_theme.ipynb"
    return "memory_theme.ipynb"


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


def _rgba(css: str) -> tuple[float, float, float, float]:
    m = re.match(r"rgba?\(([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)(?:[ ,/]+([\d.]+))?\)", css)
    assert m, css
    return float(m[1]), float(m[2]), float(m[3]), 1.0 if m[4] is None else float(m[4])


# HTML texts' own colour (contrast.py reports `fill` for them) and the first opaque background behind them.
JS_HTML_COLOURS = """(sel) => {
  const root = document.querySelector(sel);
  const out = [];
  for (const e of root.querySelectorAll('*')) {
    if (e instanceof SVGElement || e.tagName === 'STYLE') continue;
    if (!([...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()))) continue;
    const cs = getComputedStyle(e);
    if (cs.display === 'none' || cs.visibility === 'hidden' || e.closest('[hidden]')) continue;
    let bg = null;
    for (let a = e; a && !bg; a = a.parentElement) {
      const c = getComputedStyle(a).backgroundColor;
      if (c && !/rgba\\(.*, 0\\)$/.test(c) && c !== 'transparent') bg = c;
    }
    out.push({text: e.textContent.trim().slice(0, 40), fg: cs.color, bg: bg || getComputedStyle(document.body).backgroundColor});
  }
  return out;
}"""


def _blended_ratio(t: dict) -> float:
    """Contrast with the text colour's alpha blended over its background (Lab's fg2 is black at 54 %)."""
    def lum(rgb: tuple[float, ...]) -> float:
        lin = [v / 255 / 12.92 if v / 255 <= 0.04045 else ((v / 255 + 0.055) / 1.055) ** 2.4 for v in rgb[:3]]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    fg, bg = _rgba(t["fg"]), _rgba(t["bg"])
    a = fg[3]
    mixed = tuple(fg[k] * a + bg[k] * (1 - a) for k in range(3))
    hi, lo = sorted((lum(mixed), lum(bg)), reverse=True)
    return round((hi + 0.05) / (lo + 0.05), 2)


def _check(page, name: str, selector: str = WIDGET) -> dict[str, float]:
    texts = text_contrast(page, selector)
    assert len(texts) > 20, texts  # title, ticks, legend, notes (and panel): the measure saw the picture
    for t in texts:  # contrast.py leaves a text colour's alpha out; count it (SVG texts report their fill)
        if _rgba(t["fg"])[3] < 1:
            t["ratio"] = min(t["ratio"], _blended_ratio(t))
    html = page.evaluate(JS_HTML_COLOURS, selector)
    for h in html:
        h["ratio"] = _blended_ratio(h)
    low = low_contrast(texts) + low_contrast(html)
    assert not low, f"{name}: text under 4.5:1: {low}"
    small = [t for t in texts if t["size"] < MIN_PX - 0.05]
    assert not small, f"{name}: text under {MIN_PX} px on screen: {small}"
    clipped = page.evaluate(JS_CLIPPED, selector)
    assert not clipped, f"{name}: text beyond the widget's visible box: {clipped}"
    return {"min_ratio": min(t["ratio"] for t in texts + html), "min_px": round(min(t["size"] for t in texts), 2)}


def test_memory_widget_reads_in_light_and_dark_at_1100_px(page, lab, request):
    from playwright.sync_api import expect

    SHOTS.mkdir(parents=True, exist_ok=True)
    found = {}
    with screenshot_on_failure(page, lab, request.node.name):
        open_and_run_all(page, lab, 90_000, 60_000)
        expect(page.locator(f"{WIDGET} svg.tlw-mw-timeline")).to_have_count(2, timeout=30_000)
        page.evaluate("(sel) => document.querySelectorAll(sel)[1].setAttribute('data-tlw-no-times', '')", WIDGET)
        widget = page.locator(WIDGET).first  # text_contrast and JS_CLIPPED measure the first match too
        expect(widget.locator('svg.tlw-mw-state[data-event="4"]')).to_have_count(1, timeout=30_000)
        for theme in ("JupyterLab Light", "JupyterLab Dark"):
            name = "light" if "Light" in theme else "dark"
            set_lab_theme(page, theme)
            page.wait_for_function(JS_SETTLED, arg=WIDGET, timeout=30_000)
            widget.scroll_into_view_if_needed()
            found[name] = _check(page, name)
            widget.screenshot(path=str(SHOTS / f"memory-{name}.png"))
            # the band tooltip: the learner's frame first, readable, inside the widget
            band = widget.locator('g.bd[data-band="1"] rect.band').first
            box = band.bounding_box()
            assert box is not None
            page.mouse.move(box["x"] + 8, box["y"] + 8)
            tip = widget.locator(".tlw-mw-tip")
            expect(tip).to_be_visible()
            expect(tip).to_contain_text("all_reduce_side_stream (comm.py:7)")
            found[name + "-tooltip"] = _check(page, name + " with tooltip")
            widget.screenshot(path=str(SHOTS / f"memory-{name}-tooltip.png"))
            page.mouse.move(2, 2)
            expect(tip).to_be_hidden()
            # the second widget: no times, so wall clock is off and the page says why (readable too)
            other = page.locator(NO_TIMES)
            other.scroll_into_view_if_needed()
            expect(other.locator('button[data-axis="time"]')).to_be_disabled()
            expect(other.locator(".tlw-mw-why")).to_have_text("(no timestamps in this trace)")
            found[name + "-no-times"] = _check(page, name + " no times", NO_TIMES)
            other.screenshot(path=str(SHOTS / f"memory-{name}-no-times.png"))
    print("memory widget at 1,100 px:", found)
