"""Every exercise's checks fail on its released stub, reject its wrong answers (mistakes and gaming attempts), never
quote a hidden test in their feedback, and pass the reference."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.course.wrong_answers import run_wrong_answers, sampled, wrong_answers_for
from torchlens_widgets.course.assemble import hidden_lines

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]-*.ipynb"))
MIN_WRONG = 4
# Run whole, every cell in order as a learner would (the others run only the cells their exercises need).
WHOLE = ("01-",)
# `make test-wrong-answers` (CI) sets a seed: each exercise then runs a sample of its wrong answers, a different one
# per commit (see `sampled`); unset (`make test-wrong-answers-all`, or plain pytest) runs every one.
SAMPLE_SEED = os.environ.get("TORCHLENS_WRONG_ANSWER_SAMPLE", "")


def _graded_ids(path: Path) -> list[str]:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return [
        c.metadata["nbgrader"]["grade_id"] for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_exercise_has_wrong_answers_including_a_gaming_attempt(path: Path) -> None:
    wrong = wrong_answers_for(path)
    for gid in _graded_ids(path):
        answers = wrong.get(gid, [])
        assert len(answers) >= MIN_WRONG, f"{gid}: {len(answers)} wrong answers, need at least {MIN_WRONG}"
        assert any(w.gaming for w in answers), f"{gid}: needs at least one gaming attempt"
        names = [w.name for w in answers]
        assert len(names) == len(set(names)), f"{gid}: duplicate wrong-answer names"


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_wrong_answers_fail_and_the_reference_passes(path: Path) -> None:
    wrong = wrong_answers_for(path)
    if SAMPLE_SEED:
        wrong = sampled(wrong, SAMPLE_SEED)
    if not wrong:
        pytest.fail(f"no wrong answers for {path.name} (tests/course/wrong_answers/nb{path.name[:2]}.py)")
    stubs: list = []
    secrets: list = []
    outcomes, reference = run_wrong_answers(path, wrong, stubs=stubs, secrets=secrets,
                                            whole=path.name.startswith(WHOLE))
    ids = _graded_ids(path)
    assert [o.grade_id for o in stubs] == ids, f"every exercise's stub must be run: {[o.grade_id for o in stubs]} != {ids}"
    not_failed = {o.grade_id: f"{o.answer_error}: {o.feedback[:300]}" for o in stubs if not o.failed_with_feedback}
    assert not not_failed, f"checks that passed or crashed on their released stub: {not_failed}"
    passed_wrongly = [
        f"{o.grade_id} / {o.name}: " + (f"answer cell raised {o.answer_error}; " if o.answer_error else "")
        + ("the check passed" if "passed" in o.feedback and "✗" not in o.feedback else "wrong failure reason")
        + f"\n    feedback: {o.feedback[:600]}"
        for o in outcomes if not o.failed_with_feedback
    ]
    assert not passed_wrongly, "wrong answers not rejected as intended:\n" + "\n".join(passed_wrongly)
    import nbformat

    secret = [line for line in hidden_lines(nbformat.read(path, as_version=4)) if len(line) >= 8]
    leaked = [f"{o.grade_id} / {o.name}: {line}" for o in outcomes + stubs for line in secret if line in o.feedback]
    assert not leaked, "feedback quotes a hidden test (the grader would show it to the student):\n" + "\n".join(leaked)
    # a wrong prediction, where the learner makes it: the expected values are nowhere in the kernel's globals
    assert all(o.failed_with_feedback for o in secrets), [(o.grade_id, o.name, o.feedback[:300]) for o in secrets]
    exposed = [f"{o.grade_id} / {o.name}: {leak}" for o in secrets for leak in o.details]
    assert not exposed, "a wrong prediction leaves the expected value reachable from the notebook's globals:\n" + \
        "\n".join(exposed)
    bad_reference = {gid: text for gid, text in reference.items() if text.startswith("FAILED")}
    assert not bad_reference, f"the reference answer failed after the wrong answers: {bad_reference}"
