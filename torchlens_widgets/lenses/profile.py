"""The profile lens: a ``torch.profiler`` run, live or saved as a Chrome trace, as plain data.

One `ProfileTrace` holds every host span (aten ops ``cpu_op``, ``record_function`` ranges
``user_annotation``, and whatever else the trace timed) with its thread, start, duration, nesting (by
time containment per thread, as ``torch.profiler`` itself nests them), recorded input shapes and the
Python stack around it (``with_stack=True`` exports Python frames as ``python_function`` spans; here they
become each op's stack, innermost frame first, not spans of their own). Beside it, the key-averages
table (`OpAverage`: count, total, self time per name) computed from the spans, which agrees with
``prof.key_averages()``. `downsample` keeps a large trace drawable and records what it left out.

- `record_profile(fn, *args)`: run ``fn`` under the profiler (CPU activity) and read the result;
- `profile_trace_of(prof)`: read a finished ``torch.profiler.profile`` you ran yourself;
- `load_profile(path | json text | dict)`: read a saved ``prof.export_chrome_trace(path)`` (also .json.gz).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .asyncexec import TraceError, _num, _order
from .files import read_bounded

__all__ = [
    "LeftOut",
    "OpAverage",
    "ProfileError",
    "ProfileEvent",
    "ProfileThread",
    "ProfileTrace",
    "downsample",
    "key_averages",
    "load_profile",
    "profile_trace_of",
    "record_profile",
]

#: Categories that are ranges a user opened (``record_function`` / ``ProfilerStep#N``).
RANGE_CATEGORIES = frozenset({"user_annotation", "gpu_user_annotation"})
#: Trace categories read as something else (older traces call aten ops "Operator").
_ALIASES = {"operator": "cpu_op"}
#: Categories that are not spans of the program (the profiler's own whole-trace span).
_IGNORED = frozenset({"trace"})
#: Python frames of the profiler machinery and of this module, left out of stacks.
_NOISE = ("torch/profiler/", "torch/autograd/profiler", "torchlens_widgets/lenses/profile.py")
_CALLER = "torchlens_widgets/lenses/profile.py"  # a stack recorded by record_profile ends at its frame
_ADDRESS = re.compile(r" (?:object )?at 0x[0-9a-fA-F]+")
EPS = 1e-3  # µs: trace times carry ns, so containment is judged to the ns

# Kineto (torch 2.13's CPU build) logs two timestamped lines, profiler_start and profiler_stop, on stderr for every
# profiler run. It reads KINETO_LOG_LEVEL when the process's first profiler starts, so the lens sets it as it is
# imported, before any torch.profiler run it reads or records: 6 keeps only fatal messages. A value the user set wins.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")


class ProfileError(TraceError):
    """Raised when a profile cannot be read or recorded; the message says what was expected."""


@dataclass(frozen=True)
class ProfileThread:
    """One lane of the timeline: a (pid, tid) pair of the trace and its name."""

    id: int
    pid: Any
    tid: Any
    name: str


@dataclass(frozen=True)
class ProfileEvent:
    """One span: times in µs from the trace start; `parent` indexes `ProfileTrace.events` (None: top level).

    `stack`: the Python frames around it, innermost first (empty without ``with_stack=True``);
    `shapes`: the input shapes recorded with ``record_shapes=True`` (() for a non-tensor argument).
    """

    index: int
    name: str
    category: str
    thread: int
    start: float
    duration: float
    depth: int
    parent: int | None
    shapes: tuple[tuple[int, ...], ...] = ()
    stack: tuple[str, ...] = ()

    @property
    def end(self) -> float:
        return round(self.start + self.duration, 3)

    @property
    def is_range(self) -> bool:
        """A ``record_function`` range rather than an op."""
        return self.category in RANGE_CATEGORIES


@dataclass(frozen=True)
class OpAverage:
    """One row of the key-averages table: calls of one name, total (inclusive) and self time in µs."""

    name: str
    category: str
    count: int
    total: float
    self_time: float

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


@dataclass(frozen=True)
class LeftOut:
    """What `downsample` dropped: how many spans, the time they covered (outermost dropped spans, µs),
    and the names dropped most often (name, count)."""

    events: int
    time: float
    names: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class ProfileTrace:
    """A profile as plain data. `averages` is computed from all spans read, so it stays exact after
    `downsample`; `left_out` says what a downsampled trace no longer holds (None: nothing)."""

    source: str  # "live" | "file"
    threads: tuple[ProfileThread, ...]
    events: tuple[ProfileEvent, ...]
    averages: tuple[OpAverage, ...]
    end: float
    python_frames: int = 0  # python_function spans read (they are the stacks)
    with_stack: bool = False
    record_shapes: bool = False
    left_out: LeftOut | None = None
    notes: tuple[str, ...] = ()

    def key_averages(self, category: str | None = None) -> list[OpAverage]:
        """The table sorted by self time (then name); `category` keeps one kind ("cpu_op", "user_annotation")."""
        return [a for a in self.averages if category is None or a.category == category]

    def by_name(self, name: str) -> list[ProfileEvent]:
        """The spans called `name`, in time order."""
        return sorted((e for e in self.events if e.name == name), key=lambda e: (e.start, e.thread))

    def children(self, event: ProfileEvent | int) -> list[ProfileEvent]:
        i = event if isinstance(event, int) else event.index
        return [e for e in self.events if e.parent == i]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (kind "profile_trace", version 1) that render.profile draws. Stacks are interned:
        `frames` lists each frame once, `stacks` each distinct stack once (frame indices, innermost first),
        and an event's `stack` is an index into `stacks` (None: no stack)."""
        frames: dict[str, int] = {}
        stacks: dict[tuple[int, ...], int] = {}
        events = []
        for e in self.events:
            sid = None
            if e.stack:
                key = tuple(frames.setdefault(f, len(frames)) for f in e.stack)
                sid = stacks.setdefault(key, len(stacks))
            events.append({"name": e.name, "category": e.category, "thread": e.thread, "start": e.start,
                           "duration": e.duration, "depth": e.depth, "parent": e.parent,
                           "shapes": [list(s) for s in e.shapes], "stack": sid})
        return {
            "kind": "profile_trace", "version": 1, "source": self.source, "unit": "us", "end": self.end,
            "with_stack": self.with_stack, "record_shapes": self.record_shapes, "python_frames": self.python_frames,
            "threads": [asdict(t) for t in self.threads],
            "frames": list(frames), "stacks": [list(s) for s in stacks],
            "events": events,
            "averages": [dict(asdict(a), mean=a.mean) for a in self.averages],
            "left_out": None if self.left_out is None else {"events": self.left_out.events, "time": self.left_out.time,
                                                            "names": [list(n) for n in self.left_out.names]},
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------------------------------
# Reading a Chrome trace


def _read_doc(source: str | os.PathLike[str] | Mapping[str, Any] | list[Any]) -> Any:
    if isinstance(source, (Mapping, list)):
        return source
    if isinstance(source, bytes):
        raise ProfileError("pass the trace as a path, JSON text or parsed dict, not bytes")
    if isinstance(source, str) and source.lstrip()[:1] in ("{", "["):
        text = source
    else:
        if not isinstance(source, (str, os.PathLike)):
            raise ProfileError(f"load_profile takes a path, JSON text or a parsed trace dict, got {type(source).__name__}")
        path = Path(source)
        if not path.is_file():
            raise ProfileError(f"no trace file at {str(path)!r}; pass the path prof.export_chrome_trace(...) wrote "
                               "(.json or .json.gz), the JSON text, or the parsed dict")
        # The profiler can write a mangled byte into a Python frame name: read on, replacing it.
        text = read_bounded(path, repr(str(path)), ProfileError).decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ProfileError(f"the trace is not valid JSON ({e}); expected a Chrome trace written by "
                           "prof.export_chrome_trace(path)") from None
    except RecursionError:
        raise ProfileError("the trace is nested too deeply to be a Chrome trace; expected the JSON that "
                           "prof.export_chrome_trace writes") from None


@dataclass
class _Raw:
    name: str
    cat: str
    lane: int
    ts: float
    dur: float
    args: Mapping[str, Any]


def _shapes(args: Mapping[str, Any], memo: dict[str, tuple[tuple[int, ...], ...]]) -> tuple[tuple[int, ...], ...]:
    """The recorded input shapes (() for an argument that is not a tensor); `memo` shares repeated ones."""
    dims = args.get("Input Dims")
    if not isinstance(dims, list):
        return ()
    key = repr(dims)
    got = memo.get(key)
    if got is None:
        got = tuple(tuple(d) if isinstance(d, list) and all(type(n) is int for n in d) else () for d in dims)
        memo[key] = got
    return got


def _time(v: Any) -> float | None:
    """`_num`, with the common case (a finite float or int) first."""
    if type(v) is float or type(v) is int:
        return v if -1e300 < v < 1e300 else None
    return _num(v)


def _frame(name: str) -> str | None:
    """A Python frame as shown in a stack (addresses cut), or None for the profiler's own frames."""
    if any(n in name for n in _NOISE):
        return None
    return _ADDRESS.sub("", name)


def _nest(spans: list[_Raw]) -> list[int | None]:
    """Parent index of each span (same lane, time containment); spans sorted by (lane, ts, -dur)."""
    parents: list[int | None] = [None] * len(spans)
    stack: list[int] = []
    lane = None
    for i, s in enumerate(spans):
        if s.lane != lane:
            stack, lane = [], s.lane
        end = s.ts + s.dur
        while stack and spans[stack[-1]].ts + spans[stack[-1]].dur + EPS < end:
            stack.pop()
        parents[i] = stack[-1] if stack else None
        stack.append(i)
    return parents


def _stacks(spans: list[_Raw], python: list[_Raw]) -> list[tuple[str, ...]]:
    """For each span (sorted by lane, ts), the Python frames containing it, innermost first."""
    by_lane: dict[int, list[_Raw]] = {}
    for p in python:
        by_lane.setdefault(p.lane, []).append(p)
    out: list[tuple[str, ...]] = [()] * len(spans)
    for lane, frames in by_lane.items():
        frames.sort(key=lambda p: (p.ts, -p.dur))
        idx = [i for i, s in enumerate(spans) if s.lane == lane]
        # merge the two time-ordered lists; the python stack holds the frames that contain "now"
        stack: list[_Raw] = []
        k = 0
        for i in idx:
            s = spans[i]
            while k < len(frames) and frames[k].ts <= s.ts + EPS:
                f = frames[k]
                while stack and stack[-1].ts + stack[-1].dur + EPS < f.ts + f.dur:
                    stack.pop()
                stack.append(f)
                k += 1
            end = s.ts + s.dur
            inside = [f for f in stack if f.ts + f.dur + EPS >= end]
            names = []
            for f in reversed(inside):
                if _CALLER in f.name:  # record_profile ran the function: what called record_profile is not its stack
                    break
                names.append(_frame(f.name))
            out[i] = tuple(n for n in names if n)
    return out


def _averages(events: list[ProfileEvent], child_time: Mapping[int, float]) -> tuple[OpAverage, ...]:
    """Count, total and self time per name. As torch does, a span that is the only child of a span of the same
    name (``aten::sum`` calling ``aten::sum``) is one call with its parent: its self time goes to the name, its
    call and total do not."""
    n_children: dict[int, int] = {}
    for e in events:
        if e.parent is not None:
            n_children[e.parent] = n_children.get(e.parent, 0) + 1
    table: dict[str, list[Any]] = {}
    for e in events:
        row = table.setdefault(e.name, [e.category, 0, 0.0, 0.0])
        p = None if e.parent is None else events[e.parent]
        if p is None or p.name != e.name or n_children[p.index] != 1:
            row[1] += 1
            row[2] += e.duration
        row[3] += e.duration - child_time.get(e.index, 0.0)
    rows = [OpAverage(n, c, k, round(t, 3), round(max(s, 0.0), 3)) for n, (c, k, t, s) in table.items()]
    return tuple(sorted(rows, key=lambda a: (-a.self_time, a.name)))


def key_averages(trace: ProfileTrace) -> list[OpAverage]:
    """The key-averages table of a trace, sorted by self time (as ``prof.key_averages()`` would list it)."""
    return list(trace.averages)


def _build(doc: Any, source: str) -> ProfileTrace:
    raw = doc.get("traceEvents") if isinstance(doc, Mapping) else doc
    if not isinstance(raw, list):
        raise ProfileError("a Chrome trace is a dict with a 'traceEvents' list (or that list itself); got "
                           f"{type(doc).__name__} without one; load the file prof.export_chrome_trace(path) wrote")
    lanes: dict[tuple[Any, Any], int] = {}
    thread_names: dict[tuple[Any, Any], str] = {}
    spans: list[_Raw] = []
    python: list[_Raw] = []
    skipped = 0
    empty: Mapping[str, Any] = {}
    for e in raw:
        if type(e) is not dict and not isinstance(e, Mapping):
            skipped += 1
            continue
        ph = e.get("ph")
        if ph != "X":
            args = e.get("args")
            if ph == "M" and e.get("name") == "thread_name" and isinstance(args, Mapping) and isinstance(args.get("name"), str) \
                    and _is_id(e.get("pid")) and _is_id(e.get("tid")):
                thread_names[(e.get("pid"), e.get("tid"))] = args["name"].strip()
            continue
        cat = str(e.get("cat", "")).lower()
        cat = _ALIASES.get(cat, cat)
        if cat in _IGNORED:
            continue
        ts, dur = _time(e.get("ts")), _time(e.get("dur"))
        if ts is None or dur is None or dur < 0 or not _is_id(e.get("pid")) or not _is_id(e.get("tid")):
            skipped += 1
            continue
        args = e.get("args")
        lane = lanes.setdefault((e.get("pid"), e.get("tid")), len(lanes))
        item = _Raw(str(e.get("name", "?")), cat or "?", lane, ts, dur,
                    args if type(args) is dict or isinstance(args, Mapping) else empty)
        (python if cat == "python_function" else spans).append(item)
    if not spans:
        raise ProfileError("the trace has no timed spans (complete 'X' events with ts and dur); record it with "
                           "torch.profiler.profile(activities=[ProfilerActivity.CPU]) and export it with "
                           "prof.export_chrome_trace(path)")
    # lanes in (pid, tid) order, only those with spans
    keys = {v: k for k, v in lanes.items()}
    used = sorted({s.lane for s in spans}, key=lambda i: _lane_order(keys[i]))  # 40,000 threads: linear, not quadratic
    renumber = {old: new for new, old in enumerate(used)}
    threads = tuple(ProfileThread(renumber[i], keys[i][0], keys[i][1],
                                  thread_names.get(keys[i], f"thread {keys[i][1]}")) for i in used)
    for s in spans:
        s.lane = renumber[s.lane]
    for f in python:
        f.lane = renumber.get(f.lane, -1)
    t0 = min(s.ts for s in spans)
    spans.sort(key=lambda s: (s.lane, s.ts, -s.dur))
    parents = _nest(spans)
    stacks = _stacks(spans, [p for p in python if p.lane >= 0])
    memo: dict[str, tuple[tuple[int, ...], ...]] = {}
    depth: list[int] = []
    events: list[ProfileEvent] = []
    child_time: dict[int, float] = {}
    for i, s in enumerate(spans):
        p = parents[i]
        depth.append(0 if p is None else depth[p] + 1)
        if p is not None:
            child_time[p] = child_time.get(p, 0.0) + s.dur
        events.append(ProfileEvent(i, s.name, s.cat, s.lane, round(s.ts - t0, 3), round(s.dur, 3), depth[i], p,
                                   _shapes(s.args, memo), stacks[i]))
    end = round(max(s.ts + s.dur for s in spans) - t0, 3)
    notes = []
    if skipped:
        notes.append(f"{skipped} malformed event{'s' if skipped != 1 else ''} skipped (no ts/dur, or a pid/tid "
                     "that is not a number or a string)")
    meta = doc if isinstance(doc, Mapping) else {}
    with_stack = bool(python) or bool(meta.get("with_stack"))
    record_shapes = any(e.shapes for e in events) or bool(meta.get("record_shapes"))
    return ProfileTrace(source, threads, tuple(events), _averages(events, child_time), end, len(python),
                        with_stack, record_shapes, None, tuple(notes))


def _is_id(v: Any) -> bool:
    """A pid or tid a lane can be keyed by: a number, a string or absent (a list or dict in a file is malformed)."""
    return v is None or (type(v) in (int, float, str) and v == v)


def _lane_order(key: tuple[Any, Any]) -> tuple[float, float, str]:
    return (_order(key[0]), _order(key[1]), str(key))


def load_profile(source: str | os.PathLike[str] | Mapping[str, Any] | list[Any]) -> ProfileTrace:
    """Read a Chrome trace saved by ``prof.export_chrome_trace(path)``: a path (.json or .json.gz), the JSON
    text, or the parsed dict. Times become µs from the first span."""
    return _build(_read_doc(source), "file")


def profile_trace_of(prof: Any) -> ProfileTrace:
    """The trace of a finished ``torch.profiler.profile`` (after its ``with`` block), read through the same
    Chrome export a saved file holds, so live and loaded traces agree."""
    if not hasattr(prof, "export_chrome_trace"):
        raise ProfileError(f"expected a finished torch.profiler.profile, got {type(prof).__name__}")
    with tempfile.TemporaryDirectory(prefix="tlw-profile-") as tmp:
        path = Path(tmp) / "trace.json"
        try:
            prof.export_chrome_trace(str(path))
        except RuntimeError as e:
            if "already saved" not in str(e):  # kineto saves once; torch's Python exporter can write it again
                raise ProfileError(f"the profiler has no results to export ({e}); read it after its `with` block "
                                   "has closed") from None
            try:
                prof.export_chrome_trace(str(path), use_python_export=True)
            except Exception as again:
                raise ProfileError(f"this profiler's trace was already exported and cannot be exported again "
                                   f"({again}); load_profile(the path you exported it to) instead") from None
        return replace(load_profile(path), source="live")


def record_profile(fn: Callable[..., object], *args: Any, with_stack: bool = True, record_shapes: bool = True,
                   save: str | os.PathLike[str] | None = None, **kwargs: Any) -> ProfileTrace:
    """Run ``fn(*args, **kwargs)`` under ``torch.profiler.profile`` (CPU activity) and return its trace.
    `save`: also keep the Chrome trace at that path (open it in Perfetto, or `load_profile` it later)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not callable(fn):
        raise ProfileError(f"record_profile(fn, *args): fn must be callable, got {type(fn).__name__}")
    if torch._C._autograd._profiler_enabled():  # torch's profilers do not nest: exporting the inner one crashes
        raise ProfileError("record_profile was called while a profiler is already recording (a record_profile or "
                           "torch.profiler.profile around this call): torch's profilers cannot nest. Profile the "
                           "outer function once, or call this one outside the other profiler")
    if save is not None:
        target = Path(save)
        if target.is_dir():
            raise ProfileError(f"save={str(save)!r} is a folder; give a file path for the trace, e.g. "
                               f"{str(target / 'trace.json')!r}")
        if not target.parent.is_dir():
            raise ProfileError(f"save={str(save)!r}: the folder {str(target.parent)!r} does not exist; create it "
                               "first, or give a path in a folder that exists")
    with profile(activities=[ProfilerActivity.CPU], with_stack=with_stack,
                                record_shapes=record_shapes) as prof:
        fn(*args, **kwargs)
    assert isinstance(prof, profile)
    if save is not None:
        prof.export_chrome_trace(str(save))
        trace = replace(load_profile(save), source="live")
    else:
        trace = profile_trace_of(prof)
    return replace(trace, with_stack=with_stack or trace.with_stack, record_shapes=record_shapes or trace.record_shapes)


# ---------------------------------------------------------------------------------------------------
# Downsampling


def downsample(trace: ProfileTrace, max_events: int = 20_000) -> ProfileTrace:
    """At most `max_events` spans: every ``record_function`` range and top-level span first, then the
    longest spans (a span is kept only with its parent, so nesting stays whole). The key-averages table is
    unchanged; `left_out` counts the spans dropped and the time the outermost of them covered."""
    if not isinstance(max_events, int) or isinstance(max_events, bool) or max_events < 1:
        raise ProfileError(f"max_events must be a positive integer, got {max_events!r}")
    events = trace.events
    if len(events) <= max_events:
        return trace
    order = sorted(events, key=lambda e: (not (e.depth == 0 or e.is_range), -e.duration, e.depth, e.start, e.index))
    keep: set[int] = set()
    for e in order:
        if len(keep) >= max_events:
            break
        if e.parent is None or e.parent in keep:
            keep.add(e.index)
        # else: its parent was dropped, so the child goes too (the parent is never shorter)
    new_index: dict[int, int] = {}
    kept: list[ProfileEvent] = []
    for e in events:
        if e.index in keep:
            new_index[e.index] = len(kept)
            kept.append(ProfileEvent(len(kept), e.name, e.category, e.thread, e.start, e.duration, e.depth,
                                     None if e.parent is None else new_index[e.parent], e.shapes, e.stack))
    dropped = [e for e in events if e.index not in keep]
    covered = sum(e.duration for e in dropped if e.parent is None or e.parent in keep)
    names: dict[str, int] = {}
    for e in dropped:
        names[e.name] = names.get(e.name, 0) + 1
    top = tuple(sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))[:5])
    before = trace.left_out
    left = LeftOut(len(dropped) + (before.events if before else 0), round(covered + (before.time if before else 0.0), 3),
                   top)
    return replace(trace, events=tuple(kept), left_out=left)

