/// <reference types="vite/client" />
// The live profile view draws Python's layout (fixture written by tests/render/test_profile_render.py): the
// same span boxes as the static SVG, labels that fit, a click on a table row (or a span) lights up every span
// of that name and tells Python, `selected` from Python does the same without an echo, hovering a span shows
// its inputs and stack. The built bundle (static/ptrace.js) is checked too.
import { describe, expect, it } from "vitest";
import widget from "../src/ptrace/index";
import { fitWidth, fmt, isPtraceModel, shortLabel, spanBox, type PtraceModel } from "../src/ptrace/model";
import { callsTip, renderTrace } from "../src/ptrace/render";
import { FakeModel } from "./fake_model";
import modelJson from "./fixtures/ptrace_model.json";
import pythonSvg from "./fixtures/ptrace_model.svg?raw";

const model = () => structuredClone(modelJson) as unknown as PtraceModel;
const sources = import.meta.glob("../../torchlens_widgets/static/ptrace.js", { query: "?raw", import: "default", eager: true });
const loaders = import.meta.glob("../../torchlens_widgets/static/ptrace.js");

function draw(selected: unknown = null, onSelect?: (name: string | null) => void) {
  const el = document.createElement("div");
  document.body.appendChild(el);
  const view = renderTrace(el, model(), onSelect ? { selected, onSelect } : { selected });
  return { el, view };
}

function click(node: Element | null | undefined): void {
  expect(node).toBeTruthy();
  node!.dispatchEvent(new MouseEvent("click", { bubbles: true }));
}

const lit = (el: HTMLElement) => [...el.querySelectorAll("rect.tlw-span.tlw-sel")].map((r) => Number(r.getAttribute("data-i")));
const spansNamed = (name: string) => {
  const m = model();
  const id = m.names.indexOf(name);
  return m.spans.flatMap((s, i) => (s[4] === id ? [i] : []));
};

describe("ptrace model", () => {
  it("recognises the model and shortens labels as Python does", () => {
    expect(isPtraceModel(model())).toBe(true);
    expect(isPtraceModel({ kind: "lanes" })).toBe(false);
    expect(shortLabel("aten::addmm", 20)).toBe("");
    expect(shortLabel("aten::addmm", 60)).toBe("aten::a…");
    expect(fmt(12345.6)).toBe("12,346");
    expect(fmt(52.75)).toBe("52.8");
    expect(fmt(3.61)).toBe("3.61");
  });
});

describe("ptrace view", () => {
  it("draws every span in the box Python's static SVG gives it", () => {
    const { el, view } = draw();
    const doc = new DOMParser().parseFromString(pythonSvg, "image/svg+xml");
    const want = [...doc.querySelectorAll("rect.tlw-span")].map((r) => ["x", "y", "width", "height"].map((k) => Number(r.getAttribute(k))));
    const got = [...el.querySelectorAll("rect.tlw-span")].map((r) => ["x", "y", "width", "height"].map((k) => Number(r.getAttribute(k))));
    expect(got).toEqual(want);
    expect(got.length).toBe(model().spans.length);
    const labels = (d: Document | Element) => [...d.querySelectorAll("text.tlw-label")].map((t) => t.textContent);
    expect(labels(el)).toEqual(labels(doc));
    for (const [i, s] of model().spans.entries()) {
      const b = spanBox(model(), s);
      expect(Number(el.querySelector(`rect[data-i="${i}"]`)!.getAttribute("x"))).toBe(b.x);
    }
    expect(el.querySelectorAll("rect.tlw-range")).toHaveLength(1);
    expect(el.querySelectorAll("tr.tlw-row")).toHaveLength(model().table.length);
    view.destroy();
    expect(el.querySelector(".tlw-ptrace")).toBeNull();
  });

  it("lights up every span of a clicked row and tells Python; a second click clears", () => {
    const picked: (string | null)[] = [];
    const { el, view } = draw(null, (n) => picked.push(n));
    expect(lit(el)).toEqual([]);
    click(el.querySelector('tr.tlw-row[data-name="aten::mm"]'));
    expect(view.selected).toBe("aten::mm");
    expect(lit(el)).toEqual(spansNamed("aten::mm"));
    expect(lit(el)).toHaveLength(2);
    expect(el.querySelector(".tlw-ptrace")!.classList.contains("tlw-pt-sel")).toBe(true);
    expect(el.querySelector("tr.tlw-row.tlw-sel")!.getAttribute("data-name")).toBe("aten::mm");
    click(el.querySelector('tr.tlw-row[data-name="aten::mm"]'));
    expect(lit(el)).toEqual([]);
    // a click on a span selects its name
    click(el.querySelector(`rect[data-i="${spansNamed("aten::relu")[0]}"]`));
    expect(picked).toEqual(["aten::mm", null, "aten::relu"]);
    view.destroy();
  });

  it("shows a span's inputs and whole stack on hover", () => {
    const { el, view } = draw();
    const tip = el.querySelector(".tlw-tip") as HTMLElement;
    expect(tip.style.display).toBe("none");
    const i = spansNamed("aten::addmm")[0]!;
    el.querySelector(`rect[data-i="${i}"]`)!.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: 50, clientY: 40 }));
    expect(tip.style.display).toBe("block");
    expect(tip.textContent!.split("\n")).toEqual([
      "aten::addmm (cpu_op) 300 µs at 50 µs",
      "inputs: [32], [8, 16], [16, 32], -, -",
      "  <built-in function linear>",
      "  train.py(3): step",
      "  train.py(10): <module>",
    ]);
    expect(el.querySelector(`rect[data-i="${i}"]`)!.classList.contains("tlw-hover")).toBe(true);
    el.querySelector("svg")!.dispatchEvent(new MouseEvent("mouseleave"));
    expect(tip.style.display).toBe("none");
    view.hover(spansNamed("aten::add_")[0]!);
    expect(tip.textContent).toContain("no stack");
    view.destroy();
  });
});

describe("ptrace anywidget entry", () => {
  it("syncs `selected` both ways without echoing Python's value", () => {
    const m = new FakeModel({ model: model(), selected: "aten::relu" });
    const el = document.createElement("div");
    const cleanup = widget.render({ model: m, el });
    expect(lit(el)).toEqual(spansNamed("aten::relu"));
    m.fromPython("selected", "aten::mm");
    expect(lit(el)).toEqual(spansNamed("aten::mm"));
    expect(m.saves).toBe(0);
    click(el.querySelector('tr.tlw-row[data-name="forward"]'));
    expect(m.sets).toEqual([["selected", "forward"]]);
    expect(m.saves).toBe(1);
    m.fromPython("selected", null);
    expect(lit(el)).toEqual([]);
    cleanup();
    expect(m.count()).toBe(0);
    expect(el.querySelector(".tlw-ptrace")).toBeNull();
  });

  const load = loaders["../../torchlens_widgets/static/ptrace.js"];
  it.skipIf(!load)("the built bundle imports nothing, stays small and draws the model", async () => {
    const text = sources["../../torchlens_widgets/static/ptrace.js"] as string;
    expect(new TextEncoder().encode(text).length).toBeLessThanOrEqual(20 * 1024);
    expect(text).not.toMatch(/\bimport\s*[\s{*"'(]/);
    expect(text).not.toMatch(/https?:\/\/(?!www\.w3\.org)/);
    const mod = (await load!()) as { default: { render: typeof widget.render } };
    const el = document.createElement("div");
    const cleanup = mod.default.render({ model: new FakeModel({ model: model(), selected: null }), el });
    expect(el.querySelectorAll("rect.tlw-span")).toHaveLength(model().spans.length);
    cleanup();
  });
});

describe("ptrace fitWidth", () => {
  it("squeezes the timeline into a narrower output: same proportions, thinned ticks, never wider", () => {
    const model = modelJson as unknown as PtraceModel;
    expect(fitWidth(model, 5000)).toBe(model);
    expect(fitWidth(model, 0)).toBe(model); // not laid out yet: as computed
    const narrow = fitWidth(model, 500);
    expect(narrow.width).toBe(500);
    const span = model.spans[model.spans.length - 1]!;
    const b = spanBox(narrow, span);
    expect(b.x + b.w).toBeLessThanOrEqual(500 - model.right + 0.01);
    for (let i = 1; i < narrow.ticks.length; i++) {
      const p = narrow.ticks[i - 1]!, t = narrow.ticks[i]!;
      expect(t.x - p.x).toBeGreaterThanOrEqual(((p.label.length + t.label.length) * 6.6) / 2);
    }
    const host = document.createElement("div");
    Object.defineProperty(host, "clientWidth", { value: 512 });
    renderTrace(host, model);
    expect(host.querySelector("svg")!.getAttribute("width")).toBe("500");
  });
});

describe("ptrace zoom (issue 25 item 5)", () => {
  it("shows a time range: spans out of it left out, the rest clipped to the plot, ticks relabelled, reset", () => {
    const { el, view } = draw();
    const m = model();
    const all = el.querySelectorAll("rect.tlw-span").length;
    const ticks = () => [...el.querySelectorAll("svg text.tlw-tick-label")].map((t) => Number(t.textContent!.replace(/,/g, "")));
    const before = ticks();
    const end = (m.width - m.right - m.left) / m.scale;
    view.zoom(end * 0.25, end * 0.5);
    const shown = [...el.querySelectorAll("rect.tlw-span")];
    expect(shown.length).toBeGreaterThan(0);
    expect(shown.length).toBeLessThan(all);
    for (const r of shown) {
      expect(Number(r.getAttribute("x"))).toBeGreaterThanOrEqual(m.left);
      expect(Number(r.getAttribute("x")) + Number(r.getAttribute("width"))).toBeLessThanOrEqual(m.width - m.right + 0.01);
      const s = m.spans[Number(r.getAttribute("data-i"))]!;
      expect(s[2] + s[3]).toBeGreaterThanOrEqual(end * 0.25);
      expect(s[2]).toBeLessThanOrEqual(end * 0.5);
    }
    const t = ticks();
    expect(t[0]).toBeGreaterThanOrEqual(end * 0.25);
    expect(t[t.length - 1]).toBeLessThanOrEqual(end * 0.5);
    // a selection made while zoomed lights what is in view; the caption counts every span of the name
    view.select("aten::mm");
    expect(el.querySelector(".tlw-ptrace-right .tlw-note")!.textContent).toContain(`${spansNamed("aten::mm").length} span`);
    el.querySelector<HTMLButtonElement>("button.tlw-zoom-reset")!.click();
    expect(ticks()).toEqual(before);
    expect(el.querySelectorAll("rect.tlw-span")).toHaveLength(all);
    expect(lit(el)).toEqual(spansNamed("aten::mm"));
  });
});

describe("the table's tooltip", () => {
  it("says why a name has more spans than calls, as Python's calls_tip does", () => {
    expect(callsTip({ category: "cpu_op", count: 12, drawn: 13 })).toBe(
      "cpu_op; 13 spans for 12 calls: as torch's key_averages does, a span that is the only child of a span of " +
        "the same name is one call with it");
    expect(callsTip({ category: "cpu_op", count: 3, drawn: 2 })).toContain("2 of 3 calls drawn");
    expect(callsTip({ category: "cpu_op", count: 3, drawn: 3 })).toBe("cpu_op");
  });
});
