import { describe, expect, it } from "vitest";
import { courseRows, exerciseLabel, nextExercise, nextNotebook, titleOf, totals } from "../src/labext/course/model";
import { OUTLINE, progress } from "./course_fixture";

describe("course rows", () => {
  it("merges outline and progress in outline order, unattempted exercises included", () => {
    const rows = courseRows(OUTLINE, progress({ "01-second": "visible" }));
    expect(rows.map((r) => r.number)).toEqual(["01", "02", "03", "04"]);
    expect(rows[0]).toMatchObject({ title: "PyTorch is a runtime", thesis: "A line travels", earned: 3, possible: 5, passed: 1 });
    expect(rows[0]!.exercises.map((e) => [e.label, e.status, e.points])).toEqual([["first one", "not passed", 0], ["second", "visible", 3]]);
    expect(totals(rows)).toEqual({ earned: 3, possible: 12, passed: 1, exercises: 5 });
  });

  it("shows every exercise as not passed without progress", () => {
    const rows = courseRows(OUTLINE, null);
    expect(rows.every((r) => r.earned === 0 && r.exercises.every((e) => e.status === "not passed"))).toBe(true);
  });

  it("labels exercises without their notebook prefix and titles without their number", () => {
    expect(exerciseLabel("02-reshape-as-view", "02")).toBe("reshape as view");
    expect(exerciseLabel("odd_id", "02")).toBe("odd id");
    expect(titleOf("12 · Save or recompute", "12")).toBe("Save or recompute");
    expect(titleOf("Save 12", "12")).toBe("Save 12");
  });
});

describe("what comes next", () => {
  const rows = courseRows(OUTLINE, progress({ "01-first-one": "full", "02-x": "full" }));

  it("next exercise: the first not passed from the current notebook on, wrapping, skipping notebooks Lab cannot open", () => {
    expect(nextExercise(rows)?.exercise?.gradeId).toBe("01-second");
    expect(nextExercise(rows, "course/02-b.ipynb")?.exercise?.gradeId).toBe("04-z");
    const done = courseRows(OUTLINE, progress({ "01-first-one": "full", "01-second": "full", "02-x": "full", "04-z": "visible" }));
    expect(nextExercise(done, "course/04-d.ipynb")).toBeNull(); // 03 is not passed but cannot be opened
  });

  it("next notebook: the one after the current, else the first with work left; null after the last", () => {
    expect(nextNotebook(rows, "course/01-a.ipynb")?.number).toBe("02");
    expect(nextNotebook(rows, "course/02-b.ipynb")?.number).toBe("04");
    expect(nextNotebook(rows, "course/04-d.ipynb")).toBeNull();
    expect(nextNotebook(rows, null)?.number).toBe("01");
    expect(nextNotebook(rows, "elsewhere.ipynb")?.number).toBe("01");
  });
});
