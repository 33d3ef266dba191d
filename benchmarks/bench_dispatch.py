"""Dispatch-trace overhead: a GPT-2-small forward traced vs plain (target: ≤ 3×; TorchLens-style logging costs 4–10×).

Run: .venv/bin/python benchmarks/bench_dispatch.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import torch
from models import gpt2_small
from timing import best_of

from torchlens_widgets import dispatch_trace


def traced(model: Any, x: Any) -> int:
    with dispatch_trace(model) as tr:
        model(x)
    return len(tr.ops)


def main() -> None:
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; best of 5")
    print(f"{'workload':<36} {'aten ops':>8} {'plain ms':>9} {'traced ms':>10} {'ratio':>6}")
    for seq in (32, 128):
        model, x = gpt2_small(seq=seq)
        model.eval()
        with torch.no_grad():
            plain = best_of(lambda model=model, x=x: model(x))
            trace = best_of(lambda model=model, x=x: traced(model, x))
            n_ops = traced(model, x)
        print(f"{f'GPT-2 small forward, 1×{seq} tokens':<36} {n_ops:>8,} {plain * 1e3:>9.1f} {trace * 1e3:>10.1f} "
              f"{trace / plain:>6.2f}")
    model, x = gpt2_small(seq=32)
    loss_plain = best_of(lambda: model(x).float().pow(2).mean().backward(), repeat=3)

    def traced_step() -> None:
        with dispatch_trace(model):
            model(x).float().pow(2).mean().backward()

    loss_traced = best_of(traced_step, repeat=3)
    print(f"{'GPT-2 small forward+backward, 1×32':<36} {'':>8} {loss_plain * 1e3:>9.1f} {loss_traced * 1e3:>10.1f} "
          f"{loss_traced / loss_plain:>6.2f}")


if __name__ == "__main__":
    main()
