import type { AnyModel } from "../src/common/anywidget";

/** Backbone-like stand-in for anywidget's model: set() fires change:<name> at once, as in the browser. */
export class FakeModel implements AnyModel<Record<string, unknown>> {
  values: Record<string, unknown>;
  listeners = new Map<string, Set<() => void>>();
  saves = 0;
  /** Every set() from the widget, as [name, value]. */
  sets: [string, unknown][] = [];
  constructor(values: Record<string, unknown>) {
    this.values = { ...values };
  }
  get(name: string): unknown {
    return this.values[name];
  }
  set(name: string, value: unknown): void {
    this.sets.push([name, value]);
    this.fromPython(name, value);
  }
  save_changes(): void {
    this.saves++;
  }
  on(event: string, cb: () => void): void {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event)!.add(cb);
  }
  off(event?: string | null, cb?: (() => void) | null): void {
    if (event && cb) this.listeners.get(event)?.delete(cb);
  }
  /** A trait change arriving from the kernel. */
  fromPython(name: string, value: unknown): void {
    this.values[name] = value;
    for (const cb of this.listeners.get(`change:${name}`) ?? []) cb();
  }
  /** How many listeners are registered. */
  count(): number {
    let n = 0;
    for (const s of this.listeners.values()) n += s.size;
    return n;
  }
}
