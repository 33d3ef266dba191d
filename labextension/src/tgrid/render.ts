/**
 * The live program grid: the kernel's program ids as clickable cells (1-D grids wrap at 32 a row, 2-D grids
 * are rows of axis 1, 3-D grids one such panel per axis-2 index), and for the selected program each tensor
 * it touched drawn as element cells (loaded, stored, masked off, out of bounds, another program's), plus its
 * accesses listed by source line. Clicking an access row picks out its elements. Plain HTML that flows, so no
 * label is clipped; every colour is a theme variable. Pure DOM: no framework, no anywidget dependency.
 *
 * Hooks for tests: program cells are <span class="tlw-pid" data-pid="1,2" data-flat="5">, element cells
 * <span class="c STATE" data-tensor="x_ptr" data-i="7">, access rows <tr class="tlw-acc" data-access="0">.
 */

import { themeCss } from "../common/theme";
import {
  asFlat,
  byLine,
  cellStates,
  decodeProgram,
  defaultProgram,
  dims,
  hasMasked,
  inRuns,
  pidOf,
  pidText,
  programIndex,
  reach,
  runsText,
  STATE_TEXT,
  STATE_WORD,
  tensorWindow,
  windowNotes,
  type Access,
  type Program,
  type State,
  type TgridModel,
} from "./model";

export const STYLE =
  ".tlw-tg{font:13px/1.45 var(--jp-ui-font-family,sans-serif);color:var(--tlw-fg);max-width:100%}" +
  ".tlw-tg .muted{color:var(--tlw-fg2)}.tlw-tg .bad{color:var(--tlw-bad)}" +
  ".tlw-tg .head{margin:2px 0 6px}" +
  ".tlw-tg .msg{margin:3px 0;padding:3px 6px;background:var(--tlw-bg2);border-left:3px solid;overflow-wrap:anywhere}" +
  ".tlw-tg .msg.bad{color:var(--tlw-bad);border-color:var(--tlw-bad)}" +
  ".tlw-tg .msg.warn{color:var(--tlw-warn);border-color:var(--tlw-warn)}" +
  ".tlw-tg .pids{position:relative;display:flex;flex-wrap:wrap;gap:4px 16px;margin:4px 0 2px;overflow:auto;" +
  "max-width:100%;max-height:480px;outline-offset:1px}" +
  ".tlw-tg .pids:focus{outline:none}.tlw-tg .pids:focus-visible{outline:2px solid var(--tlw-accent)}" +
  ".tlw-tg .panel{flex:none}" +
  ".tlw-tg .prow{white-space:nowrap;line-height:0}" +
  ".tlw-tg .rl{display:inline-block;min-width:4.5em;padding-right:4px;text-align:right;vertical-align:middle;" +
  "font:11px/16px var(--jp-code-font-family,monospace);color:var(--tlw-fg2)}" +
  ".tlw-tg .tlw-pid{display:inline-block;box-sizing:border-box;margin:1px;vertical-align:middle;cursor:pointer;" +
  "text-align:center;font:11px/18px var(--jp-code-font-family,monospace);color:var(--tlw-fg);" +
  "background:var(--tlw-bg2);border:1px solid var(--tlw-line);border-radius:2px}" +
  ".tlw-tg .lab .tlw-pid{min-width:2em;padding:0 3px}" +
  ".tlw-tg .dots .tlw-pid{width:12px;height:12px}.tlw-tg .dots .rl{line-height:14px}" +
  ".tlw-tg .tlw-pid.part{background:var(--tlw-tint7)}" +
  ".tlw-tg .tlw-pid.idle{color:var(--tlw-fg2)}" +
  ".tlw-tg .tlw-pid.err{background:var(--tlw-tint4);border:2px solid var(--tlw-bad)}" +
  ".tlw-tg .tlw-pid.unrec{cursor:default;color:var(--tlw-fg2);background:var(--tlw-bg);border-style:dashed}" +
  ".tlw-tg .tlw-pid:hover{border-color:var(--tlw-accent)}" +
  ".tlw-tg .tlw-pid.sel{background:var(--tlw-accent);border-color:var(--tlw-accent);color:var(--tlw-bg);" +
  "font-weight:600}.tlw-tg .tlw-pid.sel.err{border-color:var(--tlw-bad)}" +
  ".tlw-tg .legend{margin:4px 0 8px}" +
  ".tlw-tg .legend .item{display:inline-block;margin-right:12px;white-space:nowrap}" +
  ".tlw-tg .legend .tlw-pid{cursor:default;width:12px;height:12px}" +
  ".tlw-tg .detail{border-top:1px solid var(--tlw-line);padding-top:6px}" +
  ".tlw-tg .tensor{margin:6px 0 10px}" +
  ".tlw-tg .trow{white-space:nowrap;line-height:0}" +
  ".tlw-tg .lbl{display:inline-block;min-width:4.5em;padding-right:4px;text-align:right;vertical-align:middle;" +
  "font:11px/14px var(--jp-code-font-family,monospace);color:var(--tlw-fg2)}" +
  ".tlw-tg .c{display:inline-block;box-sizing:border-box;width:14px;height:14px;margin:1px;vertical-align:middle;" +
  "border:1px solid var(--tlw-line);background:var(--tlw-bg)}" +
  ".tlw-tg .c.ld{background:var(--tlw-cat1)}" +
  ".tlw-tg .c.st{background:var(--tlw-cat2)}" +
  ".tlw-tg .c.both{background:var(--tlw-cat5)}" +
  ".tlw-tg .c.mk{border:1px dashed var(--tlw-fg2);background:repeating-linear-gradient(45deg,var(--tlw-fg2) 0 1px," +
  "transparent 1px 4px)}" +
  ".tlw-tg .c.oob{background:var(--tlw-bad);border-color:var(--tlw-bad)}" +
  ".tlw-tg .c.oth{background:var(--tlw-neutral)}" +
  ".tlw-tg .c.ghost{background:transparent;border:1px dotted var(--tlw-line)}" +
  ".tlw-tg .focus .c.dim{opacity:.2}" +
  ".tlw-tg table{border-collapse:collapse;margin:4px 0;color:inherit;font:inherit}" +
  ".tlw-tg td,.tlw-tg th{padding:1px 10px 1px 0;text-align:left;vertical-align:top}" +
  ".tlw-tg th{border-bottom:1px solid var(--tlw-line)}" +
  ".tlw-tg tr.tlw-acc{cursor:pointer}" +
  ".tlw-tg tr.tlw-acc:hover td{background:var(--tlw-bg2)}" +
  ".tlw-tg tr.tlw-acc.on td{background:var(--tlw-tint1)}" +
  ".tlw-tg tr.first td{border-top:1px solid var(--tlw-grid)}" +
  ".tlw-tg td.src{white-space:pre-wrap;overflow-wrap:anywhere;max-width:32em}" +
  ".tlw-tg td.oob{color:var(--tlw-bad);font-weight:600}" +
  ".tlw-tg code,.tlw-tg td.src{font:12px var(--jp-code-font-family,monospace)}";

/** Grids up to this many programs get their ids written in the cells; larger ones are drawn as dots. */
export const LABEL_LIMIT = 256;

export interface RenderOptions {
  /** The `program` trait: the pid to show (a list), or null for the default. */
  program?: unknown;
  /** Called with the pid (a list) after the user clicked a program. */
  onSelect?: (pid: number[]) => void;
}

export interface GridView {
  readonly root: HTMLElement;
  /** The flat id of the program shown (null: nothing recorded). */
  readonly selected: number | null;
  /** Show the program given as a trait value (from Python); does not call onSelect. */
  setProgram(program: unknown): void;
  /** Select a program as a click would (calls onSelect); false if it was not recorded. */
  select(pid: readonly number[]): boolean;
  destroy(): void;
}

type Attrs = Record<string, string>;

function h<K extends keyof HTMLElementTagNameMap>(parent: Node, tag: K, attrs: Attrs = {}, text?: string): HTMLElementTagNameMap[K] {
  const doc = parent.ownerDocument ?? (parent as Document);
  const node = doc.createElement(tag);
  for (const k in attrs) node.setAttribute(k, attrs[k] as string);
  if (text !== undefined) node.textContent = text;
  parent.appendChild(node);
  return node;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

export function renderGrid(el: HTMLElement, model: TgridModel, options: RenderOptions = {}): GridView {
  const at = programIndex(model);
  const [gx, gy, gz] = dims(model.grid);
  const nd = model.grid.length;
  const source = new Map(model.source);
  const tensorName = (i: number) => model.tensors[i]?.name ?? "?";
  let selected: number | null = asFlat(model, options.program, at) ?? defaultProgram(model);
  let focus: number | null = null; // the access row picked out

  const root = h(el, "div", { class: "tlw-tg tlw-theme" });
  h(root, "style", {}, themeCss() + STYLE);

  // header: kernel, grid, problems
  const head = h(root, "div", { class: "head" });
  h(head, "b", {}, model.kernel);
  head.append(" over the grid ");
  h(head, "code", {}, pidText(model.grid));
  head.append(`: ${plural(model.num_programs, "program")}, ${model.programs.length} recorded `);
  h(head, "span", { class: "muted" }, `(${model.interpreter})`);
  for (const w of model.warnings) h(root, "div", { class: "msg warn" }, `⚠ ${w}`);
  for (const m of model.messages) h(root, "div", { class: "msg bad" }, `✗ ${m}`);
  if (model.errors_total > model.messages.length) {
    h(root, "div", { class: "msg bad" }, `… ${model.errors_total - model.messages.length} more out-of-bounds error(s)`);
  }

  // the grid of program ids
  const labelled = model.num_programs <= LABEL_LIMIT && (nd === 1 || gx <= 32);
  // data-lm-suppress-shortcuts: JupyterLab leaves the arrow keys to the grid (not "move to the next cell")
  const pids = h(root, "div", { class: `pids ${labelled ? "lab" : "dots"}`, tabindex: "0", role: "listbox",
    "aria-label": "program ids: click one, or use the arrow keys", "data-lm-suppress-shortcuts": "true" });
  const cells = new Map<number, HTMLElement>();
  const perRow = nd === 1 ? Math.min(gx, labelled ? 16 : gx <= 2048 ? 32 : 64) : gx;
  const rows = nd === 1 ? Math.ceil(gx / perRow) : gy;
  const rowLabels = !labelled || rows > 1 && nd === 1;
  for (let z = 0; z < gz; z++) {
    const panel = h(pids, "div", { class: "panel" });
    if (nd === 3) h(panel, "div", { class: "muted" }, `axis 2 = ${z}`);
    for (let r = 0; r < rows; r++) {
      const row = h(panel, "div", { class: "prow" });
      const first = nd === 1 ? r * perRow : gx * (r + gy * z);
      if (rowLabels) h(row, "span", { class: "rl" }, nd === 1 ? `${first}` : pidText(pidOf(first, model.grid)));
      const stop = nd === 1 ? Math.min(first + perRow, gx) : first + gx;
      for (let f = first; f < stop; f++) pidCell(row, f);
    }
  }
  function pidCell(row: HTMLElement, f: number): void {
    const pid = pidOf(f, model.grid);
    const k = at.get(f);
    const raw = k === undefined ? undefined : model.programs[k];
    const cls = ["tlw-pid"];
    let note = "";
    if (!raw) {
      cls.push("unrec");
      note = ": ran, not recorded";
    } else if (raw[1] > 0) {
      cls.push("err");
      note = `: ${plural(raw[1], "out-of-bounds access")}`;
    } else if (!raw[2].length) {
      cls.push("idle");
      note = ": no loads or stores";
    } else if (hasMasked(raw)) {
      cls.push("part");
      note = ": some lanes masked off";
    }
    const cell = h(row, "span", { class: cls.join(" "), "data-pid": pid.join(","), "data-flat": `${f}`,
      title: `program ${pidText(pid)}${note}`, role: "option" }, labelled ? pid.slice(0, 2).join(",") : undefined);
    cells.set(f, cell);
  }
  h(root, "div", { class: "muted" }, nd === 1
    ? `program ids along axis 0${rows > 1 ? `, ${perRow} a row (the first id of each row on its left)` : ""}; click one`
    : `axis 0 →, axis 1 ↓${nd === 3 ? ", one block per axis 2 index" : ""}; click a program`);
  if (model.left_out) h(root, "div", { class: "muted" }, model.left_out);

  const legend = h(root, "div", { class: "legend" });
  for (const [cls, text] of [["err", "out-of-bounds access"], ["part", "some lanes masked off"], ["idle", "no loads or stores"],
    ["unrec", "ran, not recorded"], ["sel", "shown below"]] as const) {
    if (cls !== "sel" && !pids.querySelector(`.tlw-pid.${cls}`)) continue;
    const item = h(legend, "span", { class: "item" });
    h(item, "span", { class: `tlw-pid ${cls}` });
    item.append(` ${text}`);
  }
  const cellLegend = h(root, "div", { class: "legend" });
  for (const state of ["ld", "st", "both", "mk", "oob", "oth", "", "ghost"] as State[]) {
    const item = h(cellLegend, "span", { class: "item" });
    h(item, "span", { class: `c ${state}` });
    item.append(` ${STATE_TEXT[state]}`);
  }

  const detail = h(root, "div", { class: "detail" });

  function drawDetail(): void {
    detail.replaceChildren();
    detail.classList.toggle("focus", focus !== null);
    for (const [f, cell] of cells) {
      cell.classList.toggle("sel", f === selected);
      cell.setAttribute("aria-selected", f === selected ? "true" : "false");
    }
    reveal(selected === null ? undefined : cells.get(selected));
    const k = selected === null ? undefined : at.get(selected);
    if (k === undefined) {
      h(detail, "div", { class: "muted" }, "no program was recorded");
      return;
    }
    const p: Program = decodeProgram(model, model.programs[k]!);
    const masked = p.accesses.reduce((s, a) => s + a.maskedLanes, 0);
    const title = h(detail, "div", { class: "head" });
    title.append("program ");
    h(title, "b", {}, pidText(p.pid));
    const facts = [`${p.accesses.length} ${p.accesses.length === 1 ? "load or store" : "loads and stores"}`];
    if (masked) facts.push(`${plural(masked, "lane")} masked off`);
    if (p.errors) facts.push(plural(p.errors, "out-of-bounds access"));
    h(title, "span", { class: p.errors ? "bad" : "muted" }, ` · ${facts.join(" · ")}`);

    const focused = focus === null ? null : p.accesses[focus] ?? null;
    const touched = new Set(p.accesses.map((a) => a.tensor));
    model.tensors.forEach((t, ti) => {
      if (!touched.has(ti)) return;
      const span = reach(p.accesses, ti);
      const win = tensorWindow(t, span);
      const { cells: states, before } = cellStates(model, p, ti, win);
      const box = h(detail, "div", { class: "tensor", "data-tensor": t.name });
      const notes = windowNotes(t, win, span, before);
      const th = h(box, "div");
      h(th, "b", {}, t.name);
      h(th, "span", { class: "muted" }, ` ${t.dtype} ${pidText(t.shape)}, ${plural(t.numel, "element")}` +
        (notes.length ? `; ${notes.join("; ")}` : ""));
      for (let start = win.start; start < win.stop; start += win.cols) {
        const row = h(box, "div", { class: "trow" });
        h(row, "span", { class: "lbl" }, win.matrix && start < t.numel ? `[${start / win.cols}]` : start < t.numel ? `${start}` : `${start}+`);
        for (let i = start; i < Math.min(start + win.cols, win.stop); i++) {
          const state = states[i - win.start] as State;
          const mine = focused !== null && focused.tensor === ti &&
            (inRuns(focused.elements, i) || inRuns(focused.masked, i) || inRuns(focused.oob, i));
          h(row, "span", { class: `c ${state}${focused !== null && !mine ? " dim" : ""}`, "data-tensor": t.name,
            "data-i": `${i}`, title: `${t.name}[${i}]: ${STATE_WORD[state]}` });
        }
      }
    });
    const untouched = model.tensors.filter((_, ti) => !touched.has(ti)).map((t) => t.name);
    if (untouched.length) h(detail, "div", { class: "muted" }, `not touched by this program: ${untouched.join(", ")}`);
    if (!p.accesses.length) {
      h(detail, "div", { class: "muted" }, "this program made no loads or stores");
      return;
    }
    h(detail, "div", { class: "muted" }, "its loads and stores, by source line (click one to pick out its elements):");
    const table = h(detail, "table", { class: "tlw-accesses" });
    const hr = h(h(table, "thead"), "tr");
    for (const c of ["line", "source", "access", "tensor", "elements", "lanes", "masked lanes", "out of bounds"]) h(hr, "th", {}, c);
    const body = h(table, "tbody");
    let lastLine: number | null | undefined;
    for (const a of byLine(p.accesses)) {
      accessRow(body, a, a.line !== lastLine);
      lastLine = a.line;
    }
  }

  function accessRow(parent: HTMLElement, a: Access, first: boolean): void {
      const tr = h(parent, "tr", { class: `tlw-acc${first ? " first" : ""}${focus === a.index ? " on" : ""}`,
        "data-access": `${a.index}`, title: "click: pick out these elements above" });
      h(tr, "td", {}, first && a.line !== null ? `${a.line}` : "");
      h(tr, "td", { class: "src" }, first && a.line !== null ? source.get(a.line) ?? "" : "");
      h(tr, "td", {}, `tl.${a.op}`);
      h(tr, "td", {}, tensorName(a.tensor));
      h(h(tr, "td"), "code", {}, runsText(a.elements));
      h(tr, "td", {}, `${a.touched} of ${a.lanes}`);
      h(tr, "td", {}, a.maskedLanes ? `${a.maskedLanes}` : "");
      h(tr, "td", { class: a.oob.length ? "oob" : "" }, a.oob.length ? runsText(a.oob) : "");
  }

  /** Scroll the program grid's own box (never the page) so the selected program is in view. */
  function reveal(cell: HTMLElement | undefined): void {
    if (!cell || pids.scrollHeight <= pids.clientHeight + 1) return;
    const top = cell.offsetTop;
    if (top < pids.scrollTop || top + cell.offsetHeight > pids.scrollTop + pids.clientHeight) {
      pids.scrollTop = Math.max(0, top - pids.clientHeight / 2);
    }
  }

  function show(flat: number | null, fromUser: boolean): void {
    if (flat === selected) return;
    selected = flat;
    focus = null;
    drawDetail();
    if (fromUser && flat !== null) options.onSelect?.(pidOf(flat, model.grid));
  }

  function neighbour(step: number): number | null {
    if (selected === null) return null;
    const k = at.get(selected);
    if (k === undefined) return null;
    const next = model.programs[k + step];
    return next ? next[0] : null;
  }

  const onClick = (e: Event) => {
    const target = e.target as Element | null;
    const cell = target?.closest?.(".tlw-pid[data-flat]");
    if (cell && pids.contains(cell)) {
      const flat = Number(cell.getAttribute("data-flat"));
      if (at.has(flat)) show(flat, true);
      return;
    }
    const row = target?.closest?.("tr.tlw-acc");
    if (row) {
      const i = Number(row.getAttribute("data-access"));
      focus = focus === i ? null : i;
      drawDetail();
    }
  };
  const onKey = (e: KeyboardEvent) => {
    const step = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 }[e.key];
    if (!step) return;
    const next = neighbour(step);
    e.preventDefault();
    e.stopPropagation();
    if (next !== null) show(next, true);
  };
  root.addEventListener("click", onClick);
  pids.addEventListener("keydown", onKey);
  drawDetail();

  return {
    root,
    get selected() {
      return selected;
    },
    setProgram(program: unknown) {
      show(asFlat(model, program, at) ?? defaultProgram(model), false);
    },
    select(pid: readonly number[]) {
      const flat = asFlat(model, [...pid], at);
      if (flat === null) return false;
      show(flat, true);
      return true;
    },
    destroy() {
      root.removeEventListener("click", onClick);
      pids.removeEventListener("keydown", onKey);
      root.remove();
    },
  };
}
