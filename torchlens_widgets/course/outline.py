"""The course's outline read from its notebooks: titles, theses and graded exercises with their points.

Progress alone only knows what was passed; the outline knows what exists, so a learner sees every
exercise, unpassed ones included.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Exercise", "NotebookOutline", "estimated_minutes", "progress_report", "read_outline"]

_NOTEBOOK = re.compile(r"^\d\d-.+\.ipynb$")
_THESIS = re.compile(r"\*\*Thesis\.\*\*\s*(.+?)(?:(?<=[.!?])\s|$)", re.S)


@dataclass(frozen=True)
class Exercise:
    """One graded test cell: its grade_id and points."""

    grade_id: str
    points: float


@dataclass(frozen=True)
class NotebookOutline:
    """One course notebook: file, number, title, one-sentence thesis and its exercises in order."""

    path: Path
    number: str
    title: str
    thesis: str
    exercises: tuple[Exercise, ...]

    @property
    def points(self) -> float:
        return sum(e.points for e in self.exercises)


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _read(path: Path) -> NotebookOutline:
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    title, thesis = path.stem, ""
    first_md = next((_source(c) for c in cells if isinstance(c, dict) and c.get("cell_type") == "markdown"), "")
    heading = next((line.lstrip("#").strip() for line in first_md.splitlines() if line.startswith("#")), "")
    if heading:
        title = heading
    m = _THESIS.search(first_md)
    if m:
        thesis = " ".join(m.group(1).split())
    exercises = []
    for c in cells:
        meta = c.get("metadata", {}).get("nbgrader", {}) if isinstance(c, dict) else {}
        if isinstance(meta, dict) and meta.get("grade") and not meta.get("solution"):
            pts = meta.get("points", 0)
            if isinstance(meta.get("grade_id"), str) and isinstance(pts, (int, float)) and not isinstance(pts, bool):
                exercises.append(Exercise(meta["grade_id"], float(pts)))
    return NotebookOutline(path, path.name[:2], title, thesis, tuple(exercises))


READING_WPM = 150  # words a minute, prose and code read with care
MINUTES_PER_POINT = 4  # a graded exercise's reading, writing and a retry, per point


def estimated_minutes(path: Path | str) -> int:
    """A learner's time for a notebook, as start-here states it: every cell's words at READING_WPM plus
    MINUTES_PER_POINT per exercise point, to the nearest 5 minutes. An estimate, not a measurement."""
    nb = json.loads(Path(path).read_text())
    words = sum(len(_source(c).split()) for c in nb["cells"])
    points = sum(float(c.get("metadata", {}).get("nbgrader", {}).get("points", 0) or 0) for c in nb["cells"]
                 if c.get("metadata", {}).get("nbgrader", {}).get("grade"))
    return max(5, 5 * round((words / READING_WPM + MINUTES_PER_POINT * points) / 5))


def read_outline(folder: Path | str) -> list[NotebookOutline]:
    """Every `NN-*.ipynb` directly in `folder`, in course order; unreadable notebooks are skipped."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"course folder {folder} does not exist")
    out = []
    for p in sorted(folder.iterdir()):
        if _NOTEBOOK.match(p.name):
            try:
                out.append(_read(p))
            except (OSError, ValueError):
                continue
    return out


def progress_report(outline: list[NotebookOutline], passed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every exercise of the outline (plus passes the outline does not know) with its status and points."""
    notebooks: list[dict[str, Any]] = []
    known: set[str] = set()
    for nb in outline:
        exercises = []
        for ex in nb.exercises:
            known.add(ex.grade_id)
            entry = passed.get(ex.grade_id)
            exercises.append({
                "grade_id": ex.grade_id,
                "points": entry["points"] if entry else 0,
                "max_points": ex.points,
                "status": entry.get("scope", "full") if entry else "not passed",
            })
        notebooks.append({"notebook": nb.number, "title": nb.title, "exercises": exercises})
    loose: dict[str, list[dict[str, Any]]] = {}
    for gid, entry in sorted(passed.items()):
        if gid not in known:
            loose.setdefault(entry.get("notebook") or "(no notebook)", []).append({
                "grade_id": gid, "points": entry["points"], "max_points": entry["max_points"],
                "status": entry.get("scope", "full"),
            })
    for name, exercises in loose.items():
        notebooks.append({"notebook": name, "title": f"{name} (not in the course folder)", "exercises": exercises})
    for row in notebooks:
        row["earned"] = sum(e["points"] for e in row["exercises"])
        row["possible"] = sum(e["max_points"] or 0 for e in row["exercises"])
    total = {
        "earned": sum(row["earned"] for row in notebooks),
        "possible": sum(row["possible"] for row in notebooks),
        "exercises": sum(len(row["exercises"]) for row in notebooks),
        "passed": sum(1 for row in notebooks for e in row["exercises"] if e["status"] != "not passed"),
    }
    return {"notebooks": notebooks, "total": total}
