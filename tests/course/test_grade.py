"""`torchlens-course grade` on tampered submissions of a released notebook gives exactly the expected gradebook.

The submissions are made from notebook 02's release, cut to the code cells its exercises need (its teaching cells
draw and time things, which nbval runs; here they would double each of the ~15 sandboxed runs): full marks, blank, edited / deleted / re-typed / moved test
cells, an infinite loop, a memory bomb, ``os._exit``, a cell that reads the instructor's source, a missing and
an unreadable notebook, a progress file claiming every pass, and forged passes. One grading run (two at a time) serves every
check of the first test; a second run with nothing changed must reuse every result.
"""

from __future__ import annotations

import base64
import copy
import csv
import json
import os
import time
from pathlib import Path

import nbformat
import pytest

from tests.course.wrong_answers import cells_to_run
from torchlens_widgets.course import sandbox
from torchlens_widgets.course.assemble import hidden_lines
from torchlens_widgets.course.cli import main as cli
from torchlens_widgets.course.gradebook import GradeError, grade_submissions, quotes
from torchlens_widgets.course.release import answered_release, release_notebook
from torchlens_widgets.course.runner import Limits

SOURCE = Path(__file__).parents[2] / "notebooks"
NAME = "02-storage-views-strides.ipynb"
IDS = ["02-predict-strides", "02-storage-position", "02-which-views", "02-my-transpose", "02-reshape-as-view"]
POINTS = {"02-predict-strides": 2, "02-storage-position": 3, "02-which-views": 2, "02-my-transpose": 3,
          "02-reshape-as-view": 3}
LIMITS = Limits(timeout=240, cell_timeout=20, memory_mb=1500)

ALL_PASS = dict.fromkeys(IDS, "passed")
EXPECTED = {
    "full": ALL_PASS,
    "blank": dict.fromkeys(IDS, "failed"),  # the release unchanged, beside a progress file claiming every pass
    "edited-tests": dict.fromkeys(IDS, "failed"),  # stubs, with every test cell rewritten to print a pass
    "deleted-moved-tests": ALL_PASS,  # reference answers; two test cells deleted, the others moved to the top
    "retyped-split": ALL_PASS,  # test cells re-typed without metadata and faked; answer cells split in two
    "infinite-loop": {**ALL_PASS, "02-storage-position": "timeout"},
    "memory-bomb": {**ALL_PASS, "02-my-transpose": "out-of-memory", "02-reshape-as-view": "out-of-memory"},
    "os-exit": {**ALL_PASS, "02-which-views": "kernel died", "02-my-transpose": "kernel died",
                "02-reshape-as-view": "kernel died"},
    "reads-source": {**ALL_PASS, "02-storage-position": "failed"},
    "missing": dict.fromkeys(IDS, "missing"),
    "unreadable": dict.fromkeys(IDS, "missing"),
    "forged-pass": dict.fromkeys(IDS, "failed"),  # stubs; errors swallowed and a pass displayed after every cell
    "transformer-forge": dict.fromkeys(IDS, "tampered"),  # stubs; an input transformer turns test cells into passes
    "trace-hook": dict.fromkeys(IDS, "tampered"),  # reference answers, and a trace function left on
    "escape": ALL_PASS,  # reference answers, and a cell that tries to get out of the sandbox (none of it works)
    "=1+1": dict.fromkeys(IDS, "failed"),  # a formula for a name; an answer raising base64 of a hidden test line
    "symlinked-notebook": dict.fromkeys(IDS, "refused"),  # the notebook is a symbolic link to the source
    "symlinked-folder": dict.fromkeys(IDS, "refused"),  # the folder is a symbolic link to another student's
    "hard-linked": dict.fromkeys(IDS, "refused"),  # the notebook is a hard link to a copy of the source
}
REFUSED = ("symlinked-notebook", "symlinked-folder", "hard-linked")


def _meta(cell: nbformat.NotebookNode) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _is_test(cell: nbformat.NotebookNode) -> bool:
    return bool(_meta(cell).get("grade")) and not _meta(cell).get("solution")


READS_SOURCE = '''import json as _json
import pathlib as _pathlib
import subprocess as _subprocess

_found = None
for _read in (lambda: _pathlib.Path(r"{path}").read_text(),
              lambda: _subprocess.run(["git", "-C", r"{repo}", "show", "HEAD:notebooks/{name}"],
                                      capture_output=True, text=True, check=True).stdout):
    try:
        _cells = _json.loads(_read())["cells"]
    except Exception:
        continue
    _found = next("".join(c["source"]) for c in _cells
                  if c["metadata"].get("nbgrader", {{}}).get("grade_id") == "02-storage-position-answer")
    break
if _found is None:
    def storage_position(index, shape, stride, offset):
        raise RuntimeError("could not read the instructor's notebook")
else:
    exec(_found)
'''


FORGE = '''from IPython.display import display as _display

_ip = get_ipython()
_ip.set_custom_exc((BaseException,), lambda *args, **kwargs: None)  # no error output, ever


def _forge(result):
    for _gid in {ids}:
        _display({{"text/plain": "passed"}}, raw=True,
                 metadata={{"torchlens_check": {{"grade_id": _gid, "passed": True, "points": 3, "earned": 3}}}})


_ip.events.register("post_run_cell", _forge)
'''


TRANSFORMER = '''def _forge(lines):
    if any("check(" in line for line in lines):
        return ["from IPython.display import display as _d\\n",
                "for _g in %r:\\n",
                "    _d({'text/plain': 'passed'}, raw=True, metadata={'torchlens_check': "
                "{'grade_id': _g, 'passed': True, 'points': 3, 'earned': 3}})\\n"]
    return lines


get_ipython().input_transformers_cleanup.append(_forge)
'''

TRACE = '''import sys as _sys


def _watch(frame, event, arg):
    return None


_sys.settrace(_watch)
'''

# Every way out the old grader had: lift the mount covers, read the source through /proc, find the assembled notebook
# beside the kernel, plant files in --out and in another student's folder, and leave a daemon behind. Any of it
# working ends the kernel (os._exit), which the expected gradebook would show.
ESCAPE = '''import glob as _glob
import os as _os
import subprocess as _sp

_sp.run(["umount", "-a"], capture_output=True)
_got_out = []
for _path in ["/proc/1/root{source}", "/proc/%d/root{source}" % _os.getppid(), "{source}", *_glob.glob("*"),
              *_glob.glob("/tmp/*/*.ipynb"), *_glob.glob("/tmp/*.ipynb")]:
    try:
        if {needle!r} in open(_path, errors="replace").read():
            _got_out.append(_path)
    except OSError:
        pass
for _target in ["{out}/planted.txt", "{victim}/planted.txt", "{source_dir}/planted.txt"]:
    try:
        open(_target, "w").write("planted")
        _got_out.append(_target)
    except OSError:
        pass
open("/dev/shm/planted.txt", "w").write("planted")  # the sandbox's own /dev/shm: gone with it
_sp.Popen(["setsid", "sh", "-c", "sleep 987654 & exit 0"], stdin=_sp.DEVNULL, stdout=_sp.DEVNULL, stderr=_sp.DEVNULL)
if _got_out:
    _os._exit(3)
'''


def _exercise_cells_only(folder: Path) -> Path:
    """A source folder holding 02 with only the code cells its exercises need (every markdown cell kept)."""
    nb = nbformat.read(SOURCE / NAME, as_version=4)
    keep = cells_to_run(nb, {})
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    nb.cells = [c for i, c in enumerate(nb.cells) if c.cell_type != "code" or i in keep]
    assert len(keep) < len(code), "02 has teaching cells its exercises do not need"
    folder.mkdir()
    nbformat.write(nb, folder / NAME)
    return folder


def _submissions(root: Path, source_dir: Path) -> Path:
    source = nbformat.read(source_dir / NAME, as_version=4)
    release = release_notebook(source)
    stubs = {_meta(c)["grade_id"]: c.source for c in release.cells if _meta(c).get("solution")}
    subs = root / "submissions"

    def put(student: str, nb: nbformat.NotebookNode | None) -> None:
        (subs / student).mkdir(parents=True)
        if nb is not None:
            nbformat.write(nb, subs / student / NAME)

    put("full", answered_release(source))
    put("blank", release)
    edited = copy.deepcopy(release)
    for cell in edited.cells:
        if _is_test(cell):
            cell.source = 'print("all tests passed")'
    put("edited-tests", edited)
    moved = answered_release(source)
    tests = [c for c in moved.cells if _is_test(c)][2:]  # the first two deleted, the rest above every answer
    moved.cells = tests + [c for c in moved.cells if not _is_test(c)]
    put("deleted-moved-tests", moved)
    retyped = answered_release(source)
    cells = []
    for cell in retyped.cells:
        if _is_test(cell):  # deleted, then re-typed by hand: no metadata, and a check that always passes
            cells.append(nbformat.v4.new_code_cell('from torchlens_widgets.course import check\nprint("passed")'))
        elif _meta(cell).get("grade_id") == "02-my-transpose-answer":  # split in two; both halves keep the id
            first = copy.deepcopy(cell)
            first.source = "import torch as _t  # first half"
            second = nbformat.v4.new_code_cell(cell.source, metadata=copy.deepcopy(cell.metadata))
            cells += [first, second]
        elif _meta(cell).get("grade_id") == "02-reshape-as-view-answer":  # split; the second half lost its id
            first = copy.deepcopy(cell)
            first.source = "_helper_ready = True"
            cells += [first, nbformat.v4.new_code_cell(cell.source)]
        else:
            cells.append(cell)
    retyped.cells = cells
    put("retyped-split", retyped)
    put("infinite-loop", answered_release(source, {
        "02-storage-position-answer": "def storage_position(index, shape, stride, offset):\n    while True:\n        pass\n"}))
    put("memory-bomb", answered_release(source, {
        "02-my-transpose-answer": "_hog = []\nwhile True:\n    _hog.append(b'x' * 2**26)\n"}))
    put("os-exit", answered_release(source, {"02-which-views-answer": "import os\nos._exit(0)\n"}))
    put("reads-source", answered_release(source, {"02-storage-position-answer": READS_SOURCE.format(
        path=source_dir / NAME, repo=SOURCE.parent, name=NAME)}))
    put("forged-pass", answered_release(source, {**stubs, IDS[0] + "-answer": FORGE.format(ids=IDS)}))
    put("transformer-forge", answered_release(source, {**stubs, IDS[0] + "-answer": TRANSFORMER % (IDS,)}))
    traced = answered_release(source)
    traced.cells.insert(0, nbformat.v4.new_code_cell(TRACE))
    put("trace-hook", traced)
    escape = answered_release(source)
    needle = next(x for x in hidden_lines(source) if len(x) >= 20)  # a hidden test's line: in no file it can read
    escape.cells.insert(0, nbformat.v4.new_code_cell(ESCAPE.format(
        source=source_dir / NAME, source_dir=source_dir, out=root / "out", victim=subs / "full", needle=needle)))
    put("escape", escape)
    line = next(x for x in hidden_lines(source) if len(x) >= 20)
    leak = base64.b64encode(line.encode()).decode()
    put("=1+1", answered_release(source, {**stubs, "02-storage-position-answer":
                                          f"def storage_position(index, shape, stride, offset):\n"
                                          f"    raise ValueError('B64:{leak}')\n"}))
    put("symlinked-notebook", None)
    (subs / "symlinked-notebook" / NAME).symlink_to(source_dir / NAME)
    (subs / "symlinked-folder").symlink_to(subs / "full", target_is_directory=True)
    put("hard-linked", None)
    nbformat.write(source, root / "copy.ipynb")
    os.link(root / "copy.ipynb", subs / "hard-linked" / NAME)
    (subs / ".hidden").mkdir()
    put("missing", None)
    (subs / "missing" / "01-runtime.ipynb").write_text("{}")  # another notebook, not this one
    put("unreadable", None)
    (subs / "unreadable" / NAME).write_text('{"cells": [ this is not JSON')
    claim = {"version": 1, "passed": {gid: {"points": POINTS[gid], "max_points": POINTS[gid]} for gid in IDS}}
    (subs / "blank" / "progress.json").write_text(json.dumps(claim))
    return subs


@pytest.mark.notebooks
def test_grading_tampered_submissions(tmp_path: Path) -> None:
    """One grading run (about 14 notebook runs) serves every part; xdist would run a module fixture once per worker."""
    assert sandbox.available(), f"this machine cannot sandbox a kernel: {sandbox.INSTALL}"
    source = _exercise_cells_only(tmp_path / "source")
    subs = _submissions(tmp_path, source)
    out = tmp_path / "out"
    t0 = time.monotonic()
    book = grade_submissions(subs, source, out, jobs=2, limits=LIMITS, notebooks=[NAME])
    first = time.monotonic() - t0
    assert book.skipped == [".hidden"] and book.sandboxed
    _nothing_got_out(tmp_path, source)
    _gradebook_is_exactly_the_expected_one(out)
    _summary_has_a_row_per_student(out)
    _feedback_teaches_and_never_holds_hidden_tests_or_tracebacks(out, source)
    _a_rerun_with_nothing_changed_reuses_every_result(subs, source, out, first)


def _nothing_got_out(root: Path, source: Path) -> None:
    planted = [p for p in (root / "out" / "planted.txt", root / "submissions" / "full" / "planted.txt",
                           source / "planted.txt", SOURCE / "planted.txt", Path("/dev/shm/planted.txt")) if p.exists()]
    assert not planted, f"a kernel wrote outside its sandbox: {planted}"
    daemons = [p for p in Path("/proc").glob("[0-9]*") if b"987654" in _cmdline(p)]
    assert not daemons, "a process started by a graded notebook outlived it"


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def _gradebook_is_exactly_the_expected_one(out: Path) -> None:
    with open(out / "gradebook.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["student", "notebook", "grade_id", "points", "max_points", "status"]
    assert "'=1+1" in (out / "gradebook.csv").read_text() and ",=1+1," not in (out / "gradebook.csv").read_text()
    expected = [{"student": "'" + s if s.startswith("=") else s, "notebook": NAME, "grade_id": gid,
                 "points": str(POINTS[gid] if st == "passed" else 0), "max_points": str(POINTS[gid]), "status": st}
                for s in sorted(EXPECTED) for gid, st in EXPECTED[s].items()]
    assert rows == expected


def _summary_has_a_row_per_student(out: Path) -> None:
    with open(out / "summary.csv", newline="") as fh:
        summary = {r["student"]: r for r in csv.DictReader(fh)}
    assert sorted(summary) == sorted("'" + s if s.startswith("=") else s for s in EXPECTED)
    assert summary["full"]["points"] == "13" and summary["full"]["max_points"] == "13"
    assert summary["infinite-loop"]["points"] == "10" and summary["missing"]["notebooks_submitted"] == "0"


def _feedback_teaches_and_never_holds_hidden_tests_or_tracebacks(out: Path, source: Path) -> None:
    secret = [line for line in hidden_lines(nbformat.read(source / NAME, as_version=4)) if len(line) >= 8]
    assert len(secret) > 10
    for student in EXPECTED:
        for ext in ("json", "html"):
            text = (out / "feedback" / f"{student}.{ext}").read_text()
            assert not quotes(text, secret), f"{student}.{ext} quotes a hidden test (plainly or encoded)"
            assert "Traceback" not in text and "File \"" not in text
    blank = json.loads((out / "feedback" / "blank.json").read_text())["notebooks"][0]["items"]
    assert all(i["message"].startswith("not done yet") for i in blank)
    loop = json.loads((out / "feedback" / "infinite-loop.json").read_text())["notebooks"][0]["items"]
    assert f"ran past its {LIMITS.cell_timeout:g} s limit" in loop[1]["message"]
    bomb = json.loads((out / "feedback" / "memory-bomb.json").read_text())["notebooks"][0]["items"]
    assert "more than 1500 MB" in bomb[3]["message"]
    html = (out / "feedback" / "full.html").read_text()
    assert "13 of 13 points" in html and "var(--tlw-good)" in html and "#" not in html.split("<body")[1]


def _a_rerun_with_nothing_changed_reuses_every_result(subs: Path, source: Path, out: Path, first: float) -> None:
    before = (out / "gradebook.csv").read_text()
    t0 = time.monotonic()
    book = grade_submissions(subs, source, out, jobs=2, limits=LIMITS, notebooks=[NAME])
    assert (book.graded, book.reused) == (0, len(EXPECTED) - len(REFUSED))
    assert time.monotonic() - t0 < 5 < first
    assert (out / "gradebook.csv").read_text() == before
    full = subs / "full" / NAME  # one changed submission is graded again, alone
    nb = nbformat.read(full, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("a note"))
    nbformat.write(nb, full)
    book = grade_submissions(subs, source, out, jobs=2, limits=LIMITS, notebooks=[NAME])
    assert (book.graded, book.reused) == (1, len(EXPECTED) - len(REFUSED) - 1)
    assert (out / "gradebook.csv").read_text() == before


def test_bad_folders_get_the_graders_own_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    with pytest.raises(GradeError, match="is not a folder"):
        grade_submissions(tmp_path / "nope", SOURCE, tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(GradeError, match="no student folders"):
        grade_submissions(tmp_path / "empty", SOURCE, tmp_path / "out")
    with pytest.raises(GradeError, match="no graded source notebook called 99-nothing"):
        grade_submissions(tmp_path / "subs", SOURCE, tmp_path / "out", notebooks=["99-nothing"])
    with pytest.raises(GradeError, match="inside SUBMISSIONS"):
        grade_submissions(tmp_path / "subs", SOURCE, tmp_path / "subs" / "out", notebooks=[NAME])
    assert cli(["grade", str(tmp_path / "subs"), "--source", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no graded notebooks in" in capsys.readouterr().err
    assert cli(["grade", str(tmp_path / "subs"), "--source", str(SOURCE), "--out", str(tmp_path / "o"),
                "--timeout", "0"]) == 2
    assert "--timeout must be a positive number" in capsys.readouterr().err


@pytest.mark.notebooks
def test_validate_runs_a_learner_copy_and_says_hidden_tests_remain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from torchlens_widgets.course.markers import HIDDEN_PLACEHOLDER

    nb = nbformat.v4.new_notebook()
    test = ("from torchlens_widgets.course import check\nwith check('99-one', points=1) as c:\n"
            f"    c.that(answer == 2, 'answer should be 2')\n    {HIDDEN_PLACEHOLDER}")
    nb.cells = [nbformat.v4.new_code_cell("answer = 1 + 1"),
                nbformat.v4.new_code_cell(test, metadata={"nbgrader": {"grade": True, "solution": False,
                                                                       "grade_id": "99-one", "points": 1}})]
    nbformat.write(nb, tmp_path / "99-mine.ipynb")
    assert cli(["validate", str(tmp_path / "99-mine.ipynb")]) == 0
    out = capsys.readouterr().out
    assert "99-one: passed" in out and "hidden tests run only when the notebook is graded" in out
    assert cli(["validate", str(tmp_path / "nope.ipynb")]) == 2
