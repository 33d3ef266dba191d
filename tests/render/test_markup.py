"""Names with control characters, markup or unpaired surrogates still give well-formed SVG that shows them."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import torch

from torchlens_widgets import grad_graph, layout
from torchlens_widgets.lenses.asyncexec import StreamSim
from torchlens_widgets.render.grad_graph import grad_graph_model, grad_graph_svg
from torchlens_widgets.render.lanes import lanes_svg
from torchlens_widgets.render.markup import esc
from torchlens_widgets.render.stride import TensorView, stride_model, stride_svg

HOSTILE = ["x\x00y", "\x1b[31mred\x1b[0m", "a\x0bb\x0cc", "<b>&amp;\"'", "del\x7f", "half\ud800pair", "ok ✓"]


def _well_formed(svg: str) -> ET.Element:
    return ET.fromstring(svg.encode("utf-8"))


def test_esc_makes_invalid_characters_visible() -> None:
    assert esc("x\x00y") == "x\\x00y"
    assert esc("\x1b[0m") == "\\x1b[0m"
    assert esc("half\ud800pair") == "half\\ud800pair"
    assert esc("<a href='x'>") == "&lt;a href=&#x27;x&#x27;&gt;"
    assert esc("tab\tnew\nline") == "tab\tnew\nline"  # allowed in XML: kept


@pytest.mark.parametrize("name", HOSTILE)
def test_stride_svg_stays_valid(name: str) -> None:
    t = torch.arange(6.0).reshape(2, 3)
    svg = stride_svg(stride_model([TensorView(name, layout(t))]))
    root = _well_formed(svg)
    assert any("".join(el.itertext()).startswith(esc(name)[:1]) or name[:1] in "".join(el.itertext()) for el in root.iter())


@pytest.mark.parametrize("name", HOSTILE)
def test_grad_graph_svg_stays_valid(name: str) -> None:
    a = torch.randn(3, requires_grad=True)
    svg = grad_graph_svg(grad_graph_model(grad_graph((a * 2).sum(), names={name: a}).to_dict()))
    _well_formed(svg)


@pytest.mark.parametrize("name", HOSTILE)
def test_lanes_svg_stays_valid(name: str) -> None:
    sim = StreamSim()
    sim.launch(name, 10)
    sim.synchronize(name)
    _well_formed(lanes_svg(sim.timeline()))
