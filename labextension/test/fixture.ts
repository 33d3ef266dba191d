// The fixture written by tests/render/test_stride_fixture.py::write_fixture (Python's stride_model / stride_svg).
import fixtureJson from "./fixtures/stride_model.json";
import pythonSvg from "./fixtures/stride_model.svg?raw";
import type { StrideModel } from "../src/stride/model";

/** A fresh deep copy of the fixture model per call, so tests cannot leak edits into each other. */
export function fixtureModel(): StrideModel {
  return structuredClone(fixtureJson) as unknown as StrideModel;
}

export const PYTHON_SVG: string = pythonSvg;

/** Tensor indices in the fixture (see fixture_tensors() in the Python test). */
export const T = { x: 0, xt: 1, x3: 2, row: 3, ex: 4, copy: 5 } as const;
