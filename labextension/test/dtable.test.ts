import { describe, expect, it } from "vitest";
import { render } from "../src/dtable/index";
import { FakeModel } from "./fake_model";

const MODEL = {
  op: "aten::add.Tensor",
  schema: "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
  css: ".tlw-theme{}",
  scenarios: [
    { name: "as given", chosen: "AutogradCPU", html: '<table><tr class="runs" data-key="AutogradCPU"><td>AutogradCPU</td></tr></table>' },
    { name: "torch.inference_mode()", chosen: "CPU", html: '<table><tr class="skip" data-key="BackendSelect"></tr><tr class="runs" data-key="CPU"><td>CPU</td></tr></table>' },
  ],
};

describe("dispatch table widget", () => {
  it("shows the selected state and moves the highlight when another state is pressed", () => {
    const model = new FakeModel({ model: MODEL, selected: "as given" });
    const el = document.createElement("div");
    render({ model: model as never, el });
    const runs = () => el.querySelector("tr.runs")!.getAttribute("data-key");
    expect(runs()).toBe("AutogradCPU");
    const buttons = [...el.querySelectorAll<HTMLButtonElement>(".tlw-states button")];
    expect(buttons.map((b) => b.textContent)).toEqual(["as given", "torch.inference_mode()"]);
    expect(buttons[0]!.getAttribute("aria-pressed")).toBe("true");
    buttons[1]!.click();
    expect(runs()).toBe("CPU");
    expect(model.get("selected")).toBe("torch.inference_mode()");
    expect(buttons[1]!.getAttribute("aria-pressed")).toBe("true");
  });

  it("follows `selected` set from Python, and says when there is nothing to draw", () => {
    const model = new FakeModel({ model: MODEL, selected: "as given" });
    const el = document.createElement("div");
    render({ model: model as never, el });
    model.set("selected", "torch.inference_mode()");
    expect(el.querySelector("tr.runs")!.getAttribute("data-key")).toBe("CPU");
    const empty = document.createElement("div");
    render({ model: new FakeModel({ model: {}, selected: "" }) as never, el: empty });
    expect(empty.textContent).toContain("no table to draw");
  });
});
