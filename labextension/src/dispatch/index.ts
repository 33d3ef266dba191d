/**
 * anywidget entry of `torchlens_widgets.widgets.DispatchTraceWidget` (bundled to torchlens_widgets/static/dispatch.js).
 *
 * Traits: `model` (every row of the trace, see ./model.ts), `filters` ({text, hide_views, only_copies,
 * empty_calls}) and `collapsed` (ids of folded calls). Toolbar and fold clicks set and save the
 * traits; values set from Python are shown as they arrive, without echoing them back.
 */

import { commit, mountView, type AnyModel as Model } from "../common/anywidget";
import { isDispatchModel, type Filters } from "./model";
import { renderDispatch } from "./render";

export { renderDispatch } from "./render";
export { collapseRows, filterRows } from "./model";

/** The part of anywidget's model API this widget uses. */
export type AnyModel = Model<{ model: unknown; filters: Filters; collapsed: string[] }>;

export interface RenderProps {
  model: AnyModel;
  el: HTMLElement;
}

export function render({ model, el }: RenderProps): () => void {
  return mountView(model, el, {
    className: "tlw-dispatch-widget",
    isModel: isDispatchModel,
    empty: "DispatchTrace: no dispatch model to draw",
    create: (m) => {
      const collapsed = model.get("collapsed");
      return renderDispatch(el, m, {
        filters: model.get("filters") as Filters | null,
        collapsed: Array.isArray(collapsed) ? (collapsed as string[]) : [],
        onFilters: (filters) => commit(model, { filters }),
        onCollapsed: (ids) => commit(model, { collapsed: ids }),
      });
    },
    update: {
      filters: (view) => view.setFilters(model.get("filters")),
      collapsed: (view) => view.setCollapsed(model.get("collapsed")),
    },
  });
}

export default { render };
