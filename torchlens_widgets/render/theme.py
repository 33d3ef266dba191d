"""Colours for every picture, from one table (theme.json): JupyterLab's variables inside Lab, light or
dark values outside it (prefers-color-scheme), so a picture reads in either theme and when exported.

Pictures use `var(--tlw-NAME)` in CSS (classes or style attributes, never SVG presentation attributes,
which do not resolve var()) and put `STYLE` once in their root, whose class includes `tlw-theme`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["STYLE", "TOKENS", "theme_css", "var"]

TOKENS: dict[str, dict[str, Any]] = json.loads((Path(__file__).with_name("theme.json")).read_text())["tokens"]


def var(name: str) -> str:
    """`var(--tlw-name)`; a typo is an error here rather than an invisible colour in the browser."""
    if name not in TOKENS:
        raise KeyError(f"no theme colour {name!r}; the colours are {sorted(TOKENS)}")
    return f"var(--tlw-{name})"


def _block(scheme: str) -> str:
    decl = []
    for name, t in TOKENS.items():
        value = t[scheme]
        decl.append(f"--tlw-{name}:var({t['jp']},{value})" if "jp" in t else f"--tlw-{name}:{value}")
    return ";".join(decl)


def theme_css() -> str:
    """The custom properties for `.tlw-theme`: light by default, dark under an OS dark preference,
    and whatever JupyterLab's theme says (data-jp-theme-light) when inside Lab."""
    light, dark = _block("light"), _block("dark")
    return (f".tlw-theme{{{light};color:var(--tlw-fg)}}"
            f"@media (prefers-color-scheme:dark){{.tlw-theme{{{dark}}}}}"
            f"[data-jp-theme-light=true] .tlw-theme{{{light}}}"
            f"[data-jp-theme-light=false] .tlw-theme{{{dark}}}")


STYLE = theme_css()
