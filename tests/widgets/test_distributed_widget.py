"""show_ranks: the live rank-lanes widget draws ranks_model, `bucket` selects a bucket on every rank, `iteration`
recomputes the model, and the mime bundle carries the static SVG and a deterministic text/plain."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import traitlets

from torchlens_widgets.render.distributed import ranks_model
from torchlens_widgets.widgets.distributed import RanksWidget, show_ranks

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "distributed"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class Trace:
    """Stands in for DistTrace (anything with to_dict)."""

    def __init__(self, name: str) -> None:
        self.d = json.loads((FIXTURES / f"{name}_trace.json").read_text())

    def to_dict(self) -> dict:
        return self.d


def test_widget_draws_the_model_and_carries_the_static_fallback() -> None:
    trace = Trace("ddp")
    w = show_ranks(trace)
    assert isinstance(w, RanksWidget) and w.trace is trace
    assert w.iteration == 2 and w.bucket == -1 and w.model == ranks_model(trace.d, iteration=2)
    data, _ = w._repr_mimebundle_()
    assert set(data) == {WIDGET_VIEW, "image/svg+xml", "text/plain"}
    ET.fromstring(data["image/svg+xml"])
    assert data["text/plain"] == repr(w) and "bucket 0: 6.bias, 6.weight, 4.bias, 4.weight" in data["text/plain"]
    json.dumps(w.model)  # the trait travels as JSON


def test_bucket_selection_is_a_synced_trait_seen_in_the_fallback() -> None:
    w = show_ranks(Trace("ddp"), bucket=1)
    assert w.trait_metadata("bucket", "sync") and w.trait_metadata("iteration", "sync")
    assert w.static_svg().count(" tlw-sel\"") == 2  # the same bucket on both ranks
    assert w.select(2) is w and w.bucket == 2 and "selected: bucket 2 (0.bias, 0.weight)" in w.static_text()
    with pytest.raises(traitlets.TraitError, match="buckets 0..2"):
        w.bucket = 3
    w.bucket = -1
    assert " tlw-sel\"" not in w.static_svg()


def test_changing_the_iteration_recomputes_the_model() -> None:
    w = show_ranks(Trace("ddp"), bucket=2)
    w.iteration = 0
    assert w.model["iteration"] == 0 and len(w.model["buckets"]) == 1 and w.bucket == -1
    w.iteration = 1
    assert w.model["comms"] == [] and "no_sync" in w.static_text()
    with pytest.raises(traitlets.TraitError, match="iteration 7 was not recorded"):
        w.iteration = 7


def test_fsdp_trace_shows_collectives_and_memory() -> None:
    w = show_ranks(Trace("fsdp"))
    assert {c["kind"] for c in w.model["comms"]} == {"all_gather", "reduce_scatter"} and len(w.model["memory"]) == 2
    assert "shards (global shape -> local shape per rank):" in w.static_text()
    with pytest.raises(traitlets.TraitError, match="all-reduced no buckets"):
        w.bucket = 0
