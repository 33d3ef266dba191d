"""The check API: passes record progress, wrong answers fail with teaching feedback, fakes are caught."""

from __future__ import annotations

import json
import linecache
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from torchlens_widgets.course import CheckFailed, check, strict_mismatch
from torchlens_widgets.course.checks import _FAILURES, REVEAL_AFTER
from torchlens_widgets.course.markers import HIDDEN_PLACEHOLDER, STUB_MESSAGE
from torchlens_widgets.lenses.layout import Layout, layout


class AlwaysEqual:
    """An answer that claims to equal anything."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__


class LyingTuple(tuple):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = tuple.__hash__


class LyingInt(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


class LyingTensor(torch.Tensor):
    def stride(self, *args: Any) -> Any:  # type: ignore[override]
        return (1, 4)


@pytest.fixture
def progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "progress.json"
    monkeypatch.setenv("TORCHLENS_PROGRESS", str(path))
    return path


def test_pass_records_progress(progress: Path) -> None:
    with check("99-demo", points=2) as c:
        c.equal((1, 4), (1, 4))
    data = json.loads(progress.read_text())
    assert data["checks"]["99-demo"]["points"] == 2


def test_failure_raises_and_records_nothing(progress: Path) -> None:
    with pytest.raises(CheckFailed, match=r"stride of x.t\(\)\[1\]: expected 4, got 3"):
        with check("99-fail") as c:
            c.equal((1, 3), (1, 4), what="stride of x.t()")
    assert not progress.exists() or "99-fail" not in progress.read_text()


@pytest.mark.parametrize("fake", [AlwaysEqual(), LyingTuple((9, 9)), LyingInt(7), [AlwaysEqual(), AlwaysEqual()]])
def test_tampered_eq_cannot_pass(fake: object, progress: Path) -> None:
    with pytest.raises(CheckFailed):
        with check("99-fake") as c:
            c.equal(fake, (1, 4))
    with pytest.raises(CheckFailed):
        with check("99-fake-int") as c:
            c.equal(fake, 3)


def test_tensor_subclass_cannot_fake_its_layout(progress: Path) -> None:
    x = torch.arange(12.0).reshape(3, 4)
    liar = x.clone().as_subclass(LyingTensor)
    with pytest.raises(CheckFailed, match="plain torch.Tensor"):
        with check("99-liar") as c:
            c.same_layout(liar, x.t())


def test_strict_mismatch_types() -> None:
    assert strict_mismatch(True, True) is None
    assert strict_mismatch(1, True) is not None  # 1 is not a bool answer
    assert strict_mismatch(True, 1) is not None  # True is not an int answer
    assert strict_mismatch(4, 4.0) is None
    assert strict_mismatch(0.1 + 0.2, 0.3) is not None
    assert strict_mismatch(0.1 + 0.2, 0.3, rel_tol=1e-9) is None
    assert strict_mismatch(torch.Size([2, 3]), (2, 3)) is None
    assert strict_mismatch({"a", "b"}, {"a"}) == "answer: unexpected ['b']"
    assert strict_mismatch({"k": (1, 2)}, {"k": (1, 3)}) == "answer['k'][1]: expected 3, got 2"
    assert strict_mismatch(torch.ones(2), torch.ones(2, dtype=torch.float64)) is not None
    assert strict_mismatch(torch.float32, torch.float32) is None
    nan = float("nan")  # a NaN where a NaN is expected is right (torch.equal says no); anywhere else it is wrong
    assert strict_mismatch(torch.tensor([1.0, nan]), torch.tensor([1.0, nan])) is None
    assert strict_mismatch(torch.tensor([1.0, nan]), torch.tensor([1.0, nan]), rel_tol=1e-6) is None
    assert "index [1]: expected nan, got 2.0" in strict_mismatch(torch.tensor([1.0, 2.0]), torch.tensor([1.0, nan]))
    assert "index [0]: expected 1.0, got nan" in strict_mismatch(torch.tensor([nan, nan]), torch.tensor([1.0, nan]))
    with pytest.raises(TypeError, match="cannot compare"):
        strict_mismatch(object(), object())


def test_same_layout_feedback_names_the_difference(progress: Path) -> None:
    x = torch.arange(12.0).reshape(3, 4)
    with pytest.raises(CheckFailed, match=r"stride: expected \[1, 4\], got \[3, 1\]"):
        with check("99-layout") as c:
            c.same_layout(x.t().contiguous(), x.t())
    with check("99-layout-ok") as c:
        c.same_layout(torch.as_strided(x, (4, 3), (1, 4)), x.t())


def test_view_and_storage_checks(progress: Path) -> None:
    x = torch.arange(6.0)
    with check("99-view") as c:
        c.is_view_of(x[::2], x)
        c.shares_storage(x, x.clone(), expected=False)
    with pytest.raises(CheckFailed, match="a copy was made"):
        with check("99-view-bad") as c:
            c.is_view_of(x[::2].clone(), x)


def test_copy_count(progress: Path) -> None:
    x = torch.randn(8, 8)
    with check("99-copies") as c:
        c.copy_count(lambda t: t.reshape(64), x, expected=0)
    with pytest.raises(CheckFailed, match="made 1 data copies, expected 0"):
        with check("99-copies-bad") as c:
            c.copy_count(lambda t: t.t().reshape(64), x, expected=0)
    assert _FAILURES["99-copies-bad"] >= 1


def test_stub_missing_name_and_own_errors(progress: Path) -> None:
    def stub() -> None:
        raise NotImplementedError(STUB_MESSAGE)

    with pytest.raises(CheckFailed, match=r"not done yet: your answer still raises NotImplementedError"):
        with check("99-stub") as c:
            c.equal(stub(), 1)
    assert _FAILURES["99-stub"] == 0  # "not done yet" is not an attempt: the first real one gets the first hint
    # a name the test cell itself asks for is "not done yet"...
    with pytest.raises(CheckFailed, match=r"not done yet: 'undefined_answer' is not defined"):
        with check("99-missing") as c:
            c.equal(undefined_answer, 1)  # type: ignore[name-defined]  # noqa: F821

    # ...a NameError inside the learner's own function is theirs to see, with its traceback
    answer_cell: dict[str, Any] = {}
    exec(compile("def buggy():\n    return typo_in_my_code\n", "<answer-cell>", "exec"), answer_cell)
    buggy = answer_cell["buggy"]

    with pytest.raises(NameError, match="typo_in_my_code"):
        with check("99-own-name-error") as c:
            c.equal(buggy(), 1)
    answer_cell = {}
    exec(compile("def crash():\n    return 1 // 0\n", "<answer-cell-2>", "exec"), answer_cell)
    with pytest.raises(ZeroDivisionError):
        with check("99-crash") as c:
            c.equal(answer_cell["crash"](), 1)
    # an answer of the wrong kind that makes the test's own code fail is the check's failure, not a crash
    with pytest.raises(CheckFailed, match=r"could not use your answer \(TypeError"):
        with check("99-unusable") as c:
            answer = None
            c.equal(answer[0], 1)  # type: ignore[index]


def test_check_failed_renders_one_line_instead_of_a_traceback(progress: Path) -> None:
    with pytest.raises(CheckFailed) as info:
        with check("99-render") as c:
            c.equal(3, 4, what="answer", hint="think")
    assert info.value._render_traceback_() == ["CheckFailed: 99-render failed, 0/1 point (the feedback above says why)"]
    assert str(info.value).startswith("answer: expected 4, got 3\nHint: think")


def test_hints_come_in_tiers(progress: Path) -> None:
    tiers = ["look at the strides", "a transpose swaps strides", "x.t() has stride (1, 4)"]
    messages = []
    for _ in range(4):
        with pytest.raises(CheckFailed) as info:
            with check("99-tiers") as c:
                c.equal((4, 1), (1, 4), what="stride", hint=tiers)
        messages.append(str(info.value))
    assert "Hint: look at the strides" in messages[0] and "adds to the hint" in messages[0]
    assert "a transpose swaps" not in messages[0]
    # cumulative: each attempt shows every tier so far, the newest last
    assert messages[1].endswith("Hint: look at the strides\nHint 2: a transpose swaps strides\n"
                                "(Each new failed attempt adds to the hint.)")
    assert "Hint 3: x.t() has stride (1, 4)" in messages[2] and "adds to the hint" not in messages[2]
    assert "Hint: look at the strides" in messages[2] and "Hint 2: a transpose" in messages[2]
    assert messages[3] == messages[2]


def test_secret_expected_values_are_revealed_only_after_repeated_failures(progress: Path) -> None:
    messages = []
    for _ in range(REVEAL_AFTER):
        with pytest.raises(CheckFailed) as info:
            with check("99-secret") as c:
                c.equal(6, 7, what="PREDICTED_OPS", secret=True)
        messages.append(str(info.value))
    assert "got 6, which is not right" in messages[0] and "expected 7" not in messages[0]
    assert "expected 7" not in messages[REVEAL_AFTER - 2]
    assert "expected 7, got 6" in messages[-1]


def test_visible_only_scope_is_recorded_when_the_hidden_tests_were_taken_out(progress: Path) -> None:
    for name, marker, scope in (("<student-cell>", HIDDEN_PLACEHOLDER, "visible"), ("<source-cell>", "", "full")):
        gid = f"99-scope-{scope}"
        src = f"with check({gid!r}, points=2) as c:\n    c.equal(1, 1)\n    {marker}\n"
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        exec(compile(src, name, "exec"), {"check": check})
        assert json.loads(progress.read_text())["checks"][gid]["scope"] == scope


# -- integrity: the learner's process cannot patch the checker ---------------------------------------


class _LyingFunctionMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func in (torch.equal, torch.Tensor.stride):
            return True if func is torch.equal else (1, 4)
        return func(*args, **(kwargs or {}))


class _LyingDispatchMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func is torch.ops.aten.equal.default:
            return True
        return func(*args, **(kwargs or {}))


def _patch_equal() -> None:
    torch.equal = lambda *a, **k: True  # type: ignore[assignment]


def _patch_stride() -> None:
    torch.Tensor.stride = lambda self, *a: (1, 4)  # type: ignore[method-assign]


@pytest.mark.parametrize(
    "attack, found",
    [
        (_patch_equal, "torch.equal was replaced"),
        (_patch_stride, "torch.Tensor.stride was replaced"),
        (lambda: _LyingFunctionMode().__enter__(), "a mode was left entered (_LyingFunctionMode)"),
        (lambda: _LyingDispatchMode().__enter__(), "a mode was left entered (_LyingDispatchMode)"),
        (lambda: torch.set_grad_enabled(False), "grad mode was left off"),
        (lambda: torch.set_default_dtype(torch.float64), "default dtype was changed"),
    ],
)
def test_a_patched_torch_or_a_mode_left_on_fails_clearly_and_is_repaired(attack, found, progress: Path) -> None:  # type: ignore[no-untyped-def]
    x = torch.arange(12.0).reshape(3, 4)
    original_equal = torch.equal
    attack()
    with pytest.raises(CheckFailed, match="found what it measures with changed") as info:
        with check("99-tamper") as c:
            c.same_layout(x.contiguous(), x.t())
    assert found in str(info.value)
    # repaired: torch is whole again and an honest check passes (and a wrong one fails) afterwards
    assert torch.equal is original_equal and "stride" not in vars(torch.Tensor)
    assert torch._C._len_torch_function_stack() == 0 and torch._C._len_torch_dispatch_stack() == 0
    assert torch.is_grad_enabled() and torch.get_default_dtype() is torch.float32
    with check("99-after") as c:
        c.same_layout(torch.as_strided(x, (4, 3), (1, 4)), x.t())
    with pytest.raises(CheckFailed, match="wrong layout"):
        with check("99-after-bad") as c:
            c.same_layout(x.t().contiguous(), x.t())


def test_tampering_during_the_check_is_caught_too(progress: Path) -> None:
    def sneaky(t: torch.Tensor) -> torch.Tensor:
        _patch_equal()
        return t + 1

    with pytest.raises(CheckFailed, match="torch.equal was replaced"):
        with check("99-tamper-late") as c:
            c.equal(sneaky(torch.zeros(2)), torch.zeros(2))
    assert torch.equal(torch.zeros(1), torch.ones(1)) is False


# -- recording what ran: copies and bans ---------------------------------------------------------------


def _copy_hidden_from_modes(t: torch.Tensor) -> torch.Tensor:
    with _disable_current_modes():
        return t.t().contiguous()


@pytest.mark.parametrize(
    "fn, message",
    [
        (lambda t: t.t().contiguous(), "made 1 data copies"),
        (lambda t: t.t().softmax(-1), "made 1 data copies"),  # the copy is inside the softmax kernel
        (_copy_hidden_from_modes, "stepped outside"),
        (lambda t: torch.from_numpy(t.numpy().T.copy()), "stepped outside"),
        (lambda t: torch.tensor(t.t().tolist()), "stepped outside"),
    ],
)
def test_copies_are_counted_at_the_level_that_sees_them(fn, message: str, progress: Path) -> None:  # type: ignore[no-untyped-def]
    x = torch.randn(16, 16)
    with pytest.raises(CheckFailed, match=message):
        with check("99-copies-bad") as c:
            c.copy_count(fn, x, expected=0)


def test_copy_count_passes_real_views(progress: Path) -> None:
    x = torch.randn(8, 8)
    with check("99-copies") as c:
        assert c.copy_count(lambda t: t.reshape(64), x, expected=0).kernel_level == []
        report = c.copy_count(lambda t: t.t().reshape(64) * 2, x, expected=1)
        assert report.kernel_level == ["aten::reshape > aten::clone  [8, 8]"]  # the 0-d wrap of 2 is not a copy
        assert "aten.mul.Tensor" in report.ops


def _transpose_alias(t: torch.Tensor) -> torch.Tensor:
    f = torch.as_strided
    return f(t, (t.shape[1], t.shape[0]), (t.stride(1), t.stride(0)))


def _transpose_getattr(t: torch.Tensor) -> torch.Tensor:
    return t.t()


def _position_with_helper(t: torch.Tensor) -> int:
    return layout(t).storage_index((1, 1))


_CALLS: list[int] = []


def _memoised(t: torch.Tensor) -> torch.Tensor:
    # allowed ops on the first call (the one a probe would look at), a forbidden one afterwards
    _CALLS.append(1)
    return t.view(-1) if len(_CALLS) == 1 else t.transpose(0, 1)


@pytest.mark.parametrize(
    "fn, message",
    [
        (_transpose_alias, "ran aten.as_strided"),
        (_transpose_getattr, "ran aten.t"),
        (lambda t: t.transpose(0, 1), "ran aten.transpose"),
        (lambda t: torch.from_numpy(t.numpy().T), "stepped outside"),
    ],
)
def test_watch_enforces_an_aten_allow_list_on_every_call(fn, message: str, progress: Path) -> None:  # type: ignore[no-untyped-def]
    x = torch.arange(6.0).reshape(2, 3)
    with pytest.raises(CheckFailed, match=message):
        with check("99-watch") as c:
            mine = c.watch(fn, "my_transpose", allow_aten={"view", "expand"})
            mine(x)


def test_watch_records_forbidden_python_helpers_by_identity(progress: Path) -> None:
    x = torch.arange(6.0).reshape(2, 3)
    with pytest.raises(CheckFailed, match=r"called layout, Layout.storage_index"):
        with check("99-forbid") as c:
            c.watch(_position_with_helper, forbid=[layout, Layout.storage_index])(x)
    # every call is recorded, so a memoised answer cannot hide behind a clean first call
    with pytest.raises(CheckFailed, match="ran aten.transpose"):
        with check("99-memo") as c:
            mine = c.watch(_memoised, allow_aten={"view"})
            mine(x)
            mine(x)
    with check("99-ok") as c:
        got = c.watch(lambda t: t.view(3, 2), allow_aten={"view"})(x)
        c.equal(got, x.view(3, 2))


def test_side_by_side_feedback_draws_both_layouts_with_values(progress: Path) -> None:
    x = torch.arange(12.0).reshape(3, 4)
    with pytest.raises(CheckFailed) as info:
        with check("99-pictures") as c:
            try:
                c.same_layout(x.t().contiguous(), x.t())
            finally:
                shown = "".join(c.feedback_html)
    assert "wrong layout" in str(info.value)
    assert shown.startswith('<div style="display:flex;flex-wrap:nowrap')
    assert shown.count("<svg") == 2 and "expected" in shown and "yours" in shown
    assert ">11<" in shown  # values are drawn


def test_faster(progress: Path) -> None:
    x = torch.randn(256, 256)
    with pytest.raises(CheckFailed, match="target is 1000"):
        with check("99-speed") as c:
            c.faster(lambda: x.sum(), lambda: x.sum(), at_least=1000.0)


def test_bad_check_arguments() -> None:
    with pytest.raises(ValueError, match="grade_id"):
        check("")
    with pytest.raises(ValueError, match="positive"):
        check("99-x", points=0)
    assert os.environ["TORCHLENS_PROGRESS"]


def test_patching_the_package_or_the_check_api_is_tampering(progress: Path) -> None:
    import torchlens_widgets.lenses.allocator as allocator
    from torchlens_widgets.course.checks import Check

    original = Check.equal
    Check.equal = lambda *a, **k: None  # type: ignore[method-assign]
    allocator.counterfactual = lambda *a, **k: {}  # type: ignore[assignment]
    with pytest.raises(CheckFailed, match=r"Check.equal was replaced.*counterfactual was replaced|counterfactual was replaced.*Check.equal was replaced"):
        with check("99-patched-package") as c:
            c.equal(1, 2)
    assert Check.equal is original and allocator.counterfactual.__module__ == "torchlens_widgets.lenses.allocator"


def test_a_watched_answer_may_not_call_the_test_cells_own_helpers(progress: Path) -> None:
    # the helper and the check come from one "test cell" file; the answer from another
    test_cell = (
        "def _reference(t):\n    return t.t()\n"
        "with check('99-ref-helper') as c:\n    mine = c.watch(answer, 'my_transpose')\n    mine(torch.ones(2, 3))\n"
    )
    ns: dict[str, Any] = {"check": check, "torch": torch}
    exec(compile("def answer(t):\n    return _reference(t)\n", "<answer-cell-3>", "exec"), ns)
    with pytest.raises(CheckFailed, match=r"called _reference \(one of the check's own helpers\)"):
        exec(compile(test_cell, "<test-cell-3>", "exec"), ns)


def test_an_int_answer_must_be_an_int() -> None:
    assert strict_mismatch(6667.0, 6667) == "answer: expected an int, got 6667.0"
    assert strict_mismatch(4, 4.0) is None  # an int is a fine float


def test_patching_the_layout_module_behind_the_reexported_function_is_tampering(progress: Path) -> None:
    import sys

    lay = sys.modules["torchlens_widgets.lenses.layout"]
    original = lay.storage_index
    lay.storage_index = lambda *a, **k: 0  # type: ignore[assignment]
    with pytest.raises(CheckFailed, match=r"torchlens_widgets.lenses.layout.storage_index was replaced"):
        with check("99-patched-layout") as c:
            c.equal(1, 1)
    assert lay.storage_index is original


def test_workloads_handed_to_the_answer_may_be_called_and_modules_can_be_forbidden(progress: Path) -> None:
    import sys

    test_cell = (
        "_work = lambda: torch.ones(3).sum()\n"
        "with check('99-workload') as c:\n"
        "    mine = c.watch(count_calls, 'count_calls')\n"
        "    c.equal(mine(_work), 1)\n"
        "    c.watch(lens_user, forbid=[sys.modules['torchlens_widgets.lenses.layout']])(torch.ones(2))\n"
    )
    ns: dict[str, Any] = {"check": check, "torch": torch, "sys": sys}
    exec(compile("def count_calls(fn):\n    fn()\n    return 1\n"
                 "def lens_user(t):\n    from torchlens_widgets.lenses.layout import storage_index\n"
                 "    return storage_index((0,), (1,), 0)\n", "<answer-cell-4>", "exec"), ns)
    with pytest.raises(CheckFailed, match=r"lens_user called storage_index"):
        exec(compile(test_cell, "<test-cell-4>", "exec"), ns)


def test_relative_error_can_be_purely_relative() -> None:
    tiny = torch.tensor([1e-8, 2.0], dtype=torch.float64)
    off = tiny * torch.tensor([2.0, 1.0], dtype=torch.float64)  # 100 % off on the tiny value
    assert strict_mismatch(off, tiny, rel_tol=1e-6) is None  # the default absolute tolerance hides it
    assert strict_mismatch(off, tiny, rel_tol=1e-6, abs_tol=0.0) is not None


def test_patching_a_method_of_a_package_class_is_tampering(progress: Path) -> None:
    from torchlens_widgets.lenses.asyncexec import StreamSim

    original = StreamSim.__dict__["launch"]
    StreamSim.launch = lambda self, *a, **k: None  # type: ignore[method-assign]
    with pytest.raises(CheckFailed, match=r"torchlens_widgets.lenses.asyncexec.StreamSim.launch was replaced"):
        with check("99-patched-class") as c:
            c.equal(1, 1)
    assert StreamSim.__dict__["launch"] is original


def test_patching_the_triton_grid_lens_behind_program_grid_is_tampering(progress: Path) -> None:
    # a test cell trusts what program_grid records: an answer that masks its own out-of-bounds lanes inside the
    # recorder (or patches the compile lens) is caught like any other patch of the package
    import torchlens_widgets.lenses.compile_trace as compile_lens
    import torchlens_widgets.lenses.triton_grid as grid_lens

    recorder, kernels_in = grid_lens._Recorder.__dict__["access"], compile_lens._kernels_in
    grid_lens._Recorder.access = lambda self, *a, **k: None  # type: ignore[method-assign]
    compile_lens._kernels_in = lambda code: {}  # type: ignore[assignment]
    with pytest.raises(CheckFailed, match=r"triton_grid._Recorder.access was replaced") as failed:
        with check("99-patched-grid-lens") as c:
            c.equal(1, 1)
    assert "compile_trace._kernels_in was replaced" in str(failed.value)
    assert grid_lens._Recorder.__dict__["access"] is recorder and compile_lens._kernels_in is kernels_in


def test_copy_count_of_a_watched_answer_and_banning_one_modes_handler(progress: Path) -> None:
    x = torch.randn(8, 8)
    with check("99-copies-of-watched") as c:
        mine = c.watch(lambda t: t.t().contiguous(), "relayout")
        assert len(c.copy_count(mine, x, expected=1).kernel_level) == 1

    class _Theirs(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            return func(*args, **(kwargs or {}))

    class _Mine(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            return func(*args, **(kwargs or {}))

    def uses(mode_cls):  # type: ignore[no-untyped-def]
        def run(t: torch.Tensor) -> torch.Tensor:
            with mode_cls():
                return t + 1
        return run

    with check("99-mode-ban-ok") as c:
        c.watch(uses(_Mine), forbid=[_Theirs.__torch_dispatch__])(x)
    with pytest.raises(CheckFailed, match="which this exercise asks you not to use"):
        with check("99-mode-ban") as c:
            c.watch(uses(_Theirs), forbid=[_Theirs.__torch_dispatch__])(x)


def test_secret_predictions_count_wrong_entries_without_naming_them(progress: Path) -> None:
    expected = {"a": True, "b": False, "c": True}
    with pytest.raises(CheckFailed) as info:
        with check("99-secret-dict") as c:
            c.equal({"a": True, "b": True, "c": False}, expected, what="BLOCKS", secret=True)
    assert "BLOCKS: 2 of 3 predictions are not right" in str(info.value) and "'b'" not in str(info.value)
    with check("99-secret-dict-ok") as c:
        c.equal(dict(expected), expected, what="BLOCKS", secret=True)


def test_a_watched_answer_may_run_inside_the_tests_own_mode(progress: Path) -> None:
    from torchlens_widgets.lenses.meters import OpCounter

    with check("99-watched-in-mode") as c:
        mine = c.watch(lambda t: t * 2, "double")
        with OpCounter() as counter:
            mine(torch.ones(3))
        c.equal(counter.ops["mul"], 1)


def test_rejects_wants_a_runtime_error_that_says_what_was_wrong() -> None:
    from torchlens_widgets.course.checks import CheckFailed

    def strict(x):
        if x < 0:
            raise RuntimeError("f: expected a non-negative number")
        return x

    with check("99-rejects-ok", points=1) as c:
        assert c.rejects(strict, -1, says=["non-negative"], what="-1") == "f: expected a non-negative number"
    for args, says, expect in [((1,), ["x"], "was accepted"), ((-1,), ["positive!"], "does not say"),
                               (("a",), [], "expected a RuntimeError")]:
        fn = strict if args != ("a",) else (lambda s: int(s))
        with pytest.raises(CheckFailed, match=expect), check("99-rejects-bad", points=1) as c:
            c.rejects(fn, *args, says=says)


def test_a_patch_made_before_the_checks_loaded_is_found_and_put_back() -> None:
    """An answer cell can run before any test cell imports the checks: the patch must not become 'the original'."""
    import subprocess
    import sys

    script = """
import torch
torch.equal = lambda *a, **k: True
torch.Tensor.stride = lambda self, *a: (1,)
from torchlens_widgets.course import check, CheckFailed
try:
    with check("zz-early", points=1) as c:
        c.equal(torch.ones(2), torch.zeros(2), what="x")
    print("PASSED")
except CheckFailed as exc:
    print("FAILED:", exc)
print("repaired:", torch.equal(torch.ones(2), torch.zeros(2)) is False, torch.ones(2, 3).stride() == (3, 1))
"""
    env_script = "import torch, sys\nimport torchlens_widgets\nprint('noted:', 'torchlens_widgets.course.integrity' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120).stdout
    assert "FAILED:" in out and "torch.equal was replaced before the checks were loaded" in out, out
    assert "torch.Tensor.stride was replaced before the checks were loaded" in out, out
    assert "repaired: True True" in out, out
    noted = subprocess.run([sys.executable, "-c", env_script], capture_output=True, text=True, timeout=120).stdout
    assert "noted: True" in noted, noted  # importing the package beside torch takes the snapshot at once


def test_a_runaway_recursion_in_the_answer_keeps_only_the_ends_of_its_traceback(progress: Path) -> None:
    """IPython took ~45 s to draw the 1000-frame traceback of a learner's recursive backward(): the check keeps the
    first and last frames and says how many it left out."""
    learner: dict[str, Any] = {}
    exec(compile("def visit(n):\n    return visit(n + 1)\n", "/tmp/ipykernel_0/learner.py", "exec"), learner)
    shown: list[str] = []
    import IPython
    import IPython.display

    with pytest.MonkeyPatch.context() as mp:  # a front end to show the feedback in
        mp.setattr(IPython, "get_ipython", lambda: object())
        mp.setattr(IPython.display, "display", lambda data, **kw: shown.append(data["text/plain"]))
        with pytest.raises(RecursionError) as info:
            with check("zz-recursion"):
                learner["visit"](0)
    depth, tb = 0, info.value.__traceback__
    while tb is not None:
        depth, tb = depth + 1, tb.tb_next
    assert depth <= 25, depth
    assert "frames in the middle are left out" in shown[-1], shown
