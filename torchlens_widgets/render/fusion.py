"""Bytes moved, eager next to fused (lenses/fusion.py, as `to_dict()`), as static HTML and text.

Each kernel is a row: its name, the buffers it read and wrote, and two bars (read, written) on one scale
shared by both columns, so the eager column's extra traffic is visible as length. Intermediates, the
buffers written to memory only to be read back, are marked wherever they appear. Plain HTML: it flows
(no clipped labels) and a saved notebook shows it without a kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .markup import esc
from .theme import STYLE, var

__all__ = ["fusion_html", "fusion_text", "traffic_html", "traffic_text"]

_BAR_PX = 260  # width of the longest bar

_CSS = (
    ".tlw-fusion{font:13px/1.45 var(--jp-ui-font-family,sans-serif);color:" + var("fg") + ";background:" + var("bg")
    + ";padding:4px}"
    ".tlw-fusion .cols{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}"
    ".tlw-fusion .col{min-width:300px}"
    ".tlw-fusion h4{margin:2px 0 4px;font-size:13px}"
    ".tlw-fusion .muted{color:" + var("fg2") + "}"
    ".tlw-fusion table{border-collapse:collapse;color:inherit;font:inherit}"
    ".tlw-theme.tlw-fusion table td,.tlw-theme.tlw-fusion table th{padding:2px 8px 2px 0;text-align:left;vertical-align:top}"
    ".tlw-fusion th{font-weight:600;border-bottom:1px solid " + var("line") + "}"
    ".tlw-theme.tlw-fusion table td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    ".tlw-fusion code,.tlw-fusion pre{font:12px var(--jp-code-font-family,monospace)}"
    # Lab's output area wraps a <pre> anywhere (word-break:break-all), mid-number in generated code: keep the lines
    # whole and scroll them inside a box narrow enough not to widen the table
    ".tlw-fusion pre{max-width:36em;max-height:320px;overflow:auto;margin:2px 0;padding:4px;white-space:pre;"
    "word-break:normal;overflow-wrap:normal;background:" + var("bg2") + ";color:" + var("fg") + "}"
    ".tlw-fusion .bar{display:block;height:7px;margin:2px 0;min-width:1px}"
    ".tlw-fusion .bar.r{background:" + var("cat1") + "}"
    ".tlw-fusion .bar.w{background:" + var("cat2") + "}"
    ".tlw-fusion .buf{white-space:nowrap}"
    ".tlw-fusion .buf.mid{color:" + var("bad") + ";font-weight:600}"
    ".tlw-fusion .key span{display:inline-block;margin-right:12px;white-space:nowrap}"
    ".tlw-fusion .key i{display:inline-block;width:14px;height:7px;margin-right:4px;vertical-align:middle}"
    ".tlw-fusion .total td{border-top:1px solid " + var("line") + ";font-weight:600}"
)


def _size(n: float) -> str:
    """Bytes in words: 512 B, 3.1 KB, 16.8 MB (decimal units, as a bandwidth figure is quoted)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def _buffers(buffers: Sequence[Sequence[Any]], mids: set[str]) -> str:
    return ", ".join(f'<span class="buf{" mid" if name in mids else ""}">{esc(name)}</span>'
                     f' <span class="muted">{_size(n)}</span>' for name, n in buffers) or '<span class="muted">-</span>'


def _column(t: Mapping[str, Any], scale: float, title: str, ms: float | None) -> str:
    mids = {name for name, _ in t["intermediates"]}
    rows = []
    for k in t["kernels"]:
        read = sum(n for _, n in k["reads"])
        wrote = sum(n for _, n in k["writes"])
        ops = ", ".join(k["ops"]) if k["ops"] and list(k["ops"]) != [k["name"].removeprefix("aten.")] else ""
        rows.append(
            f'<tr><td><code>{esc(k["name"])}</code>'
            + (f'<br/><span class="muted">fuses {esc(ops)}</span>' if ops else "")
            + (f'<details><summary class="muted">generated code</summary><pre>{esc(k["source"].strip())}</pre>'
               "</details>" if k.get("source") else "")
            + f'</td><td>reads {_buffers(k["reads"], mids)}<br/>writes {_buffers(k["writes"], mids)}'
            f'<span class="bar r" style="width:{max(1, round(_BAR_PX * read / scale))}px"></span>'
            f'<span class="bar w" style="width:{max(1, round(_BAR_PX * wrote / scale))}px"></span></td>'
            f'<td class="num">{_size(read + wrote)}</td></tr>')
    moved = t["bytes_moved"]
    timed = f", {ms:.2f} ms" if ms is not None else ""
    mid_text = (f'{t["intermediate_count"]} intermediate{"s" if t["intermediate_count"] != 1 else ""} '
                f'({_size(t["intermediate_bytes"])})')
    breaks = (f'<div class="muted">{t["graph_breaks"]} graph break(s): the ops between graphs ran eagerly '
              "and are not counted here</div>" if t.get("graph_breaks") else "")
    if t.get("opaque"):  # a custom operator is one call here, whatever passes its own code makes
        breaks += (f'<div class="muted">{esc(", ".join(t["opaque"]))}: a custom operator, counted as one kernel with '
                   "its inputs and outputs; the passes its own code makes over memory are not seen</div>")
    vec = t.get("vector")
    if vec and any(k.get("source") for k in t["kernels"]):  # generated code differs from CPU to CPU: say for which
        breaks += f'<div class="muted">C++ generated for this CPU: {esc(vec["text"])}</div>'
    return (f'<div class="col"><h4>{esc(title)}: {t["kernel_count"]} kernel{"s" if t["kernel_count"] != 1 else ""}'
            f', {_size(moved)} moved{timed}</h4>{breaks}'
            '<table><tr><th>kernel</th><th>buffers</th><th>moved</th></tr>' + "".join(rows)
            + f'<tr class="total"><td>total</td><td>{mid_text}</td><td class="num">{_size(moved)}</td></tr>'
            "</table></div>")


_KEY = ('<div class="key muted"><span><i style="background:' + var("cat1") + '"></i>bytes read</span>'
        '<span><i style="background:' + var("cat2") + '"></i>bytes written</span>'
        '<span><b class="buf mid">t1</b> an intermediate: written to memory, then read back</span></div>')


def traffic_html(t: Mapping[str, Any], ms: float | None = None) -> str:
    """One accounting (eager or fused) on its own."""
    scale = max([sum(n for _, n in k["reads"]) for k in t["kernels"]]
                + [sum(n for _, n in k["writes"]) for k in t["kernels"]] + [1])
    return (f'<div class="tlw-theme tlw-fusion"><style>{STYLE}{_CSS}</style>'
            f'{_column(t, scale, t["mode"], ms)}{_KEY}</div>')


def fusion_html(report: Mapping[str, Any]) -> str:
    """Eager and fused side by side on one byte scale, with measured times if the report has them."""
    e, f = report["eager"], report["fused"]
    scale = max([sum(n for _, n in k["reads"]) for t in (e, f) for k in t["kernels"]]
                + [sum(n for _, n in k["writes"]) for t in (e, f) for k in t["kernels"]] + [1])
    sp = report.get("speedup")
    speed = ("" if sp is None else f"; measured {sp:.1f}x faster fused (one thread, medians)" if sp >= 1
             else f"; measured: fused was slower here ({sp:.2f}x; at this size fixed costs outweigh bytes)")
    head = (f'<div><b>{esc(report["function"])}</b>: fused moves {report["bytes_ratio"]:.1f}x fewer bytes'
            f'{speed}</div>')
    return (f'<div class="tlw-theme tlw-fusion"><style>{STYLE}{_CSS}</style>{head}<div class="cols">'
            + _column(e, scale, "eager", report.get("eager_ms")) + _column(f, scale, "fused", report.get("fused_ms"))
            + f"</div>{_KEY}</div>")


def traffic_text(t: Mapping[str, Any], ms: float | None = None) -> str:
    """The same table as text (deterministic: no times unless given)."""
    mids = {name for name, _ in t["intermediates"]}

    def bufs(bs: Sequence[Sequence[Any]]) -> str:
        return ", ".join(f"{name}{'*' if name in mids else ''} {_size(n)}" for name, n in bs) or "-"

    lines = [f'{t["mode"]}: {t["kernel_count"]} kernel(s), {_size(t["bytes_moved"])} moved, '
             f'{t["intermediate_count"]} intermediate(s)' + (f", {ms:.2f} ms" if ms is not None else "")]
    for k in t["kernels"]:
        lines.append(f'  {k["name"]}: reads {bufs(k["reads"])}; writes {bufs(k["writes"])}')
    if mids:
        lines.append("  (* an intermediate: written to memory, then read back)")
    if t.get("opaque"):
        lines.append(f'  ({", ".join(t["opaque"])}: a custom operator, one call here; its own passes are not seen)')
    return "\n".join(lines)


def fusion_text(report: Mapping[str, Any]) -> str:
    return (f'{report["function"]}: fused moves {report["bytes_ratio"]:.1f}x fewer bytes\n'
            + traffic_text(report["eager"]) + "\n" + traffic_text(report["fused"]))
