"""Execution time and peak memory of each course notebook in a fresh kernel (targets: ≤ 60 s each on 2
cores, ≤ 90 s for the C++ notebooks with their builds; ≤ 1.5 GB peak RSS).

Peak memory is sampled every 50 ms over the processes the run starts: the kernel, separately the largest
other one (a compiler, for notebooks that build C++), and the sum over all of them at one moment (notebook 18
runs two ranks beside the kernel; Binder gives the whole course 2 GB). Outputs are not written back.
Run: .venv/bin/python benchmarks/bench_notebooks.py [NOTEBOOK...]
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import psutil

from torchlens_widgets.course.execute import execute_notebook

ROOT = Path(__file__).resolve().parents[1]


def _sample(stop: threading.Event, peaks: dict[str, int]) -> None:
    me = psutil.Process()
    while not stop.is_set():
        try:
            kids = me.children(recursive=True)
        except psutil.Error:
            kids = []
        total = 0
        for k in kids:
            try:
                rss, cmd = k.memory_info().rss, " ".join(k.cmdline()[:3])
            except psutil.Error:
                continue
            key = "kernel" if "ipykernel" in cmd else "other"
            peaks[key] = max(peaks.get(key, 0), rss)
            total += rss
        peaks["summed"] = max(peaks.get("summed", 0), total)
        time.sleep(0.05)


def main(argv: list[str]) -> None:
    paths = [Path(a) for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    print(f"{'notebook':<44} {'seconds':>8} {'kernel peak':>12} {'largest other':>14} {'summed peak':>12}")
    for p in paths:
        peaks: dict[str, int] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(stop, peaks), daemon=True)
        sampler.start()
        try:
            run = execute_notebook(p, timeout=600)
        finally:
            stop.set()
            sampler.join()
        print(f"{p.name:<44} {run.seconds:>8.1f} {peaks.get('kernel', 0) / 2**20:>9.0f} MB "
              f"{peaks.get('other', 0) / 2**20:>11.0f} MB {peaks.get('summed', 0) / 2**20:>9.0f} MB")


if __name__ == "__main__":
    main(sys.argv[1:])
