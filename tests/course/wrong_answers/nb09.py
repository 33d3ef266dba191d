"""Wrong answers for notebook 09 (C++ extensions): each is C++ that compiles (or a stub-like mistake) and
must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong


def _relu(body: str, prelude: str = "") -> str:
    return f'RELU_SOURCE = r"""\n{prelude}\nat::Tensor relu_loop(const at::Tensor& x) {{\n{body}\n}}\n"""\n'


def _scale(checks: str) -> str:
    return f'''SCALE_SOURCE = r"""
at::Tensor scale(const at::Tensor& x, double a) {{
{checks}
  at::Tensor out = at::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = static_cast<float>(a) * in[i];
  return out;
}}
"""
'''


def _rowmax(body: str, prelude: str = "#include <limits>") -> str:
    return f'ROWMAX_SOURCE = r"""\n{prelude}\nat::Tensor row_max(const at::Tensor& x) {{\n{body}\n}}\n"""\n'


_RELU_LOOP = """
  at::Tensor out = at::empty_like(xc);
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
  return out;"""

_ALL_CHECKS = """  TORCH_CHECK(x.scalar_type() == at::kFloat, "scale: expected float32");
  TORCH_CHECK(x.device().is_cpu(), "scale: expected a CPU tensor");
  TORCH_CHECK(x.is_contiguous(), "scale: expected a contiguous tensor");"""

_ROWMAX_LOOP = """  const int64_t rows = x.size(0), cols = x.size(1);
  at::Tensor out = at::empty({rows}, x.options());
  auto a = x.accessor<float, 2>();
  auto o = out.accessor<float, 1>();
  for (int64_t i = 0; i < rows; ++i) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < cols; ++j) m = a[i][j] > m ? a[i][j] : m;
    o[i] = m;
  }
  return out;"""

WRONG = {
    "09-relu-loop": [
        # a transposed input still works by luck: empty_like keeps its (dense) strides, so memory order matches
        Wrong("strides ignored: data_ptr without contiguous()", _relu("  const at::Tensor& xc = x;" + _RELU_LOOP),
              "relu_loop(every other column)"),
        Wrong("writes into the input", _relu("""
  float* p = x.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = p[i] > 0.f ? p[i] : 0.f;
  return x;"""), "must stay unchanged"),
        Wrong("calls at::relu", _relu("  return at::relu(x);", "#include <ATen/ops/relu.h>"), "aten::relu", gaming=True),
        Wrong("reads one element even from an empty input", _relu("  at::Tensor xc = x.contiguous();" + _RELU_LOOP.replace(
            "i < xc.numel()", "i < 1")), "crashed the build process on its first call"),
        # ATen's CPU kernel called directly: no dispatcher, so no profiler event; the library's symbols show it
        Wrong("calls at::cpu::clamp_min, past the dispatcher", _relu("  return at::cpu::clamp_min(x.contiguous(), 0);",
              "#include <ATen/ops/clamp_min_cpu_dispatch.h>"), "relu_loop's compiled code calls at::cpu::clamp_min",
              gaming=True),
        # right for every input at storage offset 0 (all visible ones, and every .contiguous() copy)
        Wrong("reads from the start of the storage, not at the tensor's offset", _relu(
            "  at::Tensor xc = x.contiguous();" + _RELU_LOOP.replace(
                "xc.data_ptr<float>()", "static_cast<const float*>(xc.storage().data())")), "relu_loop(hidden case 2)"),
    ],
    "09-input-checks": [
        Wrong("no checks", _scale(""), "an int64 tensor"),
        Wrong("dtype only", _scale('  TORCH_CHECK(x.scalar_type() == at::kFloat, "scale: expected float32");'),
              "a meta tensor"),
        Wrong("messages that do not say what was expected", _scale(_ALL_CHECKS.replace(
            "expected float32", "bad input").replace("expected a CPU tensor", "bad input").replace(
            "expected a contiguous tensor", "bad input")), "does not say"),
        Wrong("fitted to the visible inputs: refuses every 1-D tensor", _scale(
            '  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.device().is_cpu() && x.is_contiguous(), '
            '"scale: expected float32 on the CPU, contiguous");'), "expected float32 on the CPU, contiguous", gaming=True),
    ],
    "09-row-max": [
        Wrong("calls amax", _rowmax("  return x.amax(1);", "#include <ATen/ops/amax.h>"), "aten::amax", gaming=True),
        Wrong("data_ptr loop: strides ignored", _rowmax("""  const int64_t rows = x.size(0), cols = x.size(1);
  at::Tensor out = at::empty({rows}, x.options());
  const float* p = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < rows; ++i) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < cols; ++j) m = p[i * cols + j] > m ? p[i * cols + j] : m;
    o[i] = m;
  }
  return out;"""), "row_max(a transposed tensor)"),
        Wrong("starts each row at zero", _rowmax(_ROWMAX_LOOP.replace("-std::numeric_limits<float>::infinity()", "0.f")),
              "values differ"),
        Wrong("column maxima", _rowmax(_ROWMAX_LOOP.replace("x.size(0), cols = x.size(1)", "x.size(1), cols = x.size(0)")
              .replace("a[i][j]", "a[j][i]")), "row_max(a 5x7 tensor)"),
        # the loop only for the 8x8 input the old check profiled, amax for every other input
        Wrong("loops only for the input the recorder profiles", _rowmax(
            "  if (x.size(0) != 8 || x.size(1) != 8) return x.amax(1);\n" + _ROWMAX_LOOP,
            "#include <limits>\n#include <ATen/ops/amax.h>"), "row_max's compiled code calls aten::amax", gaming=True),
    ],
}
