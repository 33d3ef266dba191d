"""Stride-diagram geometry: what the model says is what the layout says; fallbacks are deterministic."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET

import pytest
import torch

from torchlens_widgets.lenses.layout import layout, read_storage
from torchlens_widgets.render.stride import TensorView, stride_model, stride_svg, stride_text


def model_of(*tensors: torch.Tensor, **kw: int) -> dict:
    views = [TensorView(f"t{k}", layout(t)) for k, t in enumerate(tensors)]
    return stride_model(views, lambda k, cells: read_storage(tensors[k], cells), **kw)


def test_views_share_a_strip_and_copies_get_their_own() -> None:
    x = torch.arange(12.0).reshape(3, 4)
    m = model_of(x, x.t(), x.t().contiguous())
    assert [s["id"] for s in m["storages"]] == ["S0", "S1"]
    assert [t["storage"] for t in m["tensors"]] == ["S0", "S0", "S1"]
    assert "shared by 2 tensors" in m["storages"][0]["label"]


def test_every_element_points_at_the_cell_torch_reads() -> None:
    x = torch.arange(24.0).reshape(2, 3, 4)
    v = x.permute(1, 2, 0)[:, 1:, :]
    m = model_of(x, v)
    cells = {c["i"]: c for c in m["storages"][0]["cells"]}
    for tm, t in zip(m["tensors"], (x, v)):
        assert tm["shown"] == t.numel()
        for el in tm["elements"]:
            assert el["s"] == int(t[tuple(el["idx"])].item())  # values equal storage positions here
            assert cells[el["s"]]["value"] == el["value"]
            assert tm["index"] in cells[el["s"]]["readers"]


def test_expanded_dims_map_many_elements_to_one_cell() -> None:
    row = torch.arange(3.0)
    e = row.expand(4, 3)
    m = model_of(row, e)
    te = m["tensors"][1]
    assert te["expanded_dims"] == [0]
    assert sorted({el["s"] for el in te["elements"]}) == [0, 1, 2] and te["shown"] == 12
    assert "stride-0 dims [0]" in te["title"]


def test_large_tensors_are_summarised_and_say_so() -> None:
    big = torch.zeros(100, 100)
    m = model_of(big.t())
    t = m["tensors"][0]
    assert t["truncated"] and t["shown"] <= 384
    assert any("showing" in n and "10,000" in n for n in m["notes"])
    assert any("cells" in n for n in m["notes"])  # the 10,000-cell storage is cut too
    assert len(m["storages"][0]["cells"]) <= 512


def test_meta_zero_dim_and_empty_degrade_truthfully() -> None:
    m = model_of(torch.empty(2, 3, device="meta"))
    assert all(el["value"] is None for el in m["tensors"][0]["elements"])
    assert any("layout without values" in n for n in m["notes"])
    s = model_of(torch.tensor(7.0))
    assert s["tensors"][0]["shown"] == 1 and s["tensors"][0]["elements"][0]["value"] == "7."
    e = model_of(torch.empty(0, 4))
    assert e["tensors"][0]["shown"] == 0 and any("empty tensor" in n for n in e["notes"])


def test_svg_is_wellformed_and_uses_model_coordinates() -> None:
    x = torch.arange(6.0).reshape(2, 3)
    m = model_of(x, x.t())
    svg = stride_svg(m)
    root = ET.fromstring(svg)
    rects = [(float(r.get("x", 0)), float(r.get("y", 0))) for r in root.iter("{http://www.w3.org/2000/svg}rect")]
    for t in m["tensors"]:
        for el in t["elements"]:
            assert (el["x"], el["y"]) in rects
    for c in m["storages"][0]["cells"]:
        assert (c["x"], c["y"]) in rects


def test_fallbacks_are_deterministic_and_address_free() -> None:
    x = torch.arange(6.0).reshape(2, 3)
    y = x.clone()
    a, b = model_of(x, x[:, 1:]), model_of(y, y[:, 1:])
    assert stride_svg(a) == stride_svg(b)
    text = stride_text(a)
    assert text == stride_text(b)
    assert not re.search(r"0x[0-9a-f]{6,}|\d{9,}", text + stride_svg(a))
    assert text.splitlines()[0] == "StrideDiagram: 2 tensors over 1 storage"


@pytest.mark.parametrize(
    "values",
    [
        torch.tensor([[1e30, -123456.789], [float("nan"), float("inf")]]),
        torch.randn(3, 4, generator=torch.Generator().manual_seed(0)) * 1000,
        torch.tensor([1 + 2j, -1e3 + 4.5e2j], dtype=torch.complex64),
        torch.tensor([True, False]),
        torch.tensor([2**63 - 1, -(2**63)], dtype=torch.int64),
        torch.arange(2000.0)[1990:],  # indices with four digits
    ],
    ids=["huge-nan-inf", "randn-x1000", "complex", "bool", "int64-extremes", "long-indices"],
)
def test_no_text_overflows_its_cell(values: torch.Tensor) -> None:
    """Every value and index a cell writes fits inside it (10 px monospace ≈ 6.1 px a character)."""
    from torchlens_widgets.render.stride import CHAR_W

    svg = stride_svg(model_of(values, values.reshape(-1)[:2]))
    boxes = [(float(x), float(y), float(wd)) for x, y, wd in
             re.findall(r'<rect class="(?:cb|cb rd|eb)" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)"', svg)]
    texts = re.findall(r'<text(?: class="idx")? x="([\d.]+)" y="([\d.]+)">([^<]*)</text>', svg)
    assert boxes and texts
    checked = 0
    for tx, ty, body in texts:
        tx, ty = float(tx), float(ty)
        inside = [b for b in boxes if b[0] <= tx <= b[0] + b[2] and b[1] <= ty <= b[1] + 30]
        if not inside:
            continue  # a title or a slice label, not in a cell
        x0, _, width = inside[0]
        text = html.unescape(body)
        assert tx + CHAR_W * len(text) <= x0 + width + 0.5, f"{text!r} overflows a {width}px cell"
        checked += 1
    assert checked >= 2 * values.numel()


def test_values_are_compact_and_whole() -> None:
    m = model_of(torch.tensor([1e30, -123456.789, 1540.25, float("nan")]), torch.tensor([2**63 - 1]))
    shown = [c["value"] for st in m["storages"] for c in st["cells"]]
    assert shown == ["1e+30", "-1.23e+05", "1540", "nan", "9.22e+18"]
