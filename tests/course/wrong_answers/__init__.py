"""Wrong answers per exercise, run against the real checks: each one must fail.

One module per notebook (``nb02.py`` for ``02-*.ipynb``) defines ``WRONG = {grade_id: [Wrong(...), ...]}``:
the mistakes a learner would plausibly make and at least one attempt to game the check. The harness
runs the cells of the source notebook that its exercises need once in a kernel (`needed.py`: teaching cells
that only draw or time things are nbval's), then for every wrong answer restores the namespace, runs the
wrong code in place of the solution cell and the full test cell (hidden tests included), and requires
the check's own failure feedback; afterwards the reference answer must pass in the same kernel.

On the way through the source notebook, each exercise's released stub runs first, where the learner
finds it (its names not yet defined), followed by the full test cell: every check must fail on its stub.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell

from torchlens_widgets.course.execute import progress_redirected

__all__ = ["Outcome", "Wrong", "cells_to_run", "run_wrong_answers", "sampled", "wrong_answers_for"]


@dataclass(frozen=True)
class Wrong:
    """One wrong answer: a name, the code that replaces the solution cell, and text its feedback must hold."""

    name: str
    code: str
    expect: str = ""  # a substring of the check's failure message: it failed for the intended reason
    gaming: bool = False  # an attempt to fool the check rather than a mistake


@dataclass
class Outcome:
    grade_id: str
    name: str
    failed_with_feedback: bool
    feedback: str
    answer_error: str | None = None
    details: list[str] = field(default_factory=list)
    seconds: float = 0.0  # the wrong answer's cell and its test cell, run back to back


_SNAPSHOT = "__tlw_wrong_answer_snapshot__"
_TAKE = f"{_SNAPSHOT} = dict(get_ipython().user_ns)"
_RESTORE = f"""
def __tlw_restore__():
    ns = get_ipython().user_ns
    snap = ns[{_SNAPSHOT!r}]
    for k in [k for k in list(ns) if k not in snap and k not in ({_SNAPSHOT!r}, "__tlw_restore__")]:
        del ns[k]
    ns.update(snap)
    from torchlens_widgets.course import checks
    checks._FAILURES.clear()
__tlw_restore__()
"""


# Run in the kernel: where, among the objects reachable from the notebook's globals (containers and instance
# attributes, not modules), a value equal to one of `targets` sits.
_SCAN = r"""
def __tlw_scan__(targets, depth=4):
    import types
    plain = (dict, list, tuple, set, frozenset, str, int, float, bool)
    found, seen = [], set()

    def same(a, b):
        return type(a) is type(b) and type(a) in plain and a == b

    def walk(obj, path, left):
        if id(obj) in seen or isinstance(obj, (types.ModuleType, type, types.FunctionType)):
            return
        seen.add(id(obj))
        for name, target in targets.items():
            if same(obj, target):
                found.append(f"{path} equals the expected {name}")
        if left == 0:
            return
        if type(obj) is dict:
            items = list(obj.items())
        elif type(obj) in (list, tuple, set, frozenset):
            items = list(enumerate(obj))
        else:
            items = list(getattr(obj, "__dict__", {}).items()) if not callable(obj) else []
            items += [(n, getattr(obj, n, None)) for n in getattr(type(obj), "__slots__", ()) if isinstance(n, str)]
        for key, value in items[:2000]:
            walk(value, f"{path}[{key!r}]", left - 1)

    for name, value in list(get_ipython().user_ns.items()):
        if name.startswith("__tlw") or name in ("In", "Out", "_oh", "_ih", "_dh", "exit", "quit", "get_ipython"):
            continue
        walk(value, name, depth)
    return found
"""


def literal_assignments(source: str) -> dict[str, Any] | None:
    """{name: value} when `source` only assigns literals to names (a prediction), else None."""
    try:
        tree = ast.parse(source)
        values: dict[str, Any] = {}
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                return None
            values[node.targets[0].id] = ast.literal_eval(node.value)
    except (SyntaxError, ValueError):
        return None
    return values or None


def _secret_targets(reference: dict[str, Any], wrong: dict[str, Any]) -> dict[str, Any]:
    """The reference's predicted values worth looking for: not what the wrong answer wrote itself, and not values
    too common to mean anything (True, 3, a short word)."""
    def telling(v: Any) -> bool:
        if type(v) in (dict, list, tuple, set, frozenset):
            return len(v) >= 2
        return type(v) is str and len(v) >= 8

    return {k: v for k, v in reference.items()
            if telling(v) and not (k in wrong and type(wrong[k]) is type(v) and wrong[k] == v)}


def wrong_answers_for(notebook: Path) -> dict[str, list[Wrong]]:
    """The WRONG table of ``nbNN`` for ``NN-*.ipynb`` (empty if the module does not exist)."""
    try:
        module = importlib.import_module(f"{__name__}.nb{notebook.name[:2]}")
    except ModuleNotFoundError:
        return {}
    return dict(module.WRONG)


def sampled(wrong: dict[str, list[Wrong]], seed: str, keep: int = 3) -> dict[str, list[Wrong]]:
    """`keep` wrong answers per exercise, at least one of them gaming, chosen by `seed` (CI passes the commit): each
    commit runs a different sample, the same commit always the same one, and `make test-wrong-answers-all` runs all.
    The order within an exercise is kept (a prediction's first literal attempt is the one the secret scan uses)."""
    if keep < 1:
        raise ValueError(f"keep={keep}: keep at least one wrong answer per exercise")
    out = {}
    for gid, answers in wrong.items():
        ranked = sorted(answers, key=lambda w: hashlib.sha256(f"{seed}/{gid}/{w.name}".encode()).digest())
        chosen = ranked[:keep]
        if answers and not any(w.gaming for w in chosen):
            gaming = next((w for w in ranked if w.gaming), None)
            if gaming is not None:
                chosen[-1] = gaming
        out[gid] = [w for w in answers if w in chosen]
    return out


def _text(outputs: list[Any]) -> tuple[str, str | None]:
    shown, error = [], None
    for o in outputs:
        if o.get("output_type") == "error":
            error = o.get("ename")
        elif o.get("output_type") in ("display_data", "execute_result"):
            shown.append(str(o.get("data", {}).get("text/plain", "")))
        elif o.get("output_type") == "stream":
            shown.append(str(o.get("text", "")))
    return "\n".join(shown), error


def cells_to_run(nb: Any, wrong: dict[str, list[Wrong]]) -> set[int]:
    """The notebook's code cells the exercises need (its first cell, every exercise's cells, and what they and the
    wrong answers read, transitively), by index in `nb.cells`."""
    from tests.course.wrong_answers.needed import needed_cells, used

    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    always = [k for k, i in enumerate(code)
              if k == 0 or nb.cells[i].metadata.get("nbgrader", {}).get("grade")
              or nb.cells[i].metadata.get("nbgrader", {}).get("solution")]
    uses = set().union(*(used(w.code) for answers in wrong.values() for w in answers))
    return {code[k] for k in needed_cells([nb.cells[i].source for i in code], always, uses)}


def run_wrong_answers(notebook: Path, wrong: dict[str, list[Wrong]], timeout: int = 300,
                      stubs: list[Outcome] | None = None, secrets: list[Outcome] | None = None,
                      whole: bool = False, timings: list[tuple[str, float]] | None = None,
                      ) -> tuple[list[Outcome], dict[str, str]]:
    """Run every wrong answer of `wrong` against `notebook`'s checks; returns outcomes and the reference's feedback.
    Each check's run on its released stub is appended to `stubs` (when given). For a prediction (a solution that
    assigns literals), a wrong prediction also runs where the learner meets it, and `secrets` gets what of the
    expected values the kernel's globals then hold (`details`: empty when nothing). Only the cells the exercises
    need run (see `needed`), unless `whole`: then every cell, as a learner runs the notebook. `timings` (when given)
    gets (what, seconds) for every cell the harness ran besides the wrong answers: where a slow run spends its time."""
    from nbclient import NotebookClient

    from torchlens_widgets.course.release import release_notebook

    nb = nbformat.read(notebook, as_version=4)
    released = {c.metadata["nbgrader"]["grade_id"]: c.source for c in release_notebook(nb).cells
                if c.metadata.get("nbgrader", {}).get("solution")}
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(nb.cells)}
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", allow_errors=True,
        resources={"metadata": {"path": str(notebook.parent.resolve())}},
    )
    scratch = len(nb.cells)
    nb.cells.append(new_code_cell(""))  # nbclient writes each executed cell back at its index

    def timed(what: str, cell: Any, index: int) -> None:
        started = time.perf_counter()
        client.execute_cell(cell, index)
        if timings is not None:
            timings.append((what, time.perf_counter() - started))

    def run(source: str, must_succeed: bool = False, what: str = "harness") -> tuple[str, str | None]:
        cell = new_code_cell(source)
        nb.cells[scratch] = cell
        timed(what, cell, scratch)
        shown, error = _text(cell.outputs)
        if must_succeed and error:
            raise RuntimeError(f"{notebook.name}: the harness's own cell failed ({error}): {shown}")
        return shown, error

    outcomes: list[Outcome] = []
    reference: dict[str, str] = {}
    runs = set(range(scratch)) if whole else cells_to_run(nb, wrong)
    # the kernel's passes go to a throwaway store, also when this runs outside pytest
    with progress_redirected(), client.setup_kernel():
        for i, cell in enumerate(nb.cells[:scratch]):
            meta = cell.metadata.get("nbgrader", {})
            follows = nb.cells[i + 1].metadata.get("nbgrader", {}) if i + 1 < scratch else {}
            if stubs is not None and meta.get("solution") and follows.get("grade") and not follows.get("solution"):
                test_id = follows["grade_id"]
                run(released[meta["grade_id"]], what=f"stub {test_id}")  # where the learner meets it (it may raise)
                shown, error = run(nb.cells[i + 1].source, what=f"check of the stub {test_id}")
                stubs.append(Outcome(test_id, "the released stub", error == "CheckFailed" and f"✗ {test_id} failed" in shown,
                                     shown, error))
                predicted = literal_assignments(cell.source.replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""))
                tries = [w for w in wrong.get(test_id, []) if literal_assignments(w.code) is not None]
                if secrets is not None and predicted and tries:
                    attempt = tries[0]
                    run(attempt.code)
                    shown, error = run(nb.cells[i + 1].source)
                    targets = _secret_targets(predicted, literal_assignments(attempt.code) or {})
                    run(_SCAN, must_succeed=True)
                    found, _ = run(f"print(__tlw_scan__({targets!r}))", must_succeed=True)
                    leaks = ast.literal_eval(found.strip() or "[]")
                    secrets.append(Outcome(test_id, attempt.name, error == "CheckFailed", shown, error, leaks))
            if cell.cell_type == "code" and i in runs:
                timed(f"cell {i}: {cell.source.strip().splitlines()[0][:60] if cell.source.strip() else ''}", cell, i)
                shown, err = _text(cell.outputs)
                if err:
                    raise RuntimeError(f"{notebook.name}: cell {i} failed in the reference run ({err}): {shown[-1500:]}")
        run(_TAKE, must_succeed=True)
        for gid, answers in wrong.items():
            if gid not in cells:
                raise KeyError(f"{notebook.name} has no test cell {gid!r}")
            test_source = nb.cells[cells[gid]].source
            for w in answers:
                run(_RESTORE, must_succeed=True)
                started = time.perf_counter()
                shown_answer, answer_error = run(w.code)
                shown, error = run(test_source)
                failed = error is not None and f"✗ {gid} failed" in shown
                ok = failed and answer_error is None and (not w.expect or w.expect in shown)
                outcomes.append(Outcome(gid, w.name, ok, shown, answer_error, seconds=time.perf_counter() - started))
            run(_RESTORE, must_succeed=True)
            shown, error = run(test_source, what=f"reference {gid}")
            reference[gid] = shown if error is None and f"✓ {gid} passed" in shown else f"FAILED ({error}): {shown}"
    return outcomes, reference


def load_json(path: Path) -> Any:  # pragma: no cover - debugging aid
    return json.loads(path.read_text())
