"""Reset one exercise: put its answer cell back to the released stub, keeping the learner's notebook as
it was in a backup whose path the result names. Nothing else in the notebook changes."""

from __future__ import annotations

import copy
import os
import re
import time
from pathlib import Path
from typing import Any

import nbformat

from .release import _atomic_write, pristine_path

__all__ = ["ResetError", "reset_exercise", "visible_backup"]

BACKUP_DIR = Path(".torchlens") / "backups"
VISIBLE_DIR = Path("backups")  # where "open backup" puts a copy Jupyter can open (it hides dot folders)
_BACKUP_NAME = re.compile(r"[A-Za-z0-9_.-]+\.ipynb")
_GRADE_ID = re.compile(r"[A-Za-z0-9_-]+")  # nbgrader's rule; the id also names the backup file


class ResetError(ValueError):
    """The exercise cannot be reset; the message says why and what to do."""


def _answer_cells(nb: Any, answer_id: str) -> list[int]:
    return [i for i, c in enumerate(nb.cells)
            if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == answer_id]


def _backup_path(notebook: Path, grade_id: str) -> Path:
    """A new file under .torchlens/backups/ beside `notebook`: two resets in one second keep both."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = notebook.parent / BACKUP_DIR
    backup, n = folder / f"{notebook.stem}.{stamp}.{grade_id}.ipynb", 1
    while backup.exists():
        n += 1
        backup = folder / f"{notebook.stem}.{stamp}-{n}.{grade_id}.ipynb"
    return backup


def _private_folder(parent: Path) -> None:
    """Make .torchlens/backups beside the notebook a folder only its owner reads (0700), refusing one that is (or
    sits in) a symbolic link: backups would land wherever it points."""
    here = parent
    for part in BACKUP_DIR.parts:
        here = here / part
        if here.is_symlink():
            raise ResetError(f"{here} is a symbolic link; backups go only into a real folder there. Remove the link "
                             "(or move it away) and reset again")
        here.mkdir(mode=0o700, exist_ok=True)
    os.chmod(here, 0o700)


def reset_exercise(notebook: Path, grade_id: object) -> dict[str, Any]:
    """Restore `grade_id`'s answer cell (grade_id + "-answer", the course convention) from the release."""
    if not isinstance(grade_id, str) or not grade_id:
        raise ResetError("give 'grade_id': the exercise's id as its check names it, e.g. '02-storage-position'")
    if not _GRADE_ID.fullmatch(grade_id):
        raise ResetError(f"grade_id {grade_id[:80]!r}: ids have letters, digits, '_' and '-' only (the outline "
                         "lists them)")
    pristine = pristine_path(notebook)
    if not pristine.is_file():
        raise ResetError(f"no released copy of {notebook.name} is kept at {pristine}; release the course again "
                         "(torchlens-course release SRC DIR keeps one and never overwrites your notebooks)")
    answer_id = f"{grade_id}-answer"
    try:
        fresh = nbformat.read(pristine, as_version=4)
    except Exception as exc:  # unreadable, not JSON, not a notebook
        raise ResetError(f"the released copy {pristine} cannot be read ({exc}); release the course again") from exc
    stub = _answer_cells(fresh, answer_id)
    if not stub:
        raise ResetError(f"{grade_id!r} has no answer cell ({answer_id!r}) in {notebook.name}; check the exercise id "
                         "(the outline lists them)")
    try:
        original = notebook.read_text(encoding="utf-8")
        learner = nbformat.reads(original, as_version=4)
    except Exception as exc:  # unreadable, not JSON, not a notebook: nothing safe to change
        raise ResetError(f"{notebook.name} cannot be read as a notebook ({exc}); restore it from a backup in "
                         f"{notebook.parent / BACKUP_DIR} or copy {pristine}") from exc
    where = _answer_cells(learner, answer_id)
    if not where:
        raise ResetError(f"{notebook.name} no longer has the answer cell {answer_id!r} (deleted?); copy it from "
                         f"{pristine} or restore the notebook from a backup")
    backup = _backup_path(notebook, grade_id)
    _private_folder(notebook.parent)
    _atomic_write(backup, original, mode=0o600)  # the learner's work: theirs to read only
    cell = copy.deepcopy(fresh.cells[stub[0]])
    if cell.get("cell_type") == "code":
        cell["outputs"], cell["execution_count"] = [], None
    for i in where:
        restored = copy.deepcopy(cell)
        if "id" in learner.cells[i]:  # cell ids stay the learner's: unique within their notebook
            restored["id"] = learner.cells[i]["id"]
        else:
            restored.pop("id", None)
        learner.cells[i] = restored
    nbformat.validate(learner)
    _atomic_write(notebook, nbformat.writes(learner))
    return {"notebook": str(notebook), "grade_id": grade_id, "cells": len(where), "backup": str(backup)}


def visible_backup(notebook: Path, name: object) -> Path:
    """A copy of the backup `name` (a file in .torchlens/backups/ beside `notebook`) in backups/ beside it, which
    Jupyter's file browser shows and opens (it refuses files in dot folders); made once, private like the backup."""
    if not isinstance(name, str) or not _BACKUP_NAME.fullmatch(name) or name.startswith("."):
        raise ResetError(f"'backup' {str(name)[:80]!r}: give the backup's file name as reset named it, "
                         "e.g. '02-views.20261124-010203.02-a.ipynb'")
    backup = notebook.parent / BACKUP_DIR / name
    if backup.is_symlink() or not backup.is_file():
        raise ResetError(f"no backup {name} in {notebook.parent / BACKUP_DIR}")
    folder = notebook.parent / VISIBLE_DIR
    if folder.is_symlink():
        raise ResetError(f"{folder} is a symbolic link; copies of backups go only into a real folder. Remove the "
                         "link and try again")
    folder.mkdir(mode=0o700, exist_ok=True)
    copy_path = folder / name
    if copy_path.is_symlink():
        raise ResetError(f"{copy_path} is a symbolic link; remove it and try again")
    if not copy_path.is_file():
        _atomic_write(copy_path, backup.read_text(encoding="utf-8"), mode=0o600)
    return copy_path
