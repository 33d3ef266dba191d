"""Run a notebook's cells in a fresh kernel under limits: what grading and validating both use.

Each cell gets `cell_timeout` seconds (a cell past it is interrupted and the run goes on), the whole run
`timeout` seconds, and the kernel's process tree `memory_mb` of resident memory (checked every 50 ms;
past it the tree is killed). Every code cell ends with a status: "ok", "error", "timeout",
"out-of-memory", "kernel died" or "not run". The learner's progress store and home are never touched:
the kernel gets a throwaway progress file and its own home folder.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbformat import NotebookNode

from ..lenses import zygote
from . import attest as attestation
from . import sandbox
from .execute import progress_redirected

__all__ = ["Limits", "Run", "SandboxError", "kill_tree", "run_cells"]

_KERNEL = "torchlens-grader"
_GRACE_S = 3.0  # how long a cell interrupted at the run's time limit has to stop before the kernel is killed
_TIMEOUT = "CellTimeout"  # the error a cell past its limit gets (it is interrupted, and the run goes on)


class SandboxError(RuntimeError):
    """A sandboxed run was asked for where no sandbox can be built (says what to install)."""


@dataclass(frozen=True)
class Limits:
    """How long and how large a run may get."""

    timeout: float = 600.0  # the whole notebook, kernel start included
    cell_timeout: float = 120.0
    memory_mb: float = 4000.0  # resident memory of the kernel and every process it starts


@dataclass
class Run:
    """What happened: each code cell's status (by index), why the run stopped early (if it did), the time
    it took, the peak resident memory seen and whether the kernel could read hidden folders."""

    status: dict[int, str] = field(default_factory=dict)
    stopped: str | None = None
    seconds: float = 0.0
    peak_mb: float = 0.0
    sandboxed: bool = False
    # per attested cell (see `attest`): (outcomes recorded, findings), or None when no valid signed report came
    attested: dict[int, tuple[list[bool], list[str]] | None] = field(default_factory=dict)
    attest_error: str | None = None  # why the grader could not start attesting (then nothing is attested)


def _rss_mb(pids: Sequence[int]) -> float:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/statm") as fh:
                total += int(fh.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total * os.sysconf("SC_PAGE_SIZE") / 2**20


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and every process below it (their process groups too)."""
    zygote.kill_all(pid)


class _Watch(threading.Thread):
    """Polls the kernel's process tree: kills it past the memory cap, and at `deadline`."""

    def __init__(self, pid: int, memory_mb: float, deadline: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.memory_mb, self.deadline = pid, memory_mb, deadline
        self.peak = 0.0
        self.killed: str | None = None
        self.done = threading.Event()

    def run(self) -> None:
        pids: list[int] = []
        tick = 0
        while not self.done.wait(0.05):
            if tick % 10 == 0:  # the tree is re-read every 0.5 s; resident memory every 50 ms
                pids = [self.pid, *zygote.descendants(self.pid)]
            tick += 1
            rss = _rss_mb(pids)
            self.peak = max(self.peak, rss)
            if rss > self.memory_mb:
                self.killed = "out-of-memory"
            elif time.monotonic() > self.deadline:
                self.killed = "timeout"
            if self.killed:
                kill_tree(self.pid)
                return


def _kernelspec(folder: Path, box: sandbox.Box | None) -> None:
    spec = folder / "kernels" / _KERNEL
    spec.mkdir(parents=True)
    if box is None:
        argv, interrupt = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"], "signal"
    else:  # bwrap does not pass signals on: the kernel is interrupted by a message on its control channel
        argv, interrupt = sandbox.kernel_argv(box), "message"
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "grader", "language": "python",
                                                  "interrupt_mode": interrupt}))


def run_cells(nb: NotebookNode, cwd: Path, limits: Limits, *, sandboxed: bool = False,
              readable: Sequence[Path] = (), pid_file: Path | None = None, own_home: bool = True,
              attest: Mapping[int, str] | None = None) -> Run:
    """Execute `nb` in place (outputs land in its cells) with a kernel started in `cwd`; see the module doc.

    `sandboxed`: the kernel runs in a bubblewrap sandbox (`sandbox`) that mounts `cwd` (writable), a scratch
    home and read-only `readable` folders besides what Python needs, nothing else; SandboxError when this machine
    cannot build one. `own_home=False` keeps the user's home (and its build cache) for an unsandboxed run.
    `attest` ({cell index: grade_id}): before any cell, give the kernel a secret key, and after each of these cells
    read back the check's signed report (`course.attest`) into `Run.attested`."""
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    if sandboxed and not sandbox.available():
        raise SandboxError(f"this machine cannot sandbox a kernel: {sandbox.INSTALL}")
    run = Run(sandboxed=sandboxed)
    t0 = time.monotonic()
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "HOME", "IPYTHONDIR", "TORCHLENS_BUILD_DIR",
                                            "TORCHLENS_PROGRESS")}
    with tempfile.TemporaryDirectory(prefix="torchlens-run-") as tmp, progress_redirected():
        home, runtime = Path(tmp) / "home", Path(tmp) / "runtime"
        home.mkdir()
        runtime.mkdir(mode=0o700)
        box = sandbox.Box(Path(cwd).resolve(), home, runtime, tuple(readable)) if sandboxed else None
        _kernelspec(Path(tmp) / "spec", box)
        os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(Path(tmp) / "spec"), saved["JUPYTER_PATH"]) if p)
        if own_home or sandboxed:  # inherited by the kernel: nothing it writes under ~ outlives the run
            os.environ["HOME"] = str(home)
            os.environ["IPYTHONDIR"] = str(home / ".ipython")
            os.environ["TORCHLENS_BUILD_DIR"] = str(home / ".cache" / "extensions") if sandboxed else \
                saved["TORCHLENS_BUILD_DIR"] or str(Path(tmp) / "build")
        if sandboxed:  # the progress store too must be inside what the kernel can write
            os.environ["TORCHLENS_PROGRESS"] = str(home / "progress.json")
        try:
            replies: dict[int, str] = {}

            full: dict[int, dict] = {}

            def record(cell: Any, cell_index: int, execute_reply: dict) -> None:
                replies[cell_index] = str(execute_reply.get("content", {}).get("status"))
                full[cell_index] = execute_reply

            # sandboxed: the kernel talks over Unix sockets in `runtime` (it has no network), its connection file there
            km = AsyncKernelManager(kernel_name=_KERNEL, transport="ipc", ip=str(runtime / "kernel"),
                               connection_file=str(runtime / "kernel.json")) if sandboxed else None
            client = NotebookClient(nb, km=km, on_cell_executed=record, timeout=int(max(1, limits.cell_timeout)),
                                    kernel_name=_KERNEL, allow_errors=True,
                                    error_on_timeout={"ename": _TIMEOUT, "evalue": "the cell ran past its time limit",
                                                      "traceback": []},
                                    startup_timeout=int(max(10, min(limits.timeout, 120))),
                                    shutdown_kernel="immediate", resources={"metadata": {"path": str(cwd)}})
            key, nonces = _execute(client, nb, limits, run, t0, pid_file, attest or {})
            for i, gid in (attest or {}).items():
                text = _expression(full.get(i), "tlw") if i in nonces else None
                run.attested[i] = attestation.verify(key, nonces[i], gid, text) if text is not None else None
            for i, status in run.status.items():
                # the kernel's own reply: an answer that swallows errors (a custom exception handler) leaves no
                # error output, but the reply still says the cell failed
                if status == "ok" and replies.get(i) != "ok":
                    run.status[i] = "error"
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    run.seconds = round(time.monotonic() - t0, 2)
    return run


_ATTEST = "__import__('torchlens_widgets.course.attest', fromlist=['attest'])"


def _expression(reply: dict[str, Any] | None, name: str) -> str | None:
    """The text value of user expression `name` in an execute reply (a str the kernel repr'ed), or None."""
    value = ((reply or {}).get("content", {}).get("user_expressions") or {}).get(name) or {}
    text = value.get("data", {}).get("text/plain") if value.get("status") == "ok" else None
    try:
        out = ast.literal_eval(text) if isinstance(text, str) else None
    except (ValueError, SyntaxError):
        return None
    return out if isinstance(out, str) else None


def _start_attesting(client: Any, key: str) -> str | None:
    """Give the fresh kernel the run's key (a user expression: no input transformer sees it); None when it took."""
    try:
        msg_id = client.kc.execute("", silent=True, store_history=False,
                                   user_expressions={"tlw": f"{_ATTEST}.start({key!r})"})
        reply = client.wait_for_reply(msg_id)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    said = _expression(reply, "tlw")
    return None if said == "started" else f"the kernel answered {said!r}"


def _execute(client: Any, nb: NotebookNode, limits: Limits, run: Run, t0: float, pid_file: Path | None,
             attest: Mapping[int, str]) -> tuple[str, dict[int, str]]:
    """Run the cells (see run_cells); returns the attesting key and each attested cell's nonce."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    codes = [i for i, c in enumerate(nb.cells) if c.get("cell_type") == "code"]
    try:
        client_context = client.setup_kernel()
        client_context.__enter__()
    except Exception as exc:  # the kernel never started: nothing ran
        run.stopped = f"the kernel did not start ({type(exc).__name__}: {exc})"
        run.status = dict.fromkeys(codes, "not run")
        return "", {}
    watch = None
    pid = None
    key = secrets.token_hex(16)
    nonces: dict[int, str] = {}
    try:
        pid = getattr(getattr(client.km, "provisioner", None), "pid", None)
        if pid_file is not None and isinstance(pid, int):
            pid_file.write_text(str(pid))
        if isinstance(pid, int):
            # a backstop: a cell past the run's time is interrupted first; one that ignores that is killed
            watch = _Watch(pid, limits.memory_mb, t0 + limits.timeout + _GRACE_S)
            watch.start()
        if attest:
            run.attest_error = _start_attesting(client, key)
        execute = client.kc.execute
        for n, i in enumerate(codes):
            if i in attest and run.attest_error is None:  # this cell's check reports back, signed, with a nonce
                nonces[i] = secrets.token_hex(8)
                expression = f"{_ATTEST}.report({nonces[i]!r}, {attest[i]!r})"
                client.kc.execute = functools.partial(execute, user_expressions={"tlw": expression})
            else:
                client.kc.execute = execute
            left = limits.timeout - (time.monotonic() - t0)
            if left <= 0:
                run.stopped = "timeout"
            if run.stopped:
                run.status.update(dict.fromkeys(codes[n:], run.stopped))
                break
            client.timeout = int(max(1, min(limits.cell_timeout, left)))
            # past its own limit a cell is interrupted and the run goes on; at the run's limit the run just stops
            client.interrupt_on_timeout = left > limits.cell_timeout
            began = time.monotonic()
            try:
                client.execute_cell(nb.cells[i], i)
                interrupted = time.monotonic() - began >= client.timeout  # nbclient interrupted it at its limit
                errors = [o for o in nb.cells[i].get("outputs", []) if o.get("output_type") == "error"]
                names = {o.get("ename") for o in errors}
                run.status[i] = ("timeout" if interrupted or _TIMEOUT in names else "out-of-memory" if "MemoryError" in names
                                 else "error" if errors else "ok")
            except CellTimeoutError:  # the run's time is up
                run.status[i] = "timeout"
                run.stopped = "timeout"
            except DeadKernelError:
                reason = watch.killed if watch is not None and watch.killed else "kernel died"
                run.status[i] = reason
                run.stopped = reason
            if watch is not None and watch.killed and not run.stopped:
                run.stopped = watch.killed
    finally:
        if watch is not None:
            watch.done.set()
            watch.join()
            run.peak_mb = round(watch.peak, 1)
        try:
            client_context.__exit__(None, None, None)
        except Exception:
            pass
        if isinstance(pid, int):
            kill_tree(pid)  # what the kernel started and left behind
    return key, nonces
