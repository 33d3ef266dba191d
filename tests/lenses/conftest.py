"""Every case of the fuzz suites (test_fuzz_*.py) and of the interrupt suite runs under the leak check of
`tests/lenses/leaks.py`: its own empty TMPDIR, and afterwards no process it started still running and no file left
there (the rule "no process or temp file left" of tests/fuzzing.py, asserted per case)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.lenses.leaks import LeakCheck, nothing_left_behind

CHECKED = re.compile(r"test_fuzz_\w+|test_interrupts|test_triton_grid")  # a new fuzz module: by its name alone


@pytest.fixture(autouse=True)
def nothing_left(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LeakCheck | None]:
    """Fail the case (at teardown) if it leaves a process running or a file in its TMPDIR, naming each."""
    if not CHECKED.fullmatch(request.module.__name__.rsplit(".", 1)[-1]):
        yield None
        return
    with nothing_left_behind(tmp_path_factory.mktemp("case-tmp")) as check:
        yield check
