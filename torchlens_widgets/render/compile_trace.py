"""A compile trace (lenses/compile_trace.py, as `CompileTrace.to_dict()`) as static HTML and text: the
function's source with each captured graph's lines shaded and every break marked (click a break for torch's
explanation and hints), each compiled frame's guards and time per stage, recompiles with the guard that
failed, and each kernel's code beside the ops it fused. <details> elements do the clicking, so a saved
notebook, an HTML export or GitHub shows and opens them without a kernel."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .markup import esc, esc_ticks
from .theme import STYLE, var

__all__ = ["compile_html", "compile_text"]

_CATS = ("cat1", "cat2", "cat3", "cat4", "cat5", "cat6")
KERNEL_LINES = 80  # lines of a kernel's code shown (the rest is counted, not dropped silently)

_CSS = (
    ".tlw-compile{font:13px/1.45 var(--jp-ui-font-family,sans-serif);max-width:900px}"
    ".tlw-compile table{border-collapse:collapse;margin:4px 0;font:inherit;color:inherit}"
    ".tlw-theme.tlw-compile table td,.tlw-theme.tlw-compile table th{padding:1px 8px 1px 0;text-align:left;vertical-align:top}"
    ".tlw-compile .src{font:12px/1.5 var(--jp-code-font-family,monospace);margin:6px 0}"
    ".tlw-compile .ln{display:flex;gap:8px;white-space:pre-wrap;word-break:break-word;padding-left:6px;"
    "border-left:4px solid transparent}"
    f".tlw-compile .no{{color:{var('fg2')};min-width:3.5em;text-align:right;flex:none}}"
    f".tlw-compile .tag{{color:{var('fg2')};margin-left:auto;padding-left:12px;flex:none}}"
    f".tlw-compile .brk{{color:{var('bad')};font-weight:600}}"
    f".tlw-compile .muted{{color:{var('fg2')}}}"
    f".tlw-compile .ok{{color:{var('good')};font-weight:600}}"
    f".tlw-compile details{{margin:2px 0 2px 0}}"
    f".tlw-compile details.why{{margin:0 0 4px 4.8em;padding:2px 8px;border-left:2px solid {var('bad')}}}"
    ".tlw-compile summary{cursor:pointer}"
    f".tlw-compile pre{{margin:2px 0 6px;padding:4px 6px;background:{var('bg2')};white-space:pre-wrap;"
    "word-break:break-word;font:12px var(--jp-code-font-family,monospace)}"
    + "".join(f".tlw-compile .g{i}{{border-left-color:{var(c)};background:{var('bg2')}}}"
              f".tlw-compile .k{i}{{color:{var('fg')};border-bottom:3px solid {var(c)}}}"
              for i, c in enumerate(_CATS))
)


_TENSOR_NOTE = ('<span class="muted">the tensor\'s dtype, device, requires_grad and its static sizes and strides '
                '(checked in C++)</span><br/>')


def _counts(t: Mapping[str, Any]) -> str:
    n = {k: len(t[k]) for k in ("graphs", "breaks", "recompiles", "kernels")}
    word = {"graphs": "graph", "breaks": "break", "recompiles": "recompile", "kernels": "kernel"}
    return ", ".join(f"{v} {word[k]}{'' if v == 1 else 's'}" for k, v in n.items())


def _graph_of_line(graphs: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """Source line -> the first graph whose ops came from it."""
    owner: dict[int, int] = {}
    for g in graphs:
        for line in g["lines"]:
            owner.setdefault(line, g["index"])
    return owner


def _source(t: Mapping[str, Any]) -> str:
    lines, first = t.get("source") or [], int(t.get("first_line") or 0)
    if not lines:
        return ('<div class="muted">No source to show (Python has none for this function, e.g. it was made '
                "with exec); the graphs below list their lines.</div>")
    owner = _graph_of_line(t["graphs"])
    here: dict[int, list[Mapping[str, Any]]] = {}
    for b in t["breaks"]:
        if b["filename"] == t.get("filename"):
            here.setdefault(b["line"], []).append(b)
    rows = []
    for i, text in enumerate(lines):
        no = first + i
        g = owner.get(no)
        cls = f"ln g{g % len(_CATS)}" if g is not None else "ln"
        tag = f'<span class="tag">graph {g}</span>' if g is not None else ""
        mark = '<span class="brk">◆ graph break</span>' if no in here else ""
        rows.append(f'<div class="{cls}"><span class="no">{no}</span><span>{esc(text) or " "}</span>{mark}{tag}</div>')
        seen: set[tuple[str, str]] = set()
        for b in here.get(no, []):
            key = (b["kind"], b["explanation"])
            if key in seen:
                continue
            seen.add(key)
            hints = "".join(f"<li>{esc_ticks(h)}</li>" for h in b["hints"])
            rows.append(f'<details class="why"><summary class="brk">why: {esc(b["kind"])}</summary>'
                        f"<div>{esc_ticks(b['explanation'])}</div>" + (f"<div>torch's hints:</div><ul>{hints}</ul>" if hints
                                                                   else "") + "</details>")
    return f'<div class="src">{"".join(rows)}</div>'


def _elsewhere(t: Mapping[str, Any]) -> str:
    """Breaks outside the function's own lines (in a function it calls)."""
    out = [b for b in t["breaks"] if b["filename"] != t.get("filename") or not t.get("source")]
    if not out:
        return ""
    items = "".join(f'<details class="why"><summary class="brk">{esc(b["function"])}, line {b["line"]}: '
                    f'{esc(b["kind"])}</summary><pre>{esc(b["code"])}</pre><div>{esc_ticks(b["explanation"])}</div>'
                    + "".join(f"<div>hint: {esc_ticks(h)}</div>" for h in b["hints"]) + "</details>" for b in out)
    return f"<div>Breaks in code it calls:</div>{items}"


def _frames(t: Mapping[str, Any]) -> str:
    parts = []
    for f in t["frames"]:
        secs = ", ".join(f"{k} {v:.2f} s" for k, v in f["seconds"].items())
        rows = "".join(f"<tr><td><code>{esc(g['source'] or '(global)')}</code></td><td>{esc(g['kind'])}</td>"
                       f"<td>{_TENSOR_NOTE if g['kind'] == 'TENSOR_MATCH' else ''}"
                       f"<code>{esc('; '.join(g['checks']))}</code></td></tr>"
                       for g in f["guards"])
        aot = "".join(f"<details><summary>AOTAutograd {label} graph</summary><pre>{esc(f[key])}</pre></details>"
                      for key, label in (("aot_forward", "forward"), ("aot_backward", "backward"))
                      if f.get(key))
        parts.append(f"<details><summary>frame {esc(f['compile_id'])} <code>{esc(f['function'])}</code>: "
                     f"{len(f['guards'])} guards, {f['graph_ops']} op{'' if f['graph_ops'] == 1 else 's'} "
                     f"<span class=\"muted\">({secs})</span>"
                     f"</summary><table><tr><th>guarded value</th><th>guard</th><th>check</th></tr>{rows}</table>"
                     f"{aot}</details>")
    return "<div><b>Compiled frames</b> (open one for the guards it checks before reusing its code)</div>" + \
        "".join(parts) if parts else ""


def _recompiles(t: Mapping[str, Any]) -> str:
    if not t["recompiles"]:
        return ""
    rows = "".join(f"<tr><td>{esc(r['compile_id'])}</td><td><code>{esc(r['function'])}</code></td><td>"
                   + "<br/>".join(f"{esc(a)}: <code>{esc(w)}</code>" if a else f"<code>{esc(w)}</code>"
                                 for a, w in dict.fromkeys(zip(r["against"], r["reasons"], strict=False)))
                   + "</td></tr>" for r in t["recompiles"])
    return ("<div><b>Recompiles</b> (for each earlier compile of the frame, the guard the new inputs failed)</div>"
            f"<table><tr><th>compile</th><th>frame</th><th>failed guard</th></tr>{rows}</table>")


def _kernels(t: Mapping[str, Any]) -> str:
    parts = []
    for i, k in enumerate(t["kernels"]):
        code = k["source"].strip("\n").splitlines()
        shown = "\n".join(code[:KERNEL_LINES])
        more = (f'<div class="muted">… {len(code) - KERNEL_LINES} more lines '
                f"(trace.kernels[{i}].source has them all)</div>") if len(code) > KERNEL_LINES else ""
        lines = f", lines {', '.join(map(str, k['lines']))}" if k["lines"] else ""
        fused = ", ".join(k["fused_nodes"]) or "(no provenance recorded)"
        parts.append(f"<details><summary><code>{esc(k['name'])}</code> ({esc(k['stage'])}): fuses "
                     f"<b>{esc(fused)}</b><span class=\"muted\">{esc(lines)}</span></summary>"
                     f"<pre>{esc(shown)}</pre>{more}</details>")
    if not parts:
        return ""
    return "<div><b>Generated kernels</b> (open one for its code)</div>" + "".join(parts)


def _skipped(t: Mapping[str, Any]) -> str:
    """Frames Dynamo gave up on and ran eagerly, whole (a break inside a loop): the reason, the line and the break
    that started it, so "0 graphs, 0 breaks" is not read as "nothing happened"."""
    rows = []
    for s in t.get("skipped", ()):
        at = f" (it stopped at line {s['line']})" if s.get("line") else ""
        rows.append(f'<div class="brk">frame <code>{esc(s["function"])}</code> skipped: it runs eagerly, whole{at}</div>'
                    f'<div class="muted"><code>{esc(str(s.get("code", "")).strip())}</code> · '
                    f'{esc(s.get("kind", ""))}: {esc(s.get("explanation", ""))} · Dynamo: {esc(s.get("why", ""))}</div>')
    return f"<div>{''.join(rows)}</div>" if rows else ""


def compile_html(t: Mapping[str, Any]) -> str:
    """The trace as one themed HTML block."""
    name = esc(t["function"])
    breaks = len(t["breaks"])
    verdict = ('<span class="brk">frame skipped: nothing compiled</span>' if t.get("skipped") and not t["graphs"]
               else '<span class="ok">no graph breaks</span>' if not breaks
               else f'<span class="brk">{breaks} graph break{"s" if breaks != 1 else ""}</span>')
    legend = " ".join(f'<span class="k{g["index"] % len(_CATS)}">graph {g["index"]}: {len(g["ops"])} '
                      f'op{"" if len(g["ops"]) == 1 else "s"}</span>' for g in t["graphs"])
    return (f'<div class="tlw-compile tlw-theme"><style>{STYLE}{_CSS}</style>'
            f"<div><b><code>{name}</code></b> under torch.compile ({esc(t['backend'])}, {t['calls']} call"
            f"{'s' if t['calls'] != 1 else ''}): {verdict} · {esc(_counts(t))}</div>"
            f"<div>{legend}</div>{_skipped(t)}{_source(t)}{_elsewhere(t)}{_frames(t)}{_recompiles(t)}{_kernels(t)}</div>")


def compile_text(t: Mapping[str, Any]) -> str:
    """Deterministic text (no times, no paths): counts, each graph's lines and ops, breaks, recompiles, kernels."""
    lines = [f"{t['function']} [{t['backend']}]: {_counts(t)}"]
    for g in t["graphs"]:
        where = f"lines {g['lines'][0]}-{g['lines'][-1]}" if g["lines"] else "no user lines"
        lines.append(f"  graph {g['index']} ({where}): {', '.join(o['target'] for o in g['ops'])}")
    for b in t["breaks"]:
        lines.append(f"  break at line {b['line']}: {b['code'].strip()}  ({b['kind']})")
    for r in t["recompiles"]:
        lines.append(f"  recompile {r['compile_id']} of {r['function']}: {'; '.join(dict.fromkeys(r['reasons']))}")
    for k in t["kernels"]:
        lines.append(f"  kernel {k['name']} ({k['stage']}): {', '.join(k['fused_nodes'])}")
    for s in t.get("skipped", ()):
        lines.append(f"  frame {s['function']} skipped (runs eagerly, whole) at line {s.get('line')}: {s.get('why', '')}")
    return "\n".join(lines)
