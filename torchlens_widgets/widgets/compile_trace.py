"""Showing what torch.compile did to a function: the compile trace as themed HTML (source with graphs shaded
and breaks marked, guards, recompiles, kernels). Plain HTML outputs (no widget model), so a saved notebook
shows and opens it as it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..lenses.compile_trace import CompileTrace, CompileTraceError, compile_trace
from ..render.compile_trace import compile_html, compile_text
from ._base import ReportView

__all__ = ["CompileView", "show_compile"]


class CompileView(ReportView):
    """A compile trace for display: HTML in a notebook, deterministic text elsewhere."""

    render_html = staticmethod(compile_html)
    render_text = staticmethod(compile_text)

    @property
    def trace(self) -> CompileTrace:
        return self.report  # type: ignore[no-any-return]


def show_compile(fn: CompileTrace | Callable[..., Any], *args: Any, **kwargs: Any) -> CompileView:
    """Show a CompileTrace, or trace `fn(*args)` first (any compile_trace argument: calls=, backward=,
    backend=, dynamic=, fullgraph=, mode=, options=). The view's `.trace` is the data."""
    if isinstance(fn, CompileTrace):
        if args or kwargs:
            raise CompileTraceError("show_compile(trace) takes the trace alone; to trace again, pass the function "
                                    "and its inputs")
        return CompileView(fn)
    return CompileView(compile_trace(fn, *args, **kwargs))
