"""The capstone's model (notebook 20): one gated MLP block whose activation is a hand-written chain of
elementwise ops, the hot spot the notebook profiles, replaces by a fused operator, compiles and trains on
two ranks. It lives here, not in the notebook, so that rank processes and the checks build the same model.

- `gelu_gate(u, v)`: GELU(u) * v written out by hand (erf form): six aten ops forward, a dozen backward;
- `GatedBlock(d, h, act=None)`: x + down(act(gate(x), up(x))), each part inside a `record_function` range
  ("gate_up", "activation", "down") so a profile shows them; `act` swaps the activation;
- `batch(seed, n, d)`: a deterministic (input, target) pair.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.profiler import record_function

__all__ = ["RANGES", "GatedBlock", "batch", "gelu_gate", "step"]

RANGES = ("gate_up", "activation", "down")
_INV_SQRT2 = 0.7071067811865476


def gelu_gate(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """GELU(u) * v, the exact (erf) GELU written as the chain a model file often has: one kernel per op."""
    return 0.5 * u * (1 + torch.erf(u * _INV_SQRT2)) * v


class GatedBlock(torch.nn.Module):
    """A GEGLU feed-forward block with a residual: x + down(act(gate(x), up(x))), initialised from `seed`."""

    def __init__(self, d: int = 16, h: int = 1024, act: Callable[..., torch.Tensor] | None = None,
                 seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.gate = torch.nn.Linear(d, h)
        self.up = torch.nn.Linear(d, h)
        self.down = torch.nn.Linear(h, d)
        self.act = gelu_gate if act is None else act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with record_function("gate_up"):
            u, v = self.gate(x), self.up(x)
        with record_function("activation"):
            g = self.act(u, v)
        with record_function("down"):
            return x + self.down(g)


def batch(seed: int = 0, n: int = 512, d: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """A deterministic (input, target) pair of shape (n, d) each."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=gen), torch.randn(n, d, generator=gen)


def step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The original training step: clear the gradients, mean-squared-error loss, backward; returns the loss."""
    model.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss
