"""show_fusion / show_traffic: measure a function (or show a report) as HTML + text; refuse mixed arguments."""

from __future__ import annotations

import pytest
import torch

from torchlens_widgets import FusionError, eager_traffic, fusion_report, show_fusion, show_traffic


def chain(x):
    return (x * 2).exp() + 1


def test_show_fusion_measures_and_renders() -> None:
    view = show_fusion(chain, torch.randn(8, 8))
    bundle = view._repr_mimebundle_()
    assert view.fusion.eager.kernel_count == 3 and view.fusion.fused.kernel_count == 1
    assert view.fusion.speedup is None  # untimed by default: a saved output stays the same
    assert "tlw-fusion" in bundle["text/html"]
    assert bundle["text/plain"].startswith("chain: fused moves")


def test_show_a_report_or_one_accounting_and_bad_arguments() -> None:
    report = fusion_report(chain, torch.randn(8, 8), timed=False)
    assert show_fusion(report).fusion is report
    with pytest.raises(FusionError, match="takes the report alone"):
        show_fusion(report, torch.randn(2))
    t = eager_traffic(chain, torch.randn(8, 8))
    assert show_traffic(t)._repr_mimebundle_()["text/plain"].startswith("eager: 3 kernel(s)")
    with pytest.raises(FusionError, match="eager_traffic or fused_traffic"):
        show_traffic(report)  # type: ignore[arg-type]
