"""Notebook 14 (mixed precision): an autograd Function that stays float32 under autocast, forward and backward; a
running total kept in the right dtype; a bound on the error of a bfloat16 linear; and autocast policies for two
custom operators.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). Every tensor an answer returns must be a plain `torch.Tensor`
(no subclass, no attributes of its own), and the check reads it only through torch's functions captured at
import: an answer's own `.double()` is never called.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.autograd import gradcheck
from torch.autograd.gradcheck import GradcheckError

from ...lenses.autocast import dtypes_ran
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["accumulate", "error_bound", "lse_autocast", "policies"]

# captured at import, before any answer cell runs: what the check reads answers with
_Tensor = torch.Tensor
_detach = torch.Tensor.detach
_to_double = torch.Tensor.double
_to_float = torch.Tensor.float
_vars = vars
_clock = time.perf_counter_ns  # captured at import: a fresh operator per run whatever the learner rebinds
_custom_op = torch.library.custom_op
_autocast_on = torch.is_autocast_enabled
_autocast_dtype = torch.get_autocast_dtype
_DTYPES = MappingProxyType({"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64,
                            "float16": torch.float16})


def _plain(c: Check, t: Any, what: str, hint: Any) -> torch.Tensor:
    """`t`, required to be a plain tensor: a subclass (or a tensor carrying attributes of its own) could answer
    the check's questions with code of its own."""
    c.that(isinstance(t, _Tensor), f"{what}: expected a tensor, got {type(t).__name__}", hint)
    c.that(type(t) is _Tensor, f"{what}: expected a plain torch.Tensor, got {type(t).__name__} (a subclass of "
           "torch.Tensor); return the tensor itself", hint)
    own = sorted(_vars(t))
    c.that(not own, f"{what}: the tensor carries attributes of its own ({', '.join(own)}); return a plain tensor",
           hint)
    return t


def _unnamed(hidden: Iterable[tuple[Any, ...]] | None) -> list[tuple[str, tuple[Any, ...]]] | None:
    """Hidden cases as (name, case) pairs like the visible ones, with no name: feedback numbers them."""
    return None if hidden is None else [("", tuple(case)) for case in hidden]


def _name(item: tuple[str, tuple[Any, ...]]) -> str:
    return item[0]


def _float64(t: torch.Tensor) -> torch.Tensor:
    """A plain tensor's values as float64, through torch's own methods (captured at import)."""
    return _to_double(_detach(t))


def _rel(got: torch.Tensor, true: torch.Tensor) -> float:
    return ((_float64(got) - true).abs().max() / true.abs().max().clamp_min(1e-30)).item()


# ---------------------------------------------------------------------------------------------------------------
# Exercise 1 · An autocast-safe log-sum-exp

FWD_HINTS = (
    "look at the dtypes your forward computed in under autocast: the scores' product and the exp, sum and log after "
    "it must all be float32, whatever dtype q and k arrive in",
    "converting q and k yourself is not enough: autocast is still on inside forward and lowers the product again. "
    "torch.amp has a decorator for a Function's forward that casts its inputs and turns autocast off inside "
    "(section 5)",
)
STATE_HINTS = (
    "the code after ScoreLSE.apply, in the same autocast block, must still run under autocast: your Function "
    "switched it off (or changed its dtype) and left it so",
    "do not switch autocast yourself: torch.amp has a decorator for a Function's forward that turns autocast off "
    "inside forward only, and one for backward (section 5)",
)
BWD_HINTS = (
    "your forward is right; the backward is not: it runs when .backward() is called, and here that is inside an "
    "autocast block",
    "torch.amp has a decorator for backward that runs it with the autocast state its forward had (section 5)",
)
VALUE_HINTS = (
    "compare your values with the log-sum-exp of q @ k.T in float64; look at the rows with large scores",
    "exp of a score in the hundreds overflows: subtract each row's largest score before exp, add it back after the "
    "log",
)
GRAD_HINTS = (
    "compare your gradients with autograd's for the log-sum-exp of q @ k.T in float64",
    "the derivative of row i's result by score j is the softmax of row i at j; the chain rule through q @ k.T then "
    "gives one product for q's gradient and one for k's, each weighted by the incoming gradient",
)
NODE_HINTS = ("the gradient must come from your Function's backward: ScoreLSE.apply should give a result whose "
              "grad_fn is ScoreLSE's node, not a graph autograd recorded for you",)
ITEM_HINTS = ("compute with tensor operations: .item() takes values out into Python floats, where neither autocast "
              "nor this check sees what precision they are computed in",)
# the ways out of a tensor's dtype into Python numbers (.item(), float(t), int(t))
NO_ITEM = frozenset({"_local_scalar_dense"})

# What the check runs the learner's Function under, compiled under a file name of its own: a watched call may call
# nothing defined in this module. The checks compare after the autocast block has closed.
LSE_WORKLOADS = '''
def forward_under_autocast(dtypes_ran, apply, q, k, autocast_on, autocast_dtype):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        run = dtypes_ran(apply, q, k)
        after = (autocast_on("cpu"), autocast_dtype("cpu"))
    return run, after


def backward_under_autocast(dtypes_ran, grad, out, q, k, g, autocast_on, autocast_dtype):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        run = dtypes_ran(grad, out, (q, k), g)
        after = (autocast_on("cpu"), autocast_dtype("cpu"))
    return run, after
'''
# (rows of q, rows of k, width, seed, scale, dtype)
LSE_VISIBLE = MappingProxyType({
    "float32 q (6 x 16), k (10 x 16)": (6, 10, 16, 0, 1.0, "float32"),
    "float32, scores in the hundreds": (5, 7, 8, 1, 6.0, "float32"),
    "bfloat16 q and k": (4, 9, 32, 2, 1.0, "bfloat16"),
})


def _compiled(source: str, exercise: str) -> dict[str, Any]:
    space: dict[str, Any] = {"torch": torch}
    exec(compile(source, f"<workloads of {exercise}>", "exec"), space)
    return space


def _lse_inputs(n: int, m: int, d: int, seed: int, scale: float = 1.0, dtype: str = "float32"
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q = (torch.randn(n, d, generator=g) * scale).to(_DTYPES[dtype]).requires_grad_()
    k = (torch.randn(m, d, generator=g) * scale).to(_DTYPES[dtype]).requires_grad_()
    return q, k, torch.randn(n, generator=g, dtype=torch.float64)


def _lse_truth(q: torch.Tensor, k: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    out = torch.logsumexp(q64 @ k64.T, -1)
    dq, dk = torch.autograd.grad(out, (q64, k64), g)
    return out.detach(), dq, dk


def _autocast_after(c: Check, after: Any, label: str, when: str) -> None:
    on, dtype = after
    c.that(on is True and dtype is torch.bfloat16, f"{label}: after {when}, still inside the autocast block, autocast "
           f"was {'off' if on is not True else f'set to {dtype}'.replace('torch.', '')}: your Function changed "
           "autocast for the code after it", STATE_HINTS)


def _got(t: Any, secret: bool) -> str:
    """What came back, for a message: its shape, unless the case is hidden (its shape would give the case away)."""
    if not isinstance(t, _Tensor):
        return type(t).__name__
    return "a tensor of another shape" if secret else f"shape {tuple(t.shape)}"


def _judge_lse(c: Check, answer: Any, forward: Callable[..., Any], backward: Callable[..., Any],
               case: tuple[Any, ...], label: str, secret: bool) -> None:
    q, k, g = _lse_inputs(*case)
    run, after = forward(dtypes_ran, answer.apply, q, k, _autocast_on, _autocast_dtype)
    out = run.result
    c.that(isinstance(out, _Tensor) and tuple(out.shape) == (q.shape[0],),
           f"{label}: ScoreLSE.apply(q, k) should return one value per row of q"
           + ("" if secret else f", shape ({q.shape[0]},)") + f"; got {_got(out, secret)}", VALUE_HINTS)
    _plain(c, out, f"{label}: ScoreLSE.apply(q, k)", NODE_HINTS)
    node = type(out.grad_fn)
    c.that(getattr(node, "_forward_cls", None) is answer, f"{label}: the result's grad_fn is {node.__name__}, not "
           "ScoreLSE's backward node", NODE_HINTS)
    _autocast_after(c, after, label, "ScoreLSE.apply returned")
    low = run.ran_in("bfloat16")
    c.that(not low and out.dtype == torch.float32, f"{label}, under autocast: your forward returned "
           f"{str(out.dtype).removeprefix('torch.')}" + (f" and ran aten.{', aten.'.join(dict.fromkeys(low))} in "
                                                        "bfloat16" if low else ""), FWD_HINTS)
    back, after = backward(dtypes_ran, torch.autograd.grad, out, q, k, g.to(out.dtype), _autocast_on, _autocast_dtype)
    low = back.ran_in("bfloat16")
    c.that(not low, f"{label}, .backward() inside autocast: your backward ran aten.{', aten.'.join(dict.fromkeys(low))}"
           " in bfloat16", BWD_HINTS)
    _autocast_after(c, after, label, "the backward")
    true, dq, dk = _lse_truth(q, k, g)
    c.that(_rel(out, true) < 1e-5, f"{label}: values off by {_rel(out, true):.1e} relative to float64", VALUE_HINTS)
    got_q, got_k = (_plain(c, t, f"{label}: the gradient of {name}", GRAD_HINTS)
                    for t, name in zip(back.result, "qk"))
    worst = max(_rel(_to_float(got_q), dq), _rel(_to_float(got_k), dk))
    limit = 1e-5 if q.dtype == torch.float32 else 2 ** -7  # bfloat16 leaves: autograd rounds the gradient
    c.that(worst < limit, f"{label}: gradients off by {worst:.1e} relative to float64", GRAD_HINTS)


def lse_autocast(c: Check, answer: Any, hidden: Iterable[tuple[Any, ...]] | None = None) -> None:
    """`ScoreLSE`: an autograd Function whose `apply(q, k)` is the log-sum-exp of each row of q @ k.T, computed in
    float32 under CPU bfloat16 autocast, forward and backward (run inside the autocast block), leaving autocast as it
    found it, with values and gradients right to float32 precision and gradcheck passing in float64. Hidden cases:
    (rows of q, rows of k, width, seed, scale, dtype name)."""
    c.that(isinstance(answer, type) and issubclass(answer, torch.autograd.Function),
           "ScoreLSE should be a class deriving from torch.autograd.Function", NODE_HINTS)
    space = _compiled(LSE_WORKLOADS, "14-lse-autocast")
    forward = c.watch(space["forward_under_autocast"], "ScoreLSE.apply", forbid_aten=NO_ITEM, hint=ITEM_HINTS)
    backward = c.watch(space["backward_under_autocast"], "ScoreLSE's backward", forbid_aten=NO_ITEM, hint=ITEM_HINTS)
    for label, (_, case) in named(_unnamed(hidden), tuple(LSE_VISIBLE.items()), _name):
        _judge_lse(c, answer, forward, backward, case, label, hidden is not None)
    if hidden is None:
        apply = c.watch(answer.apply, "ScoreLSE.apply", forbid_aten=NO_ITEM, hint=ITEM_HINTS)
        q64, k64, _ = _lse_inputs(3, 4, 5, seed=3, dtype="float64")
        try:
            gradcheck(apply, (q64, k64))
        except GradcheckError as err:
            c.fail("gradcheck in float64 (no autocast): " + str(err).strip().splitlines()[0].rstrip(","), GRAD_HINTS)


# ---------------------------------------------------------------------------------------------------------------
# Exercise 2 · Choose the accumulator's dtype

ACCUMULATE_HINTS = (
    "look at the dtype your running total is kept in: every addition rounds the total to that dtype's step",
    "near 1, bfloat16's step is 2^-7 and float16's 2^-10: a small chunk added to a large total is rounded away. Keep "
    "the total in a dtype whose step is far below your chunks, and convert each chunk as you add it",
)
WIDE_HINTS = ("float32 is enough here: a float64 accumulator doubles the memory and gains nothing the check can see",)
PYTHON_TOTAL_HINTS = ("keep the total in a tensor: .item() takes values out into Python floats, a float64 "
                      "accumulator the check cannot see",)
# (chunks, shape, seed, size of the first chunk)
ACCUMULATE_VISIBLE = MappingProxyType({
    "256 chunks of 4 x 8": (256, (4, 8), 0, 1.0),
    "40 chunks, a large first one": (40, (3,), 1, 100.0),
})


def _chunks(count: int, shape: tuple[int, ...], seed: int, big: float = 1.0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    first = torch.full(shape, big) + torch.rand(shape, generator=g)
    rest = [(torch.rand(shape, generator=g) - 0.3) * 2e-3 for _ in range(count - 1)]
    return [t.to(torch.bfloat16) for t in [first, *rest]]


def accumulate(c: Check, answer: Any, hidden: Iterable[tuple[Any, ...]] | None = None) -> None:
    """`accumulate(chunks)`: the sum of same-shape bfloat16 tensors as a float32 tensor, accurate to float32
    rounding, with no float64 op and no Python-float total. Hidden cases: (chunks, shape, seed, first size)."""
    mine = c.watch(answer, "accumulate", forbid_aten=NO_ITEM, hint=PYTHON_TOTAL_HINTS)
    for label, (_, case) in named(_unnamed(hidden), tuple(ACCUMULATE_VISIBLE.items()), _name):
        chunks = _chunks(*case)
        run = dtypes_ran(mine, [t.clone() for t in chunks])
        got = run.result
        c.that(isinstance(got, _Tensor), f"{label}: accumulate should return a tensor, got {type(got).__name__}",
               ACCUMULATE_HINTS)
        _plain(c, got, f"{label}: accumulate", ACCUMULATE_HINTS)
        secret = hidden is not None
        c.that(got.dtype == torch.float32 and got.shape == chunks[0].shape, f"{label}: expected a float32 tensor of "
               + ("the chunks' shape" if secret else f"shape {tuple(chunks[0].shape)}") + ", got "
               + str(got.dtype).removeprefix("torch.") + (("" if got.shape == chunks[0].shape else " of another shape")
                                                          if secret else f" {tuple(got.shape)}"), ACCUMULATE_HINTS)
        wide = run.ran_in("float64")
        c.that(not wide, f"{label}: your accumulate ran aten.{', aten.'.join(dict.fromkeys(wide))} in float64",
               WIDE_HINTS)
        exact = torch.stack([t.double() for t in chunks]).sum(0)
        scale = torch.stack([t.double().abs() for t in chunks]).sum(0)
        err = ((_float64(got) - exact).abs() / scale).max().item()
        c.that(err < 2**-18, f"{label}: off by {err:.1e} relative to the chunks' total size (float32 rounding would "
               "be below 4e-6)", ACCUMULATE_HINTS)


# ---------------------------------------------------------------------------------------------------------------
# Exercise 3 · Bound the error of a bfloat16 linear

BOUND_HINTS = (
    "list the places a value is rounded to bfloat16 on the way through the linear, and how large one rounding can "
    "be relative to the value (sections 1 and 3)",
    "each product multiplies two rounded inputs, and the float32 sum is rounded once more on the way out; bound each "
    "product's error by its size, so the bound scales with the sum of |x||w|, not with |x @ w.T|",
)
TIGHT_HINTS = (
    "your bound holds but is loose: which rounding did you count too large?",
    "half a step, not a whole one, and the sum in between is float32 (section 3), not bfloat16",
)
BOUND_OPS = frozenset({
    "abs", "mm", "matmul", "t", "transpose", "permute", "mul", "add", "sub", "rsub", "div", "pow", "view", "expand",
    "unsqueeze", "squeeze", "_unsafe_view", "clone", "alias", "detach", "sum", "reciprocal", "mul_", "add_", "sub_",
    "div_", "abs_", "lift_fresh", "scalar_tensor", "full", "full_like", "ones_like", "zeros_like", "empty",
    "empty_like", "fill_", "maximum", "clamp", "clamp_min"})
ALMOST_HALF = 1 + 2.0**-8 - 2.0**-20  # just below a rounding midpoint: rounded down by almost half a step


def _actual(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = F.linear(x, w)
    return (y.double() - x.double() @ w.double().T).abs()


def _holds(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    u, n = 2.0**-8, x.shape[-1]
    gamma = n * 2.0**-24 / (1 - n * 2.0**-24)
    return ((1 + u) ** 3 * (1 + gamma) - 1) * (x.double().abs() @ w.double().abs().T)


def _bound_inputs(kind: str, *args: int) -> tuple[torch.Tensor, torch.Tensor]:
    """("random", rows, outputs, n, seed); ("worst case", n): every input rounded down by almost half a step, the sum
    on a midpoint; ("negated worst case", n): the same with x negated; ("near zero",): x = [v, v], w = [v, -1]."""
    if kind == "random":
        rows, outs, n, seed = args
        g = torch.Generator().manual_seed(seed)
        return torch.randn(rows, n, generator=g) * 3, torch.randn(outs, n, generator=g)
    if kind in ("worst case", "negated worst case"):
        x = torch.full((1, args[0]), ALMOST_HALF)
        return (-x if kind.startswith("negated") else x), torch.full((1, args[0]), ALMOST_HALF)
    return torch.tensor([[ALMOST_HALF, ALMOST_HALF]]), torch.tensor([[ALMOST_HALF, -1.0]])


BOUND_VISIBLE = MappingProxyType({
    "random x (8 x 64), w (16 x 64)": ("random", 8, 16, 64, 0),
    "257 inputs that each round down by almost half a step": ("worst case", 257),
    "x = [v, v], w = [v, -1]: a result near 0": ("near zero",),
})


def error_bound(c: Check, answer: Any, hidden: Iterable[tuple[Any, ...]] | None = None) -> None:
    """`linear_error_bound(x, w)`: an element-wise bound on |F.linear(x, w) under CPU bfloat16 autocast - x @ w.T|
    that holds everywhere and is at most 1.5 times the rigorous bound, built from the allowed ops only. Hidden
    cases: `_bound_inputs` arguments."""
    mine = c.watch(answer, "linear_error_bound", allow_aten=BOUND_OPS)
    for label, (_, case) in named(_unnamed(hidden), tuple(BOUND_VISIBLE.items()), _name):
        x, w = _bound_inputs(*case)
        got = mine(x.clone(), w.clone())
        shape = (x.shape[0], w.shape[0])
        secret = hidden is not None
        c.that(isinstance(got, _Tensor) and tuple(got.shape) == shape, f"{label}: expected a tensor of shape "
               + ("(rows of x, rows of w)" if secret else f"{shape}") + f", got {_got(got, secret)}", BOUND_HINTS)
        bound = _float64(_plain(c, got, label, BOUND_HINTS))
        actual, holds = _actual(x, w), _holds(x, w)
        over = (actual - bound).clamp_min(0)
        if bool((over > 0).any()):
            i = int(over.flatten().argmax())
            if secret:  # where and how large would give the hidden case away
                c.fail(f"{label}: the real error is above your bound at {int((over > 0).sum())} of {over.numel()} "
                       "entries", BOUND_HINTS)
            c.fail(f"{label}: the real error at {divmod(i, shape[1])} is {actual.flatten()[i].item():.3g}, above your "
                   f"bound {bound.flatten()[i].item():.3g}", BOUND_HINTS)
        ratio = (bound / holds.clamp_min(1e-300)).max().item()
        c.that(ratio <= 1.5, f"{label}: your bound is {ratio:.2f} times a bound that holds (at most 1.5 allowed)",
               TIGHT_HINTS)


# ---------------------------------------------------------------------------------------------------------------
# Exercise 4 · Autocast policies for two custom operators

POLICY_HINTS = (
    "under autocast a custom operator is on no list: its kernel gets whatever dtypes it is called with. torch.library "
    "can give an operator an autocast rule of its own, per device type",
    "read help(torch.library) for the function whose name starts with register_ and ends with autocast: it takes the "
    "operator's name, the device type autocast runs on here, and the one dtype floating inputs are cast to",
    "one registration per operator: the norm's floating inputs go up to float32, the projection's down to the dtype "
    "CPU autocast lowers to by default (section 2); integer inputs and float64 are left alone by such a rule",
)
KERNEL_HINTS = ("the operators' own kernels must run, with the inputs autocast hands them: give each operator an "
                "autocast rule, do not register a kernel of your own",)
# (dtype name of x, dtype name of w, autocast on)
POLICY_VISIBLE = MappingProxyType({
    "float32 inputs, under CPU autocast": ("float32", "float32", True),
    "bfloat16 inputs, under CPU autocast": ("bfloat16", "bfloat16", True),
    "float32 inputs, no autocast": ("float32", "float32", False),
    "bfloat16 inputs, no autocast": ("bfloat16", "bfloat16", False),
})


def _policy_operators(received: list[tuple[str, tuple[torch.dtype, ...]]]) -> tuple[str, str, Any, Any]:
    """Two fresh operators (new names on every run): `norm(x)`, each row's length, and `project(x, w, rows)`,
    rows of x times w.T; each kernel notes the dtypes it received in `received`. Their names, and the operators
    themselves, taken before any answer runs (not looked up in `torch.ops` afterwards)."""
    stamp = _clock()
    norm_name, project_name = f"tlw_norm_{stamp}::norm", f"tlw_project_{stamp}::project"

    def norm(x: torch.Tensor) -> torch.Tensor:
        received.append(("norm", (x.dtype,)))
        return x.pow(2).sum(-1).sqrt()

    def project(x: torch.Tensor, w: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        received.append(("project", (x.dtype, w.dtype, rows.dtype)))
        wide = torch.promote_types(x.dtype, w.dtype)
        return x[rows].to(wide) @ w.T.to(wide)

    norm_op = _custom_op(norm_name, mutates_args=())(norm)._opoverload
    project_op = _custom_op(project_name, mutates_args=())(project)._opoverload
    return norm_name, project_name, norm_op, project_op


def _expected_arrival(dtype: torch.dtype, to: torch.dtype, autocast: bool) -> torch.dtype:
    """What a CPU autocast rule casting to `to` hands the kernel: floating inputs but float64 cast, under autocast."""
    return to if autocast and dtype.is_floating_point and dtype is not torch.float64 else dtype


def _name_dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def policies(c: Check, answer: Any, hidden: Iterable[tuple[Any, ...]] | None = None) -> None:
    """`give_policies(norm, project)`: given two custom operators' qualified names, register autocast rules so that
    under CPU autocast `norm`'s floating inputs arrive in float32 and `project`'s in bfloat16 (its int64 `rows` and
    float64 inputs untouched), and outside autocast both kernels get their inputs as called. The operators are new on
    every run, and their own kernels must run. Hidden cases: (x's dtype, w's dtype, autocast on)."""
    received: list[tuple[str, tuple[torch.dtype, ...]]] = []
    norm_name, project_name, norm_op, project_op = _policy_operators(received)
    give = c.watch(answer, "give_policies", hint=POLICY_HINTS)
    give(norm_name, project_name)
    secret = hidden is not None
    for label, (_, case) in named(_unnamed(hidden), tuple(POLICY_VISIBLE.items()), _name):
        x_name, w_name, on = case
        g = torch.Generator().manual_seed(len(received))
        x = torch.randn(5, 8, generator=g).to(_DTYPES[x_name])
        w = torch.randn(3, 8, generator=g).to(_DTYPES[w_name])
        rows = torch.tensor([4, 0, 2])
        received.clear()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=on):
            norm_op(x)
            project_op(x, w, rows)
        ran = dict(received)
        c.that(set(ran) == {"norm", "project"} and len(received) == 2, f"{label}: the operators' own kernels "
               f"did not run (they ran: {', '.join(n for n, _ in received) or 'none'}); something else answered "
               "the calls", KERNEL_HINTS)
        where = "under autocast" if on else "outside autocast"
        want = _expected_arrival(x.dtype, torch.float32, on)
        c.that(ran["norm"] == (want,), f"{label}: norm's kernel received x in {_name_dtype(ran['norm'][0])}"
               + ("" if secret else f"; {where} it should get {_name_dtype(want)}"), POLICY_HINTS)
        want3 = (_expected_arrival(x.dtype, torch.bfloat16, on), _expected_arrival(w.dtype, torch.bfloat16, on),
                 torch.int64)
        got3 = ran["project"]
        c.that(got3 == want3, f"{label}: project's kernel received x, w, rows in "
               + ", ".join(map(_name_dtype, got3)) + ("" if secret else f"; {where} it should get "
                                                       + ", ".join(map(_name_dtype, want3))), POLICY_HINTS)
