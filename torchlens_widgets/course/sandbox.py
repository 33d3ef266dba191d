"""Start a grading kernel that cannot read the instructor's files.

The kernel runs in its own Linux mount namespace (``unshare``) where an empty tmpfs covers each hidden
folder (the source notebooks, the other submissions, the grader's output), so a submission that knows
their paths still finds nothing there. ``python -m torchlens_widgets.course.sandbox --hide DIR ... --
KERNEL ARGV`` is the kernel command; it mounts, then replaces itself with the kernel (same pid).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["available", "kernel_argv"]


@functools.cache
def available() -> bool:
    """True when this machine lets us hide folders from a kernel (Linux, ``unshare`` and ``mount`` usable)."""
    unshare, mount = shutil.which("unshare"), shutil.which("mount")
    if not sys.platform.startswith("linux") or unshare is None or mount is None:
        return False
    probe = [unshare, *_flags(), "--", mount, "-t", "tmpfs", "tmpfs", "/mnt"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=10, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _flags() -> list[str]:
    # as root a mount namespace is enough; otherwise a user namespace maps us to root inside it
    return ["--mount"] if os.geteuid() == 0 else ["--user", "--map-root-user", "--mount"]


def kernel_argv(hide: Sequence[Path]) -> list[str]:
    """The kernelspec argv of a Python kernel that sees an empty folder at each path of `hide`."""
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    if not hide:
        return kernel
    unshare = shutil.which("unshare") or "unshare"
    hidden = [arg for p in hide for arg in ("--hide", str(Path(p).resolve()))]
    return [unshare, *_flags(), "--", sys.executable, "-m", __name__, *hidden, "--", *kernel]


def main(argv: list[str]) -> None:
    """Inside the new mount namespace: cover each --hide folder, then exec the kernel command."""
    split = argv.index("--")
    hide, command = argv[:split], argv[split + 1:]
    paths = [hide[i + 1] for i in range(0, len(hide), 2) if hide[i] == "--hide"]
    for path in paths:
        if os.path.isdir(path):
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0555", "tmpfs", path],
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:  # never start a kernel that could read what it must not
                sys.exit(f"torchlens grader: cannot hide {path} from the kernel: {done.stderr.strip()}")
        elif os.path.exists(path):
            subprocess.run(["mount", "--bind", "/dev/null", path], check=True)
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
