/**
 * anywidget entry of `torchlens_widgets.widgets.MemoryTimelineWidget` (bundled to torchlens_widgets/static/memory.js).
 *
 * Traits: `model` (the timeline picture), `panel` (the allocator state at the selected event, computed
 * by Python), `selected_event`, `hovered_band`, `x_axis`. A click sets `selected_event`; Python answers
 * with `panel`. Values set from Python are shown without echoing back.
 */

import { isMemoryModel } from "./model";
import { renderMemory, type MemoryView } from "./view";

export { eventAt, columnOf } from "./model";
export { renderMemory } from "./view";

type Callback = () => void;
type Trait = "model" | "panel" | "selected_event" | "hovered_band" | "x_axis";

/** The part of anywidget's model API this widget uses. */
export interface AnyModel {
  get(name: Trait): unknown;
  set(name: "selected_event" | "hovered_band", value: number | null): void;
  set(name: "x_axis", value: string): void;
  save_changes(): void;
  on(event: string, callback: Callback): void;
  off(event?: string | null, callback?: Callback | null): void;
}

export interface RenderProps {
  model: AnyModel;
  el: HTMLElement;
}

const asInt = (v: unknown): number | null => (typeof v === "number" && Number.isInteger(v) ? v : null);

export function render({ model, el }: RenderProps): () => void {
  el.classList.add("tlw-memory-widget");
  let view: MemoryView | null = null;
  const draw = () => {
    view?.destroy();
    view = null;
    el.replaceChildren();
    const m = model.get("model");
    if (!isMemoryModel(m)) {
      el.textContent = "MemoryTimelineWidget: no memory timeline model to draw";
      return;
    }
    view = renderMemory(el, m, {
      selected: asInt(model.get("selected_event")),
      panel: model.get("panel") as never,
      onSelect(i) {
        model.set("selected_event", i);
        model.save_changes();
      },
      onHover(b) {
        model.set("hovered_band", b);
        model.save_changes();
      },
      onAxis(axis) {
        model.set("x_axis", axis);
        model.save_changes();
      },
    });
  };
  const onSelected = () => view?.setSelected(asInt(model.get("selected_event")));
  const onPanel = () => view?.setPanel(model.get("panel"));
  const handlers: [string, Callback][] = [
    ["change:model", draw],
    ["change:selected_event", onSelected],
    ["change:panel", onPanel],
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
