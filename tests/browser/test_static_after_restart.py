"""A saved notebook reopened after its kernel is gone shows each widget's static picture, not "model not found".

Runs a stride diagram and a grad graph live in JupyterLab, saves the notebook, shuts the kernel down,
reloads the page (a fresh kernel starts, without the widgets' models) and checks that every widget output
shows its static picture drawn inline (the lab extension's fallback, torchlens_widgets/labextension), with
no ipywidgets error text, and captioned as static ("run the cell to interact"), in JupyterLab and in Notebook 7;
then re-running the cells brings the live views back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from torchlens_widgets.render.portable import STATIC_NOTE

from .lab import JS_RUN, open_and_run_all, screenshot_on_failure, wait_kernel_idle

pytestmark = pytest.mark.browser

LAB_BUNDLES = ("stride", "gradgraph")
SOURCES = [
    "import torch\nfrom torchlens_widgets import stride_diagram\n"
    "x = torch.arange(6.).reshape(2, 3)\nstride_diagram(x, x.t(), names=['x', 'xt'])",
    "from torchlens_widgets import show_grad_graph\n"
    "w = torch.ones(3, requires_grad=True)\nshow_grad_graph((w * 2).sum())",
]
LIVE = [".jp-OutputArea-output .tlw-stride-widget svg", ".jp-OutputArea-output .tlw-gradgraph-widget svg"]
STATIC = ".jp-OutputArea-output .tlw-static-fallback svg"
SHOTS = Path("/tmp/shots")


def write_notebook(root: Path) -> str:
    """The notebook the `lab` fixture serves (see conftest.py)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in SOURCES]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "restart_e2e.ipynb")
    return "restart_e2e.ipynb"


def test_reopened_notebook_shows_static_pictures_then_live_again(page, lab, request):
    from playwright.sync_api import expect

    with screenshot_on_failure(page, lab, request.node.name):
        open_and_run_all(page, lab, 90_000, 60_000)
        for live in LIVE:
            expect(page.locator(live).first).to_be_visible(timeout=30_000)
        page.evaluate(JS_RUN, ["docmanager:save", 30_000])
        saved = (lab.root / lab.notebook).read_text()
        assert "application/vnd.jupyter.widget-view+json" in saved and "image/svg+xml" in saved

        # The kernel goes away (a restarted server, a closed laptop): its widget models with it.
        for kernel in lab.api("/api/kernels"):  # type: ignore[union-attr]
            lab.api(f"/api/kernels/{kernel['id']}", method="DELETE")
        page.goto(lab.lab_url(), wait_until="domcontentloaded", timeout=60_000)
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_function("() => !!window.jupyterapp", timeout=30_000)
        wait_kernel_idle(page)  # a new kernel, which never heard of those models
        page.wait_for_timeout(3_000)  # ipywidgets has looked for the models by now (it says so within ~1 s)

        outputs = page.locator(".jp-OutputArea-output")
        expect(page.locator(STATIC)).to_have_count(2, timeout=30_000)
        for i in range(2):
            expect(page.locator(STATIC).nth(i)).to_be_visible()
            # issue 25 item 7: a static picture says so (its chips and nodes do nothing until the cell runs)
            assert STATIC_NOTE in (page.locator(STATIC).nth(i).text_content() or "")
        text = " ".join(outputs.all_inner_texts())
        assert "model not found" not in text and "Error displaying widget" not in text, text
        assert "Loading widget" not in text, text
        box = page.locator(STATIC).first.bounding_box()
        assert box and box["width"] > 100 and box["height"] > 50, box
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "restart-static.png"), full_page=True)

        # Notebook 7 on the same saved notebook (its kernel never made those models): the same captioned pictures
        nb7 = page.context.new_page()
        nb7.goto(f"{lab.url}/notebooks/{lab.notebook}?token={lab.token}", wait_until="domcontentloaded",
                 timeout=60_000)
        expect(nb7.locator(STATIC)).to_have_count(2, timeout=60_000)
        nb7.wait_for_timeout(3_000)  # ipywidgets has looked for the models by now
        expect(nb7.locator(STATIC)).to_have_count(2)
        for i in range(2):
            expect(nb7.locator(STATIC).nth(i)).to_be_visible()
            assert STATIC_NOTE in (nb7.locator(STATIC).nth(i).text_content() or "")
        nb7_text = " ".join(nb7.locator(".jp-OutputArea-output").all_inner_texts())
        assert "model not found" not in nb7_text and "Error displaying widget" not in nb7_text, nb7_text
        nb7.screenshot(path=str(SHOTS / "restart-static-notebook7.png"), full_page=True)
        nb7.close()

        # Running the cells again gives the live views back, in place of the pictures.
        page.evaluate(JS_RUN, ["notebook:run-all-cells", 90_000])
        for live in LIVE:
            expect(page.locator(live).first).to_be_visible(timeout=60_000)
        expect(page.locator(STATIC)).to_have_count(0, timeout=30_000)
        assert not any(STATIC_NOTE in (page.locator(live).first.text_content() or "") for live in LIVE)
        page.screenshot(path=str(SHOTS / "restart-live-again.png"), full_page=True)
