"""Grade a folder of submissions against the source notebooks and write the gradebook and feedback.

SUBMISSIONS holds one folder per student with their notebooks, named as released. Each notebook is
graded in its own worker process (``python -m torchlens_widgets.course.grading``), ``jobs`` at a time;
a notebook whose submission, source and limits are unchanged since the last run is not run again.
Outputs in OUT: ``gradebook.csv`` (a row per student × notebook × graded item), ``summary.csv`` (a row
per student), ``feedback/STUDENT.json`` and ``.html`` (each check's result and its message; never hidden
test source, never a traceback). The learner's local progress file is never read.
"""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
import html
import json
import os
import re
import signal
import stat
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

from .. import __version__, busy
from ..render.theme import STYLE, var
from . import sandbox
from .assemble import graded_items, hidden_lines
from .grading import ItemResult, NotebookResult, missing
from .runner import Limits, kill_tree

__all__ = ["GradeError", "Gradebook", "grade_submissions", "in_shard", "merge"]

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
    skipped: list[str] = field(default_factory=list)  # dot-folders in SUBMISSIONS, not graded

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


def _readable() -> list[Path]:
    """Folders a grading kernel may read besides Python and this package: the precompiled C++ headers, if made."""
    from ..lenses import build, precompiled

    env = os.environ.get(precompiled.ENV_DIR)
    pch = Path(env).expanduser() if env else build.build_dir() / "precompiled"
    return [pch.resolve()] if pch.is_dir() else []


def _check_paths(submissions: Path, source: Path, out: Path, readable: Sequence[Path]) -> None:
    """Refuse layouts where the sandbox would have to mount what a kernel must not read."""
    secret = [submissions.resolve(), source.resolve(), out.resolve()]
    git = next((p / ".git" for p in source.resolve().parents if (p / ".git").exists()), None)
    if git is not None:  # the course repository's history holds the solutions too
        secret.append(git)
    for mounted in [*sandbox.python_folders(), *readable]:
        for s in secret:
            if s == mounted or s.is_relative_to(mounted):
                raise GradeError(f"{mounted} holds {s}: the grading kernel reads {mounted} (Python, this package "
                                 "or the precompiled headers) and must not read {s}; keep the submissions, the source "
                                 "notebooks and --out each in a folder of their own")
    if out.resolve().is_relative_to(submissions.resolve()):
        raise GradeError(f"--out {out} is inside SUBMISSIONS {submissions}: it would be read as a student; "
                         "write the gradebook elsewhere")


def refusal(student: Path) -> str | None:
    """Why a student's folder is refused, or None: it or anything in it is a symbolic link, or a file in it has
    other hard links (it could be another student's file, or the source itself)."""
    if student.is_symlink():
        return f"the folder {student.name} is a symbolic link; submit plain files"
    for root, dirs, files in os.walk(student):
        for name in dirs + files:
            path = Path(root) / name
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                return f"{path.relative_to(student)} is a symbolic link; submit plain files"
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                return f"{path.relative_to(student)} is a hard link to another file; submit plain files"
    return None


def _run_worker(source: Path, submission: Path | None, student: Path, limits: Limits, sandboxed: bool,
                readable: Sequence[Path]) -> NotebookResult:
    """One notebook in its own worker process; a worker that outlives its limit is killed with its kernel."""
    with tempfile.TemporaryDirectory(prefix="torchlens-worker-") as tmp:
        result, pid_file = Path(tmp) / "result.json", Path(tmp) / "kernel.pid"
        cmd = [sys.executable, "-m", "torchlens_widgets.course.grading", str(source),
               "-" if submission is None else str(submission), str(result), "--timeout", str(limits.timeout),
               "--cell-timeout", str(limits.cell_timeout), "--memory-mb", str(limits.memory_mb),
               "--pid-file", str(pid_file), "--student", str(student),
               *[a for r in readable for a in ("--readable", str(r))], *([] if sandboxed else ["--no-sandbox"])]
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


def _decodings(text: str) -> list[str]:
    """`text` and what it may hide: reversed, and every base64 (at each alignment, standard and URL-safe) or hex run
    in it decoded."""
    found = [text, text[::-1]]
    for run in re.findall(r"[A-Za-z0-9+/_=-]{12,}", text):
        for k in range(4):
            chunk = run[k:].rstrip("=")
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                try:
                    found.append(decode(chunk + "=" * (-len(chunk) % 4)).decode("utf-8", "replace"))
                except (ValueError, binascii.Error):
                    pass
    for run in re.findall(r"(?:[0-9a-fA-F]{2}){6,}", text):
        found.append(bytes.fromhex(run).decode("utf-8", "replace"))
    return found


def quotes(text: str, secret: Sequence[str]) -> bool:
    """Does `text` hold a hidden test's line, plainly, reversed, or base64- or hex-encoded?"""
    lines = [line for line in secret if len(line) >= 8]
    return any(line in candidate for candidate in _decodings(text) for line in lines)


def _scrub(result: NotebookResult, secret: Sequence[str]) -> NotebookResult:
    """Withhold any message that quotes a hidden test's line, in any of the encodings `quotes` reads (a check never
    should; an answer's own error text is not passed on at grading; this is the last guard)."""
    for item in result.items:
        if quotes(item.message, secret):
            item.message = _WITHHELD
    return result


def grade_submissions(submissions: Path, source: Path, out: Path, *, jobs: int | None = None,
                      limits: Limits | None = None, notebooks: Sequence[str] = (),
                      progress: Callable[[str], None] | None = None, sandboxed: bool = True,
                      shard: tuple[int, int] | None = None) -> Gradebook:
    """Grade every student folder of `submissions` against the graded notebooks of `source` into `out`, each
    notebook's kernel in the sandbox (`sandbox`; GradeError with what to install where there is none) unless
    `sandboxed` is False. `shard` (K, N): grade only the students of slice K of N (`in_shard`); `merge` joins
    the N outputs into the gradebook an unsharded run writes."""
    t0 = time.monotonic()
    limits = limits or Limits()
    submissions, source, out = Path(submissions), Path(source), Path(out)
    for what, p in (("SUBMISSIONS", submissions), ("--source", source)):
        if not p.is_dir():
            raise GradeError(f"{what} {p} is not a folder")
    if sandboxed and not sandbox.available():
        raise GradeError(f"this machine cannot sandbox the grading kernels (bubblewrap with user namespaces): "
                         f"{sandbox.INSTALL}")
    entries = sorted(submissions.iterdir())
    students = [p for p in entries if p.is_dir() and not p.name.startswith(".")]
    skipped = [p.name for p in entries if p.is_dir() and p.name.startswith(".")]
    if shard is not None:
        k, n = shard
        if not (isinstance(k, int) and isinstance(n, int) and 1 <= k <= n):
            raise GradeError(f"--shard {k}/{n}: give K/N with 1 <= K <= N, e.g. --shard 2/8")
        students = [p for p in students if in_shard(p.name, k, n)]
        skipped = skipped if k == 1 else []  # listed once, by the first shard
    if not students and shard is None:
        raise GradeError(f"no student folders in {submissions}: it should hold one folder per student, "
                         "each with that student's notebooks (named as released)")
    sources = _source_notebooks(source, notebooks)
    readable = _readable()
    _check_paths(submissions, source, out, readable)
    out.mkdir(parents=True, exist_ok=True)
    cache = out / ".cache"
    say = progress or (lambda _: None)
    secrets = {p.name: hidden_lines(_load(p)) for p in sources}
    source_bytes = {p.name: p.read_bytes() for p in sources}
    book = Gradebook(out, skipped=skipped, sandboxed=sandboxed)
    options = json.dumps([limits.timeout, limits.cell_timeout, limits.memory_mb, __version__, GRADER_VERSION,
                          sandboxed]).encode()

    tasks: list[tuple[Path, Path, Path | None, str, Path]] = []
    cached: dict[tuple[str, str], NotebookResult] = {}
    refused: dict[tuple[str, str], NotebookResult] = {}
    for student in students:
        why = refusal(student)
        if why is not None:
            for src in sources:
                refused[(student.name, src.name)] = missing(_load(src), src.name, why, status="refused")
            say(f"{student.name}: refused ({why})")
            continue
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
            tasks.append((student, src, sub, key, memo))

    finished: list[str] = []  # appended by the worker threads as each notebook is graded (for the busy line)

    def work(task: tuple[Path, Path, Path | None, str, Path]) -> tuple[str, NotebookResult]:
        student, src, sub, key, memo = task
        name = student.name
        result = _scrub(_run_worker(src, sub, student, limits, sandboxed, readable), secrets[src.name])
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(json.dumps({"key": key, "result": result.to_dict()}))
        passed = sum(i.status == "passed" for i in result.items)
        say(f"{name}  {src.name}: {passed}/{len(result.items)} passed, {result.seconds:.0f} s")
        finished.append(name)
        return name, result

    fresh: dict[tuple[str, str], NotebookResult] = {}
    with busy.working("grading", lambda: f"{len(finished)} of {len(tasks)} notebooks graded"), \
            ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1)) as pool:
        for name, result in pool.map(work, tasks):
            fresh[(name, result.notebook)] = result
    for student in students:
        key_of = [(student.name, s.name) for s in sources]
        book.results[student.name] = [fresh.get(k) or cached.get(k) or refused[k] for k in key_of]
    book.graded, book.reused = len(fresh), len(cached)
    digest = _digest(*(source_bytes[p.name] for p in sources), options)
    (out / MANIFEST).write_text(json.dumps({"grader": GRADER_VERSION, "source": digest,
                                            "notebooks": [p.name for p in sources], "shard": list(shard or (1, 1)),
                                            "students": sorted(book.results), "skipped": skipped,
                                            "sandboxed": sandboxed}, indent=1))
    _write(book)
    book.seconds = round(time.monotonic() - t0, 2)
    return book


def cell(value: Any) -> Any:
    """A text field made safe for a spreadsheet: one starting with = + - @ (or a tab or CR) would be read as a
    formula, so it gets a leading apostrophe, as spreadsheets expect."""
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


MANIFEST = "manifest.json"  # what an output holds: which sources, limits and shard, which students


def in_shard(student: str, k: int, n: int) -> bool:
    """Is `student` in slice `k` of `n`? By a hash of the folder name: stable as students come and go."""
    return int(hashlib.sha256(student.encode()).hexdigest(), 16) % n == k - 1


def merge(outs: Sequence[Path], out: Path) -> Gradebook:
    """Join the outputs of `grade --shard K/N` runs (every K of one N, same sources and limits) into `out`, as one
    unsharded run would have written it; GradeError on overlaps, gaps or mismatched sources."""
    manifests = []
    for o in outs:
        try:
            manifests.append(json.loads((Path(o) / MANIFEST).read_text()))
        except (OSError, ValueError) as exc:
            raise GradeError(f"{o} is not the output of a grading run ({MANIFEST}: {exc}); pass --out folders of "
                             "`torchlens-course grade`") from None
    first = manifests[0]
    for o, m in zip(outs, manifests, strict=True):
        if (m.get("source"), m.get("notebooks"), m.get("grader")) != (first.get("source"), first.get("notebooks"),
                                                                      first.get("grader")):
            raise GradeError(f"{o} was graded against other source notebooks, limits or grader than {outs[0]}: "
                             "grade every shard with the same --source, limits and version")
    n = {m["shard"][1] for m in manifests}
    ks = sorted(m["shard"][0] for m in manifests)
    if len(n) != 1 or ks != list(range(1, next(iter(n)) + 1)):
        raise GradeError(f"shards {ks} of {sorted(n)}: merge needs every shard 1..N of one N exactly once")
    seen: dict[str, Path] = {}
    book = Gradebook(Path(out), skipped=sorted({s for m in manifests for s in m.get("skipped", [])}),
                     sandboxed=all(m.get("sandboxed") for m in manifests))
    for o, m in zip(outs, manifests, strict=True):
        for student in m["students"]:
            if student in seen:
                raise GradeError(f"student {student} is in both {seen[student]} and {o}")
            seen[student] = Path(o)
            doc = json.loads((Path(o) / "feedback" / f"{student}.json").read_text())
            book.results[student] = [NotebookResult(nb["notebook"], [ItemResult(**i) for i in nb["items"]])
                                     for nb in doc["notebooks"]]
    Path(out).mkdir(parents=True, exist_ok=True)
    _write(book)
    (Path(out) / MANIFEST).write_text(json.dumps({**first, "shard": [1, 1], "students": sorted(book.results),
                                                  "skipped": book.skipped}, indent=1))
    return book


def _write(book: Gradebook) -> None:
    out = book.out
    with open(out / "gradebook.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, ["student", "notebook", "grade_id", "points", "max_points", "status"])
        w.writeheader()
        for row in book.rows():
            w.writerow({**{k: cell(v) for k, v in row.items()}, "points": f"{row['points']:g}",
                        "max_points": f"{row['max_points']:g}"})
    with open(out / "summary.csv", "w", newline="") as fh:
        summary = csv.writer(fh)
        summary.writerow(["student", "points", "max_points", "percent", "passed", "items", "notebooks_submitted"])
        for student, nbs in sorted(book.results.items()):
            items = [i for r in nbs for i in r.items]
            got, most = sum(i.points for i in items), sum(i.max_points for i in items)
            submitted = sum(any(i.status != "missing" for i in r.items) for r in nbs)
            summary.writerow([cell(student), f"{got:g}", f"{most:g}", f"{100 * got / most:.1f}" if most else "0.0",
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
