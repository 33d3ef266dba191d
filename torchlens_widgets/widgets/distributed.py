"""Rank lanes in a notebook, live: one lane per rank with its backward nodes and the DDP buckets (or FSDP
collectives) over them. Hovering a bucket shows its parameters and bytes; clicking it selects that bucket on
every rank (the `bucket` trait, -1 for none); `iteration` picks the iteration drawn (the model is recomputed
here, so the page only ever draws `render.distributed.ranks_model`). The mime bundle also carries the static
SVG of the same model and a deterministic text/plain."""

from __future__ import annotations

from typing import Any

import traitlets as t

from ..render.distributed import default_iteration, ranks_model, ranks_svg, ranks_text
from ._base import FallbackWidget, bundle

__all__ = ["RanksWidget", "show_ranks"]


class RanksWidget(FallbackWidget):
    """Live rank lanes. `bucket`: the selected bucket index (-1: none), set by clicks or `select`;
    `iteration`: the iteration drawn. `.trace` is the lens data."""

    _esm = bundle("ranks")
    model = t.Dict().tag(sync=True)
    bucket = t.Int(-1).tag(sync=True)
    iteration = t.Int(0).tag(sync=True)

    def __init__(self, trace: Any, iteration: int | None = None, bucket: int = -1, **kwargs: Any) -> None:
        self._trace = trace
        self._data = trace.to_dict() if hasattr(trace, "to_dict") else dict(trace)
        it = default_iteration(self._data) if iteration is None else iteration
        super().__init__(model=ranks_model(self._data, iteration=it), iteration=it, bucket=bucket, **kwargs)

    @t.validate("iteration")
    def _valid_iteration(self, proposal: Any) -> int:
        its = [s["index"] for s in self._data["ranks"][0]["iterations"]]
        value = int(proposal["value"])
        if its and value not in its:
            raise t.TraitError(f"iteration {value} was not recorded; the iterations are {its}")
        return value

    @t.observe("iteration")
    def _redraw(self, change: Any) -> None:
        self.model = ranks_model(self._data, iteration=change["new"])
        if self.bucket >= len(self.model["buckets"]):
            self.bucket = -1

    @t.validate("bucket")
    def _valid_bucket(self, proposal: Any) -> int:
        value = int(proposal["value"])
        n = len(self.model["buckets"]) if self.model else 0
        if value != -1 and not 0 <= value < n:
            raise t.TraitError(f"bucket {value}: iteration {self.iteration} has buckets 0..{n - 1}" if n
                               else f"bucket {value}: iteration {self.iteration} all-reduced no buckets")
        return value

    @property
    def trace(self) -> Any:
        """The lens data this widget draws."""
        return self._trace

    def select(self, bucket: int) -> RanksWidget:
        """Highlight a bucket on every rank, as a click on it would; returns the widget itself."""
        self.bucket = bucket
        return self

    def static_svg(self) -> str:
        return ranks_svg(self.model, selected=self.bucket if self.bucket >= 0 else None)

    def static_text(self) -> str:
        text = ranks_text(self._data, iteration=self.iteration)
        if self.bucket >= 0:
            b = self.model["buckets"][self.bucket]
            text += f"\nselected: bucket {b['index']} ({', '.join(b['params'])})"
        return text


def show_ranks(trace: Any, *, iteration: int | None = None, bucket: int = -1) -> RanksWidget:
    """Show a distributed trace (`run_ranks`, `ddp_trace()`, `fsdp_trace()`) as one lane per rank.
    `iteration`: which one to draw (default: the last that communicated); `bucket`: one to highlight."""
    if not hasattr(trace, "to_dict") and not isinstance(trace, dict):
        raise TypeError(f"show_ranks takes what run_ranks, ddp_trace() or fsdp_trace() return (or its to_dict()), "
                        f"not a {type(trace).__name__}; call one of them first")
    try:
        return RanksWidget(trace, iteration, bucket)
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        if isinstance(exc, t.TraitError):
            raise
        raise ValueError(f"show_ranks: this trace is incomplete or not a distributed trace ({type(exc).__name__}: "
                         f"{str(exc)[:120]}); pass a DistTrace from run_ranks, or its to_dict() unchanged") from None
