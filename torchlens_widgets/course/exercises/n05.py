"""Notebook 05 (the autograd runtime): a predicted graph and engine order, the engine's scheduler, an in-place
error fixed, a node hook that edits one gradient, and a scalar reverse-mode engine.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`).
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from ...lenses.autograd import grad_graph, record_backward
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["fix_inplace", "node_hook", "predict_graph", "ready_queue", "scalar_engine"]


def _compiled(source: str, exercise: str) -> dict[str, Any]:
    """Code an answer runs or calls, compiled under a file name of its own: a watched answer may call nothing
    defined in this module."""
    space: dict[str, Any] = {"torch": torch}
    exec(compile(source, f"<workloads of {exercise}>", "exec"), space)
    return space


def _expression_a() -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The notebook's expression_a, made here (the notebook's can be rebound), and its two leaves."""
    p = torch.tensor([0.5, -1.0], requires_grad=True)
    q = torch.tensor([2.0, 3.0], requires_grad=True)
    r = p * q
    return ((r + torch.ones(2)).tanh() + r.exp() * p).sum(), [p, q]


# --- 05-predict-graph --------------------------------------------------------------------------------------

NODE_COUNT_HINTS = (
    "count the nodes of the backward graph: the recorded operations, plus the leaves' nodes",
    "one node per recorded operation and one AccumulateGrad per leaf that requires grad; a leaf used twice "
    "still has one AccumulateGrad, and the constant c has none",
)
PREDICTED_ORDER_HINTS = (
    "section 3: the engine takes ready nodes from a priority queue; which sequence number comes out first?",
    "op nodes run in the reverse of the order they were recorded; an AccumulateGrad runs as soon as every node "
    "sending to it has run",
)


def predict_graph(c: Check, nodes: Any, order: Any) -> None:
    """`PREDICTED_NODES`, `PREDICTED_ORDER`: the size of expression_a()'s backward graph and the node names in the
    order the engine runs them, written down (secret until repeated failures)."""
    root, _ = _expression_a()
    graph = grad_graph(root)
    truth = [graph.nodes[i].name for i in record_backward(root, graph=graph).order]
    c.equal(nodes, len(graph), what="PREDICTED_NODES", hint=NODE_COUNT_HINTS, secret=True)
    c.equal(order, truth, what="PREDICTED_ORDER", hint=PREDICTED_ORDER_HINTS, secret=True)


# --- 05-ready-queue ----------------------------------------------------------------------------------------

ORDER_HINTS = (
    "find the first step where your order and the engine's differ: was your node ready yet (had every edge "
    "into it delivered?), and was it the ready node with the highest sequence number?",
    "a node is ready only when all edges into it have delivered (count edges, not distinct senders); among the "
    "ready nodes the highest _sequence_nr() runs first, and an AccumulateGrad's number is the largest there is",
    "two passes: count the edges into every node over the whole graph first; then loop: take the ready node with "
    "the highest sequence number, record it, and take one dependency off each node its edges lead to",
)
NODES_HINTS = ("return a list of the graph's node objects: root.grad_fn and the nodes next_functions leads to, "
               "each once",)
ORDER_WHAT = "order (ops as Name[sequence number - first], leaves as AccumulateGrad(leafK))"
Graph = tuple[torch.Tensor, list[torch.Tensor]]  # (root, the leaves, named leaf0, leaf1, ...)


def _random_graph(seed: int) -> Graph:
    """A random expression: Add nodes, x * x, a weight used by a function called twice, detach, constants."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    leaves = [torch.randn(3, generator=gen).requires_grad_(k == 0 or rng.random() < 0.7)
              for k in range(rng.randint(2, 4))]
    w = torch.randn(3, generator=gen, requires_grad=True)
    leaves.append(w)

    def block(t: torch.Tensor) -> torch.Tensor:  # called at least twice: w gets an edge from every call
        return (t * w).tanh() + t

    pool = list(leaves)
    for step in range(rng.randint(4, 12)):
        a, b = pool[rng.randrange(len(pool))], pool[rng.randrange(len(pool))]
        op = rng.choice(("add", "add", "mul", "square", "sin", "exp", "const", "detach", "block"))
        if op == "add":
            out = a + b
        elif op == "mul":
            out = a * b
        elif op == "square":
            out = a * a
        elif op == "sin":
            out = a.sin()
        elif op == "exp":
            out = (a * 0.1).exp()
        elif op == "const":
            out = a + torch.ones(3)
        elif op == "detach":
            out = a * b.detach()
        else:
            out = block(a)
        pool.append(out)
        if step in (1, 3):
            pool.append(block(pool[rng.randrange(len(pool))]))
    total = pool[-1]
    for _ in range(rng.randint(0, 2)):
        total = total + pool[rng.randrange(len(pool))]
    if not total.requires_grad:
        total = total + leaves[0]
    return total.sum(), leaves


def _linear_relu_mse() -> Graph:
    gen = torch.Generator().manual_seed(5)
    lin = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3, generator=gen, requires_grad=True)
    return F.mse_loss(lin(x).relu(), torch.zeros(4, 2)), [x, lin.weight, lin.bias]


def _reused_in_a_loop() -> Graph:
    x = torch.tensor([0.3, 0.7], requires_grad=True)
    e = x.exp()
    y = e * e + e.sin() * x
    for _ in range(3):
        y = y.tanh() + e
    return y.sum(), [x]


def _leaves_ready_together() -> Graph:
    leaves = [torch.ones(2, requires_grad=True) for _ in range(5)]
    return torch.cat(leaves).sum() + leaves[2].sum(), leaves


# Graphs by name (an int case is a seed of `_random_graph`).
ORDER_GRAPHS = MappingProxyType({
    "expression_a()": _expression_a,
    "nn.Linear + relu + mse_loss": _linear_relu_mse,
    "a node used many times, in a loop": _reused_in_a_loop,
    "five leaves ready together, one used twice": _leaves_ready_together,
})


def _canonical(graph: Any, ids: list[int]) -> list[str]:
    """Labels in order; AccumulateGrad nodes that run back to back (ready together) sorted among themselves."""
    first = min((n.seq for n in graph.nodes if n.seq is not None), default=0)
    out: list[str] = []
    run: list[str] = []
    for i in ids:
        node = graph.nodes[i]
        if node.kind == "leaf":
            run.append(f"AccumulateGrad({node.param})")
        else:
            out += sorted(run) + [f"{node.name}[{node.seq - first}]"]
            run = []
    return out + sorted(run)


def ready_queue(c: Check, answer: Any, hidden: Iterable[int | str] | None = None) -> None:
    """`engine_order(root)`: the graph's nodes in the order the CPU engine runs them, worked out from the graph
    alone (no aten op, no backward), compared with what `record_backward` observes. A case is a name in
    ORDER_GRAPHS or a seed of a random graph."""
    mine = c.watch(answer, "engine_order", allow_aten=set(),
                   forbid=[grad_graph, record_backward, torch.autograd.grad, torch.autograd.backward,
                           torch.Tensor.backward])
    visible: tuple[int | str, ...] = ("expression_a()", 0)
    for label, case in named(hidden, visible, lambda case: case if isinstance(case, str)
                             else f"random graph (seed {case})"):
        root, leaves = ORDER_GRAPHS[case]() if isinstance(case, str) else _random_graph(case)
        graph = grad_graph(root, names={f"leaf{k}": t for k, t in enumerate(leaves)})
        got = mine(root)
        c.that(type(got) in (list, tuple), f"{label}: engine_order returned {type(got).__name__}, not a list of "
               "nodes", NODES_HINTS)
        index = {id(fn): i for i, fn in enumerate(graph.fns)}  # by identity (the nodes are alive)
        ids = [index.get(id(item), -1) for item in got]
        if -1 in ids:
            c.fail(f"{label}: engine_order returned an object of type {type(got[ids.index(-1)]).__name__}, which is "
                   "not a node of this graph", NODES_HINTS)
        truth = record_backward(root, graph=graph).order
        c.equal(_canonical(graph, ids), _canonical(graph, truth), what=f"{label}: {ORDER_WHAT}", hint=ORDER_HINTS,
                secret=hidden is not None)


# --- 05-fix-inplace ----------------------------------------------------------------------------------------

WHICH_HINTS = (
    "read the graph printed above: which node keeps a tensor that a later line overwrites in place?",
    "SigmoidBackward0 keeps its own output, so the in-place scaling of that output is the harmful write; make "
    "that one step out of place and leave the other two writes as they are",
)
GATE_COPY_HINTS = (
    "your function copies data (clone, contiguous, a dtype change); an out-of-place operation needs no copy",
    "do not clone before writing: replace only the harmful in-place write by its out-of-place twin",
)
KEEP_HINTS = (
    "exactly one of the three in-place writes is harmful; the other two must stay in place",
    "no node saved h, and the multiply saved h and s but not its own output: those two writes are safe",
)
GATE_GRAD_HINTS = (
    "the values are right but a gradient is not: autograd must see every write",
    "a write through .data or detach() hides it from autograd; compute the scaled sigmoid out of place instead",
)
INPUT_WRITE_HINTS = ("gate_fixed must not write into its inputs x and w",)
GATE_VALUE_HINTS = ("compute relu(h * 2 sigmoid(h)) with h = (x @ w) / 2, as gate does",)
GATE_INPLACE = ("aten.mul_.Tensor", "aten.relu_.default")
GATE_CASES = ("x 4 x 3, w 3 x 5", "float64", "x without grad, w transposed", "w without grad")
# the copy-counted call keeps what gate_fixed returned, so its values and gradients are checked too
KEEP_RESULT = '''
def keep(fn, kept, x, w):
    kept.append(fn(x, w))
'''


def _gate_inputs(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, w) of a case, fresh: all cases drawn in order from one generator (seed 11)."""
    gen = torch.Generator().manual_seed(11)
    r = torch.randn
    cases = {}
    cases[GATE_CASES[0]] = (r(4, 3, generator=gen, requires_grad=True), r(3, 5, generator=gen, requires_grad=True))
    cases[GATE_CASES[1]] = (r(2, 7, generator=gen, dtype=torch.float64, requires_grad=True),
                            r(7, 3, generator=gen, dtype=torch.float64, requires_grad=True))
    cases[GATE_CASES[2]] = (r(5, 4, generator=gen), r(6, 4, generator=gen, requires_grad=True).t())
    cases[GATE_CASES[3]] = (r(3, 2, generator=gen, requires_grad=True), r(2, 2, generator=gen))
    return cases[name]


def _gate_expected(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Written differently on purpose: silu(h) = h * sigmoid(h)."""
    h = torch.matmul(x, w) / 2
    return F.silu(h).mul(2).clamp_min(0)


def _fresh(t: torch.Tensor) -> torch.Tensor:
    return t.detach().requires_grad_(t.requires_grad)


def _judge_gate_result(c: Check, out: torch.Tensor, x: torch.Tensor, w: torch.Tensor, what: str, label: str,
                       secret: bool) -> None:
    """gate_fixed's result `out` for inputs (x, w): its values, and the gradients a backward through it gives."""
    c.equal((x._version, w._version), (0, 0), what=f"{label}: versions of x and w after {what}",
            hint=INPUT_WRITE_HINTS)
    xr, wr = _fresh(x), _fresh(w)
    ref = _gate_expected(xr, wr)
    if secret:  # the expected shape is the hidden case's content: say only that it differs
        c.that(out.dtype == ref.dtype and tuple(out.shape) == tuple(ref.shape),
               f"{label}: {what} is a {out.dtype} tensor of shape {list(out.shape)}, not what gate computes",
               GATE_VALUE_HINTS)
    c.equal(out.detach(), ref.detach(), what=f"{label}: {what}", rel_tol=1e-5, hint=GATE_VALUE_HINTS, secret=secret)
    seed = torch.randn(out.shape, generator=torch.Generator().manual_seed(out.numel()), dtype=out.dtype)
    try:
        out.backward(seed)
    except RuntimeError as err:
        message = str(err).split(" Hint:")[0]
        if secret:  # torch names the saved tensor's shape: the hidden case's content
            message = re.sub(r"\[torch\.\w+ \[[0-9, ]*\]\]", "a tensor", message)
        c.fail(f"{label}: backward still fails: {message}", WHICH_HINTS)
    ref.backward(seed)
    for name, mine, theirs in (("x", x, xr), ("w", w, wr)):
        if theirs.requires_grad:
            c.that(mine.grad is not None, f"{label}: {name}.grad is None after backward through {what}",
                   GATE_GRAD_HINTS)
            c.equal(mine.grad, theirs.grad, what=f"{label}: the gradient for {name} through {what}", rel_tol=1e-5,
                    hint=GATE_GRAD_HINTS, secret=secret)


def fix_inplace(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`gate_fixed(x, w)`: gate's values and correct gradients, with no data copy and exactly the two safe
    in-place ops (mul_, relu_) left in place. A case is a name in GATE_CASES."""
    mine = c.watch(answer, "gate_fixed", forbid_aten={"clone", "_to_copy", "copy_"}, hint=GATE_COPY_HINTS)
    keep = _compiled(KEEP_RESULT, "05-fix-inplace")["keep"]
    secret = hidden is not None
    for label, name in named(hidden, GATE_CASES[:1], lambda name: name):
        x, w = (_fresh(t) for t in _gate_inputs(name))
        out = c.tensor(mine(x, w), f"gate_fixed(x, w) for {label}")
        _judge_gate_result(c, out, x, w, "gate_fixed(x, w)", label, secret)
        kept: list[Any] = []
        x, w = (_fresh(t) for t in _gate_inputs(name))
        report = c.copy_count(keep, answer, kept, x, w, at_most=0, what=f"gate_fixed ({label})",
                              hint=GATE_COPY_HINTS, listing=not secret)
        again = "gate_fixed(x, w), called again to count its copies"
        _judge_gate_result(c, c.tensor(kept[0] if kept else None, f"{label}: {again}"), x, w, again, label, secret)
        inplace = sorted(op for op in report.ops if op.split(".")[1].endswith("_"))
        c.equal(inplace, list(GATE_INPLACE), what=f"{label}: the in-place ops gate_fixed runs", hint=KEEP_HINTS)


# --- 05-node-hook ------------------------------------------------------------------------------------------

HOOK_HINTS = (
    "compare the leaf gradients with what you expect: only the gradient sent along next_functions[slot] may change",
    "a node post-hook, registered with the node's register_hook, receives (grad_inputs, grad_outputs); grad_inputs "
    "holds one gradient per next_functions slot, and a tuple returned by the hook replaces them",
    "return a new tuple in which only the entry at position slot is multiplied by factor (None stays None); do not "
    "modify the gradient tensors in place, because one tensor can travel along several edges (Add does that)",
)
HANDLE_HINTS = ("return what the registration gives back: the handle with a remove() method",)
NODE_HINTS = ("register the hook on the node you are given, not on a tensor: a tensor hook sees the tensor's total "
              "gradient, summed over every path",)
# backward through the learner's hook, compiled apart: a hook may call nothing defined in this module
RUN_BACKWARD = '''
def run_backward(out):
    out.backward()
'''
Mix = Callable[[torch.Tensor], torch.Tensor] | None
# a graph: (the leaves, the output, how to reach the node that gets the hook from the output)
Built = tuple[tuple[torch.Tensor, ...], torch.Tensor, Callable[[torch.Tensor], Any]]


def _mixed(t: torch.Tensor, factor: float) -> torch.Tensor:
    """Same forward value as t; the gradient that flows back through it is scaled by factor."""
    return t * factor + (t - t * factor).detach()


def _operands(tensors: tuple[torch.Tensor, ...], slot: int, mix: Mix) -> list[torch.Tensor]:
    return [mix(t) if mix is not None and i == slot else t for i, t in enumerate(tensors)]


def _third(out: Any) -> Any:
    return out.grad_fn.next_functions[0][0].next_functions[0][0].next_functions[0][0]


def _second(out: Any) -> Any:
    return out.grad_fn.next_functions[0][0].next_functions[0][0]


def _case_mul(slot: int, mix: Mix) -> Built:
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    x0, x1 = _operands((a, b), slot, mix)
    p = x0 * x1
    return (a, b), (p.sin() + b).sum(), _third


def _case_add(slot: int, mix: Mix) -> Built:
    a = torch.tensor([0.2, -0.4, 1.0], requires_grad=True)
    b = torch.tensor([1.5, 0.5, -2.0], requires_grad=True)
    x0, x1 = _operands((a, b), slot, mix)
    p = x0 + x1
    return (a, b), (p.exp() * b).sum(), _third


def _case_addcmul(slot: int, mix: Mix) -> Built:
    c0 = torch.tensor([1.0, -1.0], requires_grad=True)
    t1 = torch.tensor([2.0, 0.5], requires_grad=True)
    t2 = torch.tensor([-3.0, 4.0], requires_grad=True)
    y = torch.addcmul(*_operands((c0, t1, t2), slot, mix))
    return (c0, t1, t2), (y.exp() * t2).sum(), _third


def _case_constant(slot: int, mix: Mix) -> Built:
    a = torch.tensor([1.5, -0.5], requires_grad=True)
    k = torch.tensor([2.0, 3.0])
    y = a * k
    return (a,), (y * y).sum(), _second


def _case_mm(slot: int, mix: Mix) -> Built:
    gen = torch.Generator().manual_seed(4)
    m1 = torch.randn(3, 4, generator=gen, requires_grad=True)
    m2 = torch.randn(4, 2, generator=gen, requires_grad=True)
    x0, x1 = _operands((m1, m2), slot, mix)
    return (m1, m2), (x0 @ x1).tanh().sum() + m1.sum(), _third


# Graphs by name: (what the check says about it, how it is built). A case is (graph, slot, factor).
HOOK_GRAPHS = MappingProxyType({
    "mul": ("p = a * b", _case_mul),
    "add": ("p = a + b (Add sends one gradient along both edges)", _case_add),
    "addcmul": ("addcmul", _case_addcmul),
    "constant": ("a * constant (no gradient for the constant)", _case_constant),
    "mm": ("mm", _case_mm),
})


def node_hook(c: Check, answer: Any, hidden: Iterable[tuple[str, int, float]] | None = None) -> None:
    """`scale_input_grad(node, slot, factor)`: a post-hook on the node that scales the gradient it sends along
    next_functions[slot] (None stays None) and returns its handle; no tensor hook. A case is (a name in
    HOOK_GRAPHS, slot, factor)."""
    register = c.watch(answer, "scale_input_grad", allow_aten=set())
    run_backward = c.watch(_compiled(RUN_BACKWARD, "05-node-hook")["run_backward"], "backward through your hook")
    visible = (("mul", 1, 0.0),)
    for label, (name, slot, factor) in named(hidden, visible, lambda case: "{}, slot {} scaled by {:g}".format(
            HOOK_GRAPHS[case[0]][0], *case[1:])):
        build = HOOK_GRAPHS[name][1]
        leaves, out, node_of = build(slot, None)
        node = node_of(out)
        handle = register(node, slot, factor)
        c.that(callable(getattr(type(handle), "remove", None)), f"{label}: scale_input_grad returned "
               f"{type(handle).__name__}, not a handle with remove()", HANDLE_HINTS)
        graph = grad_graph(out)
        idx = next(i for i, fn in enumerate(graph.fns) if fn is node)
        hooked = graph.nodes[idx]
        c.that(hooked.hooks_pre + hooked.hooks_post > 0, f"{label}: the lens finds no hook on {hooked.name}",
               NODE_HINTS)
        tensors_hooked = [t for t in leaves if t._backward_hooks]
        c.that(not tensors_hooked, f"{label}: {len(tensors_hooked)} leaf tensor(s) carry a tensor hook", NODE_HINTS)
        run_backward(out)
        ref_leaves, ref_out, _ = build(slot, functools.partial(_mixed, factor=factor))
        ref_out.backward()
        for k, (mine, ref) in enumerate(zip(leaves, ref_leaves)):
            if ref.grad is None:
                continue
            c.that(mine.grad is not None, f"{label}: leaf {k} got no gradient", HOOK_HINTS)
            c.equal(mine.grad, ref.grad, what=f"{label}: gradient of leaf {k}", rel_tol=1e-6, hint=HOOK_HINTS,
                    secret=hidden is not None)
        c.watch(handle.remove, "handle.remove", allow_aten=set())()
        after = grad_graph(out).nodes[idx]
        c.that(after.hooks_pre + after.hooks_post == 0, f"{label}: after handle.remove() the node still has a hook",
               HANDLE_HINTS)


# --- 05-scalar-engine --------------------------------------------------------------------------------------

ENGINE_HINTS = (
    "compare the gradient the message names with torch's: did that node get too little, too much, or get it too "
    "early?",
    "a Value used twice must collect both contributions (add into .grad, never overwrite), and a node's _backward "
    "may run only after every node that uses it has run",
    "order the nodes with an explicit stack into a post-order (children before parents), seed the output's grad "
    "with 1.0, then call _backward walking that order from the end",
)
TORCHLESS_HINTS = ("Value works on Python floats with math: build the engine yourself instead of asking torch",)
FORWARD_HINTS = ("check the forward formulas of +, * and tanh/relu",)
ENGINE_OPS = ("add", "mul", "tanh", "relu", "add_const", "const_add", "mul_const", "const_mul")
# A program: (leaf values, steps); a step (op, i, j, const) appends op(node i, node j or const) to the nodes.
RUN_PROGRAM = '''
def run_program(leaves, prog, make):
    nodes = [make(v) for v in leaves]
    for op, i, j, const in prog:
        x, y = nodes[i], nodes[j]
        if op == "add":
            out = x + y
        elif op == "mul":
            out = x * y
        elif op == "tanh":
            out = x.tanh()
        elif op == "relu":
            out = x.relu()
        elif op == "add_const":
            out = x + const
        elif op == "const_add":
            out = const + x
        elif op == "mul_const":
            out = x * const
        else:
            out = const * x
        nodes.append(out)
    return nodes


def with_value(value, leaves, prog):
    nodes = run_program(leaves, prog, value)
    nodes[-1].backward()
    return [(type(v), v.data, v.grad) for v in nodes]
'''
Program = tuple[list[float], list[tuple[str, int, int, float]]]


def _random_program(seed: int, n_leaves: int, n_ops: int) -> Program:
    rng = random.Random(seed)
    leaves = [round(rng.uniform(-2, 2), 3) for _ in range(n_leaves)]
    prog = []
    for step in range(n_ops):
        size = n_leaves + step
        i = rng.randrange(max(0, size - 4), size)  # mostly recent nodes: depth
        j = rng.randrange(size)  # anything: reuse and accumulation
        prog.append((rng.choice(ENGINE_OPS), i, j, round(rng.uniform(-1.5, 1.5), 3)))
    return leaves, prog


def _chain(depth: int) -> Program:
    return [1.3], [("mul_const", 0, 0, 0.999)] + [
        ("add_const" if s % 2 else "mul_const", s, s, 0.999 if s % 2 == 0 else 0.001) for s in range(1, depth)]


def _fixed(leaves: tuple[float, ...], prog: tuple[tuple[str, int, int, float], ...]) -> Callable[[], Program]:
    return lambda: (list(leaves), list(prog))


# Programs by name (an int case is a seed of a random expression with 1 + seed % 4 leaves and 5 + 3 seed steps).
ENGINE_PROGRAMS = MappingProxyType({
    # a node used twice, a constant on the left and a relu at a negative input
    "worked example": _fixed((2.0, -3.0, 10.0), (
        ("mul", 0, 1, 0.0), ("add", 3, 2, 0.0), ("mul", 4, 4, 0.0), ("tanh", 4, 4, 0.0), ("add", 5, 6, 0.0),
        ("const_mul", 7, 7, 2.0), ("mul_const", 1, 1, -1.0), ("relu", 9, 9, 0.0), ("add", 8, 10, 0.0),
        ("relu", 0, 0, 0.0), ("add", 11, 12, 0.0), ("relu", 1, 1, 0.0), ("add", 13, 14, 0.0),
        ("mul_const", 15, 15, 0.01))),
    "two paths of different lengths: tanh(tanh(tanh(x))) + tanh(x)": _fixed((0.4,), (
        ("tanh", 0, 0, 0.0), ("tanh", 1, 1, 0.0), ("tanh", 2, 2, 0.0), ("add", 3, 1, 0.0))),
    "random expression (seed 0)": lambda: _random_program(0, 3, 12),
    "relu at exactly 0": _fixed((0.0, 1.0), (
        ("relu", 0, 0, 0.0), ("mul", 2, 1, 0.0), ("relu", 3, 3, 0.0), ("add", 4, 0, 0.0))),
    "x + x and y * y": _fixed((0.7,), (("add", 0, 0, 0.0), ("mul", 1, 1, 0.0), ("add", 2, 0, 0.0))),
    "a chain 3000 nodes deep": lambda: _chain(3000),
})


def _program(case: int | str) -> Program:
    if isinstance(case, str):
        return ENGINE_PROGRAMS[case]()
    return _random_program(case, 1 + case % 4, 5 + 3 * case)


def _torch_gradients(leaves: list[float], prog: list[tuple[str, int, int, float]],
                     run_program: Callable[..., list[torch.Tensor]]) -> tuple[float, list[float]]:
    """What torch computes for the program: the result, and the gradient of every node (0.0 where none flows)."""
    theirs = run_program(leaves, prog, lambda v: torch.tensor(v, dtype=torch.float64, requires_grad=True))
    for t in theirs[len(leaves):]:
        t.retain_grad()
    theirs[-1].backward()
    return theirs[-1].item(), [0.0 if t.grad is None else t.grad.item() for t in theirs]


def _close(got: Any, expected: float) -> bool:
    return type(got) in (int, float) and abs(got - expected) <= 1e-9 * max(1.0, abs(expected))


def scalar_engine(c: Check, answer: Any, hidden: Iterable[int | str] | None = None) -> None:
    """`Value`: a scalar reverse-mode engine in plain Python (no torch), whose gradients match torch's (float64)
    on programs of +, *, tanh, relu and constants. A case is a name in ENGINE_PROGRAMS or a seed of a random one."""
    space = _compiled(RUN_PROGRAM, "05-scalar-engine")
    mine = c.watch(space["with_value"], "your Value and its backward()", allow_aten=set(),
                   forbid=[torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad], hint=TORCHLESS_HINTS)
    secret = hidden is not None
    visible = ("worked example", "two paths of different lengths: tanh(tanh(tanh(x))) + tanh(x)",
               "random expression (seed 0)")
    for label, case in named(hidden, visible, str):
        leaves, prog = _program(case)
        got = mine(answer, leaves, prog)
        other = next((kind for kind, _, _ in got if kind is not answer), None)  # one check: each costs a scan
        c.that(other is None, f"{label}: an operation returned {getattr(other, '__name__', other)}, not a Value")
        result, grads = _torch_gradients(leaves, prog, space["run_program"])
        c.that(_close(got[-1][1], result), f"{label}: the result is {got[-1][1]!r}, " + (
            "which is not what torch computes" if secret else f"torch computes {result!r}"), FORWARD_HINTS)
        wrong = [n for n, ((_, _, grad), expected) in enumerate(zip(got, grads)) if not _close(grad, expected)]
        if not wrong:
            continue
        n = wrong[0]
        if secret:  # the count of nodes, a node's place and torch's value are the hidden case's content
            differ = f"{len(wrong)} gradient{' differs' if len(wrong) == 1 else 's differ'} from torch's"
            c.fail(f"{label}: {differ}; the first one has grad {got[n][2]!r}", ENGINE_HINTS)
        differ = f"{len(wrong)} of {len(grads)} gradients differ from torch's"
        what = f"leaf {n}" if n < len(leaves) else f"node {n} ({prog[n - len(leaves)][0]})"
        c.fail(f"{label}: {what} has grad {got[n][2]!r}, torch says {grads[n]!r} ({differ})", ENGINE_HINTS)
