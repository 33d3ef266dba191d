// mountView's `refit`: a picture laid out to fit its output is drawn again when the output's width changes (the
// first draw can come before JupyterLab has laid the output out, at width 0; a side panel can open later), and
// not when only its height does.
import { afterEach, describe, expect, it } from "vitest";
import { mountView } from "../src/common/anywidget";
import { FakeModel } from "./fake_model";

type Observed = { cb: () => void; el: Element | null };
const observers: Observed[] = [];

class FakeResizeObserver {
  private entry: Observed;
  constructor(cb: () => void) {
    this.entry = { cb, el: null };
    observers.push(this.entry);
  }
  observe(el: Element): void {
    this.entry.el = el;
  }
  disconnect(): void {
    this.entry.el = null;
  }
}

afterEach(() => {
  observers.length = 0;
  delete (globalThis as { ResizeObserver?: unknown }).ResizeObserver;
});

describe("mountView refit", () => {
  it("draws again at the new width, not for a height change, and stops on cleanup", () => {
    (globalThis as { ResizeObserver?: unknown }).ResizeObserver = FakeResizeObserver;
    const el = document.createElement("div");
    let width = 0;
    Object.defineProperty(el, "clientWidth", { get: () => width });
    const widths: number[] = [];
    const model = new FakeModel({ model: { ok: true } });
    const cleanup = mountView(model as never, el, {
      className: "x",
      isModel: (m: unknown): m is { ok: boolean } => !!m,
      empty: "nothing",
      create: () => {
        widths.push(width);
        return { destroy: () => undefined };
      },
      update: {},
      refit: true,
    });
    expect(widths).toEqual([0]);
    width = 670;
    observers[0]!.cb();
    expect(widths).toEqual([0, 670]);
    observers[0]!.cb(); // only the height changed
    width = 672;
    observers[0]!.cb(); // a couple of pixels: not worth a redraw
    expect(widths).toEqual([0, 670]);
    cleanup();
    expect(observers[0]!.el).toBeNull();
  });

  it("never observes without refit", () => {
    (globalThis as { ResizeObserver?: unknown }).ResizeObserver = FakeResizeObserver;
    const el = document.createElement("div");
    mountView(new FakeModel({ model: { ok: true } }) as never, el, {
      className: "x", isModel: (m: unknown): m is object => !!m, empty: "", update: {},
      create: () => ({ destroy: () => undefined }),
    });
    expect(observers).toHaveLength(0);
  });
});
