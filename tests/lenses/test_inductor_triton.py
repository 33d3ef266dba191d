"""Inductor's Triton for CPU tensors in Triton's interpreter: the stand-in driver is lent and taken back, a pointwise
kernel Inductor wrote loads again with the launcher's heuristic configs and runs through program_grid, and a kernel
the interpreter cannot run is handed back with its source and the line it failed on."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before Inductor's triton_helpers are decorated (at their import)

import pytest
import torch

triton = pytest.importorskip("triton")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.runtime.driver import driver  # noqa: E402

from torchlens_widgets.lenses.inductor_triton import (  # noqa: E402
    generated_before_crash,
    inductor_triton,
    inductor_triton_here,
    load_kernel,
)
from torchlens_widgets.lenses.triton_grid import program_grid  # noqa: E402


def _helpers_interpreted() -> bool:
    from torch._inductor.runtime import triton_helpers

    return type(triton_helpers.max2).__name__ == "InterpretedFunction"


needs_interpreted_helpers = pytest.mark.skipif(
    not _helpers_interpreted(), reason="Inductor's triton_helpers were decorated before TRITON_INTERPRET=1 was set")


def test_the_stand_in_driver_names_a_target_and_is_taken_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    before = driver._active
    with inductor_triton_here():
        assert driver.active.get_current_target() == GPUTarget("cuda", 90, 32)
        assert os.environ["TRITON_INTERPRET"] == "1"
    assert driver._active is before and "TRITON_INTERPRET" not in os.environ


@needs_interpreted_helpers
def test_a_pointwise_kernel_is_written_loaded_and_run_through_the_lens() -> None:
    x = torch.randn(100)
    made = inductor_triton(lambda t: t * torch.sigmoid(1.702 * t), x)
    (kernel,) = made.kernels
    assert "xmask = xindex < xnumel" in kernel.source and torch.allclose(made.result, x * torch.sigmoid(1.702 * x))
    launcher, fn = load_kernel(kernel.source, kernel.name)
    assert type(fn).__name__ == "InterpretedFunction"
    assert [(c.kwargs, c.num_warps) for c in launcher.configs] == [({"XBLOCK": 128}, 4)]
    out = torch.empty(100)
    grid = program_grid(fn, (4,), x, out, 100, XBLOCK=32)
    assert grid.ok and torch.allclose(out, made.result)


@needs_interpreted_helpers
def test_a_kernel_the_interpreter_cannot_run_comes_back_with_its_source() -> None:
    crash = generated_before_crash(lambda t: torch.softmax(t, dim=1), torch.randn(3, 20))
    assert crash is not None and crash.name.startswith("triton_per_fused__softmax")
    assert "libdevice.exp(" in crash.source and crash.line.startswith("tmp7 = tl.broadcast_to(")
    assert type(crash.error).__name__ == "InterpreterError" and isinstance(crash.error.__cause__, AttributeError)
