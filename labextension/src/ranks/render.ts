/**
 * The live rank lanes: Python's `render.distributed.ranks_model` drawn as SVG, element for element like
 * `ranks_svg` (one lane per rank: backward nodes, then buckets / collectives, then bytes held), plus an info
 * line under the picture. Hovering a bucket or collective writes its parameters and bytes there; clicking a
 * bucket selects it on every rank (`onSelect(index)`, or -1 when the selected one is clicked again).
 *
 * Before any hover the info line describes the selected bucket, or else the first span. The time axis zooms
 * (../common/zoom.ts: wheel or drag over the lanes, double-click or "reset zoom" back), redrawn here from the
 * same model; where Python cut the wait before every rank ran (`cut`), the note under the lanes says so.
 *
 * Hooks for tests: comm groups are <g class="tlw-comm-g" data-rank="0" data-bucket="1">, the info line is
 * <div class="tlw-ranks-info">, the zoom bar <div class="tlw-zoom-bar">.
 */

import { el, svgRoot } from "../common/svg";
import { themeCss } from "../common/theme";
import { attachZoom, thinTicks, tickValues, zoomStyle } from "../common/zoom";

export interface Lane { rank: number; row: string; label: string; y: number; h: number }
export interface NodeSpan {
  rank: number; x: number; w: number; y: number; h: number; name: string; short: string; clipped?: boolean;
}
export interface Comm {
  rank: number; x: number; w: number; y: number; h: number; kind: string; bucket: number | null; cat: number;
  label: string; short: string; tip: string; nbytes: number; params: string[]; ready_x: number | null;
  /** Labels, longest first: the first that fits is drawn. */
  texts?: string[];
  clipped?: boolean;
}
export interface Mem { rank: number; y: number; h: number; points: string; peak: number; peak_label: string }
export interface RanksModel {
  kind: "ranks"; version: 1; mode: string; width: number; height: number; left: number; iteration: number;
  /** µs after `origin` that the plot spans; the axis's value at x = left (`t0`) and its unit. */
  end?: number; t0?: number; unit?: string; per_unit?: number; axis_label?: string;
  footer?: { y: number; text: string; cls: string }[];
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
const MARK_W = 7; // px the clipped-start marker takes before a label

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
  ".tlw-ranks .tlw-cut-mark{fill:var(--tlw-fg);stroke:none}.tlw-ranks .tlw-legend{fill:var(--tlw-fg2)}" +
  [1, 2, 3, 4, 5, 6, 7, 8].map((i) => `.tlw-ranks .tlw-c${i}{fill:var(--tlw-tint${i});stroke:var(--tlw-cat${i})}`).join("") +
  ".tlw-ranks-box{font:12px/1.4 var(--jp-code-font-family,monospace);color:var(--tlw-fg);overflow-x:auto}" +
  ".tlw-ranks-info{min-height:1.4em;padding:2px 6px;background:var(--tlw-bg2);overflow-wrap:anywhere}" +
  zoomStyle(".tlw-ranks-box");

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

/** Python's fit_text: the first of a comm's labels that fits `width` px whole ("" when none does). */
export function commShort(c: Comm, width: number): string {
  const texts = c.texts ?? [`${c.kind === "bucket" ? `b${c.bucket}` : c.label} ${fmtBytes(c.nbytes)}`];
  return texts.find((t) => t.length * CHAR_W + 4 <= width) ?? "";
}

/** Python's _fmt for tick values: up to 3 decimals, no trailing zeros. */
export function fmtTick(t: number): string {
  return Number.isInteger(t) ? String(t) : t.toFixed(3).replace(/0+$/, "").replace(/\.$/, "");
}

/** The whole range of the axis, in its units: [t0, t0 + end]. */
export function fullRange(m: RanksModel): [number, number] {
  const t0 = m.t0 ?? 0;
  const span = (m.end ?? 0) / (m.per_unit ?? 1);
  return [t0, t0 + (span > 0 ? span : 1)];
}

const r2 = (v: number): number => Math.round(v * 100) / 100;

/**
 * The model (as fitted) showing only [a, b] of its axis: spans moved and stretched, clipped at the plot's edges
 * (marked when they began before it), dropped when outside; labels picked again for their widths; new ticks.
 */
export function zoomTo(m: RanksModel, a: number, b: number): RanksModel {
  const [fa, fb] = fullRange(m);
  if (a <= fa && b >= fb) return m;
  const right = m.width - RIGHT;
  const k = (fb - fa) / (b - a);
  const X = (x: number): number => m.left + (x - m.left) * k - ((a - fa) / (fb - fa)) * (right - m.left) * k;
  const clip = (x: number, w: number): [number, number, boolean] | null => {
    const x1 = X(x), x2 = X(x + w);
    if (x2 < m.left || x1 > right) return null;
    const c1 = Math.max(x1, m.left);
    return [r2(c1), r2(Math.max(Math.min(x2, right) - c1, 1)), x1 < m.left - 0.01];
  };
  const nodes: NodeSpan[] = [];
  for (const n of m.nodes) {
    const c = clip(n.x, n.w);
    if (!c) continue;
    const clipped = !!n.clipped || c[2];
    nodes.push({ ...n, x: c[0], w: c[1], short: short(n.name, c[1] - (clipped ? MARK_W : 0)), clipped });
  }
  const comms: Comm[] = [];
  for (const cm of m.comms) {
    const c = clip(cm.x, cm.w);
    if (!c) continue;
    const rx = cm.ready_x === null ? null : X(cm.ready_x);
    const clipped = !!cm.clipped || c[2];
    comms.push({ ...cm, x: c[0], w: c[1], short: commShort(cm, c[1] - (clipped ? MARK_W : 0)), clipped,
      ready_x: rx !== null && rx >= m.left && rx <= right ? r2(rx) : null });
  }
  const P = (right - m.left) / (b - a);
  return {
    ...m, nodes, comms,
    ticks: thinTicks(tickValues(a, b).map((t) => ({ x: r2(m.left + (t - a) * P), label: fmtTick(t) }))),
    memory: m.memory.map((mem) => ({
      ...mem,
      points: mem.points.split(" ").map((pt) => {
        const [x, y] = pt.split(",");
        return `${r2(Math.min(Math.max(X(Number(x)), m.left), right))},${y}`;
      }).join(" "),
    })),
  };
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
  return {
    ...m,
    width,
    ticks: thinTicks(m.ticks.map((t) => ({ ...t, x: X(t.x) }))),
    nodes: m.nodes.map((n) => ({ ...n, x: X(n.x), w: W(n.w), short: short(n.name, W(n.w) - (n.clipped ? MARK_W : 0)) })),
    comms: m.comms.map((c) => ({
      ...c, x: X(c.x), w: W(c.w), ready_x: c.ready_x === null ? null : X(c.ready_x), short: commShort(c, W(c.w) - (c.clipped ? MARK_W : 0)),
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
  /** Show [a, b] of the time axis (in its units), as a drag over that range would. */
  zoom(a: number, b: number): void;
  destroy(): void;
}

export interface RenderOptions {
  bucket?: number | null;
  onSelect?: (bucket: number) => void;
  /** The time range to show first (kept by the caller across redraws of the same model). */
  range?: [number, number];
  /** Called with the range shown after each zoom. */
  onZoom?: (a: number, b: number) => void;
}

export function renderRanks(host: HTMLElement, full: RanksModel, options: RenderOptions = {}): RanksView {
  const doc = host.ownerDocument;
  const base = fitWidth(full, host.clientWidth);
  const box = doc.createElement("div");
  box.className = "tlw-ranks-box tlw-theme";
  const style = doc.createElement("style");
  style.textContent = themeCss() + STYLE;
  box.appendChild(style);
  const bar = doc.createElement("div");
  bar.className = "tlw-zoom-bar";
  box.appendChild(bar);
  const W = base.width;
  const H = base.height;
  const svg = svgRoot(doc, W, H, "tlw-ranks tlw-theme", "");
  svg.setAttribute("width", String(W));
  svg.setAttribute("height", String(H));
  svg.setAttribute("style", "background:var(--tlw-bg)");
  box.appendChild(svg);
  const info = doc.createElement("div");
  info.className = "tlw-ranks-info";
  box.appendChild(info);
  host.appendChild(box);

  let m = base;
  let selected = -1;
  let rects: [Comm, SVGRectElement][] = [];
  const mark = (x: number, y: number, h: number): void => {
    const mid = r2(y + h / 2);
    el("path", { class: "tlw-cut-mark", d: `M${r2(x + 6)},${r2(mid - 4)}L${x},${mid}L${r2(x + 6)},${r2(mid + 4)}Z` }, svg);
  };

  function draw(): void {
    svg.replaceChildren();
    el("rect", { class: "tlw-bg", x: 0, y: 0, width: W, height: H }, svg);
    el("line", { class: "tlw-axis", x1: m.left, y1: AXIS_Y, x2: W - RIGHT, y2: AXIS_Y }, svg);
    el("text", { class: "tlw-axis-label", x: 8, y: AXIS_Y - 8 }, svg,
      m.axis_label ?? `it ${m.iteration} ${m.mode === "ddp" ? "backward" : "iteration"} (µs)`);
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
    for (const f of m.footer ?? []) el("text", { class: f.cls, x: 8, y: f.y }, svg, f.text);
    for (const n of m.nodes) {
      const acc = n.name.startsWith("AccumulateGrad") ? " tlw-acc" : "";
      const r = el("rect", { class: `tlw-node${acc}`, "data-rank": n.rank, x: n.x, y: n.y, width: n.w, height: n.h }, svg);
      el("title", {}, r, n.name);
      if (n.clipped) mark(n.x, n.y, n.h);
      if (n.short) el("text", { class: "tlw-node-label", x: n.x + 2 + (n.clipped ? MARK_W : 0), y: n.y + n.h / 2 + 4 }, svg, n.short);
    }
    rects = [];
    m.comms.forEach((c, i) => {
      const attrs: Record<string, string | number> = { class: "tlw-comm-g", "data-i": i, "data-rank": c.rank };
      if (c.bucket !== null) attrs["data-bucket"] = c.bucket;
      const g = el("g", attrs, svg);
      el("title", {}, g, c.tip);
      rects.push([c, el("rect", { class: `tlw-comm tlw-c${c.cat}`, x: c.x, y: c.y, width: c.w, height: c.h }, g)]);
      if (c.ready_x !== null) el("line", { class: "tlw-ready", x1: c.ready_x, y1: c.y - 1, x2: c.ready_x, y2: c.y + c.h + 1 }, g);
      if (c.clipped) mark(c.x, c.y, c.h);
      if (c.short) el("text", { class: "tlw-comm-label", x: c.x + 2 + (c.clipped ? MARK_W : 0), y: c.y + c.h / 2 + 4 }, g, c.short);
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
    for (const [c, r] of rects) r.classList.toggle("tlw-sel", c.bucket !== null && c.bucket === selected);
  }

  function showSelected(): void {
    const b = base.buckets.find((x) => x.index === selected);
    const first = base.comms[0];
    info.textContent = b
      ? `selected bucket ${b.index} (${fmtBytes(b.nbytes)}): ${b.params.join(", ")}`
      : base.buckets.length ? "hover a bucket for its parameters; click to select it on every rank"
      : first ? `${describe(first)} — hover a span for its own` : "";
  }
  function setBucket(b: number | null | undefined): void {
    selected = typeof b === "number" && Number.isInteger(b) ? b : -1;
    for (const [c, r] of rects) r.classList.toggle("tlw-sel", c.bucket !== null && c.bucket === selected);
    showSelected();
  }
  draw();
  const zoom = attachZoom({
    svg, bar, x0: base.left, x1: W - RIGHT, full: fullRange(base), unit: base.unit ?? "µs",
    onChange: (a, b) => {
      m = zoomTo(base, a, b);
      draw();
      options.onZoom?.(a, b);
    },
  });
  if (options.range) zoom.set(...options.range);
  setBucket(options.bucket);
  return {
    setBucket,
    zoom: (a: number, b: number) => zoom.set(a, b),
    destroy: () => {
      zoom.destroy();
      box.remove();
    },
  };
}
