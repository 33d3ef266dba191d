/**
 * anywidget entry of `torchlens_widgets.widgets.StrideDiagram` (bundled to torchlens_widgets/static/stride.js).
 *
 * Traits: `model` (the stride model dict, see ./model.ts) and `selection` ({} or a selected cell).
 * A click sets `selection` and saves it; a `selection` set from Python is shown as it arrives.
 */

import { commit, mountView, type AnyModel as Model } from "../common/anywidget";
import { isCellSelection, isStrideModel, type StrideSelection } from "./model";
import { renderStride } from "./render";

export { applySelection, renderStride } from "./render";
export { selectCell } from "./model";

/** The part of anywidget's model API this widget uses. */
export type AnyModel = Model<{ model: unknown; selection: StrideSelection }>;

export interface RenderProps {
  model: AnyModel;
  el: HTMLElement;
}

function currentSelection(model: AnyModel): StrideSelection {
  const sel = model.get("selection");
  return isCellSelection(sel) ? sel : {};
}

export function render({ model, el }: RenderProps): () => void {
  return mountView(model, el, {
    className: "tlw-stride-widget",
    isModel: isStrideModel,
    empty: "StrideDiagram: no stride model to draw",
    create: (m) =>
      renderStride(el, m, {
        selection: currentSelection(model),
        onSelect: (selection) => commit(model, { selection }),
      }),
    update: { selection: (view) => view.setSelection(currentSelection(model)) },
  });
}

export default { render };
