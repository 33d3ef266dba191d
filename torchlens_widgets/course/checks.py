"""The check API for graded test cells: one `check` per graded item, with points and teaching feedback.

    with check("02.transpose-strides", points=2) as c:
        c.equal(my_stride, (1, 4), what="stride of x.t()")
        c.same_layout(my_view, x.t())

The first failed assertion raises `CheckFailed` (an AssertionError, so nbgrader scores the cell 0)
after displaying feedback; a stub's NotImplementedError or a missing name fails the same way.
Passes are recorded in the local progress store. Comparisons never call the learner's `__eq__`.
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Callable
from typing import Any, Literal

import torch

from ..copies import CopyReport, count_copies
from ..layout import Layout, LayoutError, layout
from .progress import ProgressStore

__all__ = ["Check", "CheckFailed", "check", "strict_mismatch"]

_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


class CheckFailed(AssertionError):
    """A graded check did not pass; the message says what was expected and what to try."""


def _describe(v: Any) -> str:
    if isinstance(v, torch.Tensor) and type(v) in _PLAIN_TENSOR_TYPES:
        return f"tensor(shape={list(v.shape)}, dtype={str(v.dtype).replace('torch.', '')})"
    if type(v) in (int, float, bool, str, tuple, list, type(None), torch.Size, torch.dtype):
        r = repr(v)
        return r if len(r) <= 80 else r[:77] + "..."
    return f"an object of type {type(v).__name__}"


def strict_mismatch(got: Any, expected: Any, path: str = "answer", rel_tol: float = 0.0) -> str | None:
    """Explain how `got` differs from the trusted `expected`, or None if equal.

    Types are checked exactly before values are compared with the builtin types' own equality,
    so an object whose `__eq__` always returns True cannot pass.
    """
    te = type(expected)
    if expected is None:
        return None if got is None else f"{path}: expected None, got {_describe(got)}"
    if te is bool:
        if type(got) is not bool:
            return f"{path}: expected True or False, got {_describe(got)}"
        return None if got is expected else f"{path}: expected {expected}, got {got}"
    if te is int or te is float:
        if type(got) not in (int, float):
            return f"{path}: expected a number like {expected!r}, got {_describe(got)}"
        if te is int and type(got) is int:
            return None if int.__eq__(got, expected) else f"{path}: expected {expected}, got {got}"
        g, e = float(got), float(expected)
        ok = float.__eq__(g, e) or (rel_tol > 0 and math.isclose(g, e, rel_tol=rel_tol))
        return None if ok else f"{path}: expected {expected!r}, got {got!r}"
    if te is str:
        if type(got) is not str:
            return f"{path}: expected text, got {_describe(got)}"
        return None if str.__eq__(got, expected) else f"{path}: expected {expected!r}, got {got!r}"
    if te is torch.dtype:
        return None if type(got) is torch.dtype and got is expected else f"{path}: expected {expected}, got {_describe(got)}"
    if te in (tuple, list, torch.Size):
        if type(got) not in (tuple, list, torch.Size):
            return f"{path}: expected a sequence like {_describe(expected)}, got {_describe(got)}"
        if len(got) != len(expected):
            return f"{path}: expected {len(expected)} entries, got {len(got)} ({_describe(got)})"
        for k, (g, e) in enumerate(zip(got, expected)):
            m = strict_mismatch(g, e, f"{path}[{k}]", rel_tol)
            if m:
                return m
        return None
    if te in (set, frozenset):
        if type(got) not in (set, frozenset):
            return f"{path}: expected a set, got {_describe(got)}"
        plain = (int, str, bool, float)
        if not all(type(x) in plain for x in got):
            return f"{path}: set entries must be plain numbers or strings"
        missing, extra = set(expected) - set(got), set(got) - set(expected)
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing {sorted(missing, key=repr)}")
            if extra:
                parts.append(f"unexpected {sorted(extra, key=repr)}")
            return f"{path}: " + "; ".join(parts)
        return None
    if te is dict:
        if type(got) is not dict:
            return f"{path}: expected a dict, got {_describe(got)}"
        m = strict_mismatch(set(got), set(expected), f"{path} keys")
        if m:
            return m
        for k in expected:
            m = strict_mismatch(got[k], expected[k], f"{path}[{k!r}]", rel_tol)
            if m:
                return m
        return None
    if isinstance(expected, torch.Tensor):
        if type(got) not in _PLAIN_TENSOR_TYPES:
            return f"{path}: expected a plain torch.Tensor, got {_describe(got)}"
        if got.dtype != expected.dtype:
            return f"{path}: expected dtype {expected.dtype}, got {got.dtype}"
        if tuple(got.shape) != tuple(expected.shape):
            return f"{path}: expected shape {list(expected.shape)}, got {list(got.shape)}"
        if rel_tol > 0 and expected.is_floating_point():
            ok = torch.allclose(got.detach(), expected.detach(), rtol=rel_tol, atol=rel_tol)
        else:
            ok = torch.equal(got.detach(), expected.detach())
        return None if ok else f"{path}: values differ from the expected tensor"
    raise TypeError(f"strict_mismatch cannot compare against {te.__name__}; use a plain type or a tensor")


def _layout_row(lay: Layout) -> str:
    return f"shape {list(lay.shape)}, stride {list(lay.stride)}, offset {lay.offset}"


class Check:
    """Assertions for one graded item; each failure raises CheckFailed with feedback that teaches."""

    def __init__(self, grade_id: str, points: float, notebook: str | None) -> None:
        self.grade_id = grade_id
        self.points = points
        self.notebook = notebook
        self.feedback_html: list[str] = []

    def fail(self, message: str, hint: str | None = None, html_detail: str | None = None) -> None:
        """Fail this check with a message (what was wrong) and a hint (what to think about)."""
        text = message + (f"\nHint: {hint}" if hint else "")
        if html_detail:
            self.feedback_html.append(html_detail)
        raise CheckFailed(text)

    def that(self, condition: bool, message: str, hint: str | None = None) -> None:
        """Pass when `condition` is exactly True."""
        if condition is not True:
            self.fail(message, hint)

    def equal(self, got: Any, expected: Any, what: str = "answer", hint: str | None = None, rel_tol: float = 0.0) -> None:
        """Strict, type-checked equality that the learner's objects cannot fake."""
        m = strict_mismatch(got, expected, what, rel_tol)
        if m:
            self.fail(m, hint)

    def tensor(self, got: Any, what: str = "answer") -> torch.Tensor:
        """Require a plain torch.Tensor (subclasses could lie about their metadata)."""
        if type(got) not in _PLAIN_TENSOR_TYPES:
            self.fail(f"{what}: expected a plain torch.Tensor, got {_describe(got)}")
        return got

    def same_layout(
        self, got: Any, expected: torch.Tensor, what: str = "tensor", values: bool = True, hint: str | None = None
    ) -> None:
        """Same shape, stride and storage offset (and values, unless values=False) as `expected`."""
        got = self.tensor(got, what)
        try:
            g, e = layout(got), layout(expected)
        except LayoutError as err:
            self.fail(f"{what}: {err}")
        diffs = [
            f"{name}: expected {ev}, got {gv}"
            for name, gv, ev in (
                ("shape", list(g.shape), list(e.shape)),
                ("stride", list(g.stride), list(e.stride)),
                ("storage offset", g.offset, e.offset),
                ("dtype", g.dtype, e.dtype),
            )
            if gv != ev
        ]
        if not diffs and values and g.has_values and not torch.equal(got.detach(), expected.detach()):
            diffs.append("the layout matches but the values differ")
        if diffs:
            self.fail(f"{what} has the wrong layout: " + "; ".join(diffs), hint, _side_by_side(expected, got))

    def shares_storage(self, a: Any, b: Any, expected: bool = True, what: str = "tensors", hint: str | None = None) -> None:
        """`a` and `b` do (expected=True) or do not share one storage."""
        a, b = self.tensor(a, what), self.tensor(b, what)
        same = layout(a).storage_id == layout(b).storage_id
        if same != expected:
            msg = (
                f"{what}: expected them to share one storage (a view), but they live in different storages (a copy was made)"
                if expected
                else f"{what}: expected separate storages (a real copy), but they share one: writes through one change the other"
            )
            self.fail(msg, hint)

    def is_view_of(self, view: Any, base: torch.Tensor, what: str = "result", hint: str | None = None) -> None:
        """`view` is a view over `base`'s storage (no data was copied)."""
        self.shares_storage(view, base, True, what, hint)

    def copy_count(
        self, fn: Callable[..., Any], *args: Any, expected: int | None = None, at_most: int | None = None,
        what: str = "your function", hint: str | None = None, **kwargs: Any,
    ) -> CopyReport:
        """Run fn once under a copy recorder; require exactly `expected` or at most `at_most` copies."""
        if not callable(fn):
            self.fail(f"{what}: expected a function, got {_describe(fn)}")
        report = count_copies(fn, *args, **kwargs)
        if expected is not None and report.count != expected:
            self.fail(f"{what} made {report.count} data copies, expected {expected}.\n{report}", hint)
        if at_most is not None and report.count > at_most:
            self.fail(f"{what} made {report.count} data copies, at most {at_most} allowed.\n{report}", hint)
        return report

    def faster(
        self, fast: Callable[[], Any], slow: Callable[[], Any], at_least: float, what: str = "your version",
        repeat: int = 7, hint: str | None = None,
    ) -> float:
        """`fast` must beat `slow` by `at_least`× (best-of-`repeat` wall time, interleaved). Returns the ratio."""
        best_fast, best_slow = math.inf, math.inf
        fast(), slow()  # warm up
        for _ in range(repeat):
            t0 = time.perf_counter()
            fast()
            t1 = time.perf_counter()
            slow()
            t2 = time.perf_counter()
            best_fast, best_slow = min(best_fast, t1 - t0), min(best_slow, t2 - t1)
        ratio = best_slow / max(best_fast, 1e-9)
        if ratio < at_least:
            self.fail(f"{what} is {ratio:.2f}× as fast as the original; the target is {at_least}×", hint)
        return ratio


def _side_by_side(expected: torch.Tensor, got: torch.Tensor) -> str:
    from ..render.stride import TensorView, stride_model, stride_svg

    parts = []
    for title, t in (("expected", expected), ("yours", got)):
        lay = layout(t)
        svg = stride_svg(stride_model([TensorView(title, lay)], max_elements=64, max_storage_cells=64))
        parts.append(
            f'<div style="display:inline-block;vertical-align:top;margin-right:16px"><b>{title}</b>: '
            f"{html.escape(_layout_row(lay))}<br>{svg}</div>"
        )
    return "<div>" + "".join(parts) + "</div>"


def _display(html_text: str, plain: str) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is None:
        return
    display({"text/html": html_text, "text/plain": plain}, raw=True)


class check:
    """Context manager for one graded item: `with check("02.strides", points=2) as c: ...`."""

    def __init__(self, grade_id: str, points: float = 1, notebook: str | None = None) -> None:
        if not isinstance(grade_id, str) or not grade_id:
            raise ValueError("check needs a grade_id string, e.g. check('02.transpose-strides', points=1)")
        if not isinstance(points, (int, float)) or isinstance(points, bool) or points <= 0:
            raise ValueError(f"points must be a positive number, got {points!r}")
        self.c = Check(grade_id, float(points), notebook or grade_id.split(".", 1)[0])

    def __enter__(self) -> Check:
        return self.c

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> Literal[False]:
        c = self.c
        pts = f"{c.points:g} point{'s' if c.points != 1 else ''}"
        if exc is None:
            ProgressStore().record_pass(c.grade_id, c.points, c.points, notebook=c.notebook)
            _display(
                f'<div style="color:#1a7f37">✓ <b>{html.escape(c.grade_id)}</b> passed ({pts})</div>',
                f"✓ {c.grade_id} passed ({pts})",
            )
            return False
        if isinstance(exc, CheckFailed):
            message = str(exc)
        elif isinstance(exc, (NotImplementedError, NameError)):
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            message = f"not done yet ({detail}). Write your answer in the exercise cell above and run it."
        elif isinstance(exc, KeyboardInterrupt):
            return False
        else:
            message = f"your code raised {type(exc).__name__}: {exc}"
        detail = "".join(c.feedback_html)
        _display(
            f'<div style="color:#b42318">✗ <b>{html.escape(c.grade_id)}</b> failed (0/{pts})<pre>'
            f"{html.escape(message)}</pre>{detail}</div>",
            f"✗ {c.grade_id} failed (0/{pts})\n{message}",
        )
        if isinstance(exc, CheckFailed):
            return False
        raise CheckFailed(f"{c.grade_id}: {message}") from exc
