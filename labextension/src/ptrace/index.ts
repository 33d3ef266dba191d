/**
 * anywidget entry of `torchlens_widgets.widgets.profile.ProfileWidget` (bundled to
 * torchlens_widgets/static/ptrace.js).
 *
 * Traits: `model` (the profile layout, see ./model.ts) and `selected` (the op name lit up, or null). A click
 * on a table row or a span sets `selected` and saves it; a `selected` set from Python is shown as it
 * arrives, without echoing it back. A zoomed time range stays in the page: it survives a redraw for a new
 * width, not a new model.
 */

import { commit, mountView, type AnyModel as Model } from "../common/anywidget";
import { isPtraceModel } from "./model";
import { renderTrace } from "./render";

export { renderTrace } from "./render";

export type AnyModel = Model<{ model: unknown; selected: string | null }>;

export interface RenderProps {
  model: AnyModel;
  el: HTMLElement;
}

export function render({ model, el }: RenderProps): () => void {
  let zoomed: { m: unknown; range: [number, number] } | null = null; // kept when the output is only resized
  return mountView(model, el, {
    className: "tlw-ptrace-widget",
    isModel: isPtraceModel,
    empty: "ProfileWidget: no profile model to draw",
    create: (m) =>
      renderTrace(el, m, {
        selected: model.get("selected"),
        onSelect: (name) => commit(model, { selected: name }),
        ...(zoomed?.m === m ? { range: zoomed.range } : {}),
        onZoom: (a, b) => (zoomed = { m, range: [a, b] }),
      }),
    update: { selected: (view) => view.setSelected(model.get("selected")) },
    refit: true,
  });
}

export default { render };
