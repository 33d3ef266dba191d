"""Meters: saved bytes by storage, bytes alive after a forward, aten op counts; timing helpers."""

from __future__ import annotations

import torch

from torchlens_widgets.lenses.meters import OpCounter, SavedMeter, held_after_forward, storage_of
from torchlens_widgets.lenses.timing import best_ms, one_thread


def test_saved_meter_counts_each_storage_once() -> None:
    x = torch.randn(64, 32, requires_grad=True)
    with SavedMeter(inputs=[x]) as meter:
        y = x * x  # mul saves x twice (self and other): one storage
    assert len(meter.packs) == 2 and meter.storages == 1
    assert meter.bytes("input") == 64 * 32 * 4 and meter.bytes("activation") == 0
    with SavedMeter() as silu:
        torch.nn.functional.silu(x)  # silu saves its input
    assert silu.bytes() == storage_of(x)[1]
    del y


def test_held_after_forward_excludes_the_output_and_frees() -> None:
    w = torch.randn(32, 32, requires_grad=True)

    def f(t: torch.Tensor) -> torch.Tensor:
        h = t @ w  # kept: tanh saves its output, mm saves t and w (not created here)
        return torch.tanh(h).sum()

    out, held = held_after_forward(f, torch.randn(16, 32))
    assert held == 16 * 32 * 4  # tanh's output; h itself is not saved by tanh
    _, none_held = held_after_forward(lambda t: (t @ w).detach().sum(), torch.randn(16, 32))
    assert none_held == 0
    del out


def test_op_counter_counts_aten_ops_by_packet() -> None:
    with OpCounter() as c:
        torch.randn(3, 4).t().reshape(-1).relu()
    assert c.ops["clone"] == 1 and c.ops["relu"] == 1 and c.ops["t"] == 1


def test_one_thread_restores_and_best_ms_is_positive() -> None:
    before = torch.get_num_threads()
    with one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    assert best_ms(lambda: torch.ones(10).sum(), repeat=3) > 0
