"""Bytes moved, eager vs fused: what each kernel reads and writes, and which intermediates reach memory.

Eager: every aten op that reaches the dispatcher is one kernel; it reads each tensor input (the elements
it spans: a broadcast bias counts once) and writes each output. Fused: Inductor's own accounting of its
scheduled kernels (`get_read_write_buffer_accesses`, the minimum of "elements indexed × loads" and
"buffer size" per buffer), recorded as it generates code. That is a model, not a measurement: in Inductor's words
(torch/_inductor/scheduler.py) "worst-case inputs, best-case optimization"; a buffer used only inside one fused
kernel (a softmax's per-row maximum and sum) is not counted at all, though the kernel may store and reload it.
A library call with several results (sort's values and indices) writes each of them. An intermediate is a buffer
one kernel writes and a later kernel reads back, which is neither an input nor an output of the function; across
a graph break, a tensor one graph returns and a later graph takes (found by its storage as the graphs run) is one,
named as the function names it.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import re
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .. import busy
from .timing import one_thread, steady_heap

__all__ = [
    "FusionError",
    "FusionReport",
    "KernelTraffic",
    "MemoryAccess",
    "Traffic",
    "VectorISA",
    "memory_accesses",
    "vector_isa",
    "eager_traffic",
    "fused_traffic",
    "fusion_report",
    "time_all",
    "time_pair",
    "time_until",
]

Buffers = tuple[tuple[str, int], ...]  # (buffer label, bytes), in first-touch order


def _buffers(pairs: Iterable[Sequence[Any]]) -> Buffers:
    """Buffers from saved data: JSON turns each (label, bytes) pair into a list."""
    return tuple((str(name), int(n)) for name, n in pairs)


class FusionError(ValueError):
    """A function or input the fusion lens cannot account for, with what to do instead."""


@dataclass(frozen=True)
class VectorISA:
    """The SIMD instruction set Inductor's C++ backend writes vector code for on this machine. It sets how many
    elements one load moves (AVX2: 8 floats, AVX-512: 16, NEON: 4), so generated code differs from CPU to CPU."""

    name: str  # Inductor's own name: "avx2", "avx512 avx512_vnni", "asimd" (NEON) ...; "" when it has none here
    bits: int  # vector width; 0: no vector ISA Inductor can use, so it writes scalar loops
    float_lanes: int  # float32 elements per vector (0 when scalar)

    def describe(self) -> str:
        if not self.bits:
            return "no vector ISA Inductor can use here: scalar loops, one element per load"
        return f"{self.name} ({self.bits}-bit vectors: {self.float_lanes} floats per load)"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> VectorISA:
        """Rebuilt from `asdict` data (a `to_dict()`'s "vector"; its "text" is `describe()` again)."""
        return cls(name=str(d["name"]), bits=int(d["bits"]), float_lanes=int(d["float_lanes"]))


def vector_isa() -> VectorISA:
    """The vector ISA Inductor picks now (its `pick_vec_isa`: the CPU's flags, `ATEN_CPU_CAPABILITY`, and
    `torch._inductor.config.cpp.simdlen`)."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    isa = pick_vec_isa()
    if not isa:
        return VectorISA(name="", bits=0, float_lanes=0)
    return VectorISA(name=str(isa), bits=isa.bit_width(), float_lanes=isa.nelements(torch.float))


@dataclass(frozen=True)
class MemoryAccess:
    """One load or store of a buffer in Inductor's generated C++, whatever its vector width: the pointer, the
    index expression, and how many elements it moves (None: one element, a scalar access)."""

    kind: str  # "load" or "store"
    pointer: str  # the kernel's parameter: in_ptr0, out_ptr0, in_out_ptr0 ...
    index: str  # the element index, e.g. "x1 + 1024L*x0"
    lanes: int | None  # elements moved by one access when a literal in the code; None for a scalar access
    line: str  # the generated line, as written

    def normalised(self) -> str:
        """The access with its width named W instead of a number (16 on AVX-512, 8 on AVX2, 4 on NEON, 1 in a
        scalar loop): the same text on every CPU."""
        return f"{self.kind:5} {self.pointer}[{self.index} : +W]"


_PTR = r"((?:in_out|in|out)_ptr\d+)"
_INDEX = r"static_cast<int64_t>\((.+?)\)"
_VECTOR_LOAD = re.compile(r"::loadu\(" + _PTR + r" \+ " + _INDEX + r"(?:, static_cast<int64_t>\((\d+)\))?\)")
_VECTOR_STORE = re.compile(r"\.store\(" + _PTR + r" \+ " + _INDEX + r"(?:, static_cast<int64_t>\((\d+)\))?\)")
_SCALAR_STORE = re.compile(_PTR + r"\[" + _INDEX + r"\] = ")
_SCALAR_LOAD = re.compile(_PTR + r"\[" + _INDEX + r"\]")


def memory_accesses(source: str, lanes: int | None = None) -> tuple[MemoryAccess, ...]:
    """The loads and stores of a kernel's buffers in Inductor's generated C++, in code order: vector `loadu` /
    `.store` and scalar `ptr[index]` (other forms, such as masked or gathered loads, are not listed). A vector
    store names no width (its vector has one): give `lanes` (the ISA's) to fill it in."""
    found: list[MemoryAccess] = []
    for raw in source.splitlines():
        line = raw.strip()
        for m in _VECTOR_LOAD.finditer(line):
            found.append(MemoryAccess("load", m[1], m[2], int(m[3]) if m[3] else lanes, line))
        for m in _VECTOR_STORE.finditer(line):
            found.append(MemoryAccess("store", m[1], m[2], int(m[3]) if m[3] else lanes, line))
        stored = _SCALAR_STORE.search(line)
        if stored:
            found.append(MemoryAccess("store", stored[1], stored[2], None, line))
        for m in _SCALAR_LOAD.finditer(line):
            if not (stored and m.start() == stored.start()):
                found.append(MemoryAccess("load", m[1], m[2], None, line))
    return tuple(found)


@dataclass(frozen=True)
class KernelTraffic:
    """One kernel: an aten op (eager) or a kernel Inductor generated or called (fused)."""

    name: str
    ops: tuple[str, ...]  # the aten op (eager) or the graph nodes fused into it
    reads: Buffers
    writes: Buffers
    source: str = ""  # fused: the generated kernel's code (empty for a library call)

    @property
    def bytes_read(self) -> int:
        return sum(n for _, n in self.reads)

    @property
    def bytes_written(self) -> int:
        return sum(n for _, n in self.writes)

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    def accesses(self, lanes: int | None = None) -> tuple[MemoryAccess, ...]:
        """The loads and stores in this kernel's generated code (none for a library call or an eager op)."""
        return memory_accesses(self.source, lanes)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KernelTraffic:
        """Rebuilt from `asdict` data (one of a `Traffic.to_dict()`'s "kernels")."""
        return cls(name=str(d["name"]), ops=tuple(d["ops"]), reads=_buffers(d["reads"]), writes=_buffers(d["writes"]),
                   source=str(d.get("source", "")))


@dataclass(frozen=True)
class Traffic:
    """All kernels of one way of running a function, with the inputs, outputs and intermediates by name."""

    mode: str  # "eager" or "fused"
    kernels: tuple[KernelTraffic, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    intermediates: Buffers  # written, then read back by a later kernel; not an input or an output
    graph_breaks: int = 0  # fused only: ops between graphs ran eagerly and are not in `kernels`
    vector: VectorISA | None = None  # fused only: the vector ISA Inductor generated the C++ kernels for

    @property
    def opaque(self) -> tuple[str, ...]:
        """Kernels that are custom operators: the lens sees one call with its inputs and outputs, not the passes
        over memory its own code makes (a two-pass op is counted as one kernel)."""
        return tuple(k.name for k in self.kernels if _is_custom(k.name))

    @property
    def kernel_count(self) -> int:
        return len(self.kernels)

    @property
    def bytes_read(self) -> int:
        return sum(k.bytes_read for k in self.kernels)

    @property
    def bytes_written(self) -> int:
        return sum(k.bytes_written for k in self.kernels)

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def intermediate_count(self) -> int:
        return len(self.intermediates)

    @property
    def intermediate_bytes(self) -> int:
        return sum(n for _, n in self.intermediates)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.vector is not None:
            d["vector"]["text"] = self.vector.describe()
        if self.opaque:  # only where there are some: saved reports (the GPU recordings) round-trip unchanged
            d["opaque"] = list(self.opaque)
        d.update(kernel_count=self.kernel_count, bytes_read=self.bytes_read, bytes_written=self.bytes_written,
                 bytes_moved=self.bytes_moved, intermediate_count=self.intermediate_count,
                 intermediate_bytes=self.intermediate_bytes)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Traffic:
        """The Traffic whose `to_dict()` gave `d` (saved data, e.g. a GPU recording); the derived counts in `d`
        are recomputed, not read."""
        vector = d.get("vector")
        return cls(mode=str(d["mode"]), kernels=tuple(KernelTraffic.from_dict(k) for k in d["kernels"]),
                   inputs=tuple(d["inputs"]), outputs=tuple(d["outputs"]), intermediates=_buffers(d["intermediates"]),
                   graph_breaks=int(d.get("graph_breaks", 0)),
                   vector=VectorISA.from_dict(vector) if vector is not None else None)


def _is_custom(kernel: str) -> bool:
    """A kernel name of a custom operator: eager `ns.op` or Inductor's extern `torch.ops.ns.op.overload`, with a
    namespace other than aten's (Inductor's own kernels, cpp_fused_* and extern_kernels.*, are not)."""
    if kernel.startswith("torch.ops."):
        return not kernel.startswith("torch.ops.aten.")
    namespace = kernel.split(".", 1)[0] if "." in kernel else ""
    return namespace not in ("", "aten", "prims", "extern_kernels")


@dataclass(frozen=True)
class FusionReport:
    """Eager and fused traffic of one function on one input, and (if timed) both measured on one thread."""

    function: str
    eager: Traffic
    fused: Traffic
    eager_ms: float | None
    fused_ms: float | None

    @property
    def bytes_ratio(self) -> float:
        """Eager bytes moved per fused byte moved."""
        return self.eager.bytes_moved / max(self.fused.bytes_moved, 1)

    @property
    def speedup(self) -> float | None:
        """Eager time per fused time (None when not timed)."""
        if self.eager_ms is None or self.fused_ms is None:
            return None
        return self.eager_ms / self.fused_ms

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "eager": self.eager.to_dict(), "fused": self.fused.to_dict(),
                "eager_ms": self.eager_ms, "fused_ms": self.fused_ms, "bytes_ratio": self.bytes_ratio,
                "speedup": self.speedup}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FusionReport:
        """The FusionReport whose `to_dict()` gave `d` (saved data, e.g. a GPU recording); `show_fusion` draws it."""
        return cls(function=str(d["function"]), eager=Traffic.from_dict(d["eager"]), fused=Traffic.from_dict(d["fused"]),
                   eager_ms=d.get("eager_ms"), fused_ms=d.get("fused_ms"))

    def summary(self) -> str:
        timed = (f"; {self.eager_ms:.2f} ms eager, {self.fused_ms:.2f} ms fused ({self.speedup:.1f}x)"
                 if self.speedup is not None else "")
        return (f"{self.function}: eager {self.eager.kernel_count} kernels, {_mb(self.eager.bytes_moved)} moved, "
                f"{self.eager.intermediate_count} intermediates; fused {self.fused.kernel_count} kernels, "
                f"{_mb(self.fused.bytes_moved)} moved, {self.fused.intermediate_count} intermediates{timed}")


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def _spanned_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements a tensor addresses: a broadcast (stride 0) dimension counts once."""
    if t.numel() == 0:
        return 0
    return math.prod(n for n, s in zip(t.shape, t.stride()) if s != 0) * t.element_size()


def _check_inputs(fn: Any, args: tuple[Any, ...]) -> None:
    if not callable(fn):
        raise FusionError(f"give a function and its inputs, not {type(fn).__name__}")
    for a in tree_leaves(args):
        if isinstance(a, torch.Tensor) and a.device.type != "cpu":
            raise FusionError(f"an input is on {a.device}: the fusion lens measures CPU tensors; move it with .cpu()")
        if isinstance(a, torch.Tensor) and a.requires_grad:
            raise FusionError("an input requires grad: the lens accounts for the forward pass only; "
                              "pass x.detach() (or run under torch.no_grad())")
        if isinstance(a, torch.Tensor) and (a.layout != torch.strided or a.is_nested or a.is_quantized):
            what = "quantized" if a.is_quantized else "nested" if a.is_nested else str(a.layout).removeprefix("torch.")
            raise FusionError(f"an input is a {what} tensor: the lens counts the bytes of dense tensors' storage; "
                              "pass x.to_dense() (or x.dequantize())")
        if isinstance(a, torch.Tensor) and type(a) not in (torch.Tensor, torch.nn.Parameter):
            raise FusionError(f"an input is a {type(a).__name__}, a Tensor subclass: the lens reads plain tensors' "
                              "storage; pass the plain tensor inside it")


def _storage_key(t: torch.Tensor) -> int:
    """One number per buffer: its data address, or for a storage with no data (an empty tensor's, address 0)
    the storage object's own address, negated, so two empty tensors are two buffers."""
    s = t.untyped_storage()
    ptr = s.data_ptr()
    return ptr if ptr or s.nbytes() else -int(s._cdata)


def _names(fn: Any, args: tuple[Any, ...]) -> list[str]:
    """The function's parameter names for its tensor inputs (x, w, b ...), else in0, in1 ..."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"in{i}" for i in range(len(args))]


class _Recorder(TorchDispatchMode):
    """Names each storage as it is made (inputs by parameter name, the rest t1, t2 ...) and records every op."""

    def __init__(self, names: dict[int, str]) -> None:
        super().__init__()
        self.names = names  # storage address -> label
        self.ops: list[tuple[str, list[tuple[str, int]], list[tuple[str, int]]]] = []
        self.made = 0

    def label(self, t: torch.Tensor) -> str:
        ptr = _storage_key(t)
        if ptr not in self.names:
            self.made += 1
            self.names[ptr] = f"t{self.made}"
        return self.names[ptr]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.is_view or func.overloadpacket.__name__ in _NO_KERNEL:
            return out  # a view or metadata op moves no data
        schema = func._schema
        written = {a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write}
        out_args = {a.name for a in schema.arguments if a.is_out}
        reads, writes = [], []
        bound = dict(zip((a.name for a in schema.arguments), args))
        bound.update(kwargs)
        for name, value in bound.items():
            for t in tree_leaves(value):
                if not isinstance(t, torch.Tensor):
                    continue
                if name not in out_args:  # an in-place op reads what it overwrites; an out= buffer is not read
                    reads.append((self.label(t), _spanned_bytes(t)))
                if name in written:
                    writes.append((self.label(t), _spanned_bytes(t)))
        if not written:
            inputs = {_storage_key(a) for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)}
            for t in tree_leaves(out):
                if not isinstance(t, torch.Tensor):
                    continue
                ptr = _storage_key(t)
                if ptr in self.names and ptr not in inputs:
                    del self.names[ptr]  # a fresh output at a freed buffer's address: a new buffer
                writes.append((self.label(t), _spanned_bytes(t)))
        self.ops.append((f"{func.namespace}.{func.overloadpacket.__name__}", reads, writes))
        return out


# ops that only make metadata or empty buffers, never moving data
_NO_KERNEL = {"empty", "empty_strided", "empty_like", "lift_fresh", "detach", "alias", "_unsafe_view", "view",
              "_to_copy_meta", "sym_size", "sym_stride", "sym_numel", "is_same_size", "_local_scalar_dense"}


def _intermediates(kernels: list[KernelTraffic], inputs: set[str], outputs: set[str]) -> Buffers:
    found: dict[str, int] = {}
    written: dict[str, int] = {}
    for k in kernels:
        for name, _n in k.reads:
            if name in written and name not in inputs and name not in outputs:
                found.setdefault(name, written[name])
        for name, n in k.writes:
            written[name] = max(written.get(name, 0), n)
    return tuple(found.items())


def eager_traffic(fn: Callable[..., Any], *args: Any) -> Traffic:
    """Run fn(*args) eagerly and account every aten op as a kernel: bytes read and written, and the
    intermediates it writes and reads back. Run it on a small input: the numbers scale with the size."""
    _check_inputs(fn, args)
    labels = _names(fn, args)
    names: dict[int, str] = {}
    for label, a in zip(labels, args):
        for t in tree_leaves(a):
            if isinstance(t, torch.Tensor):
                names.setdefault(_storage_key(t), label)
    rec = _Recorder(names)
    with torch.no_grad(), rec:
        out = fn(*args)
    out_names = [rec.names.get(_storage_key(t), "?") for t in tree_leaves(out)
                 if isinstance(t, torch.Tensor)]
    kernels = [KernelTraffic(name=op, ops=(op.removeprefix("aten."),), reads=tuple(r), writes=tuple(w))
               for op, r, w in rec.ops]
    inputs = [n for n in labels if n in set(names.values())]
    outputs = list(dict.fromkeys(out_names))
    renamed = _rename_outputs(kernels, outputs)
    kernels = [KernelTraffic(k.name, k.ops, tuple((renamed.get(b, b), n) for b, n in k.reads),
                             tuple((renamed.get(b, b), n) for b, n in k.writes)) for k in kernels]
    outputs = [renamed.get(o, o) for o in outputs]
    return Traffic(mode="eager", kernels=tuple(kernels), inputs=tuple(inputs), outputs=tuple(outputs),
                   intermediates=_intermediates(kernels, set(inputs), set(outputs)))


def _rename_outputs(kernels: list[KernelTraffic], outputs: list[str]) -> dict[str, str]:
    """Output buffers are called out (or out0, out1 ...) in both accountings, so they compare by name."""
    made = [o for o in outputs if o.startswith(("t", "buf"))]
    if len(made) == 1:
        return {made[0]: "out"}
    return {o: f"out{i}" for i, o in enumerate(made)}


@contextlib.contextmanager
def _scheduled(into: list[dict[str, Any]]) -> Iterator[None]:
    """Record each graph's scheduled kernels as Inductor generates their code, and, as each compiled graph runs,
    the storages it was given and returned (so one graph's outputs can be linked to the next graph's inputs);
    both put back afterwards."""
    from torch._inductor import ir
    from torch._inductor import scheduler as sched
    from torch._inductor.output_code import CompiledFxGraph
    from torch._inductor.virtualized import V

    original = sched.Scheduler.codegen
    original_call = CompiledFxGraph.__call__

    def codegen(self: Any) -> Any:
        result = original(self)
        graph = V.graph
        nodes = []
        for node in self.nodes:
            if isinstance(node, sched.NopKernelSchedulerNode) or isinstance(node.node, ir.MultiOutput):
                continue  # no kernel: a multi-output item is accounted to the library call that writes it
            origins = sorted({o.name for sn in node.get_nodes() if sn.node is not None
                              for o in getattr(sn.node, "origins", ())})
            extern = isinstance(node, sched.ExternKernelSchedulerNode)
            target = ""
            if extern:
                kernel = getattr(node.node, "python_kernel_name", None) or getattr(node.node, "op_overload", "")
                target = str(kernel) if kernel else ""
            writes = node.get_read_write_buffer_accesses(include_reads=False, include_writes=True)
            items = [o for o in getattr(node.node, "outputs", None) or () if isinstance(o, ir.MultiOutput)]
            with contextlib.suppress(Exception):  # a library call with several results (sort: values and indices)
                # writes each of them, used later or not; Inductor counts none (its "todo") or one (a symbolic
                # size: left as Inductor counts it)
                if items:
                    writes = {o.get_name(): int(o.get_numel()) * o.get_dtype().itemsize for o in items}
            nodes.append({
                "name": node.get_name(), "extern": extern, "target": target, "origins": origins,
                "reads": node.get_read_write_buffer_accesses(include_reads=True, include_writes=False),
                "writes": writes})
        into.append({"inputs": list(graph.graph_inputs), "outputs": list(graph.get_output_names()), "nodes": nodes,
                     "vector": vector_isa(), "ran": None})
        return result

    def call(self: Any, inputs: Any) -> Any:
        given = [_storage(t) for t in inputs]  # before the call: a boxed call empties the list
        out = original_call(self, inputs)
        if into and into[-1]["ran"] is None:  # Dynamo runs each graph as soon as it is compiled
            into[-1]["ran"] = (given, [_storage(t) for t in out] if isinstance(out, (list, tuple)) else [])
        return out

    sched.Scheduler.codegen = codegen  # type: ignore[method-assign]
    CompiledFxGraph.__call__ = call  # type: ignore[method-assign]
    try:
        yield
    finally:
        sched.Scheduler.codegen = original  # type: ignore[method-assign]
        CompiledFxGraph.__call__ = original_call  # type: ignore[method-assign]


def _storage(t: Any) -> int | None:
    return _storage_key(t) if isinstance(t, torch.Tensor) else None


def _links(graphs: list[dict[str, Any]]) -> dict[tuple[int, str], tuple[int, str]]:
    """(graph, input buffer) -> (earlier graph, output buffer) holding the same storage when they ran: a tensor one
    graph wrote and a later graph read back, across a graph break."""
    made: dict[int, tuple[int, str]] = {}
    links: dict[tuple[int, str], tuple[int, str]] = {}
    for gi, g in enumerate(graphs):
        if g["ran"] is None:
            continue
        given, returned = g["ran"]
        if len(given) == len(g["inputs"]):
            for b, ptr in zip(g["inputs"], given):
                if ptr in made:
                    links[(gi, b)] = made[ptr]
        if len(returned) == len(g["outputs"]):
            for b, ptr in zip(g["outputs"], returned):
                if ptr is not None and b not in g["inputs"]:
                    made[ptr] = (gi, b)
    return links


def fused_traffic(fn: Callable[..., Any], *args: Any, **compile_kwargs: Any) -> Traffic:
    """Compile fn with Inductor (through the compile lens) and account each kernel it generated or called,
    from Inductor's own read/write accounting (a model: see the module's doc). Graph breaks are counted: ops
    between graphs are not, but a tensor one graph writes and a later graph reads back is an intermediate,
    named as the function names it."""
    from .compile_trace import compile_trace

    _check_inputs(fn, args)
    if compile_kwargs.get("backend", "inductor") != "inductor":
        raise FusionError("fused traffic comes from Inductor's kernels: leave backend at 'inductor'")
    graphs: list[dict[str, Any]] = []
    with torch.no_grad(), _scheduled(graphs):
        trace = compile_trace(fn, *args, **compile_kwargs)
    # Inductor's graph inputs are the captured graph's inputs in order; Dynamo names each by its source
    sources = [[_local(src) for src in cg.inputs] for cg in trace.graphs]
    links = _links(graphs)
    returned = {_storage(t) for t in tree_leaves(trace.result)} - {None}
    final: dict[tuple[int, str], str] = {}  # what the function returns, by the graph output that made it
    for gi in reversed(range(len(graphs))):  # the latest graph that made a storage made what is returned there
        g = graphs[gi]
        if g["ran"] is not None and len(g["ran"][1]) == len(g["outputs"]):
            for b, ptr in zip(g["outputs"], g["ran"][1]):
                if ptr in returned and b not in g["inputs"]:
                    final[(gi, b)] = b
                    returned.discard(ptr)
    params = set(_names(fn, args))
    renamed: dict[tuple[int, str], str] = {}  # (graph, buffer) -> the name shown
    function_inputs: list[str] = []
    for gi, g in enumerate(graphs):
        prefix = f"g{gi}." if len(graphs) > 1 else ""
        names = sources[gi] if gi < len(sources) and len(sources[gi]) == len(g["inputs"]) else []
        for i, b in enumerate(g["inputs"]):
            shown = names[i] if names else prefix + b
            if (gi, b) in links:
                renamed[links[(gi, b)]] = shown  # the earlier graph's output takes the function's name for it
            renamed[(gi, b)] = shown
            if (gi, b) not in links and (gi == 0 or re.split(r"[.\[]", shown)[0] in params):
                function_inputs.append(shown)  # a later graph's unlinked input is the function's or made eagerly
    outs_all = [(gi, o) for gi, g in enumerate(graphs) for o in g["outputs"] if o not in g["inputs"]]
    result_outs = outs_all if len(graphs) == 1 or not final else [key for key in outs_all if key in final]
    for i, key in enumerate(result_outs):
        renamed[key] = "out" if len(result_outs) == 1 else f"out{i}"
    kernels: list[KernelTraffic] = []
    for gi, g in enumerate(graphs):
        prefix = f"g{gi}." if len(graphs) > 1 else ""

        def nm(b: str) -> str:
            return renamed.get((gi, b), prefix + b)  # noqa: B023 (used at once)

        for node in g["nodes"]:
            if not node["reads"] and not node["writes"]:
                continue  # no accounted traffic (Inductor counts none for some library calls)
            made = None if node["target"] else _generated(trace, node["origins"])
            name = node["target"] or (made.name if made is not None else node["name"])
            kernels.append(KernelTraffic(
                name=name, ops=tuple(node["origins"]), source=made.source if made is not None else "",
                reads=tuple((nm(b), int(n)) for b, n in node["reads"].items()),
                writes=tuple((nm(b), int(n)) for b, n in node["writes"].items())))
    inputs = list(dict.fromkeys(function_inputs))
    outputs = list(dict.fromkeys(renamed.get(key, key[1]) for key in result_outs))
    return Traffic(mode="fused", kernels=tuple(kernels), inputs=tuple(inputs), outputs=tuple(outputs),
                   intermediates=_intermediates(kernels, set(inputs), set(outputs)), graph_breaks=trace.break_count,
                   vector=graphs[0]["vector"] if graphs else None)


def _local(source: str) -> str:
    """Dynamo's source name of a graph input as the user wrote it: L['x'] -> x, L['self'].w -> self.w."""
    m = re.fullmatch(r"L\['([^']+)'\](.*)", source)
    return m[1] + m[2] if m else source


def _generated(trace: Any, origins: list[str]) -> Any:
    """The generated kernel (compile lens) whose fused nodes hold this scheduler node's origins."""
    want = set(origins)
    for k in trace.kernels:
        if want and want <= set(k.fused_nodes):
            return k
    for k in trace.kernels:
        if want & set(k.fused_nodes):
            return k
    return None


def time_all(*fns: Callable[[], Any], repeat: int = 15) -> list[float]:
    """Median wall time in ms of each function, measured round-robin on one thread, so a slow spell on a shared
    machine hits them all alike and their ratios hold; freed memory stays in the process (`steady_heap`), so no
    call pays the OS for fresh pages where another does not. Call compiled functions once inside `one_thread()` first:
    the thread count is guarded, and a compile inside the timing would be timed."""
    if repeat < 1:
        raise FusionError(f"repeat={repeat}: time at least once")
    if not fns:
        raise FusionError("give at least one function to time")
    times: list[list[float]] = [[] for _ in fns]
    steady_heap()  # large outputs come from the process's heap every call, never fresh from the OS
    with one_thread():
        for fn in fns:
            fn()
        for _ in range(repeat):
            for fn, into in zip(fns, times):
                t0 = time.perf_counter()
                fn()
                into.append(time.perf_counter() - t0)
    return [statistics.median(t) * 1e3 for t in times]


def time_until(*fns: Callable[[], Any], holds: Callable[[list[float]], bool], tries: int = 3,
               repeat: int = 15) -> tuple[list[float], int]:
    """`time_all(*fns)` again, up to `tries` times, until `holds(times)` is true of one whole measurement (a noisy
    spell on a shared machine gets more tries; the claim is never judged on times mixed from two runs). Returns
    the last measurement and how many were taken."""
    if tries < 1:
        raise FusionError(f"tries={tries}: measure at least once")
    taken = 0
    while True:
        ms = time_all(*fns, repeat=repeat)
        taken += 1
        if taken == tries or holds(ms):
            return ms, taken


def time_pair(first: Callable[[], Any], second: Callable[[], Any], repeat: int = 15) -> tuple[float, float]:
    """Median ms of two functions measured in alternation on one thread (see `time_all`)."""
    a, b = time_all(first, second, repeat=repeat)
    return a, b


def fusion_report(fn: Callable[..., Any], *args: Any, timed: bool = True, repeat: int = 15) -> FusionReport:
    """Eager and fused traffic of fn(*args) and, if `timed`, both measured on this input (one thread,
    alternating, medians). The fused version is compiled for one thread, as it is timed."""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    with busy.working(f"fusion report of {name}", "eager traffic: recording the ops") as line:
        eager = eager_traffic(fn, *args)
        line.phase("fused traffic: compiling with Inductor")
        with one_thread():
            fused = fused_traffic(fn, *args)
        eager_ms = fused_ms = None
        if timed:
            line.phase("timing: compiling for one thread, then eager and fused in turn")
            with one_thread():
                compiled = torch.compile(fn)
                with torch.no_grad():
                    compiled(*args)
                    eager_ms, fused_ms = time_pair(lambda: fn(*args), lambda: compiled(*args), repeat)
    return FusionReport(function=name, eager=eager, fused=fused, eager_ms=eager_ms, fused_ms=fused_ms)
