"""What `torch.compile` makes of a function, as data: how many graphs, each graph break with its reason and
the line that caused it, the operators in each graph, or the error that stopped compilation (a custom
operator without a fake implementation ends here, not in a graph break).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch._dynamo as dynamo  # ~2 s to import: this module is loaded only where a notebook compiles

from .. import busy

__all__ = ["CompileReport", "GraphBreak", "graph_breaks"]


@dataclass(frozen=True)
class GraphBreak:
    reason: str  # dynamo's one-line reason ("attempted to trace numpy function unsupported by PyTorch")
    where: str  # the user line that broke the graph ("line 3: return np.interp(...)"), "" when dynamo gives none


@dataclass(frozen=True)
class CompileReport:
    graphs: int
    breaks: tuple[GraphBreak, ...]
    ops: tuple[tuple[str, ...], ...]  # per graph, the operators it calls ("nb11::interp", "aten::cos", "cos")
    error: str | None  # why compilation failed, None when it ran
    # frames Dynamo ran eagerly, whole ("loop (line 7): <the break>; <why it skipped>"): a graph break inside a
    # for/while loop does this, and explain() then counts 0 graphs (and -1 breaks)
    skipped: tuple[str, ...] = ()

    @property
    def graph_breaks(self) -> int:
        return len(self.breaks)

    def calls(self, op: str) -> bool:
        """Whether any graph calls `op` ("nb11::interp" or "nb11::interp.default")."""
        return any(op == name or op.split(".")[0] == name for graph in self.ops for name in graph)

    def summary(self) -> str:
        if self.error is not None:
            return f"compilation failed: {self.error}"
        lines = [f"{self.graphs} graph{'s' * (self.graphs != 1)}, {self.graph_breaks} graph "
                 f"break{'s' * (self.graph_breaks != 1)}"]
        lines += [f"  break: {b.reason}" + (f"\n    at {b.where}" if b.where else "") for b in self.breaks]
        lines += [f"  graph {i}: {', '.join(g) or '(no operators)'}" for i, g in enumerate(self.ops, 1)]
        lines += [f"  frame skipped (runs eagerly, whole): {s}" for s in self.skipped]
        return "\n".join(lines)


def _op_name(target: Any) -> str:
    """An FX node's target as a reader knows it: "ns::op" for operators, the Python name otherwise."""
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return str(schema.name)
    name = getattr(target, "__name__", None)
    return str(name if name is not None else target)


def _error_text(exc: BaseException) -> str:
    """The reason inside dynamo's wrapper ("got RuntimeError('There was no fake impl ...')"), else line one."""
    text = str(exc)
    inner = re.search(r"got (\w+)\((['\"])(.*?)\2\)", text, re.S)
    if inner:
        return f"{inner[1]}: {inner[3]}"
    return f"{type(exc).__name__}: {text.strip().splitlines()[0] if text.strip() else ''}"


def graph_breaks(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> CompileReport:
    """Compile `fn` for these inputs with dynamo (no code generation) and report its graphs and breaks.

    Dynamo's caches are reset before and after, so an earlier compile of `fn` does not hide anything, and
    errors are reported even where `suppress_errors` was switched on to turn them into silent fallbacks."""
    if not callable(fn):
        raise TypeError(f"graph_breaks: expected a function to compile, got {type(fn).__name__}")
    from .compile_trace import _structured_events, skipped_frames

    dynamo.reset()
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    try:
        with busy.working(f"torch.compile of {name}", "Dynamo captures its graphs (no code generated)"), \
                dynamo.config.patch(suppress_errors=False), _structured_events() as events:
            explained = dynamo.explain(fn)(*args, **kwargs)
    except Exception as exc:  # an error that stops compilation is the finding
        return CompileReport(graphs=0, breaks=(), ops=(), error=_error_text(exc))
    finally:
        dynamo.reset()
    breaks = []
    for b in explained.break_reasons:
        frame = b.user_stack[-1] if b.user_stack else None
        where = f"line {frame.lineno}: {(frame.line or '').strip()}" if frame is not None else ""
        breaks.append(GraphBreak(reason=str(b.reason).strip().splitlines()[0], where=where))
    ops = tuple(tuple(_op_name(n.target) for n in g.graph.nodes if n.op in ("call_function", "call_method"))
                for g in explained.graphs)
    skipped = skipped_frames([m["compilation_metrics"] for m, _ in events.records if "compilation_metrics" in m])
    return CompileReport(graphs=explained.graph_count, breaks=tuple(breaks), ops=ops, error=None,
                         skipped=tuple(f"{s.function} (line {s.line}): {s.kind}; {s.why}" for s in skipped))
