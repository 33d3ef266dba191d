"""The grad_fn graph widget: the backward graph laid out once, clicked, stepped through and focused live.

The `model` trait is `render.grad_graph.grad_graph_model`'s picture (the browser draws it with the same
geometry as the static SVG). The lens's graph dict stays on the Python object, not in a trait: a
`focus`/`hops` change (from Python or the page's "focus ±N" action) recomputes `model` here, so only
the picture travels. `selected` (a drawn node id) and `step` (-1 = before backward) are set by clicks
and the step controls, and may be set from Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
import traitlets as t
from torch import nn
from torch.autograd.graph import Node

from ..lenses.autograd import BackwardRecording, GradGraph, grad_graph
from ..render.grad_graph import grad_graph_model, grad_graph_svg, grad_graph_text
from ._base import FallbackWidget, bundle

__all__ = ["GradGraphWidget", "node_details", "show_grad_graph"]


def _shown(model: dict[str, Any], node_id: int) -> dict[str, Any]:
    for nd in model.get("nodes", []):
        if nd["id"] == node_id:
            return nd
    ids = [nd["id"] for nd in model.get("nodes", [])]
    raise KeyError(
        f"node {node_id!r} is not drawn; drawn node ids are {ids[:12]}{' ...' if len(ids) > 12 else ''}. "
        "Nodes outside the view come back with w.focus = None (or a focus on a nearer node)."
    )


def node_details(model: dict[str, Any], node_id: int, step: int = -1) -> dict[str, Any]:
    """What the details panel shows for a drawn node at backward step `step` (the TS widget computes the same).

    `state` is None without a recording, else "running" (it runs at `step`), "done" (ran before),
    "waiting" (runs later) or "not run". A saved tensor is `freed` if the graph says so or the
    recording released it at or before `step`.
    """
    nd = _shown(model, node_id)
    steps = model.get("steps") or []
    ran_at = [s["step"] for s in steps if s["node"] == node_id]
    freed_at = next((s["step"] for s in steps if node_id in s["freed"]), None)
    released = freed_at is not None and freed_at <= step
    saved = [dict(s, freed=bool(s.get("freed")) or released) for s in nd["saved"]]
    state: str | None = None
    if steps:
        if 0 <= step < len(steps) and steps[step]["node"] == node_id:
            state = "running"
        elif any(k < step for k in ran_at):
            state = "done"
        else:
            state = "waiting" if ran_at else "not run"
    first = next((s for s in steps if s["node"] == node_id and s["orig"] == node_id), None)
    return {
        "id": nd["id"],
        "name": nd["name"],
        "label": nd["label"],
        "kind": nd["kind"],
        "param": nd["param"],
        "shape": nd["shape"],
        "seq": nd["seq"],
        "hooks": dict(nd["hooks"]),
        "saved": saved,
        "saved_nbytes": nd["saved_nbytes"],
        "held_nbytes": sum(int(s.get("nbytes") or 0) for s in saved if not s["freed"]),
        "hidden": nd["hidden"],
        "group": nd["group"],
        "block": nd["block"],
        "state": state,
        "ran_at": ran_at,
        "freed_at": freed_at,
        "grads": [] if first is None else first["grads"],
    }


class GradGraphWidget(FallbackWidget):
    """Live grad_fn graph. Traits: `model` (the picture), `selected` (drawn node id or None), `step`
    (-1 before backward, else an index into ``model["steps"]``), `focus`/`hops` (view N hops around
    a node of the graph; None shows the whole graph). Build it with `show_grad_graph`.
    """

    _esm = bundle("gradgraph")
    model = t.Dict().tag(sync=True)
    selected = t.Int(None, allow_none=True).tag(sync=True)
    step = t.Int(-1).tag(sync=True)
    focus = t.Int(None, allow_none=True).tag(sync=True)
    hops = t.Int(2).tag(sync=True)

    def __init__(
        self,
        graph: dict[str, Any],
        recording: dict[str, Any] | None = None,
        *,
        focus: int | None = None,
        hops: int = 2,
        collapse: bool = True,
        max_nodes: int | None = 2000,
    ) -> None:
        self._graph = graph
        self._recording = recording
        self._collapse = collapse
        self._max_nodes = max_nodes
        self._view: tuple[int | None, int] | None = None
        self._graph_ids = {nd["id"] for nd in graph.get("nodes", [])}
        model = self._compute(focus, hops)
        super().__init__(model=model, focus=focus, hops=hops)

    # -- traits -------------------------------------------------------------------------------------

    @t.validate("selected")
    def _valid_selected(self, proposal: Any) -> int | None:
        value = proposal["value"]
        if value is not None:
            try:
                _shown(self.model, value)
            except KeyError as exc:
                raise t.TraitError(str(exc.args[0])) from None
        return value

    @t.validate("step")
    def _valid_step(self, proposal: Any) -> int:
        value = proposal["value"]
        n = len(self.model.get("steps") or [])
        if not -1 <= value < n:
            raise t.TraitError(
                f"step {value} is out of range: -1 (before backward) .. {n - 1}"
                + ("" if n else "; this graph has no recorded backward (pass recording=record_backward(loss))")
            )
        return value

    @t.validate("focus")
    def _valid_focus(self, proposal: Any) -> int | None:
        value = proposal["value"]
        if value is not None and value not in self._graph_ids:
            what = "a collapsed group" if any(nd["id"] == value for nd in self.model.get("nodes", [])) else "not a node"
            raise t.TraitError(
                f"cannot focus on {value!r}: it is {what} of the graph; focus on one of its node ids "
                f"(0..{max(self._graph_ids, default=-1)}), e.g. a node of the block drawn once"
            )
        return value

    @t.validate("hops")
    def _valid_hops(self, proposal: Any) -> int:
        value = proposal["value"]
        if value < 0:
            raise t.TraitError(f"hops must be >= 0, got {value}")
        return value

    @t.observe("focus", "hops")
    def _refocus(self, change: Any) -> None:
        model = self._compute(self.focus, self.hops)
        if model is None:
            return
        if self.selected is not None and not any(nd["id"] == self.selected for nd in model["nodes"]):
            self.selected = None
        self.model = model

    def _compute(self, focus: int | None, hops: int) -> Any:
        """The picture for this focus (None if it is the one already shown)."""
        view = (focus, hops if focus is not None else -1)
        if view == self._view:
            return None
        model = grad_graph_model(
            self._graph,
            self._recording,
            focus_node=focus,
            hops=hops if focus is not None else None,
            collapse=self._collapse,
            max_nodes=self._max_nodes,
        )
        self._view = view
        return model

    # -- Python API ---------------------------------------------------------------------------------

    @property
    def graph(self) -> dict[str, Any]:
        """The full graph dict (the lens's `to_dict()`) the pictures are computed from."""
        return self._graph

    def select(self, node_id: int | None) -> dict[str, Any] | None:
        """Select a drawn node, as a click would; returns its details (None clears the selection)."""
        try:
            self.selected = node_id
        except t.TraitError as exc:
            raise KeyError(str(exc)) from None
        return None if node_id is None else self.details(node_id)

    def step_to(self, i: int) -> dict[str, Any] | None:
        """Show backward step `i` (-1: before backward), as the step controls would; returns that step."""
        try:
            self.step = i
        except t.TraitError as exc:
            raise IndexError(str(exc)) from None
        return None if i < 0 else self.model["steps"][i]

    def details(self, node_id: int | None = None) -> dict[str, Any]:
        """What the details panel shows for `node_id` (default: the selected node) at the current step."""
        if node_id is None:
            node_id = self.selected
        if node_id is None:
            raise ValueError("no node is selected: click one, or pass a node id, e.g. w.details(0)")
        return node_details(self.model, node_id, self.step)

    def running(self) -> int | None:
        """The drawn node running at the current step (None before backward or out of view)."""
        steps = self.model.get("steps") or []
        return steps[self.step]["node"] if 0 <= self.step < len(steps) else None

    def static_svg(self) -> str:
        return grad_graph_svg(self.model)

    def static_text(self) -> str:
        return grad_graph_text(self.model)


Params = Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]] | nn.Module | None


def _with_names(before: GradGraph, named: GradGraph) -> dict[str, Any]:
    """`before`'s dict (saved tensors as they were before backward) with names taken from `named`."""
    if len(before.fns) != len(named.fns) or any(a is not b for a, b in zip(before.fns, named.fns)):
        raise ValueError(
            "the recording is of a different graph than these roots: pass the root that was recorded "
            "(show_grad_graph(loss, recording=record_backward(loss))), or the recording alone"
        )
    out = before.to_dict()
    for nd, other in zip(out["nodes"], named.nodes):
        if nd["param"] is None:
            nd["param"] = other.param
    return out


def show_grad_graph(
    *roots: torch.Tensor | Node | GradGraph,
    params: Params = None,
    names: Mapping[str, torch.Tensor] | None = None,
    recording: BackwardRecording | dict[str, Any] | None = None,
    focus: int | None = None,
    hops: int = 2,
    collapse: bool = True,
    max_nodes: int | None = 2000,
) -> GradGraphWidget:
    """Show the backward graph of `roots` (tensors, grad_fn nodes, or one built `GradGraph`) live.

    `recording` (from `record_backward`) adds the step controls. With a `BackwardRecording`, saved
    tensors are shown as they were before backward (the recording's own graph) and freed step by
    step; `params=model` / `names=` name the leaves. `focus`/`hops` start on N hops around a node.
    """
    if len(roots) == 1 and isinstance(roots[0], GradGraph):
        if params is not None or names is not None:
            raise ValueError("params=/names= name leaves while the graph is built; pass them to grad_graph(...)")
        built: GradGraph | None = roots[0]
    elif roots:
        built = grad_graph(*roots, params=params, names=names)  # type: ignore[arg-type]  # the lens checks each root
    elif isinstance(recording, BackwardRecording):
        built = None
        if params is not None or names is not None:
            root_fns = [recording.graph.fns[r] for r in recording.graph.roots]
            built = grad_graph(*root_fns, params=params, names=names)
    else:
        raise TypeError(
            "show_grad_graph needs the output of a computation, e.g. show_grad_graph(loss), "
            "or recording=record_backward(loss)"
        )
    rec: dict[str, Any] | None = None
    if isinstance(recording, BackwardRecording):
        graph = recording.graph.to_dict() if built is None or built is recording.graph else _with_names(recording.graph, built)
        rec = recording.to_dict()
    elif isinstance(recording, dict):
        assert built is not None
        graph, rec = built.to_dict(), recording
    elif recording is None:
        assert built is not None
        graph = built.to_dict()
    else:
        raise TypeError(f"recording must be a BackwardRecording (record_backward(...)) or its to_dict(), "
                        f"got {type(recording).__name__}")
    return GradGraphWidget(graph, rec, focus=focus, hops=hops, collapse=collapse, max_nodes=max_nodes)
