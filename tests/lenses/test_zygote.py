"""The zygote forks workers that behave as `python -c` would, and nothing it forks outlives it or its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchlens_widgets.lenses import zygote

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the zygote forks on Linux only")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _gone(pid: int, within: float = 10.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(autouse=True)
def _own_zygote() -> Iterator[None]:
    zygote.stop()
    yield
    zygote.stop()


def test_a_worker_runs_like_python_dash_c(tmp_path: Path) -> None:
    code = "import os, sys, torch; print(sys.argv[1:], os.environ['TLW_X'], os.getcwd(), torch.ones(2).sum().item())"
    job = zygote.spawn(code, ["a", 7], env=dict(os.environ, TLW_X="set"), stdout=tmp_path / "out", cwd=tmp_path)
    assert isinstance(job, zygote.Job) and job.wait(60) == 0
    assert (tmp_path / "out").read_text() == f"['a', '7'] set {tmp_path} 2.0\n"


def test_a_worker_has_a_fresh_pythons_signal_dispositions(tmp_path: Path) -> None:
    """A fresh Python ignores SIGPIPE (a lost socket peer is an EPIPE error, not a death) and leaves SIGTERM at its
    default: a rank writing to a crashed peer must not die of SIGPIPE itself. SIGINT is KeyboardInterrupt (a fresh
    Python keeps an ignored SIGINT ignored, as under pytest-xdist: the zygote's workers do not inherit that)."""
    code = ("import signal; print(signal.getsignal(signal.SIGPIPE) is signal.SIG_IGN, "
            "signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)")
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    job = zygote.spawn(code + "; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)",
                       stdout=tmp_path / "out")
    assert job.wait(60) == 0 and (tmp_path / "out").read_text() == fresh + "True\n" == "True True\nTrue\n"


@pytest.mark.parametrize(("code", "returncode", "stderr"), [
    ("import sys; sys.exit(3)", 3, ""),
    ("raise ValueError('boom')", 1, "ValueError: boom"),
    ("import sys; sys.exit('a message')", 1, "a message"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", -signal.SIGSEGV, ""),
])
def test_exit_codes_and_errors_are_python_s(tmp_path: Path, code: str, returncode: int, stderr: str) -> None:
    job = zygote.spawn(code, stdout=tmp_path / "out", stderr=tmp_path / "err")
    assert job.wait(60) == returncode and job.returncode == returncode
    assert stderr in (tmp_path / "err").read_text()


def test_the_environment_is_the_callers_at_each_spawn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    zygote.spawn("pass", stdout=tmp_path / "warm").wait(60)  # the zygote starts before the variable is set
    monkeypatch.setenv("TLW_LATE", "later")
    job = zygote.spawn("import os; print(os.environ.get('TLW_LATE'))", stdout=tmp_path / "out")
    assert job.wait(60) == 0 and (tmp_path / "out").read_text() == "later\n"


def test_killing_the_group_reaches_what_the_worker_started(tmp_path: Path) -> None:
    code = ("import subprocess, sys, time; p = subprocess.Popen(['sleep', '100']); "
            "print(p.pid, flush=True); time.sleep(100)")
    job = zygote.spawn(code, stdout=tmp_path / "out")
    end = time.monotonic() + 30
    while not ((tmp_path / "out").exists() and (tmp_path / "out").read_text().strip()) and time.monotonic() < end:
        time.sleep(0.05)
    grandchild = int((tmp_path / "out").read_text())
    assert job.poll() is None
    os.killpg(job.pid, signal.SIGKILL)
    assert job.wait(10) == -signal.SIGKILL
    assert _gone(grandchild)


def test_stop_ends_the_zygote_and_its_running_workers(tmp_path: Path) -> None:
    job = zygote.spawn("import time; time.sleep(100)", stdout=tmp_path / "out")
    pid = zygote.pid()
    assert pid is not None and job.poll() is None
    zygote.stop()
    assert zygote.pid() is None and _gone(pid) and _gone(job.pid)
    assert job.poll() == -signal.SIGKILL
    assert zygote.spawn("pass", stdout=tmp_path / "again").wait(60) == 0  # the next spawn starts a new one


def test_nothing_outlives_a_parent_killed_with_sigkill(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from torchlens_widgets.lenses import zygote; "
        f"j = zygote.spawn('import time; time.sleep(100)', stdout={str(tmp_path / 'w')!r}); "
        "print(zygote.pid(), j.pid, flush=True); time.sleep(100)")], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    z, worker = map(int, parent.stdout.readline().split())
    assert _alive(z) and _alive(worker)
    parent.kill()
    parent.wait()
    assert _gone(z) and _gone(worker)


def test_switched_off_it_spawns_a_plain_subprocess(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(zygote.ENV_OFF, "0")
    job = zygote.spawn("import sys; print(sys.argv[1:]); sys.exit(4)", ["x"], stdout=tmp_path / "out")
    assert isinstance(job, subprocess.Popen) and job.wait(60) == 4
    assert (tmp_path / "out").read_text() == "['x']\n" and zygote.pid() is None
