import { describe, expect, it } from "vitest";
import widget from "../src/stride/index";
import type { StrideModel } from "../src/stride/model";
import { T, fixtureModel } from "./fixture";
import { FakeModel } from "./fake_model";

const selectedIds = (el: HTMLElement) =>
  Array.from(el.querySelectorAll(".tlw-selected")).map((g) => g.getAttribute("data-e") ?? `cell ${g.getAttribute("data-cell")}`).sort();

function setup(model: unknown = fixtureModel(), selection: unknown = {}) {
  const m = new FakeModel({ model, selection });
  const el = document.createElement("div");
  const cleanup = widget.render({ model: m, el });
  return { m, el, cleanup };
}

describe("anywidget entry", () => {
  it("renders the model trait and shows the initial selection", () => {
    const { el } = setup(fixtureModel(), { storage: "S2", cell: 4, elements: [[T.copy, 4]] });
    expect(el.querySelectorAll("svg.tlw-stride")).toHaveLength(1);
    expect(el.querySelectorAll(".tlw-element")).toHaveLength(33);
    expect(selectedIds(el)).toEqual(["4", "cell 4"]);
  });

  it("a click sets and saves the selection trait; a second click clears it", () => {
    const { m, el } = setup();
    const g = el.querySelector(`.tlw-element[data-tensor="${T.ex}"][data-e="0"]`)!;
    g.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(m.sets).toEqual([["selection", { storage: "S1", cell: 0, elements: [[T.row, 0], [T.ex, 0], [T.ex, 3]] }]]);
    expect(m.get("selection")).toEqual(m.sets[0]![1]);
    expect(m.saves).toBe(1);
    expect(el.querySelectorAll(".tlw-selected")).toHaveLength(4);
    g.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(m.sets[1]).toEqual(["selection", {}]);
    expect(m.saves).toBe(2);
    expect(el.querySelectorAll(".tlw-selected")).toHaveLength(0);
  });

  it("shows a selection set from Python", () => {
    const { m, el } = setup();
    m.fromPython("selection", { storage: "S0", cell: 2, elements: [[T.x, 2], [T.xt, 4], [T.x3, 2]] });
    expect(selectedIds(el)).toEqual(["2", "2", "4", "cell 2"]);
    m.fromPython("selection", {});
    expect(selectedIds(el)).toEqual([]);
    expect(m.saves).toBe(0); // showing a Python selection does not echo it back
  });

  it("redraws on change:model, keeping the current selection", () => {
    const { m, el } = setup(fixtureModel(), { storage: "S0", cell: 0, elements: [[T.x, 0]] });
    const small: StrideModel = fixtureModel();
    small.storages = small.storages.slice(0, 1);
    small.tensors = small.tensors.slice(0, 1);
    m.fromPython("model", small);
    expect(el.querySelectorAll("svg")).toHaveLength(1);
    expect(el.querySelectorAll(".tlw-element")).toHaveLength(6);
    expect(el.querySelectorAll(".tlw-cell")).toHaveLength(6);
    expect(selectedIds(el)).toEqual(["0", "cell 0"]);
  });

  it("says so instead of failing on an empty model", () => {
    const { m, el } = setup({});
    expect(el.querySelector("svg")).toBeNull();
    expect(el.textContent).toContain("no stride model");
    m.fromPython("model", fixtureModel());
    expect(el.querySelectorAll(".tlw-cell")).toHaveLength(15);
  });

  it("the cleanup function removes its listeners and the drawing", () => {
    const { m, el, cleanup } = setup();
    expect(m.count()).toBe(2);
    cleanup();
    expect(m.count()).toBe(0);
    expect(el.querySelector("svg")).toBeNull();
    m.fromPython("model", fixtureModel());
    expect(el.querySelector("svg")).toBeNull();
  });
});
