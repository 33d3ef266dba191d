/**
 * anywidget entry of `torchlens_widgets.widgets.MemoryTimelineWidget` (bundled to torchlens_widgets/static/memory.js).
 *
 * Traits: `model` (the timeline picture), `panel` (the allocator state at the selected event, computed
 * by Python), `selected_event`, `hovered_band`, `x_axis`, `width` (with `fit_width`, the page sets it to
 * the room it has and Python lays the picture out again, so text stays at its size). A click sets
 * `selected_event`; Python answers with `panel`. Values set from Python are shown without echoing back.
 */

import { commit, mountView, type AnyModel as Model } from "../common/anywidget";
import { isMemoryModel } from "./model";
import { renderMemory } from "./view";

export { eventAt, columnOf } from "./model";
export { renderMemory } from "./view";

/** The part of anywidget's model API this widget uses. */
export type AnyModel = Model<{
  model: unknown;
  panel: unknown;
  selected_event: number | null;
  hovered_band: number | null;
  x_axis: string;
  width: number;
  fit_width: boolean;
}>;

export interface RenderProps {
  model: AnyModel;
  el: HTMLElement;
}

const asInt = (v: unknown): number | null => (typeof v === "number" && Number.isInteger(v) ? v : null);

export function render({ model, el }: RenderProps): () => void {
  return mountView(model, el, {
    className: "tlw-memory-widget",
    isModel: isMemoryModel,
    empty: "MemoryTimelineWidget: no memory timeline model to draw",
    create: (m) =>
      renderMemory(el, m, {
        selected: asInt(model.get("selected_event")),
        panel: model.get("panel") as never,
        onSelect: (selected_event) => commit(model, { selected_event }),
        onHover: (hovered_band) => commit(model, { hovered_band }),
        onAxis: (x_axis) => commit(model, { x_axis }),
        onResize: model.get("fit_width") === false ? undefined : (width) => commit(model, { width }),
      }),
    update: {
      selected_event: (view) => view.setSelected(asInt(model.get("selected_event"))),
      panel: (view) => view.setPanel(model.get("panel")),
    },
  });
}

export default { render };
