"""Notebook 10's exercise checks, without a notebook: the references pass visible and hidden cases; kernels that call
ATen (past the dispatcher too) or fit the visible inputs fail saying why, contract tests that tell the check's ops
apart by anything but running them fail, and a hidden case is named by its number only. Each C++ source compiles
once per machine (the build cache keeps it)."""

from __future__ import annotations

import shutil

import pytest
import torch

from torchlens_widgets.course.exercises import n10

needs_cpp = pytest.mark.skipif(shutil.which("c++") is None or shutil.which("ninja") is None,
                               reason="needs a C++ compiler and ninja")

SCALE_ADD = r"""
#include <vector>

at::Tensor scale_add(const at::Tensor& x, const at::Tensor& y, double a) {
  TORCH_CHECK(x.sizes() == y.sizes(), "scale_add: x and y must have the same shape");
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "scale_add: float32 only");
  at::Tensor out = at::empty(x.sizes(), x.options());
  const float* px = x.const_data_ptr<float>();
  const float* py = y.const_data_ptr<float>();
  float* po = out.mutable_data_ptr<float>();
  const int64_t dims = x.dim();
  std::vector<int64_t> index(dims, 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t at_x = 0, at_y = 0;
    for (int64_t d = 0; d < dims; ++d) {
      at_x += index[d] * x.stride(d);
      at_y += index[d] * y.stride(d);
    }
    po[i] = static_cast<float>(a) * px[at_x] + py[at_y];
    for (int64_t d = dims - 1; d >= 0; --d) {
      if (++index[d] < x.size(d)) break;
      index[d] = 0;
    }
  }
  return out;
}
"""
_ALLOC = "  at::Tensor out = at::empty(x.sizes(), x.options());"
STRICT_FAILS = {"dtype float64", "dtype float16", "dtype bfloat16", "non-contiguous (step 2)", "expanded (stride 0)",
                "first non-contiguous, rest contiguous", "transposed", "requires_grad", "meta tensors", "fake tensors"}
HIDDEN = {
    "10-fix-kernel": [((5,), 0.5), ((2, 3, 4), -1.25)],
    "10-contract-tests": ["returns float64", "is wrong when x is y"],
    "10-predict-grid": [(5, 2), (2, 3, 4)],
    "10-promotion-case": ["gives the result y's dtype", "casts y to x's dtype first", "casts x to y's dtype first"],
}


def my_contract_tests(op):  # type: ignore[no-untyped-def]
    failed = []
    base_x, base_y = torch.randn(4, 6), torch.randn(4, 6)
    inputs = {
        "contiguous": (base_x, base_y),
        "transposed": (base_x.t(), base_y.t()),
        "step 2": (base_x[:, ::2], base_y[:, ::2]),
        "offset": (base_x.reshape(-1)[5:17].reshape(3, 4), base_y.reshape(-1)[5:17].reshape(3, 4)),
        "expanded": (base_x[:1].expand(4, 6), base_y),
        "empty": (torch.empty(0, 3), torch.empty(0, 3)),
        "0-d": (torch.tensor(1.5), torch.tensor(-2.0)),
        "same tensor twice": (base_x, base_x),
    }
    for name, (a, b) in inputs.items():
        a0, b0 = a.clone(), b.clone()
        try:
            out = op(a, b)
        except Exception:
            failed.append(name)
            continue
        want = 2.0 * a0 + b0
        ok = (isinstance(out, torch.Tensor) and out.shape == want.shape and out.dtype == want.dtype
              and torch.allclose(out, want) and torch.equal(a, a0) and torch.equal(b, b0))
        if ok and out.numel() and out.untyped_storage().data_ptr() in (a.untyped_storage().data_ptr(),
                                                                       b.untyped_storage().data_ptr()):
            ok = False
        if not ok:
            failed.append(name)
    return failed


def _both(grade: object, answer: object, hidden: list) -> object:  # type: ignore[type-arg]
    return lambda c: (grade(c, answer), grade(c, answer, hidden=hidden))  # type: ignore[operator]


def _fix(verdict, source: str, hidden: list | None = None) -> str | None:  # type: ignore[no-untyped-def, type-arg]
    return verdict("10-fix-kernel", lambda c: n10.fix_kernel(c, source, hidden=hidden))


@needs_cpp
def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("10-fix-kernel", _both(n10.fix_kernel, SCALE_ADD, HIDDEN["10-fix-kernel"])) is None
    assert verdict("10-predict-grid", _both(n10.predict_grid, set(STRICT_FAILS), HIDDEN["10-predict-grid"])) is None


def test_the_reference_contract_tests_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("10-contract-tests", _both(n10.contract_tests, my_contract_tests,
                                              HIDDEN["10-contract-tests"])) is None


@needs_cpp
def test_aten_called_past_the_dispatcher_or_through_it_is_found_in_the_library(verdict) -> None:  # type: ignore[no-untyped-def]
    past = "#include <ATen/ops/add_cpu_dispatch.h>\n" + SCALE_ADD.replace(_ALLOC, "  return at::cpu::add(y, x, a);\n" + _ALLOC)
    message = _fix(verdict, past)
    assert "scale_add's compiled code calls at::cpu::add" in message and "past the dispatcher" in message
    # the loop for the inputs the old check profiled (8 elements), at::add for every other input
    gated = "#include <ATen/ops/add.h>\n" + SCALE_ADD.replace(_ALLOC, "  if (x.numel() != 8) return at::add(y, x, a);\n" + _ALLOC)
    assert "scale_add's compiled code calls aten::add" in _fix(verdict, gated)


@needs_cpp
def test_a_kernel_fitted_to_one_a_or_one_layout_fails_naming_the_case(verdict) -> None:  # type: ignore[no-untyped-def]
    fixed_a = SCALE_ADD.replace("static_cast<float>(a)", "1.5f")
    message = _fix(verdict, fixed_a)
    assert message.startswith("scale_add on (8,) inputs, a = -2.0, case 'as given': 8 of 8 values differ")
    assert "expected" in message and "got" in message
    x_strides_for_y = SCALE_ADD.replace("at_y += index[d] * y.stride(d);", "at_y += index[d] * x.stride(d);")
    assert _fix(verdict, x_strides_for_y).startswith(
        "scale_add on (3, 4) inputs, a = 1.5, case 'first non-contiguous, rest contiguous'")
    in_place = SCALE_ADD.replace("const float* px = x.const_data_ptr<float>();", "float* px = x.mutable_data_ptr<float>();")
    in_place = in_place.replace("po[i] = static_cast", "po[i] = px[at_x] = static_cast")  # keeps a * x in x as well
    assert "its input x afterwards (it must stay unchanged)" in _fix(verdict, in_place)


@needs_cpp
def test_a_kernel_that_copies_its_inputs_fails_naming_the_copy(verdict) -> None:  # type: ignore[no-untyped-def]
    copies = SCALE_ADD.replace("  const float* px = x.const_data_ptr<float>();",
                               "  at::Tensor xc = x.contiguous();\n  const float* px = xc.const_data_ptr<float>();")
    message = _fix(verdict, copies)
    assert message.startswith("scale_add on (3, 4) inputs, a = 1.5, case 'non-contiguous (step 2)' ran aten::clone, "
                              "aten::contiguous, aten::copy_"), message


@needs_cpp
def test_hidden_kernel_failures_are_numbered_without_their_content(verdict) -> None:  # type: ignore[no-untyped-def]
    # refuses 3-D inputs, with a message that names their sizes
    flat = SCALE_ADD.replace(_ALLOC, '  TORCH_CHECK(x.dim() < 3, "scale_add: got sizes ", x.sizes());\n' + _ALLOC)
    assert _fix(verdict, flat) is None
    message = _fix(verdict, flat, HIDDEN["10-fix-kernel"])
    assert message.startswith("scale_add on hidden case 2, case 'as given' raised RuntimeError")
    assert "2, 3, 4" not in message and "-1.25" not in message


def test_contract_tests_that_read_the_ops_or_count_calls_fail(verdict) -> None:  # type: ignore[no-untyped-def]
    def by_defaults(op):  # type: ignore[no-untyped-def]
        return ["planted"] if op.__defaults__ or op.__closure__ or op.__code__.co_names != ("_impl",) else []

    assert verdict("10-contract-tests", lambda c: n10.contract_tests(c, by_defaults)) == (
        "your tests pass an op that ignores strides\nHint: for each kind of input (a transposed view, "
        "a step-2 slice, a view at a storage offset, an expanded tensor, empty and 0-d tensors, the same tensor passed "
        "twice) compare op's result with 2.0 * x + y computed on copies of the inputs\n(Each new failed attempt adds "
        "to the hint.)")
    calls = []

    def first_is_correct(op):  # type: ignore[no-untyped-def]
        calls.append(op)
        return [] if len(calls) == 1 else ["planted"]

    assert "your tests fail a correct op: ['planted']" in verdict(
        "10-contract-tests", lambda c: n10.contract_tests(c, first_is_correct))

    class Always(list):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 1

        def __bool__(self) -> bool:
            return len(calls) > 0

    assert "returned Always, expected a list" in verdict("10-contract-tests", lambda c: n10.contract_tests(c, lambda op: Always()))


def test_contract_tests_missing_a_hidden_bug_name_its_number_only(verdict) -> None:  # type: ignore[no-untyped-def]
    def no_dtype(op):  # type: ignore[no-untyped-def]
        failed = my_contract_tests(op)
        if failed == ["same tensor twice"] or not failed:
            return []
        return failed

    def values_only(op):  # type: ignore[no-untyped-def]
        return [n for n in my_contract_tests(lambda a, b: op(a, b).to(torch.float32))]

    message = verdict("10-contract-tests", lambda c: n10.contract_tests(c, values_only, hidden=HIDDEN["10-contract-tests"]))
    assert message.startswith("your tests pass the op of hidden case 1, which has a planted bug")
    assert "float64" not in message
    message = verdict("10-contract-tests", lambda c: n10.contract_tests(c, no_dtype, hidden=HIDDEN["10-contract-tests"]))
    assert message.startswith("your tests pass the op of hidden case 2")
    assert "same" not in message.split("\nHint")[0]


@needs_cpp
def test_predictions_must_be_a_plain_set_and_stay_secret(verdict) -> None:  # type: ignore[no-untyped-def]
    class Reads(set):  # type: ignore[type-arg]
        def __iter__(self):  # type: ignore[no-untyped-def]
            return iter(STRICT_FAILS)

    message = verdict("10-predict-grid", lambda c: n10.predict_grid(c, Reads()))
    assert "give a set of case names (strings)" in message
    message = verdict("10-predict-grid", lambda c: n10.predict_grid(c, STRICT_FAILS - {"transposed"}))
    assert "1 entry missing" in message and "transposed" not in message.split("\nHint")[0]
    message = verdict("10-predict-grid", lambda c: n10.predict_grid(
        c, STRICT_FAILS - {"transposed"}, hidden=HIDDEN["10-predict-grid"]))
    assert message.startswith("the failing cases for hidden case 1: 1 missing") and "(5, 2)" not in message


@needs_cpp
def test_the_grid_is_read_with_the_lens_as_loaded_not_as_an_answer_left_it(verdict, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from torchlens_widgets.lenses import contract

    monkeypatch.setattr(contract, "_run", lambda fn, args, fake: None)
    monkeypatch.setattr(contract, "_compare", lambda *args, **kwargs: None)
    monkeypatch.setattr(contract, "_grad_problem", lambda *args, **kwargs: None)
    message = verdict("10-predict-grid", lambda c: n10.predict_grid(c, set()))
    # the public lens is protected too now: the patch is found as tampering (and the private copy is never used)
    assert message.startswith("the failing cases: 10 entries missing") or "lenses.contract._run was replaced" in message, message


def promotion_case(x, y):  # type: ignore[no-untyped-def]
    return x.to(torch.float16), y.to(torch.bfloat16)


def test_the_reference_promotion_case_passes_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("10-promotion-case", _both(n10.promotion_case, promotion_case,
                                              HIDDEN["10-promotion-case"])) is None


def test_every_planted_promotion_bug_passes_the_standard_matrix() -> None:
    from torchlens_widgets.lenses.contract import contract_matrix

    example = (torch.randn(3, 4), torch.randn(3, 4))
    for name in n10.PROMOTION_OPS:
        report = contract_matrix(n10._promotion_op(name), lambda a, b: 2.0 * a + b, example)
        assert report.passed, (name, report.summary())
    assert torch.promote_types(torch.float16, torch.bfloat16) == torch.float32


def test_promotion_cases_that_miss_a_bug_or_break_the_reference_fail(verdict) -> None:  # type: ignore[no-untyped-def]
    def run(answer, hidden=None):  # type: ignore[no-untyped-def]
        return verdict("10-promotion-case", lambda c: n10.promotion_case(c, answer, hidden=hidden))

    assert run(lambda x, y: (x.clone(), y.clone())).startswith("your case passes an op that gives the result x's dtype")
    assert run(lambda x, y: (x.double(), y)).startswith("your case passes an op that gives the result x's dtype")
    y_wider = lambda x, y: (x, y.double())  # noqa: E731
    assert run(y_wider) is None
    message = run(y_wider, HIDDEN["10-promotion-case"])
    assert message.startswith("your case passes the op of hidden case 1, which has a planted bug")
    assert "y's dtype" not in message.split("\nHint")[0]
    assert run(lambda x, y: (x.double(), y[:2, :3])).startswith("the reference 2.0 * x + y cannot run on your case (")
    hidden = run(lambda x, y: (x.double(), y[:1, :1].expand(3, 3)), HIDDEN["10-promotion-case"])
    assert hidden.startswith("the reference 2.0 * x + y cannot run on your case: give") and "size" not in hidden
    assert "expected a tuple of two plain tensors" in run(lambda x, y: x.double())

    class Says64(torch.Tensor):
        @property
        def dtype(self):  # type: ignore[no-untyped-def, override]
            return torch.float64

    assert "expected a tuple of two plain tensors" in run(lambda x, y: (x.as_subclass(Says64), y))
