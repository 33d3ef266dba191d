/**
 * anywidget entry of `torchlens_widgets.widgets.DispatchTableWidget` (bundled to torchlens_widgets/static/dtable.js).
 *
 * Traits: `model` ({op, schema, css, scenarios: [{name, chosen, html}]}, every state's table drawn by
 * Python's render/dispatch_table.py) and `selected` (a state's name). A button per state; pressing one
 * shows that state's table (the row that runs is highlighted) and writes `selected` back.
 */

import { commit, mountView, type AnyModel as Model } from "../common/anywidget";

export interface Scenario { name: string; chosen: string | null; html: string }
export interface DTableModel { op: string; schema: string; css: string; scenarios: Scenario[] }
export type AnyModel = Model<{ model: unknown; selected: string }>;

export function isDTableModel(m: unknown): m is DTableModel {
  const x = m as Partial<DTableModel> | null;
  return !!x && typeof x.op === "string" && typeof x.css === "string" && Array.isArray(x.scenarios) && x.scenarios.length > 0;
}

export interface DTableView { setSelected(name: unknown): void; destroy(): void }

export function renderDTable(el: HTMLElement, m: DTableModel, selected: unknown, onSelect: (name: string) => void): DTableView {
  const root = document.createElement("div");
  root.className = "tlw-dtable tlw-theme";
  const style = document.createElement("style");
  style.textContent = m.css + ".tlw-dtable .tlw-states{display:flex;flex-wrap:wrap;gap:4px;margin:4px 0 6px}"
    + ".tlw-dtable .tlw-states button{font:inherit;color:var(--tlw-fg);background:var(--tlw-bg);border:1px solid var(--tlw-line);"
    + "border-radius:3px;padding:1px 8px;cursor:pointer}"
    + ".tlw-dtable .tlw-states button[aria-pressed=true]{background:var(--tlw-tint1);border-color:var(--tlw-accent);font-weight:600}"
    + ".tlw-dtable .tlw-states button:focus-visible{outline:2px solid var(--tlw-accent);outline-offset:1px}";
  const title = document.createElement("div");
  const b = document.createElement("b");
  b.textContent = m.op;
  const schema = document.createElement("code");
  schema.className = "muted";
  schema.textContent = ` ${m.schema}`;
  title.append(b, schema);
  const states = document.createElement("div");
  states.className = "tlw-states";
  states.setAttribute("role", "group");
  states.setAttribute("aria-label", "the state the call is made in");
  const body = document.createElement("div");
  body.setAttribute("aria-live", "polite");
  const buttons = m.scenarios.map((s) => {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = s.name;
    button.dataset["state"] = s.name;
    button.addEventListener("click", () => {
      show(s.name);
      onSelect(s.name);
    });
    return button;
  });
  states.append(...buttons);
  root.append(style, title, states, body);
  el.append(root);

  function show(name: unknown): void {
    const s = m.scenarios.find((x) => x.name === name) ?? m.scenarios[0]!;
    for (const button of buttons) button.setAttribute("aria-pressed", String(button.dataset["state"] === s.name));
    body.innerHTML = s.html; // Python's renderer, every text escaped there
    root.dataset["chosen"] = s.chosen ?? "";
  }
  show(selected);
  return { setSelected: show, destroy: () => root.remove() };
}

export function render({ model, el }: { model: AnyModel; el: HTMLElement }): () => void {
  return mountView(model, el, {
    className: "tlw-dtable-widget",
    isModel: isDTableModel,
    empty: "DispatchTable: no table to draw",
    create: (m) => renderDTable(el, m, model.get("selected"), (name) => commit(model, { selected: name })),
    update: { selected: (view) => view.setSelected(model.get("selected")) },
  });
}

export default { render };
