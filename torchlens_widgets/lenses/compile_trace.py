"""What torch.compile did to a function, as plain data: the graphs Dynamo captured (ops and the source lines
they came from), every graph break (its kind, explanation, hints, the user's file and line), each compiled
frame's guards, every recompile and the guard that failed, AOTAutograd's forward/backward graphs, and
Inductor's kernels (source, and which FX nodes each one fused), with compile time per stage.

Read from Dynamo's own hooks (the backend sees each graph and why it ended; guard export and guard failure
callbacks) and torch's structured trace events (compilation metrics, AOT graphs, Inductor's output code and
its provenance map of kernel → nodes) — no human log text, no decompiler.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import json
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .. import busy

__all__ = [
    "CompileTrace",
    "CompileTraceError",
    "CompiledFrame",
    "Guard",
    "GraphBreak",
    "GraphOp",
    "CapturedGraph",
    "Kernel",
    "Recompile",
    "SkippedFrame",
    "compile_trace",
    "torch_logs",
]

_BACKENDS = ("inductor", "aot_eager", "aot_eager_default_partitioner", "eager")
_COMPILE_KW = ("backend", "fullgraph", "dynamic", "mode", "options")
_FAILED = re.compile(r"(?P<cid>\d+/\d+): (?P<why>.*)", re.S)
_TENSOR_CHECK = re.compile(r"TENSOR_MATCH: (?P<check>check_tensor\((?P<source>[^,]+), .*?stride=\[[^\]]*\]\))")
_SAVED = re.compile(r"^\s*(?P<name>\w+),\s*# SavedForBackwardsAOTOutput", re.M)
_LOOP_SKIP = "*** While handling this graph break, another graph break occurred: ***"
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[^\n]+)\n\s*(?P<code>[^\n]*)')


class CompileTraceError(RuntimeError):
    """compile_trace could not run: the message says what was wrong and what to do."""


@dataclass(frozen=True)
class GraphOp:
    """One call in a captured graph: its node name, what it calls, and the user's line it came from."""

    name: str
    target: str
    line: int | None
    code: str


@dataclass(frozen=True)
class GraphBreak:
    """Where Dynamo stopped a graph: the kind of break, torch's explanation and hints, the user's line."""

    kind: str
    explanation: str
    hints: tuple[str, ...]
    filename: str
    line: int | None
    code: str
    function: str
    compile_id: str | None


@dataclass(frozen=True)
class Guard:
    """One check a compiled frame runs before reusing its code (`kind` is Dynamo's guard type)."""

    source: str
    kind: str
    checks: tuple[str, ...]
    line: int | None
    code: str


@dataclass(frozen=True)
class SkippedFrame:
    """A frame Dynamo gave up on and left to run eagerly, whole: no graph, no break counted (a graph break
    inside a for/while loop does this). `kind`, `explanation`: the break that started it; `why`: Dynamo's
    reason for skipping the frame rather than splitting the graph; `line`, `code`: where it stopped."""

    function: str
    filename: str
    line: int | None
    code: str
    kind: str
    explanation: str
    why: str


@dataclass(frozen=True)
class Recompile:
    """A frame compiled again because its guards failed for new inputs: for each earlier compile of it
    (`against`), the guard that failed, in Dynamo's words ("tensor 'x' size mismatch at index 0. expected 8,
    actual 16", "n == 1")."""

    compile_id: str
    function: str
    reasons: tuple[str, ...]
    against: tuple[str, ...]


@dataclass(frozen=True)
class Kernel:
    """A kernel Inductor generated: its name, source, the FX nodes it fused and the user lines behind them."""

    name: str
    stage: str  # "forward", "backward" or "inference"
    compile_id: str | None
    source: str
    fused_nodes: tuple[str, ...]
    lines: tuple[int, ...]


@dataclass(frozen=True)
class CapturedGraph:
    """One FX graph Dynamo handed to the backend, in capture order."""

    index: int
    compile_id: str | None
    ops: tuple[GraphOp, ...]
    lines: tuple[int, ...]  # the user's source lines its ops came from
    code: str  # the graph as readable Python
    ended_by_break: bool
    inputs: tuple[str, ...] = ()  # where each graph input comes from, in order (Dynamo's source: "L['x']")


@dataclass(frozen=True)
class CompiledFrame:
    """One compile of one Python frame (Dynamo's compile id "frame/attempt"): guards, AOT graphs, times."""

    compile_id: str
    function: str
    filename: str
    first_line: int
    graph_ops: int
    guards: tuple[Guard, ...]
    aot_forward: str | None
    aot_backward: str | None
    aot_joint: str | None
    seconds: dict[str, float]  # "total", "dynamo", "aot_autograd", "inductor" (what applies)
    cache_size_before: int
    saved_for_backward: tuple[str, ...] = ()  # the forward's outputs the backward reads (AOT node names)
    guard_tree: str = ""  # Dynamo's guard manager as it prints itself (every guard, C++ ones included)

    def aot_graph(self, stage: str) -> str:
        """AOTAutograd's "forward", "backward" or "joint" graph as readable Python, without the `# File: ...`
        comments (they name the file the source came from; a notebook cell's is a temporary one)."""
        text = {"forward": self.aot_forward, "backward": self.aot_backward, "joint": self.aot_joint}[stage]
        return "\n".join(line for line in (text or "").splitlines() if not line.strip().startswith("# File:"))


@dataclass(frozen=True)
class CompileTrace:
    """Everything one compile_trace run saw. `calls` inputs were run; counts are over all of them."""

    function: str
    backend: str
    calls: int
    graphs: tuple[CapturedGraph, ...]
    breaks: tuple[GraphBreak, ...]
    frames: tuple[CompiledFrame, ...]
    recompiles: tuple[Recompile, ...]
    kernels: tuple[Kernel, ...]
    seconds: float
    filename: str = ""  # where the function's source is, and its lines (empty when Python has no source)
    first_line: int = 0
    source: tuple[str, ...] = ()
    skipped: tuple[SkippedFrame, ...] = ()  # frames Dynamo ran eagerly, whole (a break inside a loop)
    result: Any = field(default=None, repr=False, compare=False)

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def break_count(self) -> int:
        return len(self.breaks)

    @property
    def breaks_ending_a_graph(self) -> int:
        """Breaks that ended a non-empty graph: what torch._dynamo.explain counts (its graphs - 1). A break
        before any tensor op (a print on the first line) is in `breaks` but ends no graph."""
        return sum(g.ended_by_break for g in self.graphs)

    @property
    def recompile_count(self) -> int:
        return len(self.recompiles)

    @property
    def kernel_count(self) -> int:
        return len(self.kernels)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the result of the call left out)."""
        data = asdict(replace(self, result=None))  # asdict would deep-copy the result (tensors with grad)
        data.pop("result")
        return data

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CompileTrace:
        """The CompileTrace whose `to_dict()` gave `d` (saved data, e.g. a GPU recording), without the call's
        result; `show_compile` draws it."""
        t = tuple

        def frame(f: Mapping[str, Any]) -> CompiledFrame:
            return CompiledFrame(**{**f, "guards": t(Guard(**{**g, "checks": t(g["checks"])}) for g in f["guards"]),
                                    "seconds": dict(f["seconds"]),
                                    "saved_for_backward": t(f.get("saved_for_backward", ()))})

        def graph(g: Mapping[str, Any]) -> CapturedGraph:
            return CapturedGraph(**{**g, "ops": t(GraphOp(**o) for o in g["ops"]), "lines": t(g["lines"]),
                                    "inputs": t(g.get("inputs", ()))})

        return cls(
            function=d["function"], backend=d["backend"], calls=d["calls"],
            graphs=t(graph(g) for g in d["graphs"]),
            breaks=t(GraphBreak(**{**b, "hints": t(b["hints"])}) for b in d["breaks"]),
            frames=t(frame(f) for f in d["frames"]),
            recompiles=t(Recompile(**{**r, "reasons": t(r["reasons"]), "against": t(r["against"])})
                         for r in d["recompiles"]),
            kernels=t(Kernel(**{**k, "fused_nodes": t(k["fused_nodes"]), "lines": t(k["lines"])}) for k in d["kernels"]),
            seconds=d["seconds"], filename=d.get("filename", ""), first_line=d.get("first_line", 0),
            source=t(d.get("source", ())), skipped=t(SkippedFrame(**s) for s in d.get("skipped", ())))

    def summary(self) -> str:
        """A few lines: graphs, breaks with their lines, recompiles with the failing guard, kernels."""
        lines = [f"{self.function}: {self.graph_count} graph(s), {self.break_count} break(s), "
                 f"{self.recompile_count} recompile(s), {self.kernel_count} kernel(s) [{self.backend}]"]
        for g in self.graphs:
            ops = ", ".join(o.target for o in g.ops[:8]) + (" ..." if len(g.ops) > 8 else "")
            where = f"lines {g.lines[0]}-{g.lines[-1]}" if g.lines else "no user lines"
            lines.append(f"  graph {g.index} ({where}): {len(g.ops)} op(s): {ops}")
        for b in self.breaks:
            lines.append(f"  break at line {b.line} `{b.code.strip()}`: {b.kind}")
            if b.hints:
                lines.append(f"    hint: {b.hints[0]}")
        for s in self.skipped:
            lines.append(f"  frame {s.function} skipped (runs eagerly, whole) at line {s.line} `{s.code.strip()}`: "
                         f"{s.kind}; {s.why}")
        for r in self.recompiles:
            lines.append(f"  recompile {r.compile_id} of {r.function}: {'; '.join(dict.fromkeys(r.reasons))}")
        for k in self.kernels:
            lines.append(f"  kernel {k.name} ({k.stage}) fuses {', '.join(k.fused_nodes) or '?'}")
        return "\n".join(lines)


def _frames(text: str | None) -> list[tuple[str, int, str, str]]:
    """(file, line, function, code) per frame of a formatted Python stack (FX's node.stack_trace)."""
    return [(m["file"], int(m["line"]), m["func"].strip(), m["code"].strip()) for m in _FRAME.finditer(text or "")]


def _split_reason(reason: str) -> tuple[str, str, tuple[str, ...]]:
    """Dynamo's break message as (kind, explanation, hints): its first line, then the labelled fields its
    unimplemented() call was given."""
    kind = reason.strip().splitlines()[0].strip() if reason.strip() else "graph break"
    explanation = ""
    hints: list[str] = []
    for line in reason.splitlines():
        s = line.strip()
        if s.startswith("Explanation:"):
            explanation = s.split(":", 1)[1].strip()
        elif s.startswith("Hint:"):
            hints.append(s.split(":", 1)[1].strip())
    return kind, explanation, tuple(h for h in hints if "report an issue to PyTorch" not in h)


def _target(node: Any) -> str:
    t = node.target
    if node.op == "call_method":
        return f"Tensor.{t}"
    if node.op == "call_module":
        return str(t)
    name = getattr(t, "__name__", None) or str(t)
    mod = getattr(t, "__module__", "") or ""
    if mod.startswith("torch") and not name.startswith("torch"):
        return f"torch.{name}" if mod in ("torch", "torch._C._VariableFunctions") else name
    return {"mul": "*", "add": "+", "sub": "-", "truediv": "/", "matmul": "@", "getitem": "[]"}.get(name, name)


def _kernels_in(code: str) -> dict[str, str]:
    """Kernel name -> source in Inductor's generated module (assignments of `async_compile.<kind>(...)`)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    found: dict[str, str] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name) and call.func.value.id == "async_compile"):
            continue
        texts = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if texts:
            found[node.targets[0].id] = max(texts, key=len)
    return found


class _Events(logging.Handler):
    """Collects torch's structured trace records (metadata and payload) while compile_trace runs."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[dict[str, Any], str | None]] = []

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        if isinstance(meta, dict) and "chromium_event" not in meta and "describe_tensor" not in meta:
            self.records.append((meta, getattr(record, "payload", None)))


@contextlib.contextmanager
def _structured_events() -> Iterator[_Events]:
    from torch._logging._internal import trace_log

    handler = _Events()
    level, propagate = trace_log.level, trace_log.propagate
    trace_log.addHandler(handler)
    trace_log.setLevel(logging.DEBUG)
    trace_log.propagate = False
    quiet = logging.getLogger("torch._dynamo")  # its warnings (a break at .item()) are in the trace as data
    quiet_level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        yield handler
    finally:
        trace_log.removeHandler(handler)
        trace_log.setLevel(level)
        trace_log.propagate = propagate
        quiet.setLevel(quiet_level)


@contextlib.contextmanager
def torch_logs(*artifacts: str) -> Iterator[list[str]]:
    """What `TORCH_LOGS="graph_breaks,recompiles"` would print, collected (one string per message) instead of
    written to stderr: `torch._logging.set_logs(<artifact>=True)` for the block, each artifact's loggers sent
    to a list, then `set_logs()` (torch's defaults) again."""
    import torch

    messages: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = _Collect(logging.DEBUG)
    torch._logging.set_logs(**dict.fromkeys(artifacts, True))  # type: ignore[arg-type]
    # the artifacts' loggers exist once their modules are loaded
    import torch._dynamo.convert_frame
    import torch._dynamo.guards
    import torch._dynamo.symbolic_convert

    loggers = [logging.getLogger(n) for n in list(logging.Logger.manager.loggerDict)
               if any(n.endswith(f".__{a}") for a in artifacts)]
    before = [(log, log.propagate) for log in loggers]
    for log in loggers:
        log.propagate = False
        log.addHandler(handler)
    try:
        yield messages
    finally:
        for log, propagate in before:
            log.propagate = propagate
            log.removeHandler(handler)
        torch._logging.set_logs()


def _cid(meta: dict[str, Any]) -> str | None:
    if meta.get("frame_id") is None:
        return None
    return f"{meta['frame_id']}/{meta.get('frame_compile_id', 0)}"


def _fresh_dynamo_state() -> None:
    """Forget shape history (automatic dynamic) and restart compile ids at 0/0, as a new process would; unlike
    torch._dynamo.reset() this keeps other functions' compiled code (and the weak references that clean it up)."""
    from torch._dynamo import convert_frame, pgo, utils

    with convert_frame.compile_lock:
        pgo.reset_code_state()
        utils.reset_frame_count()
        convert_frame.FRAME_COUNTER = 0
        convert_frame.FRAME_COMPILE_COUNTER.clear()


def compile_trace(fn: Callable[..., Any], *args: Any, calls: list[tuple[Any, ...]] | None = None,
                  backward: bool = False, **compile_kwargs: Any) -> CompileTrace:
    """Compile `fn` with torch.compile's machinery and run it on `args` (or on each tuple in `calls`, to see
    recompiles), recording what each stage did. `backward=True` also runs backward from the outputs that
    need grad (their sum), so Inductor compiles the backward graph too (it does so lazily, at the first
    backward). `compile_kwargs`: backend ("inductor", "aot_eager", "eager"),
    fullgraph, dynamic, mode, options, as for torch.compile. Starts as a new process would: compile ids from
    0/0, no shape history from earlier runs, its own cache of compiled code. Shows a busy line while it works."""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    with busy.working(f"torch.compile of {name}", "loading Dynamo") as line:
        return _compile_trace(line, fn, *args, calls=calls, backward=backward, **compile_kwargs)


def _compile_trace(line: busy.BusyLine, fn: Callable[..., Any], *args: Any, calls: list[tuple[Any, ...]] | None,
                   backward: bool, **compile_kwargs: Any) -> CompileTrace:
    import torch

    if not callable(fn):
        raise CompileTraceError(f"compile_trace takes a function (or module) and its inputs, not {type(fn).__name__}")
    unknown = sorted(set(compile_kwargs) - set(_COMPILE_KW))
    if unknown:
        raise CompileTraceError(f"unknown option(s) {unknown}: compile_trace takes {list(_COMPILE_KW)} "
                                "(give the function's own inputs as positional arguments)")
    backend = compile_kwargs.get("backend", "inductor")
    if backend not in _BACKENDS:
        raise CompileTraceError(f"backend={backend!r}: use one of {list(_BACKENDS)}")
    if calls is not None and args:
        raise CompileTraceError("give the inputs either as arguments or as calls=[(...), ...], not both")
    runs = [tuple(c) if isinstance(c, (tuple, list)) else (c,) for c in calls] if calls is not None else [args]
    if not runs:
        raise CompileTraceError("calls=[]: give at least one tuple of inputs")

    import torch._dynamo
    from torch._dynamo import output_graph

    if backend == "inductor":
        inner: Any = torch._TorchCompileInductorWrapper(compile_kwargs.get("mode"), compile_kwargs.get("options"),
                                                       compile_kwargs.get("dynamic"))
    else:
        if compile_kwargs.get("mode") or compile_kwargs.get("options"):
            raise CompileTraceError(f"mode and options apply to the inductor backend, not {backend!r}")
        inner = torch._dynamo.lookup_backend(backend)

    graphs: list[CapturedGraph] = []
    guards: dict[str, tuple[Guard, ...]] = {}
    failures: list[str] = []

    def record(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        cid = torch._guards.CompileContext.current_compile_id()
        ops = []
        inputs = []
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                arg = node.meta.get("grapharg")
                inputs.append(str(arg.source.name) if arg is not None and arg.source is not None else node.name)
            if node.op not in ("call_function", "call_method", "call_module"):
                continue
            stack = _frames(node.meta.get("stack_trace"))
            line, code = (stack[-1][1], stack[-1][3]) if stack else (None, "")
            ops.append(GraphOp(node.name, _target(node), line, code))
        reason = getattr(gm, "compile_subgraph_reason", None)
        graphs.append(CapturedGraph(
            index=len(graphs), compile_id=str(cid) if cid is not None else None, ops=tuple(ops),
            lines=tuple(sorted({o.line for o in ops if o.line is not None})),
            code=gm.print_readable(print_output=False, include_stride=False, include_device=False),
            ended_by_break=bool(reason is not None and reason.graph_break), inputs=tuple(inputs)))
        return inner(gm, example_inputs)

    def export(guard_set: Any) -> None:
        cid = torch._guards.CompileContext.current_compile_id()
        out = []
        for g in guard_set:
            user = list(g.user_stack or [])
            line, code = (user[-1].lineno, user[-1].line or "") if user else (None, "")
            out.append(Guard(source=g.name, kind=g.create_fn_name(), checks=tuple(g.code_list or ()),
                             line=line, code=code))
        guards[str(cid)] = tuple(sorted(out, key=lambda g: (g.source, g.kind)))

    def failed(fail: Any) -> None:
        failures.append(str(getattr(fail, "reason", fail)))

    _fresh_dynamo_state()
    before = len(output_graph.graph_break_reasons)
    # isolate_recompiles (torch 2.13) keeps this trace's cache entries apart; torch 2.11 has no such option
    isolate = ({"isolate_recompiles": True}
               if "isolate_recompiles" in inspect.signature(torch._dynamo.eval_frame._optimize).parameters else {})
    compiled = torch._dynamo.optimize(record, nopython=bool(compile_kwargs.get("fullgraph", False)),
                                      dynamic=compile_kwargs.get("dynamic"), guard_export_fn=export,
                                      guard_fail_fn=failed, **isolate)(fn)
    start = time.perf_counter()
    result = None
    patches = [torch._inductor.config.patch({"trace.provenance_tracking_level": 1, "fx_graph_cache": False}),
               torch._functorch.config.patch(enable_autograd_cache=False)] if backend == "inductor" else []
    with _structured_events() as events, contextlib.ExitStack() as stack:
        for p in patches:
            stack.enter_context(p)
        for i, run in enumerate(runs, 1):
            line.phase(f"call {i} of {len(runs)}: Dynamo captures graphs, {backend} compiles them, then it runs"
                       + (" and backward" if backward else ""))
            try:
                result = compiled(*run)
                if backward:
                    outs = [t for t in torch.utils._pytree.tree_leaves(result)
                            if isinstance(t, torch.Tensor) and t.requires_grad]
                    if not outs:
                        raise CompileTraceError("backward=True, but no output needs grad: give inputs with "
                                                "requires_grad=True")
                    torch.stack([t.sum() for t in outs]).sum().backward()
            except torch._dynamo.exc.Unsupported as exc:  # fullgraph=True and a break: say where
                frames = list(getattr(exc, "real_stack", None) or [])
                where = f" at line {frames[-1].lineno} ({(frames[-1].line or '').strip()})" if frames else ""
                kind, explanation, _ = _split_reason(getattr(exc, "msg", str(exc)))
                raise CompileTraceError(f"fullgraph=True and the function has a graph break{where}: {kind}. "
                                        f"{explanation}".strip()) from None
    seconds = time.perf_counter() - start
    reasons = list(output_graph.graph_break_reasons[before:])

    breaks = []
    for r in reasons:
        kind, explanation, hints = _split_reason(r.reason)
        user = [f for f in r.user_stack if f.filename != __file__]
        last = user[-1] if user else None
        breaks.append(GraphBreak(kind=kind, explanation=explanation, hints=hints,
                                 filename=last.filename if last else "", line=last.lineno if last else None,
                                 code=(last.line or "") if last else "", function=last.name if last else "",
                                 compile_id=None))
    return _assemble(fn, backend, len(runs), graphs, breaks, guards, failures, events.records, seconds, result)


def _assemble(fn: Any, backend: str, calls: int, graphs: list[CapturedGraph], breaks: list[GraphBreak],
              guards: dict[str, tuple[Guard, ...]], failures: list[str],
              records: list[tuple[dict[str, Any], str | None]], seconds: float, result: Any) -> CompileTrace:
    """Join the hooks' records with the structured events, per compile id."""
    aot: dict[str, dict[str, str]] = {}
    codes: list[tuple[str | None, str, dict[str, Any]]] = []  # compile id, generated module, its provenance
    metrics: list[dict[str, Any]] = []
    recompile_ids: list[tuple[str | None, list[str]]] = []
    trees: dict[str, str] = {}
    for meta, payload in records:
        cid = _cid(meta)
        if "dynamo_cpp_guards_str" in meta and payload:
            trees[str(cid)] = payload.split("\nGuard latency")[0].strip("\n")
        for key in ("aot_forward_graph", "aot_backward_graph", "aot_joint_graph"):
            if key in meta and payload:
                aot.setdefault(str(cid), {})[key] = payload
        if "inductor_output_code" in meta and payload:
            codes.append((cid, payload, {}))
        if "compilation_metrics" in meta:
            metrics.append(meta["compilation_metrics"])
        art = meta.get("artifact")
        if isinstance(art, dict) and payload:
            if art.get("name") == "inductor_provenance_tracking_node_mappings":
                owner = next((c for c in reversed(codes) if c[0] == cid and not c[2]), None)
                if owner is not None:  # emitted right after the module it describes
                    with contextlib.suppress(ValueError):
                        owner[2].update(json.loads(payload))
            elif art.get("name") == "recompile_reasons":
                try:
                    said = json.loads(payload)
                except ValueError:
                    said = [payload]
                recompile_ids.append((cid, [str(s) for s in (said if isinstance(said, list) else [said])]))

    kernels: list[Kernel] = []
    lines_of: dict[str, int] = {}
    for g in graphs:  # FX node name -> user line, to place fused nodes in the source
        for o in g.ops:
            if o.line is not None:
                lines_of.setdefault(o.name, o.line)
    for cid, code, prov in codes:
        stage = "backward" if "_backward']" in code[:200] else "forward" if "_forward']" in code[:200] else "inference"
        to_nodes: dict[str, list[str]] = {}
        for key, mapping in prov.items():
            if key.endswith("CodeToPost") and isinstance(mapping, dict):
                for kname, nodes in mapping.items():
                    to_nodes.setdefault(str(kname).split(":", 1)[0], []).extend(str(n) for n in nodes)
        pre = prov.get("postToPre", {}) if isinstance(prov.get("postToPre"), dict) else {}
        for name, source in _kernels_in(code).items():
            nodes = tuple(dict.fromkeys(to_nodes.get(name, [])))
            user_nodes = {u for n in nodes for u in pre.get(n, [n])}
            lines = tuple(sorted({lines_of[u] for u in user_nodes if u in lines_of}))
            kernels.append(Kernel(name=name, stage=stage, compile_id=cid, source=source, fused_nodes=nodes,
                                  lines=lines if stage != "backward" else ()))

    frames = []
    recompiles = []
    fail_iter = iter(failures)
    skipped = skipped_frames(metrics)
    for m in metrics:
        cid = str(m.get("compile_id"))
        if m.get("fail_type"):  # nothing compiled: the frame ran eagerly (in `skipped` when Dynamo said so)
            continue
        if not m.get("has_guarded_code", True) and not m.get("graph_op_count"):
            continue
        total = (m.get("duration_us") or 0) / 1e6 or float(m.get("entire_frame_compile_time_s") or 0.0)
        backend_s = float(m.get("backend_compile_time_s") or 0.0)
        inductor_s = (m.get("inductor_cumulative_compile_time_us") or 0) / 1e6
        aot_s = (m.get("aot_autograd_cumulative_compile_time_us") or 0) / 1e6
        times = {"total": round(total, 4), "dynamo": round(max(total - backend_s, 0.0), 4)}
        if aot_s:
            times["aot_autograd"] = round(max(aot_s - inductor_s, 0.0), 4)
        if inductor_s:
            times["inductor"] = round(inductor_s, 4)
        graphs_aot = aot.get(cid, {})
        forward = graphs_aot.get("aot_forward_graph")
        frames.append(CompiledFrame(
            compile_id=cid, function=str(m.get("co_name") or ""), filename=str(m.get("co_filename") or ""),
            first_line=int(m.get("co_firstlineno") or 0), graph_ops=int(m.get("graph_op_count") or 0),
            guards=_with_tensor_checks(guards.get(cid, ()), trees.get(cid, "")), aot_forward=forward,
            aot_backward=graphs_aot.get("aot_backward_graph"), aot_joint=graphs_aot.get("aot_joint_graph"),
            seconds=times, cache_size_before=int(m.get("cache_size") or 0),
            saved_for_backward=tuple(_SAVED.findall(forward or "")), guard_tree=trees.get(cid, "")))
    for cid, said in recompile_ids:
        function = next((f.function for f in frames if f.compile_id.split("/")[0] == (cid or "").split("/")[0]), "")
        reasons, against = [], []
        for text in said or [next(fail_iter, "")]:
            hit = _FAILED.match(text.strip())
            first = (hit["why"] if hit else text).strip().splitlines()[0] if text.strip() else ""
            reasons.append(first.split("  #", 1)[0].strip())  # Dynamo appends "# <source line>  # <file>"
            against.append(hit["cid"] if hit else "")
        recompiles.append(Recompile(compile_id=str(cid), function=function, reasons=tuple(reasons),
                                    against=tuple(against)))

    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    filename, first, lines_of_fn = _source_of(fn)
    return CompileTrace(function=name, backend=backend, calls=calls, graphs=tuple(graphs), breaks=tuple(breaks),
                        frames=tuple(frames), recompiles=tuple(recompiles), kernels=tuple(kernels),
                        seconds=seconds, filename=filename, first_line=first, source=lines_of_fn,
                        skipped=skipped, result=result)


def _with_tensor_checks(guards: tuple[Guard, ...], tree: str) -> tuple[Guard, ...]:
    """Each TENSOR_MATCH guard with, first among its checks, the C++ check it runs (`check_tensor(L['x'], Tensor,
    <dispatch keys>, <dtype>, device=, requires_grad=, size=[...], stride=[...])`, None for a dynamic size):
    guard export gives only its Python side (the hasattr checks on dimension markings)."""
    found = {m["source"].strip(): m["check"] for m in _TENSOR_CHECK.finditer(tree)}
    return tuple(replace(g, checks=(found[g.source], *g.checks))
                 if g.kind == "TENSOR_MATCH" and g.source in found and found[g.source] not in g.checks else g
                 for g in guards)


def skipped_frames(metrics: list[dict[str, Any]]) -> tuple[SkippedFrame, ...]:
    """The frames whose compile failed and which Dynamo ran eagerly, whole, from its compilation metrics: a graph
    break it could not split the frame at (inside a for/while loop) ends there, with no graph and no break."""
    import linecache

    out = []
    for m in metrics:
        reason = str(m.get("fail_reason") or "")
        if not m.get("fail_type") or not reason:
            continue
        first, _, last = reason.partition(_LOOP_SKIP)
        kind, explanation, _ = _split_reason(first)
        why = _split_reason(last)[1] if last else ""
        filename = str(m.get("fail_user_frame_filename") or m.get("co_filename") or "")
        line = m.get("fail_user_frame_lineno")
        out.append(SkippedFrame(function=str(m.get("co_name") or ""), filename=filename,
                                line=int(line) if line else None,
                                code=linecache.getline(filename, int(line)).strip() if line else "",
                                kind=kind, explanation=explanation, why=why or str(m.get("fail_type"))))
    return tuple(out)


def _source_of(fn: Any) -> tuple[str, int, tuple[str, ...]]:
    """The function's (or a module's forward's) file, first line and source lines, for pictures."""
    import inspect

    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else getattr(type(fn), "forward", fn)
    try:
        lines, first = inspect.getsourcelines(target)
        filename = inspect.getsourcefile(target) or ""
    except (OSError, TypeError):
        return "", 0, ()
    return filename, first, tuple(line.rstrip("\n") for line in lines)
