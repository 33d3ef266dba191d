/** The static picture for a widget output whose live model is gone.
 *
 * A saved widget output carries `application/vnd.jupyter.widget-view+json` (the live view) and, for
 * torchlens widgets, a static `image/svg+xml` or `text/html` picture. ipywidgets' renderer shows
 * "Error displaying widget: model not found" when the kernel that made the widget is gone (a reopened
 * notebook, a restarted kernel). This renderer shows the static picture at once and swaps in the live
 * view only if ipywidgets manages to attach one.
 */
import type { IRenderMime } from "@jupyterlab/rendermime-interfaces";
import { Panel, type Widget } from "@lumino/widgets";

export const WIDGET_VIEW = "application/vnd.jupyter.widget-view+json";
/** Static pictures a bundle may carry, in order of preference. */
export const STATIC_TYPES = ["image/svg+xml", "text/html"] as const;

/** Makes a renderer for a mime type (the notebook's rendermime registry). */
export interface RendererSource {
  createRenderer(mimeType: string): IRenderMime.IRenderer;
}

export function staticType(data: IRenderMime.IMimeModel["data"]): string | undefined {
  return STATIC_TYPES.find((t) => typeof data[t] === "string");
}

/** A read-only mime model (what Lab's MimeModel holds, without importing Lab's UI packages). */
export function mimeModel(
  data: IRenderMime.IMimeModel["data"],
  trusted: boolean,
  metadata: IRenderMime.IMimeModel["metadata"] = {},
): IRenderMime.IMimeModel {
  return { data, trusted, metadata, setData: () => undefined };
}

export class FallbackRenderer extends Panel implements IRenderMime.IRenderer {
  private live: IRenderMime.IRenderer | null = null;
  private still: IRenderMime.IRenderer | null = null;
  private model: IRenderMime.IMimeModel | null = null;
  private observer: MutationObserver | null = null;

  constructor(
    private readonly source: RendererSource,
    private readonly makeLive: () => IRenderMime.IRenderer,
    liveReady: Promise<() => IRenderMime.IRenderer>,
  ) {
    super();
    this.addClass("tlw-widget-output");
    // once the notebook's widget manager is connected, try again with a renderer that has it
    void liveReady.then((make) => {
      if (!this.isDisposed && this.model) this.tryLive(make, this.model);
    });
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.model = model;
    const type = staticType(model.data);
    if (type) {
      // a trusted SVG goes inline (as HTML), so the page's theme variables colour it; else Lab's own
      // renderer for the type decides (an untrusted SVG becomes an <img>)
      const as = type === "image/svg+xml" && model.trusted ? "text/html" : type;
      this.still = this.source.createRenderer(as);
      this.still.addClass("tlw-static-fallback");
      this.addWidget(this.still);
      await this.still.renderModel(
        mimeModel({ [as]: model.data[type] ?? null }, model.trusted, model.metadata),
      );
    }
    this.tryLive(this.makeLive, model);
  }

  /** Render the live view hidden; show it (and drop the picture) only once a widget view is attached. */
  private tryLive(make: () => IRenderMime.IRenderer, model: IRenderMime.IMimeModel): void {
    this.dropLive();
    const live = make();
    this.live = live;
    if (this.still) live.hide();
    this.addWidget(live);
    const attached = (): boolean => live instanceof Panel && live.widgets.length > 0;
    const reveal = (): void => {
      if (this.live !== live || !attached()) return;
      this.observer?.disconnect();
      this.observer = null;
      live.show();
      this.still?.dispose();
      this.still = null;
    };
    this.observer = new MutationObserver(reveal);
    this.observer.observe(live.node, { childList: true });
    void live.renderModel(model).then(reveal, () => undefined);
  }

  private dropLive(): void {
    this.observer?.disconnect();
    this.observer = null;
    if (this.live) {
      const old: Widget = this.live;
      this.live = null;
      old.dispose();
    }
  }

  override dispose(): void {
    if (this.isDisposed) return;
    this.observer?.disconnect();
    this.observer = null;
    super.dispose();
  }
}
