"""The dispatch widget's Python side: traits, filters, folding, HTML fallback in the mime bundle, bad input."""

from __future__ import annotations

import pytest
import torch
import traitlets
from torch import nn

from torchlens_widgets import DispatchTraceError, dispatch_trace, dispatch_widget
from torchlens_widgets.widgets.dispatch import DispatchTraceWidget


@pytest.fixture
def trace():  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(4, 3), nn.ReLU()), torch.randn(2, 4)
    with dispatch_trace(model) as tr:
        x.t().reshape(-1)
        model(x).sum()
        x.shape  # noqa: B018
    return tr


def test_mimebundle_carries_widget_html_and_plain_text(trace) -> None:  # type: ignore[no-untyped-def]
    w = dispatch_widget(trace)
    assert isinstance(w, DispatchTraceWidget)
    data, _ = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "image/svg+xml" not in data
    html = data["text/html"]
    assert html.startswith('<div class="tlw-dispatch tlw-theme"') and "<script" not in html.lower()
    assert html.count('class="tlw-op') == len(trace.ops) and 'data-id="c8"' not in html  # Tensor.shape (no op) hidden
    assert data["text/plain"].startswith("DispatchTrace: 8 aten ops (1 copy, 4 views, 0 in-place) under 9 Python calls")
    assert repr(w) == data["text/plain"]


def test_filters_and_folding_change_the_static_fallback(trace) -> None:  # type: ignore[no-untyped-def]
    w = dispatch_widget(trace, only_copies=True)
    assert w.filters == {"text": "", "hide_views": False, "only_copies": True, "empty_calls": False}
    assert [r["name"] for r in w.shown()["rows"]] == ["Tensor.reshape", "aten.clone.default"]
    assert "filter: copies only" in w.static_text()
    w.set_filters(only_copies=False, text="addmm")
    assert [r["name"] for r in w.shown()["rows"] if r["type"] == "op"] == ["aten.addmm.default"]
    w.set_filters(text="")
    assert w.collapse("c2") == ["c2"]  # Sequential
    html = w.static_html()
    assert "▸ Sequential" in html and 'data-id="o4"' not in html  # addmm, under Sequential → Linear → F.linear
    w.expand()
    assert w.collapsed == [] and 'data-id="o4"' in w.static_html()
    assert w.collapse() == ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"]  # every call with rows under it
    w.expand("c2", "c3")
    assert w.collapsed == ["c0", "c1", "c4", "c5", "c6", "c7"]
    with pytest.raises(KeyError, match="no call 'c99'"):
        w.collapse("c99")


def test_bad_filters_are_refused(trace) -> None:  # type: ignore[no-untyped-def]
    w = dispatch_widget(trace)
    with pytest.raises(traitlets.TraitError, match="unknown filter"):
        w.filters = {"regex": "x"}
    with pytest.raises(traitlets.TraitError, match="must be a string"):
        w.set_filters(text=3)
    with pytest.raises(TypeError, match="unknown filter"):
        dispatch_widget(trace, colour="red")


@pytest.mark.parametrize("bad", [None, 3, "trace", torch.ones(2), [1, 2]])
def test_a_non_trace_is_refused_with_advice(bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="dispatch trace"):
        dispatch_widget(bad)


def test_a_wrong_dict_and_an_unfinished_trace_are_refused() -> None:
    with pytest.raises(TypeError, match="expected a dispatch trace"):
        dispatch_widget({"kind": "stride"})
    with dispatch_trace() as tr:
        with pytest.raises(DispatchTraceError, match="after the `with"):
            dispatch_widget(tr)


def test_max_ops_caps_the_rows_and_says_so(trace) -> None:  # type: ignore[no-untyped-def]
    w = dispatch_widget(trace, max_ops=2)
    assert w.model["truncated"] and w.model["totals"]["rows_ops"] == 2 and w.model["totals"]["ops"] == 8
    assert "note: showing the first 2 of 8 aten ops" in w.static_text()


def test_bundle_is_the_built_esm(trace) -> None:  # type: ignore[no-untyped-def]
    w = dispatch_widget(trace)
    assert "export" in w._esm and "http" not in w._esm
