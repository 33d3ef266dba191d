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
    if getattr(t, "is_nested", False):
        raise LayoutError(
            "nested tensors hold several differently-shaped tensors and have no single strided "
            "layout; look at one component, e.g. t.unbind()[0]."
        )
    if t.layout != torch.strided:
        raise LayoutError(
            f"{t.layout} tensors keep indices and values in separate arrays, not one strided "
            "storage; call .to_dense() to see a strided layout."
        )
    if t.is_quantized:
        raise LayoutError(
            "quantized tensors carry scale and zero point beside their storage; use "
            "t.int_repr() to see the stored integers' layout or t.dequantize() for values."
        )
    return t


def layout(t: torch.Tensor) -> Layout:
    """Read the strided layout of `t`: shape, stride, storage offset, dtype and storage identity."""
    t = _require_strided_tensor(t)
    try:
        storage = t.untyped_storage()
        storage_id = int(storage._cdata)
        nbytes = int(storage.nbytes())
        stride = tuple(int(s) for s in t.stride())
        offset = int(t.storage_offset())
        no_values = _no_values(t, storage, nbytes)
    except (RuntimeError, NotImplementedError) as e:  # functorch wrappers, some subclasses
        raise LayoutError(
            f"this {type(t).__name__} does not expose a plain storage ({e}). "
            "Use a regular tensor, e.g. t.detach().clone()."
        ) from e
    try:
        version: int | None = int(t._version)
    except RuntimeError:  # inference tensors do not track versions
        version = None
    return Layout(
        shape=tuple(int(n) for n in t.shape),
        stride=stride,
        offset=offset,
        itemsize=int(t.element_size()),
        dtype=str(t.dtype),
        device=str(t.device),
        storage_id=storage_id,
        storage_nbytes=nbytes,
        is_contiguous=bool(t.is_contiguous()),
        is_view=bool(t._is_view()),
        version=version,
        requires_grad=bool(t.requires_grad),
        has_values=no_values is None,
        no_values=no_values,
    )


def _no_values(t: torch.Tensor, storage: torch.UntypedStorage, nbytes: int) -> str | None:
    """Why `t`'s values cannot be read from its storage, or None when they can.

    Reading memory that is not there crashes the process: a FakeTensor's storage lives on the meta
    device, and a wrapper subclass (`_make_wrapper_subclass`) has a storage with no memory behind it.
    """
    if t.device.type == "meta":
        return "meta tensor"
    if storage.device.type == "meta":
        return f"a {type(t).__name__} on {t.device.type}: its storage is on the meta device, no memory to read"
    wrapper = f"a {type(t).__name__} (wrapper subclass): its own storage has no memory; the data it wraps is elsewhere"
    try:
        if nbytes and storage.data_ptr() == 0:
            return wrapper
    except RuntimeError:  # "invalid python storage": what _make_wrapper_subclass leaves behind
        return wrapper
    return None


def base_index(t: torch.Tensor, among: Sequence[torch.Tensor]) -> int | None:
    """Position in `among` of `t._base` (the root tensor a view was made from); -1 if absent, None if not a view."""
    base = t._base if t._is_view() else None
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
    flat = torch.empty(0, dtype=t.dtype, device=t.device)
    flat.set_(t.untyped_storage(), 0, (lay.storage_size,), (1,))
    values = flat[torch.tensor(idx, dtype=torch.long, device=t.device)].cpu()
    return [v for v in values.tolist()]
