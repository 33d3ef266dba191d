"""Notebook 14's exercise checks, without a notebook: references pass visible and hidden cases; a Function that
switches autocast off and leaves it so, Python-float totals, and tensors that answer the check's questions with
code of their own fail saying why; a hidden case is named by its number only."""

from __future__ import annotations

import torch
import torch._dynamo  # loaded by the notebook's cells before its checks (autocast's first use loads it)

from torchlens_widgets.course.exercises import n14

HIDDEN_LSE = [(1, 1, 3, 4, 1.0, "float32"), (7, 2, 3, 5, 12.0, "bfloat16")]
HIDDEN_ACCUMULATE = [(1, (2, 2), 2, 1.0), (600, (5,), 3, 4.0)]
HIDDEN_BOUND = [("worst case", 1), ("random", 5, 3, 1000, 1), ("negated worst case", 129)]
HIDDEN_POLICY = [("float64", "float32", True), ("float16", "bfloat16", True), ("float32", "bfloat16", False)]


def _lse(forward_decorator=None, backward_decorator=None):  # type: ignore[no-untyped-def]
    def forward(ctx, q, k):  # type: ignore[no-untyped-def]
        scores = q @ k.T
        top = scores.amax(-1, keepdim=True)
        out = (scores - top).exp().sum(-1).log() + top.squeeze(-1)
        ctx.save_for_backward(q, k, scores, out)
        return out

    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        q, k, scores, out = ctx.saved_tensors
        weights = (scores - out[:, None]).exp() * grad[:, None]
        return weights @ k, weights.T @ q

    if forward_decorator is not None:
        forward = forward_decorator(forward)
    if backward_decorator is not None:
        backward = backward_decorator(backward)
    return type("ScoreLSE", (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                          "backward": staticmethod(backward)})


ScoreLSE = _lse(torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32),
                torch.amp.custom_bwd(device_type="cpu"))


def accumulate(chunks):  # type: ignore[no-untyped-def]
    total = torch.zeros(chunks[0].shape, dtype=torch.float32)
    for chunk in chunks:
        total += chunk
    return total


def linear_error_bound(x, w):  # type: ignore[no-untyped-def]
    u = 2.0 ** -8
    n = x.shape[-1]
    gamma = n * 2.0 ** -24 / (1 - n * 2.0 ** -24)
    return ((1 + u) ** 3 * (1 + gamma) - 1) * (x.abs() @ w.abs().T)


def give_policies(norm, project):  # type: ignore[no-untyped-def]
    torch.library.register_autocast(norm, "cpu", torch.float32)
    torch.library.register_autocast(project, "cpu", torch.bfloat16)


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("14-lse-autocast", lambda c: (n14.lse_autocast(c, ScoreLSE),
                                                 n14.lse_autocast(c, ScoreLSE, hidden=HIDDEN_LSE))) is None
    assert verdict("14-accumulate", lambda c: (n14.accumulate(c, accumulate),
                                               n14.accumulate(c, accumulate, hidden=HIDDEN_ACCUMULATE))) is None
    assert verdict("14-error-bound", lambda c: (
        n14.error_bound(c, linear_error_bound), n14.error_bound(c, linear_error_bound, hidden=HIDDEN_BOUND))) is None
    assert verdict("14-autocast-policy", lambda c: (
        n14.policies(c, give_policies), n14.policies(c, give_policies, hidden=HIDDEN_POLICY))) is None


def test_missing_decorators_fail_on_the_forward_then_the_backward(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("14-lse-autocast", lambda c: n14.lse_autocast(c, _lse()))
    assert message.startswith("float32 q (6 x 16), k (10 x 16), under autocast: your forward returned bfloat16")
    forward_only = _lse(torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32))
    message = verdict("14-lse-autocast", lambda c: n14.lse_autocast(c, forward_only))
    assert "inside autocast: your backward ran aten.mm" in message


def test_switching_autocast_off_inside_forward_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    def switches_off(forward):  # type: ignore[no-untyped-def]
        def inner(ctx, q, k):  # type: ignore[no-untyped-def]
            torch.set_autocast_enabled("cpu", False)
            return forward(ctx, q.float(), k.float())
        return inner

    message = verdict("14-lse-autocast", lambda c: n14.lse_autocast(c, _lse(switches_off)))
    assert "after ScoreLSE.apply returned, still inside the autocast block, autocast was off" in message
    assert not torch.is_autocast_enabled("cpu")


def test_a_wrong_hidden_case_is_numbered(verdict) -> None:  # type: ignore[no-untyped-def]
    def no_max(ctx, q, k):  # type: ignore[no-untyped-def]
        scores = q @ k.T
        out = scores.exp().sum(-1).log()
        ctx.save_for_backward(q, k, scores, out)
        return out

    overflowing = _lse(lambda f: torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)(no_max),
                       torch.amp.custom_bwd(device_type="cpu"))
    message = verdict("14-lse-autocast", lambda c: n14.lse_autocast(c, overflowing, hidden=HIDDEN_LSE[1:]))
    assert message.startswith("hidden case 1: values off by") and "bfloat16" not in message.split("\n")[0]


def test_item_into_python_floats_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    def python_total(chunks):  # type: ignore[no-untyped-def]
        flat = [c.flatten() for c in chunks]
        sums = [sum(f[i].item() for f in flat) for i in range(flat[0].numel())]
        return torch.tensor(sums, dtype=torch.float32).reshape(chunks[0].shape)

    message = verdict("14-accumulate", lambda c: n14.accumulate(c, python_total))
    assert "accumulate ran aten._local_scalar_dense" in message


def test_a_tensor_with_its_own_double_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    class Exact(torch.Tensor):
        def double(self):  # type: ignore[no-untyped-def]
            raise AssertionError("the check called the answer's own .double()")

    def bfloat16_total(chunks):  # type: ignore[no-untyped-def]
        total = torch.zeros_like(chunks[0])
        for chunk in chunks:
            total += chunk
        return total.float().as_subclass(Exact)

    message = verdict("14-accumulate", lambda c: n14.accumulate(c, bfloat16_total))
    assert "expected a plain torch.Tensor, got Exact (a subclass" in message

    def with_attribute(x, w):  # type: ignore[no-untyped-def]
        out = x.abs() @ w.abs().T
        out.double = lambda: 1 / 0
        return out

    message = verdict("14-error-bound", lambda c: n14.error_bound(c, with_attribute))
    assert "carries attributes of its own (double)" in message


def test_a_loose_hidden_bound_is_numbered(verdict) -> None:  # type: ignore[no-untyped-def]
    def whole_step(x, w):  # type: ignore[no-untyped-def]
        u = torch.finfo(torch.bfloat16).eps
        return ((1 + u) ** 3 - 1) * (x.abs() @ w.abs().T)

    message = verdict("14-error-bound", lambda c: n14.error_bound(c, whole_step, hidden=HIDDEN_BOUND))
    assert message.startswith("hidden case 1: your bound is") and "1000" not in message


def test_hidden_failures_do_not_give_the_case_s_shape_or_values_away(verdict) -> None:  # type: ignore[no-untyped-def]
    def bfloat16_total(chunks):  # type: ignore[no-untyped-def]
        return torch.stack(chunks).sum(0)

    message = verdict("14-accumulate", lambda c: n14.accumulate(c, bfloat16_total, hidden=HIDDEN_ACCUMULATE))
    assert message.startswith("hidden case 1: expected a float32 tensor of the chunks' shape, got bfloat16\n")

    def float16_unit(x, w):  # type: ignore[no-untyped-def]
        return ((1 + 2.0 ** -11) ** 3 - 1) * (x.abs() @ w.abs().T)

    message = verdict("14-error-bound", lambda c: n14.error_bound(c, float16_unit, hidden=HIDDEN_BOUND))
    assert message.startswith("hidden case 1: the real error is above your bound at 1 of 1 entries")


def test_policies_fail_on_no_rule_a_wrong_dtype_and_a_kernel_of_one_s_own(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("14-autocast-policy", lambda c: n14.policies(c, lambda norm, project: None))
    assert message.startswith("float32 inputs, under CPU autocast: project's kernel received x, w, rows in float32, "
                              "float32, int64; under autocast it should get bfloat16, bfloat16, int64")

    def norm_only(norm, project):  # type: ignore[no-untyped-def]
        torch.library.register_autocast(norm, "cpu", torch.float32)
        torch.library.register_autocast(project, "cpu", torch.float32)

    assert "project's kernel received x, w, rows in float32" in verdict(
        "14-autocast-policy", lambda c: n14.policies(c, norm_only))

    def own_kernel(norm, project):  # type: ignore[no-untyped-def]
        torch.library.register_kernel(norm, "cpu", lambda x: x.float().pow(2).sum(-1).sqrt())
        torch.library.register_autocast(project, "cpu", torch.bfloat16)

    assert "the operators' own kernels did not run (they ran: project)" in verdict(
        "14-autocast-policy", lambda c: n14.policies(c, own_kernel))


def test_a_wrong_hidden_policy_case_is_numbered_without_the_expected_dtypes(verdict) -> None:  # type: ignore[no-untyped-def]
    # a hand-written AutocastCPU kernel for norm that casts float64 down too (an autocast rule leaves float64 alone)
    lib_ops = []

    def hand_rule(norm, project):  # type: ignore[no-untyped-def]
        namespace, name = norm.split("::")
        op = getattr(getattr(torch.ops, namespace), name).default
        lib = torch.library.Library(namespace, "IMPL")
        lib_ops.append(lib)

        def cast_all(x):  # type: ignore[no-untyped-def]
            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)):
                return op(x.float())

        lib.impl(name, cast_all, "AutocastCPU")
        torch.library.register_autocast(project, "cpu", torch.bfloat16)

    message = verdict("14-autocast-policy", lambda c: n14.policies(c, hand_rule, hidden=HIDDEN_POLICY))
    assert message.startswith("hidden case 1: norm's kernel received x in float32\n") and "should get" not in message
