/// <reference types="vite/client" />
import { describe, expect, it } from "vitest";
import { memModel } from "./memory_fixture";

const built = import.meta.glob("../../torchlens_widgets/static/memory.js");
const load = built["../../torchlens_widgets/static/memory.js"];
const source = import.meta.glob("../../torchlens_widgets/static/memory.js", { query: "?raw", import: "default", eager: true });

describe.skipIf(!load)("built bundle torchlens_widgets/static/memory.js", () => {
  it("imports nothing, loads nothing from the network, and stays within its budget (80 KB; aim 20 KB)", () => {
    const text = Object.values(source)[0] as string;
    expect(new TextEncoder().encode(text).length).toBeLessThanOrEqual(20 * 1024);
    expect(text).not.toMatch(/\bimport\s*[\s{*"'(]/);
    expect(text).not.toMatch(/https?:\/\/(?!www\.w3\.org)/);
  });

  it("default-exports render, which draws the model", async () => {
    const mod = (await load!()) as { default: { render: (p: { model: unknown; el: HTMLElement }) => () => void } };
    const el = document.createElement("div");
    const values: Record<string, unknown> = { model: memModel(), panel: {}, selected_event: null, hovered_band: null, x_axis: "event" };
    const fake = { get: (n: string) => values[n], set() {}, save_changes() {}, on() {}, off() {} };
    const cleanup = mod.default.render({ model: fake, el });
    expect(el.querySelectorAll("g.bd")).toHaveLength(2);
    cleanup();
    expect(el.querySelector("svg")).toBeNull();
  });
});
