"""Lens + static SVG time for the stride diagram at growing tensor sizes (target: 10^4 elements ≤ 100 ms).

Run: .venv/bin/python benchmarks/bench_stride.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from timing import best_of

from torchlens_widgets.lenses.layout import layout, read_storage
from torchlens_widgets.render.stride import TensorView, stride_model, stride_svg


def svg_for(t: torch.Tensor) -> str:
    lay = layout(t)
    model = stride_model([TensorView("t", lay)], lambda _k, cells: read_storage(t, cells))
    return stride_svg(model)


def main() -> None:
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'elements':>10} {'shape':>12} {'lens (ms)':>10} {'indices (ms)':>13} {'lens+SVG (ms)':>14} {'SVG bytes':>10}")
    for n, shape in [(10, (2, 5)), (10**3, (25, 40)), (10**4, (100, 100)), (10**5, (250, 400))]:
        t = torch.randn(shape).t()  # a non-contiguous view: the interesting case
        lens_s = best_of(lambda t=t: layout(t), repeat=7)
        idx_s = best_of(lambda t=t: layout(t).storage_indices(), repeat=3)
        svg_s = best_of(lambda t=t: svg_for(t), repeat=7)
        size = len(svg_for(t).encode())
        print(f"{n:>10,} {str(shape):>12} {lens_s * 1e3:>10.3f} {idx_s * 1e3:>13.2f} {svg_s * 1e3:>14.2f} {size:>10,}")


if __name__ == "__main__":
    main()
