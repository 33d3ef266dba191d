"""Notebook 17 on a GPU: its kernels natively compiled on the notebook's inputs (outputs saved for a CPU replay
in the interpreter: the same values, the bfloat16 rounding that differs, the race counter), num_warps 1/2/4/8
timed with do_bench beside the compiled kernels' metadata, and the Triton Inductor writes for gelu_ish on CUDA.

Every piece runs in one child process, the same code on both paths: natively on the GPU, and in Triton's
interpreter on the dry run. TRITON_INTERPRET=1 has to be set before triton is imported, not only before a kernel
is decorated: triton.language's own @jit helpers (tl.max, tl.sum, tl.sigmoid) are made at import, and the
interpreter can only run interpreted ones. The child saves each piece's result or error as it goes; the parent
makes a step of each and writes kernels.json.gz, num_warps.json.gz and inductor.json.gz.

This module is gpu_scenarios.triton: `import triton` below is absolute and finds the real package.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import torch
from record_gpu import Topic

try:
    import triton
    import triton.language as tl
except Exception:
    triton = tl = None  # type: ignore[assignment]


# ---- notebook 17's kernels, copied; jitted in the child (kernels()) so that TRITON_INTERPRET decides their kind ----

def add_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, x + y)


def copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


def add_masked(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def row_max_kernel(x_ptr, out_ptr, row_stride, n_cols, BLOCK: tl.constexpr, OTHER: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=OTHER)
    tl.store(out_ptr + row, tl.max(v, axis=0))


def scale_tiles(x_ptr, out_ptr, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    cols = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    v = tl.load(x_ptr + rows * n_cols + cols, mask=mask)
    tl.store(out_ptr + rows * n_cols + cols, 2 * v, mask=mask)


def count_programs(counter_ptr):
    c = tl.load(counter_ptr)
    tl.store(counter_ptr, c + 1)


def count_programs_atomic(counter_ptr):  # the fix the race asks for (not in the notebook): one atomic add each
    tl.atomic_add(counter_ptr, 1)


def add_in_float32(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, total.to(tl.bfloat16), mask=mask)


def diff_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n - 1
    left = tl.load(x_ptr + offs, mask=valid)
    right = tl.load(x_ptr + offs + 1, mask=valid)
    tl.store(out_ptr + offs, right - left, mask=valid)


def softmax_kernel(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)  # exercise 2's solution
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    v = tl.load(x_ptr + row * x_row_stride + cols, mask=inside, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, e / tl.sum(e, axis=0), mask=inside)


KERNELS = (add_kernel, copy_kernel, add_masked, row_max_kernel, scale_tiles, count_programs, count_programs_atomic,
           add_in_float32, diff_kernel, softmax_kernel)


def gelu_ish(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


def kernels() -> SimpleNamespace:
    """Every kernel above through triton.jit: a JITFunction, or an InterpretedFunction under TRITON_INTERPRET=1."""
    if triton is None:
        raise RuntimeError("triton could not be imported")
    return SimpleNamespace(**{fn.__name__: triton.jit(fn) for fn in KERNELS})


def notebook_inputs() -> dict[str, torch.Tensor]:
    """The notebook's random inputs, drawn as it draws them: torch.manual_seed(0), then in cell order (CPU)."""
    torch.manual_seed(0)
    x, y = torch.randn(32), torch.randn(32)  # section 1
    x30, y30 = torch.randn(30), torch.randn(30)  # section 3
    wide = -torch.rand(4, 8) - 1  # section 4
    x57 = torch.randn(5, 7)  # section 5
    x100 = torch.randn(100)  # section 7
    return {"x": x, "y": y, "x30": x30, "y30": y30, "wide": wide, "x57": x57, "x100": x100}


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


# ---- the pieces: each takes the context (device, dry, kernels K, inputs) and returns plain data and tensors ----

def piece_add(c: SimpleNamespace) -> dict[str, Any]:
    x, y = c.inp["x"].to(c.device), c.inp["y"].to(c.device)
    out = torch.empty(32, device=c.device)
    c.K.add_kernel[(4,)](x, y, out, BLOCK=8)
    res: dict[str, Any] = {"grid": [4], "BLOCK": 8, "x": x, "y": y, "out": out, "equal_x_plus_y": torch.equal(out, x + y)}
    try:
        c.K.add_kernel[(2,)](x[:12], y[:12], out[:12], BLOCK=6)
        res["block_6"] = "no error"
    except Exception as exc:
        res["block_6"] = _err(exc)
    res["block_6_says_power_of_2"] = "power of 2" in res["block_6"]
    return res


def piece_copy_past_end(c: SimpleNamespace) -> dict[str, Any]:
    x30 = torch.arange(30, dtype=torch.float32, device=c.device)
    out32 = torch.full((32,), -1.0, device=c.device)
    c.K.copy_kernel[(triton.cdiv(30, 8),)](x30, out32, BLOCK=8)
    return {"grid": [triton.cdiv(30, 8)], "BLOCK": 8, "out32": out32, "first_30_equal": torch.equal(out32[:30], x30),
            "past_the_end": out32[30:], "past_the_end_bits": out32[30:].view(torch.int32),
            "note": "x30 holds 120 bytes; the last program's loads read 8 bytes past it (inside the allocator's block)"}


def piece_add_masked(c: SimpleNamespace) -> dict[str, Any]:
    x30, y30 = c.inp["x30"].to(c.device), c.inp["y30"].to(c.device)
    out30 = torch.empty(30, device=c.device)
    c.K.add_masked[(triton.cdiv(30, 8),)](x30, y30, out30, 30, BLOCK=8)
    return {"grid": [triton.cdiv(30, 8)], "BLOCK": 8, "out30": out30, "equal_x_plus_y": torch.equal(out30, x30 + y30)}


def piece_row_max(c: SimpleNamespace) -> dict[str, Any]:
    wide = c.inp["wide"].to(c.device)
    xr = wide[:, :5]
    with_zero, with_ninf = torch.empty(4, device=c.device), torch.empty(4, device=c.device)
    c.K.row_max_kernel[(4,)](xr, with_zero, xr.stride(0), 5, BLOCK=8, OTHER=0.0)
    c.K.row_max_kernel[(4,)](xr, with_ninf, xr.stride(0), 5, BLOCK=8, OTHER=float("-inf"))
    return {"row_stride": xr.stride(0), "other_0": with_zero, "other_-inf": with_ninf, "true_max": xr.amax(dim=1),
            "other_0_all_zero": torch.equal(with_zero, torch.zeros(4, device=c.device)),
            "other_-inf_equal_true_max": torch.equal(with_ninf, xr.amax(dim=1))}


def piece_tiles(c: SimpleNamespace) -> dict[str, Any]:
    x57 = c.inp["x57"].to(c.device)
    out57 = torch.empty(5, 7, device=c.device)
    grid = (triton.cdiv(5, 2), triton.cdiv(7, 4))
    c.K.scale_tiles[grid](x57, out57, 5, 7, BR=2, BC=4)
    ones = torch.ones(10, 13, device=c.device)
    out_1013 = torch.empty_like(ones)
    grid2 = (triton.cdiv(10, 4), triton.cdiv(13, 8))
    c.K.scale_tiles[grid2](ones, out_1013, 10, 13, BR=4, BC=8)
    return {"5x7": {"grid": list(grid), "BR": 2, "BC": 4, "out": out57, "equal_2x": torch.equal(out57, 2 * x57)},
            "10x13 ones": {"grid": list(grid2), "BR": 4, "BC": 8, "equal_2x": torch.equal(out_1013, 2 * ones)}}


def piece_race(c: SimpleNamespace) -> dict[str, Any]:
    repeats = 20 if not c.dry else 3
    raced, atomic = [], []
    for _ in range(repeats):
        counter = torch.zeros(1, dtype=torch.int32, device=c.device)
        c.K.count_programs[(64,)](counter)
        raced.append(int(counter.item()))
        counter = torch.zeros(1, dtype=torch.int32, device=c.device)
        c.K.count_programs_atomic[(64,)](counter)
        atomic.append(int(counter.item()))
    return {"programs": 64, "repeats": repeats, "load_then_store": raced, "atomic_add": atomic,
            "distinct_load_then_store": sorted(set(raced))}


def piece_bf16(c: SimpleNamespace) -> dict[str, Any]:
    a16 = torch.tensor([1.5, 2.25, -3.0, 0.1], dtype=torch.bfloat16, device=c.device)
    b16 = torch.ones(4, dtype=torch.bfloat16, device=c.device)
    torch_sum = a16 + b16
    out: dict[str, Any] = {"a16": a16, "b16": b16, "torch": torch_sum, "torch_bits": torch_sum.view(torch.int16)}
    for name in ("add_masked", "add_in_float32"):
        out16 = torch.zeros(4, dtype=torch.bfloat16, device=c.device)
        getattr(c.K, name)[(1,)](a16, b16, out16, 4, BLOCK=4)
        out[name] = {"values": out16, "bits": out16.view(torch.int16), "equal_torch": torch.equal(out16, torch_sum),
                     "differs_at": [i for i in range(4) if out16[i].item() != torch_sum[i].item()]}
    return out


def piece_diff(c: SimpleNamespace) -> dict[str, Any]:
    cases = [(20, 8, torch.float32), (37, 16, torch.float32), (100, 32, torch.float32), (2, 4, torch.float32),
             (33, 32, torch.float32), (50, 16, torch.float64), (1000, 128, torch.float32)]
    out = {}
    for n, block, dtype in cases:
        g = torch.Generator().manual_seed(1700 + n * block)  # the check's inputs
        x = (torch.randn(n, generator=g, dtype=torch.float64) * 10).to(dtype).to(c.device)
        got = torch.full((n - 1,), -7.0, dtype=dtype, device=c.device)
        c.K.diff_kernel[(triton.cdiv(n - 1, block),)](x, got, n, BLOCK=block)
        out[f"n={n} BLOCK={block} {str(dtype).removeprefix('torch.')}"] = {
            "seed": 1700 + n * block, "out": got if n <= 100 else None, "equal_torch": torch.equal(got, x[1:] - x[:-1])}
    return out


def piece_softmax(c: SimpleNamespace) -> dict[str, Any]:
    cases = [dict(n_rows=3, n_cols=37), dict(n_rows=5, n_cols=100, scale=50.0, x_pad=28),
             dict(n_rows=4, n_cols=1), dict(n_rows=6, n_cols=64, block=128),
             dict(n_rows=2, n_cols=300, scale=5.0, shift=-1000.0, out_pad=20),
             dict(n_rows=3, n_cols=20, x_pad=3, out_pad=5, dtype=torch.float64)]
    out = {}
    for case in cases:
        n_rows, n_cols = case["n_rows"], case["n_cols"]
        scale, shift = case.get("scale", 1.0), case.get("shift", 0.0)
        x_pad, out_pad, dtype = case.get("x_pad", 0), case.get("out_pad", 0), case.get("dtype", torch.float32)
        block = case.get("block") or 1 << max(n_cols - 1, 1).bit_length()
        g = torch.Generator().manual_seed(17 + n_rows * n_cols)  # the check's inputs
        x = (torch.randn(n_rows, n_cols + x_pad, generator=g, dtype=dtype) * scale + shift).to(c.device)[:, :n_cols]
        got = torch.full((n_rows, n_cols + out_pad), -7.0, dtype=dtype, device=c.device)[:, :n_cols]
        c.K.softmax_kernel[(n_rows,)](x, got, x.stride(0), got.stride(0), n_cols, BLOCK=block)
        want = torch.softmax(x, dim=1)
        diff = (got.double() - want.double()).abs()
        out[f"{n_rows}x{n_cols} {str(dtype).removeprefix('torch.')} x_pad={x_pad} out_pad={out_pad} BLOCK={block}"] = {
            "case": {k: v for k, v in case.items() if k != "dtype"}, "seed": 17 + n_rows * n_cols,
            "out": got if got.numel() <= 600 else None, "max_abs_diff_torch": float(diff.max()),
            "max_rel_diff_torch": float((diff / want.double().abs().clamp_min(1e-300)).max()),
            "allclose_rel_1e-5": torch.allclose(got, want, rtol=1e-5, atol=0.0)}
    return out


def compiled_meta(ck: Any) -> dict[str, Any]:
    """What a launch returned (a CompiledKernel natively, nothing in the interpreter), attribute by attribute."""
    if ck is None:
        return {"compiled": None}
    with contextlib.suppress(Exception):
        ck._init_handles()  # loads the binary; n_regs and n_spills are read then
    out: dict[str, Any] = {"compiled": type(ck).__name__}
    for attr in ("n_regs", "n_spills", "n_max_threads"):
        with contextlib.suppress(Exception):
            out[attr] = getattr(ck, attr)
    md = getattr(ck, "metadata", None)
    for attr in ("name", "num_warps", "num_stages", "num_ctas", "shared", "target", "arch"):
        with contextlib.suppress(Exception):
            v = getattr(md, attr) if not isinstance(md, dict) else md[attr]
            out[attr] = v if isinstance(v, (bool, int, float, str)) else str(v)
    with contextlib.suppress(Exception):
        out["asm_keys"] = sorted(ck.asm.keys())
    return out


def bench(c: SimpleNamespace, fn: Callable[[], Any]) -> dict[str, Any]:
    """Milliseconds per call: do_bench's median and 20th/80th percentiles on the GPU; a host clock on the dry run."""
    if c.dry:
        fn()
        t0 = time.perf_counter()
        for _ in range(2):
            fn()
        return {"how": "host clock, interpreter (means nothing for a GPU)", "ms": (time.perf_counter() - t0) * 500}
    from triton.testing import do_bench

    try:
        med, lo, hi = do_bench(fn, warmup=10, rep=50, quantiles=[0.5, 0.2, 0.8])
        return {"how": "triton.testing.do_bench(warmup=10, rep=50)", "ms": med, "p20_ms": lo, "p80_ms": hi}
    except Exception as exc:
        fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(20):
            fn()
        end.record()
        end.synchronize()
        return {"how": "CUDA events, 20 calls", "ms": start.elapsed_time(end) / 20, "do_bench_error": _err(exc)}


def piece_num_warps(c: SimpleNamespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    n = 1 << 24 if not c.dry else 1 << 12
    x, y = torch.randn(n, device=c.device), torch.randn(n, device=c.device)
    res = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    add_runs = {}
    for w in (1, 2, 4, 8):
        ck = c.K.add_masked[grid](x, y, res, n, BLOCK=1024, num_warps=w)
        ok = torch.equal(res, x + y)
        timing = bench(c, lambda w=w: c.K.add_masked[grid](x, y, res, n, BLOCK=1024, num_warps=w))
        gbs = 12 * n / (timing["ms"] * 1e6) if timing.get("ms") else None
        add_runs[str(w)] = {"meta": compiled_meta(ck), "timing": timing, "GB/s": gbs, "correct": ok}
        if w == 4 and ck is not None:
            with contextlib.suppress(Exception):
                out["add_masked_asm_num_warps_4"] = {k: str(ck.asm[k])[:60_000] for k in ("ttir", "ttgir", "ptx")
                                                     if k in ck.asm}
    out["add_masked"] = {"n": n, "BLOCK": 1024, "dtype": "float32", "bytes_moved": 12 * n, "runs": add_runs}

    rows, cols = (8192, 1024) if not c.dry else (8, 64)
    xs = torch.randn(rows, cols, device=c.device)
    ys = torch.empty_like(xs)
    soft_runs = {}
    for w in (1, 2, 4, 8):
        ck = c.K.softmax_kernel[(rows,)](xs, ys, xs.stride(0), ys.stride(0), cols, BLOCK=cols, num_warps=w)
        err = float((ys - torch.softmax(xs, dim=1)).abs().max())
        timing = bench(c, lambda w=w: c.K.softmax_kernel[(rows,)](xs, ys, xs.stride(0), ys.stride(0), cols, BLOCK=cols,
                                                                  num_warps=w))
        gbs = 8 * rows * cols / (timing["ms"] * 1e6) if timing.get("ms") else None
        soft_runs[str(w)] = {"meta": compiled_meta(ck), "timing": timing, "GB/s": gbs, "max_abs_diff_torch": err}
    out["softmax_kernel"] = {"rows": rows, "cols": cols, "BLOCK": cols, "dtype": "float32",
                             "bytes_moved": 8 * rows * cols, "runs": soft_runs}
    if not c.dry:
        props = torch.cuda.get_device_properties(0)
        out["device"] = {"name": props.name, "multiprocessors": props.multi_processor_count}
    return out


class TargetOnly:
    """The dry run's stand-in for Triton's driver (notebook 17, section 7): Inductor reads the target for its
    cache key; nothing runs on it."""

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)


@contextlib.contextmanager
def inductor_triton(dry: bool) -> Iterator[dict[str, Any]]:
    """Inductor writing Triton: as it is on CUDA; on the dry run, for CPU tensors with the stand-in driver."""
    if not dry:
        yield {}
        return
    from triton.runtime.driver import driver

    before = driver._active
    driver.set_active(TargetOnly())
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Could not find an active CPU backend")
            yield {"cpu_backend": "triton"}
    finally:
        driver._active = before


_KERNEL_IN_WRAPPER = re.compile(r"async_compile\.triton\(\s*'(?P<name>\w+)',\s*'''(?P<src>.*?)'''", re.S)


def piece_inductor(c: SimpleNamespace) -> dict[str, Any]:
    import torch._dynamo
    from torch._inductor.utils import run_and_get_code

    x100 = c.inp["x100"].to(c.device)
    torch._dynamo.reset()
    with inductor_triton(c.dry) as options:
        compiled = torch.compile(gelu_ish, options=options or None)
        t0 = time.perf_counter()
        got, codes = run_and_get_code(compiled, x100)
        seconds = time.perf_counter() - t0
    kernels_found = [{"name": m["name"], "source": m["src"]} for code in codes for m in _KERNEL_IN_WRAPPER.finditer(code)]
    c.inductor_kernels = kernels_found
    want = gelu_ish(x100)
    return {"input": "x100 (notebook 17's, torch.manual_seed(0) sequence)", "x100": x100, "out": got,
            "max_abs_diff_eager": float((got - want).abs().max()), "allclose_eager": torch.allclose(got, want),
            "compile_and_run_seconds": seconds, "codes": codes, "triton_jit_per_code": [k.count("@triton.jit") for k in codes],
            "kernels": kernels_found, "options": options, "device": str(c.device)}


def piece_inductor_xblock(c: SimpleNamespace) -> dict[str, Any]:
    """Notebook 17's cell 36: Inductor's kernel launched by hand with XBLOCK = 32."""
    from torch._inductor.codecache import PyCodeCache

    found = getattr(c, "inductor_kernels", None)
    if not found:
        raise RuntimeError("no Inductor kernel from the previous piece")
    name, source = found[0]["name"], found[0]["source"]
    with inductor_triton(c.dry):
        module = PyCodeCache.load(source)
    fn = getattr(module, name).fn
    x100 = c.inp["x100"].to(c.device)
    out100 = torch.empty(100, device=c.device)
    fn[(triton.cdiv(100, 32),)](x100, out100, 100, XBLOCK=32)
    return {"kernel": name, "kind": type(fn).__name__, "grid": [triton.cdiv(100, 32)], "XBLOCK": 32, "out": out100,
            "allclose_gelu_ish": torch.allclose(out100, gelu_ish(x100)),
            "max_abs_diff_eager": float((out100 - gelu_ish(x100)).abs().max())}


def piece_compile_trace(c: SimpleNamespace) -> dict[str, Any]:
    """The lens the notebook uses, on the same compile: kernels with the FX nodes each one fused."""
    from torchlens_widgets.lenses.compile_trace import compile_trace

    x100 = c.inp["x100"].to(c.device)
    with inductor_triton(c.dry) as options:
        made = compile_trace(gelu_ish, x100, **({"options": options} if options else {}))
    return {"trace": made.to_dict(), "summary": made.summary(), "kernel_count": made.kernel_count,
            "fused_nodes": [list(k.fused_nodes) for k in made.kernels]}


PIECES: tuple[tuple[str, Callable[[SimpleNamespace], dict[str, Any]], str], ...] = (
    ("add_kernel (section 1) and BLOCK=6", piece_add, "kernels"),
    ("copy_kernel past the end (section 2)", piece_copy_past_end, "kernels"),
    ("add_masked (section 3)", piece_add_masked, "kernels"),
    ("row_max_kernel, other=0 and -inf (section 4)", piece_row_max, "kernels"),
    ("scale_tiles, 2-D grid (section 5, exercise 3)", piece_tiles, "kernels"),
    ("count_programs race, 64 programs (section 6)", piece_race, "kernels"),
    ("bfloat16: 0.1 + 1 (section 6)", piece_bf16, "kernels"),
    ("diff_kernel (exercise 1)", piece_diff, "kernels"),
    ("softmax_kernel (exercise 2)", piece_softmax, "kernels"),
    ("num_warps 1/2/4/8: do_bench and compiled metadata", piece_num_warps, "num_warps"),
    ("Inductor's Triton for gelu_ish (run_and_get_code)", piece_inductor, "inductor"),
    ("Inductor's kernel at XBLOCK=32 (cell 36)", piece_inductor_xblock, "inductor"),
    ("compile_trace lens on gelu_ish", piece_compile_trace, "inductor"),
)


def _cpu(data: Any) -> Any:
    return torch.utils._pytree.tree_map(lambda v: v.detach().cpu().clone() if isinstance(v, torch.Tensor) else v, data)


def child_main(path: str, dry: bool) -> None:
    """Run every piece in this process (natively, or interpreted when TRITON_INTERPRET=1 was set before triton was
    imported) and save {piece: {ok, data | error, seconds}} to `path` after each one."""
    results: dict[str, Any] = {"_env": {"TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET"),
                                        "triton": getattr(triton, "__version__", None), "torch": torch.__version__}}
    c = SimpleNamespace(device=torch.device("cpu" if dry else "cuda"), dry=dry, inp=notebook_inputs())
    try:
        c.K = kernels()
        results["_env"]["kernel_kind"] = type(c.K.add_kernel).__name__
    except Exception as exc:
        c.K = None
        results["_env"]["kernels_error"] = _err(exc)
    for name, fn, _ in PIECES:
        t0 = time.perf_counter()
        try:
            if c.K is None:
                raise RuntimeError(f"no kernels: {results['_env']['kernels_error']}")
            entry: dict[str, Any] = {"ok": True, "data": _cpu(fn(c))}
            if not dry:
                torch.cuda.synchronize()
        except Exception as exc:
            entry = {"ok": False, "error": _err(exc), "traceback": traceback.format_exc()[-4000:]}
        entry["seconds"] = round(time.perf_counter() - t0, 3)
        results[name] = entry
        try:
            torch.save(results, path + ".tmp")
        except Exception as exc:  # data that cannot be saved: keep the piece's error instead
            results[name] = {"ok": False, "error": f"saving its result: {_err(exc)}", "seconds": entry["seconds"]}
            torch.save(results, path + ".tmp")
        os.replace(path + ".tmp", path)  # a crash in a later piece keeps this file whole
        print(f"piece done: {name} ({'ok' if entry['ok'] else 'FAILED'}, {entry['seconds']} s)", flush=True)


def _brief(data: dict[str, Any]) -> dict[str, Any]:
    """The few facts of a piece worth a line in the step log."""
    keep = {}
    for k, v in data.items():
        if isinstance(v, (bool, int, float, str)) and len(str(v)) <= 200 and k not in ("note",):
            keep[k] = v
        elif isinstance(v, list) and len(v) <= 20 and all(isinstance(i, (int, float)) for i in v):
            keep[k] = v
    return keep


def record(t: Topic) -> None:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tlw-triton-") as tmp:
        path = os.path.join(tmp, "pieces.pt")
        code = f"from gpu_scenarios import triton as scenario\nscenario.child_main({path!r}, {t.dry!r})\n"
        env = {"TRITON_INTERPRET": "1" if t.dry else "0", "TORCHINDUCTOR_COMPILE_THREADS": "1"}
        with t.step("child process: every piece, " + ("in the interpreter (dry run)" if t.dry else "compiled")) as e:
            if t.dry:
                e["note"] = ("dry run: the kernels run in Triton's interpreter (TRITON_INTERPRET=1 before triton is "
                             "imported) and Inductor writes Triton for CPU tensors with a stand-in driver, as "
                             "notebook 17 does; timings mean nothing")
            run = t.run_child(code, env=env, timeout=600 if t.dry else 150)
            e.update(returncode=run.get("returncode"), stdout_tail=run.get("stdout", "")[-1500:],
                     stderr_tail=run.get("stderr", "")[-1500:])
            if os.path.exists(path):
                results = torch.load(path, weights_only=False)
            e["child_env"] = results.get("_env")
            if run.get("returncode") != 0:
                raise RuntimeError(f"the child process ended with {run.get('returncode')}: "
                                   f"{run.get('stderr', '')[-800:]}")
    files: dict[str, dict[str, Any]] = {}
    for name, _, group in PIECES:
        with t.step(name) as e:
            got = results.get(name)
            if got is None:
                raise RuntimeError("the child process ended before this piece ran (see the child's step)")
            e["child_seconds"] = got["seconds"]
            if not got["ok"]:
                e["child_traceback"] = got.get("traceback")
                raise RuntimeError(got["error"])
            data = got["data"]
            e.update({k: v for k, v in _brief(data).items() if k not in e})
            files.setdefault(group, {"_env": results.get("_env"), "dry_run": t.dry})[name] = data
            t.json(group, files[group])

