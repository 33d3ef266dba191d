"""The wrong-answer harness runs only the cells a notebook's exercises need: the cells that define what they read."""

from __future__ import annotations

from tests.course.wrong_answers.needed import defined, needed_cells, used

CELLS = [
    "import torch\nfrom torchlens_widgets import layout",          # 0: imports
    "x = torch.arange(6.0)\nlayout(x)",                          # 1: a picture (reads x, defines x)
    "SCALE = 2\ndef helper(t):\n    return t * SCALE",         # 2: a helper the answer calls
    "%time y = helper(x)",                                       # 3: timing, with a magic
    'SRC = """TORCH_LIBRARY(nb99, m) { m.def("f(Tensor x) -> Tensor"); }"""\nbuild(SRC)',  # 4: registers nb99
    "def answer(v):\n    local = v + 1\n    return helper(local)",  # 5: the solution
    "with check('99-a') as c:\n    exercises.n99.a(c, answer)",  # 6: the test cell
]


def test_names_a_cell_defines_and_reads() -> None:
    assert {"torch", "layout"} <= defined(CELLS[0])
    assert "torch.ops.nb99" in defined(CELLS[4])
    assert used(CELLS[5]) == {"helper"}  # not its own locals
    assert "torch.ops.nb99" in used("out = torch.ops.nb99.f(x)")
    assert "y" in defined(CELLS[3]) and "helper" in used(CELLS[3])  # magics are read as Python


def test_a_comprehension_or_function_local_is_not_a_notebook_name() -> None:
    """18's teaching cells named a comprehension variable `c`, and every cell up to its test cell (two rank runs)
    ran for the `c` of `with check(...) as c`."""
    cell = "sizes = [c.numel() for c in params]\ndef f():\n    local = 1\n    global shared\n    shared = 2\n"
    assert defined(cell) == {"sizes", "f", "shared"}
    assert needed_cells(["params = []", cell, "with check('x') as c:\n    c.that(True, '')"], [2]) == [2]


def test_only_what_the_exercise_needs_runs() -> None:
    assert needed_cells(CELLS, always=[0, 5, 6]) == [0, 2, 5, 6]
    # a wrong answer that uses the registered op pulls in the cell that registers it (and what that cell reads)
    assert needed_cells(CELLS, always=[0, 5, 6], extra_uses={"torch.ops.nb99"}) == [0, 2, 4, 5, 6]
