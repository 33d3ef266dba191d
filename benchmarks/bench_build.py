"""C++ extension builds, side by side in one run: the course's op built cold with load_inline's default
`#include <torch/extension.h>`, with the lean headers read as usual, then the lean headers precompiled once for
the machine (`prepare`, timed) and a cold build of a new op that uses them, then warm (an unchanged cell: a
cache hit) and loading the warm build into this process. Targets (issue 10): lean cold ≤ 12 s, warm ≤ 1 s.
Each cold build uses a fresh scratch cache, and the precompiled headers a fresh folder (their one-time cost is
measured here, not borrowed from an earlier run). Run: .venv/bin/python benchmarks/bench_build.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from torchlens_widgets.lenses.build import LEAN_HEADERS, BuildReport, build_inline, load_built, prepare  # noqa: E402

OP = """
at::Tensor axpy(const at::Tensor& x, const at::Tensor& y, double a) {
  TORCH_CHECK(x.sizes() == y.sizes(), "axpy: x and y must have the same shape");
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "axpy: float32 only");
  auto xc = x.contiguous(), yc = y.contiguous();
  auto out = at::empty_like(xc);
  const float* px = xc.data_ptr<float>();
  const float* py = yc.data_ptr<float>();
  float* po = out.data_ptr<float>();
  at::parallel_for(0, xc.numel(), 2048, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = static_cast<float>(a) * px[i] + py[i];
  });
  return out;
}

TORCH_LIBRARY(tlw_bench, m) {
  m.def("axpy(Tensor x, Tensor y, float a) -> Tensor", &axpy);
}
"""


def _line(label: str, cold: BuildReport, warm: BuildReport | None = None) -> None:
    compile_s = sum(s.seconds for s in cold.steps if s.phase == "compile")
    link_s = sum(s.seconds for s in cold.steps if s.phase == "link")
    top = ", ".join(f"{g.group} {g.files}" for g in cold.header_groups[:5])
    print(f"{label}\n  cold {cold.seconds:5.1f} s (compile {compile_s:.1f} s, link {link_s:.1f} s)"
          + (f"; warm {warm.seconds:.2f} s" if warm is not None else "")
          + f"\n  headers behind it: {cold.header_files} files, {cold.header_bytes / 1e6:.1f} MB ({top})")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tlw-bench-pch-") as slots:
        os.environ["TORCHLENS_PCH_DIR"] = slots  # a fresh folder: no precompiled headers yet
        with tempfile.TemporaryDirectory(prefix="tlw-bench-build-") as cache:
            default = build_inline("tlw_bench_axpy", "#include <torch/library.h>\n" + OP, headers=None,
                                   directory=cache)
            assert default.ok and default.cache == "miss", default.summary()
            _line("default: torch/extension.h", default)
        with tempfile.TemporaryDirectory(prefix="tlw-bench-build-") as cache:
            plain = build_inline("tlw_bench_axpy", OP, directory=cache, precompiled=False)
            assert plain.ok and plain.cache == "miss" and not plain.precompiled, plain.summary()
            _line("lean, headers read: " + ", ".join(LEAN_HEADERS), plain)
            t0 = time.perf_counter()
            said = prepare(plain)  # once per machine (Binder's postBuild does it); made from this build's flags
            made_s = time.perf_counter() - t0
            print(f"precompiling the lean headers, once per machine: {made_s:.1f} s ({said})")
        with tempfile.TemporaryDirectory(prefix="tlw-bench-build-") as cache:
            fast = build_inline("tlw_bench_axpy", OP, directory=cache)
            assert fast.ok and fast.cache == "miss" and fast.precompiled, fast.summary()
            warm = build_inline("tlw_bench_axpy", OP, directory=cache)
            assert warm.ok and warm.cache == "hit", warm.summary()
            _line("lean, headers precompiled (a new op, cold build cache)", fast, warm)
            t0 = time.perf_counter()
            load_built(warm)
            print(f"  load into this process: {time.perf_counter() - t0:.3f} s")
    print(f"\nlean cold build: {fast.seconds:.1f} s with the precompiled headers (target ≤ 12 s) "
          f"{'OK' if fast.seconds <= 12 else 'OVER'}, {plain.seconds:.1f} s reading them; "
          f"default {default.seconds:.1f} s = {default.seconds / fast.seconds:.1f}× the precompiled lean build, "
          f"{default.seconds / plain.seconds:.1f}× the plain one; precompiling once: {made_s:.1f} s; "
          f"warm {warm.seconds:.2f} s (target ≤ 1 s) {'OK' if warm.seconds <= 1 else 'OVER'}")


if __name__ == "__main__":
    main()
