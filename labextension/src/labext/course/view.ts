/** The course sidebar's DOM: every notebook in order with a progress bar made of its exercises, each
 * exercise's status, and Validate / Reset with their results. Plain DOM (tested in jsdom); the plugin
 * wraps it in a Lumino widget and supplies what opening and resetting mean in Lab. */
import { themeCss } from "../../common/theme";
import type { CourseApi } from "./api";
import type { CheckStatus, ExerciseRow, NotebookRow, Outline, Progress, Status, Validation } from "./model";
import { courseRows, rowOf, statusWords, totals } from "./model";

/** Words the sidebar shows under a notebook after an action, with a button for what follows (open the backup). */
export interface Said { text: string; action?: { label: string; caption?: string; run(): Promise<void> | void } }

export interface ViewHandlers {
  /** Open the notebook (at the exercise, when one is given). */
  open(row: NotebookRow, exercise: ExerciseRow | null): Promise<void> | void;
  /** Put one exercise back to its stub; resolves to the words to show (where the backup went), or null when
   * the learner cancelled. */
  reset(row: NotebookRow, exercise: ExerciseRow): Promise<Said | string | null>;
}

type RunState = { running: true; since: number } | { running: false; result: Validation | null; error: string | null };

const ICON: Record<Status | CheckStatus, string> = {
  "full": "✓", "visible": "✓", "passed": "✓", "not passed": "○", "failed": "✗", "not attempted": "○",
  "timeout": "⏱", "kernel died": "✗",
};
const TONE: Record<Status | CheckStatus, string> = {
  "full": "good", "visible": "good", "passed": "good", "not passed": "fg2", "failed": "bad", "not attempted": "fg2",
  "timeout": "warn", "kernel died": "bad",
};

const SIDEBAR_CSS = `
.tlw-course{font-family:var(--jp-ui-font-family,sans-serif);font-size:var(--jp-ui-font-size1,13px);color:var(--tlw-fg);
  background:var(--tlw-bg);height:100%;overflow:auto;box-sizing:border-box;padding:8px 10px 16px}
.tlw-course h2{font-size:var(--jp-ui-font-size2,15px);margin:2px 0 4px;font-weight:600}
.tlw-course button{font:inherit;color:inherit;background:none;border:1px solid transparent;border-radius:3px;
  padding:2px 4px;cursor:pointer;text-align:left}
.tlw-course button:hover{background:var(--tlw-bg2)}
.tlw-course button:focus-visible{outline:2px solid var(--tlw-accent);outline-offset:1px}
.tlw-course .tlw-act{border-color:var(--tlw-line);padding:1px 8px;font-size:var(--jp-ui-font-size0,12px)}
.tlw-course .tlw-act:disabled{opacity:.6;cursor:default}
.tlw-course-total{color:var(--tlw-fg2);margin:2px 0 6px}
.tlw-course-note{color:var(--tlw-fg2);margin:6px 0}
.tlw-course-problem{color:var(--tlw-bad);margin:6px 0;white-space:pre-wrap}
.tlw-course ol,.tlw-course ul{list-style:none;margin:0;padding:0}
.tlw-course-nb{border-top:1px solid var(--tlw-grid);padding:6px 0}
.tlw-course-nb[aria-current=true]>.tlw-course-head .tlw-course-open{font-weight:600}
.tlw-course-head{display:flex;align-items:flex-start;gap:2px}
.tlw-course-toggle{flex:none;width:22px;text-align:center!important}
.tlw-course-open{flex:1;min-width:0;overflow-wrap:anywhere}
.tlw-course-bar{display:flex;gap:2px;height:8px;margin:4px 0 2px 24px}
.tlw-course-bar>span{display:block;border:1px solid var(--tlw-line);border-radius:2px;box-sizing:border-box;background:var(--tlw-bg)}
.tlw-course-bar>span.tlw-full,.tlw-course-bar>span.tlw-visible{background:var(--tlw-good);border-color:var(--tlw-good)}
.tlw-course-meta{color:var(--tlw-fg2);margin-left:24px;font-size:var(--jp-ui-font-size0,12px)}
.tlw-course-ex{margin:4px 0 0 24px}
.tlw-course-ex>li{display:flex;align-items:baseline;gap:4px;padding:1px 0}
.tlw-course-ex .tlw-course-goto{flex:1;min-width:0;overflow-wrap:anywhere}
.tlw-course-pts{flex:none;color:var(--tlw-fg2);font-variant-numeric:tabular-nums;font-size:var(--jp-ui-font-size0,12px)}
.tlw-course-actions{margin:4px 0 0 24px;display:flex;gap:6px;align-items:center;flex-wrap:wrap}
.tlw-course-said{margin:4px 0 0 24px;white-space:pre-wrap;overflow-wrap:anywhere}
.tlw-course-checks{margin:4px 0 0 24px}
.tlw-course-checks>li{padding:2px 0}
.tlw-course-checks pre{margin:2px 0 0 18px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:var(--jp-code-font-size,12px);
  color:var(--tlw-fg2);max-height:8em;overflow:auto}
.tlw-tone-good{color:var(--tlw-good)}.tlw-tone-bad{color:var(--tlw-bad)}.tlw-tone-warn{color:var(--tlw-warn)}
.tlw-tone-fg2{color:var(--tlw-fg2)}
`;

let styled = false;
function addStyle(doc: Document): void {
  if (styled && doc.getElementById("tlw-course-style")) return;
  const style = doc.createElement("style");
  style.id = "tlw-course-style";
  style.textContent = themeCss() + SIDEBAR_CSS;
  doc.head.appendChild(style);
  styled = true;
}

type Child = Node | string | null | false;
function h(tag: string, attrs: Record<string, string | boolean | undefined> = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== false) el.append(c);
  return el;
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

export class CourseView {
  readonly node: HTMLElement;
  private outline: Outline | null = null;
  private progress: Progress | null = null;
  private problem: string | null = null;
  private current: string | null = null;
  private shownCurrent: string | null = null; // the current notebook whose exercises were opened for it
  private readonly expanded = new Set<string>();
  private readonly runs = new Map<string, RunState>();
  private readonly said = new Map<string, Said>();
  private loading: Promise<void> | null = null;
  /** Set by every render: the time the last one took (ms), for the benchmark. */
  lastRenderMs = 0;

  constructor(private readonly api: CourseApi, private readonly handlers: ViewHandlers) {
    addStyle(document);
    this.node = h("div", { "class": "tlw-course tlw-theme", "role": "region", "aria-label": "Course outline and progress" });
    this.node.addEventListener("keydown", (e) => this.onKey(e));
    this.render();
  }

  get rows(): NotebookRow[] {
    return this.outline ? courseRows(this.outline, this.progress) : [];
  }

  /** Fetch the outline (when `outline` or not loaded yet) and the progress, then draw. */
  async load(outline = false): Promise<void> {
    if (this.loading) return this.loading;
    this.loading = (async () => {
      try {
        if (outline || !this.outline) this.outline = await this.api.outline();
        this.progress = await this.api.progress();
        this.problem = this.outline.problem;
      } catch (err) {
        this.problem = String(err instanceof Error ? err.message : err);
      } finally {
        this.loading = null;
      }
      this.render();
    })();
    return this.loading;
  }

  /** The notebook the learner is in (its Lab path): marked, and its exercises shown. */
  setCurrent(path: string | null): void {
    if (path === this.current) return;
    this.current = path;
    this.render();
  }

  async validate(row: NotebookRow): Promise<void> {
    if (this.runs.get(row.number)?.running) return;
    this.runs.set(row.number, { running: true, since: Date.now() });
    this.expanded.add(row.number);
    this.render();
    try {
      const result = await this.api.validate(row.name);
      this.runs.set(row.number, { running: false, result, error: result.error ?? null });
    } catch (err) {
      this.runs.set(row.number, { running: false, result: null, error: String(err instanceof Error ? err.message : err) });
    }
    this.render();
  }

  async reset(row: NotebookRow, ex: ExerciseRow): Promise<void> {
    try {
      const said = await this.handlers.reset(row, ex);
      if (said !== null) this.said.set(row.number, typeof said === "string" ? { text: said } : said);
    } catch (err) {
      this.said.set(row.number, { text: `Reset failed: ${String(err instanceof Error ? err.message : err)}` });
    }
    await this.load();
  }

  render(): void {
    const t0 = performance.now();
    const here = this.rows[rowOf(this.rows, this.current)];
    if (here && this.shownCurrent !== this.current) {
      this.expanded.add(here.number); // entering a notebook shows its exercises once; the learner may fold them
      this.shownCurrent = this.current;
    }
    const focused = (document.activeElement as HTMLElement | null)?.dataset?.["key"] ?? null;
    const rows = this.rows;
    const sum = totals(rows);
    const body: Child[] = [
      h("h2", {}, "Course"),
      this.outline
        ? h("div", { "class": "tlw-course-total" },
            `${sum.earned} / ${sum.possible} points · ${sum.passed} of ${plural(sum.exercises, "exercise")} passed`)
        : null,
      this.problem ? h("p", { "class": "tlw-course-problem", "role": "alert" }, this.problem) : null,
      !this.outline && !this.problem ? h("p", { "class": "tlw-course-note" }, "Loading the course…") : null,
      this.outline && rows.length === 0 && !this.problem
        ? h("p", { "class": "tlw-course-note" }, `No course notebooks (NN-name.ipynb) in ${this.outline.course_dir}.`)
        : null,
    ];
    if (rows.length) body.push(h("ol", { "class": "tlw-course-list", "aria-label": "Course notebooks" }, ...rows.map((r) => this.notebook(r))));
    if (rows.some((r) => r.exercises.some((e) => e.status === "visible"))) {
      body.push(h("p", { "class": "tlw-course-note" },
        "✓ on a student copy means its visible tests passed; hidden tests run when the notebook is graded."));
    }
    this.node.replaceChildren(...body.filter((c): c is Node | string => c !== null && c !== false));
    if (focused) Array.from(this.node.querySelectorAll<HTMLElement>("[data-key]")).find((el) => el.dataset["key"] === focused)?.focus();
    this.lastRenderMs = performance.now() - t0;
  }

  private notebook(r: NotebookRow): HTMLElement {
    const open = this.expanded.has(r.number);
    const listId = `tlw-course-ex-${r.number}`;
    const isCurrent = r.path !== null && r.path === this.current;
    const toggle = h("button", {
      "class": "tlw-course-toggle", "aria-expanded": String(open), "aria-controls": listId, "data-key": `toggle:${r.number}`,
      "aria-label": `${open ? "Hide" : "Show"} the exercises of ${r.number}`, "title": open ? "Hide exercises" : "Show exercises",
    }, open ? "▾" : "▸");
    toggle.addEventListener("click", () => {
      if (this.expanded.has(r.number)) this.expanded.delete(r.number);
      else this.expanded.add(r.number);
      this.render();
    });
    const title = h("button", {
      "class": "tlw-course-open", "data-key": `open:${r.number}`, "title": r.thesis || r.title,
      "disabled": r.path === null,
    }, `${r.number} · ${r.title}`);
    title.addEventListener("click", () => void this.handlers.open(r, null));
    const bar = h("div", {
      "class": "tlw-course-bar", "role": "progressbar", "aria-valuemin": "0", "aria-valuemax": String(r.possible),
      "aria-valuenow": String(r.earned), "aria-label": `${r.number}: ${r.earned} of ${r.possible} points`,
    }, ...r.exercises.map((e) => h("span", {
      "class": `tlw-${e.status === "not passed" ? "open" : e.status}`, "style": `flex:${Math.max(1, e.maxPoints)} 1 0`,
      "title": `${e.label}: ${statusWords(e.status)} (${e.points}/${e.maxPoints})`,
    })));
    const meta = h("div", { "class": "tlw-course-meta" },
      `${r.earned} / ${r.possible} points · ${r.passed} of ${plural(r.exercises.length, "exercise")} passed`);
    const parts: Child[] = [h("div", { "class": "tlw-course-head" }, toggle, title), r.exercises.length ? bar : null, meta];
    if (open) {
      parts.push(h("ul", { "class": "tlw-course-ex", "id": listId, "aria-label": `Exercises of ${r.number}` },
        ...r.exercises.map((e) => this.exercise(r, e))));
      parts.push(this.actions(r));
      const said = this.said.get(r.number);
      if (said) parts.push(this.saidBox(r, said));
      parts.push(this.validation(r));
    }
    return h("li", { "class": "tlw-course-nb", "data-notebook": r.number, "aria-current": isCurrent ? "true" : undefined }, ...parts);
  }

  private exercise(r: NotebookRow, e: ExerciseRow): HTMLElement {
    const words = statusWords(e.status);
    const go = h("button", {
      "class": "tlw-course-goto", "data-key": `ex:${e.gradeId}`, "data-grade-id": e.gradeId,
      "aria-label": `${e.label}: ${words}, ${e.points} of ${e.maxPoints} points. Open the notebook at this exercise`,
      "title": `${e.gradeId} · ${words}`, "disabled": r.path === null,
    }, h("span", { "class": `tlw-tone-${TONE[e.status]}`, "aria-hidden": "true" }, `${ICON[e.status]} `), e.label);
    go.addEventListener("click", () => void this.handlers.open(r, e));
    const reset = h("button", {
      "class": "tlw-act", "data-key": `reset:${e.gradeId}`, "aria-label": `Reset ${e.label} to its stub (your answer is kept in a backup)`,
      "title": "Put this exercise's answer cell back to its stub; your answer is kept in a backup",
    }, "Reset");
    reset.addEventListener("click", () => void this.reset(r, e));
    return h("li", { "data-status": e.status }, go, h("span", { "class": "tlw-course-pts" }, `${e.points}/${e.maxPoints}`), reset);
  }

  private saidBox(r: NotebookRow, said: Said): HTMLElement {
    const box = h("div", { "class": "tlw-course-said", "role": "status" }, said.text);
    const action = said.action;
    if (action) {
      const button = h("button", {
        "class": "tlw-act tlw-course-said-act", "data-key": `said:${r.number}`, "title": action.caption ?? action.label,
      }, action.label);
      button.addEventListener("click", () => {
        void (async () => {
          try {
            await action.run();
          } catch (err) {
            this.said.set(r.number, { ...said, text: `${said.text}\n${action.label} failed: ${String(err instanceof Error ? err.message : err)}` });
            this.render();
          }
        })();
      });
      box.append(" ", button);
    }
    return box;
  }

  private actions(r: NotebookRow): HTMLElement {
    const state = this.runs.get(r.number);
    const running = state?.running === true;
    const button = h("button", {
      "class": "tlw-act", "data-key": `validate:${r.number}`, "disabled": running,
      "aria-label": `Validate ${r.number}: run it in a fresh kernel and report each visible check`,
      "title": "Run this notebook top to bottom in a fresh kernel (your file is not changed) and report each visible check",
    }, running ? "Validating…" : "Validate");
    button.addEventListener("click", () => void this.validate(r));
    return h("div", { "class": "tlw-course-actions" }, button);
  }

  private validation(r: NotebookRow): HTMLElement {
    const state = this.runs.get(r.number);
    const box = h("div", { "class": "tlw-course-validation", "aria-live": "polite" });
    if (!state) return box;
    if (state.running) {
      box.append(h("div", { "class": "tlw-course-note" }, "Running the notebook in a fresh kernel…"));
      return box;
    }
    const { result, error } = state;
    if (result) {
      const passed = result.checks.filter((c) => c.status === "passed").length;
      const secs = result.seconds === undefined ? "" : ` in ${result.seconds.toFixed(1)} s`;
      box.append(h("div", { "class": "tlw-course-note" },
        `Validated${secs}: ${passed} of ${plural(result.checks.length, "check")} passed` +
          (result.stopped ? ` (stopped: ${result.stopped})` : "")));
      if (result.checks.length) {
        box.append(h("ul", { "class": "tlw-course-checks", "aria-label": `Validation of ${r.number}` }, ...result.checks.map((c) =>
          h("li", { "data-grade-id": c.grade_id, "data-status": c.status },
            h("span", { "class": `tlw-tone-${TONE[c.status] ?? "fg2"}` },
              `${ICON[c.status] ?? "?"} ${c.status === "passed" && c.message ? c.message : c.status}`),
            ` ${exerciseLabelOf(r, c.grade_id)} ` + (c.status !== "passed" ? `(0/${c.points})`
              : result.hidden_tests ? `(${c.points} if the hidden tests pass too)` : `(${c.points}/${c.points})`),
            c.status !== "passed" && c.message ? h("pre", {}, c.message.slice(0, 600)) : null))));
      }
      if (result.notice) box.append(h("p", { "class": "tlw-course-note" }, result.notice));
    }
    if (error) box.append(h("p", { "class": "tlw-course-problem", "role": "alert" }, error));
    return box;
  }

  /** Up/Down (and Home/End) move between the sidebar's buttons; Enter and Space press them. */
  private onKey(e: KeyboardEvent): void {
    if (!["ArrowDown", "ArrowUp", "Home", "End"].includes(e.key)) return;
    const all = Array.from(this.node.querySelectorAll<HTMLButtonElement>("button:not([disabled])"));
    if (!all.length) return;
    const at = all.indexOf(document.activeElement as HTMLButtonElement);
    const next = e.key === "Home" ? 0 : e.key === "End" ? all.length - 1
      : e.key === "ArrowDown" ? Math.min(all.length - 1, at + 1) : Math.max(0, at - 1);
    all[next]?.focus();
    e.preventDefault();
  }
}

function exerciseLabelOf(r: NotebookRow, gradeId: string): string {
  return r.exercises.find((e) => e.gradeId === gradeId)?.label ?? gradeId;
}

