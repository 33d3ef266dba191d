"""Notebook 12 (save or recompute): a forward that keeps half the memory and recomputes no matmul, checkpoints placed
under a memory budget, and what each node saves, predicted from the sizes.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). The checks measure with their own models (never a notebook
global) and the package's meters.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as ckpt
from torch import nn

from ...lenses.autograd import grad_graph
from ...lenses.meters import OpCounter, held_after_forward
from ._cases import errors_by_type, named, numbered

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["checkpoint_budget", "cut_saved_memory", "predict_saved"]

# captured when the package is imported
_Random = random.Random
_combinations = itertools.combinations
_F32, _F64 = torch.float32, torch.float64
_PLAIN = (torch.Tensor, nn.Parameter)  # answers of exactly these types; a subclass could say anything


def _compiled(source: str, exercise: str) -> dict[str, Any]:
    space: dict[str, Any] = {"torch": torch}
    exec(compile(source, f"<workloads of {exercise}>", "exec"), space)
    return space


def _same_tensor(c: Check, got: Any, expected: torch.Tensor, what: str, secret: bool, hint: Sequence[str]) -> None:
    """`got` is a plain tensor equal to `expected` within 1e-5; a hidden case's mismatch names no shape or value."""
    got = c.tensor(got, what)
    c.that(got.dtype == expected.dtype, f"{what}: dtype {str(got.dtype).replace('torch.', '')}"
           + ("" if secret else f", expected {str(expected.dtype).replace('torch.', '')}"), hint)
    c.that(tuple(got.shape) == tuple(expected.shape), f"{what}: shape {list(got.shape)}" + (
        ", which is not right" if secret else f", expected {list(expected.shape)}"), hint)
    c.equal(got.detach(), expected, what=what, rel_tol=1e-5, hint=hint)


# --- 12-cut-saved-memory ------------------------------------------------------------------------------------------

LEAN_HINTS = (
    "list the five hidden-width tensors autograd saves for this block (section 1's table) and mark which of them are "
    "outputs of a matmul",
    "up(x) and gate(x) are matmul outputs; gelu(...), silu(...) and their product can be recomputed from them with "
    "pointwise ops. Checkpointing only the pointwise part is not enough: down still saves its input",
    "keep the matmul outputs and recompute the rest, e.g. with a selective-checkpoint policy (section 3) that saves "
    "what the matmuls produce, or with a custom Function around the gate-and-down part that saves only up(x), "
    "gate(x) and down's weight",
)
GRAD_HINTS = (
    "recomputing must not change the function: compare your output and gradients with the plain block's",
    "a hand-written backward is easy to get wrong; check it with torch.autograd.gradcheck in float64",
    "inside a custom backward, recompute gelu(u) * silu(g) under torch.enable_grad() from detached copies of u and g "
    "and let torch.autograd.grad differentiate it",
)
CONNECTED_HINTS = ("the output must stay connected to x and to mlp's parameters in the autograd graph: do not detach "
                   "it or compute it under torch.no_grad()",)
TWICE_HINTS = ("each call must keep what its own backward needs: autograd's saved tensors (ctx.save_for_backward, "
               "a checkpoint) belong to one call; a variable outside the call is shared by every call",)
STORE_HINTS = ("keep what backward needs as tensors autograd saves (or recomputes); the check measures every "
               "storage your forward leaves alive, and this route hides memory from it",)
_MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "mv", "addmv", "dot", "linear"})
# ways to keep a tensor's values where the live-storage meter does not look: Python numbers, outside memory
LEAN_FORBID = (torch.Tensor.item, torch.frombuffer, torch.asarray, torch.from_file)
LEAN_FORBID_ATEN = frozenset({"_local_scalar_dense"})  # .item(), float(t), int(t): a value into a Python number


class _Gated(nn.Module):
    """GatedMLP from the notebook, defined here: the check measures against its own model."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.up, self.gate, self.down = nn.Linear(d, hidden), nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(t)) * F.silu(self.gate(t)))


# name -> (seed, d, hidden width, tokens, dtype, tokens of the second call)
CUT_CASES = MappingProxyType({
    "GatedMLP(32, 128) on 256 tokens": (0, 32, 128, 256, _F32, 64),
    "GatedMLP(24, 96) on 100 tokens": (5, 24, 96, 100, _F32, 37),
    "a float64 GatedMLP(16, 80)": (6, 16, 80, 37, _F64, 11),
    "GatedMLP(8, 40) on one token": (7, 8, 40, 1, _F32, 3),
})
CUT_VISIBLE = ("GatedMLP(32, 128) on 256 tokens",)
# the answer's forward under the live-storage meter, recorded as a whole (the meter is watched too)
MEASURE_SOURCE = '''
def measured(lean_forward, held_after_forward, mlp, x):
    return held_after_forward(lean_forward, mlp, x)


def called(lean_forward, mlp, x):
    return lean_forward(mlp, x)
'''


def _step(run: Callable[[nn.Module, torch.Tensor], tuple[Any, int]], model: nn.Module,
          x: torch.Tensor) -> tuple[Any, int, list[Any], dict[str, int]]:
    """run(model, x) gives (output, held bytes); returns those, the gradients of x and of every parameter, and the aten
    ops of backward."""
    x = x.detach().requires_grad_()
    for p in model.parameters():
        p.grad = None
    torch.manual_seed(0)
    out, held = run(model, x)
    if type(out) not in _PLAIN:  # never touched: an object of the answer's own class runs its own code
        return out, held, [], {}
    if not out.requires_grad:
        return out.detach(), held, [None] * (1 + len(list(model.parameters()))), {}
    with OpCounter() as counter:
        out.backward(torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(out.shape))
    return out.detach(), held, [x.grad] + [p.grad for p in model.parameters()], dict(counter.ops)


def _twice(forward: Callable[[nn.Module, torch.Tensor], Any], model: nn.Module, xs: Sequence[torch.Tensor]) -> tuple[
        list[Any], list[Any], Exception | None]:
    """Two forward calls, then one backward through both: (outputs, gradients of both inputs and every parameter, what
    that backward raised)."""
    leaves = [x.detach().requires_grad_() for x in xs]
    for p in model.parameters():
        p.grad = None
    torch.manual_seed(0)
    outs = [forward(model, x) for x in leaves]
    if not all(type(o) in _PLAIN for o in outs):
        return outs, [], None
    if not all(o.requires_grad for o in outs):
        return [o.detach() for o in outs], [None] * (len(leaves) + len(list(model.parameters()))), None
    total = sum((o * torch.linspace(-1, 1 + k, o.numel(), dtype=o.dtype).view(o.shape)).sum()
                for k, o in enumerate(outs))
    try:
        total.backward()  # type: ignore[union-attr]
    except Exception as exc:  # the answer's backward, run for a call whose saved tensors were not its own
        return [o.detach() for o in outs], [], exc
    return [o.detach() for o in outs], [x.grad for x in leaves] + [p.grad for p in model.parameters()], None


def _grads(c: Check, label: str, names: Sequence[str], grads: Sequence[Any], expected: Sequence[Any], secret: bool,
           hint: Sequence[str]) -> None:
    for name, g, r in zip(names, grads, expected):
        c.that(g is not None, f"{label}: no gradient reached {name}", CONNECTED_HINTS)
        _same_tensor(c, g, r, f"{label}: gradient of {name}", secret, hint)


def cut_saved_memory(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`lean_forward(mlp, x)`: the plain block's output and gradients (within 1e-5), at most half the bytes it leaves
    alive after the forward, no more matmuls in backward, values kept as tensors (no Python numbers, no outside
    memory), and each of two calls before one backward gets its own gradients. Hidden cases name `CUT_CASES`."""
    secret = hidden is not None
    space = _compiled(MEASURE_SOURCE, "12-cut-saved-memory")
    measured, called = (c.watch(space[fn], "lean_forward", forbid=LEAN_FORBID, forbid_aten=LEAN_FORBID_ATEN,
                                hint=STORE_HINTS) for fn in ("measured", "called"))
    for label, name in named(hidden, CUT_VISIBLE, lambda name: name):
        with errors_by_type(c, label, secret):
            _judge_lean(c, answer, measured, called, label, name, secret)


def _judge_lean(c: Check, answer: Any, measured: Callable[..., Any], called: Callable[..., Any], label: str, name: str,
                secret: bool) -> None:
    """One model: the answer's forward measured (output, gradients, bytes, matmuls), then called twice before one
    backward."""
    seed, d, width, tokens, dtype, other = CUT_CASES[name]
    torch.manual_seed(seed)
    model = _Gated(d, width).to(dtype)
    x, x2 = torch.randn(tokens, d, dtype=dtype), torch.randn(other, d, dtype=dtype)
    names = ["x"] + [n for n, _ in model.named_parameters()]

    ref_out, ref_held, ref_grads, ref_ops = _step(held_after_forward, model, x)
    out, held, grads, ops = _step(lambda m, t: measured(answer, held_after_forward, m, t), model, x)
    _same_tensor(c, out, ref_out, f"{label}: lean_forward(mlp, x)'s output", secret, GRAD_HINTS)
    _grads(c, label, names, grads, ref_grads, secret, GRAD_HINTS)
    c.that(held <= ref_held // 2, f"{label}: your forward leaves {held} bytes alive, " + (
        "more than half of what mlp(x) leaves" if secret else
        f"mlp(x) leaves {ref_held}; the target is at most {ref_held // 2} (50%)"), LEAN_HINTS)
    mine_mm, ref_mm = (sum(n for op, n in o.items() if op in _MATMULS) for o in (ops, ref_ops))
    c.that(mine_mm <= ref_mm, f"{label}: your backward runs {mine_mm} matmul ops, " + (
        "more than the original's" if secret else f"the original's runs {ref_mm}") + ": a matmul is being "
           "recomputed", LEAN_HINTS)

    # called a second time, on other tokens, before any backward: each call's gradients are its own
    ref_outs, ref_grads, _ = _twice(lambda m, t: m(t), model, (x, x2))
    outs, grads, error = _twice(lambda m, t: called(answer, m, t), model, (x, x2))
    again = f"{label}, lean_forward called a second time (on other tokens) before one backward"
    for k, (o, r) in enumerate(zip(outs, ref_outs)):
        _same_tensor(c, o, r, f"{again}: call {k + 1}'s output", secret, TWICE_HINTS)
    if error is not None:
        said = str(error).strip().splitlines()[0][:200] if str(error).strip() and not secret else ""
        c.fail(f"{again}: the backward raised {type(error).__name__}" + (f": {said}" if said else ""), TWICE_HINTS)
    _grads(c, again, ["x of call 1", "x of call 2"] + names[1:], grads, ref_grads, secret, TWICE_HINTS)


# --- 12-checkpoint-budget -----------------------------------------------------------------------------------------

BUDGET_HINTS = (
    "compute the peak of your set with section 4's model: the larger of what the forward leaves and each "
    "checkpointed block's spike during backward",
    "checkpointing block j lowers what stays after the forward, but in backward j comes back in full while every "
    "block before it is still held. A big late block is expensive to checkpoint; checkpointing the blocks before it "
    "is what lowers its spike",
    "greedy choices (biggest first, front to back) fail on some stacks. With at most 10 blocks you can afford to try "
    "candidate sets in order of size and stop at the first that fits; return None when none does",
)
SET_HINTS = ("return a set of block indices (plain ints from 0 to len(block_bytes) - 1), or None when no set fits",)


def _peak(s: Sequence[int], a: Sequence[int], chosen: set[int]) -> int:
    """Section 4's peak model: each checkpointed block's spike, and what the forward leaves."""
    worst, held = 0, 0
    for j in range(len(s)):
        if j in chosen:
            worst = max(worst, held + s[j])
        held += a[j] if j in chosen else s[j]
    return max(worst, held)


def _fewest(s: Sequence[int], a: Sequence[int], budget: int) -> int | None:
    """The size of the smallest fitting set, over all subsets; None if nothing fits."""
    for size in range(len(s) + 1):
        if any(_peak(s, a, set(chosen)) <= budget for chosen in _combinations(range(len(s)), size)):
            return size
    return None


class _Block(nn.Module):
    """Block from section 1, defined here: the check measures its own stack."""

    def __init__(self, d: int, hidden: int, p: float = 0.1) -> None:
        super().__init__()
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, hidden), nn.Linear(hidden, d)
        self.drop = nn.Dropout(p)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return t + self.drop(self.fc2(F.gelu(self.fc1(self.ln(t)))))


class _Stack(nn.Module):
    def __init__(self, widths: Sequence[int], d: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, d)
        self.blocks = nn.ModuleList([_Block(d, h) for h in widths])

    def forward(self, ids: torch.Tensor, checkpointed: Iterable[int] = ()) -> torch.Tensor:
        h = self.embed(ids)
        for i, blk in enumerate(self.blocks):
            h = ckpt.checkpoint(blk, h, use_reentrant=False) if i in checkpointed else blk(h)
        return h


def _random_choices(seed: int, count: int) -> Iterator[tuple[Any, ...]]:
    rng = _Random(seed)
    for _ in range(count):
        n = rng.randint(1, 10)
        s = [rng.randint(2, 60) * 100 for _ in range(n)]
        a = [rng.randint(1, min(s)) for _ in range(n)] if rng.random() < 0.5 else [min(s) // 2 + 1] * n
        yield ("choice", tuple(s), tuple(a), rng.randint(min(s), sum(s)))


# name -> its items: ("choice", block_bytes, input_bytes, budget) or ("stack", widths, budget fraction, tokens, seed)
BUDGET_CASES: MappingProxyType[str, Callable[[], Iterable[tuple[Any, ...]]]] = MappingProxyType({
    "the example with budget 70000": lambda: [("choice", (10_000, 10_000, 10_000, 60_000), (1_000,) * 4, 70_000)],
    "five equal blocks, budget 25": lambda: [("choice", (5,) * 5, (1,) * 5, 25)],
    "five equal blocks, budget 4": lambda: [("choice", (5,) * 5, (1,) * 5, 4)],
    "a stack of widths [64, 256, 128, 512, 64]": lambda: [("stack", (64, 256, 128, 512, 64), 0.6, 64, 1)],
    "40 random stacks": lambda: _random_choices(12, 40),
    "an empty stack": lambda: [("choice", (), (), 0)],
    "a late big block": lambda: [("choice", (9_000, 1_000, 1_000, 1_000, 8_000), (500,) * 5, 12_000)],
    "seven measured blocks": lambda: [("stack", (128, 64, 512, 64, 256, 128, 64), 0.4, 48, 2)],
    "seven other measured blocks": lambda: [("stack", (256, 64, 64, 128, 512, 64, 128), 0.45, 40, 3)],
})
BUDGET_VISIBLE = ("the example with budget 70000", "five equal blocks, budget 25", "five equal blocks, budget 4",
                  "a stack of widths [64, 256, 128, 512, 64]")


def _shown(got: Any) -> str:
    """The answer, shown only when it is a plain set of ints (any other object's repr is its own code)."""
    if got is None or (type(got) in (set, frozenset) and all(type(i) is int for i in got)):
        return repr(None if got is None else sorted(got))
    return f"an object of type {type(got).__name__}"


def _judge_choice(c: Check, mine: Callable[..., Any], s: Sequence[int], a: Sequence[int], budget: int, label: str,
                  secret: bool) -> set[int] | None:
    got = mine(list(s), list(a), budget)
    plain = got is None or (type(got) in (set, frozenset) and all(type(i) is int and 0 <= i < len(s) for i in got))
    best = _fewest(s, a, budget)
    if best is None:
        c.that(got is None, f"{label}: returned {_shown(got)}, which is not right for this stack and budget" if secret
               else f"{label}: no set of blocks fits budget {budget}, expected None, got {_shown(got)}", BUDGET_HINTS)
        return None
    c.that(got is not None, f"{label}: returned None, which is not right for this stack and budget" if secret else
           f"{label}: returned None, but a set of blocks fits budget {budget}", BUDGET_HINTS)
    c.that(plain, f"{label}: expected a set of block indices, got {_shown(got)}", SET_HINTS)
    chosen = set(got)
    peak = _peak(s, a, chosen)
    c.that(peak <= budget, f"{label}: checkpointing your {len(chosen)} blocks gives a peak over the budget" if secret
           else f"{label}: checkpointing {sorted(chosen)} gives a peak of {peak} > budget {budget}", BUDGET_HINTS)
    c.that(len(chosen) == best, f"{label}: your {len(chosen)} blocks fit, but fewer checkpointed blocks suffice"
           if secret else f"{label}: {sorted(chosen)} fits, but {best} checkpointed blocks suffice", BUDGET_HINTS)
    return chosen


def _judge_stack(c: Check, mine: Callable[..., Any], widths: Sequence[int], fraction: float, tokens: int, seed: int,
                 label: str, secret: bool) -> None:
    torch.manual_seed(seed)
    stack, ids = _Stack(widths), torch.randint(0, 50, (tokens,))
    s = [held_after_forward(lambda b=b: b(torch.randn(tokens, 32)))[1] for b in stack.blocks]  # input included
    a = [tokens * 32 * 4] * len(widths)
    plain = held_after_forward(stack, ids)[1]
    if plain != sum(s):  # the measurement behind the model (not the answer)
        raise RuntimeError(f"the stack's measurement disagrees with its blocks' ({plain} != {sum(s)})")
    budget = int(fraction * plain)
    chosen = _judge_choice(c, mine, s, a, budget, label or f"a stack of widths {list(widths)} with budget {budget}",
                           secret)
    if chosen is None:
        return
    torch.manual_seed(seed)
    after = held_after_forward(lambda: stack(ids, chosen))[1]
    c.that(after <= budget, f"{label}: measured, your blocks leave more than the budget after the forward" if secret
           else f"measured: checkpointing {sorted(chosen)} leaves {after} bytes after the forward, over the budget "
                f"{budget}")
    c.that(after == sum(a[i] if i in chosen else s[i] for i in range(len(s))),
           f"{label or 'measured'}: the bytes after the forward differ from the model's H")


def checkpoint_budget(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`choose_checkpoints(block_bytes, input_bytes, budget)`: the smallest set of blocks whose peak (section 4's model)
    fits the budget, None when none does, with arithmetic only; on measured stacks the set really fits. Hidden cases
    name `BUDGET_CASES`."""
    secret = hidden is not None
    mine = c.watch(answer, "choose_checkpoints", allow_aten=set())  # arithmetic only
    visible = [(name, item) for name in BUDGET_VISIBLE for item in BUDGET_CASES[name]()]
    for label, (name, item) in numbered(hidden, visible, lambda case: [("", it) for it in BUDGET_CASES[case]()]):
        with errors_by_type(c, label, secret):
            if item[0] == "choice":
                _, s, a, budget = item
                _judge_choice(c, mine, s, a, budget, label or name, secret)
            else:
                _, widths, fraction, tokens, seed = item
                _judge_stack(c, mine, widths, fraction, tokens, seed, label, secret)


# --- 12-predict-saved ---------------------------------------------------------------------------------------------

PREDICT_HINTS = (
    "for each node ask what its derivative formula needs from the forward: its input, its output, or something else "
    "(a mask, indices, statistics)? Section 1's table has one operator per row",
    "relu, exp, tanh and softmax keep their output ('result'); pow keeps its input ('self'); mul and mm keep the "
    "other factor of each input that needs a gradient ('self', 'other', 'mat2')",
    "max keeps int64 'indices' (8 bytes each, whatever the dtype), where a bool 'condition' (1 byte each), layer_norm "
    "its 'input' and a per-row mean and rstd ('result1', 'result2'); sum and mean keep nothing and are not listed",
)
PREDICT_ASK_HINTS = ("predict from n, d and itemsize with arithmetic; the check runs the expressions itself",)
_DTYPES = MappingProxyType({4: _F32, 8: _F64})
PREDICT_VISIBLE = ((64, 32, 4),)  # (n, d, itemsize)


def _expressions(n: int, d: int, dtype: torch.dtype) -> dict[str, Callable[[], torch.Tensor]]:
    """The notebook's saved_expressions, defined here: the check builds its own tensors."""
    torch.manual_seed(0)
    x = torch.randn(n, d, dtype=dtype, requires_grad=True)
    v = torch.randn(d, dtype=dtype, requires_grad=True)
    w = torch.randn(d, d, dtype=dtype, requires_grad=True)
    c = torch.randn(d, dtype=dtype)
    return {
        "x.relu().sum()": lambda: x.relu().sum(),
        "torch.exp(x) * v": lambda: torch.exp(x) * v,
        "torch.exp(x) * c": lambda: torch.exp(x) * c,
        "torch.tanh(x @ w)": lambda: torch.tanh(x @ w),
        "x.softmax(-1).max(-1).values": lambda: x.softmax(-1).max(-1).values,
        "torch.where(x > 0, x, 0.0).pow(3)": lambda: torch.where(x > 0, x, 0.0).pow(3),
        "F.layer_norm(x, (d,))": lambda: F.layer_norm(x, (d,)),
        "(x * x).mean()": lambda: (x * x).mean(),
    }


def _plain_nodes(value: Any) -> bool:
    """{node name: {saved name: bytes}}, every level of exactly these builtin types."""
    return type(value) is dict and all(
        type(k) is str and type(v) is dict and all(type(s) is str and type(b) is int for s, b in v.items())
        for k, v in value.items())


def _hidden_mismatch(got: dict[str, dict[str, int]], expected: dict[str, dict[str, int]]) -> str | None:
    """What is wrong with a hidden case's prediction, in the answer's own terms (no expected value)."""
    missing, extra = len(set(expected) - set(got)), len(set(got) - set(expected))
    if missing or extra:
        return f"{missing} node(s) missing, {extra} listed that save nothing"
    for node, slots in expected.items():
        mine = got[node]
        if set(mine) != set(slots):
            return f"{node}: the saved names are not right"
        for slot, nbytes in slots.items():
            if mine[slot] != nbytes:
                return f"{node} {slot!r}: {mine[slot]} bytes is not right"
    return None


def predict_saved(c: Check, answer: Any, hidden: Iterable[tuple[int, int, int]] | None = None) -> None:
    """`predict_saved(n, d, itemsize)`: for each expression, {node: {saved name: bytes}} as the lens reads it, with
    arithmetic only (secret). A case is (n, d, itemsize); hidden ones are numbered."""
    secret = hidden is not None
    mine = c.watch(answer, "predict_saved", allow_aten=set(), forbid=[grad_graph], hint=PREDICT_ASK_HINTS)
    for label, (n, d, itemsize) in named(hidden, PREDICT_VISIBLE, lambda case: f"predict_saved{tuple(case)}"):
        n, d, itemsize = int(n), int(d), int(itemsize)
        with errors_by_type(c, label, secret):
            got = mine(n, d, itemsize)
        c.that(type(got) is dict, f"{label} must return a dict, got {type(got).__name__}")
        c.that(all(type(k) is str for k in got), f"{label}: the keys must be the expressions, as plain strings")
        for expr, fn in _expressions(n, d, _DTYPES[itemsize]).items():
            graph = grad_graph(fn())
            expected = {nd.name: {s.name: s.nbytes for s in nd.saved} for nd in graph.nodes if nd.saved}
            c.that(expr in got, f"{label}: no prediction for {expr!r}")
            said = got[expr]
            c.that(_plain_nodes(said), f"{label}[{expr!r}]: expected {{node name: {{saved name: bytes}}}} with int "
                   f"bytes, got {_kind(said)}")
            if not secret:
                c.equal(said, expected, what=f"{label}[{expr!r}]", hint=PREDICT_HINTS, secret=True)
                continue
            wrong = _hidden_mismatch(said, expected)
            c.that(wrong is None, f"{label}[{expr!r}]: {wrong}", PREDICT_HINTS)


def _kind(value: Any) -> str:
    """How a prediction is built, without calling its own code: the types on the way to a wrong one."""
    if type(value) is not dict:
        return f"an object of type {type(value).__name__}"
    for k, v in value.items():
        if type(k) is not str or type(v) is not dict:
            return f"a {type(v).__name__} under a {type(k).__name__} key"
        for s, b in v.items():
            if type(s) is not str or type(b) is not int:
                return f"{type(b).__name__} bytes under {type(s).__name__} {s!r}" if type(s) is str else \
                    f"a {type(s).__name__} saved name"
    return "a dict"
