"""A kernel interrupt (Ctrl-C, or Jupyter's interrupt button: a KeyboardInterrupt raised in the code that is
running) stops each lens that runs the learner's code for long, reaches the learner as a KeyboardInterrupt, and
leaves torch as it was: no dispatch or function mode, profiler, autocast or grad state left behind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


def _torch_state() -> dict[str, Any]:
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return {
        "dispatch modes": len(_get_current_dispatch_mode_stack()),
        "function modes": len(_get_current_function_mode_stack()),
        "profiler on": torch.autograd.profiler._is_profiler_enabled,
        "autocast on": torch.is_autocast_enabled("cpu"),
        "autocast dtype": torch.get_autocast_dtype("cpu"),
        "grad on": torch.is_grad_enabled(),
        "inference mode": torch.is_inference_mode_enabled(),
        "threads": torch.get_num_threads(),
        "compiling": torch.compiler.is_compiling(),
    }


class _Interrupt:
    """A callable that runs normally `after` times, then raises KeyboardInterrupt (what SIGINT raises in Python)."""

    def __init__(self, fn: Callable[..., Any], after: int = 0) -> None:
        self.fn, self.after, self.calls = fn, after, 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        if self.calls > self.after:
            raise KeyboardInterrupt
        return self.fn(*args)


@triton.jit
def _stops(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def _contract() -> None:
    from torchlens_widgets.lenses.contract import contract_matrix

    contract_matrix(_Interrupt(torch.mul, after=3), torch.mul, (torch.randn(4, 3), torch.randn(4, 3)))


def _autocast() -> None:
    from torchlens_widgets.lenses.autocast import autocast_trace

    autocast_trace(lambda x: _Interrupt(torch.mm)(x, x), torch.randn(4, 4))


def _profile() -> None:
    from torchlens_widgets.lenses.profile import record_profile

    record_profile(lambda x: _Interrupt(torch.relu)(x), torch.randn(8), with_stack=False)


def _fusion() -> None:
    from torchlens_widgets.lenses.fusion import eager_traffic

    eager_traffic(lambda x: _Interrupt(torch.sin)(x + 1), torch.randn(8))


def _compile() -> None:
    from torchlens_widgets.lenses.compile_trace import compile_trace

    stop = _Interrupt(lambda: None)

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x.sin()
        stop()  # Dynamo cannot trace a call of this object: it runs in Python, between the graphs
        return y.cos()

    compile_trace(fn, torch.randn(8))


def _triton_grid() -> None:
    from torchlens_widgets.lenses import triton_grid

    real = triton_grid._Recorder.start

    def start(self: Any, x: int, y: int, z: int) -> None:
        if x == 2:  # the third program: an interrupt while the interpreter runs the grid
            raise KeyboardInterrupt
        real(self, x, y, z)

    triton_grid._Recorder.start = start  # type: ignore[method-assign]
    try:
        triton_grid.program_grid(_stops, (4,), torch.ones(64), 64, BLOCK=16)
    finally:
        triton_grid._Recorder.start = real  # type: ignore[method-assign]


@pytest.mark.parametrize("lens", [_contract, _autocast, _profile, _fusion, _compile, _triton_grid],
                         ids=["contract", "autocast", "profile", "fusion", "compile", "triton-grid"])
def test_an_interrupt_stops_the_lens_and_leaves_torch_as_it_was(lens: Callable[[], None]) -> None:
    from triton.runtime import interpreter as interp

    before = _torch_state()
    builder = dict(vars(interp.interpreter_builder))
    with pytest.raises(KeyboardInterrupt):
        lens()
    assert _torch_state() == before
    assert {k: v for k, v in vars(interp.interpreter_builder).items() if k not in ("grid_dim", "grid_idx")} == \
        {k: v for k, v in builder.items() if k not in ("grid_dim", "grid_idx")}
    torch._dynamo.reset()
