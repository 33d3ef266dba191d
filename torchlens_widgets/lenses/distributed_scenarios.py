"""Ready-made steps for `distributed.run_ranks`: each is `step(rec, **kwargs)`, importable by a fresh worker
process, tiny (a 4-layer MLP, 8 samples) and deterministic (same seed on every rank, different data).

- `ddp_step`: DistributedDataParallel with a small bucket cap, so backward fires several buckets.
- `fsdp_step`: FSDP2 (`fully_shard` on each Linear and on the root) over a CPU device mesh.
- `manual_dp_step`: data parallel by hand: backward, then one all_reduce per gradient.
- `raising_step` / `hanging_step`: one rank fails or never arrives, to show what the lens does about it.
"""

from __future__ import annotations

import time
from typing import Any

import torch

__all__ = ["ddp_step", "fsdp_step", "hanging_step", "manual_dp_step", "mlp", "raising_step"]

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
