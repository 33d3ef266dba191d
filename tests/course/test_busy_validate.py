"""Validating a notebook shows a busy line while its fresh kernel runs (the runner mocked: a fake that numbers
the cells over 1.2 s), the first update within 2 s, a summary that says done; the cell count it shows."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from torchlens_widgets import busy
from torchlens_widgets.course import validate
from torchlens_widgets.course.runner import Run


@contextlib.contextmanager
def _recorded() -> Iterator[tuple[list[tuple[float, str]], list[str]]]:
    """Busy lines shown inside the block, as (seconds since it began, the line), and the summaries closing them."""
    updates: list[tuple[float, str]] = []
    closed: list[str] = []
    t0 = time.monotonic()

    class Sink:
        def update(self, title: str, phase: str, seconds: float) -> None:
            updates.append((time.monotonic() - t0, busy.line_text(title, phase, seconds)))

        def close(self, summary: str) -> None:
            closed.append(summary)

    before = busy.connect(Sink)
    try:
        yield updates, closed
    finally:
        busy.connect(before)


def test_validation_shows_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"x = {i}") for i in range(3)]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)

    def run_cells(nb: Any, cwd: Path, limits: Any, **kwargs: Any) -> Run:
        for i, cell in enumerate(nb.cells):
            time.sleep(0.4)
            cell.execution_count = i + 1
        return Run(status={i: "ok" for i in range(len(nb.cells))}, seconds=1.2)

    monkeypatch.setattr(validate, "run_cells", run_cells)
    with _recorded() as (updates, closed):
        report = validate.validate_notebook(path)
    assert report["checks"] == []
    assert updates[0][0] < 2.0 and updates[0][1] == "validating nb.ipynb: starting a fresh kernel (0 s)"
    assert closed == ["validating nb.ipynb: done"]
    nb.cells[0].execution_count = 1
    assert validate._stage(nb) == "cell 1 of 3 ran in a fresh kernel"  # what the ticker reads as the run moves


def test_grading_shows_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """grade_submissions over two students (each notebook's worker mocked: 0.4 s, then all missing): the line
    counts the notebooks graded, and says done."""
    from torchlens_widgets.course import gradebook
    from torchlens_widgets.course.grading import missing

    source, subs = tmp_path / "source", tmp_path / "subs"
    source.mkdir()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("from torchlens_widgets.course import check\nwith check('q1', points=1) as c:\n"
                                     "    c.that(True, 'x')")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 1, "grade_id": "q1",
                                 "schema_version": 3}
    nb.cells = [cell]
    nbformat.write(nb, source / "01-a.ipynb")
    for student in ("alice", "bob"):
        (subs / student).mkdir(parents=True)
        nbformat.write(nb, subs / student / "01-a.ipynb")

    def worker(src: Path, *args: Any) -> Any:
        time.sleep(0.4)
        return missing(nbformat.read(src, as_version=4), src.name, "mocked")

    monkeypatch.setattr(gradebook, "_run_worker", worker)
    with _recorded() as (updates, closed):
        book = gradebook.grade_submissions(subs, source, tmp_path / "out", jobs=1, sandboxed=False)
    assert book.graded == 2
    assert updates[0][0] < 2.0 and updates[0][1] == "grading: 0 of 2 notebooks graded (0 s)"
    assert closed == ["grading: done"]
