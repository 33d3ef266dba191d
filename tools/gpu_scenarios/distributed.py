"""Notebook 18 on one GPU: NCCL needs two GPUs to move data, and one is lent. What one rank still shows truly:
the collective is a kernel on NCCL's own stream, ordered after the compute stream, and asynchronous to the host.

Runs in a child process (a one-rank process group over a file store) so nothing outlives it.
"""

from __future__ import annotations

import json

from record_gpu import Topic

CHILD = r"""
import json, os, sys, tempfile, time
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

cuda = torch.cuda.is_available()
backend, dev = ("nccl", "cuda") if cuda else ("gloo", "cpu")
store = tempfile.NamedTemporaryFile(delete=False).name
dist.init_process_group(backend, init_method=f"file://{store}", rank=0, world_size=1)
out = {"backend": dist.get_backend(), "world_size": dist.get_world_size()}
try:
    if cuda:
        out["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    x = torch.randn(4096, 4096, device=dev)
    g = torch.ones(8 * 2**20, device=dev)
    for _ in range(2):
        y = x @ x
        dist.all_reduce(g)
    if cuda:
        torch.cuda.synchronize()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        y = x @ x                                   # compute on the default stream
        t0 = time.perf_counter()
        work = dist.all_reduce(g, async_op=True)    # queued behind it on NCCL's stream
        out["async_call_ms"] = (time.perf_counter() - t0) * 1e3
        out["completed_right_after_call"] = work.is_completed()
        work.wait()                                 # orders the current stream after the collective; host goes on
        out["completed_after_wait"] = work.is_completed()
        if cuda:
            torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "t.json")
    prof.export_chrome_trace(path)
    events = json.load(open(path))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    out["kernels"] = [{"name": e["name"][:120], "stream": e.get("args", {}).get("stream"), "ts": e["ts"],
                       "dur": e.get("dur")} for e in kernels]
    out["host_ops"] = sorted({e["name"] for e in events if e.get("cat") == "cpu_op"
                              and any(k in e["name"].lower() for k in ("nccl", "allreduce", "all_reduce", "gloo"))})
    out["value_after_two_plus_one_allreduce"] = float(g[0])   # world size 1: the sum is the tensor itself
finally:
    dist.destroy_process_group()
    os.unlink(store)
print("RESULT " + json.dumps(out))
"""


def record(t: Topic) -> None:
    with t.step("one-rank NCCL all_reduce next to a matmul") as e:
        done = t.run_child(CHILD, timeout=150)
        line = next((ln for ln in done["stdout"].splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            raise RuntimeError(f"child gave no result (exit {done['returncode']}): {done['stderr'][-1500:]}")
        result = json.loads(line.removeprefix("RESULT "))
        streams = {k["stream"] for k in result.get("kernels", [])}
        result["note"] = ("One GPU: NCCL moves no data between ranks here. The trace shows where the collective runs "
                          "(its kernel and stream) and that the host call returns before it finishes.")
        e.update(backend=result["backend"], kernel_streams=sorted(map(str, streams)))
        t.json("one_rank_allreduce", result)
