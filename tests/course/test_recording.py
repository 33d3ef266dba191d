"""Recording what an answer ran: a copy of a forbidden function, or of one of the check's own helpers, counts
as the function itself, however it was made (its code object renamed, or its source re-executed elsewhere)."""

from __future__ import annotations

import inspect
import textwrap
import types
from typing import Any

import torch

from torchlens_widgets.course.exercises import exercise_files, n03
from torchlens_widgets.course.recording import record


def banned(x: torch.Tensor) -> torch.Tensor:
    """A helper long enough to be worth copying."""
    total = x.sum()
    for _ in range(3):
        total = total + x.mean() * 2 - x.max()
    return total / x.numel()


def test_a_renamed_copy_of_a_forbidden_function_is_the_function() -> None:
    copy = types.FunctionType(banned.__code__.replace(co_name="mine", co_filename="<my cell>"), globals(), "mine")
    rec = record(lambda x: copy(x), torch.ones(3), forbid=[banned])
    assert rec.forbidden == ["mine, a copy of banned"]


def test_a_helper_re_executed_from_its_source_is_still_the_checks_helper() -> None:
    source = textwrap.dedent(inspect.getsource(n03._slow_baseline)).replace("_slow_baseline", "my_slow")
    namespace: dict[str, Any] = {"torch": torch}
    exec(compile(source, "<answer-cell-9>", "exec"), namespace)
    rec = record(namespace["my_slow"], torch.randn(6, 3), forbid_files=exercise_files())
    assert rec.forbidden == ["my_slow, a copy of _slow_baseline (one of the check's own helpers)"], rec.forbidden


def test_short_honest_functions_never_match_by_chance() -> None:
    def mine(t: torch.Tensor) -> torch.Tensor:
        return t.t()

    assert record(mine, torch.ones(2, 3), forbid_files=exercise_files()).forbidden == []


def test_raw_memory_through_ctypes_is_an_escape() -> None:
    import ctypes

    def writes_through_a_pointer(t: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(t)
        address = out.untyped_storage().data_ptr()
        (ctypes.c_float * t.numel()).from_address(address)[0] = 1.0
        return out

    escapes = record(writes_through_a_pointer, torch.ones(3)).escapes
    assert "UntypedStorage.data_ptr: reads raw memory addresses" in escapes
    assert any(e.startswith("ctypes.cdata: reaches memory through ctypes") for e in escapes), escapes


def test_a_helper_generator_closed_during_a_recording_is_not_the_answers_call() -> None:
    import gc

    from torchlens_widgets.course.exercises._cases import named

    left = {"rows": named(None, [1, 2], str)}
    next(left["rows"])  # a check that failed half way through its cases leaves its generator suspended

    def answer(x: int) -> int:
        left.clear()  # the garbage collector closes it while the answer runs
        gc.collect()
        return x

    assert record(answer, 1, forbid_files=exercise_files()).forbidden == []
    assert record(lambda x: list(named(None, [x], str)), 1, forbid_files=exercise_files()).forbidden == [
        "named (one of the check's own helpers)"]


def test_dynamo_is_imported_outside_the_profile_hook() -> None:
    """torch imports Dynamo on the first op under a dispatch mode; the recorder spots the wrapper that does it and
    imports Dynamo itself, unprofiled (under the hook it took ~30 s in a fresh kernel). Run in a fresh process."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from torchlens_widgets.course import recording\n"
        "assert recording._DYNAMO_GATE is not None, 'torch._compile._disable_dynamo changed'\n"
        "assert 'torch._dynamo' not in sys.modules\n"
        "rec = recording.record(lambda x: x @ x, torch.ones(2, 2))\n"
        "assert 'torch._dynamo' in sys.modules and rec.aten, rec.aten\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]
