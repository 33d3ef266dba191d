"""Compile-lens overhead, side by side in one run: the first call of a function under plain torch.compile vs
under compile_trace (which also records graphs, breaks, guards, AOT graphs and kernels with provenance).
Each measurement is a fresh process (fresh Dynamo state) sharing one Inductor cache folder that a warm-up
run filled, so both sides find the same compiled C++ kernels on disk; the median of 3 runs each is compared.
Target (issue 11): lens / plain ≤ 1.5. Run: .venv/bin/python benchmarks/bench_compile_trace.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import sys, time, torch
sys.path.insert(0, sys.argv[2])

def step(x, w):
    h = (x @ w).relu()
    h = h * torch.sigmoid(h) + 0.5
    print(end="")                      # one graph break, as learners' code has
    return (h - h.mean(dim=1, keepdim=True)).square().sum()

x, w = torch.randn(256, 128), torch.randn(128, 128)
t0 = time.perf_counter()
if sys.argv[1] == "plain":
    torch.compile(step)(x, w)
else:
    from torchlens_widgets.lenses.compile_trace import compile_trace
    trace = compile_trace(step, x, w)
    assert trace.graph_count == 2 and trace.break_count == 1 and trace.kernel_count >= 2, trace.summary()
print(f"{time.perf_counter() - t0:.3f}")
"""


def _run(kind: str, env: dict[str, str]) -> float:
    done = subprocess.run([sys.executable, "-c", CHILD, kind, str(ROOT)], capture_output=True, text=True, env=env,
                          timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{kind} run failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tlw-bench-inductor-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        cold = _run("plain", env)  # fills the kernel cache both sides then share
        times: dict[str, list[float]] = {"plain": [], "lens": []}
        for _ in range(3):
            for kind in ("plain", "lens"):
                times[kind].append(_run(kind, env))
    plain, lens = statistics.median(times["plain"]), statistics.median(times["lens"])
    print(f"first compile ever (empty Inductor cache, plain torch.compile): {cold:.2f} s")
    for kind, label in (("plain", "torch.compile"), ("lens", "compile_trace")):
        print(f"{label:14s} first call, median of 3: {statistics.median(times[kind]):.2f} s "
              f"({', '.join(f'{t:.2f}' for t in times[kind])})")
    print(f"\ncompile_trace / torch.compile = {lens / plain:.2f} (target ≤ 1.5) {'OK' if lens / plain <= 1.5 else 'OVER'}")


if __name__ == "__main__":
    main()
