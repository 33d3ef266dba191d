"""Notebook 04 (the dispatcher): a mode that counts ops by overload, dispatch keys predicted from a tensor's
properties, and a FLOP counter of one's own.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`).
"""

from __future__ import annotations

import importlib
import itertools
import os
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch
from torch.utils import flop_counter
from torch.utils._python_dispatch import TorchDispatchMode

from ...lenses import dispatch as dispatch_lens
from ...lenses import meters
from ...lenses.dispatch import _dispatch_keys, _key_names
from ._cases import named, numbered

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["count_by_overload", "flop_counter_exercise", "predict_keys"]

COUNT_HINTS = (
    "compare your counts with dispatch_trace().counts() for the same workload: are the names spelled the same, "
    "and are the same ops there?",
    "the key is the qualified overload name, the way str(func) prints it ('aten.mm.default'); the overload packet "
    "('aten.mm') or the bare name drop part of it. Every op that reaches the mode counts, once per call: backward "
    "ops, views, in-place ops and ops outside the aten namespace",
    "keep one Counter per mode object, made in __init__; the mode only watches: whatever func gives back is what "
    "the program must receive",
)
COUNT_LENS_HINTS = ("count in your own __torch_dispatch__: the check records calls into the course's recorders",)
RESULT_HINTS = ("your mode changed what the program computed: a watching mode returns exactly what the op returned",)
# (a mode's __torch_dispatch__ is wrapped by torch, in one wrapper shared by every mode: ban what it wraps)
COUNT_LENSES = (dispatch_lens.dispatch_trace.__init__, dispatch_lens.dispatch_trace.__enter__,
                dispatch_lens.DispatchTrace.counts, meters.OpCounter.__init__,
                getattr(meters.OpCounter.__torch_dispatch__, "__wrapped__", meters.OpCounter.__init__))

# Workloads, compiled per call under a file name of their own: the answer runs them, and a watched answer may
# call nothing defined in this module. Each `make_*` returns a fresh `run` (a second backward would accumulate).
COUNT_WORKLOADS = '''
def run_under(counter_cls, make_workload):
    work = make_workload()
    with counter_cls() as counter:
        out = work()
    return counter, out


def linear_step():
    torch.manual_seed(0)
    lin, x = torch.nn.Linear(4, 3), torch.randn(2, 4)

    def run():
        out = lin(x)
        out.sum().backward()
        return out
    return run


def views_and_inplace():
    torch.manual_seed(1)
    y = torch.randn(3, 4)

    def run():
        z = y.t().contiguous()
        z.add_(1)
        z[0].mul_(2)
        z.clamp_(min=0.5)
        return torch.sum(z.view(-1).unsqueeze(0), dim=1, keepdim=True)
    return run


def training_step():
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(5, 4)

    def run():
        for _ in range(2):
            loss = torch.nn.functional.mse_loss(model(x), torch.zeros(5, 1))
            loss.backward()
            opt.step()
            opt.zero_grad()
        return loss
    return run


def inference():
    torch.manual_seed(3)
    w, x = torch.randn(3, 4), torch.randn(2, 5, 4)

    def run():
        with torch.inference_mode():
            return torch.nn.functional.linear(x, w).reshape(10, 3).softmax(-1)
    return run


def same_op_twice():
    a = torch.arange(6.0).view(2, 3)

    def run():
        return (a * 2) * 3 + a.mul(a)
    return run


def nothing():
    return lambda: None
'''
COUNT_CASES = MappingProxyType({
    "views and in-place ops": "views_and_inplace", "two SGD training steps": "training_step",
    "composites under inference_mode": "inference", "one overload run three times": "same_op_twice",
    "a workload that runs no op": "nothing",
})


def _compiled(source: str, exercise: str) -> dict[str, Any]:
    space: dict[str, Any] = {"torch": torch}
    exec(compile(source, f"<workloads of {exercise}>", "exec"), space)
    return space


def count_by_overload(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`OverloadCounter`: a TorchDispatchMode whose `.counts` Counter equals dispatch_trace().counts(), on a
    Linear forward + backward (twice, each with a new mode); the hidden cases are named workloads."""
    c.that(isinstance(answer, type) and issubclass(answer, TorchDispatchMode),
           "OverloadCounter must be a subclass of torch.utils._python_dispatch.TorchDispatchMode")
    space = _compiled(COUNT_WORKLOADS, "04-count-by-overload")
    mine = c.watch(space["run_under"], "OverloadCounter", forbid=COUNT_LENSES, hint=COUNT_LENS_HINTS)
    visible = ("nn.Linear forward + backward", "the same workload again, with a new OverloadCounter")
    for label, name in named(hidden, visible, lambda name: name):
        make = space[COUNT_CASES.get(name, "linear_step")]
        reference = make()
        with dispatch_lens.dispatch_trace() as trace:
            expected_out = reference()
        expected = dict(trace.counts())
        counter, out = mine(answer, make)
        counts = getattr(counter, "counts", None)
        c.that(type(counts) is Counter, f"{label}: .counts must be a collections.Counter, got {type(counts).__name__}",
               hint=COUNT_HINTS)
        c.equal(dict(counts or {}), expected, what=f"{label}: counts", hint=COUNT_HINTS, secret=hidden is not None)
        if isinstance(expected_out, torch.Tensor):
            c.equal(out, expected_out, what=f"{label}: the workload's result under your mode", hint=RESULT_HINTS,
                    secret=hidden is not None)


KEY_HINTS = (
    "a key set is one backend key plus functionality keys: which property of the tensor gives each of them?",
    "the backend key comes from device and layout (CPU, Meta, SparseCPU, SparseCsrCPU, SparseMeta, ...); "
    "Conjugate / Negative mark lazy conj / neg views; ADInplaceOrView and the device's Autograd key come with "
    "every tensor that is not an inference tensor",
    "AutocastCPU comes with every CPU tensor, inference tensors too, and there is no autocast key for meta; "
    "requires_grad changes nothing",
)
KEY_ASK_HINTS = ("derive the keys from the tensor's public properties: the check records every call into the "
                 "dispatcher's key queries and the course's dispatch lens",)
WRITE_DOWN_HINTS = ("write the predictions down: Part A makes no tensors and asks nothing",)
# captured when the package is imported, before any answer cell runs
KEY_QUERIES = (torch._C._dispatch_keys, torch._C._dispatch_tls_local_include_set,
               torch._C._dispatch_tls_local_exclude_set, dispatch_lens._raw_tensor, dispatch_lens._key_names,
               dispatch_lens._path, dispatch_lens.dispatch_trace.__enter__)
KEY_EXPRESSIONS = MappingProxyType({
    "torch.ones(2, 3)": lambda: torch.ones(2, 3),
    "torch.ones(2, 3, device='meta', requires_grad=True)": lambda: torch.ones(2, 3, device="meta", requires_grad=True),
    "torch.ones(2, 3).to_sparse()": lambda: torch.ones(2, 3).to_sparse(),
    "torch.ones(2, 3, dtype=torch.complex64).conj()": lambda: torch.ones(2, 3, dtype=torch.complex64).conj(),
})


def _live_keys(t: torch.Tensor) -> set[str]:
    """The tensor's dispatch keys through torch._C._dispatch_keys as captured at import (a rebinding misses it)."""
    return set(_key_names(_dispatch_keys(t).raw_repr()))


def _key_gallery() -> dict[str, torch.Tensor]:
    """Every device × layout × dtype × conj/neg × inference combination, and four odd tensors."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for device, layout_, dtype, bit, inference in itertools.product(
                ["cpu", "meta"], ["strided", "coo", "csr"], [torch.float32, torch.complex64, torch.int64],
                ["plain", "conj", "neg"], [False, True]):
            if bit != "plain" and (not dtype.is_complex or layout_ != "strided"):
                continue
            with torch.inference_mode() if inference else torch.enable_grad():
                if layout_ == "strided":
                    t = torch.ones(2, 3, dtype=dtype, device=device)
                elif device == "meta":
                    t = torch.empty(2, 3, dtype=dtype, device="meta",
                                    layout=torch.sparse_coo if layout_ == "coo" else torch.sparse_csr)
                else:
                    t = torch.ones(2, 3, dtype=dtype).to_sparse() if layout_ == "coo" else \
                        torch.ones(2, 3, dtype=dtype).to_sparse_csr()
                if bit == "conj":
                    t = t.conj()
                elif bit == "neg":
                    t = t.conj().imag
            out[f"{layout_} {dtype} on {device}, {bit}{', inference' if inference else ''}"] = t
    out["an expanded view"] = torch.ones(3, 1).expand(3, 4)
    out["an nn.Parameter"] = torch.nn.Parameter(torch.ones(2))
    out["a float16 tensor requiring grad"] = torch.ones(2, dtype=torch.float16, requires_grad=True)
    out["a transposed meta tensor"] = torch.ones(2, 3, device="meta").t()
    return out


KEY_GALLERIES = MappingProxyType({"the gallery": _key_gallery})


def predict_keys(c: Check, predictions: Any, rule: Any, hidden: Iterable[str] | None = None) -> None:
    """Part A `predicted_key_sets()`: the four key sets, written down (secret); part B `predict_keys(t)`: the key
    set of any tensor from its properties, without asking the dispatcher. Hidden: named tensor galleries."""
    if hidden is None:
        predicted = c.watch(predictions, "predicted_key_sets", allow_aten=set(), forbid=KEY_QUERIES,
                            hint=WRITE_DOWN_HINTS)()
        c.that(type(predicted) is dict, "predicted_key_sets() must return a dict: expression text -> set of key names")
        c.equal(set(predicted), set(KEY_EXPRESSIONS), what="the expressions in predicted_key_sets()")
        for text, make in KEY_EXPRESSIONS.items():
            c.equal(predicted[text], _live_keys(make()), what=f"predicted_key_sets()[{text!r}]", hint=KEY_HINTS,
                    secret=True)
    mine = c.watch(rule, "predict_keys", allow_aten=set(), forbid=KEY_QUERIES, hint=KEY_ASK_HINTS)
    visible = [(text, make()) for text, make in KEY_EXPRESSIONS.items()]
    for label, (name, t) in numbered(hidden, visible, lambda gallery: KEY_GALLERIES[gallery]().items()):
        c.equal(mine(t), _live_keys(t), what=label or f"predict_keys({name})", hint=KEY_HINTS, secret=bool(label))


FLOP_HINTS = (
    "compare with FlopCounterMode on one small product: is your number off by a constant factor, or are whole "
    "ops missing?",
    "an m x k by k x n product costs 2*m*k*n; addmm's bias (its first argument) is not counted, the two matrices "
    "follow it; bmm and baddbmm multiply by the batch size",
    "count inside __torch_dispatch__, so backward's products count too, and start from 0 in every call of "
    "count_flops",
)
DECOMPOSE_HINTS = (
    "under torch.inference_mode a composite such as aten.linear reaches your mode whole: where did its products go?",
    "for an op outside the four products that has a CompositeImplicitAutograd kernel, decompose it with your "
    "mode entered again (the snippet in the exercise text), so that its pieces reach your mode",
)
FLOP_BANNED_HINTS = ("count the products in a mode of your own: the check records calls into torch's flop counter",)
FLOP_WORKLOADS = '''
torch.manual_seed(0)
lin = torch.nn.Linear(7, 3)
xl = torch.randn(5, 7, requires_grad=True)
mlp = torch.nn.Sequential(torch.nn.Linear(6, 9), torch.nn.Tanh(), torch.nn.Linear(9, 2))


def a_times_b_t(a, b):
    return a @ b.t()


def linear_step():
    lin(xl).sum().backward()


def einsum_bmm(a, b):
    return torch.einsum("bij,bjk->bik", a, b)


def addmm_transposed():
    return torch.addmm(torch.randn(3), torch.randn(6, 4), torch.randn(3, 4).t())


def elementwise(x):
    return (x.exp() * 2).sum()


def mlp_step():
    x = torch.randn(2, 3, 6, requires_grad=True)
    mlp(x).square().mean().backward()


def inference_linear():
    with torch.inference_mode():
        torch.nn.functional.linear(torch.randn(2, 5, 7), lin.weight, lin.bias)
        torch.matmul(torch.randn(3, 2, 4), torch.randn(3, 4, 6))


def nothing():
    return None
'''
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_aten = torch.ops.aten


def _flop_cases(space: dict[str, Any]) -> dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]]:
    """name -> (workload, its arguments, made fresh per call)."""
    r = torch.randn
    return {
        "a @ b.t()": (space["a_times_b_t"], lambda: (r(5, 7), r(3, 7))),
        "batched matmul": (torch.bmm, lambda: (r(4, 5, 6), r(4, 6, 2))),
        "Linear forward + backward": (space["linear_step"], tuple),
        "Linear forward + backward, counted again": (space["linear_step"], tuple),
        "(4, 5, 6) @ (6, 2), folded into one mm": (torch.matmul, lambda: (r(4, 5, 6), r(6, 2))),
        "einsum bij,bjk->bik": (space["einsum_bmm"], lambda: (r(2, 3, 4), r(2, 4, 5))),
        "baddbmm": (torch.baddbmm, lambda: (r(2, 3, 5), r(2, 3, 4), r(2, 4, 5))),
        "addmm with a transposed operand": (space["addmm_transposed"], tuple),
        "a non-square mm (m, k, n all different)": (torch.mm, lambda: (r(2, 9), r(9, 4))),
        "elementwise only": (space["elementwise"], lambda: (r(10),)),
        "a 3-D MLP forward + backward": (space["mlp_step"], tuple),
        "linear and matmul under inference_mode": (space["inference_linear"], tuple),
        "a function that runs no op": (space["nothing"], tuple),
    }


def _torch_made(f: Any) -> bool:
    code = getattr(f, "__code__", None)
    return code is not None and code.co_filename.startswith(_TORCH_DIR)


def _trusted_flop_counter() -> tuple[Any, str | None]:
    """torch's FlopCounterMode, reloaded from torch's own file if anything in it was replaced."""
    mode = flop_counter.FlopCounterMode
    parts = [getattr(mode, n, None) for n in ("__init__", "__enter__", "__exit__", "get_total_flops")]
    parts += [flop_counter.flop_registry.get(op) for op in (_aten.mm, _aten.addmm, _aten.bmm, _aten.baddbmm)]
    if all(_torch_made(p) for p in parts):
        return mode, None
    return importlib.reload(flop_counter).FlopCounterMode, "torch.utils.flop_counter was changed in this kernel (now reloaded)"


def flop_counter_exercise(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`count_flops(fn, *args)`: the FLOPs torch's FlopCounterMode counts for `fn(*args)`, counted in a mode of the
    learner's own (backward included, composites decomposed); hidden cases are named workloads."""
    counter_mode, changed = _trusted_flop_counter()
    if changed:
        c.fail(changed + ", so this check could not trust it. Remove the line that changed it (or restart the "
               "kernel), run your answer again, then this check.")
    banned = [counter_mode.__init__, counter_mode.__enter__, counter_mode.get_total_flops,
              counter_mode.get_flop_counts, flop_counter.flop_registry[_aten.mm]]
    mine = c.watch(answer, "count_flops", forbid=banned, hint=FLOP_BANNED_HINTS)
    cases = _flop_cases(_compiled(FLOP_WORKLOADS, "04-flop-counter"))
    visible = ("a @ b.t()", "batched matmul", "Linear forward + backward", "Linear forward + backward, counted again")
    torch.manual_seed(0)
    for label, name in named(hidden, visible, lambda name: f"count_flops({name})"):
        fn, make_args = cases[name]
        args = make_args()
        with counter_mode(display=False) as reference:
            fn(*args)
        expected = reference.get_total_flops()
        hint = DECOMPOSE_HINTS if "inference_mode" in name else FLOP_HINTS
        got = mine(fn, *args)
        c.that(type(got) is int, f"{label} returned {type(got).__name__}; return a plain int", hint=hint)
        c.equal(got, expected, what=label, hint=hint, secret=hidden is not None)
