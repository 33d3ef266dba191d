"""Memory timeline picture: curves, allocation bands and the allocator state at one event, computed once here.

Input is the memory lens (`torchlens_widgets.memory.MemorySnapshot`, CUDA trace or CPU profile). The
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

Timeline model (version 1), shared with the TypeScript widget:
  {kind: "memory_timeline", version: 1, source: "cuda" | "cpu", x_axis: "event" | "time",
   width, height, plot: {x, y, w, h}, n_events, n_allocations, y_max,
   curves: [{name: "reserved" | "active" | "allocated", cls, d}],  (d: SVG path, min/max per column)
   others: {d, allocations, peak_bytes},  (d: "" when every allocation is drawn as a band)
   bands: [{id, alloc, x, y, w, h, pw, fill, size, category, start, end, stack, label}],
   col_event: [event index nearest each pixel column's centre],
   x_ticks: [{x, label}], y_ticks: [{y, label}], legend: [{label, fill}],
   peaks: {allocated, active, reserved}, stats: {...}, notes: [str]}
`alloc` indexes ``snapshot.allocations()``; `pw` is the pending part's width after x + w.

State model (version 1): the allocator after one event, drawn under the timeline:
  {kind: "memory_state", version: 1, index, action, size, stream, x, width, height, title,
   allocated, active, reserved, stack,
   rows: [{label, y, x, w, size, blocks: [{x, w, state, size, alloc, title}]}],
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
TOP = 26  # title and legend
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

#: Fills by torch memory-profiler category (CPU profiles); unknown categories use "unknown".
CATEGORY_COLORS = {
    "parameter": "#4e79a7",
    "optimizer_state": "#b07aa1",
    "input": "#59a14f",
    "temporary": "#bab0ac",
    "activation": "#f28e2b",
    "gradient": "#e15759",
    "autograd_detail": "#edc948",
    "unknown": "#9c9c9c",
}
#: Fills by size (CUDA traces have no categories): one hue per power-of-4 bytes bucket.
SIZE_COLORS = (
    ("< 4 KiB", 12, "#c6dbef"),
    ("< 64 KiB", 16, "#9ecae1"),
    ("< 1 MiB", 20, "#6baed6"),
    ("< 16 MiB", 24, "#4292c6"),
    ("< 256 MiB", 28, "#2171b5"),
    ("≥ 256 MiB", 99, "#08519c"),
)
CURVES = (("reserved", "c-res"), ("active", "c-act"), ("allocated", "c-all"))

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
    if by_category:
        return CATEGORY_COLORS.get(category or "unknown", CATEGORY_COLORS["unknown"])
    bits = max(size, 1).bit_length()
    for _label, limit, fill in SIZE_COLORS:
        if bits <= limit:
            return fill
    return SIZE_COLORS[-1][2]  # pragma: no cover


def _stack_text(frames: Sequence[Any]) -> str:
    lines = [str(f) for f in frames[:MAX_FRAMES]]
    if len(frames) > MAX_FRAMES:
        lines.append(f"… {len(frames) - MAX_FRAMES} more frames")
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
) -> dict[str, Any]:
    """The timeline picture of a memory lens snapshot (schema above); 100,000 events → a few hundred KB."""
    if not hasattr(snapshot, "timeline") or not hasattr(snapshot, "allocations"):
        raise TypeError(f"memory_model needs a MemorySnapshot (load_snapshot(...) or profile_memory(fn)), "
                        f"got {type(snapshot).__name__}")
    if x_axis not in ("event", "time"):
        raise ValueError(f"x_axis must be 'event' or 'time', got {x_axis!r}")
    if not isinstance(max_bands, int) or max_bands < 0:
        raise ValueError(f"max_bands must be an int >= 0, got {max_bands!r}")
    if not isinstance(width, (int, float)) or width < 320:
        raise ValueError(f"width must be at least 320 px, got {width!r}")
    tl = snapshot.timeline()
    allocs = snapshot.allocations()
    n = len(tl)
    notes: list[str] = list(getattr(snapshot, "notes", []) or []) + list(tl.notes)
    x0, y0 = float(MARGIN_L), float(TOP)
    pw, ph = float(width - MARGIN_L - MARGIN_R), float(PLOT_H)
    cols = int(pw)
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
    top_bytes = max(peaks["reserved"], peaks["active"], peak_stack, 1)
    step = _byte_step(top_bytes)
    y_max = step * math.ceil(top_bytes * 1.04 / step)

    def Y(b: float) -> float:
        return y0 + ph - ph * b / y_max

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
            "fill": _fill_for(a.size, a.category, by_category), "size": a.size, "category": a.category,
            "start": a.start, "end": a.end, "stack": _stack_text(a.frames) or "(no stack recorded)",
            "label": f"{label} · {span_text}",
        })

    col_event = [xm.nearest_event(x0 + c + 0.5) for c in range(cols)] if n else []
    x_ticks = _x_ticks(xm, n)
    y_ticks = [{"y": _r(Y(b)), "label": fmt_bytes(b)} for b in range(0, y_max + 1, step)]
    if by_category:
        cats = sorted({a.category or "unknown" for a in allocs})
        legend = [{"label": c.replace("_", " "), "fill": CATEGORY_COLORS.get(c, CATEGORY_COLORS["unknown"])} for c in cats]
    else:
        sizes = {bisect.bisect_left([lim for _l, lim, _f in SIZE_COLORS], max(allocs[k].size, 1).bit_length())
                 for k in chosen}
        legend = [{"label": SIZE_COLORS[j][0], "fill": SIZE_COLORS[j][2]} for j in sorted(sizes)]
    if n_others:
        legend.append({"label": f"{n_others:,} smaller", "fill": "#d9d9d9"})
        notes.insert(0, f"bands: the {len(chosen):,} largest of {len(allocs):,} allocations are drawn one by one "
                        f"(first-fit offsets); the other {n_others:,} are the grey area stacked on them")
    if n > cols:
        notes.insert(0, f"curves: {n:,} events in {cols} pixel columns; each column shows the min and max it reaches")
    notes = list(dict.fromkeys(notes))
    stats = {
        "events": n, "allocations": len(allocs), "bands": len(chosen), "aggregated": n_others,
        "peak_allocated": peaks["allocated"], "peak_active": peaks["active"], "peak_reserved": peaks["reserved"],
        "truncated": tl.truncated, "preexisting_allocated": tl.preexisting_allocated,
        "preexisting_reserved": tl.preexisting_reserved,
        "categories": _category_bytes(allocs) if by_category else {},
    }
    height = TOP + PLOT_H + AXIS_H + NOTE_H * len(notes) + 4
    return {
        "kind": "memory_timeline", "version": 1, "source": getattr(snapshot, "kind", "cuda"), "x_axis": x_axis,
        "width": width, "height": height, "plot": {"x": x0, "y": y0, "w": pw, "h": ph},
        "n_events": n, "n_allocations": len(allocs), "y_max": y_max,
        "curves": curves,
        "others": {"d": others_d, "allocations": n_others, "peak_bytes": max(oth, default=0)},
        "bands": bands, "col_event": col_event, "x_ticks": x_ticks, "y_ticks": y_ticks, "legend": legend,
        "peaks": peaks, "stats": stats, "notes": notes,
    }


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
    bx, bw = float(MARGIN_L), float(width - MARGIN_L - MARGIN_R)
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
    y = 30.0
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
    size_txt = fmt_bytes(ev.size) if ev.action != "snapshot" else ""
    title = f"after event {index}: {ev.action} {size_txt} stream {ev.stream} · allocated {fmt_bytes(tl.allocated[index])}" \
            f" · active {fmt_bytes(tl.active[index])} · reserved {fmt_bytes(tl.reserved[index])}"
    return {
        "kind": "memory_state", "version": 1, "index": index, "action": ev.action, "size": ev.size,
        "stream": ev.stream, "x": x, "width": width, "height": _r(y + 6), "title": title.replace("  ", " "),
        "allocated": tl.allocated[index], "active": tl.active[index], "reserved": tl.reserved[index],
        "stack": _stack_text(ev.frames), "rows": rows,
        "explanation": None if explanation is None else list(explanation), "lines": lines, "notes": notes,
    }


# ----------------------------------------------------------------------------------------------- static SVG

STYLE = (
    ".tlw-mem text{fill:#222}.tlw-mem .ax{fill:none;stroke:#999;stroke-width:1}"
    ".tlw-mem .grid{stroke:#eee;stroke-width:1}.tlw-mem .tk{font-size:10px;fill:#555}"
    ".tlw-mem .tky{text-anchor:end}.tlw-mem .tkx{text-anchor:middle}"
    ".tlw-mem .band{stroke:#fff;stroke-width:.3;fill-opacity:.85}.tlw-mem .pend{fill-opacity:.3}"
    ".tlw-mem .oth{fill:#d9d9d9;stroke:none}"
    ".tlw-mem .c{fill:none;stroke-width:1.4}.tlw-mem .c-res{stroke:#333}"
    ".tlw-mem .c-act{stroke:#d62728;stroke-dasharray:4 2}.tlw-mem .c-all{stroke:#1f77b4}"
    ".tlw-mem .note{fill:#a05000;font-size:10px}.tlw-mem .ttl{font-weight:bold}"
    ".tlw-mem .mark{stroke:#d62728;stroke-width:1.5}"
    ".tlw-mem .b-active{fill:#4292c6}.tlw-mem .b-pending{fill:#fdae6b}.tlw-mem .b-free{fill:#f0f0f0}"
    ".tlw-mem .seg{fill:none;stroke:#888;stroke-width:1}.tlw-mem .lbl{font-size:10px;text-anchor:end}"
    ".tlw-mem .expl{font-size:11px}"
)


def timeline_parts(model: Mapping[str, Any]) -> list[str]:
    """SVG elements of the timeline, in the order the TS view creates them."""
    p = model["plot"]
    x0, y0, pw, ph = p["x"], p["y"], p["w"], p["h"]
    out = [f'<text class="ttl" x="{_n(x0)}" y="14">memory: {model["n_events"]:,} events, '
           f'{model["n_allocations"]:,} allocations</text>']
    lx = x0 + 300
    for item in model["legend"]:
        out.append(f'<rect class="lg" x="{_n(lx)}" y="5" width="10" height="10" fill="{item["fill"]}"/>')
        out.append(f'<text class="tk" x="{_n(lx + 13)}" y="14">{_esc(item["label"])}</text>')
        lx += 13 + len(item["label"]) * 6.2 + 10
    for t in model["y_ticks"]:
        out.append(f'<path class="grid" d="M{_n(x0)} {_n(t["y"])}H{_n(x0 + pw)}"/>')
        out.append(f'<text class="tk tky" x="{_n(x0 - 4)}" y="{_n(t["y"] + 3)}">{_esc(t["label"])}</text>')
    for t in model["x_ticks"]:
        out.append(f'<text class="tk tkx" x="{_n(t["x"])}" y="{_n(y0 + ph + 12)}">{_esc(t["label"])}</text>')
    axis = "event index" if model["x_axis"] == "event" else "time since the first event"
    out.append(f'<text class="tk tkx" x="{_n(x0 + pw / 2)}" y="{_n(y0 + ph + 25)}">{axis}</text>')
    for b in model["bands"]:
        out.append(f'<g class="bd" data-band="{b["id"]}"><title>{_esc(b["label"] + chr(10) + b["stack"])}</title>'
                   f'<rect class="band" x="{_n(b["x"])}" y="{_n(b["y"])}" width="{_n(b["w"])}" '
                   f'height="{_n(b["h"])}" fill="{b["fill"]}"/>')
        if b["pw"]:
            out.append(f'<rect class="band pend" x="{_n(b["x"] + b["w"])}" y="{_n(b["y"])}" width="{_n(b["pw"])}" '
                       f'height="{_n(b["h"])}" fill="{b["fill"]}"/>')
        out.append("</g>")
    if model["others"]["d"]:
        out.append(f'<path class="oth" d="{model["others"]["d"]}"/>')
    for c in model["curves"]:
        if c["d"]:
            out.append(f'<path class="c {c["cls"]}" d="{c["d"]}"/>')
    out.append(f'<path class="ax" d="M{_n(x0)} {_n(y0)}V{_n(y0 + ph)}H{_n(x0 + pw)}"/>')
    ny = y0 + ph + AXIS_H
    for k, note in enumerate(model["notes"]):
        out.append(f'<text class="note" x="8" y="{_n(ny + 10 + NOTE_H * k)}">{_esc(note)}</text>')
    return out


def state_parts(state: Mapping[str, Any]) -> list[str]:
    """SVG elements of the state panel (coordinates relative to the panel's top), as the TS view creates them."""
    out = [f'<text class="ttl" x="8" y="16">{_esc(state["title"])}</text>']
    for row in state["rows"]:
        y = row["y"]
        out.append(f'<text class="lbl" x="{_n(row["x"] - 4)}" y="{_n(y + 10)}">{_esc(row["label"])}</text>')
        for b in row["blocks"]:
            out.append(f'<rect class="blk b-{b["state"]}" x="{_n(b["x"])}" y="{_n(y)}" width="{_n(b["w"])}" '
                       f'height="{ROW_H}"><title>{_esc(b["title"])}</title></rect>')
        out.append(f'<rect class="seg" x="{_n(row["x"])}" y="{_n(y)}" width="{_n(row["w"])}" height="{ROW_H}"/>')
    for line in state["lines"]:
        out.append(f'<text class="expl" x="8" y="{_n(line["y"])}">{_esc(line["text"])}</text>')
    return out


def _svg_open(w: float, h: float) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(w)}" height="{_n(h)}" viewBox="0 0 {_n(w)} {_n(h)}" '
            f'class="tlw-mem" font-family="monospace" font-size="11"><style>{STYLE}</style>')


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
