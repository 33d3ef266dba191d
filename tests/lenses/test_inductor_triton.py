"""Inductor's Triton for CPU tensors in Triton's interpreter: the stand-in driver is lent and taken back, a pointwise
kernel Inductor wrote loads again with the launcher's heuristic configs and runs through program_grid, and a kernel
the interpreter cannot run is handed back with its source and the line it failed on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

triton = pytest.importorskip("triton")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.runtime.driver import driver  # noqa: E402

from torchlens_widgets.lenses.inductor_triton import inductor_triton_here  # noqa: E402


def _in_a_fresh_interpreter(body: str) -> None:
    """Run `body` in a new Python with TRITON_INTERPRET=1 from its start: Inductor's triton_helpers are decorated
    when first imported, and in a test worker another module may have imported them without it (as a notebook
    that sets the variable too late would)."""
    code = "import torch\n" + textwrap.dedent(body) + "\nprint('ok')\n"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_the_stand_in_driver_names_a_target_and_is_taken_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    before = driver._active
    with inductor_triton_here():
        assert driver.active.get_current_target() == GPUTarget("cuda", 90, 32)
        assert os.environ["TRITON_INTERPRET"] == "1"
    assert driver._active is before and "TRITON_INTERPRET" not in os.environ


def test_a_pointwise_kernel_is_written_loaded_and_run_through_the_lens() -> None:
    _in_a_fresh_interpreter("""
        from torchlens_widgets.lenses.inductor_triton import inductor_triton, load_kernel
        from torchlens_widgets.lenses.triton_grid import program_grid
        x = torch.randn(100)
        made = inductor_triton(lambda t: t * torch.sigmoid(1.702 * t), x)
        (kernel,) = made.kernels
        assert "xmask = xindex < xnumel" in kernel.source
        assert torch.allclose(made.result, x * torch.sigmoid(1.702 * x))
        launcher, fn = load_kernel(kernel.source, kernel.name)
        assert type(fn).__name__ == "InterpretedFunction"
        assert [(c.kwargs, c.num_warps) for c in launcher.configs] == [({"XBLOCK": 128}, 4)]
        out = torch.empty(100)
        grid = program_grid(fn, (4,), x, out, 100, XBLOCK=32)
        assert grid.ok and torch.allclose(out, made.result)
    """)


def test_a_kernel_the_interpreter_cannot_run_comes_back_with_its_source() -> None:
    _in_a_fresh_interpreter("""
        from torchlens_widgets.lenses.inductor_triton import generated_before_crash
        crash = generated_before_crash(lambda t: torch.softmax(t, dim=1), torch.randn(3, 20))
        assert crash is not None and crash.name.startswith("triton_per_fused__softmax")
        assert "libdevice.exp(" in crash.source and crash.line.startswith("tmp7 = tl.broadcast_to(")
        assert type(crash.error).__name__ == "InterpreterError" and isinstance(crash.error.__cause__, AttributeError)
    """)
