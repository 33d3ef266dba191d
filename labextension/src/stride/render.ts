/**
 * Live stride diagram: draws a stride model as an SVG DOM with the same geometry as Python's
 * `stride_svg` (every rect and text at the same place, in the same order), plus tooltips, hover
 * highlighting and click selection. Pure DOM: no framework, no anywidget dependency.
 *
 * Hit targets are <g> groups carrying stable attributes:
 *   storage cells:   <g class="tlw-cell"    data-storage="S0" data-cell="3">
 *   tensor elements: <g class="tlw-element" data-tensor="1" data-e="4" data-storage="S0" data-cell="3">
 * (an element's data-cell is the storage cell it reads), so "everything reading cell 3 of S0" is
 * every group with data-storage="S0" and data-cell="3".
 */

import { el as svg, SVG_NS } from "../common/svg";
import { themeCss, themeVar } from "../common/theme";
import { isCellSelection, selectCell, type StrideModel, type StrideSelection, type StrideTensor } from "./model";

const PAD = 12; // Python's PAD: the x of the notes
const GROUP = ".tlw-cell,.tlw-element";

export const CLASS = {
  root: "tlw-stride",
  cell: "tlw-cell",
  element: "tlw-element",
  box: "tlw-box",
  hover: "tlw-hover",
  selected: "tlw-selected",
} as const;

/** Python's MAX_CHARS: longer values end in "…" in the cell (the tooltip has all of it). */
const MAX_CHARS = 12;

/** Python's STYLE (render/stride.py), then the live view's own rules. */
export const STYLE =
  ".tlw-stride text{fill:var(--tlw-fg)}.tlw-stride .st{font-size:12px;font-weight:bold}" +
  ".tlw-stride .ttl{font-size:11px}.tlw-stride .idx,.tlw-stride .sl{font-size:10px;fill:var(--tlw-fg2)}" +
  ".tlw-stride .cb{fill:var(--tlw-bg2);stroke:var(--tlw-line)}.tlw-stride .cb.rd{fill:var(--tlw-tint1)}" +
  ".tlw-stride .eb{fill:var(--tlw-bg);stroke-width:1.5}" +
  ".tlw-stride .gap{fill:var(--tlw-bad)}.tlw-stride .note{fill:var(--tlw-warn)}";
const LIVE_STYLE =
  ".tlw-stride text{pointer-events:none}" +
  ".tlw-stride .tlw-cell,.tlw-stride .tlw-element{cursor:pointer}" +
  ".tlw-stride .tlw-hover>.tlw-box{stroke:var(--tlw-fg);stroke-width:2.5px;fill:var(--tlw-tint7)}" +
  ".tlw-stride .tlw-selected>.tlw-box{stroke:var(--tlw-bad);stroke-width:3px;fill:var(--tlw-tint2)}";

export interface RenderOptions {
  /** Selection to show initially ({} or absent: nothing selected). */
  selection?: StrideSelection | null;
  /** Called after a click changed the selection (to a cell, or to {} when it was cleared). */
  onSelect?: (selection: StrideSelection) => void;
}

export interface StrideView {
  readonly svg: SVGSVGElement;
  /** The selection currently shown. */
  readonly selection: StrideSelection;
  /** Show a selection set from outside (Python); does not call onSelect. */
  setSelection(selection: StrideSelection | null | undefined): void;
  /** Remove listeners and the SVG. */
  destroy(): void;
}

/** Python's `shown_value` (by code point): the value, or its start and "…". */
export function shownValue(v: string): string {
  const chars = Array.from(v);
  return chars.length <= MAX_CHARS ? v : chars.slice(0, MAX_CHARS - 1).join("") + "…";
}

/** "name[1, 2]" for an element multi-index ("name" for a 0-d tensor). */
function elementName(t: StrideTensor, idx: number[]): string {
  return idx.length ? `${t.name}[${idx.join(", ")}]` : t.name;
}

/** Mark the nodes under `root` that a selection covers with the `tlw-selected` class (and clear the rest). */
export function applySelection(root: ParentNode, selection: StrideSelection | null | undefined): void {
  const sel = isCellSelection(selection) ? selection : null;
  const wanted = new Set<string>();
  if (sel && Array.isArray(sel.elements)) for (const [t, e] of sel.elements) wanted.add(`${t}:${e}`);
  root.querySelectorAll(GROUP).forEach((g) => {
    let on = false;
    if (sel) {
      if (g.classList.contains(CLASS.element)) {
        on = Array.isArray(sel.elements)
          ? wanted.has(`${g.getAttribute("data-tensor")}:${g.getAttribute("data-e")}`)
          : g.getAttribute("data-storage") === sel.storage && g.getAttribute("data-cell") === String(sel.cell);
      } else {
        on = g.getAttribute("data-storage") === sel.storage && g.getAttribute("data-cell") === String(sel.cell);
      }
    }
    g.classList.toggle(CLASS.selected, on);
  });
}

export function renderStride(container: HTMLElement, model: StrideModel, opts: RenderOptions = {}): StrideView {
  const cell = model.cell;
  const box = cell - 2;
  const w = model.width;
  const h = model.height + 16 * model.notes.length;
  const root = container.ownerDocument.createElementNS(SVG_NS, "svg");
  for (const [k, v] of Object.entries({
    width: w,
    height: h,
    viewBox: `0 0 ${w} ${h}`,
    "font-family": "monospace",
    "font-size": 10,
    class: `${CLASS.root} tlw-theme`,
    style: "background:var(--tlw-bg);max-width:100%;height:auto",
  })) {
    root.setAttribute(k, String(v));
  }
  svg("style", {}, root, themeCss() + STYLE + LIVE_STYLE);

  const byIndex = new Map<number, StrideTensor>(model.tensors.map((t) => [t.index, t]));
  const colors = new Map<number, string>(model.tensors.map((t) => [t.index, t.color]));
  /** "S0:3" -> every group (cell and elements) standing for storage cell 3 of S0. */
  const readersOf = new Map<string, Element[]>();
  const track = (storage: string, s: number, g: Element) => {
    const key = `${storage}:${s}`;
    const list = readersOf.get(key);
    if (list) list.push(g);
    else readersOf.set(key, [g]);
  };

  for (const st of model.storages) {
    svg("text", { class: "st", x: st.x, y: st.title_y }, root, st.label);
    const cw = st.cell_w;
    for (const c of st.cells) {
      const g = svg("g", { class: CLASS.cell, "data-storage": st.id, "data-cell": c.i }, root);
      const names = c.readers.map((r) => byIndex.get(r)?.name ?? `#${r}`);
      svg(
        "title",
        {},
        g,
        `storage ${st.id}[${c.i}]` +
          (c.value !== null ? ` = ${c.value}` : "") +
          (names.length ? `\nread by ${names.join(", ")}` : "\nread by no drawn element"),
      );
      svg("rect", { class: `${CLASS.box} cb${c.readers.length ? " rd" : ""}`, x: c.x, y: c.y, width: cw - 2, height: box }, g);
      svg("text", { class: "idx", x: c.x + 2, y: c.y + 10 }, g, String(c.i));
      if (c.value !== null) svg("text", { x: c.x + 3, y: c.y + 22 }, g, shownValue(c.value));
      c.readers.slice(0, 4).forEach((r, n) => {
        svg("rect", { x: c.x + 1 + n * 6, y: c.y + cell - 6, width: 5, height: 3, style: `fill:${colors.get(r) ?? themeVar("line")}` }, g);
      });
      if (c.gap_before) svg("text", { class: "gap", x: c.x - 4, y: c.y + 18 }, g, "…");
      track(st.id, c.i, g);
    }
  }

  for (const t of model.tensors) {
    const cw = t.cell_w;
    svg("rect", { x: t.x, y: t.y - 13, width: 9, height: 9, style: `fill:${t.color}` }, root);
    svg("text", { class: "ttl", x: t.x + 13, y: t.y - 5 }, root, t.title);
    for (const s of t.slices) svg("text", { class: "sl", x: s.x, y: s.y }, root, s.label);
    for (const el of t.elements) {
      const g = svg("g", { class: CLASS.element, "data-tensor": t.index, "data-e": el.e, "data-storage": t.storage, "data-cell": el.s }, root);
      const sum = el.idx.map((i, d) => `${i}·${t.stride[d]}`);
      svg(
        "title",
        {},
        g,
        `${elementName(t, el.idx)} → storage ${t.storage}[${el.s}]` +
          (el.value !== null ? ` = ${el.value}` : "") +
          `\n${el.s} = ${[String(t.offset), ...sum].join(" + ")} (offset + Σ index·stride)`,
      );
      svg("rect", { class: `${CLASS.box} eb`, x: el.x, y: el.y, width: cw - 2, height: box, style: `stroke:${t.color}` }, g);
      svg("text", { class: "idx", x: el.x + 2, y: el.y + 10 }, g, `→${el.s}`);
      if (el.value !== null) svg("text", { x: el.x + 3, y: el.y + 22 }, g, shownValue(el.value));
      track(t.storage, el.s, g);
    }
  }

  model.notes.forEach((note, n) => {
    svg("text", { class: "note", x: PAD, y: model.height + 12 + 16 * n }, root, note);
  });

  let selection: StrideSelection = {};
  let hovered: Element[] = [];

  const groupOf = (ev: Event): Element | null => {
    const target = ev.target as Element | null;
    return target && typeof target.closest === "function" ? target.closest(GROUP) : null;
  };
  const keyOf = (g: Element) => `${g.getAttribute("data-storage")}:${g.getAttribute("data-cell")}`;

  const setHover = (g: Element | null) => {
    for (const n of hovered) n.classList.remove(CLASS.hover);
    hovered = g ? (readersOf.get(keyOf(g)) ?? [g]) : [];
    for (const n of hovered) n.classList.add(CLASS.hover);
  };
  const onOver = (ev: Event) => setHover(groupOf(ev));
  const onOut = (ev: Event) => {
    const to = (ev as MouseEvent).relatedTarget as Element | null;
    const next = to && typeof to.closest === "function" ? to.closest(GROUP) : null;
    if (!next || !root.contains(next)) setHover(null);
  };
  const onClick = (ev: Event) => {
    const g = groupOf(ev);
    if (!g) return;
    const storage = g.getAttribute("data-storage") ?? "";
    const c = Number(g.getAttribute("data-cell"));
    const next: StrideSelection =
      isCellSelection(selection) && selection.storage === storage && selection.cell === c
        ? {}
        : selectCell(model, storage, c);
    view.setSelection(next);
    opts.onSelect?.(next);
  };
  root.addEventListener("mouseover", onOver);
  root.addEventListener("mouseout", onOut);
  root.addEventListener("click", onClick);

  const view: StrideView = {
    svg: root,
    get selection() {
      return selection;
    },
    setSelection(sel) {
      selection = isCellSelection(sel) ? sel : {};
      applySelection(root, selection);
    },
    destroy() {
      root.removeEventListener("mouseover", onOver);
      root.removeEventListener("mouseout", onOut);
      root.removeEventListener("click", onClick);
      root.remove();
    },
  };
  view.setSelection(opts.selection);
  container.appendChild(root);
  return view;
}
