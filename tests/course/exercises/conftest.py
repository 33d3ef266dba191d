"""Exercise checks run in-process: a grade id, an answer, and the check's verdict (None when it passed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from torchlens_widgets.course import CheckFailed, check
from torchlens_widgets.course.checks import _FAILURES


@pytest.fixture(autouse=True)
def _progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHLENS_PROGRESS", str(tmp_path / "progress.json"))
    _FAILURES.clear()


Verdict = Callable[..., "str | None"]


@pytest.fixture
def verdict() -> Verdict:
    """verdict(grade_id, run): run(c) inside the check; the failure message, or None when it passed."""

    def run(grade_id: str, body: Callable[[Any], None], points: float = 1) -> str | None:
        try:
            with check(grade_id, points=points) as c:
                body(c)
        except CheckFailed as failure:
            return str(failure)
        return None

    return run
