"""graph_breaks: dynamo's graphs, breaks and errors for a function, as data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchlens_widgets.lenses.graph_breaks import graph_breaks


def _interp(x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.interp(x.numpy(), [-1.0, 1.0], [0.0, 1.0])).to(x.dtype)


def test_a_traceable_function_is_one_graph_with_its_ops() -> None:
    report = graph_breaks(lambda x: (x.sin() * 2).sum(), torch.randn(8))
    assert (report.graphs, report.graph_breaks, report.error) == (1, 0, None)
    assert report.ops == (("sin", "mul", "sum"),)
    assert report.summary().startswith("1 graph, 0 graph breaks")


def test_an_untraceable_numpy_call_breaks_the_graph_and_names_the_line() -> None:
    report = graph_breaks(lambda x: _interp(x.cos()) * 2, torch.randn(8))
    assert report.graph_breaks >= 1 and report.graphs == report.graph_breaks + 2  # torch 2.13: 2 breaks, 4 graphs
    assert all("numpy function unsupported" in b.reason for b in report.breaks)
    assert "np.interp" in report.breaks[0].where
    assert report.ops[0] == ("cos",)


def test_a_custom_op_without_a_fake_is_an_error_and_with_one_a_single_node() -> None:
    @torch.library.custom_op("tlw_test_breaks::interp", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return _interp(x)

    def model(x: torch.Tensor) -> torch.Tensor:
        return op(x.cos()) * 2

    before = graph_breaks(model, torch.randn(8))
    assert before.graphs == 0 and before.error is not None and "no fake impl registered" in before.error
    assert before.summary().startswith("compilation failed: RuntimeError: There was no fake impl")
    op.register_fake(lambda x: torch.empty_like(x))
    after = graph_breaks(model, torch.randn(8))
    assert (after.graphs, after.graph_breaks) == (1, 0)
    assert after.calls("tlw_test_breaks::interp") and after.calls("tlw_test_breaks::interp.default")
    assert not after.calls("aten::cdist")


def test_suppress_errors_does_not_hide_an_error() -> None:
    import torch._dynamo

    @torch.library.custom_op("tlw_test_breaks::nofake", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    # torch's own patch, not pytest's monkeypatch: undoing a monkeypatch deletes the setting, and torch then
    # hides it ("suppress_errors does not exist"), which breaks every later torch.compile in the process
    with torch._dynamo.config.patch(suppress_errors=True):
        assert graph_breaks(lambda x: op(x) + 1, torch.randn(3)).error is not None
    assert torch._dynamo.config.suppress_errors is False


def test_not_a_function_is_refused() -> None:
    with pytest.raises(TypeError, match="expected a function"):
        graph_breaks(3, torch.randn(2))  # type: ignore[arg-type]


def test_a_break_inside_a_loop_is_reported_as_a_skipped_frame() -> None:
    def loop(x):
        for i in range(2):
            x = x + 1
            print(i)
        return x

    report = graph_breaks(loop, torch.randn(3))
    assert (report.graphs, report.graph_breaks) == (0, 0) and len(report.skipped) == 1
    assert report.skipped[0].startswith("loop (line ") and "loop" in report.skipped[0].split(";", 1)[1]
    assert "frame skipped" in report.summary()
