"""Visible and hidden cases: how a check names the case it is on in its feedback."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
U = TypeVar("U")


def named(hidden: Iterable[T] | None, visible: Sequence[T], describe: Callable[[T], str]) -> Iterator[tuple[str, T]]:
    """(label, case) for the visible cases, each described, or for the hidden ones, numbered only: feedback at
    grading never shows a hidden case's content."""
    if hidden is None:
        for case in visible:
            yield describe(case), case
        return
    for number, case in enumerate(hidden, 1):
        yield f"hidden case {number}", case


def numbered(hidden: Iterable[T] | None, visible: Iterable[U], expand: Callable[[T], Iterable[U]]) -> Iterator[tuple[str, U]]:
    """(label, item) for checks whose cases hold many items (a seed of random layouts): the visible items with an
    empty label (the check describes each), or each hidden case's items, from `expand`, as "hidden case N"."""
    if hidden is None:
        for item in visible:
            yield "", item
        return
    for number, case in enumerate(hidden, 1):
        for item in expand(case):
            yield f"hidden case {number}", item


@contextlib.contextmanager
def errors_by_type(c: Any, label: str, secret: bool) -> Iterator[None]:
    """On a hidden case, an error the answer raised is named by its type only: its message (torch's own too) can hold
    the case's sizes. The check's own verdicts (AssertionErrors) pass through."""
    if not secret:
        yield
        return
    try:
        yield
    except AssertionError:
        raise
    except Exception as exc:
        c.fail(f"{label}: your code raised {type(exc).__name__} on this case")
