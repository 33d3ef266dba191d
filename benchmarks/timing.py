"""Shared timing for the benchmark scripts: best-of-N wall time, the least noisy single figure."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any


def best_of(fn: Callable[[], Any], repeat: int = 5) -> float:
    """Smallest wall time in seconds over `repeat` calls of `fn`."""
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
