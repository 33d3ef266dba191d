"""Stride diagram geometry, computed once from layout data and drawn twice (SVG here, live in JS).

`stride_model` turns layouts into a JSON-ready picture description: one strip of cells per storage
and one grid per tensor, each element carrying the storage cell it reads. `stride_svg` and
`stride_text` render that description statically; the browser widget renders the very same dict,
so the interactive view and the fallback cannot disagree. No torch imports here.

Model schema (version 1), shared with labextension/src/stride/model.ts:
  {kind: "stride", version: 1, width, height, cell, notes: [str],
   storages: [{id, label, dtype, itemsize, size, nbytes, x, y, title_y, truncated, cell_w,
               cells: [{i, x, y, value, gap_before, readers: [tensor index]}]}],
   tensors:  [{index, name, storage, shape, stride, offset, contiguous, is_view, base, version,
               expanded_dims, numel, shown, truncated, title, x, y, color (a CSS colour), cell_w,
               slices: [{label, x, y}],
               elements: [{e, idx, s, x, y, value}]}]}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..lenses.layout import Layout, LayoutError
from .markup import esc as _esc
from .theme import STYLE as THEME_STYLE
from .theme import var

__all__ = ["TensorView", "stride_model", "stride_svg", "stride_text", "PALETTE"]

CELL = 30  # px: cell height, and the least cell width
CHAR_W = 6.1  # px per character of 10 px monospace
MAX_CHARS = 12  # longest value written in a cell; longer ones end in "…" (the tooltip has all of it)
PAD = 12
STRIP_WRAP = 32  # storage cells per strip row
MAX_WIDTH = 980  # wrap tensor grids and slices beyond this width
TITLE_H = 18
PALETTE = [var(f"cat{k}") for k in range(1, 9)]  # tensor colours, from the theme

#: (index in `views` of a tensor reading the strip, storage positions in its dtype) -> values, or None.
ValueReader = Callable[[int, list[int]], "list[Any] | None"]


@dataclass(frozen=True)
class TensorView:
    """One tensor to draw: its name, its layout and the name of its `_base` (if it is a view)."""

    name: str
    layout: Layout
    base: str | None = None


def _fmt_value(v: Any) -> str:
    """A value as a cell shows it: at most 9 characters for any real number (4 significant digits)."""
    if isinstance(v, bool):
        return "T" if v else "F"
    if isinstance(v, int):
        return str(v) if len(str(v)) <= 9 else format(v, ".2e")
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        if v == int(v) and abs(v) < 1e5:
            return str(int(v)) + "."
        text = format(v, ".4g")
        return text if len(text) <= 9 else format(v, ".2e")
    if isinstance(v, complex):
        return format(v, ".2g")
    return str(v)


def shown_value(value: str) -> str:
    """What a cell writes: the value, or its first MAX_CHARS - 1 characters and "…" (tooltips hold all)."""
    return value if len(value) <= MAX_CHARS else value[: MAX_CHARS - 1] + "…"


def _cell_width(texts: list[str]) -> int:
    """Cells wide enough for every value and index label they write (even px), at least CELL."""
    longest = max((len(t) for t in texts), default=0)
    return max(CELL, 2 * math.ceil((CHAR_W * longest + 8) / 2))


def _shown_shape(shape: tuple[int, ...], max_elements: int) -> tuple[int, ...]:
    """Clip each dimension so that at most `max_elements` are drawn, keeping the top-left corner."""
    if not shape:
        return ()
    caps = [4] * len(shape)
    caps[-1] = 24
    if len(shape) >= 2:
        caps[-2] = 16
    shown = [min(n, c) for n, c in zip(shape, caps)]
    while math.prod(shown) > max_elements:
        d = max(range(len(shown)), key=lambda k: shown[k])
        shown[d] = max(1, shown[d] // 2)
    return tuple(shown)


#: A picture never draws more than this, whatever is asked: millions of cells would hang the page.
MAX_ELEMENTS = 4096
MAX_STORAGE_CELLS = 8192


def _limit(name: str, value: object, most: int) -> int:
    """A drawing limit as asked, checked: a whole number from 1 to `most`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise LayoutError(f"{name} must be a whole number from 1 to {most:,}; got {value!r}. "
                          f"Pass e.g. {name}={min(most, 384)}")
    return value


def _iter_index(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for n in shape:
        out = [i + (k,) for i in out for k in range(n)]
    return out


def _flat_index(idx: tuple[int, ...], shape: tuple[int, ...]) -> int:
    e = 0
    for i, n in zip(idx, shape):
        e = e * n + i
    return e


def _tensor_title(v: TensorView, lay: Layout) -> str:
    parts = [
        f"{v.name}: shape {list(lay.shape)} stride {list(lay.stride)} offset {lay.offset}",
        "contiguous" if lay.is_contiguous else "non-contiguous",
    ]
    if lay.expanded_dims:
        parts.append(f"stride-0 dims {list(lay.expanded_dims)}")
    return ", ".join(parts)


def stride_model(
    views: Sequence[TensorView],
    read_values: ValueReader | None = None,
    *,
    max_elements: int = 384,
    max_storage_cells: int = 512,
) -> dict[str, Any]:
    """Lay out storages as strips and tensors as grids; every element records its storage cell."""
    if not views:
        raise ValueError("stride_model needs at least one tensor")
    max_elements = _limit("max_elements", max_elements, MAX_ELEMENTS)
    max_storage_cells = _limit("max_storage_cells", max_storage_cells, MAX_STORAGE_CELLS)
    notes: list[str] = []
    # One strip per storage *and dtype*: cells are elements, so bytes read as float32 and as uint8 (a
    # dtype view, view_as_real) are two strips of the same memory, each with its own true values.
    storage_order: list[tuple[int, str]] = []
    for v in views:
        key = (v.layout.storage_id, v.layout.dtype)
        if key not in storage_order:
            storage_order.append(key)
    sid_label = {key: f"S{k}" for k, key in enumerate(storage_order)}
    for key in storage_order:
        same = [other for other in storage_order if other[0] == key[0] and other != key]
        if same and storage_order.index(same[0]) < storage_order.index(key):
            first = same[0]
            notes.append(
                f"storage {sid_label[key]} is the same memory as {sid_label[first]}, read as "
                f"{key[1].replace('torch.', '')} instead of {first[1].replace('torch.', '')} (a dtype view)"
            )

    # Which elements of each tensor are drawn, and which storage cells they read.
    drawn: list[list[tuple[tuple[int, ...], int]]] = []
    for v in views:
        lay = v.layout
        shown = _shown_shape(lay.shape, max_elements)
        idxs = _iter_index(shown) if lay.numel else []
        drawn.append([(i, lay.storage_index(i)) for i in idxs])
        if lay.numel and math.prod(shown) < lay.numel:
            notes.append(
                f"{v.name}: showing {math.prod(shown):,} of {lay.numel:,} elements "
                f"(the leading {list(shown)} corner)"
            )
        if lay.numel == 0:
            notes.append(f"{v.name}: empty tensor (shape {list(lay.shape)}): no elements to draw")
        if not lay.has_values:
            notes.append(f"{v.name}: layout without values ({lay.no_values or lay.device + ' tensor'})")

    y = PAD
    width = 0
    storages: list[dict[str, Any]] = []
    tensors: list[dict[str, Any]] = [{} for _ in views]
    for sid in storage_order:
        members = [k for k, v in enumerate(views) if (v.layout.storage_id, v.layout.dtype) == sid]
        lay0 = views[members[0]].layout
        size = lay0.storage_size
        referenced = sorted({s for k in members for _, s in drawn[k]})
        if size <= max_storage_cells:
            cell_ids = list(range(size))
        else:
            wanted = sorted(set(referenced) | {views[k].layout.offset for k in members if views[k].layout.offset < size})
            cell_ids = wanted[:max_storage_cells]
            notes.append(
                f"storage {sid_label[sid]}: showing {len(cell_ids):,} of {size:,} cells "
                "(those the drawn elements read; '…' marks skipped cells)"
            )
        truncated_storage = len(cell_ids) < size
        values: list[Any] | None = read_values(members[0], cell_ids) if read_values and lay0.has_values else None
        readers: dict[int, list[int]] = {}
        for k in members:
            for _, s in drawn[k]:
                r = readers.setdefault(s, [])
                if not r or r[-1] != k:
                    r.append(k)
        title_y = y + 12
        y += TITLE_H
        texts = [_fmt_value(v) for v in values] if values is not None else []
        cw = _cell_width([shown_value(t) for t in texts] + [f"→{i}" for i in cell_ids])
        cells = []
        for n, i in enumerate(cell_ids):
            row, col = divmod(n, STRIP_WRAP)
            cx, cy = PAD + col * cw, y + row * (CELL + 6)
            cells.append({
                "i": i,
                "x": cx,
                "y": cy,
                "value": texts[n] if values is not None else None,
                "gap_before": n > 0 and cell_ids[n - 1] != i - 1,
                "readers": readers.get(i, []),
            })
        rows = max(1, math.ceil(len(cell_ids) / STRIP_WRAP)) if cell_ids else 1
        width = max(width, PAD * 2 + min(len(cell_ids), STRIP_WRAP) * cw)
        shared = len(members) > 1
        storages.append({
            "id": sid_label[sid],
            "label": (
                f"storage {sid_label[sid]}: {size:,} × {lay0.dtype.replace('torch.', '')} "
                f"({lay0.storage_nbytes:,} bytes)" + (f", shared by {len(members)} tensors" if shared else "")
            ),
            "dtype": lay0.dtype,
            "itemsize": lay0.itemsize,
            "size": size,
            "nbytes": lay0.storage_nbytes,
            "x": PAD,
            "y": y,
            "title_y": title_y,
            "truncated": truncated_storage,
            "cell_w": cw,
            "cells": cells,
        })
        y += rows * (CELL + 6) + 14

        # Tensor grids over this storage, left to right, wrapping at MAX_WIDTH.
        x = PAD
        row_h = 0
        for k in members:
            v = views[k]
            lay = v.layout
            shown = _shown_shape(lay.shape, max_elements)
            title = _tensor_title(v, lay)
            extra = []
            if v.base is not None:
                extra.append(f"view of {v.base}")
            if lay.version is not None:
                extra.append(f"_version {lay.version}")
            if extra:
                title += " · " + ", ".join(extra)
            lead: tuple[int, ...] = shown[:-2]
            n_rows, n_cols = (shown[-2], shown[-1]) if len(shown) >= 2 else (1, shown[0] if shown else 1)
            if lay.numel == 0:
                n_rows, n_cols = 0, 0
            slice_w = n_cols * cw + (12 if lead else 0)
            slice_h = n_rows * CELL + (16 if lead else 0)
            lead_idx = _iter_index(lead)
            per_row = max(1, (MAX_WIDTH - 2 * PAD) // max(slice_w, 1))
            n_slice_rows = math.ceil(len(lead_idx) / per_row)
            grid_w = min(len(lead_idx), per_row) * slice_w
            grid_h = n_slice_rows * slice_h
            block_w = max(grid_w, int(len(title) * 6.7) + 16)  # swatch, then 11 px monospace ≈ 6.6 px a character
            if x > PAD and x + block_w > MAX_WIDTH:
                x = PAD
                y += row_h + 16
                row_h = 0
            gx, gy = x, y + TITLE_H
            slices = []
            origin: dict[tuple[int, ...], tuple[int, int]] = {}
            for n, li in enumerate(lead_idx):
                sr, sc = divmod(n, per_row)
                ox = gx + sc * slice_w
                oy = gy + sr * slice_h + (16 if lead else 0)
                origin[li] = (ox, oy)
                if lead:
                    label = "[" + ", ".join(str(i) for i in li) + ", :, :]"
                    slices.append({"label": label, "x": ox, "y": oy - 4})
            elements: list[dict[str, Any]] = []
            for idx, s in drawn[k]:
                if len(idx) >= 2:
                    li, i, j = idx[:-2], idx[-2], idx[-1]
                elif len(idx) == 1:
                    li, i, j = (), 0, idx[0]
                else:
                    li, i, j = (), 0, 0
                ox, oy = origin[li]
                elements.append({
                    "e": _flat_index(idx, lay.shape),
                    "idx": list(idx),
                    "s": s,
                    "x": ox + j * cw,
                    "y": oy + i * CELL,
                })
            if values is not None:
                pos = {i: n for n, i in enumerate(cell_ids)}
                for el in elements:
                    at = pos.get(el["s"])
                    el["value"] = cells[at]["value"] if at is not None else None
            else:
                for el in elements:
                    el["value"] = None
            tensors[k] = {
                "index": k,
                "name": v.name,
                "storage": sid_label[sid],
                "shape": list(lay.shape),
                "stride": list(lay.stride),
                "offset": lay.offset,
                "contiguous": lay.is_contiguous,
                "is_view": lay.is_view,
                "base": v.base,
                "version": lay.version,
                "expanded_dims": list(lay.expanded_dims),
                "numel": lay.numel,
                "shown": len(elements),
                "truncated": len(elements) < lay.numel,
                "title": title,
                "x": gx,
                "y": gy,
                "color": PALETTE[k % len(PALETTE)],
                "cell_w": cw,
                "slices": slices,
                "elements": elements,
            }
            x += block_w + 24
            width = max(width, x)
            row_h = max(row_h, TITLE_H + grid_h)
        y += row_h + 22
    return {
        "kind": "stride",
        "version": 1,
        "cell": CELL,
        "width": max(width, 200),
        "height": y,
        "notes": notes,
        "storages": storages,
        "tensors": tensors,
    }




#: The picture's own rules; colours are theme variables (render/theme.py), shared with the live view.
STYLE = (
    ".tlw-stride text{fill:var(--tlw-fg)}.tlw-stride .st{font-size:12px;font-weight:bold}"
    ".tlw-stride .ttl{font-size:11px}.tlw-stride .idx,.tlw-stride .sl{font-size:10px;fill:var(--tlw-fg2)}"
    ".tlw-stride .cb{fill:var(--tlw-bg2);stroke:var(--tlw-line)}.tlw-stride .cb.rd{fill:var(--tlw-tint1)}"
    ".tlw-stride .eb{fill:var(--tlw-bg);stroke-width:1.5}"
    ".tlw-stride .gap{fill:var(--tlw-bad)}.tlw-stride .note{fill:var(--tlw-warn)}"
)


def stride_svg(model: dict[str, Any]) -> str:
    """Static SVG of a stride model: the same geometry the live widget draws, without interaction."""
    cell = model["cell"]
    notes_h = 16 * len(model["notes"])
    w, h = model["width"], model["height"] + notes_h
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        'font-family="monospace" font-size="10" class="tlw-stride tlw-theme" style="background:var(--tlw-bg)">'
        f"<style>{THEME_STYLE}{STYLE}</style>"
    ]
    colors = {t["index"]: t["color"] for t in model["tensors"]}
    for st in model["storages"]:
        cw = st["cell_w"]
        out.append(f'<text class="st" x="{st["x"]}" y="{st["title_y"]}">{_esc(st["label"])}</text>')
        for c in st["cells"]:
            out.append(
                f'<rect class="cb{" rd" if c["readers"] else ""}" x="{c["x"]}" y="{c["y"]}" '
                f'width="{cw - 2}" height="{cell - 2}"/>'
            )
            out.append(f'<text class="idx" x="{c["x"] + 2}" y="{c["y"] + 10}">{c["i"]}</text>')
            if c["value"] is not None:
                out.append(f'<text x="{c["x"] + 3}" y="{c["y"] + 22}">{_esc(shown_value(c["value"]))}</text>')
            for n, r in enumerate(c["readers"][:4]):
                out.append(
                    f'<rect x="{c["x"] + 1 + n * 6}" y="{c["y"] + cell - 6}" width="5" height="3" '
                    f'style="fill:{colors.get(r, var("line"))}"/>'
                )
            if c["gap_before"]:
                out.append(f'<text class="gap" x="{c["x"] - 4}" y="{c["y"] + 18}">…</text>')
    for t in model["tensors"]:
        cw = t["cell_w"]
        out.append(f'<rect x="{t["x"]}" y="{t["y"] - 13}" width="9" height="9" style="fill:{t["color"]}"/>')
        out.append(f'<text class="ttl" x="{t["x"] + 13}" y="{t["y"] - 5}">{_esc(t["title"])}</text>')
        for sl in t["slices"]:
            out.append(f'<text class="sl" x="{sl["x"]}" y="{sl["y"]}">{_esc(sl["label"])}</text>')
        for el in t["elements"]:
            out.append(
                f'<rect class="eb" x="{el["x"]}" y="{el["y"]}" width="{cw - 2}" height="{cell - 2}" '
                f'style="stroke:{t["color"]}"/>'
            )
            out.append(f'<text class="idx" x="{el["x"] + 2}" y="{el["y"] + 10}">→{el["s"]}</text>')
            if el["value"] is not None:
                out.append(f'<text x="{el["x"] + 3}" y="{el["y"] + 22}">{_esc(shown_value(el["value"]))}</text>')
    for n, note in enumerate(model["notes"]):
        out.append(f'<text class="note" x="{PAD}" y="{model["height"] + 12 + 16 * n}">{_esc(note)}</text>')
    out.append("</svg>")
    return "".join(out)


def stride_text(model: dict[str, Any]) -> str:
    """Deterministic plain-text summary (no addresses, no timings) for text-only front ends."""
    n_t, n_s = len(model["tensors"]), len(model["storages"])
    lines = [f"StrideDiagram: {n_t} tensor{'s' if n_t != 1 else ''} over {n_s} storage{'s' if n_s != 1 else ''}"]
    for st in model["storages"]:
        lines.append("  " + st["label"])
        for t in model["tensors"]:
            if t["storage"] == st["id"]:
                lines.append("    " + t["title"])
    lines.extend("  note: " + n for n in model["notes"])
    return "\n".join(lines)
