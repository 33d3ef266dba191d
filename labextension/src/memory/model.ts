/**
 * The memory timeline contract: what `torchlens_widgets.render.memory.memory_model` and
 * `memory_state_model` send (schema in that module's docstring). Geometry is computed in Python;
 * this side only draws it and maps clicks to events.
 */

export interface Band {
  id: number;
  alloc: number;
  x: number;
  y: number;
  w: number;
  h: number;
  pw: number;
  /** CSS class that colours the band (`f-<theme token>`), never a colour. */
  cls: string;
  size: number;
  category: string | null;
  start: number | null;
  end: number | null;
  stack: string;
  label: string;
}

export interface Tick {
  x?: number;
  y?: number;
  label: string;
}

/** A legend entry: a heading, a curve's line sample or a filled box, with its label; laid out by Python. */
export interface LegendItem {
  kind: "head" | "line" | "box";
  x: number;
  y: number;
  cls: string;
  label: string;
}

export interface MemoryModel {
  kind: "memory_timeline";
  version: number;
  source: "cuda" | "cpu";
  x_axis: "event" | "time";
  /** Whether the trace has increasing times on every event (the wall-clock axis is possible). */
  has_time: boolean;
  /** The picture's title line (its name and counts). */
  title: string;
  width: number;
  height: number;
  plot: { x: number; y: number; w: number; h: number };
  n_events: number;
  n_allocations: number;
  y_max: number;
  curves: { name: string; cls: string; d: string }[];
  others: { d: string; allocations: number; peak_bytes: number };
  bands: Band[];
  col_event: number[];
  x_ticks: { x: number; label: string }[];
  y_ticks: { y: number; label: string }[];
  legend: LegendItem[];
  notes: string[];
  note_lines: { y: number; text: string }[];
}

export interface StateBlock {
  x: number;
  w: number;
  state: "active" | "pending" | "free";
  size: number;
  alloc: number | null;
  title: string;
}

export interface StateRow {
  label: string;
  y: number;
  x: number;
  w: number;
  size: number;
  blocks: StateBlock[];
}

export interface MemoryState {
  kind: "memory_state";
  version: number;
  index: number;
  action: string;
  x: number;
  width: number;
  height: number;
  title: string;
  title_lines: { y: number; text: string }[];
  rows: StateRow[];
  keys: LegendItem[];
  explanation: string[] | null;
  lines: { y: number; text: string }[];
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;

export function isMemoryModel(v: unknown): v is MemoryModel {
  return isObj(v) && v["kind"] === "memory_timeline" && Array.isArray(v["bands"]) && Array.isArray(v["col_event"]);
}

export function isMemoryState(v: unknown): v is MemoryState {
  return isObj(v) && v["kind"] === "memory_state" && Array.isArray(v["rows"]);
}

/** The event a click at user-space x selects: the one nearest that pixel column's centre (Python's col_event). */
export function eventAt(model: MemoryModel, x: number): number | null {
  const n = model.col_event.length;
  if (!n) return null;
  const c = Math.min(Math.max(Math.floor(x - model.plot.x), 0), n - 1);
  return model.col_event[c] ?? null;
}

/** The x of the column whose nearest event is `i` (for the marker before Python's state arrives). */
export function columnOf(model: MemoryModel, i: number): number | null {
  const k = model.col_event.indexOf(i);
  if (k >= 0) return model.plot.x + k + 0.5;
  let best = -1;
  for (let c = 0; c < model.col_event.length; c++) if ((model.col_event[c] ?? 0) <= i) best = c;
  return best < 0 ? null : model.plot.x + best + 0.5;
}
