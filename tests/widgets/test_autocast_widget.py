"""show_autocast / show_probe: trace (or show a trace) as HTML + text; refuse mixed arguments."""

from __future__ import annotations

import pytest
import torch

from torchlens_widgets import AutocastError, autocast_trace, show_autocast, show_probe


def f(x):
    return torch.mm(x, x).relu()


def test_show_autocast_traces_and_renders() -> None:
    view = show_autocast(f, torch.randn(3, 3))
    bundle = view._repr_mimebundle_()
    assert view.trace.call("mm").policy == "lower precision"
    assert "tlw-autocast" in bundle["text/html"]
    assert bundle["text/plain"].startswith("f under autocast(cpu, bfloat16)")
    trace = autocast_trace(f, torch.randn(3, 3))
    assert show_autocast(trace).trace is trace
    with pytest.raises(AutocastError, match="takes the trace alone"):
        show_autocast(trace, torch.randn(2))


def test_show_probe() -> None:
    bundle = show_probe([65504.0, 65520.0], torch.float16)._repr_mimebundle_()
    assert "overflow" in bundle["text/plain"] and "65504 -> 65504 (exact)" in bundle["text/plain"]
