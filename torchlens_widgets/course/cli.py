"""``torchlens-course``: release student notebooks and inspect local progress."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .outline import progress_report, read_outline
from .progress import ENV_VAR, ProgressStore
from .release import ReleaseError, release_path

__all__ = ["main"]

_ALL = object()  # `--reset` given without a GRADE_ID


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchlens-course", description="Release student notebooks and inspect local course progress."
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


def _progress(args: argparse.Namespace) -> int:
    store = ProgressStore(args.store)
    if args.reset is not None:
        grade_id = None if args.reset is _ALL else args.reset
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
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
