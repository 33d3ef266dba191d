"""Predict, then see: how a learner's prediction did, said the same way in every notebook."""

from __future__ import annotations

from typing import Any

__all__ = ["verdict"]


def verdict(predicted: Any, actual: Any = None, *, right: bool | None = None, within: float | None = None) -> str:
    """'skipped' when nothing was predicted (None, or a dict whose every entry is still None), else 'right' or
    'not quite': equal to `actual`; for a number with `within`, no further from `actual` than that fraction of it;
    or as `right` says where a rule judges the prediction (e.g. membership in a set)."""
    if predicted is None or (type(predicted) is dict and predicted and all(v is None for v in predicted.values())):
        return "skipped"
    if right is not None:
        ok: Any = right
    elif within is not None:
        numbers = all(type(v) in (int, float) for v in (predicted, actual))  # exact types: no learner's own class
        ok = numbers and abs(predicted - actual) <= within * abs(actual)
    else:
        ok = predicted == actual
    return "right" if ok is True else "not quite"
