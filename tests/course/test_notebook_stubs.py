"""Every source notebook is well-formed course material, and its release holds no solution or hidden test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from torchlens_widgets.course.release import release_notebook

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]-*.ipynb"))
CHECK_ID = re.compile(r"""check\(\s*["']([^"']+)["']""")


def nbgrader(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def graded_cells(nb: nbformat.NotebookNode) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if nbgrader(c).get("grade") and not nbgrader(c).get("solution")]


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 3, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_source_notebook_is_course_material(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    graded = graded_cells(nb)
    assert len(graded) >= 3, f"{path.name}: needs at least three graded exercises"
    ids = [nbgrader(c).get("grade_id") for c in nb.cells if nbgrader(c)]
    assert len(ids) == len(set(ids)), f"{path.name}: duplicate grade ids"
    prefix = path.name[:2] + "-"
    for i in graded:
        cell = nb.cells[i]
        gid = nbgrader(cell)["grade_id"]
        assert gid.startswith(prefix), f"{path.name}: grade id {gid} should start with {prefix}"
        assert CHECK_ID.findall(cell.source) == [gid], f"cell {i}: check(...) id must equal grade_id {gid}"
        assert nbgrader(cell).get("points", 0) > 0
        assert nbgrader(nb.cells[i - 1]).get("solution"), f"cell {i}: a test cell follows its solution cell"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not [o for o in cell.get("outputs", []) if o.get("output_type") == "error"], f"cell {i} errored"
            tags = set(cell.metadata.get("tags", []))
            assert tags <= {"nbval-ignore-output"}, f"cell {i}: unexpected tags {tags}"
    assert path.stat().st_size <= 1_000_000, f"{path.name} is {path.stat().st_size:,} bytes (limit 1 MB)"


def test_the_release_holds_no_solution_or_hidden_test() -> None:
    """Every check failing on its stub runs in tests/course/test_wrong_answers.py (the stub where the learner meets
    it, then the full test cell), beside the wrong answers; the student version's teaching cells are the source's,
    which nbval runs."""
    for path in NOTEBOOKS:
        text = json.dumps(release_notebook(nbformat.read(path, as_version=4)))
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS"):
            assert marker not in text, f"{path.name}: the release still holds {marker!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_hidden_test_blocks_hold_tests(path: Path) -> None:
    """The student copy says more tests run at grading: an empty hidden block would make that untrue."""
    block = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)
    for cell in nbformat.read(path, as_version=4).cells:
        for body in block.findall(cell.source):
            code = [line for line in body.splitlines() if line.strip() and not line.strip().startswith("#")]
            assert code, f"{nbgrader(cell).get('grade_id')}: its hidden-tests block is empty"
