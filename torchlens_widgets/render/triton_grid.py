"""A Triton program grid (lenses/triton_grid.py, as `ProgramGrid.to_dict()`) as static HTML and text: the
grid of program ids with one selected, and for that program each tensor drawn as cells coloured by what
the program did there (loaded, stored, masked off, out of bounds). Plain HTML: it flows, so no label is
clipped, and a saved notebook shows it without a kernel. Another program is chosen with `program=`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .markup import esc
from .theme import STYLE, var

__all__ = ["MAX_CELLS", "program_grid_html", "program_grid_text", "select_program"]

#: Cells drawn per tensor (elements past it are counted, not drawn), and program ids drawn per axis.
MAX_CELLS = 1024
_AXIS_CELLS = (32, 16, 4)
_WRAP = 32  # cells per row for 1-D tensors

_CSS = (
    ".tlw-tgrid{font:13px/1.45 var(--jp-ui-font-family,sans-serif);max-width:900px}"
    ".tlw-tgrid .muted{color:" + var("fg2") + "}"
    ".tlw-tgrid .head{margin:2px 0 6px}"
    ".tlw-tgrid .msg{margin:3px 0;padding:3px 6px;background:" + var("bg2") + ";border-left:3px solid}"
    ".tlw-tgrid .msg.bad{color:" + var("bad") + ";border-color:" + var("bad") + "}"
    ".tlw-tgrid .msg.warn{color:" + var("warn") + ";border-color:" + var("warn") + "}"
    ".tlw-tgrid .pids{margin:4px 0 8px}"
    ".tlw-tgrid .prow{white-space:nowrap}"
    ".tlw-tgrid .pid{display:inline-block;min-width:1.6em;margin:1px;padding:0 4px;text-align:center;"
    "font:11px/18px var(--jp-code-font-family,monospace);color:" + var("fg") + ";background:" + var("bg2") + ";"
    "border:1px solid " + var("line") + ";border-radius:2px}"
    ".tlw-tgrid .pid.err{border:2px solid " + var("bad") + "}"
    ".tlw-tgrid .pid.unrec{color:" + var("fg2") + ";border-style:dashed;background:" + var("bg") + "}"
    ".tlw-tgrid .pid.sel{background:" + var("accent") + ";color:" + var("bg") + ";font-weight:600}"
    ".tlw-tgrid .tensor{margin:6px 0 10px}"
    ".tlw-tgrid .trow{white-space:nowrap;line-height:0}"
    ".tlw-tgrid .lbl{display:inline-block;min-width:3.5em;padding-right:4px;text-align:right;vertical-align:middle;"
    "font:10px/14px var(--jp-code-font-family,monospace);color:" + var("fg2") + "}"
    ".tlw-tgrid .c{display:inline-block;box-sizing:border-box;width:14px;height:14px;margin:1px;"
    "vertical-align:middle;border:1px solid " + var("line") + ";background:" + var("bg2") + "}"
    ".tlw-tgrid .c.ld{background:" + var("cat1") + "}"
    ".tlw-tgrid .c.st{background:" + var("cat2") + "}"
    ".tlw-tgrid .c.both{background:" + var("cat5") + "}"
    ".tlw-tgrid .c.mk{border:1px dashed " + var("fg2") + ";background:repeating-linear-gradient(45deg," + var("fg2")
    + " 0 1px,transparent 1px 4px)}"
    ".tlw-tgrid .c.oob{background:" + var("bad") + ";border-color:" + var("bad") + "}"
    ".tlw-tgrid .c.oth{background:" + var("neutral") + "}"
    ".tlw-tgrid .c.ghost{background:transparent;border:1px dotted " + var("line") + "}"
    ".tlw-tgrid .legend{margin:4px 0 8px}"
    ".tlw-tgrid .legend span.item{display:inline-block;margin-right:12px;white-space:nowrap}"
    ".tlw-tgrid table{border-collapse:collapse;margin:4px 0;color:inherit;font:inherit}"
    ".tlw-tgrid td,.tlw-tgrid th{padding:1px 10px 1px 0;text-align:left;vertical-align:top}"
    ".tlw-tgrid code{font:12px var(--jp-code-font-family,monospace)}"
)

_STATES = (  # class, legend text, text word
    ("ld", "loaded", "loaded"),
    ("st", "stored", "stored"),
    ("both", "loaded and stored", "loaded+stored"),
    ("mk", "masked off (lane switched off, not touched)", "masked"),
    ("oob", "out of bounds, no mask: an error", "OUT OF BOUNDS"),
    ("oth", "touched by another program", "other program"),
    ("", "untouched", "untouched"),
    ("ghost", "past the end of the tensor", "past the end"),
)


def _runs_text(runs: Sequence[Sequence[int]]) -> str:
    parts = [str(a) if b - a == 1 else f"{a}..{b - 1}" for a, b in runs]
    return ", ".join(parts) if parts else "-"


def _pid_text(pid: Sequence[int]) -> str:
    return "(" + ", ".join(str(i) for i in pid) + ("," if len(pid) == 1 else "") + ")"


def select_program(data: Mapping[str, Any], program: int | Sequence[int] | None = None) -> Mapping[str, Any] | None:
    """The recorded program to draw: `program` (an int for a 1-D grid, else a tuple), or by default the first
    one with an out-of-bounds error, else the first. None when nothing was recorded."""
    programs = data["programs"]
    grid = tuple(data["grid"])
    if program is None:
        return next((p for p in programs if p.get("errors")), programs[0] if programs else None)
    if isinstance(program, int) and not isinstance(program, bool):
        if len(grid) != 1:
            raise ValueError(f"program={program}: the grid {grid} has {len(grid)} axes, name a program as a tuple, "
                             f"e.g. program={tuple(0 for _ in grid)}")
        program = (program,)
    if not isinstance(program, (tuple, list)) or not all(isinstance(i, int) for i in program):
        raise ValueError(f"program={program!r}: give a program id, an int or a tuple of ints such as (0,)")
    want = tuple(program)
    if len(want) != len(grid) or not all(0 <= i < n for i, n in zip(want, grid)):
        raise ValueError(f"program {want} is not in the grid {grid}: ids run from 0 to size-1 on each axis")
    for p in programs:
        if tuple(p["pid"]) == want:
            return p
    raise ValueError(f"program {want} ran but was not recorded ({data.get('left_out') or 'see max_programs'}); "
                     "pass a larger max_programs to program_grid to record it")


def _states(data: Mapping[str, Any], selected: Mapping[str, Any] | None, tensor: str,
            limit: int) -> tuple[dict[int, str], int]:
    """Per element index (within `limit` past the end): its cell class; and how many indices fell before 0."""
    load: set[int] = set()
    store: set[int] = set()
    masked: set[int] = set()
    oob: set[int] = set()
    other: set[int] = set()
    before = 0

    def add(into: set[int], runs: Sequence[Sequence[int]]) -> int:
        skipped = 0
        for a, b in runs:
            skipped += max(0, min(b, 0) - a)
            into.update(range(max(a, 0), min(b, limit)))
        return skipped

    for p in data["programs"]:
        mine = selected is not None and p["pid"] == selected["pid"]
        for acc in p["accesses"]:
            if acc["tensor"] != tensor:
                continue
            if not mine:
                add(other, acc["elements"])
                continue
            before += add(load if acc["op"] == "load" else store, acc["elements"])
            before += add(masked, acc["masked"])
            before += add(oob, acc["out_of_bounds"])
    cells: dict[int, str] = {i: "oth" for i in other}
    cells.update({i: "mk" for i in masked})
    cells.update({i: "ld" for i in load})
    cells.update({i: "st" for i in store})
    cells.update({i: "both" for i in load & store})
    cells.update({i: "oob" for i in oob})
    return cells, before


def _tensor_html(t: Mapping[str, Any], cells: dict[int, str], before: int) -> str:
    n = int(t["numel"])
    shape = list(t["shape"])
    two_d = bool(t["contiguous"]) and len(shape) == 2 and 0 < shape[-1] <= 64
    cols = int(shape[-1]) if two_d else min(_WRAP, max(n, 1))
    shown = min(n, MAX_CELLS - MAX_CELLS % cols)
    past = [i for i in cells if i >= n]
    end = max(past) + 1 if past else n
    last = max(shown, min(end, n + MAX_CELLS // 4)) if end > n else shown
    rows = []
    for start in range(0, last, cols):
        if shown <= start < n:  # the part of a large tensor that is not drawn
            continue
        label = f"[{start // cols}]" if two_d and start < n else (str(start) if start < n else f"{start}+")
        row = [f'<span class="lbl">{label}</span>']
        for i in range(start, min(start + cols, last)):
            state = cells.get(i, "")
            cls = state if i < n or state else "ghost"
            word = next(w for c, _, w in _STATES if c == cls)
            row.append(f'<span class="c {cls}" title="{esc(t["name"])}[{i}]: {word}"></span>')
        rows.append(f'<div class="trow">{"".join(row)}</div>')
    notes = []
    if shown < n:
        notes.append(f"elements {shown}..{n - 1} not drawn")
    if end > last:
        notes.append(f"indices up to {end - 1} past the end, not all drawn")
    if before:
        notes.append(f"{before} index(es) before the first element")
    head = (f'<div><b>{esc(t["name"])}</b> <span class="muted">{esc(t["dtype"])} {esc(tuple(shape))}, '
            f'{n} element(s){", " + "; ".join(notes) if notes else ""}</span></div>')
    return f'<div class="tensor">{head}{"".join(rows)}</div>'


def _grid_html(data: Mapping[str, Any], selected: Mapping[str, Any] | None) -> str:
    grid = list(data["grid"]) + [1] * (3 - len(data["grid"]))
    ndim = len(data["grid"])
    recorded = {tuple(p["pid"]): p for p in data["programs"]}
    sel = tuple(selected["pid"]) if selected is not None else None
    out = []
    for z in range(min(grid[2], _AXIS_CELLS[2])):
        if ndim == 3:
            out.append(f'<div class="muted">axis 2 = {z}</div>')
        for y in range(min(grid[1], _AXIS_CELLS[1])):
            cells = []
            for x in range(min(grid[0], _AXIS_CELLS[0])):
                pid = (x, y, z)[:ndim]
                p = recorded.get(pid)
                cls = ("sel " if pid == sel else "") + ("unrec" if p is None else "err" if p.get("errors") else "")
                label = ",".join(str(i) for i in pid)
                cells.append(f'<span class="pid {cls.strip()}" title="program {_pid_text(pid)}">{label}</span>')
            out.append(f'<div class="prow">{"".join(cells)}</div>')
    more = [f"axis {a}: {grid[a] - _AXIS_CELLS[a]} more" for a in range(ndim) if grid[a] > _AXIS_CELLS[a]]
    axes = "axis 0 →" + (", axis 1 ↓" if ndim > 1 else "")
    note = f'<div class="muted">{axes}{" (" + "; ".join(more) + " not drawn)" if more else ""}</div>'
    return f'<div class="pids">{"".join(out)}{note}</div>'


def program_grid_html(data: Mapping[str, Any], program: int | Sequence[int] | None = None) -> str:
    """The grid and the selected program's accesses as a themed HTML block."""
    selected = select_program(data, program)
    grid = tuple(data["grid"])
    parts = [f'<div class="tlw-tgrid tlw-theme"><style>{STYLE}{_CSS}</style>']
    shown = f", program <b>{_pid_text(selected['pid'])}</b> shown" if selected is not None else ""
    parts.append(f'<div class="head"><b>{esc(data["kernel"])}</b> over the grid <code>{esc(_pid_text(grid))}</code>: '
                 f'{data["num_programs"]} program(s){shown} '
                 f'<span class="muted">({esc(data.get("interpreter", ""))})</span></div>')
    for w in data.get("warnings", ()):
        parts.append(f'<div class="msg warn">⚠ {esc(w)}</div>')
    for e in data["errors"][:8]:
        parts.append(f'<div class="msg bad">✗ {esc(e["message"])}</div>')
    if data["errors_total"] > len(data["errors"][:8]):
        parts.append(f'<div class="msg bad">… {data["errors_total"] - len(data["errors"][:8])} more '
                     "out-of-bounds error(s)</div>")
    parts.append(_grid_html(data, selected))
    if data.get("left_out"):
        parts.append(f'<div class="muted">{esc(data["left_out"])}</div>')
    legend = "".join(f'<span class="item"><span class="c {c}"></span> {esc(text)}</span>' for c, text, _ in _STATES)
    parts.append(f'<div class="legend">{legend}</div>')
    if selected is None:
        parts.append('<div class="muted">no program was recorded</div></div>')
        return "".join(parts)
    touched = {a["tensor"] for a in selected["accesses"]}
    for t in data["tensors"]:
        if t["name"] in touched:
            cells, before = _states(data, selected, t["name"], int(t["numel"]) + MAX_CELLS)
            parts.append(_tensor_html(t, cells, before))
    untouched = [t["name"] for t in data["tensors"] if t["name"] not in touched]
    if untouched:
        parts.append(f'<div class="muted">not touched by this program: {esc(", ".join(untouched))}</div>')
    if selected["accesses"]:
        rows = "".join(
            f"<tr><td>tl.{esc(a['op'])}</td><td>{esc(a['tensor'])}</td><td>{a['line'] or ''}</td>"
            f"<td><code>{esc(_runs_text(a['elements']))}</code></td><td>{a['touched']} of {a['lanes']}</td>"
            f"<td>{a['masked_lanes'] or ''}</td><td><code>{esc(_runs_text(a['out_of_bounds']) if a['out_of_bounds'] else '')}"
            "</code></td></tr>" for a in selected["accesses"])
        parts.append("<table><tr><th>access</th><th>tensor</th><th>line</th><th>elements</th><th>lanes</th>"
                     f"<th>masked lanes</th><th>out of bounds</th></tr>{rows}</table>")
    else:
        parts.append('<div class="muted">this program made no loads or stores</div>')
    parts.append("</div>")
    return "".join(parts)


def program_grid_text(data: Mapping[str, Any], program: int | Sequence[int] | None = None) -> str:
    """Deterministic text (no addresses, no times): grid, problems, the selected program's accesses."""
    selected = select_program(data, program)
    lines = [f"{data['kernel']}: grid {_pid_text(data['grid'])}, {data['num_programs']} program(s), "
             f"{len(data['programs'])} recorded"]
    lines += [f"  WARNING: {w}" for w in data.get("warnings", ())]
    lines += [f"  ERROR: {e['message']}" for e in data["errors"][:8]]
    if data["errors_total"] > len(data["errors"][:8]):
        lines.append(f"  ... {data['errors_total'] - len(data['errors'][:8])} more out-of-bounds error(s)")
    lines.append("  tensors: " + ", ".join(f"{t['name']} {t['dtype']}{list(t['shape'])}" for t in data["tensors"]))
    if selected is not None:
        lines.append(f"  program {_pid_text(selected['pid'])}:")
        for a in selected["accesses"]:
            extra = f", {a['masked_lanes']} lane(s) masked" if a["masked_lanes"] else ""
            if a["out_of_bounds"]:
                extra += f", OUT OF BOUNDS {_runs_text(a['out_of_bounds'])}"
            lines.append(f"    {a['op']:5s} {a['tensor']}[{_runs_text(a['elements'])}]{extra}")
        if not selected["accesses"]:
            lines.append("    no loads or stores")
    if data.get("left_out"):
        lines.append(f"  left out: {data['left_out']}")
    return "\n".join(lines)
