"""Notebook 03's exercise checks, without a notebook: references pass; a hidden copy, a wrong rule or a copied
answer fails saying why; hidden cases are numbered and their copies are not listed."""

from __future__ import annotations

import math

import pytest

from torchlens_widgets.course.exercises import n03


def column_zscores(x):  # type: ignore[no-untyped-def]
    return (x - x.mean(dim=0)) / x.std(dim=0)


def contiguity(shape, stride):  # type: ignore[no-untyped-def]
    def dense_in_order(dims):  # type: ignore[no-untyped-def]
        expected = 1
        for d in dims:
            if shape[d] != 1:
                if stride[d] != expected:
                    return False
                expected *= shape[d]
        return True

    row_major = any(n == 0 for n in shape) or dense_in_order(range(len(shape) - 1, -1, -1))
    return bool(row_major), bool(len(shape) == 4 and dense_in_order((1, 3, 2, 0)))


def view_and_copy_bytes(shape, stride, itemsize):  # type: ignore[no-untyped-def]
    if any(n == 0 for n in shape):
        return 0, 0
    storage = (1 + sum((n - 1) * s for n, s in zip(shape, stride))) * itemsize
    return storage, 0 if contiguity(shape, stride)[0] else math.prod(shape) * itemsize


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("03-remove-hidden-copy", lambda c: (n03.column_zscores(c, column_zscores), n03.column_zscores(
        c, column_zscores, hidden=[name for name in n03.ZSCORE_INPUTS if not name.startswith("randn")]))) is None
    assert verdict("03-contiguity-predictions", lambda c: (n03.contiguity(c, contiguity),
                                                           n03.contiguity(c, contiguity, hidden=[11]))) is None
    assert verdict("03-expand-bytes", lambda c: (n03.view_and_copy_bytes(c, view_and_copy_bytes),
                                                 n03.view_and_copy_bytes(c, view_and_copy_bytes, hidden=[5]))) is None


def test_the_slow_version_fails_on_its_copies_and_lists_them(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("03-remove-hidden-copy", lambda c: n03.column_zscores(c, n03._slow_baseline))
    assert message is not None and "column_zscores(randn(8192, 32)) made" in message and "aten::" in message


def test_a_hidden_copy_is_counted_without_its_shapes(verdict) -> None:  # type: ignore[no-untyped-def]
    def to_float32(x):  # type: ignore[no-untyped-def]
        return column_zscores(x).float()  # a copy for float64 inputs only

    message = verdict("03-remove-hidden-copy", lambda c: n03.column_zscores(c, to_float32, hidden=["float64 300 x 40"]))
    assert message.startswith("hidden case 1 made 1 data copies, expected 0.") and "300" not in message


@pytest.mark.parametrize(("answer", "says"), [
    (lambda shape, stride: (True, False), "is_contiguous() as predicted by contiguity((2, 3, 4, 5), (60, 1, 15, 3))"),
    (lambda shape, stride: (1, 0), "expected True"),
])
def test_wrong_contiguity_rules_fail(verdict, answer, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("03-contiguity-predictions", lambda c: n03.contiguity(c, answer))
    assert message is not None and says in message, message


def test_an_answer_fitted_to_the_visible_views_fails_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    seen = {}
    assert verdict("03-expand-bytes", lambda c: n03.view_and_copy_bytes(
        c, lambda *a: seen.setdefault(a, view_and_copy_bytes(*a)))) is None
    message = verdict("03-expand-bytes", lambda c: n03.view_and_copy_bytes(
        c, lambda shape, stride, size: seen.get((tuple(shape), tuple(stride), size), (size, 0)), hidden=[5]))
    assert message.startswith("hidden case 1") and "which is not right" in message
