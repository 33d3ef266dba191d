import { afterEach, describe, expect, it, vi } from "vitest";
import widget from "../src/memory/index";
import { fitWidth, MAX_WIDTH, MIN_WIDTH } from "../src/memory/view";
import { themeCss } from "../src/common/theme";
import { CLICKS, STATE_EVENT, memModel, memState, stacksModel, timeModel } from "./memory_fixture";
import { FakeModel } from "./fake_model";

function setup(values: Record<string, unknown> = {}) {
  const m = new FakeModel({ model: memModel(), panel: {}, selected_event: null, hovered_band: null, x_axis: "event", ...values });
  const el = document.createElement("div");
  document.body.appendChild(el);
  const cleanup = widget.render({ model: m, el });
  return { m, el, cleanup };
}
const plotY = () => memModel().plot.y + 50;

describe("memory widget entry", () => {
  it("draws the timeline and, with a selected event, its state panel and marker", () => {
    const { el } = setup({ selected_event: STATE_EVENT, panel: memState() });
    expect(el.querySelectorAll("svg.tlw-mw-timeline g.bd")).toHaveLength(2);
    const state = el.querySelector("svg.tlw-mw-state")!;
    expect(state.getAttribute("data-event")).toBe(String(STATE_EVENT));
    expect(state.querySelectorAll("rect.seg")).toHaveLength(2);
    const mark = el.querySelector<SVGPathElement>("path.mark")!;
    expect(mark.style.display).toBe("");
    expect(mark.getAttribute("d")).toBe(`M${memState().x} ${memModel().plot.y}V${memModel().plot.y + memModel().plot.h}`);
  });

  it("a click on the timeline selects the nearest event, saves it, and waits for Python's panel", () => {
    const { m, el } = setup();
    const svg = el.querySelector("svg.tlw-mw-timeline")!;
    const [x, ev] = CLICKS[2]!;
    svg.dispatchEvent(new MouseEvent("click", { bubbles: true, clientX: x, clientY: plotY() }));
    expect(m.sets).toEqual([["selected_event", ev]]);
    expect(m.saves).toBe(1);
    expect(el.querySelector(".tlw-mw-empty")!.textContent).toContain(`event ${ev}`);
    m.fromPython("panel", { ...memState(), index: ev });
    expect(el.querySelector("svg.tlw-mw-state")!.getAttribute("data-event")).toBe(String(ev));
    // the same event again sends nothing
    svg.dispatchEvent(new MouseEvent("click", { bubbles: true, clientX: x, clientY: plotY() }));
    expect(m.saves).toBe(1);
  });

  it("clicks outside the plot's height select nothing", () => {
    const { m, el } = setup();
    el.querySelector("svg.tlw-mw-timeline")!.dispatchEvent(new MouseEvent("click", { bubbles: true, clientX: 200, clientY: 2 }));
    expect(m.sets).toEqual([]);
  });

  it("hovering a band shows its stack in a tooltip and sets hovered_band", () => {
    const { m, el } = setup();
    const rect = el.querySelector('g.bd[data-band="1"] rect')!;
    rect.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: 300, clientY: 100 }));
    const tip = el.querySelector<HTMLElement>(".tlw-mw-tip")!;
    expect(tip.hidden).toBe(false);
    expect(tip.textContent).toBe(`${memModel().bands[1]!.label}\n${memModel().bands[1]!.stack}`);
    expect(m.sets).toEqual([["hovered_band", 1]]);
    rect.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: 301, clientY: 100 }));
    expect(m.sets).toHaveLength(1); // same band: nothing new to send
    el.querySelector("svg.tlw-mw-timeline")!.dispatchEvent(new MouseEvent("mouseleave"));
    expect(tip.hidden).toBe(true);
    expect(m.sets).toEqual([["hovered_band", 1], ["hovered_band", null]]);
  });

  it("the axis switch sets x_axis; Python's new model redraws; selection from Python moves the marker", () => {
    const { m, el } = setup();
    el.querySelector<HTMLButtonElement>('button[data-axis="time"]')!.click();
    expect(m.sets).toEqual([["x_axis", "time"]]);
    m.fromPython("model", timeModel());
    expect(el.querySelector('button[data-axis="time"]')!.getAttribute("aria-pressed")).toBe("true");
    expect(el.textContent).toContain("time since the first event");
    m.fromPython("selected_event", 7);
    expect(el.querySelector<SVGPathElement>("path.mark")!.style.display).toBe("");
    expect(m.sets).toHaveLength(1);
  });

  it("says so on an empty model; the cleanup removes listeners and DOM", () => {
    const { m, el, cleanup } = setup({ model: {} });
    expect(el.textContent).toContain("no memory timeline model");
    m.fromPython("model", memModel());
    expect(el.querySelectorAll("g.bd")).toHaveLength(2);
    expect(m.count()).toBe(3);
    cleanup();
    expect(m.count()).toBe(0);
    expect(el.querySelector("svg")).toBeNull();
  });

  it("dark theme: every colour is a theme variable, set by CSS, with the theme's CSS in the root", () => {
    const { el } = setup({ selected_event: STATE_EVENT, panel: memState() });
    const root = el.querySelector(".tlw-mw")!;
    expect(root.classList.contains("tlw-theme")).toBe(true);
    expect(root.querySelector(":scope > style")!.textContent!.startsWith(themeCss())).toBe(true);
    const styles = Array.from(el.querySelectorAll("style")).map((s) => s.textContent!.replace(themeCss(), ""));
    for (const css of styles) expect(css).not.toMatch(/#[0-9a-f]{3,6}\b/i);
    for (const node of Array.from(el.querySelectorAll("*"))) {
      expect(node.getAttribute("fill")).toBeNull();
      expect(node.getAttribute("stroke")).toBeNull();
    }
  });

  it("a trace without times: the wall-clock button is disabled and says why", () => {
    const { m, el } = setup({ model: stacksModel() });
    const b = el.querySelector<HTMLButtonElement>('button[data-axis="time"]')!;
    expect(b.disabled).toBe(true);
    expect(el.querySelector(".tlw-mw-why")!.textContent).toContain("no timestamps");
    b.click();
    expect(m.sets).toEqual([]);
    const { el: el2 } = setup();
    expect(el2.querySelector<HTMLButtonElement>('button[data-axis="time"]')!.disabled).toBe(false);
    expect(el2.querySelector(".tlw-mw-why")).toBeNull();
  });

  it("the tooltip shows the learner's frames first and folds library frames", () => {
    const { el } = setup({ model: stacksModel() });
    el.querySelector('g.bd[data-band="0"] rect')!.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: 300, clientY: 100 }));
    const lines = el.querySelector<HTMLElement>(".tlw-mw-tip")!.textContent!.split("\n");
    expect(lines.slice(1)).toEqual(["step (<cell>:7)", "main (/home/me/train.py:40)",
      "… 3 library frames (torch, IPython, ipykernel)"]);
  });
});

describe("the picture fits the page", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.useRealTimers();
  });

  it("fitWidth clamps to what Python draws well", () => {
    expect([fitWidth(300), fitWidth(700.6), fitWidth(5000)]).toEqual([MIN_WIDTH, 700, MAX_WIDTH]);
  });

  it("a width change the page notices asks Python for a new layout (debounced, ignoring a scroll bar's worth)", () => {
    vi.useFakeTimers();
    const observers: (() => void)[] = [];
    vi.stubGlobal("ResizeObserver", class {
      constructor(cb: () => void) { observers.push(cb); }
      observe() {}
      disconnect() {}
    });
    let width = 700;
    const spy = vi.spyOn(HTMLElement.prototype, "getBoundingClientRect").mockImplementation(() => ({ width } as DOMRect));
    const { m } = setup();
    observers[0]!();
    observers[0]!();
    vi.advanceTimersByTime(200);
    expect(m.sets).toEqual([["width", 700]]);
    m.fromPython("model", { ...memModel(), width: 700 });
    width = 710; // within the slack: keep the layout
    observers[observers.length - 1]!();
    vi.advanceTimersByTime(200);
    expect(m.sets).toHaveLength(1);
    spy.mockRestore();
  });

  it("a fixed width (fit_width false) is left alone", () => {
    const observers: (() => void)[] = [];
    vi.stubGlobal("ResizeObserver", class {
      constructor(cb: () => void) { observers.push(cb); }
      observe() {}
      disconnect() {}
    });
    setup({ fit_width: false });
    expect(observers).toHaveLength(0);
  });
});
