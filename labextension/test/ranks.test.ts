import { describe, expect, it } from "vitest";
import widget from "../src/ranks/index";
import { niceStep, tickValues } from "../src/common/zoom";
import { describe as describeComm, fitWidth, fullRange, isRanksModel, renderRanks, zoomTo, type RanksModel } from "../src/ranks/render";
import { FakeModel } from "./fake_model";
import models from "./fixtures/ranks_models.json";

// Python's ranks_model of the saved 2-rank DDP and FSDP2 runs (tests/render/test_distributed_render.py keeps
// this file current).
const DDP = models.ddp as unknown as RanksModel;
const FSDP = models.fsdp as unknown as RanksModel;

function draw(m: RanksModel, bucket: number | null = null, onSelect?: (b: number) => void) {
  const host = document.createElement("div");
  document.body.appendChild(host);
  const view = renderRanks(host, m, onSelect ? { bucket, onSelect } : { bucket });
  return { host, view };
}

const sel = (host: Element) =>
  [...host.querySelectorAll("g.tlw-comm-g")].filter((g) => g.querySelector("rect")!.classList.contains("tlw-sel"));

describe("rank lanes", () => {
  it("accepts only a ranks model", () => {
    expect(isRanksModel(DDP)).toBe(true);
    expect(isRanksModel({ kind: "lanes" })).toBe(false);
    expect(isRanksModel(null)).toBe(false);
  });

  it("draws one lane per rank and row, every node and every bucket as Python placed them", () => {
    const { host } = draw(DDP);
    const svg = host.querySelector("svg.tlw-ranks.tlw-theme")!;
    expect(svg.getAttribute("viewBox")).toBe(`0 0 ${DDP.width} ${DDP.height}`);
    expect(svg.querySelectorAll("rect.tlw-lane")).toHaveLength(DDP.lanes.length);
    expect(svg.querySelectorAll("rect.tlw-node")).toHaveLength(DDP.nodes.length);
    const groups = svg.querySelectorAll("g.tlw-comm-g");
    expect(groups).toHaveLength(DDP.comms.length);
    DDP.comms.forEach((c, i) => {
      const g = groups[i]!;
      const r = g.querySelector("rect")!;
      expect(Number(r.getAttribute("x"))).toBe(c.x);
      expect(Number(r.getAttribute("width"))).toBe(c.w);
      expect(r.getAttribute("class")).toContain(`tlw-c${c.cat}`);
      expect(g.getAttribute("data-bucket")).toBe(String(c.bucket));
    });
    // colours only from theme variables
    const css = host.querySelector("style")!.textContent!;
    expect(css).toContain("var(--tlw-tint1)");
    expect(svg.outerHTML).not.toMatch(/(fill|stroke)="#/);
  });

  it("hover says a bucket's parameters and bytes; click selects it on every rank", () => {
    const picked: number[] = [];
    const { host } = draw(DDP, null, (b) => picked.push(b));
    const info = host.querySelector(".tlw-ranks-info")!;
    const b0 = host.querySelector('g.tlw-comm-g[data-rank="1"][data-bucket="0"]')!;
    b0.dispatchEvent(new MouseEvent("mouseenter"));
    expect(info.textContent).toBe(`rank 1 bucket 0 (4.6 KiB): ${DDP.buckets[0]!.params.join(", ")}`);
    b0.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(picked).toEqual([0]);
    expect(sel(host).map((g) => [g.getAttribute("data-rank"), g.getAttribute("data-bucket")])).toEqual([
      ["0", "0"],
      ["1", "0"],
    ]);
    b0.dispatchEvent(new MouseEvent("mouseleave"));
    expect(info.textContent).toContain("selected bucket 0");
    b0.dispatchEvent(new MouseEvent("click", { bubbles: true })); // again: unselect
    expect(picked).toEqual([0, -1]);
    expect(sel(host)).toHaveLength(0);
  });

  it("draws FSDP collectives (not clickable buckets) and the bytes-held line", () => {
    const picked: number[] = [];
    const { host } = draw(FSDP, null, (b) => picked.push(b));
    expect(host.querySelectorAll("polyline.tlw-mem")).toHaveLength(2);
    const g = host.querySelector("g.tlw-comm-g")!;
    expect(g.hasAttribute("data-bucket")).toBe(false);
    g.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(picked).toEqual([]);
    expect(describeComm(FSDP.comms[0]!)).toMatch(/^rank \d all-gather /);
  });
});

describe("ranks anywidget entry", () => {
  it("syncs the bucket trait both ways and cleans up", () => {
    const model = new FakeModel({ model: DDP, bucket: 2 });
    const el = document.createElement("div");
    const cleanup = widget.render({ model, el });
    expect(sel(el).map((g) => g.getAttribute("data-bucket"))).toEqual(["2", "2"]);
    el.querySelector('g.tlw-comm-g[data-bucket="1"]')!.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(model.sets).toEqual([["bucket", 1]]);
    expect(model.saves).toBe(1);
    model.fromPython("bucket", -1);
    expect(sel(el)).toHaveLength(0);
    model.fromPython("model", FSDP);
    expect(el.querySelectorAll("polyline.tlw-mem")).toHaveLength(2);
    cleanup();
    expect(el.querySelector("svg")).toBeNull();
    expect(model.count()).toBe(0);
  });

  it("says so when there is no model", () => {
    const el = document.createElement("div");
    widget.render({ model: new FakeModel({ model: null, bucket: -1 }), el });
    expect(el.textContent).toContain("no rank-lanes model");
  });
});

const loaders = import.meta.glob("../../torchlens_widgets/static/ranks.js");
const sources = import.meta.glob("../../torchlens_widgets/static/ranks.js", { query: "?raw", import: "default", eager: true });
const BUNDLE = "../../torchlens_widgets/static/ranks.js";

describe.skipIf(!loaders[BUNDLE])("built bundle torchlens_widgets/static/ranks.js", () => {
  it("imports nothing, loads nothing from the network, stays under 16 KB, and draws the model", async () => {
    const text = sources[BUNDLE] as string;
    expect(new TextEncoder().encode(text).length).toBeLessThanOrEqual(16 * 1024); // 12 KB before the zoom
    expect(text).not.toMatch(/\bimport\s*[\s{*"'(]/);
    expect(text).not.toMatch(/https?:\/\/(?!www\.w3\.org)/);
    const mod = (await loaders[BUNDLE]!()) as { default: { render: typeof widget.render } };
    const el = document.createElement("div");
    const cleanup = mod.default.render({ model: new FakeModel({ model: DDP, bucket: -1 }), el });
    expect(el.querySelectorAll("g.tlw-comm-g")).toHaveLength(DDP.comms.length);
    cleanup();
    expect(el.querySelector("svg")).toBeNull();
  });
});

describe("fitWidth", () => {
  it("squeezes times into a narrower output, keeps text size, re-shortens labels and thins ticks", () => {
    expect(fitWidth(DDP, 2000)).toBe(DDP); // never widened
    expect(fitWidth(DDP, 0)).toBe(DDP); // not laid out yet: as computed
    const narrow = fitWidth(DDP, 600);
    expect(narrow.width).toBe(600);
    const right = 600 - 16;
    for (const c of narrow.comms) {
      expect(c.x + c.w).toBeLessThanOrEqual(right + 0.01);
      if (c.short) expect(2 + c.short.length * 6.6).toBeLessThanOrEqual(c.w + 0.01); // the label stays in its span
    }
    for (const n of narrow.nodes) expect(n.x + n.w).toBeLessThanOrEqual(right + 0.01);
    expect(narrow.ticks.length).toBeLessThanOrEqual(DDP.ticks.length);
    for (let i = 1; i < narrow.ticks.length; i++) {
      const a = narrow.ticks[i - 1]!, b = narrow.ticks[i]!;
      expect(b.x - a.x).toBeGreaterThanOrEqual(((a.label.length + b.label.length) * 6.6) / 2);
    }
    const host = document.createElement("div");
    Object.defineProperty(host, "clientWidth", { value: 600 });
    renderRanks(host, DDP);
    expect(host.querySelector("svg")!.getAttribute("width")).toBe("600");
  });
});

/** A picture laid out at 1:1 (jsdom lays nothing out): the SVG's box is its viewBox, from the left of the page. */
function laidOut(svg: SVGSVGElement, w: number, h: number): void {
  svg.getBoundingClientRect = () => ({ left: 0, top: 0, width: w, height: h, right: w, bottom: h, x: 0, y: 0, toJSON: () => ({}) });
}

const tickNums = (host: Element) =>
  [...host.querySelectorAll("svg text.tlw-tick-label")].map((t) => Number(t.textContent!.replace(/,/g, "")));

describe("the cut and the zoom (issue 25 item 5)", () => {
  it("starts the FSDP axis after rank 0 started, says so under the lanes, marks the clipped all-gather", () => {
    const [a, b] = fullRange(FSDP);
    expect(a).toBeGreaterThan(100); // ms: rank 0 started ~102.6 ms after rank 1
    expect(b - a).toBeLessThan(80);
    const { host } = draw(FSDP);
    const ticks = tickNums(host);
    expect(ticks[0]).toBeGreaterThanOrEqual(a);
    expect(host.querySelector("svg .tlw-axis-label")!.textContent).toBe("it 0 iteration (ms)");
    expect(host.querySelector("svg .tlw-cut-note")!.textContent).toMatch(/^axis starts at 101\.9 ms: rank 0 started 102\.6 ms after rank 1/);
    expect(host.querySelectorAll("svg path.tlw-cut-mark")).toHaveLength(1);
    // the info line describes the first span before any hover
    expect(host.querySelector(".tlw-ranks-info")!.textContent).toBe(`${describeComm(FSDP.comms[0]!)} — hover a span for its own`);
    for (const t of host.querySelectorAll("svg text.tlw-comm-label")) expect(t.textContent).not.toMatch(/^.{1,3}…$/);
  });

  it("zoomTo keeps what is in range, clipped and marked, with labels picked again and new ticks", () => {
    const [a, b] = fullRange(FSDP);
    expect(zoomTo(FSDP, a, b)).toBe(FSDP);
    const lo = a + (b - a) * 0.3, hi = a + (b - a) * 0.4;
    const z = zoomTo(FSDP, lo, hi);
    const right = FSDP.width - 16;
    expect(z.comms.length).toBeGreaterThan(0);
    expect(z.comms.length).toBeLessThan(FSDP.comms.length);
    for (const c of [...z.comms, ...z.nodes]) {
      expect(c.x).toBeGreaterThanOrEqual(FSDP.left);
      expect(c.x + c.w).toBeLessThanOrEqual(right + 0.01);
    }
    for (const c of z.comms) if (c.short) expect(c.texts).toContain(c.short);
    expect(z.comms.some((c) => c.short.length > 4)).toBe(true); // wider spans: longer labels
    const labels = z.ticks.map((t) => Number(t.label));
    expect(labels[0]).toBeGreaterThanOrEqual(lo);
    expect(labels[labels.length - 1]).toBeLessThanOrEqual(hi);
    for (const t of z.ticks) expect(t.x).toBeCloseTo(FSDP.left + ((Number(t.label) - lo) / (hi - lo)) * (right - FSDP.left), 1);
    for (const mem of z.memory) {
      for (const pt of mem.points.split(" ")) {
        const x = Number(pt.split(",")[0]);
        expect(x).toBeGreaterThanOrEqual(FSDP.left);
        expect(x).toBeLessThanOrEqual(right);
      }
    }
  });

  it("nice steps and tick values follow Python's nice_step", () => {
    expect(niceStep(72.6)).toBe(10);
    expect(niceStep(7300)).toBe(1000);
    expect(tickValues(101.86, 174.54)).toEqual([110, 120, 130, 140, 150, 160, 170]);
    expect(tickValues(0, 1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    const ticks = FSDP.ticks.map((t) => Number(t.label));
    expect(tickValues(...fullRange(FSDP))).toEqual(ticks);
  });

  it("wheel zooms around the pointer, a drag selects a range (and selects no bucket), reset and double-click go back", () => {
    const picked: number[] = [];
    const { host } = draw(DDP, null, (b) => picked.push(b));
    const svg = host.querySelector("svg")!;
    laidOut(svg, DDP.width, DDP.height);
    const full = tickNums(host);
    const span = () => { const t = tickNums(host); return t[t.length - 1]! - t[0]!; };
    const reset = host.querySelector<HTMLButtonElement>("button.tlw-zoom-reset")!;
    expect(reset.disabled).toBe(true);
    const x = DDP.left + (DDP.width - 16 - DDP.left) * 0.5;
    svg.dispatchEvent(new WheelEvent("wheel", { deltaY: -300, clientX: x, clientY: 40, bubbles: true, cancelable: true }));
    expect(span()).toBeLessThan((full[full.length - 1]! - full[0]!) * 0.6);
    expect(reset.disabled).toBe(false);
    expect(host.querySelector(".tlw-zoom-range")!.textContent).toMatch(/^showing /);
    reset.click();
    expect(tickNums(host)).toEqual(full);
    // a drag over the middle fifth
    const g = host.querySelector('g.tlw-comm-g[data-bucket="0"] rect')!;
    const x0 = DDP.left + 200, x1 = DDP.left + 330;
    g.dispatchEvent(new MouseEvent("mousedown", { button: 0, clientX: x0, clientY: 60, bubbles: true }));
    document.dispatchEvent(new MouseEvent("mousemove", { clientX: x0 + 60, clientY: 60, bubbles: true }));
    expect(svg.querySelector("rect.tlw-zoom-sel")).not.toBeNull();
    document.dispatchEvent(new MouseEvent("mouseup", { clientX: x1, clientY: 60, bubbles: true }));
    const under = host.querySelector("g.tlw-comm-g[data-bucket] rect"); // redrawn: what is under the pointer now
    expect(under).not.toBeNull();
    under!.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(picked).toEqual([]); // the click that ends a drag selects nothing
    expect(svg.querySelector("rect.tlw-zoom-sel")).toBeNull();
    const [fa, fb] = fullRange(DDP);
    const t = tickNums(host);
    const plot = DDP.width - 16 - DDP.left;
    expect(t[0]).toBeGreaterThanOrEqual(fa + ((200 / plot) * (fb - fa)) - 1e-6);
    expect(t[t.length - 1]).toBeLessThanOrEqual(fa + ((330 / plot) * (fb - fa)) + 1e-6);
    svg.dispatchEvent(new MouseEvent("dblclick", { clientX: x, clientY: 40, bubbles: true }));
    expect(tickNums(host)).toEqual(full);
    // keys: + zooms in, 0 goes back; the keys do not reach the notebook
    const seen: string[] = [];
    host.addEventListener("keydown", (e) => seen.push(e.key));
    svg.dispatchEvent(new KeyboardEvent("keydown", { key: "+", bubbles: true, cancelable: true }));
    expect(span()).toBeLessThan(full[full.length - 1]! - full[0]!);
    svg.dispatchEvent(new KeyboardEvent("keydown", { key: "0", bubbles: true, cancelable: true }));
    expect(tickNums(host)).toEqual(full);
    expect(seen).toEqual([]);
  });
});

describe("a zoom kept across redraws", () => {
  it("starts at the range it is given and reports every zoom", () => {
    const [a, b] = fullRange(FSDP);
    const seen: [number, number][] = [];
    const host = document.createElement("div");
    const view = renderRanks(host, FSDP, { range: [a + 10, a + 20], onZoom: (x, y) => seen.push([x, y]) });
    const t = tickNums(host);
    expect(t[0]).toBeGreaterThanOrEqual(a + 10);
    expect(t[t.length - 1]).toBeLessThanOrEqual(a + 20);
    view.zoom(a, b);
    expect(seen).toEqual([[a + 10, a + 20], [a, b]]);
    expect(tickNums(host)).toEqual(FSDP.ticks.map((x) => Number(x.label)));
  });
});
