"""JupyterLab's own export (File > Save and Export Notebook As > HTML, "Sanitize HTML output" ticked, i.e.
nbconvert with `HTMLExporter.sanitize_html=True`) keeps every picture: a notebook holding one static picture
of each kind is exported sanitized and unsanitized, and each page is opened offline (file://, every other
request refused) in Chromium, where each picture must have a size, show no CSS or markup as text, and the
program grid must still be a grid. Screenshots go to /tmp/shots.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from torchlens_widgets.render.portable import STATIC_NOTE, portable_html, portable_svg

from ..render.test_tgrid_fixture import lens_data

pytestmark = pytest.mark.browser

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
SHOTS = Path("/tmp/shots")


def _pictures() -> list[tuple[str, str, str]]:
    """(kind, mime, markup): one saved output per kind from the course's notebooks, as the package now writes
    it (portable_html/portable_svg leave an output saved after the fix as it is), and a live program grid's
    bundle."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            for out in cell.get("outputs", []):
                for mime in ("text/html", "image/svg+xml"):
                    text = "".join(out.get("data", {}).get(mime) or "")
                    m = re.search(r'class="([^"]*\btlw-theme\b[^"]*)"', text[:400])
                    if m:
                        kind = next(c for c in m.group(1).split() if c not in ("tlw-theme", "tlw-static"))
                        found.setdefault(kind, (mime, text))
    pictures = [(kind, mime, portable_html(text) if mime == "text/html" else portable_svg(text))
                for kind, (mime, text) in sorted(found.items()) if kind != "tlw-tgrid"]
    from torchlens_widgets.widgets.triton_grid import ProgramGridWidget

    data = lens_data()["oob"]
    bundle, _ = ProgramGridWidget(SimpleNamespace(to_dict=lambda: data))._repr_mimebundle_()
    return [("tlw-tgrid", "text/html", bundle["text/html"]), *pictures]


def _export(tmp: Path, pictures: list[tuple[str, str, str]], sanitize: bool, theme: str = "light") -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.v4.new_notebook()
    for kind, mime, markup in pictures:
        out = nbformat.v4.new_output("display_data", data={mime: markup, "text/plain": kind})
        nb.cells.append(nbformat.v4.new_code_cell(f"# {kind}", outputs=[out]))
    html, _ = HTMLExporter(sanitize_html=sanitize, theme=theme).from_notebook_node(nb)
    path = tmp / f"export-{'sanitized' if sanitize else 'plain'}-{theme}.html"
    path.write_text(html)
    return path


def _offline(page) -> list[str]:
    refused: list[str] = []

    def route(r):
        if r.request.url.startswith(("file:", "data:")):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return refused


def assert_pictures_read(page, pictures: list[tuple[str, str, str]], name: str):
    """An exported page (one output per picture, in order) as a reader sees it: no CSS or markup as text, every
    picture with a size (an SVG image loaded), and the program grid, the first, still a grid: its static note,
    one row of cells per line, program ids apart. Returns the grid's output."""
    outputs = page.locator(".jp-OutputArea-output")
    assert outputs.count() == len(pictures), [k for k, _, _ in pictures]
    text = page.locator("body").inner_text()
    for leak in ("<style", "var(--", ".tlw-", "<svg", "<tbody", "<rect", "display:", "</"):
        assert leak not in text, f"{name}: {leak!r} shown as text"
    for i, (kind, mime, _) in enumerate(pictures):
        out = outputs.nth(i)
        box = out.bounding_box()
        assert box and box["width"] > 100 and box["height"] > 20, (kind, box)
        if mime == "image/svg+xml":
            size = out.locator("img").evaluate("i => [i.naturalWidth, i.naturalHeight, i.complete]")
            assert size[0] > 50 and size[1] > 20 and size[2], (kind, size)
        else:
            inner = out.inner_text()
            assert out.locator(".tlw-theme").count() >= 1 and len(inner.split()) > 3, (kind, inner[:200])
    assert pictures[0][0] == "tlw-tgrid"
    grid = outputs.nth(0)
    assert STATIC_NOTE in grid.inner_text()
    rows = grid.locator(".trow")
    assert rows.count() >= 2
    boxes = [rows.nth(i).bounding_box() for i in range(rows.count())]
    assert all(b and b["width"] > 40 and b["height"] > 5 for b in boxes), boxes
    assert len({round(b["y"]) for b in boxes if b}) == len(boxes), "each row of cells on a line of its own"
    pids = grid.locator(".pid")
    assert pids.count() >= 2
    first, second = pids.nth(0).bounding_box(), pids.nth(1).bounding_box()
    assert first and second and second["x"] - (first["x"] + first["width"]) > 1, "program ids apart, not '0123'"
    return grid


@pytest.mark.parametrize("sanitize", [True, False], ids=["sanitized", "unsanitized"])
def test_exported_pictures_render_offline(page, tmp_path, sanitize):
    pictures = _pictures()
    assert {k for k, _, _ in pictures} >= {"tlw-tgrid", "tlw-dtable", "tlw-ptrace", "tlw-stride", "tlw-grad", "tlw-plot"}
    path = _export(tmp_path, pictures, sanitize)
    _offline(page)
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_timeout(500)
    name = "sanitized" if sanitize else "unsanitized"
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"export-{name}.png"), full_page=True)

    grid = assert_pictures_read(page, pictures, name)
    rows = grid.locator(".trow")
    if sanitize:
        assert re.search(r"\[0\] 1", grid.inner_text()), grid.inner_text()[:200]
        assert re.search(r"X", rows.nth(0).inner_text() + rows.nth(1).inner_text())
    else:
        cell = grid.locator(".trow .c").first.bounding_box()
        assert cell and 10 <= cell["width"] <= 16 and 10 <= cell["height"] <= 16, cell  # coloured boxes


def test_sanitized_dark_export_reads(page, tmp_path):
    """The dark theme's export: text is light on the dark page (Lab's variables), a screenshot to look at."""
    path = _export(tmp_path, _pictures(), True, theme="dark")
    _offline(page)
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_timeout(500)
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "export-sanitized-dark.png"), full_page=True)
    colour = page.locator(".jp-OutputArea-output").first.evaluate("e => getComputedStyle(e).color")
    lum = sum(int(v) for v in re.findall(r"\d+", colour)[:3])
    assert lum > 3 * 150, colour


# Every course notebook's saved outputs, exported sanitized (what Lab's export does with "Sanitize HTML output" as it
# comes) and opened offline: the same pictures before and after, each drawn with a size, no CSS or markup as text.
# Only the code cells' outputs are exported (no inputs, no markdown): the pictures live there, and exporting whole
# notebooks through the sanitizer costs ~2.5 s each here where outputs alone take ~0.3 s.
_ROOT = re.compile(r'class="[^"]*\btlw-theme\b')
_ESCAPED = re.compile(r"&lt;/?(style|svg|rect|text|line|table|tbody|thead|tr|td|th|div|span|details|summary)\b")
_REFRESH = ".venv/bin/python -m torchlens_widgets.course.execute notebooks/{name}"
_TOP_ROOTS = """() => [...document.querySelectorAll('.tlw-theme')]
  .filter(e => !e.parentElement.closest('.tlw-theme'))
  .map(e => { const r = e.getBoundingClientRect(); return [e.className, r.width, r.height]; })"""
_IMAGES = """() => [...document.querySelectorAll('img[src^="data:image/svg+xml"]')]
  .map(i => [i.complete, i.naturalWidth, i.naturalHeight, i.getBoundingClientRect().width])"""


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb")), ids=lambda p: p.stem)
def test_every_notebooks_sanitized_export_keeps_its_pictures(page, tmp_path, path):
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if c.cell_type == "code" and c.get("outputs")]
    data = [o.get("data", {}) for c in nb.cells for o in c.outputs]
    html = ["".join(d.get("text/html") or "") for d in data]
    if any("<style" in h for h in html):
        pytest.fail(f"{path.name} holds outputs saved before the sanitizer fix (a <style> block): refresh it with "
                    + _REFRESH.format(name=path.name))
    roots = sum(len(_ROOT.findall(h)) for h in html)
    svgs = sum("image/svg+xml" in d for d in data)

    exported, _ = HTMLExporter(sanitize_html=True, exclude_input=True, exclude_markdown=True).from_notebook_node(nb)
    body = exported[exported.index("<body"):]
    assert len(_ROOT.findall(body)) == roots, "pictures lost to the sanitizer"
    assert len(re.findall(r'<img [^>]*src="data:image/svg\+xml;base64,', body)) == svgs, "SVG pictures lost"
    assert not _ESCAPED.findall(body), f"markup shown as text: {sorted(set(_ESCAPED.findall(body)))}"
    if not roots and not svgs:
        return
    out = tmp_path / f"{path.stem}-sanitized.html"
    out.write_text(exported)
    _offline(page)
    page.goto(out.as_uri(), wait_until="load")
    text = page.locator("body").inner_text()
    for leak in ("<style", "var(--", ".tlw-", "<svg", "<rect"):
        assert leak not in text, f"{leak!r} shown as text"
    tops = page.evaluate(_TOP_ROOTS)
    assert all(w > 50 and h > 10 for _, w, h in tops), [t for t in tops if not (t[1] > 50 and t[2] > 10)]
    images = page.evaluate(_IMAGES)
    assert len(images) == svgs and all(c and nw > 20 and w > 20 for c, nw, _, w in images), images
