"""Plots (render/plot.py): matplotlib's SVG, themed, deterministic, without pyplot; bad input says what to do;
and the course's notebooks plot their measured curves."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from torchlens_widgets.render.plot import MARKER, Plot, bar_plot, line_plot, plot_bars, plot_lines
from torchlens_widgets.render.theme import STYLE

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
SIZES = [1, 10, 100, 1_000, 10_000, 100_000]
CURVES = {"out=": (SIZES, [1.3, 1.3, 1.3, 1.4, 2.4, 14.6]), "fresh": (SIZES, [1.5, 1.5, 1.6, 1.7, 2.8, 13.5])}


def lines(**kwargs) -> str:
    return line_plot(CURVES, x_label="elements", y_label="µs per call", **kwargs)


def test_a_line_plot_is_one_valid_themed_svg() -> None:
    svg = lines(log_x=True, log_y=True, title="torch.add", marks={"2 × t(1)": 10_000})
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and svg.startswith("<svg") and svg.count("<svg") == 1
    assert root.get("class") == f"tlw-theme {MARKER}"
    assert re.fullmatch(r"\d+", root.get("width", "")) and re.fullmatch(r"\d+", root.get("height", ""))
    assert STYLE in svg  # the course's light/dark/Lab colours travel with the picture
    styles = " ".join(e.get("style", "") for e in root.iter())
    for token in ("fg", "bg", "line", "grid", "cat1", "cat2", "fg2"):
        assert f"var(--tlw-{token})" in styles, token
    assert not re.findall(r"#[0-9a-fA-F]{6}", styles), "every colour a theme variable"
    texts = " ".join("".join(e.itertext()) for e in root.iter("{http://www.w3.org/2000/svg}text"))
    for words in ("elements", "µs per call", "torch.add", "2 × t(1)", "out=", "fresh"):
        assert words in texts, words  # text as <text>, not glyph outlines
    assert "<metadata" not in svg and "Matplotlib v" not in svg and "<!--" not in svg


def test_the_same_input_gives_the_same_bytes() -> None:
    assert lines(log_x=True) == lines(log_x=True)
    assert bar_plot({"a": 1.0, "b": 3.0}, x_label="ms") == bar_plot({"a": 1.0, "b": 3.0}, x_label="ms")
    assert lines(log_x=True) != lines()


def _point_xs(svg: str) -> list[list[float]]:
    """The x of each drawn point, per series: its markers (one definition, the series' colour), in drawing order,
    without the legend's sample drawn after them."""
    uses: dict[str, list[float]] = {}
    for href, x, style in re.findall(r'<use xlink:href="#([^"]+)" x="([\d.]+)" y="[\d.]+" style="([^"]*)"', svg):
        if "--tlw-cat" in style:
            uses.setdefault(href, []).append(float(x))
    return [xs[:len(SIZES)] for xs in uses.values()]


def test_log_axes_put_powers_of_ten_at_equal_steps() -> None:
    logged = _point_xs(lines(log_x=True))
    assert len(logged) == len(CURVES)
    for series in logged:
        steps = [b - a for a, b in zip(series, series[1:])]
        assert max(steps) - min(steps) < 0.05, steps
    linear = _point_xs(lines())
    assert len(linear) == len(CURVES) and all(xs[-1] - xs[-2] > 10 * (xs[1] - xs[0]) for xs in linear)


def test_bars_keep_their_order_and_write_their_values() -> None:
    svg = bar_plot({"host clock only": 16.3, "events": 2669.4}, x_label="µs", unit=" µs", log_x=True)
    ET.fromstring(svg)
    assert svg.index("host clock only") < svg.index(">events<") and "2,669 µs" in svg and "16.3 µs" in svg


@pytest.mark.parametrize(("call", "error", "advice"), [
    (lambda: line_plot({}, x_label="x", y_label="y"), TypeError, "non-empty dict"),
    (lambda: line_plot([1, 2], x_label="x", y_label="y"), TypeError, "{label: (xs, ys)}"),
    (lambda: line_plot({"a": [1, 2, 3]}, x_label="x", y_label="y"), TypeError, "pair (xs, ys)"),
    (lambda: line_plot({"a": ([1, 2], [1])}, x_label="x", y_label="y"), ValueError, "one y per x"),
    (lambda: line_plot({"a": ([0, 1], [1, 2])}, x_label="x", y_label="y", log_x=True), ValueError, "log_x=False"),
    (lambda: line_plot({"a": ([1, 2], [1, float("nan")])}, x_label="x", y_label="y"), ValueError, "finite"),
    (lambda: line_plot({"a": ([1, 2], [1, "2"])}, x_label="x", y_label="y"), TypeError, "must be a number"),
    (lambda: line_plot({"a": ([1], [1])}, x_label="", y_label="y"), TypeError, "non-empty string"),
    (lambda: line_plot({"a": ([1], [1])}, x_label="x", y_label="y", marks=[3]), TypeError, "{label: x}"),
    (lambda: bar_plot({"a": -1.0}, x_label="x"), ValueError, ">= 0"),
    (lambda: bar_plot({"a": 0.0}, x_label="x", log_x=True), ValueError, "logarithmic"),
])
def test_bad_input_says_what_to_do(call, error, advice) -> None:
    with pytest.raises(error, match=re.escape(advice)):
        call()


def test_accepts_tensors() -> None:
    torch = pytest.importorskip("torch")
    x = torch.logspace(0, 3, 5, dtype=torch.float64)
    assert "tlw-plot" in line_plot({"t": (x, x * 2)}, x_label="x", y_label="y", log_x=True)


def test_notebook_output_is_svg_and_a_line_of_text() -> None:
    shown = plot_lines(CURVES, x_label="elements", y_label="µs per call")
    assert isinstance(shown, Plot)
    bundle = shown._repr_mimebundle_()
    assert set(bundle) == {"image/svg+xml", "text/plain"} and bundle["image/svg+xml"].startswith("<svg")
    assert repr(shown) == bundle["text/plain"] == "<plot: µs per call against elements; out=, fresh>"
    assert plot_bars({"a": 1.0}, x_label="ms").text == "<plot: ms; 1 bars>"


def test_no_pyplot_and_the_backend_untouched() -> None:
    """In a fresh interpreter: plotting leaves the backend, rcParams and pyplot's figure list as they were, and
    importing the module alone does not import matplotlib."""
    code = """
import sys
import torchlens_widgets.render.plot as p
assert "matplotlib" not in sys.modules, "imported at module load"
import matplotlib
matplotlib.use("pdf")  # a learner's own choice
before = (matplotlib.get_backend(), dict(matplotlib.rcParams))
import matplotlib.pyplot as plt
p.line_plot({"a": ([1, 2], [3, 4])}, x_label="x", y_label="y", log_x=True)
p.bar_plot({"a": 1.0}, x_label="x")
assert plt.get_fignums() == [], plt.get_fignums()
assert (matplotlib.get_backend(), dict(matplotlib.rcParams)) == before
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def _plots_in(path: Path) -> int:
    nb = json.loads(path.read_text())
    return sum(f'class="tlw-theme {MARKER}"' in "".join(o.get("data", {}).get("image/svg+xml", ""))[:300]
               for c in nb["cells"] for o in c.get("outputs", []))


def test_six_notebooks_plot_their_measured_curves() -> None:
    plotted = {p.name for p in NOTEBOOKS.glob("[0-9][0-9]-*.ipynb") if _plots_in(p)}
    assert len(plotted) >= 6, sorted(plotted)
    assert {"01-runtime.ipynb", "13-fusion.ipynb", "14-mixed-precision.ipynb"} <= plotted
