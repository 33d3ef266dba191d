"""Visible and hidden cases: how a check names the case it is on in its feedback."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def named(hidden: Iterable[T] | None, visible: Sequence[T], describe: Callable[[T], str]) -> Iterator[tuple[str, T]]:
    """(label, case) for the visible cases, each described, or for the hidden ones, numbered only: feedback at
    grading never shows a hidden case's content."""
    if hidden is None:
        for case in visible:
            yield describe(case), case
        return
    for number, case in enumerate(hidden, 1):
        yield f"hidden case {number}", case

