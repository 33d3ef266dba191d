"""``torchlens-course``: release student notebooks, grade submissions, validate a notebook, inspect progress."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import busy
from .gradebook import GradeError, grade_submissions, merge
from .outline import progress_report, read_outline
from .progress import ENV_VAR, ProgressStore
from .release import ReleaseError, release_path
from .runner import Limits

__all__ = ["main"]

_ALL = object()  # `--reset` given without a GRADE_ID


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchlens-course",
        description="Release student notebooks, grade submissions, validate a notebook, and inspect local progress.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    rel = sub.add_parser(
        "release",
        help="write the student version of source notebooks",
        description="Write the student version of SRC (a notebook or a directory of them) into DST. "
        "Existing destination notebooks are skipped unless --force, since they may hold a learner's work. "
        "A pristine copy of each released notebook is always (re)written beside it under .torchlens/release/: "
        "resetting an exercise (the course server's /torchlens/api/reset) reads its stub from there.",
    )
    rel.add_argument("src", metavar="SRC", type=Path, help="source notebook (.ipynb) or directory of notebooks")
    rel.add_argument("dst", metavar="DST", type=Path, help="destination directory (or .ipynb path when SRC is a file)")
    rel.add_argument("--force", action="store_true", help="overwrite existing destination notebooks")

    grade = sub.add_parser(
        "grade",
        help="grade every student's notebooks into a gradebook and feedback",
        description="Grade SUBMISSIONS (one folder per student, notebooks named as released) against the source "
        "notebooks. Every test cell is restored from the source (hidden tests included), each notebook runs in a "
        "fresh kernel in its own process under time and memory limits, in a bubblewrap sandbox where the source, "
        "the other submissions and OUT are not mounted and every process it starts dies with it. Writes OUT/gradebook.csv, OUT/summary.csv and OUT/feedback/STUDENT.{json,html}. "
        "A notebook unchanged since the last run (same submission, source and limits) is not run again.",
    )
    grade.add_argument("submissions", metavar="SUBMISSIONS", type=Path, help="folder with one folder per student")
    grade.add_argument("--source", type=Path, required=True, help="the source notebooks (with solutions and hidden tests)")
    grade.add_argument("--out", type=Path, required=True, help="where the gradebook and feedback go")
    grade.add_argument("--jobs", type=int, default=None, help="notebooks graded at once (default: the number of cores)")
    grade.add_argument("--notebook", action="append", default=[], metavar="NAME",
                       help="grade only this notebook (repeat for more; default: every graded notebook)")
    grade.add_argument("--timeout", type=float, default=Limits.timeout, help="seconds for a whole notebook (default %(default)g)")
    grade.add_argument("--cell-timeout", type=float, default=Limits.cell_timeout,
                       help="seconds for one cell; a cell past it is interrupted (default %(default)g)")
    grade.add_argument("--memory-mb", type=float, default=Limits.memory_mb,
                       help="resident memory of a notebook's kernel and its processes (default %(default)g)")
    grade.add_argument("--no-sandbox", action="store_true",
                       help="run kernels without the sandbox: only for submissions you trust (bubblewrap missing)")
    grade.add_argument("--shard", metavar="K/N", default=None,
                       help="grade only slice K of N of the students (for a batch job array; join with `merge`)")

    mrg = sub.add_parser(
        "merge",
        help="join the outputs of `grade --shard K/N` runs into one gradebook",
        description="Join OUT folders written by `grade --shard 1/N` ... `--shard N/N` (same source and limits) "
        "into --out, exactly as one unsharded run would have written it. Refuses overlaps, gaps and outputs "
        "graded against other sources.",
    )
    mrg.add_argument("outs", metavar="OUT", type=Path, nargs="+", help="the shards' --out folders")
    mrg.add_argument("--out", type=Path, required=True, help="where the joined gradebook and feedback go")

    val = sub.add_parser(
        "validate",
        help="run a notebook as you have it and report its visible checks",
        description="Run NOTEBOOK top to bottom in a fresh kernel (the grader's runner) and report each check. "
        "A student copy holds only the visible tests: its hidden tests run when it is graded, so passing here "
        "means the visible tests pass. Your progress file is not written.",
    )
    val.add_argument("notebook", metavar="NOTEBOOK", type=Path)
    val.add_argument("--timeout", type=float, default=300.0, help="seconds for the whole notebook (default %(default)g)")
    val.add_argument("--cell-timeout", type=float, default=120.0, help="seconds for one cell (default %(default)g)")
    val.add_argument("--json", action="store_true", help="print the report as JSON")

    prog = sub.add_parser(
        "progress",
        help="show (or reset) which checks you have passed",
        description=f"Show the local progress store (set {ENV_VAR} to use another file).",
    )
    prog.add_argument("--json", action="store_true", help="print the summary as JSON")
    prog.add_argument(
        "--reset",
        nargs="?",
        const=_ALL,
        default=None,
        metavar="GRADE_ID",
        help="forget one passed check, or all of them when no GRADE_ID is given",
    )
    prog.add_argument(
        "--store", type=Path, default=None, help=f"progress file (default: ${ENV_VAR} or the XDG data dir)"
    )
    prog.add_argument(
        "--course",
        type=Path,
        default=None,
        metavar="DIR",
        help="course folder whose notebooks list every exercise (default: ./course, else ./notebooks)",
    )
    return parser


def _release(args: argparse.Namespace) -> int:
    try:
        result = release_path(args.src, args.dst, force=args.force)
    except FileNotFoundError as exc:
        print(f"torchlens-course release: error: {exc}", file=sys.stderr)
        return 2
    except ReleaseError as exc:
        print(f"torchlens-course release: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"torchlens-course release: error: cannot write: {exc}", file=sys.stderr)
        return 2
    for path in result.written:
        print(f"wrote    {path}")
    for path in result.skipped:
        print(f"skipped  {path} (exists; use --force to overwrite)")
    return 0


def _grade(args: argparse.Namespace) -> int:
    for name in ("timeout", "cell_timeout", "memory_mb"):
        if not getattr(args, name) > 0:
            print(f"torchlens-course grade: error: --{name.replace('_', '-')} must be a positive number", file=sys.stderr)
            return 2
    if args.jobs is not None and args.jobs < 1:
        print("torchlens-course grade: error: --jobs must be at least 1", file=sys.stderr)
        return 2
    limits = Limits(args.timeout, args.cell_timeout, args.memory_mb)
    shard = None
    if args.shard is not None:
        k, _, n = args.shard.partition("/")
        if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
            print(f"torchlens-course grade: error: --shard {args.shard}: give K/N with 1 <= K <= N, e.g. 2/8",
                  file=sys.stderr)
            return 2
        shard = (int(k), int(n))
    try:
        book = grade_submissions(args.submissions, args.source, args.out, jobs=args.jobs, limits=limits,
                                 notebooks=args.notebook, progress=busy.echo, sandboxed=not args.no_sandbox,
                                 shard=shard)
    except (GradeError, OSError) as exc:
        print(f"torchlens-course grade: error: {exc}", file=sys.stderr)
        return 2
    print(f"graded {book.graded} notebook(s), reused {book.reused} unchanged, in {book.seconds:.1f} s")
    for name in book.skipped:
        print(f"skipped  {args.submissions / name} (a dot-folder is not a student)")
    if not book.sandboxed:
        print("warning: --no-sandbox: the kernels ran unsandboxed, so a submission could read the source notebooks, "
              "other submissions and OUT, and leave processes running", file=sys.stderr)
    for name in ("gradebook.csv", "summary.csv", "feedback/"):
        print(f"wrote    {args.out / name}")
    return 0


def _merge(args: argparse.Namespace) -> int:
    try:
        book = merge(args.outs, args.out)
    except (GradeError, OSError) as exc:
        print(f"torchlens-course merge: error: {exc}", file=sys.stderr)
        return 2
    print(f"merged {len(args.outs)} shard(s): {len(book.results)} student(s)")
    for name in ("gradebook.csv", "summary.csv", "feedback/"):
        print(f"wrote    {args.out / name}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from .validate import validate_notebook

    if not args.notebook.is_file():
        print(f"torchlens-course validate: error: {args.notebook} is not a file", file=sys.stderr)
        return 2
    try:
        report = validate_notebook(args.notebook, timeout=args.timeout, cell_timeout=args.cell_timeout)
    except Exception as exc:
        print(f"torchlens-course validate: error: cannot run {args.notebook}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for c in report["checks"]:
            print(f"{c['grade_id']}: {c['status']}" + (f" - {c['message']}" if c["status"] != "passed" else ""))
        if report["notice"]:
            print(f"note: {report['notice']}")
        if report["stopped"]:
            print(f"the run stopped early: {report['stopped']}")
    return 0 if all(c["status"] == "passed" for c in report["checks"]) else 1


def _progress(args: argparse.Namespace) -> int:
    store = ProgressStore(args.store)
    if args.reset is not None:
        grade_id = None if args.reset is _ALL else args.reset
        if store.kind == "other":  # a folder, a socket: there is no progress file to reset
            print(f"torchlens-course progress: error: {store.path} is not a progress file (a folder?); point "
                  "--store or $TORCHLENS_PROGRESS at the progress JSON file", file=sys.stderr)
            return 2
        try:
            removed = store.reset(grade_id)
        except OSError as exc:
            print(f"torchlens-course progress: error: cannot reset {store.path}: {exc}", file=sys.stderr)
            return 1
        if grade_id is not None and not removed:
            print(f"no pass recorded for {grade_id!r} in {store.path}")
            return 1
        print(f"reset {removed} passed check{'' if removed == 1 else 's'} in {store.path}")
        return 0

    passed = store.passed()
    folder = args.course or next((Path(d) for d in ("course", "notebooks") if Path(d).is_dir()), None)
    try:
        outline = read_outline(folder) if folder is not None else []
    except FileNotFoundError as exc:
        print(f"torchlens-course progress: error: {exc}", file=sys.stderr)
        return 2
    rows = progress_report(outline, passed)
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return 0
    print(f"progress store: {store.path}")
    if folder is None:
        print("(no course folder here: pass --course DIR to list unpassed exercises too)")
    else:
        print(f"course: {folder}")
    width = max([len("exercise"), *(len(e["grade_id"]) for nb in rows["notebooks"] for e in nb["exercises"])])
    for nb in rows["notebooks"]:
        print(f"\n{nb['title']}  {_num(nb['earned'])}/{_num(nb['possible'])} points")
        for e in nb["exercises"]:
            mark = {"full": "passed", "visible": "passed (visible tests; hidden tests run at grading)"}.get(
                e["status"], "not passed"
            )
            possible = "?" if e["max_points"] is None else _num(e["max_points"])
            print(f"  {e['grade_id']:<{width}}  {_num(e['points'])}/{possible}  {mark}")
    t = rows["total"]
    print(f"\ntotal  {_num(t['earned'])}/{_num(t['possible'])} points, {t['passed']} of {t['exercises']} exercises passed")
    return 0


def _num(x: float) -> str:
    return f"{x:g}"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command == "release":
        return _release(args)
    if args.command == "progress":
        return _progress(args)
    if args.command == "grade":
        return _grade(args)
    if args.command == "merge":
        return _merge(args)
    if args.command == "validate":
        return _validate(args)
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
