"""Showing what fusion saves: eager and fused kernels side by side with the bytes each moved. Plain HTML
outputs (no widget model), so a saved notebook shows it as it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..lenses.fusion import FusionError, FusionReport, Traffic, fusion_report
from ..render.fusion import fusion_html, fusion_text, traffic_html, traffic_text
from ._base import ReportView

__all__ = ["FusionView", "TrafficView", "show_fusion", "show_traffic"]


class FusionView(ReportView):
    """A fusion report for display: HTML in a notebook, deterministic text elsewhere (no times)."""

    render_html = staticmethod(fusion_html)
    render_text = staticmethod(fusion_text)

    @property
    def fusion(self) -> FusionReport:
        return self.report  # type: ignore[no-any-return]


class TrafficView(ReportView):
    """One accounting (eager or fused) for display."""

    render_html = staticmethod(traffic_html)
    render_text = staticmethod(traffic_text)

    @property
    def traffic(self) -> Traffic:
        return self.report  # type: ignore[no-any-return]


def show_fusion(fn: FusionReport | Callable[..., Any], *args: Any, timed: bool = False, **kwargs: Any) -> FusionView:
    """Show a FusionReport, or make one for fn(*args) first (untimed unless `timed=True`)."""
    if isinstance(fn, FusionReport):
        if args or kwargs:
            raise FusionError("show_fusion(report) takes the report alone; to measure again, pass the function "
                              "and its inputs")
        return FusionView(fn)
    return FusionView(fusion_report(fn, *args, timed=timed, **kwargs))


def show_traffic(traffic: Traffic) -> TrafficView:
    """Show one accounting from eager_traffic or fused_traffic."""
    if not isinstance(traffic, Traffic):
        raise FusionError(f"show_traffic takes what eager_traffic or fused_traffic returned, not "
                          f"{type(traffic).__name__}")
    return TrafficView(traffic)
