"""A profiler trace in a notebook, live: the timeline (one lane per thread, nested ops, record_function
ranges) with the key-averages table beside it. Click a table row (or a span) and every span of that name
lights up; `selected` is that name, and setting it from Python does the same. Hovering a span shows its
input shapes and Python stack.

Large traces are downsampled (`lenses.profile.downsample`) so the model sent to the page stays small, and
the picture says what it left out; the table always counts every span. The mime bundle also carries the
static HTML (a smaller sample still) and a deterministic text/plain."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import traitlets as t

from ..lenses.profile import ProfileError, ProfileTrace, downsample, load_profile, profile_trace_of, record_profile
from ..render.profile import profile_html, profile_model, profile_text
from ._base import HtmlFallbackWidget, bundle

__all__ = ["MAX_EVENTS", "STATIC_EVENTS", "ProfileWidget", "show_profile"]

#: Spans sent to the live view (a 100,000-span trace stays under 3 MB of model).
MAX_EVENTS = 20_000
#: Spans in the static fallback saved with the notebook.
STATIC_EVENTS = 600


class ProfileWidget(HtmlFallbackWidget):
    """Live profile timeline + key-averages table. `selected`: the op name lit up (None: none), set by a
    click on a row or span, or from Python with `select`. `.trace` is the (full) ProfileTrace."""

    _esm = bundle("ptrace")
    model = t.Dict().tag(sync=True)
    selected = t.Unicode(None, allow_none=True).tag(sync=True)

    def __init__(self, trace: ProfileTrace, selected: str | None = None, *, max_events: int = MAX_EVENTS,
                 **kwargs: Any) -> None:
        if not isinstance(trace, ProfileTrace):
            raise ProfileError(f"ProfileWidget draws a ProfileTrace, got {type(trace).__name__}; use show_profile()")
        self._trace = trace
        self._names = {a.name for a in trace.averages}
        sent = downsample(trace, max_events)
        self._static = profile_model(downsample(sent, min(STATIC_EVENTS, max_events)))  # the same spans first
        super().__init__(model=profile_model(sent, max_spans=max_events),
                         selected=self._check_name(selected), **kwargs)

    def _check_name(self, name: Any) -> str | None:
        if name is None or name == "":
            return None
        if not isinstance(name, str) or name not in self._names:
            top = ", ".join(repr(a.name) for a in self._trace.averages[:5])
            raise ProfileError(f"no op called {name!r} in this trace; names with the most self time: {top}")
        return name

    @t.validate("selected")
    def _valid_selected(self, proposal: Any) -> str | None:
        try:
            return self._check_name(proposal["value"])
        except ProfileError as exc:
            raise t.TraitError(str(exc)) from None

    @property
    def trace(self) -> ProfileTrace:
        """The lens data this widget draws (all spans, before downsampling)."""
        return self._trace

    def select(self, name: str | None) -> ProfileWidget:
        """Light up the spans called `name` (None: clear), as a click on its row would; returns the widget."""
        self.selected = self._check_name(name)
        return self

    def static_html(self) -> str:
        return profile_html(self._static, self.selected)

    def static_text(self) -> str:
        return profile_text(self._static, self.selected)


def show_profile(trace_or_fn: ProfileTrace | Callable[..., object] | str | os.PathLike[str] | Mapping[str, Any] | Any,
                 *args: Any, selected: str | None = None, max_events: int = MAX_EVENTS, **kwargs: Any) -> ProfileWidget:
    """Show a profile: a ProfileTrace; a saved Chrome trace (path, JSON text or dict); a finished
    ``torch.profiler.profile``; or a function, run as ``record_profile(fn, *args, **kwargs)`` (with_stack and
    record_shapes on by default). `selected`: an op name to light up; `max_events`: spans sent to the page."""
    src = trace_or_fn
    if isinstance(src, ProfileTrace):
        trace = src
    elif isinstance(src, (str, os.PathLike, Mapping, list)):
        trace = load_profile(src)
    elif hasattr(src, "export_chrome_trace"):
        trace = profile_trace_of(src)
    elif callable(src):
        return ProfileWidget(record_profile(src, *args, **kwargs), selected, max_events=max_events)
    else:
        raise ProfileError(f"show_profile takes a ProfileTrace, a trace file, a profiler or a function; got "
                           f"{type(src).__name__}")
    if args or kwargs:
        raise ProfileError("show_profile(trace) takes the trace alone (and selected=, max_events=); pass a function "
                           "to run it with arguments")
    return ProfileWidget(trace, selected, max_events=max_events)
