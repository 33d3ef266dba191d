"""`grade --shard K/N` grades a deterministic slice of the students, and `merge` joins the slices into exactly the
gradebook, summary and feedback an unsharded run writes; it refuses gaps, overlaps and other sources."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from torchlens_widgets.course import sandbox
from torchlens_widgets.course.cli import main as cli
from torchlens_widgets.course.gradebook import GradeError, grade_submissions, in_shard, merge
from torchlens_widgets.course.release import answered_release, release_notebook
from torchlens_widgets.course.runner import Limits

NAME = "90-tiny.ipynb"
LIMITS = Limits(timeout=120, cell_timeout=60, memory_mb=2000)
TEST = ("from torchlens_widgets.course import check\nwith check('90-answer', points=2) as c:\n"
        "    c.equal(answer, 42, 'answer')\n    ### BEGIN HIDDEN TESTS\n"
        "    c.that(answer + 1 == 43, 'answer + 1 should be 43')\n    ### END HIDDEN TESTS\n")


def _source(folder: Path) -> nbformat.NotebookNode:
    nb = new_notebook(cells=[
        new_code_cell("### BEGIN SOLUTION\nanswer = 42\n### END SOLUTION\n", metadata={"nbgrader": {
            "grade": False, "solution": True, "locked": False, "grade_id": "90-answer-answer", "schema_version": 3}}),
        new_code_cell(TEST, metadata={"nbgrader": {"grade": True, "solution": False, "locked": True, "points": 2,
                                                   "grade_id": "90-answer", "schema_version": 3}}),
    ])
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / NAME)
    return nb


def _students(root: Path, source: nbformat.NotebookNode) -> Path:
    subs = root / "subs"
    answers = {"ann": None, "bo": "answer = 41\n", "di": "answer = 42\n", "flo": ""}
    for name, answer in answers.items():
        (subs / name).mkdir(parents=True)
        nb = release_notebook(source) if answer is None else answered_release(source, {"90-answer-answer": answer})
        nbformat.write(nb, subs / name / NAME)
    return subs


def _files(out: Path) -> dict[str, str]:
    return {p.relative_to(out).as_posix(): p.read_text() for p in sorted(out.rglob("*"))
            if p.is_file() and ".cache" not in p.parts and p.name != "manifest.json"}


@pytest.mark.notebooks
def test_shards_merged_equal_one_unsharded_run(tmp_path: Path) -> None:
    assert sandbox.available(), f"this machine cannot sandbox a kernel: {sandbox.INSTALL}"
    source = _source(tmp_path / "source")
    subs = _students(tmp_path, source)
    whole = grade_submissions(subs, tmp_path / "source", tmp_path / "all", jobs=2, limits=LIMITS)
    assert {s: r[0].items[0].status for s, r in whole.results.items()} == {
        "ann": "failed", "bo": "failed", "di": "passed", "flo": "failed"}
    slices = [sorted(s for s in whole.results if in_shard(s, k, 2)) for k in (1, 2)]
    assert sorted(slices[0] + slices[1]) == sorted(whole.results) and slices[0] and slices[1]
    for k in (1, 2):
        assert cli(["grade", str(subs), "--source", str(tmp_path / "source"), "--out", str(tmp_path / f"s{k}"),
                    "--shard", f"{k}/2", "--cell-timeout", "60", "--memory-mb", "2000", "--timeout", "120"]) == 0
        assert sorted(grade_submissions(subs, tmp_path / "source", tmp_path / f"s{k}", limits=LIMITS,
                                        shard=(k, 2)).results) == slices[k - 1]  # and a re-run reuses it all
    assert cli(["merge", str(tmp_path / "s2"), str(tmp_path / "s1"), "--out", str(tmp_path / "merged")]) == 0
    assert _files(tmp_path / "merged") == _files(tmp_path / "all")

    with pytest.raises(GradeError, match="every shard 1..N"):
        merge([tmp_path / "s1"], tmp_path / "m2")
    with pytest.raises(GradeError, match="every shard 1..N"):
        merge([tmp_path / "s1", tmp_path / "s1"], tmp_path / "m2")
    with pytest.raises(GradeError, match="not the output of a grading run"):
        merge([tmp_path / "s1", tmp_path / "subs"], tmp_path / "m2")
    shutil.copytree(tmp_path / "s2", tmp_path / "s2b")  # as if graded after the instructor changed a hidden test
    manifest = json.loads((tmp_path / "s2b" / "manifest.json").read_text())
    (tmp_path / "s2b" / "manifest.json").write_text(json.dumps({**manifest, "source": "0" * 64}))
    with pytest.raises(GradeError, match="other source notebooks"):
        merge([tmp_path / "s1", tmp_path / "s2b"], tmp_path / "m3")


def test_a_bad_shard_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _source(tmp_path / "source")
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    for bad in ("3/2", "0/2", "x"):
        assert cli(["grade", str(tmp_path / "subs"), "--source", str(tmp_path / "source"), "--out",
                    str(tmp_path / "o"), "--shard", bad]) == 2
        assert "give K/N" in capsys.readouterr().err
    with pytest.raises(GradeError, match="give K/N"):
        grade_submissions(tmp_path / "subs", tmp_path / "source", tmp_path / "o", shard=(0, 2))
