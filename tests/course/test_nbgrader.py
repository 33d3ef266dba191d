"""Real nbgrader generates every source notebook, and autogrades a representative few: the reference answers get
full marks, a stub 0.

Each test gets its own throwaway nbgrader course (config, sqlite gradebook, home and Jupyter dirs under tmp_path),
run through the ``nbgrader`` command line as an instructor would. One ``generate_assignment`` over all the course's
notebooks shows nbgrader accepts each one's metadata, strips its solutions and hidden tests and records every graded
cell with its points. ``autograde`` then runs two submissions of a few notebooks (``ref`` holds the reference
answers typed into the released notebook, ``stub`` is the release unchanged) and the scores are read back; then
``torchlens-course grade`` grades the same submitted folders and must give the same points, item by item.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from torchlens_widgets.course.gradebook import grade_submissions

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]-*.ipynb"))
NBGRADER = Path(sys.executable).parent / "nbgrader"
ASSIGNMENT = "ps"
COURSE_ID = "torchlens"
STUDENTS = ("ref", "stub")
# Autograded here, by nbgrader and by torchlens-course grade (each runs its notebook four times, 25-110 s): a
# pure-Python notebook and one that builds C++ and compiles (its reference only). Every other
# notebook is generated (above); its reference, hidden tests included, passes in test_wrong_answers.py and nbval, and
# every check fails on its stub there. That keeps CI under its 30 minutes with twenty notebooks;
# benchmarks/bench_grading.py compares the two graders' points on any set of notebooks.
AUTOGRADED = ("01-", "11-")
REFERENCE_ONLY = ("11-",)
SOLUTION_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def _meta(cell: nbformat.NotebookNode) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _points(nb: nbformat.NotebookNode) -> dict[str, float]:
    """grade_id → points of every graded cell."""
    return {_meta(c)["grade_id"]: float(_meta(c).get("points", 0)) for c in nb.cells if _meta(c).get("grade")}


def _nbgrader(root: Path, env: dict[str, str], *args: str, timeout: int = 120) -> str:
    run = subprocess.run(
        [str(NBGRADER), *args], cwd=root, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, f"nbgrader {' '.join(args)} exited {run.returncode}:\n{out[-6000:]}"
    return out


def _reference_submission(release: nbformat.NotebookNode, source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The released notebook with every solution cell's answer typed in (the source's solution, markers removed)."""
    answers = {_meta(c)["grade_id"]: c.source for c in source.cells if _meta(c).get("solution")}
    sub = nbformat.from_dict(release)
    filled = set()
    for cell in sub.cells:
        gid = _meta(cell).get("grade_id")
        if _meta(cell).get("solution") and gid in answers:
            cell.source = SOLUTION_MARKER.sub("", answers[gid])
            filled.add(gid)
    assert filled == set(answers), f"solution cells missing from the release: {set(answers) - filled}"
    return sub


def _failures(notebook: Path) -> str:
    """The errors nbgrader's execution left in an autograded notebook, for the assertion message."""
    nb = nbformat.read(notebook, as_version=4)
    lines = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                tb = "\n".join(out.get("traceback", [])[-3:])
                tb = re.sub(r"\x1b\[[0-9;]*m", "", tb)
                lines.append(
                    f"cell {i} ({_meta(cell).get('grade_id', 'teaching')}): {out.get('ename')}: "
                    f"{out.get('evalue')}\n{tb}"
                )
    return "\n".join(lines) or "(no error outputs)"


def _course(tmp_path: Path, notebooks: list[Path]) -> tuple[Path, dict[str, str], str]:
    """A throwaway nbgrader course whose assignment holds `notebooks`: (root, environment, gradebook URL)."""
    root = tmp_path / "course"
    db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    (root / "source" / ASSIGNMENT).mkdir(parents=True)
    for path in notebooks:
        shutil.copy(path, root / "source" / ASSIGNMENT / path.name)
    (root / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.root = {str(root)!r}\n"
        f"c.CourseDirectory.db_url = {db_url!r}\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
        "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "IPYTHONDIR": str(home / ".ipython"),
        "TORCHLENS_PROGRESS": str(tmp_path / "progress.json"),
        # nbgrader runs `alembic` from PATH when it creates the gradebook: put the venv's first, as activation would.
        "PATH": os.pathsep.join([str(NBGRADER.parent), os.environ.get("PATH", "")]),
    }
    return root, env, db_url


def _generated(root: Path, path: Path) -> tuple[Path, nbformat.NotebookNode, nbformat.NotebookNode]:
    """(released file, source, release) of one generated notebook, with no solution or hidden-test marker left."""
    released = root / "release" / ASSIGNMENT / path.name
    assert released.is_file(), f"generate_assignment wrote no {released}"
    source = nbformat.read(path, as_version=4)
    release = nbformat.read(released, as_version=4)
    release_text = nbformat.writes(release)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS"):
        assert marker not in release_text, f"{path.name}: the nbgrader release still contains {marker!r}"
    return released, source, release


@pytest.mark.notebooks
def test_nbgrader_generates_every_notebook(tmp_path: Path) -> None:
    from nbgrader.api import Gradebook

    root, env, db_url = _course(tmp_path, NOTEBOOKS)
    _nbgrader(root, env, "generate_assignment", ASSIGNMENT, "--force", timeout=600)
    with Gradebook(db_url, COURSE_ID) as gb:
        for path in NOTEBOOKS:
            _, source, release = _generated(root, path)
            _reference_submission(release, source)  # every answer cell is in the release, to be filled in
            points = _points(source)
            recorded = {cell.name: float(cell.max_score) for cell in gb.find_notebook(path.stem, ASSIGNMENT).grade_cells}
            assert recorded == points, f"{path.name}: nbgrader recorded {recorded}, the notebook grades {points}"
            assert sum(points.values()) > 0, path.name


@pytest.mark.notebooks
@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name.startswith(AUTOGRADED)],
                         ids=[p.stem for p in NOTEBOOKS if p.name.startswith(AUTOGRADED)])
def test_nbgrader_autogrades(path: Path, tmp_path: Path) -> None:
    from nbgrader.api import Gradebook

    root, env, db_url = _course(tmp_path, [path])
    _nbgrader(root, env, "generate_assignment", ASSIGNMENT, "--force")
    released, source, release = _generated(root, path)

    students = ("ref",) if path.name.startswith(REFERENCE_ONLY) else STUDENTS
    for student in students:  # autograde adds them to the gradebook (Autograde.create_student is on by default)
        (root / "submitted" / student / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(_reference_submission(release, source), root / "submitted" / "ref" / ASSIGNMENT / path.name)
    if "stub" in students:
        shutil.copy(released, root / "submitted" / "stub" / ASSIGNMENT / path.name)

    _nbgrader(root, env, "autograde", ASSIGNMENT, "--force", "--ExecutePreprocessor.timeout=180", timeout=900)

    points = _points(source)
    full = sum(points.values())
    assert full > 0
    scores: dict[str, tuple[float, float, dict[str, float | None]]] = {}
    with Gradebook(db_url, COURSE_ID) as gb:
        for student in students:
            sub = gb.find_submission_notebook(path.stem, ASSIGNMENT, student)
            per_cell = {g.name: g.auto_score for g in sub.grades}
            scores[student] = (sub.score, sub.max_score, per_cell)
    print(f"{path.stem}: " + ", ".join(f"{s} {scores[s][0]:g}/{scores[s][1]:g}" for s in students))

    for student in students:
        score, max_score, per_cell = scores[student]
        assert set(per_cell) == set(points), f"{student}: graded cells {sorted(per_cell)} != {sorted(points)}"
        missing = sorted(gid for gid, s in per_cell.items() if s is None)
        assert not missing, f"{student}: nbgrader did not autograde {missing}"
        assert max_score == full, f"{student}: nbgrader's max score {max_score} != the notebook's {full}"

    ref_score, _, ref_cells = scores["ref"]
    short = {gid: f"{s}/{points[gid]:g}" for gid, s in ref_cells.items() if s != points[gid]}
    assert ref_score == full, f"ref scored {ref_score}/{full}; cells short of full marks: {short}\n" + _failures(
        root / "autograded" / "ref" / ASSIGNMENT / path.name
    )
    if "stub" in scores:
        stub_score, _, stub_cells = scores["stub"]
        assert stub_score == 0, f"the unchanged release scored {stub_score}: {stub_cells}"

    # the same submissions through torchlens-course grade: the same points, item by item
    book = grade_submissions(root / "submitted", path.parent, tmp_path / "graded", jobs=2, notebooks=[path.name])
    ours = {s: {i.grade_id: i.points for i in book.results[s][0].items} for s in students}
    theirs = {s: {gid: float(score or 0) for gid, score in scores[s][2].items()} for s in students}
    assert ours == theirs, f"torchlens-course grade {ours} != nbgrader autograde {theirs}"
