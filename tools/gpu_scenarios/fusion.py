"""Notebook 13 (fusion) on a GPU: what Inductor writes for each of the notebook's functions, and what it saves.

For every function of the notebook (and of its exercises), on CUDA tensors of the notebook's sizes, it records
into `fn_<name>.json.gz`:

* `code`: Inductor's generated module(s) as written (`run_and_get_code`), with `counts`: `@triton.jit` kernels,
  C++ kernels (the dry run), `extern_kernels.*` library calls and aten fallbacks;
* `source_traffic`: bytes per kernel read off that source (`source_traffic` below says what it counts);
* `lens`: the fusion lens as the notebook calls it (`eager_traffic` / `fused_traffic(...).to_dict()`); the lens
  accepts CPU tensors only, so on CUDA its refusal is kept (`as_is_error`) and the lens is run again with only
  its device check lifted (`device_check_lifted`: its accounting itself is device-agnostic);
* `report`: the lens's traffic with the times, shaped like `FusionReport.to_dict()`;
* `timing`: eager vs compiled, CUDA-event medians over 20 calls after warm-up (host `perf_counter` too), and
  `max_abs_diff` between the two outputs.

`summary.json.gz` holds one row per function (kernels, bytes, ms) for a table. The dry run runs the same code
on CPU tensors (Inductor writes C++ there), and checks the Triton byte counter on Triton source Inductor writes
for the CPU without running it.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from record_gpu import Topic
from torch.utils._pytree import tree_leaves

from torchlens_widgets.lenses import fusion as lens
from torchlens_widgets.lenses.compile_trace import _kernels_in

BUDGET_S = 85.0  # on the GPU, functions after this many seconds are skipped (the topic must stay under 100 s)
REPEAT, WARMUP = 20, 3


# --- the notebook's functions, as it writes them ----------------------------------------------------------------

def double(x):
    return x * 2


def silu_affine(x, w, b):
    y = x * w + b
    return y * torch.sigmoid(y)


def chain(k):
    def multiply_k_times(x):
        for _ in range(k):
            x = x * 1.0001
        return x
    return multiply_k_times


def softmax_by_hand(x):
    m = x.amax(dim=1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(dim=1, keepdim=True)


def linear_relu(x, w, b):
    return torch.relu(x @ w + b)


def gated(x, g, b):
    return (x + b) * torch.sigmoid(g)


def standardise_fusable(x):
    m = x.mean(dim=1, keepdim=True)
    c = x - m
    s = (c * c).mean(dim=1, keepdim=True).sqrt()
    return c / torch.where(s == 0, torch.ones_like(s), s)


def shift_scale_relu(x):
    return ((x - 1) * 3).relu()


def sorted_doubled(x):
    return torch.sort(x, dim=1).values * 2


def transposed_copy(x):
    return x.t().contiguous() * 2


def two_matmuls(x, w):
    return (x @ w) @ w


def cases(device: torch.device) -> list[tuple[str, Callable[..., Any], tuple[torch.Tensor, ...], str]]:
    """(name, function, inputs, note) in the notebook's order and sizes; the exercises' functions after."""
    g = torch.Generator().manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(device)

    x = randn(1024, 1024)
    big = randn(4096, 1024)
    out = [("double", double, (x,), "x: 1024 x 1024"),
           ("silu_affine", silu_affine, (x, randn(1024), randn(1024)), "x 1024 x 1024, w and b 1024")]
    out += [(f"chain_{k}", chain(k), (big,), f"chain({k}): {k} multiplies of a 4096 x 1024 tensor") for k in (1, 2, 4, 8)]
    out += [("softmax_by_hand", softmax_by_hand, (x,), "x: 1024 x 1024"),
            ("linear_relu", linear_relu, (x, randn(1024, 256), randn(256)), "x 1024 x 1024, w 1024 x 256, b 256"),
            ("shift_scale_relu", shift_scale_relu, (x,), "x: 1024 x 1024"),
            ("sorted_doubled", sorted_doubled, (randn(64, 64),),
             "64 x 64 (the exercise check's size): rows of at most 512 are sorted in a Triton kernel on a GPU"),
            ("sorted_doubled_1024", sorted_doubled, (x,), "1024 x 1024: rows over 512 fall back to aten.sort"),
            ("transposed_copy", transposed_copy, (x,), "x: 1024 x 1024"),
            ("two_matmuls", two_matmuls, (x, randn(1024, 1024)), "x and w: 1024 x 1024"),
            ("gated", gated, (x, randn(1024, 1024), randn(1024)), "x and g 1024 x 1024, b 1024"),
            ("standardise_fusable", standardise_fusable, (big,), "4096 x 1024 (the exercise's timed size)")]
    return out


# --- bytes per kernel, read off Inductor's generated source ------------------------------------------------------

_ITEMSIZE = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float64": 8, "double": 8,
             "int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1}
_PTR = re.compile(r"(?:in_out|in|out)_ptr\d+")
_SHAPE = r"\(([^()]*)\), \(([^()]*)\)"
_RE_INPUT = re.compile(r"(\w+) = rand_strided\(" + _SHAPE + r", device='[^']*', dtype=torch\.(\w+)\)")
_RE_ASSERT = re.compile(r"assert_size_stride\((\w+), " + _SHAPE)
_RE_EMPTY = re.compile(r"(\w+) = empty_strided\w*\(" + _SHAPE + r", torch\.(\w+)\)")
_RE_REUSE = re.compile(r"(\w+) = (\w+); del \2\b")
_RE_VIEW = re.compile(r"(\w+) = reinterpret_tensor\((\w+), " + _SHAPE)
_RE_ITEM = re.compile(r"(\w+) = (\w+)\[(\d+)\]$")
_RE_EXTERN = re.compile(r"(?:(\w+) = )?extern_kernels\.(\w+)\((.*)\)$")
_RE_FALLBACK = re.compile(r"(\w+) = torch\.ops\.(\w+\.\w+(?:\.\w+)?)\((.*)\)$")
_RE_RETURN = re.compile(r"return \((.*)\)$")
SOURCE_TRAFFIC_RULE = (
    "per launch of a generated kernel: each pointer parameter is matched to the buffer passed in its position; a "
    "buffer counts as read once (its full size) if the kernel has a load from that pointer (Triton tl.load, C++ "
    "loadu or ptr[i]) and as written once if it has a store; a pointer with neither counts by its role (in_ptr "
    "read, out_ptr written, in_out_ptr both). A library call (extern_kernels.*) reads its tensor arguments and "
    "writes out=; an aten fallback reads its arguments and writes what the wrapper asserts about its results. "
    "Sizes from the wrapper's assert_size_stride / empty_strided / reinterpret_tensor (elements spanned: stride-0 "
    "dimensions once) times the dtype's size (inputs: get_args' dtype; otherwise float32 assumed). An "
    "intermediate is a buffer one kernel writes and a later kernel reads (through a reuse alias too) that is "
    "neither an input nor returned. Repeated loads of one buffer in a kernel (a softmax's passes) count once.")


def _ints(text: str) -> list[int] | None:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        return [int(p) for p in parts]
    except ValueError:
        return None  # a symbolic size (dynamic shapes)


def _span(size: str, stride: str, itemsize: int) -> int | None:
    n, s = _ints(size), _ints(stride)
    if n is None or s is None:
        return None
    if 0 in n:
        return 0
    return math.prod(d for d, st in zip(n, s) if st != 0) * itemsize


def _split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of a call (parentheses nest)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _kernel_params(source: str) -> list[str]:
    m = re.search(r"def \w+\(([^)]*)\)", source)  # Triton
    if m:
        return [p.split(":")[0].strip() for p in m[1].split(",") if p.strip()]
    m = re.search(r"void\s+kernel\(([^)]*)\)", source)  # C++
    if m:
        return [re.findall(r"\w+", p)[-1] for p in m[1].split(",") if re.findall(r"\w+", p)]
    return []


def _kernel_sites(source: str) -> tuple[dict[str, int], dict[str, int]]:
    """Load and store sites per pointer parameter in a kernel's source (Triton or Inductor's C++)."""
    loads: dict[str, int] = {}
    stores: dict[str, int] = {}
    if "tl.load" in source or "tl.store" in source or "@triton.jit" in source:
        for p in re.findall(r"tl\.load\(\s*(\w+)", source):
            loads[p] = loads.get(p, 0) + 1
        for p in re.findall(r"tl\.store\(\s*(\w+)", source):
            stores[p] = stores.get(p, 0) + 1
    else:
        for a in lens.memory_accesses(source):
            into = loads if a.kind == "load" else stores
            into[a.pointer] = into.get(a.pointer, 0) + 1
    return loads, stores


def source_traffic(code: str) -> dict[str, Any]:
    """Kernels launched by one Inductor output module, in launch order, with the bytes each reads and writes
    (see SOURCE_TRAFFIC_RULE), and totals."""
    sources = _kernels_in(code)
    body = code[code.find("def call("):] if "def call(" in code else code
    itemsize = {m[1]: _ITEMSIZE.get(m[4], 4) for m in _RE_INPUT.finditer(code)}
    size: dict[str, int | None] = {}
    storage: dict[str, str] = {}  # buffer name -> the name its memory was first given
    last_written: dict[str, str] = {}  # storage -> the name it was last written under
    parts: dict[str, list[str]] = {}  # a fallback's result -> its unpacked items
    kernels: list[dict[str, Any]] = []
    outputs: list[str] = []

    def known(name: str) -> bool:
        return name in size or name in storage or bool(re.fullmatch(r"arg\d+_\d+|buf\d+|primals_\d+", name))

    def store(name: str) -> str:
        return storage.setdefault(name, name)

    def arg_buffer(arg: str) -> tuple[str, int | None] | None:
        m = re.match(r"reinterpret_tensor\((\w+), " + _SHAPE, arg)
        if m:
            return m[1], _span(m[2], m[3], itemsize.get(m[1], 4))
        m = re.fullmatch(r"\w+", arg)
        return (arg, size.get(arg)) if m and known(arg) else None

    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith("#") or not line:
            continue
        if m := _RE_ASSERT.match(line):
            size[m[1]] = _span(m[2], m[3], itemsize.get(m[1], 4))
            continue
        if m := _RE_EMPTY.match(line):
            itemsize[m[1]] = _ITEMSIZE.get(m[4], 4)
            size[m[1]] = _span(m[2], m[3], itemsize[m[1]])
            continue
        if m := _RE_REUSE.match(line):
            storage[m[1]] = store(m[2])
            size[m[1]] = size.get(m[2])
            itemsize[m[1]] = itemsize.get(m[2], 4)
            continue
        if m := _RE_VIEW.match(line):
            storage[m[1]] = store(m[2])
            itemsize[m[1]] = itemsize.get(m[2], 4)
            size[m[1]] = _span(m[3], m[4], itemsize[m[1]])
            continue
        if m := _RE_ITEM.match(line):
            parts.setdefault(m[2], []).append(m[1])
            continue
        if m := _RE_RETURN.match(line):
            outputs = [a for a in _split_args(m[1]) if re.fullmatch(r"\w+", a)]
            continue
        if m := _RE_EXTERN.match(line):
            args = _split_args(m[3])
            outs = [a.split("=", 1)[1].strip() for a in args if a.replace(" ", "").startswith("out=")]
            reads = [b for a in args if "=" not in a and (b := arg_buffer(a))]
            writes = [(o, size.get(o)) for o in outs] + ([(m[1], size.get(m[1]))] if m[1] else [])
            kernels.append({"name": f"extern_kernels.{m[2]}", "kind": "extern", "reads": reads, "writes": writes})
            continue
        if m := _RE_FALLBACK.match(line):
            reads = [b for a in _split_args(m[3]) if "=" not in a and (b := arg_buffer(a))]
            kernels.append({"name": f"torch.ops.{m[2]}", "kind": "fallback", "reads": reads, "writes": [m[1]]})
            continue
        m = re.match(r"(\w+)(?:\.run)?\((.*)\)$", line)
        if m and m[1] in sources:
            src = sources[m[1]]
            params, args = _kernel_params(src), _split_args(m[2])
            loads, stores = _kernel_sites(src)
            reads, writes, pointers = [], [], {}
            for i, p in enumerate(params):
                if not _PTR.fullmatch(p) or i >= len(args) or not (b := arg_buffer(args[i])):
                    continue
                pointers[p] = b[0]
                loaded, stored = loads.get(p, 0) > 0, stores.get(p, 0) > 0
                if not loaded and not stored:
                    loaded, stored = not p.startswith("out_"), not p.startswith("in_ptr")
                if loaded:
                    reads.append(b)
                if stored:
                    writes.append(b)
            kernels.append({"name": m[1], "kind": "triton" if "@triton.jit" in src else "cpp", "reads": reads,
                            "writes": writes, "pointers": pointers, "load_sites": loads, "store_sites": stores})

    # a fallback's result is its unpacked items (sizes asserted after the call); then intermediates, in order
    inputs = list(dict.fromkeys(re.findall(r"\b(?:arg\d+_\d+|primals_\d+)\b", body)))
    intermediates: dict[str, int | None] = {}
    for k in kernels:
        if k["kind"] == "fallback":
            k["writes"] = [(p, size.get(p)) for w in k["writes"] for p in parts.get(w, [w])]
        for name, n in k["reads"]:
            w = last_written.get(store(name))
            if w is not None and w not in inputs and w not in outputs:
                intermediates.setdefault(w, size.get(w, n))
        for name, _n in k["writes"]:
            last_written[store(name)] = name
        k["bytes_read"] = sum(n or 0 for _, n in k["reads"])
        k["bytes_written"] = sum(n or 0 for _, n in k["writes"])
    unknown = sorted({b for k in kernels for b, n in (*k["reads"], *k["writes"]) if n is None})
    return {"kernels": kernels, "inputs": inputs, "outputs": outputs,
            "intermediates": list(intermediates.items()), "intermediate_count": len(intermediates),
            "bytes_read": sum(k["bytes_read"] for k in kernels), "bytes_written": sum(k["bytes_written"] for k in kernels),
            "bytes_moved": sum(k["bytes_read"] + k["bytes_written"] for k in kernels),
            "kernel_count": len(kernels), "unknown_sizes": unknown, "rule": SOURCE_TRAFFIC_RULE}


def code_counts(codes: list[str]) -> dict[str, Any]:
    """Generated kernels and library calls in Inductor's output modules."""
    text = "\n".join(codes)
    extern = re.findall(r"extern_kernels\.(\w+)\(", text)
    fallback = re.findall(r"= torch\.ops\.(\w+\.\w+(?:\.\w+)?)\(", text)
    return {"modules": len(codes), "triton_kernels": text.count("@triton.jit"),
            "cpp_kernels": len(re.findall(r"async_compile\.cpp\w*\(", text)),
            "kernel_names": [n for c in codes for n in _kernels_in(c)],
            "extern_calls": {n: extern.count(n) for n in dict.fromkeys(extern)},
            "aten_fallbacks": {n: fallback.count(n) for n in dict.fromkeys(fallback)},
            "chars": len(text)}


# --- the lens, on any device -------------------------------------------------------------------------------------

@contextlib.contextmanager
def device_check_lifted() -> Iterator[None]:
    """The fusion lens with only its CPU-tensor check removed (it refuses CUDA inputs; its dispatch recorder and
    Inductor's read/write accounting do not depend on the device). The other checks stay."""
    original = lens._check_inputs

    def check(fn: Any, args: tuple[Any, ...]) -> None:
        if not callable(fn):
            raise lens.FusionError(f"give a function and its inputs, not {type(fn).__name__}")
        if any(isinstance(a, torch.Tensor) and a.requires_grad for a in tree_leaves(args)):
            raise lens.FusionError("an input requires grad")

    lens._check_inputs = check
    try:
        yield
    finally:
        lens._check_inputs = original


def traffic_dict(traffic: Any, device: torch.device) -> dict[str, Any]:
    d = traffic.to_dict()
    if device.type != "cpu" and d.get("vector") is not None:
        d["vector"] = None  # the host CPU's vector ISA: the kernels here are Triton, not C++
    return d


# --- timing ------------------------------------------------------------------------------------------------------

def time_round_robin(t: Topic, fns: list[Callable[[], Any]], repeat: int = REPEAT,
                     warmup: int = WARMUP) -> list[dict[str, Any]]:
    """Per function: CUDA-event ms and host ms per call (each call synchronised before and after), measured in
    alternation so a slow spell hits all alike; medians and the samples."""
    for f in fns:
        for _ in range(warmup):
            f()
    t.cuda.synchronize()
    dev: list[list[float]] = [[] for _ in fns]
    host: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, f in enumerate(fns):
            start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
            t.cuda.synchronize()
            h0 = time.perf_counter()
            start.record()
            f()
            end.record()
            t.cuda.synchronize()
            host[i].append((time.perf_counter() - h0) * 1e3)
            dev[i].append(start.elapsed_time(end))
    return [{"event_ms": statistics.median(d), "host_ms": statistics.median(h),
             "event_samples": [round(v, 5) for v in d], "host_samples": [round(v, 5) for v in h]}
            for d, h in zip(dev, host)]


def max_abs_diff(a: Any, b: Any) -> float:
    la = [x for x in tree_leaves(a) if isinstance(x, torch.Tensor)]
    lb = [x for x in tree_leaves(b) if isinstance(x, torch.Tensor)]
    return max(((x.float() - y.float()).abs().max().item() for x, y in zip(la, lb)), default=0.0)


# --- recording ---------------------------------------------------------------------------------------------------

def _describe(args: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [{"shape": list(a.shape), "stride": list(a.stride()), "dtype": str(a.dtype), "device": str(a.device),
             "bytes": a.numel() * a.element_size()} for a in args if isinstance(a, torch.Tensor)]


def record_function(t: Topic, name: str, fn: Callable[..., Any], args: tuple[Any, ...], note: str,
                    exercise_lifted: bool) -> dict[str, Any]:
    rec: dict[str, Any] = {"function": name, "note": note, "inputs": _describe(args), "device": str(t.device)}
    compiled: Any = None
    with t.step(f"{name}: generated code") as e:
        from torch._inductor.utils import run_and_get_code

        torch._dynamo.reset()
        compiled = torch.compile(fn)
        with torch.no_grad():
            _out, codes = run_and_get_code(compiled, *args)
        rec["code"] = codes
        rec["counts"] = code_counts(codes)
        e.update({k: rec["counts"][k] for k in ("triton_kernels", "cpp_kernels", "extern_calls", "aten_fallbacks")})
    with t.step(f"{name}: bytes from the source") as e:
        rec["source_traffic"] = [source_traffic(c) for c in rec.get("code", [])]
        e["kernels"] = [k["name"] for s in rec["source_traffic"] for k in s["kernels"]]
        e["bytes_moved"] = sum(s["bytes_moved"] for s in rec["source_traffic"])
    with t.step(f"{name}: eager vs compiled") as e:
        if compiled is None:
            raise RuntimeError("nothing compiled (see the generated-code step)")
        with torch.no_grad():
            eager_out, compiled_out = fn(*args), compiled(*args)
            timed = time_round_robin(t, [lambda: fn(*args), lambda: compiled(*args)])
        rec["timing"] = {"eager": timed[0], "compiled": timed[1], "repeat": REPEAT, "warmup": WARMUP,
                         "max_abs_diff": max_abs_diff(eager_out, compiled_out),
                         "clock": "CUDA events" if not t.dry else "host perf_counter (CUDA events are stubs)"}
        e.update(eager_ms=timed[0]["event_ms"], compiled_ms=timed[1]["event_ms"],
                 eager_host_ms=timed[0]["host_ms"], compiled_host_ms=timed[1]["host_ms"],
                 max_abs_diff=rec["timing"]["max_abs_diff"])
    lensed: dict[str, Any] = {}
    with t.step(f"{name}: fusion lens as the notebook calls it") as e:
        try:
            lensed["eager"] = traffic_dict(lens.eager_traffic(fn, *args), t.device)
            lensed["fused"] = traffic_dict(lens.fused_traffic(fn, *args), t.device)
            lensed["device_check_lifted"] = False
        except lens.FusionError as exc:  # expected on CUDA: the lens measures CPU tensors
            lensed["as_is_error"] = e["lens_error"] = f"{type(exc).__name__}: {exc}"
    if "fused" not in lensed or exercise_lifted:
        with t.step(f"{name}: fusion lens, device check lifted") as e, device_check_lifted():
            eager = traffic_dict(lens.eager_traffic(fn, *args), t.device)
            fused = traffic_dict(lens.fused_traffic(fn, *args), t.device)
            e.update(eager_kernels=eager["kernel_count"], fused_kernels=fused["kernel_count"],
                     fused_names=[k["name"] for k in fused["kernels"]])
            if "fused" in lensed:  # the dry run: the lens worked as is, and lifting its check must change nothing
                same = (eager["bytes_moved"], fused["bytes_moved"]) == (lensed["eager"]["bytes_moved"],
                                                                       lensed["fused"]["bytes_moved"])
                lensed["lifted_matches_as_is"] = e["lifted_matches_as_is"] = same
            else:
                lensed.update(eager=eager, fused=fused, device_check_lifted=True)
    rec["lens"] = lensed
    if "eager" in lensed and "fused" in lensed:
        timing = rec.get("timing", {})
        eager_ms = timing.get("eager", {}).get("event_ms" if not t.dry else "host_ms")
        fused_ms = timing.get("compiled", {}).get("event_ms" if not t.dry else "host_ms")
        rec["report"] = {"function": name, "eager": lensed["eager"], "fused": lensed["fused"],
                         "eager_ms": eager_ms, "fused_ms": fused_ms,
                         "bytes_ratio": lensed["eager"]["bytes_moved"] / max(lensed["fused"]["bytes_moved"], 1),
                         "speedup": eager_ms / fused_ms if eager_ms and fused_ms else None}
    with t.step(f"{name}: save") as e:
        e["file"] = t.json(f"fn_{name}", rec).name
    torch._dynamo.reset()
    return rec


def summary_row(rec: dict[str, Any]) -> dict[str, Any]:
    counts, timing, lensed = rec.get("counts", {}), rec.get("timing", {}), rec.get("lens", {})
    src = rec.get("source_traffic") or []
    return {"function": rec["function"], "note": rec.get("note"),
            "triton_kernels": counts.get("triton_kernels"), "cpp_kernels": counts.get("cpp_kernels"),
            "extern_calls": counts.get("extern_calls"), "aten_fallbacks": counts.get("aten_fallbacks"),
            "source_kernels": sum(s["kernel_count"] for s in src) if src else None,
            "source_bytes_moved": sum(s["bytes_moved"] for s in src) if src else None,
            "eager_kernels": lensed.get("eager", {}).get("kernel_count"),
            "eager_bytes_moved": lensed.get("eager", {}).get("bytes_moved"),
            "fused_kernels": lensed.get("fused", {}).get("kernel_count"),
            "fused_bytes_moved": lensed.get("fused", {}).get("bytes_moved"),
            "fused_intermediates": lensed.get("fused", {}).get("intermediate_count"),
            "eager_ms": timing.get("eager", {}).get("event_ms"), "compiled_ms": timing.get("compiled", {}).get("event_ms"),
            "eager_host_ms": timing.get("eager", {}).get("host_ms"),
            "compiled_host_ms": timing.get("compiled", {}).get("host_ms"),
            "max_abs_diff": timing.get("max_abs_diff"), "lens_as_is_error": lensed.get("as_is_error")}


_TRITON_ON_CPU = r"""
import json, torch
from unittest import mock
from torch._inductor.graph import GraphLowering
from gpu_scenarios import fusion as f
out = {}
for name, fn, args in (("silu_affine", f.silu_affine, (torch.randn(64, 64), torch.randn(64), torch.randn(64))),
                       ("sorted_doubled", f.sorted_doubled, (torch.randn(64, 64),)),
                       ("linear_relu", f.linear_relu, (torch.randn(64, 64), torch.randn(64, 32), torch.randn(32)))):
    codes = []
    torch._dynamo.reset()
    with torch._inductor.config.patch(cpu_backend="triton"), \
            mock.patch.object(GraphLowering, "save_output_code", codes.append), \
            mock.patch("torch.utils._triton.triton_hash_with_backend", lambda: "dry"):
        try:
            torch.compile(fn)(*args)
        except Exception as exc:  # expected: no Triton backend for the CPU here; the source was written first
            out.setdefault("errors", {})[name] = type(exc).__name__
    out[name] = {"counts": f.code_counts(codes), "traffic": [f.source_traffic(c) for c in codes]}
print("JSON" + json.dumps(out))
"""


def check_triton_counter(t: Topic) -> None:
    """Dry run only: Inductor writes Triton for CPU tensors with `cpu_backend="triton"` (it cannot run them
    without a Triton CPU backend), in a fresh process; the byte counter must read those kernels as it will the
    GPU's."""
    with t.step("dry: the byte counter on Triton source") as e:
        try:
            import triton  # noqa: F401
        except ImportError:
            e["skipped"] = "no triton here"
            return
        done = t.run_child(_TRITON_ON_CPU, timeout=300)
        line = next((ln for ln in done["stdout"].splitlines() if ln.startswith("JSON")), None)
        if line is None:
            raise RuntimeError(f"the child printed no result: {done['stderr'][-1500:]}")
        got = json.loads(line[4:])
        e["errors"] = got.get("errors")
        seen = {}
        for name in ("silu_affine", "sorted_doubled", "linear_relu"):
            traffic = got[name]["traffic"]
            seen[name] = [(k["name"], k["bytes_read"], k["bytes_written"]) for s in traffic for k in s["kernels"]]
            if got[name]["counts"]["triton_kernels"] < 1 or not traffic or not traffic[0]["kernels"]:
                raise AssertionError(f"{name}: no Triton kernel read from the source: {got[name]}")
        e["kernels"] = seen
        full = 64 * 64 * 4
        silu = got["silu_affine"]["traffic"][0]
        if (silu["bytes_read"], silu["bytes_written"]) != (full + 2 * 64 * 4, full):
            raise AssertionError(f"silu_affine: expected {(full + 512, full)}, read {silu['bytes_read']}, "
                                 f"wrote {silu['bytes_written']}")
        t.json("dry_triton_counter_check", got)


def record(t: Topic) -> None:
    t0 = time.perf_counter()
    todo: list[tuple[str, Callable[..., Any], tuple[Any, ...], str]] = []
    with t.step("inputs") as e:
        todo = cases(t.device)
        e["functions"] = [name for name, *_ in todo]
    rows = []
    for i, (name, fn, args, note) in enumerate(todo):
        if not t.dry and time.perf_counter() - t0 > BUDGET_S:
            with t.step(name) as e:
                e["skipped"] = f"the topic's {BUDGET_S:.0f} s were spent"
            continue
        rec = record_function(t, name, fn, args, note, exercise_lifted=t.dry and i == 0)
        rows.append(summary_row(rec))
    with t.step("summary") as e:
        t.json("summary", {"device": str(t.device), "rows": rows, "source_traffic_rule": SOURCE_TRAFFIC_RULE,
                           "timing": f"medians of {REPEAT} calls after {WARMUP} warm-up calls, eager and compiled "
                                     "alternated, each call synchronised before and after"})
        e["functions"] = len(rows)
    if t.dry:
        check_triton_counter(t)
