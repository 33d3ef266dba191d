"""Run a grading kernel in a throwaway sandbox built by bubblewrap (`bwrap`, the sandbox Flatpak uses).

The kernel gets new user, mount, PID, IPC, network and UTS namespaces and no capabilities, so the mounts it
sees cannot be undone from inside. It sees only what it needs, read-only: the system's programs and libraries,
Python and the virtual environment, this package (and the precompiled C++ headers when there are some). Writable:
its working folder (a copy of the student's own files), a scratch home, a private `/tmp` and `/dev/shm`, and the
folder of its connection file and sockets (IPC: no network at all). The course source, `.git`, other submissions
and the grader's output are not mounted at all. Every process the kernel starts lives in its PID namespace and
dies with it (bwrap's `--die-with-parent`; a namespace ends when its first process does).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["INSTALL", "Box", "available", "contained", "kernel_argv"]

INSTALL = ("install bubblewrap (Debian/Ubuntu: sudo apt-get install -y bubblewrap; Fedora: sudo dnf install "
           "bubblewrap), or pass --no-sandbox for submissions you trust")

# /etc files a kernel needs (names, the dynamic linker's cache, compilers chosen through alternatives, TLS roots);
# the rest of /etc (e.g. /etc/shadow, readable by root) is not mounted
_ETC = ("passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives",
        "ssl", "ca-certificates", "localtime", "timezone", "mime.types")


@dataclass(frozen=True)
class Box:
    """The folders of one sandboxed run: `work` (the kernel's working folder), `home` (scratch) and `runtime`
    (connection file and sockets) are writable; `readable` adds read-only folders."""

    work: Path
    home: Path
    runtime: Path
    readable: tuple[Path, ...] = ()


def bwrap() -> str | None:
    return shutil.which("bwrap")


def _namespaces() -> list[str]:
    return ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--cap-drop", "ALL", "--die-with-parent", "--new-session"]


def _system() -> list[str]:
    """Read-only binds of the system's programs and libraries (merged-/usr symlinks kept as symlinks)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / top
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in _ETC:
        if (Path("/etc") / name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return args + ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]


def python_folders() -> list[Path]:
    """What this Python needs to run: its prefixes (a virtual environment and the interpreter it came from) and
    this package's folder (outside them in an editable install; never the repository around it)."""
    package = Path(__file__).resolve().parents[1]
    paths = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent,
             package}
    return sorted(p for p in paths if not any(p != q and p.is_relative_to(q) for q in paths))


@functools.cache
def available() -> bool:
    """True when bubblewrap is installed and can build a sandbox here (user namespaces allowed)."""
    exe = bwrap()
    if not sys.platform.startswith("linux") or exe is None:
        return False
    probe = [exe, *_namespaces(), *_system(), "--", "/bin/true" if Path("/bin/true").exists() else "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=20, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def kernel_argv(box: Box, kernel: Sequence[str] | None = None) -> list[str]:
    """The kernelspec argv of a Python kernel sandboxed in `box` (see the module doc)."""
    kernel = list(kernel or [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    args = [bwrap() or "bwrap", *_namespaces(), *_system()]
    for path in [*python_folders(), *box.readable]:
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    for path in (box.work, box.home, box.runtime):
        args += ["--bind", str(path), str(path)]
    args += ["--chdir", str(box.work), "--setenv", "HOME", str(box.home), "--setenv", "TMPDIR", "/tmp",
             # ipykernel would watch the launcher's pid, which a PID namespace cannot see (it would quit at once);
             # --die-with-parent does that job
             "--unsetenv", "JPY_PARENT_PID"]
    return [*args, "--", *kernel]


_CONTAIN = ["--unshare-user-try", "--unshare-pid", "--die-with-parent", "--bind", "/", "/", "--dev-bind", "/dev", "/dev",
            "--proc", "/proc"]


@functools.cache
def _can_contain() -> bool:
    exe = bwrap()
    if not sys.platform.startswith("linux") or exe is None:
        return False
    try:
        return subprocess.run([exe, *_CONTAIN, "--", "true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def contained(argv: Sequence[str]) -> list[str]:
    """`argv` in a PID namespace of its own, seeing the whole file system as it is (a learner's own validation,
    not a sandbox): everything it starts dies when it ends or when its parent does. Unchanged without bwrap."""
    if not _can_contain():
        return list(argv)
    return [bwrap() or "bwrap", *_CONTAIN, "--chdir", os.getcwd(), "--", *argv]
