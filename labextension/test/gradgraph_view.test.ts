import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { svgSize } from "../src/gradgraph/render";
import { renderGradGraph, type GradGraphView, type ViewOptions } from "../src/gradgraph/view";
import { N, PYTHON_SVG, RELU_STEP, gradModel } from "./gradgraph_fixture";

let container: HTMLElement;
beforeEach(() => {
  container = document.createElement("div");
  document.body.appendChild(container);
});
afterEach(() => container.remove());

const click = (t: Element) => t.dispatchEvent(new MouseEvent("click", { bubbles: true }));
const nodeG = (v: GradGraphView, id: number) => v.svg.querySelector(`g.tlw-gnode[data-node="${id}"]`)!;
const action = (v: GradGraphView, a: string) => v.root.querySelector<HTMLButtonElement>(`button[data-action="${a}"]`)!;
const running = (v: GradGraphView) => Array.from(v.svg.querySelectorAll(".tlw-running")).map((g) => g.getAttribute("data-node"));
const details = (v: GradGraphView) => v.root.querySelector(".tlw-details")!;
const label = (v: GradGraphView) => v.root.querySelector(".tlw-step-label")!.textContent;

function setup(opts: ViewOptions = {}) {
  const calls = { select: [] as (number | null)[], step: [] as number[], focus: [] as [number | null, number][] };
  const view = renderGradGraph(container, gradModel(), {
    onSelect: (id) => calls.select.push(id),
    onStep: (k) => calls.step.push(k),
    onFocus: (f, h) => calls.focus.push([f, h]),
    ...opts,
  });
  return { view, calls };
}

describe("click → selected + details", () => {
  it("selects the clicked node, reports it, and shows its name, saved tensors and state", () => {
    const { view, calls } = setup();
    expect(details(view).textContent).toContain("Click a node");
    click(nodeG(view, N.addmm).querySelector("rect")!);
    expect(calls.select).toEqual([N.addmm]);
    expect(view.selected).toBe(N.addmm);
    expect(nodeG(view, N.addmm).classList.contains("tlw-gselected")).toBe(true);
    expect(view.svg.querySelectorAll(".tlw-gselected")).toHaveLength(1);
    const d = details(view);
    expect(d.querySelector(".tlw-d-name")!.textContent).toBe(`#${N.addmm} AddmmBackward0`);
    const rows = Array.from(d.querySelectorAll("tr.tlw-saved-row")).map((r) => Array.from(r.children).map((c) => c.textContent));
    expect(rows).toEqual([
      ["mat1 =input", "[2, 4]", "float32", "32 B"],
      ["mat2 =input", "[4, 1]", "float32", "16 B"],
    ]);
    expect(d.textContent).toContain("runs later (step 2)");
    click(nodeG(view, N.addmm).querySelector("text")!); // a second click clears
    expect(calls.select).toEqual([N.addmm, null]);
    expect(view.svg.querySelectorAll(".tlw-gselected")).toHaveLength(0);
  });

  it("summarises the many steps a collapsed group ran", () => {
    const { view } = setup({ selected: N.group, step: 20 });
    expect(details(view).querySelector(".tlw-d-state td")!.textContent).toBe("ran earlier (12 steps, 6–17)");
    view.setSelected(N.relu);
    expect(details(view).querySelector(".tlw-d-state td")!.textContent).toBe("ran earlier (step 19)");
  });

  it("group nodes describe the collapsed blocks and cannot be a focus", () => {
    const { view } = setup({ selected: N.group });
    const d = details(view);
    expect(d.querySelector(".tlw-d-group")!.textContent).toBe(
      "collapsed ×2: h.1–2 has the structure of h.0 (drawn once, ×3); 12 nodes folded, saved 256 B",
    );
    expect(action(view, "focus").disabled).toBe(true);
    view.setSelected(N.leafBias);
    expect(details(view).querySelector(".tlw-d-block")!.textContent).toBe("in block h.0, drawn once ×3");
    expect(details(view).textContent).toContain("h.0.fc.bias");
  });

  it("a selection set from outside is shown without reporting it back", () => {
    const { view, calls } = setup();
    view.setSelected(N.relu);
    expect(nodeG(view, N.relu).classList.contains("tlw-gselected")).toBe(true);
    view.setSelected(12345);
    expect(view.selected).toBeNull();
    expect(calls.select).toEqual([]);
  });
});

describe("step controls", () => {
  it("next/prev move the running node and report the step", () => {
    const { view, calls } = setup();
    expect(label(view)).toBe("before backward (steps 0–28)");
    expect(action(view, "prev").disabled).toBe(true);
    click(action(view, "next"));
    expect(running(view)).toEqual([String(N.root)]);
    expect(label(view)).toBe("step 0/28: MeanBackward0");
    click(action(view, "next"));
    click(action(view, "next"));
    click(action(view, "next"));
    expect(running(view)).toEqual([String(N.outBias)]);
    expect(Array.from(view.svg.querySelectorAll(".tlw-grad-leaf")).map((g) => g.getAttribute("data-node"))).toEqual([String(N.outBias)]);
    click(action(view, "prev"));
    expect(running(view)).toEqual([String(N.addmm)]);
    expect(calls.step).toEqual([0, 1, 2, 3, 2]);
    const slider = view.root.querySelector<HTMLInputElement>("input.tlw-step-slider")!;
    expect(slider.value).toBe("2");
  });

  it("greys saved tensors freed by the current step in the details panel and the picture", () => {
    const { view } = setup({ selected: N.relu, step: RELU_STEP - 1 });
    const row = () => details(view).querySelector("tr.tlw-saved-row")!;
    expect(row().classList.contains("tlw-freed")).toBe(false);
    expect(nodeG(view, N.relu).classList.contains("tlw-released")).toBe(false);
    view.setStep(RELU_STEP);
    expect(row().classList.contains("tlw-freed")).toBe(true);
    expect(row().lastElementChild!.textContent).toBe("freed (32 B)");
    expect(details(view).textContent).toContain("running now");
    expect(nodeG(view, N.relu).classList.contains("tlw-released")).toBe(true);
    view.setStep(-1);
    expect(row().classList.contains("tlw-freed")).toBe(false);
  });

  it("the slider jumps, play advances on a timer and pauses at the end", () => {
    vi.useFakeTimers();
    try {
      const { view, calls } = setup();
      const slider = view.root.querySelector<HTMLInputElement>("input.tlw-step-slider")!;
      slider.value = "26";
      slider.dispatchEvent(new Event("input"));
      expect(view.step).toBe(26);
      click(action(view, "play"));
      expect(view.playing).toBe(true);
      expect(action(view, "play").textContent).toBe("‖ pause");
      vi.advanceTimersByTime(700);
      expect(view.step).toBe(27);
      vi.advanceTimersByTime(700);
      expect(view.step).toBe(28);
      expect(view.playing).toBe(false);
      expect(calls.step).toEqual([26, 27, 28]);
      expect(action(view, "next").disabled).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it("without a recording the step controls are left out, zoom stays", () => {
    const model = gradModel();
    model.steps = [];
    const view = renderGradGraph(container, model);
    for (const a of ["prev", "play", "next"]) expect(action(view, a).hidden).toBe(true);
    expect(view.root.querySelector<HTMLElement>(".tlw-step-slider")!.hidden).toBe(true);
    expect(action(view, "fit").hidden).toBe(false);
  });
});

describe("focus action", () => {
  it("sends the selected node and the hops typed in", () => {
    const { view, calls } = setup({ selected: N.repAddmm, hops: 3 });
    const input = details(view).querySelector<HTMLInputElement>("input.tlw-hops")!;
    expect(input.value).toBe("3");
    input.value = "1";
    click(action(view, "focus"));
    expect(calls.focus).toEqual([[N.repAddmm, 1]]);
    expect(action(view, "unfocus").hidden).toBe(true);
    view.setFocus(N.repAddmm, 1);
    expect(action(view, "unfocus").hidden).toBe(false);
    click(action(view, "unfocus"));
    expect(calls.focus).toEqual([[N.repAddmm, 1], [null, 1]]);
  });
});

describe("pan and zoom change only the viewBox", () => {
  it("opens on the whole picture, zooms with buttons and the wheel, pans by dragging, fits back", () => {
    const { view, calls } = setup();
    const full = view.svg.getAttribute("viewBox");
    const py = new DOMParser().parseFromString(PYTHON_SVG, "image/svg+xml").documentElement;
    expect(full).toBe(py.getAttribute("viewBox")); // the same picture as the static SVG
    const size = svgSize(gradModel());
    const rectBefore = nodeG(view, N.addmm).querySelector("rect")!.outerHTML;
    click(action(view, "zoom-in"));
    const z = view.viewBox();
    expect(z.w).toBeCloseTo(size.w / 1.25, 5);
    const wheel = new WheelEvent("wheel", { deltaY: -200, clientX: 100, clientY: 50, bubbles: true, cancelable: true });
    view.svg.dispatchEvent(wheel);
    expect(wheel.defaultPrevented).toBe(true); // the notebook does not scroll under the graph
    const w = view.viewBox();
    const f = z.w / w.w;
    expect(f).toBeCloseTo(Math.exp(200 * 0.0015), 5);
    // the point under the pointer stays put (jsdom has no layout: 1 px = 1 unit, so it is z.x + 100)
    expect(w.x).toBeCloseTo(z.x + 100 - 100 / f, 5);
    expect(w.y).toBeCloseTo(z.y + 50 - 50 / f, 5);
    view.svg.dispatchEvent(new MouseEvent("mousedown", { button: 0, clientX: 100, clientY: 100, bubbles: true }));
    document.dispatchEvent(new MouseEvent("mousemove", { clientX: 60, clientY: 70, bubbles: true }));
    document.dispatchEvent(new MouseEvent("mouseup", { clientX: 60, clientY: 70, bubbles: true }));
    expect(view.viewBox().x).toBeCloseTo(w.x + 40, 5); // jsdom has no layout: 1 px = 1 unit
    expect(view.viewBox().y).toBeCloseTo(w.y + 30, 5);
    click(nodeG(view, N.addmm).querySelector("rect")!); // the click ending a drag does not select
    expect(calls.select).toEqual([]);
    expect(nodeG(view, N.addmm).querySelector("rect")!.outerHTML).toBe(rectBefore);
    click(action(view, "fit"));
    expect(view.svg.getAttribute("viewBox")).toBe(full);
  });

  it("a tall graph opens on its roots at scale 1, and stepping follows the running node", () => {
    const model = gradModel();
    for (const n of model.nodes) n.y *= 10;
    model.height *= 10; // 7020 units tall
    const view = renderGradGraph(container, model);
    const vb = view.viewBox();
    expect([vb.y, vb.h]).toEqual([0, 560]);
    view.setStep(28); // the last AccumulateGrad, far down
    const leaf = model.nodes.find((n) => n.id === model.steps[28]!.node)!;
    const now = view.viewBox();
    expect(leaf.y).toBeGreaterThanOrEqual(now.y);
    expect(leaf.y + leaf.h).toBeLessThanOrEqual(now.y + now.h);
  });
});

it("destroy removes the view and stops playing", () => {
  const { view } = setup();
  view.play();
  view.destroy();
  expect(view.playing).toBe(false);
  expect(container.children).toHaveLength(0);
});
