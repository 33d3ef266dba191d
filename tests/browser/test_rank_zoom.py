"""Issue 25, item 5: the FSDP rank lanes start where both ranks run, and the rank lanes and the profile view zoom a
time range, in JupyterLab and in Notebook 7 (Chromium, 1400 px wide).

The picture is a recorded 2-rank FSDP run (tests/fixtures/distributed/fsdp_trace.json: rank 1 started ~100 ms
before rank 0, whose first all-gather it then waited for), so no worker process starts here; the profile is a
small live step. In each front end: the axis's first tick is past the cut (the wait before rank 0 started is not
drawn, and the picture says so), the info line is not empty before any hover, a wheel over the lanes and a drag
each narrow the visible range (read from the tick labels), and "reset zoom" / a double-click bring the whole range
back. Screenshots: /tmp/shots/item5-{before,after}-{lab,nb7}-*.png (TLW_SHOT_PHASE=before names them "before").
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from .contrast import low_contrast, set_lab_theme, text_contrast
from .lab import screenshot_on_failure

pytestmark = pytest.mark.browser

LAB_BUNDLES = ("ranks", "ptrace")
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "distributed" / "fsdp_trace.json"
VIEWPORT = {"width": 1400, "height": 900}
SHOTS = Path("/tmp/shots")
PHASE = os.environ.get("TLW_SHOT_PHASE", "after")
RANKS = ".jp-OutputArea-output .tlw-ranks-widget"
PTRACE = ".jp-OutputArea-output .tlw-ptrace-widget"
NB7 = "rank_zoom.ipynb"  # the same notebook: Notebook 7 joins the session (and warm kernel) JupyterLab started
SOURCE = """\
import json
from torchlens_widgets import show_ranks

zoom_ranks = show_ranks(json.load(open("fsdp_trace.json")))
zoom_ranks"""
PROFILE_SOURCE = """\
import torch
from torch.profiler import record_function
from torchlens_widgets import show_profile

lin = torch.nn.Linear(32, 16)

def step_zoom(x):
    for _ in range(3):
        with record_function("forward"):
            y = lin(x).relu()
        with record_function("backward"):
            y.sum().backward()

zoom_profile = show_profile(step_zoom, torch.randn(8, 32))
zoom_profile"""


def write_notebook(root: Path) -> str:
    import nbformat

    shutil.copy(FIXTURE, root / "fsdp_trace.json")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SOURCE), nbformat.v4.new_code_cell(PROFILE_SOURCE)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "rank_zoom.ipynb")
    return "rank_zoom.ipynb"


def _shot(page, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"item5-{PHASE}-{name}.png"))


def _ticks(view) -> list[float]:
    return [float(t.replace(",", "")) for t in view.locator("svg text.tlw-tick-label").all_text_contents() if t.strip()]


def _span(view) -> float:
    ticks = _ticks(view)
    return ticks[-1] - ticks[0]


def _wait_changed(view, before: float, timeout_s: float = 5) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = _span(view)
        if now != before:
            return now
        time.sleep(0.1)
    return _span(view)


def _zoom_checks(page, view, *, rank_lanes: bool) -> None:
    """Wheel in, drag a range, reset (button), wheel in again, double-click back."""
    from playwright.sync_api import expect

    svg = view.locator("svg").first
    box = svg.bounding_box()
    assert box is not None
    lane = view.locator("svg rect.tlw-lane").first.bounding_box()
    assert lane is not None
    full = _span(view)
    # the wheel over the lanes zooms around the pointer
    page.mouse.move(lane["x"] + lane["width"] * 0.6, lane["y"] + lane["height"] / 2)
    for _ in range(3):
        page.mouse.wheel(0, -240)
    wheeled = _wait_changed(view, full)
    assert 0 < wheeled < full * 0.8, (full, wheeled, _ticks(view))
    reset = view.locator("button.tlw-zoom-reset")
    reset.click()
    assert _wait_changed(view, wheeled) == full
    # a drag over a fifth of the lanes selects that range
    y = lane["y"] + lane["height"] / 2
    x0, x1 = lane["x"] + lane["width"] * 0.4, lane["x"] + lane["width"] * 0.6
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, y, steps=3)
    page.mouse.move(x1, y, steps=3)
    page.mouse.up()
    dragged = _wait_changed(view, full)
    assert 0 < dragged < full * 0.4, (full, dragged, _ticks(view))
    expect(view.locator(".tlw-zoom-range")).not_to_have_text("")
    if rank_lanes:
        expect(view.locator("svg rect.tlw-comm").first).to_be_attached()
    # a double-click goes back to the whole range
    page.mouse.dblclick((x0 + x1) / 2, y)
    assert _wait_changed(view, dragged) == full


def _ranks_checks(page, view) -> None:
    from playwright.sync_api import expect

    expect(view.locator("svg rect.tlw-lane").first).to_be_visible(timeout=60_000)
    ticks = _ticks(view)
    assert ticks and ticks[0] >= 90, f"the axis should start after rank 0 started (~102 ms), ticks: {ticks}"
    expect(view.locator("svg .tlw-cut-note")).to_contain_text("rank 0 started")
    expect(view.locator(".tlw-ranks-info")).not_to_have_text("")  # a caption before any hover
    labels = view.locator("svg text.tlw-comm-label").all_text_contents()
    assert labels and not [t for t in labels if t.endswith("…") and len(t) <= 4], labels


def _scroll_to(page, view) -> None:
    view.scroll_into_view_if_needed()
    page.wait_for_timeout(300)


def _both_views(page, ranks, profile, front: str) -> None:
    """The rank lanes' cut and labels, both views' zoom checks, and a zoomed profile for the record."""
    _ranks_checks(page, ranks)
    _zoom_checks(page, ranks, rank_lanes=True)
    _scroll_to(page, profile)
    _zoom_checks(page, profile, rank_lanes=False)
    lane = profile.locator("svg rect.tlw-lane").first.bounding_box()
    page.mouse.move(lane["x"] + lane["width"] * 0.3, lane["y"] + 8)
    page.mouse.wheel(0, -480)
    page.wait_for_timeout(300)
    _shot(page, f"{front}-profile-zoomed")


def test_rank_lanes_and_profile_zoom_in_jupyterlab(nb_page, lab, request):
    from playwright.sync_api import expect

    page = nb_page
    with screenshot_on_failure(page, lab, request.node.name):
        ranks = page.locator(RANKS).first
        expect(ranks.locator("svg")).to_be_visible(timeout=60_000)
        _scroll_to(page, ranks)
        _shot(page, "lab-ranks")
        profile = page.locator(PTRACE).first
        expect(profile.locator("svg.tlw-pt")).to_be_visible(timeout=60_000)
        if PHASE == "before":
            _scroll_to(page, profile)
            _shot(page, "lab-profile")
            return
        _both_views(page, ranks, profile, "lab")
        _scroll_to(page, ranks)
        lane = ranks.locator("svg rect.tlw-lane").first.bounding_box()
        page.mouse.move(lane["x"] + lane["width"] * 0.35, lane["y"] + 8)
        page.mouse.wheel(0, -360)
        page.wait_for_timeout(300)
        _shot(page, "lab-ranks-zoomed")
        # zoomed, in both themes: every text (ticks, labels, the note, the zoom bar) reads
        for theme in ("JupyterLab Dark", "JupyterLab Light"):
            set_lab_theme(page, theme)
            page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=15_000)  # the theme's splash
            expect(ranks.locator(".tlw-zoom-range")).to_contain_text("showing ")  # still zoomed after the redraw
            if "Dark" in theme:
                _shot(page, "lab-ranks-zoomed-dark")
            texts = text_contrast(page, RANKS)
            assert len(texts) >= 10 and any(t["text"].startswith("showing ") for t in texts), texts
            low = low_contrast(texts)
            assert not low, f"{theme}: text under 4.5:1: {low[:8]}"


def _run_all_notebook7(page) -> None:
    """Notebook 7 has no window.jupyterapp here: Run › Run All Cells from its menu bar."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def test_rank_lanes_and_profile_zoom_in_notebook_7(page, lab, request):
    pytest.importorskip("notebook", minversion="7")
    from playwright.sync_api import expect

    page.set_viewport_size(VIEWPORT)
    with screenshot_on_failure(page, lab, request.node.name):
        page.goto(f"{lab.url}/notebooks/{NB7}?token={lab.token}", wait_until="domcontentloaded", timeout=60_000)
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
        expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle'], "
                            ".jp-NotebookKernelStatus, .jp-KernelStatus").first).to_be_attached(timeout=60_000)
        page.wait_for_timeout(1000)  # the kernel connects
        _run_all_notebook7(page)
        ranks = page.locator(RANKS).first
        expect(ranks.locator("svg")).to_be_visible(timeout=90_000)
        _scroll_to(page, ranks)
        _shot(page, "nb7-ranks")
        profile = page.locator(PTRACE).first
        expect(profile.locator("svg.tlw-pt")).to_be_visible(timeout=60_000)
        if PHASE == "before":
            _scroll_to(page, profile)
            _shot(page, "nb7-profile")
            return
        _both_views(page, ranks, profile, "nb7")
