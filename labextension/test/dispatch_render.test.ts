import { describe, expect, it } from "vitest";
import { themeCss } from "../src/common/theme";
import { renderDispatch } from "../src/dispatch/render";
import type { Filters } from "../src/dispatch/model";
import { CASES, countTexts, dispatchModel, parseHtml, rowTexts } from "./dispatch_fixture";

function setup(filters?: Partial<Filters>, collapsed: string[] = []) {
  const el = document.createElement("div");
  const changes: { filters: Filters[]; collapsed: string[][] } = { filters: [], collapsed: [] };
  const view = renderDispatch(el, dispatchModel(), {
    filters: { text: "", hide_views: false, only_copies: false, empty_calls: false, ...filters },
    collapsed,
    onFilters: (f) => changes.filters.push(f),
    onCollapsed: (c) => changes.collapsed.push(c),
  });
  return { el, view, changes };
}

const q = <T extends Element>(el: ParentNode, sel: string) => el.querySelector(sel) as T;

describe("live dispatch table", () => {
  it.each(CASES.map((c, i) => [i, c] as const))("case %i: every cell reads as in Python's static HTML", (_i, c) => {
    const { el } = setup(c.filters, c.collapsed);
    const python = parseHtml(c.html);
    expect(rowTexts(el)).toEqual(rowTexts(python));
    expect(countTexts(el)).toEqual(countTexts(python));
    expect(q(el, ".tlw-dispatch-headline").textContent).toBe(q(python, ".tlw-dispatch-headline").textContent);
    const pyFilter = python.querySelector(".tlw-dispatch-filter")?.textContent ?? "";
    expect(q(el, ".tlw-dispatch-filter").textContent).toBe(pyFilter);
  });

  it("typing in the filter box filters and reports the new filters", () => {
    const { el, changes } = setup();
    const input = q<HTMLInputElement>(el, 'input[data-filter="text"]');
    input.value = "clone";
    input.dispatchEvent(new Event("input", { bubbles: true }));
    expect(changes.filters[changes.filters.length - 1]?.text).toBe("clone");
    expect(rowTexts(el).map((t) => t.split(":")[0])).toEqual(["c1", "o1"]);
    expect(el.querySelectorAll("tr.tlw-copy.tlw-op")).toHaveLength(1);
  });

  it("checkboxes toggle hide views / only copies / calls without ops", () => {
    const { el, changes, view } = setup();
    const box = q<HTMLInputElement>(el, 'input[data-filter="only_copies"]');
    box.checked = true;
    box.dispatchEvent(new Event("change", { bubbles: true }));
    expect(view.filters.only_copies).toBe(true);
    expect(el.querySelectorAll("tr.tlw-op")).toHaveLength(1);
    const empty = q<HTMLInputElement>(el, 'input[data-filter="empty_calls"]');
    box.checked = false;
    box.dispatchEvent(new Event("change", { bubbles: true }));
    empty.checked = true;
    empty.dispatchEvent(new Event("change", { bubbles: true }));
    expect(el.querySelector('tr[data-id="c10"]')).not.toBeNull(); // Tensor.shape, no aten op
    expect(changes.filters.map((f) => [f.only_copies, f.empty_calls])).toEqual([
      [true, false],
      [false, false],
      [false, true],
    ]);
  });

  it("clicking a call's toggle folds and unfolds it; fold all / unfold all", () => {
    const { el, changes } = setup();
    const before = el.querySelectorAll(".tlw-dispatch-rows tbody tr").length;
    q<HTMLElement>(el, '.tlw-toggle[data-id="c3"]').dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(changes.collapsed[changes.collapsed.length - 1]).toEqual(["c3"]);
    expect(el.querySelectorAll(".tlw-dispatch-rows tbody tr").length).toBe(before - 8);
    expect(q(el, '.tlw-toggle[data-id="c3"]').textContent).toBe("▸");
    q<HTMLElement>(el, '.tlw-toggle[data-id="c3"]').dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(changes.collapsed[changes.collapsed.length - 1]).toEqual([]);
    expect(el.querySelectorAll(".tlw-dispatch-rows tbody tr").length).toBe(before);
    q<HTMLElement>(el, 'button[data-action="collapse-all"]').click();
    expect(Array.from(el.querySelectorAll(".tlw-dispatch-rows tbody tr")).every((tr) => tr.classList.contains("tlw-call"))).toBe(true);
    q<HTMLElement>(el, 'button[data-action="expand-all"]').click();
    expect(changes.collapsed[changes.collapsed.length - 1]).toEqual([]);
  });

  it("filters and folding set from outside are shown without being reported back", () => {
    const { el, changes, view } = setup();
    view.setFilters({ text: "detach" });
    expect(q<HTMLInputElement>(el, 'input[data-filter="text"]').value).toBe("detach");
    expect(el.querySelectorAll("tr.tlw-op")).toHaveLength(4);
    view.setCollapsed(["c9", 7, "c6"]);
    expect(view.collapsed).toEqual(["c6", "c9"]);
    expect(el.querySelectorAll("tr.tlw-op")).toHaveLength(0);
    expect(changes.filters).toEqual([]);
    expect(changes.collapsed).toEqual([]);
  });

  it("destroy removes the view", () => {
    const { el, view } = setup();
    view.destroy();
    expect(el.querySelector(".tlw-dispatch")).toBeNull();
  });
});

describe("dispatch table styling", () => {
  it("uses the same rules as Python's static HTML, theme colours only", () => {
    const { el } = setup();
    const python = parseHtml(CASES[0]!.html);
    const ours = el.querySelector("style")?.textContent ?? "";
    const theirs = python.querySelector("style")?.textContent ?? "";
    expect(theirs.length).toBeGreaterThan(500);
    expect(ours.startsWith(theirs)).toBe(true); // theme + shared rules, then the live view's own
    expect(ours.slice(themeCss().length)).not.toMatch(/#[0-9a-f]{3,6}\b|:(white|black)\b/i); // colours only via the theme
    expect(el.querySelector(".tlw-dispatch")?.classList.contains("tlw-theme")).toBe(true);
  });
});
