"""Running the test suite never writes the learner's real progress file (the repository conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PROBES = ROOT / "tests" / "fixtures" / "progress"


def _run_pytest(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHLENS_PROGRESS", "XDG_DATA_HOME")}
    env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )


@pytest.mark.notebooks
def test_pytest_and_nbval_runs_leave_the_real_progress_file_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    real_store = home / ".local" / "share" / "torchlens-widgets" / "progress.json"
    unit = _run_pytest([str(PROBES / "probe_checks.py")], home)
    assert unit.returncode == 0, unit.stdout + unit.stderr
    assert "1 passed" in unit.stdout
    nbval = _run_pytest(["--nbval", "--nbval-current-env", str(PROBES / "probe.ipynb")], home)
    assert nbval.returncode == 0, nbval.stdout + nbval.stderr
    assert not real_store.exists() and not real_store.parent.exists()


def test_the_probe_really_would_write_without_the_guard(tmp_path: Path) -> None:
    # the same check, outside pytest, writes the default store: the test above can fail
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHLENS_PROGRESS", "XDG_DATA_HOME")}
    env["HOME"] = str(home)
    code = "import sys; sys.path.insert(0, sys.argv[1]); import probe_checks; probe_checks.test_probe_passes_a_check()"
    subprocess.run([sys.executable, "-c", code, str(PROBES)], cwd=tmp_path, env=env, check=True, timeout=120)
    assert (home / ".local" / "share" / "torchlens-widgets" / "progress.json").exists()


@pytest.mark.notebooks
def test_the_course_runners_redirect_progress_outside_pytest_too(tmp_path: Path) -> None:
    # the wrong-answer harness and execute_notebook are also run by hand (refreshing outputs, debugging a check)
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHLENS_PROGRESS", "XDG_DATA_HOME")}
    env["HOME"] = str(home)
    code = (
        "from pathlib import Path\n"
        "from tests.course.wrong_answers import run_wrong_answers\n"
        "from torchlens_widgets.course.execute import cell_errors, execute_notebook\n"
        f"nb = Path({str(PROBES / 'probe.ipynb')!r})\n"
        "assert not cell_errors(execute_notebook(nb).notebook)\n"
        "run_wrong_answers(nb, {})\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=300)
    assert not (home / ".local" / "share" / "torchlens-widgets").exists()
