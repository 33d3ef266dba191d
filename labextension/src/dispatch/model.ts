/**
 * The dispatch model (schema version 1): the JSON that `torchlens_widgets.render.dispatch.trace_model`
 * builds in Python, and the same filter / fold rules as its `filter_model` and `collapse_rows`.
 * tests/render/test_dispatch_fixture.py pins the fixture that test/dispatch*.test.ts check against.
 */

/** A Python-level call: an nn.Module call or an (outermost) torch function / Tensor method. */
export interface CallRow {
  type: "call";
  /** "c3": index into the trace's calls. */
  id: string;
  parent: string | null;
  depth: number;
  kind: "module" | "function";
  name: string;
  /** Tensor arguments, e.g. "float32[3, 4], float32[5, 4]". */
  args: string;
  /** Dispatch keys walked for this call, highest priority first, " → "-joined. */
  path: string;
  /** Aten ops in its subtree (whole trace, before filters). */
  n_ops: number;
  n_copies: number;
}

/** One aten op as it reached the dispatcher's Python key. */
export interface OpRow {
  type: "op";
  /** "o5": index into the trace's ops. */
  id: string;
  parent: string | null;
  depth: number;
  index: number;
  /** Qualified overload, e.g. "aten.add.Tensor". */
  name: string;
  packet: string;
  overload: string;
  copy: boolean;
  view: boolean;
  inplace: boolean;
  error: string | null;
  inputs: string;
  outputs: string;
  /** Union of the inputs' key sets, highest priority first. */
  keys: string;
  /** Keys still to run below the Python key. */
  remaining: string;
}

export type Row = CallRow | OpRow;

export interface Filters {
  text: string;
  hide_views: boolean;
  only_copies: boolean;
  empty_calls: boolean;
}

export interface Count {
  name: string;
  count: number;
  copy: boolean;
}

export interface Totals {
  ops: number;
  calls: number;
  copies: number;
  views: number;
  inplace: number;
  rows_ops: number;
  shown_ops: number;
  shown_calls: number;
}

export interface DispatchModel {
  kind: "dispatch";
  version: 1;
  filters: Filters;
  totals: Totals;
  truncated: boolean;
  notes: string[];
  counts: Count[];
  rows: Row[];
}

export const DEFAULT_FILTERS: Filters = { text: "", hide_views: false, only_copies: false, empty_calls: false };

export function isDispatchModel(m: unknown): m is DispatchModel {
  if (typeof m !== "object" || m === null) return false;
  const d = m as Partial<DispatchModel>;
  return d.kind === "dispatch" && d.version === 1 && Array.isArray(d.rows) && typeof d.totals === "object";
}

/** A filters trait value made whole (missing or mistyped fields fall back to the defaults). */
export function asFilters(v: unknown): Filters {
  const f = (typeof v === "object" && v !== null ? v : {}) as Partial<Record<keyof Filters, unknown>>;
  return {
    text: typeof f.text === "string" ? f.text : "",
    hide_views: f.hide_views === true,
    only_copies: f.only_copies === true,
    empty_calls: f.empty_calls === true,
  };
}

function opShown(r: OpRow, needle: string, f: Filters): boolean {
  if (needle && !r.name.toLowerCase().includes(needle)) return false;
  if (f.hide_views && r.view) return false;
  return !(f.only_copies && !r.copy);
}

/** Python's `text.strip().lower()` for the ASCII op names this filter matches. */
function needleOf(text: string): string {
  return text.trim().toLowerCase();
}

/** Python's `sorted(..., key=(-count, name))`: by code point, as Python compares strings. */
function byCountThenName(a: Count, b: Count): number {
  if (a.count !== b.count) return b.count - a.count;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export interface Filtered {
  rows: Row[];
  counts: Count[];
  shown_ops: number;
  shown_calls: number;
}

/** Exactly `filter_model(model, **filters)` in Python: the rows shown and the counts over them. */
export function filterRows(model: DispatchModel, filters: Filters): Filtered {
  const needle = needleOf(filters.text);
  const opFilter = needle !== "" || filters.hide_views || filters.only_copies;
  const parentOf = new Map<string, string | null>();
  for (const r of model.rows) parentOf.set(r.id, r.parent);
  const shown = new Set<string>();
  for (const r of model.rows) {
    if (r.type === "op" && opShown(r, needle, filters)) {
      shown.add(r.id);
      let p = r.parent;
      while (p !== null && !shown.has(p)) {
        shown.add(p);
        p = parentOf.get(p) ?? null;
      }
    } else if (r.type === "call" && filters.empty_calls && !opFilter) {
      shown.add(r.id);
    }
  }
  const rows = model.rows.filter((r) => shown.has(r.id));
  const byName = new Map<string, Count>();
  let ops = 0;
  for (const r of rows) {
    if (r.type !== "op") continue;
    ops++;
    const c = byName.get(r.name);
    if (c) c.count++;
    else byName.set(r.name, { name: r.name, count: 1, copy: r.copy });
  }
  return { rows, counts: Array.from(byName.values()).sort(byCountThenName), shown_ops: ops, shown_calls: rows.length - ops };
}

/** Exactly Python's `collapse_rows`: drop the descendants of folded calls. */
export function collapseRows(rows: Row[], collapsed: Iterable<string>): Row[] {
  const folded = new Set(collapsed);
  if (!folded.size) return rows.slice();
  const hidden = new Set<string>();
  const out: Row[] = [];
  for (const r of rows) {
    if (r.parent !== null && (folded.has(r.parent) || hidden.has(r.parent))) {
      hidden.add(r.id);
      continue;
    }
    out.push(r);
  }
  return out;
}

/** Ids of the calls that have rows under them (what "collapse all" folds), in id order. */
export function foldableCalls(rows: Row[]): string[] {
  const ids = new Set<string>();
  for (const r of rows) if (r.parent !== null) ids.add(r.parent);
  return Array.from(ids).sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)));
}

/** Python's `_headline`: the one-line summary above the table. */
export function headline(model: DispatchModel, shownOps: number): string {
  const t = model.totals;
  const s = (n: number, word: string) => `${n} ${word}${n !== 1 ? "s" : ""}`;
  let line =
    `DispatchTrace: ${s(t.ops, "aten op")} (${t.copies} cop${t.copies === 1 ? "y" : "ies"}, ${t.views} views, ` +
    `${t.inplace} in-place) under ${s(t.calls, "Python call")}`;
  if (shownOps !== t.ops) line += `; showing ${s(shownOps, "op")}`;
  return line;
}

/** Python's `_op_flags`: " [COPY, view]" etc. */
export function opFlags(r: OpRow): string {
  const flags: string[] = [];
  if (r.copy) flags.push("COPY");
  if (r.view) flags.push("view");
  if (r.inplace) flags.push("in-place");
  if (r.error) flags.push(`raised ${r.error}`);
  return flags.length ? ` [${flags.join(", ")}]` : "";
}
