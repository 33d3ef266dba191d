import { describe, expect, it } from "vitest";
import { fmtBytes, isGradGraphModel, nodeDetails } from "../src/gradgraph/model";
import { DETAILS_CASES, N, gradModel } from "./gradgraph_fixture";

describe("nodeDetails equals Python's node_details", () => {
  it.each(DETAILS_CASES.map((c) => [c.node, c.step, c] as const))("node %i at step %i", (_n, _s, c) => {
    expect(nodeDetails(gradModel(), c.node, c.step)).toEqual(c.details);
  });

  it("covers every state and freed greying", () => {
    const states = new Set(DETAILS_CASES.map((c) => c.details.state));
    expect(states).toEqual(new Set(["running", "done", "waiting"]));
    expect(DETAILS_CASES.some((c) => c.details.saved.some((s) => s.freed))).toBe(true);
    expect(DETAILS_CASES.some((c) => c.details.group !== null)).toBe(true);
  });

  it("a tensor already freed in the graph stays freed at every step (greyed, never an error)", () => {
    const model = gradModel();
    const nd = model.nodes.find((n) => n.id === N.addmm)!;
    nd.saved[0]!.freed = true;
    nd.saved[0]!.shape = null;
    nd.saved[0]!.nbytes = 0;
    const d = nodeDetails(model, N.addmm, -1)!;
    expect(d.saved.map((s) => s.freed)).toEqual([true, false]);
    expect(d.held_nbytes).toBe(nd.saved[1]!.nbytes);
    expect(nodeDetails(model, 999, 0)).toBeNull();
  });

  it("formats bytes like Python", () => {
    expect([fmtBytes(0), fmtBytes(1023), fmtBytes(1024), fmtBytes(1536), fmtBytes(5 * 1024 ** 2)]).toEqual(
      ["0 B", "1023 B", "1.0 KiB", "1.5 KiB", "5.0 MiB"],
    );
    expect(isGradGraphModel({})).toBe(false);
    expect(isGradGraphModel(gradModel())).toBe(true);
  });
});
