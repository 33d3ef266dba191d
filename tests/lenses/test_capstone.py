"""The capstone's model (notebook 20): the chain is exact GELU gating, the block is deterministic, and a profile
shows its three ranges."""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from torchlens_widgets.lenses import capstone
from torchlens_widgets.lenses.profile import record_profile


def test_gelu_gate_is_erf_gelu_times_the_gate_with_matching_gradients() -> None:
    g = torch.Generator().manual_seed(0)
    u = torch.randn(7, 5, dtype=torch.float64, generator=g, requires_grad=True)
    v = torch.randn(7, 5, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.allclose(capstone.gelu_gate(u, v), F.gelu(u) * v, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(capstone.gelu_gate, (u, v))


def test_block_is_deterministic_and_swaps_its_activation() -> None:
    a, b = capstone.GatedBlock(4, 8, seed=3), capstone.GatedBlock(4, 8, seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert [n for n, _ in a.named_parameters()] == ["gate.weight", "gate.bias", "up.weight", "up.bias",
                                                    "down.weight", "down.bias"]
    x, y = capstone.batch(1, 5, 4)
    assert x.shape == y.shape == (5, 4) and torch.equal(x, capstone.batch(1, 5, 4)[0])
    fused = capstone.GatedBlock(4, 8, act=lambda u, v: F.gelu(u) * v, seed=3)
    assert torch.allclose(fused(x), a(x), atol=1e-6)
    loss = capstone.step(a, x, y)
    assert loss.ndim == 0 and all(p.grad is not None for p in a.parameters())


def test_profile_shows_the_three_ranges_and_the_chain() -> None:
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    model = capstone.GatedBlock(4, 16)
    x, y = capstone.batch(0, 8, 4)
    trace = record_profile(capstone.step, model, x, y, with_stack=False)
    assert all(len(trace.by_name(r)) == 1 for r in capstone.RANGES)
    children = [e.name for e in trace.children(trace.by_name("activation")[0])]
    assert children == ["aten::mul", "aten::mul", "aten::erf", "aten::add", "aten::mul", "aten::mul"]
    nodes = [e for e in trace.events if e.name.startswith("autograd::engine::evaluate_function")]
    assert len(nodes) == 20   # 6 AccumulateGrad, 3 AddmmBackward0, 3 TBackward0, 4 Mul, 1 Erf, 2 Add, 1 MseLoss
