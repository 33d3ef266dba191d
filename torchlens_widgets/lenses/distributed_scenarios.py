"""Ready-made steps for `distributed.run_ranks`: each is `step(rec, **kwargs)`, importable by a fresh worker
process, tiny (a 4-layer MLP, 8 samples) and deterministic (same seed on every rank, different data).

- `ddp_step`: DistributedDataParallel with a small bucket cap, so backward fires several buckets.
- `fsdp_step`: FSDP2 (`fully_shard` on each Linear and on the root) over a CPU device mesh.
- `manual_dp_step`: data parallel by hand: backward, then one all_reduce per gradient.
- `capstone_dp_step`: grades a learner's fused operator and one-bucket gradient averaging on the capstone's
  gated block against DDP on the original block (notebook 20's exercise).
- `raising_step` / `hanging_step`: one rank fails or never arrives, to show what the lens does about it.
"""

from __future__ import annotations

import time
from typing import Any

import torch

__all__ = ["capstone_dp_step", "ddp_step", "fsdp_step", "hanging_step", "manual_dp_step", "mlp", "raising_step"]

SIZES = (16, 32, 32, 32, 4)


def mlp(sizes: tuple[int, ...] = SIZES, seed: int = 0) -> torch.nn.Sequential:
    """Linear/ReLU layers of the given widths, initialised from `seed` (identical on every rank)."""
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:], strict=False)):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def _batch(rank: int, it: int, n: int = 8, d: int = SIZES[0]) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * rank + it)
    return torch.randn(n, d, generator=g)


def ddp_step(rec: Any, *, bucket_cap_mb: float = 0.001, iterations: int = 2, no_sync: bool = False,
             sizes: list[int] | None = None) -> dict[str, Any]:
    """`iterations` DDP training steps (SGD); with `no_sync`, one more iteration under `ddp.no_sync()` just before
    the last, whose gradients are only accumulated. Returns DDP's own bucket record (ground truth)."""
    model = mlp(tuple(sizes) if sizes else SIZES)
    names = [n for n, _ in model.named_parameters()]
    ddp = rec.ddp(model, bucket_cap_mb=bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    plan = [False] * iterations
    if no_sync:
        plan.insert(max(len(plan) - 1, 0), True)
    for i, skip in enumerate(plan):
        with rec.iteration(no_sync=skip):
            x = _batch(rec.rank, i)
            if skip:
                with ddp.no_sync():
                    rec.backward(ddp(x).square().mean())
            else:
                rec.backward(ddp(x).square().mean())
                opt.step()
                opt.zero_grad()
    # DDP logs the rebuilt partition at the next synced forward; after the last backward, ask for it now
    ddp.logger.set_runtime_stats_and_log()
    log = ddp._get_ddp_logging_data()
    rebuilt = log.get("rebuilt_per_bucket_param_indices")
    partition = [[names[int(i)] for i in b.split()] for b in rebuilt.split(",")] if rebuilt else None
    sizes_b = [int(s) for s in log["rebuilt_bucket_sizes"].split(",")] if log.get("rebuilt_bucket_sizes") else None
    return {"ddp_partition": partition, "ddp_bucket_bytes": sizes_b, "bucket_cap_bytes": log.get("bucket_cap_bytes"),
            "param_bytes": {n: p.nbytes for n, p in model.named_parameters()}}


def fsdp_step(rec: Any, *, iterations: int = 1, reshard_after_forward: bool = True,
              sizes: list[int] | None = None) -> dict[str, Any]:
    """FSDP2 training steps: each Linear and the root are `fully_shard`ed over a 1-D CPU mesh. Returns each
    parameter's DTensor local shape on this rank (ground truth for the lens)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = mlp(tuple(sizes) if sizes else SIZES)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
    rec.fsdp(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(iterations):
        with rec.iteration():
            rec.backward(model(_batch(rec.rank, i)).square().mean())
            opt.step()
            opt.zero_grad()
    return {"local_shapes": {n: list(p.to_local().shape) for n, p in model.named_parameters()
                             if isinstance(p, DTensor)}}


def manual_dp_step(rec: Any, *, iterations: int = 1) -> dict[str, Any]:
    """Data parallel by hand: a full backward, then one all_reduce per gradient (no overlap with backward)."""
    model = mlp()
    rec.watch(model)
    for i in range(iterations):
        with rec.iteration():
            model.zero_grad()
            rec.backward(model(_batch(rec.rank, i)).square().mean())
            grads = [(n, p.grad) for n, p in model.named_parameters() if p.grad is not None]
            for n, g in grads:
                rec.all_reduce(g, n)
    return {"grad_norm": float(sum(float(g.norm()) ** 2 for _, g in grads) ** 0.5)}


def raising_step(rec: Any, *, bad_rank: int = 1, message: str = "this rank's batch was malformed") -> None:
    """Rank `bad_rank` raises ValueError(message); the others wait in an all_reduce for it."""
    import torch.distributed as dist

    if rec.rank == bad_rank:
        raise ValueError(message)
    dist.all_reduce(torch.ones(4))


def hanging_step(rec: Any, *, bad_rank: int = 1, seconds: float = 600.0) -> None:
    """Rank `bad_rank` sleeps `seconds` (never reaching the collective); the others wait in an all_reduce."""
    import torch.distributed as dist

    if rec.rank == bad_rank:
        time.sleep(seconds)
    dist.all_reduce(torch.ones(4))


# Captured at import, before any learner code runs in this worker: what `capstone_dp_step` measures with.
_TOLIST = torch.Tensor.tolist
_EQUAL = torch.equal


def _patch_direct(counter: dict[str, int]) -> list[tuple[Any, str, Any]]:
    """Count collectives a learner's code calls on torch.distributed directly (not through the all_reduce it was
    given); returns what to restore."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    saved = []
    for mod in (dist, c10d):
        for name in ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
                     "all_reduce_coalesced", "reduce_scatter_tensor", "all_gather_into_tensor"):
            orig = getattr(mod, name, None)
            if orig is None:
                continue

            def counted(*args: Any, _orig: Any = orig, **kwargs: Any) -> Any:
                counter["direct"] += 1
                return _orig(*args, **kwargs)

            saved.append((mod, name, orig))
            setattr(mod, name, counted)
    return saved


def _max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    xs, ys = _TOLIST(a.detach().double().flatten()), _TOLIST(b.detach().double().flatten())
    return max((abs(x - y) for x, y in zip(xs, ys, strict=True)), default=0.0)



def _iteration(names: list[str], params: list[Any], want: list[Any], state: dict[str, Any]) -> dict[str, Any]:
    """One iteration of a learner's data parallelism against DDP's gradients `want`: how far off, what was left
    without a gradient, and the all_reduce calls and bytes `state` counted."""
    missing = [n for n, p in zip(names, params, strict=True) if p.grad is None]
    diffs = [_max_abs_diff(p.grad, w) for p, w in zip(params, want, strict=True) if p.grad is not None]
    mine = sum(_abs_sum(p.grad) for p in params if p.grad is not None)
    theirs = sum(_abs_sum(w) for w in want)
    return {"max_diff": max(diffs, default=0.0), "ratio": mine / theirs if theirs else 0.0,
            "missing": missing, "calls": state["calls"], "bytes": state["bytes"]}


def _sizes(params: list[Any], want: list[list[Any]]) -> dict[str, Any]:
    return {"param_bytes": sum(p.nbytes for p in params), "params": len(params),
            "max_grad": max(max(abs(x) for x in _TOLIST(w.double().flatten())) for w in want[0])}

def _abs_sum(a: torch.Tensor) -> float:
    return sum(abs(x) for x in _TOLIST(a.detach().double().flatten()))


def capstone_dp_step(rec: Any, *, source: str, op_name: str = "define_fused_op",
                     sync_name: str = "average_gradients", sizes: list[int] | None = None, batch: int = 8,
                     seed: int = 0, iterations: int = 2) -> dict[str, Any]:
    """Grade the capstone's data-parallel stage (exercise 20-data-parallel). Runs DDP on the original
    `capstone.GatedBlock` (d, h = `sizes`) over this rank's batches first, before any learner code; then execs
    `source` (an operator's `define_fused_op(name)` — the check's own, since the capstone's operator is C++ — and the
    learner's `average_gradients(model, all_reduce, world_size)`) in a
    fresh namespace holding `torch`, `F` and `Tensor`, registers the operator under a namespace of this process,
    builds the same block with it as the activation and, for each iteration, runs forward and backward, then
    calls `average_gradients` once. Returns per iteration the largest |grad - DDP grad|, the ratio of summed
    |grad|, parameters without a gradient, and the all_reduce calls and bytes made by that call; plus whether
    the forward used the operator, and collectives called on torch.distributed directly."""
    import os

    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    from .capstone import GatedBlock

    d, h = (int(sizes[0]), int(sizes[1])) if sizes else (8, 32)
    reduce_sum = dist.all_reduce

    def data(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(1000 * rec.rank + i)
        return torch.randn(batch, d, generator=g), torch.randn(batch, d, generator=g)

    # 1. the reference: DDP on the original block, before any learner code runs in this process
    reference = GatedBlock(d, h, seed=seed)
    ddp = DDP(reference)
    want = []
    for i in range(iterations):
        ddp.zero_grad(set_to_none=True)
        x, y = data(i)
        F.mse_loss(ddp(x), y).backward()
        want.append([p.grad.detach().clone() for p in reference.parameters() if p.grad is not None])
    del ddp
    state = {"calls": 0, "bytes": 0, "direct": 0, "op_calls": 0}

    def all_reduce(tensor: Any) -> None:
        """Sum `tensor` in place over all ranks (every rank must call it with a tensor of the same shape)."""
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"all_reduce takes a tensor, got {type(tensor).__name__}")
        state["calls"] += 1
        state["bytes"] += tensor.numel() * tensor.element_size()
        reduce_sum(tensor)

    saved = _patch_direct(state)
    try:
        namespace: dict[str, Any] = {"__name__": "your_answer", "torch": torch, "F": F, "Tensor": torch.Tensor}
        exec(compile(source, "<your answer>", "exec"), namespace)
        for name in (op_name, sync_name):
            if not callable(namespace.get(name)):
                raise NameError(f"the source defines no function named {name!r}")
        op = namespace[op_name](f"tlw_rank{rec.rank}_{os.getpid()}::gelu_gate")

        def counted(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            state["op_calls"] += 1
            return op(u, v)

        model = GatedBlock(d, h, act=counted, seed=seed)
        names = [n for n, _ in model.named_parameters()]
        params = list(model.parameters())
        its = []
        for i in range(iterations):
            model.zero_grad(set_to_none=True)
            x, y = data(i)
            F.mse_loss(model(x), y).backward()
            state["calls"] = state["bytes"] = 0
            namespace[sync_name](model, all_reduce, dist.get_world_size())
            its.append(_iteration(names, params, want[i], state))
    finally:
        for mod, attr, orig in saved:
            setattr(mod, attr, orig)
    return {"iterations": its, **_sizes(params, want),
            "op_calls": state["op_calls"], "direct_calls": state["direct"]}
