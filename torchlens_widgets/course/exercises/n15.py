"""Notebook 15 (reading traces): facts read off a profile (total and self time), three readings built from a raw
Chrome trace (a self-time table, each thread's busy and idle time, the top ops by self time of one ProfilerStep),
and a training step made several times faster.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). Answers are taken apart as plain builtins and plain tensors
(exact types, read with the builtin types' own methods) before anything is looked up in them: an object of the
learner's own class never runs code inside a check.
"""

from __future__ import annotations

import copy
import json
import os
import random
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

from ...lenses import asyncexec as asyncexec_lens
from ...lenses import profile as profile_lens
from ...lenses.timing import one_thread
from .. import integrity
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["busy_idle", "fix_step", "read_trace", "self_times", "top_self"]

# captured at import: the builtin types' own methods, whatever an answer's class overrides
_dict_items = dict.items
_float_of = float.__float__
_int_of = int.__int__


def _raise_as_hidden(c: Check, call: Callable[[], Any], label: str) -> Any:
    """`call()` for a hidden case: an error fails the check naming its type only (torch's message, or a KeyError,
    can hold the case's content)."""
    from ..checks import CheckFailed

    try:
        return call()
    except CheckFailed:
        raise
    except Exception as exc:
        c.fail(f"{label}: your code raised {type(exc).__name__}")


# --- 15-read-trace ----------------------------------------------------------------------------------------------

READ_HINTS = (
    "count calls in the table (the calls column), not spans you can see: the picture may draw several calls "
    "as one thin line; and read total and self time from their own columns",
    "total time is a span from its start to its end; self time is that minus the spans nested directly under it: "
    "a range full of operators has a long total and little self, a range where Python computes between "
    "operators has a lot of self",
    "for the children of aten::linear, subtract each child's own children too: a child that only calls other ops "
    "has a long total and little self",
)
READ_KEYS = ("calls of aten::addmm", "range with the most total time", "range with the most self time",
             "child of aten::linear with the most self time")
MYSTERY_BATCH = (2048, 32)  # prepare's pairwise distances grow with the batch squared: its total leads by ~5x


def _mystery_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                               torch.nn.ReLU(), torch.nn.Linear(64, 8))


def _mystery_step(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
    """The notebook's mystery_step, on the check's own model."""
    with record_function("prepare"):
        near = torch.cdist(batch, batch).topk(4, largest=False).indices
        halves = batch[near].mean(1).chunk(2)
    with record_function("bookkeeping"):
        seen = sum(i * i % 7 for i in range(50_000))
    with record_function("forward"):
        outs = [model(h) for h in halves]
    return torch.cat(outs).sum() + seen


def _read_once(model: torch.nn.Module) -> tuple[Any, ...]:
    """The four facts, read off one profile of the mystery step, recorded now (on one thread, as the notebook
    draws it)."""
    with one_thread():
        trace = profile_lens.record_profile(_mystery_step, model, torch.randn(*MYSTERY_BATCH), with_stack=False)
    table = {a.name: a for a in trace.key_averages()}
    names = ("prepare", "bookkeeping", "forward")
    total = {n: table[n].total for n in names}
    own = {n: table[n].self_time for n in names}
    children: dict[str, float] = {}
    for linear in trace.by_name("aten::linear"):
        for child in trace.children(linear):
            self_us = child.duration - sum(inner.duration for inner in trace.children(child))
            children[child.name] = children.get(child.name, 0.0) + self_us
    return (table["aten::addmm"].count, max(total, key=total.__getitem__), max(own, key=own.__getitem__),
            max(children, key=children.__getitem__))


def _read_truth(recordings: int = 5) -> dict[str, Any]:
    """Each fact as most of `recordings` profiles show it (after one unrecorded warm-up run): on a busy machine one
    preempted span can make a tiny op look long in a single trace."""
    model = _mystery_model()
    with one_thread(), torch.no_grad():
        _mystery_step(model, torch.randn(*MYSTERY_BATCH))
    seen = [_read_once(model) for _ in range(recordings)]
    return {key: Counter(facts[k] for facts in seen).most_common(1)[0][0] for k, key in enumerate(READ_KEYS)}


def _plain_dict(c: Check, answer: Any, what: str, hint: Any) -> dict[str, Any]:
    """`answer` as a new plain dict with plain string keys (its values are compared by exact type later)."""
    c.that(type(answer) is dict, f"{what} should be a plain dict (the one above, filled in), got "
           f"{type(answer).__name__}", hint)
    pairs = list(_dict_items(answer))
    bad = [type(k).__name__ for k, _ in pairs if type(k) is not str]
    c.that(not bad, f"the keys of {what} should be plain strings; one is a {bad[0] if bad else ''}", hint)
    return dict(pairs)


def read_trace(c: Check, answer: Any, hidden: Iterable[Iterable[tuple[str, Any]]] | None = None) -> None:
    """`READ_TRACE`: four facts about `mystery_step`'s profile, predicted (secret), against a profile the check
    records itself. Hidden: (key, value) facts a trace recorded now must show (else the grading run was disturbed),
    and the answer too."""
    mine = _plain_dict(c, answer, "READ_TRACE", READ_HINTS)
    truth = _read_truth()
    c.equal(sorted(mine), sorted(truth), what="the keys of READ_TRACE", hint=READ_HINTS)
    if hidden is None:
        for key, value in truth.items():
            c.equal(mine[key], value, what=f"READ_TRACE[{key!r}]", hint=READ_HINTS, secret=True)
        return
    # at grading: the facts that do not depend on timing noise must hold in a trace recorded now, and in the answer
    for label, facts in named(hidden, (), str):
        for key, value in _dict_items(dict(facts)):
            c.that(type(truth.get(key)) is type(value) and truth.get(key) == value,
                   f"{label}: the trace recorded for grading did not look as expected; run the check again",
                   READ_HINTS)
            c.equal(mine.get(key), value, what=f"READ_TRACE[{key!r}]", hint=READ_HINTS, secret=True)


# --- 15-self-time -----------------------------------------------------------------------------------------------

SELF_HINTS = (
    "check the three rules one by one: which events count, which span is whose parent (same thread, contains "
    "it, the innermost one), and that self subtracts only the direct children",
    "sort the spans by thread, then by start, the longer first when two start together; walk them keeping the "
    "chain of spans that are still open; a span's parent is the innermost open span on its thread that ends at "
    "or after it ends",
)


def _span(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op", pid: int = 7) -> Mapping[str, Any]:
    return MappingProxyType({"ph": "X", "name": name, "ts": ts, "dur": dur, "tid": tid, "pid": pid, "cat": cat})


NESTED = (_span("step", 0, 100, cat="user_annotation"), _span("aten::linear", 10, 50), _span("aten::addmm", 12, 40),
          _span("aten::relu", 70, 20), _span("aten::clamp_min", 71, 18), _span("aten::relu", 95, 4),
          MappingProxyType({"ph": "X", "name": "forward", "ts": 5, "dur": 90, "tid": 1, "pid": 7,
                            "cat": "python_function"}),
          MappingProxyType({"ph": "i", "name": "mark", "ts": 50, "tid": 1, "pid": 7, "cat": "cpu_op"}))
THREADS = (_span("aten::mm", 0, 100, tid=1), _span("aten::add", 10, 5, tid=2), _span("aten::mm", 20, 30, tid=2),
           _span("aten::copy_", 25, 10, tid=2), _span("aten::add", 60, 5, tid=1))
# a child listed before the parent it starts together with: a sort by start alone keeps it first, and nests wrong
TIES = (_span("step", 0, 50, cat="user_annotation"), _span("aten::addmm", 5, 20), _span("aten::linear", 5, 30),
        _span("aten::fill_", 40, 3), _span("aten::zero_", 40, 6))
SELF_CASES = MappingProxyType({
    "no events": (),
    "touching spans": (_span("a", 0, 10), _span("b", 0, 4), _span("c", 4, 6), _span("d", 4, 0)),
    "two processes": (_span("x", 0, 10, pid=1), _span("y", 2, 3, pid=2)),
    "three spans that start together, innermost listed first": (_span("c", 0, 2), _span("b", 0, 5), _span("a", 0, 9),
                                                                 _span("d", 9, 1)),
    "ties on two threads": (_span("k", 3, 1, tid=2), _span("m", 3, 7, tid=2), _span("n", 3, 7, tid=1),
                            _span("p", 3, 2, tid=1)),
})


def _reference(events: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, float, float]]:
    """The table, by the definition: each span's parent is the tightest span on its thread that contains it (the
    earlier listed of two equal spans contains the later)."""
    kept = [ev for ev in events if ev.get("ph") == "X" and ev.get("cat") in {"cpu_op", "user_annotation"}]
    inner = [0.0] * len(kept)
    for idx, ev in enumerate(kept):
        best = None
        for j, p in enumerate(kept):
            if j == idx or (p["pid"], p["tid"]) != (ev["pid"], ev["tid"]):
                continue
            if p["ts"] <= ev["ts"] and ev["ts"] + ev["dur"] <= p["ts"] + p["dur"]:
                tighter = best is None or p["dur"] < kept[best]["dur"] or (
                    p["dur"] == kept[best]["dur"] and j < best)
                longer = p["dur"] > ev["dur"] or (p["dur"] == ev["dur"] and j < idx)
                if longer and tighter:
                    best = j
        if best is not None:
            inner[best] += ev["dur"]
    table: dict[str, tuple[int, float, float]] = {}
    for ev, own in zip(kept, inner):
        n, t, s = table.get(ev["name"], (0, 0.0, 0.0))
        table[ev["name"]] = (n + 1, t + ev["dur"], s + ev["dur"] - own)
    return table


def _recorded() -> list[dict[str, Any]]:
    """The traceEvents of a small step torch.profiler records and exports now."""
    model = torch.nn.Linear(16, 16)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("outer"):
            with record_function("inner"):
                model(torch.randn(4, 16)).relu().sum()
    with tempfile.TemporaryDirectory(prefix="tlw-trace-") as folder:  # nothing left in /tmp
        path = os.path.join(folder, "t.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events: list[dict[str, Any]] = json.load(f)["traceEvents"]
    return events


def _number(value: Any) -> float | None:
    """A plain int or float (a subclass, numpy's float64 among them, read by the builtin's own method), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return _float_of(value)
    if isinstance(value, int):
        return float(_int_of(value))
    return None


def _plain_table(c: Check, got: Any, label: str, secret: bool) -> dict[str, tuple[Any, Any, Any]]:
    """self_times' result as a new plain dict of plain 3-tuples, or a failure saying which part is not plain."""
    c.that(type(got) is dict, f"{label}: self_times should return a plain dict, got {type(got).__name__}",
           SELF_HINTS)
    table = {}
    for name, row in list(_dict_items(got)):
        c.that(type(name) is str, f"{label}: the keys of your table should be the span names (plain strings); "
               f"one is a {type(name).__name__}", SELF_HINTS)
        shown = "one name" if secret else repr(name)
        c.that(type(row) in (tuple, list) and len(row) == 3, f"{label}: {shown} should map to a (count, total, "
               f"self) tuple, got {type(row).__name__}" + ("" if type(row) not in (tuple, list) else
                                                          f" of length {len(row)}"), SELF_HINTS)
        table[name] = tuple(row)
    return table


def _judge_table(c: Check, mine: Callable[..., Any], events: Sequence[Mapping[str, Any]], label: str,
                 secret: bool) -> None:
    expected = _reference(events)
    given = [dict(e) for e in events]
    got = _raise_as_hidden(c, lambda: mine(given), label) if secret else mine(given)
    table = _plain_table(c, got, label, secret)
    if secret:
        c.equal(set(table), set(expected), what=f"{label}: the names in your table", hint=SELF_HINTS, secret=True)
    else:
        c.equal(sorted(table), sorted(expected), what=f"{label}: the names in your table", hint=SELF_HINTS)
    for name, (n, total, own) in expected.items():
        row = table[name]
        shown = "one name" if secret else repr(name)
        c.equal(row[0], n, what=f"{label}: count of {shown}", hint=SELF_HINTS, secret=secret)
        for what, g, e in (("total", row[1], total), ("self", row[2], own)):
            value = _number(g)
            ok = value is not None and abs(value - e) <= 1e-6 + 1e-9 * abs(e)
            said = f"a {type(g).__name__}" if value is None else repr(value)
            c.that(ok, f"{label}: {what} time of {shown} is {said}, " + ("which is not right" if secret else
                                                                        f"expected {e:.3f}"), SELF_HINTS)


def self_times(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`self_times(events)`: {name: (count, total, self)} over a Chrome trace's cpu_op and user_annotation
    complete events, without the profile lens; hidden cases are named in SELF_CASES."""
    mine = c.watch(answer, "self_times", forbid=[profile_lens, asyncexec_lens], escapes=True)
    if hidden is None:
        shuffled = list(NESTED)
        random.Random(3).shuffle(shuffled)
        visible: tuple[tuple[str, Sequence[Mapping[str, Any]]], ...] = (
            ("one thread, nested spans, a Python frame and an instant event", NESTED),
            ("two threads whose spans overlap in time", THREADS),
            ("the same spans in another order", shuffled),
            ("spans that start together, the shorter listed first", TIES),
            ("a trace torch.profiler exported", _recorded()))
        for label, events in visible:
            _judge_table(c, mine, events, label, secret=False)
        return
    for label, name in named(hidden, (), str):
        _judge_table(c, mine, SELF_CASES[name], label, secret=True)


# --- 15-fix-step ------------------------------------------------------------------------------------------------

FASTER_HINTS = (
    "profile your step next to slow_step: which range is still long, and how many calls run in it?",
    "the loss loops over the samples in Python: one cross_entropy call per sample, and one small graph each for "
    "backward; F.cross_entropy takes the whole batch and averages over it",
)
SAME_HINTS = ("your step must compute the same thing: normalise the raw batch per feature, run the model, take the "
              "mean cross-entropy over the batch, run backward, and return the loss",)
TIMED_BATCH = 256  # timed on a large batch: the per-sample loop is O(batch)
TIMED_REPEAT = 15


# slow_step without its ranges, compiled per check under a file name of its own: it is the notebook's own loop, so a
# learner's step that keeps that loop is too slow, not a copy of one of the check's helpers
SLOW_STEP = """
def slow_step(model, raw, labels):
    logits = model((raw - raw.mean(dim=0)) / raw.std(dim=0))
    loss = sum(F.cross_entropy(logits[i:i + 1], labels[i:i + 1]) for i in range(len(labels))) / len(labels)
    loss.backward()
    return loss
"""
Step = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


def _slow_step() -> Step:
    space: dict[str, Any] = {"F": F}
    exec(compile(SLOW_STEP, "<slow_step of 15-fix-step>", "exec"), space)
    step: Step = space["slow_step"]
    return step


def _case(batch: int, seed: int) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    g = torch.Generator().manual_seed(seed)
    return model, torch.randn(batch, 64, generator=g) * 3 + 1, torch.randint(0, 10, (batch,), generator=g)


def _grads(c: Check, model: torch.nn.Module, label: str) -> list[torch.Tensor | None]:
    """Each parameter's .grad, copied, once it is a plain tensor (a subclass could answer for itself)."""
    grads = []
    for k, p in enumerate(model.parameters()):
        g = p.grad
        c.that(g is None or type(g) is torch.Tensor, f"{label}: the gradient of parameter {k} is a "
               f"{type(g).__name__}, not a plain tensor", SAME_HINTS)
        grads.append(None if g is None else g.detach().clone())
    return grads


def _same_step(c: Check, got: Any, got_grads: Sequence[torch.Tensor | None], expected: torch.Tensor,
               expected_grads: Sequence[torch.Tensor | None], label: str, secret: bool) -> None:
    """The loss returned (a plain 0-d tensor) and the gradients left, against slow_step's on the same inputs."""
    c.that(all(g is not None for g in got_grads), f"{label}: after faster_step some parameters have no .grad: the "
           "step must run backward", SAME_HINTS)
    c.that(type(got) is torch.Tensor, f"{label}: faster_step should return the loss, a 0-d tensor; got "
           f"{type(got).__name__}", SAME_HINTS)
    c.that(got.dim() == 0, f"{label}: faster_step should return the loss, a 0-d tensor; got a tensor with "
           f"{got.dim()} dimensions", SAME_HINTS)
    c.equal(got.detach(), expected.detach(), what=f"{label}: the loss", hint=SAME_HINTS, rel_tol=1e-4, secret=secret)
    for k, (g, e) in enumerate(zip(got_grads, expected_grads)):
        c.equal(g, e, what=f"{label}: the gradient of parameter {k}", hint=SAME_HINTS, rel_tol=1e-4, secret=secret)


def _judge_step(c: Check, mine: Callable[..., Any], slow: Step, batch: int, seed: int, label: str,
                secret: bool) -> None:
    model, raw, labels = _case(batch, seed)
    params = list(model.parameters())
    before = [p.detach().clone() for p in params]
    args = (model, raw.clone(), labels.clone())
    got = _raise_as_hidden(c, lambda: mine(*args), label) if secret else mine(*args)
    got_grads = _grads(c, model, label)
    now = list(model.parameters())
    with integrity.clean():
        unchanged = len(now) == len(params) and all(a is b for a, b in zip(now, params)) and all(
            integrity.trusted_equal(p.detach(), b) for p, b in zip(params, before))
    c.that(unchanged, f"{label}: faster_step changed the model's parameters; it should only compute the gradients",
           SAME_HINTS)
    model.zero_grad(set_to_none=True)
    expected = slow(model, raw, labels)
    _same_step(c, got, got_grads, expected, _grads(c, model, label), label, secret)


Timed = tuple[torch.nn.Module, torch.Tensor, torch.Tensor, torch.nn.Module, torch.Tensor, torch.Tensor]


def _timed_inputs(n: int) -> list[Timed]:
    """n fresh (model, raw, labels) for faster_step and a twin of each for slow_step: every timed call gets new
    objects and new values, so nothing from an earlier call can answer it."""
    out = []
    for k in range(n):
        model, raw, labels = _case(TIMED_BATCH, 1000 + k)
        out.append((model, raw, labels, copy.deepcopy(model), raw.clone(), labels.clone()))
    return out


def fix_step(c: Check, answer: Any, hidden: Iterable[tuple[int, int]] | None = None) -> None:
    """`faster_step(model, raw, labels)`: slow_step's loss and gradients (batches of 64 and 32), at least 3x as fast
    on one thread (best of 15, alternating, every timed call on fresh inputs, whose results are checked too).
    Hidden cases: (batch, seed) pairs, values only."""
    mine = c.watch(answer, "faster_step")
    slow = _slow_step()
    if hidden is not None:
        for label, (batch, seed) in named(hidden, (), str):
            _judge_step(c, mine, slow, batch, seed, label, secret=True)
        return
    _judge_step(c, mine, slow, 64, 0, "a batch of 64", secret=False)
    _judge_step(c, mine, slow, 32, 4, "a batch of 32", secret=False)
    # timed as it is (the recording c.watch adds to every call would slow it down), each call on new inputs
    pool = _timed_inputs(TIMED_REPEAT + 9)
    fast_runs: list[tuple[Any, torch.nn.Module]] = []
    slow_runs: list[torch.Tensor] = []

    def fast_once() -> None:
        model, raw, labels = (pool[len(fast_runs)] if len(fast_runs) < len(pool) else _timed_inputs(1)[0])[:3]
        fast_runs.append((answer(model, raw, labels), model))

    def slow_once() -> None:
        twin, raw, labels = (pool[len(slow_runs)] if len(slow_runs) < len(pool) else _timed_inputs(1)[0])[3:]
        slow_runs.append(slow(twin, raw, labels))

    with one_thread():  # a batch op split over threads stalls when another process holds a core
        c.faster(fast_once, slow_once, at_least=3.0, what="faster_step", repeat=TIMED_REPEAT, hint=FASTER_HINTS)
    for k, ((got, model), expected) in enumerate(zip(fast_runs, slow_runs)):
        if k >= len(pool):
            break
        label = f"timed call {k + 1} (a batch of {TIMED_BATCH})"
        _same_step(c, got, _grads(c, model, label), expected, _grads(c, pool[k][3], label), label, secret=False)


# --- 15-idle-gaps -----------------------------------------------------------------------------------------------

IDLE_HINTS = (
    "check which spans count (complete cpu_op events only), that each thread is its own lane, and that time "
    "covered by a span nested in another is counted once",
    "busy is the length of the union of a thread's op spans, not the sum of their durations; idle is the rest of "
    "the window from the thread's first op start to its last op end",
    "per thread, sort the spans by start and sweep them keeping the end of the covered stretch so far: a span "
    "that starts after it opens a gap, one that starts before it can only push it further",
)


def _idle_reference(events: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, Any], tuple[float, float]]:
    """Per (pid, tid): (busy, idle) by the definition, from the union of the thread's cpu_op spans."""
    lanes: dict[tuple[Any, Any], list[tuple[float, float]]] = {}
    for ev in events:
        if ev.get("ph") == "X" and ev.get("cat") == "cpu_op":
            lanes.setdefault((ev["pid"], ev["tid"]), []).append((ev["ts"], ev["ts"] + ev["dur"]))
    out = {}
    for lane, spans in lanes.items():
        spans.sort()
        busy, reach = 0.0, None
        for start, end in spans:
            if reach is None or start >= reach:
                busy += end - start
                reach = end
            elif end > reach:
                busy += end - reach
                reach = end
        window = max(e for _, e in spans) - min(s for s, _ in spans)
        out[lane] = (busy, window - busy)
    return out


IDLE_NESTED = (_span("step", 0, 200, cat="user_annotation"), _span("aten::linear", 10, 50),
               _span("aten::addmm", 12, 40), _span("aten::relu", 90, 20), _span("aten::clamp_min", 91, 18),
               _span("aten::sum", 150, 10),
               MappingProxyType({"ph": "X", "name": "slow_step", "ts": 0, "dur": 200, "tid": 1, "pid": 7,
                                 "cat": "python_function"}),
               MappingProxyType({"ph": "i", "name": "[memory]", "ts": 120, "tid": 1, "pid": 7, "cat": "cpu_op"}))
IDLE_THREADS = (_span("aten::mm", 0, 100, tid=1), _span("aten::add", 10, 5, tid=2), _span("aten::mm", 40, 30, tid=2),
                _span("aten::copy_", 45, 10, tid=2), _span("aten::add", 130, 5, tid=1))
IDLE_CASES = MappingProxyType({
    "no events": (),
    "one span": (_span("a", 5, 3),),
    "spans that touch": (_span("a", 0, 4), _span("b", 4, 6), _span("c", 10, 0)),
    "two processes, one tid": (_span("x", 0, 10, pid=1), _span("y", 40, 5, pid=2), _span("z", 50, 5, pid=1)),
    "a child listed before its parent, a gap after": (_span("inner", 2, 3), _span("outer", 0, 10),
                                                      _span("later", 30, 2), _span("inner", 31, 1)),
    "a range over the gap": (_span("r", 0, 100, cat="user_annotation"), _span("a", 10, 10), _span("b", 70, 10)),
})


def _plain_lanes(c: Check, got: Any, label: str, secret: bool) -> dict[tuple[Any, Any], tuple[Any, ...]]:
    """busy_idle's result as a new plain dict of (pid, tid) -> plain 2-tuples."""
    c.that(type(got) is dict, f"{label}: busy_idle should return a plain dict, got {type(got).__name__}", IDLE_HINTS)
    lanes = {}
    for key, row in list(_dict_items(got)):
        c.that(type(key) is tuple and len(key) == 2, f"{label}: the keys should be (pid, tid) tuples; one is a "
               f"{type(key).__name__}", IDLE_HINTS)
        shown = "one thread" if secret else repr(key)
        c.that(type(row) in (tuple, list) and len(row) == 2, f"{label}: {shown} should map to a (busy, idle) "
               f"pair, got {type(row).__name__}", IDLE_HINTS)
        lanes[tuple(key)] = tuple(row)
    return lanes


def _judge_lanes(c: Check, mine: Callable[..., Any], events: Sequence[Mapping[str, Any]], label: str,
                 secret: bool) -> None:
    expected = _idle_reference(events)
    given = [dict(e) for e in events]
    got = _raise_as_hidden(c, lambda: mine(given), label) if secret else mine(given)
    lanes = _plain_lanes(c, got, label, secret)
    c.equal(sorted(lanes, key=repr), sorted(expected, key=repr), what=f"{label}: the threads in your dict",
            hint=IDLE_HINTS, secret=secret)
    for lane, pair in expected.items():
        shown = "one thread" if secret else repr(lane)
        for what, g, e in zip(("busy", "idle"), lanes[lane], pair):
            value = _number(g)
            ok = value is not None and abs(value - e) <= 1e-6 + 1e-9 * abs(e)
            said = f"a {type(g).__name__}" if value is None else repr(value)
            c.that(ok, f"{label}: {what} time of {shown} is {said}, " + ("which is not right" if secret else
                                                                        f"expected {e:.3f}"), IDLE_HINTS)


def busy_idle(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`busy_idle(events)`: per (pid, tid), the time its cpu_op spans cover (their union) and the idle rest of the
    window from its first op start to its last op end, without the profile lens; hidden cases named in
    IDLE_CASES."""
    mine = c.watch(answer, "busy_idle", forbid=[profile_lens, asyncexec_lens], escapes=True)
    if hidden is None:
        shuffled = list(IDLE_THREADS)
        random.Random(5).shuffle(shuffled)
        visible: tuple[tuple[str, Sequence[Mapping[str, Any]]], ...] = (
            ("one thread, nested ops, a range, a Python frame and an instant event", IDLE_NESTED),
            ("two threads, listed out of order", shuffled),
            ("a trace torch.profiler exported", _recorded()))
        for label, events in visible:
            _judge_lanes(c, mine, events, label, secret=False)
        return
    for label, name in named(hidden, (), str):
        _judge_lanes(c, mine, IDLE_CASES[name], label, secret=True)


# --- 15-top-self ------------------------------------------------------------------------------------------------

TOP_HINTS = (
    "check which spans belong to the step (same thread, inside the step's span), that self time is the span's "
    "duration minus its direct children only, and the order: largest self first, equal ones by name",
    "first find the step's span by its name; keep the cpu_op and user_annotation spans of its thread that lie "
    "inside it; work out each one's self time as in exercise 2; add them up per op name (ops only, no ranges)",
    "your self_times from exercise 2 does the middle part if you hand it only the step's spans; then sort the "
    "(name, self) pairs by self, descending, ties by name, and keep k",
)


def _top_reference(events: Sequence[Mapping[str, Any]], step: str, k: int) -> list[tuple[str, float]]:
    spans = [ev for ev in events if ev.get("ph") == "X" and ev.get("cat") in {"cpu_op", "user_annotation"}]
    root = next(ev for ev in spans if ev["name"] == step)
    inside = [ev for ev in spans if (ev["pid"], ev["tid"]) == (root["pid"], root["tid"]) and ev is not root
              and root["ts"] <= ev["ts"] and ev["ts"] + ev["dur"] <= root["ts"] + root["dur"]]
    cats = {ev["name"]: ev["cat"] for ev in inside}
    table = _reference(inside)
    rows = sorted(((name, own) for name, (_, _, own) in table.items() if cats[name] == "cpu_op"),
                  key=lambda row: (-row[1], row[0]))
    return rows[:k]


def _steps(n: int, ops: Sequence[tuple[str, float]], t0: float = 0.0, tid: int = 1) -> list[Mapping[str, Any]]:
    """n ProfilerStep ranges in a row, each holding `ops` (name, dur) one after another, durations scaled by the
    step number so that steps differ."""
    out: list[Mapping[str, Any]] = []
    t = t0
    for s in range(n):
        start = t
        t += 1
        for name, dur in ops:
            d = dur * (s + 1) if name != "aten::mm" else dur * (n - s)
            out.append(_span(name, t, d, tid=tid))
            if name == "aten::linear":
                out.append(_span("aten::addmm", t + 0.5, d - 1, tid=tid))
            t += d + 1
        out.append(_span(f"ProfilerStep#{s + 2}", start, t - start, tid=tid, cat="user_annotation"))
        t += 5
    return out


TOP_STEPS = tuple(_steps(3, (("aten::linear", 10.0), ("aten::relu", 4.0), ("aten::mm", 6.0), ("aten::relu", 3.0))))
TOP_CASES = MappingProxyType({
    "the first step, k larger than the ops": (TOP_STEPS, "ProfilerStep#2", 9),
    "the last step, k of 1": (TOP_STEPS, "ProfilerStep#4", 1),
    "a tie on self time": ((_span("ProfilerStep#5", 0, 50, cat="user_annotation"), _span("aten::b", 1, 7),
                            _span("aten::a", 10, 7), _span("aten::c", 20, 2)), "ProfilerStep#5", 2),
    "another thread during the step": ((*_steps(1, (("aten::relu", 5.0),)), _span("aten::mm", 2, 4, tid=9)),
                                        "ProfilerStep#2", 3),
    "a range inside the step": ((_span("ProfilerStep#3", 0, 40, cat="user_annotation"),
                                 _span("loss", 1, 30, cat="user_annotation"), _span("aten::add", 2, 3),
                                 _span("aten::add", 6, 3), _span("aten::sum", 35, 1)), "ProfilerStep#3", 5),
})


def _scheduled() -> list[dict[str, Any]]:
    """The traceEvents of three active steps of a small training step, recorded now under a schedule."""
    from torch.profiler import schedule

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    with tempfile.TemporaryDirectory(prefix="tlw-steps-") as folder:  # nothing left in /tmp
        path = os.path.join(folder, "t.json")
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
            for n in range(6):
                with record_function("loss"):
                    loss = sum(model(torch.randn(2, 16)).sum() for _ in range(n + 1))
                loss.backward()
                prof.step()
        with open(path) as f:
            events: list[dict[str, Any]] = json.load(f)["traceEvents"]
    return events


def _judge_top(c: Check, mine: Callable[..., Any], events: Sequence[Mapping[str, Any]], step: str, k: int,
               label: str, secret: bool) -> None:
    expected = _top_reference(events, step, k)
    given = [dict(e) for e in events]
    got = _raise_as_hidden(c, lambda: mine(given, step, k), label) if secret else mine(given, step, k)
    c.that(type(got) is list, f"{label}: top_self should return a plain list, got {type(got).__name__}", TOP_HINTS)
    rows = list(got)
    c.that(all(type(r) is tuple and len(r) == 2 for r in rows), f"{label}: each item should be a (name, self) "
           "tuple", TOP_HINTS)
    names = [r[0] for r in rows]
    c.equal(names, [n for n, _ in expected], what=f"{label}: the names, in order", hint=TOP_HINTS, secret=secret)
    for (name, g), (_, e) in zip(rows, expected):
        value = _number(g)
        ok = value is not None and abs(value - e) <= 1e-6 + 1e-9 * abs(e)
        said = f"a {type(g).__name__}" if value is None else repr(value)
        shown = "one name" if secret else repr(name)
        c.that(ok, f"{label}: self time of {shown} is {said}, " + ("which is not right" if secret else
                                                                  f"expected {e:.3f}"), TOP_HINTS)


def top_self(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`top_self(events, step, k)`: the k op names with the most self time inside one ProfilerStep range, largest
    first (ties by name), from a Chrome trace's events, without the profile lens or key_averages; hidden cases
    named in TOP_CASES."""
    mine = c.watch(answer, "top_self", forbid=[profile_lens, asyncexec_lens], escapes=True)
    if hidden is None:
        recorded = _scheduled()
        visible: tuple[tuple[str, Sequence[Mapping[str, Any]], str, int], ...] = (
            ("three steps, the middle one, top 2", TOP_STEPS, "ProfilerStep#3", 2),
            ("a scheduled trace torch.profiler exported, its second active step, top 5", recorded,
             "ProfilerStep#3", 5),
            ("the same trace, its last active step, top 3", recorded, "ProfilerStep#4", 3))
        for label, events, step, k in visible:
            _judge_top(c, mine, events, step, k, label, secret=False)
        return
    for label, name in named(hidden, (), str):
        events, step, k = TOP_CASES[name]
        _judge_top(c, mine, events, step, k, label, secret=True)
