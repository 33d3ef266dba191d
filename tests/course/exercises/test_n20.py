"""Notebook 20's exercise checks, without a notebook: the references pass visible and hidden cases; wrong answers
fail saying why, a hidden case is named by its number only, and the holes of issue 21 stay shut (a dict subclass
answer, Python-number kernels, a fake in the default dtype, a program shown only to Dynamo, a divide-by-two world,
a step that remembers its inputs)."""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from torchlens_widgets.course.exercises import n20

READ_PROFILE = {"longest forward range": "activation", "operator with the most self time": "aten::mul",
                "calls of aten::mul": 12, "backward nodes": 20}


def define_fused_op(name, fake_dtype=None, kernel=None, contiguous_fake=False):  # type: ignore[no-untyped-def]
    @torch.library.custom_op(name, mutates_args=())
    def gelu_gate(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if kernel is not None:
            return kernel(u, v)
        return F.gelu(u).mul_(v)

    @gelu_gate.register_fake
    def _(u, v):  # type: ignore[no-untyped-def]
        if contiguous_fake:
            return torch.empty(u.shape, dtype=u.dtype)
        return torch.empty_like(u, dtype=fake_dtype)

    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        u, v = ctx.saved_tensors
        return torch.ops.aten.gelu_backward(grad * v, u), F.gelu(u).mul_(grad)

    gelu_gate.register_autograd(backward, setup_context=setup_context)
    return gelu_gate


def fused_loss(model, op, x, y):  # type: ignore[no-untyped-def]
    u, v = model.gate(x), model.up(x)
    return F.mse_loss(x + model.down(op(u, v)), y)


def average_gradients(model, all_reduce, world_size):  # type: ignore[no-untyped-def]
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.flatten() for g in grads])
    all_reduce(flat)
    flat /= world_size
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def make_fast_step(model, op):  # type: ignore[no-untyped-def]
    compiled = torch.compile(fused_loss)

    def step(x, y):  # type: ignore[no-untyped-def]
        model.zero_grad(set_to_none=True)
        loss = compiled(model, op, x, y)
        loss.backward()
        return loss

    return step


HIDDEN_OP_CASES = [("sliced", 3, (4, 9), "float32"), ("contiguous", 4, (2, 3, 4), "float64"),
                   ("contiguous", 5, (0, 4), "float32"), ("transposed", 6, (3, 8), "float64"), (64, 300)]


def test_reading_the_profile(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("20-hot-spot", lambda c: (n20.hot_spot(c, dict(READ_PROFILE)),
                                             n20.hot_spot(c, dict(READ_PROFILE), hidden=[(32, 2048, 512)]))) is None
    wrong = {**READ_PROFILE, "backward nodes": 14}
    message = verdict("20-hot-spot", lambda c: n20.hot_spot(c, wrong))
    assert message.startswith("READ_PROFILE['backward nodes']: got 14, which is not right"), message


def test_a_dict_subclass_that_reads_the_checks_frame_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    import sys

    class Peek(dict):  # type: ignore[type-arg]
        def __getitem__(self, key):  # type: ignore[no-untyped-def]
            frame = sys._getframe(1)
            return frame.f_locals.get("_value", frame.f_locals.get("truth", {}).get(key))

    message = verdict("20-hot-spot", lambda c: n20.hot_spot(c, Peek(READ_PROFILE)))
    assert "READ_PROFILE should be the dict above, filled in (a plain dict), got Peek" in message


def test_the_reference_operator_passes_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("20-fused-op", lambda c: (n20.fused_op(c, define_fused_op),
                                             n20.fused_op(c, define_fused_op, hidden=HIDDEN_OP_CASES))) is None


def test_a_fake_in_the_default_dtype_fails_on_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    def float32_fake(name):  # type: ignore[no-untyped-def]
        return define_fused_op(name, fake_dtype=torch.float32)

    assert verdict("20-fused-op", lambda c: n20.fused_op(c, float32_fake)) is None
    message = verdict("20-fused-op", lambda c: n20.fused_op(c, float32_fake, hidden=HIDDEN_OP_CASES))
    assert message.startswith("opcheck on hidden case 2:"), message
    assert "float64" not in message.split("\nHint")[0].split(":")[0]


def test_what_ctx_keeps_counts_and_a_closure_is_not_ctx(verdict) -> None:  # type: ignore[no-untyped-def]
    def keeps_gelu(name):  # type: ignore[no-untyped-def]
        @torch.library.custom_op(name, mutates_args=())
        def gelu_gate(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return F.gelu(u).mul_(v)

        gelu_gate.register_fake(lambda u, v: torch.empty_like(u))

        def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
            ctx.save_for_backward(*inputs)
            ctx.gelu = F.gelu(inputs[0])

        def backward(ctx, grad):  # type: ignore[no-untyped-def]
            u, v = ctx.saved_tensors
            return torch.ops.aten.gelu_backward(grad * v, u), ctx.gelu * grad

        gelu_gate.register_autograd(backward, setup_context=setup_context)
        return gelu_gate

    message = verdict("20-fused-op", lambda c: n20.fused_op(c, keeps_gelu))
    assert "bytes more as attributes of ctx; the budget is the two inputs" in message, message

    def closure(name):  # type: ignore[no-untyped-def]
        kept = {}

        @torch.library.custom_op(name, mutates_args=())
        def gelu_gate(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return F.gelu(u).mul_(v)

        gelu_gate.register_fake(lambda u, v: torch.empty_like(u))

        def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
            kept["u"], kept["v"] = inputs

        def backward(ctx, grad):  # type: ignore[no-untyped-def]
            return torch.ops.aten.gelu_backward(grad * kept["v"], kept["u"]), F.gelu(kept["u"]).mul_(grad)

        gelu_gate.register_autograd(backward, setup_context=setup_context)
        return gelu_gate

    message = verdict("20-fused-op", lambda c: n20.fused_op(c, closure))
    assert "backward run after a second call, (u) has the wrong" in message, message


def test_a_loss_shown_to_dynamo_only_is_compared_compiled(verdict) -> None:  # type: ignore[no-untyped-def]
    def two_faced(model, op, x, y):  # type: ignore[no-untyped-def]
        if torch.compiler.is_compiling():
            return F.mse_loss(model.down(op(model.gate(x), model.up(x))), y)
        return F.mse_loss(model(x), y)

    assert verdict("20-no-break", lambda c: n20.no_break(c, fused_loss, define_fused_op)) is None
    message = verdict("20-no-break", lambda c: n20.no_break(c, two_faced, define_fused_op))
    assert message.startswith("compiled fused_loss (a 16 -> 64 -> 16 block on 32 rows)"), message
    message = verdict("20-no-break", lambda c: n20.no_break(c, fused_loss, None))
    assert "define_fused_op (stage 2) should be a function" in message


def test_data_parallel_on_two_and_three_ranks(verdict, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import importlib
    import inspect

    hidden = [((5, 12), 3, 3, 3)]
    (tmp_path / "halves.py").write_text("import torch\n\n\n" + inspect.getsource(average_gradients).replace(
        "/= world_size", "/= 2"))
    monkeypatch.syspath_prepend(str(tmp_path))
    halves = importlib.import_module("halves").average_gradients
    assert verdict("20-data-parallel", lambda c: (n20.data_parallel(c, average_gradients, define_fused_op),
                                                  n20.data_parallel(c, average_gradients, define_fused_op,
                                                                    hidden=hidden))) is None
    message = verdict("20-data-parallel", lambda c: n20.data_parallel(c, halves, define_fused_op, hidden=hidden))
    assert message.startswith("hidden case 1: gradients differ from DDP's; yours are 1.500 times"), message


def test_the_end_to_end_step_and_a_step_that_remembers_its_inputs(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("20-end-to-end", lambda c: (n20.end_to_end(c, make_fast_step, define_fused_op),
                                               n20.end_to_end(c, make_fast_step, define_fused_op, hidden=[3, 5]))) is None

    def remembers(model, op):  # type: ignore[no-untyped-def]
        region = torch.compile(lambda t: t + 0)
        seen: dict = {}

        def step(x, y):  # type: ignore[no-untyped-def]
            if seen.get("x") is x:   # the same batch again: the answer of last time
                return seen["loss"]
            time.sleep(0.05)   # a slow step, fast only where it can skip the work
            model.zero_grad(set_to_none=True)
            loss = region(fused_loss(model, op, x, y))
            loss.backward()
            seen.update(x=x, loss=loss)
            return loss

        return step

    message = verdict("20-end-to-end", lambda c: n20.end_to_end(c, remembers, define_fused_op))
    assert "as fast as the original; the target is 1.25x" in message, message


def test_a_step_that_keeps_its_gradients_fails_on_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    def keeps(model, op):  # type: ignore[no-untyped-def]
        compiled = torch.compile(fused_loss)

        def step(x, y):  # type: ignore[no-untyped-def]
            loss = compiled(model, op, x, y)
            loss.backward()
            return loss

        return step

    message = verdict("20-end-to-end", lambda c: n20.end_to_end(c, keeps, define_fused_op, hidden=[3, 5]))
    assert message.startswith("hidden case 2: the gradient of gate.weight"), message
