"""Notebook 16 (torch.compile) on a GPU: the compile lens on CUDA, and what CUDA graphs change.

* `compile_trace_chain.json.gz`: `compile_trace(chain, x).to_dict()` and `summary()` of the notebook's Inductor
  example (`((x * 2 + 1).relu() ** 2).sum()` on 65,536 floats) on the GPU: its kernels are Triton there.
* `profiles.json.gz`: two workloads (the notebook's `chain`, and a small MLP's inference forward), each run
  eager, compiled (`mode="default"`) and compiled with `mode="reduce-overhead"` (Inductor's CUDA graphs). Per
  mode: host and device time per call (perf_counter, CUDA events; medians), and a `torch.profiler` trace (CPU +
  CUDA) of a few calls after warm-up, summarised per event name: count, total µs, the trace's category (`cat`:
  cpu_op, cuda_runtime, cuda_driver, kernel ...) and ours (`launch`: cudaLaunchKernel, cuLaunchKernel(Ex) ...;
  `graph_launch`: cudaGraphLaunch; `kernel`; `sync` ...), with per-call counts. `comparison` puts the modes side
  by side: with CUDA graphs the kernel launches of a call become one graph launch.
* `trace_<workload>_<mode>.json.gz`: the full chrome trace, where it is small (≤ 150 KB compressed).

On the dry run (CPU tensors) the same code runs: `reduce-overhead` compiles as the default mode does (Inductor
skips CUDA graphs for CPU inputs: `cudagraph_counters` shows the skip), and the profiles hold CPU ops only.
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from record_gpu import Topic

from torchlens_widgets.lenses.compile_trace import compile_trace

REPEAT, WARMUP, PROFILED_CALLS = 20, 5, 5
TRACE_LIMIT, TRACES_LIMIT = 150_000, 300_000  # bytes compressed: one chrome trace, all of them

# Kineto names CUDA API calls by CUPTI's callback names (some with a version suffix such as "_v11060"):
# launches through the runtime (cudaLaunchKernel, ATen and cuBLAS) or the driver (cuLaunchKernel(Ex): Triton),
# and a CUDA graph's replay as one cudaGraphLaunch (torch/profiler/_cupti_monitor_trace.py lists the same names).
LAUNCH = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
          "cudaLaunchCooperativeKernelMultiDevice", "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel"}
GRAPH_LAUNCH = {"cudaGraphLaunch", "cuGraphLaunch"}
SYNC = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cuStreamSynchronize",
        "cuCtxSynchronize", "cudaStreamWaitEvent"}


def chain(x):
    return ((x * 2 + 1).relu() ** 2).sum()


class MLP(torch.nn.Module):
    """A small block: up-projection, GELU, down-projection, residual, LayerNorm."""

    def __init__(self, d: int = 512, hidden: int = 2048) -> None:
        super().__init__()
        self.up = torch.nn.Linear(d, hidden)
        self.down = torch.nn.Linear(hidden, d)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))


def _api_name(name: str) -> str:
    return re.sub(r"_v\d+$", "", name)


def category(cat: str, name: str) -> str:
    """Our category of one trace event: what a call does on the host, or what ran on the device."""
    if cat == "kernel":
        return "kernel"
    if cat in ("gpu_memcpy", "gpu_memset"):
        return cat
    if cat in ("cuda_runtime", "cuda_driver"):
        api = _api_name(name)
        if api in LAUNCH:
            return "launch"
        if api in GRAPH_LAUNCH:
            return "graph_launch"
        if api in SYNC:
            return "sync"
        if "Memcpy" in api or "Memset" in api:
            return "copy_call"
        return "other_api"
    return {"cpu_op": "cpu_op", "user_annotation": "annotation", "gpu_user_annotation": "gpu_annotation",
            "python_function": "python"}.get(cat, cat or "?")


def summarise_trace(trace: dict[str, Any], calls: int) -> dict[str, Any]:
    """Per (category, name): count and total µs of the trace's complete events; totals per category, and the
    numbers per profiled call."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") != "X" or "dur" not in ev:
            continue
        cat, name = str(ev.get("cat", "")), str(ev.get("name", ""))
        row = rows.setdefault((cat, name), {"name": name, "cat": cat, "category": category(cat, name),
                                            "count": 0, "us": 0.0})
        row["count"] += 1
        row["us"] += float(ev["dur"])
    events = sorted(rows.values(), key=lambda r: (r["category"], -r["us"]))
    for r in events:
        r["us"] = round(r["us"], 3)
        r["device"] = r["category"] in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_annotation")
    by_cat: dict[str, dict[str, float]] = {}
    for r in events:
        c = by_cat.setdefault(r["category"], {"count": 0, "us": 0.0})
        c["count"] += r["count"]
        c["us"] = round(c["us"] + r["us"], 3)
    calls_spans = [r for r in events if r["category"] == "annotation" and r["name"].startswith("call ")]
    n = max(calls, 1)
    per_call = {"launches": by_cat.get("launch", {}).get("count", 0) / n,
                "graph_launches": by_cat.get("graph_launch", {}).get("count", 0) / n,
                "kernels": by_cat.get("kernel", {}).get("count", 0) / n,
                "kernel_us": by_cat.get("kernel", {}).get("us", 0.0) / n,
                "launch_api_us": (by_cat.get("launch", {}).get("us", 0.0)
                                  + by_cat.get("graph_launch", {}).get("us", 0.0)) / n,
                "cpu_ops": by_cat.get("cpu_op", {}).get("count", 0) / n,
                "host_us_in_profiler": sum(r["us"] for r in calls_spans) / n}
    return {"events": events, "by_category": by_cat, "per_call": per_call, "calls": calls}


def _mark_step() -> None:
    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)
    if mark is not None:
        mark()  # a new iteration for CUDA graph trees: earlier outputs may be overwritten


def time_calls(t: Topic, fn: Callable[[], Any], repeat: int = REPEAT) -> dict[str, Any]:
    """Per call, synchronised before: host ms until the call returns (enqueueing its work), CUDA-event ms on the
    device, and wall ms until the device is done; medians and the samples."""
    host, dev, wall = [], [], []
    for _ in range(repeat):
        _mark_step()
        start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        t.cuda.synchronize()
        h0 = time.perf_counter()
        start.record()
        fn()
        h1 = time.perf_counter()
        end.record()
        t.cuda.synchronize()
        h2 = time.perf_counter()
        host.append((h1 - h0) * 1e3)
        wall.append((h2 - h0) * 1e3)
        dev.append(start.elapsed_time(end))
    return {"host_ms": statistics.median(host), "event_ms": statistics.median(dev), "wall_ms": statistics.median(wall),
            "host_samples": [round(v, 5) for v in host], "event_samples": [round(v, 5) for v in dev],
            "wall_samples": [round(v, 5) for v in wall], "repeat": repeat,
            "clock": "CUDA events" if not t.dry else "CUDA events are stubs (0) on the dry run"}


def profile_calls(t: Topic, fn: Callable[[], Any], calls: int = PROFILED_CALLS) -> dict[str, Any]:
    """A torch.profiler trace (CPU, and CUDA on a GPU) of `calls` calls, each in a record_function span."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if not t.dry else [])
    t.cuda.synchronize()
    with profile(activities=activities) as prof:
        for i in range(calls):
            _mark_step()
            with record_function(f"call {i}"):
                fn()
            t.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text())


def _cudagraph_counters() -> dict[str, Any]:
    from torch._dynamo.utils import counters

    return {k: v for k, v in counters["inductor"].items() if "cudagraph" in k}


def record_mode(t: Topic, work: str, mode: str, make: Callable[[], Callable[..., Any]], args: tuple[Any, ...],
                reference: Any, saved: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": mode}
    with t.step(f"{work}: {mode}") as e:
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        fn = make()
        t0 = time.perf_counter()
        with torch.no_grad():
            _mark_step()
            first = fn(*args)
            t.cuda.synchronize()
            out["first_call_s"] = round(time.perf_counter() - t0, 3)  # the compile (and a CUDA graph's warm-up)
            out["max_abs_diff"] = (first.float() - reference.float()).abs().max().item()
            for _ in range(WARMUP):
                _mark_step()
                fn(*args)
            t.cuda.synchronize()
            out["timing"] = time_calls(t, lambda: fn(*args))
            trace = profile_calls(t, lambda: fn(*args))
        out["cudagraph_counters"] = _cudagraph_counters()
        out["profile"] = summarise_trace(trace, PROFILED_CALLS)
        e.update(first_call_s=out["first_call_s"], host_ms=out["timing"]["host_ms"],
                 event_ms=out["timing"]["event_ms"], per_call=out["profile"]["per_call"],
                 cudagraph_counters=out["cudagraph_counters"], max_abs_diff=out["max_abs_diff"])
        name = f"trace_{work}_{mode.replace('-', '_')}"
        path = t.json(name, trace)
        size = path.stat().st_size
        if size > TRACE_LIMIT or saved["bytes"] + size > TRACES_LIMIT:
            path.unlink()
            t.files.remove(path.name)
            out["trace_file"] = None
            out["trace_dropped"] = f"{size} bytes compressed: over the limit, the summary stands for it"
        else:
            saved["bytes"] += size
            out["trace_file"] = path.name
        e["trace_file"] = out["trace_file"]
    torch._dynamo.reset()
    return out


def workloads(device: torch.device) -> dict[str, dict[str, Any]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1 << 16, generator=g).to(device)
    torch.manual_seed(0)
    model = MLP().to(device).eval()
    batch = torch.randn(64, 512, generator=g).to(device)
    return {
        "chain": {"description": "notebook 16's chain: ((x * 2 + 1).relu() ** 2).sum() on 65,536 floats",
                  "fn": chain, "args": (x,)},
        "mlp": {"description": "MLP inference forward (no grad): Linear(512, 2048), GELU, Linear(2048, 512), "
                               "residual, LayerNorm(512); batch 64", "fn": model, "args": (batch,)},
    }


def comparison(modes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per mode, the few numbers that show what CUDA graphs change."""
    rows = {}
    for mode, m in modes.items():
        pc = m.get("profile", {}).get("per_call", {})
        timing = m.get("timing", {})
        rows[mode] = {"launches_per_call": pc.get("launches"), "graph_launches_per_call": pc.get("graph_launches"),
                      "kernels_per_call": pc.get("kernels"), "kernel_us_per_call": pc.get("kernel_us"),
                      "launch_api_us_per_call": pc.get("launch_api_us"), "cpu_ops_per_call": pc.get("cpu_ops"),
                      "host_us_per_call_in_profiler": pc.get("host_us_in_profiler"),
                      "host_ms": timing.get("host_ms"), "event_ms": timing.get("event_ms"),
                      "wall_ms": timing.get("wall_ms")}
    return rows


def record(t: Topic) -> None:
    with t.step("compile_trace: chain") as e:
        torch._dynamo.reset()
        x = torch.randn(1 << 16, generator=torch.Generator().manual_seed(0)).to(t.device)
        with torch.no_grad():
            trace = compile_trace(chain, x)
            diff = (trace.result.float() - chain(x).float()).abs().item()
        t.json("compile_trace_chain", {"device": str(t.device), "summary": trace.summary(), "trace": trace.to_dict(),
                                       "abs_diff_vs_eager": diff, "input": {"shape": list(x.shape),
                                                                            "dtype": str(x.dtype)}})
        e.update(kernels=[k.name for k in trace.kernels], graphs=trace.graph_count, breaks=trace.break_count,
                 abs_diff_vs_eager=diff, summary=trace.summary())
        torch._dynamo.reset()

    works: dict[str, dict[str, Any]] = {}
    with t.step("inputs") as e:
        works = workloads(t.device)
        e["workloads"] = list(works)
    result: dict[str, Any] = {"device": str(t.device), "profiled_calls": PROFILED_CALLS, "warmup": WARMUP,
                              "repeat": REPEAT, "launch_names": sorted(LAUNCH), "graph_launch_names": sorted(GRAPH_LAUNCH),
                              "sync_names": sorted(SYNC), "workloads": {}}
    saved = {"bytes": 0}
    for work, spec in works.items():
        fn, args = spec["fn"], spec["args"]
        with torch.no_grad():
            reference = fn(*args)
        makers: dict[str, Callable[[], Callable[..., Any]]] = {
            "eager": lambda fn=fn: fn,
            "default": lambda fn=fn: torch.compile(fn),
            "reduce-overhead": lambda fn=fn: torch.compile(fn, mode="reduce-overhead"),
        }
        modes = {mode: record_mode(t, work, mode, make, args, reference, saved) for mode, make in makers.items()}
        result["workloads"][work] = {"description": spec["description"],
                                     "inputs": [{"shape": list(a.shape), "dtype": str(a.dtype)} for a in args],
                                     "modes": modes, "comparison": comparison(modes)}
        with t.step(f"{work}: save") as e:
            e["file"] = t.json("profiles", result).name
            e["comparison"] = result["workloads"][work]["comparison"]
