"""Names with control characters, markup or unpaired surrogates still give well-formed SVG that shows them."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _memory_svg_with(name: str) -> str:
    from torchlens_widgets import load_snapshot
    from torchlens_widgets.render.memory import memory_model, memory_svg

    frames = [{"filename": f"/home/u/{name}.py", "line": 3, "name": name}]
    snap = load_snapshot({"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 0, "size": 4096, "stream": 0, "frames": frames},
        {"action": "free_requested", "addr": 0, "size": 4096, "stream": 0, "frames": frames},
        {"action": "free_completed", "addr": 0, "size": 4096, "stream": 0, "frames": frames}]]})
    return memory_svg(memory_model(snap, title=name))


def _dispatch_html_with(name: str) -> str:
    from torchlens_widgets import dispatch_trace
    from torchlens_widgets.render.dispatch import dispatch_html, trace_model

    model = torch.nn.Sequential()
    model.add_module("\x1b" + name.replace(".", "_"), torch.nn.Linear(2, 2))  # never an existing attribute
    with dispatch_trace(model) as tr:
        model(torch.ones(1, 2))
    return dispatch_html(trace_model(tr))


@pytest.mark.parametrize("name", HOSTILE)
def test_memory_svg_and_dispatch_html_stay_valid(name: str) -> None:
    _well_formed(_memory_svg_with(name))
    _well_formed(f"<div>{_dispatch_html_with(name)}</div>")


@settings(max_examples=25, deadline=None, derandomize=True)
@given(name=st.text(alphabet=st.characters(codec=None, exclude_categories=()), min_size=1, max_size=40))
def test_any_text_gives_well_formed_pictures(name: str) -> None:
    """Random strings (control characters, surrogates, markup, any script) in every renderer."""
    t = torch.arange(4.0)
    _well_formed(stride_svg(stride_model([TensorView(name, layout(t))])))
    a = torch.randn(2, requires_grad=True)
    _well_formed(grad_graph_svg(grad_graph_model(grad_graph((a * 2).sum(), names={name: a}).to_dict())))
    sim = StreamSim()
    sim.launch(name, 5)
    _well_formed(lanes_svg(sim.timeline()))
    _well_formed(_memory_svg_with(name))
    _well_formed(f"<div>{_dispatch_html_with(name)}</div>")
