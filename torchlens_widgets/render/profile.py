"""Draw a profiler trace (lenses.profile, as its to_dict()): one lane per thread with nested spans stacked by
depth, ``record_function`` ranges drawn apart from ops, a time axis, and the key-averages table beside it.

One layout (`profile_model`) serves the static HTML here and the live widget (labextension/src/ptrace):
  {kind: "ptrace", version: 1, width, height, left, right, row_h, scale, end, ticks: [{x, label}],
   lanes: [{label, short, y, rows}], names: [str], cats: [str], frames: [str], stacks: [[frame]],
   shapes: [str], spans: [[lane, depth, start, dur, name, cat, stack, shape]] (-1: none),
   table: [{name, category, count, total, self, mean, drawn}], summary: {...}, left_out, notes}
A span's box: x = left + start * scale, w = max(dur * scale, 1), y = lane.y + depth * row_h, h = row_h - 2
(x, w rounded to 2 decimals); its label is the name cut to what fits (`short_label`), never clipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .axis import CHAR_W, short_label
from .axis import nice_step as _nice_step
from .axis import px as _r
from .markup import esc as _esc
from .theme import STYLE as THEME_STYLE

__all__ = ["profile_html", "profile_model", "profile_svg", "profile_text", "short_label"]

LEFT = 170  # px for lane labels
RIGHT = 12
AXIS_Y = 24
TOP = 34  # first lane
ROW_H = 16
LANE_GAP = 12
MIN_W = 1.0
MAX_DEPTH = 24  # rows per lane; deeper spans are counted, not drawn
MAX_TABLE = 200
STATIC_ROWS = 25
NAME_W = 240  # px for a name in the table
#: Fill (a tint: labels in the text colour read on it) and outline per kind of span.
KINDS = {"op": ("tint1", "cat1"), "range": ("tint5", "cat5"), "other": ("tint6", "cat6")}
RANGES = ("user_annotation", "gpu_user_annotation")
STYLE = (
    ".tlw-ptrace{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start;padding:6px;"
    "font:12px/1.4 var(--jp-ui-font-family,sans-serif);color:var(--tlw-fg)}"
    ".tlw-pt{font-family:monospace;font-size:11px}"
    ".tlw-pt text{fill:var(--tlw-fg)}.tlw-pt .tlw-tick-label,.tlw-pt .tlw-muted{fill:var(--tlw-fg2)}"
    ".tlw-pt .tlw-lane{fill:var(--tlw-bg2)}.tlw-pt .tlw-axis,.tlw-pt .tlw-tick{stroke:var(--tlw-line)}"
    ".tlw-pt .tlw-span{stroke-width:1}"
    + "".join(f".tlw-pt .tlw-{k}{{fill:var(--tlw-{f});stroke:var(--tlw-{o})}}" for k, (f, o) in KINDS.items())
    + ".tlw-pt .tlw-range{stroke-dasharray:4,2;stroke-width:1.5}"
    ".tlw-pt-sel .tlw-span{opacity:.35}.tlw-pt-sel .tlw-label{opacity:.75}"
    ".tlw-pt-sel .tlw-span.tlw-sel{opacity:1;fill:var(--tlw-tint7);stroke:var(--tlw-warn);stroke-width:2}"
    ".tlw-ptrace .tlw-ptable{border-collapse:collapse;font:12px var(--jp-code-font-family,monospace);color:inherit}"
    ".tlw-ptrace .tlw-ptable th,.tlw-ptrace .tlw-ptable td{padding:1px 8px 1px 0;text-align:right;white-space:nowrap}"
    ".tlw-ptrace .tlw-ptable th{border-bottom:1px solid var(--tlw-line);color:var(--tlw-fg2)}"
    ".tlw-ptrace .tlw-ptable td.name,.tlw-ptrace .tlw-ptable th.name{text-align:left}"
    ".tlw-ptrace .tlw-ptable tr.tlw-sel td{background:var(--tlw-tint7)}"
    ".tlw-ptrace .tlw-note{color:var(--tlw-fg2);margin:4px 0;max-width:60em}"
    ".tlw-ptrace .tlw-swatch{display:inline-block;width:12px;height:10px;margin:0 4px 0 10px;vertical-align:middle}"
    + "".join(f".tlw-ptrace .tlw-swatch.tlw-{k}{{background:var(--tlw-{f});border:1px solid var(--tlw-{o})}}"
              for k, (f, o) in KINDS.items())
    + ".tlw-ptrace .tlw-swatch.tlw-range{border-style:dashed}"
)


def _check(trace: Any) -> Mapping[str, Any]:
    if hasattr(trace, "to_dict") and callable(trace.to_dict):
        trace = trace.to_dict()
    if not isinstance(trace, Mapping) or trace.get("kind") != "profile_trace":
        raise TypeError("expected a profile trace: record_profile(...), load_profile(...) or profile_trace_of(prof) "
                        f"(or their .to_dict()), got {type(trace).__name__}")
    if trace.get("version") != 1:
        raise ValueError(f"unsupported profile_trace version {trace.get('version')!r}; this renderer reads version 1")
    return trace


def kind_of(category: str) -> str:
    """"range" (record_function), "op" (aten op) or "other"."""
    return "range" if category in RANGES else "op" if category == "cpu_op" else "other"


def _fmt(t: float) -> str:
    """A time in µs at a precision that suits its size: 12,345 · 941 · 52.8 · 3.61 · 0.125."""
    if t >= 100:
        return f"{t:,.0f}"
    if t >= 10:
        return f"{t:.1f}".removesuffix(".0")
    return f"{t:.3f}".rstrip("0").rstrip(".") if t >= 0.001 else "0"





def _shape_text(shapes: list[list[int]]) -> str:
    return ", ".join("[" + ", ".join(str(d) for d in s) + "]" if s else "-" for s in shapes)


def _pick(events: list[Mapping[str, Any]], max_spans: int) -> set[int]:
    """The spans drawn when there are too many: ranges and top-level spans, then the longest, parents first
    (the rule of lenses.profile.downsample, which also records what was dropped)."""
    order = sorted(range(len(events)), key=lambda i: (
        not (events[i]["depth"] == 0 or events[i]["category"] in RANGES), -events[i]["duration"], events[i]["depth"], i))
    keep: set[int] = set()
    for i in order:
        if len(keep) >= max_spans:
            break
        p = events[i]["parent"]
        if p is None or p in keep:
            keep.add(i)
    return keep


def profile_model(trace: Any, *, width: int = 720, max_spans: int = 20_000) -> dict[str, Any]:
    """The layout both pictures draw (see the module docstring): at most `max_spans` spans (downsample the
    trace first to have what was left out counted), at most MAX_DEPTH rows a lane."""
    d = _check(trace)
    if width < LEFT + RIGHT + 100:
        raise ValueError(f"width must be at least {LEFT + RIGHT + 100} px, got {width}")
    events = list(d["events"])
    notes = list(d["notes"])
    end = float(d["end"])
    scale = (width - LEFT - RIGHT) / end if end > 0 else 1.0
    keep = _pick(events, max_spans) if len(events) > max_spans else None
    if keep is not None:
        notes.append(f"drawing {len(keep):,} of {len(events):,} spans (the ranges, the top level and the longest)")
    deep = 0
    rows: dict[int, int] = {}
    names: dict[str, int] = {}
    cats: dict[str, int] = {}
    shapes: dict[str, int] = {}
    spans: list[list[Any]] = []
    drawn: dict[str, int] = {}
    for i, e in enumerate(events):
        if keep is not None and i not in keep:
            continue
        if e["depth"] >= MAX_DEPTH:
            deep += 1
            continue
        rows[e["thread"]] = max(rows.get(e["thread"], 0), e["depth"] + 1)
        shape = _shape_text(e["shapes"]) if e["shapes"] else ""
        spans.append([e["thread"], e["depth"], e["start"], e["duration"], names.setdefault(e["name"], len(names)),
                      cats.setdefault(e["category"], len(cats)), -1 if e["stack"] is None else e["stack"],
                      shapes.setdefault(shape, len(shapes)) if shape else -1])
        drawn[e["name"]] = drawn.get(e["name"], 0) + 1
    if deep:
        notes.append(f"{deep:,} span{'s' if deep != 1 else ''} nested deeper than {MAX_DEPTH} levels not drawn")
    lanes = []
    y = TOP
    for t in d["threads"]:
        n = rows.get(t["id"], 1)
        lanes.append({"label": t["name"], "short": short_label(t["name"], LEFT - 8), "y": y, "rows": n})
        y += n * ROW_H + LANE_GAP
    step = _nice_step(end)
    ticks = [{"x": _r(LEFT + t * scale), "label": _fmt(t)}
             for t in (round(i * step, 9) for i in range(int(end // step) + 1))]
    table = [{"name": a["name"], "category": a["category"], "count": a["count"], "total": a["total"],
              "self": a["self_time"], "mean": round(a["mean"], 3), "drawn": drawn.get(a["name"], 0)}
             for a in d["averages"][:MAX_TABLE]]
    if len(d["averages"]) > MAX_TABLE:
        notes.append(f"table: the {MAX_TABLE} names with the most self time of {len(d['averages']):,}")
    n_ops = sum(a["count"] for a in d["averages"] if a["category"] == "cpu_op")
    n_ranges = sum(a["count"] for a in d["averages"] if a["category"] in RANGES)
    summary = {"events": len(events) + (d["left_out"]["events"] if d["left_out"] else 0), "drawn": len(spans),
               "threads": len(d["threads"]), "ops": n_ops, "ranges": n_ranges, "names": len(d["averages"]),
               "python_frames": d["python_frames"], "with_stack": d["with_stack"], "record_shapes": d["record_shapes"],
               "source": d["source"]}
    return {"kind": "ptrace", "version": 1, "width": width, "height": int(y + 4), "left": LEFT, "right": RIGHT,
            "row_h": ROW_H, "scale": scale, "end": end, "ticks": ticks, "lanes": lanes, "names": list(names),
            "cats": list(cats), "frames": list(d["frames"]), "stacks": list(d["stacks"]), "shapes": list(shapes),
            "spans": spans, "table": table, "summary": summary, "left_out": d["left_out"], "notes": notes}


def _model(m: Any) -> Mapping[str, Any]:
    if isinstance(m, Mapping) and m.get("kind") == "ptrace":
        return m
    return profile_model(m)


def left_out_text(m: Mapping[str, Any]) -> str | None:
    """The sentence saying what downsampling dropped (None: nothing)."""
    lo = m["left_out"]
    if not lo:
        return None
    most = ", ".join(f"{n} ×{k:,}" for n, k in lo["names"][:3])
    return (f"left out {lo['events']:,} of {m['summary']['events']:,} spans, covering {_fmt(lo['time'])} µs"
            + (f" (most: {most})" if most else "") + "; the table counts them all")


def _tip(m: Mapping[str, Any], s: list[Any], frames: int = 6) -> str:
    lane, depth, start, dur, name, cat, stack, shape = s
    lines = [f"{m['names'][name]} ({m['cats'][cat]}) {_fmt(dur)} µs at {_fmt(start)} µs"]
    if shape >= 0:
        lines.append(f"inputs: {m['shapes'][shape]}")
    if stack >= 0:
        fr = [m["frames"][f] for f in m["stacks"][stack]]
        lines += ["  " + f for f in fr[:frames]] + ([f"  … {len(fr) - frames} more frames"] if len(fr) > frames else [])
    return "\n".join(lines)


def profile_svg(trace: Any, selected: str | None = None) -> str:
    """The timeline alone: a self-contained SVG (no scripts); spans of `selected` highlighted."""
    m = _model(trace)
    W, H, left = m["width"], m["height"], m["left"]
    sel = -1 if selected is None else m["names"].index(selected) if selected in m["names"] else -1
    cls = "tlw-pt tlw-theme" + (" tlw-pt-sel" if sel >= 0 else "")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="{cls}" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           f'font-family="monospace" font-size="11" style="background: var(--tlw-bg)">'
           f'<style>{THEME_STYLE}{STYLE}</style>',
           f'<line class="tlw-axis" x1="{left}" y1="{AXIS_Y}" x2="{W - m["right"]}" y2="{AXIS_Y}"/>',
           f'<text class="tlw-muted" x="6" y="{AXIS_Y - 8}">time (µs)</text>']
    n = len(m["ticks"])
    for k, t in enumerate(m["ticks"]):
        anchor = "end" if k == n - 1 and t["x"] + len(t["label"]) * CHAR_W / 2 > W else "middle"
        out.append(f'<line class="tlw-tick" x1="{t["x"]}" y1="{AXIS_Y - 3}" x2="{t["x"]}" y2="{AXIS_Y + 3}"/>'
                   f'<text class="tlw-tick-label" x="{t["x"]}" y="{AXIS_Y - 8}" text-anchor="{anchor}">'
                   f'{_esc(t["label"])}</text>')
    for i, lane in enumerate(m["lanes"]):
        h = lane["rows"] * m["row_h"]
        out.append(f'<rect class="tlw-lane" data-lane="{i}" x="{left}" y="{lane["y"]}" width="{W - m["right"] - left}" '
                   f'height="{h}"/><text class="tlw-lane-label" x="6" y="{lane["y"] + 12}"><title>{_esc(lane["label"])}'
                   f'</title>{_esc(lane["short"])}</text>')
    row_h = m["row_h"]
    for i, s in enumerate(m["spans"]):
        lane, depth, start, dur, name, cat = s[:6]
        x, w = _r(left + start * m["scale"]), _r(max(dur * m["scale"], MIN_W))
        y = m["lanes"][lane]["y"] + depth * row_h
        kind = kind_of(m["cats"][cat])
        out.append(f'<rect class="tlw-span tlw-{kind}{" tlw-sel" if name == sel else ""}" data-i="{i}" '
                   f'x="{x}" y="{y + 1}" width="{w}" height="{row_h - 2}"><title>{_esc(_tip(m, s))}</title></rect>')
        label = short_label(m["names"][name], w)
        if label:
            out.append(f'<text class="tlw-label" x="{_r(x + 2)}" y="{y + row_h - 4}">{_esc(label)}</text>')
    out.append("</svg>")
    return "".join(out)


def calls_tip(r: Mapping[str, Any]) -> str:
    """A table row's tooltip: its category, and why its spans drawn (those a click lights) are not its calls."""
    if r["drawn"] < r["count"]:
        return f"{r['category']}; {r['drawn']:,} of {r['count']:,} calls drawn (the rest were left out of the picture)"
    if r["drawn"] > r["count"]:
        return (f"{r['category']}; {r['drawn']:,} spans for {r['count']:,} calls: as torch's key_averages does, a span "
                "that is the only child of a span of the same name is one call with it")
    return str(r["category"])


def _table_html(m: Mapping[str, Any], selected: str | None, rows: int) -> str:
    out = ['<table class="tlw-ptable"><thead><tr><th class="name">name</th><th>calls</th><th>self µs</th>'
           '<th>total µs</th><th>mean µs</th></tr></thead><tbody>']
    for r in m["table"][:rows]:
        tip = calls_tip(r)
        out.append(f'<tr class="tlw-row{" tlw-sel" if r["name"] == selected else ""}" data-name="{_esc(r["name"])}" '
                   f'title="{_esc(tip)}"><td class="name">{_esc(short_label(r["name"], NAME_W))}</td><td>{r["count"]:,}</td>'
                   f'<td>{_fmt(r["self"])}</td><td>{_fmt(r["total"])}</td><td>{_fmt(r["mean"])}</td></tr>')
    out.append("</tbody></table>")
    if len(m["table"]) > rows:
        out.append(f'<div class="tlw-note">… {len(m["table"]) - rows} more names (the live widget lists them)</div>')
    return "".join(out)


def header_text(m: Mapping[str, Any]) -> str:
    sm = m["summary"]
    extra = [w for w, on in (("Python stacks", sm["with_stack"]), ("input shapes", sm["record_shapes"])) if on]
    return (f"profile ({'live run' if sm['source'] == 'live' else 'saved trace'}): {sm['events']:,} spans on "
            f"{sm['threads']} thread{'s' if sm['threads'] != 1 else ''} — {sm['ops']:,} aten op calls, "
            f"{sm['ranges']:,} record_function range{'s' if sm['ranges'] != 1 else ''}, {sm['names']:,} names"
            + (f"; with {' and '.join(extra)}" if extra else ""))


def profile_html(trace: Any, selected: str | None = None, *, rows: int = STATIC_ROWS) -> str:
    """Static HTML (XHTML-parsable, no scripts): the timeline SVG and the key-averages table beside it, the
    rows and spans of `selected` highlighted; hovering a span shows its inputs and stack (its title)."""
    m = _model(trace)
    sel = selected if selected in m["names"] or any(r["name"] == selected for r in m["table"]) else None
    legend = "".join(f'<span class="tlw-swatch tlw-{k}"></span>{t}' for k, t in
                     (("op", "aten op"), ("range", "record_function range"), ("other", "other")))
    notes = [n for n in [left_out_text(m), *m["notes"]] if n]
    return (f'<div class="tlw-ptrace tlw-theme{" tlw-pt-sel" if sel else ""}" style="background: var(--tlw-bg)">'
            f'<style>{THEME_STYLE}{STYLE}</style>'
            f'<div class="tlw-ptrace-left"><div class="tlw-note">{_esc(header_text(m))}</div>'
            f'<div class="tlw-note">{legend}; nested calls below their caller; hover a span for its inputs and stack'
            f'</div>{profile_svg(m, sel)}'
            + "".join(f'<div class="tlw-note">{_esc(n)}</div>' for n in notes)
            + f'</div><div class="tlw-ptrace-right"><div class="tlw-note">key averages, by self time'
              f'{" (selected: " + _esc(sel) + ")" if sel else ""}</div>{_table_html(m, sel, rows)}</div></div>')


def profile_text(trace: Any, selected: str | None = None, *, max_lines: int = 60) -> str:
    """Deterministic plain text (no times, no addresses): summary, calls per name, the ranges and what was
    left out."""
    m = _model(trace)
    lines = [header_text(m)]
    by_calls = sorted(m["table"], key=lambda r: (-r["count"], r["name"]))
    lines.append("calls per name:")
    body = [f"  {r['name']} ×{r['count']:,}" + ("  ← selected" if r["name"] == selected else "") for r in by_calls]
    if len(body) > max_lines:
        body = body[:max_lines] + [f"  … {len(body) - max_lines} more names"]
    lines += body
    ranges = [r["name"] for r in by_calls if r["category"] in RANGES]
    if ranges:
        lines.append("record_function ranges: " + ", ".join(ranges[:20]) + (" …" if len(ranges) > 20 else ""))
    lo = m["left_out"]
    if lo:
        lines.append(f"downsampled: {lo['events']:,} spans left out of the picture (the table counts them)")
    lines += ["note: " + n for n in m["notes"] if "µs" not in n]
    return "\n".join(lines)
