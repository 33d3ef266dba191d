"""show_contract: the contract grid as a notebook output."""

from __future__ import annotations

import torch


def _bug(a, b):
    return torch.as_strided(a, a.shape, a.stride(), 0) * 2 + b


def test_show_contract_gives_the_grid_and_the_text() -> None:
    from torchlens_widgets import show_contract

    x, y = torch.randn(2, 3), torch.randn(2, 3)
    view = show_contract(_bug, lambda a, b: a * 2 + b, (x, y))
    bundle = view._repr_mimebundle_()
    assert 'data-case="storage offset 3"' in bundle["text/html"] and "✗ layout" in bundle["text/plain"]
    assert not view.report.passed
