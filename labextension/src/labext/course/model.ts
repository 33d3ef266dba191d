/** The course as the sidebar shows it: the server's outline and progress merged into plain rows, and
 * which exercise or notebook comes next. Pure data, no DOM, so it is tested on its own. */

export interface OutlineExercise { grade_id: string; points: number }
export interface OutlineNotebook {
  number: string;
  path: string | null; // relative to the server root (what Lab opens); null when outside it
  name: string; // file name in the course folder (what validate and reset take)
  title: string;
  thesis: string;
  points: number;
  exercises: OutlineExercise[];
}
export interface Outline { course_dir: string; problem: string | null; notebooks: OutlineNotebook[] }

export type Status = "full" | "visible" | "not passed";
export interface ProgressExercise { grade_id: string; points: number; max_points: number; status: Status }
export interface ProgressNotebook { notebook: string; exercises: ProgressExercise[] }
export interface Progress { store: string; notebooks: ProgressNotebook[] }

export type CheckStatus = "passed" | "failed" | "not attempted" | "timeout" | "kernel died";
export interface CheckResult { grade_id: string; points: number; status: CheckStatus; message: string }
export interface Validation {
  notebook: string;
  seconds?: number;
  stopped: string | null;
  hidden_tests: boolean | null;
  notice: string | null;
  checks: CheckResult[];
  error?: string;
}

export interface ExerciseRow { gradeId: string; label: string; maxPoints: number; points: number; status: Status }
export interface NotebookRow {
  number: string;
  path: string | null;
  name: string;
  title: string;
  thesis: string;
  earned: number;
  possible: number;
  passed: number; // exercises passed (visible or full)
  exercises: ExerciseRow[];
}

/** "02-storage-position" → "storage position": the id without its notebook prefix, read as words. */
export function exerciseLabel(gradeId: string, number: string): string {
  const rest = gradeId.startsWith(`${number}-`) ? gradeId.slice(number.length + 1) : gradeId;
  return rest.replace(/[-_]+/g, " ").trim() || gradeId;
}

/** Markdown emphasis and code marks dropped: titles and theses are shown as plain text. */
export function plainText(markdown: string): string {
  return markdown.replace(/\*\*|__|`/g, "").replace(/\[([^\]]*)\]\([^)]*\)/g, "$1").trim();
}

/** "02 · Storage, views …" → "Storage, views …": the sidebar shows the number on its own. */
export function titleOf(title: string, number: string): string {
  const t = plainText(title);
  const m = t.match(new RegExp(`^${number}\\s*[·:.\\-–—]?\\s*(.+)$`));
  return m?.[1] ?? t;
}

/** One row per outline notebook, in outline order; progress the outline does not know is ignored. */
export function courseRows(outline: Outline, progress: Progress | null): NotebookRow[] {
  const status = new Map<string, ProgressExercise>();
  for (const nb of progress?.notebooks ?? []) for (const ex of nb.exercises) status.set(ex.grade_id, ex);
  return outline.notebooks.map((nb) => {
    const exercises = nb.exercises.map((ex): ExerciseRow => {
      const got = status.get(ex.grade_id);
      const st: Status = got?.status ?? "not passed";
      return {
        gradeId: ex.grade_id,
        label: exerciseLabel(ex.grade_id, nb.number),
        maxPoints: ex.points,
        points: st === "not passed" ? 0 : (got?.points ?? ex.points),
        status: st,
      };
    });
    return {
      number: nb.number,
      path: nb.path,
      name: nb.name,
      title: titleOf(nb.title, nb.number),
      thesis: plainText(nb.thesis),
      earned: exercises.reduce((s, e) => s + e.points, 0),
      possible: exercises.reduce((s, e) => s + e.maxPoints, 0),
      passed: exercises.filter((e) => e.status !== "not passed").length,
      exercises,
    };
  });
}

export interface Totals { earned: number; possible: number; passed: number; exercises: number }

export function totals(rows: NotebookRow[]): Totals {
  return rows.reduce(
    (t, r) => ({ earned: t.earned + r.earned, possible: t.possible + r.possible, passed: t.passed + r.passed,
                 exercises: t.exercises + r.exercises.length }),
    { earned: 0, possible: 0, passed: 0, exercises: 0 },
  );
}

/** The notebook row whose Lab path is `path` (the one the learner is in), or -1. */
export function rowOf(rows: NotebookRow[], path: string | null | undefined): number {
  return path ? rows.findIndex((r) => r.path === path) : -1;
}

export interface Target { row: NotebookRow; exercise: ExerciseRow | null }

/** The first exercise not passed yet, from the notebook the learner is in onwards, then from the start
 * (course order); null when every exercise has passed. Notebooks Lab cannot open are skipped. */
export function nextExercise(rows: NotebookRow[], currentPath?: string | null): Target | null {
  const start = Math.max(0, rowOf(rows, currentPath));
  for (let k = 0; k < rows.length; k++) {
    const row = rows[(start + k) % rows.length]!;
    if (row.path === null) continue;
    const ex = row.exercises.find((e) => e.status === "not passed");
    if (ex) return { row, exercise: ex };
  }
  return null;
}

/** The notebook after the one the learner is in (course order); without one open, the first notebook
 * with an exercise not passed (else the first); null past the last. */
export function nextNotebook(rows: NotebookRow[], currentPath?: string | null): NotebookRow | null {
  const openable = rows.filter((r) => r.path !== null);
  const at = rowOf(openable, currentPath);
  if (at >= 0) return openable[at + 1] ?? null;
  return openable.find((r) => r.passed < r.exercises.length) ?? openable[0] ?? null;
}

/** Short words for a status, as the sidebar says them. */
export function statusWords(status: Status | CheckStatus): string {
  switch (status) {
    case "full": return "passed";
    case "visible": return "visible tests passed";
    case "not passed": return "not passed yet";
    default: return status;
  }
}

/** What the plugin knows of a cell to find an exercise's heading. */
export interface CellInfo { type: string; source: string; gradeId: string | null }

/** The cell to show at the top when opening an exercise whose answer cell is `answer`: the nearest markdown
 * cell before it that starts with a heading (the exercise's statement), not crossing another exercise's graded
 * cells; else the markdown cell just before the answer (the statement without a heading); else the answer. */
export function headingIndex(cells: readonly CellInfo[], answer: number, gradeId: string): number {
  let statement = -1;
  for (let i = answer - 1; i >= 0; i--) {
    const c = cells[i]!;
    if (c.gradeId !== null && c.gradeId !== gradeId && c.gradeId !== `${gradeId}-answer`) break; // the previous exercise
    if (c.type !== "markdown") continue;
    if (/^\s*#/.test(c.source)) return i;
    if (statement < 0 && i === answer - 1) statement = i;
  }
  return statement >= 0 ? statement : answer;
}

/** "/home/me/course/.torchlens/backups/01-a.2026.01-x.ipynb" → "01-a.2026.01-x.ipynb" (either separator). */
export function baseName(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}
