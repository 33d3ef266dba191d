"""Reset one exercise: put its answer cell back to the released stub, keeping the learner's notebook as
it was in a backup whose path the result names. Nothing else in the notebook changes."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import nbformat

from .release import _atomic_write, pristine_path

__all__ = ["ResetError", "reset_exercise"]

BACKUP_DIR = Path(".torchlens") / "backups"


class ResetError(ValueError):
    """The exercise cannot be reset; the message says why and what to do."""


def _answer_cells(nb: Any, answer_id: str) -> list[int]:
    return [i for i, c in enumerate(nb.cells)
            if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == answer_id]


def reset_exercise(notebook: Path, grade_id: object) -> dict[str, Any]:
    """Restore `grade_id`'s answer cell (grade_id + "-answer", the course convention) from the release."""
    if not isinstance(grade_id, str) or not grade_id:
        raise ResetError("give 'grade_id': the exercise's id as its check names it, e.g. '02-storage-position'")
    pristine = pristine_path(notebook)
    if not pristine.is_file():
        raise ResetError(f"no released copy of {notebook.name} is kept at {pristine}; release the course again "
                         "(torchlens-course release SRC DIR keeps one and never overwrites your notebooks)")
    answer_id = f"{grade_id}-answer"
    fresh = nbformat.read(pristine, as_version=4)
    stub = _answer_cells(fresh, answer_id)
    if not stub:
        raise ResetError(f"{grade_id!r} has no answer cell ({answer_id!r}) in {notebook.name}; check the exercise id "
                         "(the outline lists them)")
    original = notebook.read_text(encoding="utf-8")
    learner = nbformat.reads(original, as_version=4)
    where = _answer_cells(learner, answer_id)
    if not where:
        raise ResetError(f"{notebook.name} no longer has the answer cell {answer_id!r} (deleted?); copy it from "
                         f"{pristine} or restore the notebook from a backup")
    backup = notebook.parent / BACKUP_DIR / f"{notebook.stem}.{time.strftime('%Y%m%d-%H%M%S')}.{grade_id}.ipynb"
    _atomic_write(backup, original)
    cell = copy.deepcopy(fresh.cells[stub[0]])
    cell["outputs"], cell["execution_count"] = [], None
    for i in where:
        learner.cells[i] = copy.deepcopy(cell)
    _atomic_write(notebook, nbformat.writes(learner))
    return {"notebook": str(notebook), "grade_id": grade_id, "cells": len(where), "backup": str(backup)}
