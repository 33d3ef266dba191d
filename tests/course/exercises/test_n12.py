"""Notebook 12's exercise checks, without a notebook: the references pass visible and hidden cases; answers that keep
state outside autograd, hide memory from the meter or fit the visible cases fail saying why, and a hidden case is
named by its number only."""

from __future__ import annotations

from functools import partial
from itertools import combinations

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as cp

from torchlens_widgets.course.exercises import n12

aten = torch.ops.aten
HIDDEN = {
    "12-cut-saved-memory": ["GatedMLP(24, 96) on 100 tokens", "a float64 GatedMLP(16, 80)",
                            "GatedMLP(8, 40) on one token"],
    "12-checkpoint-budget": ["40 random stacks", "an empty stack", "a late big block", "seven measured blocks",
                             "seven other measured blocks"],
    "12-predict-saved": [(7, 5, 8), (3, 11, 4), (1, 1, 8), (64, 32, 8)],
}


def save_matmuls(ctx, op, *args, **kwargs):  # type: ignore[no-untyped-def]
    if op in (aten.mm.default, aten.addmm.default):
        return cp.CheckpointPolicy.MUST_SAVE
    return cp.CheckpointPolicy.PREFER_RECOMPUTE


def lean_forward(mlp, x):  # type: ignore[no-untyped-def]
    return cp.checkpoint(mlp, x, use_reentrant=False,
                         context_fn=partial(cp.create_selective_checkpoint_contexts, save_matmuls))


def peak_model(s, a, checkpointed):  # type: ignore[no-untyped-def]
    held = [a[i] if i in checkpointed else s[i] for i in range(len(s))]
    spikes = [sum(held[:j]) + s[j] for j in checkpointed]
    return max([sum(held)] + spikes)


def choose_checkpoints(block_bytes, input_bytes, budget):  # type: ignore[no-untyped-def]
    n = len(block_bytes)
    for k in range(n + 1):
        for chosen in combinations(range(n), k):
            if peak_model(block_bytes, input_bytes, set(chosen)) <= budget:
                return set(chosen)
    return None


def predict_saved(n, d, itemsize):  # type: ignore[no-untyped-def]
    full, row = n * d * itemsize, d * itemsize
    return {
        "x.relu().sum()": {"ReluBackward0": {"result": full}},
        "torch.exp(x) * v": {"MulBackward0": {"self": full, "other": row}, "ExpBackward0": {"result": full}},
        "torch.exp(x) * c": {"MulBackward0": {"other": row}, "ExpBackward0": {"result": full}},
        "torch.tanh(x @ w)": {"TanhBackward0": {"result": full}, "MmBackward0": {"self": full, "mat2": d * row}},
        "x.softmax(-1).max(-1).values": {"MaxBackward0": {"indices": n * 8}, "SoftmaxBackward0": {"result": full}},
        "torch.where(x > 0, x, 0.0).pow(3)": {"PowBackward0": {"self": full}, "WhereBackward0": {"condition": n * d}},
        "F.layer_norm(x, (d,))": {"NativeLayerNormBackward0": {"input": full, "result1": n * itemsize,
                                                                "result2": n * itemsize}},
        "(x * x).mean()": {"MulBackward0": {"self": full, "other": full}},
    }


def _both(grade: object, answer: object, hidden: list) -> object:  # type: ignore[type-arg]
    return lambda c: (grade(c, answer), grade(c, answer, hidden=hidden))  # type: ignore[operator]


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    for gid, grade, answer in (("12-cut-saved-memory", n12.cut_saved_memory, lean_forward),
                               ("12-checkpoint-budget", n12.checkpoint_budget, choose_checkpoints),
                               ("12-predict-saved", n12.predict_saved, predict_saved)):
        assert verdict(gid, _both(grade, answer, HIDDEN[gid])) is None, gid


def _stashing_forward():  # type: ignore[no-untyped-def]
    """Hint 3's custom Function, with u and g kept in a closure rather than in ctx: right for one call at a time."""
    kept = {}

    class GateDown(torch.autograd.Function):
        @staticmethod
        def forward(ctx, u, g, w, b):  # type: ignore[no-untyped-def]
            kept["ugw"] = (u, g, w)
            return F.linear(F.gelu(u) * F.silu(g), w, b)

        @staticmethod
        def backward(ctx, grad):  # type: ignore[no-untyped-def]
            u, g, w = (t.detach().requires_grad_() for t in kept["ugw"])
            with torch.enable_grad():
                h = F.gelu(u) * F.silu(g)
                du, dg = torch.autograd.grad(h, (u, g), grad @ w)
            return du, dg, grad.t() @ h.detach(), grad.sum(0)

    def stashed(mlp, x):  # type: ignore[no-untyped-def]
        return GateDown.apply(mlp.up(x), mlp.gate(x), mlp.down.weight, mlp.down.bias)

    return stashed


def test_saved_tensors_kept_outside_the_call_fail_on_the_second_call(verdict) -> None:  # type: ignore[no-untyped-def]
    stashed = _stashing_forward()
    message = verdict("12-cut-saved-memory", lambda c: n12.cut_saved_memory(c, stashed))
    assert message.startswith("GatedMLP(32, 128) on 256 tokens, lean_forward called a second "
                              "time (on other tokens) before one backward: the backward raised RuntimeError: Mismatch in shape")


class _AsNumbers(torch.autograd.Function):
    """Keeps u and g as Python floats (.item()), where no storage meter looks."""

    @staticmethod
    def forward(ctx, u, g):  # type: ignore[no-untyped-def]
        ctx.shape, ctx.kept = u.shape, [[v.item() for v in t.reshape(-1)] for t in (u, g)]
        return F.gelu(u) * F.silu(g)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        u, g = (torch.tensor(k, dtype=grad.dtype).view(ctx.shape).requires_grad_() for k in ctx.kept)
        with torch.enable_grad():
            return torch.autograd.grad(F.gelu(u) * F.silu(g), (u, g), grad)


def test_values_kept_as_python_numbers_fail(verdict) -> None:  # type: ignore[no-untyped-def]
    def numbers(mlp, x):  # type: ignore[no-untyped-def]
        return mlp.down(_AsNumbers.apply(mlp.up(x), mlp.gate(x)))

    message = verdict("12-cut-saved-memory", lambda c: n12.cut_saved_memory(c, numbers))
    assert message.startswith("lean_forward called Tensor.item, which this exercise asks you "
                              "not to use")


def test_hidden_failures_are_numbered_without_their_content(verdict) -> None:  # type: ignore[no-untyped-def]
    def float32_only(mlp, x):  # type: ignore[no-untyped-def]
        return lean_forward(mlp, x) if x.dtype == torch.float32 else mlp(x)

    message = verdict("12-cut-saved-memory", lambda c: n12.cut_saved_memory(c, float32_only,
                                                                              hidden=HIDDEN["12-cut-saved-memory"]))
    assert message.startswith("hidden case 2: your forward leaves ") and "more than half of what mlp(x) leaves" in message
    assert "GatedMLP(16" not in message and "float64" not in message.split("\nHint")[0]

    def hard_coded(block_bytes, input_bytes, budget):  # type: ignore[no-untyped-def]
        return {70_000: {0, 1, 2}, 25: set(), 4: None}.get(budget, choose_checkpoints(block_bytes, input_bytes, budget))

    assert verdict("12-checkpoint-budget", lambda c: n12.checkpoint_budget(c, hard_coded)) is None
    message = verdict("12-checkpoint-budget", lambda c: n12.checkpoint_budget(c, lambda s, a, b: set(),
                                                                               hidden=HIDDEN["12-checkpoint-budget"]))
    assert message.startswith("hidden case 1: ") and "budget 1" not in message

    def raises_on_other_sizes(n, d, itemsize):  # type: ignore[no-untyped-def]
        if (n, d) != (64, 32):
            raise ValueError(f"no prediction for n={n}, d={d}")
        return predict_saved(n, d, itemsize)

    message = verdict("12-predict-saved", lambda c: n12.predict_saved(c, raises_on_other_sizes,
                                                                       hidden=HIDDEN["12-predict-saved"]))
    assert message == "hidden case 1: your code raised ValueError on this case"

    def visible_sizes(n, d, itemsize):  # type: ignore[no-untyped-def]
        return predict_saved(64, 32, 4)

    message = verdict("12-predict-saved", lambda c: n12.predict_saved(c, visible_sizes, hidden=HIDDEN["12-predict-saved"]))
    assert message.startswith("hidden case 1['x.relu().sum()']: ReluBackward0 'result': 8192 bytes")
    assert "(7, 5, 8)" not in message and "280" not in message


def test_answers_of_their_own_classes_are_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    class Lying(dict):  # type: ignore[type-arg]
        def __getitem__(self, key):  # type: ignore[no-untyped-def]
            return predict_saved(64, 32, 4)[key]

    message = verdict("12-predict-saved", lambda c: n12.predict_saved(c, lambda n, d, i: Lying()))
    assert "must return a dict, got Lying" in message

    class Fits(frozenset):  # type: ignore[type-arg]
        pass

    message = verdict("12-checkpoint-budget", lambda c: n12.checkpoint_budget(
        c, lambda s, a, b: None if (r := choose_checkpoints(s, a, b)) is None else Fits(r)))
    assert "expected a set of block indices, got an object of type Fits" in message
