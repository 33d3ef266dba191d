/// <reference types="vite/client" />
// The built bundle (npm run build) is a self-contained ES module exposing the anywidget entry.
import { describe, expect, it } from "vitest";
import { fixtureModel } from "./fixture";

const built = import.meta.glob("../../torchlens_widgets/static/stride.js");
const load = built["../../torchlens_widgets/static/stride.js"];
const source = import.meta.glob("../../torchlens_widgets/static/stride.js", { query: "?raw", import: "default", eager: true });

describe.skipIf(!load)("built bundle torchlens_widgets/static/stride.js", () => {
  it("imports nothing and stays small", () => {
    const text = Object.values(source)[0] as string;
    expect(text.length).toBeLessThanOrEqual(50 * 1024);
    expect(text).not.toMatch(/\bimport\s*[\s{*"'(]/);
    expect(text).not.toMatch(/https?:\/\/(?!www\.w3\.org)/);
  });

  it("default-exports render, which draws the model", async () => {
    const mod = (await load!()) as { default: { render: (p: { model: unknown; el: HTMLElement }) => () => void } };
    const model = fixtureModel();
    const el = document.createElement("div");
    const fake = { get: (n: string) => (n === "model" ? model : {}), set() {}, save_changes() {}, on() {}, off() {} };
    const cleanup = mod.default.render({ model: fake, el });
    expect(el.querySelectorAll(".tlw-element")).toHaveLength(33);
    cleanup();
    expect(el.querySelector("svg")).toBeNull();
  });
});
