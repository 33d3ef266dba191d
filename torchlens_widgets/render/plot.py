"""Plots of measured curves: numbers in, SVG out, drawn by matplotlib.

`line_plot` (curves, optionally with marked x positions) and `bar_plot` (labelled values) return SVG text;
`plot_lines` and `plot_bars` wrap it in an object a notebook shows as an `image/svg+xml` output (with a
`text/plain` line that names the plot, for viewers without pictures).

How the SVG is made, and why:

* matplotlib's SVG backend on a bare `matplotlib.figure.Figure`, never pyplot: the learner's backend
  (`matplotlib.get_backend()`), rcParams and figure list stay as they were. matplotlib is imported on the
  first plot, so a notebook without plots does not pay for it.
* Deterministic: a fixed `svg.hashsalt` (the clip-path ids), no date or creator metadata, text as `<text>`
  (`svg.fonttype='none'`, small and readable by a screen reader), so a saved output compares byte for byte.
* Themed like every other picture (render/theme.py): the root's class is `tlw-theme tlw-plot` and it carries the
  course's theme CSS; every colour is a `var(--tlw-...)` in a style attribute; the background is the theme's
  `bg`, so text and background always come from one scheme. Lab and nbconvert show an `image/svg+xml` output as
  an `<img>` (which no HTML sanitizer touches), where the page's variables do not reach: there the plot is a
  light card, or a dark one when the system prefers dark; inlined in a page, it takes Lab's colours.
* A tight bounding box: no label is cut off.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .theme import STYLE, TOKENS

__all__ = ["MARKER", "Plot", "bar_plot", "line_plot", "plot_bars", "plot_lines"]

#: The root class every plot's SVG carries (what a test looks for in saved notebooks).
MARKER = "tlw-plot"
_SERIES = tuple(f"cat{i}" for i in range(1, 9))
_USED = ("fg", "fg2", "line", "grid", "bg", *_SERIES)
# matplotlib draws with each token's light value; the SVG's colours are then swapped for the theme's variables
_HEX = {str(TOKENS[name]["light"]).lower(): name for name in _USED}
assert len(_HEX) == len(_USED), "two theme tokens a plot uses share a light value"
_WIDTH_IN, _HEIGHT_IN = 6.4, 3.2
_MAX_SERIES = len(_SERIES)


# ---- checking what the caller passed ------------------------------------------------------------------------

def _numbers(values: Any, what: str) -> list[float]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{what} must be a sequence of numbers (a list, tuple or 1-d tensor), got "
                        f"{type(values).__name__}")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not hasattr(v, "__float__"):
            raise TypeError(f"{what}[{i}] is {type(v).__name__} {v!r}: every value must be a number")
        f = float(v)
        if not math.isfinite(f):
            raise ValueError(f"{what}[{i}] is {f}: a plot needs finite numbers (drop the point, or clamp it "
                             "and say so in the axis label)")
        out.append(f)
    return out


def _positive(values: list[float], what: str, axis: str) -> None:
    bad = [v for v in values if v <= 0]
    if bad:
        raise ValueError(f"{what} holds {bad[0]!r}, but the {axis} axis is logarithmic: every value must be > 0 "
                         f"(drop zeros, or use log_{axis}=False)")


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"{what} must be a non-empty string, got {value!r}")
    return value


def _check_series(series: Any, log_x: bool, log_y: bool) -> list[tuple[str, list[float], list[float]]]:
    if not isinstance(series, Mapping) or not series:
        raise TypeError("series must be a non-empty dict {label: (xs, ys)}, e.g. {'eager': ([1, 2, 4], [3.1, 5.9, "
                        f"12.0])}}; got {type(series).__name__}")
    if len(series) > _MAX_SERIES:
        raise ValueError(f"{len(series)} series: a plot shows at most {_MAX_SERIES} (one theme colour each)")
    out = []
    for label, pair in series.items():
        _text(label, "a series label")
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"series[{label!r}] must be a pair (xs, ys), got {type(pair).__name__}")
        xs, ys = _numbers(pair[0], f"series[{label!r}] xs"), _numbers(pair[1], f"series[{label!r}] ys")
        if len(xs) != len(ys) or not xs:
            raise ValueError(f"series[{label!r}] has {len(xs)} xs and {len(ys)} ys: give one y per x, at least one")
        if log_x:
            _positive(xs, f"series[{label!r}] xs", "x")
        if log_y:
            _positive(ys, f"series[{label!r}] ys", "y")
        out.append((label, xs, ys))
    return out


# ---- drawing -----------------------------------------------------------------------------------------------------

def _colour(name: str) -> str:
    return str(TOKENS[name]["light"])


def _figure(height_in: float = _HEIGHT_IN) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(_WIDTH_IN, height_in), facecolor=_colour("bg"))
    ax = fig.add_subplot()
    ax.set_facecolor("none")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_color(_colour("line"))
    ax.tick_params(colors=_colour("line"), labelcolor=_colour("fg"), which="both")
    ax.grid(True, color=_colour("grid"), linewidth=0.8, which="major")
    ax.set_axisbelow(True)
    return fig, ax


def _log_axes(ax: Any, log_x: bool, log_y: bool) -> None:
    """Logarithmic axes, with unlabelled minor ticks at 2 and 5 times each power of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for on, axis, scale in ((log_x, ax.xaxis, ax.set_xscale), (log_y, ax.yaxis, ax.set_yscale)):
        if on:
            scale("log")
            axis.set_major_formatter(FuncFormatter(_power_of_ten))
            axis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
            axis.set_minor_formatter(NullFormatter())


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _power_of_ten(value: float, _pos: Any = None) -> str:
    """A log axis' tick label: 10⁻⁸ as plain text (no mathtext, which is slow to start and writes each glyph)."""
    if value <= 0:
        return ""
    exponent = round(math.log10(value))
    if abs(value - 10.0**exponent) > 1e-9 * value:
        return f"{value:g}"
    return "1" if exponent == 0 else "10" + str(exponent).translate(_SUPERSCRIPT)


def _labels(ax: Any, x_label: str | None, y_label: str | None, title: str | None) -> None:
    if x_label is not None:
        ax.set_xlabel(_text(x_label, "x_label"), color=_colour("fg"))
    if y_label is not None:
        ax.set_ylabel(_text(y_label, "y_label"), color=_colour("fg"))
    if title is not None:
        ax.set_title(_text(title, "title"), color=_colour("fg"), loc="left", fontsize=11)


_RC: Any = {  # Any: matplotlib's stubs type the keys as literals
    "svg.hashsalt": "torchlens-plot",  # fixed clip-path ids: the same input gives the same bytes
    "svg.fonttype": "none",            # text as <text>, not glyph outlines
    "svg.id": None,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],  # matplotlib's own font: the same metrics (and layout) everywhere
    "font.size": 10,
    "axes.formatter.use_mathtext": False,
    "axes.unicode_minus": False,
}


_GEOMETRY = re.compile(r'(\s(?:d|x|y|transform|viewBox)=")([^"]*)"')
_DECIMALS = re.compile(r"(\d\.\d\d)\d+")  # a hundredth of a point is finer than any screen


def _value(v: float, unit: str) -> str:
    """A bar's value as written at its end: whole numbers from 100 up (with thousands separators), else 3 digits."""
    return (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}") + unit


def _svg(fig: Any) -> str:
    """The figure as themed SVG text (see the module doc)."""
    import io

    from matplotlib.backends.backend_svg import FigureCanvasSVG

    FigureCanvasSVG(fig)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", pad_inches=0.08, facecolor=_colour("bg"),
                metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>|<!--.*?-->", "", svg, flags=re.S)
    svg = re.sub(r">\s+<", "><", re.sub(r"\s*\n\s*", " ", svg))  # one line: saved notebooks stay small
    svg = re.sub(r'<g id="[^"]*"', "<g", svg)  # matplotlib's names for its groups: nothing refers to them
    svg = _GEOMETRY.sub(lambda m: m.group(1) + _DECIMALS.sub(r"\1", m.group(2)) + '"', svg)

    def themed(m: re.Match[str]) -> str:
        name = _HEX.get(m.group(2).lower())
        return f"{m.group(1)}var(--tlw-{name})" if name else m.group(0)

    svg = re.sub(r"((?:fill|stroke|color):\s*)(#[0-9a-fA-F]{6})\b", themed, svg)
    head = re.match(r"<svg\b[^>]*>", svg)
    assert head is not None
    tag = head.group(0)
    # points → CSS pixels, as plain numbers (the viewBox stays in points)
    tag = re.sub(r'\b(width|height)="([\d.]+)pt"', lambda m: f'{m.group(1)}="{round(float(m.group(2)) * 4 / 3)}"', tag)
    tag = tag.replace("<svg ", f'<svg class="tlw-theme {MARKER}" ', 1)
    return f"{tag}<style>{STYLE}</style>{svg[head.end():]}".rstrip() + "\n"


def line_plot(series: Mapping[str, tuple[Iterable[float], Iterable[float]]], *, x_label: str, y_label: str,
              log_x: bool = False, log_y: bool = False, title: str | None = None,
              marks: Mapping[str, float] | None = None, points: bool = False) -> str:
    """SVG of one or more curves, `{label: (xs, ys)}`, each in a theme colour with a marker per point.

    `log_x` / `log_y` make an axis logarithmic (every value must then be > 0). `marks` draws a dashed vertical line
    at each `{label: x}`, labelled at the top. `points=True` draws the points without joining them."""
    from matplotlib import rc_context

    checked = _check_series(series, log_x, log_y)
    if marks is not None and not isinstance(marks, Mapping):
        raise TypeError(f"marks must be a dict {{label: x}}, got {type(marks).__name__}")
    marks = dict(marks or {})
    mark_xs = _numbers(list(marks.values()), "marks")
    for label in marks:
        _text(label, "a mark's label")
    if len(marks) > 4:
        raise ValueError(f"{len(marks)} marks: a plot labels at most 4")
    if log_x:
        _positive(mark_xs, "marks", "x")
    with rc_context(_RC):
        fig, ax = _figure()
        for (label, xs, ys), colour in zip(checked, _SERIES):
            dense = len(xs) > 40 and not points  # a marker per point only where points can be told apart
            ax.plot(xs, ys, marker=None if dense else "o", markersize=4, linewidth=0 if points else 1.8,
                    color=_colour(colour), label=label)
        _log_axes(ax, log_x, log_y)
        all_x = [x for _, xs, _ in checked for x in xs]
        if not log_x and min(all_x) >= 0:
            ax.set_xlim(left=0)  # sizes, bytes and times start at zero: no axis that exaggerates a difference
        if not log_y and min(y for _, _, ys in checked for y in ys) >= 0:
            ax.set_ylim(bottom=0)
        every_x = all_x + mark_xs
        scale = math.log10 if log_x else float
        lo, hi = scale(min(every_x)), scale(max(every_x))
        for k, (label, x) in enumerate(marks.items()):
            right = hi > lo and (scale(x) - lo) / (hi - lo) > 0.6  # near the right edge: the label goes left
            ax.axvline(x, color=_colour("fg2"), linestyle="--", linewidth=1)
            # each label a line below the one before, so two marks' labels never overlap
            ax.annotate(label, (x, 1), xycoords=("data", "axes fraction"), xytext=(-3 if right else 3, -2 - 12 * k),
                        textcoords="offset points", va="top", ha="right" if right else "left", fontsize=9,
                        color=_colour("fg2"))
        _labels(ax, x_label, y_label, title)
        if len(checked) > 1:
            ax.legend(frameon=False, labelcolor=_colour("fg"), loc="best")
        return _svg(fig)


def bar_plot(bars: Mapping[str, float], *, x_label: str, log_x: bool = False, title: str | None = None,
             unit: str = "") -> str:
    """SVG of labelled values as horizontal bars, in the mapping's order from the top, each bar's value written
    at its end (`unit` after the number, e.g. " µs"). `log_x` for values that span orders of magnitude."""
    from matplotlib import rc_context

    if not isinstance(bars, Mapping) or not bars:
        raise TypeError(f"bars must be a non-empty dict {{label: value}}, got {type(bars).__name__}")
    labels = [_text(k, "a bar's label") for k in bars]
    values = _numbers(list(bars.values()), "bars")
    if log_x:
        _positive(values, "bars", "x")
    elif any(v < 0 for v in values):
        raise ValueError("bars holds a negative value: a bar plot shows sizes (times, bytes, counts) that are >= 0")
    if not isinstance(unit, str):
        raise TypeError(f"unit must be a string, got {type(unit).__name__}")
    with rc_context(_RC):
        fig, ax = _figure(height_in=max(1.4, 0.6 + 0.32 * len(labels)))
        ys = list(range(len(labels)))[::-1]
        ax.barh(ys, values, color=_colour("cat1"), height=0.6)
        ax.set_yticks(ys, [k if len(k) <= 48 else k[:47] + "…" for k in labels])
        ax.grid(False, axis="y")
        ax.tick_params(axis="y", length=0)
        _log_axes(ax, log_x, False)
        top = max(values)
        for y, v in zip(ys, values):
            ax.annotate(_value(v, unit), (v, y), xytext=(3, 0), textcoords="offset points", va="center",
                        ha="left", fontsize=9, color=_colour("fg"))
        if not log_x and top > 0:
            ax.set_xlim(0, top * 1.18)  # room for the value written after the longest bar
        elif log_x:
            ax.set_xlim(min(values) / 1.5, top * 4)
        _labels(ax, x_label, None, title)
        return _svg(fig)


class Plot:
    """A plot a notebook shows: `image/svg+xml` (the picture) and `text/plain` (what it is)."""

    def __init__(self, svg: str, text: str) -> None:
        self.svg, self.text = svg, text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"image/svg+xml": self.svg, "text/plain": self.text}

    def __repr__(self) -> str:
        return self.text


def plot_lines(series: Mapping[str, tuple[Iterable[float], Iterable[float]]], **kwargs: Any) -> Plot:
    """`line_plot(series, **kwargs)` as a notebook output (the cell's last expression, or `display(...)`)."""
    svg = line_plot(series, **kwargs)
    what = kwargs.get("title") or f"{kwargs['y_label']} against {kwargs['x_label']}"
    return Plot(svg, f"<plot: {what}; {', '.join(series)}>")


def plot_bars(bars: Mapping[str, float], **kwargs: Any) -> Plot:
    """`bar_plot(bars, **kwargs)` as a notebook output."""
    svg = bar_plot(bars, **kwargs)
    what = kwargs.get("title") or kwargs["x_label"]
    return Plot(svg, f"<plot: {what}; {len(bars)} bars>")
