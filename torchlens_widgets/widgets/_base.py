"""Shared widget plumbing: bundled front-end code and the static fallback in every mime bundle."""

from __future__ import annotations

import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import anywidget

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
    """An anywidget whose mime bundle also carries a static SVG and a deterministic text/plain."""

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
        data["image/svg+xml"] = self.static_svg()
        data["text/plain"] = self.static_text()
        return data, meta
