/** JupyterLab plugins: widget outputs show their static picture when their live model is gone; the
 * course sidebar (course/plugin.ts). */
import type { JupyterFrontEnd, JupyterFrontEndPlugin } from "@jupyterlab/application";
import type { IRenderMime } from "@jupyterlab/rendermime-interfaces";
import { coursePlugin } from "./course/plugin";
import { FallbackRenderer, WIDGET_VIEW } from "./fallback";

interface Registry {
  getFactory(mimeType: string): IRenderMime.IRendererFactory | undefined;
  getRank(mimeType: string): number | undefined;
  addFactory(factory: IRenderMime.IRendererFactory, rank?: number): void;
  createRenderer(mimeType: string): IRenderMime.IRenderer;
}
interface NotebookLike {
  content: { rendermime: Registry };
  sessionContext: { ready: Promise<void> };
  isDisposed: boolean;
}

const WAIT_MS = 60_000;
const POLL_MS = 100;

const NEVER = new Promise<never>(() => undefined);

/** Put a FallbackRenderer in front of whatever renders widget views in this registry now; `bound`
 * resolves to the renderer factory that has the notebook's widget manager, once there is one. */
function wrap(registry: Registry, bound: Promise<IRenderMime.IRendererFactory>): IRenderMime.IRendererFactory | null {
  const inner = registry.getFactory(WIDGET_VIEW);
  if (!inner) return null;
  const ours: IRenderMime.IRendererFactory = {
    safe: false,
    mimeTypes: [WIDGET_VIEW],
    createRenderer: (options) =>
      new FallbackRenderer(registry, () => inner.createRenderer(options), bound.then((f) => () => f.createRenderer(options))),
  };
  registry.addFactory(ours, registry.getRank(WIDGET_VIEW) ?? -10);
  return ours;
}

/** ipywidgets puts in a renderer factory bound to the notebook's widget manager once the kernel is up. */
async function managerFactory(panel: NotebookLike, ours: IRenderMime.IRendererFactory): Promise<IRenderMime.IRendererFactory> {
  await panel.sessionContext.ready;
  const registry = panel.content.rendermime;
  for (let waited = 0; waited < WAIT_MS && !panel.isDisposed; waited += POLL_MS) {
    const current = registry.getFactory(WIDGET_VIEW);
    if (current && current !== ours) return current;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  return NEVER; // no kernel, or no widget manager: outputs keep their static picture
}

function watch(panel: NotebookLike): void {
  const registry = panel.content.rendermime;
  let resolveBound: (f: IRenderMime.IRendererFactory) => void = () => undefined;
  const bound = new Promise<IRenderMime.IRendererFactory>((r) => (resolveBound = r));
  const ours = wrap(registry, bound);
  if (!ours) return; // ipywidgets is not installed: nothing renders widget views to wrap
  void managerFactory(panel, ours).then((factory) => {
    resolveBound(factory); // outputs drawn before the kernel was up try again with the manager
    wrap(registry, NEVER); // outputs drawn from now on start with the manager's renderer
  });
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: "torchlens-widgets:static-fallback",
  description: "Widget outputs show their static picture instead of 'model not found' when their kernel is gone.",
  autoStart: true,
  activate: (app: JupyterFrontEnd) => {
    app.docRegistry.addWidgetExtension("Notebook", {
      createNew: (panel) => {
        watch(panel as unknown as NotebookLike);
      },
    });
  },
};

export default [plugin, coursePlugin];
