"""The dispatch-table widget in JupyterLab: the row that runs is highlighted, and pressing a state button
moves it (the same call under inference_mode runs the CPU kernel directly) and syncs `selected` to Python."""

from __future__ import annotations

from pathlib import Path

import pytest

from .lab import append_and_run, open_and_run_all, screenshot_on_failure

pytestmark = pytest.mark.browser

LAB_BUNDLES = ("dtable",)
SHOTS = Path("/tmp/shots")


def write_notebook(root: Path) -> str:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(
        "import torch\nfrom torchlens_widgets import show_dispatch_table\n"
        "w = show_dispatch_table(torch.ops.aten.mm.default, torch.ones(2, 2), torch.ones(2, 2))\nw")]
    nbformat.write(nb, root / "dtable_e2e.ipynb")
    return "dtable_e2e.ipynb"


def test_pressing_a_state_moves_the_highlight_and_syncs_back(page, lab, request) -> None:
    from playwright.sync_api import expect

    with screenshot_on_failure(page, lab, request.node.name):
        open_and_run_all(page, lab, 90_000, 60_000)
        widget = page.locator(".tlw-dtable-widget").first
        expect(widget.locator("tr.runs")).to_have_attribute("data-key", "AutogradCPU", timeout=30_000)
        widget.locator(".tlw-states button", has_text="torch.inference_mode()").click()
        expect(widget.locator("tr.runs")).to_have_attribute("data-key", "CPU")
        widget.locator(".tlw-states button", has_text="torch.autocast('cpu')").click()
        expect(widget.locator("tr.runs")).to_have_attribute("data-key", "AutocastCPU")
        cell = append_and_run(page, "print('selected:', w.selected, '| runs:', w.chosen)", "dtable-read")
        expect(cell.locator(".jp-OutputArea-output")).to_contain_text("selected: torch.autocast('cpu') | runs: AutocastCPU")
        SHOTS.mkdir(exist_ok=True)
        widget.screenshot(path=str(SHOTS / "dispatch-table-e2e.png"))
        from .contrast import low_contrast, set_lab_theme, text_contrast

        for theme in ("JupyterLab Dark", "JupyterLab Light"):
            set_lab_theme(page, theme)
            texts = text_contrast(page, ".tlw-dtable-widget")
            assert len(texts) >= 8 and not low_contrast(texts), (theme, low_contrast(texts))
            assert min(t["size"] for t in texts) >= 10
            print(f"{theme}: lowest contrast {min(t['ratio'] for t in texts):.2f}:1 over {len(texts)} texts")
            widget.screenshot(path=str(SHOTS / f"dispatch-table-{theme.split()[-1].lower()}-e2e.png"))
