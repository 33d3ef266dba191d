/**
 * The grad_fn graph as SVG DOM, with exactly the geometry of Python's `grad_graph_svg` (every rect,
 * text and edge path at the same place, in the same order, with the same classes), plus stable
 * hooks for interaction: node groups are `<g class="n <cls> tlw-gnode" data-node="<id>">`.
 * `applyState` marks selection and backward-step state with classes only, so nothing moves.
 */

import { fmtBytes, stepState, type GradGraphModel, type GradNode } from "./model";
import { el, num, svgRoot } from "../common/svg";
import { themeCss } from "../common/theme";

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
  ".tlw-grad text{text-anchor:middle;fill:var(--tlw-fg)}" +
  ".tlw-grad .e{fill:none;stroke:var(--tlw-line);stroke-width:1.2;marker-end:url(#tlw-grad-arrow)}" +
  ".tlw-grad .arrow{fill:var(--tlw-line)}" +
  ".tlw-grad .n rect{stroke:var(--tlw-line);stroke-width:1}" +
  ".tlw-grad .k-op rect{fill:var(--tlw-tint1)}.tlw-grad .k-leaf rect{fill:var(--tlw-tint3)}" +
  ".tlw-grad .k-custom rect{fill:var(--tlw-tint2)}.tlw-grad .k-other rect{fill:var(--tlw-bg2)}" +
  ".tlw-grad .k-group rect{fill:var(--tlw-tint5);stroke:var(--tlw-cat5);stroke-width:2;stroke-dasharray:6 2}" +
  ".tlw-grad .freed rect{fill:var(--tlw-bg);stroke:var(--tlw-line);stroke-dasharray:3 2}" +
  ".tlw-grad .freed text,.tlw-grad .part-freed .s{fill:var(--tlw-fg2)}" +
  ".tlw-grad .hooked rect{stroke:var(--tlw-warn);stroke-width:2.5;stroke-dasharray:5 2}" +
  ".tlw-grad .center rect{stroke:var(--tlw-fg);stroke-width:2.5}" +
  ".tlw-grad .s{font-size:10px;fill:var(--tlw-fg2)}" +
  ".tlw-grad .hid{font-size:10px;fill:var(--tlw-warn);text-anchor:start}" +
  ".tlw-grad .grp{fill:none;stroke:var(--tlw-cat5);stroke-dasharray:8 4}" +
  ".tlw-grad .badge{fill:var(--tlw-fg);font-weight:bold;text-anchor:start}" +
  ".tlw-grad .note{fill:var(--tlw-warn);text-anchor:start}" +
  ".tlw-grad .lg rect{stroke:var(--tlw-line);stroke-width:1}" +
  ".tlw-grad .lg text{text-anchor:start;fill:var(--tlw-fg2)}";

/** Interaction states; `g.` raises specificity over PY_STYLE's kind fills. Selection is a thick solid
 * accent outline, unlike hooks (a dashed warn outline), so the two never look alike. */
const LIVE_STYLE =
  ".tlw-grad .tlw-gnode{cursor:pointer}.tlw-grad text{pointer-events:none;user-select:none}" +
  ".tlw-grad g.tlw-done rect{fill-opacity:.45}" +
  ".tlw-grad g.tlw-released rect{stroke-dasharray:3 2;fill:var(--tlw-bg)}.tlw-grad g.tlw-released .s{fill:var(--tlw-fg2)}" +
  ".tlw-grad g.tlw-grad-leaf rect{fill:var(--tlw-tint3);fill-opacity:1;stroke:var(--tlw-good);stroke-width:3;stroke-dasharray:none}" +
  ".tlw-grad g.tlw-running rect{fill:var(--tlw-tint7);fill-opacity:1;stroke:var(--tlw-cat2);stroke-width:3;stroke-dasharray:none}" +
  ".tlw-grad g.tlw-gselected rect{stroke:var(--tlw-accent);stroke-width:4;stroke-dasharray:none}" +
  ".tlw-grad g.tlw-gnode:hover rect{stroke:var(--tlw-fg);stroke-width:2}";

/** Python's LEGEND (render/grad_graph.py): sample-box classes and what they mean, in drawing order. */
export const LEGEND: ReadonlyArray<readonly [string, string]> = [
  ["k-op", "backward of an op"],
  ["k-leaf", "leaf (AccumulateGrad: a parameter/input)"],
  ["k-custom", "custom autograd.Function"],
  ["k-other", "other node"],
  ["k-group", "repeated block, drawn once"],
  ["freed", "saved tensors freed"],
  ["hooked", "has hooks (dashed outline)"],
  ["center", "focus centre"],
];
const LEGEND_ROW = 18;
/** Python's LEGEND_W: the picture is never narrower than the longest legend entry. */
const LEGEND_W = 18 + Math.max(...LEGEND.map(([, label]) => Array.from(label).length)) * CHAR_W + 14 + 2 * MARGIN;

export interface LegendItem { cls: string; label: string; x: number; y: number }

/** Python's `legend_items`: entries for the classes present, in rows under the notes; and its height. */
export function legendItems(model: GradGraphModel, width: number): { items: LegendItem[]; height: number } {
  const present = new Set(model.nodes.flatMap((nd) => nd.cls.split(" ")));
  const top = model.height + 16 * model.notes.length + 4;
  let x = MARGIN;
  let y = top;
  const items: LegendItem[] = [];
  for (const [cls, label] of LEGEND) {
    if (!present.has(cls)) continue;
    const itemW = 18 + Array.from(label).length * CHAR_W + 14;
    if (x > MARGIN && x + itemW > width - MARGIN) {
      x = MARGIN;
      y = y + LEGEND_ROW;
    }
    items.push({ cls, label, x, y });
    x += itemW;
  }
  return { items, height: items.length ? y + LEGEND_ROW - top + 4 : 0 };
}

/** Python's svg width/height: the model's, widened for long notes, with the legend below. */
export function svgSize(model: GradGraphModel): { w: number; h: number } {
  const longest = model.notes.reduce((m, n) => Math.max(m, Array.from(n).length), 0);
  const w = Math.max(model.width, longest * CHAR_W * 0.92 + 2 * MARGIN, LEGEND_W);
  return { w, h: model.height + 16 * model.notes.length + legendItems(model, w).height };
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
  const root = svgRoot(doc, w, h, `${CLASS.root} tlw-theme`, themeCss() + PY_STYLE + LIVE_STYLE);
  root.setAttribute("style", "background:var(--tlw-bg)");
  const defs = el("defs", {}, root);
  const marker = el("marker", { id: "tlw-grad-arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" }, defs);
  el("path", { class: "arrow", d: "M0,0L8,4L0,8z" }, marker);
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
  for (const it of legendItems(model, w).items) {
    const g = el("g", { class: `lg ${it.cls}` }, root);
    el("rect", { x: num(it.x), y: num(it.y + 2), width: 14, height: 10, rx: 2 }, g);
    el("text", { x: num(it.x + 18), y: num(it.y + 11) }, g, it.label);
  }
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
