/// <reference types="vite/client" />
// The built bundle (npm run build) is a self-contained ES module exposing the anywidget entry.
import { describe, expect, it } from "vitest";
import { gradModel } from "./gradgraph_fixture";

const built = import.meta.glob("../../torchlens_widgets/static/gradgraph.js");
const load = built["../../torchlens_widgets/static/gradgraph.js"];
const source = import.meta.glob("../../torchlens_widgets/static/gradgraph.js", { query: "?raw", import: "default", eager: true });

describe.skipIf(!load)("built bundle torchlens_widgets/static/gradgraph.js", () => {
  it("imports nothing and stays small (budget 80 KB, aim 25 KB)", () => {
    const text = Object.values(source)[0] as string;
    expect(new TextEncoder().encode(text).length).toBeLessThanOrEqual(25 * 1024);
    expect(text).not.toMatch(/\bimport\s*[\s{*"'(]/);
    expect(text).not.toMatch(/https?:\/\/(?!www\.w3\.org)/);
  });

  it("default-exports render, which draws the model", async () => {
    const mod = (await load!()) as { default: { render: (p: { model: unknown; el: HTMLElement }) => () => void } };
    const model = gradModel();
    const el = document.createElement("div");
    const values: Record<string, unknown> = { model, selected: null, step: 2, focus: null, hops: 2 };
    const fake = { get: (n: string) => values[n], set() {}, save_changes() {}, on() {}, off() {} };
    const cleanup = mod.default.render({ model: fake, el });
    expect(el.querySelectorAll("g.tlw-gnode")).toHaveLength(18);
    expect(el.querySelector(".tlw-running")!.getAttribute("data-node")).toBe("2");
    cleanup();
    expect(el.querySelector("svg")).toBeNull();
  });
});
