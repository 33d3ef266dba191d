/**
 * The memory timeline and state panel as SVG DOM with exactly the geometry of Python's `memory_svg` /
 * `memory_state_svg` (same elements, order, attributes). Bands are `<g class="bd" data-band="<id>">`.
 */

import type { MemoryModel, MemoryState } from "./model";
import { el, num, svgRoot as newSvgRoot } from "../common/svg";

export { el, num, SVG_NS } from "../common/svg";

const AXIS_H = 30;
const NOTE_H = 14;
const ROW_H = 14;

/** Python's STYLE in render/memory.py, verbatim. */
export const PY_STYLE =
  ".tlw-mem text{fill:#222}.tlw-mem .ax{fill:none;stroke:#999;stroke-width:1}" +
  ".tlw-mem .grid{stroke:#eee;stroke-width:1}.tlw-mem .tk{font-size:10px;fill:#555}" +
  ".tlw-mem .tky{text-anchor:end}.tlw-mem .tkx{text-anchor:middle}" +
  ".tlw-mem .band{stroke:#fff;stroke-width:.3;fill-opacity:.85}.tlw-mem .pend{fill-opacity:.3}" +
  ".tlw-mem .oth{fill:#d9d9d9;stroke:none}" +
  ".tlw-mem .c{fill:none;stroke-width:1.4}.tlw-mem .c-res{stroke:#333}" +
  ".tlw-mem .c-act{stroke:#d62728;stroke-dasharray:4 2}.tlw-mem .c-all{stroke:#1f77b4}" +
  ".tlw-mem .note{fill:#a05000;font-size:10px}.tlw-mem .ttl{font-weight:bold}" +
  ".tlw-mem .mark{stroke:#d62728;stroke-width:1.5}" +
  ".tlw-mem .b-active{fill:#4292c6}.tlw-mem .b-pending{fill:#fdae6b}.tlw-mem .b-free{fill:#f0f0f0}" +
  ".tlw-mem .seg{fill:none;stroke:#888;stroke-width:1}.tlw-mem .lbl{font-size:10px;text-anchor:end}" +
  ".tlw-mem .expl{font-size:11px}";

export function svgRoot(doc: Document, w: number, h: number): SVGSVGElement {
  return newSvgRoot(doc, w, h, "tlw-mem", PY_STYLE);
}

/** The timeline's elements, appended to `parent` in Python's order. */
export function drawTimeline(parent: Element, m: MemoryModel): void {
  const { x: x0, y: y0, w: pw, h: ph } = m.plot;
  el("text", { class: "ttl", x: num(x0), y: 14 }, parent,
    `memory: ${m.n_events.toLocaleString("en-US")} events, ${m.n_allocations.toLocaleString("en-US")} allocations`);
  let lx = x0 + 300;
  for (const item of m.legend) {
    el("rect", { class: "lg", x: num(lx), y: 5, width: 10, height: 10, fill: item.fill }, parent);
    el("text", { class: "tk", x: num(lx + 13), y: 14 }, parent, item.label);
    lx += 13 + Array.from(item.label).length * 6.2 + 10;
  }
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
    el("rect", { class: "band", x: num(b.x), y: num(b.y), width: num(b.w), height: num(b.h), fill: b.fill }, g);
    if (b.pw) el("rect", { class: "band pend", x: num(b.x + b.w), y: num(b.y), width: num(b.pw), height: num(b.h), fill: b.fill }, g);
  }
  if (m.others.d) el("path", { class: "oth", d: m.others.d }, parent);
  for (const c of m.curves) if (c.d) el("path", { class: `c ${c.cls}`, d: c.d }, parent);
  el("path", { class: "ax", d: `M${num(x0)} ${num(y0)}V${num(y0 + ph)}H${num(x0 + pw)}` }, parent);
  const ny = y0 + ph + AXIS_H;
  m.notes.forEach((note, k) => el("text", { class: "note", x: 8, y: num(ny + 10 + NOTE_H * k) }, parent, note));
}

/** The state panel's elements (coordinates relative to the panel), appended in Python's order. */
export function drawState(parent: Element, s: MemoryState): void {
  el("text", { class: "ttl", x: 8, y: 16 }, parent, s.title);
  for (const row of s.rows) {
    el("text", { class: "lbl", x: num(row.x - 4), y: num(row.y + 10) }, parent, row.label);
    for (const b of row.blocks) {
      const r = el("rect", { class: `blk b-${b.state}`, x: num(b.x), y: num(row.y), width: num(b.w), height: ROW_H }, parent);
      el("title", {}, r, b.title);
    }
    el("rect", { class: "seg", x: num(row.x), y: num(row.y), width: num(row.w), height: ROW_H }, parent);
  }
  for (const line of s.lines) el("text", { class: "expl", x: 8, y: num(line.y) }, parent, line.text);
}
