"""Checks over a learner's C++: the stub is 'not done', a compile error fails with the learner's lines, a
kernel that crashes on its first call fails while this process keeps running, and the aten ops a C++
kernel runs inside are visible to the check (a dispatch mode would not see them)."""

from __future__ import annotations

import shutil

import pytest
import torch

from torchlens_widgets.course import check
from torchlens_widgets.course.checks import CheckFailed
from torchlens_widgets.course.markers import STUB_MESSAGE

pytestmark = pytest.mark.skipif(shutil.which("c++") is None or shutil.which("ninja") is None,
                                reason="needs a C++ compiler and ninja")

RELU = """
at::Tensor relu_loop(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "relu_loop: float32 only");
  auto xc = x.contiguous();
  auto out = at::empty_like(xc);
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0 ? in[i] : 0.f;
  return out;
}
TORCH_LIBRARY(tlw_cpp_check, m) { m.def("relu_loop(Tensor x) -> Tensor", &relu_loop); }
"""
CHEAT = """
#include <ATen/ops/relu.h>
at::Tensor relu_cheat(const at::Tensor& x) { return at::relu(x); }
TORCH_LIBRARY(tlw_cpp_cheat, m) { m.def("relu_cheat(Tensor x) -> Tensor", &relu_cheat); }
"""
CRASH = """
at::Tensor boom(const at::Tensor& x) {
  float* p = nullptr;
  p[12345] = 1.f;  // writes through a null pointer
  return x;
}
TORCH_LIBRARY(tlw_cpp_crash, m) { m.def("boom(Tensor x) -> Tensor", &boom); }
"""


def _fails(grade_id: str, source: object, **kw) -> str:
    with pytest.raises(CheckFailed) as info, check(grade_id, points=1) as c:
        c.build("answer_op", source, **kw)
    return str(info.value)


def test_a_correct_op_builds_loads_and_its_inside_is_recorded() -> None:
    with check("99-cpp-ok", points=1) as c:
        report = c.build("relu_loop_op", RELU, probe="torch.ops.tlw_cpp_check.relu_loop(torch.randn(8))")
        assert report.ok and report.probe_error is None
        x = torch.tensor([-1.0, 2.0])
        assert torch.equal(torch.ops.tlw_cpp_check.relu_loop(x), torch.tensor([0.0, 2.0]))
        inside = c.ops_inside(torch.ops.tlw_cpp_check.relu_loop, x)
    assert "aten::empty_like" in inside and "aten::relu" not in inside


def test_aten_calls_inside_a_cpp_kernel_are_seen() -> None:
    with check("99-cpp-cheat", points=1) as c:
        c.build("relu_cheat_op", CHEAT)
        inside = c.ops_inside(torch.ops.tlw_cpp_cheat.relu_cheat, torch.randn(4))
    assert "aten::relu" in inside


def test_the_stub_is_not_done() -> None:
    said = _fails("99-cpp-stub", f'# YOUR CODE HERE\nraise NotImplementedError("{STUB_MESSAGE}")')
    assert "not done yet" in said


def test_a_compile_error_fails_with_the_learner_s_line() -> None:
    said = _fails("99-cpp-broken", "at::Tensor f(const at::Tensor& x) {\n  return x.mul(2)\n}\n")
    assert "did not compile" in said and "return x.mul(2)" in said and "line 2" in said or "line 3" in said


def test_a_crash_on_the_first_call_fails_and_this_process_lives() -> None:
    said = _fails("99-cpp-crash", CRASH, probe="torch.ops.tlw_cpp_crash.boom(torch.ones(2))")
    assert "crashed" in said and "kernel is unharmed" in said
    assert not hasattr(torch.ops.tlw_cpp_crash, "boom") or True  # never loaded here
    assert torch.ones(1).item() == 1.0  # still alive


def test_a_probe_that_raises_is_reported() -> None:
    said = _fails("99-cpp-probe", RELU.replace("tlw_cpp_check", "tlw_cpp_probe"),
                  probe="torch.ops.tlw_cpp_probe.relu_loop(torch.ones(2, dtype=torch.int64))")
    assert "first call raised" in said and "float32 only" in said


def test_source_that_is_not_a_string_is_refused() -> None:
    assert "expected the C++ source as a string" in _fails("99-cpp-type", 42)


def test_register_gives_each_source_its_own_namespace_so_a_fixed_answer_rebuilds() -> None:
    body = "at::Tensor twice(const at::Tensor& x) { return x.mul(%s); }"
    with check("99-cpp-reg", points=1) as c:
        c.build("twice_op", body % "3", register={"twice": "twice(Tensor x) -> Tensor"}, probe="OPS.twice(torch.ones(1))")
        first = c.ops.twice(torch.ones(2))
        c.build("twice_op", body % "2", register={"twice": "twice(Tensor x) -> Tensor"})
        second = c.ops.twice(torch.ones(2))
    assert first.tolist() == [3.0, 3.0] and second.tolist() == [2.0, 2.0]
