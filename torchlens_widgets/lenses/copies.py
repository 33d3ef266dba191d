"""The copy lens: which aten ops one call runs that copy tensor data into fresh memory.

Hidden copies (`reshape` of a non-viewable tensor, `.contiguous()`, dtype casts, `expand(...)
.contiguous()`) all reach the dispatcher as `clone`, `_to_copy` or `copy_`; a dispatch mode
sees them even when the Python code never says "copy". Copies a kernel makes from C++ (softmax on a
transposed input, a mixed-format convolution) pass below a dispatch mode; :func:`kernel_copies`
finds those with the profiler, which records every op called through the dispatcher (nested calls included; a
redispatch or a direct at::native call is not recorded).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["COPY_OPS", "CopyEvent", "CopyReport", "count_copies", "kernel_copies", "record_copies"]

#: aten overload packets whose job is to materialise data in new (or other) memory.
COPY_OPS = frozenset({"aten::clone", "aten::_to_copy", "aten::copy_"})


@dataclass(frozen=True)
class CopyEvent:
    """One copying op: its aten name, the shape/dtype it wrote and the bytes written."""

    op: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int


@dataclass
class CopyReport:
    """Every aten op a call ran, in order, and the subset that copied data."""

    ops: list[str] = field(default_factory=list)
    copies: list[CopyEvent] = field(default_factory=list)
    #: every copy seen by the profiler, inside kernels too (filled by the checks' copy_count)
    kernel_level: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.copies)

    @property
    def bytes_copied(self) -> int:
        return sum(c.nbytes for c in self.copies)

    def __str__(self) -> str:
        lines = [f"{self.count} cop{'y' if self.count == 1 else 'ies'}, {self.bytes_copied:,} bytes, in {len(self.ops)} aten ops"]
        lines += [f"  {c.op}: {list(c.shape)} {c.dtype.replace('torch.', '')} ({c.nbytes:,} bytes)" for c in self.copies]
        return "\n".join(lines)


class _CopyRecorder(TorchDispatchMode):
    def __init__(self, report: CopyReport) -> None:
        super().__init__()
        self.report = report

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func._schema.name
        self.report.ops.append(str(func))
        if name in COPY_OPS:
            written = args[0] if name == "aten::copy_" else out
            tensors = [t for t in tree_flatten(written)[0] if isinstance(t, torch.Tensor)]
            for t in tensors:
                self.report.copies.append(
                    CopyEvent(str(func), tuple(t.shape), str(t.dtype), t.numel() * t.element_size())
                )
        return out


class record_copies:
    """`with record_copies() as report:` records the aten ops run inside the block."""

    def __init__(self) -> None:
        self.report = CopyReport()
        self._mode = _CopyRecorder(self.report)

    def __enter__(self) -> CopyReport:
        self._mode.__enter__()
        return self.report

    def __exit__(self, *exc: object) -> None:
        self._mode.__exit__(*exc)


def count_copies(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> CopyReport:
    """Run `fn(*args, **kwargs)` once and report the copies it made."""
    if not callable(fn):
        raise TypeError(f"count_copies needs a function to call, got {type(fn).__name__}")
    with record_copies() as report:
        fn(*args, **kwargs)
    return report


def kernel_copies(fn: Callable[..., Any], *args: Any, include_scalars: bool = False, **kwargs: Any) -> list[str]:
    """Every copy `fn(*args)` made, inside kernels too, as ``"outer op > ... > copying op  [shape]"``.

    Uses the legacy autograd profiler (it sees nested aten calls and, unlike the Kineto profiler,
    prints nothing). A copy op running inside another (the ``copy_`` of a ``clone``) is not counted
    twice, and 0-d copies (Python numbers that ops such as ``x * 0.5`` wrap into tensors) only with
    ``include_scalars=True``.
    """
    from torch.autograd.profiler_legacy import profile as legacy_profile

    if not callable(fn):
        raise TypeError(f"kernel_copies needs a function to call, got {type(fn).__name__}")
    with legacy_profile(record_shapes=True) as prof:
        fn(*args, **kwargs)
    found = []
    for ev in prof.function_events:
        if ev.name not in COPY_OPS:
            continue
        chain, parent = [ev.name], ev.cpu_parent
        while parent is not None:
            chain.append(parent.name)
            parent = parent.cpu_parent
        if any(name in COPY_OPS for name in chain[1:]):
            continue  # the copy_ inside a clone (or a copy re-dispatched by a mode) is that same copy
        shape = list(ev.input_shapes[0]) if ev.input_shapes and ev.input_shapes[0] else []
        if not shape and not include_scalars:
            continue  # a 0-d copy: almost always a Python number wrapped into a tensor (x * 0.5)
        found.append(" > ".join(reversed(chain)) + f"  {shape}")
    return found


def ops_inside(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[str]:
    """Every aten op `fn(*args)` ran, in order, including the ones a C++ kernel calls internally (which a
    dispatch mode never sees, since it is popped while the kernel runs): ``["aten::empty_like", ...]``.
    Returns the names; `fn`'s result is discarded."""
    from torch.autograd.profiler_legacy import profile as legacy_profile

    if not callable(fn):
        raise TypeError(f"ops_inside needs a function to call, got {type(fn).__name__}")
    with legacy_profile() as prof:
        fn(*args, **kwargs)
    return [ev.name for ev in sorted(prof.function_events, key=lambda e: e.time_range.start)
            if ev.name.startswith("aten::")]
