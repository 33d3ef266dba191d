"""Grade one submitted notebook: restore its test cells from the source, run it under limits, and read
each graded item's result from its own (restored) test cell.

An item passes only when its test cell ran to the end without an error and its check reported a pass;
anything else is failed, timeout, out-of-memory, kernel died or missing — never passed by default.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from .assemble import assemble, graded_items
from .runner import Limits, Run, run_cells

__all__ = ["ItemResult", "NotebookResult", "STATUSES", "cell_error", "check_report", "grade_notebook", "read_results"]

STATUSES = ("passed", "failed", "tampered", "timeout", "out-of-memory", "kernel died", "missing", "refused")
_MESSAGE_CHARS = 600


@dataclass
class ItemResult:
    """One graded item's row: what it scored and the check's own words (never a traceback)."""

    grade_id: str
    points: float
    max_points: float
    status: str
    message: str


@dataclass
class NotebookResult:
    """Every item of one notebook, and how the run went."""

    notebook: str
    items: list[ItemResult] = field(default_factory=list)
    seconds: float = 0.0
    peak_mb: float = 0.0
    sandboxed: bool = False
    stopped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NotebookResult:
        return cls(**{**d, "items": [ItemResult(**i) for i in d["items"]]})


def check_report(cell: Any, grade_id: str) -> dict[str, Any] | None:
    """The last result the check attached to its display (metadata "torchlens_check") in this cell."""
    found = None
    for o in cell.get("outputs", []):
        meta = o.get("metadata", {}).get("torchlens_check") if o.get("output_type") == "display_data" else None
        if isinstance(meta, dict) and meta.get("grade_id") == grade_id:
            found = meta
    return found


def cell_error(cell: Any) -> tuple[str, str] | None:
    """The first error output of a cell: (exception name, message), or None."""
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            return str(o.get("ename", "")), str(o.get("evalue", ""))
    return None


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"


def read_results(nb: Any, cells: dict[str, int], points: dict[str, float], run: Run, limits: Limits) -> list[ItemResult]:
    """Each item's status and message, from its test cell's outputs and the run's cell statuses."""
    stop_words = {
        "timeout": f"the notebook ran past its {limits.timeout:g} s limit before this check finished",
        "out-of-memory": f"the notebook used more than {limits.memory_mb:g} MB of memory and was stopped",
        "kernel died": "the kernel died (a crash or an exit in the notebook) before this check finished",
        "not run": "the kernel did not start",
    }
    out = []
    seen: list[str] = []  # what earlier checks found changed: the same kernel runs on, so it taints every later check
    for gid, index in sorted(cells.items(), key=lambda item: item[1]):
        cell = nb.cells[index]
        status = run.status.get(index, "not run")
        said = check_report(cell, gid)
        err = cell_error(cell)
        attested = run.attested.get(index)  # grading always attests: (outcomes, findings), or None
        outcomes, findings = attested if attested is not None else ([], [])
        if status == "ok" and run.attest_error is not None:
            result, message = "failed", f"the grader could not confirm this check's result ({run.attest_error})"
        elif status == "ok" and attested is None:
            result, message = "tampered", ("the kernel's report for this check was missing or not signed by the grader "
                                           "(its execution or display machinery was replaced)")
        elif findings and status != "not run":
            result, message = "tampered", "the grader found the kernel changed: " + "; ".join(findings[:6])
        elif seen and status != "not run":  # a hook left on slows or changes what follows: a timeout here is its doing
            result, message = "tampered", "the grader found the kernel changed at an earlier check: " + "; ".join(seen[:6])
        elif status == "ok" and outcomes and all(outcomes):
            result, message = "passed", "passed"
        elif status in ("ok", "error"):
            result = "failed"
            if said is not None and said.get("passed") is False:
                message = str(said.get("message", "the check failed"))
            elif err is not None:  # the learner's own error: its type only (its text is theirs to choose)
                message = f"your code raised {err[0]}"
            else:  # no check ran to its end, or only a display claimed a pass
                message = "the check did not report a pass to the grader"
        elif status == "timeout" and run.stopped != "timeout":
            result, message = "timeout", f"this check ran past its {limits.cell_timeout:g} s limit and was interrupted"
        else:
            result = "kernel died" if status == "not run" else status
            message = stop_words.get(status, status)
        seen.extend(f for f in findings if f not in seen)
        earned = points[gid] if result == "passed" else 0.0
        out.append(ItemResult(gid, earned, points[gid], result, _short(message)))
    return out


def missing(source: Any, name: str, why: str, status: str = "missing") -> NotebookResult:
    """Every item of `source` scored `status` ("missing": not submitted or unreadable; "refused": see gradebook)."""
    return NotebookResult(name, [ItemResult(i.grade_id, 0.0, i.points, status, why) for i in graded_items(source)])


_MAX_FILES, _MAX_BYTES = 2000, 100 << 20  # what of a student's folder is copied beside their notebook


def copy_own_files(student: Path, work: Path) -> None:
    """Copy the student's plain files (their helper modules, data) into the kernel's working folder: regular files
    only, no dot-folders or checkpoints, at most _MAX_FILES files and _MAX_BYTES bytes."""
    count = size = 0
    for path in sorted(student.rglob("*")):
        rel = path.relative_to(student)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file() or path.is_symlink():
            continue
        count, size = count + 1, size + path.stat().st_size
        if count > _MAX_FILES or size > _MAX_BYTES:
            break
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, work / rel)


def grade_notebook(source_path: Path, submission_path: Path | None, limits: Limits, *, sandboxed: bool = True,
                   student: Path | None = None, readable: Sequence[Path] = (),
                   pid_file: Path | None = None) -> NotebookResult:
    """Grade `submission_path` (None: not submitted) against `source_path` in a fresh kernel (in the sandbox unless
    `sandboxed` is False) whose working folder holds a copy of the student's own files (`student`, default: the
    submission's folder) and never the assembled notebook with its hidden tests."""
    source = nbformat.read(source_path, as_version=4)
    name = source_path.name
    if submission_path is None:
        return missing(source, name, f"{name} is not in the submission")
    try:
        submission = nbformat.read(submission_path, as_version=4)
    except Exception as exc:
        return missing(source, name, f"{name} could not be read as a notebook ({type(exc).__name__})")
    built = assemble(source, submission)
    points = {i.grade_id: i.points for i in graded_items(source)}
    with tempfile.TemporaryDirectory(prefix="torchlens-grade-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        copy_own_files(student or submission_path.parent, work)
        run = run_cells(built.notebook, work, limits, sandboxed=sandboxed, readable=readable, pid_file=pid_file,
                        attest={index: gid for gid, index in built.cells.items()})
    items = read_results(built.notebook, built.cells, points, run, limits)
    return NotebookResult(name, items, run.seconds, run.peak_mb, run.sandboxed, run.stopped)


def main(argv: list[str] | None = None) -> int:
    """Worker: `python -m torchlens_widgets.course.grading SOURCE SUBMISSION|- RESULT.json [limits] [--student DIR]`."""
    import argparse

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("source", type=Path)
    p.add_argument("submission")
    p.add_argument("result", type=Path)
    p.add_argument("--timeout", type=float, default=Limits.timeout)
    p.add_argument("--cell-timeout", type=float, default=Limits.cell_timeout)
    p.add_argument("--memory-mb", type=float, default=Limits.memory_mb)
    p.add_argument("--student", type=Path, help="the student's folder (its plain files are copied for the kernel)")
    p.add_argument("--readable", type=Path, action="append", default=[], help="a folder the kernel may read")
    p.add_argument("--no-sandbox", action="store_true", help="run the kernel unsandboxed (trusted submissions)")
    p.add_argument("--pid-file", type=Path)
    args = p.parse_args(argv)
    limits = Limits(args.timeout, args.cell_timeout, args.memory_mb)
    submission = None if args.submission == "-" else Path(args.submission)
    result = grade_notebook(args.source, submission, limits, sandboxed=not args.no_sandbox, student=args.student,
                            readable=args.readable, pid_file=args.pid_file)
    tmp = args.result.with_suffix(".tmp")
    tmp.write_text(json.dumps(result.to_dict()))
    shutil.move(tmp, args.result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
