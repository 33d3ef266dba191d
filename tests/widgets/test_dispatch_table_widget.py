"""show_dispatch_table: every state's table computed in Python, the selected one as the static fallback."""

from __future__ import annotations

import pytest
import torch
import traitlets

from torchlens_widgets import show_dispatch_table
from torchlens_widgets.lenses.dispatch_table import DispatchTableError


def test_states_move_the_row_that_runs_and_the_fallback_follows() -> None:
    w = show_dispatch_table(torch.ops.aten.mm.default, torch.ones(2, 2), torch.ones(2, 2))
    chosen = {s["name"]: s["chosen"] for s in w.model["scenarios"]}
    assert chosen == {"as given": "AutogradCPU", "torch.no_grad()": "AutogradCPU", "torch.inference_mode()": "CPU",
                      "torch.autocast('cpu')": "AutocastCPU", "a TorchDispatchMode": "PythonTLSSnapshot",
                      "meta tensors": "AutogradMeta"}
    data, _ = w._repr_mimebundle_()
    assert 'class="runs" data-key="AutogradCPU"' in data["text/html"] and data["text/plain"].startswith("as given:")
    w.selected = "torch.inference_mode()"
    assert w.chosen == "CPU" and 'class="runs" data-key="CPU"' in w.static_html()
    assert "runs: CPU" in w.static_text()
    with pytest.raises(traitlets.TraitError, match="the states are"):
        w.selected = "nowhere"
    assert len(data["text/html"]) < 60_000


def test_bad_state_is_refused() -> None:
    with pytest.raises(DispatchTableError, match="pick one of"):
        show_dispatch_table(torch.ops.aten.add.Tensor, torch.ones(1), torch.ones(1), selected="gpu")
