"""The distributed lens: run N ranks of a training step over gloo on the CPU and record, per rank, what
DDP and FSDP2 did: when each backward node ran, when each DDP bucket was ready and its all-reduce ran,
the bucket partition, `no_sync` iterations, FSDP2 shard shapes, all-gathers, reduce-scatters and the
parameter/gradient bytes held over the step.

`run_ranks(step, world_size=2)` starts one fresh Python process per rank (spawned: a worker cannot
import a notebook's `__main__`, so `step` is a function in an importable module or a "module:function"
string). Each worker sets one thread, joins a gloo process group through a FileStore in a temporary
folder, and calls `step(rec, **kwargs)`; `rec` is a `Recorder` the step uses to wrap its model
(`rec.ddp(model)`, `rec.fsdp(model)`), mark iterations (`with rec.iteration():`) and run backward
(`rec.backward(loss)`). Ready-made steps live in `distributed_scenarios`; `ddp_trace()` and
`fsdp_trace()` run them.

A rank that raises ends the run at once with `RankFailed` (rank, exception type and text); a run past
`timeout` ends with `RankTimeout`, which names the ranks that did not finish and where each one was
(a Python stack dumped by faulthandler on SIGUSR1). Every worker runs in its own session and its
process group is killed before `run_ranks` returns or raises, whatever happened.

Facts relied on (torch 2.13, CPU): DDP builds its buckets in parameter-registration order for the
first iteration and rebuilds them, in the order gradients became ready, after the first backward, so
iteration 1 onwards shows the real partition (ground truth: `_get_ddp_logging_data()`'s
"rebuilt_per_bucket_param_indices"). A comm hook receives each bucket as it is launched, in index
order; its future completes when the all-reduce has. FSDP2 (`fully_shard`) shards each parameter on
dim 0 as a DTensor and calls the module's AllGather / ReduceScatter objects, which
`set_custom_all_gather` / `set_custom_reduce_scatter` replace by recording subclasses here.

Times are µs from the earliest iteration start over all ranks (CLOCK_MONOTONIC is shared by the
processes of one machine). Memory is *parameter and gradient bytes held* (sharded parameters,
unsharded parameters currently materialised, gradients), sampled at hooks, not the allocator.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import busy
from . import zygote

__all__ = [
    "Bucket",
    "Collective",
    "DistTrace",
    "DistributedError",
    "IterationSpan",
    "MemorySample",
    "NodeSpan",
    "NotImportableError",
    "RankFailed",
    "RankTimeout",
    "RankTrace",
    "Recorder",
    "Shard",
    "ddp_trace",
    "fsdp_trace",
    "run_ranks",
    "step_reference",
]

SCENARIOS = "torchlens_widgets.lenses.distributed_scenarios"


class DistributedError(RuntimeError):
    """A distributed run could not be started or did not finish."""


class NotImportableError(DistributedError, ValueError):
    """The step cannot be imported by a fresh worker process (defined in `__main__` or inside a function)."""


class RankFailed(DistributedError):
    """A rank raised; `rank`, `exc_type`, `message` and `traceback` say what and where."""

    def __init__(self, rank: int, exc_type: str, message: str, tb: str, others: Mapping[int, str]) -> None:
        self.rank, self.exc_type, self.message, self.traceback, self.others = rank, exc_type, message, tb, dict(others)
        where = _user_frame(tb)
        text = f"rank {rank} raised {exc_type}: {message}" + (f" ({where})" if where else "")
        if others:
            text += "; then " + "; ".join(f"rank {r}: {m}" for r, m in sorted(others.items()))
        super().__init__(text + ". All ranks were stopped.")


class RankTimeout(DistributedError):
    """Some ranks were still running at the timeout; `ranks` lists them, `stacks` where each one was, `started`
    whether all ranks had reached the step (False: the start-up timeout ran out)."""

    def __init__(self, ranks: list[int], timeout: float, stacks: Mapping[int, str], started: bool = True) -> None:
        self.ranks, self.timeout, self.stacks, self.started = ranks, timeout, dict(stacks), started
        names = ", ".join(str(r) for r in ranks)
        where = "; ".join(f"rank {r} was in {_where_stuck(stacks.get(r, ''))}" for r in ranks)
        what = (f"did not finish the step within {timeout:g} s" if started
                else f"did not start (import, join the process group) within {timeout:g} s")
        super().__init__(f"rank{'s' if len(ranks) > 1 else ''} {names} {what}"
                         + (f" ({where})" if where else "") + ". All ranks were killed.")


# ---------------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class NodeSpan:
    """One autograd node's run during backward (`name` as `grad_fn.name()`, AccumulateGrad with its parameter)."""

    iteration: int
    name: str
    start: float
    end: float


@dataclass(frozen=True)
class Bucket:
    """One DDP gradient bucket in one iteration: its parameters, size, and its all-reduce's times."""

    iteration: int
    index: int
    params: tuple[str, ...]
    numel: int
    nbytes: int
    ready: float | None  # the last of its gradients was handed to DDP (None when node times were not recorded)
    start: float  # the comm hook launched the all-reduce
    end: float | None  # the all-reduce's future completed


@dataclass(frozen=True)
class Collective:
    """A collective other than a DDP bucket: FSDP2's all-gathers / reduce-scatters, or a hand-written all_reduce."""

    iteration: int
    kind: str  # "all_gather" | "reduce_scatter" | "all_reduce"
    label: str  # the FSDP module ("" for the root) or the tensor's name
    nbytes: int  # bytes of the full (unsharded) buffer
    start: float
    end: float | None


@dataclass(frozen=True)
class MemorySample:
    """Parameter and gradient bytes this rank held at one moment (`label` says which hook sampled it)."""

    t: float
    label: str
    sharded: int
    unsharded: int
    grads: int

    @property
    def total(self) -> int:
        return self.sharded + self.unsharded + self.grads


@dataclass(frozen=True)
class Shard:
    """One FSDP2 parameter on this rank: its global shape and this rank's local (sharded) shape."""

    name: str
    shape: tuple[int, ...]
    local_shape: tuple[int, ...]
    placement: str


@dataclass(frozen=True)
class IterationSpan:
    """One training iteration (`with rec.iteration():`), with its backward span and whether it skipped the sync."""

    index: int
    no_sync: bool
    start: float
    end: float
    backward_start: float | None
    backward_end: float | None


@dataclass(frozen=True)
class RankTrace:
    """Everything one rank recorded; `result` is what the step returned (JSON data)."""

    rank: int
    iterations: tuple[IterationSpan, ...]
    nodes: tuple[NodeSpan, ...]
    buckets: tuple[Bucket, ...]
    collectives: tuple[Collective, ...]
    shards: tuple[Shard, ...]
    memory: tuple[MemorySample, ...]
    step_time: float  # µs the step function ran
    peak_rss: int  # bytes, the worker process's peak resident set
    result: Any = None

    def partition(self, iteration: int = -1) -> list[tuple[str, ...]]:
        """The bucket partition (parameter names per bucket, in bucket order) of one iteration (default: the last
        that all-reduced)."""
        its = sorted({b.iteration for b in self.buckets})
        if not its:
            return []
        it = its[iteration] if iteration < 0 else iteration
        return [b.params for b in sorted(self.buckets, key=lambda b: b.index) if b.iteration == it]


@dataclass(frozen=True)
class DistTrace:
    """A distributed run: one RankTrace per rank, the step that ran and how (`kind`: "ddp", "fsdp" or "manual")."""

    kind: str
    step: str
    world_size: int
    ranks: tuple[RankTrace, ...]
    params: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kind"] = "dist_trace"
        d["mode"] = self.kind
        d["version"] = 1
        for r, rank in zip(d["ranks"], self.ranks, strict=True):
            for m, s in zip(r["memory"], rank.memory, strict=True):
                m["total"] = s.total
        return _lists(d)

    @property
    def rank0(self) -> RankTrace:
        return self.ranks[0]


def _lists(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _lists(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_lists(x) for x in v]
    return v


# ------------------------------------------------------------------------------------ the worker side


def _now() -> int:
    return time.perf_counter_ns()


class Recorder:
    """What a step uses to be recorded. With `enabled=False` every method only does the work itself (no
    hooks), so the same step can be timed with and without the recording."""

    def __init__(self, rank: int, world_size: int, enabled: bool = True) -> None:
        self.rank, self.world_size, self.enabled = rank, world_size, enabled
        self.kind = "manual"
        self._it = -1
        self._no_sync = False
        self._iterations: list[dict[str, Any]] = []
        self._nodes: list[tuple[int, str, int, int]] = []
        self._buckets: list[dict[str, Any]] = []
        self._collectives: list[dict[str, Any]] = []
        self._memory: list[tuple[int, str, int, int, int]] = []
        self._shards: list[Shard] = []
        self._names: dict[int, str] = {}
        self._model: Any = None

    # -- models
    def ddp(self, model: Any, **ddp_kwargs: Any) -> Any:
        """Wrap `model` in DistributedDataParallel (gloo, CPU) and, when recording, time each bucket's all-reduce."""
        from torch.nn.parallel import DistributedDataParallel as DDP

        self.kind = "ddp"
        ddp = DDP(model, **ddp_kwargs)
        self._model = model
        self._names = {id(p): n for n, p in model.named_parameters()}
        if self.enabled:
            ddp.register_comm_hook(None, lambda state, bucket: self._comm_hook(bucket))  # DDP checks annotations
        return ddp

    def watch(self, model: Any) -> Any:
        """Name a plain model's parameters (for a hand-written data-parallel step) so that nodes and memory
        samples refer to them; returns the model."""
        self._model = model
        self._names = {id(p): n for n, p in model.named_parameters()}
        return model

    def _comm_hook(self, bucket: Any) -> Any:
        import torch.distributed as dist

        start = _now()
        buf = bucket.buffer()
        entry = {"iteration": self._it, "index": bucket.index(),
                 "params": tuple(self._names.get(id(p), "?") for p in bucket.parameters()),
                 "numel": buf.numel(), "nbytes": buf.numel() * buf.element_size(), "start": start, "end": None}
        self._buckets.append(entry)
        buf.div_(self.world_size)
        fut = dist.all_reduce(buf, async_op=True).get_future()

        def done(f: Any) -> Any:
            entry["end"] = _now()
            return f.value()[0]

        return fut.then(done)

    def fsdp(self, model: Any) -> Any:
        """Record an FSDP2 model (after `fully_shard` was applied to it and its blocks): shard shapes, every
        all-gather and reduce-scatter, and parameter bytes held around each module's forward."""
        self.kind = "fsdp"
        self._model = model
        from torch.distributed.tensor import DTensor

        for name, p in model.named_parameters():
            local = p.to_local() if isinstance(p, DTensor) else p
            placement = ",".join(str(pl) for pl in p.placements) if isinstance(p, DTensor) else "replicated"
            self._shards.append(Shard(name, tuple(p.shape), tuple(local.shape), placement))
        self._names = {id(p): n for n, p in model.named_parameters()}
        self._sharded_bytes = sum((p.to_local() if isinstance(p, DTensor) else p).nbytes for p in model.parameters())
        if not self.enabled:
            return model
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather, DefaultReduceScatter

        rec = self

        class AG(DefaultAllGather):
            def __init__(self, label: str) -> None:
                super().__init__()
                self.label = label

            def __call__(self, output_tensor: Any, input_tensor: Any, group: Any, async_op: bool = False) -> Any:
                return rec._collective("all_gather", self.label, output_tensor,
                                       lambda: super(AG, self).__call__(output_tensor, input_tensor, group, async_op))

        class RS(DefaultReduceScatter):
            def __init__(self, label: str) -> None:
                super().__init__()
                self.label = label

            def __call__(self, output_tensor: Any, input_tensor: Any, group: Any, op: Any,
                         async_op: bool = False) -> Any:
                return rec._collective("reduce_scatter", self.label, input_tensor,
                                       lambda: super(RS, self).__call__(output_tensor, input_tensor, group, op,
                                                                        async_op))

        for mname, m in model.named_modules():
            if not isinstance(m, FSDPModule):
                continue
            fm: Any = m  # an nn.Module and an FSDPModule
            fm.set_custom_all_gather(AG(mname))
            fm.set_custom_reduce_scatter(RS(mname))
            fm.register_forward_pre_hook(lambda mod, args, _l=mname: self.sample_memory(f"forward {_l or 'root'}"))
            fm.register_forward_hook(lambda mod, args, out, _l=mname: self.sample_memory(f"after forward {_l or 'root'}"))
        return model

    def _fsdp_names(self) -> None:
        """Backward accumulates into FSDP2's unsharded parameters: name those too (private FSDP2 state, best effort)."""
        from torch.distributed.fsdp import FSDPModule

        for mname, m in self._model.named_modules():
            if not isinstance(m, FSDPModule):
                continue
            try:
                group = m._get_fsdp_state()._fsdp_param_group
                for fp in group.fsdp_params if group is not None else ():
                    pname = fp._module_info.param_name
                    self._names[id(fp._unsharded_param)] = f"{mname}.{pname}" if mname else pname
            except (AttributeError, RuntimeError):
                continue

    def _collective(self, kind: str, label: str, full: Any, run: Callable[[], Any]) -> Any:
        entry = {"iteration": self._it, "kind": kind, "label": label, "nbytes": full.numel() * full.element_size(),
                 "start": _now(), "end": None}
        self._collectives.append(entry)
        self.sample_memory(f"{kind} {label or 'root'}")
        work = run()
        if work is None:
            entry["end"] = _now()
        else:
            try:
                work.get_future().then(lambda f: entry.__setitem__("end", _now()))
            except RuntimeError:  # a backend without futures: the end is when FSDP waits on it
                entry["end"] = None
        return work

    def all_reduce(self, tensor: Any, label: str = "") -> None:
        """A hand-written data-parallel all-reduce (sum, then divide by the world size), recorded."""
        import torch.distributed as dist

        entry = {"iteration": self._it, "kind": "all_reduce", "label": label,
                 "nbytes": tensor.numel() * tensor.element_size(), "start": _now(), "end": None}
        dist.all_reduce(tensor)
        tensor.div_(self.world_size)
        entry["end"] = _now()
        if self.enabled:
            self._collectives.append(entry)

    def sample_memory(self, label: str) -> None:
        """Record the parameter and gradient bytes this rank holds now (FSDP: sharded + unsharded + grads)."""
        if not self.enabled or self._model is None:
            return
        from torch.distributed.tensor import DTensor

        unsharded = grads = 0
        seen: set[int] = set()
        for m in self._model.modules():
            for p in m._parameters.values():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                if not isinstance(p, DTensor) and self.kind == "fsdp":
                    unsharded += p.untyped_storage().nbytes()
                g = p.grad
                if g is not None:
                    grads += (g.to_local() if isinstance(g, DTensor) else g).nbytes
        sharded = getattr(self, "_sharded_bytes", None)
        if sharded is None:
            sharded = sum(p.nbytes for p in self._model.parameters())
        self._memory.append((_now(), label, sharded, unsharded, grads))

    # -- iterations and backward
    @contextmanager
    def iteration(self, no_sync: bool = False) -> Iterator[None]:
        """Mark one training iteration; `no_sync=True` says the step ran it under `ddp.no_sync()`."""
        self._it += 1
        span = {"index": self._it, "no_sync": no_sync, "start": _now(), "end": None,
                "backward_start": None, "backward_end": None}
        self._iterations.append(span)
        try:
            yield
        finally:
            span["end"] = _now()
            self.sample_memory("end of iteration")

    def backward(self, loss: Any) -> None:
        """`loss.backward()`, timing every autograd node it runs (hooks removed afterwards)."""
        span = self._iterations[-1] if self._iterations else None
        handles: list[Any] = []
        if self.enabled and loss.grad_fn is not None:
            handles = self._hook_graph(loss.grad_fn)
        if span is not None:
            span["backward_start"] = _now()
        try:
            loss.backward()
        finally:
            if span is not None:
                span["backward_end"] = _now()
            for h in handles:
                h.remove()
        self.sample_memory("after backward")

    def _hook_graph(self, root: Any) -> list[Any]:
        handles: list[Any] = []
        seen: set[Any] = set()
        stack = [root]
        it = self._it
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            name = node.name()
            var = getattr(node, "variable", None)
            if var is not None and id(var) not in self._names and self.kind == "fsdp":
                self._fsdp_names()
            if var is not None:
                name = f"AccumulateGrad({self._names[id(var)]})" if id(var) in self._names else "AccumulateGrad"
            starts: list[int] = []
            handles.append(node.register_prehook(lambda g, _s=starts: _s.append(_now())))

            def post(gi: Any, go: Any, _s: list[int] = starts, _n: str = name) -> None:
                self._nodes.append((it, _n, _s.pop() if _s else _now(), _now()))

            handles.append(node.register_hook(post))
            stack.extend(nxt for nxt, _ in node.next_functions)
        return handles

    # -- results
    def _dump(self, t0: int) -> dict[str, Any]:
        def us(t: int | None) -> float | None:
            return None if t is None else round((t - t0) / 1e3, 3)

        acc_end: dict[tuple[int, str], float] = {}
        for it, name, _a, b_end in self._nodes:
            if name.startswith("AccumulateGrad("):
                acc_end[(it, name[15:-1])] = max(acc_end.get((it, name[15:-1]), 0.0), us(b_end) or 0.0)
        buckets = []
        for b in self._buckets:
            ends = [acc_end[(b["iteration"], p)] for p in b["params"] if (b["iteration"], p) in acc_end]
            start = us(b["start"])
            # DDP's own hook on the last AccumulateGrad launches the bucket before our hook on that node ends
            ready = min(max(ends), start) if ends and start is not None else None
            buckets.append({**b, "params": list(b["params"]), "ready": ready, "start": start, "end": us(b["end"])})
        return {
            "iterations": [{**s, "start": us(s["start"]), "end": us(s["end"]), "backward_start": us(s["backward_start"]),
                            "backward_end": us(s["backward_end"])} for s in self._iterations],
            "nodes": [{"iteration": it, "name": n, "start": us(a), "end": us(b)} for it, n, a, b in self._nodes],
            "buckets": buckets,
            "collectives": [{**c, "start": us(c["start"]), "end": us(c["end"])} for c in self._collectives],
            "shards": [asdict(s) for s in self._shards],
            "memory": [{"t": us(t), "label": lab, "sharded": s, "unsharded": u, "grads": g}
                       for t, lab, s, u, g in self._memory],
        }

    def _first(self) -> int | None:
        return self._iterations[0]["start"] if self._iterations else None


def _peak_rss() -> int:
    try:
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(kb) * (1 if sys.platform == "darwin" else 1024)
    except (ImportError, OSError):
        return 0


def _worker_main(argv: list[str] | None = None) -> None:
    """Entry point of one worker process: `python -c '...; _worker_main()' CONFIG RANK`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg = json.loads(Path(argv[0]).read_text())
    rank = int(argv[1])
    folder = Path(cfg["folder"])
    import faulthandler

    stack_file = open(folder / f"rank{rank}.stack", "w")
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=False)
    for p in reversed(cfg["sys_path"]):
        if p not in sys.path:
            sys.path.insert(0, p)
    try:
        import torch

        torch.set_num_threads(1)
        import datetime

        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"file://{folder / 'store'}", rank=rank,
                                world_size=cfg["world_size"],
                                timeout=datetime.timedelta(seconds=cfg["timeout"] + cfg["start_timeout"]))
        try:
            mod, _, qual = cfg["step"].partition(":")
            fn: Any = importlib.import_module(mod)
            for part in qual.split("."):
                fn = getattr(fn, part)
            rec = Recorder(rank, cfg["world_size"], cfg["record"])
            dist.barrier()
            (folder / f"rank{rank}.ready").touch()  # the step's timeout starts when every rank is here
            t = _now()
            result = fn(rec, **cfg["kwargs"])
            step_ns = _now() - t
            t0 = rec._first() or t
            starts: list[int] = [t0] * cfg["world_size"]
            dist.all_gather_object(starts, t0)
            dump = rec._dump(min(starts))
            dump.update(rank=rank, kind=rec.kind, step_time=round(step_ns / 1e3, 3), peak_rss=_peak_rss(),
                        result=result)
            (folder / f"rank{rank}.json.tmp").write_text(json.dumps(dump))
            os.replace(folder / f"rank{rank}.json.tmp", folder / f"rank{rank}.json")
        finally:
            dist.destroy_process_group()
    except BaseException as exc:
        err = {"rank": rank, "type": type(exc).__name__, "message": str(exc), "traceback": traceback.format_exc(),
               "time": time.time()}
        (folder / f"rank{rank}.error.json").write_text(json.dumps(err))
        stack_file.close()
        os._exit(1)
    stack_file.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ------------------------------------------------------------------------------------ the parent side


def step_reference(step: Callable[..., Any] | str) -> str:
    """"module:qualname" of a step a fresh worker process can import, or NotImportableError saying why not."""
    if isinstance(step, str):
        mod, sep, qual = step.partition(":")
        if not sep or not mod or not qual:
            raise NotImportableError(f"step {step!r}: write it as 'module:function', e.g. 'my_steps:train_step'")
        if mod == "__main__":
            raise NotImportableError(_MAIN_HELP.format(name=qual))
        return step
    if not callable(step):
        raise TypeError(f"step must be a function or a 'module:function' string, got {type(step).__name__}")
    mod = str(getattr(step, "__module__", "") or "")
    qual = str(getattr(step, "__qualname__", "") or getattr(step, "__name__", "") or "")
    if not mod or not qual:
        raise NotImportableError(f"{step!r} has no module or name, so a worker process cannot import it")
    if mod == "__main__":
        raise NotImportableError(_MAIN_HELP.format(name=qual))
    if "<locals>" in qual or "<lambda>" in qual:
        raise NotImportableError(f"{mod}.{qual} is defined inside a function (or is a lambda): a worker process "
                                 "can only import module-level functions; move it to the top level of its module")
    return f"{mod}:{qual}"


_MAIN_HELP = ("step {name!r} is defined in __main__ (this notebook or script). Each rank runs in a fresh process "
              "that imports the step by name, and a fresh process cannot import a notebook's __main__. Put the "
              "function in a .py file next to the notebook (say my_steps.py, `def {name}(rec, **kw): ...`) and "
              "pass my_steps.{name} or 'my_steps:{name}'; ready-made steps are in "
              "torchlens_widgets.lenses.distributed_scenarios.")


def _resolve(ref: str) -> None:
    mod, _, qual = ref.partition(":")
    try:
        obj: Any = importlib.import_module(mod)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise NotImportableError(f"cannot import step {ref!r}: {exc}") from None
    if not callable(obj):
        raise NotImportableError(f"step {ref!r} is not callable")


def _kill_group(p: zygote.Job | subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker's whole process group (it leads its own session), then reap it."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(p.pid, signal.SIGKILL)
        else:  # pragma: no cover (Windows)
            p.kill()
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover
        p.kill()
        p.wait()


_PEER = re.compile(r"connection closed by peer|connection reset|broken pipe|gloo|timed out|timeout", re.I)


def _read_error(folder: Path, rank: int) -> dict[str, Any] | None:
    f = folder / f"rank{rank}.error.json"
    try:
        return json.loads(f.read_text()) if f.exists() else None
    except (OSError, ValueError):
        return None


def _tail(folder: Path, rank: int, n: int = 1500) -> str:
    try:
        return (folder / f"rank{rank}.log").read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _give_back_free_memory() -> None:
    """Return this process's freed heap to the OS (glibc's malloc_trim) before the ranks start, so the machine
    holds this process's live memory beside theirs, not its high-water mark (profiles, large steps)."""
    import gc

    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def run_ranks(step: Callable[..., Any] | str, *, world_size: int = 2, timeout: float = 60.0,
              kwargs: Mapping[str, Any] | None = None, record: bool = True, start_timeout: float = 120.0) -> DistTrace:
    """Run `step(rec, **kwargs)` on `world_size` ranks (fresh processes, gloo, CPU, one thread each) and
    return what each rank recorded. Raises RankFailed if a rank raised, RankTimeout if the step ran longer than
    `timeout` seconds (counted once every rank has started; starting, i.e. importing torch and joining the
    process group, may take `start_timeout`);
    in every case all worker processes are gone when this returns or raises."""
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, got {world_size!r}")
    for label, value in (("timeout", timeout), ("start_timeout", start_timeout)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{label}={value!r}: give the seconds as a positive, finite number, e.g. {label}=60")
    ref = step_reference(step)
    _resolve(ref)
    kwargs = dict(kwargs or {})
    try:
        json.dumps(kwargs)
    except TypeError as exc:
        raise TypeError(f"kwargs go to the workers as JSON: {exc}") from None
    procs: list[zygote.Job | subprocess.Popen[bytes]] = []
    _give_back_free_memory()
    with tempfile.TemporaryDirectory(prefix="tlw-dist-") as tmp:
        folder = Path(tmp)
        cfg = {"folder": str(folder), "world_size": world_size, "timeout": timeout, "start_timeout": start_timeout,
               "step": ref, "kwargs": kwargs,
               "record": record, "sys_path": [p for p in sys.path if p and os.path.isdir(p)] + [os.getcwd()]}
        (folder / "config.json").write_text(json.dumps(cfg))
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        here = str(Path(__file__).resolve().parents[2])  # so a source checkout's package is the one imported
        env["PYTHONPATH"] = os.pathsep.join([here] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        if sys.platform.startswith("linux"):
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        code = "from torchlens_widgets.lenses.distributed import _worker_main; _worker_main()"
        try:
            with busy.working(f"running {ref.rsplit(':', 1)[-1]} on {world_size} rank(s)",
                              "starting the rank processes") as line:
                for r in range(world_size):  # forked from a Python that already imported torch (see zygote)
                    procs.append(zygote.spawn(code, [str(folder / "config.json"), str(r)], env=env,
                                              stdout=folder / f"rank{r}.log"))
                line.phase(lambda: _stage(procs, folder))
                _wait(procs, folder, timeout, start_timeout)
            dumps = [json.loads((folder / f"rank{r}.json").read_text()) for r in range(world_size)]
        finally:
            for p in procs:
                _kill_group(p)
    return _trace(ref, world_size, dumps, kwargs)


def _stage(procs: list[zygote.Job | subprocess.Popen[bytes]], folder: Path) -> str:
    """Where a rank run is, for its busy line: ranks still starting (importing torch, joining the group), or
    running the step, and how many have finished."""
    ready = sum((folder / f"rank{r}.ready").exists() for r in range(len(procs)))
    if ready < len(procs):
        return f"starting: {ready} of {len(procs)} ranks joined the process group"
    done = sum(p.poll() is not None for p in procs)
    return f"running the step: {done} of {len(procs)} ranks finished"


def _wait(procs: list[zygote.Job | subprocess.Popen[bytes]], folder: Path, timeout: float, start_timeout: float) -> None:
    deadline = time.monotonic() + start_timeout
    started = False
    while True:
        if not started and all((folder / f"rank{r}.ready").exists() for r in range(len(procs))):
            started = True
            deadline = time.monotonic() + timeout
        codes = [p.poll() for p in procs]
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            _raise_failed(procs, folder, failed)
        if all(c == 0 for c in codes):
            missing = [r for r in range(len(procs)) if not (folder / f"rank{r}.json").exists()]
            if missing:
                raise DistributedError(f"rank {missing[0]} exited without a result: {_tail(folder, missing[0])}")
            return
        if time.monotonic() > deadline:
            stuck = [r for r, c in enumerate(codes) if c is None
                     and (started or not (folder / f"rank{r}.ready").exists())]
            stacks: dict[int, str] = {}
            if hasattr(signal, "SIGUSR1"):
                for r in stuck:
                    try:
                        procs[r].send_signal(signal.SIGUSR1)
                    except ProcessLookupError:
                        pass
                time.sleep(0.3)
                for r in stuck:
                    try:
                        stacks[r] = (folder / f"rank{r}.stack").read_text()
                    except OSError:
                        stacks[r] = ""
            raise RankTimeout(stuck, timeout if started else start_timeout, stacks, started)
        time.sleep(0.02)


def _raise_failed(procs: list[zygote.Job | subprocess.Popen[bytes]], folder: Path, failed: list[int]) -> None:
    """Give the other ranks a moment to report their own errors, then blame the rank whose error came first and
    is not just a lost peer."""
    end = time.monotonic() + 0.5
    while time.monotonic() < end and any(p.poll() is None for p in procs):
        time.sleep(0.02)
    errors = {r: e for r in range(len(procs)) if (e := _read_error(folder, r)) is not None}
    crashed = [r for r, p in enumerate(procs) if (p.poll() or 0) < 0 and r not in errors]
    if crashed:  # killed by a signal (a segfault in the step): the others only lost their connection to it
        r = min(crashed, key=lambda k: procs[k].poll() == -signal.SIGPIPE)  # a SIGPIPE follows a peer's death
        code = -(procs[r].poll() or 0)
        try:
            what = signal.Signals(code).name
        except ValueError:
            what = f"signal {code}"
        lost = f"; then {', '.join(f'rank {o}' for o in sorted(errors))} lost the connection to it" if errors else ""
        raise DistributedError(f"rank {r} crashed: its process was killed by {what} ({code}) while running the step "
                               f"(SIGSEGV is a segmentation fault: memory read or written out of bounds){lost}. "
                               f"Its output ends with: {_tail(folder, r)[-500:]}")
    if not errors:
        r = failed[0]
        raise DistributedError(f"rank {r} exited with code {procs[r].returncode} before reporting an error; "
                               f"its output ends with: {_tail(folder, r)}")
    order = sorted(errors.values(), key=lambda e: (bool(_PEER.search(e["message"])), e["time"]))
    first = order[0]
    others = {e["rank"]: f"{e['type']}: {_first_line(e['message'])}" for e in order[1:]}
    raise RankFailed(first["rank"], first["type"], first["message"], first["traceback"], others)


def _first_line(s: str, n: int = 160) -> str:
    line = s.strip().splitlines()[0] if s.strip() else ""
    return line if len(line) <= n else line[: n - 1] + "…"


def _user_frame(tb: str) -> str:
    """"file.py:12 in fn" for the innermost traceback frame outside torch and this module."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', tb)
    for path, line, fn in reversed(frames):
        if "/torch/" not in path and not path.endswith("lenses/distributed.py"):
            return f"{os.path.basename(path)}:{line} in {fn}"
    return ""


def _where_stuck(stack: str) -> str:
    """A faulthandler dump → "fn (file.py:12)" of the innermost frame outside this module (the dump is innermost first)."""
    frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', stack)
    if not frames:
        return "an unknown place (no stack was dumped)"
    inner = frames[0]
    path, line, fn = inner
    where = f"{fn} ({os.path.basename(path)}:{line})"
    for p, ln, f in frames:
        if "/torch/" not in p and not p.endswith("lenses/distributed.py"):
            return where if (p, ln, f) == inner else f"{where}, called from {f} ({os.path.basename(p)}:{ln})"
    return where


def _trace(ref: str, world_size: int, dumps: list[dict[str, Any]], kwargs: Mapping[str, Any]) -> DistTrace:
    ranks = []
    for d in dumps:
        ranks.append(RankTrace(
            rank=d["rank"],
            iterations=tuple(IterationSpan(**s) for s in d["iterations"]),
            nodes=tuple(NodeSpan(**n) for n in d["nodes"]),
            buckets=tuple(Bucket(**{**b, "params": tuple(b["params"])}) for b in d["buckets"]),
            collectives=tuple(Collective(**c) for c in d["collectives"]),
            shards=tuple(Shard(s["name"], tuple(s["shape"]), tuple(s["local_shape"]), s["placement"])
                         for s in d["shards"]),
            memory=tuple(MemorySample(**m) for m in d["memory"]),
            step_time=d["step_time"], peak_rss=d["peak_rss"], result=d["result"]))
    kinds = {d["kind"] for d in dumps}
    notes = []
    if "ddp" in kinds and ranks and any(b.iteration == 0 for b in ranks[0].buckets):
        notes.append("DDP rebuilds its buckets after the first backward (in the order gradients became ready): "
                     "iteration 0 shows the initial buckets, later iterations the rebuilt ones")
    return DistTrace(kind=sorted(kinds)[0] if len(kinds) == 1 else "mixed", step=ref, world_size=world_size,
                     ranks=tuple(ranks), params=dict(kwargs), notes=tuple(notes))


def ddp_trace(*, bucket_cap_mb: float = 0.001, iterations: int = 2, no_sync: bool = False, world_size: int = 2,
              timeout: float = 60.0, record: bool = True) -> DistTrace:
    """A 2-rank DDP step on a small MLP (`distributed_scenarios.ddp_step`); `no_sync=True` adds an iteration under
    `ddp.no_sync()` before the last one. The result of each rank holds DDP's own rebuilt partition."""
    return run_ranks(f"{SCENARIOS}:ddp_step", world_size=world_size, timeout=timeout, record=record,
                     kwargs={"bucket_cap_mb": bucket_cap_mb, "iterations": iterations, "no_sync": no_sync})


def fsdp_trace(*, iterations: int = 1, reshard_after_forward: bool = True, world_size: int = 2,
               timeout: float = 60.0) -> DistTrace:
    """A 2-rank FSDP2 step (`distributed_scenarios.fsdp_step`): shard shapes, all-gathers, reduce-scatters, memory."""
    return run_ranks(f"{SCENARIOS}:fsdp_step", world_size=world_size, timeout=timeout,
                     kwargs={"iterations": iterations, "reshard_after_forward": reshard_after_forward})
