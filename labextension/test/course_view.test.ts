import { describe, expect, it, vi } from "vitest";
import type { CourseApi } from "../src/labext/course/api";
import type { Progress, Validation } from "../src/labext/course/model";
import { CourseView, type ViewHandlers } from "../src/labext/course/view";
import { OUTLINE, progress } from "./course_fixture";

function fakeApi(state: { progress: Progress }, validation?: Validation): CourseApi {
  return {
    outline: vi.fn(async () => OUTLINE),
    progress: vi.fn(async () => state.progress),
    validate: vi.fn(async () => validation ?? { notebook: "x", stopped: null, hidden_tests: true, notice: "hidden tests run at grading", checks: [] }),
    reset: vi.fn(async () => ({ notebook: "x", grade_id: "y", cells: 1, backup: "/b" })),
    openableBackup: vi.fn(async () => ({ backup: "/c/backups/b", path: "c/backups/b" })),
  };
}

async function mounted(api: CourseApi, handlers: ViewHandlers = { open: vi.fn(), reset: vi.fn(async () => "reset done") }) {
  const view = new CourseView(api, handlers);
  document.body.replaceChildren(view.node);
  await view.load();
  return { view, handlers };
}

describe("course sidebar", () => {
  it("lists every notebook in order with a progress bar per notebook and the totals", async () => {
    const { view } = await mounted(fakeApi({ progress: progress({ "01-second": "full" }) }));
    const items = [...view.node.querySelectorAll(".tlw-course-nb")].map((li) => li.getAttribute("data-notebook"));
    expect(items).toEqual(["01", "02", "03", "04"]);
    const bar = view.node.querySelector('[data-notebook="01"] [role=progressbar]')!;
    expect(bar.getAttribute("aria-valuenow")).toBe("3");
    expect(bar.getAttribute("aria-valuemax")).toBe("5");
    expect([...bar.children].map((s) => s.className)).toEqual(["tlw-open", "tlw-full"]); // unattempted shown as open
    expect(view.node.textContent).toContain("3 / 12 points · 1 of 5 exercises passed");
    expect(view.node.querySelector('[data-notebook="03"] .tlw-course-open')!.hasAttribute("disabled")).toBe(true);
  });

  it("updates when progress changes, keeping focus on the same button", async () => {
    const state = { progress: progress({}) };
    const { view } = await mounted(fakeApi(state));
    view.setCurrent("course/01-a.ipynb");
    const button = view.node.querySelector<HTMLButtonElement>('[data-key="ex:01-first-one"]')!;
    button.focus();
    state.progress = progress({ "01-first-one": "visible" });
    await view.load();
    const li = view.node.querySelector('[data-grade-id="01-first-one"]')!.closest("li")!;
    expect(li.getAttribute("data-status")).toBe("visible");
    expect((document.activeElement as HTMLElement).dataset["key"]).toBe("ex:01-first-one");
    expect(view.node.querySelector('[data-notebook="01"]')!.getAttribute("aria-current")).toBe("true");
  });

  it("opens a notebook at an exercise and resets through the handlers", async () => {
    const { view, handlers } = await mounted(fakeApi({ progress: progress({}) }));
    view.setCurrent("course/02-b.ipynb");
    view.node.querySelector<HTMLButtonElement>('[data-key="ex:02-x"]')!.click();
    expect(handlers.open).toHaveBeenCalledWith(expect.objectContaining({ number: "02" }), expect.objectContaining({ gradeId: "02-x" }));
    view.node.querySelector<HTMLButtonElement>('[data-key="reset:02-x"]')!.click();
    await vi.waitFor(() => expect(view.node.textContent).toContain("reset done"));
  });

  it("offers the reset's follow-up action (open the backup) as a button, and says when it fails", async () => {
    const run = vi.fn(async () => undefined);
    const handlers = { open: vi.fn(), reset: vi.fn(async () => ({ text: "kept at /b", action: { label: "Open backup", run } })) };
    const { view } = await mounted(fakeApi({ progress: progress({}) }), handlers);
    view.setCurrent("course/02-b.ipynb");
    view.node.querySelector<HTMLButtonElement>('[data-key="reset:02-x"]')!.click();
    await vi.waitFor(() => expect(view.node.querySelector(".tlw-course-said")?.textContent).toContain("kept at /b"));
    const open = view.node.querySelector<HTMLButtonElement>('.tlw-course-said [data-key="said:02"]')!;
    expect(open.textContent).toBe("Open backup");
    open.click();
    expect(run).toHaveBeenCalledTimes(1);
    run.mockRejectedValueOnce(new Error("no such backup"));
    view.node.querySelector<HTMLButtonElement>('[data-key="said:02"]')!.click();
    await vi.waitFor(() => expect(view.node.querySelector(".tlw-course-said")?.textContent).toContain("Open backup failed: no such backup"));
  });

  it("shows nothing after a cancelled reset", async () => {
    const handlers = { open: vi.fn(), reset: vi.fn(async () => null) };
    const { view } = await mounted(fakeApi({ progress: progress({}) }), handlers);
    view.setCurrent("course/02-b.ipynb");
    view.node.querySelector<HTMLButtonElement>('[data-key="reset:02-x"]')!.click();
    await vi.waitFor(() => expect(handlers.reset).toHaveBeenCalled());
    await view.load();
    expect(view.node.querySelector(".tlw-course-said")).toBeNull();
  });

  it("shows each check of a validation and the hidden-tests notice, never 'all passed'", async () => {
    const validation: Validation = {
      notebook: "x", seconds: 3.2, stopped: null, hidden_tests: true, notice: "hidden tests run only when graded",
      checks: [{ grade_id: "02-x", points: 4, status: "failed", message: "expected 3, got 4" }],
    };
    const { view } = await mounted(fakeApi({ progress: progress({}) }, validation));
    view.node.querySelector<HTMLButtonElement>('[data-key="toggle:02"]')!.click();
    view.node.querySelector<HTMLButtonElement>('[data-key="validate:02"]')!.click();
    await vi.waitFor(() => expect(view.node.querySelector('.tlw-course-checks [data-grade-id="02-x"]')).not.toBeNull());
    const text = view.node.querySelector(".tlw-course-validation")!.textContent!;
    expect(text).toContain("0 of 1 check passed");
    expect(text).toContain("expected 3, got 4");
    expect(text).toContain("hidden tests run only when graded");
  });

  it("says what went wrong when the server cannot be reached", async () => {
    const api = fakeApi({ progress: progress({}) });
    api.outline = vi.fn(async () => { throw new Error("the course server extension is not running"); });
    const { view } = await mounted(api);
    expect(view.node.querySelector("[role=alert]")!.textContent).toContain("not running");
  });

  it("moves focus with the arrow keys", async () => {
    const { view } = await mounted(fakeApi({ progress: progress({}) }));
    const buttons = [...view.node.querySelectorAll<HTMLButtonElement>("button:not([disabled])")];
    buttons[0]!.focus();
    view.node.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown", bubbles: true }));
    expect(document.activeElement).toBe(buttons[1]);
    view.node.dispatchEvent(new KeyboardEvent("keydown", { key: "End", bubbles: true }));
    expect(document.activeElement).toBe(buttons[buttons.length - 1]);
  });
});
