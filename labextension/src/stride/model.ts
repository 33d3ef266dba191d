/**
 * The stride model (schema version 1): the JSON that `torchlens_widgets.render.stride.stride_model`
 * builds in Python. Field for field the same as the schema in that module's docstring; the Python
 * test tests/render/test_stride_fixture.py pins the fixture these types are checked against.
 */

/** One storage cell: position `i` in the storage, drawn at (x, y). */
export interface StrideCell {
  i: number;
  x: number;
  y: number;
  /** Formatted value, or null for meta tensors. */
  value: string | null;
  /** True when cells were skipped before this one (large storages): drawn as a red "…". */
  gap_before: boolean;
  /** Indices (into `tensors`) of the tensors with a drawn element reading this cell. */
  readers: number[];
}

/** One storage: a strip of cells, with its title drawn at (x, title_y). */
export interface StrideStorage {
  /** "S0", "S1", … in order of first appearance. */
  id: string;
  label: string;
  dtype: string;
  itemsize: number;
  size: number;
  nbytes: number;
  x: number;
  y: number;
  title_y: number;
  truncated: boolean;
  /** Width of its cells (and of its tensors' elements) in px: sized to the longest value it writes. */
  cell_w: number;
  cells: StrideCell[];
}

/** The label of one [i, j, :, :] slice of a tensor with more than two dimensions. */
export interface StrideSlice {
  label: string;
  x: number;
  y: number;
}

/** One drawn logical element: flat row-major index `e`, multi-index `idx`, storage cell `s`. */
export interface StrideElement {
  e: number;
  idx: number[];
  s: number;
  x: number;
  y: number;
  value: string | null;
}

export interface StrideTensor {
  /** Position in `tensors` (and in the Python call). */
  index: number;
  name: string;
  /** Id of the storage it reads ("S0", …). */
  storage: string;
  shape: number[];
  stride: number[];
  offset: number;
  contiguous: boolean;
  is_view: boolean;
  base: string | null;
  version: number | null;
  expanded_dims: number[];
  numel: number;
  shown: number;
  truncated: boolean;
  title: string;
  /** Top-left corner of the grid; a colour swatch and the title are drawn above it. */
  x: number;
  y: number;
  /** A CSS colour (a theme variable, `var(--tlw-catN)`): used in style attributes, never as an SVG attribute. */
  color: string;
  /** Width of its elements in px (its storage's cell_w). */
  cell_w: number;
  slices: StrideSlice[];
  elements: StrideElement[];
}

export interface StrideModel {
  kind: "stride";
  version: 1;
  width: number;
  height: number;
  /** Height of one cell in px (rects are cell - 2 high), and the least cell width. */
  cell: number;
  notes: string[];
  storages: StrideStorage[];
  tensors: StrideTensor[];
}

/** A selected storage cell and every drawn element reading it ([tensor index, flat element index]). */
export interface CellSelection {
  storage: string;
  cell: number;
  elements: [number, number][];
}

/** The `selection` trait: a selected cell, or {} for nothing. */
export type StrideSelection = CellSelection | Record<string, never>;

export function isCellSelection(sel: unknown): sel is CellSelection {
  if (typeof sel !== "object" || sel === null) return false;
  const s = sel as Partial<CellSelection>;
  return typeof s.storage === "string" && typeof s.cell === "number";
}

export function isStrideModel(m: unknown): m is StrideModel {
  if (typeof m !== "object" || m === null) return false;
  const s = m as Partial<StrideModel>;
  return s.kind === "stride" && Array.isArray(s.storages) && Array.isArray(s.tensors);
}

/**
 * Exactly what Python's `StrideDiagram.select_cell(storage, cell)` computes: every drawn element,
 * across all tensors over `storage`, whose storage index equals `cell`.
 */
export function selectCell(model: StrideModel, storage: string, cell: number): CellSelection {
  const elements: [number, number][] = [];
  for (const t of model.tensors) {
    if (t.storage !== storage) continue;
    for (const el of t.elements) if (el.s === cell) elements.push([t.index, el.e]);
  }
  return { storage, cell, elements };
}
