"""An autocast trace (lenses/autocast.py, as `to_dict()`) as a themed HTML table and as text: each call with
its dtypes in and out, its autocast list, and the casts autocast inserted, highlighted. Plain HTML: a saved
notebook shows it without a kernel."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .markup import esc
from .theme import STYLE, var

__all__ = ["autocast_html", "autocast_text", "probe_html", "probe_text"]

_POLICY_CLASS = {"lower precision": "lo", "float32": "f32", "promote": "pro", "unlisted": "none", "not probed": "none"}

_CSS = (
    ".tlw-autocast{font:13px/1.45 var(--jp-ui-font-family,sans-serif);color:" + var("fg") + ";background:" + var("bg")
    + ";padding:4px}"
    ".tlw-autocast table{border-collapse:collapse;color:inherit;font:inherit;margin:4px 0}"
    ".tlw-theme.tlw-autocast table td,.tlw-theme.tlw-autocast table th{padding:2px 10px 2px 0;text-align:left;"
    "vertical-align:top}"
    ".tlw-theme.tlw-autocast table th{border-bottom:1px solid " + var("line") + "}"
    ".tlw-autocast code{font:12px var(--jp-code-font-family,monospace)}"
    ".tlw-autocast .muted{color:" + var("fg2") + "}"
    ".tlw-autocast tr.cast td{background:" + var("bg2") + "}"
    ".tlw-autocast .castx{color:" + var("warn") + ";font-weight:600}"
    ".tlw-autocast .pol{padding:0 5px;border-radius:3px;border:1px solid " + var("line") + ";white-space:nowrap}"
    ".tlw-autocast .pol.lo{border-color:" + var("accent") + ";color:" + var("accent") + "}"
    ".tlw-autocast .pol.f32{border-color:" + var("good") + ";color:" + var("good") + "}"
    ".tlw-autocast .pol.pro{border-color:" + var("warn") + ";color:" + var("warn") + "}"
    ".tlw-autocast .bad{color:" + var("bad") + ";font-weight:600}"
)


def _dt(dtypes: Sequence[str]) -> str:
    return ", ".join(esc(d) for d in dtypes) or '<span class="muted">-</span>'


def autocast_html(trace: Mapping[str, Any]) -> str:
    """One row per call; rows where autocast inserted a cast are shaded and the casts named."""
    rows = []
    for c in trace["calls"]:
        pol = c["policy"]
        casts = ", ".join(esc(x) for x in c["casts"])
        rows.append(
            f'<tr class="{"cast" if c["casts"] else ""}"><td class="muted">{c["index"]}</td>'
            f'<td><code>{esc(c["name"])}</code></td><td>{_dt(c["inputs"])}</td><td>{_dt(c["outputs"])}</td>'
            f'<td><span class="pol {_POLICY_CLASS.get(pol, "none")}">{esc(pol)}</span></td>'
            + (f'<td><span class="castx">{casts}</span></td></tr>' if casts else "<td></td></tr>"))
    head = (f'<div><b>{esc(trace["function"])}</b> under <code>torch.autocast("{esc(trace["device"])}", '
            f'dtype=torch.{esc(trace["dtype"])})</code>: {len(trace["calls"])} call(s), '
            f'<span class="castx">{trace["cast_count"]} cast(s)</span> inserted by autocast</div>')
    return (f'<div class="tlw-theme tlw-autocast"><style>{STYLE}{_CSS}</style>{head}'
            "<table><tr><th>#</th><th>call</th><th>inputs</th><th>outputs</th><th>autocast list</th>"
            f'<th>casts autocast inserted</th></tr>{"".join(rows)}</table>'
            '<div class="muted">lower precision: float32 inputs cast down · float32: low-precision inputs cast up · '
            "promote: mixed inputs cast to the widest · unlisted: runs in the dtype it is given"
            + (" · not probed: inputs too big to copy for a probe" if any(c["policy"] == "not probed"
                                                                        for c in trace["calls"]) else "")
            + "</div></div>")


def autocast_text(trace: Mapping[str, Any]) -> str:
    lines = [f'{trace["function"]} under autocast({trace["device"]}, {trace["dtype"]}): {len(trace["calls"])} '
             f'call(s), {trace["cast_count"]} cast(s) inserted']
    for c in trace["calls"]:
        cast = f'  casts {", ".join(c["casts"])}' if c["casts"] else ""
        lines.append(f'  {c["name"]}: {", ".join(c["inputs"]) or "-"} -> {", ".join(c["outputs"]) or "-"} '
                     f'[{c["policy"]}]{cast}')
    return "\n".join(lines)


def _num(v: float) -> str:
    return f"{v:.6g}"


def _err(e: float) -> str:
    return "-" if e == float("inf") else f"{e:.2e}"


#: Rows a probe picture shows; past this it shows the first rows and counts the rest by outcome (10^6 values once
#: made a 147 MB output in 40 s). probe_values itself returns every value.
MAX_PROBE_ROWS = 200


def _left_out(probes: Sequence[Mapping[str, Any]]) -> str:
    """'' when every value is shown, else how many were left out and what became of them."""
    if len(probes) <= MAX_PROBE_ROWS:
        return ""
    counts: dict[str, int] = {}
    for p in probes[MAX_PROBE_ROWS:]:
        counts[p["outcome"]] = counts.get(p["outcome"], 0) + 1
    kinds = ", ".join(f"{n:,} {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return (f"the first {MAX_PROBE_ROWS:,} of {len(probes):,} values are shown; the other {len(probes) - MAX_PROBE_ROWS:,}: "
            f"{kinds} (probe_values returns every one)")


def probe_html(probes: Sequence[Mapping[str, Any]], dtype: str) -> str:
    """Each value, what the dtype stores, the relative error and the outcome (overflow/underflow in red); at most
    MAX_PROBE_ROWS rows, the rest counted by outcome."""
    rows = "".join(
        f'<tr><td><code>{_num(p["value"])}</code></td><td><code>{_num(p["stored"])}</code></td>'
        f'<td>{_err(p["relative_error"])}</td>'
        f'<td class="{"bad" if p["outcome"] in ("overflow", "underflow") else ""}">{esc(p["outcome"])}</td></tr>'
        for p in probes[:MAX_PROBE_ROWS])
    note = _left_out(probes)
    return (f'<div class="tlw-theme tlw-autocast"><style>{STYLE}{_CSS}</style><div>stored as <b>{esc(dtype)}</b></div>'
            "<table><tr><th>value</th><th>stored</th><th>relative error</th><th>outcome</th></tr>"
            f"{rows}</table>" + (f"<div>{esc(note)}</div>" if note else "") + "</div>")


def probe_text(probes: Sequence[Mapping[str, Any]], dtype: str) -> str:
    note = _left_out(probes)
    return "\n".join([f"stored as {dtype}:"] + [
        f'  {_num(p["value"])} -> {_num(p["stored"])} ({p["outcome"]})' for p in probes[:MAX_PROBE_ROWS]]
        + ([f"  ... {note}"] if note else []))
