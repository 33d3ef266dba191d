"""Notebook 11 (custom operators): an operator whose schema is written by hand so that it passes `opcheck`, a fake
with a data-dependent output size that `torch.export` can trace, an autograd formula checked by `gradcheck`, and a
batching rule for an operator that is not elementwise.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). Every run registers the learner's functions on a fresh
operator, in a namespace of its own, so a changed answer can be checked again in the same kernel.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import os
import re
import sys
import time
import types
from collections.abc import Callable, Iterable, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.autograd import gradcheck

from ...lenses.copies import ops_inside
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["autograd_formula", "dynamic_fake", "opcheck_exercise", "vmap_rule"]

_F32, _F64 = torch.float32, torch.float64
# where installed code lives (torch, the standard library, site-packages): a function from elsewhere is a notebook's
_INSTALLED = tuple({os.path.dirname(torch.__file__) + os.sep, os.path.dirname(contextlib.__file__) + os.sep,
                    sys.prefix + os.sep, sys.base_prefix + os.sep, sys.exec_prefix + os.sep})
_clock = time.perf_counter_ns  # captured at import: a fresh namespace per run whatever the learner rebinds
# opcheck's four default tests, named here rather than read from torch's (changeable) default
OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
# where torch.library.opcheck does its work (imported on first use: importing it loads torch._dynamo)
_OPTESTS = ("torch.testing._internal.optests.generate_tests", "torch.testing._internal.optests.autograd_registration",
            "torch.testing._internal.optests.fake_tensor", "torch.testing._internal.optests.aot_autograd",
            "torch._subclasses.fake_utils")


def _fresh_namespace(stem: str) -> str:
    return f"tlw_{stem.strip('_')}_{_clock()}"


def _torch_made(f: Any, builtins_too: bool = True) -> bool:
    """Installed code (torch's own, or the standard library's or a package's that torch imports), not a notebook's."""
    f = f.func if isinstance(f, functools.partial) else getattr(f, "__func__", f)
    f = inspect.unwrap(f) if callable(f) else f
    code = getattr(f, "__code__", None)
    if code is None:
        return builtins_too
    return code.co_filename.startswith(_INSTALLED)


def _trusted_opcheck(c: Check) -> Callable[..., Any]:
    """torch's opcheck (generate_tests.opcheck), once every function it and its tests look up is torch's own; a
    module of it found changed is reloaded from torch's file (put back) and the check fails saying so."""
    import torch.testing._internal.optests  # noqa: F401 - loads the modules below

    changed, reload = [], []
    for name in _OPTESTS:
        module = sys.modules[name]
        found = [f"{name}.{k}" for k, v in list(vars(module).items())
                 if isinstance(v, (types.FunctionType, functools.partial)) and not _torch_made(v)]
        if name == _OPTESTS[0]:
            tests = module.ALL_TEST_UTILS
            found += [f"{name}.ALL_TEST_UTILS[{k!r}]" for k in OPCHECK_TESTS
                      if k not in tests or not _torch_made(tests[k], False)]
        changed += found
        reload += [module] if found else []
    for module in reload:
        importlib.reload(module)
    if changed:
        c.fail(f"torch's opcheck was changed in this kernel ({', '.join(changed[:3])}; now reloaded), so this check "
               "could not trust what it reports. Remove the line that changed it (or restart the kernel), run your "
               "answer again, then this check.")
    opcheck: Callable[..., Any] = sys.modules[_OPTESTS[0]].opcheck
    return opcheck


def _opcheck_failures(c: Check, op: Any, args: tuple[Any, ...], label: str, secret: bool, hint: Any,
                      failed: Sequence[Any] = ()) -> None:
    """Run opcheck's four tests on `op(*args)`; fail naming each failed test and torch's first line (for a hidden
    case only the test and the error's type: torch's message can hold the case's shapes)."""
    results = _trusted_opcheck(c)(op, args, {}, test_utils=OPCHECK_TESTS, raise_exception=False)
    if failed:
        raise failed[0]
    bad = {k: v for k, v in results.items() if not (type(v) is str and v == "SUCCESS")}
    if secret:
        said = "; ".join(f"{k} failed ({type(v).__name__})" for k, v in bad.items())
    else:
        said = "; ".join(f"{k}: {str(v).splitlines()[0][:160] if str(v) else type(v).__name__}" for k, v in bad.items())
    c.that(not bad, f"{label}: opcheck: {said}", hint)


def _probe_meta(c: Check, op: Any, args: tuple[torch.Tensor, ...], expected_shape: tuple[int, ...], dtype: torch.dtype,
                what: str, secret: bool, hint: Any) -> None:
    """Call `op` on meta tensors (its Meta key runs the fake) and compare what comes back with what the kernel
    returns: shape, dtype, device and (contiguous) strides, each said by name."""
    from ..checks import CheckFailed

    try:
        out = op(*args)
    except CheckFailed:
        raise
    except Exception as exc:
        said = type(exc).__name__ if secret else f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
        c.fail(f"{what}: the fake raised {said}", hint)
    c.that(type(out) is torch.Tensor, f"{what}: the fake returned {type(out).__name__}, not a tensor", hint)
    stride = tuple(torch.empty(expected_shape, device="meta").stride())
    got = {"shape": tuple(out.shape), "dtype": out.dtype, "device": out.device.type, "strides": tuple(out.stride())}
    want = {"shape": expected_shape, "dtype": dtype, "device": "meta", "strides": stride}
    for field in ("shape", "dtype", "device", "strides"):  # shape first: strides follow from it
        if got[field] != want[field]:
            if secret:
                c.fail(f"{what}: the fake's result has the wrong {field}", hint)
            c.fail(f"{what}: the fake's result has {field} {_show(got[field])}; the kernel's has {_show(want[field])} "
                   "(shape, dtype, device and strides must all agree)", hint)


def _run_hidden(c: Check, fn: Callable[..., Any], args: tuple[Any, ...], label: str) -> Any:
    """`fn(*args)` for a hidden case: an error fails the check naming its type only (torch's message can hold the
    case's shapes)."""
    from ..checks import CheckFailed

    try:
        return fn(*args)
    except CheckFailed:
        raise
    except Exception as exc:
        c.fail(f"{label}: your code raised {type(exc).__name__}")


def _same_form(c: Check, got: Any, want: torch.Tensor, what: str, secret: bool) -> None:
    """For a hidden case, a tensor's type, dtype and shape, said without the shape (the comparison would print it)."""
    if secret:
        c.that(type(got) is torch.Tensor, f"{what} is not a plain tensor")
        c.that(got.dtype == want.dtype, f"{what} has the wrong dtype")
        c.that(tuple(got.shape) == tuple(want.shape), f"{what} has the wrong shape")


def _show(v: Any) -> str:
    return str(list(v)) if isinstance(v, tuple) else str(v).replace("torch.", "")


def _cant_register(c: Check, what: str, exc: Exception, hint: Any) -> None:
    c.fail(f"registering {what} raised {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}",
           hint)


# --- 11-opcheck -------------------------------------------------------------------------------------------------

OPCHECK_HINTS = (
    "write the operator with torch.library's low-level calls (define with a schema string, impl for the CPU "
    "kernel, register_fake): opcheck's test_schema compares the inputs before and after the call, so the "
    "schema must say which argument the kernel writes",
    "in a schema, an argument the kernel writes carries an alias annotation with an exclamation mark after its "
    "type (printed schemas above show one); the result is a new tensor, so it carries none. The fake returns a "
    "new, empty tensor with one entry per row, x's dtype and device",
)
NORMALIZE_FAKE_HINTS = (
    "the fake must describe what the kernel returns for any input: float64 as well as float32, meta tensors as "
    "well as CPU ones",
    "make the fake's result with x's own factory method, so that it takes x's dtype and device (a bare "
    "torch.empty takes the default dtype and the CPU)",
)
NORMALIZE_SCHEMA = "normalize_rows_(Tensor(a!) x) -> Tensor"  # any alias set name, written as "a"
# name -> (rows, cols, seed, dtype): x = randn(rows, cols) + 0.1 from a generator seeded `seed`; opcheck runs on a
# fresh randn(rows, cols) seeded seed + 1; the fake is probed on meta tensors of that shape in float32 and float64
NORMALIZE_CASES = MappingProxyType({
    "a 4x3 input": (4, 3, 1, _F32),
    "a 1x7 input": (1, 7, 2, _F32),
    "a 6x2 input": (6, 2, 3, _F32),
    "a 5x4 float64 input": (5, 4, 4, _F64),
})
NORMALIZE_VISIBLE = ("a 4x3 input",)
# the calls that infer a schema from type annotations: this exercise asks for one written by hand
_SCHEMA_WRITERS = (torch.library.custom_op, torch.library.infer_schema)


def _fresh_normalize_op(c: Check, define: Callable[..., Any]) -> Any:
    stem = "normalize_rows_"
    qualified = f"{_fresh_namespace(stem)}::{stem}"
    try:
        define(qualified)
    except Exception as exc:
        from ..checks import CheckFailed

        if isinstance(exc, CheckFailed):
            raise
        c.fail(f"define_normalize_rows({qualified!r}) raised {type(exc).__name__}: {exc}", OPCHECK_HINTS)
    op: Any = getattr(getattr(torch.ops, qualified.split("::")[0]), stem, None)
    c.that(op is not None, f"define_normalize_rows(name) did not register an operator called {stem!r} in the "
           "namespace it was given: pass `name` to torch.library.define", OPCHECK_HINTS)
    return op.default


def _judge_normalize(c: Check, op: Any, label: str, case: tuple[int, int, int, torch.dtype], secret: bool) -> None:
    rows, cols, seed, dtype = case
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed), dtype=dtype) + 0.1
    want_norms = x.norm(dim=1)
    want = x / want_norms[:, None]
    got = _run_hidden(c, op, (x,), label) if secret else op(x)  # a visible case's error keeps its traceback
    _same_form(c, got, want_norms, f"{label}: the norms returned", secret)
    c.equal(got, want_norms, what=f"{label}: the norms returned", rel_tol=1e-5, hint=OPCHECK_HINTS, secret=secret)
    c.equal(x, want, what=f"{label}: x after the call (each row divided by its norm)", rel_tol=1e-5,
            hint=OPCHECK_HINTS, secret=secret)
    args = (torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed + 1), dtype=dtype),)
    _opcheck_failures(c, op, args, label, secret, OPCHECK_HINTS)
    for probe in (_F32, _F64):
        _probe_meta(c, op, (torch.empty(rows, cols, dtype=probe, device="meta"),), (rows,), probe,
                    f"{label}: called on a meta {_show(probe)} x", secret, NORMALIZE_FAKE_HINTS)


def _schema_written(schema: Any) -> str:
    """The schema as written, each alias set named "a" (torch numbers the sets custom_op infers: a0, a1...)."""
    return re.sub(r"\(a\d*(!?)\)", r"(a\1)", str(schema).split("::", 1)[1])


def opcheck_exercise(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`define_normalize_rows(name)`: registers the in-place row normaliser under `name` with torch.library's
    low-level calls (custom_op, which writes the schema for you, is off limits), with a hand-written schema that
    declares its write and a fake, so that it keeps its values and opcheck's four tests pass; its fake agrees with
    the kernel on meta inputs of both float dtypes. Hidden cases are named `NORMALIZE_CASES`."""
    define = c.watch(answer, "define_normalize_rows", forbid=_SCHEMA_WRITERS, hint=OPCHECK_HINTS)
    op = _fresh_normalize_op(c, define)
    c.equal(_schema_written(op._schema), NORMALIZE_SCHEMA,
            what="the operator's schema (what it declares it writes and returns)", hint=OPCHECK_HINTS)
    for label, name in named(hidden, NORMALIZE_VISIBLE, lambda name: name):
        _judge_normalize(c, op, label, NORMALIZE_CASES[name], hidden is not None)


# --- 11-dynamic-fake --------------------------------------------------------------------------------------------

DYNAMIC_HINTS = (
    "the kernel keeps only the rows whose largest absolute value exceeds the threshold: how many rows come out "
    "depends on the values, which a fake never sees, so no size computed from x's shape is right",
    "ask the fake's context (torch.library.get_ctx()) for a new size that stands for the unknown row count; the "
    "columns, the dtype and the device are those of x",
)
DYNAMIC_SAME_HINTS = ("the fake must describe the kernel's result every time it is called: the same function "
                      "on fake tensors while a model is traced and under opcheck",)
KEEP_SCHEMA = "keep_rows(Tensor x, float threshold) -> Tensor"
# name -> (rows, cols, threshold, seed, dtype): x = randn(rows, cols) from a generator seeded `seed`; the kernel keeps
# the rows of x whose largest |value| exceeds threshold (in the model: of 2 * x)
KEEP_CASES = MappingProxyType({
    "a 12x3 float64 x, threshold 2.5": (12, 3, 2.5, 1, _F64),
    "a 9x4 x, threshold 3.0": (9, 4, 3.0, 2, _F32),
    "a 7x2 x, threshold 100 (none kept)": (7, 2, 100.0, 3, _F32),
    "a 5x6 float64 x, threshold 0 (all kept)": (5, 6, 0.0, 4, _F64),
})
KEEP_VISIBLE = ("a 12x3 float64 x, threshold 2.5",)


def _keep_rows_kernel(x: torch.Tensor, threshold: float) -> torch.Tensor:
    """The exercise's kernel: NumPy code that keeps the rows whose largest |value| exceeds the threshold."""
    xn = x.numpy(force=True)
    return torch.from_numpy(xn[np.abs(xn).max(axis=1) > threshold].copy()).to(x.dtype)


def _keep_rows_operator() -> tuple[Any, str]:
    name = f"{_fresh_namespace('keep_rows')}::keep_rows"  # a fresh operator on every run
    return torch.library.custom_op(name, mutates_args=())(_keep_rows_kernel), name


def _dynamic_problem(x: Any, out: Any) -> str | None:
    """How a fake's result on fake tensors differs from what the kernel can return, or None."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    if not isinstance(out, torch.Tensor):
        return f"returned {type(out).__name__}, not a tensor"
    if out.dim() != 2:
        return f"returned a {out.dim()}-d tensor where the kernel returns a 2-d one (rows, columns)"
    rows, cols = out.shape
    if not free_unbacked_symbols(rows):
        return (f"returned a fixed row count ({rows}): how many rows the kernel keeps depends on the values, not on "
                "x's shape")
    if type(cols) is int and type(x.shape[1]) is int and cols != x.shape[1]:
        return f"returned {cols} columns where the kernel's result has x's {x.shape[1]}"
    for field, got, want in (("dtype", out.dtype, x.dtype), ("device", out.device, x.device)):
        if got != want:
            return f"returned {field} {_show(got)} where the kernel's is {_show(want)} (x's)"
    return None


def _judge_dynamic(c: Check, op: Any, seen: list[str | None], failed: list[Any], label: str,
                   case: tuple[int, int, float, int, torch.dtype], secret: bool) -> None:
    """The fake as torch.compile and torch.export use it (fake tensors with a symbolic shape environment), then the
    kernel against it under opcheck."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from ..checks import CheckFailed

    rows, cols, threshold, seed, dtype = case
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    seen.clear()
    try:
        with FakeTensorMode(shape_env=ShapeEnv(), static_shapes=True) as mode:  # sizes as Dynamo first traces
            op(mode.from_tensor(x) * 2, threshold)
    except CheckFailed:
        raise
    except Exception as exc:
        if failed:
            raise failed[0] from None
        text = str(exc).strip()
        said = type(exc).__name__ if secret else f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}"
        c.fail(f"{label}: called on fake tensors (as torch.compile and torch.export trace), the operator raised {said}",
               DYNAMIC_HINTS)
    if failed:
        raise failed[0]
    c.that(bool(seen), f"{label}: the operator ran on fake tensors without calling your fake", DYNAMIC_SAME_HINTS)
    wrong = next((p for p in seen if p is not None), None)
    c.that(wrong is None, f"{label}: on fake tensors, your fake {wrong}" if not secret else
           f"{label}: on fake tensors, your fake's result could not be the kernel's", DYNAMIC_HINTS)
    seen.clear()
    _opcheck_failures(c, op, (x, threshold), label, secret, DYNAMIC_HINTS, failed)
    wrong = next((p for p in seen if p is not None and "row count" not in p), None)  # opcheck's own shapes are real
    c.that(wrong is None, f"{label}: under opcheck, your fake {wrong}" if not secret else
           f"{label}: under opcheck, your fake's result differed from the kernel's", DYNAMIC_SAME_HINTS)


def dynamic_fake(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`keep_rows_fake(x, threshold)`: registered as the fake of the NumPy keep_rows operator (data-dependent row
    count), it gives a row count that stands for any value (an unbacked size) and x's columns, dtype and device on
    fake tensors with a symbolic shape environment (how torch.compile and torch.export trace), and opcheck's four
    tests pass. Hidden cases are named `KEEP_CASES`."""
    c.that(callable(answer), f"keep_rows_fake should be a function, got {type(answer).__name__}", DYNAMIC_HINTS)
    from ..checks import CheckFailed

    # NumPy cannot run on tensors without data: a fake that tries raises, and that is its feedback
    fake = c.watch(answer, "keep_rows_fake", escapes=True)
    op, name = _keep_rows_operator()
    seen: list[str | None] = []
    failed: list[CheckFailed] = []  # the watch's own failures, which torch.export and opcheck would swallow

    def recorded_fake(x: torch.Tensor, threshold: float) -> Any:
        try:
            out = fake(x, threshold)
        except CheckFailed as failure:
            failed.append(failure)
            raise
        seen.append(_dynamic_problem(x, out))
        return out

    try:
        torch.library.register_fake(name, recorded_fake)
    except Exception as exc:
        _cant_register(c, "keep_rows_fake", exc, DYNAMIC_HINTS)
    for label, case in named(hidden, KEEP_VISIBLE, lambda name: name):
        _judge_dynamic(c, op._opoverload, seen, failed, label, KEEP_CASES[case], hidden is not None)


# --- 11-autograd ------------------------------------------------------------------------------------------------

def _cdist_kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The exercise's kernel: NumPy code the compiler cannot trace."""
    an, bn = a.numpy(force=True), b.numpy(force=True)
    return torch.from_numpy(np.sqrt(((an[:, None, :] - bn[None, :, :]) ** 2).sum(-1))).to(a.dtype)


def _cdist_operator(stem: str) -> tuple[Any, str]:
    name = f"{_fresh_namespace(stem)}::cdist"  # a fresh operator on every run
    return torch.library.custom_op(name, mutates_args=())(_cdist_kernel), name

AUTOGRAD_HINTS = (
    "differentiate one entry: d_ij depends on row a_i and row b_j only, and its gradient with respect to a_i is "
    "the unit vector from b_j to a_i; grad weights each pair",
    "for a: sum over j of grad_ij · (a_i − b_j) / d_ij; for b: the same terms with the opposite sign, summed over "
    "i. setup_context must save a, b (and d if you reuse it)",
)
AUTOGRAD_OPS_HINTS = ("compute the gradients with elementwise operations and sums: the check records what your "
                      "setup_context and backward run, and torch.cdist's kernels are off limits",)
TWICE_HINTS = ("keep what backward needs on ctx (ctx.save_for_backward): each call of the operator has a ctx of "
               "its own, and a value kept anywhere else is overwritten by the next call",)
CDIST_OPS = frozenset({"cdist", "_cdist_forward", "_cdist_backward", "_euclidean_dist"})
_PROFILED_CDIST = frozenset(f"aten::{op}" for op in CDIST_OPS)
# name -> (n, m, d, seed): a = randn(n, d), b = 2 * randn(m, d) in float64 from a generator seeded `seed` (no two
# rows coincide); gradcheck on them, the ops run profiled at that size, then two calls of that size in one graph
# (pairs seeded seed + 100 and seed + 200) before one backward
GRAD_CASES = MappingProxyType({
    "a 3x2, b 4x2": (3, 4, 2, 1),
    "a 1x3, b 5x3": (1, 5, 3, 2),
    "a 4x1, b 1x1": (4, 1, 1, 3),
})
GRAD_VISIBLE = ("a 3x2, b 4x2",)


# What the check runs the learner's formula through, compiled per call under a file name of its own: a watched call
# may call nothing defined in this module.
GRAD_WORKLOADS = '''
def gradcheck_of(gradcheck, op, a, b):
    return gradcheck(op, (a, b), raise_exception=True)


def forward_backward(op, a, b):
    op(a, b).sum().backward()


def two_calls_then_backward(op, first, second, weight):
    (op(*first) * weight).sum().add((op(*second) * 3).sum()).backward()


def fake(a, b):
    return a.new_empty(a.shape[0], b.shape[0])
'''


def _compiled(source: str, exercise: str) -> dict[str, Any]:
    space: dict[str, Any] = {"torch": torch}
    exec(compile(source, f"<workloads of {exercise}>", "exec"), space)
    return space


def _pair(n: int, m: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, d, generator=g, dtype=_F64, requires_grad=True)
    b = (torch.randn(m, d, generator=g, dtype=_F64) * 2).requires_grad_()
    return a, b


def _reference_grads(a: torch.Tensor, b: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """d(sum(weight * cdist(a, b)))/d(a, b), from the definition, by autograd in float64."""
    a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
    dist = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1).sqrt()
    ga, gb = torch.autograd.grad((dist * weight).sum(), (a, b))
    return ga, gb


def _judge_grads(c: Check, op: Any, run: dict[str, Callable[..., Any]], label: str, case: tuple[int, int, int, int],
                 secret: bool) -> None:
    from ..checks import CheckFailed

    n, m, d, seed = case
    a, b = _pair(n, m, d, seed)
    try:
        ok = run["gradcheck_of"](gradcheck, op, a, b)
    except CheckFailed:
        raise
    except Exception as exc:
        said = " ".join(str(exc).strip().splitlines()[:3])[:400]
        c.fail(f"{label}: gradcheck: {type(exc).__name__}" + ("" if secret else f": {said}"), AUTOGRAD_HINTS)
    c.that(ok is True, f"{label}: gradcheck failed", AUTOGRAD_HINTS)
    ran = set(ops_inside(run["forward_backward"], op, *_pair(n, m, d, seed))) & _PROFILED_CDIST
    c.that(not ran, f"{label}: your backward ran {', '.join(sorted(ran))}: compute the gradients with elementwise "
           "operations and sums", AUTOGRAD_OPS_HINTS)
    # two calls in one graph before backward: each backward must use its own call's tensors
    first, second = _pair(n, m, d, seed + 100), _pair(n, m, d, seed + 200)
    weight = torch.linspace(0.5, 1.5, n * m, dtype=_F64).reshape(n, m)
    args = (op, first, second, weight)
    if secret:
        _run_hidden(c, run["two_calls_then_backward"], args, label)
    else:
        run["two_calls_then_backward"](*args)
    for k, (x, y) in enumerate((first, second), 1):
        ga, gb = _reference_grads(x, y, weight if k == 1 else torch.full((n, m), 3.0, dtype=_F64))
        for what, got, want in (("a", x.grad, ga), ("b", y.grad, gb)):
            said = f"{label}: the gradient of {what} in the operator's call {k} of 2, both made before one backward"
            _same_form(c, got, want, said, secret)
            c.equal(got, want, what=said, rel_tol=1e-7, hint=TWICE_HINTS, secret=secret)


def autograd_formula(c: Check, setup_context: Any, backward: Any, hidden: Iterable[str] | None = None) -> None:
    """`cdist_setup_context` and `cdist_backward`, registered with register_autograd on the cdist operator: gradcheck
    passes in float64, neither runs torch.cdist's kernels (recorded on every call, and at each case's size by the
    profiler, which sees inside kernels too), two calls in one graph each get their own gradients, and opcheck
    passes (visible). Hidden cases are named `GRAD_CASES`."""
    c.that(callable(setup_context) and callable(backward), "cdist_setup_context and cdist_backward should be "
           f"functions, got {type(setup_context).__name__} and {type(backward).__name__}", AUTOGRAD_HINTS)
    space = _compiled(GRAD_WORKLOADS, "11-autograd")
    # gradcheck formats its failure with torch's own tensor printing, which pops modes: recorded, escapes allowed
    run = {k: c.watch(space[k], "your setup_context and backward", forbid_aten=CDIST_OPS, escapes=k == "gradcheck_of",
                      hint=AUTOGRAD_OPS_HINTS) for k in ("gradcheck_of", "forward_backward", "two_calls_then_backward")}
    op, name = _cdist_operator("cdist_grad")
    torch.library.register_fake(name, space["fake"])
    try:
        torch.library.register_autograd(name, backward, setup_context=setup_context)
    except Exception as exc:
        _cant_register(c, "cdist_backward and cdist_setup_context", exc, AUTOGRAD_HINTS)
    for label, case in named(hidden, GRAD_VISIBLE, lambda name: name):
        _judge_grads(c, op, run, label, GRAD_CASES[case], hidden is not None)
    if hidden is None:
        g = torch.Generator().manual_seed(4)
        args = (torch.randn(3, 2, generator=g, dtype=_F64, requires_grad=True),
                torch.randn(4, 2, generator=g, dtype=_F64, requires_grad=True))
        _opcheck_failures(c, op, args, "a 3x2, b 4x2", False, AUTOGRAD_HINTS)


# --- 11-vmap-rule -----------------------------------------------------------------------------------------------

VMAP_HINTS = (
    "the rule gets x with the batch dimension at in_dims[0], which can be any dimension, and the operator takes "
    "one 2-d (rows, columns) tensor: the elementwise rule above (pass the batch dimension through) does not fit",
    "move the batch dimension to the front, fold it into the rows so that the operator sees one tall 2-d tensor, "
    "then unfold its result into (batch, rows) and return it with the dimension where the batch now is",
)
VMAP_ONCE_HINTS = ("without a rule, vmap calls the kernel once per sample; a batching rule calls the operator once "
                   "for the whole batch (no loop over the samples)",)
# name -> (shape, dims, seed): x = randn(shape) from a generator seeded `seed`; one vmap over dims[0], or (two
# entries) vmap(vmap(op, in_dims=dims[1]), in_dims=dims[0]); the expected result is a loop of the kernel
VMAP_CASES = MappingProxyType({
    "shape (5, 4, 3), dim 0": ((5, 4, 3), (0,), 1),
    "shape (4, 6, 3), dim 1": ((4, 6, 3), (1,), 2),
    "shape (4, 3, 2), dim 2": ((4, 3, 2), (2,), 3),
    "shape (2, 3, 4, 5), dims 0 then 1": ((2, 3, 4, 5), (0, 1), 4),
    "shape (1, 1, 3), dim 0": ((1, 1, 3), (0,), 5),
})
VMAP_VISIBLE = ("shape (5, 4, 3), dim 0", "shape (4, 6, 3), dim 1")


def _row_norms_kernel(x: torch.Tensor) -> torch.Tensor:
    """The exercise's kernel: NumPy code, one norm per row of a 2-d tensor."""
    if x.dim() != 2:
        raise ValueError(f"row_norms takes a 2-d (rows, columns) tensor, got {x.dim()}-d")
    xn = x.numpy(force=True)
    return torch.from_numpy(np.sqrt((xn * xn).sum(axis=1))).to(x.dtype)


def _row_norms_operator(calls: list[int]) -> tuple[Any, str]:
    name = f"{_fresh_namespace('row_norms')}::row_norms"  # a fresh operator on every run

    def row_norms(x: torch.Tensor) -> torch.Tensor:
        calls.append(x.dim())
        return _row_norms_kernel(x)

    return torch.library.custom_op(name, mutates_args=())(row_norms), name


def _looped(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """What vmap must give: the kernel on every sample, stacked along dimension 0 (level by level)."""
    if not dims:
        return _row_norms_kernel(x)
    return torch.stack([_looped(x.select(dims[0], i), dims[1:]) for i in range(x.shape[dims[0]])])


def _judge_vmap(c: Check, op: Any, calls: list[int], label: str, case: tuple[tuple[int, ...], tuple[int, ...], int],
                secret: bool) -> None:
    from ..checks import CheckFailed

    shape, dims, seed = case
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=_F64)
    fn: Any = op
    for d in reversed(dims):
        fn = torch.vmap(fn, in_dims=d)
    calls.clear()
    try:
        got = fn(x)
    except CheckFailed:
        raise
    except Exception as exc:
        text = str(exc).strip()
        said = type(exc).__name__ if secret else f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}"
        c.fail(f"{label}: vmap of the operator raised {said}", VMAP_HINTS)
    c.that(len(calls) == 1, f"{label}: the kernel ran {len(calls)} times for one vmap call" + ("" if len(calls) else
           " (your rule did not call the operator)"), VMAP_ONCE_HINTS if calls else VMAP_HINTS)
    want = _looped(x, dims)
    _same_form(c, got, want, f"{label}: vmap's result", secret)
    c.equal(got, want, what=f"{label}: vmap's result (the norm of every row of every sample)", rel_tol=1e-9,
            hint=VMAP_HINTS, secret=secret)


def vmap_rule(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`row_norms_vmap(row_norms, info, in_dims, x)`: registered with register_vmap on the NumPy row-norms operator
    (the operator passed first), vmap over any dimension, and vmap of vmap, gives the per-sample loop's result
    with one kernel call per vmap call. Hidden cases are named `VMAP_CASES`."""
    c.that(callable(answer), f"row_norms_vmap should be a function, got {type(answer).__name__}", VMAP_HINTS)
    rule = c.watch(answer, "row_norms_vmap", hint=VMAP_HINTS)
    calls: list[int] = []
    op, name = _row_norms_operator(calls)

    def registered(info: Any, in_dims: Any, x: Any) -> Any:
        return rule(op, info, in_dims, x)

    try:
        torch.library.register_vmap(name, registered)
    except Exception as exc:
        _cant_register(c, "row_norms_vmap", exc, VMAP_HINTS)
    for label, case in named(hidden, VMAP_VISIBLE, lambda name: name):
        _judge_vmap(c, op, calls, label, VMAP_CASES[case], hidden is not None)
