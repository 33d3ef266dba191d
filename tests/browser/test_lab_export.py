"""JupyterLab's own HTML export, as it comes, keeps every picture (issue 25, item 2); so does Notebook 7's.

The path under test, as this JupyterLab (4.6) does it (read in .venv/share/jupyter/lab/static/jlab_core.*.js and
.venv/lib/python3.11/site-packages/jupyter_server/nbconvert/handlers.py):

* File > "Save and Export Notebook As" > "HTML" runs the command `notebook:export-to-format` with {format: "html"}
  (the submenu `jp-mainmenu-file-notebookexport` is filled from GET /api/nbconvert when the first notebook opens).
* For "html", when the server's version (PageConfig `notebookVersion`, jupyter_server's version here) is
  >= 2.18 and < 4, the command asks first: a dialog "Export as HTML" with a checkbox "Sanitize HTML output",
  ticked by default. It saves the notebook if dirty, then `NbConvertManager.exportAs` opens
  /nbconvert/html/<path>?download=true&sanitize_html=true in a new window (`window.open(url, "_blank",
  "noopener")`).
* The server's NbconvertFileHandler sets `HTMLExporter.sanitize_html` from the `sanitize_html` query argument,
  exports the notebook file as saved, and answers as an attachment (`download=true`).

The test clicks through that menu and dialog, leaving the box as it comes, catches the download, and opens
the downloaded page offline (file://, every other request refused) in Chromium: each picture kind has a size,
no CSS or markup shows as text, and the program grid is still a grid. The notebook holds one saved picture of
each kind (test_sanitized_export._pictures).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .lab import screenshot_on_failure, wait_kernel_idle
from .test_sanitized_export import _offline, _pictures, assert_pictures_read

pytestmark = pytest.mark.browser

NAME = "export_e2e.ipynb"
SHOTS = Path("/tmp/shots")
PICTURES = _pictures()


def write_notebook(root: Path) -> str:
    """The notebook the `lab` fixture serves (see conftest.py): one saved output per picture kind."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    for kind, mime, markup in PICTURES:
        out = nbformat.v4.new_output("display_data", data={mime: markup, "text/plain": kind})
        nb.cells.append(nbformat.v4.new_code_cell(f"# {kind}", outputs=[out]))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / NAME)
    return NAME


def _export_from_the_menu(page, lab, tmp_path: Path, front: str = "lab") -> tuple[Path, list[str], bool]:
    """File > Save and Export Notebook As > HTML, the dialog as it comes, OK: the downloaded file, the
    /nbconvert/ URLs the page asked for, and whether "Sanitize HTML output" was ticked. `front`: "lab" or
    "notebook7" (Notebook 7's notebook page has the same menu, from the same notebook-extension plugin)."""
    asked: list[str] = []
    page.context.on("request", lambda r: asked.append(r.url) if "/nbconvert/" in r.url else None)
    url = lab.lab_url() if front == "lab" else f"{lab.url}/notebooks/{NAME}?token={lab.token}"
    page.goto(url, wait_until="domcontentloaded", timeout=60_000)
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=60_000)
    if front == "lab":
        page.wait_for_function("() => !!window.jupyterapp", timeout=30_000)
        wait_kernel_idle(page)  # the notebook is open and settled: the export submenu has been filled
    else:  # Notebook 7 does not expose its app: the menu loop below waits for the submenu to be filled
        page.wait_for_timeout(3_000)
    html = page.locator(".lm-Menu-item .lm-Menu-itemLabel", has_text=re.compile(r"^HTML$"))
    for attempt in range(4):  # Lumino opens a submenu ~300 ms after the pointer rests on its item
        page.keyboard.press("Escape")
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^File$")).click()
        submenu = page.locator(".lm-Menu-item", has_text="Save and Export Notebook As")
        submenu.hover(force=True)
        try:
            html.wait_for(state="visible", timeout=5_000)
            break
        except Exception:
            if attempt == 3:
                raise
    html.click()

    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(state="visible", timeout=15_000)
    assert "Export as HTML" in dialog.inner_text()
    box = dialog.locator("input[type=checkbox]")
    ticked = box.is_checked()
    assert "Sanitize HTML output" in dialog.inner_text()
    # The page window.open()s the export URL with "noopener": Chromium gives the download to that new tab.
    # Listening on every new page from the moment it exists catches it whenever it comes.
    downloads: list = []
    page.on("download", lambda d: downloads.append(d))
    page.context.on("page", lambda tab: tab.on("download", lambda d: downloads.append(d)))
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    for _ in range(300):
        if downloads:
            break
        page.wait_for_timeout(200)
    assert downloads, f"no download within 60 s; asked for {asked}"
    path = tmp_path / "lab-export.html"
    downloads[0].save_as(path)
    return path, asked, ticked


@pytest.mark.parametrize("front", ["lab", "notebook7"])
def test_lab_export_menu_keeps_every_picture(page, lab, request, tmp_path, front):
    with screenshot_on_failure(page, lab, request.node.name):
        path, asked, ticked = _export_from_the_menu(page, lab, tmp_path, front)
    # As it comes: the box is ticked and the front end asks the server for a sanitized download.
    assert ticked, "'Sanitize HTML output' no longer ticked by default: the test no longer tests what learners get"
    assert any(re.search(rf"/nbconvert/html/{re.escape(NAME)}\?(.*&)?sanitize_html=true", u) for u in asked), asked
    assert any("download=true" in u for u in asked), asked
    exported = path.read_text()
    assert "tlw-theme" in exported and "<style>.tlw" not in exported

    viewer = page.context.new_page()
    refused = _offline(viewer)
    viewer.goto(path.as_uri(), wait_until="load")
    viewer.wait_for_timeout(500)
    SHOTS.mkdir(exist_ok=True)
    viewer.screenshot(path=str(SHOTS / f"{front}-export-sanitized.png"), full_page=True)

    grid = assert_pictures_read(viewer, PICTURES, front)
    assert re.search(r"\[0\] 1", grid.inner_text()), grid.inner_text()[:200]
    # The only requests refused are nbconvert's template's own scripts (require.js, MathJax from cdnjs): the
    # pictures, drawn above without them, need nothing online.
    template_scripts = re.compile(r"https://cdnjs\.cloudflare\.com/ajax/libs/(require\.js|mathjax)/")
    assert all(template_scripts.match(u) for u in refused), refused
