/**
 * The interactive grad_fn graph: toolbar (‹ prev, ▶ play, next ›, slider, zoom −/+/fit, whole graph), the SVG in
 * a pan/zoom viewport (drag, wheel; only the viewBox changes, never the geometry), and the details
 * panel. State comes in through set*() (from Python) and goes out through the callbacks (clicks).
 */

import { isGradGraphModel, nodeDetails, type GradGraphModel } from "./model";
import { fillDetails } from "./panel";
import { applyState, CLASS, drawGraph, num, svgSize } from "./render";
import { themeCss } from "../common/theme";

const VIEW_H = 560; // px: the tallest viewport; taller graphs open on their top (the roots)
const VIEW_W = 960; // user units shown across when a tall graph opens
const PLAY_MS = 700;
// Glyphs every system font has (⏮ ⏭ ⏸ are missing from common Linux fonts and render as boxes).
const PLAY_TEXT = "▶ play";
const PAUSE_TEXT = "‖ pause";

const SHELL_STYLE =
  ".tlw-gg{font:12px/1.35 system-ui,-apple-system,'Segoe UI',sans-serif;color:var(--tlw-fg)}" +
  ".tlw-gg-bar{display:flex;flex-wrap:wrap;align-items:center;gap:4px;margin:0 0 4px}" +
  ".tlw-gg button{font:inherit;min-width:26px;padding:1px 6px;border:1px solid var(--tlw-line);border-radius:3px;" +
  "color:var(--tlw-fg);background:var(--tlw-bg2);cursor:pointer}" +
  ".tlw-gg button:disabled{color:var(--tlw-fg2);cursor:default;border-style:dashed}.tlw-gg-sep{width:10px}" +
  ".tlw-step-label{min-width:14em;font-family:monospace;white-space:nowrap}" +
  ".tlw-step-slider{width:180px}" +
  ".tlw-gg-main{display:flex;gap:8px;align-items:flex-start}" +
  ".tlw-gg-viewport{flex:1 1 auto;min-width:0;border:1px solid var(--tlw-line);border-radius:3px;background:var(--tlw-bg);" +
  "overflow:hidden;cursor:grab;touch-action:none}" +
  ".tlw-gg-viewport.tlw-dragging{cursor:grabbing}.tlw-gg-viewport>svg{display:block;width:100%}" +
  ".tlw-details{flex:0 0 290px;box-sizing:border-box;overflow:auto;border:1px solid var(--tlw-line);border-radius:3px;" +
  "padding:6px 8px;background:var(--tlw-bg)}" +
  ".tlw-d-name{font-weight:600;font-family:monospace;margin-bottom:4px;word-break:break-all}" +
  ".tlw-details table{border-collapse:collapse;font-size:11px;margin:2px 0 6px}" +
  ".tlw-details th{text-align:left;font-weight:normal;color:var(--tlw-fg2);padding:1px 8px 1px 0;vertical-align:top}" +
  ".tlw-details td{font-family:monospace;padding:1px 6px 1px 0;word-break:break-all}" +
  ".tlw-saved td{border-top:1px solid var(--tlw-grid)}.tlw-saved .tlw-freed td{color:var(--tlw-fg2);text-decoration:line-through}" +
  ".tlw-d-saved-head,.tlw-d-group,.tlw-d-block{font-size:11px;margin:4px 0 2px}.tlw-d-group,.tlw-d-block{color:var(--tlw-accent)}" +
  ".tlw-state-running td{color:var(--tlw-warn);font-weight:600}.tlw-d-hint{color:var(--tlw-fg2);margin:2px 0}" +
  ".tlw-d-focus{margin-top:6px}";

export interface ViewOptions {
  selected?: number | null;
  step?: number;
  focus?: number | null;
  hops?: number;
  onSelect?: (id: number | null) => void;
  onStep?: (step: number) => void;
  onFocus?: (focus: number | null, hops: number) => void;
}

export interface ViewBox {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface GradGraphView {
  readonly root: HTMLElement;
  readonly svg: SVGSVGElement;
  readonly selected: number | null;
  readonly step: number;
  readonly playing: boolean;
  viewBox(): ViewBox;
  setViewBox(vb: ViewBox): void;
  zoom(factor: number, cx?: number, cy?: number): void;
  fit(): void;
  setSelected(id: number | null | undefined): void;
  setStep(step: number | null | undefined): void;
  setFocus(focus: number | null | undefined, hops: number | null | undefined): void;
  play(): void;
  pause(): void;
  destroy(): void;
}

function button(parent: Element, action: string, text: string, title: string): HTMLButtonElement {
  const b = parent.ownerDocument.createElement("button");
  b.type = "button";
  b.setAttribute("data-action", action);
  b.title = title;
  b.textContent = text;
  parent.appendChild(b);
  return b;
}

export function renderGradGraph(container: HTMLElement, model: GradGraphModel, opts: ViewOptions = {}): GradGraphView {
  if (!isGradGraphModel(model)) throw new Error("not a grad_graph model");
  const doc = container.ownerDocument;
  const root = doc.createElement("div");
  root.className = "tlw-gg tlw-theme";
  const style = doc.createElement("style");
  style.textContent = themeCss() + SHELL_STYLE;
  root.appendChild(style);

  // Toolbar.
  const bar = doc.createElement("div");
  bar.className = "tlw-gg-bar";
  root.appendChild(bar);
  const nSteps = model.steps.length;
  const prevB = button(bar, "prev", "‹ prev", "previous backward step");
  const playB = button(bar, "play", PLAY_TEXT, "play the recorded backward");
  const nextB = button(bar, "next", "next ›", "next backward step");
  const slider = doc.createElement("input");
  slider.type = "range";
  slider.className = "tlw-step-slider";
  slider.min = "-1";
  slider.max = String(nSteps - 1);
  slider.step = "1";
  slider.setAttribute("aria-label", "backward step");
  bar.appendChild(slider);
  const label = doc.createElement("span");
  label.className = "tlw-step-label";
  bar.appendChild(label);
  const sep = doc.createElement("span");
  sep.className = "tlw-gg-sep";
  bar.appendChild(sep);
  // Stepping needs a recorded backward (record_backward / show_grad_graph(..., recording=...)): without one
  // its controls are left out rather than shown disabled.
  if (!nSteps) for (const c of [prevB, playB, nextB, slider, label, sep]) c.hidden = true;
  button(bar, "zoom-out", "−", "zoom out");
  button(bar, "zoom-in", "+", "zoom in");
  button(bar, "fit", "fit", "show the whole graph");
  const unfocusB = button(bar, "unfocus", "whole graph", "leave the focus: draw the whole graph again");

  // Viewport and details.
  const main = doc.createElement("div");
  main.className = "tlw-gg-main";
  root.appendChild(main);
  const viewport = doc.createElement("div");
  viewport.className = "tlw-gg-viewport";
  main.appendChild(viewport);
  const svg = drawGraph(doc, model);
  svg.setAttribute("preserveAspectRatio", "xMidYMin meet");
  viewport.appendChild(svg);
  const panel = doc.createElement("div");
  panel.className = "tlw-details";
  main.appendChild(panel);

  const full = svgSize(model);
  const viewH = Math.max(120, Math.min(full.h, VIEW_H));
  svg.setAttribute("height", String(viewH));
  panel.style.maxHeight = `${viewH}px`;

  let vb: ViewBox = { x: 0, y: 0, w: full.w, h: full.h };
  let selected: number | null = null;
  let step = -1;
  let focus: number | null = null;
  let hops = 2;
  let timer: ReturnType<typeof setInterval> | null = null;

  const nodeIds = new Set(model.nodes.map((n) => n.id));
  const nodeById = new Map(model.nodes.map((n) => [n.id, n]));

  const writeViewBox = () => svg.setAttribute("viewBox", `${num(vb.x)} ${num(vb.y)} ${num(vb.w)} ${num(vb.h)}`);
  /** px per user unit, and where the picture starts inside the svg element (preserveAspectRatio xMidYMin meet). */
  const scale = () => {
    const cw = svg.clientWidth || viewport.clientWidth;
    const ch = svg.clientHeight || viewH;
    const s = cw > 0 && ch > 0 ? Math.min(cw / vb.w, ch / vb.h) : 1;
    return { s, ox: cw > 0 ? (cw - vb.w * s) / 2 : 0 };
  };
  const toUser = (clientX: number, clientY: number) => {
    const r = svg.getBoundingClientRect();
    const { s, ox } = scale();
    return { x: vb.x + (clientX - r.left - ox) / s, y: vb.y + (clientY - r.top) / s };
  };

  const setViewBox = (next: ViewBox) => {
    const maxW = Math.max(full.w, full.h) * 4;
    const w = Math.min(Math.max(next.w, 40), maxW);
    const h = next.h * (w / next.w);
    vb = { x: next.x, y: next.y, w, h };
    writeViewBox();
  };
  const zoom = (factor: number, cx = vb.x + vb.w / 2, cy = vb.y + vb.h / 2) => {
    setViewBox({ x: cx - (cx - vb.x) / factor, y: cy - (cy - vb.y) / factor, w: vb.w / factor, h: vb.h / factor });
  };
  const fit = () => setViewBox({ x: 0, y: 0, w: full.w, h: full.h });
  /** Opening view: the whole picture unless that shrinks it below 2/3, else its top at scale 1 over the roots. */
  const initialView = () => {
    if (full.h <= VIEW_H * 1.5) return fit(); // drawn at 2/3 scale or more: show it all
    const w = Math.min(full.w, VIEW_W);
    const roots = model.roots.map((r) => nodeById.get(r)).filter((n) => n !== undefined);
    const cx = roots.length ? roots.reduce((a, n) => a + n.x + n.w / 2, 0) / roots.length : full.w / 2;
    setViewBox({ x: Math.min(Math.max(cx - w / 2, 0), Math.max(full.w - w, 0)), y: 0, w, h: VIEW_H });
  };
  /** Pan so that node `id` is in view (stepping through a large graph follows the running node). */
  const reveal = (id: number | null) => {
    const n = id === null ? undefined : nodeById.get(id);
    if (!n) return;
    const inside = n.x >= vb.x && n.y >= vb.y && n.x + n.w <= vb.x + vb.w && n.y + n.h <= vb.y + vb.h;
    if (!inside) setViewBox({ ...vb, x: n.x + n.w / 2 - vb.w / 2, y: n.y + n.h / 2 - vb.h / 2 });
  };

  const refresh = () => {
    applyState(svg, model, selected, step);
    slider.value = String(step);
    const s = step >= 0 ? model.steps[step] : undefined;
    label.textContent = !nSteps
      ? "no recorded backward"
      : s
        ? `step ${step}/${nSteps - 1}: ${s.name}${s.node === null ? " (not drawn)" : ""}`
        : `before backward (steps 0–${nSteps - 1})`;
    prevB.disabled = !nSteps || step <= -1;
    nextB.disabled = !nSteps || step >= nSteps - 1;
    playB.textContent = timer ? PAUSE_TEXT : PLAY_TEXT;
    playB.setAttribute("aria-pressed", timer ? "true" : "false");
    unfocusB.hidden = focus === null;
    const d = selected === null ? null : nodeDetails(model, selected, step);
    fillDetails(panel, d, hops, d !== null && d.kind !== "group");
  };

  const goTo = (k: number, fromUser: boolean) => {
    const next = Math.max(-1, Math.min(nSteps - 1, k));
    if (next === step) return;
    step = next;
    refresh();
    reveal(step >= 0 ? (model.steps[step]?.node ?? null) : null);
    if (fromUser) opts.onStep?.(step);
  };
  const pause = () => {
    if (timer !== null) clearInterval(timer);
    timer = null;
    refresh();
  };
  const play = () => {
    if (timer !== null || !nSteps) return;
    if (step >= nSteps - 1) goTo(-1, true);
    timer = setInterval(() => {
      goTo(step + 1, true);
      if (step >= nSteps - 1) pause();
    }, PLAY_MS);
    refresh();
  };

  // Events.
  let drag: { x: number; y: number; vb: ViewBox; moved: boolean } | null = null;
  let suppressClick = false;
  const onDown = (ev: MouseEvent) => {
    if (ev.button !== 0) return;
    drag = { x: ev.clientX, y: ev.clientY, vb: { ...vb }, moved: false };
    suppressClick = false;
  };
  const onMove = (ev: MouseEvent) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x;
    const dy = ev.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    drag.moved = true;
    viewport.classList.add("tlw-dragging");
    const { s } = scale();
    setViewBox({ ...drag.vb, x: drag.vb.x - dx / s, y: drag.vb.y - dy / s });
  };
  const onUp = () => {
    if (drag?.moved) suppressClick = true;
    drag = null;
    viewport.classList.remove("tlw-dragging");
  };
  const onWheel = (ev: WheelEvent) => {
    ev.preventDefault();
    const p = toUser(ev.clientX, ev.clientY);
    zoom(Math.exp(-ev.deltaY * 0.0015), p.x, p.y);
  };
  const onSvgClick = (ev: MouseEvent) => {
    if (suppressClick) {
      suppressClick = false;
      return;
    }
    const target = ev.target as Element | null;
    const g = target && typeof target.closest === "function" ? target.closest(`.${CLASS.node}`) : null;
    if (!g) return;
    const id = Number(g.getAttribute("data-node"));
    const next = id === selected ? null : id;
    selected = next;
    refresh();
    opts.onSelect?.(next);
  };
  const onRootClick = (ev: MouseEvent) => {
    const target = ev.target as Element | null;
    const b = target && typeof target.closest === "function" ? target.closest("button[data-action]") : null;
    if (!b || (b as HTMLButtonElement).disabled) return;
    switch (b.getAttribute("data-action")) {
      case "prev":
        pause();
        goTo(step - 1, true);
        break;
      case "next":
        pause();
        goTo(step + 1, true);
        break;
      case "play":
        if (timer) pause();
        else play();
        break;
      case "zoom-in":
        zoom(1.25);
        break;
      case "zoom-out":
        zoom(0.8);
        break;
      case "fit":
        fit();
        break;
      case "unfocus":
        opts.onFocus?.(null, hops);
        break;
      case "focus": {
        const input = panel.querySelector<HTMLInputElement>("input.tlw-hops");
        const n = input ? Math.floor(Number(input.value)) : hops;
        if (selected !== null && Number.isFinite(n) && n >= 0) opts.onFocus?.(selected, n);
        break;
      }
    }
  };
  const onSlider = () => {
    const k = Number(slider.value);
    pause();
    goTo(k, true);
  };
  svg.addEventListener("mousedown", onDown);
  doc.addEventListener("mousemove", onMove);
  doc.addEventListener("mouseup", onUp);
  svg.addEventListener("wheel", onWheel, { passive: false });
  svg.addEventListener("click", onSvgClick);
  root.addEventListener("click", onRootClick);
  slider.addEventListener("input", onSlider);

  const view: GradGraphView = {
    root,
    svg,
    get selected() {
      return selected;
    },
    get step() {
      return step;
    },
    get playing() {
      return timer !== null;
    },
    viewBox: () => ({ ...vb }),
    setViewBox,
    zoom,
    fit,
    setSelected(id) {
      selected = typeof id === "number" && nodeIds.has(id) ? id : null;
      refresh();
    },
    setStep(k) {
      const next = typeof k === "number" && Number.isInteger(k) ? Math.max(-1, Math.min(nSteps - 1, k)) : -1;
      if (next !== step) goTo(next, false);
    },
    setFocus(f, n) {
      focus = typeof f === "number" ? f : null;
      if (typeof n === "number" && n >= 0) hops = n;
      refresh();
    },
    play,
    pause,
    destroy() {
      if (timer !== null) clearInterval(timer);
      timer = null;
      doc.removeEventListener("mousemove", onMove);
      doc.removeEventListener("mouseup", onUp);
      root.remove();
    },
  };
  focus = typeof opts.focus === "number" ? opts.focus : null;
  hops = typeof opts.hops === "number" && opts.hops >= 0 ? opts.hops : 2;
  selected = typeof opts.selected === "number" && nodeIds.has(opts.selected) ? opts.selected : null;
  step = typeof opts.step === "number" ? Math.max(-1, Math.min(nSteps - 1, opts.step)) : -1;
  container.appendChild(root);
  initialView();
  refresh();
  return view;
}
