"""Sizes that users pay for: each widget bundle (target ≤ 50 KB) and each saved notebook (≤ 1 MB).

Run after building (pip install . or `npm run build` in labextension/): .venv/bin/python benchmarks/bench_sizes.py
"""

from __future__ import annotations

import gzip
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    print(f"{'widget bundle':<44} {'bytes':>10} {'gzip':>8}")
    for js in sorted((ROOT / "torchlens_widgets" / "static").glob("*.js")):
        data = js.read_bytes()
        print(f"{js.name:<44} {len(data):>10,} {len(gzip.compress(data)):>8,}")
    print(f"\n{'saved notebook':<44} {'bytes':>10}")
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        print(f"{nb.name:<44} {nb.stat().st_size:>10,}")


if __name__ == "__main__":
    main()
