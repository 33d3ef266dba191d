/**
 * The profile-trace model (schema `ptrace` version 1): the JSON that Python's
 * `torchlens_widgets.render.profile.profile_model` builds from the profile lens. Spans are compact arrays
 * `[lane, depth, start µs, duration µs, name, category, stack, shape]` indexing the interned tables
 * (`names`, `cats`, `stacks` → `frames`, `shapes`; -1: none). The geometry here is Python's, formula for formula.
 */

export type RawSpan = [number, number, number, number, number, number, number, number];

export interface PtraceLane {
  label: string;
  short: string;
  y: number;
  rows: number;
}

export interface PtraceRow {
  name: string;
  category: string;
  count: number;
  total: number;
  self: number;
  mean: number;
  /** Spans of this name drawn (downsampling may drop some). */
  drawn: number;
}

export interface PtraceSummary {
  events: number;
  drawn: number;
  threads: number;
  ops: number;
  ranges: number;
  names: number;
  python_frames: number;
  with_stack: boolean;
  record_shapes: boolean;
  source: string;
}

export interface PtraceModel {
  kind: "ptrace";
  version: 1;
  width: number;
  height: number;
  left: number;
  right: number;
  row_h: number;
  scale: number;
  end: number;
  ticks: { x: number; label: string }[];
  lanes: PtraceLane[];
  names: string[];
  cats: string[];
  frames: string[];
  stacks: number[][];
  shapes: string[];
  spans: RawSpan[];
  table: PtraceRow[];
  summary: PtraceSummary;
  left_out: { events: number; time: number; names: [string, number][] } | null;
  notes: string[];
}

export const CHAR_W = 6.6;
export const MIN_W = 1;
export const RANGES = ["user_annotation", "gpu_user_annotation"];

export function isPtraceModel(m: unknown): m is PtraceModel {
  if (typeof m !== "object" || m === null) return false;
  const p = m as Partial<PtraceModel>;
  return p.kind === "ptrace" && Array.isArray(p.spans) && Array.isArray(p.lanes) && Array.isArray(p.table);
}

/** Python's `kind_of`: "range" (record_function), "op" (cpu_op) or "other". */
export function kindOf(category: string): "range" | "op" | "other" {
  return RANGES.includes(category) ? "range" : category === "cpu_op" ? "op" : "other";
}

/** Python's `_r`: round to 2 decimals. */
export function r2(v: number): number {
  return Math.round(v * 100) / 100;
}

/** Python's `short_label`: the name cut to what fits in `width` px ("" when not 3 characters fit). */
export function shortLabel(name: string, width: number): string {
  const n = Math.floor((width - 4) / CHAR_W);
  if (n < 3) return "";
  const chars = [...name];
  return chars.length <= n ? name : chars.slice(0, n - 1).join("") + "…";
}

/** Python's `_fmt`: a time in µs at a precision that suits its size. */
export function fmt(t: number): string {
  if (t >= 100) return Math.round(t).toLocaleString("en-US");
  if (t >= 10) return t.toFixed(1).replace(/\.0$/, "");
  if (t < 0.001) return "0";
  return t.toFixed(3).replace(/0+$/, "").replace(/\.$/, "");
}

export interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** Where a span is drawn (Python's profile_svg). */
export function spanBox(model: PtraceModel, s: RawSpan): Box {
  const [lane, depth, start, dur] = s;
  const y = (model.lanes[lane] as PtraceLane).y + depth * model.row_h;
  return { x: r2(model.left + start * model.scale), y: y + 1, w: r2(Math.max(dur * model.scale, MIN_W)), h: model.row_h - 2 };
}

/** The hover text of a span: name, time, inputs, the whole stack (innermost frame first). */
export function spanTip(model: PtraceModel, s: RawSpan): string[] {
  const [, , start, dur, name, cat, stack, shape] = s;
  const lines = [`${model.names[name]} (${model.cats[cat]}) ${fmt(dur)} µs at ${fmt(start)} µs`];
  if (shape >= 0) lines.push(`inputs: ${model.shapes[shape]}`);
  if (stack >= 0) for (const f of model.stacks[stack] ?? []) lines.push(`  ${model.frames[f]}`);
  else lines.push("  (no stack: record with with_stack=True)");
  return lines;
}

/** Python's `left_out_text`. */
export function leftOutText(model: PtraceModel): string | null {
  const lo = model.left_out;
  if (!lo) return null;
  const most = lo.names.slice(0, 3).map(([n, k]) => `${n} ×${k.toLocaleString("en-US")}`).join(", ");
  return `left out ${lo.events.toLocaleString("en-US")} of ${model.summary.events.toLocaleString("en-US")} spans, ` +
    `covering ${fmt(lo.time)} µs${most ? ` (most: ${most})` : ""}; the table counts them all`;
}

/**
 * The model squeezed to `width` px (never widened): the time scale shrinks, text keeps its size (labels are cut
 * to their spans when drawn), ticks are thinned so their labels do not meet. So the timeline fits a narrow
 * output area (JupyterLab with a side panel open) instead of running out of it.
 */
export function fitWidth(model: PtraceModel, width: number): PtraceModel {
  if (!(width > model.left + model.right + 100) || width >= model.width) return model;
  const k = (width - model.left - model.right) / (model.width - model.left - model.right);
  const ticks: PtraceModel["ticks"] = [];
  for (const t of model.ticks) {
    const x = r2(model.left + (t.x - model.left) * k);
    const prev = ticks[ticks.length - 1];
    if (!prev || x - prev.x >= ((prev.label.length + t.label.length) * CHAR_W) / 2 + 8) ticks.push({ ...t, x });
  }
  return { ...model, width, scale: model.scale * k, ticks };
}
