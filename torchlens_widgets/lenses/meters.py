"""Meters for what a step holds: bytes autograd saved, bytes still alive after a forward, aten ops run.

Notebooks 06 and 12 (and the checks grading them) measure with these, so a learner cannot rebind the
meter a test measures against, and both notebooks count saved memory the same way: **by storage** —
two saved views of one storage cost that storage once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["LiveBytes", "OpCounter", "SavedMeter", "held_after_forward", "storage_of"]


def storage_of(t: torch.Tensor) -> tuple[int, int]:
    """(address, bytes) of the storage behind `t`: views of one storage give the same pair."""
    st = t.untyped_storage()
    return st.data_ptr(), st.nbytes()


class SavedMeter:
    """Every tensor autograd saves inside ``with SavedMeter(params, inputs):``, seen by a pack hook.

    Storages of ``params`` count as "parameter", of ``inputs`` as "input", anything else as
    "activation"; :meth:`bytes` sums distinct storages, so a storage saved twice counts once.
    """

    def __init__(self, params: Iterable[torch.Tensor] = (), inputs: Iterable[torch.Tensor] = ()) -> None:
        self.params = {storage_of(p)[0] for p in params}
        self.inputs = {storage_of(t)[0] for t in inputs}
        self.packs: list[dict[str, Any]] = []
        self._hooks: Any = None

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        ptr, nbytes = storage_of(t)
        kind = "parameter" if ptr in self.params else "input" if ptr in self.inputs else "activation"
        self.packs.append({
            "shape": tuple(t.shape), "dtype": t.dtype, "nbytes": t.numel() * t.element_size(),
            "storage": ptr, "storage_nbytes": nbytes, "kind": kind,
        })
        return t  # the meter only watches: the tensor itself is saved

    def __enter__(self) -> SavedMeter:
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._hooks.__exit__(*exc)

    def bytes(self, kind: str | None = None) -> int:
        """Bytes of the distinct storages saved (of one kind, or of all kinds with None)."""
        return sum({p["storage"]: p["storage_nbytes"] for p in self.packs if kind in (None, p["kind"])}.values())

    @property
    def storages(self) -> int:
        """How many distinct storages were saved."""
        return len({p["storage"] for p in self.packs})


class LiveBytes(TorchDispatchMode):
    """Tracks every storage an aten op creates inside the block and samples the live total after each op.

    Storages are held through weak references to the C++ storage, so tracking never keeps memory
    alive. Views, in-place ops and tensors made outside the block create no storage and are not counted.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, tuple[Any, int]] = {}  # storage address -> (weak reference, bytes)
        self.timeline: list[tuple[str, bool | None, int]] = []  # (op or mark, grad mode on?, live bytes)
        self.marks: dict[str, int] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        seen = {storage_of(t)[0] for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type != "meta" and storage_of(t)[0] not in seen:
                self._track(t.untyped_storage())
        self.timeline.append((func.overloadpacket.__name__, torch.is_grad_enabled(), self.now()))
        return out

    def _track(self, st: torch.UntypedStorage) -> None:
        old = self.live.get(st.data_ptr())
        if old is not None and not torch.UntypedStorage._expired(old[0]):
            return
        if old is not None:
            torch.UntypedStorage._free_weak_ref(old[0])
        self.live[st.data_ptr()] = (st._weak_ref(), st.nbytes())

    def now(self) -> int:
        """Bytes of tracked storages alive right now."""
        total = 0
        for ptr, (ref, n) in list(self.live.items()):
            if torch.UntypedStorage._expired(ref):
                torch.UntypedStorage._free_weak_ref(ref)
                del self.live[ptr]
            else:
                total += n
        return total

    def bytes_of(self, *tensors: torch.Tensor) -> int:
        """Live bytes of the tracked storages behind these tensors (0 for storages made outside)."""
        ptrs = {storage_of(t)[0] for t in tensors}
        return sum(n for p, (ref, n) in self.live.items() if p in ptrs and not torch.UntypedStorage._expired(ref))

    def mark(self, label: str) -> None:
        """Put a labelled sample on the timeline."""
        self.marks[label] = len(self.timeline)
        self.timeline.append((label, None, self.now()))

    def values(self) -> list[int]:
        return [v for _, _, v in self.timeline]


def held_after_forward(fn: Callable[..., Any], *args: Any) -> tuple[Any, int]:
    """(output, bytes of storages fn(*args) created that are still alive after it returned, output excluded)."""
    with LiveBytes() as live:
        out = fn(*args)
        held = live.now() - live.bytes_of(*[t for t in tree_leaves(out) if isinstance(t, torch.Tensor)])
    return out, held


class OpCounter(TorchDispatchMode):
    """Counts the aten ops that reach the dispatcher inside the block, by name: {"addmm": 2, "gelu": 1}."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.namespace == "aten":
            self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


