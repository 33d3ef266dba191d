"""Notebook 20's exercise checks, without a notebook: the references pass visible and hidden cases; wrong answers
fail saying why, a hidden case is named by its number only, and the holes of issues 21 and 23 stay shut (a dict
subclass answer, a kernel that calls ATen or copies its strided input, a fake laid out as u, a closure instead of
ctx, a program shown only to Dynamo, a divide-by-two world, a step that remembers its inputs). One C++ build (the
reference source, cached) serves the operator's tests; two more sources are built once each."""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from torchlens_widgets.course.exercises import n20
from torchlens_widgets.lenses import capstone

READ_PROFILE = {"longest forward range": "activation", "operator with the most self time": "aten::mul",
                "calls of aten::mul": 12, "backward nodes": 20}

GELU_GATE_SOURCE = r"""
#include <cmath>
#include <vector>

template <typename T>
static void gelu_gate_loop(const at::Tensor& u, const at::Tensor& v, at::Tensor& out) {
  const T* pu = u.const_data_ptr<T>();
  const T* pv = v.const_data_ptr<T>();
  T* po = out.mutable_data_ptr<T>();
  const int64_t n = u.numel(), dims = u.dim();
  const T half = T(0.5), one = T(1), rsqrt2 = T(0.7071067811865476);
  if (u.is_contiguous() && v.is_contiguous()) {
    for (int64_t k = 0; k < n; ++k) po[k] = half * pu[k] * (one + std::erf(pu[k] * rsqrt2)) * pv[k];
    return;
  }
  std::vector<int64_t> index(dims, 0);
  int64_t iu = 0, iv = 0;
  for (int64_t k = 0; k < n; ++k) {
    po[k] = half * pu[iu] * (one + std::erf(pu[iu] * rsqrt2)) * pv[iv];
    for (int64_t d = dims - 1; d >= 0; --d) {
      if (++index[d] < u.size(d)) { iu += u.stride(d); iv += v.stride(d); break; }
      iu -= (u.size(d) - 1) * u.stride(d);
      iv -= (v.size(d) - 1) * v.stride(d);
      index[d] = 0;
    }
  }
}

at::Tensor gelu_gate(const at::Tensor& u, const at::Tensor& v) {
  TORCH_CHECK(u.sizes() == v.sizes(), "gelu_gate: u and v must have the same shape");
  TORCH_CHECK(u.scalar_type() == v.scalar_type(), "gelu_gate: u and v must have the same dtype");
  TORCH_CHECK(u.device().is_cpu() && v.device().is_cpu(), "gelu_gate: expected CPU tensors");
  at::Tensor out = at::empty(u.sizes(), u.options());
  if (u.scalar_type() == at::kFloat) gelu_gate_loop<float>(u, v, out);
  else if (u.scalar_type() == at::kDouble) gelu_gate_loop<double>(u, v, out);
  else TORCH_CHECK_TYPE(false, "gelu_gate: expected float32 or float64, got ", u.scalar_type());
  return out;
}
"""


def define_fused_op(name, kernel, fake_like_u=False, keep_gelu=False):  # type: ignore[no-untyped-def]
    @torch.library.custom_op(name, mutates_args=())
    def gelu_gate(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return kernel(u, v)

    @gelu_gate.register_fake
    def _(u, v):  # type: ignore[no-untyped-def]
        torch._check(u.shape == v.shape, lambda: "gelu_gate: u and v must have the same shape")
        return torch.empty_like(u) if fake_like_u else u.new_empty(u.shape)

    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(*inputs)
        if keep_gelu:
            ctx.gelu = F.gelu(inputs[0])

    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        u, v = ctx.saved_tensors
        return torch.ops.aten.gelu_backward(grad * v, u), F.gelu(u).mul_(grad)

    gelu_gate.register_autograd(backward, setup_context=setup_context)
    return gelu_gate


def checked_loss(model, x, y):  # type: ignore[no-untyped-def]
    u, v = model.gate(x), model.up(x)
    g = capstone.gelu_gate(u, v)
    return F.mse_loss(x + model.down(g), y), torch.isfinite(g).all()


def average_gradients(model, all_reduce, world_size):  # type: ignore[no-untyped-def]
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.flatten() for g in grads])
    all_reduce(flat)
    flat /= world_size
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def make_fast_step(model):  # type: ignore[no-untyped-def]
    compiled = torch.compile(checked_loss)

    def step(x, y):  # type: ignore[no-untyped-def]
        model.zero_grad(set_to_none=True)
        loss, _ = compiled(model, x, y)
        loss.backward()
        return loss

    return step


HIDDEN_OP_CASES = [("sliced", 3, (4, 9), "float32"), ("contiguous", 4, (2, 3, 4), "float64"),
                   ("contiguous", 5, (0, 4), "float32"), ("transposed", 6, (3, 8), "float64"),
                   ("mixed", 7, (5, 7), "float32"), (64, 300)]
HIDDEN_BREAK_CASES = [(5, 12, 1, 1, False), (3, 7, 9, 2, True)]


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
    assert verdict("20-fused-op", lambda c: (n20.fused_op(c, GELU_GATE_SOURCE, define_fused_op),
                                             n20.fused_op(c, GELU_GATE_SOURCE, define_fused_op,
                                                          hidden=HIDDEN_OP_CASES))) is None


def test_a_fake_laid_out_as_u_fails_opcheck_on_the_transposed_case(verdict) -> None:  # type: ignore[no-untyped-def]
    def like_u(name, kernel):  # type: ignore[no-untyped-def]
        return define_fused_op(name, kernel, fake_like_u=True)

    message = verdict("20-fused-op", lambda c: n20.fused_op(c, GELU_GATE_SOURCE, like_u))
    assert message.startswith("opcheck on transposed (6, 5) float32 inputs: test_faketensor"), message
    message = verdict("20-fused-op", lambda c: n20.fused_op(c, GELU_GATE_SOURCE, like_u, hidden=HIDDEN_OP_CASES))
    assert message.startswith("opcheck on hidden case 4:"), message


def test_what_ctx_keeps_counts_and_a_closure_is_not_ctx(verdict) -> None:  # type: ignore[no-untyped-def]
    def keeps_gelu(name, kernel):  # type: ignore[no-untyped-def]
        return define_fused_op(name, kernel, keep_gelu=True)

    message = verdict("20-fused-op", lambda c: n20.fused_op(c, GELU_GATE_SOURCE, keeps_gelu))
    assert "bytes more as attributes of ctx; the budget is the two inputs" in message, message

    def closure(name, kernel):  # type: ignore[no-untyped-def]
        kept = {}

        @torch.library.custom_op(name, mutates_args=())
        def gelu_gate(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return kernel(u, v)

        gelu_gate.register_fake(lambda u, v: u.new_empty(u.shape))

        def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
            kept["u"], kept["v"] = inputs

        def backward(ctx, grad):  # type: ignore[no-untyped-def]
            return torch.ops.aten.gelu_backward(grad * kept["v"], kept["u"]), F.gelu(kept["u"]).mul_(grad)

        gelu_gate.register_autograd(backward, setup_context=setup_context)
        return gelu_gate

    message = verdict("20-fused-op", lambda c: n20.fused_op(c, GELU_GATE_SOURCE, closure))
    assert "backward run after a second call, (u) has the wrong" in message, message


def test_the_two_pass_python_kernel_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    def two_pass(name, kernel):  # type: ignore[no-untyped-def]
        return define_fused_op(name, lambda u, v: F.gelu(u).mul_(v))

    message = verdict("20-fused-op", lambda c: n20.fused_op(c, GELU_GATE_SOURCE, two_pass))
    assert message.startswith("your operator never called the kernel built from GELU_GATE_SOURCE on contiguous"), \
        message


def test_a_kernel_that_copies_strided_input_is_refused_by_the_profiler(verdict) -> None:  # type: ignore[no-untyped-def]
    copies = GELU_GATE_SOURCE.replace("at::Tensor out = at::empty(u.sizes(), u.options());",
                                      "at::Tensor out = at::empty(u.sizes(), u.options());\n"
                                      "  if (!u.is_contiguous()) return gelu_gate(u.contiguous(), v.contiguous());")
    message = verdict("20-fused-op", lambda c: n20.fused_op(c, copies, define_fused_op))
    assert message.startswith("your operator ran aten::clone, aten::contiguous, aten::copy_ on transposed"), message


def test_a_guarded_loss_breaks_and_the_flagged_one_does_not(verdict) -> None:  # type: ignore[no-untyped-def]
    def guarded(model, x, y):  # type: ignore[no-untyped-def]
        g = capstone.gelu_gate(model.gate(x), model.up(x))
        if not torch.isfinite(g).all():
            raise FloatingPointError("the activation overflowed")
        return F.mse_loss(x + model.down(g), y), torch.isfinite(g).all()

    def two_faced(model, x, y):  # type: ignore[no-untyped-def]
        if torch.compiler.is_compiling():
            return checked_loss(model, x, 2 * y)
        return checked_loss(model, x, y)

    assert verdict("20-no-break", lambda c: (n20.no_break(c, checked_loss),
                                             n20.no_break(c, checked_loss, hidden=HIDDEN_BREAK_CASES))) is None
    message = verdict("20-no-break", lambda c: n20.no_break(c, guarded))
    assert message.startswith("(graphs, graph breaks) of checked_loss (a 16 -> 64 -> 16 block on 32 rows)"), message
    message = verdict("20-no-break", lambda c: n20.no_break(c, two_faced))
    assert message.startswith("the loss of compiled checked_loss (a 16 -> 64 -> 16 block on 32 rows)"), message


def test_data_parallel_on_two_and_three_ranks(verdict, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import importlib
    import inspect

    hidden = [((5, 12), 3, 3, 3)]
    (tmp_path / "halves.py").write_text("import torch\n\n\n" + inspect.getsource(average_gradients).replace(
        "/= world_size", "/= 2"))
    monkeypatch.syspath_prepend(str(tmp_path))
    halves = importlib.import_module("halves").average_gradients
    assert verdict("20-data-parallel", lambda c: (n20.data_parallel(c, average_gradients),
                                                  n20.data_parallel(c, average_gradients, hidden=hidden))) is None
    message = verdict("20-data-parallel", lambda c: n20.data_parallel(c, halves, hidden=hidden))
    assert message.startswith("hidden case 1: gradients differ from DDP's; yours are 1.500 times"), message


def test_the_end_to_end_step_and_a_step_that_remembers_its_inputs(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("20-end-to-end", lambda c: (n20.end_to_end(c, make_fast_step),
                                               n20.end_to_end(c, make_fast_step, hidden=[3, 5]))) is None

    def remembers(model):  # type: ignore[no-untyped-def]
        region = torch.compile(lambda t: t + 0)
        seen: dict = {}

        def step(x, y):  # type: ignore[no-untyped-def]
            if seen.get("x") is x:   # the same batch again: the answer of last time
                return seen["loss"]
            time.sleep(0.05)   # a slow step, fast only where it can skip the work
            model.zero_grad(set_to_none=True)
            loss = region(checked_loss(model, x, y)[0])
            loss.backward()
            seen.update(x=x, loss=loss)
            return loss

        return step

    message = verdict("20-end-to-end", lambda c: n20.end_to_end(c, remembers))
    assert "as fast as the original; the target is 1.6x" in message, message


def test_a_step_that_keeps_its_gradients_fails_on_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    def keeps(model):  # type: ignore[no-untyped-def]
        compiled = torch.compile(checked_loss)

        def step(x, y):  # type: ignore[no-untyped-def]
            loss, _ = compiled(model, x, y)
            loss.backward()
            return loss

        return step

    message = verdict("20-end-to-end", lambda c: n20.end_to_end(c, keeps, hidden=[3, 5]))
    assert message.startswith("hidden case 2: the gradient of gate.weight"), message
