"""Worker processes that start in milliseconds: one Python that imported torch once (the zygote) forks each C++
build and each distributed rank, instead of every worker paying ~2 s of CPU to import torch again.

Linux only (fork, `PR_SET_PDEATHSIG`); elsewhere, with ``TORCHLENS_ZYGOTE=0``, or when the zygote cannot start,
`spawn` runs a plain ``python -c`` subprocess with the same contract. The zygote quits when its parent closes the
pipe or dies, and after `IDLE_S` seconds with no work; every worker it forked is killed when it quits.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["ENV_OFF", "IDLE_S", "Job", "descendants", "kill_all", "spawn", "stop"]

ENV_OFF = "TORCHLENS_ZYGOTE"  # "0": every worker is a fresh `python -c` (slower; the old way, for comparison)
IDLE_S = 300.0  # a zygote with no work for this long quits (its ~150 MB go back); the next worker starts a new one
PRELOAD = ("torch", "torch.utils.cpp_extension", "torch.distributed", "torchlens_widgets.lenses.distributed")

# The zygote: imports PRELOAD, then forks one worker per request line on stdin and reports pids and exit codes on
# stdout as JSON lines. A worker leads its own session (the caller kills its whole group) and dies with the zygote.
_ZYGOTE = r"""
import atexit, builtins, ctypes, importlib, json, os, select, signal, sys, time, traceback
preload, idle = json.loads(sys.argv[1]), float(sys.argv[2])
def deathsig():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass
parent = os.getppid()
deathsig()
if os.getppid() != parent:
    os._exit(0)
for name in preload:
    try:
        importlib.import_module(name)
    except Exception:
        pass
out = sys.stdout
def reply(**msg):
    out.write(json.dumps(msg) + "\n")
    out.flush()
def worker(req):
    code = 1
    try:
        os.setsid()
        deathsig()
        if os.getppid() != zygote:
            os._exit(137)
        for s in (signal.SIGTERM, signal.SIGCHLD):  # as a fresh Python has them: a lost socket peer is an
            signal.signal(s, signal.SIG_DFL)            # error (EPIPE), not a death by SIGPIPE
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        fd = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 1)
        os.dup2(os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if req["stderr"] else 1, 2)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req["cwd"])
        sys.path[:] = req["sys_path"]
        sys.argv = ["-c", *req["argv"]]
        try:
            exec(compile(req["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
            code = 0
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
zygote = os.getpid()
reply(ready=zygote)
children, buf, last = set(), b"", time.monotonic()
while True:
    ready, _, _ = select.select([0], [], [], 0.05)
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        children.discard(pid)
        last = time.monotonic()
        reply(exit=pid, code=os.waitstatus_to_exitcode(status))
    if ready:
        data = os.read(0, 1 << 20)
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            req = json.loads(line)
            pid = os.fork()
            if pid == 0:
                worker(req)
            children.add(pid)
            reply(pid=pid, id=req["id"])
    if not children and time.monotonic() - last > idle:
        break
"""


class Job:
    """A worker forked by the zygote: the few `subprocess.Popen` methods the lenses use."""

    def __init__(self, zygote: _Zygote, pid: int) -> None:
        self._zygote, self.pid = zygote, pid

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal), or None while it runs."""
        return self._zygote.exit_code(self.pid)

    def wait(self, timeout: float | None = None) -> int:
        code = self._zygote.wait_for(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL the worker and everything in its process group (compilers, children it started)."""
        if self.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


class _Zygote:
    def __init__(self) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # threads are set per worker by torch
        self.proc = subprocess.Popen([sys.executable, "-c", _ZYGOTE, json.dumps(PRELOAD), str(IDLE_S)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self._cond = threading.Condition()
        self._pids: dict[int, int] = {}
        self._exits: dict[int, int] = {}
        self._next = 0
        self.ready: int | None = None
        self.gone = False
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True, name="tlw-zygote").start()
        with self._cond:
            self._cond.wait_for(lambda: self.ready is not None or self.gone, timeout=120)
        if self.ready is None:
            self.close()
            raise OSError("the zygote did not start")

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            with self._cond:
                if "ready" in msg:
                    self.ready = msg["ready"]
                elif "pid" in msg:
                    self._pids[msg["id"]] = msg["pid"]
                elif "exit" in msg:
                    self._exits[msg["exit"]] = msg["code"]
                self._cond.notify_all()
        with self._cond:
            self.gone = True
            self._cond.notify_all()

    def fork(self, request: dict[str, Any]) -> Job:
        with self._cond:
            self._next += 1
            rid = self._next
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(dict(request, id=rid)).encode() + b"\n")
        self.proc.stdin.flush()
        with self._cond:
            self._cond.wait_for(lambda: rid in self._pids or self.gone, timeout=30)
            pid = self._pids.pop(rid, None)
        if pid is None:
            raise OSError("the zygote did not fork the worker")
        return Job(self, pid)

    def exit_code(self, pid: int) -> int | None:
        with self._cond:
            if pid in self._exits:
                return self._exits[pid]
            return -signal.SIGKILL if self.gone else None  # its workers die with it

    def wait_for(self, pid: int, timeout: float | None) -> int | None:
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exits or self.gone, timeout=timeout)
        return self.exit_code(pid)

    def alive(self) -> bool:
        return not self.gone and self.proc.poll() is None

    def close(self) -> None:
        """Close its pipe: it quits (killing any worker still running) and is reaped."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_lock = threading.Lock()
_current: _Zygote | None = None
_broken = False


def _enabled() -> bool:
    return sys.platform.startswith("linux") and os.environ.get(ENV_OFF, "1") != "0" and not _broken


def _zygote() -> _Zygote | None:
    global _current, _broken
    with _lock:
        if _current is not None and not _current.alive():
            _current.close()
            _current = None
        if not _enabled():
            return None
        if _current is None:
            try:
                _current = _Zygote()
            except OSError:
                _broken = True  # this process spawns plainly from now on
        return _current


def spawn(code: str, argv: Sequence[str] = (), *, env: Mapping[str, str] | None = None, stdout: Path | str,
          stderr: Path | str | None = None, cwd: Path | str | None = None) -> Job | subprocess.Popen[bytes]:
    """Run `code` as ``python -c code *argv`` would, in a new session, stdin empty, stdout appended to the file
    `stdout` and stderr to `stderr` (None: the same file). Returns an object with pid, poll, wait, kill,
    send_signal and returncode; the worker leads its own process group, so `os.killpg(job.pid, ...)` reaches
    everything it started."""
    env = dict(os.environ if env is None else env)
    cwd = str(cwd if cwd is not None else os.getcwd())
    zygote = _zygote()
    if zygote is not None:
        request = {"code": code, "argv": [str(a) for a in argv], "env": env, "cwd": cwd, "sys_path": list(sys.path),
                   "stdout": str(stdout), "stderr": str(stderr) if stderr is not None else ""}
        try:
            return zygote.fork(request)
        except OSError:
            pass  # the zygote died under us (killed, out of memory): this worker starts the plain way
    with open(stdout, "ab") as out:
        err: IO[bytes] | int = open(stderr, "ab") if stderr is not None else subprocess.STDOUT
        try:
            return subprocess.Popen([sys.executable, "-c", code, *map(str, argv)], stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, env=env, cwd=cwd, start_new_session=True)
        finally:
            if not isinstance(err, int):
                err.close()


def descendants(pid: int) -> list[int]:
    """The live processes below `pid` (read from /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    state, ppid = fh.read().rsplit(b")", 1)[1].split()[:2]
                if state != b"Z":  # a zombie is gone already, only not yet reaped
                    children.setdefault(int(ppid), []).append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def kill_all(pid: int) -> None:
    """SIGKILL a worker, its process group and every process below it: tools such as ninja start their compilers
    in process groups of their own, which a group kill alone does not reach."""
    below = descendants(pid)
    for target in (pid, *below):
        for kill in (os.killpg, os.kill):
            try:
                kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def stop() -> None:
    """Let this process's zygote go now (and any worker it still runs); the next `spawn` starts a fresh one."""
    global _current
    with _lock:
        if _current is not None:
            _current.close()
            _current = None


def pid() -> int | None:
    """This process's live zygote's pid, or None (tests tell it from a worker left behind)."""
    current = _current
    return current.proc.pid if current is not None and current.alive() else None


atexit.register(stop)
