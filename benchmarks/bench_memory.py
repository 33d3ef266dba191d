"""Memory timeline at scale: a synthetic 100,000-event CUDA trace through the lens, the picture model and the simulator,
side by side with torch's own `torch.cuda._memory_viz.trace_plot` on the same snapshot dict (pure Python, runs on CPU).

Reported: lens time (load + timeline + allocations), picture-model time, payload bytes (the model's JSON: what the
widget sends), one selected event's state-panel time and bytes, simulator replay time (if `allocator.replay`
exists), and trace_plot's time and HTML size, with the script URLs its HTML loads (it imports its JavaScript
from a CDN, so its first paint cannot be measured offline). Targets (issue 4): payload ≤ 3 MB, replay ≤ 1 s.
Run: .venv/bin/python benchmarks/bench_memory.py [n_events]
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from typing import Any

N_EVENTS = 100_000


def synthetic_trace(n_events: int = N_EVENTS, seed: int = 0) -> dict[str, Any]:
    """A snapshot dict: one 4 GiB segment; log-normal allocation sizes; freed addresses re-used per power-of-two class."""
    rng = random.Random(seed)
    base, seg = 1 << 34, 1 << 32
    events: list[dict[str, Any]] = [
        {"action": "segment_alloc", "addr": base, "size": seg, "stream": 0, "time_us": 0.0, "frames": []}]
    live: list[tuple[int, int, int]] = []
    free: dict[int, list[int]] = {}
    bump, t = base, 0.0
    while len(events) < n_events:
        t += rng.uniform(0.5, 3.0)
        if live and (rng.random() < 0.48 or len(live) > 400):
            a, s, cls = live.pop(rng.randrange(len(live)))
            free.setdefault(cls, []).append(a)
            for act in ("free_requested", "free_completed"):
                events.append({"action": act, "addr": a, "size": s, "stream": 0, "time_us": t, "frames": []})
        else:
            s = min(int(rng.lognormvariate(11, 2.5)) + 1, 1 << 26)
            cls = max(s - 1, 1).bit_length()
            if free.get(cls):
                a = free[cls].pop()
            else:
                a, bump = bump, bump + (1 << cls)
            live.append((a, s, cls))
            events.append({"action": "alloc", "addr": a, "size": s, "stream": 0, "time_us": t,
                           "frames": [{"filename": "model.py", "line": 40 + len(events) % 9, "name": "Block.forward"},
                                      {"filename": "train.py", "line": 12, "name": "step"}]})
    return {"segments": [], "device_traces": [events[:n_events]]}


def _timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    from torchlens_widgets.lenses.memory import load_snapshot
    from torchlens_widgets.render.memory import event_explanations, memory_model, memory_state_model

    n = int(sys.argv[1]) if len(sys.argv) > 1 else N_EVENTS
    raw = synthetic_trace(n)

    def lens() -> Any:
        snap = load_snapshot(raw)
        snap.timeline()
        snap.allocations()
        return snap

    snap, t_lens = _timed(lens)
    model, t_model = _timed(lambda: memory_model(snap))
    payload = len(json.dumps(model))
    time_model, t_time = _timed(lambda: memory_model(snap, x_axis="time"))
    state, t_state = _timed(lambda: memory_state_model(snap, n // 2, model))
    print(f"synthetic trace: {n:,} events, {len(snap.allocations()):,} allocations")
    print(f"{'lens: load + timeline + allocations':<46} {t_lens * 1000:>9.0f} ms")
    print(f"{'picture model (event axis)':<46} {t_model * 1000:>9.0f} ms")
    print(f"{'picture model (wall-clock axis)':<46} {t_time * 1000:>9.0f} ms")
    print(f"{'payload: model JSON (target ≤ 3 MB)':<46} {payload / 1024:>9.0f} KB  ({len(model['bands'])} bands)")
    print(f"{'one selected event: state panel':<46} {t_state * 1000:>9.0f} ms, {len(json.dumps(state)) / 1024:.0f} KB")
    try:
        from torchlens_widgets.lenses.allocator import replay
    except ImportError:
        print("simulator: torchlens_widgets.lenses.allocator.replay is not available")
    else:
        trace = raw["device_traces"][0]
        sim, t_sim = _timed(lambda: replay(trace))
        spans, t_map = _timed(lambda: event_explanations(trace, sim.log))
        matched = sum(1 for s in spans if s is not None)
        print(f"{'simulator replay (target ≤ 1 s)':<46} {t_sim * 1000:>9.0f} ms")
        print(f"{'explanation index (trace event → sim log)':<46} {t_map * 1000:>9.0f} ms, {matched:,} events matched")

    from torch.cuda import _memory_viz

    html, t_viz = _timed(lambda: _memory_viz.trace_plot(raw))
    urls = sorted(set(re.findall(r"https?://[^\s\"'<>)]+\.js", html)))
    print(f"{'torch.cuda._memory_viz.trace_plot':<46} {t_viz * 1000:>9.0f} ms, HTML {len(html) / 1024:.0f} KB")
    if urls:
        print(f"  its HTML loads JavaScript from the network: {', '.join(urls)}")
        print("  so it shows nothing offline, and its first paint cannot be measured here (no network)")
    else:
        print("  its HTML loads no remote JavaScript")


if __name__ == "__main__":
    main()
