"""Notebook 10 on a GPU: the axpy operator as a CUDA kernel, built with load_inline; its contract matrix on CUDA
tensors (a naive kernel, the fixed one as a direct call and as a registered operator, then with its fake and
autograd registered, and opcheck); and a device-side assert that surfaces late without CUDA_LAUNCH_BLOCKING and
at its own line with it, in child processes (a device-side assert leaves the CUDA context unusable).

The dry run (CPU) compiles nothing: torch functions of the same behaviour stand in for the compiled functions,
and the operator is defined in Python for the CPU key, so the same contract, registration and child-process code
runs. Every file holds the sources, seeds and inputs, so a CPU notebook can replay its half and compare.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import torch
from record_gpu import Topic

NS = "tlw_cuda_op"  # the operator namespace the CUDA source registers (TORCH_LIBRARY)
EXT_NAME = "tlw_cuda_axpy"
FUNCTIONS = ["axpy", "axpy_naive", "gather_checked"]
SCHEMA = "axpy(Tensor x, Tensor y, float a) -> Tensor"

CPP_SOURCE = r"""
at::Tensor axpy(const at::Tensor& x, const at::Tensor& y, double a);
at::Tensor axpy_naive(const at::Tensor& x, const at::Tensor& y, double a);
at::Tensor gather_checked(const at::Tensor& x, const at::Tensor& idx);
"""

CUDA_SOURCE = r"""
#include <algorithm>

#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/macros/Macros.h>
#include <torch/library.h>

// out = a * x + y, computed in the op-math type (float for half and bfloat16), a grid-stride loop.
template <typename scalar_t>
__global__ void axpy_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ y,
                            scalar_t* __restrict__ out, at::opmath_type<scalar_t> a, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    out[i] = static_cast<scalar_t>(a * static_cast<acc_t>(x[i]) + static_cast<acc_t>(y[i]));
  }
}

// The first kernel one writes: float32 pointers straight into the inputs, one thread per element.
__global__ void axpy_naive_kernel(const float* x, const float* y, float* out, float a, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

// out[i] = x[idx[i]], with a device-side assert on the index (the check torch's own indexing kernels make).
__global__ void gather_kernel(const float* __restrict__ x, const int64_t* __restrict__ idx,
                              float* __restrict__ out, int64_t n_x, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t j = idx[i];
  CUDA_KERNEL_ASSERT(j >= 0 && j < n_x);
  out[i] = (j >= 0 && j < n_x) ? x[j] : 0.0f;  // never reads out of bounds, even were the assert compiled out
}

at::Tensor axpy(const at::Tensor& x, const at::Tensor& y, double a) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda(), "axpy: x and y must be CUDA tensors");
  TORCH_CHECK(x.device() == y.device(), "axpy: x and y must be on the same device");
  TORCH_CHECK(x.sizes() == y.sizes(), "axpy: x and y must have the same shape");
  TORCH_CHECK(x.scalar_type() == y.scalar_type(), "axpy: x and y must have the same dtype");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous(), yc = y.contiguous();
  at::Tensor out = at::empty_like(xc);
  const int64_t n = xc.numel();
  if (n == 0) return out;  // a launch of 0 blocks is an error
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "axpy", [&] {
    axpy_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
        xc.data_ptr<scalar_t>(), yc.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
        static_cast<at::opmath_type<scalar_t>>(a), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor axpy_naive(const at::Tensor& x, const at::Tensor& y, double a) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda(), "axpy_naive: x and y must be CUDA tensors");
  at::Tensor out = at::empty_like(x);
  const float* px = x.data_ptr<float>();
  const float* py = y.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const int64_t n = x.numel();
  const int64_t blocks = (n + 255) / 256;
  axpy_naive_kernel<<<blocks, 256>>>(px, py, po, static_cast<float>(a), n);  // the legacy default stream
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor gather_checked(const at::Tensor& x, const at::Tensor& idx) {
  TORCH_CHECK(x.is_cuda() && idx.is_cuda(), "gather_checked: x and idx must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == at::kFloat && idx.scalar_type() == at::kLong,
              "gather_checked: float32 x and int64 idx only");
  TORCH_CHECK(x.dim() == 1 && idx.dim() == 1, "gather_checked: 1-D x and idx only");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous(), ic = idx.contiguous();
  at::Tensor out = at::empty(ic.sizes(), xc.options());
  const int64_t n = ic.numel();
  if (n == 0) return out;
  const int64_t blocks = (n + 255) / 256;
  gather_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), ic.data_ptr<int64_t>(), out.data_ptr<float>(), xc.numel(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

TORCH_LIBRARY(tlw_cuda_op, m) {
  m.def("axpy(Tensor x, Tensor y, float a) -> Tensor");
}
TORCH_LIBRARY_IMPL(tlw_cuda_op, CUDA, m) {
  m.impl("axpy", &axpy);
}
"""

# Run in a fresh process: a device-side assert leaves that process's CUDA context unusable. `CFG` is prepended.
FAULT_CHILD = r'''
import json
import os
import time
import traceback

import torch

cfg = json.loads(CFG)
dev = cfg["device"]
if cfg["kind"] == "extension" and cfg["so"]:
    import importlib.util

    spec = importlib.util.spec_from_file_location(cfg["name"], cfg["so"])
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)  # the library load_inline built: no rebuild
    faulty = ext.gather_checked
else:
    def faulty(x, idx):
        return x[idx]  # torch's own indexing (and the extension's stand-in on the dry run)
report = {"kind": cfg["kind"], "device": dev, "CUDA_LAUNCH_BLOCKING": os.environ.get("CUDA_LAUNCH_BLOCKING"),
          "extension_loaded": faulty.__name__ == "gather_checked", "raised": False}
x = torch.arange(4.0, device=dev)
bad = torch.tensor([7], device=dev)
if dev == "cuda":
    torch.cuda.synchronize()
reached = "nothing"
t0 = time.perf_counter()
try:
    if dev == "cuda":
        torch.cuda._sleep(cfg["sleep_cycles"])  # a busy stream: the faulty kernel runs late
    y = faulty(x, bad)  # index 7 of 4: fails inside the kernel (a device-side assert)
    reached = "the faulty line"
    z = (y * 2).sum()
    reached = "two more launches"
    value = z.item()
    reached = "the sync"
except Exception as err:
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == "<string>"]
    report.update(raised=True, reached=reached, line=frames[0].lineno if frames else None,
                  innermost_line=frames[-1].lineno if frames else None,
                  error_type=type(err).__name__, error=str(err)[:3000])
report["reached"] = reached
report["seconds"] = round(time.perf_counter() - t0, 4)
if dev == "cuda" and report["raised"]:
    try:
        torch.ones(1, device=dev).add(1).item()
        report["next_op"] = "ran"
    except Exception as err:
        report["next_op"] = f"{type(err).__name__}: {str(err).strip().splitlines()[0]}"
print("RESULT " + json.dumps(report))
'''


@contextlib.contextmanager
def environ(**values: str) -> Iterator[None]:
    """Set environment variables for a block, then put back what was there."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _ninja_log(build_dir: str) -> list[dict[str, Any]]:
    """ninja's own record of each build step: what it made and how long it took (ms)."""
    path = os.path.join(build_dir, ".ninja_log")
    steps = []
    with contextlib.suppress(OSError):
        for line in open(path).read().splitlines():
            parts = line.split("\t")
            if len(parts) >= 4 and not line.startswith("#"):
                steps.append({"output": parts[3], "ms": int(parts[1]) - int(parts[0])})
    return steps


def _nvcc_version() -> str | None:
    from torch.utils.cpp_extension import CUDA_HOME

    nvcc = os.path.join(CUDA_HOME, "bin", "nvcc") if CUDA_HOME else "nvcc"
    try:
        return subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()[-300:]
    except (OSError, subprocess.SubprocessError):
        return None


def _expect(x: torch.Tensor, y: torch.Tensor, device: torch.device, what: str) -> None:
    if x.device != device or y.device != device:
        raise RuntimeError(f"{what}: x and y must be {device.type} tensors (stand-in for 'must be CUDA tensors')")


def standins(device: torch.device) -> SimpleNamespace:
    """The dry run's compiled functions: torch code that behaves as the CUDA functions do, on CPU tensors."""

    def axpy(x: torch.Tensor, y: torch.Tensor, a: float) -> torch.Tensor:
        _expect(x, y, device, "axpy")
        if x.shape != y.shape or x.dtype != y.dtype:
            raise RuntimeError("axpy: x and y must have the same shape and dtype")
        if x.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            raise RuntimeError(f'"axpy" not implemented for {x.dtype}')
        xc, yc = x.contiguous(), y.contiguous()
        acc = torch.float32 if xc.dtype in (torch.float16, torch.bfloat16) else xc.dtype
        return (a * xc.to(acc) + yc.to(acc)).to(xc.dtype)

    def axpy_naive(x: torch.Tensor, y: torch.Tensor, a: float) -> torch.Tensor:
        _expect(x, y, device, "axpy_naive")
        if x.dtype != torch.float32 or y.dtype != torch.float32:
            raise RuntimeError(f"expected scalar type Float but found {x.dtype if x.dtype != torch.float32 else y.dtype}")
        n = x.numel()
        if n == 0:
            raise RuntimeError("CUDA error: invalid configuration argument (stand-in: a launch of 0 blocks)")
        out = torch.empty_like(x)

        def flat(t: torch.Tensor) -> torch.Tensor:  # element i of the kernel is memory position i from data_ptr
            return torch.as_strided(t, (n,), (1,), t.storage_offset())

        flat(out).copy_(a * flat(x) + flat(y))
        return out

    def gather_checked(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return x[idx]

    return SimpleNamespace(axpy=axpy, axpy_naive=axpy_naive, gather_checked=gather_checked)


# ATen/cuda/CUDAContext.h includes the cuBLAS, cuSPARSE and cuSOLVER headers. A CUDA toolkit made of pip wheels
# may lack them in CUDA_HOME/include while torch's own nvidia wheels hold them: then only the missing ones are
# linked into a private folder (nothing of the toolkit is shadowed). With none to be found, the light variant
# includes c10/cuda/CUDAStream.h and launches on c10::cuda::getCurrentCUDAStream(), the same stream.
CONTEXT_HEADERS = ("cusparse.h", "cublas_v2.h", "cublasLt.h", "cusolverDn.h", "cusolver_common.h")


def light_source() -> str:
    return (CUDA_SOURCE.replace("#include <ATen/cuda/CUDAContext.h>", "#include <c10/cuda/CUDAStream.h>")
            .replace("at::cuda::getCurrentCUDAStream()", "c10::cuda::getCurrentCUDAStream()"))


def _wheel_dirs(sub: str) -> list[str]:
    """`nvidia/*/<sub>` folders of the nvidia wheels beside torch (cu13 wheels share nvidia/cu13)."""
    import glob
    import site
    import sys

    roots = dict.fromkeys([*site.getsitepackages(), *sys.path, os.path.dirname(os.path.dirname(torch.__file__))])
    found = []
    for root in roots:
        if root and os.path.isdir(os.path.join(root, "nvidia")):
            found += sorted(glob.glob(os.path.join(root, "nvidia", "*", sub)))
    return [d for d in dict.fromkeys(found) if os.path.isdir(d)]


def toolkit_shims(cuda_home: str, work: str) -> dict[str, Any]:
    """What the toolkit lacks for the full variant, and private folders of links that supply it from the wheels."""
    inc = os.path.join(cuda_home, "include")
    missing = [h for h in CONTEXT_HEADERS if not os.path.exists(os.path.join(inc, h))]
    out: dict[str, Any] = {"cuda_home": cuda_home, "missing_headers": missing, "include": [], "ldflags": []}
    if missing:
        shim = os.path.join(work, "include-shim")
        os.makedirs(shim, exist_ok=True)
        for d in _wheel_dirs("include"):
            for entry in os.listdir(d):  # the libraries' own headers only: never CCCL or the runtime's
                here, there = os.path.join(shim, entry), os.path.join(d, entry)
                if entry.startswith(("cusparse", "cublas", "cusolver")) and os.path.isfile(there) \
                        and not os.path.exists(os.path.join(inc, entry)) and not os.path.lexists(here):
                    os.symlink(there, here)
        out["still_missing"] = [h for h in missing if not os.path.exists(os.path.join(shim, h))]
        out["include"] = [shim]
    if not any(os.path.exists(os.path.join(cuda_home, lib, "libcudart.so")) for lib in ("lib64", "lib")):
        import glob

        shim = os.path.join(work, "lib-shim")
        os.makedirs(shim, exist_ok=True)
        for d in _wheel_dirs("lib"):
            libs = sorted(glob.glob(os.path.join(d, "libcudart.so*")))
            if libs and not os.path.lexists(os.path.join(shim, "libcudart.so")):
                os.symlink(libs[0], os.path.join(shim, "libcudart.so"))
        out["cudart_from"] = os.path.realpath(os.path.join(shim, "libcudart.so")) \
            if os.path.lexists(os.path.join(shim, "libcudart.so")) else None
        out["ldflags"] = [f"-L{shim}"]
    return out


def build(t: Topic, e: dict[str, Any]) -> SimpleNamespace:
    """Compile the extension (GPU) or make the stand-ins (dry run); either way the operator NS::axpy exists after."""
    info: dict[str, Any] = {"name": EXT_NAME, "cpp_source": CPP_SOURCE, "cuda_source": CUDA_SOURCE,
                            "functions": FUNCTIONS, "schema": f"{NS}::{SCHEMA}", "torch": torch.__version__}
    if t.dry:
        mod = standins(t.device)
        lib = torch.library.Library(NS, "DEF")  # what TORCH_LIBRARY does in the CUDA source, here for the CPU key
        lib.define(SCHEMA)
        lib.impl("axpy", mod.axpy, "CPU")
        e["note"] = ("dry run: nothing compiled (no nvcc); torch functions of the same behaviour stand in for "
                     "axpy, axpy_naive and gather_checked, and the operator is defined in Python for the CPU key")
        info.update(dry_run=True, note=e["note"])
        t.json("build", info)
        return SimpleNamespace(mod=mod, lib=lib, so=None, build_dir=None, name=EXT_NAME)

    from torch.utils.cpp_extension import CUDA_HOME, load_inline

    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}.{minor}"
    work = tempfile.mkdtemp(prefix="tlw-cuda-op-")
    jobs = str(min(16, os.cpu_count() or 1))
    shims = toolkit_shims(CUDA_HOME or "/usr/local/cuda", work)
    info.update(arch_list=arch, max_jobs=jobs, nvcc=_nvcc_version(), toolkit=shims, attempts=[])
    variants = [("full", EXT_NAME, CUDA_SOURCE), ("light", EXT_NAME + "_light", light_source())]
    if shims.get("still_missing"):
        variants = variants[1:]  # the full variant cannot find its headers: do not spend a build on it
    mod = so = build_dir = None
    for variant, name, source in variants:
        build_dir = os.path.join(work, variant)
        os.makedirs(build_dir, exist_ok=True)
        attempt: dict[str, Any] = {"variant": variant, "name": name, "build_directory": build_dir}
        info["attempts"].append(attempt)
        t0 = time.perf_counter()
        try:
            with environ(TORCH_CUDA_ARCH_LIST=arch, MAX_JOBS=jobs):
                mod = load_inline(name=name, cpp_sources=CPP_SOURCE, cuda_sources=source, functions=FUNCTIONS,
                                  build_directory=build_dir, verbose=False, extra_include_paths=shims["include"],
                                  extra_ldflags=shims["ldflags"])
            attempt["ok"] = True
        except Exception as exc:
            attempt.update(ok=False, error=str(exc)[-20_000:])
        attempt["seconds"] = round(time.perf_counter() - t0, 2)
        attempt["ninja_steps"] = _ninja_log(build_dir)
        with contextlib.suppress(OSError):
            attempt["build_ninja"] = open(os.path.join(build_dir, "build.ninja")).read()[-20_000:]
        if mod is not None:
            info.update(variant=variant, cuda_source_built=source, seconds=attempt["seconds"])
            so = os.path.join(build_dir, f"{name}.so")
            break
    info["ok"] = mod is not None
    t.json("build", info)
    e.update(arch=arch, attempts=[{k: a.get(k) for k in ("variant", "ok", "seconds")} for a in info["attempts"]],
             missing_headers=shims["missing_headers"])
    if mod is None:
        raise RuntimeError("the extension did not build: " + info["attempts"][-1].get("error", "")[-1500:])
    if info["variant"] != "full":
        e["note"] = ("built the light variant (c10/cuda/CUDAStream.h, c10::cuda::getCurrentCUDAStream()): "
                     "ATen/cuda/CUDAContext.h's cuBLAS/cuSPARSE/cuSOLVER headers were not usable here")
    return SimpleNamespace(mod=mod, lib=None, so=so if so and os.path.exists(so) else None, build_dir=build_dir,
                           name=name)


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return 2.0 * a + b


def example() -> tuple[torch.Tensor, torch.Tensor]:
    """Notebook 10's example inputs: torch.manual_seed(0), then two 3 x 4 randn (made on the CPU)."""
    torch.manual_seed(0)
    return torch.randn(3, 4), torch.randn(3, 4)


def results(t: Topic, built: SimpleNamespace) -> dict[str, Any]:
    """The kernel against eager torch per dtype (a = 2.0 and 1.5: one rounding vs eager's two), the example's
    outputs, event timings, and the stream test (a busy side stream: the current-stream kernel waits, the
    legacy-default-stream one does not)."""
    mod, dev = built.mod, t.device
    out: dict[str, Any] = {}
    x, y = example()
    xd, yd = x.to(dev), y.to(dev)
    out["example"] = {"seed": 0, "x": x, "y": y, "reference": reference(x, y),
                      "axpy": mod.axpy(xd, yd, 2.0).cpu(), "axpy_naive": mod.axpy_naive(xd, yd, 2.0).cpu()}
    n = 1 << 20 if not t.dry else 4096
    gen = torch.Generator().manual_seed(10)
    base_x, base_y = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    per_dtype = {}
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        xs, ys = base_x.to(dev, dtype), base_y.to(dev, dtype)
        acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
        for a in (2.0, 1.5):
            got = mod.axpy(xs, ys, a)
            eager = a * xs + ys
            once = (a * xs.to(acc) + ys.to(acc)).to(dtype)
            per_dtype[f"{str(dtype).removeprefix('torch.')} a={a}"] = {
                "n": n, "differ_from_eager": int((got != eager).sum()),
                "differ_from_rounded_once": int((got != once).sum()),
                "max_abs_diff_from_eager": float((got.double() - eager.double()).abs().max()),
                "first_values": got[:8].float().cpu(), "first_bits": got[:8].cpu().view(torch.int16).tolist()
                if dtype in (torch.float16, torch.bfloat16) else None}
    out["inputs"] = {"n": n, "generator_seed": 10, "x_y": "torch.randn(n, generator=g) twice, then .to(device, dtype)"}
    out["per_dtype"] = per_dtype

    nt = 1 << 24 if not t.dry else 1 << 12
    xt, yt = torch.randn(nt, device=dev), torch.randn(nt, device=dev)
    timings = {}
    for name, fn in (("axpy kernel", lambda: mod.axpy(xt, yt, 2.0)), ("2.0 * x + y (eager, two kernels)",
                                                                      lambda: 2.0 * xt + yt),
                     ("torch.add(y, x, alpha=2.0)", lambda: torch.add(yt, xt, alpha=2.0))):
        for _ in range(3):
            fn()
        start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        t.cuda.synchronize()
        reps = 20
        t0 = time.perf_counter()
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        t.cuda.synchronize()
        ms = start.elapsed_time(end) / reps if not t.dry else (time.perf_counter() - t0) * 1000 / reps
        timings[name] = {"ms": ms, "GB/s": 3 * 4 * nt / (ms * 1e6) if ms else None}
    out["timing"] = {"n": nt, "dtype": "float32", "reps": 20, "how": "CUDA events" if not t.dry else "host clock",
                     "GB/s counts": "12 bytes per element: x and y read once, out written once", "results": timings}

    m = 1 << 20 if not t.dry else 4096
    xs, ys = torch.ones(m, device=dev), torch.zeros(m, device=dev)
    order = {}
    for name, fn in (("axpy (current stream)", mod.axpy), ("axpy_naive (legacy default stream)", mod.axpy_naive)):
        xs.fill_(1.0)
        t.cuda.synchronize()
        side = t.cuda.Stream()
        with t.cuda.stream(side):
            t.cuda.sleep(200_000_000)  # the side stream is busy for about 0.1 s
            xs.fill_(3.0)  # queued behind the sleep
            got = fn(xs, ys, 2.0)  # 2 * 3 + 0 = 6 if it runs after the fill on the side stream
        t.cuda.synchronize()
        values = torch.unique(got).tolist()
        order[name] = {"values": values, "expected": [6.0], "waited_for_the_fill": values == [6.0]}
    out["stream_order"] = order
    return out


def device_cases(ex: tuple[torch.Tensor, ...]) -> list[Any]:
    """contract_cases for `ex`, with the "larger" case made on the examples' device (the lens makes it on the CPU)."""
    from torchlens_widgets.lenses.contract import contract_cases

    dev = ex[0].device
    cases = []
    for case in contract_cases(ex):
        if case.name.startswith("larger") and dev.type != "cpu":
            case = dataclasses.replace(case, make=lambda make=case.make: tuple(a.to(dev) for a in make()))
        cases.append(case)
    return cases


def contract(t: Topic, fn: Callable[..., Any]) -> dict[str, Any]:
    from torchlens_widgets.lenses.contract import contract_matrix

    x, y = example()
    ex = (x.to(t.device), y.to(t.device))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the autograd fallback's warning: the grid shows what it means
        report = contract_matrix(fn, reference, ex, cases=device_cases(ex))
    return {"report": report.to_dict(), "summary": report.summary(), "failures": [r.name for r in report.failures()],
            "example_device": str(ex[0].device)}


def register_fake_and_autograd() -> None:
    """Notebook 10 section 3, for this operator."""

    @torch.library.register_fake(f"{NS}::axpy")
    def _axpy_fake(x: torch.Tensor, y: torch.Tensor, a: float) -> torch.Tensor:
        torch._check(x.shape == y.shape, lambda: "axpy: x and y must have the same shape")
        return torch.empty_like(x)

    def _setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.a = inputs[2]

    def _backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        return grad * ctx.a, grad, None

    torch.library.register_autograd(f"{NS}::axpy", _backward, setup_context=_setup)


def fault_runs(t: Topic, built: SimpleNamespace | None) -> dict[str, dict[str, Any]]:
    """Four child processes at once: torch indexing and the extension's gather, each without and with
    CUDA_LAUNCH_BLOCKING=1. Each reports the line the error surfaced at, how far it got, and the error."""
    runs = {}
    has_ext = t.dry or (built is not None and built.so is not None)  # the dry run's extension is its stand-in
    for kind in ("torch indexing", "extension") if has_ext else ("torch indexing",):
        for blocking in ("0", "1"):
            cfg = {"kind": kind, "device": t.device.type, "so": built.so if built is not None else None,
                   "name": built.name if built is not None else EXT_NAME, "sleep_cycles": 500_000_000}
            code = f"CFG = {json.dumps(cfg)!r}\n" + FAULT_CHILD
            runs[f"{kind}, CUDA_LAUNCH_BLOCKING={blocking}"] = (code, {"CUDA_LAUNCH_BLOCKING": blocking})
    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        futures = {name: pool.submit(t.run_child, code, env=env, timeout=150) for name, (code, env) in runs.items()}
        done = {name: f.result() for name, f in futures.items()}
    out = {}
    for name, res in done.items():
        code = runs[name][0]
        lines = [ln for ln in res.get("stdout", "").splitlines() if ln.startswith("RESULT ")]
        report = json.loads(lines[-1][len("RESULT "):]) if lines else None
        lines_of = code.splitlines()
        line_text = lines_of[report["line"] - 1].strip() if report and report.get("line") else None
        out[name] = {"returncode": res.get("returncode"), "report": report, "line_text": line_text,
                     "code": code, "stdout": res.get("stdout", "")[-3000:], "stderr": res.get("stderr", "")[-6000:]}
    return out


def record(t: Topic) -> None:
    built: SimpleNamespace | None = None
    with t.step("build the CUDA extension (load_inline)") as e:
        built = build(t, e)

    def need() -> SimpleNamespace:
        if built is None:
            raise RuntimeError("no extension: the build step failed")
        return built

    with t.step("the kernel against eager torch, timings, stream order") as e:
        res = results(t, need())
        e["stream_order"] = res["stream_order"]
        t.json("results", res)

    grids: dict[str, Any] = {"seed": 0, "example": dict(zip("xy", example())), "reference": "2.0 * a + b"}

    def grid_step(name: str, fn: Callable[..., Any]) -> None:
        with t.step(f"contract matrix: {name}") as e:
            grids[name] = contract(t, fn)
            e["failures"] = grids[name]["failures"]
            t.json("contract", grids)

    def naive(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return need().mod.axpy_naive(a, b, 2.0)

    def direct(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return need().mod.axpy(a, b, 2.0)

    def fixed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        need()
        return getattr(torch.ops, NS).axpy.default(a, b, 2.0)

    grid_step("naive kernel (direct call)", naive)
    grid_step("fixed kernel (direct call)", direct)
    grid_step("fixed kernel as an operator", fixed)
    with t.step("register fake and autograd") as e:
        need()
        register_fake_and_autograd()
        e["registered"] = [f"{NS}::axpy fake", f"{NS}::axpy autograd"]
    grid_step("complete operator", fixed)
    with t.step("opcheck") as e:
        need()
        x, y = example()
        verdicts = torch.library.opcheck(getattr(torch.ops, NS).axpy.default, (x.to(t.device), y.to(t.device), 2.0),
                                         raise_exception=False)
        grids["opcheck"] = {k: v if isinstance(v, str) else f"{type(v).__name__}: {v}"[:1000] for k, v in verdicts.items()}
        e["opcheck"] = grids["opcheck"]
        t.json("contract", grids)

    with t.step("device-side assert in child processes (CUDA_LAUNCH_BLOCKING unset and 1)") as e:
        if t.dry:
            e["note"] = ("dry run: the children run on the CPU, where indexing raises at the faulty line; the "
                         "extension's gather is its stand-in (torch indexing)")
        runs = fault_runs(t, built)
        t.json("device_error", {"runs": runs, "child_source": FAULT_CHILD})
        e["surfaced"] = {name: (r["report"] or {}).get("reached") for name, r in runs.items()}
        if not t.dry and (built is None or built.so is None):
            e["note"] = "the extension was not built: only torch's own indexing ran"
        missing = [name for name, r in runs.items() if not r["report"]]
        if missing:
            raise RuntimeError(f"no report from {missing}: {runs[missing[0]]['stderr'][-500:]}")
