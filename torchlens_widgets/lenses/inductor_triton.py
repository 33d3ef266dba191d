"""Inductor's Triton for CPU tensors, run in Triton's interpreter (`TRITON_INTERPRET=1`, no GPU).

`torch.compile(..., options={"cpu_backend": "triton"})` makes Inductor write Triton kernels for CPU tensors. Inductor
puts a hash of Triton's *target* in each kernel's cache key and asks Triton's active driver for it; Triton 3.7.1 has
drivers for NVIDIA and AMD GPUs only, and on a machine without a GPU neither is active. `inductor_triton_here()` lends
Triton a stand-in driver that only names a target (an sm_90 GPU, 32-thread warps) and nothing else: no code is compiled
for it, the interpreter runs the kernels (it sets TRITON_INTERPRET=1 while it is active).

* `inductor_triton(fn, *args)`: `compile_trace` of `fn` with Inductor's Triton backend for CPU tensors.
* `load_kernel(source, name)`: a kernel's module loaded again; returns Inductor's launcher (`CachingAutotuner`, with
  the `configs` its heuristic chose) and the `@triton.jit` function inside it.
* `generated_before_crash(fn, *args)`: when the interpreter fails on a generated kernel, the kernel's source and the
  error (the generated module is read back from the traceback).

Inductor's own helpers (`torch._inductor.runtime.triton_helpers`) are decorated with `@triton.jit` when that module is
imported, and `@triton.jit` reads TRITON_INTERPRET then: set it before importing torch's Inductor (as notebook 17's
first cell does), or an interpreted kernel calling a helper fails ("Cannot call @triton.jit'd outside of the scope of
a kernel").
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Crash", "TargetOnly", "generated_before_crash", "inductor_triton", "inductor_triton_here", "load_kernel"]


class TargetOnly:
    """A stand-in for Triton's driver: Inductor reads the target to build its cache key; nothing runs on it."""

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)


@contextlib.contextmanager
def inductor_triton_here() -> Iterator[None]:
    """Triton's active driver is `TargetOnly()` inside, what it was after (even when none was active); and
    TRITON_INTERPRET=1 inside, so that the kernels Inductor's modules decorate are the interpreter's."""
    import os

    from triton.runtime.driver import driver

    before = driver._active  # private: the driver Triton would hand out, None until one is asked for
    interpret = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"  # read by @triton.jit when it decorates
    driver.set_active(TargetOnly())
    try:
        with warnings.catch_warnings():  # Inductor warns that no CPU build of Triton will run its kernels
            warnings.filterwarnings("ignore", message="Could not find an active CPU backend")
            yield
    finally:
        driver._active = before
        if interpret is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = interpret


def inductor_triton(fn: Callable[..., Any], *args: Any) -> Any:
    """`compile_trace(fn, *args)` with Inductor writing Triton for CPU tensors, run in the interpreter."""
    from .compile_trace import compile_trace

    with inductor_triton_here():
        return compile_trace(fn, *args, options={"cpu_backend": "triton"})


def load_kernel(source: str, name: str) -> tuple[Any, Any]:
    """(Inductor's launcher for kernel `name`, the `@triton.jit` function inside it), from the kernel's module
    source (`Kernel.source` of a compile_trace)."""
    from torch._inductor.codecache import PyCodeCache

    with inductor_triton_here():
        module = PyCodeCache.load(source)
    launcher = getattr(module, name)
    return launcher, launcher.fn


@dataclass(frozen=True)
class Crash:
    """A generated kernel the interpreter could not run: its name, its module's source, the error, and the line of
    the kernel it failed on."""

    name: str
    source: str
    error: BaseException
    line: str


def generated_before_crash(fn: Callable[..., Any], *args: Any) -> Crash | None:
    """Compile and run `fn` as `inductor_triton` does; None when it runs, else the generated kernel the interpreter
    failed in (found in the traceback: the innermost frame of a `triton_*` function in a file Inductor wrote)."""
    import linecache

    from torch._inductor.runtime.cache_dir_utils import cache_dir

    try:
        inductor_triton(fn, *args)
    except Exception as exc:  # the interpreter wraps what it met in an InterpreterError
        root = cache_dir()
        found = None
        error: BaseException | None = exc
        while error is not None and found is None:
            tb = error.__traceback__
            while tb is not None:
                code = tb.tb_frame.f_code
                if code.co_filename.startswith(root) and code.co_name.startswith("triton_"):
                    found = (code.co_name, code.co_filename, tb.tb_lineno)
                tb = tb.tb_next
            error = error.__cause__
        if found is None:
            raise
        name, filename, lineno = found
        with open(filename) as f:
            source = f.read()
        return Crash(name, source, exc, linecache.getline(filename, lineno).strip())
    return None
