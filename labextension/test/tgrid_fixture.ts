// Fixture written by tests/render/test_tgrid_fixture.py::write_fixture (Python's program_grid_model, and the
// static renderer's cell states and text per program).
import casesJson from "./fixtures/tgrid_cases.json";
import type { RawProgram, TgridModel } from "../src/tgrid/model";

export interface ExpectedProgram {
  pid: number[];
  /** Per tensor the program touched: Python's class per element index (untouched ones left out). */
  states: Record<string, {
    cells: Record<string, string>;
    before: number;
    window: { cols: number; start: number; stop: number; matrix: boolean };
    notes: string[];
  }>;
  /** Python's program_grid_text for this program. */
  text: string;
}

export interface TgridCase {
  model: TgridModel;
  /** By flat pid. */
  programs: Record<string, ExpectedProgram>;
}

export type CaseName = "add" | "oob" | "tiles" | "cube" | "stencil" | "long";
export const CASE_NAMES: CaseName[] = ["add", "oob", "tiles", "cube", "stencil", "long"];

const CASES = casesJson as unknown as Record<CaseName, TgridCase>;

/** A fresh deep copy per call, so tests cannot leak edits into each other. */
export function tgridCase(name: CaseName): TgridCase {
  return structuredClone(CASES[name]);
}

export function tgridModel(name: CaseName = "add"): TgridModel {
  return tgridCase(name).model;
}

/** A 1-D grid of `n` programs over a vector of n * block - short elements, each program masked past the end:
 * what `program_grid` records for `tl.store(out + offs, tl.load(x + offs, mask=m) * 2, mask=m)`. */
export function bigModel(n = 1024, block = 64, short = 20): TgridModel {
  const numel = n * block - short;
  const programs: RawProgram[] = [];
  for (let p = 0; p < n; p++) {
    const a = p * block;
    const b = Math.min(a + block, numel);
    const masked = b < a + block ? [b, a + block] : [];
    const lanes = masked.length ? b - a : block;
    const extra = masked.length ? ([masked, block - lanes] as const) : ([] as const);
    programs.push([p, 0, [[0, lanes, [a, b], ...extra], [1, lanes, [a, b], ...extra]]]);
  }
  return {
    kind: "tgrid", version: 1, kernel: "scale_kernel", grid: [n], num_programs: n, interpreter: "triton 3.7.1 interpreter",
    tensors: [
      { name: "x_ptr", dtype: "float32", shape: [numel], numel, contiguous: true },
      { name: "out_ptr", dtype: "float32", shape: [numel], numel, contiguous: true },
    ],
    sites: [{ op: "load", tensor: 0, line: 8, lanes: block }, { op: "store", tensor: 1, line: 8, lanes: block }],
    source: [[8, "tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)"]],
    programs, messages: [], errors_total: 0, warnings: [], left_out: null,
  };
}
