/**
 * The memory timeline and state panel as SVG DOM with exactly the geometry of Python's `memory_svg` /
 * `memory_state_svg` (same elements, order, attributes). Bands are `<g class="bd" data-band="<id>">`.
 * Colours are theme variables (common/theme.ts), set through classes, never presentation attributes.
 */

import type { LegendItem, MemoryModel, MemoryState } from "./model";
import { el, num, svgRoot as newSvgRoot } from "../common/svg";
import { themeCss } from "../common/theme";

export { el, num, SVG_NS } from "../common/svg";

const ROW_H = 14;

/** Python's MEM_STYLE in render/memory.py, verbatim (colours are var(--tlw-…) from the theme). */
export const MEM_STYLE =
  ".tlw-mem{background:var(--tlw-bg)}.tlw-mem text{fill:var(--tlw-fg)}" +
  ".tlw-mem .ax{fill:none;stroke:var(--tlw-line);stroke-width:1}" +
  ".tlw-mem .grid{stroke:var(--tlw-grid);stroke-width:1}.tlw-mem .tk{font-size:10px;fill:var(--tlw-fg2)}" +
  ".tlw-mem .tky{text-anchor:end}.tlw-mem .tkx{text-anchor:middle}.tlw-mem .lgh{font-weight:bold}" +
  ".tlw-mem .band{stroke:var(--tlw-bg);stroke-width:.3;fill-opacity:.85}.tlw-mem .pend{fill-opacity:.3}" +
  ".tlw-mem .oth{fill:var(--tlw-neutral);stroke:none}.tlw-mem .f-size1{fill:var(--tlw-size1)}" +
  ".tlw-mem .f-size2{fill:var(--tlw-size2)}.tlw-mem .f-size3{fill:var(--tlw-size3)}" +
  ".tlw-mem .f-size4{fill:var(--tlw-size4)}.tlw-mem .f-size5{fill:var(--tlw-size5)}" +
  ".tlw-mem .f-size6{fill:var(--tlw-size6)}.tlw-mem .f-cat1{fill:var(--tlw-cat1)}" +
  ".tlw-mem .f-cat2{fill:var(--tlw-cat2)}.tlw-mem .f-cat3{fill:var(--tlw-cat3)}" +
  ".tlw-mem .f-cat4{fill:var(--tlw-cat4)}.tlw-mem .f-cat5{fill:var(--tlw-cat5)}" +
  ".tlw-mem .f-cat6{fill:var(--tlw-cat6)}.tlw-mem .f-cat7{fill:var(--tlw-cat7)}" +
  ".tlw-mem .f-cat8{fill:var(--tlw-cat8)}.tlw-mem .c{fill:none;stroke-width:1.4}" +
  ".tlw-mem .c-res{stroke:var(--tlw-fg)}.tlw-mem .c-act{stroke:var(--tlw-bad);stroke-dasharray:4 2}" +
  ".tlw-mem .c-all{stroke:var(--tlw-good);stroke-width:1.6}" +
  ".tlw-mem .note{fill:var(--tlw-fg2);font-size:10px}.tlw-mem .ttl{font-weight:bold}" +
  ".tlw-mem .mark,.tlw-mem .mark-key{stroke:var(--tlw-warn);stroke-width:2}" +
  ".tlw-mem .b-active{fill:var(--tlw-size4)}.tlw-mem .b-pending{fill:var(--tlw-cat2)}" +
  ".tlw-mem .b-free{fill:var(--tlw-bg2)}.tlw-mem .seg{fill:none;stroke:var(--tlw-line);stroke-width:1}" +
  ".tlw-mem .lbl{font-size:10px;text-anchor:end}.tlw-mem .expl{font-size:11px}" +
  ".tlw-mem .lg.b-free{stroke:var(--tlw-line);stroke-width:1}";

/** Python's STYLE: the theme's custom properties, then the picture's rules. */
export const PY_STYLE = themeCss() + MEM_STYLE;

export function svgRoot(doc: Document, w: number, h: number): SVGSVGElement {
  return newSvgRoot(doc, w, h, "tlw-mem tlw-theme", PY_STYLE);
}

function drawLegend(parent: Element, items: LegendItem[]): void {
  for (const item of items) {
    const { x, y } = item;
    if (item.kind === "head") {
      el("text", { class: "tk lgh", x: num(x), y: num(y) }, parent, item.label);
      continue;
    }
    if (item.kind === "line") el("path", { class: item.cls, d: `M${num(x)} ${num(y - 3.5)}h14` }, parent);
    else el("rect", { class: `lg ${item.cls}`, x: num(x + 2), y: num(y - 9), width: 10, height: 10 }, parent);
    el("text", { class: "tk", x: num(x + 18), y: num(y) }, parent, item.label);
  }
}

/** The timeline's elements, appended to `parent` in Python's order. */
export function drawTimeline(parent: Element, m: MemoryModel): void {
  const { x: x0, y: y0, w: pw, h: ph } = m.plot;
  el("text", { class: "ttl", x: 8, y: 14 }, parent, m.title);
  for (const t of m.y_ticks) {
    el("path", { class: "grid", d: `M${num(x0)} ${num(t.y)}H${num(x0 + pw)}` }, parent);
    el("text", { class: "tk tky", x: num(x0 - 4), y: num(t.y + 3) }, parent, t.label);
  }
  for (const t of m.x_ticks) el("text", { class: "tk tkx", x: num(t.x), y: num(y0 + ph + 12) }, parent, t.label);
  el("text", { class: "tk tkx", x: num(x0 + pw / 2), y: num(y0 + ph + 25) }, parent,
    m.x_axis === "event" ? "event index" : "time since the first event");
  for (const b of m.bands) {
    const g = el("g", { class: "bd", "data-band": b.id }, parent);
    el("title", {}, g, `${b.label}\n${b.stack}`);
    el("rect", { class: `band ${b.cls}`, x: num(b.x), y: num(b.y), width: num(b.w), height: num(b.h) }, g);
    if (b.pw) el("rect", { class: `band pend ${b.cls}`, x: num(b.x + b.w), y: num(b.y), width: num(b.pw), height: num(b.h) }, g);
  }
  if (m.others.d) el("path", { class: "oth", d: m.others.d }, parent);
  for (const c of m.curves) if (c.d) el("path", { class: `c ${c.cls}`, d: c.d }, parent);
  el("path", { class: "ax", d: `M${num(x0)} ${num(y0)}V${num(y0 + ph)}H${num(x0 + pw)}` }, parent);
  drawLegend(parent, m.legend);
  for (const line of m.note_lines) el("text", { class: "note", x: 8, y: num(line.y) }, parent, line.text);
}

/** The state panel's elements (coordinates relative to the panel), appended in Python's order. */
export function drawState(parent: Element, s: MemoryState): void {
  el("path", { class: "mark-key", d: "M12 5V19" }, parent);
  for (const t of s.title_lines) el("text", { class: "ttl", x: 20, y: num(t.y) }, parent, t.text);
  for (const row of s.rows) {
    el("text", { class: "lbl", x: num(row.x - 4), y: num(row.y + 10) }, parent, row.label);
    for (const b of row.blocks) {
      const r = el("rect", { class: `blk b-${b.state}`, x: num(b.x), y: num(row.y), width: num(b.w), height: ROW_H }, parent);
      el("title", {}, r, b.title);
    }
    el("rect", { class: "seg", x: num(row.x), y: num(row.y), width: num(row.w), height: ROW_H }, parent);
  }
  drawLegend(parent, s.keys);
  for (const line of s.lines) el("text", { class: "expl", x: 8, y: num(line.y) }, parent, line.text);
}
