// The lab extension's widget-output renderer: static picture first, the live view only once one attaches.
import type { IRenderMime } from "@jupyterlab/rendermime-interfaces";
import { Panel, Widget } from "@lumino/widgets";
import { describe, expect, it, vi } from "vitest";
import { FallbackRenderer, WIDGET_VIEW, mimeModel, staticType } from "../src/labext/fallback";

// @lumino/dragdrop (imported by @lumino/widgets) needs DragEvent, which jsdom lacks
vi.hoisted(() => {
  const g = globalThis as unknown as { DragEvent?: unknown };
  g.DragEvent ??= class extends MouseEvent {};
});

/** Stands in for Lab's HTML/SVG renderers: writes the data it was given as text, remembers the type. */
class FakeStatic extends Panel implements IRenderMime.IRenderer {
  constructor(readonly type: string) {
    super();
  }
  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.node.textContent = String(model.data[this.type]);
    this.node.dataset["type"] = this.type;
  }
}

/** Stands in for ipywidgets' renderer: attaches a view (a child widget), or writes its error text. */
class FakeLive extends Panel implements IRenderMime.IRenderer {
  constructor(private readonly outcome: "view" | "missing" | "pending") {
    super();
  }
  async renderModel(): Promise<void> {
    if (this.outcome === "pending") {
      this.node.textContent = "Loading widget...";
      return new Promise(() => undefined);
    }
    if (this.outcome === "missing") {
      this.node.textContent = "Error displaying widget: model not found";
      return;
    }
    const view = new Widget();
    view.node.textContent = "live view";
    this.addWidget(view);
  }
}

const source = { createRenderer: (t: string) => new FakeStatic(t) };
const bundle = (trusted: boolean, extra: Record<string, string> = { "image/svg+xml": "<svg>picture</svg>" }) =>
  mimeModel({ [WIDGET_VIEW]: { model_id: "abc", version_major: 2, version_minor: 1 }, ...extra }, trusted);
const flush = () => new Promise((r) => setTimeout(r, 0));

function mount(r: FallbackRenderer): void {
  Widget.attach(r, document.body);
}

describe("FallbackRenderer", () => {
  it("keeps the static picture, inline as HTML, when the model is gone", async () => {
    const r = new FallbackRenderer(source, () => new FakeLive("missing"), new Promise(() => undefined));
    mount(r);
    await r.renderModel(bundle(true));
    await flush();
    const still = r.node.querySelector(".tlw-static-fallback") as HTMLElement;
    expect(still.textContent).toBe("<svg>picture</svg>");
    expect(still.dataset["type"]).toBe("text/html");
    const live = r.widgets.find((w) => !w.hasClass("tlw-static-fallback"));
    expect(live?.isHidden).toBe(true);
  });

  it("lets Lab render an untrusted SVG with its own (image) renderer", async () => {
    const r = new FallbackRenderer(source, () => new FakeLive("missing"), new Promise(() => undefined));
    mount(r);
    await r.renderModel(bundle(false));
    expect((r.node.querySelector(".tlw-static-fallback") as HTMLElement).dataset["type"]).toBe("image/svg+xml");
  });

  it("swaps in the live view once one attaches, dropping the picture", async () => {
    const r = new FallbackRenderer(source, () => new FakeLive("view"), new Promise(() => undefined));
    mount(r);
    await r.renderModel(bundle(true));
    await flush();
    expect(r.node.querySelector(".tlw-static-fallback")).toBeNull();
    expect(r.node.textContent).toContain("live view");
  });

  it("tries again with the widget manager's renderer once the kernel is up", async () => {
    let ready: (make: () => IRenderMime.IRenderer) => void = () => undefined;
    const later = new Promise<() => IRenderMime.IRenderer>((res) => (ready = res));
    const r = new FallbackRenderer(source, () => new FakeLive("pending"), later);
    mount(r);
    await r.renderModel(bundle(true));
    expect(r.node.querySelector(".tlw-static-fallback")).not.toBeNull();
    ready(() => new FakeLive("view"));
    await flush();
    await flush();
    expect(r.node.querySelector(".tlw-static-fallback")).toBeNull();
    expect(r.node.textContent).toContain("live view");
    expect(r.node.textContent).not.toContain("Loading widget");
  });

  it("is a plain pass-through for widget outputs without a static picture", async () => {
    const r = new FallbackRenderer(source, () => new FakeLive("missing"), new Promise(() => undefined));
    mount(r);
    await r.renderModel(bundle(true, {}));
    expect(r.node.querySelector(".tlw-static-fallback")).toBeNull();
    expect(r.node.textContent).toContain("model not found");
    expect(staticType({ "text/html": "<b>x</b>" })).toBe("text/html");
    expect(staticType({ "text/plain": "x" })).toBeUndefined();
  });
});
