"""The profiler widget on a 100,000-span trace (targets: payload ≤ 3 MB, first paint ≤ 1.5 s).

Prints, for a synthetic 100,000-span Chrome trace (training steps as record_function ranges holding
linear → addmm → mul chains) and for a real CPU profile of a small MLP: the time to read the trace, the size
of the model the widget sends (downsampled to 20,000 spans) next to the model of every span, the static
HTML saved with the notebook, and the first paint of the real bundle (torchlens_widgets/static/ptrace.js) in
Debian's Chromium, measured as bench_first_paint.py does (navigation start → the first animation frame after
render, best of 3). Run: .venv/bin/python benchmarks/bench_profile.py
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_first_paint import ARGS, CHROMIUM, PAGE, ROOT, _QuietHandler


def synthetic_trace(n: int) -> dict[str, Any]:
    """A Chrome trace of `n` spans: 100-span steps (a ProfilerStep range, 33 linear → addmm → mul chains)."""
    events: list[dict[str, Any]] = []
    shapes = {"Input Dims": [[64, 128], [128, 256]]}
    t, k = 0.0, 0
    while len(events) < n:
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "ts": t, "dur": 400.0,
                       "pid": 1, "tid": 1, "args": {}})
        for j in range(min(33, (n - len(events)) // 3)):
            a = t + 1 + 12 * j + (k % 7) * 0.1
            for name, off, dur in (("aten::linear", 0, 10.5), ("aten::addmm", 1, 8.25), ("aten::mul", 2, 3.0)):
                events.append({"ph": "X", "cat": "cpu_op", "name": name, "ts": a + off, "dur": dur + (j % 5) * 0.1,
                               "pid": 1, "tid": 1, "args": shapes})
        while len(events) < n and n - len(events) < 3:
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::item", "ts": t + 399, "dur": 0.5, "pid": 1,
                           "tid": 1, "args": {}})
        t += 401
        k += 1
    return {"traceEvents": events}


def real_trace() -> Any:
    import torch
    from torch.profiler import record_function

    from torchlens_widgets.lenses.profile import record_profile

    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def train(steps: int) -> None:
        for _ in range(steps):
            with record_function("step"):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()

    return record_profile(train, 200)


def main() -> None:
    from torchlens_widgets.lenses.profile import load_profile
    from torchlens_widgets.render.profile import profile_model
    from torchlens_widgets.widgets.profile import ProfileWidget

    cases: list[tuple[str, dict[str, Any]]] = []
    doc = synthetic_trace(100_000)
    t0 = time.perf_counter()
    trace = load_profile(doc)
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    w = ProfileWidget(trace)
    t_widget = time.perf_counter() - t0
    full = profile_model(trace, max_spans=len(trace.events))
    print(f"synthetic trace: {len(trace.events):,} spans; load_profile {t_load:.2f} s, ProfileWidget(...) {t_widget:.2f} s")
    print(f"{'model':<46} {'spans':>8} {'payload bytes':>14}")
    for name, m in (("widget model (downsampled, default)", w.model), ("every span (not downsampled)", full)):
        size = len(json.dumps({"model": m, "selected": None}).encode())
        print(f"{name:<46} {len(m['spans']):>8,} {size:>14,}")
    print(f"{'static HTML fallback (text/html)':<46} {len(w._static['spans']):>8,} {len(w.static_html().encode()):>14,}")
    cases += [("100,000 spans, downsampled (widget)", {"model": w.model, "selected": "aten::mul"}),
              ("100,000 spans, every span", {"model": full, "selected": "aten::mul"})]

    real = real_trace()
    rw = ProfileWidget(real)
    print(f"real profile (MLP, 200 SGD steps, with_stack): {len(real.events):,} spans, "
          f"{real.python_frames:,} Python frames; widget payload {len(json.dumps(rw.model).encode()):,} bytes")
    cases.append((f"real MLP profile, {len(real.events):,} spans", {"model": rw.model, "selected": None}))

    if not Path(CHROMIUM).exists():
        print(f"first paint skipped: {CHROMIUM} is missing")
        return
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(ROOT / "torchlens_widgets" / "static" / "ptrace.js", tmp)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=tmp))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
        print(f"{'first paint in Chromium':<46} {'payload KB':>10} {'render ms':>10} {'first paint ms':>15}")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            for name, traits in cases:
                payload = json.dumps(traits)
                best: dict[str, float] | None = None
                for k in range(3):
                    (Path(tmp) / "traits.json").write_text(payload)
                    (Path(tmp) / f"p{k}.html").write_text(PAGE.format(bundle="ptrace"))
                    page = browser.new_page()
                    page.goto(f"http://127.0.0.1:{port}/p{k}.html")
                    page.wait_for_function("window.__paint !== undefined", timeout=120_000)
                    got = page.evaluate("window.__paint")
                    page.close()
                    if best is None or got["paint_ms"] < best["paint_ms"]:
                        best = got
                assert best is not None
                print(f"{name:<46} {len(payload) / 1024:>10.0f} {best['render_ms']:>10.1f} {best['paint_ms']:>15.1f}")
            browser.close()
        server.shutdown()


if __name__ == "__main__":
    main()
