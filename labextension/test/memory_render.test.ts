import { describe, expect, it } from "vitest";
import { columnOf, eventAt, type MemoryModel, type MemoryState } from "../src/memory/model";
import { drawState, drawTimeline, num, svgRoot } from "../src/memory/render";
import { CLICKS, PYTHON_SVG, PYTHON_SVGS, aggregatedModel, memModel, memState, timeModel } from "./memory_fixture";

/** Every drawn element in document order with the attributes that fix what is drawn where. */
function drawn(root: Element): string[][] {
  return Array.from(root.querySelectorAll("rect, text, path, g, title")).map((n) => {
    const a = (k: string) => n.getAttribute(k) ?? "";
    switch (n.tagName.toLowerCase()) {
      case "rect":
        return ["rect", a("class"), a("x"), a("y"), a("width"), a("height"), a("fill")];
      case "text":
        return ["text", a("class"), a("x"), a("y"), n.textContent ?? ""];
      case "path":
        return ["path", a("class"), a("d")];
      case "title":
        return ["title", n.textContent ?? ""];
      default:
        return ["g", a("class"), a("data-band")];
    }
  });
}

function parse(svgText: string): Element {
  const doc = new DOMParser().parseFromString(svgText, "image/svg+xml");
  expect(doc.querySelector("parsererror")).toBeNull();
  return doc.documentElement;
}

function compareTimeline(model: MemoryModel, svgText: string) {
  const py = parse(svgText);
  const ours = svgRoot(document, model.width, model.height);
  drawTimeline(ours, model);
  for (const k of ["viewBox", "class", "font-family", "font-size"]) expect(ours.getAttribute(k)).toBe(py.getAttribute(k));
  expect(ours.querySelector("style")!.textContent).toBe(py.querySelector("style")!.textContent);
  const theirs = drawn(py);
  expect(drawn(ours)).toEqual(theirs);
  return theirs;
}

describe("geometry equals memory_svg", () => {
  it("segments.json on the event axis: bands with their pending part, curves, ticks, legend", () => {
    const model = memModel();
    const theirs = compareTimeline(model, PYTHON_SVG);
    expect(theirs.filter((d) => d[0] === "g")).toHaveLength(2);
    // both frees complete later than requested: the record_stream one (events 4–8) and the 15 MB one (5–6)
    const pend = theirs.filter((d) => d[0] === "rect" && d[1]!.startsWith("band pend")).map((d) => Number(d[4]));
    expect(pend).toHaveLength(2);
    expect(pend[0]).toBeCloseTo((4 * 860) / 10, 0);
    expect(pend[1]).toBeCloseTo(860 / 10, 0);
    const lines = theirs.filter((d) => d[0] === "path" && d[1]!.startsWith("c "));
    expect(lines).toHaveLength(6); // the three curves, then their samples in the legend
    expect(lines.slice(3).map((d) => d[1])).toEqual(["c c-res", "c c-act", "c c-all"]);
    const texts = theirs.filter((d) => d[0] === "text").map((d) => d[4]);
    expect(texts).toContain("bands: one per allocation, colour = block size:");
    expect(texts.some((t) => t!.startsWith("active:") && t!.includes("dashed"))).toBe(true);
  });

  it("the wall-clock axis", () => {
    const theirs = compareTimeline(timeModel(), PYTHON_SVGS.time);
    expect(theirs.some((d) => d[0] === "text" && d[4] === "time since the first event")).toBe(true);
  });

  it("aggregated allocations: one band and the grey area, and the note says so", () => {
    const theirs = compareTimeline(aggregatedModel(), PYTHON_SVGS.aggregated);
    expect(theirs.filter((d) => d[0] === "path" && d[1] === "oth")).toHaveLength(1);
    expect(theirs.some((d) => d[0] === "text" && d[1] === "note" && d[4]!.includes("the other 2 are the grey area"))).toBe(true);
  });

  it("the state panel: one bar per segment with its blocks, and the simulator's explanation", () => {
    const s: MemoryState = memState();
    const py = parse(PYTHON_SVGS.state);
    const ours = svgRoot(document, s.width, s.height);
    drawState(ours, s);
    expect(ours.getAttribute("viewBox")).toBe(py.getAttribute("viewBox"));
    expect(drawn(ours)).toEqual(drawn(py));
    expect(ours.querySelectorAll("rect.seg")).toHaveLength(2);
    expect(ours.querySelectorAll("rect.blk.b-pending")).toHaveLength(1);
    expect(Array.from(ours.querySelectorAll("text.expl")).map((t) => t.textContent).join(" ")).toContain("record_stream");
  });

  it("formats numbers like Python's f'{v:.1f}' without '.0'", () => {
    expect([num(44.25), num(44.75), num(3), num(12.34), num(-1.25), num(2.5)]).toEqual(["44.2", "44.8", "3", "12.3", "-1.2", "2.5"]);
  });
});

describe("clicks map to events as Python says", () => {
  it("eventAt follows col_event, clamped to the plot", () => {
    const model = memModel();
    for (const [x, ev] of CLICKS) expect(eventAt(model, x)).toBe(ev);
    expect(eventAt(model, 0)).toBe(0);
    expect(eventAt(model, 10_000)).toBe(model.n_events - 1);
    expect(eventAt({ ...model, col_event: [] }, 100)).toBeNull();
  });

  it("columnOf puts the marker in a column whose event is the selected one", () => {
    const model = memModel();
    for (let i = 0; i < model.n_events; i++) {
      const x = columnOf(model, i)!;
      expect(eventAt(model, x)).toBe(i);
    }
  });
});
