"""CI's sample of wrong answers (tests/course/wrong_answers.sampled): fixed per commit, a gaming attempt in every
exercise's share, and over a few commits every wrong answer runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.course.wrong_answers import Wrong, sampled, wrong_answers_for

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]-*.ipynb"))


def test_the_same_seed_gives_the_same_sample_and_every_share_has_a_gaming_attempt() -> None:
    for path in NOTEBOOKS:
        wrong = wrong_answers_for(path)
        one, again = sampled(wrong, "abc123"), sampled(wrong, "abc123")
        assert one == again
        for gid, answers in one.items():
            assert 1 <= len(answers) <= 3 and any(w.gaming for w in answers), gid
            names = [w.name for w in wrong[gid]]
            assert [w.name for w in answers] == [n for n in names if n in {w.name for w in answers}], "order kept"


def test_different_commits_cover_every_wrong_answer() -> None:
    wrong = {gid: answers for path in NOTEBOOKS for gid, answers in wrong_answers_for(path).items()}
    seen: set[tuple[str, str]] = set()
    for k in range(40):
        seen |= {(gid, w.name) for gid, answers in sampled(wrong, f"commit{k}").items() for w in answers}
    assert seen == {(gid, w.name) for gid, answers in wrong.items() for w in answers}
    assert sampled(wrong, "a") != sampled(wrong, "b")


def test_a_share_without_a_gaming_attempt_stays_so_and_keep_must_be_positive() -> None:
    plain = {"x": [Wrong(str(i), "pass") for i in range(5)]}
    assert len(sampled(plain, "s")["x"]) == 3
    with pytest.raises(ValueError, match="at least one"):
        sampled(plain, "s", keep=0)
