"""Notebook 15 on a GPU: a training step's CUDA trace (kernel lanes, launch → kernel flows, the autograd
engine's device thread, idle gaps), for the notebook's slow step and its fast rewrite.

The Chrome traces are kept whole (gzip JSON, `with_stack` off to keep them small), so the profile lens
(`load_profile`) reads them on a CPU as it reads a live profile.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import torch
import torch.nn.functional as F
from record_gpu import Topic
from torch.profiler import record_function


def slow_step(model: torch.nn.Module, raw: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Notebook 15's slow step: the loss one sample at a time."""
    with record_function("data"):
        x = (raw - raw.mean(0)) / raw.std(0)
    with record_function("forward"):
        logits = model(x)
    with record_function("loss"):
        loss = sum(F.cross_entropy(logits[i:i + 1], labels[i:i + 1]) for i in range(len(labels))) / len(labels)
    with record_function("backward"):
        loss.backward()
    return loss


def fast_step(model: torch.nn.Module, raw: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The same loss and gradients in one batched call."""
    with record_function("data"):
        x = (raw - raw.mean(0)) / raw.std(0)
    with record_function("forward"):
        logits = model(x)
    with record_function("loss"):
        loss = F.cross_entropy(logits, labels)
    with record_function("backward"):
        loss.backward()
    return loss


def shape_of(trace: dict[str, Any]) -> dict[str, Any]:
    """What the trace holds: events per category, threads, flows, and the device's idle time between kernels."""
    events = trace.get("traceEvents", [])
    cats = Counter(e.get("cat", "?") for e in events if e.get("ph") == "X")
    flows = Counter(e.get("cat", "?") for e in events if e.get("ph") in ("s", "f"))
    kernels = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("cat") == "kernel")
    gaps = [b[0] - a[1] for a, b in zip(kernels, kernels[1:], strict=False)]
    threads = sorted({(str(e.get("pid")), str(e.get("tid"))) for e in events if e.get("cat") in ("cpu_op", "kernel")})
    return {"complete_events_by_category": dict(cats), "flow_events_by_category": dict(flows),
            "threads": threads, "kernels": len(kernels),
            "kernel_busy_us": sum(b - a for a, b in kernels),
            "idle_gaps_us": {"count": len(gaps), "total": sum(gaps), "max": max(gaps, default=0)}}


def record(t: Topic) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(t.device)
    gen = torch.Generator().manual_seed(1)
    raw = (torch.randn(128, 64, generator=gen) * 3 + 1).to(t.device)
    labels = torch.randint(0, 10, (128,), generator=gen).to(t.device)
    for name, step in (("slow_step", slow_step), ("fast_step", fast_step)):
        with t.step(f"{name} trace") as e:
            for _ in range(2):                                  # warm-up: cuBLAS handles, allocator, lazy init
                model.zero_grad()
                step(model, raw, labels)
            model.zero_grad()
            trace = t.chrome_trace(lambda step=step: step(model, raw, labels), record_shapes=True)
            e["shape"] = shape_of(trace)
            t.json(name, trace)
            e["bytes"] = (t.dir / f"{name}.json.gz").stat().st_size
    with t.step("lens reads the traces") as e:
        import gzip

        from torchlens_widgets.lenses.profile import load_profile

        for name in ("slow_step", "fast_step"):
            with gzip.open(t.dir / f"{name}.json.gz", "rt") as f:
                p = load_profile(json.load(f))
            e[name] = {"events": len(p.events), "threads": [th.name if hasattr(th, "name") else repr(th)
                                                             for th in getattr(p, "threads", ())][:12]}
