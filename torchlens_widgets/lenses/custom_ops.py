"""What PyTorch makes of a custom operator, as plain data: `opcheck`'s verdict per test, the graphs AOT autograd
hands a backend (where a write the schema does not declare disappears), and the warnings that torch's C++ code
prints to the process's stderr (the vmap fallback's), which Python's `warnings` never sees.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["AotGraphs", "OpcheckReport", "aot_graphs", "native_warnings", "opcheck_report"]


@dataclass(frozen=True)
class OpcheckReport:
    """`torch.library.opcheck`'s outcome per test: "SUCCESS", or the error's type and first line."""

    op: str
    results: tuple[tuple[str, str], ...]  # (test, verdict) in opcheck's order

    @property
    def verdicts(self) -> dict[str, str]:
        return dict(self.results)

    @property
    def passed(self) -> bool:
        return all(v == "SUCCESS" for _, v in self.results)

    @property
    def failed(self) -> tuple[str, ...]:
        return tuple(t for t, v in self.results if v != "SUCCESS")

    def __getitem__(self, test: str) -> str:
        return self.verdicts[test]

    def summary(self, width: int = 110) -> str:
        lines = [f"opcheck {self.op}: " + ("all tests pass" if self.passed else f"{len(self.failed)} failed")]
        lines += [f"  {t:28} {v if len(v) <= width else v[: width - 3] + '...'}" for t, v in self.results]
        return "\n".join(lines)


def _verdict(v: Any) -> str:
    if isinstance(v, str):
        return v
    text = str(v).strip()
    return f"{type(v).__name__}: {text.splitlines()[0] if text else ''}"


def _op_label(op: Any) -> str:
    schema = getattr(getattr(op, "_opoverload", op), "_schema", None)
    return str(schema.name) if schema is not None else getattr(op, "__name__", repr(op))


def opcheck_report(op: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None, *,
                   test_utils: Sequence[str] | None = None) -> OpcheckReport:
    """Run `torch.library.opcheck(op, args, kwargs)` without raising and keep one line per test."""
    extra = {} if test_utils is None else {"test_utils": tuple(test_utils)}
    found = torch.library.opcheck(op, tuple(args), dict(kwargs or {}), raise_exception=False, **extra)
    return OpcheckReport(_op_label(op), tuple((t, _verdict(v)) for t, v in found.items()))


@dataclass(frozen=True)
class AotGraphs:
    """The forward (or inference) graphs AOT autograd produced for one compiled call, as readable Python, and the
    operators each calls ("aten::mul", "nb11::interp_out", "auto_functionalized_v2", "getitem")."""

    codes: tuple[str, ...]
    ops: tuple[tuple[str, ...], ...]
    result: Any = field(default=None, repr=False, compare=False)

    def calls(self, name: str) -> bool:
        return any(name == op for graph in self.ops for op in graph)


def _target_name(target: Any) -> str:
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return str(schema.name)
    name = getattr(target, "name", None)  # a higher-order operator: name() is "auto_functionalized_v2"
    if callable(name) and not isinstance(target, type):
        try:
            return str(name())
        except TypeError:
            pass
    return str(getattr(target, "__name__", target))


def aot_graphs(fn: Callable[..., Any], *args: Any) -> AotGraphs:
    """Compile `fn` with Dynamo and AOT autograd (no code generation, like backend="aot_eager"), run it on `args`,
    and keep the graphs AOT autograd hands the compiler: functional graphs, after its dead-code elimination.
    Dynamo's caches are reset before and after."""
    import torch._dynamo
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    try:
        result = torch.compile(fn, backend=aot_autograd(fw_compiler=keep))(*args)
    finally:
        torch._dynamo.reset()
    codes = tuple("\n".join(line.rstrip() for line in gm.code.strip().splitlines()) for gm in graphs)
    ops = tuple(tuple(_target_name(n.target) for n in gm.graph.nodes if n.op == "call_function") for gm in graphs)
    return AotGraphs(codes, ops, result)


def native_warnings(fn: Callable[..., Any], *args: Any, calls: int = 1) -> tuple[str, ...]:
    """Call `fn(*args)` `calls` times and return the warnings torch's C++ code printed to stderr meanwhile (file
    descriptor 2, which Python's `warnings` and `sys.stderr` never see), without their time and source prefix."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            for _ in range(calls):
                fn(*args)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode(errors="replace")
    lines = [line.split("] ", 1)[1] if line.startswith("[W") and "] " in line else line for line in text.splitlines()]
    return tuple(line for line in lines if line.startswith("Warning:"))
