"""Shared widget plumbing: bundled front-end code and the static fallback in every mime bundle."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..render.portable import STATIC_NOTE, portable_html, portable_svg

STATIC = Path(str(resources.files("torchlens_widgets") / "static"))


_MISSING_BUNDLE_ESM = """
export default { render({ el }) {
  el.textContent = "torchlens-widgets: the widget's front-end bundle was not built, so only the static "
    + "picture can be shown. Reinstall with `pip install .` (it builds labextension/).";
} };
"""


def bundle(name: str) -> Path | str:
    """The bundled ES module for a widget; if it was never built, a stub that says so in the page."""
    path = STATIC / f"{name}.js"
    if not path.exists():
        warnings.warn(
            f"the widget bundle {path} is missing (the front end was not built); widgets will show "
            "their static picture. Reinstall with `pip install .` or run `npm run build` in labextension/.",
            stacklevel=2,
        )
        return _MISSING_BUNDLE_ESM
    return path


class FallbackWidget(anywidget.AnyWidget):
    """An anywidget whose mime bundle also carries a static SVG and a deterministic text/plain. The static
    picture says it is static ("run the cell to interact"); the live view does not."""

    def static_svg(self) -> str:
        raise NotImplementedError

    def static_text(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.static_text()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        data, meta = (bundle if isinstance(bundle, tuple) else (bundle or {}, {}))
        data = dict(data)
        data["image/svg+xml"] = portable_svg(self.static_svg(), STATIC_NOTE)
        data["text/plain"] = self.static_text()
        return data, meta


class HtmlFallbackWidget(FallbackWidget):
    """A widget whose static fallback is HTML (a table, not a picture): `static_html` instead of SVG."""

    def static_html(self) -> str:
        raise NotImplementedError

    def static_svg(self) -> str:
        raise NotImplementedError(f"{type(self).__name__}'s static fallback is HTML: use static_html()")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """Widget view + static HTML (sanitizer-proof, captioned as static) + text/plain."""
        bundle_ = anywidget.AnyWidget._repr_mimebundle_(self, **kwargs)
        data, meta = bundle_ if isinstance(bundle_, tuple) else (bundle_ or {}, {})
        data = dict(data)
        data["text/html"] = portable_html(self.static_html(), caption=STATIC_NOTE)
        data["text/plain"] = self.static_text()
        return data, meta


_LIVE_HTML_ESM = """
export default { render({ model, el }) {
  const show = () => { el.innerHTML = model.get("html"); };
  show();
  model.on("change:html", show);
} };
"""


class LiveHtml(anywidget.AnyWidget):
    """A report's interactive HTML (`<details>` that open on a click) as its live view. The picture saved and
    exported beside it is the portable version (no `<details>`: a sanitizer would show the tags as text)."""

    _esm = _LIVE_HTML_ESM
    html = traitlets.Unicode().tag(sync=True)


class ReportView:
    """A lens report (anything with `to_dict()`) shown without a widget model: HTML in a notebook, text
    elsewhere. Subclasses name the two renderers. The HTML is portable (survives a sanitizer); a report
    whose HTML opens and closes parts on a click also gets a small live view that keeps that."""

    render_html: Callable[[dict[str, Any]], str]
    render_text: Callable[[dict[str, Any]], str]

    def __init__(self, report: Any) -> None:
        self.report = report

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        data = self.report.to_dict()
        html = type(self).render_html(data)
        out: dict[str, Any] = {}
        if "<details" in html:
            live = LiveHtml(html=html)._repr_mimebundle_()
            out.update(live[0] if isinstance(live, tuple) else live or {})
        out["text/html"] = portable_html(html)
        out["text/plain"] = type(self).render_text(data)
        return out
