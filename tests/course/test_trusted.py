"""The grader guards itself: notebook code cannot rebind its entry points or swap its code, a lens patched before
the checks load is still caught, and the settings an answer can leave behind (clock, autocast, Dynamo) count."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from torchlens_widgets.course import CheckFailed, check, integrity


def _run_as_notebook(code: str, tmp_path: Path) -> str:
    """Run `code` as a notebook cell would (module __main__), in a fresh process; its printed lines."""
    env = {"TORCHLENS_PROGRESS": str(tmp_path / "progress.json"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=str(Path(__file__).parents[2]))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


REFUSALS = """
import torch
import torchlens_widgets
from torchlens_widgets.course import check, exercises, integrity
from torchlens_widgets.course import checks

def attempt(label, fn):
    try:
        fn()
        print(label, "ALLOWED")
    except AttributeError as exc:
        print(label, "refused:", "belongs to the course's grader" in str(exc))

def _no_guard():
    integrity.tampering = lambda *a, **k: []
def _no_check():
    import torchlens_widgets.course as course
    course.check = None
def _swap_method():
    checks.Check.equal = lambda *a, **k: None
def _swap_enter():
    checks.check.__enter__ = lambda self: None
def _swap_code():
    fn = exercises.n01.crossover
    fn.__code__ = (lambda *a, **k: None).__code__
def _swap_defaults():
    checks.Check._guard.__defaults__ = (lambda: [],)
def _drop_module_name():
    del checks.strict_mismatch
def _swap_exercise():
    exercises.n01.crossover = lambda *a, **k: None

for label, fn in [("tampering", _no_guard), ("course.check", _no_check), ("Check.equal", _swap_method),
                  ("check.__enter__", _swap_enter), ("code", _swap_code), ("defaults", _swap_defaults),
                  ("del", _drop_module_name), ("exercise", _swap_exercise)]:
    attempt(label, fn)
from torchlens_widgets.course import CheckFailed
try:
    with check("zz-still-strict") as c:
        c.equal(1, 2)
    print("check PASSED")
except CheckFailed as exc:
    print("check failed:", "expected 2, got 1" in str(exc))
"""


def test_notebook_code_cannot_replace_the_grader(tmp_path: Path) -> None:
    out = _run_as_notebook(REFUSALS, tmp_path)
    for label in ("tampering", "course.check", "Check.equal", "check.__enter__", "code", "defaults", "del",
                  "exercise"):
        assert f"{label} refused: True" in out, out
    assert "check failed: True" in out, out


EARLY_LENS_PATCH = """
import torch
import torchlens_widgets
from torchlens_widgets.lenses import allocator, layout
fake = lambda *a, **k: {}
fake.__module__ = "torchlens_widgets.lenses.allocator"  # dressed as the lens's own function
allocator.counterfactual = fake
layout.storage_index = lambda *a, **k: 0
from torchlens_widgets.course import check, CheckFailed
try:
    with check("zz-early-lens") as c:
        c.equal(1, 1)
    print("PASSED")
except CheckFailed as exc:
    print("FAILED:", exc)
"""


def test_a_lens_patched_before_the_checks_are_imported_is_caught(tmp_path: Path) -> None:
    out = _run_as_notebook(EARLY_LENS_PATCH, tmp_path)
    assert "FAILED:" in out and "lenses.allocator.counterfactual was replaced" in out, out
    assert "lenses.layout.storage_index was replaced" in out, out


@pytest.fixture
def progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TORCHLENS_PROGRESS", str(tmp_path / "progress.json"))
    return tmp_path


def test_a_patched_clock_is_tampering(progress: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    real = time.perf_counter
    time.perf_counter = lambda: 0.0  # every call takes no time
    try:
        with pytest.raises(CheckFailed, match=r"time.perf_counter was replaced"):
            with check("99-clock") as c:
                c.equal(1, 1)
    finally:
        assert time.perf_counter is real  # put back by the check


def test_autocast_left_on_and_changed_settings_are_tampering(progress: Path) -> None:
    torch.autocast("cpu", dtype=torch.bfloat16).__enter__()
    with pytest.raises(CheckFailed, match=r"autocast was left on for cpu"):
        with check("99-autocast") as c:
            c.equal(1, 1)
    assert not torch.is_autocast_enabled("cpu")
    torch.set_float32_matmul_precision("medium")
    with pytest.raises(CheckFailed, match=r"float32 matmul precision was changed to 'medium'"):
        with check("99-precision") as c:
            c.equal(1, 1)
    assert torch.get_float32_matmul_precision() == "highest"


def test_a_changed_dynamo_setting_is_tampering_and_put_back(progress: Path) -> None:
    import torch._dynamo

    integrity.tampering()  # the checks note Dynamo's settings once it is loaded
    before = torch._dynamo.config.capture_scalar_outputs
    torch._dynamo.config.capture_scalar_outputs = not before
    with pytest.raises(CheckFailed, match=r"torch._dynamo.config.capture_scalar_outputs was changed"):
        with check("99-dynamo") as c:
            c.equal(1, 1)
    assert torch._dynamo.config.capture_scalar_outputs is before
    with torch._dynamo.config.patch(capture_scalar_outputs=before):  # the same value, patched in: not a change
        with check("99-dynamo-patched") as c:
            c.equal(1, 1)


def _slow(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] * 2
    return out


def test_timed_calls_run_on_fresh_inputs_and_must_be_right(progress: Path) -> None:
    def inputs() -> tuple[torch.Tensor]:
        return (torch.randn(400, 8),)

    with check("99-fast") as c:
        c.faster(lambda x: x * 2, _slow, at_least=2.0, inputs=inputs)
    cache: dict[int, torch.Tensor] = {}

    def remembers_one(x: torch.Tensor) -> torch.Tensor:  # right on the warm-up call, then answers from its cache
        return cache.setdefault(0, x * 2)

    with pytest.raises(CheckFailed, match=r"timed call 1, on fresh inputs\): values differ"):
        with check("99-cached") as c:
            c.faster(remembers_one, _slow, at_least=2.0, inputs=inputs)
    with pytest.raises(CheckFailed, match=r"at 3200 of 3200 elements; the first at index \[0, 0\]"):
        with check("99-fast-wrong") as c:
            c.faster(lambda x: x * 3 + 1, _slow, at_least=2.0, inputs=inputs)


def test_answers_of_the_learners_own_classes_are_refused_before_use(progress: Path) -> None:
    class Spy(dict):  # type: ignore[type-arg]
        def __getitem__(self, key: object) -> object:
            import sys

            return sys._getframe(1).f_locals  # reads the check's frame

    class Lying(torch.Tensor):
        def double(self) -> torch.Tensor:  # type: ignore[override]
            return torch.zeros(2, dtype=torch.float64)

    with pytest.raises(CheckFailed, match=r"answer\['a'\]: got an object of type Spy \(a subclass of dict\)"):
        with check("99-plain-dict") as c:
            c.plain({"a": Spy(x=1)})
    with pytest.raises(CheckFailed, match=r"got an object of type Lying \(a subclass of tensor\)"):
        with check("99-plain-tensor") as c:
            c.plain([torch.ones(2).as_subclass(Lying)])
    with check("99-plain-ok") as c:
        got = c.plain({"a": [1, (2.0, "x")], "b": {3}, "t": torch.ones(1)})
    assert got["a"] == [1, (2.0, "x")] and type(got["b"]) is set


def test_a_compiler_stance_left_on_is_tampering(progress: Path) -> None:
    import torch._dynamo

    torch.compiler.set_stance("force_eager")
    with pytest.raises(CheckFailed, match=r"set_stance\('force_eager'\) was left on"):
        with check("99-stance") as c:
            c.equal(1, 1)
    assert torch._dynamo.eval_frame._stance.stance == "default"


def test_a_code_swap_the_cheap_scan_leaves_out_is_found_by_the_next_full_one() -> None:
    """Checks read the grader functions' code only when a function's code or defaults changed since the last read
    (trusted counts those changes): a swap from code that is not a notebook's is still found and undone."""
    import ctypes

    from torchlens_widgets.course import checks, exercises, integrity, trusted

    assert checks  # the audit hook is on
    integrity.tampering()
    assert integrity.tampering() == []  # nothing changed: the code read is skipped
    fn = exercises.n01.crossover
    kept = fn.__code__
    fn.__code__ = (lambda *a, **k: None).__code__  # a test module is not notebook code: allowed, and counted
    assert integrity.tampering(inside=True, code=False) == []
    found = integrity.tampering()
    assert any("crossover" in f for f in found) and fn.__code__ is kept, found
    assert integrity.tampering() == []
    before = trusted.code_changes()
    ctypes.string_at(ctypes.addressof(ctypes.c_int(7)), 1)  # raw memory could rewrite a function: read again
    assert trusted.code_changes() > before + 1
