/**
 * The live profile view: Python's static picture (one lane per thread, spans nested by depth, record_function
 * ranges dashed, a time axis) drawn from the same model, the key-averages table beside it, and the links:
 * clicking a table row (or a span) lights up every span of that name; hovering a span shows its inputs and
 * whole Python stack in a tooltip. Pure DOM, one listener per kind of event (delegation), so 20,000 spans
 * draw at once. Every colour is a theme variable.
 *
 * The time axis zooms (../common/zoom.ts: wheel or drag over the lanes, double-click or "reset zoom" back): the
 * spans in range are drawn again, clipped at the edges, with their labels fitted to their new widths.
 *
 * Hooks for tests: spans are <rect class="tlw-span ..." data-i="k">, table rows <tr class="tlw-row"
 * data-name="aten::mm">, the tooltip <div class="tlw-tip">, the zoom bar <div class="tlw-zoom-bar">.
 */

import { el as svgEl, SVG_NS, svgRoot } from "../common/svg";
import { themeCss } from "../common/theme";
import { attachZoom, thinTicks, tickValues, zoomStyle } from "../common/zoom";
import { fitWidth, fmt, kindOf, leftOutText, shortLabel, spanBox, spanTip, type Box, type PtraceModel, type RawSpan } from "./model";

const KINDS: Record<string, [string, string]> = { op: ["tint1", "cat1"], range: ["tint5", "cat5"], other: ["tint6", "cat6"] };

export const STYLE =
  ".tlw-ptrace{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start;padding:6px;position:relative;" +
  "font:12px/1.4 var(--jp-ui-font-family,sans-serif);color:var(--tlw-fg);background:var(--tlw-bg)}" +
  ".tlw-pt{font-family:monospace;font-size:11px}" +
  ".tlw-pt text{fill:var(--tlw-fg)}.tlw-pt .tlw-tick-label,.tlw-pt .tlw-muted{fill:var(--tlw-fg2)}" +
  ".tlw-pt .tlw-lane{fill:var(--tlw-bg2)}.tlw-pt .tlw-axis,.tlw-pt .tlw-tick{stroke:var(--tlw-line)}" +
  ".tlw-pt .tlw-span{stroke-width:1;cursor:pointer}" +
  Object.entries(KINDS).map(([k, [f, o]]) => `.tlw-pt .tlw-${k}{fill:var(--tlw-${f});stroke:var(--tlw-${o})}`).join("") +
  ".tlw-pt .tlw-range{stroke-dasharray:4,2;stroke-width:1.5}" +
  ".tlw-pt .tlw-label{pointer-events:none}" +
  ".tlw-pt-sel .tlw-span{opacity:.35}.tlw-pt-sel .tlw-label{opacity:.75}" +
  ".tlw-pt-sel .tlw-span.tlw-sel{opacity:1;fill:var(--tlw-tint7);stroke:var(--tlw-warn);stroke-width:2}" +
  ".tlw-pt .tlw-span.tlw-hover{stroke:var(--tlw-accent);stroke-width:2}" +
  ".tlw-ptrace .tlw-tablebox{max-height:520px;overflow:auto}" +
  ".tlw-ptrace .tlw-ptable{border-collapse:collapse;font:12px var(--jp-code-font-family,monospace);color:inherit}" +
  ".tlw-ptrace .tlw-ptable th,.tlw-ptrace .tlw-ptable td{padding:1px 8px 1px 0;text-align:right;white-space:nowrap}" +
  ".tlw-ptrace .tlw-ptable th{border-bottom:1px solid var(--tlw-line);color:var(--tlw-fg2);position:sticky;top:0;" +
  "background:var(--tlw-bg)}" +
  ".tlw-ptrace .tlw-ptable td.name,.tlw-ptrace .tlw-ptable th.name{text-align:left}" +
  ".tlw-ptrace .tlw-row{cursor:pointer}.tlw-ptrace .tlw-row:hover td{background:var(--tlw-bg2)}" +
  ".tlw-ptrace .tlw-row.tlw-sel td{background:var(--tlw-tint7)}" +
  ".tlw-ptrace .tlw-note{color:var(--tlw-fg2);margin:4px 0;max-width:60em}" +
  ".tlw-ptrace .tlw-swatch{display:inline-block;width:12px;height:10px;margin:0 4px 0 10px;vertical-align:middle}" +
  Object.entries(KINDS).map(([k, [f, o]]) => `.tlw-ptrace .tlw-swatch.tlw-${k}{background:var(--tlw-${f});border:1px solid var(--tlw-${o})}`).join("") +
  ".tlw-ptrace .tlw-swatch.tlw-range{border-style:dashed}" +
  ".tlw-ptrace .tlw-tip{position:absolute;z-index:10;pointer-events:none;max-width:640px;padding:4px 6px;" +
  "white-space:pre-wrap;overflow-wrap:anywhere;font:11px/1.35 var(--jp-code-font-family,monospace);color:var(--tlw-fg);" +
  "background:var(--tlw-bg);border:1px solid var(--tlw-line);box-shadow:0 1px 4px var(--tlw-line)}" +
  zoomStyle(".tlw-ptrace");

export interface RenderOptions {
  /** The `selected` trait: an op name, or null. */
  selected?: unknown;
  /** Called with the name (null: cleared) after the user clicked a row or a span. */
  onSelect?: (name: string | null) => void;
  /** The time range (µs) to show first (kept by the caller across redraws of the same model). */
  range?: [number, number];
  /** Called with the range shown after each zoom. */
  onZoom?: (a: number, b: number) => void;
}

export interface TraceView {
  readonly root: HTMLElement;
  readonly selected: string | null;
  /** Light up `name` as it arrives from Python (does not call onSelect). */
  setSelected(name: unknown): void;
  /** Select as a click would (calls onSelect). */
  select(name: string | null): void;
  /** Show the tooltip of span `i` (what hovering it does). */
  hover(i: number | null): void;
  /** Show [a, b] µs of the timeline, as a drag over that range would. */
  zoom(a: number, b: number): void;
  destroy(): void;
}

function h<K extends keyof HTMLElementTagNameMap>(parent: Node, tag: K, attrs: Record<string, string> = {}, text?: string): HTMLElementTagNameMap[K] {
  const doc = parent.ownerDocument ?? (parent as Document);
  const node = doc.createElement(tag);
  for (const k in attrs) node.setAttribute(k, attrs[k] as string);
  if (text !== undefined) node.textContent = text;
  parent.appendChild(node);
  return node;
}

function plural(n: number, word: string): string {
  return `${n.toLocaleString("en-US")} ${word}${n === 1 ? "" : "s"}`;
}

/** Python's `header_text`. */
/** A table row's tooltip (Python's calls_tip): why its spans drawn, those a click lights, are not its calls. */
export function callsTip(r: { category: string; count: number; drawn: number }): string {
  const n = (k: number) => k.toLocaleString("en-US");
  if (r.drawn < r.count) return `${r.category}; ${n(r.drawn)} of ${n(r.count)} calls drawn (the rest were left out of the picture)`;
  if (r.drawn > r.count) {
    return `${r.category}; ${n(r.drawn)} spans for ${n(r.count)} calls: as torch's key_averages does, a span ` +
      "that is the only child of a span of the same name is one call with it";
  }
  return r.category;
}

export function headerText(model: PtraceModel): string {
  const sm = model.summary;
  const extra = [sm.with_stack ? "Python stacks" : "", sm.record_shapes ? "input shapes" : ""].filter(Boolean);
  return `profile (${sm.source === "live" ? "live run" : "saved trace"}): ${plural(sm.events, "span")} on ` +
    `${plural(sm.threads, "thread")} — ${sm.ops.toLocaleString("en-US")} aten op calls, ` +
    `${plural(sm.ranges, "record_function range")}, ${sm.names.toLocaleString("en-US")} names` +
    (extra.length ? `; with ${extra.join(" and ")}` : "");
}

export function renderTrace(el: HTMLElement, full: PtraceModel, options: RenderOptions = {}): TraceView {
  const model = fitWidth(full, el.clientWidth - 12); // the root's padding
  const known = new Set(model.table.map((r) => r.name));
  const valid = (v: unknown): string | null => (typeof v === "string" && (known.has(v) || model.names.includes(v)) ? v : null);
  let selected: string | null = valid(options.selected);

  const root = h(el, "div", { class: "tlw-ptrace tlw-theme" });
  h(root, "style", {}, themeCss() + STYLE);
  const left = h(root, "div", { class: "tlw-ptrace-left" });
  h(left, "div", { class: "tlw-note" }, headerText(model));
  const legend = h(left, "div", { class: "tlw-note" });
  for (const [k, t] of [["op", "aten op"], ["range", "record_function range"], ["other", "other"]] as const) {
    h(legend, "span", { class: `tlw-swatch tlw-${k}` });
    legend.append(t);
  }
  legend.append("; click a span or a row to light up every call of it; hover a span for its inputs and stack");

  // the timeline: Python's profile_svg, element for element where it matters
  const doc = el.ownerDocument;
  const W = model.width;
  const bar = h(left, "div", { class: "tlw-zoom-bar" });
  const svg = svgRoot(doc, W, model.height, "tlw-pt", "");
  svg.setAttribute("width", `${W}`);
  svg.setAttribute("height", `${model.height}`);
  left.appendChild(svg);
  const AXIS_Y = 24;
  const plotRight = W - model.right;
  const fullEnd = (plotRight - model.left) / model.scale;
  let view: [number, number] = [0, fullEnd];
  let byName = new Map<number, SVGRectElement[]>();
  let spans: (SVGRectElement | undefined)[] = [];
  const kinds = model.cats.map(kindOf);

  /** Where span `s` is drawn in the current view (Python's box when not zoomed); null: out of view. */
  function boxOf(s: RawSpan): Box | null {
    const [a, b] = view;
    if (a <= 0 && b >= fullEnd) return spanBox(model, s);
    const P = (plotRight - model.left) / (b - a);
    const x1 = model.left + (s[2] - a) * P;
    const x2 = model.left + (s[2] + s[3] - a) * P;
    if (x2 < model.left || x1 > plotRight) return null;
    const full = spanBox(model, s);
    const c1 = Math.max(x1, model.left);
    return { ...full, x: r(c1), w: r(Math.max(Math.min(x2, plotRight) - c1, 1)) };
  }

  function drawTimeline(): void {
    svg.replaceChildren();
    const [a, b] = view;
    const whole = a <= 0 && b >= fullEnd;
    const P = (plotRight - model.left) / (b - a);
    const ticks = whole ? model.ticks : thinTicks(tickValues(a, b).map((t) => ({ x: r(model.left + (t - a) * P), label: fmt(t) })));
    svgEl("line", { class: "tlw-axis", x1: model.left, y1: AXIS_Y, x2: plotRight, y2: AXIS_Y }, svg);
    svgEl("text", { class: "tlw-muted", x: 6, y: AXIS_Y - 8 }, svg, "time (µs)");
    ticks.forEach((t, k) => {
      const anchor = k === ticks.length - 1 && t.x + (t.label.length * 6.6) / 2 > W ? "end" : "middle";
      svgEl("line", { class: "tlw-tick", x1: t.x, y1: AXIS_Y - 3, x2: t.x, y2: AXIS_Y + 3 }, svg);
      svgEl("text", { class: "tlw-tick-label", x: t.x, y: AXIS_Y - 8, "text-anchor": anchor }, svg, t.label);
    });
    model.lanes.forEach((lane, i) => {
      svgEl("rect", { class: "tlw-lane", "data-lane": i, x: model.left, y: lane.y, width: plotRight - model.left,
        height: lane.rows * model.row_h }, svg);
      const label = svgEl("text", { class: "tlw-lane-label", x: 6, y: lane.y + 12 }, svg, lane.short);
      svgEl("title", {}, label, lane.label);
    });
    byName = new Map();
    spans = [];
    const frag = doc.createElementNS(SVG_NS, "g"); // filled off-page, attached once
    model.spans.forEach((s, i) => {
      const b = boxOf(s);
      if (!b) return;
      const rect = svgEl("rect", { class: `tlw-span tlw-${kinds[s[5]]}`, "data-i": i, x: b.x, y: b.y, width: b.w, height: b.h }, frag);
      spans[i] = rect;
      const list = byName.get(s[4]);
      if (list) list.push(rect);
      else byName.set(s[4], [rect]);
      const label = shortLabel(model.names[s[4]] ?? "", b.w);
      if (label) svgEl("text", { class: "tlw-label", x: r(b.x + 2), y: b.y - 1 + model.row_h - 4 }, frag, label);
    });
    svg.appendChild(frag);
  }
  drawTimeline();
  const notes = [leftOutText(model), ...model.notes].filter((n): n is string => !!n);
  for (const n of notes) h(left, "div", { class: "tlw-note" }, n);

  // the key-averages table
  const right = h(root, "div", { class: "tlw-ptrace-right" });
  const caption = h(right, "div", { class: "tlw-note" }, "key averages, by self time (click a row)");
  const box = h(right, "div", { class: "tlw-tablebox" });
  const table = h(box, "table", { class: "tlw-ptable" });
  const hr = h(h(table, "thead"), "tr");
  h(hr, "th", { class: "name" }, "name");
  for (const c of ["calls", "self µs", "total µs", "mean µs"]) h(hr, "th", {}, c);
  const body = h(table, "tbody");
  const rows = new Map<string, HTMLTableRowElement>();
  for (const r of model.table) {
    const title = callsTip(r);
    const tr = h(body, "tr", { class: "tlw-row", "data-name": r.name, title });
    h(tr, "td", { class: "name" }, shortLabel(r.name, 240));
    for (const v of [r.count.toLocaleString("en-US"), fmt(r.self), fmt(r.total), fmt(r.mean)]) h(tr, "td", {}, v);
    rows.set(r.name, tr);
  }

  const tip = h(root, "div", { class: "tlw-tip" });
  tip.style.display = "none";
  let hovered: number | null = null;

  function apply(): void {
    root.classList.toggle("tlw-pt-sel", selected !== null);
    for (const rect of svg.querySelectorAll(".tlw-span.tlw-sel")) rect.classList.remove("tlw-sel");
    const id = selected === null ? -1 : model.names.indexOf(selected);
    for (const rect of byName.get(id) ?? []) rect.classList.add("tlw-sel");
    for (const [name, tr] of rows) tr.classList.toggle("tlw-sel", name === selected);
    const n = model.spans.reduce((k, s) => k + (s[4] === id ? 1 : 0), 0);
    caption.textContent = selected === null ? "key averages, by self time (click a row)"
      : `key averages, by self time — ${selected}: ${plural(n, "span")} lit (click again to clear)`;
  }
  const zoom = attachZoom({
    svg, bar, x0: model.left, x1: plotRight, full: [0, fullEnd], unit: "µs",
    onChange: (a, b) => {
      hover(null);
      view = [a, b];
      drawTimeline();
      apply();
      options.onZoom?.(a, b);
    },
  });

  function show(name: string | null, fromUser: boolean): void {
    if (name === selected) return;
    selected = name;
    apply();
    if (fromUser) options.onSelect?.(name);
  }

  function hover(i: number | null, at?: { x: number; y: number }): void {
    if (hovered !== null) spans[hovered]?.classList.remove("tlw-hover");
    hovered = i;
    const s = i === null ? undefined : model.spans[i];
    if (i === null || !s) {
      tip.style.display = "none";
      return;
    }
    spans[i]?.classList.add("tlw-hover");
    tip.textContent = spanTip(model, s).join("\n");
    tip.style.display = "block";
    const b = boxOf(s) ?? spanBox(model, s);
    const x = at?.x ?? b.x;
    const y = at?.y ?? b.y + b.h;
    tip.style.left = `${Math.max(0, Math.min(x + 12, W - 200))}px`;
    tip.style.top = `${y + 14}px`;
  }

  const onClick = (e: Event) => {
    const target = e.target as Element | null;
    const row = target?.closest?.("tr.tlw-row");
    if (row) {
      const name = row.getAttribute("data-name");
      show(name === selected ? null : name, true);
      return;
    }
    const rect = target?.closest?.("rect.tlw-span");
    if (rect) {
      const s = model.spans[Number(rect.getAttribute("data-i"))];
      const name = s ? model.names[s[4]] ?? null : null;
      show(name === selected ? null : name, true);
    }
  };
  const onMove = (e: MouseEvent) => {
    const rect = (e.target as Element | null)?.closest?.("rect.tlw-span");
    if (!rect) return hover(null);
    const i = Number(rect.getAttribute("data-i"));
    const bounds = root.getBoundingClientRect();
    hover(i, { x: e.clientX - bounds.left, y: e.clientY - bounds.top });
  };
  const onLeave = () => hover(null);
  root.addEventListener("click", onClick);
  svg.addEventListener("mousemove", onMove);
  svg.addEventListener("mouseleave", onLeave);
  apply();
  if (options.range) zoom.set(...options.range);

  return {
    root,
    get selected() {
      return selected;
    },
    setSelected(name: unknown) {
      show(valid(name), false);
    },
    select(name: string | null) {
      show(valid(name), true);
    },
    hover(i: number | null) {
      hover(i);
    },
    zoom(a: number, b: number) {
      zoom.set(a, b);
    },
    destroy() {
      zoom.destroy();
      root.removeEventListener("click", onClick);
      svg.removeEventListener("mousemove", onMove);
      svg.removeEventListener("mouseleave", onLeave);
      root.remove();
    },
  };
}

function r(v: number): number {
  return Math.round(v * 100) / 100;
}
