"""Validate a notebook as the learner has it: run it top to bottom in a fresh kernel (the grader's runner,
without its memory cap or restored tests) and report each
visible check (passed / failed with its message / not attempted / timed out).

It never says "all passed" about a student copy: its hidden tests only run at grading, and the report
says so. The learner's progress store is not written (the run records into a throwaway one).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import nbformat

from .. import busy
from .execute import progress_redirected
from .grading import cell_error, check_report
from .markers import HIDDEN_PLACEHOLDER
from .progress import ProgressStore
from .runner import Limits, run_cells

__all__ = ["validate_notebook"]

NOT_DONE = "not done yet"  # how a check's message starts when the answer is missing (checks.py)
HIDDEN_NOTICE = ("this copy's hidden tests run only when the notebook is graded: passing here means the "
                 "visible tests pass; the exercise's points also need its hidden tests to pass")


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src or "")


def _test_cells(nb: Any) -> list[tuple[int, str, float]]:
    out = []
    for i, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("grade") and not meta.get("solution"):
            gid, pts = meta.get("grade_id"), meta.get("points", 0)
            if isinstance(gid, str):
                out.append((i, gid, float(pts) if isinstance(pts, (int, float)) else 0.0))
    return out


def _stage(nb: Any) -> str:
    """Where a run is, for its busy line: read from the cells the runner has numbered so far."""
    code = [c for c in nb.cells if c.get("cell_type") == "code"]
    ran = sum(c.get("execution_count") is not None for c in code)
    return f"cell {ran} of {len(code)} ran in a fresh kernel" if ran else "starting a fresh kernel"


def validate_notebook(path: Path | str, *, timeout: float = 120.0, cell_timeout: float = 60.0,
                      kernel_name: str = "python3", pid_file: Path | None = None) -> dict[str, Any]:
    """Run `path` (not saved back) and report its visible checks; `timeout` bounds the whole run, kernel
    start included, `cell_timeout` each cell. The kernel's pid goes to `pid_file` (if given) as soon as it
    runs, so a caller that has to kill this process can kill the kernel too (it runs in its own session)."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    tests = _test_cells(nb)
    hidden = any(HIDDEN_PLACEHOLDER in _source(nb.cells[i]) for i, _, _ in tests)
    with progress_redirected() as store_path, busy.working(f"validating {path.name}", lambda: _stage(nb)):
        run = run_cells(nb, path.parent.resolve(), Limits(timeout, cell_timeout, float("inf")), pid_file=pid_file,
                        own_home=False)
        passed = ProgressStore(store_path).passed()
    stopped = run.stopped
    ran = {i for i, status in run.status.items() if status in ("ok", "error")}
    checks = []
    for i, gid, pts in tests:
        entry = passed.get(gid)
        err = cell_error(nb.cells[i])
        said = check_report(nb.cells[i], gid)
        if said is not None and i in ran and err is None and said.get("passed") is True:
            status, message = "passed", ("visible tests passed" if hidden or said.get("scope") == "visible"
                                         else "passed")
        elif said is not None and i in ran and said.get("passed") is False:
            message = str(said.get("message", ""))
            status = "not attempted" if said.get("not_done") else "failed"
        elif entry is not None and err is None and i in ran:
            status, message = "passed", ("visible tests passed" if hidden or entry.get("scope") == "visible"
                                         else "passed")
        elif run.status.get(i) == "timeout" and stopped is None:
            status, message = "timeout", f"this check ran past its {cell_timeout:g} s limit and was interrupted"
        elif i not in ran:
            status, message = ("timeout" if stopped == "timeout" else "not attempted"), (
                f"not run: the notebook stopped before this check ({stopped})" if stopped else "not run")
        elif err is not None and err[0] == "CheckFailed":
            # the check's own words: "not done yet: ..." when the answer is still the stub or undefined
            message = err[1].strip().removeprefix(f"{gid}: ")
            status = "not attempted" if message.startswith(NOT_DONE) else "failed"
        else:
            status = "not attempted"
            message = f"{err[0]}: {err[1]}".strip() if err else "the check did not report (was it run?)"
        checks.append({"grade_id": gid, "points": pts, "status": status, "message": message})
    return {
        "notebook": str(path),
        "seconds": run.seconds,
        "stopped": stopped,
        "hidden_tests": hidden,
        "notice": HIDDEN_NOTICE if hidden else None,
        "checks": checks,
    }


def main(argv: list[str] | None = None) -> int:
    """`python -m torchlens_widgets.course.validate NB [--timeout S] [--cell-timeout S]`: the report as JSON
    on stdout."""
    import argparse

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("notebook", type=Path)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--cell-timeout", type=float, default=60.0)
    p.add_argument("--pid-file", type=Path, help="write the kernel's pid here once it runs")
    args = p.parse_args(argv)
    report = validate_notebook(args.notebook, timeout=args.timeout, cell_timeout=args.cell_timeout,
                               pid_file=args.pid_file)
    json.dump(report, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
