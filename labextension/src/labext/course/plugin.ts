/** JupyterLab plugin: the course sidebar (outline, progress, validate, reset), palette commands to go to
 * the next exercise or notebook, and live updates when a check passes in any open notebook. */
import type { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from "@jupyterlab/application";
import { ILayoutRestorer as ILayoutRestorerToken } from "@jupyterlab/application";
import { Dialog, ICommandPalette, Notification, showDialog } from "@jupyterlab/apputils";
import { LabIcon } from "@jupyterlab/ui-components";
import { Widget } from "@lumino/widgets";
import { serverApi, type CourseApi } from "./api";
import { nextExercise, nextNotebook, type ExerciseRow, type NotebookRow } from "./model";
import { CourseView } from "./view";

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

interface Cell { model: { getMetadata(key: string): unknown } }
interface NotebookPanelLike {
  context: { path: string; ready: Promise<void>; model: { dirty: boolean }; save(): Promise<void>; revert(): Promise<void> };
  content: { widgets: readonly Cell[]; activeCellIndex: number; scrollToCell?(cell: Cell, align?: string): Promise<void> };
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

/** Open `row` in Lab; with an exercise, select its answer cell (else its test cell) and scroll to it. */
async function openAt(app: JupyterFrontEnd, row: NotebookRow, exercise: ExerciseRow | null): Promise<void> {
  if (row.path === null) return;
  const widget: unknown = await app.commands.execute("docmanager:open", { path: row.path });
  if (!exercise || !isNotebook(widget)) return;
  await widget.context.ready;
  if (widget.revealed) await widget.revealed;
  const cells = widget.content.widgets;
  let at = cells.findIndex((c) => gradeIdOf(c) === `${exercise.gradeId}-answer`);
  if (at < 0) at = cells.findIndex((c) => gradeIdOf(c) === exercise.gradeId);
  if (at < 0) return;
  widget.content.activeCellIndex = at;
  const cell = cells[at];
  if (cell && widget.content.scrollToCell) await widget.content.scrollToCell(cell, "start");
}

function openNotebooks(app: JupyterFrontEnd, path: string): NotebookPanelLike[] {
  return Array.from(app.shell.widgets("main")).filter((w): w is Widget & NotebookPanelLike => isNotebook(w) && w.context.path === path);
}

/** Ask, save an open copy (so the backup holds what the learner sees), reset on the server, reload. */
async function resetExercise(app: JupyterFrontEnd, api: CourseApi, row: NotebookRow, ex: ExerciseRow): Promise<string | null> {
  const answer = await showDialog({
    title: `Reset “${ex.label}”?`,
    body: `Its answer cell in ${row.name} goes back to the stub. Your notebook as it is now is kept in a backup first; a pass already recorded stays recorded.`,
    buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: "Reset" })],
  });
  if (!answer.button.accept) return null;
  const open = row.path === null ? [] : openNotebooks(app, row.path);
  for (const w of open) if (w.context.model.dirty) await w.context.save();
  const done = await api.reset(row.name, ex.gradeId);
  for (const w of open) await w.context.revert();
  return `Reset “${ex.label}” to its stub. Your previous notebook is kept at ${done.backup}`;
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
