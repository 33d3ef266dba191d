/**
 * anywidget entry of `torchlens_widgets.widgets.GradGraphWidget` (bundled to torchlens_widgets/static/gradgraph.js).
 *
 * Traits: `model` (the picture, see ./model.ts), `selected` (node id or null), `step` (-1 = before
 * backward), `focus` / `hops`. Clicks, step controls and "focus ±N" set and save the traits; Python
 * answers a focus change with a new `model`. Values set from Python are shown without echoing back.
 */

import { isGradGraphModel } from "./model";
import { renderGradGraph, type GradGraphView } from "./view";

export { nodeDetails, stepState } from "./model";
export { renderGradGraph } from "./view";

type Callback = () => void;
type Trait = "model" | "selected" | "step" | "focus" | "hops";

/** The part of anywidget's model API this widget uses (typed here to keep the bundle dependency-free). */
export interface AnyModel {
  get(name: Trait): unknown;
  set(name: "selected" | "focus", value: number | null): void;
  set(name: "step" | "hops", value: number): void;
  save_changes(): void;
  on(event: string, callback: Callback): void;
  off(event?: string | null, callback?: Callback | null): void;
}

export interface RenderProps {
  model: AnyModel;
  el: HTMLElement;
}

const asId = (v: unknown): number | null => (typeof v === "number" && Number.isInteger(v) ? v : null);

export function render({ model, el }: RenderProps): () => void {
  el.classList.add("tlw-gradgraph-widget");
  let view: GradGraphView | null = null;

  const draw = () => {
    view?.destroy();
    view = null;
    el.replaceChildren();
    const m = model.get("model");
    if (!isGradGraphModel(m)) {
      el.textContent = "GradGraphWidget: no grad_fn graph model to draw";
      return;
    }
    view = renderGradGraph(el, m, {
      selected: asId(model.get("selected")),
      step: asId(model.get("step")) ?? -1,
      focus: asId(model.get("focus")),
      hops: asId(model.get("hops")) ?? 2,
      onSelect(id) {
        model.set("selected", id);
        model.save_changes();
      },
      onStep(k) {
        model.set("step", k);
        model.save_changes();
      },
      onFocus(focus, hops) {
        model.set("hops", hops);
        model.set("focus", focus);
        model.save_changes();
      },
    });
  };
  const onSelected = () => view?.setSelected(asId(model.get("selected")));
  const onStep = () => view?.setStep(asId(model.get("step")) ?? -1);
  const onFocus = () => view?.setFocus(asId(model.get("focus")), asId(model.get("hops")));
  const handlers: [string, Callback][] = [
    ["change:model", draw],
    ["change:selected", onSelected],
    ["change:step", onStep],
    ["change:focus", onFocus],
    ["change:hops", onFocus],
  ];
  for (const [ev, cb] of handlers) model.on(ev, cb);
  draw();
  return () => {
    for (const [ev, cb] of handlers) model.off(ev, cb);
    view?.destroy();
    view = null;
  };
}

export default { render };
