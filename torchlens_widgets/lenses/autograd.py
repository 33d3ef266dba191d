"""The autograd lens: the backward graph behind a tensor's ``grad_fn``, and one backward call, as plain data.

`grad_graph` walks ``grad_fn.next_functions`` from the roots and describes every autograd node: its
name, the leaf it feeds, the tensors it saved for backward (shape, dtype, bytes, freed or not, alias
of an input or of the output), hooks and sequence number. `record_backward` runs one ``backward()``
with temporary hooks on every node and records the order the engine ran them, time per node, the
gradients' shapes and when saved tensors were released.

What torch does not expose, and how it is handled (details in the docstrings below):

- Node hooks have no getter. `hooks` counts are read by registering a no-op hook and reading the
  handle's hook dict (then removing it), which counts hooks registered with ``node.register_hook`` /
  ``node.register_prehook``; tensor hooks (``t.register_hook``) live elsewhere and are not counted.
  Like any ``register_hook(...).remove()``, the probe leaves an empty hook dict on the node.
- A saved tensor released by backward keeps no metadata: its shape, dtype and bytes are ``None``/0,
  except a saved output (``result``), whose shape is still in the node's input metadata. Build the
  graph before backward to keep the metadata (`record_backward` does). A custom Function's released
  ``ctx.saved_tensors`` no longer say how many there were: one placeholder ``saved_tensors`` entry.
- Saved tensors of built-in ops are listed by attribute name in alphabetical order (``other``, ``self``);
  a custom Function's as ``saved_0``, ``saved_1``, ... in ``save_for_backward`` order.
- Non-tensor saved attributes (``_saved_dim``, ``_saved_self_sym_sizes``, ...) are left out.

Memory accounting (`GradGraph.total_saved_bytes`) is by *storage*, not by tensor: a saved view
(``weight.t()``, a reshape of an activation) keeps its whole storage alive and costs nothing more than
the storage itself, so each distinct storage counts once, with the storage's bytes. A *leaf storage*
is the storage of a leaf tensor of the graph (an AccumulateGrad ``.variable``): saved tensors on it,
views included, are not activation memory. Per-entry ``nbytes`` stay the tensor's own bytes.
"""

from __future__ import annotations

import gc
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import torch
from torch import nn
from torch.autograd.graph import Node

__all__ = [
    "BackwardRecording",
    "GradGraphError",
    "GradEdge",
    "GradGraph",
    "GradNode",
    "SavedTensorInfo",
    "grad_graph",
    "record_backward",
]

Kind = Literal["op", "leaf", "custom", "other"]
Alias = Literal["input", "output"]

_NO_SEQ = 2**64 - 1  # AccumulateGrad and other nodes outside the forward order report UINT64_MAX
# Forward-argument names that derivatives.yaml saves; an unmatched saved tensor with one of them is an input.
_INPUT_NAMES = frozenset(
    "self other input weight bias mat1 mat2 vec vec1 vec2 batch1 batch2 tensor1 tensor2 exponent target "
    "mask src source index end value grad_output".split()
)


@dataclass(frozen=True)
class SavedTensorInfo:
    """One tensor a node saved for backward; `packed` when a saved_tensors_hooks pack hook replaced it.

    `nbytes`: the tensor's own bytes (numel × itemsize). `storage_nbytes`: the bytes it keeps alive, its
    whole storage (a packed non-tensor: the bytes of the tensors inside). `leaf`: it lives on the
    storage of a leaf of the graph (a parameter or an input requiring grad), so it is no activation memory.
    """

    name: str
    shape: tuple[int | str, ...] | None  # a symbolic size is its symbol, e.g. "s0"
    dtype: str | None
    nbytes: int
    freed: bool
    alias: Alias | None
    packed: bool = False
    storage_nbytes: int = 0
    leaf: bool = False
    key: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)  # storage identity, for de-duplication

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": None if self.shape is None else list(self.shape),
            "dtype": self.dtype,
            "nbytes": self.nbytes,
            "storage_nbytes": self.storage_nbytes,
            "freed": self.freed,
            "alias": self.alias,
            "leaf": self.leaf,
        }


@dataclass(frozen=True)
class GradNode:
    """One autograd node: what runs during backward for one forward op (or a leaf's AccumulateGrad)."""

    id: int
    name: str
    kind: Kind
    param: str | None
    shape: tuple[int | str, ...] | None  # a symbolic size is its symbol, e.g. "s0"
    saved: tuple[SavedTensorInfo, ...]
    hooks_pre: int
    hooks_post: int
    seq: int | None

    @property
    def saved_bytes(self) -> int:
        """Bytes of this node's saved tensors that are still held."""
        return sum(s.nbytes for s in self.saved if not s.freed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "param": self.param,
            "shape": None if self.shape is None else list(self.shape),
            "saved": [s.to_dict() for s in self.saved],
            "hooks": {"pre": self.hooks_pre, "post": self.hooks_post},
            "seq": self.seq,
        }


@dataclass(frozen=True)
class GradEdge:
    """`src.next_functions[slot]` is `dst`: during backward the gradient flows from src to dst."""

    src: int
    dst: int
    slot: int

    def to_dict(self) -> dict[str, int]:
        return {"src": self.src, "dst": self.dst, "slot": self.slot}


@dataclass
class GradGraph:
    """The autograd graph reachable from some roots; node ids are BFS order from the roots.

    The graph keeps references to the autograd nodes (as ``loss.grad_fn`` does) so that
    `record_backward` can hook them; drop the graph to let them go.
    """

    nodes: list[GradNode]
    edges: list[GradEdge]
    roots: list[int]
    fns: list[Node] = field(default_factory=list, repr=False, compare=False)
    _out: list[list[int]] | None = field(default=None, init=False, repr=False, compare=False)
    _in: list[list[int]] | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, id: int) -> GradNode:
        """The node with this id."""
        if not 0 <= id < len(self.nodes):
            raise IndexError(f"node id {id} is out of range; this graph has ids 0..{len(self.nodes) - 1}")
        return self.nodes[id]

    def _adjacency(self) -> tuple[list[list[int]], list[list[int]]]:
        if self._out is None or self._in is None:
            out: list[list[int]] = [[] for _ in self.nodes]
            inn: list[list[int]] = [[] for _ in self.nodes]
            for e in self.edges:
                out[e.src].append(e.dst)
                inn[e.dst].append(e.src)
            self._out, self._in = out, inn
        return self._out, self._in

    def children(self, id: int) -> list[int]:
        """Nodes this one sends gradients to (its next_functions), in slot order."""
        self.node(id)
        return list(self._adjacency()[0][id])

    def parents(self, id: int) -> list[int]:
        """Nodes that send gradients to this one (they run before it during backward)."""
        self.node(id)
        return list(self._adjacency()[1][id])

    def by_name(self, name: str) -> GradNode:
        """The node whose `param` is `name` (a leaf's AccumulateGrad, or the node that made a named tensor)."""
        for n in self.nodes:
            if n.param == name:
                return n
        known = sorted({n.param for n in self.nodes if n.param is not None})
        raise KeyError(
            f"no node is named {name!r}; named nodes: {known[:10]}{' ...' if len(known) > 10 else ''}. "
            "Pass params=model or names={'x': x} to grad_graph to name leaves."
        )

    def find(self, name: str) -> list[GradNode]:
        """All nodes with this op name, e.g. ``find('MulBackward0')``."""
        return [n for n in self.nodes if n.name == name]

    def total_saved_bytes(self, *, include_leaves: bool = True) -> int:
        """Bytes that saved tensors not yet freed keep alive: each distinct storage once, with its full size.

        A saved view keeps its whole storage alive, so the storage's bytes (not the view's) are what the
        graph holds; views of one storage, saved by one node or several, count once. Under
        saved_tensors_hooks a pack hook that returned a tensor is counted by that tensor's storage; one
        that returned anything else counts the bytes of the tensors inside it, per saved slot.
        `include_leaves=False` leaves out leaf storages (parameters, inputs requiring grad, and views of
        them such as ``weight.t()``): they stay alive anyway, so what remains is the activation memory.
        Saved tensors that require no grad and are not in the graph (a batch of data) still count.
        """
        seen: set[tuple[Any, ...]] = set()
        total = 0
        for n in self.nodes:
            for s in n.saved:
                if s.freed or (not include_leaves and s.leaf):
                    continue
                if s.key is None:  # no storage identity (a packed non-tensor): counted per slot
                    total += s.storage_nbytes
                elif s.key not in seen:
                    seen.add(s.key)
                    total += s.storage_nbytes
        return total

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``{"nodes": [...], "edges": [...], "roots": [...]}`` (schema in the module docs)."""
        tensor_ids: dict[tuple[Any, ...], int] = {}
        nodes = []
        for n in self.nodes:
            d = n.to_dict()
            for info, saved in zip(n.saved, d["saved"]):  # "tensor": the same number for one storage saved twice
                saved["tensor"] = None if info.key is None else tensor_ids.setdefault(info.key, len(tensor_ids))
            nodes.append(d)
        return {"nodes": nodes, "edges": [e.to_dict() for e in self.edges], "roots": list(self.roots)}

    def summary(self) -> str:
        """Deterministic text, one line per node (no addresses, no timings)."""
        out, _ = self._adjacency()
        head = (
            f"grad graph: {len(self.nodes)} nodes, {len(self.edges)} edges, roots {self.roots}, "
            f"saved {_fmt_bytes(self.total_saved_bytes())}"
        )
        lines = [head]
        for n in self.nodes:
            parts = [f"#{n.id} {n.name}"]
            if n.param is not None:
                parts.append(n.param)
            if n.shape is not None:
                parts.append(_fmt_shape(n.shape))
            if out[n.id]:
                parts.append("→ " + ", ".join(f"#{d}" for d in out[n.id]))
            if n.saved:
                parts.append("← saved " + ", ".join(_fmt_saved(s) for s in n.saved))
            if n.hooks_pre or n.hooks_post:
                parts.append(f"[hooks pre {n.hooks_pre} post {n.hooks_post}]")
            lines.append(" ".join(parts))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _fmt_shape(shape: tuple[int | str, ...] | None) -> str:
    return "[?]" if shape is None else "[" + ", ".join(str(d) for d in shape) + "]"


def _fmt_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 1024**2 else f"{n / 1024**2:.1f} MiB" if n < 1024**3 else f"{n / 1024**3:.1f} GiB"


def _fmt_saved(s: SavedTensorInfo) -> str:
    dtype = (s.dtype or "?").replace("torch.", "")
    notes = [_fmt_bytes(s.nbytes)] + (["freed"] if s.freed else []) + (["packed"] if s.packed else [])
    alias = f" ={s.alias}" if s.alias else ""
    return f"{s.name}{alias} {_fmt_shape(s.shape)} {dtype} ({', '.join(notes)})"


# ----------------------------------------------------------------------------------------------- walking


class GradGraphError(TypeError, ValueError):
    """grad_graph was given something it cannot walk; the message says what to pass instead."""


def _dim(n: Any) -> int | str:
    """A size as an int, or its symbol ("s0", "j1" for a nested tensor's ragged dim) when it is symbolic.

    Never `int(n)` on a SymInt: that would add a guard to the user's ShapeEnv (specialise their program).
    """
    if isinstance(n, int):
        return int(n)
    node = getattr(n, "node", None)
    known = node.maybe_as_int() if node is not None and hasattr(node, "maybe_as_int") else None
    return int(known) if known is not None else str(n)


def _count(n: Any) -> int:
    """A byte or element count as an int: a symbolic one at its example value (hint), 0 when it has none."""
    d = _dim(n)
    if isinstance(d, int):
        return d
    hint = getattr(getattr(n, "node", None), "hint", None)
    return int(hint) if isinstance(hint, int) else 0


def _shape(t: torch.Tensor) -> tuple[int | str, ...] | None:
    """The shape (symbolic sizes as their symbol), or None for tensors without one (strided nested tensors)."""
    try:
        return tuple(_dim(n) for n in t.shape)
    except (RuntimeError, TypeError, AttributeError, NotImplementedError):
        return None


def _nbytes(t: torch.Tensor) -> int:
    """Bytes a tensor holds: sparse tensors hold indices and values, nested ones their components."""
    try:
        if t.is_sparse:
            return _nbytes(t._indices()) + _nbytes(t._values())
        if t.is_nested:
            return sum(_nbytes(c) for c in t.unbind())
        return _count(t.numel()) * t.element_size()
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return 0


def _root_node(t: object, k: int) -> Node:
    if isinstance(t, Node):
        return t
    if not isinstance(t, torch.Tensor):
        raise GradGraphError(
            f"grad_graph roots must be tensors (or grad_fn nodes); root {k} is a {type(t).__name__}. "
            "Pass the output of a computation, e.g. grad_graph(loss)."
        )
    if t.grad_fn is not None:
        return t.grad_fn
    if t.requires_grad:  # a leaf: its graph is its AccumulateGrad node alone
        return _accumulate_grad(t, k)
    raise GradGraphError(
        f"root {k} has no grad_fn: the tensor does not require grad or was made under torch.no_grad(). "
        "Call .requires_grad_() on a leaf (e.g. the input or the weights) or compute it with grad enabled."
    )


def _accumulate_grad(t: torch.Tensor, k: int) -> Node:
    """A leaf's AccumulateGrad node. torch finds it through `t.view_as(t)`, which sparse and nested tensors
    lack; `unbind()[0]` (a view) or, last, `clone()` reach the same node from their grad_fn."""
    probes: list[Callable[[torch.Tensor], torch.Tensor]] = [
        lambda x: x.view_as(x), lambda x: x.unbind()[0], lambda x: x.clone()
    ]
    for probe in probes:
        try:
            with torch.enable_grad():
                fn = probe(t).grad_fn
            node = fn.next_functions[0][0] if fn is not None and fn.next_functions else None
        except (RuntimeError, NotImplementedError, TypeError, IndexError, ValueError):
            continue
        if node is not None and getattr(node, "variable", None) is t:
            return node
    raise GradGraphError(
        f"root {k} is a leaf whose AccumulateGrad node torch does not expose ({t.layout}, {type(t).__name__}); "
        "pass a tensor computed from it instead, e.g. grad_graph((x * 1).sum())."
    )


def _short(x: object) -> str:
    r = repr(x)
    return r if len(r) <= 40 else r[:37] + "..."


def _name_map(
    params: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]] | nn.Module | None,
    names: Mapping[str, torch.Tensor] | None,
) -> tuple[dict[int, str], dict[int, str], list[Any]]:
    """id(leaf tensor) → name and id(grad_fn) → name (for named non-leaf tensors); plus objects to keep alive."""
    pairs: list[tuple[Any, Any]] = []
    if isinstance(params, nn.Module):
        pairs.extend(params.named_parameters())
    elif isinstance(params, Mapping):
        pairs.extend(params.items())
    elif params is not None:
        how = "params must be a module, a mapping name -> tensor, or (name, tensor) pairs, e.g. params=model"
        if isinstance(params, (str, bytes, torch.Tensor)) or not isinstance(params, Iterable):
            raise GradGraphError(f"{how}; got {type(params).__name__}")
        for item in params:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise GradGraphError(f"{how}; got an entry {_short(item)}")
            pairs.append(item)
            if len(pairs) > _MAX_NAMES:
                raise GradGraphError(f"params gave more than {_MAX_NAMES:,} entries (an endless iterator?); "
                                     "pass a module or a finite mapping, e.g. params=dict(model.named_parameters())")
    if names is not None:
        if not isinstance(names, Mapping):
            raise GradGraphError(f"names must map a name to a tensor, e.g. names={{'x': x}}; got {type(names).__name__}")
        pairs.extend(names.items())
    leaves: dict[int, str] = {}
    made: dict[int, str] = {}
    alive: list[Any] = []
    for name, t in pairs:
        if not isinstance(name, str):
            raise GradGraphError(f"names must be strings; got {_short(name)} for a {type(t).__name__}. "
                                 "Pass e.g. names={'w': w} or params=model")
        if not isinstance(t, torch.Tensor):
            raise GradGraphError(f"{name!r} names a {type(t).__name__}; params and names must map names to tensors, "
                                 "e.g. params=model or names={'w': w}")
        alive.append(t)
        if t.grad_fn is not None:
            alive.append(t.grad_fn)
            made[id(alive[-1])] = name
        else:
            leaves[id(t)] = name
    return leaves, made, alive


_MAX_NAMES = 1_000_000
_SAVED_ATTRS: dict[type, tuple[str, ...]] = {}


def _saved_attrs(fn: Node) -> tuple[str, ...]:
    """Names X of a node type's saved tensors (it has ``_raw_saved_X``), cached per node type."""
    cls = type(fn)
    names = _SAVED_ATTRS.get(cls)
    if names is None:
        names = tuple(a[len("_raw_saved_") :] for a in dir(fn) if a.startswith("_raw_saved_"))
        _SAVED_ATTRS[cls] = names
    return names


def _kind(fn: Node, name: str) -> Kind:
    if name == "AccumulateGrad":
        return "leaf"
    if isinstance(fn, torch.autograd.function.BackwardCFunction):
        return "custom"
    if name.rstrip("0123456789").endswith("Backward"):
        return "op"
    return "other"


def _noop_pre(grad_outputs: Any) -> None:
    return None


def _noop_post(grad_inputs: Any, grad_outputs: Any) -> None:
    return None


def _hook_counts(fn: Node) -> tuple[int, int]:
    """Pre- and post-hooks registered on `fn` through Python, read from a probe hook's handle."""
    counts = []
    for register, noop in ((fn.register_prehook, _noop_pre), (fn.register_hook, _noop_post)):
        h = register(noop)  # type: ignore[operator]
        try:
            d = h.hooks_dict_ref()
            counts.append(len(d) - 1 if d is not None else 0)
        finally:
            h.remove()
    return counts[0], counts[1]


def _storage(t: torch.Tensor) -> tuple[tuple[Any, ...], int]:
    """(identity, bytes) of the storage behind `t`; views of one storage share both.

    A tensor without an accessible storage (sparse, some subclasses) is its own identity, with its own bytes.
    """
    try:
        st = t.untyped_storage()
        return ("storage", str(t.device), st._cdata), _count(st.nbytes())
    except (NotImplementedError, RuntimeError, TypeError):
        return ("tensor", id(t), t.dtype, str(t.device)), _nbytes(t)


def _alias(fn: Node, name: str, data: torch.Tensor, kind: Kind, unpack: Callable[[], Any]) -> Alias | None:
    """Whether a saved tensor is the node's output or one of its inputs (see `grad_graph` for the rules)."""
    gf = data.grad_fn
    if gf is not None:
        if gf is fn:
            return "output"
        nr = data.output_nr
        if any(f is gf and i == nr for f, i in fn.next_functions):
            return "input"
    elif data.requires_grad:  # a leaf: matched by its AccumulateGrad
        if any(f is not None and getattr(f, "variable", None) is data for f, _ in fn.next_functions):
            return "input"
    base = name.split("[", 1)[0]
    if base.startswith("result"):
        return "output"
    if data.grad_fn is None and not data.requires_grad:
        try:  # outputs are stored detached; unpacking gives them back their grad_fn (this node)
            t = unpack()
        except RuntimeError:
            t = None
        if isinstance(t, torch.Tensor) and t.grad_fn is fn:
            return "output"
    if kind == "op" and base in _INPUT_NAMES:
        return "input"
    return None


def _tensors_in(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors_in(o)]
    return []


def _one_saved(
    fn: Node, name: str, raw: Any, kind: Kind, unpack: Callable[[], Any], leaf_storages: set[tuple[Any, ...]]
) -> SavedTensorInfo | None:
    if raw.unpack_hook is not None:  # saved_tensors_hooks: what is held is whatever the pack hook returned
        packed = raw.data
        if isinstance(packed, torch.Tensor):  # identified by its storage, like an unpacked saved tensor
            return _saved_tensor(name, packed, None, leaf_storages, packed=True)
        held = _tensors_in(packed)  # anything else: the bytes of the tensors inside, counted per slot
        one = held[0] if len(held) == 1 else None
        nbytes = sum(_nbytes(t) for t in held)
        return SavedTensorInfo(
            name=name,
            shape=None if one is None else _shape(one),
            dtype=None if one is None else str(one.dtype),
            nbytes=nbytes,
            freed=False,
            alias=None,
            packed=True,
            storage_nbytes=nbytes,
        )
    data = raw.data
    if data is None:  # released by backward, or an optional tensor that was None
        try:
            if unpack() is None:
                return None
        except RuntimeError:
            return _freed(fn, name, kind)
        return None  # pragma: no cover - data None but unpack gave a tensor: nothing to describe
    return _saved_tensor(name, data, _alias(fn, name, data, kind, unpack), leaf_storages)


def _saved_tensor(
    name: str, t: torch.Tensor, alias: Alias | None, leaf_storages: set[tuple[Any, ...]], packed: bool = False
) -> SavedTensorInfo:
    """A live saved tensor, identified by its storage (shared with a leaf: not activation memory)."""
    key, storage_nbytes = _storage(t)
    return SavedTensorInfo(
        name=name,
        shape=_shape(t),
        dtype=str(t.dtype),
        nbytes=_nbytes(t),
        freed=False,
        alias=alias,
        packed=packed,
        storage_nbytes=storage_nbytes,
        leaf=key in leaf_storages,
        key=key,
    )


def _freed(fn: Node, name: str, kind: Kind) -> SavedTensorInfo:
    """A released saved tensor: only a saved output (`result`) still has its shape, in the node's input metadata."""
    shape: tuple[int | str, ...] | None = None
    dtype: str | None = None
    if name == "result":
        meta = fn._input_metadata  # type: ignore[attr-defined]
        if len(meta) == 1:
            shape, dtype = _shape(meta[0]), str(meta[0].dtype)
    dims = [d for d in shape or () if isinstance(d, int)]
    nbytes = 0
    if shape is not None and dtype is not None and len(dims) == len(shape):  # symbolic: unknown, 0
        nbytes = math.prod(dims) * getattr(torch, dtype[6:]).itemsize
    base = name.split("[", 1)[0]
    alias: Alias | None = None
    if base.startswith("result"):
        alias = "output"
    elif kind == "op" and base in _INPUT_NAMES:
        alias = "input"
    return SavedTensorInfo(name, shape, dtype, nbytes, True, alias)


def _unpack_attr(fn: Node, attr: str, i: int | None) -> Any:
    """The unpacked saved tensor (item `i` of a saved list); raises RuntimeError once released."""
    value = getattr(fn, "_saved_" + attr)
    return value if i is None else value[i]


def _saved(fn: Node, kind: Kind, leaf_storages: set[tuple[Any, ...]]) -> tuple[SavedTensorInfo, ...]:
    out: list[SavedTensorInfo] = []
    if kind == "custom":
        try:
            raws = fn._raw_saved_tensors  # type: ignore[attr-defined]
        except RuntimeError:  # released: torch no longer tells how many there were
            return (SavedTensorInfo("saved_tensors", None, None, 0, True, None),)
        unpacked: list[tuple[Any, ...]] = []

        def unpack_custom(i: int) -> Any:
            if not unpacked:  # unpack once, only when an alias question needs it (no unpack hooks here)
                unpacked.append(tuple(fn.saved_tensors))  # type: ignore[attr-defined]
            return unpacked[0][i]

        for i, raw in enumerate(raws):
            info = _one_saved(fn, f"saved_{i}", raw, kind, partial(unpack_custom, i), leaf_storages)
            if info is not None:
                out.append(info)
        return tuple(out)
    for attr in _saved_attrs(fn):
        raw = getattr(fn, "_raw_saved_" + attr)
        if isinstance(raw, (tuple, list)):  # a list of tensors, e.g. IndexBackward0's indices
            for i, r in enumerate(raw):
                info = _one_saved(fn, f"{attr}[{i}]", r, kind, partial(_unpack_attr, fn, attr, i), leaf_storages)
                if info is not None:
                    out.append(info)
            continue
        info = _one_saved(fn, attr, raw, kind, partial(_unpack_attr, fn, attr, None), leaf_storages)
        if info is not None:
            out.append(info)
    return tuple(out)


def grad_graph(
    *roots: torch.Tensor | Node,
    params: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]] | nn.Module | None = None,
    names: Mapping[str, torch.Tensor] | None = None,
    hooks: bool = True,
) -> GradGraph:
    """Walk the autograd graph from the roots' ``grad_fn`` (breadth-first, iteratively) into plain data.

    Node ids follow BFS from the roots in ``next_functions`` order; ``None`` entries are skipped. A
    leaf requiring grad as a root gives its AccumulateGrad node alone. `params` (a module, a mapping
    or ``named_parameters()``) and `names` name leaves; a named non-leaf tensor names the node that
    produced it. Saved tensors are read without running saved_tensors_hooks' unpack hooks (no
    recomputation under checkpointing); such tensors are marked `packed` with the packed tensor's size.
    Alias rules: "output" when the saved tensor unpacks with this node as grad_fn or is named
    ``result*``; "input" when it is the tensor behind one of the node's edges, or (built-in ops) has a
    forward-argument name such as ``self``/``other``/``mat2``; otherwise None (e.g. a custom
    Function's intermediate). `hooks=False` skips the hook probe (counts reported as 0).
    """
    if not roots:
        raise GradGraphError("grad_graph needs at least one root, e.g. grad_graph(loss)")
    if not isinstance(hooks, bool):
        raise GradGraphError(f"hooks must be True or False; got {_short(hooks)}. Use e.g. grad_graph(loss, hooks=False)")
    was_enabled = gc.isenabled()
    gc.disable()  # the walk allocates many small objects and frees none: collections would only cost time
    try:
        return _walk(roots, params, names, hooks)
    finally:
        if was_enabled:
            gc.enable()


def _walk(
    roots: tuple[torch.Tensor | Node, ...],
    params: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]] | nn.Module | None,
    names: Mapping[str, torch.Tensor] | None,
    hooks: bool,
) -> GradGraph:
    leaf_names, made_names, alive = _name_map(params, names)
    ids: dict[int, int] = {}
    fns: list[Node] = []
    root_ids: list[int] = []
    queue: deque[Node] = deque()
    for k, r in enumerate(roots):
        fn = _root_node(r, k)
        if id(fn) not in ids:
            ids[id(fn)] = len(fns)
            fns.append(fn)
            queue.append(fn)
        if ids[id(fn)] not in root_ids:
            root_ids.append(ids[id(fn)])
    edges: list[GradEdge] = []
    nexts: list[tuple[tuple[Any, int], ...]] = []
    while queue:
        fn = queue.popleft()
        src = ids[id(fn)]
        nf = fn.next_functions
        nexts.append(nf)
        for slot, (child, _) in enumerate(nf):
            if child is None:
                continue
            dst = ids.get(id(child))
            if dst is None:
                dst = ids[id(child)] = len(fns)
                fns.append(child)
                queue.append(child)
            edges.append(GradEdge(src, dst, slot))
    # Leaf storages are known only once every AccumulateGrad is found: a node can save a view of a leaf
    # (AddmmBackward0 saves weight.t()) before the walk reaches that leaf.
    leaf_storages: set[tuple[Any, ...]] = set()
    for fn in fns:
        var = getattr(fn, "variable", None)
        if isinstance(var, torch.Tensor):
            leaf_storages.add(_storage(var)[0])
    nodes: list[GradNode] = []
    for i, fn in enumerate(fns):
        name = fn.name()
        if name.startswith("torch::autograd::"):
            name = name[len("torch::autograd::") :]
        kind = _kind(fn, name)
        param = made_names.get(id(fn))
        shape = None
        if kind == "leaf":
            var = fn.variable  # type: ignore[attr-defined]
            param = leaf_names.get(id(var), param)
            shape = _shape(var)
        seq = fn._sequence_nr()  # type: ignore[attr-defined]
        pre, post = _hook_counts(fn) if hooks else (0, 0)
        nodes.append(
            GradNode(
                id=i,
                name=name,
                kind=kind,
                param=param,
                shape=shape,
                saved=() if kind == "leaf" else _saved(fn, kind, leaf_storages),
                hooks_pre=pre,
                hooks_post=post,
                seq=None if seq == _NO_SEQ else int(seq),
            )
        )
    del alive
    return GradGraph(nodes=nodes, edges=edges, roots=root_ids, fns=fns)


# --------------------------------------------------------------------------------------------- recording


@dataclass
class BackwardRecording:
    """One backward call as the engine ran it; node ids are those of `graph` (built before backward).

    `order`: node ids in execution order (step i ran ``order[i]``); `seconds[i]`: wall time of step i
    between the node's pre-hook and post-hook. `grads[id]`: shapes of the gradients the node produced
    (one per next_functions slot, None where it produced none); for AccumulateGrad, the shape of the
    gradient it accumulated into ``.grad``. `freed_at[id]`: the step after which the node's saved
    tensors were found released (checked when the next node starts; nodes still holding them then are
    checked once more after backward and get the last step). `leaves[step]`: AccumulateGrad node ids
    that wrote ``.grad`` at that step.
    """

    graph: GradGraph
    order: list[int]
    seconds: list[float]
    grads: dict[int, list[list[int | str] | None]]
    freed_at: dict[int, int]
    leaves: dict[int, list[int]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the fields above, with dict keys as strings (as JSON needs)."""
        return {
            "order": list(self.order),
            "seconds": list(self.seconds),
            "grads": {str(k): v for k, v in self.grads.items()},
            "freed_at": {str(k): v for k, v in self.freed_at.items()},
            "leaves": {str(k): v for k, v in self.leaves.items()},
        }

    def summary(self) -> str:
        """Deterministic text: the execution order with gradient shapes (no timings)."""
        lines = [f"backward: {len(self.order)} steps, {len(self.freed_at)} nodes released saved tensors"]
        for step, i in enumerate(self.order):
            n = self.graph.nodes[i]
            grads = ", ".join(_fmt_shape(None if g is None else tuple(g)) for g in self.grads.get(i, []))
            line = f"{step}: #{i} {n.name}" + (f" {n.param}" if n.param else "") + f" → grads {grads}"
            if self.freed_at.get(i) == step:
                line += " (saved released)"
            lines.append(line)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _freed_probe(fn: Node, kind: Kind, info: tuple[SavedTensorInfo, ...]) -> Callable[[], bool] | None:
    """A cheap check 'are this node's saved tensors released yet?', or None if it holds none."""
    held = [s for s in info if not s.freed]
    if not held:
        return None
    if kind == "custom":

        def custom() -> bool:
            try:
                fn._raw_saved_tensors  # type: ignore[attr-defined]  # noqa: B018
            except RuntimeError:
                return True
            return False

        return custom
    attr, _, idx = held[0].name.partition("[")

    def cpp() -> bool:
        raw = getattr(fn, "_raw_saved_" + attr)
        if idx:
            raw = raw[int(idx[:-1])]
        return raw.data is None and raw.unpack_hook is None

    return cpp


def _shapes(grads: Iterable[torch.Tensor | None]) -> list[list[int | str] | None]:
    return [None if g is None else list(_shape(g) or ()) for g in grads]


def record_backward(
    root: torch.Tensor,
    *,
    graph: GradGraph | None = None,
    gradient: torch.Tensor | None = None,
    retain_graph: bool = False,
    inputs: torch.Tensor | Iterable[torch.Tensor] | None = None,
) -> BackwardRecording:
    """Run ``root.backward(...)`` with temporary hooks on every node of `graph` and record what happened.

    `graph` defaults to ``grad_graph(root)`` built just before backward, so its saved-tensor metadata
    is complete; pass one built earlier (with names) to reuse its ids. All hooks are removed
    afterwards, also when backward raises.
    """
    if not isinstance(root, torch.Tensor):
        raise TypeError(f"record_backward needs a tensor, got {type(root).__name__}")
    if root.grad_fn is None:
        raise ValueError(
            "root has no grad_fn: it does not require grad or was made under torch.no_grad(); "
            "call .requires_grad_() on a leaf or compute it with grad enabled"
        )
    if graph is None:
        graph = grad_graph(root)
    if not graph.fns or not any(f is root.grad_fn for f in graph.fns):
        raise ValueError("root.grad_fn is not in this graph; build it with grad_graph(root) (before backward)")
    order: list[int] = []
    seconds: list[float] = []
    grads: dict[int, list[list[int | str] | None]] = {}
    freed_at: dict[int, int] = {}
    leaves: dict[int, list[int]] = {}
    probes: dict[int, Callable[[], bool]] = {}
    for n, fn in zip(graph.nodes, graph.fns):
        probe = _freed_probe(fn, n.kind, n.saved)
        if probe is not None:
            probes[n.id] = probe
    just_ran: list[int] = []  # nodes with saved tensors that ran since the last check (normally one)
    late: list[int] = []  # checked once and still held: looked at again only after backward
    started: dict[int, float] = {}

    def check(step: int) -> None:
        for i in just_ran:
            if probes[i]():
                freed_at[i] = step
            else:
                late.append(i)
        just_ran.clear()

    def make_hooks(i: int, leaf: bool) -> tuple[Callable[..., None], Callable[..., None]]:
        def pre(grad_outputs: Any) -> None:
            check(len(order) - 1)
            started[i] = time.perf_counter()

        def post(grad_inputs: Any, grad_outputs: Any) -> None:
            t = time.perf_counter()
            step = len(order)
            order.append(i)
            seconds.append(t - started.pop(i, t))
            grads[i] = _shapes(grad_outputs if leaf else grad_inputs)
            if leaf:
                leaves.setdefault(step, []).append(i)
            if i in probes:
                just_ran.append(i)

        return pre, post

    handles: list[Any] = []
    try:
        for n, fn in zip(graph.nodes, graph.fns):
            pre, post = make_hooks(n.id, n.kind == "leaf")
            handles.append(fn.register_prehook(pre))
            handles.append(fn.register_hook(post))
        root.backward(gradient=gradient, retain_graph=retain_graph, inputs=inputs)
        check(len(order) - 1)
        for i in late:  # the final pass
            if probes[i]():
                freed_at[i] = len(order) - 1
    finally:
        for h in handles:
            h.remove()
    return BackwardRecording(graph, order, seconds, grads, freed_at, leaves)
