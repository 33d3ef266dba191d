/**
 * The program-grid model (schema `tgrid` version 1): the JSON that Python's
 * `torchlens_widgets.render.triton_grid.program_grid_model` builds from the Triton grid lens. Index runs are
 * flat `[start, stop, start, stop, …]` arrays (stop exclusive), never element lists, so a 1,024-program
 * kernel stays small. This module decodes it and computes what the view draws: where each program sits,
 * and the state of each drawn element of a tensor for the selected program.
 */

export interface TgridTensor {
  name: string;
  dtype: string;
  shape: number[];
  numel: number;
  contiguous: boolean;
}

/** What one `tl.load` / `tl.store` site has in common across programs. */
export interface TgridSite {
  op: "load" | "store";
  /** Index into `tensors`. */
  tensor: number;
  line: number | null;
  /** Pointers in the whole block (all tensors, masked or not). */
  lanes: number;
}

/** `[site, touched, elements, masked?, masked lanes?, out of bounds?]` (trailing empties left off). */
export type RawAccess = [number, number, number[], number[]?, number?, number[]?];
/** `[flat pid, out-of-bounds errors, accesses]`. */
export type RawProgram = [number, number, RawAccess[]];

export interface TgridModel {
  kind: "tgrid";
  version: 1;
  kernel: string;
  grid: number[];
  num_programs: number;
  interpreter: string;
  tensors: TgridTensor[];
  sites: TgridSite[];
  /** [line, source text] of the lines that loaded or stored. */
  source: [number, string][];
  /** Recorded programs, in launch order. */
  programs: RawProgram[];
  /** The first few out-of-bounds messages (any program, recorded or not). */
  messages: string[];
  errors_total: number;
  warnings: string[];
  left_out: string | null;
}

/** One access of the selected program, decoded. */
export interface Access {
  /** Position in the program's accesses (the order the kernel made them). */
  index: number;
  op: "load" | "store";
  tensor: number;
  line: number | null;
  lanes: number;
  touched: number;
  elements: number[];
  masked: number[];
  maskedLanes: number;
  oob: number[];
}

export interface Program {
  /** Flat id: x + gx * (y + gy * z). */
  flat: number;
  pid: number[];
  errors: number;
  accesses: Access[];
}

export function isTgridModel(m: unknown): m is TgridModel {
  if (typeof m !== "object" || m === null) return false;
  const g = m as Partial<TgridModel>;
  return g.kind === "tgrid" && Array.isArray(g.grid) && Array.isArray(g.programs) && Array.isArray(g.sites);
}

/** The grid as three axes (missing ones are 1). */
export function dims(grid: number[]): [number, number, number] {
  return [grid[0] ?? 1, grid[1] ?? 1, grid[2] ?? 1];
}

/** Python's `flat_pid`: axis 0 fastest. */
export function flatPid(pid: readonly number[], grid: number[]): number {
  const [gx, gy] = dims(grid);
  return (pid[0] ?? 0) + gx * ((pid[1] ?? 0) + gy * (pid[2] ?? 0));
}

export function pidOf(flat: number, grid: number[]): number[] {
  const [gx, gy] = dims(grid);
  const pid = [flat % gx, Math.floor(flat / gx) % gy, Math.floor(flat / (gx * gy))];
  return pid.slice(0, grid.length);
}

/** Python's tuple repr of a program id: (3,) or (1, 2). */
export function pidText(pid: readonly number[]): string {
  return `(${pid.join(", ")}${pid.length === 1 ? "," : ""})`;
}

/** `0..3, 8` for flat runs (inclusive ends), "-" for none: Python's `format_runs`. */
export function runsText(runs: readonly number[]): string {
  const parts: string[] = [];
  for (let k = 0; k + 1 < runs.length; k += 2) {
    const a = runs[k] as number;
    const b = runs[k + 1] as number;
    parts.push(b - a === 1 ? `${a}` : `${a}..${b - 1}`);
  }
  return parts.length ? parts.join(", ") : "-";
}

export function decodeProgram(model: TgridModel, raw: RawProgram): Program {
  const [flat, errors, accesses] = raw;
  return {
    flat,
    pid: pidOf(flat, model.grid),
    errors,
    accesses: accesses.map((a, index) => {
      const site = model.sites[a[0]] as TgridSite;
      return {
        index,
        op: site.op,
        tensor: site.tensor,
        line: site.line,
        lanes: site.lanes,
        touched: a[1],
        elements: a[2],
        masked: a[3] ?? [],
        maskedLanes: a[4] ?? 0,
        oob: a[5] ?? [],
      };
    }),
  };
}

/** Flat pid → position in `programs`. */
export function programIndex(model: TgridModel): Map<number, number> {
  const at = new Map<number, number>();
  model.programs.forEach((p, i) => at.set(p[0], i));
  return at;
}

/** Python's default (`select_program(data, None)`): the first program with an error, else the first. */
export function defaultProgram(model: TgridModel): number | null {
  const bad = model.programs.find((p) => p[1] > 0);
  const first = bad ?? model.programs[0];
  return first ? first[0] : null;
}

/** A `program` trait value (a list of ints) as a flat pid, or null when it is not a recorded program. */
export function asFlat(model: TgridModel, value: unknown, at: Map<number, number> = programIndex(model)): number | null {
  if (!Array.isArray(value) || value.length !== model.grid.length) return null;
  if (!value.every((v, k) => Number.isInteger(v) && v >= 0 && v < (model.grid[k] as number))) return null;
  const flat = flatPid(value as number[], model.grid);
  return at.has(flat) ? flat : null;
}

/** What the selected program did to one element; the order is the drawing priority (later wins). */
export const STATES = ["oth", "mk", "ld", "st", "both", "oob"] as const;
export type State = (typeof STATES)[number] | "" | "ghost";

export const STATE_TEXT: Record<Exclude<State, "">, string> & { "": string } = {
  ld: "loaded",
  st: "stored",
  both: "loaded and stored",
  mk: "masked off (lane switched off, not touched)",
  oob: "out of bounds, no mask: an error",
  oth: "touched by another program",
  "": "untouched",
  ghost: "past the end of the tensor",
};

/** The short word in a cell's title (Python's static titles use the same). */
export const STATE_WORD: Record<string, string> = {
  ld: "loaded", st: "stored", both: "loaded+stored", mk: "masked", oob: "OUT OF BOUNDS", oth: "other program",
  "": "untouched", ghost: "past the end",
};

/** The span of indices `[lo, hi)` the selected program's accesses of `tensor` reach (masked, out of bounds
 * included), or null when it does not touch the tensor. */
export function reach(accesses: Access[], tensor: number): [number, number] | null {
  let lo = Infinity;
  let hi = -Infinity;
  for (const a of accesses) {
    if (a.tensor !== tensor) continue;
    for (const runs of [a.elements, a.masked, a.oob]) {
      for (let k = 0; k + 1 < runs.length; k += 2) {
        lo = Math.min(lo, runs[k] as number);
        hi = Math.max(hi, runs[k + 1] as number);
      }
    }
  }
  return lo < hi ? [lo, hi] : null;
}

export interface Window {
  /** Elements per row. */
  cols: number;
  /** Drawn indices: [start, stop). */
  start: number;
  stop: number;
  /** Rows labelled as matrix rows ([r]) rather than by flat index. */
  matrix: boolean;
}

/** Rows drawn per tensor at most: 32 rows of 32 is Python's MAX_CELLS (1,024). */
export const MAX_ROWS = 32;
export const WRAP = 32;

/** Which part of a tensor to draw: all of it when small, else the rows around what the program reached
 * (one row of context each side), at most MAX_ROWS rows. */
export function tensorWindow(t: TgridTensor, span: [number, number] | null): Window {
  const n = t.numel;
  const matrix = t.contiguous && t.shape.length === 2 && (t.shape[1] as number) > 0 && (t.shape[1] as number) <= 64;
  const cols = matrix ? (t.shape[1] as number) : Math.min(WRAP, Math.max(n, 1));
  const lo = span ? Math.max(span[0], 0) : 0;
  const hi = span ? Math.max(span[1], lo + 1) : Math.min(n, 1);
  const end = Math.max(n, hi);
  if (Math.ceil(end / cols) <= MAX_ROWS) return { cols, start: 0, stop: end, matrix };
  const first = Math.max(Math.floor(lo / cols) - 1, 0);
  const last = Math.min(Math.ceil(hi / cols) + 1, first + MAX_ROWS, Math.ceil(end / cols));
  return { cols, start: first * cols, stop: Math.min(last * cols, end), matrix };
}

/** What a drawn window leaves out: Python's `window_notes`, word for word. */
export function windowNotes(t: TgridTensor, win: Window, span: [number, number] | null, before: number): string[] {
  const notes: string[] = [];
  if (win.start > 0) notes.push(`elements 0..${win.start - 1} above not drawn`);
  if (win.stop < t.numel) notes.push(`elements ${win.stop}..${t.numel - 1} below not drawn`);
  if (span !== null && span[1] > Math.max(win.stop, t.numel)) notes.push(`indices up to ${span[1] - 1} reached, not all drawn`);
  if (before) notes.push(`${before} index(es) before the first element`);
  if (!t.contiguous) notes.push("not contiguous: cells are storage positions from its first element");
  return notes;
}

/** Index runs clipped to the window, applied to the cells as `state` (a later state wins over `oth`). */
function paint(cells: State[], runs: readonly number[], win: Window, state: State, merge: boolean): number {
  let before = 0;
  for (let k = 0; k + 1 < runs.length; k += 2) {
    const a = runs[k] as number;
    const b = runs[k + 1] as number;
    if (a < 0) before += Math.min(b, 0) - a;
    for (let i = Math.max(a, win.start); i < Math.min(b, win.stop); i++) {
      const at = i - win.start;
      const was = cells[at] as State;
      if (merge && ((was === "ld" && state === "st") || (was === "st" && state === "ld"))) cells[at] = "both";
      else if (was === "both" && (state === "ld" || state === "st")) continue;
      else if (STATES.indexOf(state as never) >= STATES.indexOf(was as never)) cells[at] = state;
    }
  }
  return before;
}

/** The state of each drawn element of `tensor` (index `win.start + k` at position k), and how many indices
 * the selected program reached before the first element. Other programs' elements are `oth`. */
export function cellStates(
  model: TgridModel,
  selected: Program,
  tensor: number,
  win: Window,
): { cells: State[]; before: number } {
  const n = (model.tensors[tensor] as TgridTensor).numel;
  const cells: State[] = [];
  for (let i = win.start; i < win.stop; i++) cells.push(i < n ? "" : "ghost");
  for (const raw of model.programs) {
    if (raw[0] === selected.flat) continue;
    for (const a of raw[2]) {
      if ((model.sites[a[0]] as TgridSite).tensor === tensor) paint(cells, a[2], win, "oth", false);
    }
  }
  let before = 0;
  for (const a of selected.accesses) {
    if (a.tensor !== tensor) continue;
    before += paint(cells, a.masked, win, "mk", false);
    before += paint(cells, a.elements, win, a.op === "load" ? "ld" : "st", true);
    before += paint(cells, a.oob, win, "oob", false);
  }
  return { cells, before };
}

/** Whether index `i` is in flat runs. */
export function inRuns(runs: readonly number[], i: number): boolean {
  for (let k = 0; k + 1 < runs.length; k += 2) if (i >= (runs[k] as number) && i < (runs[k + 1] as number)) return true;
  return false;
}

/** The selected program's accesses, by source line (then in the kernel's order); no line last. */
export function byLine(accesses: Access[]): Access[] {
  return accesses.slice().sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity) || a.index - b.index);
}

/** Programs with any masked-off lane (the ragged edge of the grid). */
export function hasMasked(raw: RawProgram): boolean {
  return raw[2].some((a) => (a[4] ?? 0) > 0);
}
