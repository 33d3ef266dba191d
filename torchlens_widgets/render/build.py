"""A build report (lenses/build.py, as `BuildReport.to_dict()`) as static HTML and text: outcome, one bar
per step (compile, link) scaled to the build's time, headers read by origin, and compiler errors shown
as the learner's own lines. Plain HTML, so saved notebooks and exports show it without a kernel."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .markup import esc
from .portable import portable_html
from .theme import STYLE, var

__all__ = ["build_html", "build_progress_html", "build_text", "busy_html"]

_CSS = (
    ".tlw-build{font:13px/1.45 var(--jp-ui-font-family,sans-serif);max-width:760px}"
    ".tlw-build table{border-collapse:collapse;margin:4px 0}"
    ".tlw-theme.tlw-build table td,.tlw-theme.tlw-build table th{padding:2px 8px 2px 0;text-align:left;vertical-align:top}"
    ".tlw-theme.tlw-build table .num{text-align:right;font-variant-numeric:tabular-nums}"
    f".tlw-build .bar{{display:inline-block;height:10px;background:{var('cat1')};border-radius:2px}}"
    f".tlw-build .bar.link{{background:{var('cat2')}}}"
    f".tlw-build .muted{{color:{var('fg2')}}}"
    f".tlw-build .ok{{color:{var('good')};font-weight:600}}"
    f".tlw-build .bad{{color:{var('bad')};font-weight:600}}"
    f".tlw-build pre{{margin:2px 0 6px;padding:4px 6px;background:{var('bg2')};white-space:pre-wrap;"
    "word-break:normal;overflow-wrap:anywhere;font:12px var(--jp-code-font-family,monospace)}"
)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def build_text(report: Mapping[str, Any]) -> str:
    """Deterministic text (no times, no paths): outcome, steps, header counts, errors."""
    name = report["name"]
    if not report["ok"]:
        lines = [f"{name}: build failed"]
        lines += [f"  line {e['line']}:{e['column']}: {e['kind']}: {e['message']}\n    {e['code'].strip()}"
                  for e in report["errors"][:8]]
        return "\n".join(lines if report["errors"] else [*lines, "  (no error in your code: see the log)"])
    lines = [f"{name}: built (cache {report['cache']})"]
    lines += [f"  {s['phase']}: {s['output'].rsplit('/', 1)[-1]}" for s in report["steps"]]
    lines.append(f"  includes: {', '.join(report['includes'])}")
    if report["header_files"]:
        lines.append(f"  headers read: {report['header_files']} files, {_mb(report['header_bytes'])}")
        lines += [f"    {g['group']}: {g['files']}" for g in report["header_groups"]]
        if report.get("precompiled"):
            lines.append("  (precompiled: loaded as the compiler's saved state, not read)")
    return "\n".join(lines)


def build_html(report: Mapping[str, Any]) -> str:
    """The report as a themed HTML block."""
    name = esc(report["name"])
    parts = [f'<div class="tlw-build tlw-theme"><style>{STYLE}{_CSS}</style>']
    seconds = float(report.get("seconds", 0.0))
    if not report["ok"]:
        parts.append(f'<div><span class="bad">✗ {name} did not build</span> '
                     f'<span class="muted">({seconds:.1f} s)</span></div>')
        if report["errors"]:
            parts.append("<div>In your code:</div>")
            for e in report["errors"][:8]:
                parts.append(f"<div>line {e['line']}, column {e['column']}: {esc(e['kind'])}: {esc(e['message'])}</div>"
                             f"<pre>{e['line']:>4} | {esc(e['code'])}</pre>")
        else:
            parts.append(f"<div>No error points into your code; the end of the log:</div>"
                         f"<pre>{esc(report.get('log_tail', '')[-1500:])}</pre>")
        parts.append("</div>")
        return "".join(parts)
    cache = "cache hit: nothing compiled" if report["cache"] == "hit" else "cache miss: compiled"
    parts.append(f'<div><span class="ok">✓ {name} built</span> <span class="muted">in {seconds:.1f} s, {cache}</span></div>')
    steps = report["steps"]
    if steps:
        longest = max(s["seconds"] for s in steps) or 1.0
        rows = "".join(
            f"<tr><td>{esc(s['phase'])}</td><td>{esc(s['output'].rsplit('/', 1)[-1])}</td>"
            f"<td class=\"num\">{s['seconds']:.2f} s</td><td><span class=\"bar {esc(s['phase'])}\" "
            f"style=\"width:{max(2, round(240 * s['seconds'] / longest))}px\"></span></td></tr>"
            for s in steps)
        parts.append(f"<table><tr><th>step</th><th>output</th><th class=\"num\">time</th><th></th></tr>{rows}</table>")
    parts.append(f"<div>includes <code>{esc(', '.join(report['includes']))}</code></div>")
    if report["header_files"]:
        rows = "".join(f"<tr><td>{esc(g['group'])}</td><td class=\"num\">{g['files']}</td>"
                       f"<td class=\"num\">{_mb(g['bytes'])}</td></tr>" for g in report["header_groups"])
        verb = ("these headers came <b>precompiled</b>: the compiler loaded their parsed state, made once for "
                "this machine, instead of reading" if report.get("precompiled") else "the compiler read")
        parts.append(f"<div>{verb} <b>{report['header_files']}</b> header files "
                     f"({_mb(report['header_bytes'])}):</div>"
                     f"<table><tr><th>from</th><th class=\"num\">files</th><th class=\"num\">size</th></tr>{rows}</table>")
    if report.get("flags"):
        parts.append(f"<div class=\"muted\">flags: <code>{esc(' '.join(report['flags']))}</code></div>")
    parts.append("</div>")
    return "".join(parts)


def busy_html(title: str, phase: str, seconds: float) -> str:
    """The line shown while long work runs (a build, a header precompile, a compile, a rank run): what it does
    now and for how long. Portable: it stays in a saved notebook if the work never ends."""
    what = f": {esc(phase)}" if phase else ""
    return portable_html(f'<div class="tlw-build tlw-theme"><style>{STYLE}{_CSS}</style>⏳ <b>{esc(title)}</b>{what} '
                         f'<span class="muted">({seconds:.0f} s)</span></div>')


def build_progress_html(name: str, what: str, seconds: float) -> str:
    """The line shown while a build runs (portable: it stays in a saved notebook if the build never ends)."""
    return busy_html(f"building {name}", what, seconds)
