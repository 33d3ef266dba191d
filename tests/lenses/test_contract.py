"""The contract matrix catches the bugs real kernels have — strides ignored, the storage offset ignored, a
crash on empty input, a result written into an input, a missing fake kernel — and passes a correct op;
opcheck's verdicts are rows; bad input gets advice."""

from __future__ import annotations

import pytest
import torch

from torchlens_widgets.lenses.contract import ContractError, contract_matrix

X, Y = torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), torch.randn(3, 4)


def reference(a, b):
    return a * 2 + b


def ignores_strides(a, b):  # reads memory as if the input were contiguous
    return torch.as_strided(a, a.shape, torch.empty(a.shape).stride(), a.storage_offset()) * 2 + b


def ignores_offset(a, b):  # reads from the start of the storage
    return torch.as_strided(a, a.shape, a.stride(), 0) * 2 + b


def breaks_on_empty(a, b):
    first = a.reshape(-1)[0]  # raises on an empty input
    return a * 2 + b + 0 * first


def writes_into_input(a, b):
    return a.mul_(2).add_(b)


def test_a_correct_op_passes_every_case_quickly() -> None:
    report = contract_matrix(reference, reference, (X, Y))
    assert report.passed and len(report.results) >= 18, report.summary()
    groups = {r.group for r in report.results}
    assert {"dtype", "layout", "size", "aliasing", "autograd", "meta"} <= groups


@pytest.mark.parametrize(("bug", "fails"), [
    (ignores_strides, {"non-contiguous (step 2)", "transposed", "expanded (stride 0)"}),
    (ignores_offset, {"storage offset 3"}),
    (breaks_on_empty, {"empty (0 rows)"}),
])
def test_planted_bugs_fail_exactly_their_cases(bug, fails: set[str]) -> None:
    report = contract_matrix(bug, reference, (X, Y))
    failed = {r.name for r in report.failures()}
    assert fails <= failed, report.summary()
    assert report.result("as given").passed and report.result("dtype float64").passed
    detail = report.result(sorted(fails)[0]).detail
    assert "differ" in detail or "raised" in detail


def test_a_result_written_into_an_input_is_caught() -> None:
    report = contract_matrix(writes_into_input, reference, (X, Y))
    assert "shares an input's storage" in report.result("as given").detail


def test_the_difference_says_where() -> None:
    report = contract_matrix(ignores_offset, reference, (X, Y))
    assert report.result("storage offset 3").detail.startswith("12 of 12 values differ; max |diff|")
    assert " at (" in report.result("storage offset 3").detail


def test_a_registered_op_gets_opcheck_rows_and_a_missing_fake_shows() -> None:
    lib = torch.library.Library("tlw_contract", "DEF")
    try:
        lib.define("axpy(Tensor x, Tensor y) -> Tensor")
        lib.impl("axpy", reference, "CPU")
        op = torch.ops.tlw_contract.axpy.default
        report = contract_matrix(op, reference, (X, Y))
        assert report.op == "tlw_contract::axpy"
        rows = {r.name: r for r in report.results if r.group == "opcheck"}
        assert set(rows) == {"opcheck schema", "opcheck autograd_registration", "opcheck faketensor",
                             "opcheck aot_dispatch_dynamic"}
        assert rows["opcheck schema"].passed and not rows["opcheck faketensor"].passed
        # run on inputs that require grad, opcheck sees torch ops recording a graph inside a CPU kernel
        assert "does not have an autograd kernel" in rows["opcheck autograd_registration"].detail
        assert not report.result("meta tensors").passed and "Meta" in report.result("meta tensors").detail
        lib.impl("axpy", lambda a, b: torch.empty_like(a), "Meta")
        fixed = contract_matrix(op, reference, (X, Y), opcheck=False)
        assert fixed.result("meta tensors").passed and fixed.result("fake tensors").passed
    finally:
        lib._destroy()


@pytest.mark.parametrize(("args", "match"), [
    ((reference, reference, X), "tuple of the tensors"),
    ((reference, reference, ()), "tuple of the tensors"),
    ((reference, reference, (torch.tensor(1.0),)), "at least one dimension"),
    ((reference, reference, (X, torch.ones(2))), "share one shape"),
    ((reference, "not callable", (X,)), "callables"),
])
def test_bad_input_gets_advice(args, match: str) -> None:
    with pytest.raises(ContractError, match=match):
        contract_matrix(*args)


def test_an_op_without_a_gradient_fails_the_requires_grad_case() -> None:
    def no_grad_op(a, b):
        with torch.no_grad():
            return a * 2 + b

    report = contract_matrix(no_grad_op, reference, (X, Y))
    assert "does not require grad" in report.result("requires_grad").detail
    wrong_grad = contract_matrix(lambda a, b: (a * 2 + b).detach() + 0 * a * a, reference, (X, Y))
    assert "gradient of input 0 differs" in wrong_grad.result("requires_grad").detail


def test_an_operator_behind_the_autograd_fallback_gets_no_gradient_not_a_wrong_one() -> None:
    lib = torch.library.Library("tlw_contract_grad", "DEF")
    try:
        lib.define("loop(Tensor x, Tensor y) -> Tensor")
        lib.impl("loop", lambda a, b: (a.detach() * 2 + b.detach()), "CPU")  # records no graph, as a pointer loop
        op = torch.ops.tlw_contract_grad.loop.default
        detail = contract_matrix(op, reference, (X, Y), opcheck=False).result("requires_grad").detail
        assert detail == ("no gradient for input 0: its .grad is None after backward "
                          "(torch warned: no autograd kernel registered)")
    finally:
        lib._destroy()


def test_the_expanded_case_is_one_row_in_a_storage_of_its_own() -> None:
    from torchlens_widgets.lenses.contract import contract_cases

    case = next(c for c in contract_cases((X, Y)) if c.name == "expanded (stride 0)")
    for a in case.make():
        assert a.stride() == (0, 1) and a.untyped_storage().nbytes() == 4 * 4  # one row of 4 floats, 12 elements
    assert torch.equal(case.make()[0], X[:1].expand(3, 4))
    assert contract_matrix(reference, reference, (X, Y), opcheck=False).result("expanded (stride 0)").passed


def test_a_report_rebuilt_from_its_dict_is_the_same_report() -> None:
    import json

    from torchlens_widgets.lenses.contract import ContractReport

    report = contract_matrix(ignores_offset, reference, (X, Y))
    again = ContractReport.from_dict(json.loads(json.dumps(report.to_dict())))  # through JSON, as a recording is
    assert again == report and again.summary() == report.summary()
    assert not again.result("storage offset 3").passed and again.failures() == report.failures()


def test_the_recorded_gpu_contract_reports_rebuild() -> None:
    from torchlens_widgets.lenses.contract import ContractReport
    from torchlens_widgets.lenses.recorded import RecordingMissing, recording

    try:
        grids = recording("cuda_operator").load("contract")
    except RecordingMissing:
        pytest.skip("no cuda_operator recording in this package")
    for stage in ("naive kernel (direct call)", "complete operator"):
        report = ContractReport.from_dict(grids[stage]["report"])
        assert report.summary() == grids[stage]["summary"]
        assert [r.name for r in report.failures()] == grids[stage]["failures"]
