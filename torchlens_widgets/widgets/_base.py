"""Shared widget plumbing: bundled front-end code and the static fallback in every mime bundle."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import anywidget

STATIC = Path(str(resources.files("torchlens_widgets") / "static"))


def bundle_path(name: str) -> Path:
    """Path of a bundled ES module; a clear error if the front end was never built."""
    path = STATIC / f"{name}.js"
    if not path.exists():
        raise FileNotFoundError(
            f"the widget bundle {path} is missing: the front end was not built. "
            "Reinstall with `pip install .` (it builds labextension/) or run `npm run build` in labextension/."
        )
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
