"""The shared prediction verdict: skipped, right or not quite."""

from __future__ import annotations

from torchlens_widgets.course.predict import verdict


def test_a_prediction_is_skipped_right_or_not_quite() -> None:
    assert verdict(None, 3) == "skipped"
    assert verdict(3, 3) == "right" and verdict((4, 28), (4, 28)) == "right"
    assert verdict(2, 3) == "not quite" and verdict("3", 3) == "not quite"


def test_a_rule_can_judge_instead_of_equality() -> None:
    assert verdict("fc1.weight", right="fc1.weight" in {"fc1.weight", "fc1.bias"}) == "right"
    assert verdict(True, right=False) == "not quite" and verdict(None, right=True) == "skipped"


def test_an_answer_that_claims_equality_is_not_believed_blindly() -> None:
    class Claims:
        def __eq__(self, other: object) -> object:
            return "yes"  # truthy, but not True

    assert verdict(Claims(), 3) == "not quite"


def test_a_dict_of_blanks_is_skipped_and_a_number_can_be_near_enough() -> None:
    assert verdict({"pointer": None, "accessor": None}, {"pointer": False, "accessor": True}) == "skipped"
    assert verdict({"pointer": False, "accessor": None}, {"pointer": False, "accessor": True}) == "not quite"
    assert verdict({}, {"a": 1}) == "not quite"
    assert verdict(1000, 1133, within=0.25) == "right" and verdict(800, 1133, within=0.25) == "not quite"
    assert verdict(0.4, 0.37, within=0.25) == "right" and verdict("1133", 1133, within=0.25) == "not quite"
    assert verdict(True, 1, within=0.25) == "not quite"  # a bool is not a number here
