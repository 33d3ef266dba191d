"""The stride diagram widget: storages as strips, tensors as grids, selection synced with Python."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import traitlets as t

from ..lenses.layout import base_index, layout, read_storage
from ..render.stride import TensorView, stride_model, stride_svg, stride_text
from ._base import FallbackWidget, bundle


class StrideDiagram(FallbackWidget):
    """Live stride diagram. `selection` is set by clicks in the browser and may be set from Python.

    selection = {"storage": "S0", "cell": storage index, "elements": [[tensor index, flat element], ...]}
    or {} when nothing is selected.
    """

    _esm = bundle("stride")
    model = t.Dict().tag(sync=True)
    selection = t.Dict().tag(sync=True)

    def static_svg(self) -> str:
        return stride_svg(self.model)

    def static_text(self) -> str:
        return stride_text(self.model)

    def select_element(self, tensor: int | str, index: Sequence[int] | int) -> dict[str, Any]:
        """Select a logical element (by multi-index or flat row-major index), as a click would."""
        tm = self._tensor(tensor)
        flat = index if isinstance(index, int) else _flat(index, tm["shape"])
        for el in tm["elements"]:
            if el["e"] == flat:
                return self.select_cell(tm["storage"], el["s"])
        raise IndexError(f"element {index} of {tm['name']} is not drawn (the diagram shows {tm['shown']} elements)")

    def select_cell(self, storage: str, cell: int) -> dict[str, Any]:
        """Select a storage cell: every drawn element reading it is selected too."""
        if not any(s["id"] == storage for s in self.model["storages"]):
            raise KeyError(f"no storage {storage!r}; storages are {[s['id'] for s in self.model['storages']]}")
        elements = [
            [tm["index"], el["e"]]
            for tm in self.model["tensors"]
            if tm["storage"] == storage
            for el in tm["elements"]
            if el["s"] == cell
        ]
        self.selection = {"storage": storage, "cell": cell, "elements": elements}
        return self.selection

    def _tensor(self, tensor: int | str) -> dict[str, Any]:
        for tm in self.model["tensors"]:
            if tm["index"] == tensor or tm["name"] == tensor:
                return tm
        raise KeyError(f"no tensor {tensor!r}; tensors are {[tm['name'] for tm in self.model['tensors']]}")


def _flat(index: Sequence[int], shape: Sequence[int]) -> int:
    if len(index) != len(shape):
        raise IndexError(f"index {tuple(index)} does not match shape {tuple(shape)}")
    e = 0
    for i, n in zip(index, shape):
        if not 0 <= i < n:
            raise IndexError(f"index {tuple(index)} is out of range for shape {tuple(shape)}")
        e = e * n + i
    return e


def stride_diagram(
    *tensors: torch.Tensor,
    names: Sequence[str] | None = None,
    max_elements: int = 384,
    max_storage_cells: int = 512,
) -> StrideDiagram:
    """Draw tensors over their storages; views of one storage share a strip, copies get their own."""
    if not tensors:
        raise ValueError("stride_diagram needs at least one tensor, e.g. stride_diagram(x, x.t())")
    if names is None:
        names = [f"t{k}" for k in range(len(tensors))]
    elif isinstance(names, str) or len(names) != len(tensors):
        raise ValueError(f"names must be a sequence of {len(tensors)} strings, one per tensor; got {names!r}")
    layouts = [layout(x) for x in tensors]  # raises LayoutError with advice on bad input
    views = []
    for name, x, lay in zip(names, tensors, layouts):
        k = base_index(x, tensors)
        base = None if k is None else ("an unnamed tensor" if k < 0 else str(names[k]))
        views.append(TensorView(name=str(name), layout=lay, base=base))
    def read(k: int, cells: list[int]) -> list[Any] | None:
        return read_storage(tensors[k], cells)

    model = stride_model(views, read, max_elements=max_elements, max_storage_cells=max_storage_cells)
    return StrideDiagram(model=model)
