/**
 * anywidget entry of `torchlens_widgets.widgets.distributed.RanksWidget` (bundled to
 * torchlens_widgets/static/ranks.js).
 *
 * Traits: `model` (render.distributed.ranks_model, recomputed by Python when `iteration` changes) and
 * `bucket` (the selected bucket, -1 for none). A click on a bucket sets `bucket` and saves it; a value set
 * from Python is shown as it arrives, without echoing it back. A zoomed time range stays in the page: it
 * survives a redraw for a new width, not a new model.
 */

import { commit, mountView, type AnyModel as Model } from "../common/anywidget";
import { isRanksModel, renderRanks } from "./render";

export { renderRanks, describe } from "./render";

export type AnyModel = Model<{ model: unknown; bucket: number }>;

export interface RenderProps {
  model: AnyModel;
  el: HTMLElement;
}

export function render({ model, el }: RenderProps): () => void {
  let zoomed: { m: unknown; range: [number, number] } | null = null; // kept when the output is only resized
  return mountView(model, el, {
    className: "tlw-ranks-widget",
    isModel: isRanksModel,
    empty: "RanksWidget: no rank-lanes model to draw",
    create: (m) =>
      renderRanks(el, m, {
        bucket: model.get("bucket") as number,
        onSelect: (b) => commit(model, { bucket: b }),
        ...(zoomed?.m === m ? { range: zoomed.range } : {}),
        onZoom: (a, b) => (zoomed = { m, range: [a, b] }),
      }),
    update: { bucket: (view) => view.setBucket(model.get("bucket") as number) },
    refit: true,
  });
}

export default { render };
