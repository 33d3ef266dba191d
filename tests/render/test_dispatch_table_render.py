"""The dispatch table's HTML and text: the row that runs highlighted, the walk in priority order, a user's
own kernel named as such, well-formed and themed."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import torch

from torchlens_widgets.lenses.dispatch_table import choose, dispatch_table
from torchlens_widgets.render.dispatch_table import choice_dict, dispatch_table_html, dispatch_table_text


def _root(html: str) -> ET.Element:
    return ET.fromstring(html.replace("<style>", "<style><![CDATA[").replace("</style>", "]]></style>"))


def test_the_row_that_runs_is_highlighted_and_the_walk_comes_first() -> None:
    x = torch.ones(2)
    with torch.inference_mode():
        choice = choice_dict(choose(torch.ops.aten.add.Tensor, x, x))
    table = dispatch_table(torch.ops.aten.add.Tensor).to_dict()
    html = dispatch_table_html(table, choice)
    root = _root(html)
    runs = [tr for tr in root.iter("tr") if tr.get("class") == "runs"]
    assert [tr.get("data-key") for tr in runs] == ["CPU"]
    walk = [tr.get("data-key") for tr in root.find("table").iter("tr") if tr.get("data-key")]
    assert walk == ["ADInplaceOrView", "BackendSelect", "CPU"]
    assert "tlw-theme" in html and "var(--tlw-tint3)" in html
    text = dispatch_table_text(table, choice)
    assert "runs: CPU" in text and "this thread excludes: AutocastCPU, AutogradCPU" in text
    assert dispatch_table_text(table, choice) == text  # deterministic


def test_a_user_op_s_kernel_is_called_theirs() -> None:
    lib = torch.library.Library("tlw_render_dt", "DEF")
    try:
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "CPU")
        table = dispatch_table(torch.ops.tlw_render_dt.twice.default).to_dict()
        html = dispatch_table_html(table)
        assert "your kernel" in html and "your kernel: CPU" in dispatch_table_text(table)
        _root(html)
    finally:
        lib._destroy()
