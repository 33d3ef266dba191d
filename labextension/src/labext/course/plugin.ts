/** JupyterLab plugin: the course sidebar (outline, progress, validate, reset), palette commands to go to
 * the next exercise or notebook, and live updates when a check passes in any open notebook. */
import type { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from "@jupyterlab/application";
import { ILayoutRestorer as ILayoutRestorerToken } from "@jupyterlab/application";
import { Dialog, ICommandPalette, Notification, showDialog } from "@jupyterlab/apputils";
import { LabIcon } from "@jupyterlab/ui-components";
import { Widget } from "@lumino/widgets";
import { serverApi, type CourseApi } from "./api";
import { baseName, headingIndex, nextExercise, nextNotebook, type CellInfo, type ExerciseRow, type NotebookRow } from "./model";
import { CourseView, type Said } from "./view";

export const SIDEBAR_ID = "torchlens-course";
export const COMMANDS = {
  show: "torchlens-course:show",
  open: "torchlens-course:open",
  nextExercise: "torchlens-course:next-exercise",
  nextNotebook: "torchlens-course:next-notebook",
  validate: "torchlens-course:validate",
  refresh: "torchlens-course:refresh",
} as const;
const SHOWN_KEY = "torchlens-course:shown"; // the sidebar opens by itself once per browser profile
const POLL_MS = 5000; // progress written elsewhere (a terminal, another tab) shows within this
const CHECK_META = "torchlens_check"; // display metadata every check attaches to its result

const ICON = new LabIcon({
  name: "torchlens-course:icon",
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16"><g class="jp-icon3" fill="#616161">' +
    '<path d="M4 4h16v2H4zM4 9h11v2H4zM4 14h16v2H4zM4 19h8v2H4z"/><circle cx="19" cy="10" r="2.2"/></g></svg>',
});

interface Cell {
  node: HTMLElement;
  model: { type?: string; sharedModel?: { getSource(): string }; getMetadata(key: string): unknown };
}
interface NotebookPanelLike {
  id: string;
  context: { path: string; ready: Promise<void>; model: { dirty: boolean }; save(): Promise<void>; revert(): Promise<void> };
  content: {
    node: HTMLElement;
    widgets: readonly Cell[];
    activeCellIndex: number;
    mode?: string;
    scrollToItem?(index: number, align?: string): Promise<void>;
  };
  sessionContext: { iopubMessage: { connect(fn: (sender: unknown, msg: IopubLike) => void): void } };
  revealed?: Promise<void>;
}
interface IopubLike { header: { msg_type: string }; content: { metadata?: Record<string, unknown> } }

function isNotebook(w: unknown): w is NotebookPanelLike {
  const x = w as Partial<NotebookPanelLike> | null;
  return !!x && !!x.context && typeof x.context.path === "string" && !!x.content && Array.isArray(x.content.widgets);
}

function gradeIdOf(cell: Cell): string | null {
  const meta = cell.model.getMetadata("nbgrader") as { grade_id?: unknown } | undefined;
  return meta && typeof meta.grade_id === "string" ? meta.grade_id : null;
}

function cellInfo(cell: Cell): CellInfo {
  return { type: cell.model.type ?? "", source: cell.model.sharedModel?.getSource() ?? "", gradeId: gradeIdOf(cell) };
}

const frame = (): Promise<void> => new Promise((r) => requestAnimationFrame(() => r()));

/** Bring cell `index` into the notebook's view (Lab's windowed notebook scrolls by item, from estimated heights
 * until the cells are measured; `align` corrects that). */
async function scrollToTop(panel: NotebookPanelLike, index: number): Promise<void> {
  const content = panel.content;
  if (content.scrollToItem) {
    try { await content.scrollToItem(index, "start"); return; } catch { /* not laid out yet: by the node */ }
  }
  content.widgets[index]?.node.scrollIntoView({ block: "start" });
}

/** Scroll so that cell `index` starts `offset` px below the top of the notebook's view; false when it cannot be
 * measured (not in the page). */
function align(panel: NotebookPanelLike, index: number, offset: number): boolean {
  const cell = panel.content.widgets[index];
  const scroller = scrollerOf(panel.content.node);
  if (!cell || !scroller || !cell.node.isConnected) return false;
  const now = cell.node.getBoundingClientRect().top - scroller.getBoundingClientRect().top;
  if (Math.abs(now - offset) > 1) scroller.scrollTop += now - offset;
  return true;
}

const settling = new WeakMap<NotebookPanelLike, number>(); // the latest settleAt of a panel; older ones stop

/** Cell `index` at `offset` px from the top of the view, kept there while the notebook settles: markdown and
 * outputs render (changing the heights above it) and the front end may scroll a (re)loaded notebook itself.
 * Stops when the learner scrolls, clicks or types in the notebook, or when another settleAt of it starts. */
async function settleAt(panel: NotebookPanelLike, index: number, offset: number, active?: number): Promise<void> {
  const content = panel.content;
  const turn = (settling.get(panel) ?? 0) + 1;
  settling.set(panel, turn);
  let moved = false; // the learner scrolls or types meanwhile: their view wins
  const stop = (): void => { moved = true; };
  const events = ["wheel", "touchmove", "keydown", "pointerdown"];
  for (const e of events) content.node.addEventListener(e, stop, { passive: true, capture: true });
  try {
    for (const wait of [0, 60, 150, 300, 600, 1000]) {
      if (wait) await new Promise((r) => setTimeout(r, wait));
      await frame();
      if (moved || settling.get(panel) !== turn) return;
      if (!content.widgets[index]) continue;
      if (active !== undefined && content.activeCellIndex !== active) content.activeCellIndex = active;
      if (!align(panel, index, offset)) {
        await scrollToTop(panel, index);
        await frame();
        align(panel, index, offset);
      }
    }
  } finally {
    for (const e of events) content.node.removeEventListener(e, stop, { capture: true });
  }
}

/** The notebook already open on `path` (in Notebook 7 it is the page's own document), else null. */
function openNotebook(app: JupyterFrontEnd, path: string): NotebookPanelLike | null {
  const current: unknown = app.shell.currentWidget;
  if (isNotebook(current) && current.context.path === path) return current;
  return openNotebooks(app, path)[0] ?? null;
}

/** Open `row` in Lab (or bring its open notebook to the front: opening it again would, in Notebook 7, replace the
 * page's notebook and open a second browser tab); with an exercise, select its answer cell (else its test
 * cell) and put the exercise's heading at the top of the view. */
async function openAt(app: JupyterFrontEnd, row: NotebookRow, exercise: ExerciseRow | null): Promise<void> {
  if (row.path === null) return;
  let widget: unknown = openNotebook(app, row.path);
  if (widget) app.shell.activateById((widget as NotebookPanelLike).id);
  else widget = await app.commands.execute("docmanager:open", { path: row.path });
  if (!exercise || !isNotebook(widget)) return;
  await widget.context.ready;
  if (widget.revealed) await widget.revealed;
  const cells = widget.content.widgets;
  let at = cells.findIndex((c) => gradeIdOf(c) === `${exercise.gradeId}-answer`);
  if (at < 0) at = cells.findIndex((c) => gradeIdOf(c) === exercise.gradeId);
  if (at < 0) return;
  const top = headingIndex(cells.map(cellInfo), at, exercise.gradeId);
  if (widget.content.mode === "edit") widget.content.mode = "command"; // an editor taking focus would scroll to itself
  widget.content.activeCellIndex = at;
  await frame();
  await scrollToTop(widget, top);
  await settleAt(widget, top, 0);
}

function openNotebooks(app: JupyterFrontEnd, path: string): (Widget & NotebookPanelLike)[] {
  return Array.from(app.shell.widgets("main")).filter((w): w is Widget & NotebookPanelLike => isNotebook(w) && w.context.path === path);
}

/** The element that scrolls a notebook's cells: Lab's windowed panel inside it, else the nearest scrolling
 * element around it. */
function scrollerOf(el: HTMLElement): HTMLElement | null {
  const outer = el.querySelector<HTMLElement>(".jp-WindowedPanel-outer");
  if (outer) return outer;
  for (let e: HTMLElement | null = el; e; e = e.parentElement) {
    const y = getComputedStyle(e).overflowY;
    if ((y === "auto" || y === "scroll") && e.scrollHeight > e.clientHeight) return e;
  }
  return null;
}

/** Where the learner is in a notebook: the active cell, and the first cell in view with its distance from the
 * top of the view, so the same place can be shown again once the cells are made anew (after a revert). */
interface Place { active: number; index: number; offset: number }

function placeOf(panel: NotebookPanelLike): Place {
  const content = panel.content;
  const scroller = scrollerOf(content.node);
  const top = scroller?.getBoundingClientRect().top ?? 0;
  let index = content.widgets.findIndex((c) => c.node.isConnected && c.node.getBoundingClientRect().bottom > top + 1);
  if (index < 0) index = content.activeCellIndex;
  const offset = (content.widgets[index]?.node.getBoundingClientRect().top ?? top) - top;
  return { active: content.activeCellIndex, index, offset };
}

/** Ask (Cancel focused: Enter must not reset unread), save an open copy (so the backup holds what the learner
 * sees), reset on the server, reload keeping the view, and say where the backup is with a way to open it. */
async function resetExercise(app: JupyterFrontEnd, api: CourseApi, row: NotebookRow, ex: ExerciseRow): Promise<Said | null> {
  const answer = await showDialog({
    title: `Reset “${ex.label}”?`,
    body: `Its answer cell in ${row.name} goes back to the stub. Your notebook as it is now is kept in a backup first; a pass already recorded stays recorded.`,
    buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: "Reset" })],
    defaultButton: 0,
  });
  if (!answer.button.accept) return null;
  const open = row.path === null ? [] : openNotebooks(app, row.path);
  const current: unknown = app.shell.currentWidget;
  if (isNotebook(current) && current.context.path === row.path && !open.includes(current as Widget & NotebookPanelLike)) {
    open.push(current as Widget & NotebookPanelLike);
  }
  for (const w of open) if (w.context.model.dirty) await w.context.save();
  const places = open.map(placeOf);
  const done = await api.reset(row.name, ex.gradeId);
  await Promise.all(open.map(async (w, k) => {
    await w.context.revert();
    const p = places[k]!;
    void settleAt(w, p.index, p.offset, p.active); // the view as it was, while the reloaded cells render
  }));
  const file = baseName(done.backup);
  const openBackup = async (): Promise<void> => {
    const copy = await api.openableBackup(row.name, file);
    if (copy.path === null) throw new Error(`the backup's copy ${copy.backup} is outside Jupyter's root folder`);
    await app.commands.execute("docmanager:open", { path: copy.path });
  };
  const text = `Reset “${ex.label}” to its stub. Your previous notebook is kept at ${done.backup}`;
  const action = { label: "Open backup", caption: `Open ${file} (a copy in backups/ beside the notebook)`, run: openBackup };
  Notification.success(text, {
    autoClose: false,
    actions: [{
      label: action.label, caption: action.caption,
      callback: () => { openBackup().catch((err: unknown) => Notification.error(`Open backup failed: ${String(err instanceof Error ? err.message : err)}`)); },
    }],
  });
  return { text, action };
}

type Shell = JupyterFrontEnd.IShell;
interface ChangingShell { currentChanged?: { connect(fn: () => void): void } }

/** The path of the notebook in front (JupyterLab's and Notebook 7's shells both say which widget it is). */
function currentPath(shell: Shell): string | null {
  const w: unknown = shell.currentWidget;
  return isNotebook(w) ? w.context.path : null;
}

export const coursePlugin: JupyterFrontEndPlugin<void> = {
  id: "torchlens-widgets:course",
  description: "The course sidebar: every notebook with its progress, exercises, validate and reset.",
  autoStart: true,
  optional: [ICommandPalette, ILayoutRestorerToken],
  // No ILabShell: Notebook 7's shell has a left area too, so the sidebar works in both front ends.
  activate: (app: JupyterFrontEnd, palette: ICommandPalette | null, restorer: ILayoutRestorer | null) => {
    const shell = app.shell;
    const api = serverApi(app.serviceManager.serverSettings);
    const view = new CourseView(api, {
      open: (row, ex) => openAt(app, row, ex),
      reset: (row, ex) => resetExercise(app, api, row, ex),
    });
    const widget = new Widget({ node: view.node });
    widget.id = SIDEBAR_ID;
    widget.title.icon = ICON;
    widget.title.caption = "Course";
    widget.addClass("tlw-course-panel");
    shell.add(widget, "left", { rank: 150 });
    restorer?.add(widget, SIDEBAR_ID);

    let pending: ReturnType<typeof setTimeout> | null = null;
    const soon = (): void => {
      if (pending) return;
      pending = setTimeout(() => { pending = null; void view.load(); }, 150);
    };
    // A check that passes (or fails) anywhere attaches its result to its output: refresh then.
    app.docRegistry.addWidgetExtension("Notebook", {
      createNew: (panel) => {
        if (!isNotebook(panel)) return;
        panel.sessionContext.iopubMessage.connect((_, msg) => {
          const type = msg.header.msg_type;
          if ((type === "display_data" || type === "update_display_data") && msg.content.metadata && CHECK_META in msg.content.metadata) soon();
        });
      },
    });
    setInterval(() => { if (widget.isVisible && !document.hidden) void view.load(); }, POLL_MS);
    (shell as Shell & ChangingShell).currentChanged?.connect(() => view.setCurrent(currentPath(shell)));

    const rows = async (): Promise<NotebookRow[]> => { await view.load(); return view.rows; };
    app.commands.addCommand(COMMANDS.show, {
      label: "Course: show the outline and progress",
      execute: () => { shell.activateById(SIDEBAR_ID); },
    });
    app.commands.addCommand(COMMANDS.refresh, {
      label: "Course: refresh the outline",
      execute: () => view.load(true),
    });
    app.commands.addCommand(COMMANDS.open, {
      label: "Course: open a notebook at an exercise",
      execute: async (args) => {
        const all = await rows();
        const row = all.find((r) => r.name === args["name"] || r.path === args["path"] || r.number === args["number"]);
        if (!row) throw new Error(`no course notebook ${JSON.stringify(args)}`);
        await openAt(app, row, row.exercises.find((e) => e.gradeId === args["grade_id"]) ?? null);
      },
    });
    app.commands.addCommand(COMMANDS.nextExercise, {
      label: "Course: next exercise",
      caption: "Open the first exercise not passed yet, from the notebook you are in onwards",
      execute: async () => {
        const target = nextExercise(await rows(), currentPath(shell));
        if (!target) { Notification.success("Every exercise of the course has passed."); return; }
        await openAt(app, target.row, target.exercise);
      },
    });
    app.commands.addCommand(COMMANDS.nextNotebook, {
      label: "Course: next notebook",
      caption: "Open the notebook after the one you are in",
      execute: async () => {
        const row = nextNotebook(await rows(), currentPath(shell));
        if (!row) { Notification.info("This is the last notebook of the course so far."); return; }
        await openAt(app, row, null);
      },
    });
    app.commands.addCommand(COMMANDS.validate, {
      label: "Course: validate this notebook",
      caption: "Run the notebook you are in, in a fresh kernel, and report each visible check in the sidebar",
      isEnabled: () => currentPath(shell) !== null,
      execute: async () => {
        const all = await rows();
        const row = all.find((r) => r.path === currentPath(shell));
        if (!row) { Notification.warning("This notebook is not one of the course's notebooks."); return; }
        shell.activateById(SIDEBAR_ID);
        await view.validate(row);
      },
    });
    for (const command of Object.values(COMMANDS)) if (command !== COMMANDS.open) palette?.addItem({ command, category: "Course" });

    void app.restored.then(() => {
      void view.load();
      view.setCurrent(currentPath(shell));
      let shown = false;
      try { shown = localStorage.getItem(SHOWN_KEY) === "1"; localStorage.setItem(SHOWN_KEY, "1"); } catch { /* private mode */ }
      if (!shown) shell.activateById(SIDEBAR_ID);
    });
  },
};
