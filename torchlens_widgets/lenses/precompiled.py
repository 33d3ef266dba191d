"""Precompiled lean headers: the compiler's parsed state of the lean header set, saved once per machine (a GCC
`.gch` file, ~300 MB), so a cold build of a new op parses only the op: about 4 s of compiling here instead of 10.

Kept in the course build cache, one slot per compiler, torch, Python, header set and flags. GCC checks a `.gch`
on every use and reads the real headers when it does not match, so a stale one costs time, never correctness.
Made by `prepare()` (Binder's postBuild, `python -m torchlens_widgets.lenses.precompiled`) or in the background
after the first lean build that had none.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .. import busy

__all__ = ["HEADER", "PrecompileError", "being_made", "cflags_of", "enabled", "generate", "rejected", "slot",
           "start_generating", "usable"]

HEADER = "tlw_lean.h"  # the one header a lean build includes when the precompiled state exists
ENV_DIR = "TORCHLENS_PCH_DIR"  # where the slots live (default: <build cache>/precompiled)
ENV_OFF = "TORCHLENS_PRECOMPILE"  # "0": never make or use precompiled headers
MIN_FREE_MB = 1500  # making one peaks at ~0.9 GB here: not in the background on a machine with less free
_LOCK = ".making"
_STALE_S = 600.0
_REJECTED = re.compile(r"\[-Winvalid-pch\]|while reading precompiled header")  # GCC's words for "not used"


class PrecompileError(RuntimeError):
    """Precompiling the lean headers failed; the message says why (builds still work, only slower)."""


def enabled() -> bool:
    """Whether to make and use precompiled headers: not where $TORCHLENS_PRECOMPILE is "0", and only with GCC
    (a `.gch` is GCC's format; clang's differs)."""
    ident = _compiler_id().lower()
    return os.environ.get(ENV_OFF, "1") != "0" and bool(ident) and "clang" not in ident


@functools.lru_cache(maxsize=4)
def _compiler_id(cxx: str | None = None) -> str:
    """The compiler's first --version line (part of the slot key: a .gch belongs to one compiler build)."""
    try:
        done = subprocess.run([cxx or os.environ.get("CXX", "c++"), "--version"], capture_output=True, text=True,
                              timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.splitlines()[0] if done.returncode == 0 and done.stdout else ""


def slot(root: Path, headers: Sequence[str], flags: Sequence[str]) -> Path:
    """The folder for these headers and flags under `root`: `HEADER` and its `.gch` live there."""
    import torch
    from torch.utils.cpp_extension import include_paths

    ident = json.dumps([_compiler_id(), torch.__version__, include_paths(), sys.version, list(headers), list(flags)])
    return Path(root) / hashlib.sha256(ident.encode()).hexdigest()[:12]


def usable(folder: Path) -> bool:
    """A finished precompiled header is in `folder` (its header and `.gch` both there)."""
    return (folder / HEADER).is_file() and (folder / (HEADER + ".gch")).is_file()


def cflags_of(build_folder: Path) -> list[str] | None:
    """The compile flags of a load_inline build (its build.ninja), minus the per-library name macro: the
    flags the precompiled header must be made with to match that kind of build."""
    try:
        text = (Path(build_folder) / "build.ninja").read_text(errors="replace")
    except OSError:
        return None
    line = next((ln for ln in text.splitlines() if ln.startswith("cflags = ")), None)
    if line is None:
        return None
    return [f for f in line.split(" = ", 1)[1].split() if not f.startswith("-DTORCH_EXTENSION_NAME=")]


def rejected(output: str) -> bool:
    """Whether the compiler said (with -Winvalid-pch) that it did not use the precompiled header, or that it
    could not read it (a damaged file)."""
    return bool(_REJECTED.search(output))


def _free_mb() -> float:
    """Memory free for a new process: the machine's available memory, or the container's limit (cgroup v2) less
    what it uses, whichever is smaller (Binder's 2 GB is a cgroup limit; /proc/meminfo shows the host)."""
    free = float("inf")
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            free = min(free, (int(limit) - used) / 2**20)
    except (OSError, ValueError):
        pass
    return free


def being_made(folder: Path) -> bool:
    """Another process is making this slot (its lock is fresh)."""
    try:
        return time.time() - (folder / _LOCK).stat().st_mtime < _STALE_S
    except OSError:
        return False


def _take_lock(folder: Path) -> bool:
    """Create the slot's lock (a stale one, left by a killed process, is taken over); False if it is held."""
    lock = folder / _LOCK
    for _ in range(2):
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            if being_made(folder):
                return False
            lock.unlink(missing_ok=True)
    return False


def _run_group(cmd: Sequence[str], timeout: float, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(cmd)` in a process group of its own, killed whole when it runs past `timeout` or the caller
    is interrupted: the compiler driver's own child (cc1plus) does the work, and killing the driver alone left it
    running."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


def generate(folder: Path, cflags: Sequence[str], headers: Sequence[str], *, timeout: float = 600.0) -> float:
    """Make the precompiled header in `folder` now (a subprocess; ~20 s and ~0.9 GB here) and return the
    seconds it took; 0.0 when it was already there. Other processes never see a half-written file. Shows a busy
    line while the compiler runs (`torchlens_widgets.busy`)."""
    folder = Path(folder)
    if usable(folder):
        return 0.0
    with busy.working("precompiling the lean headers", "GCC parses them once for this machine"):
        return _generate(folder, cflags, headers, timeout)


def _generate(folder: Path, cflags: Sequence[str], headers: Sequence[str], timeout: float) -> float:
    folder.mkdir(parents=True, exist_ok=True)
    if not _take_lock(folder):
        raise PrecompileError(f"another process is precompiling the lean headers in {folder}; try again in a minute")
    tmp_header = folder / f".{HEADER}.{os.getpid()}"
    tmp_gch = folder / f".{HEADER}.{os.getpid()}.gch"
    # the compiler's own temp files (GCC writes a cc*.s while it runs, ~20 s, often after the build that started this
    # job returned): in the slot and removed with it, never in the caller's TMPDIR, where a killed job left them
    scratch = folder / f".tmp.{os.getpid()}"
    start = time.monotonic()
    try:
        scratch.mkdir(exist_ok=True)
        tmp_header.write_text("// The lean headers of torchlens-widgets, precompiled once (see lenses/precompiled.py)\n"
                              + "".join(f"#include <{h}>\n" for h in headers))
        cmd = [os.environ.get("CXX", "c++"), *cflags, "-x", "c++-header", str(tmp_header), "-o", str(tmp_gch)]
        try:
            done = _run_group(cmd, timeout, dict(os.environ, TMPDIR=str(scratch)))
        except subprocess.TimeoutExpired:
            raise PrecompileError(f"precompiling the lean headers ran past {timeout:.0f} s and was stopped") from None
        except OSError as exc:
            raise PrecompileError(f"could not run the compiler ({exc}): install g++") from None
        if done.returncode != 0:
            raise PrecompileError("precompiling the lean headers failed: " + (done.stderr or done.stdout)[-600:])
        # the header first, the .gch last: a build that sees the .gch finds its header beside it
        os.replace(tmp_header, folder / HEADER)
        os.replace(tmp_gch, folder / (HEADER + ".gch"))
        (folder / "made.json").write_text(json.dumps({"seconds": round(time.monotonic() - start, 2),
                                                      "cflags": list(cflags), "headers": list(headers)}))
    finally:
        for leftover in (tmp_header, tmp_gch, folder / _LOCK):
            leftover.unlink(missing_ok=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return time.monotonic() - start


def start_generating(folder: Path, cflags: Sequence[str], headers: Sequence[str]) -> str | None:
    """Start `generate` in a detached low-priority process, unless it is there, being made, or this machine
    lacks the memory for it. Returns why it did not start (None when it started)."""
    if usable(folder):
        return "already there"
    if being_made(folder):
        return "being made by another process"
    if _free_mb() < MIN_FREE_MB:
        return f"less than {MIN_FREE_MB} MB of memory free"
    spec = json.dumps({"folder": str(folder), "cflags": list(cflags), "headers": list(headers)})
    try:
        subprocess.Popen([sys.executable, "-m", __name__, "--spec", spec], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        return f"could not start ({exc})"
    return None


def _main(argv: Sequence[str]) -> int:
    """`--spec JSON`: make one slot (the background job). No arguments: prepare this machine's lean slot."""
    if len(argv) == 2 and argv[0] == "--spec":
        os.nice(10)
        spec = json.loads(argv[1])
        try:
            generate(Path(spec["folder"]), spec["cflags"], spec["headers"])
        except PrecompileError:
            return 1
        return 0
    if argv:
        print("usage: python -m torchlens_widgets.lenses.precompiled   (precompile the lean headers once)")
        return 2
    from .build import prepare

    print(prepare())
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
