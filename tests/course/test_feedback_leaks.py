"""No visible test cell or hint spells out the solution: no line of a reference solution appears in it."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]-*.ipynb"))
_REGION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
MIN_CHARS = 16  # shorter lines (`return out`, `pos = offset`) are too generic to be a leak


def _normal(line: str) -> str:
    return re.sub(r"\s+", " ", line.split("#", 1)[0]).strip()


def solution_lines(source: str) -> set[str]:
    lines = set()
    for region in _REGION.findall(source + "\n"):
        for line in region.splitlines():
            n = _normal(line)
            if len(n) >= MIN_CHARS and not n.startswith(("def ", "return None", "import ", "from ")):
                lines.add(n)
    return lines


def test_the_leak_detector_detects_a_leak() -> None:
    sol = "def f(x):\n    ### BEGIN SOLUTION\n    return x.t().contiguous().view(-1)\n    ### END SOLUTION\n"
    test_cell = 'hint = "try: return x.t().contiguous().view(-1)"'
    assert any(line in _normal(test_cell) for line in solution_lines(sol))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_test_cells_do_not_contain_solution_code(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    leaks = []
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("solution"):
            continue
        lines = solution_lines(cell.source)
        for j in range(i + 1, min(i + 3, len(nb.cells))):
            other = nb.cells[j]
            if other.metadata.get("nbgrader", {}).get("grade") and not other.metadata["nbgrader"].get("solution"):
                text = " ".join(_normal(x) for x in other.source.splitlines())
                leaks += [f"{meta['grade_id']}: {line!r}" for line in lines if line in text]
                break
    assert not leaks, "solution lines appear in visible test cells:\n" + "\n".join(leaks)


def _exercise_hints(path: Path) -> str:
    """Every hint tier of the notebook's exercise module (its `*_HINTS` constants), as one text."""
    import importlib

    try:
        module = importlib.import_module(f"torchlens_widgets.course.exercises.n{path.name[:2]}")
    except ModuleNotFoundError:
        return ""
    tiers = [t for name, value in vars(module).items() if name.endswith("HINTS") for t in value]
    return " ".join(_normal(t) for t in tiers)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_hints_in_the_package_do_not_contain_solution_code(path: Path) -> None:
    hints = _exercise_hints(path)
    nb = nbformat.read(path, as_version=4)
    leaks = [f"{cell.metadata['nbgrader']['grade_id']}: {line!r}" for cell in nb.cells
             if cell.metadata.get("nbgrader", {}).get("solution") for line in solution_lines(cell.source)
             if line in hints]
    assert not leaks, "solution lines appear in the exercise module's hints:\n" + "\n".join(leaks)


def test_the_package_hint_leak_detector_reads_the_module() -> None:
    assert "the slope of that line is per_element" in _exercise_hints(Path("01-runtime.ipynb"))
