import { describe, expect, it } from "vitest";
import { stepState } from "../src/gradgraph/model";
import { applyState, drawGraph, legendItems, num, svgSize } from "../src/gradgraph/render";
import { N, PYTHON_FOCUSED_SVG, PYTHON_SVG, RELU_STEP, focusedModel, gradModel } from "./gradgraph_fixture";
import type { GradGraphModel } from "../src/gradgraph/model";

/** Every drawn rect, text and path in document order, with the attributes that fix what is drawn where. */
function drawn(root: Element): string[][] {
  return Array.from(root.querySelectorAll("rect, text, path, g")).map((n) => {
    const a = (k: string) => n.getAttribute(k) ?? "";
    const cls = a("class").split(/\s+/).filter((c) => c && !c.startsWith("tlw-")).join(" ");
    switch (n.tagName.toLowerCase()) {
      case "rect":
        return ["rect", cls, a("x"), a("y"), a("width"), a("height"), a("rx")];
      case "text":
        return ["text", cls, a("x"), a("y"), n.textContent ?? ""];
      case "path":
        return ["path", cls, a("d"), a("fill")];
      default:
        return ["g", cls, n.querySelector(":scope > title")?.textContent ?? ""];
    }
  });
}

function compareWithPython(model: GradGraphModel, svgText: string) {
  const py = new DOMParser().parseFromString(svgText, "image/svg+xml");
  expect(py.querySelector("parsererror")).toBeNull();
  const pyRoot = py.documentElement;
  const ours = drawGraph(document, model);
  for (const k of ["viewBox", "font-family", "font-size"]) expect(ours.getAttribute(k)).toBe(pyRoot.getAttribute(k));
  expect(ours.getAttribute("viewBox")).toBe(`0 0 ${pyRoot.getAttribute("width")} ${pyRoot.getAttribute("height")}`);
  const theirs = drawn(pyRoot);
  expect(drawn(ours)).toEqual(theirs);
  return { ours, theirs };
}

describe("geometry equals grad_graph_svg", () => {
  it("the whole graph: every node box, label, edge polyline, group box and note", () => {
    const model = gradModel();
    const { ours, theirs } = compareWithPython(model, PYTHON_SVG);
    expect(theirs.filter((d) => d[0] === "path" && d[1] === "e")).toHaveLength(model.edges.length);
    const legend = legendItems(model, svgSize(model).w).items;
    expect(legend.map((it) => it.cls)).toEqual(["k-op", "k-leaf", "k-group"]);
    expect(theirs.filter((d) => d[0] === "rect")).toHaveLength(model.nodes.length + 1 + legend.length); // + group box, legend
    expect(Array.from(ours.querySelectorAll("g.lg text")).map((t) => t.textContent)).toEqual(legend.map((it) => it.label));
    expect(ours.querySelectorAll("g.tlw-gnode")).toHaveLength(18);
    expect(ours.querySelector(`g[data-node="${N.group}"]`)!.getAttribute("class")).toBe("n k-group tlw-gnode");
    expect(ours.querySelector("text.note")!.textContent).toContain("into one group node");
  });

  it("a focused view: centre, boundary nodes with +hidden counts", () => {
    const { ours } = compareWithPython(focusedModel(), PYTHON_FOCUSED_SVG);
    expect(ours.querySelector(`g[data-node="${N.repAddmm}"]`)!.classList.contains("center")).toBe(true);
    expect(ours.querySelectorAll("text.hid").length).toBeGreaterThan(0);
  });

  it("node box and edge ends sit at the model's coordinates", () => {
    const model = gradModel();
    const svg = drawGraph(document, model);
    const nd = model.nodes.find((n) => n.id === N.addmm)!;
    const rect = svg.querySelector(`g[data-node="${N.addmm}"] > rect`)!;
    expect([rect.getAttribute("x"), rect.getAttribute("y"), rect.getAttribute("width"), rect.getAttribute("height")]).toEqual(
      [num(nd.x), num(nd.y), num(nd.w), num(nd.h)],
    );
    const e = model.edges.find((x) => x.src === N.addmm)!;
    const d = svg.querySelector(`path.e[data-src="${e.src}"][data-dst="${e.dst}"]`)!.getAttribute("d")!;
    expect(d.startsWith(`M${num(nd.x + nd.w / 2)} ${num(nd.y + nd.h)}`)).toBe(true);
  });

  it("formats numbers like Python's f'{v:.1f}' without '.0' (half-even on exact ties)", () => {
    expect([num(44.25), num(44.75), num(3), num(12.34), num(12.36), num(0.05), num(-1.25), num(2.5)]).toEqual(
      ["44.2", "44.8", "3", "12.3", "12.4", "0.1", "-1.2", "2.5"],
    );
  });

  it("widens for long notes as Python does", () => {
    const model = gradModel();
    model.notes = ["x".repeat(200)];
    const w = 200 * 6.7 * 0.92 + 32;
    expect(svgSize(model)).toEqual({ w, h: model.height + 16 + legendItems(model, w).height });
    expect(legendItems(model, w).height).toBe(22); // one row: 18 px, and 4 below
  });
});

describe("applyState", () => {
  const cls = (svg: Element, c: string) => Array.from(svg.querySelectorAll(`.${c}`)).map((g) => Number(g.getAttribute("data-node")));

  it("marks the running node, the leaf getting .grad, done and released nodes per step", () => {
    const model = gradModel();
    const svg = drawGraph(document, model);
    applyState(svg, model, null, -1);
    expect(cls(svg, "tlw-running")).toEqual([]);
    expect(cls(svg, "tlw-released")).toEqual([]);
    applyState(svg, model, N.addmm, 3);
    expect(cls(svg, "tlw-running")).toEqual([N.outBias]);
    expect(cls(svg, "tlw-grad-leaf")).toEqual([N.outBias]);
    expect(cls(svg, "tlw-gselected")).toEqual([N.addmm]);
    expect(cls(svg, "tlw-done").sort((a, b) => a - b)).toEqual([0, 1, 2]);
    expect(cls(svg, "tlw-released").sort((a, b) => a - b)).toEqual([1, 2]); // Pow and the head's Addmm
    applyState(svg, model, null, RELU_STEP);
    expect(cls(svg, "tlw-running")).toEqual([N.relu]);
    expect(cls(svg, "tlw-released")).toContain(N.relu);
    expect(cls(svg, "tlw-released")).toContain(N.group);
    applyState(svg, model, null, RELU_STEP - 1);
    expect(cls(svg, "tlw-released")).not.toContain(N.relu);
  });

  it("stepState: inside a collapsed block the group node runs", () => {
    const model = gradModel();
    expect(stepState(model, 6).running).toBe(N.group);
    expect(stepState(model, 9).leaves).toEqual([N.group]);
    expect(stepState(model, -1)).toEqual({ running: null, leaves: [], done: new Set(), freed: new Set() });
  });
});
