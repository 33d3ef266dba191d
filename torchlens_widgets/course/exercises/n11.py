"""Notebook 11 (custom operators): an operator that passes `opcheck`, a fake that lets `torch.compile` keep one
graph, and an autograd formula checked by `gradcheck`.

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
import sys
import time
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.autograd import gradcheck

from ...lenses.copies import ops_inside
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["autograd_formula", "fake_no_break", "opcheck_exercise"]

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


def _as_shipped(entry: Any) -> Any:
    """A setting's value as torch ships it in this environment: an environment variable's, else the default."""
    from torch.utils._config_module import _UNSET_SENTINEL

    for value in (entry.env_value_force, entry.env_value_default):
        if value is not _UNSET_SENTINEL:
            return value
    return entry.default


@contextlib.contextmanager
def _compile_config_as_shipped() -> Iterator[None]:
    """Dynamo's and AOT autograd's settings as torch ships them, for the block: an answer may have changed one
    (suppress_errors turns a failed compile into a silent fallback)."""
    import torch._dynamo
    import torch._functorch.config as functorch_config

    with contextlib.ExitStack() as stack:
        for config in (torch._dynamo.config, functorch_config):
            changed = {name: _as_shipped(entry) for name, entry in config._config.items()
                       if entry.alias is None and not entry.deprecated
                       and getattr(config, name) is not _as_shipped(entry)
                       and getattr(config, name) != _as_shipped(entry)}
            if changed:
                stack.enter_context(config.patch(changed))
        yield


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
    "opcheck's test_schema compares the inputs before and after the call: the schema must say which argument "
    "the kernel writes; the fake-tensor tests need a fake for the output",
    "declare the argument the kernel divides in place in mutates_args, and register a fake that returns a new, "
    "empty tensor with one entry per row (the dtype and device of x)",
)
NORMALIZE_FAKE_HINTS = (
    "the fake must describe what the kernel returns for any input: float64 as well as float32, meta tensors as "
    "well as CPU ones",
    "make the fake's result with x's own factory method, so that it takes x's dtype and device (a bare "
    "torch.empty takes the default dtype and the CPU)",
)
NORMALIZE_SCHEMA = "normalize_rows_(Tensor(a0!) x) -> Tensor"
# name -> (rows, cols, seed, dtype): x = randn(rows, cols) + 0.1 from a generator seeded `seed`; opcheck runs on a
# fresh randn(rows, cols) seeded seed + 1; the fake is probed on meta tensors of that shape in float32 and float64
NORMALIZE_CASES = MappingProxyType({
    "a 4x3 input": (4, 3, 1, _F32),
    "a 1x7 input": (1, 7, 2, _F32),
    "a 6x2 input": (6, 2, 3, _F32),
    "a 5x4 float64 input": (5, 4, 4, _F64),
})
NORMALIZE_VISIBLE = ("a 4x3 input",)


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
           "namespace it was given: pass `name` to torch.library.custom_op", OPCHECK_HINTS)
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


def opcheck_exercise(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`define_normalize_rows(name)`: registers the in-place row normaliser under `name` with the schema that
    declares its write and a fake, so that it keeps its values and opcheck's four tests pass; its fake agrees with
    the kernel on meta inputs of both float dtypes. Hidden cases are named `NORMALIZE_CASES`."""
    define = c.watch(answer, "define_normalize_rows")
    op = _fresh_normalize_op(c, define)
    c.equal(str(op._schema).split("::", 1)[1], NORMALIZE_SCHEMA,
            what="the operator's schema (what it declares it writes and returns)", hint=OPCHECK_HINTS)
    for label, name in named(hidden, NORMALIZE_VISIBLE, lambda name: name):
        _judge_normalize(c, op, label, NORMALIZE_CASES[name], hidden is not None)


# --- 11-fake-no-break -------------------------------------------------------------------------------------------

FAKE_HINTS = (
    "the fake receives tensors with a shape, a dtype and a device but no data: return an empty tensor whose "
    "shape, dtype and device are those of the kernel's result",
    "the result has one row per row of a and one column per row of b; make it with a's factory method so it "
    "lands on a's device with a's dtype (a meta input must give a meta output)",
)
FAKE_SAME_HINTS = ("the fake must describe the kernel's result every time it is called: the same function "
                   "for meta tensors, for opcheck and while torch.compile traces",)
# name -> (n, m, d, dtype): a = randn(n, d), b = randn(m, d) from one generator seeded n * 100 + m * 10 + d
CDIST_CASES = MappingProxyType({
    "a 5x4, b 3x4": (5, 3, 4, _F32),
    "a 2x3, b 7x3, float64": (2, 7, 3, _F64),
    "a 6x1, b 6x1": (6, 6, 1, _F32),
})
CDIST_VISIBLE = ("a 5x4, b 3x4",)


def _cdist_kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The exercise's kernel: NumPy code the compiler cannot trace."""
    an, bn = a.numpy(force=True), b.numpy(force=True)
    return torch.from_numpy(np.sqrt(((an[:, None, :] - bn[None, :, :]) ** 2).sum(-1))).to(a.dtype)


def _cdist_operator(stem: str) -> tuple[Any, str]:
    name = f"{_fresh_namespace(stem)}::cdist"  # a fresh operator on every run
    return torch.library.custom_op(name, mutates_args=())(_cdist_kernel), name


def _fake_problem(a: Any, b: Any, out: Any) -> str | None:
    """How a fake's result (while compiling, for opcheck) differs from the kernel's, or None; shapes that are not
    plain ints (opcheck's dynamic-shape test) are left to opcheck."""
    sizes = (*a.shape, *b.shape)
    if not all(type(s) is int for s in sizes):
        return None
    if not isinstance(out, torch.Tensor):
        return f"returned {type(out).__name__}, not a tensor"
    if not all(type(s) is int for s in out.shape):
        return None
    want: dict[str, Any] = {"shape": (a.shape[0], b.shape[0]), "dtype": a.dtype, "device": a.device}
    got: dict[str, Any] = {"shape": tuple(out.shape), "dtype": out.dtype, "device": out.device}
    for field in ("shape", "dtype", "device"):
        if got[field] != want[field]:
            return f"returned {field} {_show(got[field])} where the kernel's is {_show(want[field])}"
    if tuple(out.stride()) != tuple(torch.empty(want["shape"], device="meta").stride()):
        return f"returned strides {_show(tuple(out.stride()))}, not the contiguous strides of the kernel's result"
    return None


def _judge_fake(c: Check, op: Any, name: str, seen: list[str | None], failed: list[Any], label: str,
                case: tuple[int, int, int, torch.dtype], secret: bool) -> None:
    from ...lenses.graph_breaks import graph_breaks

    n, m, d, dtype = case
    g = torch.Generator().manual_seed(n * 100 + m * 10 + d)
    a, b = torch.randn(n, d, generator=g, dtype=dtype), torch.randn(m, d, generator=g, dtype=dtype)
    _probe_meta(c, op, (a.to("meta"), b.to("meta")), (n, m), dtype, f"{label}: on meta inputs", secret, FAKE_HINTS)

    def model(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return op(a * 2, b).min(dim=1).values.sum()

    seen.clear()
    with _compile_config_as_shipped():
        report = graph_breaks(model, a, b)
    if failed:
        raise failed[0]
    error = "it raised" if secret and report.error else report.error
    c.that(report.error is None, f"{label}: compiling model failed: {error}", FAKE_HINTS)
    c.equal((report.graphs, report.graph_breaks), (1, 0), what=f"{label}: (graphs, graph breaks) of the compiled model",
            hint=FAKE_HINTS)
    c.that(report.calls(name), f"{label}: the compiled graph does not call the operator"
           + ("" if secret else f": {report.ops}"), FAKE_HINTS)
    c.that(bool(seen), f"{label}: torch.compile traced the operator without calling your fake", FAKE_SAME_HINTS)
    wrong = next((p for p in seen if p is not None), None)
    c.that(wrong is None, f"{label}: while torch.compile traced model, your fake {wrong}"
           if not secret else f"{label}: while torch.compile traced model, your fake's result differed from the "
           "kernel's", FAKE_SAME_HINTS)
    seen.clear()
    _opcheck_failures(c, op, (a, b), label, secret, FAKE_HINTS, failed)
    wrong = next((p for p in seen if p is not None), None)
    c.that(wrong is None, f"{label}: under opcheck, your fake {wrong}" if not secret else
           f"{label}: under opcheck, your fake's result differed from the kernel's", FAKE_SAME_HINTS)


def fake_no_break(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`cdist_fake(a, b)`: registered as the fake of the NumPy cdist operator, it describes the kernel's result on
    meta inputs (shape, dtype, device, strides), on every call while `model` compiles to one graph with no break
    that calls the operator, and under opcheck. Hidden cases are named `CDIST_CASES`."""
    c.that(callable(answer), f"cdist_fake should be a function, got {type(answer).__name__}", FAKE_HINTS)
    from ..checks import CheckFailed

    # NumPy cannot run on tensors without data: a fake that tries raises, and that is its feedback
    fake = c.watch(answer, "cdist_fake", escapes=True)
    op, name = _cdist_operator("cdist")
    seen: list[str | None] = []
    failed: list[CheckFailed] = []  # the watch's own failures, which torch.compile and opcheck would swallow

    def recorded_fake(a: torch.Tensor, b: torch.Tensor) -> Any:
        try:
            out = fake(a, b)
        except CheckFailed as failure:
            failed.append(failure)
            raise
        seen.append(_fake_problem(a, b, out))
        return out

    try:
        torch.library.register_fake(name, recorded_fake)
    except Exception as exc:
        _cant_register(c, "cdist_fake", exc, FAKE_HINTS)
    for label, case in named(hidden, CDIST_VISIBLE, lambda name: name):
        _judge_fake(c, op, name, seen, failed, label, CDIST_CASES[case], hidden is not None)


# --- 11-autograd ------------------------------------------------------------------------------------------------

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
