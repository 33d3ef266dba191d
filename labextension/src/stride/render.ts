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

const STYLE =
  ".tlw-stride text{pointer-events:none}" +
  ".tlw-stride .tlw-cell,.tlw-stride .tlw-element{cursor:pointer}" +
  ".tlw-stride .tlw-hover>.tlw-box{stroke:#222;stroke-width:2.5px;fill:#fff6d5}" +
  ".tlw-stride .tlw-selected>.tlw-box{stroke:#d62728;stroke-width:3px;fill:#ffe08a}";

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

/** Python's `value[:5]` (by code point). */
function clip5(v: string): string {
  return Array.from(v).slice(0, 5).join("");
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
    class: CLASS.root,
    style: "background:#fff;max-width:100%;height:auto",
  })) {
    root.setAttribute(k, String(v));
  }
  svg("style", {}, root, STYLE);

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
    svg("text", { x: st.x, y: st.title_y, "font-size": 12, "font-weight": "bold" }, root, st.label);
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
      svg("rect", { class: CLASS.box, x: c.x, y: c.y, width: box, height: box, fill: c.readers.length ? "#eef3f8" : "#f7f7f7", stroke: "#888" }, g);
      svg("text", { x: c.x + 2, y: c.y + 9, "font-size": 8, fill: "#666" }, g, String(c.i));
      if (c.value !== null) svg("text", { x: c.x + 3, y: c.y + 22 }, g, clip5(c.value));
      c.readers.slice(0, 4).forEach((r, n) => {
        svg("rect", { x: c.x + 1 + n * 6, y: c.y + cell - 6, width: 5, height: 3, fill: colors.get(r) ?? "#999" }, g);
      });
      if (c.gap_before) svg("text", { x: c.x - 4, y: c.y + 18, fill: "#c00" }, g, "…");
      track(st.id, c.i, g);
    }
  }

  for (const t of model.tensors) {
    svg("text", { x: t.x, y: t.y - 5, "font-size": 11, fill: t.color }, root, t.title);
    for (const s of t.slices) svg("text", { x: s.x, y: s.y, "font-size": 9, fill: "#555" }, root, s.label);
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
      svg("rect", { class: CLASS.box, x: el.x, y: el.y, width: box, height: box, fill: "white", stroke: t.color, "stroke-width": 1.5 }, g);
      svg("text", { x: el.x + 2, y: el.y + 9, "font-size": 8, fill: "#666" }, g, `→${el.s}`);
      if (el.value !== null) svg("text", { x: el.x + 3, y: el.y + 22 }, g, clip5(el.value));
      track(t.storage, el.s, g);
    }
  }

  model.notes.forEach((note, n) => {
    svg("text", { x: PAD, y: model.height + 12 + 16 * n, fill: "#a05000" }, root, note);
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
