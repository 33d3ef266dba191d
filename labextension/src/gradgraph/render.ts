/**
 * The grad_fn graph as SVG DOM, with exactly the geometry of Python's `grad_graph_svg` (every rect,
 * text and edge path at the same place, in the same order, with the same classes), plus stable
 * hooks for interaction: node groups are `<g class="n <cls> tlw-gnode" data-node="<id>">`.
 * `applyState` marks selection and backward-step state with classes only, so nothing moves.
 */

import { fmtBytes, stepState, type GradGraphModel, type GradNode } from "./model";
import { el, num, svgRoot } from "../common/svg";

export { el, num, SVG_NS } from "../common/svg";

const MARGIN = 16;
const CHAR_W = 6.7;

export const CLASS = {
  root: "tlw-grad",
  node: "tlw-gnode",
  selected: "tlw-gselected",
  running: "tlw-running",
  gradLeaf: "tlw-grad-leaf",
  done: "tlw-done",
  released: "tlw-released",
} as const;

/** Python's `_STYLE` in render/grad_graph.py, verbatim. */
export const PY_STYLE =
  ".tlw-grad text{text-anchor:middle;fill:#222}" +
  ".tlw-grad .e{fill:none;stroke:#999;stroke-width:1.2;marker-end:url(#tlw-grad-arrow)}" +
  ".tlw-grad .n rect{stroke:#666;stroke-width:1}" +
  ".tlw-grad .k-op rect{fill:#dce8f5}.tlw-grad .k-leaf rect{fill:#dff0d8}" +
  ".tlw-grad .k-custom rect{fill:#fbe3c4}.tlw-grad .k-other rect{fill:#eee}" +
  ".tlw-grad .k-group rect{fill:#ebe1f5;stroke:#7b4fa8;stroke-width:2;stroke-dasharray:6 2}" +
  ".tlw-grad .freed rect{fill:#f3f3f3;stroke:#bbb;stroke-dasharray:3 2}.tlw-grad .freed text{fill:#999}" +
  ".tlw-grad .part-freed .s{fill:#999}" +
  ".tlw-grad .hooked rect{stroke:#c0392b;stroke-width:2}" +
  ".tlw-grad .center rect{stroke:#000;stroke-width:2.5}" +
  ".tlw-grad .s{font-size:9px;fill:#555}" +
  ".tlw-grad .hid{font-size:9px;fill:#a05000;text-anchor:start}" +
  ".tlw-grad .grp{fill:none;stroke:#7b4fa8;stroke-dasharray:8 4}" +
  ".tlw-grad .badge{fill:#7b4fa8;font-weight:bold;text-anchor:start}" +
  ".tlw-grad .note{fill:#a05000;text-anchor:start}";

/** Interaction states; `g.` raises specificity over PY_STYLE's kind fills. */
const LIVE_STYLE =
  ".tlw-grad .tlw-gnode{cursor:pointer}.tlw-grad text{pointer-events:none;user-select:none}" +
  ".tlw-grad g.tlw-done rect{fill-opacity:.45}" +
  ".tlw-grad g.tlw-released rect{stroke-dasharray:3 2;fill:#f3f3f3}.tlw-grad g.tlw-released .s{fill:#999}" +
  ".tlw-grad g.tlw-grad-leaf rect{fill:#8fd694;fill-opacity:1;stroke:#1b7a2a;stroke-width:3;stroke-dasharray:none}" +
  ".tlw-grad g.tlw-running rect{fill:#ffd54f;fill-opacity:1;stroke:#e65100;stroke-width:3;stroke-dasharray:none}" +
  ".tlw-grad g.tlw-gselected rect{stroke:#d62728;stroke-width:3.5}" +
  ".tlw-grad g.tlw-gnode:hover rect{stroke:#222;stroke-width:2}";

/** Python's svg width/height: the model's, widened for long notes. */
export function svgSize(model: GradGraphModel): { w: number; h: number } {
  const longest = model.notes.reduce((m, n) => Math.max(m, Array.from(n).length), 0);
  const w = Math.max(model.width, longest * CHAR_W * 0.92 + 2 * MARGIN);
  return { w, h: model.height + 16 * model.notes.length };
}

function nodeTitle(nd: GradNode): string {
  const parts = [`#${nd.id} ${nd.name}`];
  if (nd.param) parts.push(nd.param);
  if (nd.saved.length) {
    const nFreed = nd.saved.filter((s) => s.freed).length;
    parts.push(`${nd.saved.length} saved (${fmtBytes(nd.saved_nbytes)}), ${nFreed} freed`);
  }
  return parts.join(" · ");
}

/** Draw the model into a new <svg class="tlw-grad"> (viewBox = the whole picture, as in Python). */
export function drawGraph(doc: Document, model: GradGraphModel): SVGSVGElement {
  const { w, h } = svgSize(model);
  const root = svgRoot(doc, w, h, CLASS.root, PY_STYLE + LIVE_STYLE);
  const defs = el("defs", {}, root);
  const marker = el("marker", { id: "tlw-grad-arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" }, defs);
  el("path", { d: "M0,0L8,4L0,8z", fill: "#999" }, marker);
  for (const g of model.groups) {
    const b = g.box;
    if (!b) continue;
    el("rect", { class: "grp", x: num(b.x), y: num(b.y), width: num(b.w), height: num(b.h), rx: 8 }, root);
    el("text", { class: "badge", x: num(b.x + 4), y: num(b.y - 3) }, root, g.label);
  }
  for (const e of model.edges) {
    if (e.points.length < 2) continue;
    const d = "M" + e.points.map(([px, py]) => `${num(px)} ${num(py)}`).join("L");
    el("path", { class: "e", d, "data-src": e.src, "data-dst": e.dst }, root);
  }
  for (const nd of model.nodes) {
    const g = el("g", { class: `n ${nd.cls} ${CLASS.node}`, "data-node": nd.id }, root);
    el("title", {}, g, nodeTitle(nd));
    el("rect", { x: num(nd.x), y: num(nd.y), width: num(nd.w), height: num(nd.h), rx: 4 }, g);
    const cx = nd.x + nd.w / 2;
    el("text", { x: num(cx), y: num(nd.y + (nd.sub ? 14 : 21)) }, g, nd.label);
    if (nd.sub) el("text", { class: "s", x: num(cx), y: num(nd.y + 27) }, g, nd.sub);
    if (nd.hidden) el("text", { class: "hid", x: num(nd.x + nd.w + 3), y: num(nd.y + 10) }, g, `+${nd.hidden}`);
  }
  model.notes.forEach((note, k) => {
    el("text", { class: "note", x: MARGIN, y: num(model.height + 12 + 16 * k) }, root, note);
  });
  return root;
}

/** Mark the selected node and what backward step `step` shows (running node, leaves getting .grad, done, released). */
export function applyState(root: ParentNode, model: GradGraphModel, selected: number | null, step: number): void {
  const st = stepState(model, step);
  const leaves = new Set(st.leaves);
  root.querySelectorAll(`.${CLASS.node}`).forEach((g) => {
    const id = Number(g.getAttribute("data-node"));
    g.classList.toggle(CLASS.selected, id === selected);
    g.classList.toggle(CLASS.running, id === st.running);
    g.classList.toggle(CLASS.gradLeaf, leaves.has(id));
    g.classList.toggle(CLASS.done, st.done.has(id) && id !== st.running && !leaves.has(id));
    g.classList.toggle(CLASS.released, st.freed.has(id));
  });
}
