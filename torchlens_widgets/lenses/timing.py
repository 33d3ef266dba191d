"""Timing that means something on a shared machine: best-of-N wall time on one thread."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["best_ms", "one_thread"]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run PyTorch on one thread inside the block (a busy core cannot stall a kernel mid-measurement)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
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
