import { describe, expect, it } from "vitest";
import { asFilters, collapseRows, filterRows, foldableCalls, headline, isDispatchModel } from "../src/dispatch/model";
import { CASES, dispatchModel } from "./dispatch_fixture";

describe("dispatch model: the same filter and fold rules as Python", () => {
  it("the fixture is a dispatch model holding every row", () => {
    const m = dispatchModel();
    expect(isDispatchModel(m)).toBe(true);
    expect(m.filters.empty_calls).toBe(true);
    expect(m.rows.filter((r) => r.type === "op")).toHaveLength(m.totals.ops);
    expect(m.rows.filter((r) => r.type === "call")).toHaveLength(m.totals.calls);
  });

  it.each(CASES.map((c, i) => [i, c] as const))("case %i: visible rows and counts equal Python's", (_i, c) => {
    const m = dispatchModel();
    const shown = filterRows(m, c.filters);
    expect(collapseRows(shown.rows, c.collapsed).map((r) => r.id)).toEqual(c.ids);
    expect(shown.counts).toEqual(c.counts);
    expect(shown.shown_ops).toBe(c.headline_ops);
  });

  it("hand-checked: only copies leaves the clone under Tensor.reshape", () => {
    const shown = filterRows(dispatchModel(), { ...asFilters({}), only_copies: true });
    expect(shown.rows.map((r) => r.name)).toEqual(["Tensor.reshape", "aten.clone.default"]);
    expect(shown.counts).toEqual([{ name: "aten.clone.default", count: 1, copy: true }]);
  });

  it("a text filter is trimmed and case-insensitive", () => {
    const a = filterRows(dispatchModel(), { ...asFilters({}), text: " ADDMM " });
    expect(a.rows.map((r) => r.name)).toEqual(["Sequential", "0 (Linear)", "torch.nn.functional.linear", "aten.addmm.default"]);
  });

  it("fold all folds exactly the calls with rows under them", () => {
    const m = dispatchModel();
    const ids = foldableCalls(m.rows);
    expect(ids).not.toContain("c10"); // Tensor.shape ran no op
    expect(collapseRows(m.rows, ids).every((r) => r.parent === null)).toBe(true);
  });

  it("asFilters repairs a bad trait value", () => {
    expect(asFilters(null)).toEqual({ text: "", hide_views: false, only_copies: false, empty_calls: false });
    expect(asFilters({ text: 3, hide_views: "yes", only_copies: true })).toEqual({
      text: "",
      hide_views: false,
      only_copies: true,
      empty_calls: false,
    });
  });

  it("the headline counts what is shown", () => {
    const m = dispatchModel();
    expect(headline(m, m.totals.ops)).toBe(
      `DispatchTrace: 21 aten ops (1 copy, 13 views, 0 in-place) under 11 Python calls`,
    );
    expect(headline(m, 1)).toMatch(/; showing 1 op$/);
  });
});
