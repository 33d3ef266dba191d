import { describe, expect, it } from "vitest";
import { baseName, courseRows, exerciseLabel, headingIndex, nextExercise, nextNotebook, titleOf, totals, type CellInfo } from "../src/labext/course/model";
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

describe("where opening an exercise lands", () => {
  const md = (source: string): CellInfo => ({ type: "markdown", source, gradeId: null });
  const code = (source: string, gradeId: string | null = null): CellInfo => ({ type: "code", source, gradeId });
  const cells: CellInfo[] = [
    md("# Notebook\n\nIntro"),
    md("## Exercise 1: views\n\nMake a view."), md("Some more words."), code("setup()"),
    code("stub", "01-a-answer"), code("check", "01-a"),
    md("Teaching between exercises, no heading."),
    code("demo()"), md("A statement without heading"), code("stub", "01-b-answer"), code("check", "01-b"),
    md("### Exercise 3"), code("stub", "01-c-answer"), code("check", "01-c"),
  ];
  it("is the heading of the exercise's statement, over the text and code between it and the answer", () => {
    expect(headingIndex(cells, 4, "01-a")).toBe(1);
    expect(headingIndex(cells, 12, "01-c")).toBe(11);
  });
  it("never crosses the previous exercise: without a heading, the markdown just before the answer, else the answer", () => {
    expect(headingIndex(cells, 9, "01-b")).toBe(8);
    const bare = [code("stub", "x-answer"), code("check", "x"), code("stub", "y-answer")];
    expect(headingIndex(bare, 2, "y")).toBe(2);
    expect(headingIndex([code("stub", "z-answer")], 0, "z")).toBe(0);
  });
  it("takes headings with leading blank lines", () => {
    expect(headingIndex([md("\n\n## Ex"), code("s", "e-answer")], 1, "e")).toBe(0);
  });
});

describe("backup names", () => {
  it("are the file name of the path the server gives", () => {
    expect(baseName("/home/me/course/.torchlens/backups/01-a.20261128-120000.01-x.ipynb")).toBe("01-a.20261128-120000.01-x.ipynb");
    expect(baseName("C:\\course\\.torchlens\\backups\\b.ipynb")).toBe("b.ipynb");
    expect(baseName("b.ipynb")).toBe("b.ipynb");
  });
});
