"""Distributed lens overhead: the same 2-rank DDP step (gloo, CPU, one thread per rank) with and without the
recording (comm hook timing every bucket, autograd hooks on every backward node, memory samples).

Reported: the median iteration time per setting (iterations 2.. of each run, so DDP's bucket rebuild after
the first backward is excluded; the median over both ranks and all alternated runs), their ratio (target
<= 1.5), the peak RSS of each worker process and their sum (ru_maxrss), and the wall time of one `ddp_trace()`
and one `fsdp_trace()` call as a notebook would make them (process start and torch import included).
Run: .venv/bin/python benchmarks/bench_distributed.py [pairs] [iterations]
"""

from __future__ import annotations

import statistics
import sys
import time

from torchlens_widgets.lenses.distributed import DistTrace, ddp_trace, fsdp_trace


def iteration_times(trace: DistTrace, skip: int = 2) -> list[float]:
    """µs of every iteration from `skip` on, over all ranks."""
    return [s.end - s.start for r in trace.ranks for s in r.iterations[skip:]]


def main(pairs: int = 3, iterations: int = 30) -> None:
    with_rec: list[float] = []
    without: list[float] = []
    rss: list[int] = []
    for i in range(pairs):  # alternate, so drift in machine load hits both alike
        for record in ((False, True) if i % 2 == 0 else (True, False)):
            trace = ddp_trace(bucket_cap_mb=0.001, iterations=iterations, record=record)
            (with_rec if record else without).extend(iteration_times(trace))
            if record:
                rss = [r.peak_rss for r in trace.ranks]
    a, b = statistics.median(without), statistics.median(with_rec)
    print(f"DDP step, 2 ranks, {iterations} iterations x {pairs} runs per setting (median iteration, µs):")
    print(f"  without recording {a:9.1f}")
    print(f"  with recording    {b:9.1f}")
    print(f"  overhead ratio    {b / a:9.2f}   (target <= 1.5)")
    print("peak RSS per worker: " + ", ".join(f"rank {r} {v / 2**20:.0f} MiB" for r, v in enumerate(rss))
          + f"; summed over workers {sum(rss) / 2**20:.0f} MiB")
    t = time.perf_counter()
    ddp_trace(bucket_cap_mb=0.001, no_sync=True)
    t_ddp = time.perf_counter() - t
    t = time.perf_counter()
    f = fsdp_trace()
    t_fsdp = time.perf_counter() - t
    print(f"wall time: ddp_trace(no_sync=True) {t_ddp:.1f} s, fsdp_trace() {t_fsdp:.1f} s; "
          f"FSDP worker peak RSS summed {sum(r.peak_rss for r in f.ranks) / 2**20:.0f} MiB")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
