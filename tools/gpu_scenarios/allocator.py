"""Notebooks 07 and 12: the CUDA caching allocator's real traces, each recorded in a fresh process.

Each snapshot scenario runs in its own Python (a fresh allocator, so the simulator can replay it from
nothing) with `torch.cuda.memory._record_memory_history`, and is written as `<name>.pickle.gz` with the
frames dropped. `facts.json.gz` holds the live numbers notebook 07's GPU cells print.
"""

from __future__ import annotations

import gzip
import json
import pickle
from collections.abc import Callable
from typing import Any

import torch
from record_gpu import Cuda, Topic

MiB = 1 << 20
KiB = 1 << 10


def allocation_sequence(dev: torch.device, cuda: Cuda) -> None:
    """Small and large requests around the pool and segment-size boundaries, freed out of order."""
    keep = [torch.empty(n, dtype=torch.uint8, device=dev)
            for n in (1, 512, 513, MiB, MiB + 1, 3 * MiB, 13_200_000, 25 * MiB)]
    del keep[1], keep[3]
    keep.append(torch.empty(700_000, dtype=torch.uint8, device=dev))


def training_step(dev: torch.device, cuda: Cuda) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.Adam(model.parameters())
    for _ in range(2):
        model(torch.randn(64, 1024, device=dev)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()


def notebook_step(dev: torch.device, cuda: Cuda) -> None:
    """Notebook 07's own GPU cell: two Adam steps of a 64-128-10 MLP on a batch of 32."""
    torch.manual_seed(0)
    gmlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
    gopt = torch.optim.Adam(gmlp.parameters(), lr=1e-3)
    gx, gy = torch.randn(32, 64, device=dev), torch.randint(0, 10, (32,), device=dev)
    for _ in range(2):
        gopt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(gmlp(gx), gy).backward()
        gopt.step()


def fragmentation(dev: torch.device, cuda: Cuda) -> None:
    blocks = [torch.empty(6 * MiB, dtype=torch.uint8, device=dev) for _ in range(8)]
    del blocks[::2]
    torch.empty(7 * MiB, dtype=torch.uint8, device=dev)


def variable_batches(dev: torch.device, cuda: Cuda) -> None:
    """Notebook 07's realistic failure, small: activations of odd sizes, each batch keeping 2 MiB of predictions."""
    kept = []
    for m in (24, 31, 27, 37, 25, 33):
        size = m * MiB + 123 * KiB
        x = torch.empty(size, dtype=torch.uint8, device=dev)
        hidden = torch.empty(size, dtype=torch.uint8, device=dev)
        kept.append(torch.empty(2 * MiB, dtype=torch.uint8, device=dev))
        del x, hidden


def empty_cache(dev: torch.device, cuda: Cuda) -> None:
    a = torch.empty(30 * MiB, dtype=torch.uint8, device=dev)
    b = torch.empty(MiB // 2, dtype=torch.uint8, device=dev)
    del a
    cuda.empty_cache()
    del b
    cuda.empty_cache()


def record_stream(dev: torch.device, cuda: Cuda) -> None:
    side = cuda.Stream()
    x = torch.empty(4 * MiB, dtype=torch.uint8, device=dev)
    with cuda.stream(side):
        cuda.sleep(10_000_000)
        x.add_(1)
    if cuda.real:
        x.record_stream(side)
    del x
    torch.empty(4 * MiB, dtype=torch.uint8, device=dev)
    cuda.synchronize()
    torch.empty(4 * MiB, dtype=torch.uint8, device=dev)


def out_of_memory(dev: torch.device, cuda: Cuda) -> None:
    """Fill a 256 MiB cap with 40 MiB tensors until the allocator gives up; the trace ends with its `oom` entry."""
    if cuda.real:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(256 * MiB / total)
    keep = []
    try:
        for i in range(64 if cuda.real else 4):
            keep.append(torch.empty(40 * MiB, dtype=torch.uint8, device=dev))
            if i % 3 == 2:
                del keep[0]                      # a free now and then: the cache holds a 40 MiB block
        if cuda.real:
            raise AssertionError("no OOM under a 256 MiB cap")
    except torch.OutOfMemoryError as err:
        print("OOM:", str(err).splitlines()[0][:500])


SNAPSHOTS: dict[str, tuple[Callable[[torch.device, Cuda], None], dict[str, str]]] = {
    "allocation_sequence": (allocation_sequence, {}),
    "training_step": (training_step, {}),
    "notebook_step": (notebook_step, {}),
    "fragmentation": (fragmentation, {}),
    "variable_batches": (variable_batches, {}),
    "empty_cache": (empty_cache, {}),
    "record_stream": (record_stream, {}),
    "out_of_memory": (out_of_memory, {}),
    "expandable_training_step": (training_step, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    "expandable_variable_batches": (variable_batches, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
}


def _strip_frames(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_frames(v) for k, v in obj.items() if k != "frames"}
    if isinstance(obj, list):
        return [_strip_frames(v) for v in obj]
    return obj


def child(name: str, path: str, dry: bool) -> None:
    """In a fresh process: record scenario `name` and write its snapshot (frames dropped) to `path`."""
    cuda = Cuda(real=not dry)
    dev = torch.device("cpu" if dry else "cuda")
    fn, _ = SNAPSHOTS[name]
    if cuda.real:
        torch.cuda.init()
        torch.cuda.synchronize()
    cuda.start_history()
    fn(dev, cuda)
    snap = cuda.snapshot()
    with gzip.open(path, "wb") as f:
        pickle.dump(_strip_frames(snap), f)
    print(json.dumps({"segments": len(snap["segments"]),
                      "events": sum(len(t) for t in snap.get("device_traces", []))}))


def live_facts(dev: torch.device, cuda: Cuda) -> dict[str, Any]:
    """Notebook 07's live cells: the 100-allocation loop, request sizes → segments, and record_stream's pending free."""
    facts: dict[str, Any] = {}
    cuda.synchronize()
    before = cuda.memory_stats()
    for _ in range(100):
        t = torch.empty(1000, device=dev)
        del t
    after = cuda.memory_stats()
    facts["loop"] = {k: after.get(k, 0) - before.get(k, 0) for k in ("allocation.all.allocated", "num_device_alloc")}
    facts["loop"].update(allocated=cuda.memory_allocated(), reserved=cuda.memory_reserved())
    rows = []
    for n in (1, 512, 513, 4000, MiB, MiB + 1, 10 * MiB, 10 * MiB + 1, 13_200_000, 25 * MiB):
        cuda.empty_cache()
        known = {s["address"] for s in torch.cuda.memory_snapshot()} if cuda.real else set()
        before_bytes = cuda.memory_allocated()
        g = torch.empty(n, dtype=torch.uint8, device=dev)
        grew = cuda.memory_allocated() - before_bytes
        new = [(s["segment_type"], s["total_size"]) for s in torch.cuda.memory_snapshot()
               if s["address"] not in known] if cuda.real else []
        rows.append({"request": n, "allocated_grew": grew, "new_segments": new})
        del g
    facts["requests"] = rows
    main, side = cuda.current_stream(), cuda.Stream()
    src = torch.ones(8 * MiB, dtype=torch.uint8, device=dev)
    with cuda.stream(side):
        side.wait_stream(main)
        cuda.sleep(1_000_000_000)
        total = src.sum()
    if cuda.real:
        src.record_stream(side)
    del src
    st = cuda.memory_stats()
    pending = st.get("active_bytes.all.current", 0) - st.get("allocated_bytes.all.current", 0)
    side.synchronize()
    probe = torch.empty(1, device=dev)
    st = cuda.memory_stats()
    facts["record_stream"] = {"pending_right_after_del": pending,
                              "pending_after_side_sync": st.get("active_bytes.all.current", 0)
                              - st.get("allocated_bytes.all.current", 0)}
    del probe, total
    return facts


def checkpoint_memory(dev: torch.device, cuda: Cuda) -> dict[str, Any]:
    """Notebook 12 on a GPU: bytes held after the forward and the peak, plain vs checkpointed blocks."""
    import torch.utils.checkpoint as cp

    torch.manual_seed(0)
    blocks = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                                       torch.nn.Linear(4096, 1024)) for _ in range(6)]).to(dev)
    x = torch.randn(512, 1024, device=dev, requires_grad=True)
    out = {}
    for plan in ("plain", "checkpointed"):
        cuda.synchronize()
        base = cuda.memory_allocated()
        if cuda.real:
            torch.cuda.reset_peak_memory_stats()
        h = x
        for blk in blocks:
            h = cp.checkpoint(blk, h, use_reentrant=False) if plan == "checkpointed" else blk(h)
        held = cuda.memory_allocated() - base
        h.pow(2).mean().backward()
        cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) if cuda.real else 0
        out[plan] = {"held_after_forward": held, "peak_over_base": peak}
        del h
        x.grad = None
        for p in blocks.parameters():
            p.grad = None
    return out


def record(t: Topic) -> None:
    for name, (_, env) in SNAPSHOTS.items():
        with t.step(f"snapshot {name}") as e:
            path = t.dir / f"{name}.pickle.gz"
            code = f"from gpu_scenarios.allocator import child; child({name!r}, {str(path)!r}, {t.dry!r})"
            done = t.run_child(code, env=env, timeout=120)
            e.update(env=env, child=done)
            if done["returncode"] != 0:
                raise RuntimeError(f"child failed: {done['stderr'][-800:]}")
            t.files.append(path.name)
    with t.step("live facts (notebook 07)") as e:
        t.json("facts", live_facts(t.device, t.cuda))
    with t.step("checkpoint memory (notebook 12)") as e:
        result = checkpoint_memory(t.device, t.cuda)
        e["result"] = result
        t.json("checkpoint", result)

