"""show_compile: traces a function (or shows a trace) as HTML + text, and refuses mixed arguments."""

from __future__ import annotations

import pytest
import torch

from torchlens_widgets import CompileTraceError, compile_trace, show_compile


def breaks_once(x):
    y = x * 2
    print("break")
    return y + 1


def test_show_compile_traces_and_renders() -> None:
    view = show_compile(breaks_once, torch.randn(4), backend="eager")
    bundle = view._repr_mimebundle_()
    assert view.trace.break_count == 1 and view.trace.graph_count == 2
    assert "graph break" in bundle["text/html"] and "breaks_once" in bundle["text/html"]
    assert bundle["text/plain"].startswith("breaks_once [eager]: 2 graphs, 1 break")


def test_show_compile_of_a_trace_and_bad_arguments() -> None:
    trace = compile_trace(breaks_once, torch.randn(4), backend="eager")
    assert show_compile(trace).trace is trace
    with pytest.raises(CompileTraceError, match="takes the trace alone"):
        show_compile(trace, torch.randn(4))


def test_the_saved_picture_is_portable_and_the_live_view_keeps_its_details() -> None:
    """Issue 25 item 2: what is saved and exported has no <style>/<details> (a sanitizer shows them as text);
    the live view (a small widget holding the report's own HTML) still opens an explanation on a click."""
    import ipywidgets

    from torchlens_widgets.widgets._base import LiveHtml

    view = show_compile(breaks_once, torch.randn(4), backend="eager")
    bundle = view._repr_mimebundle_()
    static = bundle["text/html"]
    assert "<style" not in static and "<details" not in static and "<summary" not in static
    assert "graph break" in static
    model_id = bundle["application/vnd.jupyter.widget-view+json"]["model_id"]
    live = ipywidgets.Widget.widgets[model_id]
    assert isinstance(live, LiveHtml) and "<details" in live.html and "<style>" in live.html
