"""show_program_grid: runs the lens (or takes its result) and returns the live program-grid widget, whose
`program` trait is the program shown (set by clicks or `select`), whose model is compact, and whose mime
bundle carries the static HTML of that program and a deterministic text/plain."""

from __future__ import annotations

import json

import pytest
import torch
import traitlets

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

import torchlens_widgets  # noqa: E402
from torchlens_widgets.lenses.triton_grid import (  # noqa: E402
    Access,
    Program,
    ProgramGrid,
    TensorArg,
    TritonGridError,
    program_grid,
)
from torchlens_widgets.widgets._base import STATIC  # noqa: E402
from torchlens_widgets.widgets.triton_grid import (  # noqa: E402
    ProgramGridView,
    ProgramGridWidget,
    show_program_grid,
)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def tile_kernel(m_ptr, rows, cols, BR: tl.constexpr, BC: tl.constexpr):
    r = tl.program_id(1) * BR + tl.arange(0, BR)[:, None]
    c = tl.program_id(0) * BC + tl.arange(0, BC)[None, :]
    tl.store(m_ptr + r * cols + c, 1.0, mask=(r < rows) & (c < cols))


def _bundle(widget: ProgramGridWidget) -> dict:
    data, _ = widget._repr_mimebundle_()
    return data


def test_show_program_grid_runs_the_kernel_and_shows_the_chosen_program() -> None:
    x, out = torch.arange(10, dtype=torch.float32), torch.zeros(10)
    view = show_program_grid(add_kernel, (3,), x, x, out, 10, BLOCK=4, program=2)
    assert isinstance(view, ProgramGridWidget) and ProgramGridView is ProgramGridWidget
    assert view.program == (2,) and torch.equal(out, 2 * x)
    bundle = _bundle(view)
    assert set(bundle) == {WIDGET_VIEW, "text/html", "text/plain"}
    assert 'class="pid sel"' in bundle["text/html"] and "program (2,):" in bundle["text/plain"]
    assert repr(view) == bundle["text/plain"]
    bundled = STATIC / "tgrid.js"
    assert view._esm == bundled.read_text() if bundled.exists() else "was not built" in view._esm
    other = view.select(0)  # selects in place (as a click would) and returns the widget, so a cell shows it
    assert other is view and view.program == (0,) and other.grid is view.grid and "program (0,):" in repr(other)
    assert "program (0,):" in _bundle(view)["text/plain"]


def test_show_program_grid_takes_a_recorded_grid() -> None:
    grid = program_grid(add_kernel, (2,), torch.zeros(8), torch.zeros(8), torch.zeros(8), 8, BLOCK=4)
    assert show_program_grid(grid).program == (0,)
    with pytest.raises(TritonGridError, match="alone"):
        show_program_grid(grid, (2,))
    with pytest.raises(TritonGridError, match="not in the grid"):
        show_program_grid(grid, program=5)
    with pytest.raises(TritonGridError, match="give the grid"):
        show_program_grid(add_kernel)
    w = show_program_grid(grid, program=1)
    with pytest.raises(TritonGridError, match="not in the grid"):
        w.select(2)
    with pytest.raises(TritonGridError, match="tuple"):
        w.select("1")
    assert w.program == (1,)


def test_the_program_trait_syncs_both_ways_and_rejects_what_was_not_recorded() -> None:
    x = torch.arange(40, dtype=torch.float32)
    grid = program_grid(add_kernel, (10,), x, x, torch.zeros(40), 40, BLOCK=4, max_programs=4)
    w = show_program_grid(grid)
    assert json.loads(json.dumps(w.get_state()["program"])) == [0]  # a list in JSON
    w.set_state({"program": [3]})  # what a click in the page sends
    assert w.program == (3,)
    with pytest.raises(traitlets.TraitError, match="not recorded"):
        w.set_state({"program": [7]})  # ran, but past max_programs
    with pytest.raises(traitlets.TraitError, match="not in the grid"):
        w.program = (10,)
    for bad in (None, (), [1.5]):
        with pytest.raises(traitlets.TraitError):
            w.program = bad
    assert w.program == (3,)


def test_two_d_grids_name_programs_by_tuples() -> None:
    m = torch.zeros(5, 7)
    w = show_program_grid(tile_kernel, (2, 3), m, 5, 7, BR=2, BC=4)
    assert w.program == (0, 0) and torch.equal(m, torch.ones(5, 7))
    w.select((1, 2))
    assert w.program == (1, 2) and "program (1, 2):" in repr(w)
    assert w.model["grid"] == [2, 3] and {p[0] for p in w.model["programs"]} == set(range(6))
    with pytest.raises(TritonGridError, match="tuple"):
        w.select(1)


def test_the_model_is_compact_and_complete() -> None:
    x, y = torch.arange(10, dtype=torch.float32), torch.ones(10)
    w = show_program_grid(add_kernel, (3,), x, y, torch.zeros(10), 10, BLOCK=4)
    model = w.model
    assert model["kind"] == "tgrid" and model["version"] == 1 and model["num_programs"] == 3
    assert [s["op"] for s in model["sites"]] == ["load", "load", "store"]
    assert {s["line"] for s in model["sites"]} == {n for n, _ in model["source"]}
    assert "tl.load(x_ptr + offs, mask=mask)" in dict(model["source"])[model["sites"][0]["line"]]
    last = model["programs"][2]
    assert last[0] == 2 and last[2][0] == [0, 2, [8, 10], [10, 12], 2]  # site, touched, elements, masked, lanes
    assert "0x" not in json.dumps(model)  # no addresses


def _synthetic(n: int = 1024, block: int = 128, short: int = 37) -> ProgramGrid:
    """What the lens records for a masked kernel over a vector of n * block - short elements (no Triton run)."""
    numel = n * block - short
    tensors = tuple(TensorArg(name, "float32", (numel,), (1,), numel, 4, True) for name in ("x_ptr", "out_ptr"))
    programs = []
    for p in range(n):
        a, b = p * block, min(p * block + block, numel)
        masked = ((b, a + block),) if b < a + block else ()
        programs.append(Program((p,), tuple(
            Access(op, name, 8, block, b - a, ((a, b),), masked, block - (b - a), ())
            for op, name in (("load", "x_ptr"), ("store", "out_ptr")))))
    return ProgramGrid("scale_kernel", (n,), n, tensors, (("n", str(numel)),), tuple(programs), (), 0,
                       interpreter="triton 3.7.1 interpreter", source_lines=((8, "tl.store(out_ptr + offs, ...)"),))


def test_a_1024_program_kernel_sends_runs_not_element_lists() -> None:
    grid = _synthetic()
    w = show_program_grid(grid, program=1023)
    sent = len(json.dumps(w.get_state()["model"], separators=(",", ":")))
    full = len(json.dumps(grid.to_dict()))
    assert sent < 64_000, f"the model of 1,024 programs is {sent} bytes"
    assert sent * 5 < full, (sent, full)
    assert w.model["programs"][-1][2][0] == [0, 128 - 37, [1023 * 128, 1024 * 128 - 37], [1024 * 128 - 37, 1024 * 128], 37]
    html, text = _bundle(w)["text/html"], _bundle(w)["text/plain"]
    assert len(html) < 400_000 and "program (1023,):" in text


def test_text_plain_is_deterministic() -> None:
    def make() -> str:
        x = torch.arange(10, dtype=torch.float32)
        return _bundle(show_program_grid(add_kernel, (3,), x, x, torch.zeros(10), 10, BLOCK=4, program=1))["text/plain"]

    a, b = make(), make()
    assert a == b and "0x" not in a and "program (1,):" in a


def test_public_names() -> None:
    assert torchlens_widgets.show_program_grid is show_program_grid
    assert torchlens_widgets.program_grid is program_grid
    assert "ProgramGrid" in torchlens_widgets.__all__ and "TritonGridError" in dir(torchlens_widgets)
