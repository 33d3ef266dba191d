"""The layout lens: a tensor's strided metadata over its flat storage, as plain data.

A strided tensor is (shape, stride, storage offset) over a one-dimensional storage. This module
reads that metadata from torch and answers "which storage cell holds element i?" without
touching element values, so it also works for meta tensors.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

__all__ = [
    "Layout",
    "LayoutError",
    "base_index",
    "layout",
    "read_storage",
    "shares_storage",
    "storage_index",
]

#: torch's own accessors: a subclass that overrides `stride()`, `shape` or `layout` (or whose
#: __torch_function__ answers for them) cannot make the picture lie about what is in memory.
_TB = torch._C.TensorBase


def _attr(t: torch.Tensor, name: str) -> Any:
    """torch's own value of a tensor property (`shape`, `layout`, ...), whatever a subclass defines."""
    return getattr(_TB, name).__get__(t)


#: Above this many logical elements, enumerating indices is refused; the diagram summarises instead.
MAX_ENUMERATED_ELEMENTS = 5_000_000


class LayoutError(TypeError):
    """Raised when an object has no strided layout the lens can describe; the message says why."""


@dataclass(frozen=True)
class Layout:
    """Strided metadata of one tensor: enough to map every logical element to a storage cell."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    itemsize: int
    dtype: str
    device: str
    storage_id: int = field(repr=False, compare=False)
    storage_nbytes: int
    is_contiguous: bool
    is_view: bool
    version: int | None
    requires_grad: bool
    has_values: bool
    #: Why there are no values to read ("meta tensor", "FakeTensor: no memory", ...); None when there are.
    no_values: str | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def storage_size(self) -> int:
        """Number of elements of this dtype that fit in the storage."""
        return self.storage_nbytes // self.itemsize if self.itemsize else 0

    @property
    def expanded_dims(self) -> tuple[int, ...]:
        """Dimensions with stride 0 and size > 1: many elements read one storage cell."""
        return tuple(d for d, (n, s) in enumerate(zip(self.shape, self.stride)) if s == 0 and n > 1)

    def storage_index(self, index: tuple[int, ...] | list[int]) -> int:
        """Storage position (in elements) of the element at a multi-dimensional index."""
        return storage_index(index, self.shape, self.stride, self.offset)

    def iter_storage_indices(self) -> Iterator[int]:
        """Storage index of every logical element, in row-major order, lazily."""
        if self.numel == 0:
            return
        if self.ndim == 0:
            yield self.offset
            return
        shape, stride = self.shape, self.stride
        idx = [0] * self.ndim
        pos = self.offset
        last = self.ndim - 1
        while True:
            yield pos
            d = last
            while d >= 0:
                idx[d] += 1
                pos += stride[d]
                if idx[d] < shape[d]:
                    break
                pos -= stride[d] * shape[d]
                idx[d] = 0
                d -= 1
            if d < 0:
                return

    def storage_indices(self) -> list[int]:
        """For every logical element in row-major order, its index in the storage (in elements)."""
        if self.numel > MAX_ENUMERATED_ELEMENTS:
            raise LayoutError(
                f"tensor has {self.numel:,} elements; enumerating more than "
                f"{MAX_ENUMERATED_ELEMENTS:,} storage indices is refused. Use storage_index(idx) "
                "for single elements or iter_storage_indices() to stream them."
            )
        return list(self.iter_storage_indices())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (storage_id included: it is only stable within one process)."""
        d = asdict(self)
        d["shape"], d["stride"] = list(self.shape), list(self.stride)
        return d


def storage_index(
    index: tuple[int, ...] | list[int],
    shape: tuple[int, ...] | list[int],
    stride: tuple[int, ...] | list[int],
    offset: int = 0,
) -> int:
    """offset + sum(i_d * stride_d), with each index checked against its dimension."""
    if len(index) != len(shape):
        raise IndexError(f"index {tuple(index)} has {len(index)} entries; the shape {tuple(shape)} needs {len(shape)}")
    pos = offset
    for d, (i, n, s) in enumerate(zip(index, shape, stride)):
        if not 0 <= i < n:
            raise IndexError(f"index {i} is out of range for dimension {d} of size {n}")
        pos += i * s
    return pos


def _require_strided_tensor(t: object) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise LayoutError(
            f"expected a torch.Tensor, got {type(t).__name__}. Wrap data with torch.tensor(...) first."
        )
    try:
        nested, kind, quantized = bool(_attr(t, "is_nested")), _attr(t, "layout"), bool(_attr(t, "is_quantized"))
    except Exception as e:  # a subclass whose properties raise
        raise LayoutError(
            f"this {type(t).__name__} does not say what layout it has ({type(e).__name__}: {e}); "
            "draw a plain tensor instead, e.g. t.detach().clone().as_subclass(torch.Tensor)."
        ) from e
    if nested:
        raise LayoutError(
            "nested tensors hold several differently-shaped tensors and have no single strided "
            "layout; look at one component, e.g. t.unbind()[0]."
        )
    if kind != torch.strided:
        raise LayoutError(
            f"{kind} tensors keep indices and values in separate arrays, not one strided "
            "storage; call .to_dense() to see a strided layout."
        )
    if quantized:
        raise LayoutError(
            "quantized tensors carry scale and zero point beside their storage; use "
            "t.int_repr() to see the stored integers' layout or t.dequantize() for values."
        )
    return t


class _Dims:
    """Turns sizes, strides and offsets into ints without adding guards to a ShapeEnv.

    A FakeTensor made under a ShapeEnv has symbolic sizes (`s0`): `int(s0)` would specialise the
    user's program to this size. Backed symbols are read at their example value (the hint) and listed.
    """

    def __init__(self) -> None:
        self.symbolic: list[str] = []

    def __call__(self, n: Any, record: bool = True) -> int:
        if isinstance(n, int):
            return int(n)
        node = getattr(n, "node", None)
        if node is None:
            return int(n)
        known = node.maybe_as_int() if hasattr(node, "maybe_as_int") else None
        if known is not None:
            return int(known)
        hint = getattr(node, "hint", None)
        if hint is None:
            raise LayoutError(
                f"the symbolic size {n} has no example value (a data-dependent size, e.g. from .item() or "
                "nonzero()); draw a real tensor, or a FakeTensor made with from_tensor(real_tensor)."
            )
        if record and f"{n}={int(hint)}" not in self.symbolic:
            self.symbolic.append(f"{n}={int(hint)}")
        return int(hint)


def _is_contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Row-major contiguity as torch defines it (size-1 dims' strides ignored), from plain ints."""
    if math.prod(shape) == 0:
        return True
    expected = 1
    for n, s in zip(reversed(shape), reversed(stride)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def layout(t: torch.Tensor) -> Layout:
    """Read the strided layout of `t`: shape, stride, storage offset, dtype and storage identity."""
    with torch._C.DisableTorchFunctionSubclass():  # a subclass's __torch_function__ must not answer for it
        t = _require_strided_tensor(t)
        dims = _Dims()
        try:
            storage = _TB.untyped_storage(t)
            storage_id = int(storage._cdata)
            shape = tuple(dims(n) for n in _attr(t, "shape"))
            stride = tuple(dims(s) for s in _TB.stride(t))
            offset = dims(_TB.storage_offset(t))
            nbytes = dims(storage.nbytes(), record=False)
            no_values = _no_values(t, storage, nbytes)
            is_view = bool(_TB._is_view(t))
            itemsize = int(_TB.element_size(t))
            dtype, device = _attr(t, "dtype"), _attr(t, "device")
        except (RuntimeError, NotImplementedError) as e:  # functorch wrappers, some subclasses
            if torch._C._functorch.is_functorch_wrapped_tensor(t):
                raise LayoutError(
                    "inside torch.func transforms (grad, vmap, jacrev, ...) a tensor is a wrapper with no storage "
                    "of its own; call this on the tensor you passed in, outside the transform."
                ) from e
            raise LayoutError(
                f"this {type(t).__name__} does not expose a plain storage ({e}). "
                "Use a regular tensor, e.g. t.detach().clone()."
            ) from e
        if no_values is None:
            no_values = _past_the_end(shape, stride, offset, nbytes // max(itemsize, 1))
        if dims.symbolic:
            sym = f"symbolic sizes {', '.join(dims.symbolic)} drawn at these example values"
            no_values = f"{no_values}; {sym}" if no_values else sym
        try:
            version: int | None = int(_attr(t, "_version"))
        except RuntimeError:  # inference tensors do not track versions
            version = None
        return Layout(
            shape=shape,
            stride=stride,
            offset=offset,
            itemsize=itemsize,
            dtype=str(dtype),
            device=str(device),
            storage_id=storage_id,
            storage_nbytes=nbytes,
            is_contiguous=_is_contiguous(shape, stride),
            is_view=is_view,
            version=version,
            requires_grad=bool(_attr(t, "requires_grad")),
            has_values=no_values is None,
            no_values=no_values,
        )


_READABLE: dict[torch.dtype, bool] = {}


def _past_the_end(shape: tuple[int, ...], stride: tuple[int, ...], offset: int, size: int) -> str | None:
    """Why values are missing when the tensor reads beyond its storage (memory freed by resize_(0), e.g. FSDP)."""
    if math.prod(shape) == 0:
        return None
    last = offset + sum((n - 1) * s for n, s in zip(shape, stride))
    if last < size:
        return None
    return (f"reads storage cells up to {last} but its storage holds {size} (freed or shrunk, e.g. by "
            "untyped_storage().resize_(0)); no values to read")


def _readable(dtype: torch.dtype) -> bool:
    """Whether torch can index a tensor of this dtype and turn its values into Python numbers.

    Bit and packed dtypes (bits8, int4, float4_e2m1fn_x2, ...) cannot: their memory is drawn without values.
    """
    ok = _READABLE.get(dtype)
    if ok is None:
        try:
            torch.empty(1, dtype=dtype)[torch.zeros(1, dtype=torch.long)].tolist()
            ok = True
        except Exception:
            ok = False
        _READABLE[dtype] = ok
    return ok


def _no_values(t: torch.Tensor, storage: torch.UntypedStorage, nbytes: int) -> str | None:
    """Why `t`'s values cannot be read from its storage, or None when they can.

    Reading memory that is not there crashes the process: a FakeTensor's storage lives on the meta
    device, and a wrapper subclass (`_make_wrapper_subclass`) has a storage with no memory behind it.
    """
    device, dtype = _attr(t, "device"), _attr(t, "dtype")
    if device.type == "meta":
        return "meta tensor"
    if storage.device.type == "meta":
        return f"a {type(t).__name__} on {device.type}: its storage is on the meta device, no memory to read"
    wrapper = f"a {type(t).__name__} (wrapper subclass): its own storage has no memory; the data it wraps is elsewhere"
    try:
        ptr = storage.data_ptr()
    except RuntimeError:  # "invalid python storage": what _make_wrapper_subclass leaves behind
        return wrapper
    if nbytes and ptr == 0:
        return wrapper
    if not _readable(dtype):
        name = str(dtype).replace("torch.", "")
        return f"{name} holds packed bits torch cannot read as numbers; see them with t.view(torch.uint8)"
    return None


def base_index(t: torch.Tensor, among: Sequence[torch.Tensor]) -> int | None:
    """Position in `among` of `t._base` (the root tensor a view was made from); -1 if absent, None if not a view."""
    with torch._C.DisableTorchFunctionSubclass():
        base = _attr(t, "_base") if _TB._is_view(t) else None
    if base is None:
        return None
    return next((k for k, other in enumerate(among) if other is base), -1)


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when `a` and `b` are views over the same storage (writes through one can reach the other)."""
    return layout(a).storage_id == layout(b).storage_id


def read_storage(t: torch.Tensor, indices: list[int] | range) -> list[bool | int | float | complex] | None:
    """Values at the given storage positions of `t`'s storage, or None for meta tensors."""
    lay = layout(t)
    if not lay.has_values:
        return None
    idx = list(indices)
    if not idx:
        return []
    if min(idx) < 0 or max(idx) >= lay.storage_size:
        raise IndexError(f"storage positions must lie in [0, {lay.storage_size}); got {min(idx)}..{max(idx)}")
    with torch._C.DisableTorchFunctionSubclass():  # plain reads of the memory, whatever the subclass
        dtype, device = _attr(t, "dtype"), _attr(t, "device")
        flat = torch.empty(0, dtype=dtype, device=device)
        flat.set_(_TB.untyped_storage(t), 0, (lay.storage_size,), (1,))
        values = flat[torch.tensor(idx, dtype=torch.long, device=device)].cpu()
        return [v for v in values.tolist()]
