/**
 * anywidget entry of `torchlens_widgets.widgets.triton_grid.ProgramGridWidget` (bundled to
 * torchlens_widgets/static/tgrid.js).
 *
 * Traits: `model` (the compact program-grid model, see ./model.ts) and `program` (the program id shown, a
 * list such as [3] or [1, 2]). A click on a program sets `program` and saves it; a `program` set from Python
 * is shown as it arrives, without echoing it back.
 */

import { commit, mountView, type AnyModel as Model } from "../common/anywidget";
import { isTgridModel } from "./model";
import { renderGrid } from "./render";

export { renderGrid } from "./render";

/** The part of anywidget's model API this widget uses. */
export type AnyModel = Model<{ model: unknown; program: number[] | null }>;

export interface RenderProps {
  model: AnyModel;
  el: HTMLElement;
}

export function render({ model, el }: RenderProps): () => void {
  return mountView(model, el, {
    className: "tlw-tgrid-widget",
    isModel: isTgridModel,
    empty: "ProgramGridWidget: no program-grid model to draw",
    create: (m) =>
      renderGrid(el, m, {
        program: model.get("program"),
        onSelect: (pid) => commit(model, { program: pid }),
      }),
    update: { program: (view) => view.setProgram(model.get("program")) },
  });
}

export default { render };
