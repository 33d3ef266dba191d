/**
 * Live dispatch trace: a toolbar (name filter, hide views, only copies, calls without ops, fold all /
 * unfold all), the call → aten op table and the counts by overload. Every table cell has the same
 * text as in Python's `dispatch_html`, so the static fallback and the live view read alike.
 * Pure DOM: no framework, no anywidget dependency.
 *
 * Hooks for tests and styling: rows are <tr class="tlw-call|tlw-op" data-id="c3|o5">, a call's fold
 * toggle is <span class="tlw-toggle" data-id="c3">, toolbar controls carry data-filter / data-action.
 */

import {
  asFilters,
  collapseRows,
  filterRows,
  foldableCalls,
  headline,
  opFlags,
  type DispatchModel,
  type Filters,
  type Row,
} from "./model";
import { themeCss } from "../common/theme";

export const CLASS = {
  root: "tlw-dispatch",
  call: "tlw-call",
  op: "tlw-op",
  copy: "tlw-copy",
  view: "tlw-view",
  toggle: "tlw-toggle",
  count: "tlw-count",
} as const;

/** Python's STYLE (render/dispatch.py): theme colours; the op column stays put while the table scrolls. */
export const STYLE =
  ".tlw-dispatch{font-family:monospace;font-size:12px;color:var(--tlw-fg);background:var(--tlw-bg);max-width:100%}" +
  ".tlw-dispatch table{border-collapse:collapse}" +
  ".tlw-dispatch th{text-align:left;border-bottom:1px solid var(--tlw-line);padding:2px 8px;background:var(--tlw-bg)}" +
  ".tlw-dispatch td{padding:1px 8px;vertical-align:top;white-space:nowrap}" +
  ".tlw-dispatch .tlw-dispatch-rows{width:100%}.tlw-dispatch .tlw-wrap{white-space:normal;overflow-wrap:anywhere;min-width:7em}" +
  ".tlw-dispatch .tlw-scroll{max-width:100%;max-height:480px;overflow:auto}" +
  ".tlw-dispatch .tlw-dispatch-rows td:first-child,.tlw-dispatch .tlw-dispatch-rows th:first-child" +
  "{position:sticky;left:0;z-index:1;background:var(--tlw-bg)}" +
  ".tlw-dispatch .tlw-call,.tlw-dispatch .tlw-call td:first-child{background:var(--tlw-tint1)}" +
  ".tlw-dispatch .tlw-call{font-weight:bold}" +
  ".tlw-dispatch .tlw-call .tlw-n,.tlw-dispatch .tlw-call .tlw-keys{font-weight:normal;color:var(--tlw-fg2)}" +
  ".tlw-dispatch .tlw-copy,.tlw-dispatch .tlw-copy td:first-child{background:var(--tlw-tint4)}" +
  ".tlw-dispatch .tlw-view{color:var(--tlw-fg2)}" +
  ".tlw-dispatch .tlw-note{color:var(--tlw-warn)}";
const LIVE_STYLE =
  ".tlw-dispatch .tlw-toggle{cursor:pointer;user-select:none}" +
  ".tlw-dispatch .tlw-toolbar{display:flex;gap:10px;align-items:center;margin-bottom:6px;flex-wrap:wrap}" +
  ".tlw-dispatch input,.tlw-dispatch button{font:inherit;color:var(--tlw-fg);background:var(--tlw-bg2);" +
  "border:1px solid var(--tlw-line);border-radius:3px}" +
  ".tlw-dispatch .tlw-toolbar label{color:var(--tlw-fg)}";

export interface RenderOptions {
  filters?: Filters | null;
  collapsed?: string[] | null;
  /** Called after the user changed a filter. */
  onFilters?: (filters: Filters) => void;
  /** Called after the user folded or unfolded calls (ids in id order). */
  onCollapsed?: (collapsed: string[]) => void;
}

export interface DispatchView {
  readonly root: HTMLElement;
  readonly filters: Filters;
  readonly collapsed: string[];
  /** Show filters set from outside (Python); does not call onFilters. */
  setFilters(filters: unknown): void;
  /** Show folding set from outside (Python); does not call onCollapsed. */
  setCollapsed(collapsed: unknown): void;
  destroy(): void;
}

function h<K extends keyof HTMLElementTagNameMap>(
  parent: Node,
  tag: K,
  attrs: Record<string, string> = {},
  text?: string,
): HTMLElementTagNameMap[K] {
  const doc = parent.ownerDocument ?? (parent as Document);
  const node = doc.createElement(tag);
  for (const k in attrs) node.setAttribute(k, attrs[k] as string);
  if (text !== undefined) node.textContent = text;
  parent.appendChild(node);
  return node;
}

function idOrder(ids: Iterable<string>): string[] {
  return Array.from(new Set(ids)).sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)));
}

function asIds(v: unknown): string[] {
  return Array.isArray(v) ? idOrder(v.filter((x): x is string => typeof x === "string")) : [];
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n !== 1 ? "s" : ""}`;
}

/** Python's `_filter_line`. */
function filterLine(f: Filters): string | null {
  const parts: string[] = [];
  const text = f.text.trim();
  if (text) parts.push(`name contains ${pyRepr(text)}`);
  if (f.hide_views) parts.push("views hidden");
  if (f.only_copies) parts.push("copies only");
  return parts.length ? `filter: ${parts.join(", ")}` : null;
}

/** Python's repr() of a printable string (quotes chosen as Python does). */
function pyRepr(s: string): string {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  return q + s.replace(/\\/g, "\\\\").split(q).join(`\\${q}`) + q;
}

export function renderDispatch(el: HTMLElement, model: DispatchModel, options: RenderOptions = {}): DispatchView {
  let filters = asFilters(options.filters ?? model.filters);
  let collapsed = asIds(options.collapsed ?? []);
  const doc = el.ownerDocument;

  const root = h(el, "div", { class: `${CLASS.root} tlw-theme` });
  h(root, "style", {}, themeCss() + STYLE + LIVE_STYLE);
  const bar = h(root, "div", { class: "tlw-toolbar" });
  const input = h(bar, "input", { type: "search", "data-filter": "text", placeholder: "filter aten ops by name" });
  const boxes: Record<"hide_views" | "only_copies" | "empty_calls", HTMLInputElement> = {
    hide_views: checkbox("hide_views", "hide views"),
    only_copies: checkbox("only_copies", "only copies"),
    empty_calls: checkbox("empty_calls", "calls without ops"),
  };
  const foldAll = h(bar, "button", { type: "button", "data-action": "collapse-all" }, "fold all");
  const unfoldAll = h(bar, "button", { type: "button", "data-action": "expand-all" }, "unfold all");
  const head = h(root, "div", { class: "tlw-dispatch-headline" });
  const filterNote = h(root, "div", { class: "tlw-dispatch-filter" });
  const scroll = h(root, "div", { class: "tlw-scroll" });
  const table = h(scroll, "table", { class: "tlw-dispatch-rows" });
  const headRow = h(h(table, "thead"), "tr");
  for (const t of ["call / aten op", "inputs", "outputs", "dispatch keys"]) h(headRow, "th", {}, t);
  const tbody = h(table, "tbody");
  const counts = h(root, "table", { class: "tlw-dispatch-counts" });
  for (const n of model.notes) h(root, "div", { class: "tlw-note tlw-dispatch-note" }, n);

  function checkbox(name: string, label: string): HTMLInputElement {
    const l = h(bar, "label");
    const box = h(l, "input", { type: "checkbox", "data-filter": name });
    l.appendChild(doc.createTextNode(` ${label}`));
    return box;
  }

  function syncControls(): void {
    if (input.value !== filters.text) input.value = filters.text;
    for (const k of ["hide_views", "only_copies", "empty_calls"] as const) boxes[k].checked = filters[k];
  }

  function rowNode(r: Row, frag: DocumentFragment, folded: Set<string>): void {
    const indent = `padding-left:${8 + 16 * r.depth}px`;
    if (r.type === "call") {
      const tr = h(frag, "tr", { class: CLASS.call, "data-id": r.id });
      const first = h(tr, "td", { style: indent });
      h(first, "span", { class: CLASS.toggle, "data-id": r.id, title: "fold / unfold" }, folded.has(r.id) ? "▸" : "▾");
      first.appendChild(doc.createTextNode(` ${r.name} `));
      h(first, "span", { class: "tlw-n" }, `· ${plural(r.n_ops, "op")}`);
      h(tr, "td", { class: "tlw-wrap" }, r.args);
      h(tr, "td");
      h(tr, "td", { class: "tlw-keys tlw-wrap" }, r.path);
    } else {
      const cls = [CLASS.op, ...(r.copy ? [CLASS.copy] : []), ...(r.view ? [CLASS.view] : [])].join(" ");
      const tr = h(frag, "tr", { class: cls, "data-id": r.id });
      h(tr, "td", { style: indent }, r.name + opFlags(r));
      h(tr, "td", { class: "tlw-wrap" }, r.inputs);
      h(tr, "td", { class: "tlw-wrap" }, r.outputs);
      h(tr, "td", { class: "tlw-wrap", title: `still to run below Python: ${r.remaining}` }, r.keys);
    }
  }

  function draw(): void {
    syncControls();
    const shown = filterRows(model, filters);
    head.textContent = headline(model, shown.shown_ops);
    const fl = filterLine(filters);
    filterNote.textContent = fl ?? "";
    filterNote.hidden = fl === null;
    const folded = new Set(collapsed);
    const frag = doc.createDocumentFragment();
    for (const r of collapseRows(shown.rows, folded)) rowNode(r, frag, folded);
    tbody.replaceChildren(frag);
    counts.replaceChildren();
    if (shown.counts.length) {
      const hr = h(h(counts, "thead"), "tr");
      h(hr, "th", {}, "overload");
      h(hr, "th", {}, "count");
      const body = h(counts, "tbody");
      for (const c of shown.counts) {
        const tr = h(body, "tr", { class: CLASS.count + (c.copy ? ` ${CLASS.copy}` : "") });
        h(tr, "td", {}, c.name);
        h(tr, "td", { style: "text-align:right" }, String(c.count));
      }
    }
  }

  function changeFilters(next: Filters): void {
    filters = next;
    draw();
    options.onFilters?.(filters);
  }

  function changeCollapsed(next: string[]): void {
    collapsed = idOrder(next);
    draw();
    options.onCollapsed?.(collapsed);
  }

  const onInput = () => changeFilters({ ...filters, text: input.value });
  const onChange = (e: Event) => {
    const name = (e.target as HTMLElement).getAttribute("data-filter");
    if (name === "hide_views" || name === "only_copies" || name === "empty_calls") {
      changeFilters({ ...filters, [name]: (e.target as HTMLInputElement).checked });
    }
  };
  const onClick = (e: Event) => {
    const target = e.target as Element | null;
    const toggle = target?.closest?.(`.${CLASS.toggle}`);
    if (toggle) {
      const id = toggle.getAttribute("data-id") ?? "";
      changeCollapsed(collapsed.includes(id) ? collapsed.filter((c) => c !== id) : [...collapsed, id]);
    } else if (target === foldAll) {
      changeCollapsed(foldableCalls(model.rows));
    } else if (target === unfoldAll) {
      changeCollapsed([]);
    }
  };
  input.addEventListener("input", onInput);
  bar.addEventListener("change", onChange);
  root.addEventListener("click", onClick);
  draw();

  return {
    root,
    get filters() {
      return filters;
    },
    get collapsed() {
      return collapsed.slice();
    },
    setFilters(f: unknown) {
      const next = asFilters(f);
      if (JSON.stringify(next) === JSON.stringify(filters)) return; // our own change coming back
      filters = next;
      draw();
    },
    setCollapsed(c: unknown) {
      const next = asIds(c);
      if (next.join() === collapsed.join()) return;
      collapsed = next;
      draw();
    },
    destroy() {
      input.removeEventListener("input", onInput);
      bar.removeEventListener("change", onChange);
      root.removeEventListener("click", onClick);
      root.remove();
    },
  };
}
