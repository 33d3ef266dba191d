"""build_op in a notebook kernel: a status line while it builds, replaced by the report; the op loaded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("c++") is None or shutil.which("ninja") is None,
                                reason="needs a C++ compiler and ninja")

SOURCE = """
at::Tensor plus_one(const at::Tensor& x) { return x.add(1); }
TORCH_LIBRARY(tlw_widget_test, m) { m.def("plus_one(Tensor x) -> Tensor", &plus_one); }
"""


def test_build_op_shows_progress_then_the_report_and_loads_the_op(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython.display
    import torch
    from IPython.testing.globalipapp import get_ipython

    from torchlens_widgets.widgets import build as widget

    get_ipython()
    shown: list[dict] = []

    class Handle:
        def update(self, data: dict, raw: bool = False) -> None:
            shown.append(data)

    def display(data: dict, raw: bool = False, display_id: bool = False) -> Handle:
        shown.append(data)
        return Handle()

    monkeypatch.setattr(IPython.display, "display", display)
    report = widget.build_op("tlw_plus_one", SOURCE, directory=tmp_path)
    assert report.ok
    assert "building" in shown[0]["text/html"] and any("compiling main.cpp" in d["text/html"] for d in shown[1:-1])
    assert "tlw_plus_one built" in shown[-1]["text/html"] and shown[-1]["text/plain"].startswith("tlw_plus_one: built")
    assert torch.equal(torch.ops.tlw_widget_test.plus_one(torch.zeros(2)), torch.ones(2))
    again = widget.build_op("tlw_plus_one", SOURCE, directory=tmp_path, show=False)
    assert again.cache == "hit" and again.seconds < 1.0
