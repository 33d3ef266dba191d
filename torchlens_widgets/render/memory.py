"""Memory timeline picture: curves, allocation bands and the allocator state at one event, computed once here.

Input is the memory lens (`torchlens_widgets.lenses.memory.MemorySnapshot`, CUDA trace or CPU profile). The
timeline model is drawn twice with the same geometry: `memory_svg` (static fallback) and the TS widget
(labextension/src/memory). Curves and the aggregated area travel as ready SVG path strings, so both
renderers draw the very same points. No torch imports here.

Layout (what reads best for a learner, and cheap): x is the event index (each event an equal cell) or
wall-clock time; y is bytes. Curves are downsampled to one pixel column: each column draws the min and
the max its events reach, so peaks survive. The `max_bands` largest allocations are drawn as bands
(rectangles from the event that allocated to the event that freed them) at a *first-fit offset*: each
band keeps the lowest y at which it fits among the bands alive with it, for its whole life, like an
allocator that never moves memory; so the bands' tops can sit above the allocated curve where the
packing leaves gaps. All other allocations are one grey area per column stacked on top of the bands,
and the picture says so in a note. A band whose free was requested but not completed (record_stream)
continues as a lighter "pending" rectangle until the free completes.

Timeline model (version 2), shared with the TypeScript widget:
  {kind: "memory_timeline", version: 1, source: "cuda" | "cpu", x_axis: "event" | "time",
   has_time, title, width, height, plot: {x, y, w, h}, n_events, n_allocations, y_max,
   curves: [{name: "reserved" | "active" | "allocated", cls, d}],  (d: SVG path, min/max per column)
   others: {d, allocations, peak_bytes},  (d: "" when every allocation is drawn as a band)
   bands: [{id, alloc, x, y, w, h, pw, cls, size, category, start, end, stack, label}],
   col_event: [event index nearest each pixel column's centre],
   x_ticks: [{x, label}], y_ticks: [{y, label}],
   legend: [{kind: "head" | "line" | "box", x, y, cls, label}],  (rows laid out to fit the width)
   peaks: {allocated, active, reserved}, stats: {...}, notes: [str], note_lines: [{y, text}]}
Colours are never in the model: `cls` names CSS classes whose rules (STYLE) use the theme's variables.
`alloc` indexes ``snapshot.allocations()``; `pw` is the pending part's width after x + w.

State model (version 2): the allocator after one event, drawn under the timeline:
  {kind: "memory_state", version: 2, index, action, size, stream, x, width, height, title,
   title_lines: [{y, text}], allocated, active, reserved, stack,
   rows: [{label, y, x, w, size, blocks: [{x, w, state, size, alloc, title}]}], keys: [legend entries],
   explanation: [str] | null, lines: [{y, text}], notes: [str]}
Block `state` is "active", "pending" or "free"; `x` is where the event sits on the timeline.
"""

from __future__ import annotations

import bisect
import math
import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .markup import esc as _esc
from .theme import STYLE as THEME_STYLE
from .theme import var

__all__ = [
    "CATEGORY_COLORS",
    "event_explanations",
    "memory_model",
    "memory_state_model",
    "memory_state_svg",
    "memory_svg",
    "memory_text",
]

WIDTH = 960
MARGIN_L = 72  # room for the y labels
MARGIN_R = 28  # room for the last x label
TOP = 26  # the title line (the legend is under the x axis)
PLOT_H = 260
AXIS_H = 30  # x tick labels and axis title
NOTE_H = 14
CHAR_W = 6.6  # px per character of 11 px monospace
MAX_BANDS = 300
MAX_FRAMES = 16  # frames per band's stack text
ROW_H = 14
ROW_GAP = 4
MAX_ROWS = 48
MAX_BLOCKS = 3000
MIN_BLOCK_W = 3.0  # px: a held block stays visible in a huge segment

#: Theme colour (render/theme.json) by torch memory-profiler category (CPU profiles); others use "unknown".
CATEGORY_COLORS = {
    "parameter": "cat1",
    "optimizer_state": "cat5",
    "input": "cat3",
    "temporary": "cat6",
    "activation": "cat2",
    "gradient": "cat4",
    "autograd_detail": "cat7",
    "unknown": "cat8",
}
#: Theme colour by block size (CUDA traces have no categories): one step of a sequential ramp per 16x bytes.
SIZE_COLORS = (
    ("< 4 KiB", 12, "size1"),
    ("< 64 KiB", 16, "size2"),
    ("< 1 MiB", 20, "size3"),
    ("< 16 MiB", 24, "size4"),
    ("< 256 MiB", 28, "size5"),
    ("≥ 256 MiB", 99, "size6"),
)
CURVES = (("reserved", "c-res"), ("active", "c-act"), ("allocated", "c-all"))
#: What each curve is, for the legend (line styles: reserved solid, active dashed, allocated solid).
CURVE_LABELS = {
    "reserved": "reserved: held by the allocator",
    "active": "active: allocated + pending frees, dashed",
    "allocated": "allocated: in use by tensors",
}
CHAR_W10 = 6.1  # px per character of 10 px monospace (legend, notes)
LEGEND_H = 16  # one legend row
#: Path components of files that are library code, not the learner's (a notebook cell is /tmp/ipykernel_N/….py).
LIBRARY_DIRS = frozenset({
    "site-packages", "dist-packages", "torch", "IPython", "ipykernel", "ipykernel_launcher.py", "traitlets",
    "tornado", "asyncio", "jupyter_client", "zmq", "runpy.py", "threading.py", "torchlens_widgets", "anywidget",
    "ipywidgets", "contextlib.py", "functools.py",
})

XAxis = Literal["event", "time"]


# ----------------------------------------------------------------------------------------------- helpers


def _r(v: float) -> float:
    return round(v, 1)


def _n(v: float) -> str:
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s




def fmt_bytes(n: int) -> str:
    """Bytes as people read them: 512 B, 1.5 KiB, 20.0 MiB, 1.2 GiB."""
    if abs(n) < 1024:
        return f"{n} B"
    scaled = n / 1024.0
    for unit in ("KiB", "MiB", "GiB"):
        if abs(scaled) < 1024 or unit == "GiB":
            return f"{scaled:.1f} {unit}"
        scaled /= 1024
    return f"{n} B"  # pragma: no cover


def _nice_step(span: float, ticks: int) -> float:
    raw = span / max(ticks, 1)
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag  # pragma: no cover


def _byte_step(top: int) -> int:
    """A round byte step (power of two times 1, 2 or 5 of a unit) giving about 4 y ticks up to `top`."""
    target = max(top / 4, 1)
    best = 1
    for unit in (1, 1024, 1024**2, 1024**3):
        for m in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512):
            step = m * unit
            if step <= target:
                best = step
    return best


def _fill_for(size: int, category: str | None, by_category: bool) -> str:
    """The CSS class that colours a band: `f-<theme token>` (the STYLE maps it to the theme's colour)."""
    if by_category:
        return "f-" + CATEGORY_COLORS.get(category or "unknown", CATEGORY_COLORS["unknown"])
    bits = max(size, 1).bit_length()
    for _label, limit, token in SIZE_COLORS:
        if bits <= limit:
            return "f-" + token
    return "f-" + SIZE_COLORS[-1][2]  # pragma: no cover


_CELL = re.compile(r".*ipykernel_\d+[/\\][^/\\]*$")


def _library(frame: Any) -> str | None:
    """The library a frame belongs to ("torch", "IPython", "python", …), or None for the learner's own code."""
    name = str(getattr(frame, "filename", "") or "")
    if not name:
        return "torch ops"  # a profiler's op frame (aten::addmm, MulBackward0): no file
    if name.startswith("<frozen") or name in ("??", "<unknown>") or name.endswith((".so", ".cpp", ".h")):
        return "python" if name.startswith("<frozen") else "native"
    if _CELL.match(name):
        return None
    parts = [q for q in re.split(r"[\\/]", name) if q]
    for k, part in enumerate(parts):
        if part in ("site-packages", "dist-packages"):
            return parts[k + 1].split(".")[0] if k + 1 < len(parts) else part
    for k, part in enumerate(parts):
        if re.fullmatch(r"python3(\.\d+)?", part) and k and parts[k - 1] == "lib":
            return "python"
        if part in LIBRARY_DIRS:
            return part.removesuffix(".py")
    return None


def _frame_text(frame: Any) -> str:
    """A frame as a tooltip line; a notebook cell's file (/tmp/ipykernel_<pid>/<hash>.py, new with every kernel)
    reads "<cell>", so saved pictures are the same on every run."""
    name = str(getattr(frame, "filename", "") or "")
    if name and _CELL.match(name):
        return f"{getattr(frame, 'name', '')} (<cell>:{getattr(frame, 'line', 0)})"
    return str(frame)


def _stack_text(frames: Sequence[Any]) -> str:
    """A stack for a tooltip: the learner's frames first (innermost first); library frames folded into one line.

    With no frame of the learner's own (a notebook cell or a file outside the libraries) the stack is shown as it is.
    """
    libs = [_library(f) for f in frames]
    mine = [f for f, lib in zip(frames, libs) if lib is None]
    if not mine:
        lines = [_frame_text(f) for f in frames[:MAX_FRAMES]]
        if len(frames) > MAX_FRAMES:
            lines.append(f"… {len(frames) - MAX_FRAMES} more frames")
        return "\n".join(lines)
    lines = [_frame_text(f) for f in mine[:MAX_FRAMES]]
    if len(mine) > MAX_FRAMES:
        lines.append(f"… {len(mine) - MAX_FRAMES} more frames of yours")
    names = list(dict.fromkeys(lib for lib in libs if lib is not None))
    if names:
        k = len(frames) - len(mine)
        lines.append(f"… {k} library frame{'s' if k != 1 else ''} ({', '.join(names)})")
    return "\n".join(lines)


def _compress(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Drop the middle of three points on one horizontal or vertical line (the path stays the same)."""
    out: list[tuple[float, float]] = []
    for p in points:
        if out and out[-1] == p:
            continue
        if len(out) >= 2:
            a, b = out[-2], out[-1]
            if (a[1] == b[1] == p[1]) or (a[0] == b[0] == p[0] and (a[1] - b[1]) * (b[1] - p[1]) >= 0):
                out[-1] = p
                continue
        out.append(p)
    return out


def _path(points: list[tuple[float, float]], close: bool = False) -> str:
    pts = _compress([(_r(x), _r(y)) for x, y in points])
    if not pts:
        return ""
    d = "M" + "L".join(f"{_n(x)} {_n(y)}" for x, y in pts)
    return d + ("Z" if close else "")


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width=width, break_long_words=True, break_on_hyphens=False) or [""]


# ----------------------------------------------------------------------------------------------- x mapping


class _XMap:
    """Where events sit on the x axis: `cell(i)` is event i's left edge, `cell(n)` the plot's right end."""

    def __init__(self, n: int, times: Sequence[float | None], axis: XAxis, x0: float, pw: float) -> None:
        self.n, self.x0, self.pw, self.axis = n, x0, pw, axis
        self.times: list[float] = []
        if axis == "time":
            ts = [t for t in times if t is not None]
            if len(ts) != n or n == 0 or any(b < a for a, b in zip(ts, ts[1:])) or ts[-1] == ts[0]:
                raise ValueError("time axis needs an increasing time_us on every event")
            self.times = list(ts)
            self.t0, self.span = ts[0], ts[-1] - ts[0]

    def cell(self, i: int) -> float:
        if self.axis == "event":
            return self.x0 + self.pw * i / max(self.n, 1)
        if i >= self.n:
            return self.x0 + self.pw
        return self.x0 + self.pw * (self.times[max(i, 0)] - self.t0) / self.span

    def centre(self, i: int) -> float:
        """The x of the marker for event i (the middle of its cell on the event axis)."""
        return (self.cell(i) + self.cell(i + 1)) / 2 if self.axis == "event" else self.cell(i)

    def column(self, i: int, cols: int) -> int:
        """The pixel column where event i's value starts (its cell's left edge): curves step where bands start."""
        c = int(self.cell(i) - self.x0)
        return min(max(c, 0), cols - 1)

    def nearest_event(self, x: float) -> int:
        if self.n == 0:
            return 0
        if self.axis == "event":
            return min(max(int((x - self.x0) / self.pw * self.n), 0), self.n - 1)
        t = self.t0 + (x - self.x0) / self.pw * self.span
        k = bisect.bisect_left(self.times, t)
        if k <= 0:
            return 0
        if k >= self.n:
            return self.n - 1
        return k if self.times[k] - t < t - self.times[k - 1] else k - 1


# ----------------------------------------------------------------------------------------------- the timeline


def _pack(bands: list[tuple[int, int, int, int]]) -> dict[int, int]:
    """First-fit offsets for (key, start, end, size) bands: each takes the lowest gap free for its whole life."""
    offsets: dict[int, int] = {}
    live: list[tuple[int, int, int]] = []  # (offset, size, end), sorted by offset
    for key, start, end, size in sorted(bands, key=lambda b: (b[1], -b[3], b[0])):
        live = [x for x in live if x[2] > start]
        cursor = 0
        slot = None
        for off, sz, _e in live:
            if off - cursor >= size:
                slot = cursor
                break
            cursor = max(cursor, off + sz)
        if slot is None:
            slot = cursor
        offsets[key] = slot
        bisect.insort(live, (slot, size, end))
    return offsets


def memory_model(
    snapshot: Any,
    *,
    x_axis: XAxis = "event",
    max_bands: int = MAX_BANDS,
    width: int = WIDTH,
    title: str | None = None,
    y_max: int | None = None,
) -> dict[str, Any]:
    """The timeline picture of a memory lens snapshot (schema above); 100,000 events → a few hundred KB.

    `title` names the picture (e.g. the plan it shows); the counts of events and allocations follow it.
    `y_max` (bytes) makes the y axis reach at least that high: pictures of several runs drawn with the
    same `y_max` share one scale, so their heights compare.
    """
    if not hasattr(snapshot, "timeline") or not hasattr(snapshot, "allocations"):
        raise TypeError(f"memory_model needs a MemorySnapshot (load_snapshot(...) or profile_memory(fn)), "
                        f"got {type(snapshot).__name__}")
    if x_axis not in ("event", "time"):
        raise ValueError(f"x_axis must be 'event' or 'time', got {x_axis!r}")
    if not isinstance(max_bands, int) or max_bands < 0:
        raise ValueError(f"max_bands must be an int >= 0, got {max_bands!r}")
    if not isinstance(width, (int, float)) or width < 320:
        raise ValueError(f"width must be at least 320 px, got {width!r}")
    if y_max is not None and (not isinstance(y_max, int) or y_max < 0):
        raise ValueError(f"y_max must be a number of bytes >= 0, got {y_max!r}")
    tl = snapshot.timeline()
    allocs = snapshot.allocations()
    n = len(tl)
    notes: list[str] = list(getattr(snapshot, "notes", []) or []) + list(tl.notes)
    x0, y0 = float(MARGIN_L), float(TOP)
    pw, ph = float(width - MARGIN_L - MARGIN_R), float(PLOT_H)
    cols = int(pw)
    try:
        _XMap(n, tl.time_us, "time", x0, pw)
        has_time = True
    except ValueError:
        has_time = False
    if x_axis == "time":
        try:
            xm = _XMap(n, tl.time_us, "time", x0, pw)
        except ValueError:
            notes.append("x axis: the trace has no increasing time_us on every event, so events are evenly spaced")
            x_axis = "event"
            xm = _XMap(n, tl.time_us, "event", x0, pw)
    else:
        xm = _XMap(n, tl.time_us, "event", x0, pw)

    # Which allocations are drawn as bands: the largest, ties to the earlier one.
    order = sorted(range(len(allocs)), key=lambda k: (-allocs[k].size, k))
    chosen = sorted(order[:max_bands])

    def span(a: Any) -> tuple[int, int, int]:
        start = -1 if a.start is None else a.start
        end = n if a.end is None else a.end
        done = end if a.completed is None and a.end is not None else (n if a.completed is None else a.completed)
        return start, end, max(done, end)

    # Bytes held by allocations not drawn as bands, after each event (allocated part only).
    d_ind = [0] * (n + 1)
    base_ind = 0
    for k in chosen:
        start, end, _done = span(allocs[k])
        if start < 0:
            base_ind += allocs[k].size
        else:
            d_ind[start] += allocs[k].size
        if end < n:
            d_ind[end] -= allocs[k].size
    held_ind = []
    run = base_ind
    for i in range(n):
        run += d_ind[i]
        held_ind.append(run)

    # Per pixel column: min / max of each curve, and of the others' bytes.
    series = {"allocated": tl.allocated, "active": tl.active, "reserved": tl.reserved}
    lo = {k: [0] * cols for k in series}
    hi = {k: [-1] * cols for k in series}
    oth = [0] * cols
    has = [False] * cols
    col_of = [xm.column(i, cols) for i in range(n)]
    for name, vals in series.items():
        lk, hk = lo[name], hi[name]
        for i, c in enumerate(col_of):
            v = vals[i]
            if hk[c] < 0:
                lk[c] = hk[c] = v
            else:
                if v < lk[c]:
                    lk[c] = v
                if v > hk[c]:
                    hk[c] = v
    alloc_vals = tl.allocated
    for i, c in enumerate(col_of):
        has[c] = True
        o = alloc_vals[i] - held_ind[i]
        if o > oth[c]:
            oth[c] = o
    col_last = [-1] * cols
    for i, c in enumerate(col_of):
        col_last[c] = i
    # Columns between events (sparse traces) carry the value of the last event before them: curves are steps.
    last = 0 if n else -1  # columns left of the first event's centre show the value after it (its cell)
    for c in range(cols):
        if col_last[c] >= 0:
            last = col_last[c]
        elif last >= 0:
            for name in series:
                lo[name][c] = hi[name][c] = series[name][last]
            oth[c] = alloc_vals[last] - held_ind[last]
            has[c] = True

    # Band geometry: first-fit offsets in bytes.
    spans = {k: span(allocs[k]) for k in chosen}
    offsets = _pack([(k, spans[k][0], spans[k][1], allocs[k].size) for k in chosen])
    env = [0] * cols  # top of the bands alive in each column, in bytes
    for k in chosen:
        start, end, _d = spans[k]
        c0 = 0 if start < 0 else int(xm.cell(start) - x0)
        c1 = cols - 1 if end >= n else int(xm.cell(end) - x0)
        top = offsets[k] + allocs[k].size
        for c in range(max(c0, 0), min(max(c1, c0), cols - 1) + 1):
            if env[c] < top:
                env[c] = top
    peak_stack = max((env[c] + oth[c] for c in range(cols)), default=0)
    peaks = {"allocated": tl.peak_allocated, "active": max(tl.active, default=tl.preexisting_allocated),
             "reserved": tl.peak_reserved}
    top_bytes = max(peaks["reserved"], peaks["active"], peak_stack, y_max or 0, 1)
    step = _byte_step(top_bytes)
    y_top = step * math.ceil(top_bytes * 1.04 / step)

    def Y(b: float) -> float:
        return y0 + ph - ph * b / y_top

    curves = []
    for name, cls in CURVES:
        pts: list[tuple[float, float]] = []
        for c in range(cols):
            if hi[name][c] < 0:
                continue
            xc = x0 + c + 0.5
            pts.append((xc, Y(hi[name][c])))
            if lo[name][c] != hi[name][c]:
                pts.append((xc, Y(lo[name][c])))
                pts.append((xc, Y(series[name][col_last[c]] if col_last[c] >= 0 else lo[name][c])))
        curves.append({"name": name, "cls": cls, "d": _path(pts)})

    n_others = len(allocs) - len(chosen)
    others_d = ""
    if n_others:
        upper: list[tuple[float, float]] = []
        lower: list[tuple[float, float]] = []
        for c in range(cols):
            if not has[c]:
                continue
            o = oth[c]
            upper += [(x0 + c, Y(env[c] + o)), (x0 + c + 1, Y(env[c] + o))]
            lower += [(x0 + c, Y(env[c])), (x0 + c + 1, Y(env[c]))]
        if upper:
            others_d = _path(upper + lower[::-1], close=True)

    by_category = getattr(snapshot, "kind", "cuda") == "cpu" and any(a.category for a in allocs)
    bands = []
    for bid, k in enumerate(chosen):
        a = allocs[k]
        start, end, done = spans[k]
        xl = x0 if start < 0 else xm.cell(start)
        xr = xm.cell(end) if end < n else x0 + pw
        xp = xm.cell(done) if done < n else x0 + pw
        w = max(xr - xl, 1.0)
        yt = Y(offsets[k] + a.size)
        h = max(Y(offsets[k]) - yt, 0.5)
        what = a.category or ("pre-existing" if a.preexisting else "")
        label = f"{fmt_bytes(a.size)}{' · ' + what if what else ''}"
        span_text = f"events {'…' if a.start is None else a.start}–{'end' if a.end is None else a.end}"
        bands.append({
            "id": bid, "alloc": k, "x": _r(xl), "y": _r(yt), "w": _r(w), "h": _r(h),
            "pw": _r(max(xp - (xl + w), 0.0)) if done > end else 0.0,
            "cls": _fill_for(a.size, a.category, by_category), "size": a.size, "category": a.category,
            "start": a.start, "end": a.end, "stack": _stack_text(a.frames) or "(no stack recorded)",
            "label": f"{label} · {span_text}",
        })

    col_event = [xm.nearest_event(x0 + c + 0.5) for c in range(cols)] if n else []
    x_ticks = _x_ticks(xm, n)
    y_ticks = [{"y": _r(Y(b)), "label": fmt_bytes(b)} for b in range(0, y_top + 1, step)]
    if by_category:
        cats = sorted({a.category or "unknown" for a in allocs})
        colours = [(c.replace("_", " "), "f-" + CATEGORY_COLORS.get(c, CATEGORY_COLORS["unknown"])) for c in cats]
        heading = "bands: one per allocation, colour = what it holds:"
    else:
        sizes = {bisect.bisect_left([lim for _l, lim, _f in SIZE_COLORS], max(allocs[k].size, 1).bit_length())
                 for k in chosen}
        colours = [(SIZE_COLORS[j][0], "f-" + SIZE_COLORS[j][2]) for j in sorted(sizes)]
        heading = "bands: one per allocation, colour = block size:"
    pending = next((b["cls"] for b in bands if b["pw"]), None)
    if pending:
        colours.append(("faded: free requested, not yet completed", "band pend " + pending))
    if n_others:
        colours.append((f"{n_others:,} smaller allocations (grey area)", "oth"))
        notes.insert(0, f"bands: the {len(chosen):,} largest of {len(allocs):,} allocations are drawn one by one "
                        f"(first-fit offsets); the other {n_others:,} are the grey area stacked on them")
    if n > cols:
        notes.insert(0, f"curves: {n:,} events in {cols} pixel columns; each column shows the min and max it reaches")
    notes = list(dict.fromkeys(notes))
    ly = y0 + ph + AXIS_H + 12
    legend, ly = _legend_rows(
        [("lines:", [(CURVE_LABELS[name], "c " + cls) for name, cls in CURVES])]
        + ([(heading, colours)] if colours else []), ly, width)
    note_lines = []
    chars = max(int((width - 16) / CHAR_W10), 20)
    for note in notes:
        for part in _wrap(note, chars):
            note_lines.append({"y": _r(ly), "text": part})
            ly += NOTE_H
    stats = {
        "events": n, "allocations": len(allocs), "bands": len(chosen), "aggregated": n_others,
        "peak_allocated": peaks["allocated"], "peak_active": peaks["active"], "peak_reserved": peaks["reserved"],
        "truncated": tl.truncated, "preexisting_allocated": tl.preexisting_allocated,
        "preexisting_reserved": tl.preexisting_reserved,
        "categories": _category_bytes(allocs) if by_category else {},
    }
    height = _r(ly - 8)
    return {
        "kind": "memory_timeline", "version": 2, "source": getattr(snapshot, "kind", "cuda"), "x_axis": x_axis,
        "has_time": has_time,
        "title": f"{title or 'memory'}: {n:,} events, {len(allocs):,} allocations",
        "width": width, "height": height, "plot": {"x": x0, "y": y0, "w": pw, "h": ph},
        "n_events": n, "n_allocations": len(allocs), "y_max": y_top,
        "curves": curves,
        "others": {"d": others_d, "allocations": n_others, "peak_bytes": max(oth, default=0)},
        "bands": bands, "col_event": col_event, "x_ticks": x_ticks, "y_ticks": y_ticks, "legend": legend,
        "peaks": peaks, "stats": stats, "notes": notes, "note_lines": note_lines,
    }


def _legend_rows(groups: Sequence[tuple[str, Sequence[tuple[str, str]]]], y: float,
                 width: float) -> tuple[list[dict[str, Any]], float]:
    """Legend entries laid out in rows that fit `width`: each group a heading, then its (label, class) swatches.

    A class starting with "c " is a curve (drawn as a short line in that style), any other a filled box.
    Returns the entries ({kind: "head" | "line" | "box", x, y, cls, label}) and the baseline after the last row.
    """
    out: list[dict[str, Any]] = []
    right = width - 8
    for heading, items in groups:
        x = 8.0
        out.append({"kind": "head", "x": x, "y": _r(y), "cls": "", "label": heading})
        x += len(heading) * CHAR_W10 + 10
        for label, cls in items:
            w = 18 + len(label) * CHAR_W10
            if x + w > right and x > 40:
                y += LEGEND_H
                x = 24.0
            out.append({"kind": "box" if not cls.startswith("c ") else "line", "x": _r(x), "y": _r(y),
                        "cls": cls, "label": label})
            x += w + 14
        y += LEGEND_H + 2
    return out, y


def _category_bytes(allocs: Sequence[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in allocs:
        key = a.category or "unknown"
        out[key] = out.get(key, 0) + a.size
    return dict(sorted(out.items()))


def _x_ticks(xm: _XMap, n: int) -> list[dict[str, Any]]:
    if n == 0:
        return []
    if xm.axis == "event":
        step = max(int(_nice_step(n, 6)), 1)
        return [{"x": _r(xm.cell(i)), "label": f"{i:,}"} for i in range(0, n + 1, step)]
    span_ms = xm.span / 1000
    step_ms = _nice_step(span_ms, 6)
    out = []
    k = 0
    while k * step_ms <= span_ms + 1e-9:
        t = k * step_ms
        out.append({"x": _r(xm.x0 + xm.pw * t / span_ms), "label": f"{t:g} ms"})
        k += 1
    return out


# ----------------------------------------------------------------------------------------------- the state panel


def event_explanations(trace: Sequence[Mapping[str, Any]], log: Sequence[Any]) -> list[tuple[int, int] | None]:
    """For each trace event, the slice [lo, hi) of a simulator's event log that its replay produced (None: none).

    The simulator (`allocator.replay`) acts on alloc / free_requested / free_completed and mirrors a run of
    segment frees as one empty_cache; its own segment_alloc / segment_free / oom events come just before the
    alloc they serve. Log and trace are walked together, matching (action, requested size).
    """
    aux = {"segment_alloc", "segment_free", "segment_map", "segment_unmap", "oom"}
    acts = [(e.action, e.size) for e in log]
    out: list[tuple[int, int] | None] = []
    p, m = 0, len(acts)
    for ev in trace:
        action, size = ev.get("action"), ev.get("size")
        if action in ("alloc", "free_requested", "free_completed"):
            q = p
            while q < m and acts[q][0] in aux and not (action == "alloc" and acts[q][0] == "oom"):
                q += 1
            if q < m and acts[q][0] == "oom" and action == "alloc":
                out.append((p, q + 1))
                p = q + 1
            elif q < m and acts[q] == (action, size):
                out.append((p, q + 1))
                p = q + 1
            else:
                out.append(None)
        elif action == "oom":  # a recorded OOM: the simulator's own oom entry, if it hit the same wall
            q = p
            while q < m and acts[q][0] in aux and acts[q][0] != "oom":
                q += 1
            if q < m and acts[q][0] == "oom":
                out.append((p, q + 1))
                p = q + 1
            else:
                out.append(None)
        elif action in ("segment_free", "segment_unmap"):
            q = p
            while q < m and acts[q][0] in ("segment_free", "segment_unmap"):
                q += 1
            out.append((p, q) if q > p else None)
            p = q
        else:
            out.append(None)
    return out


def _block_widths(blocks: Sequence[tuple[int, str]], total: int, bw: float) -> list[float]:
    """Bar widths of a segment's blocks: proportional, but held blocks get at least MIN_BLOCK_W px (free space shrinks)."""
    prop = [bw * size / max(total, 1) for size, _s in blocks]
    held = [max(p, MIN_BLOCK_W) if st != "free" else 0.0 for p, (_z, st) in zip(prop, blocks)]
    free = [p if st == "free" else 0.0 for p, (_z, st) in zip(prop, blocks)]
    room = bw - sum(held)
    fsum = sum(free)
    if room >= 0 and fsum > 0:
        free = [f * min(room / fsum, 1.0) for f in free]
    elif room < 0:
        k = bw / sum(held)
        held = [h * k for h in held]
        free = [0.0] * len(free)
    return [h + f for h, f in zip(held, free)]


def _no_explanation(action: str, no_simulator: bool) -> str:
    if no_simulator:
        return "simulator: no explanation (pass simulator=... to show_memory to replay the trace)"
    if action in ("segment_alloc", "segment_map"):
        return ("simulator: the recorded allocator reserved memory here; the simulator takes its own segment "
                "decisions at the alloc that follows")
    if action in ("alloc", "free_requested", "free_completed"):
        return ("simulator: it skipped this event (memory allocated before the trace began, or an allocation "
                "that failed under these settings)")
    return f"simulator: nothing to replay at a {action} event"


def memory_state_model(
    snapshot: Any,
    index: int,
    timeline: Mapping[str, Any] | None = None,
    explanation: Sequence[str] | None = None,
    *,
    width: int | None = None,
) -> dict[str, Any]:
    """The allocator after event `index`: one bar per segment (blocks active / pending / free) and the event's story.

    `timeline` (the `memory_model` it is shown under) gives the width and the marker's x; `explanation`
    (lines from the simulator) is shown under the bars, or a line says that no simulator was given.
    """
    n = len(snapshot.events)
    if not -n <= index < n:
        raise IndexError(f"event {index} is out of range; this trace has events 0..{n - 1}")
    index %= n
    st = snapshot.state_at(index)
    tl = snapshot.timeline()
    ev = snapshot.events[index]
    allocs = snapshot.allocations()
    width = int(width or (timeline or {}).get("width") or WIDTH)
    x = 0.0
    if timeline:
        tx = _XMap(n, tl.time_us, timeline.get("x_axis", "event"), timeline["plot"]["x"], timeline["plot"]["w"])
        x = _r(tx.centre(index))
    size_txt = fmt_bytes(ev.size) if ev.action != "snapshot" else ""
    heading = (f"after event {index} (the marked line): {ev.action} {size_txt} stream {ev.stream} · allocated "
             f"{fmt_bytes(tl.allocated[index])} · active {fmt_bytes(tl.active[index])} · reserved "
             f"{fmt_bytes(tl.reserved[index])}").replace("  ", " ")
    title_lines = []
    y = 16.0
    for part in _wrap(heading, max(int((width - 28) / CHAR_W), 30)):
        title_lines.append({"y": _r(y), "text": part})
        y += NOTE_H
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    segs = list(st.segments)
    groups: list[tuple[str, int, list[Any]]] = []
    for s in segs[:MAX_ROWS]:
        tag = " exp" if s.expandable else ""
        groups.append((f"{fmt_bytes(s.size)} s{s.stream}{tag}", s.size, list(s.blocks)))
    if len(segs) > MAX_ROWS:
        notes.append(f"{len(segs) - MAX_ROWS} more segments not drawn ({len(segs)} in all)")
    if st.unplaced:
        total = sum(b.size for b in st.unplaced)
        label = "CPU heap" if getattr(snapshot, "kind", "cuda") == "cpu" else "no segment"
        groups.append((label, total, list(st.unplaced)))
        if label == "no segment":
            notes.append(f"{len(st.unplaced)} held block(s) lie in no segment the trace knows (pre-existing)")
    longest = max((len(label) for label, _s, _b in groups), default=0)
    bx = float(max(MARGIN_L, math.ceil(8 + longest * CHAR_W10)))  # row labels stay inside the picture
    bw = float(width - bx - MARGIN_R)
    drawn = 0
    for label, size, blocks in groups:
        row: dict[str, Any] = {"label": label, "y": _r(y), "x": bx, "w": bw, "size": size, "blocks": []}
        widths = _block_widths([(b.size, b.state) for b in blocks], size, bw)
        bxs = bx
        for b, w in zip(blocks, widths):
            if drawn >= MAX_BLOCKS:
                break
            left = bxs
            bxs += w
            if w <= 0:
                continue
            a = allocs[b.allocation] if b.allocation is not None else None
            title = f"{b.state} {fmt_bytes(b.size)}"
            if a is not None:
                title += f" · allocation #{b.allocation}" + (f" ({a.category})" if a.category else "")
                stack = _stack_text(a.frames)
                if stack:
                    title += "\n" + stack
            row["blocks"].append({"x": _r(left), "w": _r(w), "state": b.state, "size": b.size,
                                  "alloc": b.allocation, "title": title})
            drawn += 1
        rows.append(row)
        y += ROW_H + ROW_GAP
    if drawn >= MAX_BLOCKS:
        notes.append(f"only the first {MAX_BLOCKS} blocks are drawn")
    if not rows:
        notes.append("no segments are reserved after this event")
    keys: list[dict[str, Any]] = []
    if rows:
        y += 8
        keys, y = _legend_rows([("segments, blocks:", [("allocated", "b-active"), ("free pending", "b-pending"),
                                                        ("free, cached for reuse", "b-free")])], y + 4, width)
        y -= LEGEND_H
    chars = max(int((width - 2 * 8) / CHAR_W), 40)
    lines: list[dict[str, Any]] = []
    y += 8
    head = ["simulator:"] if explanation else []
    body = list(explanation) if explanation else [_no_explanation(ev.action, explanation is None)]
    for k, text in enumerate(head + body):
        for part in _wrap(("  " if head and k else "") + text, chars):
            lines.append({"y": _r(y + 11), "text": part})
            y += NOTE_H
    for note in notes:
        lines.append({"y": _r(y + 11), "text": "note: " + note})
        y += NOTE_H
    return {
        "kind": "memory_state", "version": 2, "index": index, "action": ev.action, "size": ev.size,
        "stream": ev.stream, "x": x, "width": width, "height": _r(y + 6), "title": heading,
        "title_lines": title_lines, "keys": keys,
        "allocated": tl.allocated[index], "active": tl.active[index], "reserved": tl.reserved[index],
        "stack": _stack_text(ev.frames), "rows": rows,
        "explanation": None if explanation is None else list(explanation), "lines": lines, "notes": notes,
    }


# ----------------------------------------------------------------------------------------------- static SVG

def _fills() -> str:
    tokens = [t for _l, _b, t in SIZE_COLORS] + sorted(set(CATEGORY_COLORS.values()))
    return "".join(f".tlw-mem .f-{t}{{fill:{var(t)}}}" for t in tokens)


#: The picture's own rules; every colour is a theme variable (THEME_STYLE defines them for `.tlw-theme`).
MEM_STYLE = (
    f".tlw-mem{{background:{var('bg')}}}.tlw-mem text{{fill:{var('fg')}}}"
    f".tlw-mem .ax{{fill:none;stroke:{var('line')};stroke-width:1}}"
    f".tlw-mem .grid{{stroke:{var('grid')};stroke-width:1}}.tlw-mem .tk{{font-size:10px;fill:{var('fg2')}}}"
    ".tlw-mem .tky{text-anchor:end}.tlw-mem .tkx{text-anchor:middle}.tlw-mem .lgh{font-weight:bold}"
    f".tlw-mem .band{{stroke:{var('bg')};stroke-width:.3;fill-opacity:.85}}.tlw-mem .pend{{fill-opacity:.3}}"
    f".tlw-mem .oth{{fill:{var('neutral')};stroke:none}}" + _fills() +
    f".tlw-mem .c{{fill:none;stroke-width:1.4}}.tlw-mem .c-res{{stroke:{var('fg')}}}"
    f".tlw-mem .c-act{{stroke:{var('bad')};stroke-dasharray:4 2}}.tlw-mem .c-all{{stroke:{var('good')};stroke-width:1.6}}"
    f".tlw-mem .note{{fill:{var('fg2')};font-size:10px}}.tlw-mem .ttl{{font-weight:bold}}"
    f".tlw-mem .mark,.tlw-mem .mark-key{{stroke:{var('warn')};stroke-width:2}}"
    f".tlw-mem .b-active{{fill:{var('size4')}}}.tlw-mem .b-pending{{fill:{var('cat2')}}}"
    f".tlw-mem .b-free{{fill:{var('bg2')}}}"
    f".tlw-mem .seg{{fill:none;stroke:{var('line')};stroke-width:1}}.tlw-mem .lbl{{font-size:10px;text-anchor:end}}"
    f".tlw-mem .expl{{font-size:11px}}.tlw-mem .lg.b-free{{stroke:{var('line')};stroke-width:1}}"
)
#: What the picture's <style> holds: the theme's custom properties, then the picture's rules.
STYLE = THEME_STYLE + MEM_STYLE


def _legend_parts(items: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    for item in items:
        x, y = item["x"], item["y"]
        if item["kind"] == "head":
            out.append(f'<text class="tk lgh" x="{_n(x)}" y="{_n(y)}">{_esc(item["label"])}</text>')
            continue
        if item["kind"] == "line":
            out.append(f'<path class="{item["cls"]}" d="M{_n(x)} {_n(y - 3.5)}h14"/>')
        else:
            out.append(f'<rect class="lg {item["cls"]}" x="{_n(x + 2)}" y="{_n(y - 9)}" width="10" height="10"/>')
        out.append(f'<text class="tk" x="{_n(x + 18)}" y="{_n(y)}">{_esc(item["label"])}</text>')
    return out


def timeline_parts(model: Mapping[str, Any]) -> list[str]:
    """SVG elements of the timeline, in the order the TS view creates them."""
    p = model["plot"]
    x0, y0, pw, ph = p["x"], p["y"], p["w"], p["h"]
    out = [f'<text class="ttl" x="8" y="14">{_esc(model["title"])}</text>']
    for t in model["y_ticks"]:
        out.append(f'<path class="grid" d="M{_n(x0)} {_n(t["y"])}H{_n(x0 + pw)}"/>')
        out.append(f'<text class="tk tky" x="{_n(x0 - 4)}" y="{_n(t["y"] + 3)}">{_esc(t["label"])}</text>')
    for t in model["x_ticks"]:
        out.append(f'<text class="tk tkx" x="{_n(t["x"])}" y="{_n(y0 + ph + 12)}">{_esc(t["label"])}</text>')
    axis = "event index" if model["x_axis"] == "event" else "time since the first event"
    out.append(f'<text class="tk tkx" x="{_n(x0 + pw / 2)}" y="{_n(y0 + ph + 25)}">{axis}</text>')
    for b in model["bands"]:
        out.append(f'<g class="bd" data-band="{b["id"]}"><title>{_esc(b["label"] + chr(10) + b["stack"])}</title>'
                   f'<rect class="band {b["cls"]}" x="{_n(b["x"])}" y="{_n(b["y"])}" width="{_n(b["w"])}" '
                   f'height="{_n(b["h"])}"/>')
        if b["pw"]:
            out.append(f'<rect class="band pend {b["cls"]}" x="{_n(b["x"] + b["w"])}" y="{_n(b["y"])}" '
                       f'width="{_n(b["pw"])}" height="{_n(b["h"])}"/>')
        out.append("</g>")
    if model["others"]["d"]:
        out.append(f'<path class="oth" d="{model["others"]["d"]}"/>')
    for c in model["curves"]:
        if c["d"]:
            out.append(f'<path class="c {c["cls"]}" d="{c["d"]}"/>')
    out.append(f'<path class="ax" d="M{_n(x0)} {_n(y0)}V{_n(y0 + ph)}H{_n(x0 + pw)}"/>')
    out.extend(_legend_parts(model["legend"]))
    for line in model["note_lines"]:
        out.append(f'<text class="note" x="8" y="{_n(line["y"])}">{_esc(line["text"])}</text>')
    return out


def state_parts(state: Mapping[str, Any]) -> list[str]:
    """SVG elements of the state panel (coordinates relative to the panel's top), as the TS view creates them."""
    out = ['<path class="mark-key" d="M12 5V19"/>']
    out += [f'<text class="ttl" x="20" y="{_n(t["y"])}">{_esc(t["text"])}</text>' for t in state["title_lines"]]
    for row in state["rows"]:
        y = row["y"]
        out.append(f'<text class="lbl" x="{_n(row["x"] - 4)}" y="{_n(y + 10)}">{_esc(row["label"])}</text>')
        for b in row["blocks"]:
            out.append(f'<rect class="blk b-{b["state"]}" x="{_n(b["x"])}" y="{_n(y)}" width="{_n(b["w"])}" '
                       f'height="{ROW_H}"><title>{_esc(b["title"])}</title></rect>')
        out.append(f'<rect class="seg" x="{_n(row["x"])}" y="{_n(y)}" width="{_n(row["w"])}" height="{ROW_H}"/>')
    out.extend(_legend_parts(state["keys"]))
    for line in state["lines"]:
        out.append(f'<text class="expl" x="8" y="{_n(line["y"])}">{_esc(line["text"])}</text>')
    return out


def _svg_open(w: float, h: float) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(w)}" height="{_n(h)}" viewBox="0 0 {_n(w)} {_n(h)}" '
            f'class="tlw-mem tlw-theme" font-family="monospace" font-size="11"><style>{STYLE}</style>')


def memory_svg(model: Mapping[str, Any], state: Mapping[str, Any] | None = None) -> str:
    """Static SVG of the timeline (and, given, the state panel under it with the event marked)."""
    h = model["height"] + (state["height"] if state else 0)
    out = [_svg_open(model["width"], h), *timeline_parts(model)]
    if state:
        p = model["plot"]
        out.append(f'<path class="mark" d="M{_n(state["x"])} {_n(p["y"])}V{_n(p["y"] + p["h"])}"/>')
        out.append(f'<g transform="translate(0,{_n(model["height"])})">')
        out.extend(state_parts(state))
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def memory_state_svg(state: Mapping[str, Any]) -> str:
    """Static SVG of the state panel alone (what the widget draws under the timeline)."""
    return "".join([_svg_open(state["width"], state["height"]), *state_parts(state), "</svg>"])


_ADDR = re.compile(r"0x[0-9a-fA-F]+")


def _no_addr(s: str) -> str:
    return _ADDR.sub("<addr>", s)


def memory_text(model: Mapping[str, Any], state: Mapping[str, Any] | None = None) -> str:
    """Deterministic plain text: counts and peaks in bytes (no addresses, no timings)."""
    st = model["stats"]
    src = "CPU profile" if model["source"] == "cpu" else "CUDA trace"
    lines = [
        f"MemoryTimeline: {st['events']:,} events ({src}), {st['allocations']:,} allocations",
        f"  peak allocated {fmt_bytes(st['peak_allocated'])}, peak active {fmt_bytes(st['peak_active'])}, "
        f"peak reserved {fmt_bytes(st['peak_reserved'])}",
        f"  drawn: {st['bands']:,} allocations as bands, {st['aggregated']:,} aggregated; x axis: {model['x_axis']}",
    ]
    if st["truncated"]:
        lines.append("  the trace is truncated (ring buffer): some memory predates it")
    if st["categories"]:
        lines.append("  by category: " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in st["categories"].items()))
    if state:
        active = sum(1 for r in state["rows"] for b in r["blocks"] if b["state"] == "active")
        pending = sum(1 for r in state["rows"] for b in r["blocks"] if b["state"] == "pending")
        lines.append(f"  selected event {state['index']}: {state['action']} of {fmt_bytes(state['size'])}; "
                     f"{len(state['rows'])} segment rows, {active} active and {pending} pending blocks")
        if state["explanation"]:
            lines.extend("  simulator: " + _no_addr(e) for e in state["explanation"])
    lines.extend("  note: " + _no_addr(n) for n in model["notes"])
    return "\n".join(lines)
