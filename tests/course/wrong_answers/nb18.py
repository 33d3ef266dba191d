"""Wrong answers for notebook 18 (DDP and FSDP): each must fail its check for the reason in `expect`."""

from __future__ import annotations

import inspect

from tests.course.exercises import test_n18
from tests.course.wrong_answers import Wrong


def _sync(body: str) -> str:
    return f"def sync_gradients(model, all_reduce, world_size):\n{body}\n"


def _buckets(body: str) -> str:
    return f"def bucket_partition(params, cap_bytes, first_cap_bytes=None):\n{body}\n"


def _fsdp(body: str) -> str:
    return f"import math\n\n\ndef fsdp_peak_bytes(layers, world_size, itemsize):\n{body}\n"


_ONCE = "each should go through all_reduce exactly once per backward"
# the reference's walk with one part changed: `key` picks a gradient's open bucket, `size` its bytes, `cmp` closes it,
# `next_cap` is the cap of the bucket opened after one closes, `first_of` the cap of a key's first bucket
_WALK = """    first = cap_bytes if first_cap_bytes is None else first_cap_bytes
    filling, closed, keys = {{}}, [], []
    for position, (_name, numel, dtype) in enumerate(params):
        key = {key}
        if key not in keys:
            keys.append(key)
        positions, size, limit = filling.get(key, ([], 0, {first_of}))
        positions.append(position)
        size += {size}
        if size {cmp} limit:
            closed.append(positions)
            filling[key] = ([], 0, {next_cap})
        else:
            filling[key] = (positions, size, limit)
    buckets = sorted(closed + [positions for positions, _, _ in filling.values() if positions])
    return [[params[i][0] for i in bucket] for bucket in buckets]"""


def _walk(key: str = "dtype", size: str = "numel * dtype.itemsize", cmp: str = ">=", next_cap: str = "cap_bytes",
          first_of: str = "first") -> str:
    return _buckets(_WALK.format(key=key, size=size, cmp=cmp, next_cap=next_cap, first_of=first_of))


# the reference's sum with one part changed: `rows` per rank, what a layer's all-gather adds, how layers combine
_PEAK = """    shards, gathered_all = 0, []
    for layer in layers:
        gathered = 0
        for shape in layer:
            rows = {rows}
            nbytes = rows * math.prod(shape[1:]) * itemsize
            shards += nbytes
            gathered += {gathered}
        gathered_all.append(gathered)
    return [{total}] * world_size"""


def _peak(rows: str = "-(-shape[0] // world_size)", gathered: str = "world_size * nbytes",
          total: str = "shards + max(gathered_all)") -> str:
    return _fsdp(_PEAK.format(rows=rows, gathered=gathered, total=total))


WRONG = {
    "18-hand-dp": [
        Wrong("sums without dividing by the world size", _sync("""    def hook(param):
        all_reduce(param.grad)

    for param in model.parameters():
        param.register_post_accumulate_grad_hook(hook)"""), "yours are 3.000 times DDP's"),
        Wrong("divides by 2, the number of ranks everywhere else in this notebook", _sync("""    def hook(param):
        all_reduce(param.grad)
        param.grad.div_(2)

    for param in model.parameters():
        param.register_post_accumulate_grad_hook(hook)"""), "on 3 ranks, rank 0, backward 1: gradients differ"),
        Wrong("all-reduces the weights only", _sync("""    def hook(param):
        all_reduce(param.grad)
        param.grad.div_(world_size)

    for param in model.parameters():
        if param.dim() > 1:
            param.register_post_accumulate_grad_hook(hook)"""), _ONCE),
        Wrong("all-reduces every gradient twice", _sync("""    def hook(param):
        all_reduce(param.grad)
        param.grad.div_(world_size)

    for param in list(model.parameters()) * 2:
        param.register_post_accumulate_grad_hook(hook)"""), _ONCE),
        Wrong("scales the local gradients, no all_reduce", _sync("""    def hook(param):
        param.grad.div_(world_size)

    for param in model.parameters():
        param.register_post_accumulate_grad_hook(hook)"""),
              "all_reduce never ran", gaming=True),
        Wrong("calls torch.distributed.all_reduce itself", _sync("""    def hook(param):
        torch.distributed.all_reduce(param.grad)
        param.grad.div_(world_size)

    for param in model.parameters():
        param.register_post_accumulate_grad_hook(hook)"""), "called torch.distributed's collectives itself",
              gaming=True),
        Wrong("sums through the process group's own allreduce; zeros through the given one, to be counted",
              _sync("""    group = torch.distributed.group.WORLD

    def hook(param):
        all_reduce(torch.zeros_like(param.grad))
        group.allreduce([param.grad]).wait()
        param.grad.div_(world_size)

    for param in model.parameters():
        param.register_post_accumulate_grad_hook(hook)"""), "called torch.distributed's collectives itself",
              gaming=True),
        Wrong("sums through the gloo backend's allreduce, past the dispatcher; zeros through the given one",
              _sync("""    def hook(param):
        backend = torch.distributed.group.WORLD._get_backend(torch.device("cpu"))
        all_reduce(torch.zeros_like(param.grad))
        backend.allreduce([param.grad]).wait()
        param.grad.div_(world_size)

    for param in model.parameters():
        param.register_post_accumulate_grad_hook(hook)"""), "called torch.distributed's collectives itself",
              gaming=True),
    ],
    "18-predict-buckets": [
        Wrong("closes the open bucket whenever the dtype changes", _buckets("""    first = cap_bytes if first_cap_bytes is None else first_cap_bytes
    buckets, current, size, limit, last = [], [], 0, first, None
    for name, numel, dtype in params:
        if current and dtype != last:
            buckets.append(current)
            current, size, limit = [], 0, cap_bytes
        current.append(name)
        size += numel * dtype.itemsize
        last = dtype
        if size >= limit:
            buckets.append(current)
            current, size, limit = [], 0, cap_bytes
    if current:
        buckets.append(current)
    return buckets"""), "cap_bytes=2000, first_cap_bytes=None): expected 5 entries, got 7"),
        Wrong("one open bucket for every dtype (section 2's rule as it stands)", _walk(key="0"),
              "cap_bytes=2000, first_cap_bytes=None): expected 5 entries, got 4"),
        Wrong("counts elements, not bytes", _walk(size="numel"),
              "cap_bytes=2000, first_cap_bytes=None): expected 5 entries, got 3"),
        Wrong("the first cap for the model's first bucket only, not each dtype's", _walk(
            first_of="first if not closed and len(keys) == 1 else cap_bytes"), "first_cap_bytes=600): expected 7 entries, got 6"),
        Wrong("one bucket per itemsize (bfloat16 and float16 together)", _walk(key="dtype.itemsize"),
              "hidden case 7: the partition is not right"),
        Wrong("closes a bucket only above the cap", _walk(cmp=">"), "hidden case 1: the partition is not right"),
        Wrong("the visible answers, written out", _buckets("""    names = [p[0] for p in params]
    if first_cap_bytes is None:
        return [names[0:1] + names[3:4], names[1:3] + names[5:7], names[4:5], names[7:9], names[9:]]
    return [names[0:1], names[1:3] + names[5:6], names[3:4], names[4:5], names[6:7], names[7:9], names[9:]]"""),
              "hidden case 1: the partition is not right", gaming=True),
        Wrong("reads the expected partition from the check's frame",
              "import sys\n\n\n" + _buckets("""    frame = sys._getframe(1)
    while frame is not None:
        for name in ("_want", "want", "expected"):
            if name in frame.f_locals:
                return frame.f_locals[name]
        frame = frame.f_back
    return []"""), "bucket_partition(the 10 parameters", gaming=True),
        Wrong("asks DDP's own C++ function", _buckets("""    tensors = [torch.empty(n, dtype=d) for _, n, d in params]
    first = cap_bytes if first_cap_bytes is None else first_cap_bytes
    idx, _ = torch.distributed._compute_bucket_assignment_by_size(tensors, [first, cap_bytes], [False] * len(tensors))
    return [[params[i][0] for i in b] for b in idx]"""), "ran aten.", gaming=True),
    ],
    "18-fsdp-memory": [
        Wrong("the whole model on every rank, as DDP", _peak(rows="shape[0]", gathered="0"), "world_size=2, itemsize=4)"),
        Wrong("the shards only, nothing gathered", _peak(gathered="0"), "world_size=2, itemsize=4)"),
        Wrong("the padding not counted (local shapes, exact all-gathers)", _fsdp("""    held = [0] * world_size
    largest = 0
    for layer in layers:
        largest = max(largest, sum(math.prod(s) for s in layer) * itemsize)
        for shape in layer:
            chunk = -(-shape[0] // world_size)
            for rank in range(world_size):
                held[rank] += max(0, min(chunk, shape[0] - rank * chunk)) * math.prod(shape[1:]) * itemsize
    return [h + largest for h in held]"""), "world_size=2, itemsize=4)[1]"),
        Wrong("every layer kept gathered (as reshard_after_forward=False)", _peak(total="shards + sum(gathered_all)"),
              "world_size=2, itemsize=4)"),
        Wrong("the two largest layers gathered at once (backward's prefetch)",
              _peak(total="shards + sum(sorted(gathered_all)[-2:])"), "world_size=2, itemsize=4)"),
        Wrong("the first layer gathered, not the largest", _peak(total="shards + gathered_all[0]"),
              "world_size=2, itemsize=4)"),
        Wrong("the full model divided by 2", _fsdp("""    full = sum(math.prod(s) for layer in layers for s in layer) * itemsize
    return [full // 2 + max(sum(math.prod(s) for s in layer) for layer in layers) * itemsize] * world_size"""),
              "world_size=2, itemsize=4)"),
        Wrong("the visible answers, written out", _fsdp("""    return [7688] * 2 if world_size == 2 else [162] * 3"""),
              "hidden case 1: the list of peak bytes per rank is not right", gaming=True),
        Wrong("right on 2 and 3 ranks, padding forgotten elsewhere", _fsdp("""    rows = (lambda n: -(-n // world_size)) if world_size in (2, 3) else (lambda n: n / world_size)
    shards = sum(rows(s[0]) * math.prod(s[1:]) * itemsize for layer in layers for s in layer)
    largest = max(sum(world_size * rows(s[0]) * math.prod(s[1:]) * itemsize for s in layer) for layer in layers)
    return [int(shards + largest)] * world_size"""), "hidden case 1: the list of peak bytes per rank is not right",
              gaming=True),
        Wrong("measures FSDP itself, over a fake process group", _fsdp("""    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dtype = {2: torch.bfloat16, 4: torch.float32, 8: torch.float64}[itemsize]
    torch.distributed.init_process_group("fake", rank=0, world_size=world_size, store=FakeStore())
    try:
        m = torch.nn.Module()
        m.ps = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(s, dtype=dtype)) for l in layers for s in l])
        fully_shard(m, mesh=init_device_mesh("cpu", (world_size,)))
        held = sum(p.to_local().untyped_storage().nbytes() for p in m.parameters())
    finally:
        torch.distributed.destroy_process_group()
    return [held] * world_size"""), "ran aten.", gaming=True),
        Wrong("reads the expected bytes from the check's frame", _fsdp("""    import sys
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("_want", "want", "expected"):
            if name in frame.f_locals:
                return frame.f_locals[name]
        frame = frame.f_back
    return [0] * world_size"""), "world_size=2, itemsize=4)", gaming=True),
    ],
}


# The in-process tests' reference (tests/course/exercises/test_n18.py), one part changed per wrong answer
_REFERENCE = inspect.getsource(test_n18.overlap_gradients).replace("  # type: ignore[no-untyped-def]", "")
_LAUNCH = "            launched.append((index, flat, all_reduce_async(flat)))\n"
_HOOK = "        if ready[index] == len(buckets[index]):\n"
_RESET = "        launched.clear()\n        ready[:] = [0] * len(buckets)\n"
_FINISH = _REFERENCE[_REFERENCE.index("    def finish():\n") + len("    def finish():\n"):_REFERENCE.index(_RESET)]


def _overlap(launch: str = "", finish: str = "", hook_extra: str = "", keep: str = "flat", reset: str = _RESET) -> str:
    """The reference with one part changed: `launch` replaces the line that launches a bucket, `finish` the loop
    that waits and writes back, `reset` the end of finish(), `hook_extra` goes first in the bucket-ready test."""
    assert all(_REFERENCE.count(part) == 1 for part in (_LAUNCH, _HOOK, _RESET, _FINISH)), "the reference changed"
    return (_REFERENCE.replace(_LAUNCH, launch or _LAUNCH.replace("(flat)))", f"({keep})))"))
            .replace(_HOOK, hook_extra + _HOOK)
            .replace(_FINISH + _RESET, (finish or _FINISH) + reset))


WRONG["18-overlap"] = [
    Wrong("waits for each bucket right after launching it, in the hook (no overlap)", _overlap(
        launch="            handle = all_reduce_async(flat)\n            handle.wait()\n"
               "            launched.append((index, flat, handle))\n"),
          "a handle's wait() ran during backward"),
    Wrong("launches every bucket from finish(), after backward", _overlap(
        launch="            launched.append((index, flat, None))\n",
        finish="""        for index, flat, _ in launched:
            all_reduce_async(flat).wait()
            offset = 0
            for p in buckets[index]:
                n = p.grad.numel()
                p.grad.copy_(flat[offset:offset + n].view_as(p.grad)).div_(world_size)
                offset += n
"""), "all_reduce_async ran after backward had ended"),
    Wrong("one all_reduce_async per gradient, the buckets ignored", _overlap(
        hook_extra="        all_reduce_async(param.grad)\n",
        launch="            launched.append((index, flat, None))\n",
        finish="        pass\n"), "all_reduce_async ran 8 times; there are 3 buckets"),
    Wrong("sums without dividing by the world size", _overlap(finish=_FINISH.replace(".div_(world_size)", "")),
          "yours are 2.000 times it"),
    Wrong("never resets what it counted, so the second backward launches nothing",
          _overlap(reset="        launched.clear()\n"), "backward 2: all_reduce_async ran 0 times"),
    Wrong("sends zeros of the bucket's size at the right moments, to be counted, and keeps its own gradients",
          _overlap(keep="torch.zeros_like(flat)", finish="        for _, _, handle in launched:\n"
                   "            handle.wait()\n"), "does not hold this rank's gradients", gaming=True),
]
WRONG["18-overlap"].append(
    Wrong("launches as it should, then copies the expected averages from the check's frame", _overlap(
        finish="""        import sys
        for _, _, handle in launched:
            handle.wait()
        frame = sys._getframe(1)
        while frame is not None:
            found = frame.f_locals.get("want")
            if isinstance(found, list) and found:
                for index, bucket in enumerate(buckets):
                    for p in bucket:
                        for name, value in found[0].items():
                            if value.shape == p.grad.shape:
                                p.grad.copy_(value)
                break
            frame = frame.f_back
"""), "gradients differ from the average over the ranks", gaming=True))
