"""Notebook 08: asynchronous execution on a real GPU — timings, hidden syncs, streams, pinned copies, late errors.

Profiler traces are kept whole (Chrome trace JSON, gzip) so `load_trace` reads them on a CPU exactly as
`profile_lanes` reads a live one; `find_syncs` results and the measured numbers go beside them.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
import warnings
from typing import Any

import torch
from record_gpu import Topic

SYNC = "synchronizing CUDA operation"


def timing(t: Topic) -> dict[str, float]:
    """Cell 19: one 4096² matmul behind five queued ones, timed four ways (seconds)."""
    n = 4096 if not t.dry else 256
    a = torch.randn(n, n, device=t.device)
    for _ in range(3):
        a @ a
    t.cuda.synchronize()
    backlog = [a @ a for _ in range(5)]
    t0 = time.perf_counter()
    b = a @ a
    host_only = time.perf_counter() - t0
    t.cuda.synchronize()
    after_only = time.perf_counter() - t0
    backlog = [a @ a for _ in range(5)]
    t.cuda.synchronize()
    t0 = time.perf_counter()
    b = a @ a
    t.cuda.synchronize()
    both = time.perf_counter() - t0
    backlog = [a @ a for _ in range(5)]
    start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
    start.record()
    b = a @ a
    end.record()
    end.synchronize()
    events = start.elapsed_time(end) / 1e3
    del backlog, b
    return {"host clock only": host_only, "host clock + sync after": after_only, "sync before and after": both,
            "events": events}


def loop_body(x: torch.Tensor) -> torch.Tensor:
    w = torch.ones(512).to(x.device)
    y = (x @ x).relu() * w
    loss = y.mean()
    if loss > 0:
        pass
    positive = y[y > 0]
    total = loss.item()
    with contextlib.redirect_stdout(io.StringIO()):
        print(f"loss {total:.3f}")
    return positive.cpu()


CALLS = [
    "y = x @ w", "s = y.sum()", "v = s.item()", "print(s)", "h = y.cpu()", "h = y.to('cpu', non_blocking=True)",
    "idx = torch.nonzero(y > 0)", "pos = y[y > 0]", "z = torch.where(y > 0, y, 0)", "y.masked_fill_(y < 0, 0)",
    "if s > 0: pass", "neg = (y < 0).any()", "n = y.shape[0]", "vals = y.tolist()",
    "b = torch.ones(8).to('cuda')", "side.wait_event(done)", "done.synchronize()",
]


def blocking_calls(t: Topic) -> list[dict[str, Any]]:
    """Exercise 3's calls on a real GPU: does each block the host behind 50 ms of queued work, and is it flagged?"""
    rows = []
    for call in CALLS * 2:                              # the first round warms up: a kernel's first launch loads
        x = torch.randn(1024, 1024, device=t.device)    # its module (CUDA lazy loading), which waits for the device
        w = torch.randn(1024, 1024, device=t.device)
        y = x @ w
        s = y.sum()
        side = t.cuda.Stream()
        done = t.cuda.Event()
        done.record()
        env = {"torch": torch, "x": x, "w": w, "y": y, "s": s, "side": side, "done": done}
        code = call if t.dry is False else call.replace("'cuda'", "'cpu'")
        t.cuda.synchronize()
        t.cuda.sleep(100_000_000)                       # about 50 ms of work queued ahead of the call
        if "done" in call:
            done.record()                              # the event now waits for the queued work
        t.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("always")
                t0 = time.perf_counter()
                exec(code, env)
                host_ms = (time.perf_counter() - t0) * 1e3
        finally:
            t.cuda.set_sync_debug_mode("default")
        queued_after = not torch.cuda.current_stream().query() if not t.dry else False
        t.cuda.synchronize()
        rows.append({"call": call, "host_ms": host_ms, "work_still_queued_after": queued_after,
                     "flagged_syncs": sum(SYNC in str(m.message) for m in caught)})
    return rows[len(CALLS):]


def pinned_vs_pageable(t: Topic) -> dict[str, Any]:
    """Cell 48: a 256 MiB non_blocking copy behind a busy stream, from pageable and from pinned memory."""
    n = 64 * 2**20 if not t.dry else 2**16
    sources = {"pageable": torch.ones(n)}
    if not t.dry:
        sources["pinned"] = torch.ones(n).pin_memory()
    dst = torch.empty(n, device=t.device)
    out: dict[str, Any] = {}
    for name, src in sources.items():
        t.cuda.synchronize()
        t.cuda.sleep(100_000_000)
        t0 = time.perf_counter()
        dst.copy_(src, non_blocking=True)
        call_ms = (time.perf_counter() - t0) * 1e3
        queued = not torch.cuda.current_stream().query() if not t.dry else False
        t.cuda.synchronize()
        out[name] = {"call_ms": call_ms, "still_queued": queued}
        out[f"{name}_trace"] = t.chrome_trace(lambda src=src: dst.copy_(src, non_blocking=True))
    return out


def prefetch(t: Topic) -> dict[str, Any]:
    """Cell 50: a pinned batch copied on a side stream, the default stream ordered after it by an event."""
    main, copy_stream = t.cuda.current_stream(), t.cuda.Stream()
    host_batch = torch.randn(4096, 1024)
    if not t.dry:
        host_batch = host_batch.pin_memory()
    w = torch.randn(1024, 1024, device=t.device)

    def step() -> torch.Tensor:
        copy_stream.wait_stream(main)
        with t.cuda.stream(copy_stream):
            batch = host_batch.to(t.device, non_blocking=True)
            copied = t.cuda.Event()
            copied.record()
        main.wait_event(copied)
        if not t.dry:
            batch.record_stream(main)
        return batch @ w

    step()
    t.cuda.synchronize()
    trace = t.chrome_trace(lambda: [step() for _ in range(3)])
    right = bool(torch.equal(step(), host_batch.to(t.device) @ w))
    return {"correct": right, "trace": trace}


FAULTY = """
import time
import torch
dev = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.arange(4.0, device=dev)
bad = torch.tensor([7], device=dev)
if WARM:                                 # the step's kernels on a valid index first: loaded before the fault
    ok = torch.tensor([1], device=dev)
    (x[ok] * 2).sum().item()
if dev == "cuda":
    torch.cuda.synchronize()
reached = "nothing"
t0 = time.perf_counter()
times = {}
try:
    if dev == "cuda":
        torch.cuda._sleep(500_000_000)
    times["sleep queued"] = time.perf_counter() - t0
    y = x[bad]
    times["faulty line returned"] = time.perf_counter() - t0
    reached = "the faulty line"
    z = (y * 2).sum()
    times["next launch returned"] = time.perf_counter() - t0
    reached = "two more launches"
    z.item()
    reached = "the sync"
except (RuntimeError, IndexError) as err:
    print("raised after:", reached, "|", str(err).splitlines()[0])
times["raised or done"] = time.perf_counter() - t0
print("seconds:", {k: round(v, 4) for k, v in times.items()})
"""


def record(t: Topic) -> None:
    with t.step("timing four ways (cell 19)") as e:
        timing(t)                                       # once to warm up cuBLAS and the allocator
        e["seconds_each"] = rows = [timing(t) for _ in range(3)]
        t.json("timing", rows)
    with t.step("hidden syncs: find_syncs and sync debug mode (cell 32)") as e:
        x = torch.randn(512, 512, device=t.device)
        loop_body(x)
        t.cuda.synchronize()
        if t.dry:
            found = []
            e["note"] = "dry run: find_syncs needs CUDA; loop_body ran on the CPU"
            loop_body(x)
        else:
            from torchlens_widgets.lenses.asyncexec import find_syncs

            found = [{"op": f.op, "message": f.message, "stack": list(f.stack)} for f in find_syncs(loop_body, x)]
        trace = t.chrome_trace(lambda: loop_body(x))
        t.json("loop_body", {"find_syncs": found, "trace": trace})
        e["syncs"] = len(found)
    with t.step("step with a hidden .item() (cell 54)") as e:
        xg = torch.randn(2048, 2048, device=t.device)

        def step() -> torch.Tensor:
            s = (xg @ xg).relu().sum()
            value = s.item()
            return xg * value

        step()
        trace = t.chrome_trace(step)
        t.json("item_step", trace)
        from torchlens_widgets.lenses.asyncexec import load_trace

        e["lanes"] = {"syncs": [{"name": s.name, "explicit": s.explicit} for s in load_trace(trace).syncs]}
    with t.step("which calls block the host (exercise 3)") as e:
        rows = blocking_calls(t)
        t.json("blocking_calls", rows)
        e["blocked"] = [r["call"] for r in rows if r["host_ms"] > 25]
    with t.step("pinned vs pageable non_blocking copies (cell 48)") as e:
        result = pinned_vs_pageable(t)
        e.update({k: v for k, v in result.items() if not k.endswith("_trace")})
        t.json("copies", result)
    with t.step("prefetch on a side stream (cell 50)") as e:
        result = prefetch(t)
        e["correct"] = result["correct"]
        t.json("prefetch", result)
    with t.step("a device-side error, with and without CUDA_LAUNCH_BLOCKING (cell 38)") as e:
        env = {k: v for k, v in os.environ.items() if k != "CUDA_LAUNCH_BLOCKING"}
        runs = {}
        for name, blocking, warm in (("unset", False, False), ("CUDA_LAUNCH_BLOCKING=1", True, False),
                                     ("unset, kernels loaded first", False, True)):
            child_env = {**env, "CUDA_LAUNCH_BLOCKING": "1" if blocking else "0", "CUDA_MODULE_LOADING": "LAZY"}
            runs[name] = t.run_child(f"WARM = {warm}\n" + FAULTY, env=child_env, timeout=120)
        e["lines"] = {k: [ln for ln in v["stdout"].splitlines() if ln.startswith("raised after:")] for k, v in runs.items()}
        t.json("faulty_step", {"program": FAULTY, "runs": runs})
