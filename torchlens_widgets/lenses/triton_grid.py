"""A Triton kernel's program grid as data: run a `@triton.jit` kernel in Triton's CPU interpreter and record,
for each program id, every `tl.load` / `tl.store`: which tensor argument its pointers point into, the
element indices touched, the lanes masked off, and unmasked lanes that point outside every tensor argument.

The interpreter itself reads and writes such addresses without a word (a GPU may fault, or silently read
another buffer); here those lanes are reported as errors and are neither read nor written. Recorded at the
interpreter's builder (create_masked_load / create_masked_store, which plain, block-pointer and descriptor
loads and stores all reach), so the kernel runs unchanged; everything patched is put back afterwards.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = [
    "MAX_ERRORS",
    "RUN_LIMIT",
    "Access",
    "BoundsError",
    "Program",
    "ProgramGrid",
    "TensorArg",
    "TritonGridError",
    "expand",
    "format_runs",
    "program_grid",
]

#: The interpreter runs a few hundred small programs a second on one core: grids past this are refused.
RUN_LIMIT = 16384
#: Out-of-bounds errors kept in full (all are counted).
MAX_ERRORS = 200
#: dtypes the interpreter keeps as raw bits (numpy has no such type): arithmetic on them is wrong there.
_RAW_BITS = ("bf16", "fp8e5", "fp8e5b16", "fp8e4nv", "fp8e4b8", "fp8e4b15")

Runs = tuple[tuple[int, int], ...]


class TritonGridError(ValueError):
    """A kernel, grid or argument the lens cannot run, or a kernel that failed in the interpreter."""


@dataclass(frozen=True)
class TensorArg:
    """A tensor argument: its name in the kernel's signature and what it holds (no address)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    numel: int
    itemsize: int
    contiguous: bool


@dataclass(frozen=True)
class Access:
    """One `tl.load` or `tl.store` of one program, on one tensor. Index runs are `(start, stop)` pairs of
    element indices counted from the tensor's first element (its flat index when it is contiguous)."""

    op: str  # "load" or "store"
    tensor: str
    line: int | None  # the kernel source line that made the access
    lanes: int  # pointers in the whole block (all tensors, masked or not)
    touched: int  # lanes that read/wrote this tensor (a lane is one pointer; two may share an element)
    elements: Runs  # elements read or written
    masked: Runs  # elements the masked-off lanes pointed at (not touched; may lie past the end)
    masked_lanes: int
    out_of_bounds: Runs  # unmasked lanes outside every tensor argument, relative to this tensor

    def indices(self) -> list[int]:
        """The elements read or written, in order."""
        return expand(self.elements)


@dataclass(frozen=True)
class BoundsError:
    """Unmasked lanes of one access that point outside every tensor argument (a bug a GPU may not report)."""

    program: tuple[int, ...]
    op: str
    tensor: str  # the tensor the access points into or nearest to
    line: int | None
    indices: Runs
    lanes: int
    message: str


@dataclass(frozen=True)
class Program:
    """One program id and its accesses, in the order the kernel made them."""

    pid: tuple[int, ...]
    accesses: tuple[Access, ...]
    errors: int = 0


@dataclass(frozen=True)
class ProgramGrid:
    """What `program_grid` recorded: the grid, the tensors, each recorded program, and every problem."""

    kernel: str
    grid: tuple[int, ...]
    num_programs: int
    tensors: tuple[TensorArg, ...]
    scalars: tuple[tuple[str, str], ...]  # non-tensor arguments, as text
    programs: tuple[Program, ...]  # the first `max_programs` in the interpreter's launch order (axis 0 slowest)
    errors: tuple[BoundsError, ...]
    errors_total: int
    left_out: str | None = None  # what was run but not recorded
    warnings: tuple[str, ...] = ()
    raw_bits_dtypes: tuple[str, ...] = ()  # bf16/fp8 types the kernel did arithmetic in (wrong in the interpreter)
    truncated_casts: tuple[str, ...] = ()  # "float32 -> bf16": downcasts the interpreter rounds toward zero
    helpers: tuple[str, ...] = ()  # @triton.jit functions the kernel called ("triton.language.standard.max"), in order
    interpreter: str = field(default="")  # "triton 3.7.1 interpreter"
    source_lines: tuple[tuple[int, str], ...] = ()  # (line, stripped source) of each line that loaded or stored

    @property
    def ok(self) -> bool:
        """No out-of-bounds access and no value the interpreter got wrong."""
        return self.errors_total == 0 and not self.raw_bits_dtypes and not self.truncated_casts

    def program(self, pid: int | Sequence[int]) -> Program:
        """The recorded program `pid` (an int for a 1-D grid, else a tuple)."""
        want = _pid_tuple(pid, self.grid)
        for p in self.programs:
            if p.pid == want:
                return p
        raise TritonGridError(f"program {want} was not recorded ({self.left_out or 'not in the grid'}); "
                              f"recorded: {len(self.programs)} of {self.num_programs}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (for renderers and tests)."""
        return asdict(self)

    def summary(self) -> str:
        """A few lines: grid, tensors, elements each program touched, problems first."""
        lines = [f"{self.kernel}: grid {self.grid}, {self.num_programs} program(s) in the {self.interpreter}"]
        lines += [f"  WARNING: {w}" for w in self.warnings]
        for e in self.errors[:10]:
            lines.append(f"  ERROR: {e.message}")
        if self.errors_total > len(self.errors[:10]):
            lines.append(f"  ... {self.errors_total - len(self.errors[:10])} more out-of-bounds error(s)")
        lines.append("  tensors: " + ", ".join(f"{t.name} {t.dtype}{list(t.shape)}" for t in self.tensors))
        for p in self.programs[:8]:
            acc = "; ".join(f"{a.op} {a.tensor}[{format_runs(a.elements)}]"
                            + (f" ({a.masked_lanes} masked)" if a.masked_lanes else "")
                            for a in p.accesses)
            lines.append(f"  program {p.pid}: {acc or 'no loads or stores'}")
        if len(self.programs) > 8:
            lines.append(f"  ... {len(self.programs) - 8} more program(s) recorded")
        if self.left_out:
            lines.append(f"  left out: {self.left_out}")
        return "\n".join(lines)


def expand(runs: Sequence[Sequence[int]]) -> list[int]:
    """Index runs `((start, stop), ...)` as the list of indices."""
    return [i for start, stop in runs for i in range(start, stop)]


def _runs(indices: np.ndarray) -> Runs:
    """Sorted unique indices as `(start, stop)` runs (a block's lanes are mostly consecutive)."""
    u = np.unique(indices)
    if u.size == 0:
        return ()
    cut = np.flatnonzero(np.diff(u) != 1) + 1
    starts = np.concatenate(([0], cut))
    stops = np.concatenate((cut, [u.size]))
    return tuple((int(u[a]), int(u[b - 1]) + 1) for a, b in zip(starts, stops))


def format_runs(runs: Sequence[Sequence[int]]) -> str:
    """`0..3, 8` style text for index runs (inclusive ends)."""
    parts = [str(a) if b - a == 1 else f"{a}..{b - 1}" for a, b in runs]
    return ", ".join(parts) if parts else "-"


def _pid_tuple(pid: int | Sequence[int], grid: Sequence[int]) -> tuple[int, ...]:
    if isinstance(pid, (int, np.integer)) and not isinstance(pid, bool):
        if len(grid) != 1:
            raise TritonGridError(f"the grid {tuple(grid)} has {len(grid)} dimensions: name a program as a tuple, "
                                  f"e.g. {tuple(0 for _ in grid)}")
        pid = (int(pid),)
    if not isinstance(pid, (tuple, list)) or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool)
                                                     for i in pid):
        raise TritonGridError(f"program={pid!r}: give a program id, an int or a tuple of ints such as (0,)")
    want = tuple(int(i) for i in pid)
    if len(want) != len(grid) or not all(0 <= i < n for i, n in zip(want, grid)):
        raise TritonGridError(f"program {want} is not in the grid {tuple(grid)} (ids run from 0 to size-1 per axis)")
    return want


# ---- validation ---------------------------------------------------------------------------------------------

def _import_triton() -> Any:
    try:
        import triton
        import triton.runtime.interpreter as interp
    except ImportError as exc:
        raise TritonGridError("Triton is not installed here: pip install 'torchlens-widgets[triton]' "
                              f"(Linux x86-64; Triton {_PINNED} goes with this torch) ({exc})") from None
    return triton, interp


_PINNED = "3.7.1"


def _python_fn(kernel: Any, interp: Any) -> Callable[..., Any]:
    """The Python function behind a @triton.jit kernel (compiled JITFunction or interpreted)."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    if isinstance(kernel, (Autotuner, Heuristics)):
        raise TritonGridError("this kernel is wrapped in @triton.autotune/@triton.heuristics: the lens runs one "
                              "configuration, so pass the @triton.jit kernel inside it (kernel.fn) and give its "
                              "block sizes as keywords, e.g. BLOCK=128")
    if isinstance(kernel, (JITFunction, interp.InterpretedFunction)):
        return kernel.fn  # type: ignore[no-any-return]
    what = "a plain Python function" if inspect.isfunction(kernel) else type(kernel).__name__
    raise TritonGridError(f"program_grid runs a Triton kernel, not {what}: decorate it with @triton.jit "
                          "(with or without TRITON_INTERPRET=1; the lens always uses the interpreter)")


def _check_grid(grid: Any) -> tuple[int, ...]:
    ok = isinstance(grid, (tuple, list)) and 1 <= len(grid) <= 3 and all(
        isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1 for n in grid)
    if not ok:
        hint = f" (write grid=({grid},) for a 1-D grid)" if isinstance(grid, int) and grid >= 1 else ""
        raise TritonGridError(f"grid={grid!r}: give a tuple of 1 to 3 positive ints, the number of programs per "
                              f"axis, e.g. (triton.cdiv(n, BLOCK),){hint}; or a function of the arguments "
                              "that returns one")
    dims = tuple(int(n) for n in grid)
    total = math.prod(dims)
    if total > RUN_LIMIT:
        raise TritonGridError(f"grid {dims} has {total} programs; the interpreter runs a few hundred a second, "
                              f"so the lens runs at most {RUN_LIMIT}: use a smaller input or a larger BLOCK")
    return dims


def _check_tensor(name: str, t: torch.Tensor) -> None:
    if t.device.type == "cpu":
        return
    if t.device.type == "cuda" and torch.cuda.is_available():
        return  # the interpreter copies it to the host and back
    extra = " (a meta tensor has no data)" if t.device.type == "meta" else ""
    raise TritonGridError(f"{name} is on {t.device}{extra}: the interpreter runs on the CPU, so pass CPU tensors "
                          f"({name}.cpu(), and copy the results back)")


def _tensors_of(bound: dict[str, Any]) -> list[tuple[str, torch.Tensor]]:
    found: list[tuple[str, torch.Tensor]] = []
    for name, value in bound.items():
        if isinstance(value, torch.Tensor):
            found.append((name, value))
        elif isinstance(value, tuple):
            found += [(f"{name}[{i}]", v) for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
    return found


def _describe(name: str, t: torch.Tensor) -> TensorArg:
    return TensorArg(name, str(t.dtype).removeprefix("torch."), tuple(t.shape), tuple(t.stride()), t.numel(),
                     t.element_size(), t.is_contiguous())


def _scalar_text(v: Any) -> str:
    if isinstance(v, (bool, int, float, str)) or v is None:
        return repr(v)
    return type(v).__name__


# ---- recording ----------------------------------------------------------------------------------------------

@dataclass
class _Region:
    name: str
    base: int  # the tensor's first element
    start: int  # the lowest address of its elements
    end: int  # one past the last byte of its highest element (a view ends where its elements do, not its storage)


_ORIGIN = "tlw_origin"  # a pointer handle's attr: the index of the tensor argument its addresses were computed from


def _extent(t: torch.Tensor) -> tuple[int, int]:
    """[start, end) in bytes of the elements `t` can address: its shape and strides, not the storage under it."""
    start = int(t.data_ptr())
    if t.numel() == 0:
        return start, start
    low = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s < 0)
    high = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s > 0)
    return start + low * t.element_size(), start + (high + 1) * t.element_size()


class _Recorder:
    """Checks and records each access the interpreter makes; state for one run."""

    def __init__(self, fn: Callable[..., Any], grid: tuple[int, ...], max_programs: int) -> None:
        self.fn, self.grid, self.max_programs = fn, grid, max_programs
        self.regions: list[_Region] = []
        self.tensors: list[TensorArg] = []
        self.programs: dict[tuple[int, ...], list[Access]] = {}
        self.errors: list[BoundsError] = []
        self.errors_total = 0
        self.errors_per_program: dict[tuple[int, ...], int] = {}
        self.raw_bits: set[str] = set()
        self.truncated: set[str] = set()
        self.helpers: dict[str, None] = {}
        self.atomics = 0
        self.order: dict[tuple[int, ...], int] = {}
        self.last_pid: tuple[int, ...] | None = None

    def hook(self, *args: Any, **kwargs: Any) -> None:
        """The interpreter's pre-run hook: the host tensors the kernel will see (their addresses)."""
        bound = inspect.signature(self.fn).bind(*args, **kwargs).arguments
        for name, t in _tensors_of(bound):
            self.regions.append(_Region(name, int(t.data_ptr()), *_extent(t)))

    def origin_of(self, ptrs: Any) -> int | None:
        """The tensor argument a pointer handle was computed from: carried through pointer arithmetic and reshapes
        (see _patched), or, for the argument itself, the tensor whose first element it points at."""
        origin = getattr(ptrs, "attr", {}).get(_ORIGIN)
        if origin is not None:
            return int(origin)
        data = np.asarray(getattr(ptrs, "data", ())).ravel()
        if data.size == 0:
            return None
        first = int(data[0])
        return next((i for i, r in enumerate(self.regions) if r.base == first), None)

    def start(self, x: int, y: int, z: int) -> None:
        """A program starts (the interpreter sets its id): note it, and record it while under the cap."""
        pid = (x, y, z)[: len(self.grid)]
        self.last_pid = pid
        if len(self.order) < self.max_programs:
            self.order[pid] = len(self.order)

    def line(self) -> int | None:
        code = self.fn.__code__
        frame: Any = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_name == code.co_name and frame.f_code.co_filename == code.co_filename:
                return frame.f_lineno
            frame = frame.f_back
        return None

    def access(self, op: str, ptrs: np.ndarray, mask: np.ndarray, itemsize: int,
               origin: int | None = None) -> np.ndarray | None:
        """Record one access; return the mask to run it with when lanes must be switched off (out of bounds).
        `origin`: the tensor the pointers were computed from, when known: a lane outside that tensor's elements is
        out of bounds even where it lands in another argument."""
        pid = self.last_pid or ()
        addr = np.asarray(ptrs).astype(np.int64).ravel()
        on = np.broadcast_to(np.asarray(mask, dtype=bool), np.shape(ptrs)).ravel()
        owner = np.full(addr.shape, -1)
        if origin is not None and 0 <= origin < len(self.regions):
            r = self.regions[origin]
            owner[(addr >= r.start) & (addr + itemsize <= r.end)] = origin
        else:
            origin = None
            for i in range(len(self.regions) - 1, -1, -1):  # the first tensor wins where arguments overlap
                r = self.regions[i]
                owner[(addr >= r.start) & (addr + itemsize <= r.end)] = i
        oob = on & (owner < 0)
        if origin is not None:
            primary = origin
        elif owner.max(initial=-1) >= 0:
            primary = int(np.bincount(owner[owner >= 0]).argmax())
        elif self.regions:
            probe = int(addr[oob][0] if oob.any() else addr[0])
            primary = min(range(len(self.regions)), key=lambda i: max(self.regions[i].start - probe,
                                                                      probe - self.regions[i].end + itemsize, 0))
        else:
            primary = -1
        home = np.where(owner >= 0, owner, primary)
        record = pid in self.order
        line = self.line()
        if oob.any():
            self._error(pid, op, primary, line, addr[oob], itemsize, masked=int((~on).sum()))
        if record and primary >= 0:
            accesses = self.programs.setdefault(pid, [])
            for i in sorted(set(home.tolist())):
                r, mine = self.regions[i], home == i
                idx = (addr - r.base) // itemsize
                accesses.append(Access(op=op, tensor=r.name, line=line, lanes=int(addr.size),
                                       touched=int((mine & on & ~oob).sum()), elements=_runs(idx[mine & on & ~oob]),
                                       masked=_runs(idx[mine & ~on]), masked_lanes=int((mine & ~on).sum()),
                                       out_of_bounds=_runs(idx[mine & oob])))
        return (on & ~oob).reshape(np.shape(ptrs)) if oob.any() else None

    def _error(self, pid: tuple[int, ...], op: str, primary: int, line: int | None, addr: np.ndarray,
               itemsize: int, masked: int = 0) -> None:
        """Record lanes outside every tensor. `masked`: lanes this access's mask switched off (a mask that is present
        but wrong is told apart from no mask at all)."""
        self.errors_total += 1
        self.errors_per_program[pid] = self.errors_per_program.get(pid, 0) + 1
        if len(self.errors) >= MAX_ERRORS:
            return
        r = self.regions[primary] if primary >= 0 else None
        name = r.name if r else "?"
        runs = _runs((addr - r.base) // itemsize) if r else ()
        info = next((t for t in self.tensors if t.name == name), None)
        size = f" ({name} has {info.numel} elements)" if info else ""
        where = f" at line {line}" if line else ""
        src = linecache.getline(self.fn.__code__.co_filename, line).split(" #")[0].strip() if line else ""
        verb = "reads" if op == "load" else "writes"
        self.errors.append(BoundsError(
            program=pid, op=op, tensor=name, line=line, indices=runs, lanes=int(addr.size),
            message=(f"program {pid}: tl.{op}{where} {verb} {name}[{format_runs(runs)}], {addr.size} lane(s) "
                     f"outside every tensor argument{size}, " + (f"left on by a mask that switched off {masked} other lane(s)"
                                                         if masked else "and no lane of it was masked off")
                     + (f" -- {src}" if src else ""))))

    def helper(self, fn: Any) -> None:
        """A @triton.jit function called from the kernel (tl.max, tl.softmax, your own helpers)."""
        name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"
        self.helpers.setdefault(name, None)

    def cast(self, src: Any, dst_type: Any) -> None:
        """A float downcast to bfloat16: the interpreter keeps the top 16 bits (rounds toward zero), where a GPU
        rounds to nearest even, so the last bit of the value can differ."""
        src_name = getattr(getattr(getattr(src, "dtype", None), "scalar", None), "name", None)
        dst_name = getattr(getattr(dst_type, "scalar", dst_type), "name", None)
        if dst_name == "bf16" and src_name in ("fp32", "fp64"):
            self.truncated.add(f"{src_name} -> bf16")

    def raw(self, *handles: Any) -> None:
        for h in handles:
            ty: Any = getattr(h, "dtype", None)
            while hasattr(ty, "element_ty"):
                ty = ty.element_ty
            name = getattr(ty, "name", None)
            if name in _RAW_BITS:
                self.raw_bits.add(name)


_BINARY = ("binary_op", "unary_op", "create_fma", "create_dot", "create_erf", "create_rsqrt", "create_idiv")


@contextlib.contextmanager
def _patched(rec: _Recorder, interp: Any) -> Iterator[None]:
    """Wrap the interpreter builder's loads/stores (and arithmetic, to spot bf16/fp8 math) and route nested
    @triton.jit calls through the interpreter; put every attribute back afterwards, even on error."""
    from triton.runtime.jit import JITFunction

    b = interp.interpreter_builder
    TensorHandle = interp.TensorHandle
    saved: list[tuple[Any, str, Any]] = []

    def put(obj: Any, name: str, value: Any) -> None:
        saved.append((obj, name, obj.__dict__.get(name, interp._MISSING)))
        setattr(obj, name, value)

    def itemsize(ptrs: Any) -> int:
        return max(1, ptrs.get_element_ty().primitive_bitwidth // 8)

    def mask_of(mask: Any) -> np.ndarray:
        return np.asarray(mask.data if isinstance(mask, TensorHandle) else mask, dtype=bool)

    load, store, ternary, set_idx = b.create_masked_load, b.create_masked_store, b.ternary_op, b.set_grid_idx

    def masked_load(ptrs: Any, mask: Any, other: Any, *a: Any, **k: Any) -> Any:
        safe = rec.access("load", ptrs.data, mask_of(mask), itemsize(ptrs), rec.origin_of(ptrs))
        return load(ptrs, mask if safe is None else TensorHandle(safe, interp.tl.int1), other, *a, **k)

    def masked_store(ptrs: Any, value: Any, mask: Any, *a: Any, **k: Any) -> Any:
        safe = rec.access("store", ptrs.data, mask_of(mask), itemsize(ptrs), rec.origin_of(ptrs))
        return store(ptrs, value, mask if safe is None else TensorHandle(safe, interp.tl.int1), *a, **k)

    def set_grid_idx(x: int, y: int, z: int) -> None:
        set_idx(x, y, z)
        rec.start(x, y, z)

    def arith(name: str) -> Callable[..., Any]:
        original = getattr(b, name)

        def wrapped(*a: Any, **k: Any) -> Any:
            rec.raw(*a)
            return original(*a, **k)
        return wrapped

    def ternary_op(lhs: Any, rhs: Any, other: Any, op: Any) -> Any:
        if op is not np.where:  # a select moves bits and is right; clamp is arithmetic
            rec.raw(lhs, rhs, other)
        return ternary(lhs, rhs, other, op)

    def carried(name: str) -> Callable[..., Any]:  # pointer arithmetic and reshapes keep the pointers' tensor
        original = getattr(b, name)

        def wrapped(*a: Any, **k: Any) -> Any:
            out = original(*a, **k)
            origin = next((rec.origin_of(x) for x in a if isinstance(x, TensorHandle) and x.dtype.is_ptr()), None)
            if origin is not None and isinstance(out, TensorHandle):
                out.attr[_ORIGIN] = origin
            return out
        return wrapped

    def atomic(name: str) -> Callable[..., Any]:
        original = getattr(b, name)

        def wrapped(*a: Any, **k: Any) -> Any:
            rec.atomics += 1
            return original(*a, **k)
        return wrapped

    def scan_apply(cls: Any) -> Callable[..., Any]:
        original = cls.apply

        def apply(self: Any, input: Any) -> Any:
            rec.raw(*(input if isinstance(input, tuple) else (input,)))
            return original(self, input)
        return apply

    def nested(self: Any, *a: Any, **k: Any) -> Any:  # a @triton.jit helper called from the kernel
        rec.helper(self.fn)
        scope = interp._patch_lang(self.fn)
        try:
            return interp.InterpretedFunction(self.fn).rewrite()(*a, **k)
        finally:
            scope.restore()

    interpreted_call = interp.InterpretedFunction.__call__

    def interpreted(self: Any, *a: Any, **k: Any) -> Any:  # a helper defined while TRITON_INTERPRET=1 was set
        rec.helper(self.fn)
        return interpreted_call(self, *a, **k)

    fp_trunc = b.create_fp_trunc

    def create_fp_trunc(src: Any, dst_type: Any) -> Any:
        rec.cast(src, dst_type)
        return fp_trunc(src, dst_type)

    try:
        put(b, "set_grid_idx", set_grid_idx)
        put(b, "create_fp_trunc", create_fp_trunc)
        put(b, "create_masked_load", masked_load)
        put(b, "create_masked_store", masked_store)
        put(b, "ternary_op", ternary_op)
        for name in _BINARY:
            put(b, name, arith(name))
        for name in ("create_addptr", "create_splat", "create_broadcast", "create_expand_dims", "create_trans",
                     "create_reshape"):
            if hasattr(b, name):
                put(b, name, carried(name))
        for name in ("create_atomic_rmw", "create_atomic_cas"):
            put(b, name, atomic(name))
        for cls in (interp.ReduceOps, interp.ScanOps):
            put(cls, "apply", scan_apply(cls))
        put(JITFunction, "__call__", nested)
        put(interp.InterpretedFunction, "__call__", interpreted)
        yield
    finally:
        while saved:
            obj, name, old = saved.pop()
            if old is interp._MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, old)


# ---- the lens -----------------------------------------------------------------------------------------------

def program_grid(kernel: Any, grid: Sequence[int] | Callable[[dict[str, Any]], Sequence[int]], *args: Any,
                 max_programs: int = 1024, **meta: Any) -> ProgramGrid:
    """Run `kernel[grid](*args, **meta)` in Triton's CPU interpreter and record every program's loads and
    stores. Tensors are written as the kernel writes them (out-of-bounds lanes excepted). `grid`: a tuple of
    1-3 positive ints, or a function of the arguments (a dict) returning one. Programs after the first
    `max_programs` (launch order) run and are checked for out-of-bounds accesses, but not recorded."""
    triton, interp = _import_triton()
    fn = _python_fn(kernel, interp)
    if not isinstance(max_programs, int) or isinstance(max_programs, bool) or max_programs < 1:
        raise TritonGridError(f"max_programs={max_programs!r}: give how many programs to record (a positive int)")
    try:
        bound = inspect.signature(fn).bind(*args, **meta)
    except TypeError as exc:
        params = ", ".join(inspect.signature(fn).parameters)
        raise TritonGridError(f"{fn.__name__}({params}) cannot take these arguments: {exc}; pass every parameter, "
                              "tl.constexpr ones (block sizes) included, as the kernel launch would") from None
    bound.apply_defaults()
    named = dict(bound.arguments)
    tensors = _tensors_of(named)
    for name, t in tensors:
        _check_tensor(name, t)
    if callable(grid):
        try:
            grid = grid(named)
        except Exception as exc:
            raise TritonGridError(f"the grid function failed on the arguments: {type(exc).__name__}: {exc}") from None
    dims = _check_grid(grid)
    rec = _Recorder(fn, dims, max_programs)
    rec.tensors = [_describe(n, t) for n, t in tensors]
    run = interp.InterpretedFunction(fn)
    run.add_pre_run_hook(rec.hook)
    try:
        with _patched(rec, interp):
            run.run(*args, grid=dims, warmup=False, **meta)
    except interp.InterpreterError as exc:
        raise _failed(fn, rec, exc.__cause__ or exc) from exc
    except Exception as exc:  # raised outside the program loop (argument conversion)
        raise _failed(fn, rec, exc) from exc
    return _result(fn, dims, named, rec, triton)


def _failed(fn: Callable[..., Any], rec: _Recorder, exc: BaseException) -> TritonGridError:
    text = f"{type(exc).__name__}: {exc}"
    where = f" in program {rec.last_pid}" if rec.last_pid is not None else ""
    hint = ""
    if "get_bf16" in text or "bf16" in text:
        hint = ("; Triton's interpreter cannot compute in bfloat16: convert after loading (x.to(tl.float32)) "
                "and back before storing")
    return TritonGridError(f"{fn.__name__} failed in the Triton interpreter{where}: {text[:600]}{hint}")


def _result(fn: Callable[..., Any], dims: tuple[int, ...], named: dict[str, Any], rec: _Recorder,
            triton: Any) -> ProgramGrid:
    total = math.prod(dims)
    recorded = sorted(rec.order, key=rec.order.__getitem__)
    programs = tuple(Program(pid, tuple(rec.programs.get(pid, ())), rec.errors_per_program.get(pid, 0))
                     for pid in recorded)
    left_out = None
    if total > len(programs):
        left_out = (f"{total - len(programs)} of {total} programs ran but were not recorded (max_programs="
                    f"{rec.max_programs}); their out-of-bounds accesses are still counted")
    warnings: list[str] = []
    if rec.raw_bits:
        kinds = ", ".join(sorted(rec.raw_bits))
        warnings.append(f"the kernel computes in {kinds}: Triton's interpreter does that arithmetic on the raw "
                        "bit patterns, so the values it stored are WRONG here (a GPU computes them correctly). The "
                        "accesses recorded are right. To get right values, convert after loading (x.to(tl.float32)) "
                        "and back before storing")
    if rec.truncated:
        kinds = ", ".join(sorted(rec.truncated))
        warnings.append(f"the kernel converts {kinds}: Triton's interpreter rounds that conversion toward zero, a GPU "
                        "to nearest even, so the last bit of the values stored here can differ from a GPU's (and from "
                        "torch's). Compare such results with a tolerance of one bfloat16 step, or store float32")
    if rec.atomics:
        warnings.append(f"{rec.atomics} atomic operation(s) ran and are not recorded or bounds-checked")
    if rec.errors_total:
        warnings.append("out-of-bounds lanes were neither read (they loaded 0 / `other`) nor written here; the "
                        "plain interpreter would have read or written whatever memory lies there")
    lines = sorted({a.line for accesses in rec.programs.values() for a in accesses if a.line}
                   | {e.line for e in rec.errors if e.line})
    filename = fn.__code__.co_filename
    source_lines = tuple((n, text) for n in lines if (text := linecache.getline(filename, n).strip()))
    scalars = tuple((k, _scalar_text(v)) for k, v in named.items() if not isinstance(v, torch.Tensor)
                    and not (isinstance(v, tuple) and any(isinstance(x, torch.Tensor) for x in v)))
    return ProgramGrid(kernel=fn.__name__, grid=dims, num_programs=total, tensors=tuple(rec.tensors),
                       scalars=scalars, programs=programs, errors=tuple(rec.errors), errors_total=rec.errors_total,
                       left_out=left_out, warnings=tuple(warnings), raw_bits_dtypes=tuple(sorted(rec.raw_bits)),
                       truncated_casts=tuple(sorted(rec.truncated)), helpers=tuple(rec.helpers),
                       interpreter=f"triton {triton.__version__} interpreter", source_lines=source_lines)
