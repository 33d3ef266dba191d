"""An operator's dispatch table (lenses/dispatch_table.py, as dicts) as a themed HTML table: the keys the
inputs carry in priority order with what the dispatcher found at each (skipped, runs, nothing), the row
that runs highlighted, and every other entry of the table folded below. Static HTML, readable offline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .markup import esc
from .theme import STYLE, var

__all__ = ["DTABLE_CSS", "choice_dict", "dispatch_table_html", "dispatch_table_text"]

_TORCH_NAMESPACES = ("aten", "prims", "quantized", "_quantized", "torchvision", "_c10d_functional", "c10d")
DTABLE_CSS = (
    ".tlw-dtable{font:13px/1.4 var(--jp-ui-font-family,sans-serif)}"
    ".tlw-dtable table{border-collapse:collapse;margin:4px 0}"
    f".tlw-dtable th{{text-align:left;border-bottom:1px solid {var('line')};padding:2px 10px 2px 0}}"
    ".tlw-dtable td{padding:2px 10px 2px 0;vertical-align:top}"
    f".tlw-dtable tr.skip td{{color:{var('fg2')}}}"
    f".tlw-dtable tr.runs td{{background:{var('tint3')};font-weight:600}}"
    f".tlw-dtable tr.none td{{background:{var('tint4')}}}"
    f".tlw-dtable .muted{{color:{var('fg2')}}}"
    f".tlw-dtable code{{font:12px var(--jp-code-font-family,monospace)}}"
)


def choice_dict(choice: Any) -> dict[str, Any]:
    """A DispatchChoice as plain data."""
    return {
        "op": choice.op, "input_keys": list(choice.input_keys), "excluded": list(choice.excluded),
        "included": list(choice.included),
        "steps": [{"key": s.key, "outcome": s.outcome} for s in choice.steps],
        "chosen": None if choice.chosen is None else choice.chosen.key,
    }


def _role(entry: Mapping[str, Any], op: str) -> str:
    role = str(entry["role"])
    if role == "kernel" and op.split("::", 1)[0] not in _TORCH_NAMESPACES:
        return "your kernel"
    return role


def dispatch_table_text(table: Mapping[str, Any], choice: Mapping[str, Any] | None = None) -> str:
    """Deterministic text: the walk (when inputs are given), then the entries by role."""
    lines = [f"{table['op']}: {len(table['entries'])} table entries"]
    if choice is not None:
        lines.append(f"inputs carry: {', '.join(choice['input_keys'])}")
        if choice["excluded"]:
            lines.append(f"this thread excludes: {', '.join(choice['excluded'])}")
        lines += [f"  {s['key']}: {s['outcome']}" for s in choice["steps"]]
        lines.append(f"runs: {choice['chosen'] or 'nothing (NotImplementedError)'}")
    by_role: dict[str, list[str]] = {}
    for e in table["entries"]:
        by_role.setdefault(_role(e, table["op"]), []).append(e["key"])
    lines += [f"{role}: {', '.join(keys[:12])}{' …' if len(keys) > 12 else ''}" for role, keys in by_role.items()]
    return "\n".join(lines)


def dispatch_table_html(table: Mapping[str, Any], choice: Mapping[str, Any] | None = None,
                        fragment: bool = False) -> str:
    """The table; with `choice`, the walk first and the row that runs highlighted. `fragment`: without the
    themed wrapper and its style (for a widget that holds several and styles them once)."""
    op = str(table["op"])
    entries = {e["key"]: e for e in table["entries"]}
    parts = [] if fragment else [f'<div class="tlw-dtable tlw-theme"><style>{STYLE}{DTABLE_CSS}</style>',
                                 f"<div><b>{esc(op)}</b> <code class=\"muted\">{esc(table.get('schema', ''))}</code></div>"]
    walked: set[str] = set()
    if choice is not None:
        parts.append(f"<div>the inputs carry <code>{esc(', '.join(choice['input_keys']))}</code>"
                     + (f"; this thread excludes <code>{esc(', '.join(choice['excluded']))}</code>"
                        if choice["excluded"] else "") + "</div>")
        rows = []
        for s in choice["steps"]:
            walked.add(s["key"])
            e = entries.get(s["key"])
            cls = "runs" if s["key"] == choice["chosen"] else ("none" if e is None else "skip")
            role = _role(e, op) if e else "—"
            rows.append(f'<tr class="{cls}" data-key="{esc(s["key"])}"><td>{esc(s["key"])}</td><td>{esc(role)}</td>'
                        f"<td>{esc(s['outcome'])}</td><td class=\"muted\">{esc(e['source'] if e else '')}</td></tr>")
        parts.append("<table><tr><th>key (highest priority first)</th><th>entry</th><th>dispatcher</th>"
                     f"<th>registered in</th></tr>{''.join(rows)}</table>")
        verdict = (f"runs: <b>{esc(choice['chosen'])}</b>" if choice["chosen"]
                   else "nothing runs: the dispatcher raises NotImplementedError")
        parts.append(f"<div>{verdict}</div>")
    rest = [e for e in table["entries"] if e["key"] not in walked]
    body = "".join(
        f'<tr class="{"skip" if e["fallthrough"] else ""}" data-key="{esc(e["key"])}"><td>{esc(e["key"])}</td>'
        f"<td>{esc(_role(e, op))}</td><td>{esc(e['kind'])}</td><td class=\"muted\">{esc(e['source'])}</td></tr>"
        for e in rest)
    table_html = ("<table><tr><th>key</th><th>entry</th><th>as the dispatcher names it</th><th>registered in</th></tr>"
                  f"{body}</table>")
    if choice is None:
        parts.append(table_html)
    else:
        parts.append(f"<details><summary>the other {len(rest)} entries of the table</summary>{table_html}</details>")
    if not fragment:
        parts.append("</div>")
    return "".join(parts)
