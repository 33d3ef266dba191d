"""Predict, then see: how a learner's prediction did, said the same way in every notebook."""

from __future__ import annotations

from typing import Any

__all__ = ["verdict"]


def verdict(predicted: Any, actual: Any = None, *, right: bool | None = None) -> str:
    """'skipped' when nothing was predicted (None), else 'right' or 'not quite': equal to `actual`, or as
    `right` says where a rule judges the prediction (e.g. membership in a set)."""
    if predicted is None:
        return "skipped"
    ok = predicted == actual if right is None else right
    return "right" if ok is True else "not quite"
