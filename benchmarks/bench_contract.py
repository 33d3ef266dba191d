"""The contract matrix's cost for a pointwise op (target, issue 10: 20+ cases ≤ 2 s): a registered custom op
(cases + opcheck's four rows) and a plain function, first call (imports included) and again.
Run: .venv/bin/python benchmarks/bench_contract.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from torchlens_widgets.lenses.contract import contract_matrix


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a * 2 + b


def main() -> None:
    x, y = torch.randn(64, 64), torch.randn(64, 64)
    lib = torch.library.Library("tlw_bench_contract", "DEF")
    lib.define("axpy(Tensor x, Tensor y) -> Tensor")
    lib.impl("axpy", reference, "CPU")
    lib.impl("axpy", lambda a, b: torch.empty_like(a), "Meta")
    for label, op in (("plain function", reference), ("registered op + opcheck", torch.ops.tlw_bench_contract.axpy.default)):
        for run in ("first call", "again"):
            t0 = time.perf_counter()
            report = contract_matrix(op, reference, (x, y))
            took = time.perf_counter() - t0
            print(f"{label:24s} {run:10s}: {len(report.results)} cases in {took:.2f} s "
                  f"({sum(r.passed for r in report.results)} pass) {'OK' if took <= 2 else 'OVER'} (target ≤ 2 s)")


if __name__ == "__main__":
    main()
