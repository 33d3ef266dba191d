"""A grading run's signed reports: a check's outcome as the grader recorded it, and every known way to take over
execution found. (In fresh processes: starting the grader marks a process as graded for good.)"""

from __future__ import annotations

import json
import subprocess
import sys

from torchlens_widgets.course.attest import sign, verify

KEY, NONCE = "k" * 32, "n" * 16


def test_only_a_report_signed_with_the_key_for_this_nonce_and_item_verifies() -> None:
    text = json.dumps({"nonce": NONCE, "grade_id": "02-a", "outcomes": [True], "findings": [],
                       "mac": sign(KEY, NONCE, "02-a", [True], [])})
    assert verify(KEY, NONCE, "02-a", text) == ([True], [])
    forged = json.loads(text)
    forged["outcomes"] = [True, True]
    assert verify(KEY, NONCE, "02-a", json.dumps(forged)) is None
    assert verify(KEY, "m" * 16, "02-a", text) is None and verify(KEY, NONCE, "02-b", text) is None
    assert verify("x" * 32, NONCE, "02-a", text) is None
    assert verify(KEY, NONCE, "02-a", "passed") is None and verify(KEY, NONCE, "02-a", '{"nonce": 1}') is None


_RUN = r"""
import json, sys
from torchlens_widgets.course import attest
from torchlens_widgets.course.checks import check, CheckFailed

def report(gid):
    doc = json.loads(attest.report("n" * 16, gid))
    assert attest.verify("k" * 32, "n" * 16, gid, json.dumps(doc)) is not None
    return doc["outcomes"], doc["findings"]

with check("02-a") as c:      # before the start: a learner's own kernel keeps nothing
    c.that(True, "ok")
print(attest.start("k" * 32), attest.start("again"))
out = {"unstarted": report("02-a")}
with check("02-a") as c:
    c.that(True, "ok")
out["pass"] = report("02-a")
try:
    with check("02-a") as c:
        c.that(False, "no")
except CheckFailed:
    pass
with check("02-a") as c:
    c.that(True, "ok")
out["fail then pass"] = report("02-a")
attest.record("02-a", True)   # not from a check
sys.settrace(lambda *a: None)
sys.settrace(None)
out["forged"] = report("02-a")
print("RESULT=" + json.dumps(out))
"""


def test_outcomes_and_findings_in_a_started_process() -> None:
    done = subprocess.run([sys.executable, "-c", _RUN], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    out = json.loads(next(ln for ln in lines if ln.startswith("RESULT="))[7:])
    assert "started already started" in done.stdout
    assert out["unstarted"][0] == []
    outcomes, findings = out["pass"]
    assert outcomes == [True] and findings == ["the grader's start was called a second time"]
    assert out["fail then pass"][0] == [False, True]
    outcomes, findings = out["forged"]
    assert outcomes == []
    assert any("recorded by <module>" in f and "not by a check" in f for f in findings), findings
    assert sum("sys.settrace was called by <module>" in f for f in findings) == 2, findings  # set, then cleared


def test_a_change_found_at_one_check_taints_every_later_check_of_the_same_kernel() -> None:
    """A trace hook left on slows what follows: a later timeout or failure in that kernel is the hook's doing, so it
    scores `tampered`, not `timeout`; the checks before the change keep their own result."""
    import nbformat

    from torchlens_widgets.course.grading import read_results
    from torchlens_widgets.course.runner import Limits, Run

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("") for _ in range(4)])
    cells = {"a": 0, "b": 1, "c": 2, "d": 3}
    run = Run(status={0: "ok", 1: "ok", 2: "timeout", 3: "error"},
              attested={0: ([True], []), 1: ([True], ["sys.settrace called by <cell>"]), 2: None, 3: ([False], [])})
    items = read_results(nb, cells, dict.fromkeys(cells, 1.0), run, Limits(cell_timeout=20))
    assert [(i.grade_id, i.status) for i in items] == [("a", "passed"), ("b", "tampered"), ("c", "tampered"),
                                                       ("d", "tampered")]
    assert "earlier check" in items[2].message and "settrace" in items[3].message
    assert sum(i.points for i in items) == 1.0
