"""The dispatch trace widget: Python calls over their aten ops, with filters, folding and counts.

The `model` trait holds every row of the trace (`trace_model`); the browser filters and folds it
client-side with the same rules as `render.dispatch.filter_model` / `collapse_rows`, and writes the
user's choices back to the `filters` and `collapsed` traits. The static fallback is HTML.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import traitlets as t

from ..render.dispatch import DEFAULT_FILTERS, dispatch_html, dispatch_text, filter_model, trace_model
from ._base import HtmlFallbackWidget, bundle


class DispatchTraceWidget(HtmlFallbackWidget):
    """Live dispatch trace. `filters` = {text, hide_views, only_copies, empty_calls};
    `collapsed` = ids of folded calls ("c3"). Both are set by the page and may be set from Python.
    """

    _esm = bundle("dispatch")
    model = t.Dict().tag(sync=True)
    filters = t.Dict(default_value=dict(DEFAULT_FILTERS)).tag(sync=True)
    collapsed = t.List(t.Unicode()).tag(sync=True)

    @t.validate("filters")
    def _valid_filters(self, proposal: Any) -> dict[str, Any]:
        value = proposal["value"]
        unknown = set(value) - set(DEFAULT_FILTERS)
        if unknown:
            raise t.TraitError(f"unknown filter(s) {sorted(unknown)}; filters are {sorted(DEFAULT_FILTERS)}")
        merged = {**DEFAULT_FILTERS, **value}
        if not isinstance(merged["text"], str):
            raise t.TraitError(f"filters['text'] must be a string, got {type(merged['text']).__name__}")
        return {"text": merged["text"], **{k: bool(merged[k]) for k in ("hide_views", "only_copies", "empty_calls")}}

    def shown(self) -> dict[str, Any]:
        """The model after the current filters (what the page shows, folding aside)."""
        return filter_model(self.model, **self.filters)

    def set_filters(self, **filters: Any) -> dict[str, Any]:
        """Change some filters (text=, hide_views=, only_copies=, empty_calls=), as the toolbar would."""
        self.filters = {**self.filters, **filters}
        return self.filters

    def collapse(self, *calls: str) -> list[str]:
        """Fold calls by id ("c3"); with no ids, fold every call that has nested rows."""
        ids = {r["id"] for r in self.model.get("rows", []) if r["type"] == "call"}
        wanted = list(calls) or sorted({r["parent"] for r in self.model.get("rows", []) if r["parent"]}, key=_id_order)
        bad = [c for c in wanted if c not in ids]
        if bad:
            raise KeyError(f"no call {bad[0]!r}; call ids look like 'c0' (see the rows of .model)")
        self.collapsed = sorted(set(self.collapsed) | set(wanted), key=_id_order)
        return self.collapsed

    def expand(self, *calls: str) -> list[str]:
        """Unfold calls by id; with no ids, unfold everything."""
        self.collapsed = [c for c in self.collapsed if calls and c not in calls]
        return self.collapsed

    def static_html(self) -> str:
        return dispatch_html(self.shown(), self.collapsed)

    def static_text(self) -> str:
        return dispatch_text(self.shown())


def _id_order(call_id: str) -> int:
    return int(call_id[1:])


def dispatch_widget(
    trace: Any,
    *,
    max_ops: int = 2000,
    collapsed: Iterable[str] = (),
    **filters: Any,
) -> DispatchTraceWidget:
    """Show a finished trace (`tr` from `with dispatch_trace() as tr:`, or `tr.to_dict()`).

    filters: text= (op name contains), hide_views=, only_copies=, empty_calls= (show calls that ran
    no aten op, such as `Tensor.shape`). max_ops caps the rows sent to the page (saved notebooks stay small).
    """
    if not (isinstance(trace, Mapping) or callable(getattr(trace, "to_dict", None))):
        raise TypeError(
            "dispatch_widget needs a finished dispatch trace: `with torchlens_widgets.dispatch_trace() as tr: ...` "
            f"then dispatch_widget(tr); got {type(trace).__name__}"
        )
    unknown = set(filters) - set(DEFAULT_FILTERS)
    if unknown:
        raise TypeError(f"unknown filter(s) {sorted(unknown)}; filters are {sorted(DEFAULT_FILTERS)}")
    model = trace_model(trace, max_ops=max_ops)
    w = DispatchTraceWidget(model=model, filters={**DEFAULT_FILTERS, **filters})
    if collapsed:
        w.collapse(*collapsed)
    return w
