"""Execution time of each course notebook in a fresh kernel (target ≤ 60 s each on 2 cores).

Run: .venv/bin/python benchmarks/bench_notebooks.py [NOTEBOOK...]   (outputs are not written back)
"""

from __future__ import annotations

import sys
from pathlib import Path

from torchlens_widgets.course.execute import execute_notebook

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> None:
    paths = [Path(a) for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    print(f"{'notebook':<44} {'seconds':>8}")
    for p in paths:
        run = execute_notebook(p, timeout=600)
        print(f"{p.name:<44} {run.seconds:>8.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
