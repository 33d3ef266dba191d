"""The check API for graded test cells: one `check` per graded item, with points and teaching feedback.

    with check("02-transpose-strides", points=2) as c:
        c.equal(my_stride, (1, 4), what="stride of x.t()", hint=["a pointer", "more detail"])
        c.same_layout(my_view, x.t())

The first failed assertion raises `CheckFailed` (an AssertionError, so nbgrader scores the cell 0)
after displaying feedback once, without a traceback. Hints come in tiers: the first failure shows the
first, each repeated failure one more. Before it compares anything a check makes sure torch is the
torch it imported (no patched functions, no modes left on); comparisons never call the learner's
`__eq__`; bans are enforced by recording what ran (`c.watch`, `c.copy_count`). Passes are recorded in
the local progress store, marked visible-only when the hidden tests were not in the cell.
"""

from __future__ import annotations

import hashlib
import html
import linecache
import math
import os
import sys
import time
import types
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import torch

from ..lenses.build import LEAN_HEADERS, BuildError, BuildReport, build_inline, load_built
from ..lenses.copies import CopyReport, kernel_copies, ops_inside, record_copies
from ..lenses.layout import Layout, LayoutError, layout
from . import attest, integrity
from .markers import HIDDEN_PLACEHOLDER, STUB_MESSAGE
from .progress import ProgressStore
from .recording import Recording, record
from .trusted import LENSES, GraderClass

__all__ = ["Check", "CheckFailed", "Hint", "check", "strict_mismatch"]

_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)
#: A check's message in Lab: wrapped at spaces, a word broken only when it cannot fit (Lab's own <pre> rule breaks
#: every word anywhere, mid-name).
_PRE = "white-space:pre-wrap;word-break:normal;overflow-wrap:anywhere"
Hint = str | Sequence[str] | None

# Failures per grade_id in this kernel: the tier of hint each check shows next.
_FAILURES: Counter[str] = Counter()
# From this failure on, values the learner was asked to predict are revealed.
REVEAL_AFTER = 3


#: Set to "message" (the Makefile's nbval runs do) and a failed check's one-line traceback carries its message too.
TRACEBACK_ENV = "TORCHLENS_CHECK_TRACEBACK"


class CheckFailed(AssertionError):
    """A graded check did not pass; the message says what was expected and what to try."""

    summary: str | None = None  # set by `check` once the feedback is displayed

    def _render_traceback_(self) -> list[str]:
        # IPython shows this instead of a traceback: the feedback was already displayed above.
        if self.summary:
            if os.environ.get(TRACEBACK_ENV) == "message":  # test logs (nbval) show the traceback, not the feedback
                return [f"CheckFailed: {self.summary}: {str(self)[:2000]}"]
            return [f"CheckFailed: {self.summary} (the feedback above says why)"]
        first = str(self).split("\n", 1)[0]
        return [f"CheckFailed: {first[:160]}"]


def _describe(v: Any) -> str:
    if isinstance(v, torch.Tensor) and type(v) in _PLAIN_TENSOR_TYPES:
        return f"tensor(shape={list(v.shape)}, dtype={str(v.dtype).replace('torch.', '')})"
    if type(v) in (int, float, bool, str, tuple, list, type(None), torch.Size, torch.dtype):
        r = repr(v)
        return r if len(r) <= 80 else r[:77] + "..."
    return f"an object of type {type(v).__name__}"


def strict_mismatch(
    got: Any, expected: Any, path: str = "answer", rel_tol: float = 0.0, show_expected: bool = True,
    abs_tol: float | None = None,
) -> str | None:
    """Explain how `got` differs from the trusted `expected`, or None if equal.

    Types are checked exactly before values are compared with the builtin types' own equality and
    torch's own `equal`/`allclose` (captured at import, run with modes cleared), so an object whose
    `__eq__` always returns True, a patched `torch.equal` or a lying mode cannot pass. With
    `show_expected=False` the message says what is wrong without giving the expected value away.
    Tensors compare within `rel_tol` relative and `abs_tol` absolute error (default: `rel_tol`).
    """

    def differs(e: Any, g: Any) -> str:
        return f"expected {e}, got {g}" if show_expected else f"got {g}, which is not right"

    te = type(expected)
    if expected is None:
        return None if got is None else f"{path}: {differs('None', _describe(got))}"
    if te is bool:
        if type(got) is not bool:
            return f"{path}: expected True or False, got {_describe(got)}"
        return None if got is expected else f"{path}: {differs(expected, got)}"
    if te is int or te is float:
        if type(got) not in (int, float):
            return f"{path}: expected a number, got {_describe(got)}"
        if te is int:  # an int answer must be an int: 6667.0 is not a count of 6667
            if type(got) is not int:
                return f"{path}: expected an int, got {_describe(got)}"
            return None if int.__eq__(got, expected) else f"{path}: {differs(expected, got)}"
        g, e = float(got), float(expected)
        ok = float.__eq__(g, e) or (rel_tol > 0 and math.isclose(g, e, rel_tol=rel_tol))
        return None if ok else f"{path}: {differs(repr(expected), repr(got))}"
    if te is str:
        if type(got) is not str:
            return f"{path}: expected text, got {_describe(got)}"
        return None if str.__eq__(got, expected) else f"{path}: {differs(repr(expected), repr(got))}"
    if te is torch.dtype:
        return None if type(got) is torch.dtype and got is expected else f"{path}: {differs(expected, _describe(got))}"
    if te in (tuple, list, torch.Size):
        if type(got) not in (tuple, list, torch.Size):
            return f"{path}: expected a sequence (tuple or list), got {_describe(got)}"
        if len(got) != len(expected):
            return f"{path}: expected {len(expected)} entries, got {len(got)} ({_describe(got)})"
        for k, (g, e) in enumerate(zip(got, expected)):
            m = strict_mismatch(g, e, f"{path}[{k}]", rel_tol, show_expected, abs_tol)
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
            if not show_expected:
                return f"{path}: {len(missing)} entr{'y' if len(missing) == 1 else 'ies'} missing, {len(extra)} unexpected"
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
        m = strict_mismatch(set(got), set(expected), f"{path} keys", 0.0, show_expected)
        if m:
            return m
        for k in expected:
            m = strict_mismatch(got[k], expected[k], f"{path}[{k!r}]", rel_tol, show_expected, abs_tol)
            if m:
                return m
        return None
    if isinstance(expected, torch.Tensor):
        if type(got) not in _PLAIN_TENSOR_TYPES:
            return f"{path}: expected a plain torch.Tensor, got {_describe(got)}"
        if got.dtype != expected.dtype:
            return f"{path}: {differs(f'dtype {expected.dtype}', f'dtype {got.dtype}')}"
        if tuple(got.shape) != tuple(expected.shape):
            return f"{path}: {differs(f'shape {list(expected.shape)}', f'shape {list(got.shape)}')}"
        with integrity.clean():
            if rel_tol > 0 and expected.is_floating_point():
                atol = rel_tol if abs_tol is None else abs_tol
                ok = integrity.trusted_allclose(got.detach(), expected.detach(), rtol=rel_tol, atol=atol)
            else:
                ok = integrity.trusted_equal(got.detach(), expected.detach())
        where = "" if ok else _where_they_differ(
            got.detach(), expected.detach(), rel_tol if rel_tol > 0 and expected.is_floating_point() else 0.0,
            abs_tol, show_expected)
        # a NaN where a NaN is expected is right (torch.equal says no: NaN != NaN); `where` is empty then
        return None if ok or not where else f"{path}: values differ from the expected tensor" + where
    raise TypeError(f"strict_mismatch cannot compare against {te.__name__}; use a plain type or a tensor")


def _where_they_differ(got: torch.Tensor, expected: torch.Tensor, rel_tol: float, abs_tol: float | None,
                       show_expected: bool) -> str:
    """' at N of M elements; the first at index (i, j): expected E, got G' (the expected value left out when
    secret), computed with torch's own functions and modes cleared."""
    with integrity.clean():
        if rel_tol > 0:
            atol = rel_tol if abs_tol is None else abs_tol
            close = integrity.trusted_isclose(got, expected, rtol=rel_tol, atol=atol, equal_nan=True)
        else:
            close = integrity.trusted_eq(got, expected) | (integrity.trusted_isnan(got) & integrity.trusted_isnan(expected)) \
                if expected.is_floating_point() or expected.is_complex() else integrity.trusted_eq(got, expected)
        wrong = integrity.trusted_nonzero(integrity.trusted_logical_not(close))
        count, total = int(wrong.shape[0]), expected.numel()
        if count == 0:
            return ""
        index = tuple(int(i) for i in wrong[0].tolist())
        g, e = got[index].item(), expected[index].item()
    where = f"[{', '.join(map(str, index))}]"
    said = f"expected {e!r}, got {g!r}" if show_expected else f"got {g!r}"
    return f" at {count} of {total} elements; the first at index {where}: {said}"


def _count_wrong(got: Any, expected: Any, what: str, rel_tol: float, abs_tol: float | None) -> str | None:
    """For a secret dict or sequence of True/False predictions: how many are wrong, not which (a wrong
    True/False named is a right answer given away); None for other containers."""
    if type(expected) is dict and type(got) is dict and set(got) == set(expected):
        keys: list[Any] = list(expected)
    elif type(expected) in (list, tuple) and type(got) in (list, tuple) and len(got) == len(expected):
        keys = list(range(len(expected)))
    else:
        return None
    if not all(type(expected[k]) is bool for k in keys):
        return None  # naming a wrong number or set is a pointer; naming a wrong True/False is the answer
    wrong = sum(strict_mismatch(got[k], expected[k], "", rel_tol, abs_tol=abs_tol) is not None for k in keys)
    return f"{what}: {wrong} of {len(keys)} predictions are not right"


def _layout_row(lay: Layout) -> str:
    return f"shape {list(lay.shape)}, stride {list(lay.stride)}, offset {lay.offset}"


def _tiers(hint: Hint) -> list[str]:
    if hint is None:
        return []
    if isinstance(hint, str):
        return [hint]
    return [h for h in hint if isinstance(h, str) and h]


# What the checks call, captured now: rebinding integrity.tampering or time.perf_counter later changes nothing here.
_tampering = integrity.tampering
_clock = time.perf_counter


class Check(metaclass=GraderClass):
    """Assertions for one graded item; each failure raises CheckFailed with feedback that teaches."""

    def __init__(self, grade_id: str, points: float, notebook: str | None) -> None:
        self.grade_id = grade_id
        self.points = points
        self.notebook = notebook
        self.feedback_html: list[str] = []
        self.test_cell = ""  # the file the test cell was compiled from: its helpers are off limits to answers
        self.ops: Any = None  # the operators of the last `build(..., register=...)`

    @property
    def attempt(self) -> int:
        """How many times this check already failed in this kernel (0 on the first run)."""
        return _FAILURES[self.grade_id]

    def fail(self, message: str, hint: Hint = None, html_detail: str | None = None, reveal: str | None = None) -> None:
        """Fail with a message (what is wrong) and a hint; each repeated failure adds the next hint tier.

        `reveal` (e.g. the expected value of a prediction) is shown only from the REVEAL_AFTER-th failure on.
        """
        tiers = _tiers(hint)
        text = message
        if tiers:  # every tier so far: the pointer first, one more with each failed attempt
            k = min(self.attempt, len(tiers) - 1)
            text += "".join(f"\nHint{f' {i + 1}' if i else ''}: {tier}" for i, tier in enumerate(tiers[:k + 1]))
            if k + 1 < len(tiers):
                text += "\n(Each new failed attempt adds to the hint.)"
        if reveal:
            if self.attempt + 1 >= REVEAL_AFTER:
                text += f"\n{reveal}"
            else:
                text += f"\n(After {REVEAL_AFTER} failed attempts this check shows the expected answer.)"
        if html_detail:
            self.feedback_html.append(html_detail)
        raise CheckFailed(text)

    def that(self, condition: bool, message: str, hint: Hint = None) -> None:
        """Pass when `condition` is exactly True (and nothing the check relies on was patched meanwhile)."""
        self._guard()
        if condition is not True:
            self.fail(message, hint)

    def _guard(self, code: bool = False, _tampering: Callable[..., list[str]] = _tampering) -> None:
        """Fail on anything patched since the check began (`code`: the grader's own functions' code too)."""
        found = _tampering(inside=True, code=code)
        if found:
            self.fail(_tamper_message(found))

    def equal(
        self, got: Any, expected: Any, what: str = "answer", hint: Hint = None, rel_tol: float = 0.0,
        secret: bool = False, abs_tol: float | None = None,
    ) -> None:
        """Strict, type-checked equality that the learner's objects cannot fake.

        With `secret=True` (predictions) the expected value is revealed only after repeated failures.
        """
        self._guard()
        if not secret:
            m = strict_mismatch(got, expected, what, rel_tol, abs_tol=abs_tol)
            if m:
                self.fail(m, hint)
            return
        full = strict_mismatch(got, expected, what, rel_tol, abs_tol=abs_tol)
        if full is None:
            return
        m = _count_wrong(got, expected, what, rel_tol, abs_tol) or strict_mismatch(
            got, expected, what, rel_tol, show_expected=False, abs_tol=abs_tol
        )
        self.fail(m or full, hint, reveal=full)

    def tensor(self, got: Any, what: str = "answer") -> torch.Tensor:
        """Require a plain torch.Tensor (subclasses could lie about their metadata)."""
        if type(got) not in _PLAIN_TENSOR_TYPES:
            self.fail(f"{what}: expected a plain torch.Tensor, got {_describe(got)}")
        return got

    def plain(self, got: Any, what: str = "answer", depth: int = 6) -> Any:
        """`got` as plain builtins and plain tensors, rebuilt through the builtin types themselves: an object of the
        learner's own class (a dict whose `__getitem__` looks around, a Tensor subclass with its own `.double()`)
        fails here, before the check uses it. Returns the plain copy (tensors are the same objects)."""
        t = type(got)
        if got is None or t in (bool, int, float, str, bytes, complex, torch.dtype, torch.device, torch.Size):
            return got
        if t in _PLAIN_TENSOR_TYPES:
            return got
        if depth and t is dict:
            return {self.plain(k, f"{what} key", depth - 1): self.plain(v, f"{what}[{k!r}]", depth - 1)
                    for k, v in dict.items(got)}
        if depth and t in (list, tuple, set, frozenset):
            return t(self.plain(v, f"{what}[{i}]", depth - 1) for i, v in enumerate(t.__iter__(got)))
        kind = "tensor" if isinstance(got, torch.Tensor) else next(
            (b.__name__ for b in (dict, list, tuple, set, frozenset, int, float, str) if isinstance(got, b)), None)
        self.fail(f"{what}: got an object of type {t.__name__}" + (
            f" (a subclass of {kind}); return a plain {kind}" if kind else
            "; return plain Python values (numbers, strings, lists, tuples, dicts, sets) or tensors"))

    def same_layout(
        self, got: Any, expected: torch.Tensor, what: str = "tensor", values: bool = True, hint: Hint = None
    ) -> None:
        """Same shape, stride and storage offset (and values, unless values=False) as `expected`."""
        self._guard()
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
        if not diffs and values and g.has_values:
            with integrity.clean():
                same_values = integrity.trusted_equal(got.detach(), expected.detach())
            if not same_values:
                diffs.append("the layout matches but the values differ")
        if diffs:
            self.fail(f"{what} has the wrong layout: " + "; ".join(diffs), hint, _side_by_side(expected, got))

    def shares_storage(self, a: Any, b: Any, expected: bool = True, what: str = "tensors", hint: Hint = None) -> None:
        """`a` and `b` do (expected=True) or do not share one storage."""
        self._guard()
        a, b = self.tensor(a, what), self.tensor(b, what)
        same = layout(a).storage_id == layout(b).storage_id
        if same != expected:
            msg = (
                f"{what}: expected them to share one storage (a view), but they live in different storages (a copy was made)"
                if expected
                else f"{what}: expected separate storages (a real copy), but they share one: writes through one change the other"
            )
            self.fail(msg, hint)

    def is_view_of(self, view: Any, base: torch.Tensor, what: str = "result", hint: Hint = None) -> None:
        """`view` is a view over `base`'s storage (no data was copied)."""
        self.shares_storage(view, base, True, what, hint)

    def copy_count(
        self, fn: Callable[..., Any], *args: Any, expected: int | None = None, at_most: int | None = None,
        what: str = "your function", hint: Hint = None, listing: bool = True, **kwargs: Any,
    ) -> CopyReport:
        """Run fn once and count its data copies at the level that sees them all (the profiler: inside
        kernels too), refusing escapes around it (NumPy, popped modes). A failure lists each copy's op path and
        shape unless `listing=False` (a hidden case's shapes are its content). Returns the report: the aten ops
        run (``ops``) and every copy (``kernel_level``)."""
        if not callable(fn):
            self.fail(f"{what}: expected a function, got {_describe(fn)}")

        def observed() -> CopyReport:
            with record_copies() as report, integrity.own_modes():
                report.kernel_level = kernel_copies(fn, *args, **kwargs)
            return report

        rec = record(observed, aten=False)
        self._no_escapes(rec, what)
        report: CopyReport = rec.result
        copies = report.kernel_level
        paths = "".join(f"\n  {path}" for path in copies) if listing else ""
        if expected is not None and len(copies) != expected:
            self.fail(f"{what} made {len(copies)} data copies, expected {expected}.{paths}", hint)
        if at_most is not None and len(copies) > at_most:
            self.fail(f"{what} made {len(copies)} data copies, at most {at_most} allowed.{paths}", hint)
        self._guard(code=True)
        return report

    def _no_escapes(self, rec: Recording, what: str) -> None:
        if rec.escapes:
            seen = list(dict.fromkeys(rec.escapes))
            self.fail(
                f"{what} stepped outside what this check can observe: {seen[0]}"
                + (f" (and {len(seen) - 1} more)" if len(seen) > 1 else ""),
                "solve the exercise with torch operations on the tensors themselves; the check records the "
                "aten ops your code runs, and this route hides them",
            )

    def watch(
        self, fn: Any, what: str | None = None, *, allow_aten: Iterable[str] | None = None,
        forbid_aten: Iterable[str] = (), forbid: Iterable[Any] = (), escapes: bool = False, hint: Hint = None,
    ) -> Callable[..., Any]:
        """`fn`, recorded on every call the check makes: a call that runs an aten op outside `allow_aten`
        (or in `forbid_aten`), calls a function in `forbid` (by identity, so aliases count) or one the test
        cell defined (its reference helpers), or escapes the recorder (NumPy, popped modes; allowed with
        `escapes=True`) fails the check."""
        name = str(what or getattr(fn, "__name__", None) or "your function")
        if not callable(fn):
            self.fail(f"{name}: expected a function, got {_describe(fn)}")
        allowed = None if allow_aten is None else frozenset(allow_aten)
        banned, banned_calls = frozenset(forbid_aten), tuple(forbid)

        def watched(*args: Any, **kwargs: Any) -> Any:
            with integrity.own_modes():  # a mode the test runs the answer under (a meter) is the test's
                return observed_call(*args, **kwargs)

        def observed_call(*args: Any, **kwargs: Any) -> Any:
            # functions the test hands to the answer (workloads) are the answer's to call
            handed = [a for a in (*args, *kwargs.values()) if callable(a)]
            handed += [x for a in (*args, *kwargs.values()) if isinstance(a, (list, tuple, dict))
                       for x in (a.values() if isinstance(a, dict) else a) if callable(x)]
            rec = record(fn, *args, forbid=banned_calls, escapes=not escapes, forbid_files=(self.test_cell, *_EXERCISES),
                         whole_files=_EXERCISES,
                         allow=handed, raise_errors=False, **kwargs)
            if not escapes:
                self._no_escapes(rec, name)
            if rec.forbidden:
                calls = ", ".join(dict.fromkeys(rec.forbidden))
                self.fail(f"{name} called {calls}, which this exercise asks you not to use", hint)
            ran = set(rec.aten)
            bad = sorted((ran - allowed) if allowed is not None else set()) + sorted(ran & banned)
            if bad:
                rule = f"only {', '.join(sorted(allowed)) or 'no aten ops'}" if allowed is not None else "not " + ", ".join(sorted(banned))
                self.fail(f"{name} ran aten.{', aten.'.join(dict.fromkeys(bad))}; this exercise allows {rule}", hint)
            if rec.error is not None:
                raise rec.error  # the learner's own error, after the rules it broke on the way
            self._guard(code=True)
            return rec.result

        return watched

    def build(self, name: str, source: object, *, headers: Sequence[str] | None = LEAN_HEADERS,
              probe: str | None = None, register: dict[str, str] | None = None, hint: Hint = None,
              flags: Sequence[str] = ()) -> BuildReport:
        """Build the learner's C++ `source` in a subprocess (never in this kernel), then load it here: the
        stub is "not done"; a compile error fails with the learner's own lines; a crash while loading or
        during `probe` (a first call, run in that subprocess too) fails and leaves this kernel running.

        `register` ({function: schema}, e.g. {"relu_loop": "relu_loop(Tensor x) -> Tensor"}) adds the
        TORCH_LIBRARY block itself, in a namespace of its own per source (`report.namespace`), so a learner
        can rebuild a changed answer in the same kernel; `probe` may then say `OPS.relu_loop(...)`. `flags`: extra
        compiler flags (e.g. ("-fopenmp",) for a kernel whose at::parallel_for must really run on threads)."""
        if not isinstance(source, str):
            self.fail(f"{name}: expected the C++ source as a string, got {_describe(source)}", hint)
        assert isinstance(source, str)
        if STUB_MESSAGE in source or "YOUR CODE HERE" in source:
            raise NotImplementedError(STUB_MESSAGE)
        namespace = None
        if register:
            namespace = f"tlw_{name}_{hashlib.sha256(source.encode()).hexdigest()[:10]}"
            defs = "".join(f'  m.def("{schema}", &{fn});\n' for fn, schema in register.items())
            source = f"{source}\n\nTORCH_LIBRARY({namespace}, m) {{\n{defs}}}\n"
            if probe is not None:
                probe = f"OPS = getattr(torch.ops, {namespace!r})\n{probe}"
        try:
            report = build_inline(name, source, headers=headers, probe=probe,
                                  extra_cflags=["-O2", *flags] if flags else ())
        except BuildError as exc:
            self.fail(f"{name}: {exc}", hint)
        if not report.ok:
            where = "\n".join(f"  line {e.line}:{e.column}: {e.kind}: {e.message}\n      {e.code.strip()}"
                              for e in report.errors[:3])
            self.fail(f"{name} did not compile:\n{where}" if where else
                      f"{name} did not build; the end of the compiler's log:\n{report.log_tail[-600:]}", hint)
        if report.probe_error is not None:
            self.fail(f"{name} built, but its first call raised {report.probe_error}", hint)
        try:
            load_built(report)
        except BuildError as exc:
            self.fail(str(exc), hint)
        if namespace is not None:
            self.ops = getattr(torch.ops, namespace)
        return report

    def rejects(self, fn: Callable[..., Any], *args: Any, says: Sequence[str] = (), what: str = "this input",
                hint: Hint = None) -> str:
        """`fn(*args)` must raise RuntimeError (what TORCH_CHECK raises) whose message contains each of
        `says` (case-insensitive): an input is refused, and the error tells the caller what was wrong.
        Returns the message."""
        self._guard()
        try:
            fn(*args)
        except RuntimeError as exc:
            message = str(exc).splitlines()[0] if str(exc) else ""
            missing = [w for w in says if w.lower() not in message.lower()]
            if missing:
                self.fail(f"{what}: refused, but the message {message[:200]!r} does not say "
                          f"{' or '.join(repr(w) for w in missing)}", hint)
            return message
        except Exception as exc:  # another type: not what a TORCH_CHECK raises
            self.fail(f"{what}: raised {type(exc).__name__} ({str(exc)[:120]}), expected a RuntimeError from a "
                      "TORCH_CHECK", hint)
        self.fail(f"{what} was accepted; it should be refused with an error that says "
                  f"{', '.join(repr(w) for w in says) or 'what is wrong'}", hint)
        return ""

    def ops_inside(self, fn: Callable[..., Any], *args: Any) -> list[str]:
        """The aten ops `fn(*args)` ran, the ones inside C++ kernels included (the profiler sees them; a
        dispatch mode does not), so a C++ answer can be held to "do the math yourself"."""
        self._guard()
        return ops_inside(fn, *args)

    def faster(
        self, fast: Callable[..., Any], slow: Callable[..., Any], at_least: float, what: str = "your version",
        repeat: int = 7, hint: Hint = None, inputs: Callable[[], tuple[Any, ...]] | None = None,
        rel_tol: float = 1e-5,
    ) -> float:
        """`fast` must beat `slow` by `at_least`× (best-of-`repeat` wall time, interleaved, on the clock captured at
        import). Returns the ratio. With `inputs` (fresh arguments on each call, made outside the timing) each timed
        call gets inputs of its own, so a cache keyed on them cannot answer, and every timed result of `fast` must
        equal `slow`'s on the same inputs (within `rel_tol`)."""
        self._guard()
        best_fast, best_slow = math.inf, math.inf
        args = inputs() if inputs is not None else ()
        fast(*args), slow(*args)  # warm up
        for round_ in range(repeat):
            args = inputs() if inputs is not None else ()
            t0 = _clock()
            got = fast(*args)
            t1 = _clock()
            want = slow(*args)
            t2 = _clock()
            best_fast, best_slow = min(best_fast, t1 - t0), min(best_slow, t2 - t1)
            if inputs is not None:
                m = strict_mismatch(got, want, f"{what} (timed call {round_ + 1}, on fresh inputs)", rel_tol)
                if m:
                    self.fail(m + ": the calls this check times must compute the answer", hint)
        self._guard(code=True)  # nothing patched while the clock ran
        ratio = best_slow / max(best_fast, 1e-9)
        if ratio < at_least:
            self.fail(f"{what} is {ratio:.2f}× as fast as the original; the target is {at_least}×", hint)
        return ratio


_TB_HEAD, _TB_TAIL = 12, 8


def _trim_traceback(exc: BaseException) -> int:
    """Keep the first and last frames of a very deep traceback (a runaway recursion: IPython would spend most of a
    minute drawing thousands of frames); returns how many were left out."""
    tbs = []
    tb = exc.__traceback__
    while tb is not None:
        tbs.append(tb)
        tb = tb.tb_next
    if len(tbs) <= _TB_HEAD + _TB_TAIL + 4:
        return 0
    kept: types.TracebackType | None = None
    for t in reversed(tbs[:_TB_HEAD] + tbs[-_TB_TAIL:]):
        kept = types.TracebackType(kept, t.tb_frame, t.tb_lasti, t.tb_lineno)
    exc.__traceback__ = kept
    return len(tbs) - _TB_HEAD - _TB_TAIL


def _tamper_message(found: list[str]) -> str:
    return (
        "the check found what it measures with changed in this kernel, so it cannot trust the result: "
        + "; ".join(found)
        + ". It has put things back. Remove the line that did this (or restart the kernel), run your answer "
        "again and then this check."
    )


def _side_by_side(expected: torch.Tensor, got: torch.Tensor) -> str:
    from ..lenses.layout import read_storage
    from ..render.stride import TensorView, stride_model, stride_svg

    parts = []
    for title, t in (("expected", expected), ("yours", got)):
        lay = layout(t)
        def values(_k: int, cells: list[int], t: torch.Tensor = t) -> list[Any] | None:
            return read_storage(t, cells)

        with integrity.clean():
            model = stride_model([TensorView(title, lay)], values, max_elements=64, max_storage_cells=64)
        svg = stride_svg(model)
        svg = svg.replace("<svg ", '<svg style="max-width:100%;height:auto" ', 1)  # scale down, never clip
        parts.append(
            '<div style="flex:1 1 0;min-width:0"><b>' + title + "</b>: "
            f"{html.escape(_layout_row(lay))}<br>{svg}</div>"
        )
    return '<div style="display:flex;flex-wrap:nowrap;gap:24px;align-items:flex-start">' + "".join(parts) + "</div>"


def _display(html_text: str, plain: str, result: dict[str, Any] | None = None) -> None:
    """Show `html_text` (`plain` for text front ends); `result` rides along as display metadata
    {"torchlens_check": result} for tools that read outputs (validate), never shown."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is None:
        return
    metadata = None if result is None else {"torchlens_check": result}
    display({"text/html": html_text, "text/plain": plain}, raw=True, metadata=metadata)


def _caller_file(depth: int = 2) -> str:
    try:
        return sys._getframe(depth).f_code.co_filename
    except ValueError:  # pragma: no cover - no such frame
        return ""


def _scope_of(filename: str) -> str:
    """'visible' when the running test cell is a student copy whose hidden tests were taken out."""
    source = "".join(linecache.getlines(filename)) if filename else ""
    return "visible" if HIDDEN_PLACEHOLDER in source else "full"


_LIBRARY_DIRS = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix}) + ("<frozen",)


def _learner_raised(exc: BaseException, test_cell: str) -> bool:
    """True when a frame of the traceback is the learner's own code (not the test cell, not a library)."""
    tb = exc.__traceback__
    while tb is not None:
        f = tb.tb_frame.f_code.co_filename
        if f != test_cell and not f.startswith(_LIBRARY_DIRS):
            return True
        tb = tb.tb_next
    return False


def _learner_place(exc: BaseException, test_cell: str) -> str:
    """Where in the learner's own code `exc` was raised: "in fn, line N" of the innermost such frame."""
    tb, place = exc.__traceback__, "in your code"
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename != test_cell and not code.co_filename.startswith(_LIBRARY_DIRS):
            place = f"in {code.co_name}, line {tb.tb_lineno} of its cell"
        tb = tb.tb_next
    return place


def _raised_in(exc: BaseException, filename: str) -> bool:
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and last.tb_frame.f_code.co_filename == filename


class check(metaclass=GraderClass):
    """Context manager for one graded item: `with check("02-strides", points=2) as c: ...`."""

    def __init__(self, grade_id: str, points: float = 1, notebook: str | None = None) -> None:
        if not isinstance(grade_id, str) or not grade_id:
            raise ValueError("check needs a grade_id string, e.g. check('02-transpose-strides', points=1)")
        if not isinstance(points, (int, float)) or isinstance(points, bool) or points <= 0:
            raise ValueError(f"points must be a positive number, got {points!r}")
        self.c = Check(grade_id, float(points), notebook or grade_id[:2])
        self._cell = self.c.test_cell = _caller_file()

    def _points(self) -> str:
        p = self.c.points
        return f"{p:g} point{'s' if p != 1 else ''}"

    def _failure(self, message: str) -> CheckFailed:
        failure = CheckFailed(f"{self.c.grade_id}: {message}")
        failure.summary = f"{self.c.grade_id} failed, 0/{self._points()}"
        return failure

    def _fail_if_tampered(self, _tampering: Callable[..., list[str]] = _tampering) -> None:
        found = _tampering()
        if found:
            message = _tamper_message(found)
            self._report_failure(message)
            _FAILURES[self.c.grade_id] += 1
            raise self._failure(message)

    def __enter__(self) -> Check:
        self._fail_if_tampered()
        return self.c

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: types.TracebackType | None
    ) -> Literal[False]:
        c = self.c
        if exc is None:
            self._fail_if_tampered()
            scope = _scope_of(self._cell)
            ProgressStore().record_pass(c.grade_id, c.points, c.points, notebook=c.notebook, scope=scope)
            ok = "var(--jp-success-color0, #1a7f37)"
            if scope == "visible":
                said = f"passed its visible tests; hidden tests run when your notebook is graded ({self._points()} if they pass too)"
            else:
                said = f"passed ({self._points()})"
            attest.record(c.grade_id, True)
            _display(
                f'<div style="color:{ok}">✓ <b>{html.escape(c.grade_id)}</b> {html.escape(said)}</div>',
                f"✓ {c.grade_id} {said}",
                {"grade_id": c.grade_id, "passed": True, "points": c.points, "earned": c.points, "scope": scope},
            )
            return False
        if isinstance(exc, KeyboardInterrupt) or not isinstance(exc, Exception):
            return False
        not_done = False
        if isinstance(exc, CheckFailed):
            message = str(exc)
        elif isinstance(exc, NotImplementedError) and (str(exc) == STUB_MESSAGE or not str(exc)):
            not_done = True
            message = "not done yet: your answer still raises NotImplementedError. Write it in the exercise cell above, run that cell, then this one."
        elif isinstance(exc, NameError) and _raised_in(exc, self._cell):
            not_done = True
            name = getattr(exc, "name", None) or str(exc)
            message = (
                f"not done yet: {name!r} is not defined. Write your answer in the exercise cell above and run "
                "that cell, then this one."
            )
        elif _learner_raised(exc, self._cell):
            if attest.grading():  # the error's text is the answer's to choose: at grading, its type and place only
                message = f"your code raised {type(exc).__name__} ({_learner_place(exc, self._cell)})"
            else:
                left_out = _trim_traceback(exc)
                message = f"your code raised {type(exc).__name__}: {exc} (the traceback below shows where" + (
                    f"; {left_out} frames in the middle are left out)" if left_out else ")")
            self._report_failure(message)
            _FAILURES[c.grade_id] += 1
            return False  # the learner's own error: their traceback is the useful feedback
        else:
            what = type(exc).__name__ if attest.grading() else f"{type(exc).__name__}: {exc}"
            message = (
                f"the check could not use your answer ({what}). Check that it has the type "
                "and shape the exercise asks for."
            )
        self._report_failure(message, not_done)
        if not not_done:  # hints move on with real attempts only
            _FAILURES[c.grade_id] += 1
        if isinstance(exc, CheckFailed):
            exc.summary = self._failure(message).summary
            return False
        raise self._failure(message) from None

    def _report_failure(self, message: str, not_done: bool = False) -> None:
        c = self.c
        attest.record(c.grade_id, False)
        detail = "".join(c.feedback_html)
        bad = "var(--jp-error-color0, #b42318)"
        _display(
            f'<div style="color:{bad}">✗ <b>{html.escape(c.grade_id)}</b> failed (0/{self._points()})</div>'
            f'<pre style="{_PRE}">{html.escape(message)}</pre>{detail}',
            f"✗ {c.grade_id} failed (0/{self._points()})\n{message}",
            {"grade_id": c.grade_id, "passed": False, "points": c.points, "earned": 0, "message": message,
             "not_done": not_done},
        )


_EXERCISES: list[str] = []  # the exercise modules' files (`_protect_package` fills it)
# Trusted too, but importing them costs seconds (torch._dynamo): noted when a notebook first imports them.
_LAZY_LENSES = ("graph_breaks",)
_TRUSTED_LENSES = tuple(name for name in LENSES if name not in _LAZY_LENSES)


def _protect_package() -> None:
    """The lenses and this module are what test cells trust: patching them is tampering too."""
    import importlib

    for lens in _TRUSTED_LENSES:
        importlib.import_module(f"..lenses.{lens}", __package__)  # load them

    package = __name__.rsplit(".", 2)[0]
    # by module name: the package re-exports a function called `layout`, which shadows the module attribute
    for name in _TRUSTED_LENSES:
        module = sys.modules[f"{package}.lenses.{name}"]
        integrity.protect(module.__name__, module)
    top = sys.modules[package]
    for name, where in getattr(top, "_WHERE", {}).items():  # the package's lens names load lazily: load them
        if where.startswith("lenses"):
            getattr(top, name)
    integrity.protect(package, top)
    integrity.protect(__name__, sys.modules[__name__])
    import torch.library  # opcheck, register_fake, register_autograd: what operator checks call

    integrity.protect("torch.library", torch.library)
    if "torch._dynamo" in sys.modules:  # explain / reset, when a notebook compiles (importing it costs ~2 s)
        integrity.protect("torch._dynamo", sys.modules["torch._dynamo"])
    from . import exercises  # each exercise's machinery: what its test cell trusts, off limits to answers

    for name, module in list(sys.modules.items()):
        if name.startswith(exercises.__name__):
            integrity.protect(name, module, data=True)
    _EXERCISES.extend(exercises.exercise_files())
    integrity.protect(f"{__name__}.Check", Check)
    integrity.protect(f"{__name__}.check", check)
    integrity.protect(f"{__name__}.Layout", Layout)


_protect_package()
# only a check's own exit and failure report may record an outcome for a grading run (see attest)
attest.allow_recorders([check.__exit__.__code__, check._report_failure.__code__])
