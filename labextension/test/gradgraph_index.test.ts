import { describe, expect, it } from "vitest";
import widget from "../src/gradgraph/index";
import { N, RELU_STEP, focusedModel, gradModel } from "./gradgraph_fixture";
import { FakeModel } from "./fake_model";

function setup(values: Record<string, unknown> = {}) {
  const m = new FakeModel({ model: gradModel(), selected: null, step: -1, focus: null, hops: 2, ...values });
  const el = document.createElement("div");
  document.body.appendChild(el);
  const cleanup = widget.render({ model: m, el });
  return { m, el, cleanup };
}
const click = (t: Element) => t.dispatchEvent(new MouseEvent("click", { bubbles: true }));
const running = (el: Element) => Array.from(el.querySelectorAll(".tlw-running")).map((g) => Number(g.getAttribute("data-node")));

describe("anywidget entry", () => {
  it("draws the model trait with the initial selection and step", () => {
    const { el } = setup({ selected: N.relu, step: RELU_STEP });
    expect(el.querySelectorAll("svg.tlw-grad g.tlw-gnode")).toHaveLength(18);
    expect(el.querySelector(".tlw-gselected")!.getAttribute("data-node")).toBe(String(N.relu));
    expect(running(el)).toEqual([N.relu]);
    expect(el.querySelector(".tlw-details .tlw-d-name")!.textContent).toBe(`#${N.relu} ReluBackward0`);
  });

  it("a node click sets and saves `selected`", () => {
    const { m, el } = setup();
    click(el.querySelector(`g[data-node="${N.addmm}"] rect`)!);
    expect(m.sets).toEqual([["selected", N.addmm]]);
    expect(m.saves).toBe(1);
    expect(el.querySelector(".tlw-details")!.textContent).toContain("AddmmBackward0");
  });

  it("step buttons set and save `step`", () => {
    const { m, el } = setup();
    const next = el.querySelector('button[data-action="next"]')!;
    click(next);
    click(next);
    expect(m.sets).toEqual([["step", 0], ["step", 1]]);
    expect(m.saves).toBe(2);
    expect(running(el)).toEqual([1]);
  });

  it("the focus action sets `hops` and `focus` in one save; a new model from Python redraws", () => {
    const { m, el } = setup({ selected: N.repAddmm });
    el.querySelector<HTMLInputElement>("input.tlw-hops")!.value = "1";
    click(el.querySelector('button[data-action="focus"]')!);
    expect(m.sets).toEqual([["hops", 1], ["focus", N.repAddmm]]);
    expect(m.saves).toBe(1);
    m.fromPython("model", focusedModel()); // what Python answers
    expect(el.querySelectorAll("g.tlw-gnode")).toHaveLength(focusedModel().nodes.length);
    expect(el.querySelector(".tlw-gselected")!.getAttribute("data-node")).toBe(String(N.repAddmm));
    expect(el.querySelector<HTMLButtonElement>('button[data-action="unfocus"]')!.hidden).toBe(false);
    click(el.querySelector('button[data-action="unfocus"]')!);
    expect(m.values["focus"]).toBeNull();
  });

  it("shows `selected` and `step` set from Python without echoing them", () => {
    const { m, el } = setup();
    m.fromPython("selected", N.leafBias);
    m.fromPython("step", 3);
    expect(el.querySelector(".tlw-gselected")!.getAttribute("data-node")).toBe(String(N.leafBias));
    expect(running(el)).toEqual([N.outBias]);
    expect(el.querySelector(".tlw-step-label")!.textContent).toBe("step 3/28: AccumulateGrad");
    m.fromPython("selected", null);
    expect(el.querySelectorAll(".tlw-gselected")).toHaveLength(0);
    expect(m.saves).toBe(0);
    expect(m.sets).toEqual([]);
  });

  it("says so instead of failing on an empty model, and the cleanup removes everything", () => {
    const { m, el, cleanup } = setup({ model: {} });
    expect(el.textContent).toContain("no grad_fn graph model");
    m.fromPython("model", gradModel());
    expect(el.querySelectorAll("g.tlw-gnode")).toHaveLength(18);
    expect(m.count()).toBe(5);
    cleanup();
    expect(m.count()).toBe(0);
    expect(el.querySelector("svg")).toBeNull();
  });
});
