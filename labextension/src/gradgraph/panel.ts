/**
 * The details panel (`.tlw-details`): what `nodeDetails` says about the selected node at the current
 * step, as plain HTML. Saved tensors released by then are greyed rows (`.tlw-freed`), never an error.
 */

import { fmtBytes, fmtShape, type NodeDetails } from "./model";

type Attrs = Record<string, string | number>;

function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs, parent: Element, text?: string): HTMLElementTagNameMap[K] {
  const node = parent.ownerDocument.createElement(tag);
  for (const k in attrs) node.setAttribute(k, String(attrs[k]));
  if (text !== undefined) node.textContent = text;
  parent.appendChild(node);
  return node;
}

function row(table: Element, key: string, value: string, cls = ""): void {
  const tr = h("tr", cls ? { class: cls } : {}, table);
  h("th", {}, tr, key);
  h("td", {}, tr, value);
}

const STATE_TEXT: Record<string, string> = {
  running: "running now",
  done: "ran earlier",
  waiting: "runs later",
  "not run": "did not run in this backward",
};

/** "step 4", "steps 6, 9", or for the many steps of a collapsed group "12 steps, 6–17". */
export function stepsText(steps: number[]): string {
  if (steps.length === 1) return `step ${steps[0]}`;
  if (steps.length <= 3) return `steps ${steps.join(", ")}`;
  return `${steps.length} steps, ${steps[0]}–${steps[steps.length - 1]}`;
}

/** Fill `panel` with the details of one node (or the hint when nothing is selected). */
export function fillDetails(panel: HTMLElement, d: NodeDetails | null, hops: number, canFocus: boolean): void {
  panel.replaceChildren();
  if (!d) {
    h("p", { class: "tlw-d-hint" }, panel, "Click a node for its details. Drag to pan, wheel to zoom.");
    return;
  }
  h("div", { class: "tlw-d-name" }, panel, `#${d.id} ${d.name}`);
  const t = h("table", { class: "tlw-d-props" }, panel);
  row(t, "kind", d.kind);
  if (d.param) row(t, "param", d.param);
  if (d.shape) row(t, "shape", fmtShape(d.shape));
  if (d.seq !== null) row(t, "seq", String(d.seq));
  if (d.hooks.pre || d.hooks.post) row(t, "hooks", `pre ${d.hooks.pre} · post ${d.hooks.post}`, "tlw-d-hooks");
  if (d.state) {
    const when = d.ran_at.length ? ` (${stepsText(d.ran_at)})` : "";
    row(t, "backward", `${STATE_TEXT[d.state] ?? d.state}${when}`, `tlw-d-state tlw-state-${d.state.replace(" ", "-")}`);
  }
  if (d.grads.length) row(t, "grads", d.grads.map(fmtShape).join(", "));
  if (d.hidden) row(t, "not drawn", `${d.hidden} edge${d.hidden === 1 ? "" : "s"} to nodes out of view`);
  if (d.group) {
    const g = d.group;
    h("div", { class: "tlw-d-group" }, panel,
      `collapsed ×${g.repeat - 1}: ${d.name} has the structure of ${g.representative} (drawn once, ×${g.repeat}); ` +
        `${g.members} nodes folded, saved ${fmtBytes(g.saved_nbytes)}`);
  }
  if (d.block) {
    h("div", { class: "tlw-d-block" }, panel, `in block ${d.block.prefix}.${d.block.index}, drawn once ×${d.block.repeat}`);
  }
  if (d.saved.length) {
    const nFreed = d.saved.filter((s) => s.freed).length;
    h("div", { class: "tlw-d-saved-head" }, panel,
      `saved tensors: ${d.saved.length} · held ${fmtBytes(d.held_nbytes)} of ${fmtBytes(d.saved_nbytes)}` +
        (nFreed ? ` · ${nFreed} freed` : ""));
    const st = h("table", { class: "tlw-saved" }, panel);
    for (const s of d.saved) {
      const tr = h("tr", { class: s.freed ? "tlw-saved-row tlw-freed" : "tlw-saved-row", "data-saved": s.name }, st);
      h("td", {}, tr, s.name + (s.alias ? ` =${s.alias}` : ""));
      h("td", {}, tr, s.shape ? fmtShape(s.shape) : "[?]");
      h("td", {}, tr, (s.dtype ?? "?").replace("torch.", ""));
      h("td", {}, tr, s.freed ? `freed (${fmtBytes(s.nbytes)})` : fmtBytes(s.nbytes));
    }
  }
  const bar = h("div", { class: "tlw-d-focus" }, panel);
  const btn = h("button", { "data-action": "focus", type: "button", title: "show only nodes within N hops of this one" }, bar, "focus ±");
  const input = h("input", { class: "tlw-hops", type: "number", min: 0, max: 99, value: hops, "aria-label": "hops" }, bar);
  input.style.width = "3.2em";
  h("span", {}, bar, " hops");
  if (!canFocus) {
    btn.setAttribute("disabled", "");
    btn.title = "a collapsed group cannot be a focus; pick a node of the block drawn once";
  }
}
