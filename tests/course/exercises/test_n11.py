"""Notebook 11's exercise checks, without a notebook: the reference registrations pass visible and hidden cases;
wrong ones fail saying what they did (a fake with the default dtype, one that shows torch.compile another result, a
formula that keeps its tensors outside ctx), and a hidden case is named by its number only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor

from torchlens_widgets.course.exercises import n11

HIDDEN = {
    "11-opcheck": [n for n in n11.NORMALIZE_CASES if n not in n11.NORMALIZE_VISIBLE],
    "11-fake-no-break": [n for n in n11.CDIST_CASES if n not in n11.CDIST_VISIBLE],
    "11-autograd": [n for n in n11.GRAD_CASES if n not in n11.GRAD_VISIBLE],
}


def definer(fake: Callable[..., Any] | None, mutates: tuple[str, ...] = ("x",)) -> Callable[[str], Any]:
    def define_normalize_rows(name):  # type: ignore[no-untyped-def]
        @torch.library.custom_op(name, mutates_args=mutates)
        def normalize_rows_(x: Tensor) -> Tensor:
            norms = x.norm(dim=1)
            x.div_(norms[:, None])
            return norms

        if fake is not None:
            normalize_rows_.register_fake(fake)
        return normalize_rows_

    return define_normalize_rows


def rows_fake(x):  # type: ignore[no-untyped-def]
    return x.new_empty(x.shape[0])


def cdist_fake(a, b):  # type: ignore[no-untyped-def]
    torch._check(a.shape[1] == b.shape[1], lambda: "cdist: a and b must have the same number of columns")
    return a.new_empty(a.shape[0], b.shape[0])


def cdist_setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
    a, b = inputs
    ctx.save_for_backward(a, b, output)


def cdist_backward(ctx, grad):  # type: ignore[no-untyped-def]
    a, b, d = ctx.saved_tensors
    w = grad / d
    diff = a[:, None, :] - b[None, :, :]
    return (w[:, :, None] * diff).sum(1), -(w[:, :, None] * diff).sum(0)


def _both(grade: Any, *answer: Any, hidden: list[str]) -> Callable[[Any], Any]:
    return lambda c: (grade(c, *answer), grade(c, *answer, hidden=hidden))


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("11-opcheck", _both(n11.opcheck_exercise, definer(rows_fake), hidden=HIDDEN["11-opcheck"])) is None
    assert verdict("11-fake-no-break", _both(n11.fake_no_break, cdist_fake, hidden=HIDDEN["11-fake-no-break"])) is None
    assert verdict("11-autograd", _both(n11.autograd_formula, cdist_setup_context, cdist_backward,
                                        hidden=HIDDEN["11-autograd"])) is None


@pytest.mark.parametrize(("answer", "says"), [
    (definer(None, ()), "the operator's schema (what it declares it writes and returns): expected "
                        "'normalize_rows_(Tensor(a0!) x) -> Tensor', got 'normalize_rows_(Tensor x) -> Tensor'"),
    (definer(None), "a 4x3 input: opcheck: test_faketensor:"),
    (definer(lambda x: torch.empty(x.shape[0], device=x.device)),  # the default dtype
     "a 4x3 input: called on a meta float64 x: the fake's result has dtype float32; the kernel's has float64"),
    (definer(lambda x: torch.empty(x.shape[0], dtype=x.dtype)),  # no device: a CPU tensor for a meta x
     "the fake's result has device cpu; the kernel's has meta"),
])
def test_wrong_registrations_fail_saying_what_they_did(verdict, answer, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("11-opcheck", lambda c: n11.opcheck_exercise(c, answer))
    assert message is not None and says in message, message


def test_a_fake_fitted_to_the_visible_rows_fails_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    fitted = definer(lambda x: x.new_empty(4))
    assert verdict("11-opcheck", lambda c: n11.opcheck_exercise(c, fitted)) is None
    message = verdict("11-opcheck", lambda c: n11.opcheck_exercise(c, fitted, hidden=HIDDEN["11-opcheck"]))
    assert message.startswith("hidden case 1: opcheck: test_faketensor failed"), message
    said = message.split("\nHint")[0]
    assert "1x7" not in said and "[1]" not in said and "[4]" not in said, said


def test_patching_opchecks_tests_fails_and_is_put_back(verdict) -> None:  # type: ignore[no-untyped-def]
    import torch.testing._internal.optests.generate_tests as generate_tests

    for name in ("test_faketensor", "test_aot_dispatch_dynamic"):
        generate_tests.ALL_TEST_UTILS[name] = lambda *a, **k: None
    message = verdict("11-opcheck", lambda c: n11.opcheck_exercise(c, definer(None)))
    assert message is not None and "torch's opcheck was changed in this kernel (torch.testing._internal.optests." \
        "generate_tests.ALL_TEST_UTILS['test_faketensor']" in message, message
    assert verdict("11-opcheck", lambda c: n11.opcheck_exercise(c, definer(rows_fake))) is None


def lying_fake(a, b):  # type: ignore[no-untyped-def]
    if torch.compiler.is_compiling():  # shows Dynamo another result than meta tensors and opcheck get
        return a.new_empty(a.shape[0], a.shape[0])
    return a.new_empty(a.shape[0], b.shape[0])


@pytest.mark.parametrize(("answer", "says"), [
    (lambda a, b: torch.empty_like(a), "a 5x4, b 3x4: on meta inputs: the fake's result has shape [5, 4]; the "
                                        "kernel's has [5, 3]"),
    (lambda a, b: torch.empty(a.shape[0], b.shape[0]), "the fake's result has device cpu; the kernel's has meta"),
    (lambda a, b: b.new_empty(b.shape[0], a.shape[0]).t(), "the fake's result has strides [1, 5]; the kernel's "
                                                           "has [3, 1]"),
    (lying_fake, "while torch.compile traced model, your fake returned shape [5, 5] where the kernel's is [5, 3]"),
])
def test_wrong_fakes_fail_saying_what_they_did(verdict, answer, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("11-fake-no-break", lambda c: n11.fake_no_break(c, answer))
    assert message is not None and says in message, message


def test_a_float32_fake_fails_the_hidden_float64_case_by_number(verdict) -> None:  # type: ignore[no-untyped-def]
    def float32_fake(a, b):  # type: ignore[no-untyped-def]
        return a.new_empty(a.shape[0], b.shape[0], dtype=torch.float32)

    assert verdict("11-fake-no-break", lambda c: n11.fake_no_break(c, float32_fake)) is None
    message = verdict("11-fake-no-break", lambda c: n11.fake_no_break(c, float32_fake,
                                                                       hidden=HIDDEN["11-fake-no-break"]))
    assert message.startswith("hidden case 1: on meta inputs: the fake's result has the wrong dtype"), message
    said = message.split("\nHint")[0]
    assert "float64" not in said and "2x3" not in said, said


def test_changed_compile_settings_do_not_hide_a_failed_compile(verdict) -> None:  # type: ignore[no-untyped-def]
    def raises_when_compiling(a, b):  # type: ignore[no-untyped-def]
        if torch.compiler.is_compiling():
            raise RuntimeError("no fake while compiling")
        return a.new_empty(a.shape[0], b.shape[0])

    import torch._dynamo

    with torch._dynamo.config.patch(suppress_errors=True):
        message = verdict("11-fake-no-break", lambda c: n11.fake_no_break(c, raises_when_compiling))
    # a setting changed around the check is tampering now (it was hidden by the check's own config patch before)
    assert message is not None and "torch._dynamo.config.suppress_errors was changed to True" in message, message


def helped(a, b):  # type: ignore[no-untyped-def]
    n11._fake_problem(a, b, None)
    return a.new_empty(a.shape[0], b.shape[0])


def helped_while_compiling(a, b):  # type: ignore[no-untyped-def]
    if torch.compiler.is_compiling():
        n11._fake_problem(a, b, None)
    return a.new_empty(a.shape[0], b.shape[0])


@pytest.mark.parametrize("answer", [helped, helped_while_compiling])
def test_a_fake_calling_the_checks_own_helper_fails(verdict, answer) -> None:  # type: ignore[no-untyped-def]
    message = verdict("11-fake-no-break", lambda c: n11.fake_no_break(c, answer))
    assert message is not None and "cdist_fake called _fake_problem (one of the check's own helpers)" in message, message


_STASH: list[Any] = []


def stashing_setup(ctx, inputs, output):  # type: ignore[no-untyped-def]
    _STASH[:] = [*inputs, output]  # outside ctx: the next call overwrites it


def stashed_backward(ctx, grad):  # type: ignore[no-untyped-def]
    a, b, d = _STASH
    w = grad / d
    diff = a[:, None, :] - b[None, :, :]
    return (w[:, :, None] * diff).sum(1), -(w[:, :, None] * diff).sum(0)


def borrowing_setup(ctx, inputs, output):  # type: ignore[no-untyped-def]
    ctx.save_for_backward(*inputs)


def borrowing_backward(ctx, grad):  # type: ignore[no-untyped-def]
    a, b = ctx.saved_tensors
    with torch.enable_grad():
        a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()
        return torch.autograd.grad(torch.cdist(a2, b2), (a2, b2), grad)


def unweighted_backward(ctx, grad):  # type: ignore[no-untyped-def]
    a, b, d = ctx.saved_tensors
    diff = a[:, None, :] - b[None, :, :]
    return (diff / d[:, :, None]).sum(1), -(diff / d[:, :, None]).sum(0)


@pytest.mark.parametrize(("setup", "backward", "says"), [
    (cdist_setup_context, unweighted_backward, "a 3x2, b 4x2: gradcheck: GradcheckError: Jacobian mismatch"),
    (borrowing_setup, borrowing_backward, "your setup_context and backward ran aten."),
    (stashing_setup, stashed_backward, "a 3x2, b 4x2: the gradient of a in the operator's call 1 of 2, both made "
                                       "before one backward: values differ"),
])
def test_wrong_formulas_fail_saying_what_they_did(verdict, setup, backward, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("11-autograd", lambda c: n11.autograd_formula(c, setup, backward))
    assert message is not None and says in message, message


def test_a_backward_that_squeezes_fails_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    def squeezing_backward(ctx, grad):  # type: ignore[no-untyped-def]
        ga, gb = cdist_backward(ctx, grad)
        return ga.squeeze(), gb.squeeze()  # drops a dimension of size 1

    assert verdict("11-autograd", lambda c: n11.autograd_formula(c, cdist_setup_context, squeezing_backward)) is None
    message = verdict("11-autograd", lambda c: n11.autograd_formula(c, cdist_setup_context, squeezing_backward,
                                                                     hidden=HIDDEN["11-autograd"]))
    assert message.startswith("hidden case 1: gradcheck: RuntimeError"), message
    said = message.split("\nHint")[0]
    assert "1x3" not in said and "[3]" not in said and "shape" not in said, said


def test_a_hidden_shape_mismatch_is_said_without_the_shapes(verdict) -> None:  # type: ignore[no-untyped-def]
    def define_normalize_rows(name):  # type: ignore[no-untyped-def]
        @torch.library.custom_op(name, mutates_args=("x",))
        def normalize_rows_(x: Tensor) -> Tensor:
            norms = x.norm(dim=1)
            x.div_(norms[:, None])
            return norms if x.shape[0] > 1 else norms[0]  # a single row gives a 0-d tensor

        normalize_rows_.register_fake(rows_fake)
        return normalize_rows_

    assert verdict("11-opcheck", lambda c: n11.opcheck_exercise(c, define_normalize_rows)) is None
    message = verdict("11-opcheck", lambda c: n11.opcheck_exercise(c, define_normalize_rows,
                                                                    hidden=HIDDEN["11-opcheck"]))
    assert message.startswith("hidden case 1: the norms returned has the wrong shape"), message
    assert "[1]" not in message and "[]" not in message, message
