"""Notebook 06's exercise checks, without a notebook: the reference Functions pass visible and hidden cases; wrong
ones fail saying what they did, and a hidden case is named by its number only."""

from __future__ import annotations

import pytest
import torch
from torch.autograd.function import once_differentiable

from torchlens_widgets.course.exercises import n06


class StableSoftplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(x)
        return torch.clamp(x, min=0) + torch.log1p(torch.exp(-torch.abs(x)))

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[no-untyped-def]
        (x,) = ctx.saved_tensors
        return grad_out * torch.sigmoid(x)


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[no-untyped-def]
        return grad_out


class SiLURecompute(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):  # type: ignore[no-untyped-def]
        return x * torch.sigmoid(x)

    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[no-untyped-def]
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_out * s * (1 + x * (1 - s))


HIDDEN = {
    "06-stable-softplus": [n for n in n06.SOFTPLUS_CASES if n not in n06.SOFTPLUS_VISIBLE],
    "06-straight-through": [n for n in n06.STE_CASES if n not in n06.STE_VISIBLE],
    "06-recompute-backward": [n for n in n06.SILU_CASES if n not in n06.SILU_VISIBLE],
}


def _both(grade: object, answer: object, hidden: list[str]) -> object:
    return lambda c: (grade(c, answer), grade(c, answer, hidden=hidden))  # type: ignore[operator]


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("06-stable-softplus", _both(n06.stable_softplus, StableSoftplus, HIDDEN["06-stable-softplus"])) is None
    assert verdict("06-straight-through", _both(n06.straight_through, RoundSTE, HIDDEN["06-straight-through"])) is None
    assert verdict("06-recompute-backward",
                   _both(n06.recompute_backward, SiLURecompute, HIDDEN["06-recompute-backward"])) is None


class LiteralSoftplus(StableSoftplus):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(x)
        return torch.log(1 + torch.exp(x))


class LibrarySoftplus(StableSoftplus):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)


class CancellingSoftplus(StableSoftplus):
    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[no-untyped-def]
        (x,) = ctx.saved_tensors
        return grad_out * (1 - 1 / (1 + torch.exp(torch.clamp(x, max=80))))


@pytest.mark.parametrize(("answer", "says"), [
    (LiteralSoftplus, "float32 [-1000 .. 1000]: the output has inf or nan: [0.0"),
    (LibrarySoftplus, "ran aten.softplus; this exercise allows only"),
    (CancellingSoftplus, "the gradient is off by a relative error of 1 (allowed: 1e-06), worst at x = -40.0; you computed [0.0, 0.0, 0.0"),
])
def test_wrong_softplus_fails_saying_what_it_did(verdict, answer, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("06-stable-softplus", lambda c: n06.stable_softplus(c, answer))
    assert message is not None and says in message, message


class FloatRound(RoundSTE):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        return torch.round(x).float()  # right for float32 only


class DetachTrick:
    @staticmethod
    def apply(x):  # type: ignore[no-untyped-def]
        return x + (torch.round(x) - x).detach()


class KeepsOnCtx(RoundSTE):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        ctx.stash = {"kept": [x]}
        return torch.round(x)


@pytest.mark.parametrize(("answer", "says"), [
    (DetachTrick, "halves and others: the output's grad_fn is AddBackward0, not your RoundSTEBackward node"),
    (KeepsOnCtx, "halves and others: the input x is still alive after the forward"),
])
def test_wrong_straight_through_fails_saying_what_it_did(verdict, answer, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("06-straight-through", lambda c: n06.straight_through(c, answer))
    assert message is not None and says in message, message


def test_a_float32_only_round_fails_a_numbered_hidden_case_without_its_content(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("06-straight-through", lambda c: n06.straight_through(c, FloatRound)) is None
    message = verdict("06-straight-through", lambda c: n06.straight_through(c, FloatRound,
                                                                             hidden=HIDDEN["06-straight-through"]))
    assert message.startswith("hidden case 2: dtype of RoundSTE.apply(x): got torch.float32, "
                              "which is not right"), message
    said = message.split("\nHint")[0]
    assert "float64" not in said and "halves" not in said


class SiLUOnce(SiLURecompute):
    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):  # type: ignore[no-untyped-def]
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_out * s * (1 + x * (1 - s))


class SiLUStash(SiLURecompute):
    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(inputs[0])
        ctx.stash = {"x": [inputs[0]]}

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[no-untyped-def]
        x = ctx.stash["x"][0]
        s = torch.sigmoid(x)
        return grad_out * s * (1 + x * (1 - s))


class SiLUSavesSigmoid(SiLURecompute):
    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(inputs[0], torch.sigmoid(inputs[0]))

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[no-untyped-def]
        x, s = ctx.saved_tensors
        return grad_out * s * (1 + x * (1 - s))


@pytest.mark.parametrize(("answer", "says"), [
    (SiLUSavesSigmoid, "an 8 x 16 float32 tensor: storages your Function saved for backward: expected 1, got 2"),
    (SiLUStash, "read x from somewhere other than ctx.saved_tensors"),
])
def test_wrong_recompute_fails_saying_what_it_did(verdict, answer, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("06-recompute-backward", lambda c: n06.recompute_backward(c, answer))
    assert message is not None and says in message, message


def test_a_once_differentiable_backward_fails_the_hidden_gradgradcheck_by_number(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("06-recompute-backward", lambda c: n06.recompute_backward(c, SiLUOnce)) is None
    message = verdict("06-recompute-backward", lambda c: n06.recompute_backward(
        c, SiLUOnce, hidden=HIDDEN["06-recompute-backward"]))
    assert message.startswith("hidden case 3: gradgradcheck failed"), message
    assert "2 x 3" not in message and "float64" not in message


def test_calling_the_checks_own_helper_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    class HelpedSoftplus(StableSoftplus):
        @staticmethod
        def backward(ctx, grad_out):  # type: ignore[no-untyped-def]
            (x,) = ctx.saved_tensors
            n06._draw(6, n06.SOFTPLUS_DRAWS, 0)
            return grad_out * torch.sigmoid(x)

    message = verdict("06-stable-softplus", lambda c: n06.stable_softplus(c, HelpedSoftplus))
    assert message is not None and "the check's own helpers" in message, message
