"""Every source notebook is well-formed course material, and every check fails on its released stub."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from torchlens_widgets.course.assemble import assemble, graded_items, hidden_lines
from torchlens_widgets.course.execute import cell_errors
from torchlens_widgets.course.grading import read_results
from torchlens_widgets.course.release import release_notebook
from torchlens_widgets.course.runner import Limits, run_cells

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


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_check_fails_on_its_stub(path: Path, tmp_path: Path) -> None:
    """The released notebook, unchanged, graded as the grader does (its hidden tests restored): teaching cells run,
    every item fails, and no message quotes a hidden test."""
    source = nbformat.read(path, as_version=4)
    student = release_notebook(source)
    text = json.dumps(student)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS"):
        assert marker not in text
    built = assemble(source, student)
    limits = Limits(timeout=300, cell_timeout=180, memory_mb=6000)
    run = run_cells(built.notebook, tmp_path, limits)
    first_exercise = min(i for i, c in enumerate(built.notebook.cells) if nbgrader(c))
    teaching_errors = {i: s for i, s in run.status.items() if 0 < i < first_exercise and s != "ok"}
    assert not teaching_errors, f"teaching cells failed in the student version: {teaching_errors}"
    points = {item.grade_id: item.points for item in graded_items(source)}
    results = read_results(built.notebook, built.cells, points, run, limits)
    assert [r.grade_id for r in results] == [nbgrader(source.cells[i])["grade_id"] for i in graded_cells(source)]
    not_failed = {r.grade_id: f"{r.status}: {r.message}" for r in results if r.status != "failed"}
    assert not not_failed, f"checks that did not fail on their stub: {not_failed}"
    crashed = {gid: e for gid, i in built.cells.items() if (e := cell_errors(built.notebook).get(i)) != "CheckFailed"}
    assert not crashed, f"checks that crashed on their stub instead of failing: {crashed}"
    secret = [line for line in hidden_lines(source) if len(line) >= 8]
    leaks = {r.grade_id: line for r in results for line in secret if line in r.message}
    assert not leaks, f"feedback quotes a hidden test: {leaks}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_hidden_test_blocks_hold_tests(path: Path) -> None:
    """The student copy says more tests run at grading: an empty hidden block would make that untrue."""
    block = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)
    for cell in nbformat.read(path, as_version=4).cells:
        for body in block.findall(cell.source):
            code = [line for line in body.splitlines() if line.strip() and not line.strip().startswith("#")]
            assert code, f"{nbgrader(cell).get('grade_id')}: its hidden-tests block is empty"
