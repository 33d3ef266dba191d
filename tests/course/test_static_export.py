"""Without a kernel (nbconvert HTML offline, GitHub, a restarted JupyterLab) the committed notebooks show
every widget's static picture: no widget views or widget state are saved, and the HTML export carries each
picture inline with no network reference."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import nbformat
import pytest

from torchlens_widgets.course.execute import WIDGET_VIEW, static_outputs

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]-*.ipynb"))
_NETWORK = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?(?:https?:)?//|@import""", re.I)


def _outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_keeps_static_pictures_only(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    assert "widgets" not in nb.metadata, f"{path.name} saves widget state: refresh it with course.execute"
    views = [o for o in _outputs(nb) if WIDGET_VIEW in o.get("data", {})]
    assert not views, f"{path.name}: {len(views)} outputs keep a widget view an exporter would prefer"
    for o in _outputs(nb):
        for mime in ("image/svg+xml", "text/html"):
            text = o.get("data", {}).get(mime)
            if text:
                assert not _NETWORK.search("".join(text)), f"{path.name}: a {mime} output loads from the network"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_html_export_shows_every_picture_offline(path: Path) -> None:
    from nbconvert import HTMLExporter

    nb = nbformat.read(path, as_version=4)
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert "widget-view+json" not in html and "embed-amd" not in html and "html-manager" not in html
    svgs = ["".join(o["data"]["image/svg+xml"]) for o in _outputs(nb) if "image/svg+xml" in o.get("data", {})]
    for svg in svgs:
        inline = base64.b64encode(svg.encode()).decode()
        assert inline in html or svg in html, f"{path.name}: a picture is missing from the HTML export"


def test_static_outputs_drops_views_only_where_a_picture_exists() -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}
    pictured = nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": "a"}, "image/svg+xml": "<svg/>",
                                                            "text/plain": "x"})
    bare = nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": "b"}, "text/plain": "slider"})
    nb.cells.append(nbformat.v4.new_code_cell("w", outputs=[pictured, bare]))
    assert static_outputs(nb) == 1
    assert "widgets" not in nb.metadata
    assert WIDGET_VIEW not in pictured["data"] and WIDGET_VIEW in bare["data"]  # nothing to show instead


def test_the_export_check_can_fail() -> None:
    nb = nbformat.read(NOTEBOOKS[1], as_version=4)
    out = next(o for o in _outputs(nb) if "image/svg+xml" in o.get("data", {}))
    out["data"]["image/svg+xml"] = '<svg xmlns="http://www.w3.org/2000/svg"><text>unique probe</text></svg>'
    out["data"][WIDGET_VIEW] = {"model_id": "x", "version_major": 2, "version_minor": 0}
    model = {"model_name": "AnyModel", "model_module": "anywidget", "model_module_version": "*", "state": {}}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {"x": model},
                                                                             "version_major": 2, "version_minor": 0}}
    from nbconvert import HTMLExporter

    html, _ = HTMLExporter().from_notebook_node(nb)
    svg = "".join(out["data"]["image/svg+xml"])
    assert base64.b64encode(svg.encode()).decode() not in html  # the widget view wins and the picture is lost
