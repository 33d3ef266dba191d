/// <reference types="vite/client" />
// Each built bundle (npm run build) is a self-contained ES module exposing the anywidget entry:
// it imports nothing, loads nothing from the network, stays within its own size budget, and its
// default export's render draws the model.
import { describe, expect, it } from "vitest";
import { dispatchModel } from "./dispatch_fixture";
import { FakeModel } from "./fake_model";
import { fixtureModel } from "./fixture";
import { gradModel } from "./gradgraph_fixture";
import { memModel } from "./memory_fixture";
import { tgridModel } from "./tgrid_fixture";

const STATIC = "../../torchlens_widgets/static/";
const loaders = import.meta.glob("../../torchlens_widgets/static/*.js");
const sources = import.meta.glob("../../torchlens_widgets/static/*.js", { query: "?raw", import: "default", eager: true });

type Render = (p: { model: unknown; el: HTMLElement }) => () => void;

interface BundleSpec {
  /** UTF-8 size limit of the minified bundle (the build's own hard budget is 50 KB). */
  maxBytes: number;
  /** Whether the SVG namespace URL (http://www.w3.org/...) may appear; no other URL may. */
  svg: boolean;
  /** Trait values the fake anywidget model starts with. */
  values: () => Record<string, unknown>;
  /** Checks on what render drew, before cleanup. */
  drawn: (el: HTMLElement) => void;
  /** The element cleanup must remove. */
  root: string;
}

function describeBundle(name: string, spec: BundleSpec): void {
  const load = loaders[`${STATIC}${name}.js`];
  describe.skipIf(!load)(`built bundle torchlens_widgets/static/${name}.js`, () => {
    it(`imports nothing, loads nothing from the network, and stays within ${spec.maxBytes / 1024} KB`, () => {
      const text = sources[`${STATIC}${name}.js`] as string;
      expect(new TextEncoder().encode(text).length).toBeLessThanOrEqual(spec.maxBytes);
      expect(text).not.toMatch(/\bimport\s*[\s{*"'(]/);
      expect(text).not.toMatch(spec.svg ? /https?:\/\/(?!www\.w3\.org)/ : /https?:\/\//);
    });

    it("default-exports render, which draws the model", async () => {
      const mod = (await load!()) as { default: { render: Render } };
      const el = document.createElement("div");
      const cleanup = mod.default.render({ model: new FakeModel(spec.values()), el });
      spec.drawn(el);
      cleanup();
      expect(el.querySelector(spec.root)).toBeNull();
    });
  });
}

describeBundle("stride", {
  maxBytes: 50 * 1024,
  svg: true,
  values: () => ({ model: fixtureModel(), selection: {} }),
  drawn: (el) => expect(el.querySelectorAll(".tlw-element")).toHaveLength(33),
  root: "svg",
});

describeBundle("dispatch", {
  maxBytes: 20 * 1024,
  svg: false,
  values: () => ({ model: dispatchModel(), filters: {}, collapsed: [] }),
  drawn: (el) => expect(el.querySelectorAll("tr.tlw-op")).toHaveLength(21),
  root: "table",
});

describeBundle("gradgraph", {
  maxBytes: 25 * 1024,
  svg: true,
  values: () => ({ model: gradModel(), selected: null, step: 2, focus: null, hops: 2 }),
  drawn: (el) => {
    expect(el.querySelectorAll("g.tlw-gnode")).toHaveLength(18);
    expect(el.querySelector(".tlw-running")!.getAttribute("data-node")).toBe("2");
  },
  root: "svg",
});

describeBundle("memory", {
  maxBytes: 20 * 1024,
  svg: true,
  values: () => ({ model: memModel(), panel: {}, selected_event: null, hovered_band: null, x_axis: "event" }),
  drawn: (el) => expect(el.querySelectorAll("g.bd")).toHaveLength(2),
  root: "svg",
});

describeBundle("dtable", {
  maxBytes: 8 * 1024,
  svg: false,
  values: () => ({
    model: {
      op: "aten::add.Tensor", schema: "", css: ".tlw-theme{}",
      scenarios: [{ name: "as given", chosen: "AutogradCPU", html: '<table><tr class="runs" data-key="AutogradCPU"><td>AutogradCPU</td></tr></table>' }],
    },
    selected: "as given",
  }),
  drawn: (el) => expect(el.querySelector("tr.runs")!.getAttribute("data-key")).toBe("AutogradCPU"),
  root: "table",
});

describeBundle("tgrid", {
  maxBytes: 20 * 1024,
  svg: false,
  values: () => ({ model: tgridModel("add"), program: [2] }),
  drawn: (el) => {
    expect(el.querySelectorAll(".pids .tlw-pid")).toHaveLength(3);
    expect(el.querySelectorAll('.detail .c.mk[data-tensor="x_ptr"]')).toHaveLength(2);
  },
  root: ".tlw-tg",
});
