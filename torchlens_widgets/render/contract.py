"""A contract report (lenses/contract.py, as a dict) as a pass/fail grid: one row per case, grouped, ✓ or ✗
with the failing case's difference or error. Static, themed HTML; deterministic text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .markup import esc
from .theme import STYLE, var

__all__ = ["contract_html", "contract_text"]

_CSS = (
    ".tlw-contract{font:13px/1.4 var(--jp-ui-font-family,sans-serif)}"
    ".tlw-contract table{border-collapse:collapse;margin:4px 0}"
    f".tlw-theme.tlw-contract table th{{text-align:left;border-bottom:1px solid {var('line')};padding:2px 10px 2px 0}}"
    ".tlw-theme.tlw-contract table td{text-align:left;padding:2px 10px 2px 0;vertical-align:top}"
    f".tlw-contract td.group{{color:{var('fg2')}}}"
    f".tlw-contract tr.fail td{{background:{var('tint4')}}}"
    f".tlw-contract .ok{{color:{var('good')};font-weight:600}}"
    f".tlw-contract .bad{{color:{var('bad')};font-weight:600}}"
    f".tlw-contract .muted{{color:{var('fg2')}}}"
)


def contract_text(report: Mapping[str, Any]) -> str:
    """One line per case (no timings): ✓/✗, group, case, and what failed."""
    results = report["results"]
    bad = [r for r in results if not r["passed"]]
    lines = [f"{report['op']}: {len(results) - len(bad)} of {len(results)} cases pass"]
    lines += [f"  {'✓' if r['passed'] else '✗'} {r['group']:9s} {r['name']}"
              + ("" if r["passed"] else f": {r['detail']}") for r in results]
    return "\n".join(lines)


def contract_html(report: Mapping[str, Any]) -> str:
    results = report["results"]
    bad = sum(not r["passed"] for r in results)
    head = (f'<span class="ok">✓ all {len(results)} cases pass</span>' if not bad
            else f'<span class="bad">✗ {bad} of {len(results)} cases fail</span>')
    rows = []
    last_group = None
    for r in results:
        group = esc(r["group"]) if r["group"] != last_group else ""
        last_group = r["group"]
        mark = '<span class="ok">✓</span>' if r["passed"] else '<span class="bad">✗</span>'
        detail = "" if r["passed"] and r["detail"] == "ok" else esc(r["detail"])
        rows.append(f'<tr class="{"pass" if r["passed"] else "fail"}" data-case="{esc(r["name"])}">'
                    f'<td class="group">{group}</td><td>{mark}</td><td>{esc(r["name"])}</td>'
                    f'<td class="{"muted" if r["passed"] else ""}">{detail}</td></tr>')
    return (f'<div class="tlw-contract tlw-theme"><style>{STYLE}{_CSS}</style>'
            f"<div><b>{esc(report['op'])}</b> against its reference: {head}</div>"
            "<table><tr><th>group</th><th></th><th>case</th><th>what differs</th></tr>"
            f"{''.join(rows)}</table></div>")
