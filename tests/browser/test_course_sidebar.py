"""The course sidebar in a real JupyterLab: it lists the course's notebooks; a check passed in an open
notebook shows there without a reload; Validate reports each visible check; Reset restores the stub and
keeps a backup.

The course is two small notebooks released (as `torchlens-course release` does) into the server's root,
so the run stays short; the sidebar reads it through the course server extension like any course.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest

from .lab import screenshot_on_failure, wait_kernel_idle

pytestmark = pytest.mark.browser

SHOTS = Path("/tmp/shots")
SIDEBAR = "#torchlens-course"
EXERCISES = {  # grade id: (points, answer, visible test, hidden test)
    "01-answer": (2, "answer = 42", "c.equal(answer, 42, what='answer')", "c.equal(answer + 1, 43, what='answer + 1')"),
    "01-word": (1, "word = 'view'", "c.equal(word, 'view', what='word')", None),
    "02-only": (3, "only = 3", "c.equal(only, 3, what='only')", None),
}
STUB_MARK = "NotImplementedError"
AFTER = "a picture after the exercises"

JS_CELL_INDEX = """gid => window.jupyterapp.shell.currentWidget.content.widgets
  .findIndex(c => (c.model.getMetadata('nbgrader') || {}).grade_id === gid)"""
JS_SET_AND_RUN = """async ([i, source]) => {
  const app = window.jupyterapp, nb = app.shell.currentWidget.content;
  if (source !== null) nb.widgets[i].model.sharedModel.setSource(source);
  nb.activeCellIndex = i; nb.deselectAll();
  await app.commands.execute('notebook:run-cell');
}"""
JS_SOURCE = "i => window.jupyterapp.shell.currentWidget.content.widgets[i].model.sharedModel.getSource()"


def exercise_cells(gid: str) -> list[nbformat.NotebookNode]:
    """An exercise's answer cell and its test cell (hidden tests included), as a source notebook holds them."""
    points, answer, visible, hidden = EXERCISES[gid]
    sol = nbformat.v4.new_code_cell(f"### BEGIN SOLUTION\n{answer}\n### END SOLUTION")
    sol.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False, "grade_id": f"{gid}-answer",
                                "schema_version": 3}
    test = f"from torchlens_widgets.course import check\n\nwith check({gid!r}, points={points}) as c:\n    {visible}\n"
    if hidden:
        test += f"    ### BEGIN HIDDEN TESTS\n    {hidden}\n    ### END HIDDEN TESTS\n"
    cell = nbformat.v4.new_code_cell(test)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": points,
                                 "grade_id": gid, "schema_version": 3}
    return [sol, cell]


def release_course(root: Path, source_notebook: Callable[[Path, str, list[str]], None]) -> str:
    """Write the two-notebook course with `source_notebook(path, title, grade ids)` and release it into `root`."""
    from torchlens_widgets.course.release import release_path

    src = root.parent / "source"
    src.mkdir()
    source_notebook(src / "01-alpha.ipynb", "Alpha", ["01-answer", "01-word"])
    source_notebook(src / "02-beta.ipynb", "Beta", ["02-only"])
    release_path(src, root)
    return "01-alpha.ipynb"


def _source_notebook(path: Path, title: str, grades: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\n**Thesis.** {title} in one line.")]
    for gid in grades:
        nb.cells += exercise_cells(gid)
    nb.cells.append(nbformat.v4.new_code_cell(f"print({AFTER!r})"))  # teaching after the exercises
    nbformat.write(nb, path)


def write_notebook(root: Path) -> str:
    """Release a two-notebook course into the server's root (the `lab` fixture's hook)."""
    return release_course(root, _source_notebook)


def _open(page, lab) -> None:
    page.goto(lab.lab_url(), wait_until="domcontentloaded", timeout=60_000)
    page.wait_for_selector(f"{SIDEBAR} .tlw-course-list", timeout=60_000)  # opens by itself the first time


def _wait_at(page, path: str, grade_id: str | None) -> None:
    """Wait until `path` is the notebook in front and, with a grade id, that cell is the active one."""
    cell = "true" if grade_id is None else (
        f"(w.content.activeCell?.model.getMetadata('nbgrader') || {{}}).grade_id === '{grade_id}'")
    page.wait_for_function(f"() => {{ const w = window.jupyterapp.shell.currentWidget;"
                           f" return w?.context?.path === '{path}' && {cell}; }}", timeout=30_000)


def _expand(page, number: str) -> None:
    toggle = page.locator(f"{SIDEBAR} [data-key='toggle:{number}']")
    if toggle.get_attribute("aria-expanded") != "true":
        toggle.click()
    page.wait_for_selector(f"{SIDEBAR} #tlw-course-ex-{number}")


def _status(page, gid: str) -> str | None:
    return page.get_attribute(f"{SIDEBAR} .tlw-course-ex li:has([data-grade-id='{gid}'])", "data-status")


def test_sidebar_lists_the_course_in_order_with_progress(page, lab, request) -> None:
    with screenshot_on_failure(page, lab, request.node.name):
        _open(page, lab)
        numbers = page.eval_on_selector_all(f"{SIDEBAR} .tlw-course-nb", "els => els.map(e => e.dataset.notebook)")
        assert numbers == ["01", "02"]
        titles = page.eval_on_selector_all(f"{SIDEBAR} .tlw-course-open", "els => els.map(e => e.textContent)")
        assert titles == ["01 · Alpha", "02 · Beta"]
        bar = page.locator(f"{SIDEBAR} [data-notebook='01'] [role=progressbar]")
        assert bar.get_attribute("aria-valuemax") == "3" and bar.get_attribute("aria-valuenow") == "0"
        assert page.locator(f"{SIDEBAR} [data-notebook='01'] .tlw-course-bar > span").count() == 2  # one per exercise
        # the notebook open is the current one: its exercises are listed, not passed yet
        assert _status(page, "01-answer") == "not passed" and _status(page, "01-word") == "not passed"
        # palette command: the notebook after the one in front
        page.evaluate("() => window.jupyterapp.commands.execute('torchlens-course:next-notebook')")
        _wait_at(page, "02-beta.ipynb", None)
        # keyboard: a notebook's title button is reachable and opens it with Enter
        page.focus(f"{SIDEBAR} [data-key='open:01']")
        page.keyboard.press("Enter")
        _wait_at(page, "01-alpha.ipynb", None)
        # palette command: the first exercise not passed, from the notebook in front: its answer cell selected
        page.evaluate("() => window.jupyterapp.commands.execute('torchlens-course:next-exercise')")
        _wait_at(page, "01-alpha.ipynb", "01-answer-answer")
        # a click on an exercise opens its notebook at its answer cell
        _expand(page, "02")
        page.click(f"{SIDEBAR} [data-key='ex:02-only']")
        _wait_at(page, "02-beta.ipynb", "02-only-answer")
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "course-sidebar-e2e.png"))


def test_a_passed_check_shows_then_validate_and_reset(page, lab, request) -> None:
    from playwright.sync_api import expect

    with screenshot_on_failure(page, lab, request.node.name):
        _open(page, lab)
        page.wait_for_function("() => window.jupyterapp.shell.currentWidget?.context?.path === '01-alpha.ipynb'")
        wait_kernel_idle(page)
        answer, test = (page.evaluate(JS_CELL_INDEX, gid) for gid in ("01-answer-answer", "01-answer"))
        assert STUB_MARK in page.evaluate(JS_SOURCE, answer)  # the released stub

        # 1. Pass the check in the notebook: the sidebar follows without a reload.
        page.evaluate(JS_SET_AND_RUN, [answer, "answer = 42"])
        page.evaluate(JS_SET_AND_RUN, [test, None])
        expect(page.locator(".jp-Cell .jp-OutputArea-output", has_text="✓ 01-answer")).to_be_visible(timeout=60_000)
        shown = time.monotonic()
        page.wait_for_function(
            f"() => document.querySelector(\"{SIDEBAR} li[data-status='visible'] [data-grade-id='01-answer']\")",
            timeout=1_500)  # the kernel-message path; the 5 s poll would usually miss this
        print(f"sidebar updated {time.monotonic() - shown:.2f} s after the check's output showed")
        bar = page.locator(f"{SIDEBAR} [data-notebook='01'] [role=progressbar]")
        assert bar.get_attribute("aria-valuenow") == "2"
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "course-sidebar-passed-e2e.png"))

        # 2. Validate the saved notebook: each visible check reported, the hidden tests said to be pending.
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.click(f"{SIDEBAR} [data-key='validate:01']")
        checks = page.locator(f"{SIDEBAR} .tlw-course-checks")
        expect(checks.locator("[data-grade-id='01-answer'][data-status='passed']")).to_be_visible(timeout=120_000)
        expect(checks.locator("[data-grade-id='01-word'][data-status='not attempted']")).to_be_visible()
        expect(page.locator(f"{SIDEBAR} .tlw-course-validation")).to_contain_text("hidden tests")
        expect(page.locator(f"{SIDEBAR} .tlw-course-validation")).to_contain_text("1 of 2 checks passed")
        page.screenshot(path=str(SHOTS / "course-validate-e2e.png"))

        # 3. Reset the exercise: confirm, the stub comes back (file and open notebook), a backup keeps the answer.
        page.click(f"{SIDEBAR} [data-key='reset:01-answer']")
        page.click(".jp-Dialog button.jp-mod-accept")
        expect(page.locator(f"{SIDEBAR} .tlw-course-said")).to_contain_text("kept at", timeout=30_000)
        on_disk = nbformat.read(lab.root / "01-alpha.ipynb", as_version=4)
        cell = next(c for c in on_disk.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "01-answer-answer")
        assert STUB_MARK in cell.source and "answer = 42" not in cell.source
        backups = list((lab.root / ".torchlens" / "backups").glob("01-alpha.*.01-answer.ipynb"))
        assert len(backups) == 1 and "answer = 42" in backups[0].read_text()
        page.wait_for_function(f"() => ({JS_SOURCE})({answer}).includes('{STUB_MARK}')", timeout=15_000)



def test_sidebar_works_in_notebook_7(page, lab, request) -> None:
    """Notebook 7 has no ILabShell; the sidebar goes into its left area, shown from View › Left Sidebar."""
    pytest.importorskip("notebook", minversion="7")
    from playwright.sync_api import expect

    with screenshot_on_failure(page, lab, request.node.name):
        page.goto(f"{lab.url}/notebooks/01-alpha.ipynb?token={lab.token}", wait_until="domcontentloaded", timeout=60_000)
        page.wait_for_selector(f"{SIDEBAR} .tlw-course-list", state="attached", timeout=60_000)
        if not page.is_visible(f"{SIDEBAR} .tlw-course-list"):
            page.get_by_text("View", exact=True).first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Left Sidebar").first.hover()
            page.locator(".lm-Menu-itemLabel", has_text="Show Course").first.click()
        expect(page.locator(f"{SIDEBAR} .tlw-course-list")).to_be_visible(timeout=10_000)
        assert page.locator(f"{SIDEBAR} .tlw-course-nb").count() == 2
        expect(page.locator(f"{SIDEBAR} [data-notebook='01']")).to_have_attribute("aria-current", "true")
        page.screenshot(path=str(SHOTS / "course-sidebar-notebook7-e2e.png"))

@pytest.mark.parametrize("theme", ["JupyterLab Dark", "JupyterLab Light"])
def test_sidebar_text_is_readable_in_both_themes(page, lab, request, theme: str) -> None:
    """Every text of the sidebar (passed and open exercises, totals, notes) reaches 4.5:1 on what is under it."""
    from .contrast import low_contrast, set_lab_theme, text_contrast

    with screenshot_on_failure(page, lab, request.node.name):
        _open(page, lab)
        set_lab_theme(page, theme)
        _expand(page, "02")
        texts = text_contrast(page, SIDEBAR)
        assert len(texts) >= 10, texts
        assert not low_contrast(texts), low_contrast(texts)
        assert min(t["size"] for t in texts) >= 10, texts
        print(f"{theme}: lowest contrast {min(t['ratio'] for t in texts):.2f}:1 over {len(texts)} texts")
        page.screenshot(path=str(SHOTS / f"course-sidebar-{theme.split()[-1].lower()}-e2e.png"))


def test_run_all_goes_on_past_an_unanswered_exercise(page, lab, request) -> None:
    """A fresh student copy: Run All runs every cell (the answer and test cells carry raises-exception), so the
    teaching after an unanswered exercise shows; the exercise's check still failed (it scores 0)."""
    from .lab import JS_RUN

    with screenshot_on_failure(page, lab, request.node.name):
        page.goto(f"{lab.url}/lab/tree/02-beta.ipynb?reset&token={lab.token}", wait_until="domcontentloaded",
                  timeout=60_000)
        page.wait_for_function("() => window.jupyterapp?.shell.currentWidget?.context?.path === '02-beta.ipynb'",
                               timeout=60_000)
        wait_kernel_idle(page)
        try:
            page.evaluate(JS_RUN, ["notebook:run-all-cells", 60_000])
        except Exception:  # Lab's command reports the cell error; the kernel goes on with the queued cells
            pass
        page.wait_for_function("""text => window.jupyterapp.shell.currentWidget.content.widgets.some(c =>
            c.model.type === 'code' && JSON.stringify(c.model.outputs.toJSON()).includes(text))""", arg=AFTER,
                               timeout=60_000, polling=200)
        failed = page.evaluate("""() => window.jupyterapp.shell.currentWidget.content.widgets
            .filter(c => c.model.type === 'code' && c.model.outputs.toJSON().some(o => o.output_type === 'error'))
            .map(c => (c.model.getMetadata('nbgrader') || {}).grade_id)""")
        assert failed and all(g in ("02-only-answer", "02-only") for g in failed), failed
        page.screenshot(path=str(SHOTS / "course-run-all-past-an-exercise.png"))
