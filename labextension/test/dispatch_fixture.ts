// Fixtures written by tests/render/test_dispatch_render.py::write_fixture (Python's trace_model / filter_model / dispatch_html).
import modelJson from "./fixtures/dispatch_model.json";
import casesJson from "./fixtures/dispatch_cases.json";
import type { Count, DispatchModel, Filters } from "../src/dispatch/model";

/** One filter / fold combination and Python's answer for it. */
export interface DispatchCase {
  filters: Filters;
  collapsed: string[];
  /** Ids of the visible rows, in order. */
  ids: string[];
  counts: Count[];
  headline_ops: number;
  /** Python's static HTML for the case. */
  html: string;
}

/** A fresh deep copy of the fixture model per call, so tests cannot leak edits into each other. */
export function dispatchModel(): DispatchModel {
  return structuredClone(modelJson) as unknown as DispatchModel;
}

export const CASES: DispatchCase[] = casesJson as unknown as DispatchCase[];

/** Each row's cell texts ("data-id: cell | cell | …") under a root, for comparing Python and TS tables. */
export function rowTexts(root: ParentNode): string[] {
  return Array.from(root.querySelectorAll(".tlw-dispatch-rows tbody tr")).map(
    (tr) => `${tr.getAttribute("data-id")}: ` + Array.from(tr.children).map((td) => td.textContent ?? "").join(" | "),
  );
}

export function countTexts(root: ParentNode): string[] {
  return Array.from(root.querySelectorAll(".tlw-dispatch-counts tbody tr")).map((tr) =>
    Array.from(tr.children).map((td) => td.textContent ?? "").join(" "),
  );
}

export function parseHtml(html: string): HTMLElement {
  const div = document.createElement("div");
  div.innerHTML = html;
  return div;
}
