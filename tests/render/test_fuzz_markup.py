"""Fuzzing every renderer's text inputs: names with control characters, lone surrogates, markup and huge
lengths still give well-formed SVG/HTML that shows them (escaped), through every place a name can enter.

Places: tensor names, view-base names and notes (stride); leaf names, module-path groups and custom
autograd Function names (grad graph); kernel, stream, event, host-work and sync labels (lanes); frames and
titles (memory); module attribute names and module class names (dispatch trace).
"""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzzing import outcome
from torchlens_widgets import dispatch_trace, grad_graph, stride_diagram
from torchlens_widgets.lenses.asyncexec import StreamSim
from torchlens_widgets.render.dispatch import dispatch_html, trace_model
from torchlens_widgets.render.grad_graph import grad_graph_model, grad_graph_svg
from torchlens_widgets.render.lanes import lanes_svg
from torchlens_widgets.render.markup import esc

HOSTILE = [
    "nul\x00here",
    "\x1b[31mred\x1b[0m",
    "lone\ud800surrogate",
    "low\udfffhalf",
    "<script>alert(1)</script>",
    "a & b &amp; c",
    'quote " and \' apostrophe',
    "]]><!--",
    "bell\x07 del\x7f nonchar\ufffe",
    "x" * 5000,
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ✓ مرحبا",
]


def _parse(markup: str) -> ET.Element:
    """Well-formed XML, as a browser's SVG parser needs it (html wrapped in one root element)."""
    return ET.fromstring(markup.encode("utf-8"))


def _shown(name: str) -> str:
    """What a reader sees of `name`: esc()'s visible form, unescaped back to characters by the parser."""
    return html.unescape(esc(name))


def _assert_shows(markup: str, name: str, wrap: bool = False) -> None:
    root = _parse(f"<div>{markup}</div>" if wrap else markup)
    text = "".join("".join(el.itertext()) + " ".join(el.attrib.values()) for el in root.iter())
    assert _shown(name)[:6] in text, f"{name[:20]!r} is not shown"


def _type_name(name: str) -> str:
    """`name` as far as a Python class name can hold it (no NUL, no lone surrogate)."""
    return name.replace("\x00", "").encode("utf-8", "replace").decode() or "X"


def _stride(name: str) -> str:
    x = torch.arange(6.0).reshape(2, 3)
    return stride_diagram(x, x.t(), torch.empty(0), names=[name, name + "ᵀ", name + "∅"]).static_svg()


def _grad(name: str) -> str:
    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

    model = torch.nn.Sequential()
    for k in range(3):  # repeated blocks: their module path becomes a collapsed group's label
        model.add_module(f"{name.replace('.', '_')}{k}", Block())
    fn = type(_type_name(name), (torch.autograd.Function,), {
        "forward": staticmethod(lambda ctx, x: x * 2),
        "backward": staticmethod(lambda ctx, g: g * 2),
    })
    y = torch.ones(1, 2, requires_grad=True)
    h = fn.apply(y)
    for blk in model:
        h = blk.lin(h)
    g = grad_graph(h.sum(), params=model, names={name: y})
    return grad_graph_svg(grad_graph_model(g.to_dict()))


def _lanes(name: str) -> str:
    sim = StreamSim()
    side = sim.new_stream(name)
    sim.host_work(name, 40)
    sim.launch(name, 30)
    sim.launch(name, 20, stream=side)
    ev = sim.event(name)
    ev.record(side)
    sim.default_stream.wait_event(ev)
    sim.synchronize(name)
    return lanes_svg(sim.timeline())


def _memory(name: str) -> str:
    from torchlens_widgets import load_snapshot
    from torchlens_widgets.render.memory import memory_model, memory_svg

    frames = [{"filename": f"/home/{name}.py", "line": 3, "name": name}]
    snap = load_snapshot({"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 0, "size": 4096, "stream": 0, "frames": frames},
        {"action": "free_requested", "addr": 0, "size": 4096, "stream": 0, "frames": frames},
        {"action": "free_completed", "addr": 0, "size": 4096, "stream": 0, "frames": frames}]]})
    return memory_svg(memory_model(snap, title=name))


def _dispatch(name: str) -> str:
    cls = type(_type_name(name), (torch.nn.Linear,), {})  # a module class with this name
    model = torch.nn.Sequential()
    model.add_module("\x1b" + name.replace(".", "_"), cls(2, 2))  # "\x1b": never an existing attribute
    with dispatch_trace(model) as tr:
        model(torch.ones(1, 2))
    return dispatch_html(trace_model(tr))


RENDERERS: dict[str, tuple[Callable[[str], str], bool]] = {
    "stride": (_stride, False),
    "grad_graph": (_grad, False),
    "lanes": (_lanes, False),
    "memory": (_memory, False),
    "dispatch": (_dispatch, True),
}


@pytest.mark.parametrize("renderer", list(RENDERERS))
@pytest.mark.parametrize("name", HOSTILE, ids=lambda n: ascii(n[:12]))
def test_hostile_names_give_well_formed_markup_that_shows_them(renderer: str, name: str) -> None:
    draw, wrap = RENDERERS[renderer]
    markup = outcome(lambda: draw(name), ())
    _assert_shows(markup, name, wrap)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(name=st.text(alphabet=st.characters(codec=None, exclude_categories=()), min_size=1, max_size=60))
def test_any_text_anywhere_gives_well_formed_markup(name: str) -> None:
    for draw, wrap in RENDERERS.values():
        _parse(f"<div>{draw(name)}</div>" if wrap else draw(name))


def test_esc_leaves_nothing_xml_forbids() -> None:
    every = "".join(chr(c) for c in range(0x10000)) + "\U0001f600"
    root = _parse(f"<t a=\"{esc(every)}\">{esc(every)}</t>")
    for shown in (root.text or "", root.attrib["a"]):  # text and attribute both keep every character, visibly
        assert "\U0001f600" in shown and "\\ud800" in shown and "\\x00" in shown and all(c in shown for c in "<&>\"'")


def test_esc_makes_invalid_characters_visible_and_keeps_the_rest() -> None:
    assert esc("x\x00y") == "x\\x00y"
    assert esc("\x1b[0m") == "\\x1b[0m"
    assert esc("half\ud800pair") == "half\\ud800pair"
    assert esc("<a href='x'>") == "&lt;a href=&#x27;x&#x27;&gt;"
    assert esc("tab\tnew\nline") == "tab\tnew\nline"  # allowed in XML: kept


def test_backticked_spans_become_code_and_stay_escaped() -> None:
    from torchlens_widgets.render.markup import esc_ticks

    assert esc_ticks("use `torch._dynamo.config.x = 1` here") == "use <code>torch._dynamo.config.x = 1</code> here"
    assert esc_ticks("`<script>`") == "<code>&lt;script&gt;</code>"
    assert esc_ticks("a lone ` tick") == "a lone ` tick"
