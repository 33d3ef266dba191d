// The fixture written by tests/render/test_memory_fixture.py::write_fixture (Python's memory_model,
// memory_svg, memory_state_model on the hand-made snapshots of tests/fixtures/memory).
import modelJson from "./fixtures/memory_model.json";
import casesJson from "./fixtures/memory_cases.json";
import pythonSvg from "./fixtures/memory_model.svg?raw";
import type { MemoryModel, MemoryState } from "../src/memory/model";

export const memModel = (): MemoryModel => structuredClone(modelJson) as unknown as MemoryModel;
export const timeModel = (): MemoryModel => structuredClone(casesJson.time) as unknown as MemoryModel;
export const aggregatedModel = (): MemoryModel => structuredClone(casesJson.aggregated) as unknown as MemoryModel;
export const memState = (): MemoryState => structuredClone(casesJson.state) as unknown as MemoryState;
export const PYTHON_SVG: string = pythonSvg;
export const PYTHON_SVGS = casesJson.svg as { time: string; aggregated: string; state: string };
/** [user-space x of a click, the event Python's col_event says it selects]. */
export const CLICKS = casesJson.clicks as [number, number][];
/** segments.json: the state panel is after this event (a pending free). */
export const STATE_EVENT = 4;
/** One allocation whose stack mixes library frames with the learner's (a notebook cell, a file); no times. */
export const stacksModel = (): MemoryModel => structuredClone(casesJson.stacks) as unknown as MemoryModel;
