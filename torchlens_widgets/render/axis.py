"""What the time-axis pictures (host/device lanes, rank lanes, profile timelines) share: tick steps and labels cut
to the pixels they have. Plain functions on numbers and strings; the widgets' TypeScript does the same."""

from __future__ import annotations

import math

__all__ = ["CHAR_W", "nice_step", "px", "short_label"]

CHAR_W = 6.6  # px per character at font-size 11 monospace


def nice_step(end: float, max_ticks: int = 8) -> float:
    """A tick step of 1, 2 or 5 times a power of ten that puts at most `max_ticks` ticks on [0, end]."""
    if end <= 0:
        return 1.0
    raw = end / max_ticks
    base = 10 ** math.floor(math.log10(raw))
    return next(m * base for m in (1, 2, 5, 10) if m * base >= raw)


def px(v: float) -> float:
    """A coordinate rounded to 1/100 px: stable text in saved pictures."""
    return round(v, 2)


def short_label(name: str, width: float) -> str:
    """`name` cut to what fits in `width` px ("" when not even 3 characters fit)."""
    n = int((width - 4) // CHAR_W)
    if n < 3:
        return ""
    return name if len(name) <= n else name[: n - 1] + "…"
