"""Dispatch trace rows, computed once from lens data and drawn twice (static HTML here, live in JS).

`trace_model` flattens `DispatchTrace.to_dict()` into display rows: every Python-level call followed
by its nested calls and aten ops in execution order. `filter_model` applies the widget's filters;
the browser (labextension/src/dispatch/model.ts) implements the very same filter, and a fixture
test pins the two together. No torch imports here.

Input: the lens dict (`kind: "dispatch_trace"`, see torchlens_widgets.lenses.dispatch.DispatchTrace.to_dict).

Model schema (version 1), shared with labextension/src/dispatch/model.ts:
  {kind: "dispatch", version: 1,
   filters: {text, hide_views, only_copies, empty_calls},
   totals: {ops, calls, copies, views, inplace, rows_ops, shown_ops, shown_calls},
   truncated: bool, notes: [str],
   counts: [{name, count, copy}]            over the shown ops, most frequent first, then by name
   rows: [call row | op row]                 shown rows only, in display (execution) order
  }
  call row: {type: "call", id: "c3", parent: "c1" | null, depth, kind: "module" | "function", name,
             args: str, path: str (dispatch keys walked, highest first, " → "-joined),
             n_ops: aten ops in its subtree (whole trace), n_copies}
  op row:   {type: "op", id: "o5", parent: "c3" | null, depth, index, name, packet, overload,
             copy, view, inplace, error: str | null, inputs: str, outputs: str,
             keys: str (inputs' keys, highest first), remaining: str (keys below Python)}

Filters: an op is shown when its name contains `text` (case-insensitive, trimmed), it is not a pure
view while `hide_views`, and it is a copy if `only_copies`. A call is shown when a shown op lies in
its subtree, or when `empty_calls` is on and no op filter (text / hide_views / only_copies) is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .markup import esc as _esc
from .theme import STYLE as THEME_STYLE

__all__ = [
    "DEFAULT_FILTERS",
    "collapse_rows",
    "dispatch_html",
    "dispatch_model",
    "dispatch_text",
    "filter_model",
    "trace_model",
]

DEFAULT_FILTERS: dict[str, Any] = {"text": "", "hide_views": False, "only_copies": False, "empty_calls": False}
ARROW = " → "


def _fmt_in(m: Mapping[str, Any]) -> str:
    """"float32[4, 3] stride (1, 4)": dtype and shape, strides when not contiguous, device when not CPU."""
    kind = m.get("layout", "strided")
    note = f" ({m['note']})" if m.get("note") else ""  # what the lens could not describe, said in words
    if kind == "symbolic":  # sizes without example values: no shape to print
        return f"{m['dtype']}[symbolic]" + (f" @{m['device']}" if m["device"] != "cpu" else "") + note
    shape, stride = [int(n) for n in m["shape"]], [int(s) for s in m["stride"]]
    if kind != "strided":  # sparse / nested: no strides; a nested tensor has no single shape either
        dims = "" if kind == "nested" else f"[{', '.join(str(n) for n in shape)}]"
        out = f"{kind} {m['dtype']}{dims}"
        return out + (f" @{m['device']}" if m["device"] != "cpu" else "")
    out = f"{m['dtype']}[{', '.join(str(n) for n in shape)}]"
    if not _is_contiguous(shape, stride):
        out += f" stride ({', '.join(str(s) for s in stride)})"
    if m["device"] != "cpu":
        out += f" @{m['device']}"
    return out + note


def _is_contiguous(shape: list[int], stride: list[int]) -> bool:
    """Row-major contiguous, ignoring the strides of size-1 dims (as torch does)."""
    acc = 1
    for n, s in zip(reversed(shape), reversed(stride)):
        if n != 1 and s != acc:
            return False
        acc *= n
    return True


def _fmt_out(m: Mapping[str, Any]) -> str:
    text = _fmt_in(m)
    alias = m.get("alias")
    if alias == "view":
        return f"{text} view of in{m['alias_of']}"
    if alias == "inplace":
        return f"{text} in-place (in{m['alias_of']})" if m.get("alias_of") is not None else f"{text} in-place"
    return f"{text} fresh"


def _check_trace(trace: Any) -> Mapping[str, Any]:
    if hasattr(trace, "to_dict") and callable(trace.to_dict):
        trace = trace.to_dict()
    if not isinstance(trace, Mapping) or trace.get("kind") != "dispatch_trace":
        raise TypeError(
            "expected a dispatch trace: the object from `with torchlens_widgets.dispatch_trace() as tr:` "
            f"(or tr.to_dict()), got {type(trace).__name__}"
        )
    if trace.get("version") != 1:
        raise ValueError(f"unsupported dispatch_trace version {trace.get('version')!r}; this renderer reads version 1")
    return trace


def trace_model(trace: Any, *, max_ops: int = 2000) -> dict[str, Any]:
    """All rows of a trace (no filter, empty calls kept), the first `max_ops` aten ops at most."""
    tr = _check_trace(trace)
    if max_ops < 0:
        raise ValueError(f"max_ops must be >= 0, got {max_ops}")
    ops, calls = tr["ops"], tr["calls"]
    n_sub: dict[int, int] = {}
    n_copy: dict[int, int] = {}
    for c in reversed(calls):  # children have larger indices than their parent
        i = c["index"]
        n_sub[i] = len(c["ops"]) + sum(n_sub[k] for k in c["children"])
        n_copy[i] = sum(1 for o in c["ops"] if ops[o]["copy"]) + sum(n_copy[k] for k in c["children"])

    rows: list[dict[str, Any]] = []

    def cid(i: int | None) -> str | None:
        return None if i is None else f"c{i}"

    def add_op(op: Mapping[str, Any], depth: int) -> None:
        rows.append({
            "type": "op",
            "id": f"o{op['index']}",
            "parent": cid(op["call"]),
            "depth": depth,
            "index": op["index"],
            "name": op["name"],
            "packet": op["packet"],
            "overload": op["overload"],
            "copy": bool(op["copy"]),
            "view": bool(op["view"]),
            "inplace": bool(op["inplace"]),
            "error": op["error"],
            "inputs": ", ".join(_fmt_in(m) for m in op["inputs"]),
            "outputs": ", ".join(_fmt_out(m) for m in op["outputs"]) if op["outputs"] else ("raised " + op["error"] if op["error"] else "-"),
            "keys": ARROW.join(op["keys"]),
            "remaining": ARROW.join(op["remaining"]),
        })

    def add_call(c: Mapping[str, Any]) -> None:
        rows.append({
            "type": "call",
            "id": f"c{c['index']}",
            "parent": cid(c["parent"]),
            "depth": c["depth"],
            "kind": c["kind"],
            "name": c["name"],
            "args": ", ".join(_fmt_in(m) for m in c["args"]),
            "path": ARROW.join(c["dispatch_path"]),
            "n_ops": n_sub[c["index"]],
            "n_copies": n_copy[c["index"]],
        })
        for kind, k in _items(c["ops"], [calls[j] for j in c["children"]]):
            if kind == "op":
                if k < max_ops:
                    add_op(ops[k], c["depth"] + 1)
            elif calls[k]["start"] < max_ops:
                add_call(calls[k])

    top_ops = [op["index"] for op in ops if op["call"] is None]
    for kind, k in _items(top_ops, [c for c in calls if c["parent"] is None]):
        if kind == "op":
            if k < max_ops:
                add_op(ops[k], 0)
        elif calls[k]["start"] < max_ops:
            add_call(calls[k])

    truncated = len(ops) > max_ops
    notes = [f"showing the first {max_ops:,} of {len(ops):,} aten ops"] if truncated else []
    everything = dict(DEFAULT_FILTERS, empty_calls=True)
    model: dict[str, Any] = {
        "kind": "dispatch",
        "version": 1,
        "filters": everything,
        "totals": {
            "ops": len(ops),
            "calls": len(calls),
            "copies": sum(1 for o in ops if o["copy"]),
            "views": sum(1 for o in ops if o["view"]),
            "inplace": sum(1 for o in ops if o["inplace"]),
            "rows_ops": sum(1 for r in rows if r["type"] == "op"),
            "shown_ops": 0,
            "shown_calls": 0,
        },
        "truncated": truncated,
        "notes": notes,
        "counts": [],
        "rows": rows,
    }
    return filter_model(model, **everything)


def _items(op_ids: list[int], child_calls: list[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """Ops and child calls in execution order: a call that began before op k comes before it."""
    keyed = [((k, 1, 0), ("op", k)) for k in op_ids] + [((c["start"], 0, c["index"]), ("call", c["index"])) for c in child_calls]
    keyed.sort(key=lambda kv: kv[0])
    return [item for _, item in keyed]


def _op_shown(row: Mapping[str, Any], text: str, hide_views: bool, only_copies: bool) -> bool:
    if text and text not in row["name"].lower():
        return False
    if hide_views and row["view"]:
        return False
    return not (only_copies and not row["copy"])


def filter_model(
    model: Mapping[str, Any],
    *,
    text: str = "",
    hide_views: bool = False,
    only_copies: bool = False,
    empty_calls: bool = False,
) -> dict[str, Any]:
    """The rows of a model that pass the filters (see the module docstring), with counts over them."""
    if not isinstance(model, Mapping) or model.get("kind") != "dispatch":
        raise TypeError(f"filter_model needs a dispatch model (from trace_model / dispatch_model), got {type(model).__name__}")
    if not isinstance(text, str):
        raise TypeError(f"the text filter must be a string, got {type(text).__name__}")
    needle = text.strip().lower()
    op_filter = bool(needle) or hide_views or only_copies
    rows = model["rows"]
    parent_of = {r["id"]: r["parent"] for r in rows}
    shown_ids: set[str] = set()
    for r in rows:
        if r["type"] == "op" and _op_shown(r, needle, hide_views, only_copies):
            shown_ids.add(r["id"])
            p = r["parent"]
            while p is not None and p not in shown_ids:
                shown_ids.add(p)
                p = parent_of.get(p)
        elif r["type"] == "call" and empty_calls and not op_filter:
            shown_ids.add(r["id"])
    kept = [dict(r) for r in rows if r["id"] in shown_ids]
    counts: dict[str, list[Any]] = {}
    for r in kept:
        if r["type"] == "op":
            entry = counts.setdefault(r["name"], [0, r["copy"]])
            entry[0] += 1
    out = dict(model)
    out["filters"] = {"text": text, "hide_views": bool(hide_views), "only_copies": bool(only_copies), "empty_calls": bool(empty_calls)}
    out["rows"] = kept
    out["counts"] = [
        {"name": name, "count": n, "copy": copy}
        for name, (n, copy) in sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0]))
    ]
    out["totals"] = dict(
        model["totals"],
        shown_ops=sum(1 for r in kept if r["type"] == "op"),
        shown_calls=sum(1 for r in kept if r["type"] == "call"),
    )
    out["notes"] = list(model["notes"])
    return out


def dispatch_model(trace: Any, *, max_ops: int = 2000, **filters: Any) -> dict[str, Any]:
    """Rows of a trace after filters: text=, hide_views=, only_copies=, empty_calls= (see module docstring)."""
    unknown = set(filters) - set(DEFAULT_FILTERS)
    if unknown:
        raise TypeError(f"unknown filter(s) {sorted(unknown)}; filters are {sorted(DEFAULT_FILTERS)}")
    return filter_model(trace_model(trace, max_ops=max_ops), **{**DEFAULT_FILTERS, **filters})


def _headline(model: Mapping[str, Any]) -> str:
    t = model["totals"]
    copies = f"{t['copies']} cop{'y' if t['copies'] == 1 else 'ies'}"
    line = f"DispatchTrace: {t['ops']} aten op{'s' if t['ops'] != 1 else ''} ({copies}, {t['views']} views, {t['inplace']} in-place) under {t['calls']} Python call{'s' if t['calls'] != 1 else ''}"
    if t["shown_ops"] != t["ops"]:
        line += f"; showing {t['shown_ops']} op{'s' if t['shown_ops'] != 1 else ''}"
    return line


def _filter_line(model: Mapping[str, Any]) -> str | None:
    f = model["filters"]
    parts = []
    if f["text"].strip():
        parts.append(f"name contains {f['text'].strip()!r}")
    if f["hide_views"]:
        parts.append("views hidden")
    if f["only_copies"]:
        parts.append("copies only")
    return "filter: " + ", ".join(parts) if parts else None


def _op_flags(r: Mapping[str, Any]) -> str:
    flags = [f for f, on in (("COPY", r["copy"]), ("view", r["view"]), ("in-place", r["inplace"])) if on]
    if r["error"]:
        flags.append(f"raised {r['error']}")
    return " [" + ", ".join(flags) + "]" if flags else ""


def dispatch_text(model: Mapping[str, Any], max_lines: int = 200) -> str:
    """Deterministic plain text (no addresses, no timings): the call tree, then counts by overload."""
    lines = [_headline(model)]
    fl = _filter_line(model)
    if fl:
        lines.append(fl)
    body: list[str] = []
    for r in model["rows"]:
        pad = "  " * r["depth"]
        if r["type"] == "call":
            n = r["n_ops"]
            args = f"({r['args']})" if r["args"] else ""
            body.append(f"{pad}{r['name']}{args}  · {n} op{'s' if n != 1 else ''}")
        else:
            body.append(f"{pad}{r['name']}{_op_flags(r)}  {r['inputs'] or '-'} -> {r['outputs']}")
    if len(body) > max_lines:
        body = body[:max_lines] + [f"… {len(body) - max_lines} more rows"]
    lines += body
    if model["counts"]:
        lines.append("counts by overload:")
        lines += [f"  {c['count']:>5}  {c['name']}{'  (copy)' if c['copy'] else ''}" for c in model["counts"]]
    lines += ["note: " + n for n in model["notes"]]
    return "\n".join(lines)


def dispatch_summary(trace: Any, max_lines: int = 200) -> str:
    """Deterministic text of a finished trace (or its to_dict()): the call tree with its ops, then counts."""
    return dispatch_text(dispatch_model(trace, empty_calls=True), max_lines=max_lines)


def collapse_rows(rows: list[Mapping[str, Any]], collapsed: Any = ()) -> list[Mapping[str, Any]]:
    """The rows left when the calls in `collapsed` (ids such as "c3") are folded: their descendants go."""
    folded = set(collapsed)
    if not folded:
        return list(rows)
    hidden: set[str] = set()
    out = []
    for r in rows:
        p = r["parent"]
        if p is not None and (p in folded or p in hidden):
            hidden.add(r["id"])
            continue
        out.append(r)
    return out




#: Rules shared with the live view (labextension/src/dispatch/render.ts); colours are theme variables.
#: The op column stays in view while the table scrolls sideways; long inputs and key lists wrap.
STYLE = (
    ".tlw-dispatch{font-family:monospace;font-size:12px;color:var(--tlw-fg);background:var(--tlw-bg);max-width:100%}"
    ".tlw-dispatch table{border-collapse:collapse}"
    ".tlw-dispatch th{text-align:left;border-bottom:1px solid var(--tlw-line);padding:2px 8px;background:var(--tlw-bg)}"
    ".tlw-dispatch td{padding:1px 8px;vertical-align:top;white-space:nowrap}"
    ".tlw-dispatch .tlw-dispatch-rows{width:100%}.tlw-dispatch .tlw-wrap{white-space:normal;overflow-wrap:anywhere;min-width:7em}"
    ".tlw-dispatch .tlw-scroll{max-width:100%;max-height:480px;overflow:auto}"
    ".tlw-dispatch .tlw-dispatch-rows td:first-child,.tlw-dispatch .tlw-dispatch-rows th:first-child"
    "{position:sticky;left:0;z-index:1;background:var(--tlw-bg)}"
    ".tlw-dispatch .tlw-call,.tlw-dispatch .tlw-call td:first-child{background:var(--tlw-tint1)}"
    ".tlw-dispatch .tlw-call{font-weight:bold}"
    ".tlw-dispatch .tlw-call .tlw-n,.tlw-dispatch .tlw-call .tlw-keys{font-weight:normal;color:var(--tlw-fg2)}"
    ".tlw-dispatch .tlw-copy,.tlw-dispatch .tlw-copy td:first-child{background:var(--tlw-tint4)}"
    ".tlw-dispatch .tlw-view{color:var(--tlw-fg2)}"
    ".tlw-dispatch .tlw-note{color:var(--tlw-warn)}"
)


def dispatch_html(model: Mapping[str, Any], collapsed: Any = (), max_rows: int = 500) -> str:
    """Static, self-contained HTML (inline styles, no scripts): the rows the widget shows, `max_rows` at most."""
    folded = set(collapsed)
    rows = collapse_rows(model["rows"], folded)
    out = [
        f'<div class="tlw-dispatch tlw-theme"><style>{THEME_STYLE}{STYLE}</style>',
        f'<div class="tlw-dispatch-headline">{_esc(_headline(model))}</div>',
    ]
    fl = _filter_line(model)
    if fl:
        out.append(f'<div class="tlw-dispatch-filter">{_esc(fl)}</div>')
    out.append('<div class="tlw-scroll"><table class="tlw-dispatch-rows"><thead><tr>')
    out += [f"<th>{h}</th>" for h in ("call / aten op", "inputs", "outputs", "dispatch keys")]
    out.append("</tr></thead><tbody>")
    for r in rows[:max_rows]:
        indent = f'style="padding-left:{8 + 16 * r["depth"]}px"'
        if r["type"] == "call":
            n = r["n_ops"]
            out.append(
                f'<tr class="tlw-call" data-id="{r["id"]}">'
                f'<td {indent}>{"▸" if r["id"] in folded else "▾"} {_esc(r["name"])} '
                f'<span class="tlw-n">· {n} op{"s" if n != 1 else ""}</span></td>'
                f'<td class="tlw-wrap">{_esc(r["args"])}</td><td></td>'
                f'<td class="tlw-keys tlw-wrap">{_esc(r["path"])}</td></tr>'
            )
        else:
            cls = "tlw-op" + (" tlw-copy" if r["copy"] else "") + (" tlw-view" if r["view"] else "")
            out.append(
                f'<tr class="{cls}" data-id="{r["id"]}">'
                f"<td {indent}>{_esc(r['name'])}{_esc(_op_flags(r))}</td>"
                f'<td class="tlw-wrap">{_esc(r["inputs"])}</td><td class="tlw-wrap">{_esc(r["outputs"])}</td>'
                f'<td class="tlw-wrap" title="{_esc("still to run below Python: " + r["remaining"])}">'
                f'{_esc(r["keys"])}</td></tr>'
            )
    out.append("</tbody></table></div>")
    if len(rows) > max_rows:
        out.append(f'<div class="tlw-dispatch-more">… {len(rows) - max_rows:,} more rows (the live widget shows them all)</div>')
    if model["counts"]:
        out.append('<table class="tlw-dispatch-counts"><thead><tr>')
        out.append("<th>overload</th><th>count</th></tr></thead><tbody>")
        for c in model["counts"]:
            cls = "tlw-count tlw-copy" if c["copy"] else "tlw-count"
            out.append(f'<tr class="{cls}"><td>{_esc(c["name"])}</td><td align="right">{c["count"]}</td></tr>')
        out.append("</tbody></table>")
    out += [f'<div class="tlw-note tlw-dispatch-note">{_esc(n)}</div>' for n in model["notes"]]
    out.append("</div>")
    return "".join(out)
