import { describe, expect, it } from "vitest";
import widget from "../src/ranks/index";
import { describe as describeComm, fitWidth, isRanksModel, renderRanks, type RanksModel } from "../src/ranks/render";
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
  it("imports nothing, loads nothing from the network, stays under 12 KB, and draws the model", async () => {
    const text = sources[BUNDLE] as string;
    expect(new TextEncoder().encode(text).length).toBeLessThanOrEqual(12 * 1024);
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
