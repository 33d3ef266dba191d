"""Wrong answers for notebook 09 (C++ extensions): each is C++ that compiles (or a stub-like mistake) and
must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.exercises.test_n09 import PMAX, RELU
from tests.course.wrong_answers import Wrong


def _relu(body: str, prelude: str = "#include <vector>") -> str:
    return f'RELU_SOURCE = r"""\n{prelude}\nat::Tensor relu_loop(const at::Tensor& x) {{\n{body}\n}}\n"""\n'


def _scale(checks: str) -> str:
    return f'''SCALE_SOURCE = r"""
at::Tensor scale(const at::Tensor& x, double a) {{
{checks}
  at::Tensor out = at::empty_like(x);
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = static_cast<float>(a) * in[i];
  return out;
}}
"""
'''


def _rowmax(body: str, prelude: str = "#include <cmath>\n#include <limits>") -> str:
    return f'ROWMAX_SOURCE = r"""\n{prelude}\nat::Tensor row_max(const at::Tensor& x) {{\n{body}\n}}\n"""\n'


def _pmax(body: str, prelude: str = "#include <cmath>\n#include <limits>") -> str:
    return f'MAX_SOURCE = r"""\n{prelude}\nat::Tensor all_max(const at::Tensor& x) {{\n{body}\n}}\n"""\n'


# the reference's bodies, from the in-process tests: the odometer walk (reads element `index` of x at `offset`,
# writes out[k]) and the parallel_reduce maximum
_STRIDED = RELU.split("x.scalar_type());", 1)[1].rsplit("}", 1)[0].rstrip()
_PMAX = PMAX.split("all_max(const at::Tensor& x) {", 1)[1].rsplit("}", 1)[0].rstrip()

_RELU_LOOP = """
  at::Tensor out = at::empty_like(xc);
  const float* in = xc.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] < 0.f ? 0.f : in[i];
  return out;"""

_ALL_CHECKS = """  TORCH_CHECK_TYPE(x.scalar_type() == at::kFloat, "scale: expected float32");
  TORCH_CHECK_NOT_IMPLEMENTED(x.device().is_cpu(), "scale: expected a CPU tensor");
  TORCH_CHECK_VALUE(x.is_contiguous(), "scale: expected a contiguous tensor");"""

_ROWMAX_LOOP = """  const int64_t rows = x.size(0), cols = x.size(1);
  at::Tensor out = at::empty({rows}, x.options());
  auto a = x.accessor<float, 2>();
  auto o = out.accessor<float, 1>();
  for (int64_t i = 0; i < rows; ++i) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < cols; ++j) m = (std::isnan(a[i][j]) || a[i][j] > m) ? a[i][j] : m;
    o[i] = m;
  }
  return out;"""

WRONG = {
    "09-relu-loop": [
        # last section's habit: a contiguous copy first (recorded on the call with a transposed input)
        Wrong("copies with contiguous() first", _relu("  at::Tensor xc = x.contiguous();" + _RELU_LOOP),
              "ran aten::clone, aten::contiguous"),
        Wrong("strides ignored: reads memory in stored order", _relu("  const at::Tensor& xc = x;" + _RELU_LOOP.replace(
            "at::empty_like(xc)", "at::empty(xc.sizes(), xc.options())")), "relu_loop(a transposed tensor)"),
        Wrong("drops NaN: v > 0 ? v : 0", _relu(_STRIDED.replace("o[k] = v < 0.f ? 0.f : v;", "o[k] = v > 0.f ? v : 0.f;")),
              "relu_loop(a 1-D tensor with NaN in it)"),
        Wrong("calls at::relu", _relu("  return at::relu(x);", "#include <ATen/ops/relu.h>"), "aten::relu", gaming=True),
        # ATen's CPU kernel called directly: no dispatcher, so no profiler event; the library's symbols show it
        Wrong("calls at::cpu::clamp_min, past the dispatcher", _relu("  return at::cpu::clamp_min(x, 0);",
              "#include <ATen/ops/clamp_min_cpu_dispatch.h>"), "relu_loop's compiled code calls at::cpu::clamp_min",
              gaming=True),
    ],
    "09-input-checks": [
        Wrong("no checks", _scale(""), "an int64 tensor: raised RuntimeError"),
        Wrong("plain TORCH_CHECKs: RuntimeError for every rule", _scale(_ALL_CHECKS.replace(
            "TORCH_CHECK_TYPE(", "TORCH_CHECK(").replace("TORCH_CHECK_NOT_IMPLEMENTED(", "TORCH_CHECK(").replace(
            "TORCH_CHECK_VALUE(", "TORCH_CHECK(")), "should raise TypeError"),
        Wrong("messages that do not say what was expected", _scale(_ALL_CHECKS.replace(
            "expected float32", "bad input").replace("expected a CPU tensor", "bad input").replace(
            "expected a contiguous tensor", "bad input")), "does not say"),
        Wrong("fitted to the visible inputs: one TypeError for every 1-D tensor", _scale(
            '  TORCH_CHECK_TYPE(x.dim() == 2 && x.scalar_type() == at::kFloat && x.device().is_cpu() && '
            'x.is_contiguous(), "scale: expected float32 on the CPU, contiguous");'), "its first call raised TypeError",
            gaming=True),
    ],
    "09-row-max": [
        Wrong("calls amax", _rowmax("  return x.amax(1);", "#include <ATen/ops/amax.h>"), "aten::amax", gaming=True),
        Wrong("data_ptr loop: strides ignored", _rowmax("""  const int64_t rows = x.size(0), cols = x.size(1);
  at::Tensor out = at::empty({rows}, x.options());
  const float* p = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < rows; ++i) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < cols; ++j) m = (std::isnan(p[i * cols + j]) || p[i * cols + j] > m) ? p[i * cols + j] : m;
    o[i] = m;
  }
  return out;"""), "row_max(a transposed tensor)"),
        Wrong("drops NaN: a plain a[i][j] > m", _rowmax(_ROWMAX_LOOP.replace("(std::isnan(a[i][j]) || a[i][j] > m)",
                                                                             "a[i][j] > m")),
              "row_max(rows with a NaN in them)"),
        # the loop only for the 8x8 input the old check profiled, amax for every other input
        Wrong("loops only for the input the recorder profiles", _rowmax(
            "  if (x.size(0) != 8 || x.size(1) != 8) return x.amax(1);\n" + _ROWMAX_LOOP,
            "#include <cmath>\n#include <limits>\n#include <ATen/ops/amax.h>"),
            "row_max's compiled code calls aten::amax", gaming=True),
    ],
    "09-parallel-max": [
        Wrong("a serial loop, no parallel_reduce", _pmax("""  TORCH_CHECK_VALUE(x.numel() > 0, "all_max: empty");
  at::Tensor xc = x.contiguous();
  const float* p = xc.const_data_ptr<float>();
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < xc.numel(); ++i) m = (std::isnan(p[i]) || p[i] > m) ? p[i] : m;
  at::Tensor out = at::empty({}, x.options());
  *out.mutable_data_ptr<float>() = m;
  return out;"""), "never starts a parallel region"),
        Wrong("identity 0", _pmax(_PMAX.replace("-std::numeric_limits<float>::infinity(),", "0.f,")),
              "all_max(200,000 negative values)"),
        Wrong("combine drops NaN: a > b ? a : b", _pmax(_PMAX.replace(
            "      bigger);", "      [](float a, float b) { return a > b ? a : b; });")), "all_max(a NaN in the first piece)"),
        # a parallel region for show, the answer from ATen: amax is in the library's symbols
        Wrong("a parallel region for show, amax for the answer", _pmax(_PMAX.replace(
            "  return out;", "  return m == m ? x.amax() : out;"), "#include <cmath>\n#include <limits>\n"
            "#include <ATen/ops/amax.h>"), "all_max's compiled code calls aten::amax", gaming=True),
    ],
}
