/**
 * The interactive memory timeline: x-axis switch, the timeline SVG (hover a band → its stack in a
 * tooltip; click → the nearest event is selected and marked) and the state panel Python sends back
 * for that event (segments with blocks, the simulator's explanation).
 */

import { columnOf, eventAt, isMemoryModel, isMemoryState, type MemoryModel, type MemoryState } from "./model";
import { drawState, drawTimeline, el, num, svgRoot } from "./render";
import { themeCss } from "../common/theme";

const SHELL_STYLE =
  ".tlw-mw{font:12px/1.35 system-ui,-apple-system,'Segoe UI',sans-serif;color:var(--tlw-fg);position:relative}" +
  ".tlw-mw-bar{display:flex;flex-wrap:wrap;gap:4px;align-items:center;margin:0 0 4px}" +
  ".tlw-mw button{font:inherit;padding:1px 8px;border:1px solid var(--tlw-line);border-radius:3px;" +
  "background:var(--tlw-bg2);color:var(--tlw-fg);cursor:pointer}" +
  ".tlw-mw button[aria-pressed=true]{background:var(--tlw-tint1);border-color:var(--tlw-accent)}" +
  ".tlw-mw button:disabled{cursor:not-allowed;color:var(--tlw-fg2);background:var(--tlw-bg);border-style:dashed}" +
  ".tlw-mw-why{color:var(--tlw-fg2)}.tlw-mw-hint{color:var(--tlw-fg2);margin-left:8px}" +
  ".tlw-mw-scroll{overflow-x:auto}.tlw-mw svg{display:block;max-width:none}" +
  ".tlw-mw-timeline{cursor:crosshair}.tlw-mw .bd:hover rect{stroke:var(--tlw-fg);stroke-width:1}" +
  ".tlw-mw-tip{position:absolute;z-index:5;pointer-events:none;background:var(--tlw-bg);color:var(--tlw-fg);" +
  "border:1px solid var(--tlw-line);border-radius:3px;padding:4px 6px;font:11px/1.3 monospace;white-space:pre;" +
  "max-width:min(640px,100%);overflow:hidden;box-shadow:0 1px 4px rgba(0,0,0,.3)}" +
  ".tlw-mw-empty{color:var(--tlw-fg2);padding:4px 0}";

/** Widths the page asks Python to lay the picture out at (narrower windows scroll sideways). */
export const MIN_WIDTH = 480;
export const MAX_WIDTH = 1600;
/** Width changes smaller than this keep the current layout (a scroll bar coming and going is ~15 px). */
const WIDTH_SLACK = 24;

/** The picture width that fills `available` px, clamped to what Python draws well. */
export function fitWidth(available: number): number {
  return Math.min(Math.max(Math.floor(available), MIN_WIDTH), MAX_WIDTH);
}

export interface ViewOptions {
  panel?: MemoryState | null;
  selected?: number | null;
  onSelect?: (event: number) => void;
  onHover?: (band: number | null) => void;
  onAxis?: (axis: "event" | "time") => void;
  /** Called (debounced) with the width the picture should be laid out at when the page's width changes. */
  onResize?: ((width: number) => void) | undefined;
}

export interface MemoryView {
  readonly root: HTMLElement;
  readonly svg: SVGSVGElement;
  readonly selected: number | null;
  /** Select the event nearest user-space x, as a click there would. */
  clickAt(x: number): number | null;
  setSelected(i: number | null): void;
  setPanel(panel: unknown): void;
  destroy(): void;
}

export function renderMemory(container: HTMLElement, model: MemoryModel, opts: ViewOptions = {}): MemoryView {
  if (!isMemoryModel(model)) throw new Error("not a memory_timeline model");
  const doc = container.ownerDocument;
  const root = doc.createElement("div");
  root.className = "tlw-mw tlw-theme";
  const style = doc.createElement("style");
  style.textContent = themeCss() + SHELL_STYLE;
  root.appendChild(style);

  const bar = doc.createElement("div");
  bar.className = "tlw-mw-bar";
  root.appendChild(bar);
  for (const axis of ["event", "time"] as const) {
    const b = doc.createElement("button");
    b.type = "button";
    b.setAttribute("data-axis", axis);
    b.textContent = axis === "event" ? "event index" : "wall clock";
    b.setAttribute("aria-pressed", String(model.x_axis === axis));
    bar.appendChild(b);
    if (axis === "time" && !model.has_time) {
      b.disabled = true;
      b.title = "this trace has no time on every event, so the x axis can only be the event index";
      const why = doc.createElement("span");
      why.className = "tlw-mw-why";
      why.textContent = "(no timestamps in this trace)";
      bar.appendChild(why);
    }
  }
  const hint = doc.createElement("span");
  hint.className = "tlw-mw-hint";
  hint.textContent = "hover a band for its stack · click the timeline to see the allocator at that event";
  bar.appendChild(hint);

  const scroll = doc.createElement("div");
  scroll.className = "tlw-mw-scroll";
  root.appendChild(scroll);
  const svg = svgRoot(doc, model.width, model.height);
  svg.classList.add("tlw-mw-timeline");
  svg.setAttribute("width", num(model.width));
  svg.setAttribute("height", num(model.height));
  drawTimeline(svg, model);
  const { x: px, y: py, h: ph } = model.plot;
  const mark = el("path", { class: "mark", d: "" }, svg);
  mark.style.display = "none";
  scroll.appendChild(svg);

  const tip = doc.createElement("div");
  tip.className = "tlw-mw-tip";
  tip.hidden = true;
  root.appendChild(tip);

  const panelBox = doc.createElement("div");
  panelBox.className = "tlw-mw-panel tlw-mw-scroll";
  root.appendChild(panelBox);

  let selected: number | null = null;
  let hovered: number | null = null;

  const placeMark = (x: number | null) => {
    if (x === null) {
      mark.style.display = "none";
      return;
    }
    mark.setAttribute("d", `M${num(x)} ${num(py)}V${num(py + ph)}`);
    mark.style.display = "";
  };
  const setPanel = (p: unknown) => {
    panelBox.replaceChildren();
    if (!isMemoryState(p)) {
      const empty = doc.createElement("div");
      empty.className = "tlw-mw-empty";
      empty.textContent = selected === null ? "no event selected" : `event ${selected}: waiting for the kernel…`;
      panelBox.appendChild(empty);
      return;
    }
    const s = svgRoot(doc, p.width, p.height);
    s.classList.add("tlw-mw-state");
    s.setAttribute("width", num(p.width));
    s.setAttribute("height", num(p.height));
    s.setAttribute("data-event", String(p.index));
    drawState(s, p);
    panelBox.appendChild(s);
    if (p.index === selected) placeMark(p.x);
  };
  const setSelected = (i: number | null) => {
    selected = i;
    placeMark(i === null ? null : columnOf(model, i));
  };

  /** User-space coordinates of a pointer event (the SVG scales with its box; jsdom has no layout: scale 1). */
  const toUser = (ev: MouseEvent) => {
    const r = svg.getBoundingClientRect();
    const k = r.width > 0 ? model.width / r.width : 1;
    return { x: (ev.clientX - r.left) * k, y: (ev.clientY - r.top) * k };
  };
  const clickAt = (x: number) => {
    const i = eventAt(model, x);
    if (i === null || i === selected) return i; // the same event again: its panel is already shown or on its way
    setSelected(i);
    setPanel(null);
    opts.onSelect?.(i);
    return i;
  };
  const onClick = (ev: MouseEvent) => {
    const p = toUser(ev);
    if (p.y < py - 4 || p.y > py + ph + 4) return;
    clickAt(Math.min(Math.max(p.x, px), px + model.plot.w - 0.01));
  };
  const onMove = (ev: MouseEvent) => {
    const t = ev.target as Element | null;
    const g = t && typeof t.closest === "function" ? t.closest("g.bd") : null;
    const id = g ? Number(g.getAttribute("data-band")) : null;
    const band = id === null ? undefined : model.bands[id];
    if (!band) {
      tip.hidden = true;
    } else {
      tip.textContent = `${band.label}\n${band.stack}`;
      const r = root.getBoundingClientRect();
      tip.hidden = false;
      const room = root.clientWidth - tip.offsetWidth; // keep the tooltip inside the widget
      tip.style.left = `${Math.max(Math.min(ev.clientX - r.left + 12, room), 0)}px`;
      tip.style.top = `${Math.max(ev.clientY - r.top + 12, 0)}px`;
    }
    if (id !== hovered) {
      hovered = band ? id : null;
      opts.onHover?.(hovered);
    }
  };
  const onLeave = () => {
    tip.hidden = true;
    if (hovered !== null) {
      hovered = null;
      opts.onHover?.(null);
    }
  };
  const onBar = (ev: MouseEvent) => {
    const t = ev.target as Element | null;
    const b = t && typeof t.closest === "function" ? t.closest("button[data-axis]") : null;
    const axis = b?.getAttribute("data-axis");
    if ((axis === "event" || axis === "time") && axis !== model.x_axis) opts.onAxis?.(axis);
  };
  svg.addEventListener("click", onClick);
  svg.addEventListener("mousemove", onMove);
  svg.addEventListener("mouseleave", onLeave);
  bar.addEventListener("click", onBar);

  let timer: ReturnType<typeof setTimeout> | undefined;
  const measure = () => {
    const w = root.getBoundingClientRect().width;
    if (w <= 0 || !opts.onResize) return;
    const want = fitWidth(w);
    if (Math.abs(want - model.width) >= WIDTH_SLACK) opts.onResize(want);
  };
  let observer: ResizeObserver | null = null;
  if (opts.onResize && typeof ResizeObserver !== "undefined") {
    observer = new ResizeObserver(() => {
      clearTimeout(timer);
      timer = setTimeout(measure, 120);
    });
    observer.observe(root);
  }

  container.appendChild(root);
  setSelected(typeof opts.selected === "number" ? opts.selected : null);
  setPanel(opts.panel ?? null);
  return {
    root,
    svg,
    get selected() {
      return selected;
    },
    clickAt,
    setSelected,
    setPanel,
    destroy() {
      observer?.disconnect();
      clearTimeout(timer);
      root.remove();
    },
  };
}
