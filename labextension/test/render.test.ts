import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { StrideModel, StrideSelection } from "../src/stride/model";
import { applySelection, renderStride, type StrideView } from "../src/stride/render";
import { PYTHON_SVG, T, fixtureModel } from "./fixture";

let container: HTMLElement;
let model: StrideModel;

beforeEach(() => {
  container = document.createElement("div");
  document.body.appendChild(container);
  model = fixtureModel();
});
afterEach(() => container.remove());

const el = (root: ParentNode, t: number, e: number) => {
  const g = root.querySelector(`.tlw-element[data-tensor="${t}"][data-e="${e}"]`);
  if (!g) throw new Error(`element ${t}:${e} not drawn`);
  return g;
};
const cellOf = (root: ParentNode, storage: string, i: number) => {
  const g = root.querySelector(`.tlw-cell[data-storage="${storage}"][data-cell="${i}"]`);
  if (!g) throw new Error(`cell ${storage}[${i}] not drawn`);
  return g;
};
const boxOf = (g: Element) => g.querySelector("rect.tlw-box") as SVGRectElement;
const ids = (root: ParentNode, cls: string) =>
  Array.from(root.querySelectorAll(`.${cls}`)).map((g) =>
    g.classList.contains("tlw-cell")
      ? `${g.getAttribute("data-storage")}[${g.getAttribute("data-cell")}]`
      : `${g.getAttribute("data-tensor")}:${g.getAttribute("data-e")}`,
  ).sort();
const click = (target: Element) => target.dispatchEvent(new MouseEvent("click", { bubbles: true }));
const over = (target: Element) => target.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
const out = (target: Element, to: Element | null = null) =>
  target.dispatchEvent(new MouseEvent("mouseout", { bubbles: true, relatedTarget: to }));

/** Every drawn rect and text, in document order, as the attributes that fix what is drawn where. */
function drawn(root: ParentNode): string[][] {
  return Array.from(root.querySelectorAll("rect, text")).map((n) => {
    const a = (k: string) => n.getAttribute(k) ?? "";
    const cls = a("class").split(" ").filter((c) => c && c !== "tlw-box").join(" "); // tlw-box: the live view's hit box
    return n.tagName.toLowerCase() === "rect"
      ? ["rect", a("x"), a("y"), a("width"), a("height"), cls, a("style"), a("fill"), a("stroke")]
      : ["text", a("x"), a("y"), cls, a("style"), a("fill"), n.textContent ?? ""];
  });
}

describe("geometry", () => {
  it("draws one group per model element and per storage cell", () => {
    const view = renderStride(container, model);
    const nElements = model.tensors.reduce((n, t) => n + t.elements.length, 0);
    const nCells = model.storages.reduce((n, s) => n + s.cells.length, 0);
    expect(nElements).toBe(6 + 6 + 6 + 3 + 6 + 6);
    expect(nCells).toBe(6 + 3 + 6);
    expect(view.svg.querySelectorAll(".tlw-element > rect.tlw-box")).toHaveLength(nElements);
    expect(view.svg.querySelectorAll(".tlw-cell > rect.tlw-box")).toHaveLength(nCells);
  });

  it("places every element and cell at the model's coordinates", () => {
    const view = renderStride(container, model);
    const side = String(model.cell - 2);
    for (const t of model.tensors) {
      for (const e of t.elements) {
        const g = el(view.svg, t.index, e.e);
        expect(g.getAttribute("data-storage")).toBe(t.storage);
        expect(g.getAttribute("data-cell")).toBe(String(e.s));
        const r = boxOf(g);
        expect([r.getAttribute("x"), r.getAttribute("y"), r.getAttribute("width")]).toEqual([String(e.x), String(e.y), String(t.cell_w - 2)]);
        expect(r.getAttribute("style")).toBe(`stroke:${t.color}`);
        expect(g.querySelector("text")?.textContent).toBe(`→${e.s}`);
      }
    }
    for (const st of model.storages) {
      for (const c of st.cells) {
        const r = boxOf(cellOf(view.svg, st.id, c.i));
        expect([r.getAttribute("x"), r.getAttribute("y"), r.getAttribute("height")]).toEqual([String(c.x), String(c.y), side]);
      }
    }
    // spot checks against hand-derived positions: xt[0, 1] sits one cell right of xt's corner and reads S0[3]
    const xt = model.tensors[T.xt]!;
    expect(boxOf(el(view.svg, T.xt, 1)).getAttribute("x")).toBe(String(xt.x + xt.cell_w));
    expect(el(view.svg, T.xt, 1).getAttribute("data-cell")).toBe("3");
  });

  it("draws the same rects and texts, in the same order, as Python's stride_svg", () => {
    const view = renderStride(container, model);
    const py = new DOMParser().parseFromString(PYTHON_SVG, "image/svg+xml");
    expect(py.querySelector("parsererror")).toBeNull();
    const pyRoot = py.documentElement;
    for (const k of ["width", "height", "viewBox", "font-family", "font-size"]) {
      expect(view.svg.getAttribute(k)).toBe(pyRoot.getAttribute(k));
    }
    const ours = drawn(view.svg);
    const theirs = drawn(pyRoot);
    expect(theirs.filter((d) => d[0] === "rect").length).toBeGreaterThan(50);
    expect(ours).toEqual(theirs);
  });

  it("matches stride_svg for notes and gap markers too (a truncated model)", () => {
    // Edit the fixture into a model with a note and a skipped cell; the Python rules are restated here.
    model.notes = ["x: a note"];
    const c = model.storages[0]!.cells[3]!;
    c.gap_before = true;
    const view = renderStride(container, model);
    expect(view.svg.getAttribute("height")).toBe(String(model.height + 16));
    const texts = Array.from(view.svg.querySelectorAll("text"));
    const gap = texts.find((t) => t.textContent === "…")!;
    expect([gap.getAttribute("x"), gap.getAttribute("y"), gap.getAttribute("class")]).toEqual([String(c.x - 4), String(c.y + 18), "gap"]);
    const note = texts.find((t) => t.textContent === "x: a note")!;
    expect([note.getAttribute("x"), note.getAttribute("y")]).toEqual(["12", String(model.height + 12)]);
  });

  it("draws reader marks in the readers' colours; a value past 12 characters ends in … (the tooltip has it all)", () => {
    model.storages[0]!.cells[0]!.value = "(1.2e+03+4.5e+02j)";
    model.storages[0]!.cells[1]!.value = "-1.23e+05";
    const view = renderStride(container, model);
    const g = cellOf(view.svg, "S0", 0);
    const marks = Array.from(g.querySelectorAll("rect:not(.tlw-box)")).map((r) => r.getAttribute("style"));
    expect(marks).toEqual(model.tensors.slice(0, 3).map((t) => `fill:${t.color}`));
    expect(Array.from(g.querySelectorAll("text")).map((t) => t.textContent)).toEqual(["0", "(1.2e+03+4.…"]);
    expect(g.querySelector("title")?.textContent).toContain("(1.2e+03+4.5e+02j)");
    expect(cellOf(view.svg, "S0", 1).querySelectorAll("text")[1]?.textContent).toBe("-1.23e+05");
  });

  it("gives elements and cells tooltips", () => {
    const view = renderStride(container, model);
    expect(el(view.svg, T.ex, 3).querySelector("title")?.textContent).toBe(
      "ex[1, 0] → storage S1[0] = 10.\n0 = 0 + 1·0 + 0·1 (offset + Σ index·stride)",
    );
    expect(cellOf(view.svg, "S1", 2).querySelector("title")?.textContent).toBe("storage S1[2] = 30.\nread by row, ex");
  });
});

describe("interaction", () => {
  let onSelect: ReturnType<typeof vi.fn<(s: StrideSelection) => void>>;
  let view: StrideView;
  beforeEach(() => {
    onSelect = vi.fn<(s: StrideSelection) => void>();
    view = renderStride(container, model, { onSelect });
  });

  it("clicking an element selects its cell and every element reading it", () => {
    click(boxOf(el(view.svg, T.xt, 1)));
    const want = { storage: "S0", cell: 3, elements: [[T.x, 3], [T.xt, 1], [T.x3, 3]] };
    expect(onSelect).toHaveBeenCalledTimes(1);
    expect(onSelect).toHaveBeenLastCalledWith(want);
    expect(view.selection).toEqual(want);
    expect(ids(view.svg, "tlw-selected")).toEqual(["0:3", "1:1", "2:3", "S0[3]"]);
  });

  it("clicking an element of a stride-0 (expanded) view selects both elements reading that cell", () => {
    click(el(view.svg, T.ex, 4)); // ex[1, 1] reads S1[1], like ex[0, 1] and row[1]
    expect(onSelect).toHaveBeenLastCalledWith({ storage: "S1", cell: 1, elements: [[T.row, 1], [T.ex, 1], [T.ex, 4]] });
    expect(ids(view.svg, "tlw-selected")).toEqual(["3:1", "4:1", "4:4", "S1[1]"]);
  });

  it("clicking the selected thing again clears the selection", () => {
    click(el(view.svg, T.ex, 4));
    click(el(view.svg, T.ex, 1)); // another element of the same selected cell
    expect(onSelect).toHaveBeenCalledTimes(2);
    expect(onSelect).toHaveBeenLastCalledWith({});
    expect(view.selection).toEqual({});
    expect(view.svg.querySelectorAll(".tlw-selected")).toHaveLength(0);
  });

  it("clicking a storage cell selects it; a different cell replaces the selection", () => {
    click(cellOf(view.svg, "S2", 3));
    expect(onSelect).toHaveBeenLastCalledWith({ storage: "S2", cell: 3, elements: [[T.copy, 3]] });
    click(cellOf(view.svg, "S0", 3).querySelector("text")!); // a click on the label counts for its cell
    expect(onSelect).toHaveBeenLastCalledWith({ storage: "S0", cell: 3, elements: [[T.x, 3], [T.xt, 1], [T.x3, 3]] });
    expect(ids(view.svg, "tlw-selected")).toEqual(["0:3", "1:1", "2:3", "S0[3]"]);
    click(cellOf(view.svg, "S0", 3));
    expect(onSelect).toHaveBeenLastCalledWith({});
  });

  it("clicks outside cells and elements change nothing", () => {
    click(view.svg);
    click(view.svg.querySelector("text")!); // the storage title
    expect(onSelect).not.toHaveBeenCalled();
  });

  it("hovering an element highlights its storage cell and every element reading it", () => {
    over(boxOf(el(view.svg, T.x, 4))); // x[1, 1] reads S0[4], as do xt[1, 1] (flat 3) and x3[1, 0, 1]
    expect(ids(view.svg, "tlw-hover")).toEqual(["0:4", "1:3", "2:4", "S0[4]"]);
    out(boxOf(el(view.svg, T.x, 4)));
    expect(view.svg.querySelectorAll(".tlw-hover")).toHaveLength(0);
    expect(onSelect).not.toHaveBeenCalled();
  });

  it("hovering a storage cell highlights all elements reading it, moving between groups moves it", () => {
    const c = cellOf(view.svg, "S1", 0);
    over(boxOf(c));
    expect(ids(view.svg, "tlw-hover")).toEqual(["3:0", "4:0", "4:3", "S1[0]"]);
    const next = cellOf(view.svg, "S1", 2);
    out(boxOf(c), boxOf(next));
    over(boxOf(next));
    expect(ids(view.svg, "tlw-hover")).toEqual(["3:2", "4:2", "4:5", "S1[2]"]);
  });

  it("selection persists when the hover leaves", () => {
    const g = el(view.svg, T.copy, 0);
    over(g);
    click(g);
    out(g);
    expect(ids(view.svg, "tlw-hover")).toEqual([]);
    expect(ids(view.svg, "tlw-selected")).toEqual(["5:0", "S2[0]"]);
  });

  it("a selection set from outside is shown without calling onSelect, and can be cleared", () => {
    view.setSelection({ storage: "S0", cell: 5, elements: [[T.x, 5], [T.xt, 5], [T.x3, 5]] });
    expect(ids(view.svg, "tlw-selected")).toEqual(["0:5", "1:5", "2:5", "S0[5]"]);
    expect(onSelect).not.toHaveBeenCalled();
    // clicking what Python selected clears it, as for a browser selection
    click(el(view.svg, T.xt, 5));
    expect(onSelect).toHaveBeenLastCalledWith({});
    view.setSelection({ storage: "S1", cell: 2, elements: [[T.ex, 5]] });
    expect(ids(view.svg, "tlw-selected")).toEqual(["4:5", "S1[2]"]);
    view.setSelection({});
    expect(ids(view.svg, "tlw-selected")).toEqual([]);
    view.setSelection(null);
    expect(view.selection).toEqual({});
  });

  it("destroy removes the SVG and its listeners", () => {
    const svg = view.svg;
    view.destroy();
    expect(container.querySelector("svg")).toBeNull();
    click(el(svg, T.x, 0));
    expect(onSelect).not.toHaveBeenCalled();
  });
});

describe("applySelection and initial selection", () => {
  it("renders an initial selection", () => {
    const view = renderStride(container, model, { selection: { storage: "S2", cell: 1, elements: [[T.copy, 1]] } });
    expect(ids(view.svg, "tlw-selected")).toEqual(["5:1", "S2[1]"]);
  });

  it("marks the listed elements and the cell, or every reader when no list is given", () => {
    const view = renderStride(container, model);
    applySelection(container, { storage: "S0", cell: 0, elements: [[T.xt, 0]] });
    expect(ids(view.svg, "tlw-selected")).toEqual(["1:0", "S0[0]"]);
    applySelection(container, { storage: "S0", cell: 0 } as unknown as StrideSelection);
    expect(ids(view.svg, "tlw-selected")).toEqual(["0:0", "1:0", "2:0", "S0[0]"]);
    applySelection(container, {});
    expect(ids(view.svg, "tlw-selected")).toEqual([]);
  });
});
