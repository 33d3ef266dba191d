"""The rank lanes and the profile view in a real JupyterLab (one server, one page, the notebook run once), at a
1,100 px window with the course side panel open, so each picture must fit a 670 px output.

Rank lanes: a recorded 2-rank DDP run (tests/fixtures/distributed, so no worker process starts here) drawn live,
one lane per rank with its backward and its buckets. Hovering a bucket names its parameters and bytes; a click
selects that bucket on both ranks and reaches Python (`bucket`), and Python's `select` moves it back; `iteration`
redraws another iteration. Profile: a live profiler run of a small step; a click on a table row lights up every
span of that op and reaches Python (`selected`); hovering a span shows its inputs and stack. Both read in
JupyterLab's light and dark themes (contrast, size, no clipped text). Screenshots:
/tmp/shots/{ranks,ptrace}-{light,dark}.png.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from . import test_grid_and_compile_in_jupyterlab as grid_test
from .lab import append_and_run, screenshot_on_failure
from .test_grid_and_compile_in_jupyterlab import _reads_in_both_themes

pytestmark = pytest.mark.browser

LAB_BUNDLES = ("ranks", "ptrace")
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "distributed" / "ddp_trace.json"
VIEWPORT = {"width": 1100, "height": 900}
VIEW = ".jp-OutputArea-output .tlw-ranks-widget"
PTRACE = ".jp-OutputArea-output .tlw-ptrace-widget"
SELECTED = re.compile(r"(^|\s)tlw-sel(\s|$)")
SOURCE = """\
import json
from torchlens_widgets import show_ranks

trace = json.load(open("ddp_trace.json"))
ranks_e2e = show_ranks(trace)
ranks_e2e"""
PROFILE_SOURCE = """\
import torch
from torch.profiler import record_function
from torchlens_widgets import show_profile

lin = torch.nn.Linear(32, 16)

def step_e2e(x):
    with record_function("forward"):
        y = lin(x).relu()
    with record_function("backward"):
        y.sum().backward()

profile_e2e = show_profile(step_e2e, torch.randn(8, 32))
profile_e2e"""


def write_notebook(root: Path) -> str:
    import nbformat

    shutil.copy(FIXTURE, root / "ddp_trace.json")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SOURCE), nbformat.v4.new_code_cell(PROFILE_SOURCE)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "ranks.ipynb")
    return "ranks.ipynb"


def test_rank_lanes_hover_click_and_python_stay_in_step(nb_page, lab, request):
    from playwright.sync_api import expect

    trace = json.loads(FIXTURE.read_text())
    last = max(it["index"] for it in trace["ranks"][0]["iterations"])
    page = nb_page
    with screenshot_on_failure(page, lab, request.node.name):
        view = page.locator(VIEW).first
        expect(view.locator("svg")).to_be_visible(timeout=30_000)  # the widget's own view, not the fallback
        for rank in (0, 1):
            expect(view.locator(f'rect.tlw-lane[data-rank="{rank}"]').first).to_be_attached()
        buckets = view.locator("g.tlw-comm-g[data-bucket]")
        expect(buckets).to_have_count(6)  # iteration `last`: three rebuilt buckets on each of the two ranks
        assert view.locator(".tlw-node").count() > 10  # the backward's nodes under them

        info = view.locator(".tlw-ranks-info")
        one = view.locator('g.tlw-comm-g[data-rank="1"][data-bucket="1"]')
        one.hover()
        expect(info).to_contain_text("bucket 1")
        expect(info).to_contain_text("2.weight")  # bucket 1 holds the middle layer's gradients

        one.click()
        for rank in (0, 1):
            expect(view.locator(f'g.tlw-comm-g[data-rank="{rank}"][data-bucket="1"] rect')).to_have_class(SELECTED)
        expect(view.locator('g.tlw-comm-g[data-rank="0"][data-bucket="0"] rect')).not_to_have_class(SELECTED)
        page.mouse.move(5, 5)
        expect(info).to_contain_text("selected bucket 1")

        out = append_and_run(page, "print(ranks_e2e.bucket, ranks_e2e.iteration)", "ranks-read")
        expect(out.locator(".jp-OutputArea-output")).to_have_text(f"1 {last}")
        append_and_run(page, "ranks_e2e.select(0); None", "ranks-set")
        expect(view.locator('g.tlw-comm-g[data-rank="1"][data-bucket="0"] rect')).to_have_class(SELECTED)
        expect(view.locator('g.tlw-comm-g[data-rank="1"][data-bucket="1"] rect')).not_to_have_class(SELECTED)

        append_and_run(page, "ranks_e2e.iteration = 0; None", "ranks-first")  # before DDP rebuilt its buckets
        expect(view.locator("g.tlw-comm-g[data-bucket]")).to_have_count(2)  # one bucket per rank
        append_and_run(page, f"ranks_e2e.iteration = {last}; None", "ranks-last")
        expect(buckets).to_have_count(6)

        worst = _reads_in_both_themes(page, VIEW, "ranks")
    print("rank lanes, lowest contrast:", worst)


def test_profile_row_click_lights_spans_and_hover_shows_the_stack(nb_page, lab, request):
    from playwright.sync_api import expect

    page = nb_page
    with screenshot_on_failure(page, lab, request.node.name):
        view = page.locator(PTRACE).first
        expect(view.locator("svg.tlw-pt")).to_be_visible(timeout=30_000)
        row = view.locator('tr.tlw-row[data-name="aten::addmm"]')
        expect(row).to_have_count(1)
        row.click()
        expect(row).to_have_class(re.compile(r"(^|\s)tlw-sel(\s|$)"))
        lit = view.locator("rect.tlw-span.tlw-sel")
        expect(lit).to_have_count(1)  # one linear in the step: one addmm span lights up
        out = append_and_run(page, "print(profile_e2e.selected)", "profile-read")
        expect(out.locator(".jp-OutputArea-output")).to_have_text("aten::addmm")

        lit.first.hover(force=True)
        tip = view.locator(".tlw-tip")
        expect(tip).to_be_visible()
        expect(tip).to_contain_text("aten::addmm")
        expect(tip).to_contain_text("step_e2e")  # the Python line that asked for it
        page.mouse.move(5, 5)

        append_and_run(page, "profile_e2e.select('aten::relu'); None", "profile-set")
        expect(view.locator('tr.tlw-row[data-name="aten::relu"]')).to_have_class(re.compile(r"(^|\s)tlw-sel(\s|$)"))
        expect(row).not_to_have_class(re.compile(r"(^|\s)tlw-sel(\s|$)"))

        # the key-averages table scrolls in its own box: rows past its fold are reached by scrolling, not cut off
        clipped_rule = grid_test.JS_CLIPPED_SHOWN
        grid_test.JS_CLIPPED_SHOWN = clipped_rule.replace("e.closest('[hidden]')",
                                                          "e.closest('[hidden]') || e.closest('.tlw-tablebox')")
        assert grid_test.JS_CLIPPED_SHOWN != clipped_rule
        try:
            worst = _reads_in_both_themes(page, PTRACE, "ptrace")
        finally:
            grid_test.JS_CLIPPED_SHOWN = clipped_rule
    print("profile, lowest contrast:", worst)
