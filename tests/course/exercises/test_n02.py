"""Notebook 02's exercise checks, without a notebook: references pass visible and hidden cases; wrong answers
fail saying why; hidden cases are named by number; the checks' helpers and tables are off limits."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.course.wrong_answers.nb02 import _rule
from torchlens_widgets.course.exercises import n02

PREDICTED = {"A": ((6, 1), 30), "B": ((30, 1), 12), "C": ((1, 6, 30), 0), "D": ((30, 12, 1), 33),
             "E": ((1, 6), 61), "F": ((30, 0, 1), 0), "G": ((30, 10), 5), "H": ((6, 1), 92)}
SHARES = {"a.t()", "a[1]", "a[:, ::2]", "a.view(-1, 4)", "a.reshape(2, -1)", "a.flatten()", "a.contiguous()",
          "a.expand(2, -1, -1)", "a.detach()", "a.diagonal()", "a.to(torch.float32)", "a.unfold(1, 3, 1)"}


def storage_position(index, shape, stride, offset):  # type: ignore[no-untyped-def]
    return offset + sum(i * s for i, s in zip(index, stride))


def my_transpose(x):  # type: ignore[no-untyped-def]
    return x.as_strided((x.shape[1], x.shape[0]), (x.stride(1), x.stride(0)), x.storage_offset())


def _reference_rule() -> Any:
    """The reference view rule, from the wrong-answer suite's template with nothing broken."""
    namespace: dict[str, Any] = {}
    exec(_rule(), namespace)
    return namespace["view_strides"]


view_strides = _reference_rule()


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("02-predict-strides", lambda c: (n02.predict_strides(c, PREDICTED),
                                                    n02.predict_strides(c, PREDICTED, hidden="EFGH"))) is None
    assert verdict("02-storage-position", lambda c: (n02.storage_position(c, storage_position), n02.storage_position(
        c, storage_position, hidden=[("random 7", "list"), ("special", "tuple")]))) is None
    assert verdict("02-which-views", lambda c: (n02.which_views(c, SHARES),
                                                n02.which_views(c, frozenset(SHARES), hidden=[(6, 8)]))) is None
    assert verdict("02-my-transpose", lambda c: (n02.my_transpose(c, my_transpose), n02.my_transpose(
        c, my_transpose, hidden=["strided slice", "1 x 5", "expanded"]))) is None
    assert verdict("02-reshape-as-view", lambda c: (n02.reshape_as_view(c, view_strides), n02.reshape_as_view(
        c, view_strides, hidden=[(torch.empty(2, 0, 3), (0,)), (torch.tensor(5.0), (1, 1)), 7]))) is None


@pytest.mark.parametrize(("answer", "says"), [
    (lambda x: x.t(), "ran aten.t"),
    (lambda x: x.t().contiguous(), "ran aten."),
    (lambda x: x.as_strided((x.shape[1], x.shape[0]), (x.stride(1), x.stride(0)), 0), "hidden case 1 has the wrong"),
    (lambda x: x.as_strided((x.shape[1], x.shape[0]), (1, x.shape[1]), x.storage_offset()), "hidden case 1"),
])
def test_wrong_transposes_fail_for_their_reason(verdict, answer, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("02-my-transpose", lambda c: (n02.my_transpose(c, answer), n02.my_transpose(
        c, answer, hidden=["strided slice", "1 x 5", "expanded"])))
    assert message is not None and says in message, message


def test_a_wrong_view_set_says_how_many_not_which(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("02-which-views", lambda c: n02.which_views(c, SHARES - {"a.detach()", "a.diagonal()"}))
    assert "2 entries missing" in message and "a.detach()" not in message


def test_hidden_reshape_cases_are_numbered_and_keep_their_expected_strides(verdict) -> None:  # type: ignore[no-untyped-def]
    def no_empty_rule(shape, stride, new_shape):  # type: ignore[no-untyped-def]
        return None if 0 in shape else view_strides(shape, stride, new_shape)

    message = verdict("02-reshape-as-view", lambda c: n02.reshape_as_view(
        c, no_empty_rule, hidden=[(torch.empty(3, 4), (12,)), (torch.empty(2, 0, 3), (0,))]))
    assert message.startswith("hidden case 2:") and "(2, 0, 3)" not in message


def test_the_checks_helpers_are_off_limits(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("02-reshape-as-view", lambda c: n02.reshape_as_view(
        c, lambda shape, stride, new: n02._torch_says(torch.empty(1000).as_strided(shape, stride), new)[0]))
    assert "one of the check's own helpers" in message


def test_a_case_table_cannot_be_rewritten(verdict) -> None:  # type: ignore[no-untyped-def]
    table, code = n02.POSITION_CASES, n02.POSITION_CASES["random 2"].__code__
    n02.POSITION_CASES["random 2"].__code__ = (lambda: []).__code__  # no views: nothing to check
    message = verdict("02-storage-position", lambda c: n02.storage_position(c, lambda *a: 0))
    assert "were changed" in message and n02.POSITION_CASES["random 2"].__code__ is code
    assert n02.POSITION_CASES is table
