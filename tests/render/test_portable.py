"""Static pictures survive nbconvert's sanitizer (`--HTMLExporter.sanitize_html=True`, what JupyterLab's
"Save and Export Notebook As > HTML" uses by default): no `<style>` block or inline SVG shown as text, every
tag one the sanitizer keeps, the labels and cells still there; and a static picture says it is static."""

from __future__ import annotations

import base64
import html as html_lib
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from torchlens_widgets.render.portable import SAFE_TAGS, STATIC_NOTE, portable_html, portable_svg, token_value
from torchlens_widgets.render.triton_grid import program_grid_html

from .test_tgrid_fixture import lens_data

nbconvert_strings = pytest.importorskip("nbconvert.filters.strings")
clean_html = nbconvert_strings.clean_html
HTMLExporter = pytest.importorskip("nbconvert").HTMLExporter

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
REFRESH = ".venv/bin/python -m torchlens_widgets.course.execute notebooks/{name}"


class _Text(HTMLParser):
    """The text a reader sees: no style or title text; tags in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.words: list[str] = []
        self.prose: list[str] = []  # the words outside <pre> and <code>: where CSS shown as text would be
        self.tags: list[str] = []
        self._skip = 0
        self._code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag in ("style", "title"):
            self._skip += 1
        if tag in ("pre", "code"):
            self._code += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "title"):
            self._skip -= 1
        if tag in ("pre", "code"):
            self._code -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.words += data.split()
            if not self._code:
                self.prose += data.split()


def _read(html: str) -> _Text:
    p = _Text()
    p.feed(html)
    p.close()
    return p


def saved_pictures() -> dict[str, tuple[str, str, str]]:
    """One saved output per picture kind (its root class, e.g. tlw-tgrid): (notebook, mime type, markup)."""
    found: dict[str, tuple[str, str, str]] = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb")):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            for out in cell.get("outputs", []):
                for mime in ("text/html", "image/svg+xml"):
                    text = out.get("data", {}).get(mime)
                    if not text:
                        continue
                    text = "".join(text)
                    m = re.search(r'class="([^"]*\btlw-theme\b[^"]*)"', text[:400])
                    if m:
                        kind = next(c for c in m.group(1).split() if c not in ("tlw-theme", "tlw-static"))
                        found.setdefault(kind, (path.name, mime, text))
    return found


SAVED = saved_pictures()
HTML_KINDS = sorted(k for k, (_, mime, _) in SAVED.items() if mime == "text/html")
SVG_KINDS = sorted(k for k, (_, mime, _) in SAVED.items() if mime == "image/svg+xml")


def assert_survives(html: str) -> str:
    """`html` through nbconvert's sanitizer: nothing escaped into visible markup or CSS, every word kept."""
    cleaned = clean_html(html)
    escaped = re.findall(r"&lt;/?(style|svg|rect|text|line|title|tbody|thead|th|table|details|summary|br|h\d|p)\b",
                         cleaned)
    assert not escaped, f"the sanitizer showed these tags as text: {sorted(set(escaped))}"
    seen = _read(cleaned)
    # generated code (Inductor's C++ and Triton, in <pre>/<code>) holds braces of its own
    assert not any(w.startswith((".tlw", "var(--")) for w in seen.words), "CSS shown as text"
    assert not any("{" in w for w in seen.prose), "CSS shown as text"
    assert set(seen.tags) <= SAFE_TAGS, set(seen.tags) - SAFE_TAGS
    return cleaned


def test_every_saved_picture_kind_is_found() -> None:
    assert {"tlw-tgrid", "tlw-dtable", "tlw-dispatch", "tlw-build", "tlw-contract", "tlw-fusion", "tlw-autocast",
            "tlw-ptrace", "tlw-compile"} <= set(HTML_KINDS)
    assert {"tlw-stride", "tlw-grad", "tlw-mem", "tlw-lanes", "tlw-ranks", "tlw-plot"} <= set(SVG_KINDS)


@pytest.mark.parametrize("kind", HTML_KINDS)
def test_each_html_picture_survives_the_sanitizer(kind: str) -> None:
    """A real saved output of each kind, made portable as the widget's bundle now does (idempotent on
    outputs saved after the fix): the words a reader saw unsanitized are all still there sanitized."""
    _name, _mime, saved = SAVED[kind]
    portable = portable_html(saved)
    assert "<style" not in portable and "<svg" not in portable and "<table" not in portable
    assert set(_read(portable).tags) <= SAFE_TAGS
    assert portable_html(portable) == portable  # idempotent: a refreshed notebook's output stays as it is
    cleaned = assert_survives(portable)
    before = [w for w in _read(saved).words if w]
    after = set(_read(cleaned).words)
    missing = [w for w in before if w not in after and not re.fullmatch(r"[|·]", w)]
    assert not missing, f"{kind}: words lost to the sanitizer: {missing[:10]}"


@pytest.mark.parametrize("kind", SVG_KINDS)
def test_svg_pictures_are_exported_as_images_the_sanitizer_does_not_touch(kind: str) -> None:
    _name, _mime, svg = SAVED[kind]
    svg = portable_svg(svg)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
        "display_data", data={"image/svg+xml": svg, "text/plain": "x"})])]
    html, _ = HTMLExporter(sanitize_html=True).from_notebook_node(nb)
    assert base64.b64encode(svg.encode()).decode() in html  # an <img> data: URI, kept whole
    assert STATIC_NOTE in svg and svg.count("<svg") == 1 and svg.rstrip().endswith("</svg>")
    ET.fromstring(svg)


def test_a_plot_is_exported_as_it_was_shown() -> None:
    """A plot (render/plot.py) is matplotlib's SVG, exported sanitized as an `<img>` kept whole: no caption (it is
    not a widget's stand-in), no markup or CSS as text, its labels inside the picture."""
    from torchlens_widgets.render.plot import plot_lines

    bundle = plot_lines({"out=": ([1, 10, 100], [1.0, 1.5, 9.0])}, x_label="elements n", y_label="µs per call",
                        log_x=True, marks={"2 × t(1)": 10})._repr_mimebundle_()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("display_data", data=bundle)])]
    html, _ = HTMLExporter(sanitize_html=True).from_notebook_node(nb)
    svg = bundle["image/svg+xml"]
    assert base64.b64encode(svg.encode()).decode() in html and "&lt;svg" not in html and "&lt;style" not in html
    assert STATIC_NOTE not in svg and "elements n" in svg
    ET.fromstring(svg)


def test_the_program_grid_is_still_a_grid_once_sanitized() -> None:
    """The case from the issue: the program ids and each tensor's cells stay laid out (a line per row of
    cells, a letter per cell in monospace, the legend saying what each letter means), not "0123"."""
    data = lens_data()["add"]
    cleaned = assert_survives(portable_html(program_grid_html(data, 0), caption=STATIC_NOTE))
    joined = html_lib.unescape(re.sub(r"<[^>]+>", "", cleaned))
    assert "[0] 1 2" in joined, joined[:300]  # the ids apart, the selected one bracketed
    rows = re.findall(r'<div class="trow"><code class="cells">(.*?)</code></div>', cleaned)
    assert rows and all(re.fullmatch(r"<span[^>]*>[\s\xa0\d+\[\]]*</span>(?:<span[^>]*>.</span>|\s)+", r)
                        for r in rows[:1]), rows[:1]
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r'<span class="c [^"]*">.</span>', rows[0])]
    assert cells and all(len(c) == 1 for c in cells)
    for words in ("L loaded", "S stored", "X out of bounds", STATIC_NOTE):
        assert words in joined, words


def test_static_grid_shows_the_source_column_and_no_buttons() -> None:
    """Item 7: what the live view shows that fits (the access's source line), no chip that looks clickable,
    and a caption saying to run the cell, only in the static bundle."""
    from torchlens_widgets.widgets.triton_grid import ProgramGridWidget

    data = next(d for d in lens_data().values() if d["source_lines"] and d["programs"][0]["accesses"])
    html = program_grid_html(data)
    assert "<th>source</th>" in html and "x = tl.load(x_ptr + offs, mask=mask)" in html
    w = ProgramGridWidget(SimpleNamespace(to_dict=lambda: data))
    bundle, _ = w._repr_mimebundle_()
    static = bundle["text/html"]
    assert STATIC_NOTE in static and STATIC_NOTE not in w.static_html()
    assert STATIC_NOTE not in json.dumps(w.model)  # the live view's data: no caption there
    chips = re.findall(r'<span class="pid[^"]*"[^>]*style="([^"]*)"', static)
    assert chips and not any("border-radius" in s or "background" in s or "cursor" in s for s in chips), chips[:2]
    assert "x = tl.load(x_ptr + offs, mask=mask)" in clean_html(static)


def test_colours_read_in_both_themes() -> None:
    """Inline styles cannot switch on the theme: colours are Lab's variables with a light fallback, and tints
    are translucent (a dark theme's text reads on them)."""
    assert token_value("fg") == "var(--jp-content-font-color1,#1a1a1a)"
    assert token_value("tint1").startswith("rgba(") and token_value("bad").startswith("var(--jp-error-color0,")
    html = portable_html('<div class="tlw-x"><style>.tlw-x .a{color:var(--tlw-fg2);background:var(--tlw-tint3)}'
                         '@media (prefers-color-scheme:dark){.tlw-x{color:red}}</style><span class="a">hi</span></div>')
    assert html == ('<div class="tlw-x"><span class="a" style="color:var(--jp-content-font-color2,#4a4a4a);'
                    'background:rgba(89,161,79,0.28)">hi</span></div>')


def test_tables_become_css_tables_with_cells_apart() -> None:
    html = portable_html("<table><thead><tr><th>a</th><th>b</th></tr></thead><tr><td>1</td><td>2</td></tr></table>")
    assert "<table" not in html and "<th" not in html and "display:table-cell" in html
    assert " ".join(_read(clean_html(html)).words) == "a | b 1 | 2"  # a rule between cells once unstyled


def test_inline_svg_becomes_positioned_boxes() -> None:
    svg = ('<div class="r"><style>.r .s{fill:var(--tlw-cat1);stroke:var(--tlw-line)}</style>'
           '<svg width="100" height="20"><rect class="s" x="5" y="2" width="30" height="10"><title>op a</title></rect>'
           '<text x="6" y="12" text-anchor="middle">mm</text><line x1="0" y1="19" x2="100" y2="19"/></svg></div>')
    html = portable_html(svg)
    assert "<svg" not in html and 'title="op a"' in html and "left:5.0px" in html and ">mm</div>" in html
    assert _read(clean_html(html)).words == ["mm"]


def test_svg_caption_grows_the_picture() -> None:
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="100" viewBox="0 0 800 200"><rect/></svg>'
    out = portable_svg(svg)
    assert 'width="400" height="119" viewBox="0 0 800 238"' in out and STATIC_NOTE in out
    narrow = portable_svg('<svg xmlns="http://www.w3.org/2000/svg" width="120" height="50" class="k"><rect/></svg>')
    assert 'width="281"' in narrow and 'class="tlw-static k"' in narrow and "cursor:default" in narrow
    ET.fromstring(narrow)


def _html_outputs(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return ["".join(o["data"]["text/html"]) for c in nb["cells"] for o in c.get("outputs", [])
            if "text/html" in o.get("data", {})]


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb")), ids=lambda p: p.stem)
def test_committed_notebook_outputs_survive_the_sanitizer(path: Path) -> None:
    outputs = _html_outputs(path)
    if any("<style" in h for h in outputs):
        pytest.fail(f"{path.name} holds outputs saved before the sanitizer fix (a <style> block): refresh it with "
                    + REFRESH.format(name=path.name))
    for h in outputs:
        assert_survives(h)


def test_items_kept_whole_still_wrap_between_them() -> None:
    """white-space:nowrap on each legend item is not moved up to the legend: the items must still break between
    them (the program grid's legend ran off a narrow page in Notebook 7)."""
    from tests.render.test_tgrid_fixture import lens_data
    from torchlens_widgets.render.triton_grid import program_grid_html

    html = portable_html(program_grid_html(next(iter(lens_data().values()))))
    legend = re.search(r'<div class="legend" style="([^"]*)"', html)
    assert legend and "nowrap" not in legend.group(1), legend
    assert re.search(r'<span class="item" style="[^"]*white-space:nowrap', html)
