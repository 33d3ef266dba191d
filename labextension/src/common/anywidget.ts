/**
 * The part of anywidget's model API the widgets use, typed here to keep the bundles dependency-free,
 * and the wiring every entry shares: redraw on `change:model`, forward other trait changes to the
 * live view, write user actions back with one `save_changes`, and undo it all on cleanup.
 */

export type Callback = () => void;

/** anywidget's model, typed by the traits a widget reads and writes. */
export interface AnyModel<Traits extends object> {
  get(name: keyof Traits & string): unknown;
  set<K extends keyof Traits & string>(name: K, value: Traits[K]): void;
  save_changes(): void;
  on(event: string, callback: Callback): void;
  off(event?: string | null, callback?: Callback | null): void;
}

export type TraitHandlers<Traits extends object> = { [K in keyof Traits & string]?: Callback };

/** Listen to `change:<trait>` for each handler (in key order); returns the function that stops listening. */
export function onChanges<Traits extends object>(model: AnyModel<Traits>, handlers: TraitHandlers<Traits>): () => void {
  const subs: [string, Callback][] = [];
  for (const name in handlers) {
    const cb = handlers[name as keyof TraitHandlers<Traits>] as Callback | undefined;
    if (cb) subs.push([`change:${name}`, cb]);
  }
  for (const [ev, cb] of subs) model.on(ev, cb);
  return () => {
    for (const [ev, cb] of subs) model.off(ev, cb);
  };
}

/** Set the given traits (in key order) and send them to Python with one `save_changes`. */
export function commit<Traits extends object>(model: AnyModel<Traits>, changes: Partial<Traits>): void {
  for (const name in changes) model.set(name as keyof Traits & string, changes[name] as Traits[keyof Traits & string]);
  model.save_changes();
}

export interface Destroyable {
  destroy(): void;
}

export interface MountSpec<Traits extends { model: unknown }, M, V extends Destroyable> {
  /** Class added to the widget's element. */
  className: string;
  isModel(m: unknown): m is M;
  /** Text shown when the `model` trait holds nothing drawable. */
  empty: string;
  /** Draw `m` into the (emptied) element; called again on every `change:model`. */
  create(m: M): V;
  /** What to do with the live view when another trait changes (Python's value, not echoed back). */
  update: { [K in Exclude<keyof Traits & string, "model">]?: (view: V) => void };
  /** Draw again when the element's width changes: for pictures laid out to fit it (the first draw may come
   * before the output is laid out, at width 0, or the side panel may open later). */
  refit?: boolean;
}

/** The shared anywidget `render`: draws the `model` trait, keeps the view in sync, returns the cleanup. */
export function mountView<Traits extends { model: unknown }, M, V extends Destroyable>(
  model: AnyModel<Traits>,
  el: HTMLElement,
  spec: MountSpec<Traits, M, V>,
): () => void {
  el.classList.add(spec.className);
  let view: V | null = null;
  let drawnWidth = -1;
  const draw = () => {
    view?.destroy();
    view = null;
    el.replaceChildren();
    drawnWidth = el.clientWidth;
    const m = model.get("model");
    if (!spec.isModel(m)) {
      el.textContent = spec.empty;
      return;
    }
    view = spec.create(m);
  };
  const handlers: Record<string, Callback> = { model: draw };
  const update: Record<string, ((view: V) => void) | undefined> = spec.update;
  for (const name in update) {
    const fn = update[name];
    if (fn) handlers[name] = () => view && fn(view);
  }
  const stop = onChanges(model, handlers as TraitHandlers<Traits>);
  draw();
  let observer: ResizeObserver | null = null;
  if (spec.refit && typeof ResizeObserver !== "undefined") {
    observer = new ResizeObserver(() => {
      const width = el.clientWidth;
      if (width > 0 && Math.abs(width - drawnWidth) > 4) draw(); // its height changes with every draw: not that
    });
    observer.observe(el);
  }
  return () => {
    stop();
    observer?.disconnect();
    view?.destroy();
    view = null;
  };
}
