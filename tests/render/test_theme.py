"""One colour table for Python and the widgets, readable in light and dark schemes."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchlens_widgets.render import theme

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "theme" / "theme.txt"


def _luminance(hex_colour: str) -> float:
    rgb = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_python_css_matches_the_golden_copy_the_widgets_are_tested_against() -> None:
    assert theme.STYLE + "\n" == GOLDEN.read_text()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_colours_reach_4_5_to_1_on_every_background(scheme: str) -> None:
    texts = [n for n, t in theme.TOKENS.items() if t.get("text")]
    grounds = ["bg", "bg2"] + [n for n in theme.TOKENS if n.startswith("tint")]
    low = [(t, g, round(contrast(theme.TOKENS[t][scheme], theme.TOKENS[g][scheme]), 2))
           for t in texts for g in grounds
           if (t in ("fg", "fg2") or g in ("bg", "bg2"))
           and contrast(theme.TOKENS[t][scheme], theme.TOKENS[g][scheme]) < 4.5]
    assert not low, f"{scheme}: text/background pairs under 4.5:1: {low}"


def test_var_rejects_unknown_names() -> None:
    assert theme.var("warn") == "var(--tlw-warn)"
    with pytest.raises(KeyError, match="no theme colour"):
        theme.var("orange")
