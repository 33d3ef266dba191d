"""Grade a folder of submissions against the source notebooks and write the gradebook and feedback.

SUBMISSIONS holds one folder per student with their notebooks, named as released. Each notebook is
graded in its own worker process (``python -m torchlens_widgets.course.grading``), ``jobs`` at a time;
a notebook whose submission, source and limits are unchanged since the last run is not run again.
Outputs in OUT: ``gradebook.csv`` (a row per student × notebook × graded item), ``summary.csv`` (a row
per student), ``feedback/STUDENT.json`` and ``.html`` (each check's result and its message; never hidden
test source, never a traceback). The learner's local progress file is never read.
"""

from __future__ import annotations

import csv
import hashlib
import html
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from .. import __version__
from ..render.theme import STYLE, var
from .assemble import graded_items, hidden_lines
from .grading import ItemResult, NotebookResult, missing
from .runner import Limits, kill_tree

__all__ = ["GradeError", "Gradebook", "grade_submissions"]

GRADER_VERSION = "1"  # part of the cache key: results from an older grader are not reused
_WITHHELD = "(this message quoted a hidden test, so it is withheld; ask your instructor)"


class GradeError(ValueError):
    """The grading run cannot start: says what is wrong and what to do."""


@dataclass
class Gradebook:
    """What a grading run produced: every notebook result per student, and how many were re-run."""

    out: Path
    results: dict[str, list[NotebookResult]] = field(default_factory=dict)
    graded: int = 0
    reused: int = 0
    seconds: float = 0.0
    sandboxed: bool = True

    def rows(self) -> list[dict[str, Any]]:
        return [{"student": s, "notebook": r.notebook, "grade_id": i.grade_id, "points": i.points,
                 "max_points": i.max_points, "status": i.status}
                for s, nbs in sorted(self.results.items()) for r in nbs for i in r.items]


def _load(path: Path) -> nbformat.NotebookNode:
    """A source notebook, without nbformat's schema validation (a second per large notebook): these are
    the instructor's own files, already validated when released; the worker validates what it runs."""
    return nbformat.from_dict(json.loads(path.read_text(encoding="utf-8")))


def _source_notebooks(source: Path, only: Sequence[str]) -> list[Path]:
    found = []
    for p in sorted(source.glob("*.ipynb")):
        if only and p.name not in only and p.stem not in only:
            continue
        if graded_items(_load(p)):
            found.append(p)
    unknown = [n for n in only if not any(n in (p.name, p.stem) for p in found)]
    if unknown:
        raise GradeError(f"no graded source notebook called {', '.join(unknown)} in {source}; "
                         "name a notebook as it is in --source (e.g. 01-runtime or 01-runtime.ipynb)")
    if not found:
        raise GradeError(f"no graded notebooks in {source}: pass --source the folder of source notebooks "
                         "(the ones with solutions and hidden tests), e.g. notebooks/")
    return found


def _find(student: Path, name: str) -> Path | None:
    """The student's copy of notebook `name`: at the top of their folder, else anywhere below it."""
    top = student / name
    if top.is_file():
        return top
    return next((p for p in sorted(student.rglob(name)) if ".ipynb_checkpoints" not in p.parts and p.is_file()), None)


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def _check_paths(submissions: Path, source: Path, out: Path) -> list[Path]:
    """The folders a kernel must not read, after making sure hiding them cannot hide what a kernel needs."""
    needed = [Path(sys.prefix).resolve(), Path(__file__).resolve().parents[1], Path(tempfile.gettempdir()).resolve()]
    hide = [submissions.resolve(), source.resolve(), out.resolve()]
    git = next((p / ".git" for p in source.resolve().parents if (p / ".git").exists()), None)
    if git is not None:  # the course repository's history holds the solutions too
        hide.append(git)
    for h in hide:
        for n in needed:
            if n == h or n.is_relative_to(h):
                raise GradeError(f"{h} holds {n}, which the grading kernel needs, but a kernel must not read {h}: "
                                 "keep the submissions, the source notebooks and --out each in a folder of their own")
    if out.resolve().is_relative_to(submissions.resolve()):
        raise GradeError(f"--out {out} is inside SUBMISSIONS {submissions}: it would be read as a student; "
                         "write the gradebook elsewhere")
    return hide


def _run_worker(source: Path, submission: Path | None, limits: Limits, hide: Sequence[Path]) -> NotebookResult:
    """One notebook in its own worker process; a worker that outlives its limit is killed with its kernel."""
    with tempfile.TemporaryDirectory(prefix="torchlens-worker-") as tmp:
        result, pid_file = Path(tmp) / "result.json", Path(tmp) / "kernel.pid"
        cmd = [sys.executable, "-m", "torchlens_widgets.course.grading", str(source),
               "-" if submission is None else str(submission), str(result), "--timeout", str(limits.timeout),
               "--cell-timeout", str(limits.cell_timeout), "--memory-mb", str(limits.memory_mb),
               "--pid-file", str(pid_file), *[a for h in hide for a in ("--hide", str(h))]]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=limits.timeout + 120)
        except subprocess.TimeoutExpired:
            _kill_worker(proc, pid_file)
            err = b""
        if result.is_file():
            return NotebookResult.from_dict(json.loads(result.read_text()))
        why = err.decode(errors="replace").strip().splitlines()[-1:] or ["no result"]
        nb = nbformat.read(source, as_version=4)
        res = missing(nb, source.name, "")
        for item in res.items:
            item.status, item.message = "kernel died", f"the grader's worker stopped without a result ({why[0][:200]})"
        return res


def _kill_worker(proc: subprocess.Popen, pid_file: Path) -> None:
    """The worker, its process group and its kernel (which jupyter_client starts in a session of its own)."""
    kill_tree(proc.pid)
    if pid_file.is_file() and pid_file.read_text().strip().isdigit():
        kill_tree(int(pid_file.read_text()))
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()


def _scrub(result: NotebookResult, secret: Sequence[str]) -> NotebookResult:
    """Withhold any message that quotes a hidden test's line (a check never should; this makes sure)."""
    for item in result.items:
        if any(line in item.message for line in secret if len(line) >= 8):
            item.message = _WITHHELD
    return result


def grade_submissions(submissions: Path, source: Path, out: Path, *, jobs: int | None = None,
                      limits: Limits | None = None, notebooks: Sequence[str] = (),
                      progress: Callable[[str], None] | None = None) -> Gradebook:
    """Grade every student folder of `submissions` against the graded notebooks of `source` into `out`."""
    t0 = time.monotonic()
    limits = limits or Limits()
    submissions, source, out = Path(submissions), Path(source), Path(out)
    for what, p in (("SUBMISSIONS", submissions), ("--source", source)):
        if not p.is_dir():
            raise GradeError(f"{what} {p} is not a folder")
    students = sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students:
        raise GradeError(f"no student folders in {submissions}: it should hold one folder per student, "
                         "each with that student's notebooks (named as released)")
    sources = _source_notebooks(source, notebooks)
    hide = _check_paths(submissions, source, out)
    out.mkdir(parents=True, exist_ok=True)
    cache = out / ".cache"
    say = progress or (lambda _: None)
    secrets = {p.name: hidden_lines(_load(p)) for p in sources}
    source_bytes = {p.name: p.read_bytes() for p in sources}
    book = Gradebook(out)
    options = json.dumps([limits.timeout, limits.cell_timeout, limits.memory_mb, __version__, GRADER_VERSION]).encode()

    tasks: list[tuple[str, Path, Path | None, str, Path]] = []
    cached: dict[tuple[str, str], NotebookResult] = {}
    for student in students:
        for src in sources:
            sub = _find(student, src.name)
            key = _digest(source_bytes[src.name], b"-" if sub is None else sub.read_bytes(), options)
            memo = cache / student.name / f"{src.stem}.json"
            try:
                saved = json.loads(memo.read_text())
                if saved.get("key") == key:
                    cached[(student.name, src.name)] = NotebookResult.from_dict(saved["result"])
                    continue
            except (OSError, ValueError, KeyError, TypeError):
                pass
            tasks.append((student.name, src, sub, key, memo))

    def work(task: tuple[str, Path, Path | None, str, Path]) -> tuple[str, NotebookResult]:
        name, src, sub, key, memo = task
        result = _scrub(_run_worker(src, sub, limits, hide), secrets[src.name])
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(json.dumps({"key": key, "result": result.to_dict()}))
        passed = sum(i.status == "passed" for i in result.items)
        say(f"{name}  {src.name}: {passed}/{len(result.items)} passed, {result.seconds:.0f} s")
        return name, result

    fresh: dict[tuple[str, str], NotebookResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1)) as pool:
        for name, result in pool.map(work, tasks):
            fresh[(name, result.notebook)] = result
    for student in students:
        book.results[student.name] = [fresh.get((student.name, s.name)) or cached[(student.name, s.name)]
                                      for s in sources]
    book.graded, book.reused = len(fresh), len(cached)
    book.sandboxed = all(r.sandboxed for r in fresh.values())
    _write(book)
    book.seconds = round(time.monotonic() - t0, 2)
    return book


def _write(book: Gradebook) -> None:
    out = book.out
    with open(out / "gradebook.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, ["student", "notebook", "grade_id", "points", "max_points", "status"])
        w.writeheader()
        for row in book.rows():
            w.writerow({**row, "points": f"{row['points']:g}", "max_points": f"{row['max_points']:g}"})
    with open(out / "summary.csv", "w", newline="") as fh:
        summary = csv.writer(fh)
        summary.writerow(["student", "points", "max_points", "percent", "passed", "items", "notebooks_submitted"])
        for student, nbs in sorted(book.results.items()):
            items = [i for r in nbs for i in r.items]
            got, most = sum(i.points for i in items), sum(i.max_points for i in items)
            submitted = sum(any(i.status != "missing" for i in r.items) for r in nbs)
            summary.writerow([student, f"{got:g}", f"{most:g}", f"{100 * got / most:.1f}" if most else "0.0",
                        sum(i.status == "passed" for i in items), len(items), submitted])
    folder = out / "feedback"
    folder.mkdir(exist_ok=True)
    for student, nbs in book.results.items():
        doc = {"student": student, "notebooks": [{"notebook": r.notebook, "items": [_item(i) for i in r.items],
                                                  "points": sum(i.points for i in r.items),
                                                  "max_points": sum(i.max_points for i in r.items)} for r in nbs]}
        (folder / f"{student}.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False))
        (folder / f"{student}.html").write_text(_html(student, nbs), encoding="utf-8")


def _item(i: ItemResult) -> dict[str, Any]:
    return {"grade_id": i.grade_id, "points": i.points, "max_points": i.max_points, "status": i.status,
            "message": i.message}


def _html(student: str, nbs: Sequence[NotebookResult]) -> str:
    colour = {"passed": var("good"), "failed": var("bad"), "missing": var("fg2")}
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Feedback for {html.escape(student)}</title>"
             f"<style>{STYLE} body{{margin:0}} .tlw-theme{{background:{var('bg')};font:14px system-ui,sans-serif;"
             f"padding:16px 24px;min-height:100vh}} table{{border-collapse:collapse;margin:4px 0 20px}}"
             f" td,th{{text-align:left;vertical-align:top;padding:4px 10px;border-bottom:1px solid {var('line')}}}"
             f" td{{white-space:nowrap}} td.msg{{white-space:pre-wrap;max-width:60em}}</style></head>"
             f"<body class='tlw-theme'><h1>Feedback for {html.escape(student)}</h1>"]
    total = sum(i.points for r in nbs for i in r.items), sum(i.max_points for r in nbs for i in r.items)
    parts.append(f"<p>{total[0]:g} of {total[1]:g} points.</p>")
    for r in nbs:
        got, most = sum(i.points for i in r.items), sum(i.max_points for i in r.items)
        parts.append(f"<h2>{html.escape(r.notebook)}: {got:g}/{most:g}</h2><table><tr><th>exercise</th>"
                     "<th>points</th><th>result</th><th>what the check said</th></tr>")
        for i in r.items:
            c = colour.get(i.status, var("warn"))
            parts.append(f"<tr><td>{html.escape(i.grade_id)}</td><td>{i.points:g}/{i.max_points:g}</td>"
                         f"<td style='color:{c}'>{html.escape(i.status)}</td><td class='msg'>{html.escape(i.message)}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)
