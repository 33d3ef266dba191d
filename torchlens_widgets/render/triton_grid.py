"""A Triton program grid (lenses/triton_grid.py, as `ProgramGrid.to_dict()`) as static HTML and text: the
grid of program ids with one selected, and for that program each tensor drawn as cells coloured by what
the program did there (loaded, stored, masked off, out of bounds). Plain HTML: it flows, so no label is
clipped, and a saved notebook shows it without a kernel. Another program is chosen with `program=`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .markup import esc
from .theme import STYLE, var

__all__ = ["MAX_CELLS", "MAX_ROWS", "flat_pid", "program_grid_html", "program_grid_model", "program_grid_text", "reach",
           "select_program", "tensor_window"]

#: Rows of cells drawn per tensor (a window around what the program reached; the rest is counted, not drawn),
#: at most 32 cells a row, and program ids drawn per axis (plus a few around the selected one).
MAX_ROWS = 32
MAX_CELLS = MAX_ROWS * 32
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
    ".tlw-tgrid .prow{white-space:nowrap}.tlw-tgrid .prow.wrap{white-space:normal}"
    # program ids are plain labels here (the static picture cannot select one: no chip looks like a button);
    # the selected one is underlined, one with an error is red
    ".tlw-tgrid .pid{display:inline-block;min-width:1.6em;margin:0;padding:0 2px;text-align:center;"
    "font:11px/18px var(--jp-code-font-family,monospace);color:" + var("fg") + ";border-bottom:2px solid transparent}"
    ".tlw-tgrid .pid.err{color:" + var("bad") + ";font-weight:600}"
    ".tlw-tgrid .pid.unrec{color:" + var("fg2") + ";font-style:italic}"
    ".tlw-tgrid .pid.sel{color:" + var("accent") + ";border-bottom-color:" + var("accent") + ";font-weight:600}"
    ".tlw-tgrid .bare{display:none}"
    ".tlw-tgrid .tensor{margin:6px 0 10px}"
    ".tlw-tgrid .trow{white-space:nowrap;line-height:0;font-size:0}"
    ".tlw-tgrid code.cells{font:inherit;background:transparent;padding:0;margin:0;border:0}"
    ".tlw-tgrid .lbl{display:inline-block;min-width:3.5em;padding-right:4px;text-align:right;vertical-align:middle;"
    "font:10px/14px var(--jp-code-font-family,monospace);color:" + var("fg2") + "}"
    ".tlw-tgrid .trow .c{font-size:0}"
    ".tlw-tgrid .c{display:inline-block;box-sizing:border-box;width:14px;height:14px;margin:1px;font-size:0;"
    "color:transparent;overflow:hidden;"
    "vertical-align:middle;border:1px solid " + var("line") + ";background:" + var("bg") + "}"
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
    ".tlw-theme.tlw-tgrid table td,.tlw-theme.tlw-tgrid table th{padding:1px 10px 1px 0;text-align:left;vertical-align:top}"
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
#: A letter per cell state, inside each cell: hidden while the picture is styled, it is what a sanitized
#: export (which drops every colour) still shows, in the monospace of `<code>`, with the legend to read it.
_GLYPHS = {"ld": "L", "st": "S", "both": "B", "mk": "m", "oob": "X", "oth": "o", "": ".", "ghost": "_"}
#: Shown only when the styles are gone (a sanitized export): spacing and brackets the colours otherwise carry.
_BARE = '<span class="bare">{}</span>'



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


def reach(accesses: Sequence[Mapping[str, Any]], tensor: str) -> tuple[int, int] | None:
    """The indices `[lo, hi)` one program's accesses of `tensor` reach (masked and out of bounds included)."""
    ends = [(a, b) for acc in accesses if acc["tensor"] == tensor
            for key in ("elements", "masked", "out_of_bounds") for a, b in acc[key]]
    return (min(a for a, _ in ends), max(b for _, b in ends)) if ends else None


def tensor_window(t: Mapping[str, Any], span: tuple[int, int] | None) -> tuple[int, int, int, bool]:
    """What part of a tensor to draw, as (columns, start, stop, matrix rows?): all of it when it fits in
    MAX_ROWS rows (masked lanes past the end included), else the rows around `span` with a row of context on
    each side, at most MAX_ROWS of them. The widget (labextension/src/tgrid/model.ts) draws the same."""
    n = int(t["numel"])
    shape = list(t["shape"])
    matrix = bool(t["contiguous"]) and len(shape) == 2 and 0 < shape[-1] <= 64
    cols = int(shape[-1]) if matrix else min(_WRAP, max(n, 1))
    lo = max(span[0], 0) if span else 0
    hi = max(span[1], lo + 1) if span else min(n, 1)
    end = max(n, hi)
    if -(-end // cols) <= MAX_ROWS:
        return cols, 0, end, matrix
    first = max(lo // cols - 1, 0)
    last = min(-(-hi // cols) + 1, first + MAX_ROWS, -(-end // cols))
    return cols, first * cols, min(last * cols, end), matrix


def window_notes(t: Mapping[str, Any], start: int, stop: int, span: tuple[int, int] | None, before: int) -> list[str]:
    """What a drawn window leaves out (the same words in the widget)."""
    n = int(t["numel"])
    notes = []
    if start > 0:
        notes.append(f"elements 0..{start - 1} above not drawn")
    if stop < n:
        notes.append(f"elements {stop}..{n - 1} below not drawn")
    if span is not None and span[1] > max(stop, n):
        notes.append(f"indices up to {span[1] - 1} reached, not all drawn")
    if before:
        notes.append(f"{before} index(es) before the first element")
    if not t["contiguous"]:
        notes.append("not contiguous: cells are storage positions from its first element")
    return notes


def _tensor_html(t: Mapping[str, Any], cells: dict[int, str], before: int, span: tuple[int, int] | None) -> str:
    n = int(t["numel"])
    cols, first, last, matrix = tensor_window(t, span)
    rows = []
    for start in range(first, last, cols):
        label = f"[{start // cols}]" if matrix and start < n else (str(start) if start < n else f"{start}+")
        row = [f'<span class="lbl">{label.rjust(5, chr(0xA0))}</span>', _BARE.format(" ")]
        for i in range(start, min(start + cols, last)):
            state = cells.get(i, "")
            cls = state if i < n or state else "ghost"
            word = next(w for c, _, w in _STATES if c == cls)
            row.append(f'<span class="c {cls}" title="{esc(t["name"])}[{i}]: {word}">{_GLYPHS[cls]}</span>')
        rows.append(f'<div class="trow"><code class="cells">{"".join(row)}</code></div>')
    notes = window_notes(t, first, last, span, before)
    head = (f'<div><b>{esc(t["name"])}</b> <span class="muted">{esc(t["dtype"])} {esc(tuple(t["shape"]))}, '
            f'{n} element(s){"; " + "; ".join(notes) if notes else ""}</span></div>')
    return f'<div class="tensor">{head}{"".join(rows)}</div>'


def _axis_ids(n: int, limit: int, want: int | None) -> list[int | None]:
    """The ids drawn along one axis: the first `limit`, then (after a gap, None) a few around `want`."""
    ids: list[int | None] = list(range(min(n, limit)))
    if want is not None and want >= limit:
        ids.append(None)
        ids += list(range(max(limit, want - 4), min(n, want + 5)))
    return ids


def _grid_html(data: Mapping[str, Any], selected: Mapping[str, Any] | None) -> str:
    grid = list(data["grid"]) + [1] * (3 - len(data["grid"]))
    ndim = len(data["grid"])
    recorded = {tuple(p["pid"]): p for p in data["programs"]}
    sel = tuple(selected["pid"]) if selected is not None else None
    want = list(sel) + [0] * (3 - len(sel)) if sel is not None else [None, None, None]
    axes = [_axis_ids(grid[a], _AXIS_CELLS[a], want[a]) for a in range(3)]
    gap = '<span class="pid gap">…</span>'
    out = []
    for z in axes[2]:
        if z is None:
            out.append('<div class="muted">…</div>')
            continue
        if ndim == 3:
            out.append(f'<div class="muted">axis 2 = {z}</div>')
        for y in axes[1]:
            if y is None:
                out.append(f'<div class="prow">{gap}</div>')
                continue
            cells = []
            for x in axes[0]:
                if x is None:
                    cells.append(gap)
                    continue
                pid = (x, y, z)[:ndim]
                p = recorded.get(pid)
                cls = ("sel " if pid == sel else "") + ("unrec" if p is None else "err" if p.get("errors") else "")
                label = ",".join(str(i) for i in pid)
                chip = f'<span class="pid {cls.strip()}" title="program {_pid_text(pid)}">{label}</span>'
                cells.append(_BARE.format("[") + chip + _BARE.format("]") if pid == sel else chip)
            out.append(f'<div class="prow{" wrap" if ndim == 1 else ""}">{" ".join(cells)}</div>')
    drawn = [sum(i is not None for i in axes[a]) for a in range(3)]
    more = [f"axis {a}: {grid[a] - drawn[a]} more" for a in range(ndim) if grid[a] > drawn[a]]
    axes_text = "axis 0 →" + (", axis 1 ↓" if ndim > 1 else "")
    note = f'<div class="muted">{axes_text}{" (" + "; ".join(more) + " not drawn)" if more else ""}</div>'
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
    legend = " ".join(f'<span class="item"><code class="cells"><span class="c {c}">{_GLYPHS[c]}</span></code> {esc(text)}'
                      + _BARE.format(";") + "</span>" for c, text, _ in _STATES)
    parts.append(f'<div class="legend">{legend}</div>')
    if selected is None:
        parts.append('<div class="muted">no program was recorded</div></div>')
        return "".join(parts)
    touched = {a["tensor"] for a in selected["accesses"]}
    for t in data["tensors"]:
        if t["name"] in touched:
            span = reach(selected["accesses"], t["name"])
            stop = tensor_window(t, span)[2]
            cells, before = _states(data, selected, t["name"], stop)
            parts.append(_tensor_html(t, cells, before, span))
    untouched = [t["name"] for t in data["tensors"] if t["name"] not in touched]
    if untouched:
        parts.append(f'<div class="muted">not touched by this program: {esc(", ".join(untouched))}</div>')
    if selected["accesses"]:
        source = {int(n): str(text) for n, text in data.get("source_lines", ())}
        rows = "".join(
            f"<tr><td>tl.{esc(a['op'])}</td><td>{esc(a['tensor'])}</td><td>{a['line'] or ''}</td>"
            f"<td><code>{esc(source.get(a['line'] or -1, ''))}</code></td>"
            f"<td><code>{esc(_runs_text(a['elements']))}</code></td><td>{a['touched']} of {a['lanes']}</td>"
            f"<td>{a['masked_lanes'] or ''}</td><td>"
            + (f"<code>{esc(_runs_text(a['out_of_bounds']))}</code>" if a["out_of_bounds"] else "")
            + "</td></tr>" for a in selected["accesses"])
        parts.append("<table><tr><th>access</th><th>tensor</th><th>line</th><th>source</th><th>elements</th><th>lanes</th>"
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


# ---- the widget's model ---------------------------------------------------------------------------------------

def flat_pid(pid: Sequence[int], grid: Sequence[int]) -> int:
    """A program id as one number, axis 0 fastest: x + gx * (y + gy * z) (the order the widget draws)."""
    dims = list(grid) + [1] * (3 - len(grid))
    x, y, z = (list(pid) + [0, 0])[:3]
    return int(x + dims[0] * (y + dims[1] * z))


def _flat_runs(runs: Sequence[Sequence[int]]) -> list[int]:
    return [int(v) for run in runs for v in run]


def program_grid_model(data: Mapping[str, Any]) -> dict[str, Any]:
    """The interactive widget's model (schema `tgrid` version 1): the same data, compact enough that a
    1,024-program kernel sends tens of kilobytes. Index runs stay runs, flattened to `[start, stop, ...]`;
    what is common to one access site (op, tensor, line, lanes) is stored once in `sites`.

    programs: `[flat pid, out-of-bounds errors, [[site, touched, elements, masked, masked lanes,
    out of bounds], ...]]` in launch order; trailing empty fields of an access are left off. `flat pid` is
    `flat_pid(pid, grid)`."""
    grid = [int(n) for n in data["grid"]]
    tensors = [{"name": t["name"], "dtype": t["dtype"], "shape": list(t["shape"]), "numel": int(t["numel"]),
                "contiguous": bool(t["contiguous"])} for t in data["tensors"]]
    tensor_index = {t["name"]: i for i, t in enumerate(tensors)}
    sites: list[dict[str, Any]] = []
    site_index: dict[tuple[Any, ...], int] = {}
    programs: list[list[Any]] = []
    for p in data["programs"]:
        accesses: list[list[Any]] = []
        for a in p["accesses"]:
            if a["tensor"] not in tensor_index:  # not an argument the lens described: keep it drawable
                tensor_index[a["tensor"]] = len(tensors)
                tensors.append({"name": a["tensor"], "dtype": "?", "shape": [], "numel": 0, "contiguous": False})
            key = (a["op"], tensor_index[a["tensor"]], a["line"], int(a["lanes"]))
            if key not in site_index:
                site_index[key] = len(sites)
                sites.append({"op": key[0], "tensor": key[1], "line": key[2], "lanes": key[3]})
            row: list[Any] = [site_index[key], int(a["touched"]), _flat_runs(a["elements"]),
                              _flat_runs(a["masked"]), int(a["masked_lanes"]), _flat_runs(a["out_of_bounds"])]
            while len(row) > 3 and not row[-1]:
                row.pop()
            accesses.append(row)
        programs.append([flat_pid(p["pid"], grid), int(p.get("errors") or 0), accesses])
    return {
        "kind": "tgrid",
        "version": 1,
        "kernel": data["kernel"],
        "grid": grid,
        "num_programs": int(data["num_programs"]),
        "interpreter": data.get("interpreter", ""),
        "tensors": tensors,
        "sites": sites,
        "source": [[int(n), str(text)] for n, text in data.get("source_lines", ())],
        "programs": programs,
        "messages": [e["message"] for e in data["errors"][:8]],
        "errors_total": int(data["errors_total"]),
        "warnings": list(data.get("warnings", ())),
        "left_out": data.get("left_out"),
    }
