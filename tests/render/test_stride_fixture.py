"""The stride model JSON that the TypeScript tests (labextension/test/) render is the Python contract.

`fixture_tensors` builds the cases once; `write_fixture` regenerates the fixture files, and the test
below fails when `stride_model` drifts from them, so the browser tests cannot silently go stale.

Regenerate after an intended schema/geometry change:
    .venv/bin/python -c "from tests.render.test_stride_fixture import write_fixture; write_fixture()"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from torchlens_widgets.lenses.layout import layout, read_storage
from torchlens_widgets.render.stride import TensorView, stride_model, stride_svg

FIXTURES = Path(__file__).resolve().parents[2] / "labextension" / "test" / "fixtures"
MODEL_JSON = FIXTURES / "stride_model.json"
MODEL_SVG = FIXTURES / "stride_model.svg"


def fixture_tensors() -> tuple[list[torch.Tensor], list[str]]:
    """Shared storage (x and three views), a transposed view, a stride-0 expand, a separate copy."""
    x = torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])  # a base, not a view
    xt = x.t()  # transposed view: stride (1, 3)
    x3 = x.view(2, 1, 3)  # 3-d view: two [i, :, :] slices
    row = torch.tensor([10.0, 20.0, 30.0])  # second storage
    ex = row.expand(2, 3)  # stride (0, 1): two elements per storage cell
    copy = xt.contiguous()  # third storage: same values as xt, its own cells
    return [x, xt, x3, row, ex, copy], ["x", "xt", "x3", "row", "ex", "copy"]


def build_model(tensors: list[torch.Tensor], names: list[str]) -> dict[str, Any]:
    """What `stride_diagram(*tensors, names=names).model` computes, without needing the JS bundle."""
    layouts = [layout(t) for t in tensors]
    views = []
    for name, t, lay in zip(names, tensors, layouts, strict=True):
        base = None
        if lay.is_view and t._base is not None:
            base = next((n for n, other in zip(names, tensors, strict=True) if other is t._base), "an unnamed tensor")
        views.append(TensorView(name=name, layout=lay, base=base))
    return stride_model(views, lambda k, cells: read_storage(tensors[k], cells))


def fixture_model() -> dict[str, Any]:
    return build_model(*fixture_tensors())


def write_fixture() -> None:
    model = fixture_model()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    MODEL_JSON.write_text(json.dumps(model, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    MODEL_SVG.write_text(stride_svg(model) + "\n", encoding="utf-8")


def test_fixture_json_matches_stride_model() -> None:
    stored = json.loads(MODEL_JSON.read_text(encoding="utf-8"))
    assert stored == fixture_model(), "stride_model changed: regenerate with write_fixture() (see module docstring)"


def test_fixture_svg_matches_stride_svg() -> None:
    stored = MODEL_SVG.read_text(encoding="utf-8").rstrip("\n")
    assert stored == stride_svg(fixture_model())


def test_fixture_covers_the_cases_the_ts_tests_rely_on() -> None:
    model = fixture_model()
    by_name = {t["name"]: t for t in model["tensors"]}
    assert [s["id"] for s in model["storages"]] == ["S0", "S1", "S2"]
    assert {by_name[n]["storage"] for n in ("x", "xt", "x3")} == {"S0"}
    assert by_name["xt"]["stride"] == [1, 3] and by_name["xt"]["base"] == "x"
    assert by_name["ex"]["expanded_dims"] == [0] and by_name["ex"]["base"] == "row"
    assert by_name["copy"]["storage"] == "S2" and not by_name["copy"]["is_view"]
    assert by_name["x3"]["slices"], "a 3-d tensor draws slice labels"
    cells_read_twice = [e["s"] for e in by_name["ex"]["elements"]]
    assert sorted(cells_read_twice) == [0, 0, 1, 1, 2, 2]


def test_widget_model_equals_fixture() -> None:
    """The real widget factory builds the same model."""
    from torchlens_widgets.widgets.stride import stride_diagram

    tensors, names = fixture_tensors()
    assert stride_diagram(*tensors, names=names).model == json.loads(MODEL_JSON.read_text(encoding="utf-8"))
