/**
 * anywidget entry of `torchlens_widgets.widgets.DispatchTraceWidget` (bundled to torchlens_widgets/static/dispatch.js).
 *
 * Traits: `model` (every row of the trace, see ./model.ts), `filters` ({text, hide_views, only_copies,
 * empty_calls}) and `collapsed` (ids of folded calls). Toolbar and fold clicks set and save the
 * traits; values set from Python are shown as they arrive, without echoing them back.
 */

import { isDispatchModel, type Filters } from "./model";
import { renderDispatch, type DispatchView } from "./render";

export { renderDispatch } from "./render";
export { collapseRows, filterRows } from "./model";

type Callback = () => void;

/** The part of anywidget's model API this widget uses (typed here to keep the bundle dependency-free). */
export interface AnyModel {
  get(name: "model" | "filters" | "collapsed"): unknown;
  set(name: "filters", value: Filters): void;
  set(name: "collapsed", value: string[]): void;
  save_changes(): void;
  on(event: string, callback: Callback): void;
  off(event?: string | null, callback?: Callback | null): void;
}

export interface RenderProps {
  model: AnyModel;
  el: HTMLElement;
}

export function render({ model, el }: RenderProps): () => void {
  el.classList.add("tlw-dispatch-widget");
  let view: DispatchView | null = null;

  const draw = () => {
    view?.destroy();
    view = null;
    el.replaceChildren();
    const m = model.get("model");
    if (!isDispatchModel(m)) {
      el.textContent = "DispatchTrace: no dispatch model to draw";
      return;
    }
    const collapsed = model.get("collapsed");
    view = renderDispatch(el, m, {
      filters: model.get("filters") as Filters | null,
      collapsed: Array.isArray(collapsed) ? (collapsed as string[]) : [],
      onFilters(filters) {
        model.set("filters", filters);
        model.save_changes();
      },
      onCollapsed(ids) {
        model.set("collapsed", ids);
        model.save_changes();
      },
    });
  };
  const onFilters = () => view?.setFilters(model.get("filters"));
  const onCollapsed = () => view?.setCollapsed(model.get("collapsed"));

  model.on("change:model", draw);
  model.on("change:filters", onFilters);
  model.on("change:collapsed", onCollapsed);
  draw();
  return () => {
    model.off("change:model", draw);
    model.off("change:filters", onFilters);
    model.off("change:collapsed", onCollapsed);
    view?.destroy();
    view = null;
  };
}

export default { render };
