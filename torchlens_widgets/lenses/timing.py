"""Timing that means something on a shared machine: best-of-N wall time on one thread."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["best_ms", "one_thread", "steady_heap", "threads"]


_STEADY = False


def steady_heap() -> bool:
    """Make glibc keep freed memory in the process (no mmap per large tensor, no trimming), once per process.

    Otherwise a large CPU tensor may come fresh from the OS on one call and from the heap on the next, and a
    timing measures page faults in some runs but not others; PyTorch's CUDA caching allocator avoids the same
    cost on GPUs. The process keeps its peak heap afterwards. False where the C library is not glibc.
    """
    global _STEADY
    if _STEADY:
        return True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's mallopt parameter numbers
        ok = libc.mallopt(m_mmap_threshold, 1 << 30) == 1 and libc.mallopt(m_trim_threshold, 1 << 62) == 1
    except (OSError, AttributeError):
        return False
    _STEADY = bool(ok)
    return _STEADY


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run PyTorch on one thread inside the block (a busy core cannot stall a kernel mid-measurement)."""
    with threads(1):
        yield


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """Run PyTorch's intra-op pool (OpenMP's, for extensions built with -fopenmp too) with `n` threads inside the
    block, and put the count back after it, also when the block raises."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def best_ms(fn: Callable[[], Any], repeat: int = 7) -> float:
    """Best-of-`repeat` wall time of fn() in milliseconds, on one thread, after a warm-up call."""
    with one_thread():
        fn()
        best = math.inf
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
    return best * 1e3
