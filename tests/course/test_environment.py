"""The start page's self-check: one line per requirement, the fix for what is missing, never an exception."""

from __future__ import annotations

import pytest

from torchlens_widgets.course import environment
from torchlens_widgets.course.environment import TORCH_PIN, Need, check_environment, environment_report


def test_this_machine_meets_the_pins_the_course_asserts_against() -> None:
    needs = {n.what: n for n in check_environment()}
    assert needs[f"torch {TORCH_PIN}"].ok, needs[f"torch {TORCH_PIN}"]
    assert all(n.needed_for and n.found for n in needs.values())
    assert not needs["a GPU (optional)"].required


def test_a_missing_compiler_and_a_wrong_torch_are_named_with_their_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    monkeypatch.setattr(environment, "_version", lambda dist: "2.12.1" if dist == "torch" else None)
    needs = {n.what: n for n in check_environment()}
    assert not needs["a C++ compiler (g++)"].ok and needs["a C++ compiler (g++)"].found == "not found"
    assert not needs[f"torch {TORCH_PIN}"].ok and needs[f"torch {TORCH_PIN}"].found == "2.12.1"
    report = environment_report(list(needs.values()))
    assert "missing  a C++ compiler (g++)" in report and "fix: apt-get install g++" in report
    assert f'pip install "torch=={TORCH_PIN}"' in report and report.splitlines()[-1].startswith("missing: ")


def test_an_optional_piece_is_not_reported_missing() -> None:
    needs = [Need("a", True, "1", "01"), Need("a GPU (optional)", False, "none", "07", "x", required=False)]
    report = environment_report(needs)
    assert report.splitlines()[-1] == "everything the course needs is here" and "fix:" not in report
