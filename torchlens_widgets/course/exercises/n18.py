"""Notebook 18 (DDP and FSDP): data parallelism by hand with gradient hooks, DDP's buckets in a model of mixed
dtypes (against DDP's own C++ function), a rank's peak parameter storage in an FSDP2 forward (measured on FSDP2 over
the fake backend, in this process), and bucketed all-reduces overlapped with backward by hand.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). `hand_dp` runs the learner's function on real ranks (fresh
processes over gloo, through `run_ranks`, which leaves no worker behind when it returns or raises); the step each
rank runs, `hand_dp_step`, is defined here so that a worker can import it.
"""

from __future__ import annotations

import inspect
import os
import re
import textwrap
import types
from collections.abc import Iterable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from ...lenses import distributed_scenarios as scenarios
from ...lenses.distributed import RankFailed, RankTimeout, run_ranks
from ._cases import errors_by_type, named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["bucket_partition", "fsdp_memory", "hand_dp", "hand_dp_step", "overlap"]

# captured when the package is imported, before any answer cell runs
_BUCKETS_BY_SIZE = dist._compute_bucket_assignment_by_size
_TOLIST = torch.Tensor.tolist
_EQUAL = torch.equal
_SORT = torch.sort
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


# --- 18-hand-dp -------------------------------------------------------------------------------------------------

HAND_DP_HINTS = (
    "after each backward every parameter's gradient must be the average over the ranks: which collective sums over "
    "the ranks, and what turns a sum into an average?",
    "your function runs once, before any backward: it cannot send anything itself, it can only arrange for code to "
    "run later, each time backward has finished a parameter's .grad (the exercise names the hook that does that)",
    "a hook made in a loop must use the parameter it is given, not a loop variable it closed over; and the number of "
    "ranks is world_size, whatever it is in this run",
)
# (layer widths, world size) by name; every rank draws batches of its own
HAND_DP_CASES = MappingProxyType({
    "the 4-layer MLP 16 -> 32 -> 32 -> 32 -> 4 on 3 ranks": ((16, 32, 32, 32, 4), 3),
    "a 3-layer MLP 6 -> 24 -> 5 -> 1 on 2 ranks": ((6, 24, 5, 1), 2),
})
HAND_DP_VISIBLE = ("the 4-layer MLP 16 -> 32 -> 32 -> 32 -> 4 on 3 ranks",)
# how a worker finds `hand_dp_step`: through the course package, which loads the checks before the exercise modules
# (importing this module's package first would import a module that imports the checks, which import it back)
HAND_DP_STEP = "torchlens_widgets.course:exercises.n18.hand_dp_step"
_COLLECTIVE_NAMESPACES = frozenset({"c10d", "_c10d_functional", "c10d_functional", "_dtensor"})


class _Collectives(TorchDispatchMode):
    """Counts the collectives that reach the dispatcher (torch.distributed's functions and a process group's own
    methods both do) while the given all_reduce is not the one running."""

    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__()
        self.state = state

    def __torch_dispatch__(self, func: Any, kinds: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.namespace in _COLLECTIVE_NAMESPACES and not self.state["in_given"]:
            self.state["direct"] += 1
        return func(*args, **(kwargs or {}))


def _sequence_numbers() -> dict[int, tuple[Any, int]]:
    """Every process group this rank knows, with the count of collectives it ran (the backend's own sequence
    number: it counts a call through torch.distributed, the group's methods and its backend's methods alike)."""
    import torch.distributed.distributed_c10d as c10d

    out = {}
    for group in list(c10d._world.pg_map):
        try:
            out[id(group)] = (group, int(group._get_sequence_number_for_group()))  # type: ignore[attr-defined]
        except (RuntimeError, AttributeError):
            continue
    return out


def _abs_sum(a: torch.Tensor) -> float:
    return sum(abs(x) for x in _TOLIST(a.detach().double().flatten()))


def _max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    xs, ys = _TOLIST(a.detach().double().flatten()), _TOLIST(b.detach().double().flatten())
    return max((abs(x - y) for x, y in zip(xs, ys, strict=True)), default=0.0)


def hand_dp_step(rec: Any, *, source: str, name: str, sizes: list[int], seed: int = 0,
                 iterations: int = 2) -> dict[str, Any]:
    """One rank's part of 18-hand-dp (run by `run_ranks`). DDP on a fresh MLP over this rank's batches first, before
    any learner code runs here; then `source` (the learner's `def name(model, all_reduce, world_size)`) is executed
    in a namespace holding only `torch`, called once on a fresh copy of the same model with an `all_reduce` that
    sums in place over the ranks, and `iterations` backward passes run. Returns per iteration the largest
    |grad - DDP's grad|, the ratio of summed |grad|, the parameters left without a gradient and the all_reduce calls
    and bytes during that backward; whether the call changed the parameters or the forward; all_reduce calls outside
    backward; and collectives the learner's code ran itself, counted at the dispatcher and by every process group's
    own sequence number."""
    from torch.nn.parallel import DistributedDataParallel

    shape = tuple(int(s) for s in sizes)
    reduce_sum = dist.all_reduce
    batch = scenarios._batch
    reference = scenarios.mlp(shape, seed)
    ddp = DistributedDataParallel(reference)
    want = []
    for i in range(iterations):
        ddp.zero_grad(set_to_none=True)
        ddp(batch(rec.rank, i, d=shape[0])).square().mean().backward()
        want.append([p.grad.detach().clone() for p in reference.parameters() if p.grad is not None])
    del ddp
    model = scenarios.mlp(shape, seed)
    names = [n for n, _ in model.named_parameters()]
    params = list(model.parameters())
    before = [p.detach().clone() for p in params]
    probe = batch(rec.rank, 99, d=shape[0])
    with torch.no_grad():
        out_before = model(probe).clone()
    state: dict[str, Any] = {"in_backward": False, "in_given": False, "calls": 0, "bytes": 0, "outside": 0,
                             "given": 0, "direct": 0}

    def all_reduce(tensor: Any) -> None:
        """Sum `tensor` in place over all ranks (every rank must call it with a tensor of the same shape)."""
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"all_reduce takes a tensor, got {type(tensor).__name__}")
        if state["in_backward"]:
            state["calls"] += 1
            state["bytes"] += tensor.numel() * tensor.element_size()
        else:
            state["outside"] += 1
        state["given"] += 1
        state["in_given"] = True
        try:
            reduce_sum(tensor)
        finally:
            state["in_given"] = False

    counted = _sequence_numbers()
    its = []
    with _Collectives(state):
        space: dict[str, Any] = {"__name__": "your_answer", "torch": torch}
        exec(compile(source, "<your answer>", "exec"), space)
        fn = space.get(name)
        if not callable(fn):
            raise NameError(f"the source defines no function named {name!r}")
        fn(model, all_reduce, dist.get_world_size())
        now = list(model.parameters())
        same_params = len(now) == len(params) and all(a is b for a, b in zip(now, params, strict=True)) and all(
            _EQUAL(a, b.detach()) for a, b in zip(before, params, strict=True))
        with torch.no_grad():
            out_after = model(probe)
        same_forward = bool(_EQUAL(out_before, out_after))
        for i in range(iterations):
            model.zero_grad(set_to_none=True)
            loss = model(batch(rec.rank, i, d=shape[0])).square().mean()
            state["calls"] = state["bytes"] = 0
            state["in_backward"] = True
            try:
                loss.backward()
            finally:
                state["in_backward"] = False
            missing = [n for n, p in zip(names, params, strict=True) if p.grad is None]
            diffs = [_max_abs_diff(p.grad, w) for p, w in zip(params, want[i], strict=True) if p.grad is not None]
            mine = sum(_abs_sum(p.grad) for p in params if p.grad is not None)
            theirs = sum(_abs_sum(w) for w in want[i])
            its.append({"max_diff": max(diffs, default=0.0), "ratio": mine / theirs if theirs else 0.0,
                        "missing": missing, "calls": state["calls"], "bytes": state["bytes"]})
    ran = 0  # collectives past the given all_reduce, by each group's own count (a new group's all count)
    for key, (_group, seq) in _sequence_numbers().items():
        ran += seq - (counted[key][1] if key in counted else 0)
    default_group = dist.distributed_c10d._get_default_group()
    if id(default_group) in counted:
        ran -= state["given"]
    return {"iterations": its, "param_bytes": sum(p.nbytes for p in params), "params": len(params),
            "max_grad": max(max(abs(x) for x in _TOLIST(w.double().flatten())) for w in want[0]),
            "same_params": same_params, "same_forward": same_forward, "outside_calls": state["outside"],
            "direct_calls": max(state["direct"], ran)}


def _source_of(c: Check, answer: Any) -> str:
    c.that(type(answer) is types.FunctionType, "sync_gradients must be a function defined with def",
           HAND_DP_HINTS)
    try:
        return textwrap.dedent(inspect.getsource(answer))
    except (OSError, TypeError):
        c.fail("the check could not read the source of sync_gradients: define it with def in a cell and run that "
               "cell", HAND_DP_HINTS)
    return ""


def hand_dp(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`sync_gradients(model, all_reduce, world_size)`: hooks that average every gradient over the ranks through the
    given all_reduce, once per gradient per backward; run on real ranks next to DDP for two iterations. The visible
    case runs on 3 ranks (a division by 2 fails); hidden cases are named models and world sizes."""
    if hidden is None:  # called here once first, in this kernel: a learner's error surfaces quickly
        c.watch(answer, "sync_gradients", hint=HAND_DP_HINTS)(scenarios.mlp((4, 3)), lambda tensor: None, 3)
    source = _source_of(c, answer)
    for label, case in named(hidden, HAND_DP_VISIBLE, lambda case: case):
        sizes, world_size = HAND_DP_CASES[case]
        try:
            trace = run_ranks(HAND_DP_STEP, world_size=world_size, timeout=30,
                              kwargs={"source": source, "name": "sync_gradients", "sizes": list(sizes)})
        except RankFailed as e:
            lines = re.findall(r'File "<your answer>", line (\d+)', e.traceback)
            c.fail(f"{label}: rank {e.rank} raised {e.exc_type}: {e.message}"
                   + (f" (line {lines[-1]} of your function)" if lines else ""), HAND_DP_HINTS)
        except RankTimeout as e:
            c.fail(f"{label}: {e}", HAND_DP_HINTS)
        for rank in trace.ranks:
            res = rank.result
            c.that(res["direct_calls"] == 0, f"{label}: your code called torch.distributed's collectives itself "
                   f"({res['direct_calls']} times, through torch.distributed or a process group's own methods); use "
                   "the all_reduce you were given", HAND_DP_HINTS)
            c.that(res["same_params"] and res["same_forward"], f"{label}: calling sync_gradients changed the "
                   "model's parameters or its forward; it should only add hooks", HAND_DP_HINTS)
            c.that(res["outside_calls"] == 0, f"{label}: all_reduce ran {res['outside_calls']} times outside "
                   "backward; it should carry gradients, during backward", HAND_DP_HINTS)
            for i, it in enumerate(res["iterations"]):
                where = f"{label}, rank {rank.rank}, backward {i + 1}"
                c.that(not it["missing"], f"{where}: no gradient for {', '.join(it['missing'])}", HAND_DP_HINTS)
                c.that(it["calls"] > 0, f"{where}: all_reduce never ran, so the ranks never exchanged anything; "
                       "their batches differ, so must their local gradients", HAND_DP_HINTS)
                c.that(it["bytes"] == res["param_bytes"], f"{where}: all_reduce carried {it['bytes']} bytes in "
                       f"{it['calls']} calls; the gradients hold {res['param_bytes']} bytes, and each should go "
                       "through all_reduce exactly once per backward", HAND_DP_HINTS)
                c.that(it["max_diff"] <= 1e-6 * res["max_grad"], f"{where}: gradients differ from DDP's by up to "
                       f"{it['max_diff']:.3g}; yours are {it['ratio']:.3f} times DDP's in sum of |grad|", HAND_DP_HINTS)


# --- 18-predict-buckets -----------------------------------------------------------------------------------------

BUCKET_HINTS = (
    "a gradient's bytes are its numel times its dtype's itemsize; section 2 says when a bucket closes, and the cell "
    "after it shows what DDP did with a float64 gradient between two float32 ones: is that one bucket per run of "
    "equal dtypes, or something else?",
    "try dist._compute_bucket_assignment_by_size in a scratch cell (section 2 shows the call) on two dtypes "
    "interleaved, with small caps: does a float32 gradient close an open bfloat16 bucket? Which bucket, or buckets, "
    "does the first cap apply to?",
    "each dtype fills buckets of its own as if the others were not there, each with the caps in the same sequence "
    "(first cap, then cap); at the end, list every bucket by the position of its first gradient",
)
_F32, _BF16, _F16, _F64 = torch.float32, torch.bfloat16, torch.float16, torch.float64
_BLOCK = (("head.weight", 512, _BF16), ("norm2.bias", 64, _F32), ("norm2.weight", 64, _F32),
          ("mlp.down", 1024, _BF16), ("mlp.up", 1024, _BF16), ("norm1.bias", 64, _F32), ("norm1.weight", 64, _F32),
          ("attn.out", 256, _BF16), ("attn.qkv", 768, _BF16), ("embed", 2048, _BF16))
_MLP = (("6.bias", 4), ("6.weight", 128), ("4.bias", 32), ("4.weight", 1024), ("2.bias", 32), ("2.weight", 1024),
        ("0.bias", 32), ("0.weight", 512))
# (parameters as (name, numel, dtype) in ready order, cap_bytes, first_cap_bytes) by name
BUCKET_CASES = MappingProxyType({
    "a bfloat16 block with float32 norms, cap 2000": (_BLOCK, 2000, None),
    "the same block, cap 2000, first cap 600": (_BLOCK, 2000, 600),
    "float16, exactly at the cap": ((("a", 250, _F16), ("b", 250, _F16), ("c", 250, _F16), ("d", 249, _F16),
                                     ("e", 1, _F16)), 1000, None),
    "a float64 parameter larger than both caps": ((("x", 10, _F32), ("huge", 5000, _F64), ("y", 10, _F32),
                                                   ("z", 300, _F64)), 1000, 400),
    "23 parameters, three dtypes, a small first cap": (
        tuple((f"p{i}", 10 * (i % 5 + 1), (_F32, _BF16, _F64)[i % 3]) for i in range(23)), 300, 100),
    "no parameters": ((), 1000, None),
    "one parameter, the default caps": ((("only", 3, _F32),), 25 * 2**20, 2**20),
    "section 2's MLP, float32, cap 5242": (tuple((n, k, _F32) for n, k in _MLP), 5242, None),
    "bfloat16 and float16 alternating, cap 400": ((("a", 100, _BF16), ("b", 100, _F16), ("c", 100, _BF16),
                                                   ("d", 100, _F16)), 400, None),
})
BUCKET_VISIBLE = ("a bfloat16 block with float32 norms, cap 2000", "the same block, cap 2000, first cap 600")


def _buckets_expected(params: tuple[tuple[str, int, torch.dtype], ...], cap_bytes: int,
                      first_cap_bytes: int | None) -> list[list[str]]:
    """DDP's own C++ rule (torch.distributed._compute_bucket_assignment_by_size, captured at import). Called without
    the ready order as tensor_indices it lists the buckets by their first tensor (with it, DDP's rebuild lists them
    in the order they closed, then the ones left open in an order of its hash map's)."""
    if not params:
        return []
    tensors = [torch.empty(n, dtype=d) for _, n, d in params]
    first = cap_bytes if first_cap_bytes is None else first_cap_bytes
    indices, _ = _BUCKETS_BY_SIZE(tensors, [first, cap_bytes], [False] * len(tensors))
    return [[params[i][0] for i in bucket] for bucket in indices]


def bucket_partition(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`bucket_partition(params, cap_bytes, first_cap_bytes=None)`: the buckets DDP builds from `(name, numel, dtype)`
    triples in ready order, mixed dtypes, as lists of names, listed by their first gradient; plain Python (no aten
    op), against DDP's own C++ function; hidden cases are named parameter lists and caps."""
    mine = c.watch(answer, "bucket_partition", allow_aten=set(), hint=BUCKET_HINTS)

    def describe(name: str) -> str:
        params, cap, first = BUCKET_CASES[name]
        return f"bucket_partition(the {len(params)} parameters above, cap_bytes={cap}, first_cap_bytes={first})"

    for label, name in named(hidden, BUCKET_VISIBLE, describe):
        params, cap, first = BUCKET_CASES[name]
        with errors_by_type(c, label, hidden is not None):
            got = mine([tuple(p) for p in params], cap, first)  # before the expected value exists: nothing to read
        _same(c, got, _buckets_expected(params, cap, first), label, hidden is not None, "the partition", BUCKET_HINTS)


# --- 18-fsdp-memory -----------------------------------------------------------------------------------------------

FSDP_HINTS = (
    "at the forward's peak a rank holds two kinds of parameter storage: its shards of every layer, all the time, and "
    "the full parameters of whichever layer is running: which layer gives the peak, and is any other layer still "
    "gathered then?",
    "a shard's storage is padded: every rank holds storage for ceil(rows / world_size) rows of every parameter, even "
    "when its local shape has fewer rows (section 4, 4.weight on 4 ranks); a layer's full parameters come from an "
    "all-gather of world_size such padded shards",
    "check your sizes against section 4's printouts: 4.weight's storage on 4 ranks, and the bytes each all-gather "
    "filled (layer 4 held 4 rows there, not 3); with reshard_after_forward=True a layer is freed before the next one "
    "is gathered",
)
_DTYPES = MappingProxyType({2: torch.bfloat16, 4: torch.float32, 8: torch.float64})
# (layers: a tuple of parameter shapes per fully_shard-ed layer, world_size, itemsize) by name
FSDP_CASES = MappingProxyType({
    "section 4's MLP 16 -> 32 -> 32 -> 3 on 2 ranks, float32":
        ((((32, 16), (32,)), ((32, 32), (32,)), ((3, 32), (3,))), 2, 4),
    "two layers on 3 ranks, uneven rows, bfloat16": ((((5, 8), (5,)), ((7, 3),)), 3, 2),
    "4 ranks, fewer rows than ranks": ((((2, 6), (2,)), ((3, 3),)), 4, 4),
    "the largest layer last, 3 ranks, float64": ((((4, 2),), ((6, 6), (6,)), ((10, 10),)), 3, 8),
    "one rank": ((((9, 9),), ((3,),)), 1, 2),
    "padding changes which layer is largest, 4 ranks": ((((8, 9),), ((5, 14),)), 4, 4),
    "a 3-d weight and a one-row layer, 2 ranks": ((((5, 2, 3), (5,)), ((1, 4),)), 2, 4),
})
FSDP_VISIBLE = ("section 4's MLP 16 -> 32 -> 32 -> 3 on 2 ranks, float32",
                "two layers on 3 ranks, uneven rows, bfloat16")


def _same(c: Check, got: Any, expected: Any, label: str, hidden: bool, what: str, hint: tuple[str, ...]) -> None:
    """A visible case's mismatch says where and how; a hidden case's says only that it is not right: the learner's
    own result would show the hidden case's names and sizes, and the expected one its answer."""
    if not hidden:
        c.equal(got, expected, what=label, hint=hint)
        return
    from ..checks import strict_mismatch  # not at import: the checks module imports this package

    c.that(strict_mismatch(got, expected, label) is None, f"{label}: {what} is not right", hint)


def _torch_made(f: Any) -> bool:
    code = getattr(getattr(f, "__func__", f), "__code__", None)
    return code is not None and code.co_filename.startswith(_TORCH_DIR)


def _fsdp_tools() -> tuple[Any, Any, Any, Any, str | None]:
    """fully_shard, init_device_mesh, FakeStore and DTensor, imported here (importing FSDP costs seconds, so not at
    package import), and whether one of torch's functions the check relies on was replaced in this kernel."""
    import torch.distributed.device_mesh as device_mesh
    import torch.distributed.fsdp as fsdp
    from torch.distributed.tensor import DTensor
    from torch.testing._internal.distributed.fake_pg import FakeStore

    parts = (fsdp.fully_shard, device_mesh.init_device_mesh, dist.init_process_group, dist.destroy_process_group,
             DTensor.to_local)
    changed = None if all(_torch_made(p) for p in parts) else (
        "torch.distributed (fully_shard, init_device_mesh, a process group's set-up or DTensor.to_local) was changed "
        "in this kernel")
    return fsdp.fully_shard, device_mesh.init_device_mesh, FakeStore, DTensor, changed


class _Layer(torch.nn.Module):
    """One fully_shard-ed layer of the check's model: parameters of the given shapes, all used in forward."""

    def __init__(self, shapes: tuple[tuple[int, ...], ...], dtype: torch.dtype) -> None:
        super().__init__()
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(s, dtype=dtype)) for s in shapes])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for p in self.ps:
            x = x + p.sum()
        return x


def _fsdp_forward_samples(layers: tuple[tuple[tuple[int, ...], ...], ...], world_size: int, rank: int,
                         dtype: torch.dtype) -> list[tuple[str, int, int]]:
    """One forward of `layers` (each `fully_shard`ed, then the root) as rank `rank` of `world_size`, in this process
    over the fake backend (its collectives move nothing; the sharding and the unsharded buffers are FSDP2's own).
    Returns (moment, bytes of the storages under the shards, bytes of the storages under the unsharded parameters
    that exist then) before and after each layer's forward; an unsharded storage FSDP2 freed counts 0."""
    fully_shard, init_device_mesh, fake_store, dtensor, _ = _fsdp_tools()
    dist.init_process_group("fake", rank=rank, world_size=world_size, store=fake_store())
    try:
        root = torch.nn.Sequential(*[_Layer(shapes, dtype) for shapes in layers])
        mesh = init_device_mesh("cpu", (world_size,))
        for layer in root:
            fully_shard(layer, mesh=mesh)
        fully_shard(root, mesh=mesh)
        shards = {}
        for p in root.parameters():
            storage = p.to_local().untyped_storage()  # type: ignore[attr-defined]
            shards[storage.data_ptr()] = storage.nbytes()
        gathered: dict[int, Any] = {}  # every unsharded parameter seen, kept: a freed one's storage has 0 bytes
        samples: list[tuple[str, int, int]] = []

        def sample(moment: str, module: torch.nn.Module) -> None:
            for p in module.parameters():
                if not isinstance(p, dtensor):
                    gathered[id(p)] = p
            held = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in gathered.values()}
            samples.append((moment, sum(shards.values()), sum(held.values())))

        for i, layer in enumerate(root):
            layer.register_forward_pre_hook(lambda m, args, i=i: sample(f"before layer {i}", m))
            layer.register_forward_hook(lambda m, args, out, i=i: sample(f"after layer {i}", m))
        with torch.no_grad():
            root(torch.zeros((), dtype=dtype))
        return samples
    finally:
        dist.destroy_process_group()


def _fsdp_expected(layers: tuple[tuple[tuple[int, ...], ...], ...], world_size: int, itemsize: int) -> list[int]:
    """Each rank's peak of shard plus unsharded parameter storage over one forward, measured."""
    return [max(s + u for _, s, u in _fsdp_forward_samples(layers, world_size, rank, _DTYPES[itemsize]))
            for rank in range(world_size)]


def fsdp_memory(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`fsdp_peak_bytes(layers, world_size, itemsize)`: each rank's peak parameter storage in one FSDP2 forward
    (padded shards of every layer plus the running layer's unsharded parameters), plain Python (no aten op), against
    FSDP2 itself over a fake process group in this process; hidden cases are named."""
    *_, changed = _fsdp_tools()
    if changed:
        c.fail(changed + ", so this check could not trust it. Remove the line that changed it (or restart the "
               "kernel), run your answer again, then this check.")
    mine = c.watch(answer, "fsdp_peak_bytes", allow_aten=set(), hint=FSDP_HINTS)

    def describe(name: str) -> str:
        layers, world_size, itemsize = FSDP_CASES[name]
        return (f"fsdp_peak_bytes({[[tuple(s) for s in layer] for layer in layers]}, world_size={world_size}, "
                f"itemsize={itemsize})")

    for label, name in named(hidden, FSDP_VISIBLE, describe):
        layers, world_size, itemsize = FSDP_CASES[name]
        with errors_by_type(c, label, hidden is not None):
            got = mine([[tuple(s) for s in layer] for layer in layers], world_size, itemsize)  # before the expected
        _same(c, got, _fsdp_expected(layers, world_size, itemsize), label, hidden is not None,
              "the list of peak bytes per rank", FSDP_HINTS)



# --- 18-overlap ---------------------------------------------------------------------------------------------------

OVERLAP_HINTS = (
    "each bucket must go on the wire from inside backward, as soon as its last gradient is written, and be waited "
    "for only in finish(): where in backward does your code learn that a gradient has been written?",
    "one all_reduce_async per bucket, of one flat tensor holding that bucket's gradients; the sum lands in that "
    "tensor, not in the .grads, so keep it, with its handle, for finish()",
    "the hooks run again at every backward: what do they count, and is that count back at zero when the next "
    "backward starts? The average is the sum divided by world_size, once",
)
# (layer widths, world size, gradients per bucket in ready order) by name
OVERLAP_CASES = MappingProxyType({
    "the MLP 16 -> 32 -> 32 -> 32 -> 4, DDP's 1 KB buckets (4, 2, 2 gradients), 2 ranks":
        ((16, 32, 32, 32, 4), 2, (4, 2, 2)),
    "3 ranks, one bucket per gradient": ((16, 32, 32, 32, 4), 3, (1,) * 8),
    "one bucket for everything": ((6, 24, 5, 1), 2, (6,)),
    "4 ranks, buckets of 1, 3 and 2 gradients": ((8, 12, 6, 3), 4, (1, 3, 2)),
})
OVERLAP_VISIBLE = ("the MLP 16 -> 32 -> 32 -> 32 -> 4, DDP's 1 KB buckets (4, 2, 2 gradients), 2 ranks",)


def _ready_order(sizes: tuple[int, ...], seed: int) -> list[str]:
    """The order in which backward writes the MLP's gradients, seen by hooks on a copy of the check's own."""
    probe = scenarios.mlp(sizes, seed)
    names = {id(p): n for n, p in probe.named_parameters()}
    order: list[str] = []
    for p in probe.parameters():
        p.register_post_accumulate_grad_hook(lambda q: order.append(names[id(q)]))
    probe(scenarios._batch(0, 0, d=sizes[0])).square().mean().backward()
    return order


def _overlap_case(c: Check, answer: Any, label: str, sizes: tuple[int, ...], world: int, counts: tuple[int, ...],
                  secret: bool, iterations: int = 2, seed: int = 0) -> None:
    order = _ready_order(sizes, seed)
    cuts = [sum(counts[:i + 1]) for i in range(len(counts))]
    bucket_names = [order[a:b] for a, b in zip([0, *cuts[:-1]], cuts, strict=True)]
    group = scenarios.SimulatedGroup(world)
    models = [scenarios.mlp(sizes, seed) for _ in range(world)]
    setup = c.watch(answer, "overlap_gradients", hint=OVERLAP_HINTS)
    finishes = []
    for r, model in enumerate(models):
        for p in model.parameters():  # the check's own counters, registered first: they run before the answer's
            p.register_post_accumulate_grad_hook(group.counter(r))
        params = dict(model.named_parameters())
        with errors_by_type(c, label, secret):
            fin = setup([[params[n] for n in names] for names in bucket_names], group.all_reduce_async(r), world)
        c.that(callable(fin), f"{label}: overlap_gradients returned {type(fin).__name__}; it should return the "
               "function finish()", OVERLAP_HINTS)
        finishes.append(c.watch(fin, "finish", hint=OVERLAP_HINTS))
    runs = []  # what each iteration left: launches, waits and gradients per rank; judged once all of them ran
    for it in range(iterations):
        group.reset()
        for r, model in enumerate(models):
            model.zero_grad(set_to_none=True)
            loss = model(scenarios._batch(r, it, d=sizes[0])).square().mean()
            group.rank = r
            try:
                loss.backward()
            except Exception as exc:
                c.that(not group.waited_in_backward, f"{label}, backward {it + 1}: a handle's wait() ran during "
                       "backward. In this check that cannot be served (the other ranks' backward runs later); on real "
                       "ranks it would stall backward until every rank arrived, and nothing would overlap. Wait "
                       "in finish()", OVERLAP_HINTS)
                if secret:
                    c.fail(f"{label}: your hook raised {type(exc).__name__} during backward", OVERLAP_HINTS)
                c.fail(f"{label}, backward {it + 1}: your hook raised {type(exc).__name__}: {exc}", OVERLAP_HINTS)
            finally:
                group.rank = None
        for r in range(world):
            with errors_by_type(c, label, secret):
                try:
                    finishes[r]()
                except RuntimeError:
                    if not group.unmatched:
                        raise
            late = [q for q in range(world) if any(launch["backward_of"] != q for launch in group.launches[q])]
            c.that(not late, f"{label}, backward {it + 1}: on rank {late[0] if late else 0} an all_reduce_async ran "
                   "after backward had ended; launch each bucket from inside backward so that it overlaps the "
                   "gradients still to come", OVERLAP_HINTS)
            c.that(not group.unmatched, f"{label}, backward {it + 1}: a rank waited for an all_reduce_async that "
                   f"not every rank had launched with a tensor of the same shape ({', '.join(group.unmatched)})",
                   OVERLAP_HINTS)
        runs.append(([list(x) for x in group.launches], [list(x) for x in group.waits],
                     [{n: None if p.grad is None else p.grad.detach().clone() for n, p in model.named_parameters()}
                      for model in models]))
    # the expected averages, from copies the answer never sees, made only now that no answer code runs any more
    want, local = [], []
    for it in range(iterations):
        per_rank = []
        for r in range(world):
            ref = scenarios.mlp(sizes, seed)
            ref(scenarios._batch(r, it, d=sizes[0])).square().mean().backward()
            per_rank.append({n: p.grad.detach().clone() for n, p in ref.named_parameters()  # type: ignore[union-attr]
                             })
        local.append(per_rank)
        want.append({n: sum((g[n] for g in per_rank), torch.zeros_like(per_rank[0][n])) / world for n in order})
    for it, (all_launches, all_waits, all_grads) in enumerate(runs):
        for r in range(world):
            where = f"{label}, rank {r}, backward {it + 1}"
            launches = all_launches[r]
            c.that(len(launches) == len(counts), f"{where}: all_reduce_async ran {len(launches)} times; there are "
                   f"{len(counts)} buckets, and each goes on the wire once, as one tensor", OVERLAP_HINTS)
            for k, (launch, names, cut) in enumerate(zip(launches, bucket_names, cuts, strict=True)):
                c.that(launch["backward_of"] == r, f"{where}: bucket {k}'s all_reduce_async ran after backward had "
                       "ended; launch it from inside backward so that it overlaps the gradients still to come",
                       OVERLAP_HINTS)
                c.that(launch["written"] == cut, f"{where}: bucket {k} went out when {launch['written']} gradients "
                       f"had been written; its last one is gradient number {cut}: launch a bucket as soon as it is "
                       "complete", OVERLAP_HINTS)
                # what was handed over must be this rank's gradients of the bucket, as they were then (any order)
                sent = launch["values"]
                grads = torch.cat([local[it][r][n].reshape(-1) for n in names])
                c.that(sent.numel() == grads.numel(), f"{where}: the tensor sent for bucket {k} holds {sent.numel()} "
                       f"elements; the bucket's gradients hold {grads.numel()}", OVERLAP_HINTS)
                off = _max_abs_diff(_SORT(sent.double())[0], _SORT(grads.double())[0])
                c.that(off <= 1e-6 * max(_TOLIST(grads.abs().max().reshape(1)) + [1e-30]), f"{where}: the tensor "
                       f"sent for bucket {k} does not hold this rank's gradients of that bucket", OVERLAP_HINTS)
            waited = {k for k, during in all_waits[r] if not during}
            c.that(waited >= set(range(len(launches))), f"{where}: finish() did not wait for every bucket it "
                   "launched", OVERLAP_HINTS)
            missing = [n for n in order if all_grads[r][n] is None]
            c.that(not missing, f"{where}: no gradient for {', '.join(missing)} after finish()", OVERLAP_HINTS)
            after = [cast(torch.Tensor, all_grads[r][n]) for n in order]
            diff = max(_max_abs_diff(g, want[it][n]) for g, n in zip(after, order, strict=True))
            scale = max(max(abs(x) for x in _TOLIST(want[it][n].double().flatten())) for n in order)
            mine_sum = sum((_abs_sum(g) for g in after), 0.0)
            ratio = mine_sum / sum(_abs_sum(want[it][n]) for n in order)
            c.that(diff <= 1e-6 * scale, f"{where}: after finish() the gradients differ from the average over the "
                   f"ranks by up to {diff:.3g}; yours are {ratio:.3f} times it in sum of |grad|", OVERLAP_HINTS)


def overlap(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`overlap_gradients(buckets, all_reduce_async, world_size)` -> `finish`: hooks that launch one asynchronous
    all-reduce per bucket the moment its last gradient is written, and a `finish()` that waits and writes the
    averages back; run for two iterations on ranks simulated in this process (`SimulatedGroup`), against the average
    of the ranks' own gradients. Hidden cases are named models, world sizes and bucket splits."""
    for label, case in named(hidden, OVERLAP_VISIBLE, lambda case: case):
        sizes, world, counts = OVERLAP_CASES[case]
        _overlap_case(c, answer, label, sizes, world, counts, hidden is not None)
