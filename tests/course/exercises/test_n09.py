"""Notebook 09's exercise checks, without a notebook: the reference kernels pass visible and hidden cases; kernels
that call ATen (past the dispatcher too, or only for inputs the check does not profile) fail naming the call, and a
hidden case is named by its number only. Each source compiles once per machine (the build cache keeps it)."""

from __future__ import annotations

import shutil

import pytest

from torchlens_widgets.course.exercises import n09

pytestmark = pytest.mark.skipif(shutil.which("c++") is None or shutil.which("ninja") is None,
                                reason="needs a C++ compiler and ninja")

RELU = r"""
at::Tensor relu_loop(const at::Tensor& x) {
  TORCH_CHECK_TYPE(x.scalar_type() == at::kFloat, "relu_loop: expected float32, got ", x.scalar_type());
  at::Tensor out = at::empty(x.sizes(), x.options());
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  const int64_t dims = x.dim(), n = x.numel();
  std::vector<int64_t> index(dims, 0);
  int64_t offset = 0;
  for (int64_t k = 0; k < n; ++k) {
    const float v = in[offset];
    o[k] = v < 0.f ? 0.f : v;
    for (int64_t d = dims - 1; d >= 0; --d) {
      if (++index[d] < x.size(d)) { offset += x.stride(d); break; }
      offset -= (x.size(d) - 1) * x.stride(d);
      index[d] = 0;
    }
  }
  return out;
}
"""
SCALE = r"""
at::Tensor scale(const at::Tensor& x, double a) {
  TORCH_CHECK_TYPE(x.scalar_type() == at::kFloat, "scale: expected a float32 tensor, got ", x.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(x.device().is_cpu(), "scale: expected a CPU tensor, got one on ", x.device());
  TORCH_CHECK_VALUE(x.is_contiguous(), "scale: expected a contiguous tensor (call .contiguous() first)");
  at::Tensor out = at::empty_like(x);
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = static_cast<float>(a) * in[i];
  return out;
}
"""
ROWMAX = r"""
#include <cmath>
#include <limits>

at::Tensor row_max(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.size(1) > 0,
              "row_max: expected a 2-D float32 tensor with at least one column");
  const int64_t rows = x.size(0), cols = x.size(1);
  at::Tensor out = at::empty({rows}, x.options());
  auto a = x.accessor<float, 2>();
  auto o = out.accessor<float, 1>();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < cols && !std::isnan(m); ++j) m = (std::isnan(a[i][j]) || a[i][j] > m) ? a[i][j] : m;
      o[i] = m;
    }
  });
  return out;
}
"""
PMAX = r"""
#include <cmath>
#include <limits>

at::Tensor all_max(const at::Tensor& x) {
  TORCH_CHECK_VALUE(x.numel() > 0, "all_max: an empty tensor has no maximum");
  TORCH_CHECK_TYPE(x.scalar_type() == at::kFloat, "all_max: expected float32");
  at::Tensor xc = x.contiguous();
  const float* p = xc.const_data_ptr<float>();
  auto bigger = [](float a, float b) { return (std::isnan(a) || a > b) ? a : b; };
  float m = at::parallel_reduce(0, xc.numel(), 4096, -std::numeric_limits<float>::infinity(),
      [&](int64_t begin, int64_t end, float ident) {
        float r = ident;
        for (int64_t i = begin; i < end; ++i) r = bigger(p[i], r);
        return r;
      },
      bigger);
  at::Tensor out = at::empty({}, x.options());
  *out.mutable_data_ptr<float>() = m;
  return out;
}
"""
HIDDEN = {
    "09-relu-loop": [n for n in n09.RELU_CASES if n not in n09.RELU_VISIBLE],
    "09-input-checks": [n for n in n09.SCALE_CASES if n not in n09.SCALE_VISIBLE],
    "09-row-max": [n for n in n09.ROWMAX_CASES if n not in n09.ROWMAX_VISIBLE],
    "09-parallel-max": [n for n in n09.PMAX_CASES if n not in n09.PMAX_VISIBLE],
}


def _both(grade: object, answer: str, hidden: list[str]) -> object:
    return lambda c: (grade(c, answer), grade(c, answer, hidden=hidden))  # type: ignore[operator]


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("09-relu-loop", _both(n09.relu_loop, RELU, HIDDEN["09-relu-loop"])) is None
    assert verdict("09-input-checks", _both(n09.input_checks, SCALE, HIDDEN["09-input-checks"])) is None
    assert verdict("09-row-max", _both(n09.row_max, ROWMAX, HIDDEN["09-row-max"])) is None
    assert verdict("09-parallel-max", _both(n09.parallel_max, PMAX, HIDDEN["09-parallel-max"])) is None


def test_an_aten_kernel_called_past_the_dispatcher_is_found_in_the_library(verdict) -> None:  # type: ignore[no-untyped-def]
    cheat = "#include <ATen/ops/clamp_min_cpu_dispatch.h>\n" + RELU.replace(
        "  at::Tensor out = at::empty(", "  return at::cpu::clamp_min(x, 0);\n  at::Tensor out = at::empty(")
    message = verdict("09-relu-loop", lambda c: n09.relu_loop(c, cheat))
    assert "relu_loop's compiled code calls at::cpu::clamp_min" in message and "past the dispatcher" in message


def test_aten_kept_for_the_inputs_the_recorder_does_not_try_is_found(verdict) -> None:  # type: ignore[no-untyped-def]
    # the loop for the 8x8 input the old check profiled, amax redispatched to its CPU kernel (no recorder sees it)
    gated = "#include <ATen/ops/amax_ops.h>\n" + ROWMAX.replace(
        "const int64_t rows", "if (x.size(0) != 8) return at::_ops::amax::redispatch(c10::DispatchKeySet("
        "c10::DispatchKey::CPU), x, {1}, false);\n  const int64_t rows")
    message = verdict("09-row-max", lambda c: n09.row_max(c, gated))
    assert "row_max's compiled code calls at::_ops::amax::redispatch" in message


def test_an_op_run_only_at_run_time_is_recorded_on_the_call_that_ran_it(verdict) -> None:  # type: ignore[no-untyped-def]
    copies = ROWMAX.replace("auto a = x.accessor<float, 2>();", "at::Tensor xc = x.contiguous();\n  auto a = xc.accessor<float, 2>();")
    message = verdict("09-row-max", lambda c: n09.row_max(c, copies))
    assert message.startswith("row_max(a transposed tensor) ran ") and "aten::contiguous" in message


def test_hidden_failures_are_numbered_without_their_content(verdict) -> None:  # type: ignore[no-untyped-def]
    # reads from the start of the storage: right for every input at offset 0, wrong for the hidden view at an offset
    offset = RELU.replace("const float* in = x.const_data_ptr<float>();",
                          "const float* in = static_cast<const float*>(x.storage().data());")
    assert verdict("09-relu-loop", lambda c: n09.relu_loop(c, offset)) is None
    message = verdict("09-relu-loop", lambda c: n09.relu_loop(c, offset, hidden=HIDDEN["09-relu-loop"]))
    assert message.startswith("relu_loop(hidden case 2)") and "offset" not in message.split("Hint")[0]

    # refuses 0-d tensors, with a message that names the input's shape
    no_scalars = SCALE.replace("  at::Tensor out", '  TORCH_CHECK(x.dim() > 0, "scale: got a 0-d tensor ", x.sizes());'
                               "\n  at::Tensor out")
    assert verdict("09-input-checks", lambda c: n09.input_checks(c, no_scalars)) is None
    message = verdict("09-input-checks", lambda c: n09.input_checks(c, no_scalars, hidden=HIDDEN["09-input-checks"]))
    assert message.startswith("hidden case 5 raised RuntimeError") and "0-d" not in message


def test_a_hidden_input_that_is_accepted_is_not_described(verdict) -> None:  # type: ignore[no-untyped-def]
    no_layout = SCALE.replace('  TORCH_CHECK_VALUE(x.is_contiguous(), "scale: expected a contiguous tensor (call '
                              '.contiguous() first)");\n', "")
    message = verdict("09-input-checks", lambda c: n09.input_checks(c, no_layout, hidden=["every other column"]))
    assert message.startswith("hidden case 1 was accepted") and "contiguous" not in message.split("Hint")[0]


def test_a_plain_torch_check_raises_the_wrong_python_exception(verdict) -> None:  # type: ignore[no-untyped-def]
    plain = SCALE.replace("TORCH_CHECK_TYPE(", "TORCH_CHECK(").replace("TORCH_CHECK_NOT_IMPLEMENTED(", "TORCH_CHECK(")
    message = verdict("09-input-checks", lambda c: n09.input_checks(c, plain))
    assert message.startswith("an int64 tensor: raised RuntimeError") and "should raise TypeError" in message
