"""Notebook 07's exercise checks, without a notebook: references pass visible and hidden cases; wrong predictions,
fragmentations and settings fail saying why, and a hidden case is named by its number only."""

from __future__ import annotations

import pytest

from torchlens_widgets.course.exercises import n07

MiB = 1024**2
PREDICTED_A = (42 * MiB, 3)
PREDICTED_B = (48 * MiB, 4)


def fragment(sim, x_mib):  # type: ignore[no-untyped-def]
    activations, kept = [], []
    for _ in range(6):
        activations.append(sim.malloc(9 * MiB))
        kept.append(sim.malloc(3 * MiB // 2))
        activations.append(sim.malloc(9 * MiB))
    for a in activations:
        sim.free(a)
    return kept


def fitted_to_24(sim, x_mib):  # type: ignore[no-untyped-def]
    kept, big = [], []
    for _ in range(6):
        kept.append(sim.malloc(3 * MiB // 2))
        big.append(sim.malloc(18 * MiB))
    for b in big:
        sim.free(b)
    return kept


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("07-predict-reserved", lambda c: (n07.predict_reserved(c, PREDICTED_A),
                                                     n07.predict_reserved(c, PREDICTED_B, hidden=["B"]))) is None
    assert verdict("07-construct-fragmentation", lambda c: (
        n07.construct_fragmentation(c, fragment), n07.construct_fragmentation(c, fragment, hidden=[10, 13, 32]))) is None
    for settings in ({"max_split_size_mb": 20}, {"expandable_segments": True}):
        assert verdict("07-avoid-oom", lambda c, s=settings: (  # type: ignore[misc]
            n07.avoid_oom(c, s), n07.avoid_oom(c, s, hidden=[((40, 48, 56, 64), 100)]))) is None


@pytest.mark.parametrize(("predicted", "says"), [
    ((34 * MiB, 3), "sequence A: (reserved_bytes, segments)[0]: got 35651584, which is not right"),
    ((3, 42 * MiB), "which is not right"),
    ((42.0 * MiB, 3.0), "got a tuple of float, float"),
    ([42 * MiB, 3], "got a list of int, int"),
])
def test_wrong_predictions_fail_without_the_expected_value(verdict, predicted, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("07-predict-reserved", lambda c: n07.predict_reserved(c, predicted))
    assert message is not None and says in message and str(42 * MiB) not in message


def test_a_prediction_of_the_learners_own_class_runs_none_of_its_code(verdict) -> None:  # type: ignore[no-untyped-def]
    class Always(int):
        def __eq__(self, other):  # type: ignore[no-untyped-def]
            return True

        def __repr__(self):  # type: ignore[no-untyped-def]
            raise AssertionError("the check ran the answer's __repr__")

    class Pair(tuple):  # type: ignore[type-arg]
        pass

    for predicted in ((Always(0), Always(0)), Pair(PREDICTED_A)):
        message = verdict("07-predict-reserved", lambda c, p=predicted: n07.predict_reserved(c, p))  # type: ignore[misc]
        assert message is not None and "expected a tuple of two ints" in message


def test_a_hidden_prediction_is_named_by_number_without_its_decisions(verdict) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):  # the third failure would show every tier and the expected value of a visible case
        message = verdict("07-predict-reserved", lambda c: n07.predict_reserved(c, (44 * MiB, 3), hidden=["B"]))
    assert message is not None and message.startswith("hidden case 1: (reserved_bytes, segments)[0]: got 46137344")
    assert "decision" not in message and str(48 * MiB) not in message and "sequence B" not in message


@pytest.mark.parametrize(("answer", "says"), [
    (lambda sim, x_mib: [sim.free(sim.malloc(9 * MiB)) for _ in range(12)], "only 20.00 MiB are reserved"),
    (lambda sim, x_mib: [sim.malloc(9 * MiB) for _ in range(12)], "are still allocated"),
    (lambda sim, x_mib: [sim.free(h) for h in [sim.malloc(9 * MiB) for _ in range(12)]], "empty_cache() returned"),
])
def test_wrong_fragmentations_fail_saying_why(verdict, answer, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("07-construct-fragmentation", lambda c: n07.construct_fragmentation(c, answer))
    assert message is not None and says in message


def test_a_fragmentation_fitted_to_the_visible_size_fails_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("07-construct-fragmentation", lambda c: n07.construct_fragmentation(c, fitted_to_24)) is None
    message = verdict("07-construct-fragmentation",
                      lambda c: n07.construct_fragmentation(c, fitted_to_24, hidden=[24, 10, 32]))
    assert message is not None and "hidden case 2: the request fitted one of your cached free blocks" in message
    assert "x_mib" not in message and "10 MiB" not in message.split("\n")[0]


@pytest.mark.parametrize(("settings", "says"), [
    ({}, "still ran out of memory"),
    ({"roundup_power2_divisions": 4}, "still ran out of memory"),
    ({"capacity": 10**12}, "allowed are"),
    ({"max_split_size_mb": "20"}, "numbers or True/False"),
    ({"max_split_size_mb": 5}, "the simulator rejects these settings"),
    ([("max_split_size_mb", 20)], "must be a dict"),
])
def test_wrong_settings_fail_saying_why(verdict, settings, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("07-avoid-oom", lambda c: n07.avoid_oom(c, settings))
    assert message is not None and says in message


def test_settings_of_the_learners_own_dict_class_are_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    class Settings(dict):  # type: ignore[type-arg]
        def items(self):  # type: ignore[no-untyped-def]
            raise AssertionError("the check called the answer's own method")

    message = verdict("07-avoid-oom", lambda c: n07.avoid_oom(c, Settings(max_split_size_mb=20)))
    assert message is not None and "must be a dict" in message


def test_a_split_limit_fitted_to_the_visible_trace_fails_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    settings = {"max_split_size_mb": 100}
    assert verdict("07-avoid-oom", lambda c: n07.avoid_oom(c, settings)) is None
    message = verdict("07-avoid-oom", lambda c: n07.avoid_oom(c, settings, hidden=[((40, 48, 56, 64), 100)]))
    assert message is not None and "hidden case 1: with {'max_split_size_mb': 100} the replay still ran out" in message
    assert "40" not in message and "MiB" not in message.split("Hint")[0]
