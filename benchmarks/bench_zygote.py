"""Starting workers: a C++ build and a two-rank run, each forked by the zygote (torch imported once) beside a fresh
`python -c` per worker (TORCHLENS_ZYGOTE=0, the way before). Each variant runs in its own process, cold: its first
run starts the zygote, the next three reuse it.
Run: .venv/bin/python benchmarks/bench_zygote.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

_ONE = r"""
import json, sys, tempfile, time
from torchlens_widgets.lenses.build import build_inline
from torchlens_widgets.lenses.distributed import run_ranks
out = {"build": [], "ranks": []}
for i in range(4):
    src = f'at::Tensor f{i}(const at::Tensor& x) {{ return x.clone(); }}\n' \
          f'TORCH_LIBRARY(bench_zygote_{i}, m) {{ m.def("f(Tensor x) -> Tensor", &f{i}); }}\n'
    t = time.monotonic()
    build_inline(f"bench_zygote_{i}", src, directory=tempfile.mkdtemp(), probe="pass")
    out["build"].append(time.monotonic() - t)
    t = time.monotonic()
    run_ranks("torchlens_widgets.lenses.distributed_scenarios:ddp_step", world_size=2)
    out["ranks"].append(time.monotonic() - t)
print("RESULT=" + json.dumps(out))
"""


def _run(zygote_on: bool) -> dict[str, list[float]]:
    env = dict(os.environ, TORCHLENS_ZYGOTE="1" if zygote_on else "0",
               TORCHLENS_PCH_DIR=os.environ.get("TORCHLENS_PCH_DIR", os.path.join(tempfile.gettempdir(), "bench-pch")))
    done = subprocess.run([sys.executable, "-c", _ONE], env=env, capture_output=True, text=True, check=True)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT="))
    return json.loads(line.split("=", 1)[1])


def main() -> None:
    _run(True)  # makes the precompiled headers both variants then use
    rows = {"fresh python per worker": _run(False), "forked by the zygote": _run(True)}
    print(f"{'workers started by':<26} {'build 1st s':>11} {'build next s':>12} {'2 ranks 1st s':>13} {'2 ranks next s':>14}")
    for label, r in rows.items():
        b, k = r["build"], r["ranks"]
        print(f"{label:<26} {b[0]:>11.2f} {sum(b[1:]) / 3:>12.2f} {k[0]:>13.2f} {sum(k[1:]) / 3:>14.2f}")


if __name__ == "__main__":
    main()
