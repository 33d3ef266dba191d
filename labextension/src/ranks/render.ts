/**
 * The live rank lanes: Python's `render.distributed.ranks_model` drawn as SVG, element for element like
 * `ranks_svg` (one lane per rank: backward nodes, then buckets / collectives, then bytes held), plus an info
 * line under the picture. Hovering a bucket or collective writes its parameters and bytes there; clicking a
 * bucket selects it on every rank (`onSelect(index)`, or -1 when the selected one is clicked again).
 *
 * Hooks for tests: comm groups are <g class="tlw-comm-g" data-rank="0" data-bucket="1">, the info line is
 * <div class="tlw-ranks-info">.
 */

import { el, svgRoot } from "../common/svg";
import { themeCss } from "../common/theme";

export interface Lane { rank: number; row: string; label: string; y: number; h: number }
export interface NodeSpan { rank: number; x: number; w: number; y: number; h: number; name: string; short: string }
export interface Comm {
  rank: number; x: number; w: number; y: number; h: number; kind: string; bucket: number | null; cat: number;
  label: string; short: string; tip: string; nbytes: number; params: string[]; ready_x: number | null;
}
export interface Mem { rank: number; y: number; h: number; points: string; peak: number; peak_label: string }
export interface RanksModel {
  kind: "ranks"; version: 1; mode: string; width: number; height: number; left: number; iteration: number;
  ticks: { x: number; label: string }[]; lanes: Lane[]; nodes: NodeSpan[]; comms: Comm[]; memory: Mem[];
  buckets: { index: number; cat: number; params: string[]; nbytes: number }[];
}

export function isRanksModel(m: unknown): m is RanksModel {
  const r = m as RanksModel | null;
  return !!r && r.kind === "ranks" && r.version === 1 && Array.isArray(r.lanes) && Array.isArray(r.comms);
}

const RIGHT = 16;
const AXIS_Y = 22;
const CHAR_W = 6.6;
const ROW_H = 22;

/** The same rules as Python's render.distributed.STYLE. */
export const STYLE =
  ".tlw-ranks text{fill:var(--tlw-fg)}.tlw-ranks .tlw-tick-label,.tlw-ranks .tlw-axis-label{fill:var(--tlw-fg2)}" +
  ".tlw-ranks .tlw-bg{fill:var(--tlw-bg)}.tlw-ranks .tlw-lane{fill:var(--tlw-bg2)}" +
  ".tlw-ranks .tlw-axis,.tlw-ranks .tlw-tick{stroke:var(--tlw-line)}" +
  ".tlw-ranks .tlw-node{fill:var(--tlw-neutral);stroke:var(--tlw-line);stroke-width:.5}" +
  ".tlw-ranks .tlw-node.tlw-acc{fill:var(--tlw-tint3);stroke:var(--tlw-cat3)}" +
  ".tlw-ranks .tlw-comm{stroke-width:1.2;cursor:pointer}" +
  ".tlw-ranks .tlw-ready{stroke:var(--tlw-fg);stroke-width:1.5}" +
  ".tlw-ranks .tlw-mem{fill:none;stroke:var(--tlw-accent);stroke-width:1.5}" +
  ".tlw-ranks .tlw-comm.tlw-sel{stroke:var(--tlw-fg);stroke-width:2.5}" +
  [1, 2, 3, 4, 5, 6, 7, 8].map((i) => `.tlw-ranks .tlw-c${i}{fill:var(--tlw-tint${i});stroke:var(--tlw-cat${i})}`).join("") +
  ".tlw-ranks-box{font:12px/1.4 var(--jp-code-font-family,monospace);color:var(--tlw-fg);overflow-x:auto}" +
  ".tlw-ranks-info{min-height:1.4em;padding:2px 6px;background:var(--tlw-bg2);overflow-wrap:anywhere}";

function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  let v = n;
  for (const unit of ["KiB", "MiB", "GiB"]) {
    v = v / 1024;
    if (v < 1024 || unit === "GiB") return `${v.toFixed(1).replace(/\.0$/, "")} ${unit}`;
  }
  return `${n} B`;
}

/** What the info line says about one comm span. */
export function describe(c: Comm): string {
  const what = c.kind === "bucket" ? `bucket ${c.bucket}` : c.label;
  const params = c.params.length ? `: ${c.params.join(", ")}` : "";
  return `rank ${c.rank} ${what} (${fmtBytes(c.nbytes)})${params}`;
}

function short(text: string, width: number): string {
  const n = Math.floor((width - 4) / CHAR_W);
  if (n < 3) return "";
  return text.length <= n ? text : `${text.slice(0, n - 1)}…`;
}

/**
 * The model squeezed horizontally to `width` px (never widened): times keep their proportions, text keeps its
 * size, span labels are shortened again for their new widths and ticks thinned so their labels do not meet. So
 * the picture fits a narrow output area (JupyterLab with a side panel open) without a scroll bar hiding text.
 */
export function fitWidth(m: RanksModel, width: number): RanksModel {
  if (!(width > m.left + RIGHT + 100) || width >= m.width) return m;
  const k = (width - m.left - RIGHT) / (m.width - m.left - RIGHT);
  const X = (x: number): number => Math.round((m.left + (x - m.left) * k) * 100) / 100;
  const W = (w: number): number => Math.max(Math.round(w * k * 100) / 100, 1);
  const ticks: RanksModel["ticks"] = [];
  for (const t of m.ticks) {
    const prev = ticks[ticks.length - 1];
    const room = prev ? ((prev.label.length + t.label.length) * CHAR_W) / 2 + 8 : 0;
    if (!prev || X(t.x) - prev.x >= room) ticks.push({ ...t, x: X(t.x) });
  }
  return {
    ...m,
    width,
    ticks,
    nodes: m.nodes.map((n) => ({ ...n, x: X(n.x), w: W(n.w), short: short(n.name, W(n.w)) })),
    comms: m.comms.map((c) => ({
      ...c, x: X(c.x), w: W(c.w), ready_x: c.ready_x === null ? null : X(c.ready_x),
      short: short(`${c.kind === "bucket" ? `b${c.bucket}` : c.label} ${fmtBytes(c.nbytes)}`, W(c.w)),
    })),
    memory: m.memory.map((mem) => ({
      ...mem,
      points: mem.points.split(" ").map((pt) => {
        const [x, y] = pt.split(",");
        return `${X(Number(x))},${y}`;
      }).join(" "),
    })),
  };
}

export interface RanksView {
  setBucket(b: number | null | undefined): void;
  destroy(): void;
}

export interface RenderOptions {
  bucket?: number | null;
  onSelect?: (bucket: number) => void;
}

export function renderRanks(host: HTMLElement, full: RanksModel, options: RenderOptions = {}): RanksView {
  const doc = host.ownerDocument;
  const m = fitWidth(full, host.clientWidth);
  const box = doc.createElement("div");
  box.className = "tlw-ranks-box tlw-theme";
  const style = doc.createElement("style");
  style.textContent = themeCss() + STYLE;
  box.appendChild(style);
  const W = m.width;
  const H = m.height;
  const svg = svgRoot(doc, W, H, "tlw-ranks tlw-theme", "");
  svg.setAttribute("width", String(W));
  svg.setAttribute("height", String(H));
  svg.setAttribute("style", "background:var(--tlw-bg)");
  box.appendChild(svg);
  const info = doc.createElement("div");
  info.className = "tlw-ranks-info";
  box.appendChild(info);
  host.appendChild(box);

  el("rect", { class: "tlw-bg", x: 0, y: 0, width: W, height: H }, svg);
  el("line", { class: "tlw-axis", x1: m.left, y1: AXIS_Y, x2: W - RIGHT, y2: AXIS_Y }, svg);
  el("text", { class: "tlw-axis-label", x: 8, y: AXIS_Y - 8 }, svg,
    `it ${m.iteration} ${m.mode === "ddp" ? "backward" : "iteration"} (µs)`);
  m.ticks.forEach((t, i) => {
    el("line", { class: "tlw-tick", x1: t.x, y1: AXIS_Y - 3, x2: t.x, y2: AXIS_Y + 3 }, svg);
    const end = i === m.ticks.length - 1 && t.x + (t.label.length * CHAR_W) / 2 > W - 2;
    el("text", { class: "tlw-tick-label", x: t.x, y: AXIS_Y - 8, "text-anchor": end ? "end" : "middle" }, svg, t.label);
  });
  for (const lane of m.lanes) {
    el("rect", { class: "tlw-lane", "data-rank": lane.rank, "data-row": lane.row, x: m.left, y: lane.y,
      width: W - RIGHT - m.left, height: lane.h }, svg);
    el("text", { class: "tlw-lane-label", x: 8, y: lane.y + Math.min(lane.h, ROW_H) / 2 + 4 }, svg,
      short(lane.label, m.left - 8));
  }
  for (const n of m.nodes) {
    const acc = n.name.startsWith("AccumulateGrad") ? " tlw-acc" : "";
    const r = el("rect", { class: `tlw-node${acc}`, "data-rank": n.rank, x: n.x, y: n.y, width: n.w, height: n.h }, svg);
    el("title", {}, r, n.name);
    if (n.short) el("text", { class: "tlw-node-label", x: n.x + 2, y: n.y + n.h / 2 + 4 }, svg, n.short);
  }
  const rects: [Comm, SVGRectElement][] = [];
  m.comms.forEach((c, i) => {
    const attrs: Record<string, string | number> = { class: "tlw-comm-g", "data-i": i, "data-rank": c.rank };
    if (c.bucket !== null) attrs["data-bucket"] = c.bucket;
    const g = el("g", attrs, svg);
    el("title", {}, g, c.tip);
    rects.push([c, el("rect", { class: `tlw-comm tlw-c${c.cat}`, x: c.x, y: c.y, width: c.w, height: c.h }, g)]);
    if (c.ready_x !== null) el("line", { class: "tlw-ready", x1: c.ready_x, y1: c.y - 1, x2: c.ready_x, y2: c.y + c.h + 1 }, g);
    if (c.short) el("text", { class: "tlw-comm-label", x: c.x + 2, y: c.y + c.h / 2 + 4 }, g, c.short);
    g.addEventListener("mouseenter", () => (info.textContent = describe(c)));
    g.addEventListener("mouseleave", () => showSelected());
    g.addEventListener("click", () => {
      if (c.bucket === null) return;
      const next = selected === c.bucket ? -1 : c.bucket;
      setBucket(next);
      options.onSelect?.(next);
    });
  });
  for (const mem of m.memory) {
    const p = el("polyline", { class: "tlw-mem", "data-rank": mem.rank, points: mem.points }, svg);
    el("title", {}, p, `parameter + gradient bytes held, ${mem.peak_label}`);
    el("text", { class: "tlw-mem-label", x: m.left + 4, y: mem.y + 11 }, svg, mem.peak_label);
  }

  let selected = -1;
  function showSelected(): void {
    const b = m.buckets.find((x) => x.index === selected);
    info.textContent = b
      ? `selected bucket ${b.index} (${fmtBytes(b.nbytes)}): ${b.params.join(", ")}`
      : m.buckets.length ? "hover a bucket for its parameters; click to select it on every rank" : "";
  }
  function setBucket(b: number | null | undefined): void {
    selected = typeof b === "number" && Number.isInteger(b) ? b : -1;
    for (const [c, r] of rects) r.classList.toggle("tlw-sel", c.bucket !== null && c.bucket === selected);
    showSelected();
  }
  setBucket(options.bucket);
  return {
    setBucket,
    destroy: () => box.remove(),
  };
}
