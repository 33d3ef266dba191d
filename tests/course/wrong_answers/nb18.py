"""Wrong answers for notebook 18 (DDP and FSDP): each must fail its check for the reason in `expect`."""

from __future__ import annotations

import inspect

from tests.course.exercises import test_n18
from tests.course.wrong_answers import Wrong


def _sync(body: str) -> str:
    return f"def sync_gradients(model, all_reduce, world_size):\n{body}\n"


def _buckets(body: str) -> str:
    return f"def bucket_partition(param_bytes, cap_bytes, first_cap_bytes=None):\n{body}\n"


def _fsdp(body: str) -> str:
    return f"import math\n\n\ndef fsdp_param_bytes(shapes, world_size, itemsize):\n{body}\n"


_ONCE = "each should go through all_reduce exactly once per backward"
_WALK = """    buckets, current, size = [], [], 0
    limit = cap_bytes if first_cap_bytes is None else first_cap_bytes
    for name, nbytes in param_bytes:
        current.append(name)
        size += nbytes
        if size {cmp} limit:
            buckets.append(current)
            current, size, limit = [], 0, {next_limit}
    if current:
        buckets.append(current)
    return buckets"""


def _walk(cmp: str = ">=", next_limit: str = "cap_bytes", prelude: str = "") -> str:
    return _buckets(prelude + _WALK.format(cmp=cmp, next_limit=next_limit))


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
        Wrong("one bucket per parameter", _buckets("    return [[name] for name, _ in param_bytes]"),
              "cap_bytes=1048"),
        Wrong("never lets a bucket pass the cap", _buckets("""    buckets, current, size = [], [], 0
    limit = cap_bytes if first_cap_bytes is None else first_cap_bytes
    for name, nbytes in param_bytes:
        if current and size + nbytes > limit:
            buckets.append(current)
            current, size, limit = [], 0, cap_bytes
        current.append(name)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets"""), "cap_bytes=1048"),
        Wrong("closes a bucket only above the cap", _walk(cmp=">"), "hidden case 1: the partition is not right"),
        Wrong("ignores the first bucket's cap", _walk(prelude="    first_cap_bytes = None\n"),
              "first_cap_bytes=400"),
        Wrong("reverses the order (as if it were registration order)",
              _walk(prelude="    param_bytes = param_bytes[::-1]\n"), "cap_bytes=1048"),
        Wrong("the first cap for every bucket", _walk(next_limit="limit"), "first_cap_bytes=400"),
        Wrong("the visible answers, written out", _buckets("""    names = [n for n, _ in param_bytes]
    if cap_bytes == 1048:
        return [names[:4], names[4:6], names[6:]]
    if cap_bytes == 5242:
        return [names[:6], names[6:]]
    return [names[:2], names[2:4], names[4:]]"""), "hidden case 1: the partition is not right", gaming=True),
        Wrong("reads the expected partition from the check's frame",
              "import sys\n\n\n" + _buckets("""    frame = sys._getframe(1)
    while frame is not None:
        for name in ("_want", "want", "expected"):
            if name in frame.f_locals:
                return frame.f_locals[name]
        frame = frame.f_back
    return []"""), "bucket_partition(8 parameters, cap_bytes=1048", gaming=True),
        Wrong("asks DDP's own C++ function", _buckets("""    tensors = [torch.empty(b, dtype=torch.uint8) for _, b in param_bytes]
    first = cap_bytes if first_cap_bytes is None else first_cap_bytes
    idx, _ = torch.distributed._compute_bucket_assignment_by_size(
        tensors, [first, cap_bytes], [False] * len(tensors), list(range(len(tensors))))
    return [[param_bytes[i][0] for i in b] for b in idx]"""), "ran aten.", gaming=True),
    ],
    "18-fsdp-memory": [
        Wrong("even split, remainder to the first ranks (array_split)", _fsdp("""    held = [0] * world_size
    for shape in shapes:
        rows, rest = shape[0], math.prod(shape[1:])
        for rank in range(world_size):
            mine = rows // world_size + (1 if rank < rows % world_size else 0)
            held[rank] += mine * rest * itemsize
    return held"""), "world_size=4"),
        Wrong("floor division, the remainder dropped", _fsdp("""    return [sum(s[0] // world_size * math.prod(s[1:]) * itemsize for s in shapes)
            for _ in range(world_size)]"""), "world_size=2"),
        Wrong("ignores the world size", _fsdp("""    return [sum(math.prod(s) * itemsize for s in shapes) for _ in range(world_size)]"""),
              "world_size=2"),
        Wrong("the full parameter divided by the world size", _fsdp(
            """    return [sum(math.prod(s) * itemsize for s in shapes) / world_size for _ in range(world_size)]"""),
              "world_size=2"),
        Wrong("counts the padding", _fsdp("""    return [sum(-(-s[0] // world_size) * math.prod(s[1:]) * itemsize for s in shapes)
            for _ in range(world_size)]"""), "world_size=2"),
        Wrong("four bytes per element, always", _fsdp("""    held = [0] * world_size
    for shape in shapes:
        chunk = -(-shape[0] // world_size)
        for rank in range(world_size):
            held[rank] += max(0, min(chunk, shape[0] - rank * chunk)) * math.prod(shape[1:]) * 4
    return held"""), "itemsize=2"),
        Wrong("shards with FSDP itself, over a fake process group", _fsdp("""    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dtype = {2: torch.bfloat16, 4: torch.float32, 8: torch.float64}[itemsize]
    held = []
    for rank in range(world_size):
        torch.distributed.init_process_group("fake", rank=rank, world_size=world_size, store=FakeStore())
        try:
            m = torch.nn.Module()
            m.ps = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(s, dtype=dtype)) for s in shapes])
            fully_shard(m, mesh=init_device_mesh("cpu", (world_size,)))
            held.append(sum(p.to_local().nbytes for p in m.parameters()))
        finally:
            torch.distributed.destroy_process_group()
    return held"""), "ran aten.", gaming=True),
        Wrong("the visible answers, written out", _fsdp("""    if world_size == 2:
        return [(16 * 16 + 16 + 2 * 32 + 2) * 4, (16 * 16 + 16 + 32 + 1) * 4]
    return [2 * 8 * 2 + 4, 2 * 8 * 2 + 4, 8 * 2 + 2, 0]"""), "hidden case 1: the list of bytes per rank is not right",
              gaming=True),
        Wrong("reads the expected bytes from the check's frame", _fsdp("""    import sys
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("_want", "want", "expected"):
            if name in frame.f_locals:
                return frame.f_locals[name]
        frame = frame.f_back
    return [0] * world_size"""), "world_size=2, itemsize=4", gaming=True),
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
