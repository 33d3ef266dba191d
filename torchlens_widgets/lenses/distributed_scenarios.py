"""Ready-made steps for `distributed.run_ranks`: each is `step(rec, **kwargs)`, importable by a fresh worker
process, tiny (a 4-layer MLP, 8 samples) and deterministic (same seed on every rank, different data).

- `ddp_step`: DistributedDataParallel with a small bucket cap, so backward fires several buckets.
- `fsdp_step`: FSDP2 (`fully_shard` on each Linear and on the root) over a CPU device mesh.
- `manual_dp_step`: data parallel by hand: backward, then one all_reduce per gradient.
- `capstone_dp_step`: grades a learner's fused operator and one-bucket gradient averaging on the capstone's
  gated block against DDP on the original block (notebook 20's exercise).
- `raising_step` / `hanging_step`: one rank fails or never arrives, to show what the lens does about it.
- `ddp_facts_step`: DDP's rank-0 broadcast at construction, what `no_sync()` really keys on (the forward),
  `gradient_as_bucket_view`'s saving, an unused parameter with and without `find_unused_parameters`, and
  `static_graph` (notebook 18, section 3).
- `local_shards`: FSDP2's local shard shapes and storage bytes for rank r of N, in this process (fake backend).
- `SimulatedGroup`: N ranks played in turn by one process, with an asynchronous all-reduce whose handles sum call k
  of every rank when one of them is waited for (notebook 18's overlap exercise: cheap, no rank processes).
"""

from __future__ import annotations

import time
from typing import Any

import torch

__all__ = ["SimulatedGroup", "capstone_dp_step", "ddp_facts_step", "ddp_step", "fsdp_step", "hanging_step", "local_shards",
           "manual_dp_step", "mlp", "raising_step"]

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
    # fully_shard sends nothing, so nothing has lined the ranks up yet (DDP's constructor broadcasts): without this,
    # the first all-gather of a rank that started early waits there for the others, and the picture's time axis
    # starts with that wait
    dist.barrier()
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


def local_shards(sizes: list[int] | tuple[int, ...], rank: int, world_size: int) -> dict[str, tuple[tuple[int, ...], int]]:
    """`fully_shard` the MLP of `sizes` as rank `rank` of `world_size`, in this process, over the fake backend (its
    collectives do nothing; the sharding is FSDP2's own). Returns, per parameter, the DTensor's local shape and the
    bytes of the storage under it (padding included)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=rank, world_size=world_size, store=FakeStore())
    try:
        model = mlp(tuple(sizes))
        fully_shard(model, mesh=init_device_mesh("cpu", (world_size,)))
        return {n: (tuple(p.to_local().shape), p.to_local().untyped_storage().nbytes())  # type: ignore[attr-defined]
                for n, p in model.named_parameters()}
    finally:
        dist.destroy_process_group()


class _WithUnused(torch.nn.Module):
    """The MLP plus a Linear that forward never uses."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp()
        self.unused = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # type: ignore[no-any-return]


def ddp_facts_step(rec: Any, *, bucket_cap_mb: float = 0.001) -> dict[str, Any]:
    """Several small DDP facts, each measured on this rank (world size from the process group):

    - `broadcast`: every rank builds the MLP from a seed of its own; are the ranks' parameters equal before DDP,
      after DDP's constructor, and did rank 0 keep its own?
    - `no_sync`: buckets all-reduced per backward for each placement of forward and backward inside/outside
      `ddp.no_sync()` (a counting comm hook that does DDP's default all-reduce);
    - `bucket_view`: after two iterations, with `gradient_as_bucket_view` False and True: the bytes of parameters,
      of the gradients' storages, of the bucket buffers, and of the distinct storages under gradients and buckets;
    - `unused`: a model with a parameter forward never uses: the error of the second forward without
      `find_unused_parameters`, and with it / with `static_graph` the bucket bytes all-reduced per backward and
      whether the unused parameter got a gradient."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    world = dist.get_world_size()

    def flat(module: torch.nn.Module) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in module.parameters()])

    def gathered(t: torch.Tensor) -> list[torch.Tensor]:
        out = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(out, t)
        return out

    def counting(log: list[int], buffers: dict[int, int] | None = None) -> Any:
        def hook(state: Any, bucket: Any) -> Any:
            buf = bucket.buffer()
            log.append(buf.numel() * buf.element_size())
            if buffers is not None:
                buffers[buf.untyped_storage().data_ptr()] = buf.untyped_storage().nbytes()
            buf.div_(world)
            fut = dist.all_reduce(buf, async_op=True).get_future()
            return fut.then(lambda f: f.value()[0])
        return lambda state, bucket: hook(state, bucket)  # unannotated: DDP checks a hook's annotations

    # 1. the rank-0 broadcast at construction
    own = mlp(seed=rec.rank)
    mine_before = flat(own).clone()
    before = gathered(mine_before)
    ddp = DDP(own, bucket_cap_mb=bucket_cap_mb)
    after = gathered(flat(own))
    broadcast = {"equal_before": all(_EQUAL(before[0], b) for b in before[1:]),
                 "equal_after": all(_EQUAL(after[0], a) for a in after[1:]),
                 "kept_own": bool(_EQUAL(flat(own), mine_before)), "equals_rank0_before": bool(_EQUAL(after[0], before[0]))}

    # 2. no_sync: which of forward and backward has to be inside?
    log: list[int] = []
    ddp.register_comm_hook(None, counting(log))
    no_sync: dict[str, int] = {}
    for i, (fwd_in, bwd_in) in enumerate(((False, False), (True, True), (True, False), (False, True), (False, False))):
        ddp.zero_grad(set_to_none=True)
        del log[:]
        x = _batch(rec.rank, i)
        if fwd_in:
            with ddp.no_sync():
                loss = ddp(x).square().mean()
        else:
            loss = ddp(x).square().mean()
        if bwd_in:
            with ddp.no_sync():
                loss.backward()
        else:
            loss.backward()
        key = f"forward {'inside' if fwd_in else 'outside'}, backward {'inside' if bwd_in else 'outside'}"
        no_sync[key if i else "first iteration (no no_sync)"] = len(log)
        if (fwd_in, bwd_in) == (False, True):  # were the gradients averaged over the ranks?
            everyone = gathered(torch.cat([p.grad.reshape(-1) for p in own.parameters()  # type: ignore[union-attr]
                                           ]))
            no_sync["grads equal on all ranks after forward outside, backward inside"] = int(
                all(_EQUAL(everyone[0], g) for g in everyone[1:]))
    del ddp

    # 3. gradient_as_bucket_view: who holds gradient-sized memory
    bucket_view: dict[str, dict[str, int]] = {}
    for as_view in (False, True):
        model = mlp()
        buffers: dict[int, int] = {}
        ddp = DDP(model, bucket_cap_mb=bucket_cap_mb, gradient_as_bucket_view=as_view)
        ddp.register_comm_hook(None, counting([], buffers))
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        for i in range(3):  # DDP rebuilds its buckets after the first iteration; the views come with the rebuild
            opt.zero_grad(set_to_none=False)
            buffers.clear()
            ddp(_batch(rec.rank, i)).square().mean().backward()
            opt.step()
        storages: dict[int, int] = {
            p.grad.untyped_storage().data_ptr(): p.grad.untyped_storage().nbytes()  # type: ignore[union-attr]
            for p in model.parameters()}
        bucket_view[str(as_view)] = {
            "params": sum(p.nbytes for p in model.parameters()), "grads": sum(storages.values()),
            "buckets": sum(buffers.values()), "grad_and_bucket_storage": sum({**storages, **buffers}.values()),
            "grads_in_buckets": sum(1 for ptr in storages if ptr in buffers)}
        del ddp, opt

    # 4. a parameter forward never uses
    unused: dict[str, Any] = {}
    ddp = DDP(_WithUnused(), bucket_cap_mb=bucket_cap_mb)
    try:
        for i in range(2):
            ddp(_batch(rec.rank, i)).square().mean().backward()
        unused["plain"] = "no error"
    except RuntimeError as e:
        unused["plain"] = str(e).split(". ")[0]
    del ddp
    for label in ("find_unused_parameters", "static_graph"):
        with_unused = _WithUnused()
        log = []
        ddp = DDP(with_unused, bucket_cap_mb=bucket_cap_mb, find_unused_parameters=label == "find_unused_parameters",
                  static_graph=label == "static_graph")
        ddp.register_comm_hook(None, counting(log))
        per_iteration = []
        for i in range(3):
            ddp.zero_grad(set_to_none=True)
            del log[:]
            ddp(_batch(rec.rank, i)).square().mean().backward()
            per_iteration.append(sum(log))
        unused[label] = {"bucket_bytes": per_iteration, "unused_grad": with_unused.unused.weight.grad is not None,
                         "used_bytes": sum(p.nbytes for p in with_unused.net.parameters()),
                         "all_bytes": sum(p.nbytes for p in with_unused.parameters())}
        del ddp
    return {"broadcast": broadcast, "no_sync": no_sync, "bucket_view": bucket_view, "unused": unused}


class _Handle:
    """What `SimulatedGroup`'s all_reduce_async returns: `wait()` returns once the sum is in the tensor."""

    __slots__ = ("_group", "_k", "_rank")

    def __init__(self, group: SimulatedGroup, rank: int, k: int) -> None:
        self._group, self._rank, self._k = group, rank, k

    def wait(self) -> None:
        self._group._wait(self._rank, self._k)


class SimulatedGroup:
    """`world_size` ranks played in turn by this process: each rank's backward runs while `rank` is set to it, then
    each rank's `finish`. `all_reduce_async(rank)` is that rank's collective: call k of a rank is matched with call k
    of every other rank, like a real one; it returns a handle whose `wait()` sums the k-th tensors of all ranks, in
    place in each, the first time any rank waits for it. A wait during a backward cannot be served (the other ranks'
    backward has not run yet; on real ranks it would stall this one until they arrive): it is recorded and raises.
    Per rank and backward it records each launch (during which rank's backward, how many gradients the
    `counter(rank)` hooks had seen written, the tensor's values then) and each wait."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.rank: int | None = None
        self.written = [0] * world_size
        self.reset()

    def reset(self) -> None:
        """Forget the last backward's collectives (call before every iteration)."""
        self.launches: list[list[dict[str, Any]]] = [[] for _ in range(self.world_size)]
        self.waits: list[list[tuple[int, bool]]] = [[] for _ in range(self.world_size)]
        self.written = [0] * self.world_size
        self.waited_in_backward = False
        self.unmatched: list[str] = []
        self._tensors: dict[int, dict[int, torch.Tensor]] = {}
        self._done: set[int] = set()

    def counter(self, rank: int) -> Any:
        """A post-accumulate-grad hook that counts the gradients written on `rank`."""
        def count(param: Any) -> None:
            self.written[rank] += 1
        return count

    def all_reduce_async(self, rank: int) -> Any:
        group = self

        def all_reduce_async(tensor: Any) -> _Handle:
            """Start summing `tensor` in place over all ranks; returns a handle whose wait() returns once the sum
            is in `tensor`. Every rank must make its calls in the same order, with tensors of the same shape."""
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"all_reduce_async takes a tensor, got {type(tensor).__name__}")
            k = len(group.launches[rank])
            group.launches[rank].append({"backward_of": group.rank, "written": group.written[rank],
                                         "values": tensor.detach().reshape(-1).clone()})
            group._tensors.setdefault(k, {})[rank] = tensor
            return _Handle(group, rank, k)
        return all_reduce_async

    def _wait(self, rank: int, k: int) -> None:
        self.waits[rank].append((k, self.rank is not None))
        if self.rank is not None:
            self.waited_in_backward = True
            raise RuntimeError("wait() ran during backward: the other ranks have not launched this collective yet")
        tensors = self._tensors.get(k, {})
        if len(tensors) < self.world_size or len({tuple(t.shape) for t in tensors.values()}) != 1:
            self.unmatched.append(f"call {k + 1}")
            raise RuntimeError(f"all_reduce_async call {k + 1} was not made by every rank with tensors of one shape")
        if k not in self._done:
            self._done.add(k)
            with torch.no_grad():
                total = sum((t.detach().clone() for t in tensors.values()), torch.zeros_like(tensors[0]))
                for t in tensors.values():
                    t.copy_(total)


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
