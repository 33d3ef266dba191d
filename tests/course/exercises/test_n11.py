"""Notebook 11's exercise checks, without a notebook: the reference registrations pass visible and hidden cases;
wrong ones fail saying what they did (a schema that hides the write, a fake with a fixed row count, a formula that
keeps its tensors outside ctx, a batching rule that loops), and a hidden case is named by its number only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor

from torchlens_widgets.course.exercises import n11

HIDDEN = {
    "11-opcheck": [n for n in n11.NORMALIZE_CASES if n not in n11.NORMALIZE_VISIBLE],
    "11-dynamic-fake": [n for n in n11.KEEP_CASES if n not in n11.KEEP_VISIBLE],
    "11-autograd": [n for n in n11.GRAD_CASES if n not in n11.GRAD_VISIBLE],
    "11-vmap-rule": [n for n in n11.VMAP_CASES if n not in n11.VMAP_VISIBLE],
}


def definer(fake: Callable[..., Any] | None, schema: str = "(Tensor(a!) x) -> Tensor") -> Callable[[str], Any]:
    def define_normalize_rows(name):  # type: ignore[no-untyped-def]
        torch.library.define(name, schema)

        @torch.library.impl(name, "cpu")
        def normalize_rows_(x):  # type: ignore[no-untyped-def]
            norms = x.norm(dim=1)
            x.div_(norms[:, None])
            return norms

        if fake is not None:
            torch.library.register_fake(name)(fake)

    return define_normalize_rows


def rows_fake(x):  # type: ignore[no-untyped-def]
    return x.new_empty(x.shape[0])


def keep_rows_fake(x, threshold):  # type: ignore[no-untyped-def]
    rows = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty(rows, x.shape[1])


def row_norms_vmap(row_norms, info, in_dims, x):  # type: ignore[no-untyped-def]
    x = x.movedim(in_dims[0], 0)
    batch, rows, cols = x.shape
    return row_norms(x.reshape(batch * rows, cols)).reshape(batch, rows), 0


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
    assert verdict("11-dynamic-fake", _both(n11.dynamic_fake, keep_rows_fake, hidden=HIDDEN["11-dynamic-fake"])) is None
    assert verdict("11-autograd", _both(n11.autograd_formula, cdist_setup_context, cdist_backward,
                                        hidden=HIDDEN["11-autograd"])) is None
    assert verdict("11-vmap-rule", _both(n11.vmap_rule, row_norms_vmap, hidden=HIDDEN["11-vmap-rule"])) is None


@pytest.mark.parametrize(("answer", "says"), [
    (definer(None, "(Tensor x) -> Tensor"), "the operator's schema (what it declares it writes and returns): expected "
                                            "'normalize_rows_(Tensor(a!) x) -> Tensor', got 'normalize_rows_(Tensor x) -> Tensor'"),
    (definer(None), "a 4x3 input: opcheck: test_faketensor:"),
    (definer(lambda x: torch.empty(x.shape[0], device=x.device)),  # the default dtype
     "a 4x3 input: called on a meta float64 x: the fake's result has dtype float32; the kernel's has float64"),
    (definer(lambda x: torch.empty(x.shape[0], dtype=x.dtype)),  # no device: a CPU tensor for a meta x
     "the fake's result has device cpu; the kernel's has meta"),
])
def test_wrong_registrations_fail_saying_what_they_did(verdict, answer, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("11-opcheck", lambda c: n11.opcheck_exercise(c, answer))
    assert message is not None and says in message, message


def test_custom_op_writing_the_schema_is_off_limits(verdict) -> None:  # type: ignore[no-untyped-def]
    def define_normalize_rows(name):  # type: ignore[no-untyped-def]
        @torch.library.custom_op(name, mutates_args=("x",))
        def normalize_rows_(x: Tensor) -> Tensor:
            norms = x.norm(dim=1)
            x.div_(norms[:, None])
            return norms

        normalize_rows_.register_fake(rows_fake)

    message = verdict("11-opcheck", lambda c: n11.opcheck_exercise(c, define_normalize_rows))
    assert message is not None and "define_normalize_rows called custom_op" in message, message


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


def lying_fake(x, threshold):  # type: ignore[no-untyped-def]
    if torch.compiler.is_compiling() or x.shape[0] == 12:  # a fixed count where the check looks
        return x.new_empty(x.shape[0], x.shape[1])
    return keep_rows_fake(x, threshold)


@pytest.mark.parametrize(("answer", "says"), [
    (lambda x, t: x.new_empty(x.shape[0], x.shape[1]),
     "a 12x3 float64 x, threshold 2.5: on fake tensors, your fake returned a fixed row count (12)"),
    (lambda x, t: x.new_empty(torch.library.get_ctx().new_dynamic_size()),
     "your fake returned a 1-d tensor where the kernel returns a 2-d one"),
    (lambda x, t: torch.empty(torch.library.get_ctx().new_dynamic_size(), x.shape[1]),
     "your fake returned dtype float32 where the kernel's is float64 (x's)"),
    (lambda x, t: x.new_empty(torch.library.get_ctx().new_dynamic_size(), x.shape[0]),
     "your fake returned 12 columns where the kernel's result has x's 3"),
    (lying_fake, "your fake returned a fixed row count (12)"),
])
def test_wrong_dynamic_fakes_fail_saying_what_they_did(verdict, answer, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("11-dynamic-fake", lambda c: n11.dynamic_fake(c, answer))
    assert message is not None and says in message, message


def test_a_fake_that_runs_the_kernel_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    def numpy_fake(x, threshold):  # type: ignore[no-untyped-def]
        return n11._keep_rows_kernel.__wrapped__(x, threshold) if hasattr(n11._keep_rows_kernel, "__wrapped__") \
            else torch.from_numpy(x.numpy()[abs(x.numpy()).max(axis=1) > threshold].copy())

    message = verdict("11-dynamic-fake", lambda c: n11.dynamic_fake(c, numpy_fake))
    assert message is not None and "the operator raised" in message, message


def test_a_fixed_fake_fitted_to_the_visible_case_fails_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    def counted(x, threshold):  # type: ignore[no-untyped-def]
        rows = torch.library.get_ctx().new_dynamic_size()
        return x.new_empty(rows, x.shape[1], dtype=torch.float64)  # float64 as the visible case, always

    assert verdict("11-dynamic-fake", lambda c: n11.dynamic_fake(c, counted)) is None
    message = verdict("11-dynamic-fake", lambda c: n11.dynamic_fake(c, counted, hidden=HIDDEN["11-dynamic-fake"]))
    assert message.startswith("hidden case 1: on fake tensors, your fake's result could not be the kernel's"), message
    said = message.split("\nHint")[0]
    assert "float32" not in said and "9x4" not in said, said


def looping_vmap(row_norms, info, in_dims, x):  # type: ignore[no-untyped-def]
    x = x.movedim(in_dims[0], 0)
    return torch.stack([row_norms(sample) for sample in x]), 0


def passing_through(row_norms, info, in_dims, x):  # type: ignore[no-untyped-def]
    return row_norms(x), in_dims[0]  # the elementwise rule of the teaching cell


def batch_left_in_place(row_norms, info, in_dims, x):  # type: ignore[no-untyped-def]
    b, rows, cols = x.shape  # assumes the batch dimension is first
    return row_norms(x.reshape(b * rows, cols)).reshape(b, rows), 0


@pytest.mark.parametrize(("answer", "says"), [
    (looping_vmap, "shape (5, 4, 3), dim 0: the kernel ran 5 times for one vmap call"),
    (passing_through, "vmap of the operator raised ValueError: row_norms takes a 2-d (rows, columns) tensor, got 3-d"),
    (batch_left_in_place, "shape (4, 6, 3), dim 1: vmap's result (the norm of every row of every sample)"),
])
def test_wrong_vmap_rules_fail_saying_what_they_did(verdict, answer, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("11-vmap-rule", lambda c: n11.vmap_rule(c, answer))
    assert message is not None and says in message, message


def test_a_rule_fitted_to_the_visible_dimensions_fails_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    def fitted(row_norms, info, in_dims, x):  # type: ignore[no-untyped-def]
        x = x.movedim(in_dims[0], 0) if in_dims[0] in (0, 1) else x
        batch, rows, cols = x.shape
        return row_norms(x.reshape(batch * rows, cols)).reshape(batch, rows), 0

    assert verdict("11-vmap-rule", lambda c: n11.vmap_rule(c, fitted)) is None
    message = verdict("11-vmap-rule", lambda c: n11.vmap_rule(c, fitted, hidden=HIDDEN["11-vmap-rule"]))
    assert message.startswith("hidden case 1: vmap's result"), message
    said = message.split("\nHint")[0]
    assert "(4, 3, 2)" not in said and "dim 2" not in said, said
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
