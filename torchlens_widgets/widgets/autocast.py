"""Showing what autocast did: each call's dtypes, its autocast list and the casts inserted, as themed HTML
(plain outputs, no widget model: a saved notebook shows it as it was); and a value probe for low precision."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import torch

from ..lenses.autocast import AutocastError, AutocastTrace, ValueProbe, autocast_trace, probe_values
from ..render.autocast import MAX_PROBE_ROWS, autocast_html, autocast_text, probe_html, probe_text
from ..render.portable import portable_html
from ._base import ReportView

__all__ = ["AutocastView", "ProbeView", "show_autocast", "show_probe"]


class AutocastView(ReportView):
    """An autocast trace for display: HTML in a notebook, text elsewhere."""

    render_html = staticmethod(autocast_html)
    render_text = staticmethod(autocast_text)

    @property
    def trace(self) -> AutocastTrace:
        return self.report  # type: ignore[no-any-return]


def show_autocast(fn: AutocastTrace | Callable[..., Any], *args: Any, **kwargs: Any) -> AutocastView:
    """Show an AutocastTrace, or trace fn(*args) first (device_type=, dtype= as for autocast_trace)."""
    if isinstance(fn, AutocastTrace):
        if args or kwargs:
            raise AutocastError("show_autocast(trace) takes the trace alone; to trace again, pass the function "
                                "and its inputs")
        return AutocastView(fn)
    return AutocastView(autocast_trace(fn, *args, **kwargs))


class ProbeView:
    """Values stored in a low-precision dtype, for display."""

    def __init__(self, probes: tuple[ValueProbe, ...], dtype: str) -> None:
        self.probes = probes
        self.dtype = dtype

    def _data(self) -> list[dict[str, Any]]:
        """The rows the picture shows as dicts; the others only by outcome (the render counts them)."""
        return [asdict(p) if i < MAX_PROBE_ROWS else {"outcome": p.outcome} for i, p in enumerate(self.probes)]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        data = self._data()
        return {"text/html": portable_html(probe_html(data, self.dtype)), "text/plain": probe_text(data, self.dtype)}

    def __repr__(self) -> str:
        return probe_text(self._data(), self.dtype)


def show_probe(values: Sequence[float], dtype: torch.dtype) -> ProbeView:
    """Store each value in `dtype` and show what comes back (rounded, subnormal, underflow, overflow)."""
    return ProbeView(probe_values(values, dtype), str(dtype).removeprefix("torch."))
