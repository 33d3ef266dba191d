"""C++ extension builds, side by side in one run: the course's op built cold with load_inline's default
`#include <torch/extension.h>` vs the lean headers (LEAN_HEADERS), then warm (an unchanged cell: cache hit),
and loading the warm build into this process. Targets (issue 10): lean cold ≤ 12 s, warm ≤ 1 s.
Each cold build uses a fresh scratch cache. Run: .venv/bin/python benchmarks/bench_build.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from torchlens_widgets.lenses.build import LEAN_HEADERS, build_inline, load_built  # noqa: E402

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


def main() -> None:
    rows = []
    for label, headers, extra in (("default: torch/extension.h", None, "#include <torch/library.h>\n"),
                                  ("lean: " + ", ".join(LEAN_HEADERS), LEAN_HEADERS, "")):
        with tempfile.TemporaryDirectory(prefix="tlw-bench-build-") as cache:
            cold = build_inline("tlw_bench_axpy", extra + OP, headers=headers, directory=cache)
            assert cold.ok and cold.cache == "miss", cold.summary()
            warm = build_inline("tlw_bench_axpy", extra + OP, headers=headers, directory=cache)
            assert warm.ok and warm.cache == "hit", warm.summary()
            rows.append((label, cold, warm))
            compile_s = sum(s.seconds for s in cold.steps if s.phase == "compile")
            link_s = sum(s.seconds for s in cold.steps if s.phase == "link")
            top = ", ".join(f"{g.group} {g.files}" for g in cold.header_groups[:5])
            print(f"{label}\n  cold {cold.seconds:5.1f} s (compile {compile_s:.1f} s, link {link_s:.1f} s); "
                  f"warm {warm.seconds:.2f} s\n  headers read: {cold.header_files} files, "
                  f"{cold.header_bytes / 1e6:.1f} MB ({top})")
            if headers is not None:
                t0 = time.perf_counter()
                load_built(warm)
                print(f"  load into this process: {time.perf_counter() - t0:.3f} s")
    (_, default_cold, _), (_, lean_cold, lean_warm) = rows
    print(f"\nlean cold build: {lean_cold.seconds:.1f} s (target ≤ 12 s) "
          f"{'OK' if lean_cold.seconds <= 12 else 'OVER'}; default/lean = {default_cold.seconds / lean_cold.seconds:.1f}×; "
          f"warm {lean_warm.seconds:.2f} s (target ≤ 1 s) {'OK' if lean_warm.seconds <= 1 else 'OVER'}")


if __name__ == "__main__":
    main()
