import { describe, expect, it } from "vitest";
import widget, { type AnyModel } from "../src/dispatch/index";
import type { Filters } from "../src/dispatch/model";
import { dispatchModel } from "./dispatch_fixture";

/** Backbone-like stand-in for anywidget's model: set() fires change:<name> at once, as in the browser. */
class FakeModel implements AnyModel {
  values: Record<string, unknown>;
  listeners = new Map<string, Set<() => void>>();
  saves = 0;
  sets: [string, unknown][] = [];
  constructor(model: unknown, filters: unknown = {}, collapsed: unknown = []) {
    this.values = { model, filters, collapsed };
  }
  get(name: string): unknown {
    return this.values[name];
  }
  set(name: "filters" | "collapsed", value: Filters | string[]): void {
    this.sets.push([name, value]);
    this.fromPython(name, value);
  }
  save_changes(): void {
    this.saves++;
  }
  on(event: string, cb: () => void): void {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event)!.add(cb);
  }
  off(event?: string | null, cb?: (() => void) | null): void {
    if (event && cb) this.listeners.get(event)?.delete(cb);
  }
  fromPython(name: string, value: unknown): void {
    this.values[name] = value;
    for (const cb of this.listeners.get(`change:${name}`) ?? []) cb();
  }
  count(): number {
    let n = 0;
    for (const s of this.listeners.values()) n += s.size;
    return n;
  }
}

function setup(model: unknown = dispatchModel(), filters: unknown = {}, collapsed: unknown = []) {
  const m = new FakeModel(model, filters, collapsed);
  const el = document.createElement("div");
  const cleanup = widget.render({ model: m, el });
  return { m, el, cleanup };
}

describe("dispatch anywidget entry", () => {
  it("renders the traits", () => {
    const { el } = setup(dispatchModel(), { only_copies: true }, []);
    expect(el.querySelectorAll("tr.tlw-op")).toHaveLength(1);
    expect((el.querySelector('input[data-filter="only_copies"]') as HTMLInputElement).checked).toBe(true);
  });

  it("a toolbar change sets and saves the filters trait once", () => {
    const { m, el } = setup();
    const box = el.querySelector('input[data-filter="hide_views"]') as HTMLInputElement;
    box.checked = true;
    box.dispatchEvent(new Event("change", { bubbles: true }));
    expect(m.sets).toEqual([["filters", { text: "", hide_views: true, only_copies: false, empty_calls: false }]]);
    expect(m.saves).toBe(1);
    expect(el.querySelectorAll("tr.tlw-view")).toHaveLength(0);
  });

  it("a fold click sets and saves the collapsed trait", () => {
    const { m, el } = setup();
    (el.querySelector('.tlw-toggle[data-id="c9"]') as HTMLElement).dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(m.sets).toEqual([["collapsed", ["c9"]]]);
    expect(m.saves).toBe(1);
  });

  it("shows traits set from Python without echoing them", () => {
    const { m, el } = setup();
    m.fromPython("filters", { text: "addmm" });
    expect(el.querySelectorAll("tr.tlw-op")).toHaveLength(1);
    m.fromPython("collapsed", ["c3"]);
    expect(el.querySelectorAll("tr.tlw-op")).toHaveLength(0);
    expect(m.saves).toBe(0);
  });

  it("says so instead of failing on an empty model, and redraws on change:model", () => {
    const { m, el } = setup({});
    expect(el.textContent).toContain("no dispatch model");
    m.fromPython("model", dispatchModel());
    expect(el.querySelectorAll("tr.tlw-op").length).toBe(21);
  });

  it("the cleanup function removes its listeners and the drawing", () => {
    const { m, el, cleanup } = setup();
    expect(m.count()).toBe(3);
    cleanup();
    expect(m.count()).toBe(0);
    expect(el.querySelector("table")).toBeNull();
  });
});
