"""An operator's dispatch table as data, and which entry runs for given inputs, and why.

The table is the dispatcher's computed table (`torch._C._dispatch_dump_table`): per runtime key, what is
there — the op's own kernel, an autograd kernel, a composite ("math") kernel, a default backend kernel, a
backend fallback — and whether it is a fallthrough (the key is skipped). `choose(op, *args)` builds the
key set the dispatcher uses (the inputs' keys, plus the thread's included keys, minus its excluded ones)
and walks it from the highest priority down, as the dispatcher does, to the first entry that is not a
fallthrough.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["DispatchChoice", "DispatchTable", "DispatchTableError", "TableEntry", "choose", "dispatch_table", "scenarios"]

_LINE = re.compile(r"^(?P<key>[A-Za-z0-9_]+): (?P<fall>fallthrough )?(?:registered at (?P<where>\S+)\s*)?"
                   r"\[(?P<kind>[^\]]+)\]$")


class DispatchTableError(ValueError):
    """An operator name or input the lens cannot read; the message says what to pass instead."""


@dataclass(frozen=True)
class TableEntry:
    """One runtime key's entry. `kind` as the dispatcher names it ("kernel", "autograd kernel", "math kernel",
    "default backend kernel", "backend fallback", ...); `source`: the file that registered it."""

    key: str
    kind: str
    fallthrough: bool
    source: str

    @property
    def role(self) -> str:
        """In a word: "your kernel", "autograd", "composite", "fallback", "fallthrough" or "kernel"."""
        if self.fallthrough:
            return "fallthrough"
        if self.kind == "backend fallback":
            return "fallback"
        if self.kind in ("math kernel", "default backend kernel"):
            return "composite"
        if self.kind == "autograd kernel":
            return "autograd"
        return "kernel"


@dataclass(frozen=True)
class DispatchTable:
    """The computed table of one operator overload, runtime keys in the order the dispatcher prints them."""

    op: str
    schema: str
    entries: tuple[TableEntry, ...]

    def entry(self, key: str) -> TableEntry | None:
        return next((e for e in self.entries if e.key == key), None)

    def keys_with(self, role: str) -> list[str]:
        """Keys whose entry has this role (see TableEntry.role)."""
        return [e.key for e in self.entries if e.role == role]

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "schema": self.schema,
                "entries": [{"key": e.key, "kind": e.kind, "fallthrough": e.fallthrough, "source": e.source,
                             "role": e.role} for e in self.entries]}


@dataclass(frozen=True)
class Step:
    """One key of the walk: what the dispatcher found there ("runs", "skipped: fallthrough", "no entry")."""

    key: str
    outcome: str
    entry: TableEntry | None


@dataclass(frozen=True)
class DispatchChoice:
    """Which entry runs for some inputs: the walk from the highest-priority key, and the reason in words."""

    op: str
    input_keys: tuple[str, ...]  # the inputs' keys, highest priority first
    included: tuple[str, ...]  # keys this thread adds (e.g. BackendSelect)
    excluded: tuple[str, ...]  # input keys this thread removes (autocast when it is off, autograd in inference mode)
    steps: tuple[Step, ...]
    chosen: TableEntry | None

    def why(self) -> str:
        """The walk in a few lines, ending at the entry that runs (or the error the dispatcher raises)."""
        lines = [f"{self.op}: the inputs carry {', '.join(self.input_keys) or 'no keys'}"]
        if self.excluded:
            lines.append(f"  this thread excludes {', '.join(self.excluded)}")
        for s in self.steps:
            lines.append(f"  {s.key}: {s.outcome}")
        if self.chosen is None:
            lines.append("  nothing to run: the dispatcher raises NotImplementedError for this key")
        return "\n".join(lines)


_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def _name(op: object) -> str:
    if isinstance(op, torch._ops.OpOverload):
        return op.name()
    if isinstance(op, torch._ops.OpOverloadPacket):
        raise DispatchTableError(f"{op} has several overloads: pick one, e.g. {op}.default or "
                                 f"{op}.{next(iter(op.overloads()), 'default')}")
    if isinstance(op, str) and "::" in op:
        if not _OP_NAME.fullmatch(op):  # a NUL byte, spaces, a path: C++ would read up to the NUL and find add.Tensor
            raise DispatchTableError(f"{op[:120]!r} is not an operator name: use 'namespace::op' or "
                                     "'namespace::op.overload' (letters, digits and '_'), e.g. 'aten::add.Tensor'")
        return op
    raise DispatchTableError(f"{op!r}: give an operator overload such as torch.ops.aten.add.Tensor or the name "
                             "'aten::add.Tensor'")


def dispatch_table(op: object) -> DispatchTable:
    """The computed dispatch table of `op` (an OpOverload or a name like 'aten::add.Tensor')."""
    name = _name(op)
    try:
        dump = torch._C._dispatch_dump_table(name)
    except RuntimeError as exc:
        raise DispatchTableError(f"no operator {name!r} is registered ({str(exc).splitlines()[0]}); check the "
                                 "name, or load the library that defines it first") from None
    entries = []
    for line in dump.splitlines():
        m = _LINE.match(line.strip())
        if m:
            where = (m["where"] or "").replace("\\", "/").rsplit("/", 1)[-1].split(":")[0]
            entries.append(TableEntry(m["key"], m["kind"], bool(m["fall"]), where))
    try:
        schema = str(torch._C._dispatch_find_schema_or_throw(*_split(name)).schema())
    except (RuntimeError, AttributeError):
        schema = ""
    if not schema and not entries:
        raise DispatchTableError(f"no operator {name!r} is registered; check the name ('namespace::op.overload', "
                                 "e.g. 'aten::add.Tensor'), or load the library that defines it first")
    return DispatchTable(name, schema, tuple(entries))


def _split(name: str) -> tuple[str, str]:
    base, _, overload = name.partition(".")
    return base, overload


def _walk(keyset: Any) -> list[Any]:
    """A DispatchKeySet's keys (DispatchKey values), highest priority first, as the dispatcher picks them."""
    out = []
    rest = keyset
    for _ in range(256):
        top = rest.highestPriorityTypeId()
        if top.name == "Undefined":
            break
        out.append(top)
        rest = rest.remove(top)
    return out


def _keys(keyset: Any) -> list[str]:
    return [k.name for k in _walk(keyset)]


def _tensors(values: Iterable[Any]) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found += _tensors(v)
    return found


def choose(op: object, *args: Any, **kwargs: Any) -> DispatchChoice:
    """Which entry of `op`'s table runs for these inputs in this thread's state (modes, autocast, inference)."""
    table = dispatch_table(op)
    tensors = _tensors([*args, *kwargs.values()])
    if not tensors:
        raise DispatchTableError(f"{table.op}: pass the inputs you would call it with (at least one tensor); the "
                                 "dispatcher picks a key from the inputs' tensors")
    keyset = torch._C._dispatch_keys(tensors[0])
    for t in tensors[1:]:
        for k in _walk(torch._C._dispatch_keys(t)):
            keyset = keyset.add(k)
    input_keys = _keys(keyset)
    included = _walk(torch._C._dispatch_tls_local_include_set())
    excluded_all = _walk(torch._C._dispatch_tls_local_exclude_set())
    for k in included:
        keyset = keyset.add(k)
    for k in excluded_all:
        keyset = keyset.remove(k)
    steps, chosen = [], None
    for key in _keys(keyset):
        entry = table.entry(key)
        if entry is None:
            steps.append(Step(key, "no entry", None))
            break
        if entry.fallthrough:
            steps.append(Step(key, f"skipped: fallthrough ({entry.kind})", entry))
            continue
        steps.append(Step(key, f"runs: {entry.kind}" + (f" from {entry.source}" if entry.source else ""), entry))
        chosen = entry
        break
    final = set(_keys(keyset))
    removed = tuple(k for k in input_keys if k not in final)  # what this thread's exclusions took away
    return DispatchChoice(table.op, tuple(input_keys), tuple(k.name for k in included), removed,
                          tuple(steps), chosen)


def scenarios(op: object, *args: Any) -> list[tuple[str, DispatchChoice]]:
    """`choose` for the same call in the states that change the answer: as given, under no_grad (changes
    nothing: the autograd key stays), inference_mode, CPU autocast, a TorchDispatchMode, and meta inputs (left
    out for inputs that have no meta copy: quantized, strided nested)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Watching(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, a: Any = (), kw: Any = None) -> Any:
            return func(*a, **(kw or {}))

    out = [("as given", choose(op, *args))]
    with torch.no_grad():
        out.append(("torch.no_grad()", choose(op, *args)))
    with torch.inference_mode():
        out.append(("torch.inference_mode()", choose(op, *args)))
    with torch.autocast("cpu"):
        out.append(("torch.autocast('cpu')", choose(op, *args)))
    with _Watching():
        out.append(("a TorchDispatchMode", choose(op, *args)))
    try:  # a quantized or (strided) nested tensor has no meta copy: that state is left out, the rest stands
        meta = [a.detach().to("meta") if isinstance(a, torch.Tensor) else a for a in args]
    except (NotImplementedError, RuntimeError):
        return out
    out.append(("meta tensors", choose(op, *meta)))
    return out
