"""Grading throughput: `torchlens-course grade` vs nbgrader's `autograde` on the same submissions, and a
re-run with nothing changed (target ≤ 5 s).

Submissions are made from the released notebooks: half of the students hand in the reference answers, half
the release unchanged. Both graders get the same folders; nbgrader runs one notebook at a time (its
autograde is sequential), ours `--jobs` (default: the core count). Both restore the test cells and run a
fresh kernel per notebook; ours also applies its memory cap and runs each kernel in its bubblewrap sandbox
(graded once more with --no-sandbox, to show what the sandbox costs per notebook).

Run: .venv/bin/python benchmarks/bench_grading.py [--students 20] [--notebook NN-name.ipynb ...]
(default: every graded course notebook; 20 students × the whole course is about two hours on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from torchlens_widgets.course.gradebook import grade_submissions
from torchlens_widgets.course.release import answered_release, release_notebook

ROOT = Path(__file__).resolve().parents[1]
NBGRADER = Path(sys.executable).parent / "nbgrader"


def _nbgrader_course(tmp: Path, notebooks: list[Path], students: list[str], subs: Path) -> tuple[Path, dict[str, str]]:
    """A throwaway nbgrader course over `notebooks`, with each student's folder copied into submitted/."""
    root = tmp / "nbgrader"
    (root / "source" / "ps").mkdir(parents=True)
    for p in notebooks:
        shutil.copy(p, root / "source" / "ps" / p.name)
    (root / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.root = {str(root)!r}\n"
        f"c.CourseDirectory.db_url = {'sqlite:///' + str(tmp / 'gb.db')!r}\nc.CourseDirectory.course_id = 'bench'\n")
    home = tmp / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
           "JUPYTER_DATA_DIR": str(home / "data"), "IPYTHONDIR": str(home / ".ipython"),
           "TORCHLENS_PROGRESS": str(tmp / "progress.json"), "PATH": f"{NBGRADER.parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run([str(NBGRADER), "generate_assignment", "ps", "--force"], cwd=root, env=env, check=True,
                   capture_output=True)
    for s in students:
        shutil.copytree(subs / s, root / "submitted" / s / "ps")
    return root, env


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--students", type=int, default=20)
    p.add_argument("--notebook", action="append", default=[], help="a notebook of notebooks/ (default: all graded)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--skip-nbgrader", action="store_true")
    args = p.parse_args()
    notebooks = [ROOT / "notebooks" / n for n in args.notebook] or sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    students = [f"s{i:02d}" for i in range(args.students)]
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as t:
        tmp = Path(t)
        source = tmp / "source"
        source.mkdir()
        subs = tmp / "submissions"
        for nb_path in notebooks:
            shutil.copy(nb_path, source / nb_path.name)
            nb = nbformat.read(nb_path, as_version=4)
            versions = [answered_release(nb), release_notebook(nb)]
            for i, s in enumerate(students):
                (subs / s).mkdir(parents=True, exist_ok=True)
                nbformat.write(versions[i % 2], subs / s / nb_path.name)
        n = len(students) * len(notebooks)
        print(f"{len(students)} students × {len(notebooks)} notebooks = {n} notebooks to grade, {os.cpu_count()} cores")

        # unsandboxed first: it also warms the file cache, so that the sandboxed run is not charged for that
        t0 = time.perf_counter()
        grade_submissions(subs, source, tmp / "out-unsandboxed", jobs=args.jobs, sandboxed=False)
        plain = time.perf_counter() - t0
        t0 = time.perf_counter()
        book = grade_submissions(subs, source, tmp / "out", jobs=args.jobs)
        ours = time.perf_counter() - t0
        print(f"torchlens-course grade --jobs {args.jobs}: {ours:7.1f} s, {60 * n / ours:6.2f} notebooks/min")
        print(f"the same, --no-sandbox:         {plain:7.1f} s; the sandbox costs "
              f"{(ours - plain) * args.jobs / n:+.2f} s per notebook (target ≤ 0.5 s)")
        t0 = time.perf_counter()
        again = grade_submissions(subs, source, tmp / "out", jobs=args.jobs)
        rerun = time.perf_counter() - t0
        assert again.graded == 0 and again.reused == n
        print(f"re-run, nothing changed:        {rerun:7.2f} s (target ≤ 5 s)")
        points = {(s, r.notebook): sum(i.points for i in r.items) for s in students for r in book.results[s]}

        if not args.skip_nbgrader:
            root, env = _nbgrader_course(tmp, notebooks, students, subs)
            t0 = time.perf_counter()
            subprocess.run([str(NBGRADER), "autograde", "ps", "--force", "--ExecutePreprocessor.timeout=300"],
                           cwd=root, env=env, check=True, capture_output=True)
            theirs = time.perf_counter() - t0
            print(f"nbgrader autograde:             {theirs:7.1f} s, {60 * n / theirs:6.2f} notebooks/min")
            print(f"ratio (nbgrader time / ours):   {theirs / ours:7.2f}×")
            from nbgrader.api import Gradebook

            with Gradebook(f"sqlite:///{tmp / 'gb.db'}", "bench") as gb:
                nbg = {(s, p.name): gb.find_submission_notebook(p.stem, "ps", s).score for s in students for p in notebooks}
            differ = {k: (points[k], nbg[k]) for k in points if abs(points[k] - nbg[k]) > 1e-9}
            print(f"same points as nbgrader for {len(points) - len(differ)} of {len(points)} (student, notebook) pairs"
                  + "".join(f"\n  {s} {nb}: ours {a:g}, nbgrader {b:g}" for (s, nb), (a, b) in sorted(differ.items())))


if __name__ == "__main__":
    main()
