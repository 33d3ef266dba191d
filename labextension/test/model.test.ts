import { describe, expect, expectTypeOf, it } from "vitest";
import {
  isCellSelection,
  isStrideModel,
  selectCell,
  type StrideCell,
  type StrideElement,
  type StrideModel,
  type StrideSlice,
  type StrideStorage,
  type StrideTensor,
} from "../src/stride/model";
import { T, fixtureModel } from "./fixture";

// Key lists checked both ways: against the TS types (at compile time) and the Python fixture (at run time).
const MODEL_KEYS = ["kind", "version", "width", "height", "cell", "notes", "storages", "tensors"] as const;
const STORAGE_KEYS = ["id", "label", "dtype", "itemsize", "size", "nbytes", "x", "y", "title_y", "truncated", "cell_w", "cells"] as const;
const CELL_KEYS = ["i", "x", "y", "value", "gap_before", "readers"] as const;
const TENSOR_KEYS = [
  "index", "name", "storage", "shape", "stride", "offset", "contiguous", "is_view", "base", "version",
  "expanded_dims", "numel", "shown", "truncated", "title", "x", "y", "color", "cell_w", "slices", "elements",
] as const;
const SLICE_KEYS = ["label", "x", "y"] as const;
const ELEMENT_KEYS = ["e", "idx", "s", "x", "y", "value"] as const;

const sorted = (xs: readonly string[]) => [...xs].sort();

describe("model.ts matches the Python schema", () => {
  it("declares exactly the schema's keys", () => {
    expectTypeOf<keyof StrideModel>().toEqualTypeOf<(typeof MODEL_KEYS)[number]>();
    expectTypeOf<keyof StrideStorage>().toEqualTypeOf<(typeof STORAGE_KEYS)[number]>();
    expectTypeOf<keyof StrideCell>().toEqualTypeOf<(typeof CELL_KEYS)[number]>();
    expectTypeOf<keyof StrideTensor>().toEqualTypeOf<(typeof TENSOR_KEYS)[number]>();
    expectTypeOf<keyof StrideSlice>().toEqualTypeOf<(typeof SLICE_KEYS)[number]>();
    expectTypeOf<keyof StrideElement>().toEqualTypeOf<(typeof ELEMENT_KEYS)[number]>();
  });

  it("every object in the Python fixture has exactly those keys", () => {
    const m = fixtureModel();
    expect(sorted(Object.keys(m))).toEqual(sorted(MODEL_KEYS));
    expect(m.kind).toBe("stride");
    expect(m.version).toBe(1);
    for (const st of m.storages) {
      expect(sorted(Object.keys(st))).toEqual(sorted(STORAGE_KEYS));
      for (const c of st.cells) {
        expect(sorted(Object.keys(c))).toEqual(sorted(CELL_KEYS));
        expect(typeof c.gap_before).toBe("boolean");
        expect(c.value === null || typeof c.value === "string").toBe(true);
      }
    }
    let slices = 0;
    for (const t of m.tensors) {
      expect(sorted(Object.keys(t))).toEqual(sorted(TENSOR_KEYS));
      for (const s of t.slices) expect(sorted(Object.keys(s))).toEqual(sorted(SLICE_KEYS)), slices++;
      for (const el of t.elements) expect(sorted(Object.keys(el))).toEqual(sorted(ELEMENT_KEYS));
    }
    expect(slices).toBeGreaterThan(0); // the fixture covers slice labels
  });

  it("guards recognise models and selections", () => {
    expect(isStrideModel(fixtureModel())).toBe(true);
    expect(isStrideModel({})).toBe(false);
    expect(isStrideModel(null)).toBe(false);
    expect(isCellSelection({})).toBe(false);
    expect(isCellSelection({ storage: "S0", cell: 0, elements: [] })).toBe(true);
  });
});

describe("selectCell (Python's StrideDiagram.select_cell)", () => {
  it("collects every drawn element over the storage that reads the cell", () => {
    const m = fixtureModel();
    // x[1, 0], xt[0, 1] (flat 1) and x3[1, 0, 0] (flat 3) all read S0[3].
    expect(selectCell(m, "S0", 3)).toEqual({ storage: "S0", cell: 3, elements: [[T.x, 3], [T.xt, 1], [T.x3, 3]] });
    // the stride-0 expand reads each cell twice
    expect(selectCell(m, "S1", 0)).toEqual({ storage: "S1", cell: 0, elements: [[T.row, 0], [T.ex, 0], [T.ex, 3]] });
    // the copy has its own storage: S2[3] is copy[1, 1] only, not x's cell 3
    expect(selectCell(m, "S2", 3)).toEqual({ storage: "S2", cell: 3, elements: [[T.copy, 3]] });
    expect(selectCell(m, "S2", 99)).toEqual({ storage: "S2", cell: 99, elements: [] });
  });
});
