"""The fuzz rule "no process or temp file left", checked per test case: the case runs with a TMPDIR of its own
(tempfile's and the environment's), and afterwards its folder must be empty and no process this one started during
the case may still run. What stays on purpose is not a leak (see `LASTING`)."""

from __future__ import annotations

import contextlib
import ctypes
import getpass
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

GRACE_S = 2.0  # a child that is exiting (a killed build's compiler, a rank's worker) gets this long to be gone

# Processes that outlive a case by design, matched on their command line (they and everything below them):
# - the lenses' zygote (lenses/zygote.py): one per process, quits after IDLE_S idle; its *workers* are checked;
# - the background job that makes the course build cache's precompiled headers (lenses/precompiled.py);
# - Inductor's compile-worker pool (torch/_inductor/compile_worker/__main__.py), kept for the session by torch.
LASTING = re.compile(r"torchlens_widgets\.lenses\.precompiled|torch[./]_inductor[./]compile_worker")


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")[:300] or "?"


def _children() -> dict[tuple[int, float], tuple[int, str]]:
    """Every live process below this one, keyed by (pid, start time) so that a reused pid is a new process, with
    its parent's pid and its command line."""
    try:
        import psutil
    except ImportError:
        return _children_from_proc()
    found: dict[tuple[int, float], tuple[int, str]] = {}
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                found[(p.pid, p.create_time())] = (p.ppid(), " ".join(p.cmdline())[:300] or p.name())
        except psutil.Error:  # it exited while being read
            continue
    return found


def _children_from_proc() -> dict[tuple[int, float], tuple[int, str]]:
    parent: dict[int, int] = {}
    start: dict[int, float] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != b"Z":  # a zombie is gone, only not yet reaped
                parent[int(entry)], start[int(entry)] = int(fields[1]), float(fields[19])
    below, todo = [], [p for p, pp in parent.items() if pp == os.getpid()]
    while todo:
        pid = todo.pop()
        below.append(pid)
        todo.extend(p for p, pp in parent.items() if pp == pid)
    return {(pid, start[pid]): (parent[pid], _cmdline(pid)) for pid in below}


def _lasting(children: dict[tuple[int, float], tuple[int, str]]) -> set[int]:
    """The pids in `children` that stay on purpose: those `LASTING` matches and everything below them, and the
    zygote itself (not its workers: those are the cases' own processes)."""
    from torchlens_widgets.lenses import zygote

    keep = {pid for (pid, _), (_, cmd) in children.items() if LASTING.search(cmd)}
    grew = True
    while grew:
        more = {pid for (pid, _), (ppid, _) in children.items() if ppid in keep} - keep
        keep |= more
        grew = bool(more)
    return keep | {p for p in (zygote.pid(),) if p is not None}


def _inductor_cache() -> str:
    """Inductor's default cache folder, $TMPDIR/torchinductor_<user> (torch's own rule in
    torch/_inductor/runtime/cache_dir_utils.py, repeated here: importing Inductor costs seconds)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


class LeakCheck:
    """Give a case its own TMPDIR and remember the processes already running; `leftovers()` names what the case
    left (each leaked process as pid and command line, each leaked path), and removes it."""

    def __init__(self, folder: Path, keep: Path | None = None) -> None:
        self.folder, self.keep = folder, keep
        self.before = set(_children())

    def leftovers(self, grace: float = GRACE_S) -> list[str]:
        end = time.monotonic() + grace
        while True:
            children = _children()
            lasting = _lasting(children)
            running = {key: cmd for key, (_, cmd) in children.items() if key not in self.before and key[0] not in lasting}
            files = sorted(p for p in self.folder.iterdir() if p != self.keep) if self.folder.is_dir() else []
            if (not running and not files) or time.monotonic() >= end:
                break
            time.sleep(0.05)
        problems = [f"process {pid} left running: {cmd}" for (pid, _), cmd in sorted(running.items())]
        problems += [f"temp file left: {path}" for path in files]
        for pid, _ in running:  # so one leaky case is reported once and leaves nothing to the next
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for path in files:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        return problems


@contextlib.contextmanager
def _subreaper() -> Iterator[None]:
    """Make this process the Linux "child subreaper" meanwhile: a process that a case's child detaches (a double
    fork, `cmd &` in a shell that then exits) is adopted by this process instead of init, so it is still found."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        was = ctypes.c_int(0)
        libc.prctl(37, ctypes.byref(was), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):  # not Linux: detached processes are not seen there
        yield
        return
    try:
        yield
    finally:
        libc.prctl(36, was.value, 0, 0, 0)


@contextlib.contextmanager
def nothing_left_behind(folder: Path, grace: float = GRACE_S) -> Iterator[LeakCheck]:
    """Run the body with TMPDIR (tempfile's and the environment's) set to the empty `folder`; fail the test when it
    leaves a process running or a file there.

    Not a leak: Inductor's compile cache, $TMPDIR/torchinductor_<user> by default, kept on purpose across runs. It
    stays where it was (warm): $TORCHINDUCTOR_CACHE_DIR is pinned to it, and `folder` gets a link of that name to it,
    because Inductor also fixes a path below it when it is first imported (its precompiled headers, codecache.py)
    and that may happen during a case."""
    folder.mkdir(parents=True, exist_ok=True)
    cache = _inductor_cache()
    link = folder / os.path.basename(cache)
    with contextlib.suppress(OSError):
        os.makedirs(cache, exist_ok=True)
        link.symlink_to(cache, target_is_directory=True)
    with pytest.MonkeyPatch.context() as mp, _subreaper():
        if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
            mp.setenv("TORCHINDUCTOR_CACHE_DIR", cache)
        mp.setattr(tempfile, "tempdir", str(folder))
        mp.setenv("TMPDIR", str(folder))
        check = LeakCheck(folder, keep=link if link.is_symlink() else None)
        yield check
        problems = check.leftovers(grace)
    if problems:
        pytest.fail("the case left behind:\n  " + "\n  ".join(problems), pytrace=False)
