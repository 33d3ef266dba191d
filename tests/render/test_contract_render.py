"""The contract grid: failing rows marked and explained, well-formed, themed, deterministic text."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import torch

from torchlens_widgets.lenses.contract import contract_matrix
from torchlens_widgets.render.contract import contract_html, contract_text


def _bug(a, b):
    return torch.as_strided(a, a.shape, a.stride(), 0) * 2 + b


def test_grid_marks_the_failing_case_with_its_difference() -> None:
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    report = contract_matrix(_bug, lambda a, b: a * 2 + b, (x, y)).to_dict()
    html = contract_html(report)
    root = ET.fromstring(html.replace("<style>", "<style><![CDATA[").replace("</style>", "]]></style>"))
    failing = [tr.get("data-case") for tr in root.iter("tr") if tr.get("class") == "fail"]
    assert failing == ["storage offset 3"]
    assert "1 of" in "".join(root.itertext()) and "values differ" in html and "var(--tlw-tint4)" in html
    text = contract_text(report)
    assert "✗ layout    storage offset 3: 12 of 12 values differ" in text
    assert "seconds" not in text and contract_text(report | {"seconds": 9.0}) == text

