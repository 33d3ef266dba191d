"""The student copy shows what each exercise checks, not how: a test cell is a few lines that call the package.

In every released notebook, each test cell is at most 12 lines, defines no function, carries no hint text and
no expected value: hints, cases and reference values live in `torchlens_widgets.course.exercises`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from torchlens_widgets.course.release import release_notebook

NOTEBOOK_DIR = Path(__file__).parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]-*.ipynb"))
MAX_LINES = 12
LONG_TEXT = 40  # characters: a string this long in a test cell is prose (a hint) or a case's content


def shape_problems(source: str) -> list[str]:
    """What makes a released test cell more than a call of the package's check."""
    lines = [line for line in source.splitlines() if line.strip()]
    problems = [f"{len(lines)} lines (at most {MAX_LINES})"] if len(lines) > MAX_LINES else []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            problems.append(f"line {node.lineno}: defines {getattr(node, 'name', 'a lambda')}")
        elif isinstance(node, ast.keyword) and node.arg == "hint":
            problems.append(f"line {node.value.lineno}: passes a hint")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) > LONG_TEXT:
            problems.append(f"line {node.lineno}: text {node.value[:30]!r}...")
        elif isinstance(node, ast.Name) and "HINT" in node.id.upper():
            problems.append(f"line {node.lineno}: names {node.id}")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_released_test_cells_only_call_the_package(path: Path) -> None:
    released = release_notebook(nbformat.read(path, as_version=4), path.name)
    found = {}
    for cell in released.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            problems = shape_problems(cell.source)
            if problems:
                found[meta["grade_id"]] = problems
    assert not found, f"{path.name}: test cells that show how they check:\n" + "\n".join(
        f"  {gid}: {'; '.join(p)}" for gid, p in found.items())


def test_the_shape_rule_finds_each_kind_of_problem() -> None:
    cell = ('_HINT = ["a pointer, then more and more of the answer"]\n'
            "def _expected(x):\n    return x\n"
            "with check('99-x') as c:\n    c.equal(f(1), _expected(1), hint='look again')\n")
    found = " | ".join(shape_problems(cell))
    for part in ("defines _expected", "passes a hint", "names _HINT", "text 'a pointer, then more"):
        assert part in found
    assert shape_problems("\n".join(["x = 1"] * 13)) == ["13 lines (at most 12)"]
    assert shape_problems("from torchlens_widgets.course import check, exercises\n\n"
                          "with check('01-crossover', points=2) as c:\n"
                          "    exercises.n01.crossover(c, crossover)\n") == []
