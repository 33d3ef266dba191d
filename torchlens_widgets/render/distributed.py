"""Rank lanes: one iteration of a distributed run on one time axis, computed once from the distributed lens and
drawn statically (SVG + text); the widget draws the very same dict. No torch imports here.

Per rank, a *backward* row (each autograd node's span), a *comm* row (DDP buckets' all-reduces, FSDP's
all-gathers and reduce-scatters, hand-written all-reduces; overlapping ones stacked in sub-rows, each bucket
with a tick where its gradients were ready) and, when memory was sampled for FSDP, a *memory* row (parameter
and gradient bytes held, as a step line). Buckets keep their colour across ranks, so the same bucket reads as
the same bar on every lane.

Input: the lens dict (`kind: "dist_trace"`, see torchlens_widgets.lenses.distributed.DistTrace.to_dict) or an
object with `to_dict()`.

The axis: its 0 is the first thing any rank did (`zero`). When one rank started well after another (the first
waiting for it inside its first collective), the axis starts where every rank is running instead (`cut`): the
wait before is not drawn, spans begun earlier are clipped at the left edge and marked (`clipped`), and a line
under the lanes says what was cut. Ticks are in ms once the window is 10 ms or more.

Model schema (version 1):
  {kind: "ranks", version: 1, mode, world_size, step, width, height, left, scale (px per µs), origin (µs, where
   x = left), end (µs after origin), zero (µs, the axis's 0), unit ("µs" or "ms"), per_unit (µs per unit),
   t0 (the axis's value at x = left, in units), axis_label, cut: null | {at, late_rank, first_rank, late_by (µs),
   text}, footer: [{y, text, cls}], iteration, iterations: [{index, no_sync, buckets, collectives}],
   ticks: [{x, label}], lanes: [{rank, row, label, y, h}],
   nodes: [{rank, x, w, y, h, name, short, clipped}],
   comms: [{rank, x, w, y, h, kind, bucket, cat, label, short, texts, tip, nbytes, params, ready_x, clipped}],
   memory: [{rank, y, h, points, peak, peak_label}],
   buckets: [{index, cat, params, nbytes}]   (rank 0's partition in this iteration),
   summary: {nodes: [per rank], buckets: [per rank], collectives: {kind: [per rank]}}, notes: [str]}
`texts`: a comm's labels, longest first ("all-gather 0 2.1 KiB", "all-gather 0", "AG 0"); `short` is the first
that fits its width (none: no label), so a narrow span says "AG 0", never "al…".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .axis import CHAR_W
from .axis import nice_step as _nice_step
from .axis import px as _r
from .axis import short_label as _short
from .markup import esc as _esc
from .theme import STYLE as THEME_STYLE

__all__ = ["ranks_model", "ranks_svg", "ranks_text", "fmt_bytes"]

LEFT = 150
RIGHT = 16
AXIS_Y = 22
TOP = 34
ROW_H = 22
SUB_H = 16
MEM_H = 34
GAP = 4
RANK_GAP = 14
MIN_W = 1.0
N_CAT = 8
STYLE = (
    ".tlw-ranks text{fill:var(--tlw-fg)}.tlw-ranks .tlw-tick-label,.tlw-ranks .tlw-axis-label{fill:var(--tlw-fg2)}"
    ".tlw-ranks .tlw-bg{fill:var(--tlw-bg)}.tlw-ranks .tlw-lane{fill:var(--tlw-bg2)}"
    ".tlw-ranks .tlw-axis,.tlw-ranks .tlw-tick{stroke:var(--tlw-line)}"
    ".tlw-ranks .tlw-node{fill:var(--tlw-neutral);stroke:var(--tlw-line);stroke-width:.5}"
    ".tlw-ranks .tlw-node.tlw-acc{fill:var(--tlw-tint3);stroke:var(--tlw-cat3)}"
    ".tlw-ranks .tlw-comm{stroke-width:1.2;cursor:pointer}"
    ".tlw-ranks .tlw-ready{stroke:var(--tlw-fg);stroke-width:1.5}"
    ".tlw-ranks .tlw-mem{fill:none;stroke:var(--tlw-accent);stroke-width:1.5}"
    ".tlw-ranks .tlw-comm.tlw-sel{stroke:var(--tlw-fg);stroke-width:2.5}"
    ".tlw-ranks .tlw-cut-mark{fill:var(--tlw-fg);stroke:none}.tlw-ranks .tlw-legend{fill:var(--tlw-fg2)}"
    + "".join(f".tlw-ranks .tlw-c{i}{{fill:var(--tlw-tint{i});stroke:var(--tlw-cat{i})}}" for i in range(1, N_CAT + 1))
)
#: colour slot of non-bucket collectives
KIND_CAT = {"all_gather": 1, "reduce_scatter": 2, "all_reduce": 6}
KIND_WORD = {"bucket": "all-reduce", "all_gather": "all-gather", "reduce_scatter": "reduce-scatter",
             "all_reduce": "all-reduce"}
KIND_ABBR = {"all_gather": "AG", "reduce_scatter": "RS", "all_reduce": "AR"}
#: the axis starts where every rank runs when the part before is more than this share of the whole window
CUT_SHARE = 0.2
#: ... less this share of what is left, so the first spans after the cut do not touch the edge
CUT_MARGIN = 0.01
FOOT_H = 16
MARK_W = 7  # px the clipped-start marker takes before a label


def _check(trace: Any) -> Mapping[str, Any]:
    if hasattr(trace, "to_dict") and callable(trace.to_dict):
        trace = trace.to_dict()
    if not isinstance(trace, Mapping) or trace.get("kind") != "dist_trace":
        raise TypeError("expected a distributed trace: run_ranks(...), ddp_trace() or fsdp_trace() (or their "
                        f".to_dict()), got {type(trace).__name__}")
    if trace.get("version") != 1:
        raise ValueError(f"unsupported dist_trace version {trace.get('version')!r}; this renderer reads version 1")
    _check_times(trace)
    return trace


_TIMES = ("start", "end", "backward_start", "backward_end", "ready")
_TIMED = ("iterations", "buckets", "collectives", "nodes")


def _check_times(trace: Mapping[str, Any]) -> None:
    """Every recorded time is a finite number (or None where the recorder had none): an infinite or NaN time
    would put an "inf" coordinate in the picture, so it is named instead."""
    ranks = trace.get("ranks")
    if not isinstance(ranks, list):
        return  # the drawing's own checks say the trace is incomplete
    for r in ranks:
        if not isinstance(r, Mapping):
            continue
        for part in _TIMED:
            rows = r.get(part)
            for i, row in enumerate(rows if isinstance(rows, list) else []):
                if not isinstance(row, Mapping):
                    continue
                for key in _TIMES:
                    v = row.get(key)
                    if v is None:
                        continue
                    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                        raise ValueError(f"rank {r.get('rank')!r}, {part}[{i}]: {key} is {v!r}; a trace's times "
                                         "are finite numbers of µs (was it edited? record it again with run_ranks)")


def fmt_bytes(n: int) -> str:
    """1536 -> '1.5 KiB' (whole bytes below 1 KiB)."""
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB"):
        n_ = n / 1024
        if n_ < 1024 or unit == "GiB":
            return f"{n_:.1f} {unit}".replace(".0 ", " ")
        n = int(n_)
    return f"{n} B"  # pragma: no cover


def _fmt(t: float) -> str:
    return f"{t:.3f}".rstrip("0").rstrip(".") if t != int(t) else str(int(t))





def _comms(rank: Mapping[str, Any], it: int) -> list[dict[str, Any]]:
    out = []
    for b in rank["buckets"]:
        if b["iteration"] == it:
            out.append({"kind": "bucket", "bucket": b["index"], "cat": b["index"] % N_CAT + 1,
                        "label": f"bucket {b['index']}", "nbytes": b["nbytes"], "params": list(b["params"]),
                        "start": b["start"], "end": b["end"], "ready": b["ready"]})
    for c in rank["collectives"]:
        if c["iteration"] == it:
            what = KIND_WORD[c["kind"]]
            out.append({"kind": c["kind"], "bucket": None, "cat": KIND_CAT.get(c["kind"], 6),
                        "label": f"{what} {c['label'] or 'root'}", "nbytes": c["nbytes"], "params": [],
                        "start": c["start"], "end": c["end"], "ready": None})
    return out


def comm_texts(kind: str, bucket: int | None, label: str, nbytes: int) -> list[str]:
    """A comm span's labels, longest first: what fits its width is drawn (the widget picks the same way)."""
    size = fmt_bytes(nbytes)
    if kind == "bucket":
        return [f"b{bucket} {size}", f"b{bucket}"]
    what = label.split(" ", 1)[1] if " " in label else label
    return [f"{label} {size}", label, f"{KIND_ABBR.get(kind, kind)} {what}"]


def fit_text(texts: list[str], width: float) -> str:
    """The first of `texts` that fits `width` px whole ("" when none does)."""
    return next((t for t in texts if len(t) * CHAR_W + 4 <= width), "")


def _unit(span_us: float) -> tuple[str, float]:
    return ("ms", 1000.0) if span_us >= 10_000 else ("µs", 1.0)


def _pack(spans: list[tuple[float, float]]) -> list[int]:
    """Greedy sub-row for each span so that no two in a sub-row overlap (spans in start order)."""
    ends: list[float] = []
    rows = []
    for a, b in spans:
        for i, e in enumerate(ends):
            if a >= e:
                ends[i] = b
                rows.append(i)
                break
        else:
            ends.append(b)
            rows.append(len(ends) - 1)
    return rows


def default_iteration(trace: Any) -> int:
    """The iteration drawn by default: the last one that communicated (for DDP: with the rebuilt buckets)."""
    d = _check(trace)
    r0 = d["ranks"][0]
    talked = sorted({b["iteration"] for b in r0["buckets"]} | {c["iteration"] for c in r0["collectives"]})
    if talked:
        return int(talked[-1])
    return int(r0["iterations"][-1]["index"]) if r0["iterations"] else 0


def ranks_model(trace: Any, *, iteration: int | None = None, width: int = 960, max_nodes: int = 400) -> dict[str, Any]:
    """Place one iteration of every rank on one time axis (see the module docstring)."""
    d = _check(trace)
    if width < LEFT + RIGHT + 200:
        raise ValueError(f"width must be at least {LEFT + RIGHT + 200} px, got {width}")
    ranks = d["ranks"]
    its = [s["index"] for s in ranks[0]["iterations"]] if ranks else []
    it = default_iteration(d) if iteration is None else iteration
    if its and it not in its:
        raise ValueError(f"iteration {it} was not recorded; the iterations are {its}")
    mode = d["mode"]
    notes = list(d.get("notes", []))

    # the window: backward (and the all-reduces it launched) for DDP, the whole iteration otherwise
    lo: list[float] = []
    hi: list[float] = []
    first: dict[int, float] = {}  # per rank, the first thing it did in the window
    drawn: list[tuple[float, float]] = []  # every span drawn: the cut may not hide one whole
    for r in ranks:
        drawn += [(n["start"], n["end"]) for n in r["nodes"] if n["iteration"] == it]
        drawn += [(c["start"], c["end"] if c["end"] is not None else c["start"]) for c in _comms(r, it)]
        span = next((s for s in r["iterations"] if s["index"] == it), None)
        comms = _comms(r, it)
        mine: list[float] = []
        if span is not None:
            if mode == "ddp" and span["backward_start"] is not None:
                mine.append(span["backward_start"])
                hi.append(span["backward_end"])
            else:
                mine.append(span["start"])
                hi.append(span["end"])
        mine += [c["start"] for c in comms]
        hi += [c["end"] if c["end"] is not None else c["start"] for c in comms]
        lo += mine
        if mine:
            first[r["rank"]] = min(mine)
    zero = min(lo) if lo else 0.0
    last = max(hi) if hi else zero + 1.0
    origin = zero
    cut: dict[str, Any] | None = None
    if len(first) > 1:
        late_rank = max(first, key=lambda k: first[k])
        first_rank = min(first, key=lambda k: first[k])
        late_by = first[late_rank] - zero
        at = first[late_rank] - CUT_MARGIN * (last - first[late_rank])
        at = min([at] + [b for a, b in drawn if a < at])  # work done before it stays in the picture
        if last > zero and at - zero > CUT_SHARE * (last - zero):
            origin = at
            cut = {"at": origin - zero, "late_rank": late_rank, "first_rank": first_rank, "late_by": late_by}
    end = last - origin
    end = end if end > 0 else 1.0
    scale = (width - LEFT - RIGHT) / end
    unit, per_unit = _unit(end)

    def x(t: float) -> float:
        return _r(LEFT + max(t - origin, 0.0) * scale)

    def w(a: float, b: float | None) -> float:
        return _r(max(((b if b is not None else a) - max(a, origin)) * scale, MIN_W))

    lanes, nodes, comms_out, memory = [], [], [], []
    y = TOP
    node_counts, bucket_counts = [], []
    coll_counts: dict[str, list[int]] = {}
    for r in ranks:
        rk = r["rank"]
        rnodes = [n for n in r["nodes"] if n["iteration"] == it]
        node_counts.append(len(rnodes))
        lanes.append({"rank": rk, "row": "backward", "label": f"rank {rk} backward", "y": y, "h": ROW_H})
        if len(rnodes) > max_nodes:
            notes.append(f"rank {rk}: showing the first {max_nodes:,} of {len(rnodes):,} backward nodes")
        for n in rnodes[:max_nodes]:
            nw = w(n["start"], n["end"])
            nodes.append({"rank": rk, "x": x(n["start"]), "w": nw, "y": y, "h": ROW_H, "name": n["name"],
                          "short": _short(n["name"], nw - (MARK_W if n["start"] < origin else 0)),
                          "clipped": n["start"] < origin})
        y += ROW_H + GAP
        rc = sorted(_comms(r, it), key=lambda c: c["start"])
        bucket_counts.append(sum(1 for c in rc if c["kind"] == "bucket"))
        for c in rc:
            if c["kind"] != "bucket":
                coll_counts.setdefault(c["kind"], [0] * len(ranks))[ranks.index(r)] += 1
        rows = _pack([(c["start"], c["end"] if c["end"] is not None else c["start"]) for c in rc])
        n_sub = max(rows, default=0) + 1
        comm_h = max(ROW_H, n_sub * SUB_H + 4)
        word = "all-reduce" if mode in ("ddp", "manual") else "collectives"
        lanes.append({"rank": rk, "row": "comm", "label": f"rank {rk} {word}", "y": y, "h": comm_h})
        for c, row in zip(rc, rows, strict=True):
            cw = w(c["start"], c["end"])
            cy = _r(y + 2 + row * SUB_H)
            size = fmt_bytes(c["nbytes"])
            texts = comm_texts(c["kind"], c["bucket"], c["label"], c["nbytes"])
            when = (f"{_fmt(c['start'] - zero)}–{_fmt(c['end'] - zero)} µs" if c["end"] is not None
                    else f"from {_fmt(c['start'] - zero)} µs (end not recorded)")
            tip = f"rank {rk} {c['label']} ({KIND_WORD[c['kind']]}, {size}): {when}"
            if c["params"]:
                tip += "; parameters: " + ", ".join(c["params"])
            if c["ready"] is not None:
                tip += f"; gradients ready at {_fmt(c['ready'] - zero)} µs"
            if c["start"] < origin:
                tip += " (begun before the axis starts: drawn from its left edge)"
            comms_out.append({"rank": rk, "x": x(c["start"]), "w": cw, "y": cy, "h": SUB_H - 2, "kind": c["kind"],
                              "bucket": c["bucket"], "cat": c["cat"], "label": c["label"], "short": fit_text(texts, cw - (MARK_W if c["start"] < origin else 0)),
                              "texts": texts, "tip": tip, "nbytes": c["nbytes"], "params": c["params"],
                              "ready_x": x(c["ready"]) if c["ready"] is not None and c["ready"] >= origin else None,
                              "clipped": c["start"] < origin})
        y += comm_h + GAP
        samples = [m for m in r["memory"] if lo and origin <= m["t"] <= origin + end]
        before = [m for m in r["memory"] if lo and m["t"] < origin]
        if samples and before:  # the level held when the axis starts
            samples.insert(0, {**before[-1], "t": origin})
        if mode == "fsdp" and samples:
            peak = max(m["total"] for m in samples) or 1
            pts, last_y = [], None
            for m in samples:
                py = _r(y + MEM_H - 3 - (MEM_H - 17) * m["total"] / peak)  # the top 14 px hold the label
                if last_y is not None:
                    pts.append(f"{x(m['t'])},{last_y}")
                pts.append(f"{x(m['t'])},{py}")
                last_y = py
            pts.append(f"{_r(LEFT + end * scale)},{last_y}")
            lanes.append({"rank": rk, "row": "memory", "label": f"rank {rk} held", "y": y, "h": MEM_H})
            memory.append({"rank": rk, "y": y, "h": MEM_H, "points": " ".join(pts), "peak": peak,
                           "peak_label": f"peak {fmt_bytes(peak)}"})
            y += MEM_H + GAP
        y += RANK_GAP - GAP
    t0 = (origin - zero) / per_unit
    span_u = end / per_unit
    step = _nice_step(span_u)
    k0 = math.ceil(round(t0 / step, 9))
    ticks = [{"x": _r(LEFT + (t - t0) * per_unit * scale), "label": _fmt(t)}
             for t in (round(k * step, 9) for k in range(k0, int((t0 + span_u) // step) + 1))]
    footer: list[dict[str, Any]] = []
    if cut is not None:
        cut["text"] = (f"axis starts at {_fmt(round(cut['at'] / per_unit, 1))} {unit}: rank {cut['late_rank']} "
                       f"started {_fmt(round(cut['late_by'] / per_unit, 1))} {unit} after rank {cut['first_rank']}; "
                       "the wait before is not drawn (◂: begun earlier)")
        footer.append({"text": cut["text"], "cls": "tlw-cut-note"})
    abbr = sorted({c["kind"] for c in comms_out if c["short"] and c["short"] == c["texts"][-1] and c["kind"] in KIND_ABBR})
    if abbr:
        footer.append({"text": " · ".join(f"{KIND_ABBR[k]} {KIND_WORD[k]}" for k in abbr), "cls": "tlw-legend"})
    for f in footer:
        f["y"] = _r(y + 8)
        y += FOOT_H
    height = int(y + 4)
    what = "backward" if mode == "ddp" else "iteration"
    r0 = ranks[0] if ranks else {"buckets": [], "iterations": [], "collectives": []}
    buckets = [{"index": b["index"], "cat": b["index"] % N_CAT + 1, "params": list(b["params"]), "nbytes": b["nbytes"]}
               for b in sorted(r0["buckets"], key=lambda b: b["index"]) if b["iteration"] == it]
    iterations = [{"index": s["index"], "no_sync": s["no_sync"],
                   "buckets": sum(1 for b in r0["buckets"] if b["iteration"] == s["index"]),
                   "collectives": sum(1 for c in r0["collectives"] if c["iteration"] == s["index"])}
                  for s in r0["iterations"]]
    if any(s["no_sync"] and s["index"] == it for s in r0["iterations"]):
        notes.append(f"iteration {it} ran under no_sync(): gradients were only accumulated, nothing was all-reduced")
    return {"kind": "ranks", "version": 1, "mode": mode, "world_size": d["world_size"], "step": d["step"],
            "width": width, "height": height, "left": LEFT, "scale": scale, "origin": origin, "end": end,
            "zero": zero, "unit": unit, "per_unit": per_unit, "t0": t0, "axis_label": f"it {it} {what} ({unit})",
            "cut": cut, "footer": footer, "iteration": it, "iterations": iterations, "ticks": ticks, "lanes": lanes, "nodes": nodes,
            "comms": comms_out, "memory": memory, "buckets": buckets,
            "summary": {"nodes": node_counts, "buckets": bucket_counts, "collectives": coll_counts}, "notes": notes}


def _model(m: Any, iteration: int | None = None) -> Mapping[str, Any]:
    if isinstance(m, Mapping) and m.get("kind") == "ranks":
        return m
    return ranks_model(m, iteration=iteration)


def ranks_svg(trace: Any, *, iteration: int | None = None, selected: int | None = None) -> str:
    """Self-contained SVG (no scripts): the time axis, then per rank its backward, comm and memory rows.
    `selected`: a bucket index drawn highlighted on every rank."""
    m = _model(trace, iteration)
    W, H, left = m["width"], m["height"], m["left"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="tlw-ranks tlw-theme" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" font-family="monospace" font-size="11" style="background:var(--tlw-bg)">'
           f'<style>{THEME_STYLE}{STYLE}</style>',
           f'<rect class="tlw-bg" x="0" y="0" width="{W}" height="{H}"/>',
           f'<line class="tlw-axis" x1="{left}" y1="{AXIS_Y}" x2="{W - RIGHT}" y2="{AXIS_Y}"/>',
           f'<text class="tlw-axis-label" x="8" y="{AXIS_Y - 8}">{_esc(_axis_label(m))}</text>']
    last = len(m["ticks"]) - 1
    for i, t in enumerate(m["ticks"]):
        anchor = "end" if i == last and t["x"] + len(t["label"]) * CHAR_W / 2 > W - 2 else "middle"
        out.append(f'<line class="tlw-tick" x1="{t["x"]}" y1="{AXIS_Y - 3}" x2="{t["x"]}" y2="{AXIS_Y + 3}"/>'
                   f'<text class="tlw-tick-label" x="{t["x"]}" y="{AXIS_Y - 8}" text-anchor="{anchor}">'
                   f'{_esc(t["label"])}</text>')
    for lane in m["lanes"]:
        out.append(f'<rect class="tlw-lane" data-rank="{lane["rank"]}" data-row="{lane["row"]}" x="{left}" '
                   f'y="{lane["y"]}" width="{W - RIGHT - left}" height="{lane["h"]}"/>'
                   f'<text class="tlw-lane-label" x="8" y="{_r(lane["y"] + min(lane["h"], ROW_H) / 2 + 4)}">'
                   f'{_esc(_short(lane["label"], left - 8))}</text>')
    for f in m.get("footer", []):
        out.append(f'<text class="{f["cls"]}" x="8" y="{f["y"]}">{_esc(f["text"])}</text>')
    for n in m["nodes"]:
        acc = " tlw-acc" if n["name"].startswith("AccumulateGrad") else ""
        out.append(f'<rect class="tlw-node{acc}" data-rank="{n["rank"]}" x="{n["x"]}" y="{n["y"]}" width="{n["w"]}" '
                   f'height="{n["h"]}"><title>{_esc(n["name"])}</title></rect>')
        if n.get("clipped"):
            out.append(f'<path class="tlw-cut-mark" d="{_cut_mark(n["x"], n["y"], n["h"])}"/>')
        if n["short"]:
            out.append(f'<text class="tlw-node-label" x="{_r(n["x"] + 2 + (MARK_W if n.get("clipped") else 0))}" y="{_r(n["y"] + n["h"] / 2 + 4)}">'
                       f'{_esc(n["short"])}</text>')
    for i, c in enumerate(m["comms"]):
        sel = " tlw-sel" if selected is not None and c["bucket"] == selected else ""
        bucket = f' data-bucket="{c["bucket"]}"' if c["bucket"] is not None else ""
        out.append(f'<g class="tlw-comm-g" data-i="{i}" data-rank="{c["rank"]}"{bucket}><title>{_esc(c["tip"])}</title>'
                   f'<rect class="tlw-comm tlw-c{c["cat"]}{sel}" x="{c["x"]}" y="{c["y"]}" width="{c["w"]}" '
                   f'height="{c["h"]}"/>')
        if c["ready_x"] is not None:
            out.append(f'<line class="tlw-ready" x1="{c["ready_x"]}" y1="{c["y"] - 1}" x2="{c["ready_x"]}" '
                       f'y2="{_r(c["y"] + c["h"] + 1)}"/>')
        if c.get("clipped"):
            out.append(f'<path class="tlw-cut-mark" d="{_cut_mark(c["x"], c["y"], c["h"])}"/>')
        if c["short"]:
            out.append(f'<text class="tlw-comm-label" x="{_r(c["x"] + 2 + (MARK_W if c.get("clipped") else 0))}" y="{_r(c["y"] + c["h"] / 2 + 4)}">'
                       f'{_esc(c["short"])}</text>')
        out.append("</g>")
    for mem in m["memory"]:
        out.append(f'<polyline class="tlw-mem" data-rank="{mem["rank"]}" points="{mem["points"]}">'
                   f'<title>{_esc("parameter + gradient bytes held, " + mem["peak_label"])}</title></polyline>'
                   f'<text class="tlw-mem-label" x="{left + 4}" y="{mem["y"] + 11}">'
                   f'{_esc(mem["peak_label"])}</text>')
    out.append("</svg>")
    return "".join(out)


def _cut_mark(x: float, y: float, h: float) -> str:
    """A small arrowhead pointing left at a span's clipped left edge: it began before the axis starts."""
    mid = _r(y + h / 2)
    return f"M{_r(x + 6)},{_r(mid - 4)}L{x},{mid}L{_r(x + 6)},{_r(mid + 4)}Z"


def _axis_label(m: Mapping[str, Any]) -> str:
    if "axis_label" in m:
        return str(m["axis_label"])
    what = "backward" if m["mode"] == "ddp" else "iteration"
    return f"it {m['iteration']} {what} (µs)"


def ranks_text(trace: Any, *, iteration: int | None = None) -> str:
    """Deterministic plain text (no times, no addresses): iterations, bucket partition, shards, counts."""
    d = _check(trace)
    m = ranks_model(d, iteration=iteration)
    ranks = d["ranks"]
    n = len(ranks)
    lines = [f"distributed {m['mode']} run: {n} rank{'s' if n != 1 else ''} of {m['step']}"]
    its = []
    for s in m["iterations"]:
        what = (f"{s['buckets']} bucket{'s' if s['buckets'] != 1 else ''}" if m["mode"] == "ddp"
                else f"{s['collectives']} collective{'s' if s['collectives'] != 1 else ''}")
        its.append(f"{s['index']}{' (no_sync)' if s['no_sync'] else ''}: {what}")
    lines.append("iterations: " + "; ".join(its) if its else "iterations: none recorded")
    it = m["iteration"]
    if m["mode"] == "ddp" and not m["buckets"]:
        lines.append(f"bucket partition in iteration {it}: none recorded (no all-reduce, or recording was off)")
    elif m["mode"] == "ddp":
        parts = [tuple(tuple(b["params"]) for b in sorted(r["buckets"], key=lambda b: b["index"])
                       if b["iteration"] == it) for r in ranks]
        same = all(p == parts[0] for p in parts)
        lines.append(f"bucket partition in iteration {it} ({'the same on every rank' if same else 'rank 0'}; "
                     "bucket 0 is all-reduced first):")
        for b in m["buckets"]:
            lines.append(f"  bucket {b['index']}: {', '.join(b['params'])} ({fmt_bytes(b['nbytes'])})")
        if not same:
            for r, p in zip(ranks[1:], parts[1:], strict=True):
                if p != parts[0]:
                    lines.append(f"  rank {r['rank']} differs: " + " | ".join(", ".join(b) for b in p))
    shards = ranks[0]["shards"] if ranks else []
    if shards:
        lines.append("shards (global shape -> local shape per rank):")
        for i, s in enumerate(shards):
            local = ", ".join(f"rank {r['rank']} {tuple(r['shards'][i]['local_shape'])}" for r in ranks)
            lines.append(f"  {s['name']} {tuple(s['shape'])} {s['placement']} -> {local}")
    lines.append(f"iteration {it}, per rank: backward nodes {m['summary']['nodes']}"
                 + (f", buckets {m['summary']['buckets']}" if m["mode"] == "ddp" else ""))
    for kind, counts in sorted(m["summary"]["collectives"].items()):
        total = [sum(c["nbytes"] for c in r["collectives"] if c["iteration"] == it and c["kind"] == kind) for r in ranks]
        lines.append(f"  {KIND_WORD[kind]}s {counts} ({', '.join(fmt_bytes(t) for t in total)})")
    if m["memory"]:
        lines.append("parameter + gradient bytes held, peak per rank: "
                     + ", ".join(f"rank {mm['rank']} {fmt_bytes(mm['peak'])}" for mm in m["memory"]))
    if m["cut"] is not None:  # no times here: which rank started last, and that the picture skips the wait
        lines.append(f"note: rank {m['cut']['late_rank']} started well after rank {m['cut']['first_rank']}: the "
                     "picture's time axis starts where every rank is running; the wait before is not drawn")
    lines += ["note: " + x for x in m["notes"]]
    return "\n".join(lines)
