/// <reference types="vite/client" />
// The built bundle (npm run build) is a self-contained ES module exposing the anywidget entry.
import { describe, expect, it } from "vitest";
import { dispatchModel } from "./dispatch_fixture";

const built = import.meta.glob("../../torchlens_widgets/static/dispatch.js");
const load = built["../../torchlens_widgets/static/dispatch.js"];
const source = import.meta.glob("../../torchlens_widgets/static/dispatch.js", { query: "?raw", import: "default", eager: true });

describe.skipIf(!load)("built bundle torchlens_widgets/static/dispatch.js", () => {
  it("imports nothing and stays within the 80 KB budget (aiming far below)", () => {
    const text = Object.values(source)[0] as string;
    expect(text.length).toBeLessThanOrEqual(20 * 1024);
    expect(text).not.toMatch(/\bimport\s*[\s{*"'(]/);
    expect(text).not.toMatch(/https?:\/\//);
  });

  it("default-exports render, which draws the model", async () => {
    const mod = (await load!()) as { default: { render: (p: { model: unknown; el: HTMLElement }) => () => void } };
    const el = document.createElement("div");
    const values: Record<string, unknown> = { model: dispatchModel(), filters: {}, collapsed: [] };
    const fake = { get: (n: string) => values[n], set() {}, save_changes() {}, on() {}, off() {} };
    const cleanup = mod.default.render({ model: fake, el });
    expect(el.querySelectorAll("tr.tlw-op")).toHaveLength(21);
    cleanup();
    expect(el.querySelector("table")).toBeNull();
  });
});
