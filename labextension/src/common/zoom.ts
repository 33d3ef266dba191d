/**
 * Zooming a time axis in the live views (rank lanes, profile timeline). Over the lanes, the mouse wheel zooms
 * around the pointer and a drag selects a range; a double-click, the "reset zoom" button or the 0 key goes back
 * to the whole range; the − / + buttons and keys zoom around the middle. The range lives in the view only (no
 * kernel round trip): the view redraws itself from `onChange(a, b)`, in the axis's own units.
 *
 * Hooks for tests: the bar is <div class="tlw-zoom-bar"> with <button class="tlw-zoom-reset"> and
 * <span class="tlw-zoom-range">; a drag draws <rect class="tlw-zoom-sel">.
 */

import { el } from "./svg";

/** The bar's and the selection's rules under `root` (a class selector); colours are theme variables. */
export function zoomStyle(root: string): string {
  return (
    `${root} .tlw-zoom-bar{display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin:2px 0;` +
    "font:11px/1.6 var(--jp-ui-font-family,sans-serif);color:var(--tlw-fg2)}" +
    `${root} .tlw-zoom-bar button{font:inherit;color:var(--tlw-fg);background:var(--tlw-bg2);` +
    "border:1px solid var(--tlw-line);border-radius:3px;padding:0 6px;cursor:pointer}" +
    `${root} .tlw-zoom-bar button:disabled{color:var(--tlw-fg2);cursor:default}` +
    `${root} .tlw-zoom-sel{fill:var(--tlw-accent);fill-opacity:.2;stroke:var(--tlw-accent);pointer-events:none}` +
    `${root} svg:focus{outline:1px dotted var(--tlw-line)}`
  );
}

/** Python's render.axis.nice_step: 1, 2 or 5 times a power of ten, at most `maxTicks` ticks on a span. */
export function niceStep(span: number, maxTicks = 8): number {
  if (!(span > 0)) return 1;
  const raw = span / maxTicks;
  const base = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5]) if (m * base >= raw) return m * base;
  return 10 * base;
}

/** The tick values in [a, b] at a nice step (rounded as Python's round(k * step, 9)). */
export function tickValues(a: number, b: number, maxTicks = 8): number[] {
  const step = niceStep(b - a, maxTicks);
  const out: number[] = [];
  for (let k = Math.ceil(Number((a / step).toFixed(9))); k * step <= b * (1 + 1e-12) + 1e-9; k++) {
    out.push(Number((k * step).toFixed(9)));
  }
  return out;
}

/** Ticks at x positions, dropped where a label would meet the one before (labels are ~6.6 px a character). */
export function thinTicks<T extends { x: number; label: string }>(ticks: T[], charW = 6.6): T[] {
  const out: T[] = [];
  for (const t of ticks) {
    const prev = out[out.length - 1];
    if (!prev || t.x - prev.x >= ((prev.label.length + t.label.length) * charW) / 2 + 8) out.push(t);
  }
  return out;
}

export interface ZoomSpec {
  svg: SVGSVGElement;
  /** The element the buttons and the range text go in. */
  bar: HTMLElement;
  /** The plot's left and right edges, in the SVG's user units. */
  x0: number;
  x1: number;
  /** The whole range, in the axis's units. */
  full: [number, number];
  unit: string;
  onChange: (a: number, b: number) => void;
}

export interface Zoom {
  readonly range: [number, number];
  set(a: number, b: number): void;
  /** Zoom by `factor` (< 1: in) around `at` (default: the middle). */
  zoomBy(factor: number, at?: number): void;
  reset(): void;
  destroy(): void;
}

export function attachZoom(spec: ZoomSpec): Zoom {
  const { svg, bar, x0, x1, full, unit, onChange } = spec;
  const doc = svg.ownerDocument;
  const [fa, fb] = full;
  const minSpan = (fb - fa) / 5000;
  let a = fa;
  let b = fb;
  const button = (text: string, title: string, cls: string, act: () => void): HTMLButtonElement => {
    const btn = doc.createElement("button");
    btn.type = "button";
    btn.className = cls;
    btn.textContent = text;
    btn.title = title;
    btn.addEventListener("click", act);
    bar.appendChild(btn);
    return btn;
  };
  const out = button("−", "zoom out (−)", "tlw-zoom-out", () => zoomBy(2));
  button("+", "zoom in (+)", "tlw-zoom-in", () => zoomBy(0.5));
  const reset = button("reset zoom", "the whole range (0, or double-click the lanes)", "tlw-zoom-reset", () => set(fa, fb));
  const text = doc.createElement("span");
  text.className = "tlw-zoom-range";
  bar.appendChild(text);
  svg.setAttribute("tabindex", "0");

  /** A time at a precision that suits the span shown: 3 significant digits of it. */
  const fmt = (t: number): string => {
    const d = Math.max(0, Math.min(6, 2 - Math.floor(Math.log10(b - a))));
    return t.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
  };

  function show(): void {
    const whole = a <= fa && b >= fb;
    out.disabled = reset.disabled = whole;
    text.textContent = whole
      ? `${fmt(fa)}–${fmt(fb)} ${unit}: wheel or drag over the lanes to zoom`
      : `showing ${fmt(a)}–${fmt(b)} of ${fmt(fa)}–${fmt(fb)} ${unit}; double-click or 0 for all`;
  }

  function set(na: number, nb: number): void {
    const span = Math.min(Math.max(nb - na, minSpan), fb - fa);
    const lo = Math.min(Math.max(na, fa), fb - span);
    if (lo === a && lo + span === b) return;
    a = lo;
    b = lo + span;
    show();
    onChange(a, b);
  }

  function zoomBy(factor: number, at = (a + b) / 2): void {
    set(at - (at - a) * factor, at + (b - at) * factor);
  }

  /** A pointer's x in the SVG's user units (the picture may be drawn scaled). */
  const toX = (clientX: number): number => {
    const r = svg.getBoundingClientRect();
    const vb = svg.viewBox?.baseVal;
    return r.width ? ((clientX - r.left) * (vb && vb.width ? vb.width : r.width)) / r.width : NaN;
  };
  const toT = (x: number): number => a + ((x - x0) / (x1 - x0)) * (b - a);
  const inPlot = (x: number): boolean => x >= x0 && x <= x1;
  const clampX = (x: number): number => Math.min(Math.max(x, x0), x1);

  const onWheel = (e: WheelEvent): void => {
    const x = toX(e.clientX);
    if (!inPlot(x) || !e.deltaY) return;
    e.preventDefault();
    const dy = e.deltaY * (e.deltaMode === 1 ? 33 : e.deltaMode === 2 ? 300 : 1);
    zoomBy(Math.exp(Math.max(-1, Math.min(1, dy / 300))), toT(x));
  };

  let start: number | null = null;
  let sel: SVGRectElement | null = null;
  let dragged = false;
  const onMove = (e: MouseEvent): void => {
    if (start === null) return;
    const x = clampX(toX(e.clientX));
    if (!sel && Math.abs(x - start) < 4) return;
    e.preventDefault();
    sel ??= el("rect", { class: "tlw-zoom-sel", y: 0, height: svg.viewBox?.baseVal?.height || 0 }, svg);
    sel.setAttribute("x", String(Math.min(x, start)));
    sel.setAttribute("width", String(Math.abs(x - start)));
  };
  const onUp = (e: MouseEvent): void => {
    doc.removeEventListener("mousemove", onMove);
    doc.removeEventListener("mouseup", onUp);
    const from = start;
    start = null;
    if (from === null || !sel) return;
    sel.remove();
    sel = null;
    const x = clampX(toX(e.clientX));
    if (Math.abs(x - from) >= 4) {
      dragged = true; // the click that follows this mouseup selects nothing
      set(toT(Math.min(x, from)), toT(Math.max(x, from)));
    }
  };
  const onDown = (e: MouseEvent): void => {
    if (e.button !== 0 || !inPlot(toX(e.clientX))) return;
    start = toX(e.clientX);
    dragged = false;
    doc.addEventListener("mousemove", onMove);
    doc.addEventListener("mouseup", onUp);
  };
  const onClick = (e: MouseEvent): void => {
    if (!dragged) return;
    dragged = false;
    e.stopPropagation();
  };
  const onDouble = (e: MouseEvent): void => {
    if (inPlot(toX(e.clientX))) set(fa, fb);
  };
  const onKey = (e: KeyboardEvent): void => {
    const act: Record<string, () => void> = {
      "+": () => zoomBy(0.5), "=": () => zoomBy(0.5), "-": () => zoomBy(2), "_": () => zoomBy(2),
      "0": () => set(fa, fb), Escape: () => set(fa, fb),
    };
    const f = act[e.key];
    if (!f || e.ctrlKey || e.metaKey || e.altKey) return;
    e.preventDefault();
    e.stopPropagation(); // not the notebook's own shortcuts
    f();
  };
  svg.addEventListener("wheel", onWheel, { passive: false });
  svg.addEventListener("mousedown", onDown);
  svg.addEventListener("click", onClick, true);
  svg.addEventListener("dblclick", onDouble);
  svg.addEventListener("keydown", onKey);
  show();
  return {
    get range(): [number, number] {
      return [a, b];
    },
    set,
    zoomBy,
    reset: () => set(fa, fb),
    destroy() {
      svg.removeEventListener("wheel", onWheel);
      svg.removeEventListener("mousedown", onDown);
      svg.removeEventListener("click", onClick, true);
      svg.removeEventListener("dblclick", onDouble);
      svg.removeEventListener("keydown", onKey);
      doc.removeEventListener("mousemove", onMove);
      doc.removeEventListener("mouseup", onUp);
    },
  };
}
