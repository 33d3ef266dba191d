"""Put a submission back together for grading: every test cell comes from the instructor's source.

A learner can edit, delete, move, split, duplicate or re-type cells. Grading must not depend on any of
that, so the test cells of the submission (found by ``grade_id``) are dropped and the source's test
cells, hidden tests included, are inserted after the learner's cells for the exercise they test.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

import nbformat
from nbformat import NotebookNode

__all__ = ["Assembled", "GradedItem", "PREAMBLE", "assemble", "graded_items", "hidden_lines"]

_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) HIDDEN TESTS[ \t]*$")
_HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS[^\n]*\n(.*?)^[ \t]*### END HIDDEN TESTS", re.S | re.M)

#: Runs before any learner code: the checks note torch, builtins and the package as they are now, so an answer
#: that patches them later is caught even when the learner deleted the notebook's own first import.
PREAMBLE = "import torchlens_widgets.course.checks  # grader: the checks take their trusted snapshot first"


@dataclass(frozen=True)
class GradedItem:
    """One graded test cell of a source notebook."""

    grade_id: str
    points: float
    source: str  # hidden tests included, marker lines removed


@dataclass
class Assembled:
    """The notebook to run, and where each graded item's test cell sits in it."""

    notebook: NotebookNode
    cells: dict[str, int]  # grade_id -> index in `notebook`
    dropped: int  # submission cells that claimed a test cell's grade_id


def _meta(cell: NotebookNode) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def _gid(cell: NotebookNode) -> str | None:
    gid = _meta(cell).get("grade_id")
    return gid if isinstance(gid, str) and gid else None


def _text(cell: NotebookNode) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src or "")


def _is_test(cell: NotebookNode) -> bool:
    meta = _meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def graded_items(source: NotebookNode) -> list[GradedItem]:
    """The graded test cells of a source notebook, in order, with their points."""
    items = []
    for cell in source.cells:
        gid = _gid(cell)
        if gid and _is_test(cell):
            pts = _meta(cell).get("points", 0)
            points = float(pts) if isinstance(pts, (int, float)) and not isinstance(pts, bool) else 0.0
            body = "\n".join(line for line in _text(cell).split("\n") if not _MARKER.match(line))
            items.append(GradedItem(gid, points, body))
    return items


def hidden_lines(source: NotebookNode) -> list[str]:
    """Every non-blank line of the source's hidden-test blocks: what feedback must never contain."""
    lines: list[str] = []
    for cell in source.cells:
        for block in _HIDDEN.findall(_text(cell)):
            lines.extend(s.strip() for s in block.split("\n") if s.strip() and not s.strip().startswith("#"))
    return lines


def assemble(source: NotebookNode, submission: NotebookNode) -> Assembled:
    """The submission with the source's test cells restored (see the module docstring); neither is modified.

    Each test cell goes after the learner's cells for the nearest exercise before it in the source: the last
    cell carrying that grade_id, then the learner's own cells that follow it (the second half of a split
    cell), up to the next cell with a grade_id or a teaching cell of the source.
    A test cell with no such exercise in the submission goes at the end."""
    items = {item.grade_id: item for item in graded_items(source)}
    order: list[str] = []  # grade_ids of the source's cells, in order
    for cell in source.cells:
        gid = _gid(cell)
        if gid:
            order.append(gid)
    teaching = {_text(c).strip() for c in source.cells if _gid(c) is None}  # the course's own cells, as released
    kept = [copy.deepcopy(c) for c in submission.cells if _gid(c) not in items]
    dropped = len(submission.cells) - len(kept)
    after: dict[int, list[str]] = {}  # position in `kept` (-1: none) -> test grade_ids to insert after it
    for gid in items:
        anchors = order[: order.index(gid)][::-1]
        place = None
        for anchor in anchors:
            if anchor in items:
                continue
            found = [i for i, c in enumerate(kept) if _gid(c) == anchor]
            if found:
                place = found[-1]
                while (place + 1 < len(kept) and _gid(kept[place + 1]) is None
                       and _text(kept[place + 1]).strip() not in teaching):
                    place += 1  # the learner's own cells after the answer (the second half of a split cell)
                break
        after.setdefault(len(kept) - 1 if place is None else place, []).append(gid)

    cells: list[NotebookNode] = [nbformat.v4.new_code_cell(PREAMBLE, metadata={"torchlens_grader": "preamble"})]
    where: dict[str, int] = {}

    def put_tests(position: int) -> None:
        for gid in after.get(position, []):
            item = items[gid]
            meta = {"nbgrader": {"grade": True, "solution": False, "locked": True, "points": item.points,
                                 "grade_id": gid, "schema_version": 3}, "torchlens_grader": "test"}
            where[gid] = len(cells)
            cells.append(nbformat.v4.new_code_cell(item.source, metadata=meta))

    put_tests(-1)
    for i, cell in enumerate(kept):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cells.append(cell)
        put_tests(i)
    nb = nbformat.v4.new_notebook(metadata=copy.deepcopy(dict(source.metadata)))
    nb.cells = cells
    return Assembled(nb, where, dropped)
