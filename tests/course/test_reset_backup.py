"""Opening a reset's backup: Jupyter refuses files in dot folders, so "Open backup" asks for a copy in
backups/ beside the notebook, which Lab opens (and its file browser shows)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from torchlens_widgets.course.reset import BACKUP_DIR, VISIBLE_DIR, ResetError, visible_backup

NAME = "01-a.20261128-120000.01-x.ipynb"


def _course(tmp_path: Path) -> Path:
    nb = tmp_path / "01-a.ipynb"
    nb.write_text("{}")
    (tmp_path / BACKUP_DIR).mkdir(parents=True)
    (tmp_path / BACKUP_DIR / NAME).write_text('{"my": "answer"}')
    return nb


def test_a_backup_is_copied_once_where_jupyter_opens_it_and_stays_private(tmp_path: Path) -> None:
    nb = _course(tmp_path)
    copy = visible_backup(nb, NAME)
    assert copy == tmp_path / VISIBLE_DIR / NAME and not any(p.startswith(".") for p in copy.relative_to(tmp_path).parts)
    assert copy.read_text() == '{"my": "answer"}'
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600 and stat.S_IMODE(copy.parent.stat().st_mode) == 0o700
    copy.write_text('{"edited": "copy"}')  # asked again: the learner's copy is kept, not overwritten
    assert visible_backup(nb, NAME) == copy and copy.read_text() == '{"edited": "copy"}'


@pytest.mark.parametrize("name", ["", None, "../01-a.ipynb", "x/../../y.ipynb", ".hidden.ipynb", "a.txt", "missing.ipynb"])
def test_only_a_backup_file_of_that_notebook_is_copied(tmp_path: Path, name: object) -> None:
    nb = _course(tmp_path)
    with pytest.raises(ResetError):
        visible_backup(nb, name)
    assert not (tmp_path / VISIBLE_DIR).exists()


def test_symbolic_links_are_refused(tmp_path: Path) -> None:
    nb = _course(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / VISIBLE_DIR).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ResetError, match="symbolic link"):
        visible_backup(nb, NAME)
    assert list(elsewhere.iterdir()) == []
