/**
 * The grad_fn graph picture (schema version 1): the JSON that Python's
 * `torchlens_widgets.render.grad_graph.grad_graph_model` builds (schema in that module's docstring),
 * plus `nodeDetails` / `stepState`, which restate Python's `widgets.grad_graph.node_details` and the
 * step rules. tests/render/test_grad_graph_fixture.py pins the fixture these are checked against.
 */

export interface SavedTensor {
  name: string;
  shape: number[] | null;
  dtype: string | null;
  /** The tensor's own bytes (numel × itemsize). */
  nbytes: number;
  /** Bytes it keeps alive: its whole storage (counted once per storage in totals). */
  storage_nbytes?: number;
  freed: boolean;
  alias: "input" | "output" | null;
  /** On the storage of a leaf of the graph (a parameter, an input requiring grad): not activation memory. */
  leaf?: boolean;
  /** Same number where one storage is saved by several nodes or as several views (counted once in totals). */
  tensor?: number | null;
}

export interface GroupInfo {
  prefix: string;
  indices: number[];
  repeat: number;
  representative: string;
  members: number;
  saved_nbytes: number;
}

export interface BlockInfo {
  group: number;
  prefix: string;
  index: number;
  repeat: number;
}

export interface GradNode {
  id: number;
  name: string;
  label: string;
  sub: string;
  kind: "op" | "leaf" | "custom" | "other" | "group";
  /** Space-separated classes: k-<kind>, freed, part-freed, hooked, center, boundary, rep. */
  cls: string;
  /** Box: top-left corner and size, SVG user units. */
  x: number;
  y: number;
  w: number;
  h: number;
  layer: number;
  param: string | null;
  shape: number[] | null;
  seq: number | null;
  hooks: { pre: number; post: number };
  saved: SavedTensor[];
  saved_nbytes: number;
  freed_nbytes: number;
  /** Edges to nodes left out of the view. */
  hidden: number;
  group: GroupInfo | null;
  block: BlockInfo | null;
}

export interface GradEdge {
  src: number;
  dst: number;
  slot: number;
  /** Polyline from the bottom centre of src to the top centre of dst. */
  points: [number, number][];
}

export interface GroupBox {
  id: number;
  name: string;
  label: string;
  repeat: number;
  representative: string;
  box: { x: number; y: number; w: number; h: number } | null;
}

export interface Step {
  step: number;
  /** The drawn node that ran (a group id inside a collapsed block), or null when out of view. */
  node: number | null;
  /** The node id in the full graph. */
  orig: number;
  name: string;
  leaves: number[];
  grads: (number[] | null)[];
  freed: number[];
  seconds: number | null;
}

export interface GradGraphModel {
  kind: "grad_graph";
  version: 1;
  width: number;
  height: number;
  node_h: number;
  nodes: GradNode[];
  edges: GradEdge[];
  roots: number[];
  groups: GroupBox[];
  steps: Step[];
  stats: Record<string, unknown>;
  notes: string[];
}

export function isGradGraphModel(m: unknown): m is GradGraphModel {
  if (typeof m !== "object" || m === null) return false;
  const g = m as Partial<GradGraphModel>;
  return g.kind === "grad_graph" && Array.isArray(g.nodes) && Array.isArray(g.edges) && Array.isArray(g.steps);
}

/** What the picture shows at one step: the running node, leaves getting .grad, nodes done / released. */
export interface StepState {
  running: number | null;
  leaves: number[];
  done: Set<number>;
  freed: Set<number>;
}

export function stepState(model: GradGraphModel, step: number): StepState {
  const s = step >= 0 ? model.steps[step] : undefined;
  const done = new Set<number>();
  const freed = new Set<number>();
  for (const st of model.steps) {
    if (st.step > step) break;
    if (st.node !== null && st.step < step) done.add(st.node);
    for (const f of st.freed) freed.add(f);
  }
  return { running: s ? s.node : null, leaves: s ? s.leaves : [], done, freed };
}

export interface NodeDetails {
  id: number;
  name: string;
  label: string;
  kind: GradNode["kind"];
  param: string | null;
  shape: number[] | null;
  seq: number | null;
  hooks: { pre: number; post: number };
  saved: SavedTensor[];
  saved_nbytes: number;
  held_nbytes: number;
  hidden: number;
  group: GroupInfo | null;
  block: BlockInfo | null;
  state: "running" | "done" | "waiting" | "not run" | null;
  ran_at: number[];
  freed_at: number | null;
  grads: (number[] | null)[];
}

/** Python's `node_details(model, node_id, step)`, field for field. */
export function nodeDetails(model: GradGraphModel, id: number, step: number): NodeDetails | null {
  const nd = model.nodes.find((n) => n.id === id);
  if (!nd) return null;
  const steps = model.steps;
  const ranAt = steps.filter((s) => s.node === id).map((s) => s.step);
  const freedStep = steps.find((s) => s.freed.includes(id));
  const freedAt = freedStep ? freedStep.step : null;
  const released = freedAt !== null && freedAt <= step;
  const saved = nd.saved.map((s) => ({ ...s, freed: Boolean(s.freed) || released }));
  let state: NodeDetails["state"] = null;
  if (steps.length) {
    if (step >= 0 && step < steps.length && steps[step]!.node === id) state = "running";
    else if (ranAt.some((k) => k < step)) state = "done";
    else state = ranAt.length ? "waiting" : "not run";
  }
  const first = steps.find((s) => s.node === id && s.orig === id);
  return {
    id: nd.id,
    name: nd.name,
    label: nd.label,
    kind: nd.kind,
    param: nd.param,
    shape: nd.shape,
    seq: nd.seq,
    hooks: { ...nd.hooks },
    saved,
    saved_nbytes: nd.saved_nbytes,
    held_nbytes: saved.reduce((n, s) => n + (s.freed ? 0 : s.nbytes || 0), 0),
    hidden: nd.hidden,
    group: nd.group,
    block: nd.block,
    state,
    ran_at: ranAt,
    freed_at: freedAt,
    grads: first ? first.grads : [],
  };
}

/** Python's `_fmt_bytes` in render/grad_graph.py. */
export function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  let scaled = n / 1024;
  for (const unit of ["KiB", "MiB", "GiB"]) {
    if (scaled < 1024 || unit === "GiB") return `${scaled.toFixed(1)} ${unit}`;
    scaled /= 1024;
  }
  return `${n} B`;
}

export function fmtShape(shape: number[] | null | undefined): string {
  return shape ? `[${shape.join(", ")}]` : "[?]";
}
