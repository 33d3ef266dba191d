"""Record real CUDA caching-allocator snapshots for the simulator's replay tests (run on a GPU machine).

Each scenario runs in a fresh process-level state (empty_cache + reset), records with torch's own
`torch.cuda.memory._record_memory_history`, and writes `torchlens_widgets/data/snapshots/<name>.pickle.gz`
(frames dropped to keep them small). tests/lenses/test_allocator_real_traces.py replays every file found
there and requires an exact match; without files it skips and says why.
Run: python tools/record_snapshots.py [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import pickle
from collections.abc import Callable
from pathlib import Path

import torch

MiB = 1 << 20


def allocation_sequence() -> None:
    """Small and large requests around the pool and segment-size boundaries, freed out of order."""
    keep = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in (1, 512, 513, MiB, MiB + 1, 3 * MiB, 13_200_000, 25 * MiB)]
    del keep[1], keep[3]
    keep.append(torch.empty(700_000, dtype=torch.uint8, device="cuda"))


def training_step() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.Adam(model.parameters())
    for _ in range(2):
        model(torch.randn(64, 1024, device="cuda")).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()


def fragmentation() -> None:
    blocks = [torch.empty(6 * MiB, dtype=torch.uint8, device="cuda") for _ in range(8)]
    del blocks[::2]
    torch.empty(7 * MiB, dtype=torch.uint8, device="cuda")


def empty_cache() -> None:
    a = torch.empty(30 * MiB, dtype=torch.uint8, device="cuda")
    b = torch.empty(MiB // 2, dtype=torch.uint8, device="cuda")
    del a
    torch.cuda.empty_cache()
    del b
    torch.cuda.empty_cache()


def record_stream() -> None:
    side = torch.cuda.Stream()
    x = torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")
    with torch.cuda.stream(side):
        torch.cuda._sleep(10_000_000)
        x.add_(1)
    x.record_stream(side)
    del x
    torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")


SCENARIOS: dict[str, Callable[[], None]] = {
    f.__name__: f for f in (allocation_sequence, training_step, fragmentation, empty_cache, record_stream)
}


def _strip_frames(obj: object) -> object:
    if isinstance(obj, dict):
        return {k: _strip_frames(v) for k, v in obj.items() if k != "frames"}
    if isinstance(obj, list):
        return [_strip_frames(v) for v in obj]
    return obj


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "torchlens_widgets/data/snapshots")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: these snapshots can only be recorded on a GPU machine")
    args.out.mkdir(parents=True, exist_ok=True)
    for name, scenario in SCENARIOS.items():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.memory._record_memory_history(max_entries=100_000)
        scenario()
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        snap["scenario"] = name
        path = args.out / f"{name}.pickle.gz"
        with gzip.open(path, "wb") as f:
            pickle.dump(_strip_frames(snap), f)
        print(f"{path}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
