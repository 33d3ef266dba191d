/**
 * anywidget entry of `torchlens_widgets.widgets.StrideDiagram` (bundled to torchlens_widgets/static/stride.js).
 *
 * Traits: `model` (the stride model dict, see ./model.ts) and `selection` ({} or a selected cell).
 * A click sets `selection` and saves it; a `selection` set from Python is shown as it arrives.
 */

import { isCellSelection, isStrideModel, type StrideSelection } from "./model";
import { renderStride, type StrideView } from "./render";

export { applySelection, renderStride } from "./render";
export { selectCell } from "./model";

type Callback = () => void;

/** The part of anywidget's model API this widget uses (typed here to keep the bundle dependency-free). */
export interface AnyModel {
  get(name: "model"): unknown;
  get(name: "selection"): unknown;
  set(name: "selection", value: StrideSelection): void;
  save_changes(): void;
  on(event: string, callback: Callback): void;
  off(event?: string | null, callback?: Callback | null): void;
}

export interface RenderProps {
  model: AnyModel;
  el: HTMLElement;
}

function currentSelection(model: AnyModel): StrideSelection {
  const sel = model.get("selection");
  return isCellSelection(sel) ? sel : {};
}

export function render({ model, el }: RenderProps): () => void {
  el.classList.add("tlw-stride-widget");
  let view: StrideView | null = null;

  const draw = () => {
    view?.destroy();
    view = null;
    el.replaceChildren();
    const m = model.get("model");
    if (!isStrideModel(m)) {
      el.textContent = "StrideDiagram: no stride model to draw";
      return;
    }
    view = renderStride(el, m, {
      selection: currentSelection(model),
      onSelect(sel) {
        model.set("selection", sel);
        model.save_changes();
      },
    });
  };
  const onSelection = () => view?.setSelection(currentSelection(model));

  model.on("change:model", draw);
  model.on("change:selection", onSelection);
  draw();
  return () => {
    model.off("change:model", draw);
    model.off("change:selection", onSelection);
    view?.destroy();
    view = null;
  };
}

export default { render };
