import type { Outline, Progress } from "../src/labext/course/model";

export const OUTLINE: Outline = {
  course_dir: "/c",
  problem: null,
  notebooks: [
    { number: "01", path: "course/01-a.ipynb", name: "01-a.ipynb", title: "01 · PyTorch is a **runtime**", thesis: "A `line` travels", points: 5,
      exercises: [{ grade_id: "01-first-one", points: 2 }, { grade_id: "01-second", points: 3 }] },
    { number: "02", path: "course/02-b.ipynb", name: "02-b.ipynb", title: "Storage", thesis: "", points: 4,
      exercises: [{ grade_id: "02-x", points: 4 }] },
    { number: "03", path: null, name: "03-c.ipynb", title: "Outside", thesis: "", points: 1, exercises: [{ grade_id: "03-y", points: 1 }] },
    { number: "04", path: "course/04-d.ipynb", name: "04-d.ipynb", title: "Last", thesis: "", points: 2, exercises: [{ grade_id: "04-z", points: 2 }] },
  ],
};

export function progress(passed: Record<string, "full" | "visible">): Progress {
  return {
    store: "/p.json",
    notebooks: OUTLINE.notebooks.map((nb) => ({
      notebook: nb.number,
      exercises: nb.exercises.map((e) => ({ grade_id: e.grade_id, points: passed[e.grade_id] ? e.points : 0, max_points: e.points,
                                             status: passed[e.grade_id] ?? "not passed" })),
    })),
  };
}

