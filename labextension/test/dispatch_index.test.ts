import { describe, expect, it } from "vitest";
import widget from "../src/dispatch/index";
import { dispatchModel } from "./dispatch_fixture";
import { FakeModel } from "./fake_model";

function setup(model: unknown = dispatchModel(), filters: unknown = {}, collapsed: unknown = []) {
  const m = new FakeModel({ model, filters, collapsed });
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
