"""The memory timeline widget: allocated vs reserved over time, one band per allocation, the allocator at one event.

The `model` trait is `render.memory.memory_model`'s picture (the browser draws it with the same geometry
as the static SVG). The snapshot stays on the Python object: selecting an event (a click in the page, or
`select_event`) recomputes the state panel here from ``snapshot.state_at(i)`` and sends only that one
event's state (`panel`), never all of them. With a simulator, the panel also shows its explanation of
the decision the selected trace event led to. `x_axis` ("event" | "time") recomputes `model`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, overload

import traitlets as t

from ..lenses.memory import MemorySnapshot, load_snapshot
from ..render.memory import (
    MAX_BANDS,
    WIDTH,
    event_explanations,
    memory_model,
    memory_state_model,
    memory_svg,
    memory_text,
)
from ._base import FallbackWidget, bundle

__all__ = ["MemoryTimelineWidget", "show_memory"]


class MemoryTimelineWidget(FallbackWidget):
    """Live memory timeline. Traits: `model` (the picture), `panel` (state of the selected event, {} if none),
    `selected_event` (event index or None), `hovered_band` (band id under the pointer, set by the page),
    `x_axis` ("event" | "time"), `width` (px; with `fit_width` the page sets it to the room it has).
    Build it with `show_memory`.
    """

    _esm = bundle("memory")
    model = t.Dict().tag(sync=True)
    panel = t.Dict().tag(sync=True)
    selected_event = t.Int(None, allow_none=True).tag(sync=True)
    hovered_band = t.Int(None, allow_none=True).tag(sync=True)
    x_axis = t.Unicode("event").tag(sync=True)
    width = t.Int(WIDTH).tag(sync=True)
    fit_width = t.Bool(True).tag(sync=True)

    def __init__(self, snapshot: MemorySnapshot, simulator: Any = None, *, max_bands: int = MAX_BANDS,
                 width: int | None = None, x_axis: str = "event", selected_event: int | None = None,
                 title: str | None = None, y_max: int | None = None) -> None:
        self._snapshot = snapshot
        self._title = title
        self._y_max = y_max
        self._sim = simulator
        self._spans: list[tuple[int, int] | None] | None = None
        self._max_bands = max_bands
        w = WIDTH if width is None else width
        model = memory_model(snapshot, x_axis=x_axis, max_bands=max_bands, width=w,  # type: ignore[arg-type]
                             title=title, y_max=y_max)
        super().__init__(model=model, x_axis=model["x_axis"], width=w, fit_width=width is None)
        if selected_event is not None:
            self.select_event(selected_event)

    # -- traits -------------------------------------------------------------------------------------

    @t.validate("selected_event")
    def _valid_event(self, proposal: Any) -> int | None:
        value = proposal["value"]
        n = len(self._snapshot.events)
        if value is not None:
            if not -n <= value < n:
                raise t.TraitError(f"event {value} is out of range; this trace has events 0..{n - 1}")
            value %= n
        return value

    @t.validate("x_axis")
    def _valid_axis(self, proposal: Any) -> str:
        value = proposal["value"]
        if value not in ("event", "time"):
            raise t.TraitError(f"x_axis must be 'event' or 'time', got {value!r}")
        return value

    @t.validate("width")
    def _valid_width(self, proposal: Any) -> int:
        value = proposal["value"]
        if not 320 <= value <= 4000:
            raise t.TraitError(f"width must be 320..4000 px, got {value!r}")
        return value

    @t.validate("hovered_band")
    def _valid_band(self, proposal: Any) -> int | None:
        value = proposal["value"]
        if value is not None and not 0 <= value < len(self.model.get("bands", [])):
            raise t.TraitError(f"band {value} is not drawn; bands are 0..{len(self.model.get('bands', [])) - 1}")
        return value

    @t.observe("selected_event")
    def _on_event(self, change: Any) -> None:
        self.panel = {} if change["new"] is None else self._panel(change["new"])

    @t.observe("x_axis", "width")
    def _relayout(self, change: Any) -> None:
        """A new axis, or the page's width (set by the page when `fit_width`): lay the picture out again."""
        model = memory_model(self._snapshot, x_axis=self.x_axis, max_bands=self._max_bands,  # type: ignore[arg-type]
                             width=self.width, title=self._title, y_max=self._y_max)
        self.hovered_band = None
        self.model = model
        if model["x_axis"] != self.x_axis:  # no usable times: the picture fell back to event index
            self.x_axis = model["x_axis"]
        if self.selected_event is not None:
            self.panel = self._panel(self.selected_event)

    def _panel(self, i: int) -> dict[str, Any]:
        return memory_state_model(self._snapshot, i, self.model, self.explain(i), width=self.width)

    # -- Python API ---------------------------------------------------------------------------------

    @property
    def snapshot(self) -> MemorySnapshot:
        """The memory lens snapshot the pictures are computed from."""
        return self._snapshot

    @property
    def simulator(self) -> Any:
        """The caching-allocator simulator that replayed this trace (None without one)."""
        return self._sim

    @overload
    def select_event(self, i: int) -> dict[str, Any]: ...
    @overload
    def select_event(self, i: None) -> None: ...
    def select_event(self, i: int | None) -> dict[str, Any] | None:
        """Select trace event `i` as a click would (None clears); returns the state panel's data."""
        try:
            self.selected_event = i
        except t.TraitError as exc:
            raise IndexError(str(exc)) from None
        return self.state() if i is not None else None

    def state(self) -> dict[str, Any]:
        """The state panel of the selected event: segments with blocks active / pending / free, and the explanation."""
        if self.selected_event is None:
            raise ValueError("no event is selected: click the timeline, or call w.select_event(i)")
        return dict(self.panel)

    def explain(self, i: int) -> list[str] | None:
        """The simulator's explanation of trace event `i` (None without a simulator; [] if it took no decision)."""
        if self._sim is None:
            return None
        if self._spans is None:
            trace = [{"action": e.action, "size": e.size} for e in self._snapshot.events]
            self._spans = event_explanations(trace, self._sim.log)
        span = self._spans[i]
        if span is None:
            return []
        log = self._sim.log
        return [log[k].explanation for k in range(*span)]

    def static_svg(self) -> str:
        return memory_svg(self.model, self.panel or None)

    def static_text(self) -> str:
        return memory_text(self.model, self.panel or None)


_DRIVES = ("alloc", "free_requested", "free_completed", "segment_free", "segment_unmap")


def _simulate(snapshot: MemorySnapshot, simulator: Any) -> Any:
    """A simulator replaying `snapshot`'s trace: given as one, as a settings dict, or True (default settings)."""
    if simulator is None or simulator is False:
        return None
    if hasattr(simulator, "log") and hasattr(simulator, "stats"):
        return simulator
    if simulator is True or isinstance(simulator, Mapping):
        if snapshot.kind != "cuda":
            raise ValueError("simulator= replays a CUDA caching-allocator trace; a CPU profile has none to replay")
        from ..lenses.allocator import replay

        trace = [{"action": e.action, "addr": e.addr, "size": e.size, "stream": e.stream}
                 for e in snapshot.events if e.addr is not None or e.action not in _DRIVES]
        return replay(trace, **(dict(simulator) if isinstance(simulator, Mapping) else {}))
    raise TypeError(f"simulator must be a CachingAllocatorSim that replayed this trace, a dict of its settings, "
                    f"or True, got {type(simulator).__name__}")


def show_memory(
    snapshot_or_profile: Any,
    simulator: Any = None,
    *,
    max_bands: int = MAX_BANDS,
    width: int | None = None,
    x_axis: str = "event",
    selected_event: int | None = None,
    title: str | None = None,
    y_max: int | None = None,
) -> MemoryTimelineWidget:
    """Show a memory trace live: a `MemorySnapshot` / `MemoryProfile`, a snapshot dict, or a snapshot file.

    `simulator` adds the caching-allocator simulator's explanation of each event: a `CachingAllocatorSim`
    that replayed this trace (``allocator.replay(...)``), a dict of its settings, or True (torch's defaults).
    `max_bands` largest allocations are drawn one by one, the rest aggregated. `width` fixes the picture's
    width in px; by default the static picture is 960 px wide and the live one fits the page (text keeps its size).
    `title` names the picture (e.g. the plan it shows), before its counts of events and allocations;
    `y_max` (bytes) lets the y axis reach at least that high, so pictures of several runs share one scale.
    """
    snap = snapshot_or_profile if isinstance(snapshot_or_profile, MemorySnapshot) else load_snapshot(snapshot_or_profile)
    if not snap.events:
        raise ValueError("this snapshot has no trace events to draw; record history first "
                         "(torchlens_widgets.lenses.memory.start_recording()) or use profile_memory(fn) on the CPU")
    return MemoryTimelineWidget(snap, _simulate(snap, simulator), max_bands=max_bands, width=width,
                                x_axis=x_axis, selected_event=selected_event, title=title, y_max=y_max)
