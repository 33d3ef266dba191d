"""Host-vs-device lanes geometry, computed once from the async lens and drawn statically (SVG + text).

`lanes_model` places every host span, device span, sync and event mark on one time axis: a host
lane (green running, red blocked, each blocked stretch named by the sync that caused it) above one
lane per device stream. `lanes_svg` and `lanes_text` render that dict; a widget can draw the very
same dict. No torch imports here.

Input: the lens dict (`kind: "async_lanes"`, see torchlens_widgets.lenses.asyncexec.Lanes.to_dict) or a
`Lanes` object.

Model schema (version 1):
  {kind: "lanes", version: 1, source, width, height, left, scale (px per µs), end (µs),
   ticks: [{t, x, label}],
   lanes: [{id: "host" | "d0:s7", label, y, h}],
   host:  [{x, w, y, h, state, label, sync, start, end}],
   device: [{x, w, y, h, lane, name, short, kind, op, start, end, launched_at}],
   links: [{x1, y1, x2, y2}]            launch call on the host → start of its work on the device
   syncs: [{x, x_end, y, row, anchor ("start" | "end": label kept inside the picture), label (the name; "name ×k"
            when k syncs of that name sit too close for a label each; "" for the ones it counts), count, name, kind,
            explicit, call, stream, start, end, waited, waited_for}],
   marks: [{x, y, h, lane, name, what, time}],
   summary: {host_running, host_blocked, busy: {lane id: µs}, kernels, syncs, hidden, explicit},
   notes: [str]}
x = left + t * scale (2 decimals); a span's w = max(duration * scale, 1) so zero-length work stays visible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .axis import CHAR_W
from .axis import px as _r
from .axis import short_label as _short
from .markup import esc as _esc
from .theme import STYLE as THEME_STYLE

__all__ = ["display_name", "lanes_model", "lanes_svg", "lanes_text"]

LEFT = 190  # px for lane labels
RIGHT = 16
AXIS_Y = 22
SYNC_ROWS = (38, 50)  # baselines of the (alternating) sync label rows
LANE_H = 26
LANE_GAP = 10
HOST_Y = 58
MIN_W = 1.0
#: Fill (a tint, so labels in the text colour read on it) and outline per span kind, from the theme.
COLORS = {"running": ("tint3", "cat3"), "blocked": ("tint4", "cat4"), "kernel": ("tint1", "cat1"),
          "memcpy": ("tint2", "cat2"), "memset": ("tint5", "cat5")}
STYLE = (
    ".tlw-lanes text{fill:var(--tlw-fg)}.tlw-lanes .tlw-tick-label,.tlw-lanes .tlw-axis-label{fill:var(--tlw-fg2)}"
    ".tlw-lanes .tlw-bg{fill:var(--tlw-bg)}.tlw-lanes .tlw-lane{fill:var(--tlw-bg2)}"
    ".tlw-lanes .tlw-axis,.tlw-lanes .tlw-tick{stroke:var(--tlw-line)}"
    ".tlw-lanes .tlw-link{stroke:var(--tlw-line);stroke-width:.7}"
    ".tlw-lanes .tlw-sync line{stroke:var(--tlw-bad)}.tlw-lanes .tlw-sync text{fill:var(--tlw-bad)}"
    ".tlw-lanes .tlw-mark line{stroke:var(--tlw-fg);stroke-width:1.5}"
    ".tlw-lanes .tlw-host,.tlw-lanes .tlw-kernel{stroke-width:1}"
    + "".join(f".tlw-lanes .tlw-{k}{{fill:var(--tlw-{f});stroke:var(--tlw-{o})}}" for k, (f, o) in COLORS.items())
    + ".tlw-lanes .tlw-blocked{stroke-width:1.5}"
)


def _check(lanes: Any) -> Mapping[str, Any]:
    if hasattr(lanes, "to_dict") and callable(lanes.to_dict):
        lanes = lanes.to_dict()
    if not isinstance(lanes, Mapping) or lanes.get("kind") != "async_lanes":
        raise TypeError("expected async lanes: StreamSim(...).timeline(), load_trace(...) or profile_lanes(...) "
                        f"(or their .to_dict()), got {type(lanes).__name__}")
    if lanes.get("version") != 1:
        raise ValueError(f"unsupported async_lanes version {lanes.get('version')!r}; this renderer reads version 1")
    return lanes


def _fmt(t: float) -> str:
    """A time in µs without float noise: 15, 383.5, 0.125."""
    return f"{t:.3f}".rstrip("0").rstrip(".") if t != int(t) else str(int(t))



def _nice_step(end: float, max_ticks: int = 10) -> float:
    if end <= 0:
        return 1.0
    raw = end / max_ticks
    base = 10 ** math.floor(math.log10(raw))
    return next(m * base for m in (1, 2, 5, 10) if m * base >= raw)


def _busy(spans: list[tuple[float, float]]) -> float:
    """Length of the union of intervals."""
    total, cur_a, cur_b = 0.0, None, None
    for a, b in sorted(spans):
        if cur_b is None or a > cur_b:
            if cur_b is not None and cur_a is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_a is not None and cur_b is not None:
        total += cur_b - cur_a
    return total


def display_name(name: str, limit: int = 60) -> str:
    """A kernel name without "void ", template arguments and parameters (full names stay in the model)."""
    core = name
    if name.startswith("void ") or "::" in name:  # a C++ signature, not a label like "Memcpy DtoH (...)"
        core = name.removeprefix("void ")
        cut = min((i for i in (core.find("<"), core.find("(")) if i > 0), default=len(core))
        core = core[:cut].strip() or name
    return core if len(core) <= limit else core[: limit - 1] + "…"



def lanes_model(lanes: Any, *, width: int = 960, max_spans: int = 1000, links: bool = True) -> dict[str, Any]:
    """Place the lanes on one time axis (see the module docstring); at most `max_spans` spans per kind."""
    d = _check(lanes)
    if width < LEFT + RIGHT + 100:
        raise ValueError(f"width must be at least {LEFT + RIGHT + 100} px, got {width}")
    end = float(d["end"])
    scale = (width - LEFT - RIGHT) / end if end > 0 else 1.0
    notes = list(d["notes"])

    def x(t: float) -> float:
        return _r(LEFT + t * scale)

    def w(a: float, b: float) -> float:
        return _r(max((b - a) * scale, MIN_W))

    lanes_out = [{"id": "host", "label": "host (Python thread)", "y": HOST_Y, "h": LANE_H}]
    lane_y: dict[str, float] = {}
    y = HOST_Y + LANE_H + LANE_GAP
    for s in d["streams"]:
        lid = f"d{s['device']}:s{s['stream']}"
        label = s["name"] if s["name"].startswith("stream") else f"stream {s['stream']} ({s['name']})"
        if len({st["device"] for st in d["streams"]}) > 1:
            label = f"cuda:{s['device']} {label}"
        lanes_out.append({"id": lid, "label": label, "y": y, "h": LANE_H})
        lane_y[lid] = y
        y += LANE_H + LANE_GAP
    height = int(y + 8)

    host_in, dev_in = list(d["host"]), list(d["device"])
    for what, items in (("host spans", host_in), ("device spans", dev_in)):
        if len(items) > max_spans:
            notes.append(f"showing the first {max_spans:,} of {len(items):,} {what}")
    host = [{"x": x(s["start"]), "w": w(s["start"], s["end"]), "y": HOST_Y, "h": LANE_H, "state": s["state"],
             "label": s["label"], "sync": s["sync"], "start": s["start"], "end": s["end"]} for s in host_in[:max_spans]]
    device = []
    for k in dev_in[:max_spans]:
        lid = f"d{k['device']}:s{k['stream']}"
        kw = w(k["start"], k["end"])
        device.append({"x": x(k["start"]), "w": kw, "y": lane_y[lid], "h": LANE_H, "lane": lid, "name": k["name"],
                       "short": _short(display_name(k["name"]), kw), "kind": k["kind"], "op": k["op"], "start": k["start"],
                       "end": k["end"], "launched_at": k["launched_at"]})
    link_list = []
    if links and len(device) <= 300:
        link_list = [{"x1": x(k["launched_at"]), "y1": HOST_Y + LANE_H, "x2": k["x"], "y2": k["y"]}
                     for k in device if k["launched_at"] is not None]
    syncs: list[dict[str, Any]] = []
    row_end = [-math.inf] * len(SYNC_ROWS)  # where each label row's last label ends
    row_last: list[dict[str, Any] | None] = [None] * len(SYNC_ROWS)
    for s in d["syncs"]:
        sx = x(s["start"])
        span = len(s["name"]) * CHAR_W
        anchor = "end" if sx + span > width - RIGHT else "start"  # keep labels inside
        lo = sx - span if anchor == "end" else sx
        entry: dict[str, Any] = {"x": sx, "x_end": x(s["end"]), "anchor": anchor, "label": s["name"], "count": 1,
                                 **{k: s[k] for k in ("name", "kind", "explicit", "call", "stream", "start", "end",
                                                      "waited", "waited_for")}}
        free = [r for r in range(len(SYNC_ROWS)) if row_end[r] + CHAR_W <= lo]
        same = [r for r in range(len(SYNC_ROWS)) if (last := row_last[r]) is not None and last["name"] == s["name"]]
        if free:
            row = free[0]
        elif same:  # no room for another label: the one just before it with the same name counts both
            row = same[0]
            last = row_last[row]
            if last is not None:
                last["count"] += 1
                last["label"] = f"{last['name']} ×{last['count']}"
                entry["label"] = ""
        else:
            row = min(range(len(SYNC_ROWS)), key=row_end.__getitem__)
        entry.update(y=SYNC_ROWS[row], row=row)
        if entry["label"]:
            row_end[row], row_last[row] = (sx if anchor == "end" else sx + span), entry
        syncs.append(entry)
    marks = [{"x": x(m["time"]), "y": lane_y[f"d{m['device']}:s{m['stream']}"], "h": LANE_H,
              "lane": f"d{m['device']}:s{m['stream']}", "name": m["name"], "what": m["what"], "time": m["time"]}
             for m in d["marks"]]
    step = _nice_step(end)
    ticks = [{"t": t, "x": x(t), "label": _fmt(t)} for t in (round(i * step, 9) for i in range(int(end // step) + 1))]
    busy = {lane["id"]: _busy([(k["start"], k["end"]) for k in dev_in if f"d{k['device']}:s{k['stream']}" == lane["id"]])
            for lane in lanes_out[1:]}
    summary = {
        "host_running": sum(s["end"] - s["start"] for s in host_in if s["state"] == "running"),
        "host_blocked": sum(s["end"] - s["start"] for s in host_in if s["state"] == "blocked"),
        "busy": busy,
        "kernels": len(dev_in),
        "syncs": len(d["syncs"]),
        "hidden": sum(1 for s in d["syncs"] if not s["explicit"]),
        "explicit": sum(1 for s in d["syncs"] if s["explicit"]),
    }
    return {"kind": "lanes", "version": 1, "source": d["source"], "width": width, "height": height, "left": LEFT,
            "scale": scale, "end": end, "ticks": ticks, "lanes": lanes_out, "host": host, "device": device,
            "links": link_list, "syncs": syncs, "marks": marks, "summary": summary, "notes": notes}


def _model(m: Any) -> Mapping[str, Any]:
    if isinstance(m, Mapping) and m.get("kind") == "lanes":
        return m
    return lanes_model(m)




def _sync_sentence(s: Mapping[str, Any], lane_names: Mapping[int | None, str], times: bool) -> str:
    how = "explicit" if s["explicit"] else f"hidden ({s['kind']})"
    where = f" on {lane_names[s['stream']]}" if s["stream"] in lane_names else ""
    what = f", waiting for {display_name(s['waited_for'])}{where}" if s["waited_for"] else " (nothing left to wait for)"
    if not times:
        return f"{s['name']} — {how}: host blocked{what}"
    return f"{s['name']} — {how}: at {_fmt(s['start'])} µs the host blocked {_fmt(s['waited'])} µs{what}"


def lanes_text(lanes: Any, *, times: bool = True, max_lines: int = 200) -> str:
    """Deterministic plain text: host spans, work per stream, syncs explained, totals (times=False: order only)."""
    m = _model(lanes)
    src = "StreamSim model" if m["source"] == "sim" else "profiler trace"
    sm = m["summary"]
    n_lanes = len(m["lanes"]) - 1
    head = (f"async lanes ({src}): {n_lanes} stream{'s' if n_lanes != 1 else ''}, {sm['kernels']} device "
            f"span{'s' if sm['kernels'] != 1 else ''}, {sm['syncs']} sync{'s' if sm['syncs'] != 1 else ''} "
            f"({sm['hidden']} hidden, {sm['explicit']} explicit)")
    body: list[str] = []

    def when(a: float, b: float) -> str:
        return f"  [{_fmt(a)}, {_fmt(b)}]" if times else "  "

    body.append("host:")
    for s in m["host"]:
        body.append(f"{when(s['start'], s['end'])}  {'BLOCKED' if s['state'] == 'blocked' else 'running'}  {s['label']}")
    for lane in m["lanes"][1:]:
        body.append(f"{lane['label']}:")
        body += [f"{when(k['start'], k['end'])}  {display_name(k['name'])}" + (f"  ← {k['op']}" if k["op"] else "")
                 for k in m["device"] if k["lane"] == lane["id"]]
    stream_names: dict[int | None, str] = {}
    for lane in m["lanes"][1:]:
        stream_names.setdefault(int(lane["id"].split(":s")[1]), lane["label"])
    if m["syncs"]:
        body.append("syncs:")
        body += ["  " + _sync_sentence(s, stream_names, times) for s in m["syncs"]]
    if len(body) > max_lines:
        body = body[:max_lines] + [f"… {len(body) - max_lines} more lines"]
    lines = [head, *body]
    if times:
        busy = ", ".join(f"{lane['label']} {_fmt(sm['busy'][lane['id']])} µs" for lane in m["lanes"][1:]) or "none"
        lines.append(f"totals: host running {_fmt(sm['host_running'])} µs, blocked {_fmt(sm['host_blocked'])} µs; "
                     f"device busy: {busy}")
    lines += ["note: " + n for n in m["notes"]]
    return "\n".join(lines)


def lanes_svg(lanes: Any) -> str:
    """Self-contained SVG (no scripts): axis, host lane with sync markers, one lane per stream."""
    m = _model(lanes)
    W, H, left = m["width"], m["height"], m["left"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="tlw-lanes tlw-theme" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" font-family="monospace" font-size="11"><style>{THEME_STYLE}{STYLE}</style>',
           f'<rect class="tlw-bg" x="0" y="0" width="{W}" height="{H}"/>',
           f'<line class="tlw-axis" x1="{left}" y1="{AXIS_Y}" x2="{W - RIGHT}" y2="{AXIS_Y}"/>',
           f'<text class="tlw-axis-label" x="8" y="{AXIS_Y - 8}">time (µs)</text>']
    for t in m["ticks"]:
        out.append(f'<line class="tlw-tick" x1="{t["x"]}" y1="{AXIS_Y - 3}" x2="{t["x"]}" y2="{AXIS_Y + 3}"/>'
                   f'<text class="tlw-tick-label" x="{t["x"]}" y="{AXIS_Y - 8}" text-anchor="middle">'
                   f'{_esc(t["label"])}</text>')
    for lane in m["lanes"]:
        out.append(f'<rect class="tlw-lane" data-lane="{_esc(lane["id"])}" x="{left}" y="{lane["y"]}" '
                   f'width="{W - RIGHT - left}" height="{lane["h"]}"/>'
                   f'<text class="tlw-lane-label" x="8" y="{lane["y"] + lane["h"] / 2 + 4}">{_esc(lane["label"])}</text>')
    for ln in m["links"]:
        out.append(f'<line class="tlw-link" x1="{ln["x1"]}" y1="{ln["y1"]}" x2="{ln["x2"]}" y2="{ln["y2"]}"/>')
    for i, s in enumerate(m["host"]):
        tip = f"{s['label']} — {s['state']} [{_fmt(s['start'])}, {_fmt(s['end'])}] µs"
        out.append(f'<rect class="tlw-host tlw-{s["state"]}" data-i="{i}" x="{s["x"]}" y="{s["y"]}" width="{s["w"]}" '
                   f'height="{s["h"]}"><title>{_esc(tip)}</title></rect>')
        short = _short(s["label"], s["w"])
        if short:
            out.append(f'<text class="tlw-host-label" x="{_r(s["x"] + 2)}" y="{s["y"] + s["h"] / 2 + 4}">'
                       f'{_esc(short)}</text>')
    for i, k in enumerate(m["device"]):
        tip = f"{k['name']} [{_fmt(k['start'])}, {_fmt(k['end'])}] µs" + (f" ← {k['op']}" if k["op"] else "")
        kind = k["kind"] if k["kind"] in COLORS else "kernel"
        out.append(f'<rect class="tlw-kernel tlw-{kind}" data-i="{i}" data-lane="{_esc(k["lane"])}" x="{k["x"]}" '
                   f'y="{k["y"]}" width="{k["w"]}" height="{k["h"]}"><title>{_esc(tip)}</title></rect>')
        if k["short"]:
            out.append(f'<text class="tlw-kernel-label" x="{_r(k["x"] + 2)}" y="{k["y"] + k["h"] / 2 + 4}">'
                       f'{_esc(k["short"])}</text>')
    bottom = m["lanes"][-1]["y"] + m["lanes"][-1]["h"]
    for i, s in enumerate(m["syncs"]):
        how = "explicit" if s["explicit"] else f"hidden: {s['kind']}"
        tip = f"{s['name']} ({how}) blocked the host {_fmt(s['waited'])} µs" + (
            f", waiting for {s['waited_for']}" if s["waited_for"] else "")
        out.append(f'<g class="tlw-sync{" tlw-explicit" if s["explicit"] else " tlw-hidden"}" data-i="{i}">'
                   f'<title>{_esc(tip)}</title>'
                   f'<line x1="{s["x"]}" y1="{s["y"] + 2}" x2="{s["x"]}" y2="{bottom}" '
                   f'stroke-dasharray="{"none" if s["explicit"] else "3,2"}"/>'
                   + (f'<text x="{s["x"]}" y="{s["y"]}" text-anchor="{s["anchor"]}">{_esc(s["label"])}</text>'
                      if s["label"] else "") + '</g>')
    for m_ in m["marks"]:
        out.append(f'<g class="tlw-mark tlw-{m_["what"]}"><title>{_esc(m_["what"] + " " + m_["name"])} at '
                   f'{_fmt(m_["time"])} µs</title><line x1="{m_["x"]}" y1="{m_["y"] - 3}" x2="{m_["x"]}" '
                   f'y2="{m_["y"] + m_["h"] + 3}"/></g>')
    out.append("</svg>")
    return "".join(out)
