"""Caching-allocator simulator: replay of a 100,000-event trace under several settings (target ≤ 1 s).

The trace is synthetic (a stack of tensors, sizes log-uniform 512 B–64 MiB, half of the steps free,
streams 0 and 7), in the `device_traces` format of torch.cuda.memory._snapshot().
Run: .venv/bin/python benchmarks/bench_allocator.py
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

from torchlens_widgets.lenses.allocator import replay


def synthetic_trace(n_events: int, seed: int = 0) -> list[dict[str, Any]]:
    """Allocation/free events by fake address; a free is free_requested + free_completed."""
    rng = random.Random(seed)
    live: list[int] = []
    events: list[dict[str, Any]] = []
    addr = 0
    while len(events) < n_events:
        if live and rng.random() < 0.5:
            a = live.pop(rng.randrange(len(live))) if rng.random() < 0.3 else live.pop()
            events.append({"action": "free_requested", "addr": a, "size": 0, "stream": 0})
            events.append({"action": "free_completed", "addr": a, "size": 0, "stream": 0})
        else:
            addr += 1
            live.append(addr)
            size = int(math.exp(rng.uniform(math.log(512), math.log(64 << 20))))
            events.append({"action": "alloc", "addr": addr, "size": size, "stream": rng.choice((0, 0, 0, 7))})
    return events[:n_events]


def main() -> None:
    events = synthetic_trace(100_000)
    print(f"{'settings':<48} {'replay s':>9} {'reserved peak GiB':>18} {'segments':>9}")
    for settings in ({}, {"max_split_size_mb": 64}, {"expandable_segments": True},
                     {"roundup_power2_divisions": 4}, {"capacity": 8 << 30, "garbage_collection_threshold": 0.6}):
        best = math.inf
        for _ in range(3):
            t0 = time.perf_counter()
            sim = replay(events, **settings)
            best = min(best, time.perf_counter() - t0)
        st = sim.stats()
        print(f"{str(settings or 'defaults'):<48} {best:>9.3f} {st['reserved_bytes.all.peak'] / 2**30:>18.2f} "
              f"{st['segment.all.current']:>9}")


if __name__ == "__main__":
    main()
