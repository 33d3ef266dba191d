/**
 * anywidget entry of `torchlens_widgets.widgets.GradGraphWidget` (bundled to torchlens_widgets/static/gradgraph.js).
 *
 * Traits: `model` (the picture, see ./model.ts), `selected` (node id or null), `step` (-1 = before
 * backward), `focus` / `hops`. Clicks, step controls and "focus ±N" set and save the traits; Python
 * answers a focus change with a new `model`. Values set from Python are shown without echoing back.
 */

import { commit, mountView, type AnyModel as Model } from "../common/anywidget";
import { isGradGraphModel } from "./model";
import { renderGradGraph, type GradGraphView } from "./view";

export { nodeDetails, stepState } from "./model";
export { renderGradGraph } from "./view";

/** The part of anywidget's model API this widget uses. */
export type AnyModel = Model<{ model: unknown; selected: number | null; step: number; focus: number | null; hops: number }>;

export interface RenderProps {
  model: AnyModel;
  el: HTMLElement;
}

const asId = (v: unknown): number | null => (typeof v === "number" && Number.isInteger(v) ? v : null);

export function render({ model, el }: RenderProps): () => void {
  const onFocus = (view: GradGraphView) => view.setFocus(asId(model.get("focus")), asId(model.get("hops")));
  return mountView(model, el, {
    className: "tlw-gradgraph-widget",
    isModel: isGradGraphModel,
    empty: "GradGraphWidget: no grad_fn graph model to draw",
    create: (m) =>
      renderGradGraph(el, m, {
        selected: asId(model.get("selected")),
        step: asId(model.get("step")) ?? -1,
        focus: asId(model.get("focus")),
        hops: asId(model.get("hops")) ?? 2,
        onSelect: (selected) => commit(model, { selected }),
        onStep: (step) => commit(model, { step }),
        onFocus: (focus, hops) => commit(model, { hops, focus }),
      }),
    update: {
      selected: (view) => view.setSelected(asId(model.get("selected"))),
      step: (view) => view.setStep(asId(model.get("step")) ?? -1),
      focus: (view) => onFocus(view),
      hops: (view) => onFocus(view),
    },
  });
}

export default { render };
