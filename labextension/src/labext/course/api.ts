/** The course server's REST API (torchlens_widgets/course/REST.md), through Jupyter's authenticated
 * connection (token and XSRF cookie handled by ServerConnection). */
import { URLExt } from "@jupyterlab/coreutils";
import { ServerConnection } from "@jupyterlab/services";
import type { Outline, Progress, Validation } from "./model";

export interface ResetResult { notebook: string; grade_id: string; cells: number; backup: string }
/** A copy of a backup where Jupyter opens it (backups live in a dot folder Jupyter refuses to open). */
export interface BackupCopy { backup: string; path: string | null }

/** What the sidebar needs from the server; tests pass a fake. */
export interface CourseApi {
  outline(): Promise<Outline>;
  progress(): Promise<Progress>;
  validate(name: string): Promise<Validation>;
  reset(name: string, gradeId: string): Promise<ResetResult>;
  /** `backup` is the file name of a reset's backup of notebook `name`. */
  openableBackup(name: string, backup: string): Promise<BackupCopy>;
}

/** An error the server explained (its JSON `error`), or a network failure in words. */
export class CourseApiError extends Error {}

async function call<T>(settings: ServerConnection.ISettings, endpoint: string, body?: object): Promise<T> {
  const url = URLExt.join(settings.baseUrl, "torchlens", "api", endpoint);
  const init: RequestInit = body === undefined ? { method: "GET" } : { method: "POST", body: JSON.stringify(body) };
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (err) {
    throw new CourseApiError(`the course server could not be reached (${String(err)}); is Jupyter still running?`);
  }
  const text = await response.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const said = data && typeof data === "object" && "error" in data ? String((data as { error: unknown }).error) : "";
    if (response.status === 404) {
      throw new CourseApiError("the course server extension is not running: `jupyter server extension enable torchlens_widgets.course.server`, then restart Jupyter");
    }
    throw new CourseApiError(said || `${endpoint}: the server answered ${response.status} ${response.statusText}`);
  }
  return data as T;
}

export function serverApi(settings: ServerConnection.ISettings = ServerConnection.makeSettings()): CourseApi {
  return {
    outline: () => call<Outline>(settings, "outline"),
    progress: () => call<Progress>(settings, "progress"),
    validate: (name) => call<Validation>(settings, "validate", { path: name }),
    reset: (name, gradeId) => call<ResetResult>(settings, "reset", { path: name, grade_id: gradeId }),
    openableBackup: (name, backup) => call<BackupCopy>(settings, "backup", { path: name, backup }),
  };
}
