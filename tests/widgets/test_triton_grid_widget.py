"""show_program_grid: runs the lens (or takes its result) and shows the static picture for one program."""

from __future__ import annotations

import pytest
import torch

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

import torchlens_widgets  # noqa: E402
from torchlens_widgets.lenses.triton_grid import TritonGridError, program_grid  # noqa: E402
from torchlens_widgets.widgets.triton_grid import ProgramGridView, show_program_grid  # noqa: E402


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def test_show_program_grid_runs_the_kernel_and_shows_the_chosen_program() -> None:
    x, out = torch.arange(10, dtype=torch.float32), torch.zeros(10)
    view = show_program_grid(add_kernel, (3,), x, x, out, 10, BLOCK=4, program=2)
    assert isinstance(view, ProgramGridView) and view.program == (2,) and torch.equal(out, 2 * x)
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}
    assert 'class="pid sel"' in bundle["text/html"] and "program (2,):" in bundle["text/plain"]
    assert repr(view) == bundle["text/plain"]
    other = view.select(0)
    assert other.program == (0,) and other.grid is view.grid and "program (0,):" in repr(other)


def test_show_program_grid_takes_a_recorded_grid() -> None:
    grid = program_grid(add_kernel, (2,), torch.zeros(8), torch.zeros(8), torch.zeros(8), 8, BLOCK=4)
    assert show_program_grid(grid).program == (0,)
    with pytest.raises(TritonGridError, match="alone"):
        show_program_grid(grid, (2,))
    with pytest.raises(TritonGridError, match="not in the grid"):
        show_program_grid(grid, program=5)
    with pytest.raises(TritonGridError, match="give the grid"):
        show_program_grid(add_kernel)


def test_public_names() -> None:
    assert torchlens_widgets.show_program_grid is show_program_grid
    assert torchlens_widgets.program_grid is program_grid
    assert "ProgramGrid" in torchlens_widgets.__all__ and "TritonGridError" in dir(torchlens_widgets)
