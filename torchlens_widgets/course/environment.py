"""What this machine has for the course: the pinned torch, a C++ compiler and ninja, Triton, a GPU, memory.

`check_environment()` returns one `Need` per requirement (plain data, fast, never raises); `environment_report()`
says it as a table with the fix for each missing piece. start-here's self-check cell prints it.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["TORCH_PIN", "TRITON_PIN", "Need", "check_environment", "environment_report"]

TORCH_PIN = "2.13.0"  # every fact the notebooks assert was checked against this version
TRITON_PIN = "3.7.1"  # the Triton torch 2.13.0 pins (pyproject's triton extra)
MIN_MEMORY_MB = 1500  # what making the precompiled C++ headers asks for (lenses.precompiled.MIN_FREE_MB)


@dataclass(frozen=True)
class Need:
    """One requirement: what it is, whether this machine meets it, what was found, which notebooks need it and
    how to get it."""

    what: str
    ok: bool
    found: str
    needed_for: str
    fix: str = ""
    required: bool = True  # False: the course runs without it (e.g. a GPU: its cells show recordings)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _first_line(cmd: list[str]) -> str | None:
    """The first line `cmd` prints, or None when it is missing, fails or takes over 10 s."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None


def _memory_mb() -> float | None:
    """Memory available to a new process: the machine's, or its container's limit (Binder's 2 GB is one)."""
    from ..lenses.precompiled import _free_mb

    free = _free_mb()
    return None if free == float("inf") else free


def check_environment() -> list[Need]:
    """Every requirement of the course, checked on this machine (about a second: it asks the compiler for its
    version; it does not import Triton or start CUDA)."""
    needs: list[Need] = []
    py = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    needs.append(Need("Python 3.10 or newer", sys.version_info >= (3, 10), py, "every notebook",
                      "install Python 3.10+ and make the course's environment with it"))
    torch_v = _version("torch")
    base = (torch_v or "").split("+")[0]
    needs.append(Need(f"torch {TORCH_PIN}", base == TORCH_PIN, torch_v or "not installed", "every notebook",
                      f'pip install "torch=={TORCH_PIN}" (the notebooks assert facts of this version; another '
                      "version fails some of them)"))
    cxx = _first_line([os.environ.get("CXX", "c++"), "--version"])
    needs.append(Need("a C++ compiler (g++)", cxx is not None, cxx or "not found",
                      "09, 10, 11, 19, 20, and torch.compile in 13, 16, 20 (Inductor writes C++ for a CPU)",
                      "apt-get install g++ (or set $CXX)"))
    ninja = _first_line(["ninja", "--version"])
    needs.append(Need("ninja", ninja is not None, ninja or "not found", "09, 10, 11, 19, 20",
                      "apt-get install ninja-build (or pip install ninja)"))
    triton_v = _version("triton")
    needs.append(Need(f"Triton {TRITON_PIN}", triton_v == TRITON_PIN, triton_v or "not installed", "17",
                      f'pip install "triton=={TRITON_PIN}" (Linux x86-64)'))
    gpu = "none: its cells show recordings of an NVIDIA H200"
    if "torch" in sys.modules or torch_v is not None:
        try:
            import torch

            if torch.cuda.is_available():
                gpu = torch.cuda.get_device_name(0)
        except Exception as exc:  # a broken CUDA install must not stop the self-check
            gpu = f"none usable ({type(exc).__name__})"
    needs.append(Need("a GPU (optional)", not gpu.startswith("none"), gpu, "the GPU cells of 07, 08, 10, 12–18",
                      "", required=False))
    mem = _memory_mb()
    needs.append(Need(f"{MIN_MEMORY_MB / 1000:.1f} GB of free memory", mem is None or mem >= MIN_MEMORY_MB,
                      "unknown" if mem is None else f"{mem / 1000:.1f} GB", "09, 10, 11, 19, 20 (making the precompiled headers)",
                      "close other notebooks' kernels (Kernel > Shut Down Kernel)"))
    return needs


def environment_report(needs: list[Need] | None = None) -> str:
    """The requirements as a table: ok or missing, what was found, which notebooks need it, and the fix."""
    needs = check_environment() if needs is None else needs
    width = max(len(n.what) for n in needs)
    lines = []
    for n in needs:
        mark = "ok" if n.ok else ("missing" if n.required else "-")
        lines.append(f"{mark:8s} {n.what:{width}s}  {n.found}  (for {n.needed_for})")
        if not n.ok and n.fix and n.required:
            lines.append(f"{'':8s} {'':{width}s}  fix: {n.fix}")
    missing = [n.what for n in needs if n.required and not n.ok]
    lines.append("everything the course needs is here" if not missing else
                 f"missing: {', '.join(missing)}: install it before the notebooks listed")
    return "\n".join(lines)
