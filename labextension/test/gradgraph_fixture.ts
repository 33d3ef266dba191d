// The fixture written by tests/render/test_grad_graph_fixture.py::write_fixture (Python's grad_graph_model,
// grad_graph_svg and node_details on a real backward of a small residual net with three blocks h.0–h.2).
import modelJson from "./fixtures/grad_graph_model.json";
import casesJson from "./fixtures/grad_graph_cases.json";
import pythonSvg from "./fixtures/grad_graph_model.svg?raw";
import focusedSvg from "./fixtures/grad_graph_focused.svg?raw";
import type { GradGraphModel, NodeDetails } from "../src/gradgraph/model";

/** A fresh deep copy per call, so tests cannot leak edits into each other. */
export function gradModel(): GradGraphModel {
  return structuredClone(modelJson) as unknown as GradGraphModel;
}

export function focusedModel(): GradGraphModel {
  return structuredClone(casesJson.focused) as unknown as GradGraphModel;
}

export interface DetailsCase {
  node: number;
  step: number;
  details: NodeDetails;
}

export const DETAILS_CASES = casesJson.details as unknown as DetailsCase[];
export const PYTHON_SVG: string = pythonSvg;
export const PYTHON_FOCUSED_SVG: string = focusedSvg;

/** Node ids in the fixture (asserted in the Python test). */
export const N = { root: 0, addmm: 2, outBias: 3, relu: 13, repAddmm: 18, leafBias: 24, group: 29 } as const;
/** ReluBackward0 of h.0 runs and releases its saved result at this step. */
export const RELU_STEP = 19;
