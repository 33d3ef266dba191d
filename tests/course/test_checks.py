"""The check API: passes record progress, wrong answers fail with teaching feedback, fakes are caught."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from torchlens_widgets.course import CheckFailed, check, strict_mismatch


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
    with check("99.demo", points=2) as c:
        c.equal((1, 4), (1, 4))
    data = json.loads(progress.read_text())
    assert data["checks"]["99.demo"]["points"] == 2


def test_failure_raises_and_records_nothing(progress: Path) -> None:
    with pytest.raises(CheckFailed, match=r"stride of x.t\(\)\[1\]: expected 4, got 3"):
        with check("99.fail") as c:
            c.equal((1, 3), (1, 4), what="stride of x.t()")
    assert not progress.exists() or "99.fail" not in progress.read_text()


@pytest.mark.parametrize("fake", [AlwaysEqual(), LyingTuple((9, 9)), LyingInt(7), [AlwaysEqual(), AlwaysEqual()]])
def test_tampered_eq_cannot_pass(fake: object, progress: Path) -> None:
    with pytest.raises(CheckFailed):
        with check("99.fake") as c:
            c.equal(fake, (1, 4))
    with pytest.raises(CheckFailed):
        with check("99.fake-int") as c:
            c.equal(fake, 3)


def test_tensor_subclass_cannot_fake_its_layout(progress: Path) -> None:
    x = torch.arange(12.0).reshape(3, 4)
    liar = x.clone().as_subclass(LyingTensor)
    with pytest.raises(CheckFailed, match="plain torch.Tensor"):
        with check("99.liar") as c:
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
    with pytest.raises(TypeError, match="cannot compare"):
        strict_mismatch(object(), object())


def test_same_layout_feedback_names_the_difference(progress: Path) -> None:
    x = torch.arange(12.0).reshape(3, 4)
    with pytest.raises(CheckFailed, match=r"stride: expected \[1, 4\], got \[3, 1\]"):
        with check("99.layout") as c:
            c.same_layout(x.t().contiguous(), x.t())
    with check("99.layout-ok") as c:
        c.same_layout(torch.as_strided(x, (4, 3), (1, 4)), x.t())


def test_view_and_storage_checks(progress: Path) -> None:
    x = torch.arange(6.0)
    with check("99.view") as c:
        c.is_view_of(x[::2], x)
        c.shares_storage(x, x.clone(), expected=False)
    with pytest.raises(CheckFailed, match="a copy was made"):
        with check("99.view-bad") as c:
            c.is_view_of(x[::2].clone(), x)


def test_copy_count(progress: Path) -> None:
    x = torch.randn(8, 8)
    with check("99.copies") as c:
        c.copy_count(lambda t: t.reshape(64), x, expected=0)
    with pytest.raises(CheckFailed, match="made 1 data copies, expected 0"):
        with check("99.copies-bad") as c:
            c.copy_count(lambda t: t.t().reshape(64), x, expected=0)


def test_stub_and_crash_become_check_failures(progress: Path) -> None:
    def stub() -> None:
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match=r"not done yet \(NotImplementedError\)\. Write") as info:
        with check("99.stub") as c:
            c.equal(stub(), 1)
    assert isinstance(info.value.__cause__, NotImplementedError)
    with pytest.raises(CheckFailed, match=r"not done yet \(NameError: name 'undefined_answer'"):
        with check("99.missing") as c:
            c.equal(undefined_answer, 1)  # type: ignore[name-defined]  # noqa: F821
    with pytest.raises(CheckFailed, match="raised ZeroDivisionError"):
        with check("99.crash") as c:
            c.equal(1 // 0, 1)


def test_faster(progress: Path) -> None:
    x = torch.randn(256, 256)
    with pytest.raises(CheckFailed, match="target is 1000"):
        with check("99.speed") as c:
            c.faster(lambda: x.sum(), lambda: x.sum(), at_least=1000.0)


def test_bad_check_arguments() -> None:
    with pytest.raises(ValueError, match="grade_id"):
        check("")
    with pytest.raises(ValueError, match="positive"):
        check("99.x", points=0)
    assert os.environ["TORCHLENS_PROGRESS"]
