"""Assembling a submission for grading: the source's test cells come back whatever the learner did to them."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from torchlens_widgets.course.assemble import PREAMBLE, assemble, graded_items, hidden_lines


def _sol(gid: str, src: str) -> nbformat.NotebookNode:
    return new_code_cell(src, metadata={"nbgrader": {"grade": False, "solution": True, "locked": False,
                                                     "grade_id": gid, "schema_version": 3}})


def _test(gid: str, src: str, points: float = 1) -> nbformat.NotebookNode:
    return new_code_cell(src, metadata={"nbgrader": {"grade": True, "solution": False, "locked": True,
                                                     "points": points, "grade_id": gid, "schema_version": 3}})


SOURCE = new_notebook(cells=[
    new_markdown_cell("# title"),
    new_code_cell("import torch"),
    _sol("a-answer", "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"),
    _test("a", "check_a()\n### BEGIN HIDDEN TESTS\nsecret_a()  # hidden\n### END HIDDEN TESTS", 2),
    new_code_cell("teaching()"),
    _sol("b-answer", "g = 2"),
    _test("b", "check_b()"),
])


def _sources(nb: nbformat.NotebookNode) -> list[str]:
    return [c.source for c in nb.cells]


def test_an_untouched_submission_gets_its_tests_with_hidden_ones_restored() -> None:
    sub = new_notebook(cells=[*SOURCE.cells[:3], _test("a", "check_a()\n# (more tests ...)"), *SOURCE.cells[4:]])
    built = assemble(SOURCE, sub)
    assert _sources(built.notebook) == [PREAMBLE, "# title", "import torch", SOURCE.cells[2].source,
                                        "check_a()\nsecret_a()  # hidden", "teaching()", "g = 2", "check_b()"]
    assert built.cells == {"a": 4, "b": 7} and built.dropped == 2
    assert [(i.grade_id, i.points) for i in graded_items(SOURCE)] == [("a", 2.0), ("b", 1.0)]
    assert hidden_lines(SOURCE) == ["secret_a()  # hidden"]


def test_edited_moved_duplicated_tests_are_replaced_and_split_answers_stay_together() -> None:
    sub = new_notebook(cells=[
        _test("b", "pass  # edited"), new_code_cell("import torch"),
        _sol("a-answer", "def f():"), new_code_cell("    return 1  # the second half lost its metadata"),
        _test("a", "print('passed')"), _test("a", "again"),
        new_code_cell("teaching()"), _sol("b-answer", "g = 1"), _sol("b-answer", "g = 2  # split, id copied"),
    ])
    built = assemble(SOURCE, sub)
    assert _sources(built.notebook) == [PREAMBLE, "import torch", "def f():", "    return 1  # the second half lost its metadata",
                                        "check_a()\nsecret_a()  # hidden", "teaching()", "g = 1",
                                        "g = 2  # split, id copied", "check_b()"]
    assert built.dropped == 3


def test_deleted_tests_and_missing_answers() -> None:
    only_b = new_notebook(cells=[new_code_cell("import torch"), _sol("b-answer", "g = 2")])
    assert _sources(assemble(SOURCE, only_b).notebook) == [
        PREAMBLE, "import torch", "g = 2", "check_a()\nsecret_a()  # hidden", "check_b()"]
    blank = new_notebook(cells=[])
    built = assemble(SOURCE, blank)
    assert _sources(built.notebook) == [PREAMBLE, "check_a()\nsecret_a()  # hidden", "check_b()"]
    assert built.cells == {"a": 1, "b": 2}


def test_outputs_of_the_submission_are_not_carried_and_nothing_is_modified() -> None:
    cell = new_code_cell("x = 1", outputs=[nbformat.v4.new_output("stream", text="forged ✓ a passed")], execution_count=3)
    sub = new_notebook(cells=[cell, _sol("a-answer", "def f(): return 1")])
    built = assemble(SOURCE, sub)
    assert all(not c.get("outputs") for c in built.notebook.cells if c.cell_type == "code")
    assert sub.cells[0].outputs and sub.cells[0].execution_count == 3
