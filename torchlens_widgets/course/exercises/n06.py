"""Notebook 06 (custom autograd Functions): a numerically stable softplus, a straight-through estimator, and a
backward that recomputes instead of saving.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). The answer is the learner's `torch.autograd.Function`
class itself; the check calls its `apply` and inspects the node it puts into the graph.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
import torch.storage as _torch_storage
from torch.autograd import gradcheck, gradgradcheck
from torch.autograd.gradcheck import GradcheckError

from ...lenses.meters import SavedMeter, held_after_forward
from ..integrity import clean
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["recompute_backward", "stable_softplus", "straight_through"]

# What the check calls through `c.watch` besides the answer itself, compiled per call under a file name of its
# own: a watched call may call nothing defined in this module.
WORKLOADS = '''
def grad_of(y, x, g):
    return torch.autograd.grad(y, x, g)[0]


def notices_inplace_write(apply, x):
    y = apply(x)
    with torch.no_grad():
        x.mul_(1.5)  # between forward and backward: x's version goes up
    try:
        torch.autograd.grad(y.sum(), x)
    except RuntimeError as err:
        return "modified by an inplace operation" in str(err)
    return False
'''


def _compiled(exercise: str) -> dict[str, Any]:
    space: dict[str, Any] = {"torch": torch}
    exec(compile(WORKLOADS, f"<workloads of {exercise}>", "exec"), space)
    return space


def _draw(seed: int, draws: Sequence[tuple[tuple[int, ...], torch.dtype]], k: int) -> torch.Tensor:
    """The k-th of a sequence of randn draws from one generator seeded `seed` (the earlier draws are replayed)."""
    gen = torch.Generator().manual_seed(seed)
    for shape, dtype in draws[:k]:
        torch.randn(shape, generator=gen, dtype=dtype)
    shape, dtype = draws[k]
    return torch.randn(shape, generator=gen, dtype=dtype)


def _node_of(answer: Any) -> Any:
    """The node class autograd generated for the learner's Function (None for anything else)."""
    return getattr(answer, "_backward_cls", None)


def _same_shape(c: Check, got: torch.Tensor, x: torch.Tensor, what: str) -> None:
    """For a hidden case: the shape, checked without printing it (the tensor comparison would)."""
    c.that(tuple(got.shape) == tuple(x.shape), f"{what} does not have the shape of the input")


def _storage_api_patched() -> list[str]:
    """The keep-alive probe and the meters ask torch's storage weak references; a patched one could hide a kept
    tensor."""
    names = ("_expired", "_weak_ref", "_free_weak_ref")
    found = [n for n in names if n in vars(torch.UntypedStorage)]
    for n in names:
        f = vars(_torch_storage._StorageBase).get(n)
        f = getattr(f, "__func__", f)
        if getattr(getattr(f, "__code__", None), "co_filename", None) != _torch_storage.__file__:
            found.append(n)
    return found


def _storage_intact(c: Check) -> None:
    patched = _storage_api_patched()
    c.that(not patched, f"torch's storage functions were replaced ({', '.join(patched)}); restart the kernel")


def _gradcheck_problem(apply: Any, x: torch.Tensor, second: bool = False) -> str | None:
    """The first line of gradcheck's (or gradgradcheck's) complaint about `apply` at x, or None."""
    try:
        (gradgradcheck if second else gradcheck)(apply, (x.detach().requires_grad_(),))
        return None
    except GradcheckError as err:
        return str(err).strip().splitlines()[0].rstrip(",")


# --- 06-stable-softplus -----------------------------------------------------------------------------------------

SOFTPLUS_VALUE_HINTS = (
    "look at the inputs the message names: does your formula overflow there, or round a tiny result to 0?",
    "exp must only ever see arguments <= 0, and log(1 + tiny) must be log1p(tiny): log(1 + 4e-18) is exactly 0",
    "split x into its positive part and -|x|: the hint under the exercise gives the formula",
)
SOFTPLUS_GRAD_HINTS = (
    "look at where the gradient goes wrong: overflow (inf or nan) for large |x|, or a cancellation to 0 for very "
    "negative x",
    "the derivative of softplus is the sigmoid; torch.sigmoid is computed stably, e^x / (1 + e^x) and "
    "1 - 1 / (1 + e^x) are not",
)
SOFTPLUS_OPS_HINTS = ("build softplus from elementary operators (exp, log1p, abs, clamp, maximum, where, ...): the "
                      "library's softplus, logaddexp and logsigmoid compute the answer for you",)
SOFTPLUS_NODE_HINTS = ("return the result of forward; StableSoftplus.apply puts your node into the graph",)
SOFTPLUS_DTYPE_HINTS = ("compute in the input's dtype",)
SOFTPLUS_GRADCHECK_HINTS = ("your backward is not the derivative of your forward: d/dx softplus(x) = sigmoid(x)",)
SOFTPLUS_TWICE_HINTS = ("write the backward with torch operators on the saved tensors (no detach, no "
                        "@once_differentiable) so that autograd can differentiate it a second time",)
ELEMENTARY = frozenset({
    "abs", "neg", "exp", "expm1", "exp2", "log", "log1p", "log2", "clamp", "clamp_min", "clamp_max", "relu",
    "maximum", "minimum", "max", "min", "where", "add", "sub", "rsub", "mul", "div", "gt", "ge", "lt", "le", "eq",
    "ne", "sign", "sgn", "sigmoid", "masked_fill", "fill_", "zeros_like", "ones_like", "full_like", "empty_like",
    "scalar_tensor", "lift_fresh", "detach", "alias", "view", "expand", "_to_copy", "copy_", "clone",
    "logical_not", "square", "pow", "reciprocal",
})
SOFTPLUS_OPS = frozenset({"softplus", "softplus_backward", "logaddexp", "log_sigmoid_forward", "log_sigmoid_backward"})
_F32, _F64 = torch.float32, torch.float64
# one generator, seeded 6, draws these in turn (the notebook's order: visible first, then hidden)
SOFTPLUS_DRAWS = (((8,), _F64), ((3, 4, 5), _F32), ((2, 3), _F64))
# name -> ("values": values and gradients against float64 references | "gradchecks": gradcheck and gradgradcheck,
# the input in float64)
SOFTPLUS_CASES = MappingProxyType({
    "float32 [-1000 .. 1000]": ("values", lambda: torch.tensor(
        [-1000.0, -100.0, -40.0, -30.0, -1.5, 0.0, 2.0, 21.0, 30.0, 100.0, 1000.0])),
    "float64 [-800 .. 800]": ("values", lambda: torch.tensor(
        [-800.0, -50.0, -1.0, 0.5, 21.0, 40.0, 800.0], dtype=_F64)),
    "float64 inputs with magnitudes up to 1000": ("gradchecks", lambda: torch.cat([
        _draw(6, SOFTPLUS_DRAWS, 0) * 4, torch.tensor([-1000.0, -35.0, 35.0, 1000.0], dtype=_F64)])),
    "a non-contiguous 5 x 4 x 3 float32 tensor": ("values", lambda: _draw(6, SOFTPLUS_DRAWS, 1).mul(60).transpose(0, 2)),
    "float64 [-1000 .. 1000], other values": ("values", lambda: torch.tensor(
        [-1000.0, -60.0, -45.0, -0.25, 23.0, 700.0, 1000.0], dtype=_F64)),
    "float32 near the overflow and underflow points": ("values", lambda: torch.tensor(
        [-87.0, -42.0, -17.0, 17.0, 42.0, 87.0])),
    "a float32 0-d tensor just past exp's overflow": ("values", lambda: torch.tensor(88.75)),
    "an empty tensor": ("values", lambda: torch.zeros(0, 3)),
    "a 2 x 3 float64 tensor up to about 60": ("gradchecks", lambda: _draw(6, SOFTPLUS_DRAWS, 2).mul(20)),
})
SOFTPLUS_VISIBLE = ("float32 [-1000 .. 1000]", "float64 [-800 .. 800]", "float64 inputs with magnitudes up to 1000")


def _relative_error(got: torch.Tensor, true64: torch.Tensor) -> tuple[float, int | None]:
    """The largest |got - true| / |true| in float64, and where (flat index); differences below the dtype's smallest
    normal number (subnormal results flushed to 0) do not count."""
    with clean():
        if got.numel() == 0:
            return 0.0, None
        tiny = torch.finfo(got.dtype).tiny
        diff = ((got.detach().double() - true64).abs() - tiny).clamp_min(0)
        rel = (diff / true64.abs().clamp_min(tiny)).flatten()
        worst = int(rel.argmax())
        return float(rel[worst]), worst


def _where(x: torch.Tensor, worst: int | None, secret: bool) -> str:
    if worst is None:
        return "nowhere"
    return f"element {worst}" if secret else f"x = {x.detach().flatten()[worst].item()}"


def _not_finite(t: torch.Tensor, secret: bool) -> str:
    """Where a result has inf or nan: its values (visible cases) or how many (hidden ones)."""
    if not secret:
        return str(t.detach().tolist())
    with clean():
        bad = int((~torch.isfinite(t.detach())).sum())
    return f"{bad} of {t.numel()} elements"


def _judge_softplus(c: Check, answer: Any, forward: Callable[..., Any], backward: Callable[..., Any],
                    values: torch.Tensor, label: str, secret: bool) -> None:
    x = values.detach().requires_grad_()
    tol = 1e-12 if x.dtype == torch.float64 else 1e-6
    y = c.tensor(forward(x), f"StableSoftplus.apply(x) for {label}")
    c.that(type(y.grad_fn) is _node_of(answer),
           f"{label}: the output's grad_fn is {type(y.grad_fn).__name__}, not your StableSoftplusBackward node",
           SOFTPLUS_NODE_HINTS)
    c.equal(y.dtype, x.dtype, what=f"{label}: output dtype", hint=SOFTPLUS_DTYPE_HINTS, secret=secret)
    if secret:
        _same_shape(c, y, x, f"{label}: the output")
    else:
        c.equal(tuple(y.shape), tuple(x.shape), what=f"{label}: output shape")
    true = torch.logaddexp(x.detach().double(), torch.zeros((), dtype=torch.float64))
    c.that(bool(torch.isfinite(y).all()), f"{label}: the output has inf or nan: {_not_finite(y, secret)}",
           SOFTPLUS_VALUE_HINTS)
    err, worst = _relative_error(y, true)
    computed = "" if secret else f"; you computed {y.detach().tolist()}"
    c.that(err <= tol, f"{label}: softplus values are off by a relative error of {err:.3g} (allowed: {tol:g}), "
           f"worst at {_where(x, worst, secret)}{computed}", SOFTPLUS_VALUE_HINTS)
    gen = torch.Generator().manual_seed(x.numel())
    g = torch.rand(x.shape, generator=gen, dtype=x.dtype) + 0.5
    gx = c.tensor(backward(y, x, g), f"the gradient for {label}")
    c.equal(gx.dtype, x.dtype, what=f"{label}: gradient dtype", secret=secret)
    true_g = torch.sigmoid(x.detach().double()) * g.double()
    c.that(bool(torch.isfinite(gx).all()), f"{label}: the gradient has inf or nan: {_not_finite(gx, secret)}",
           SOFTPLUS_GRAD_HINTS)
    err, worst = _relative_error(gx, true_g)
    computed = "" if secret else f"; you computed {gx.tolist()}"
    c.that(err <= tol, f"{label}: the gradient is off by a relative error of {err:.3g} (allowed: {tol:g}), worst "
           f"at {_where(x, worst, secret)}{computed}", SOFTPLUS_GRAD_HINTS)


def _softplus_gradchecks(c: Check, apply: Any, x: torch.Tensor, label: str) -> None:
    problem = _gradcheck_problem(apply, x)
    c.that(problem is None, f"{label}: gradcheck failed: {problem}", SOFTPLUS_GRADCHECK_HINTS)
    problem = _gradcheck_problem(apply, x, second=True)
    c.that(problem is None, f"{label}: gradgradcheck failed: {problem}", SOFTPLUS_TWICE_HINTS)


def stable_softplus(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`StableSoftplus`: a Function whose forward (elementary ops only) and hand-written backward are accurate to a
    relative 1e-6 (float32) / 1e-12 (float64) out to |x| = 1000, with its own node in the graph, and that passes
    gradcheck and gradgradcheck; the hidden cases are named `SOFTPLUS_CASES`."""
    forward = c.watch(getattr(answer, "apply", None), "the forward of StableSoftplus", allow_aten=ELEMENTARY,
                      hint=SOFTPLUS_OPS_HINTS)
    backward = c.watch(_compiled("06-stable-softplus")["grad_of"], "the backward of StableSoftplus",
                       forbid_aten=SOFTPLUS_OPS, hint=SOFTPLUS_OPS_HINTS)
    for label, name in named(hidden, SOFTPLUS_VISIBLE, lambda name: name):
        kind, make = SOFTPLUS_CASES[name]
        if kind == "values":
            _judge_softplus(c, answer, forward, backward, make(), label, hidden is not None)
        else:
            _softplus_gradchecks(c, answer.apply, make(), label)


# --- 06-straight-through ----------------------------------------------------------------------------------------

STE_ROUND_HINTS = (
    "compare your values and dtype with the message: look at the halves (0.5, 1.5, 2.5, ...) first",
    "torch.round rounds halves to the even neighbour and keeps the floating-point dtype; floor(x + 0.5) and "
    "conversions to an integer dtype do neither",
)
STE_GRAD_HINTS = (
    "the straight-through gradient at x is exactly the incoming gradient, whatever its size and whether or not it "
    "is a whole number",
    "no clipping, no rounding, no ones: the backward of the identity hands grad_out back as it came",
)
STE_KEEP_HINTS = (
    "the identity's backward needs nothing from the forward: keep no tensor, anywhere",
    "not with save_for_backward, not as a ctx attribute (also not inside a list or dict on ctx), not in a global",
)
STE_NODE_HINTS = ("the straight-through idea must live in RoundSTE.backward, so that the output's grad_fn is your "
                  "node; a detach trick gives an AddBackward0 instead",)
STE_INPLACE_HINTS = ("the forward must leave x alone and return a new tensor",)
# name -> ("values": one RoundSTE.apply, inspected | "chain": RoundSTE(RoundSTE(x) * 0.5), its graph and gradient)
STE_CASES = MappingProxyType({
    "halves and others": ("values", lambda: torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51, 3.7, -3.2])),
    "a non-contiguous 3 x 4 slice": ("values", lambda: (
        torch.randn(4, 6, generator=torch.Generator().manual_seed(2)) * 3).t()[::2]),
    "float64, halves and whole numbers": ("values", lambda: torch.tensor([0.5, 1.5, -2.5, 3.0, -4.0], dtype=_F64)),
    "a 0-d tensor": ("values", lambda: torch.tensor(-6.5)),
    "the chain RoundSTE(RoundSTE(x) * 0.5)": ("chain", lambda: torch.tensor([0.3, 1.7, -2.6, 4.5])),
})
STE_VISIBLE = ("halves and others",)


def _input_kept(apply: Callable[..., Any], leaf: torch.Tensor) -> bool:
    """True when something still holds x's memory after the forward, although only the Function saw x."""
    x = leaf * 1  # not a leaf: the graph itself does not hold it
    st = x.untyped_storage()
    base: Any = next(k for k in type(st).__mro__ if k.__module__ == "torch._C" and k.__name__ == "StorageBase")
    ref = base._weak_ref(st)  # torch._C's own, immutable type
    del st
    y = apply(x)
    del x
    gc.collect()
    kept = not base._expired(ref)
    base._free_weak_ref(ref)
    del y
    return kept


def _judge_ste(c: Check, answer: Any, apply: Callable[..., Any], grad_of: Callable[..., Any], values: torch.Tensor,
               label: str, secret: bool) -> None:
    _storage_intact(c)
    leaf = values.detach().clone().requires_grad_()
    x = leaf * 1
    before = x.detach().clone()
    y = c.tensor(apply(x), f"RoundSTE.apply(x) for {label}")
    c.equal(y.dtype, x.dtype, what=f"{label}: dtype of RoundSTE.apply(x)", hint=STE_ROUND_HINTS, secret=secret)
    node: Any = y.grad_fn
    c.that(type(node) is _node_of(answer),
           f"{label}: the output's grad_fn is {type(node).__name__}, not your RoundSTEBackward node", STE_NODE_HINTS)
    if secret:
        _same_shape(c, y, x, f"{label}: RoundSTE.apply(x)")
    c.equal(y.detach(), torch.round(before), what=f"{label}: RoundSTE.apply(x)", hint=STE_ROUND_HINTS, secret=secret)
    c.equal(x._version, 0, what=f"{label}: version of x after the forward (an in-place write bumps it)",
            hint=STE_INPLACE_HINTS)
    c.equal(len(node.saved_tensors), 0, what=f"{label}: tensors your node saved", hint=STE_KEEP_HINTS)
    gen = torch.Generator().manual_seed(x.numel())
    g = torch.randn(x.shape, generator=gen, dtype=x.dtype) * 3
    gx = c.tensor(grad_of(y, x, g), f"the gradient for {label}")
    c.equal(gx, g, what=f"{label}: gradient at x", hint=STE_GRAD_HINTS, secret=secret)
    c.that(not _input_kept(apply, leaf), f"{label}: the input x is still alive after the forward, although only your "
           "Function has seen it: something keeps a reference to it", STE_KEEP_HINTS)
    _, held = held_after_forward(answer.apply, leaf * 1)
    c.equal(held, 0, what=f"{label}: bytes your forward keeps alive besides its output", hint=STE_KEEP_HINTS)


def _first_input(node: Any) -> Any:
    edges = getattr(node, "next_functions", None) or ()
    return edges[0][0] if edges else None


def _judge_ste_chain(c: Check, answer: Any, apply: Callable[..., Any], grad_of: Callable[..., Any],
                     values: torch.Tensor, label: str, secret: bool) -> None:
    """Round, scale by 0.5, round again: both STEs pass the gradient straight through the rounding."""
    what = label if secret else f"{label}, RoundSTE.apply(RoundSTE.apply(x) * 0.5)"
    x = values.detach().clone().requires_grad_()
    y = c.tensor(apply(apply(x) * 0.5), what)
    expected = torch.round(torch.round(x.detach()) * 0.5)
    if secret:
        _same_shape(c, y, x, what)
    c.equal(y.detach(), expected, what=f"{what}: values", hint=STE_ROUND_HINTS, secret=secret)
    nodes = [y.grad_fn]
    nodes += [_first_input(nodes[-1])]
    nodes += [_first_input(nodes[-1])]
    mine = _node_of(answer)
    c.that(type(nodes[0]) is mine and type(nodes[1]).__name__ == "MulBackward0" and type(nodes[2]) is mine,
           f"{what}: the graph runs {' -> '.join(type(n).__name__ for n in nodes)}; it should have two "
           "RoundSTEBackward nodes joined by MulBackward0", STE_NODE_HINTS)
    gx = c.tensor(grad_of(y, x, torch.ones_like(y)), f"{what}: the gradient")
    c.equal(gx, torch.full_like(x.detach(), 0.5), what=f"{what}: the gradient at x", hint=STE_GRAD_HINTS,
            secret=secret)


def straight_through(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`RoundSTE`: a Function whose forward is torch.round (dtype kept, x untouched) and whose backward hands the
    gradient through unchanged, with its own node and no tensor kept anywhere; hidden cases are named
    `STE_CASES`."""
    apply = c.watch(getattr(answer, "apply", None), "RoundSTE.apply")
    grad_of = c.watch(_compiled("06-straight-through")["grad_of"], "the backward of RoundSTE")
    for label, name in named(hidden, STE_VISIBLE, lambda name: name):
        kind, make = STE_CASES[name]
        judge = _judge_ste if kind == "values" else _judge_ste_chain
        judge(c, answer, apply, grad_of, make(), label, hidden is not None)


# --- 06-recompute-backward --------------------------------------------------------------------------------------

SILU_SAVE_HINTS = (
    "look at what your Function keeps: only the input x, through ctx.save_for_backward, and nothing else",
    "a tensor kept any other way (a ctx attribute, a list or dict on ctx, a global) escapes the version check and "
    "the saved-tensor hooks; recompute sigmoid(x) in backward instead of keeping it",
)
SILU_GRAD_HINTS = (
    "compare your gradient with autograd's for x * sigmoid(x)",
    "d/dx [x sigmoid(x)] = sigmoid(x) (1 + x (1 - sigmoid(x))), with sigmoid(x) recomputed in backward from the "
    "saved x",
)
SILU_TWICE_HINTS = ("gradgradcheck differentiates your backward: write it with torch operators on the tensors from "
                    "ctx.saved_tensors, with no detach and no @once_differentiable",)
SILU_VMAP_HINTS = ("torch.vmap needs forward(x) without ctx, a setup_context staticmethod, and "
                   "generate_vmap_rule = True",)
SILU_FORWARD_HINTS = ("forward computes x * sigmoid(x)",)
SILU_ITSELF_HINTS = ("save x itself: a clone or a converted copy is memory of its own",)
# one generator, seeded 3, draws these in turn (the notebook's order: visible first, then hidden)
SILU_DRAWS = (((8, 16), _F32), ((3, 4), _F64), ((5, 7), _F32), ((33, 64), _F32), ((4, 3, 2), _F64), ((2, 3), _F64),
              ((4, 6), _F32), ((3, 2, 5), _F32))
# name -> (kind, input): "judged" (what is saved and kept, the in-place write, values, gradient), "gradcheck",
# "gradgradcheck", "per-sample" (torch.vmap(torch.func.grad(...))), "vmap" (torch.vmap of the Function)
SILU_CASES = MappingProxyType({
    "an 8 x 16 float32 tensor": ("judged", lambda: _draw(3, SILU_DRAWS, 0)),
    "a 3 x 4 float64 tensor": ("gradcheck", lambda: _draw(3, SILU_DRAWS, 1)),
    "a batch of 5 rows of 7": ("vmap", lambda: _draw(3, SILU_DRAWS, 2)),
    "a non-contiguous 64 x 33 tensor": ("judged", lambda: _draw(3, SILU_DRAWS, 3).t()),
    "a float64 4 x 3 x 2 tensor": ("judged", lambda: _draw(3, SILU_DRAWS, 4) * 6),
    "a float64 2 x 3 tensor": ("gradgradcheck", lambda: _draw(3, SILU_DRAWS, 5) * 3),
    "per-sample gradients of 4 rows of 6": ("per-sample", lambda: _draw(3, SILU_DRAWS, 6)),
    "a batch of 3 x 2 x 5": ("vmap", lambda: _draw(3, SILU_DRAWS, 7)),
})
SILU_VISIBLE = ("an 8 x 16 float32 tensor", "a 3 x 4 float64 tensor", "a batch of 5 rows of 7")


def _judge_silu(c: Check, answer: Any, apply: Callable[..., Any], notices: Callable[..., Any],
                grad_of: Callable[..., Any], values: torch.Tensor, label: str, secret: bool) -> None:
    _storage_intact(c)
    x = values.detach().clone().requires_grad_()
    with SavedMeter(inputs=[x]) as meter:
        y = apply(x)
    y = c.tensor(y, f"SiLURecompute.apply(x) for {label}")
    node: Any = y.grad_fn
    c.that(type(node) is _node_of(answer),
           f"{label}: the output's grad_fn is {type(node).__name__}, not your SiLURecomputeBackward node")
    c.equal(y.dtype, x.dtype, what=f"{label}: output dtype", secret=secret)
    if secret:
        _same_shape(c, y, x, f"{label}: SiLURecompute.apply(x)")
    c.equal(y.detach(), F.silu(x.detach()), what=f"{label}: SiLURecompute.apply(x)", rel_tol=1e-5,
            hint=SILU_FORWARD_HINTS, secret=secret)
    c.equal(meter.storages, 1, what=f"{label}: storages your Function saved for backward", hint=SILU_SAVE_HINTS)
    c.equal(meter.bytes("input"), x.untyped_storage().nbytes(), what=f"{label}: bytes saved of the input x itself",
            hint=SILU_ITSELF_HINTS, secret=secret)
    c.shares_storage(node.saved_tensors[0], x, what=f"{label}: the saved tensor and the input x",
                     hint=SILU_ITSELF_HINTS)
    _, held = held_after_forward(answer.apply, values.detach().clone().requires_grad_())
    c.equal(held, 0, what=f"{label}: bytes your forward keeps alive besides its output", hint=SILU_SAVE_HINTS)
    noticed = notices(answer.apply, values.detach().clone().requires_grad_())
    c.that(noticed is True, f"{label}: x was written in place between forward and backward, and your backward ran "
           "without complaint: it read x from somewhere other than ctx.saved_tensors", SILU_SAVE_HINTS)
    gen = torch.Generator().manual_seed(x.numel())
    g = torch.randn(x.shape, generator=gen, dtype=x.dtype)
    gx = c.tensor(grad_of(y, x, g), f"the gradient for {label}")
    xr = x.detach().requires_grad_()
    expected = torch.autograd.grad(xr * torch.sigmoid(xr), xr, g)[0]
    c.equal(gx, expected, what=f"{label}: the gradient", rel_tol=1e-5, hint=SILU_GRAD_HINTS, secret=secret)


def _judge_silu_vmap(c: Check, apply: Any, xb: torch.Tensor, label: str, secret: bool) -> None:
    try:
        batched = torch.vmap(apply)(xb)
    except RuntimeError as err:  # torch's message can name the batch's shape: shown for visible cases only
        said = "RuntimeError" if secret else str(err).split(". ")[0]
        c.fail(f"{label}: torch.vmap over SiLURecompute.apply failed: {said}", SILU_VMAP_HINTS)
    c.equal(batched, torch.stack([apply(row) for row in xb]), what=f"{label}: the vmap result", rel_tol=1e-6,
            hint=SILU_VMAP_HINTS, secret=secret)


def _judge_silu_per_sample(c: Check, apply: Any, xb: torch.Tensor, label: str, secret: bool) -> None:
    try:
        per_sample = torch.vmap(torch.func.grad(lambda r: apply(r).sum()))(xb)
    except RuntimeError as err:
        said = "RuntimeError" if secret else str(err).split(". ")[0]
        c.fail(f"{label}: torch.vmap(torch.func.grad(...)) over SiLURecompute.apply failed: {said}", SILU_VMAP_HINTS)
    s = torch.sigmoid(xb)
    c.equal(per_sample, s + xb * s * (1 - s), what=f"{label}: per-sample gradients with "
            "torch.vmap(torch.func.grad(...))", rel_tol=1e-5, hint=SILU_GRAD_HINTS, secret=secret)


def recompute_backward(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`SiLURecompute`: x * sigmoid(x) in the setup_context style that saves x itself and nothing else (counted by
    storage, kept-alive bytes, an in-place write between forward and backward), recomputes sigmoid(x) in a
    twice-differentiable backward, and works under torch.vmap and torch.func.grad; hidden cases are named
    `SILU_CASES`."""
    apply = c.watch(getattr(answer, "apply", None), "SiLURecompute.apply")
    space = _compiled("06-recompute-backward")
    notices = c.watch(space["notices_inplace_write"], "your backward after an in-place write")
    grad_of = c.watch(space["grad_of"], "the backward of SiLURecompute")
    for label, name in named(hidden, SILU_VISIBLE, lambda name: name):
        kind, make = SILU_CASES[name]
        secret = hidden is not None
        if kind == "judged":
            _judge_silu(c, answer, apply, notices, grad_of, make(), label, secret)
        elif kind in ("gradcheck", "gradgradcheck"):
            problem = _gradcheck_problem(answer.apply, make(), second=kind == "gradgradcheck")
            c.that(problem is None, f"{label}: {kind} failed: {problem}",
                   SILU_TWICE_HINTS if kind == "gradgradcheck" else SILU_GRAD_HINTS)
        elif kind == "per-sample":
            _judge_silu_per_sample(c, answer.apply, make(), label, secret)
        else:
            _judge_silu_vmap(c, answer.apply, make(), label, secret)
