"""The course sidebar's actions keep the learner's place (issue 25, items 1, 6 and 8); an opened notebook is not
unsaved (item 10).

Notebook 7: opening an exercise from the sidebar stays in the page's own notebook (no second browser tab, the
notebook panel still there) and shows the exercise; "Course: next exercise", Validate and Reset work there too.
Both front ends: an exercise opens on its heading (its statement in view, not scrolled off by the answer cell),
Reset keeps that view, its dialog focuses Cancel (Enter cancels), and its message opens the backup.

The course is two released notebooks, long enough that the view scrolls: teaching cells, then each exercise's
heading, statement, setup code, answer and check.
"""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest

from .lab import screenshot_on_failure
from .test_course_sidebar import SIDEBAR, STUB_MARK, _expand, exercise_cells, release_course

pytestmark = pytest.mark.browser

SHOTS = Path("/tmp/shots")
FILLER = "\n\n".join(f"Teaching paragraph {k}: words about tensors, views and strides that take up a line or two "
                     "of the page so that the notebook is taller than the window." for k in range(8))
SETUP = "\n".join(f"setup_{k} = {k}  # setup the exercise needs" for k in range(8))

# The rendered heading of an exercise's statement, and where it is in the notebook's view (px from the top of
# the element that scrolls the notebook, and that element's height).
JS_WHERE = """text => {
  const cell = [...document.querySelectorAll('.jp-MarkdownCell')].find(c => {
    const h = c.querySelector('h1, h2, h3'); return h && h.textContent.includes(text); });
  if (!cell) return null;
  let s = cell.parentElement;
  while (s && !(/(auto|scroll)/.test(getComputedStyle(s).overflowY) && s.scrollHeight > s.clientHeight)) s = s.parentElement;
  const r = cell.getBoundingClientRect(), v = (s || document.documentElement).getBoundingClientRect();
  return {top: r.top - v.top, bottom: r.bottom - v.top, height: v.height};
}"""


def _heading(gid: str) -> str:
    return f"Exercise {gid}"


def _source_notebook(path: Path, title: str, grades: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\n**Thesis.** {title} in one line.")]
    for gid in grades:
        nb.cells += [nbformat.v4.new_markdown_cell(f"## Before {gid}\n\n{FILLER}"),
                     nbformat.v4.new_code_cell(SETUP),
                     nbformat.v4.new_markdown_cell(f"## {_heading(gid)}\n\nThe statement of {gid}: do what it says."),
                     nbformat.v4.new_markdown_cell("A hint, in a cell of its own."),
                     nbformat.v4.new_code_cell(SETUP),
                     *exercise_cells(gid)]
    nb.cells += [nbformat.v4.new_markdown_cell(f"## After the exercises\n\n{FILLER}"), nbformat.v4.new_code_cell(SETUP)]
    nbformat.write(nb, path)


def write_notebook(root: Path) -> str:
    """Release the taller two-notebook course into the server's root (the `lab` fixture's hook)."""
    return release_course(root, _source_notebook)


def _shot(page, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / name))


def _in_view(page, gid: str, timeout_s: float = 15) -> dict:
    """Wait until the heading of `gid`'s statement is at the top of the notebook's view (its top within the first
    third, not above it); return where it is."""
    deadline, where = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        where = page.evaluate(JS_WHERE, _heading(gid))
        if where and -4 <= where["top"] <= where["height"] / 3:
            time.sleep(0.5)  # and it stays there (nothing scrolls it away once the cells settle)
            again = page.evaluate(JS_WHERE, _heading(gid))
            if again and -4 <= again["top"] <= again["height"] / 3:
                return again
        time.sleep(0.2)
    raise AssertionError(f"the heading of {gid} is not at the top of the notebook's view: {where}")


def _notebook7(page, lab, name: str = "01-alpha.ipynb") -> None:
    from playwright.sync_api import expect

    page.goto(f"{lab.url}/notebooks/{name}?token={lab.token}", wait_until="domcontentloaded", timeout=60_000)
    page.wait_for_selector(f"{SIDEBAR} .tlw-course-list", state="attached", timeout=60_000)
    page.wait_for_selector(".jp-NotebookPanel .jp-MarkdownCell h2", timeout=60_000)
    if not page.is_visible(f"{SIDEBAR} .tlw-course-list"):
        page.get_by_text("View", exact=True).first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Left Sidebar").first.hover()
        page.locator(".lm-Menu-itemLabel", has_text="Show Course").first.click()
    expect(page.locator(f"{SIDEBAR} .tlw-course-list")).to_be_visible(timeout=10_000)
    expect(page.locator(".jp-NotebookPanel .jp-KernelStatus, .jp-NotebookKernelStatus").first).to_be_attached()


def _same_tab(page, cells: int) -> None:
    """Still one page, its notebook panel there with every cell (the bug blanked it and opened a second tab)."""
    time.sleep(1.5)  # a second tab, if one were opened, has shown up by now
    assert len(page.context.pages) == 1, [p.url for p in page.context.pages]
    assert page.locator(".jp-NotebookPanel").count() == 1
    assert page.locator(".jp-NotebookPanel").first.is_visible()
    assert page.locator(".jp-NotebookPanel .jp-Cell").count() == cells
    assert "/notebooks/01-alpha.ipynb" in page.url


def test_notebook_7_every_sidebar_action_stays_in_the_tab(page, lab, request) -> None:
    """Item 1 (and 6, 8 in Notebook 7): open an exercise, next exercise, validate, reset, open the backup."""
    pytest.importorskip("notebook", minversion="7")
    from playwright.sync_api import expect

    with screenshot_on_failure(page, lab, request.node.name):
        _notebook7(page, lab)
        cells = page.locator(".jp-NotebookPanel .jp-Cell").count()
        _expand(page, "01")

        # open an exercise: the same tab scrolls to the exercise's heading
        page.click(f"{SIDEBAR} [data-key='ex:01-word']")
        where = _in_view(page, "01-word")
        _same_tab(page, cells)
        _shot(page, "item1-notebook7-open-exercise-after.png")
        print(f"open exercise: heading {where['top']:.0f} px from the top of a {where['height']:.0f} px view")

        # next exercise, from the command palette: the first not passed (01-answer), in the same tab
        page.keyboard.press("Control+Shift+c")
        palette = page.locator(".lm-CommandPalette-input")
        expect(palette).to_be_visible(timeout=10_000)
        palette.fill("Course: next exercise")
        expect(page.locator(".lm-CommandPalette-item", has_text="Course: next exercise").first).to_be_visible()
        page.keyboard.press("Enter")
        _in_view(page, "01-answer")
        _same_tab(page, cells)
        _shot(page, "item1-notebook7-next-exercise-after.png")

        # validate: each visible check reported in the sidebar; the page keeps its notebook
        page.click(f"{SIDEBAR} [data-key='validate:01']")
        checks = page.locator(f"{SIDEBAR} .tlw-course-checks")
        expect(checks.locator("[data-grade-id='01-answer']")).to_be_visible(timeout=120_000)
        expect(checks.locator("[data-grade-id='01-word'][data-status='not attempted']")).to_be_visible()
        _same_tab(page, cells)
        _shot(page, "item1-notebook7-validate-after.png")

        # reset: answer 01-word, save, then Reset; the dialog focuses Cancel, so Enter changes nothing
        page.click(f"{SIDEBAR} [data-key='ex:01-word']")
        _in_view(page, "01-word")
        editor = page.locator(".jp-CodeCell.jp-mod-active .cm-content")
        editor.click()
        page.keyboard.press("Control+a")
        page.keyboard.type("word = 'mine'")
        page.keyboard.press("Escape")
        page.keyboard.press("Control+s")
        page.wait_for_function("() => !document.title.startsWith('*')", timeout=10_000)
        deadline = time.monotonic() + 10
        while "word = 'mine'" not in (lab.root / "01-alpha.ipynb").read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        saved = (lab.root / "01-alpha.ipynb").read_text()
        assert "word = 'mine'" in saved
        page.click(f"{SIDEBAR} [data-key='reset:01-word']")
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_be_visible()
        focused = page.evaluate("() => [document.activeElement.textContent, document.activeElement.className]")
        assert "Cancel" in focused[0] and "jp-mod-reject" in focused[1], focused
        _shot(page, "item8-notebook7-reset-dialog-after.png")
        page.keyboard.press("Enter")
        expect(dialog).to_have_count(0)
        time.sleep(1)
        assert (lab.root / "01-alpha.ipynb").read_text() == saved  # Enter cancelled: nothing reset
        assert page.locator(f"{SIDEBAR} .tlw-course-said").count() == 0

        page.click(f"{SIDEBAR} [data-key='reset:01-word']")
        page.click(".jp-Dialog button.jp-mod-accept")
        said = page.locator(f"{SIDEBAR} .tlw-course-said")
        expect(said).to_contain_text("kept at", timeout=30_000)
        assert "word = 'mine'" not in (lab.root / "01-alpha.ipynb").read_text()
        expect(page.locator(".jp-CodeCell.jp-mod-active")).to_contain_text(STUB_MARK, timeout=15_000)
        _in_view(page, "01-word")  # the view stayed on the exercise
        _same_tab(page, cells)
        _shot(page, "item8-notebook7-reset-done-after.png")

        # the message opens the backup (in Notebook 7, a notebook of its own opens in its own tab)
        with page.context.expect_page(timeout=30_000) as opened:
            said.locator("button", has_text="Open backup").click()
        backup = opened.value
        backup.wait_for_url("**/notebooks/backups/01-alpha.*.01-word.ipynb*", timeout=30_000)
        expect(backup.locator(".jp-CodeCell", has_text="word = 'mine'")).to_be_visible(timeout=60_000)
        _shot(backup, "item8-notebook7-backup-opened-after.png")


def test_jupyterlab_opens_on_the_heading_keeps_the_view_after_reset_and_opens_the_backup(page, lab, request) -> None:
    """Items 6 and 8 in JupyterLab."""
    from playwright.sync_api import expect

    with screenshot_on_failure(page, lab, request.node.name):
        page.goto(f"{lab.url}/lab/tree/02-beta.ipynb?reset&token={lab.token}", wait_until="domcontentloaded",
                  timeout=60_000)
        page.wait_for_function("() => window.jupyterapp?.shell.currentWidget?.context?.path === '02-beta.ipynb'",
                               timeout=60_000)
        page.wait_for_selector(f"{SIDEBAR} .tlw-course-list", timeout=60_000)
        page.wait_for_selector(".jp-NotebookPanel .jp-MarkdownCell h2", timeout=60_000)
        _expand(page, "01")
        page.click(f"{SIDEBAR} [data-key='ex:01-word']")
        page.wait_for_function("""() => { const w = window.jupyterapp.shell.currentWidget;
            return w?.context?.path === '01-alpha.ipynb' &&
              (w.content.activeCell?.model.getMetadata('nbgrader') || {}).grade_id === '01-word-answer'; }""")
        before = _in_view(page, "01-word")
        _shot(page, "item6-lab-open-exercise-after.png")
        # item 10: with their kernels up, neither notebook (opened, never edited) shows as unsaved: Lab rewrote the
        # kernelspec and language_info of a copy whose metadata was not this kernel's
        page.wait_for_function("""() => [...window.jupyterapp.shell.widgets('main')].filter(w => w.sessionContext)
            .every(w => w.sessionContext.session?.kernel?.status === 'idle')""", timeout=60_000)
        time.sleep(1.0)
        assert page.evaluate("""() => [...window.jupyterapp.shell.widgets('main')].filter(w => w.context)
            .map(w => [w.context.path, w.context.model.dirty])""") == [["02-beta.ipynb", False],
                                                                      ["01-alpha.ipynb", False]]
        # opening it again (already open) brings the same panel forward, not a second one
        page.click(f"{SIDEBAR} [data-key='ex:01-answer']")
        _in_view(page, "01-answer")
        page.click(f"{SIDEBAR} [data-key='ex:01-word']")
        _in_view(page, "01-word")
        assert page.evaluate("""() => [...window.jupyterapp.shell.widgets('main')]
            .filter(w => w.context?.path === '01-alpha.ipynb').length""") == 1

        page.evaluate("""() => { const nb = window.jupyterapp.shell.currentWidget.content;
            nb.activeCell.model.sharedModel.setSource("word = 'mine'"); }""")
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.click(f"{SIDEBAR} [data-key='reset:01-word']")
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_be_visible()
        assert page.evaluate("() => document.activeElement.textContent").strip() == "Cancel"
        page.keyboard.press("Enter")
        expect(dialog).to_have_count(0)
        assert "word = 'mine'" in (lab.root / "01-alpha.ipynb").read_text()

        page.click(f"{SIDEBAR} [data-key='reset:01-word']")
        page.click(".jp-Dialog button.jp-mod-accept")
        expect(page.locator(f"{SIDEBAR} .tlw-course-said")).to_contain_text("kept at", timeout=30_000)
        page.wait_for_function(f"""() => window.jupyterapp.shell.currentWidget.content.widgets.some(c =>
            c.model.sharedModel.getSource().includes('{STUB_MARK}') &&
            (c.model.getMetadata('nbgrader') || {{}}).grade_id === '01-word-answer')""", timeout=15_000)
        after = _in_view(page, "01-word")
        assert abs(after["top"] - before["top"]) < 40, (before, after)  # the view did not jump
        assert page.evaluate("""() => (window.jupyterapp.shell.currentWidget.content.activeCell
            ?.model.getMetadata('nbgrader') || {}).grade_id""") == "01-word-answer"
        _shot(page, "item6-lab-after-reset-after.png")

        # the notification (in the notification centre: the test's Lab is in do-not-disturb mode) opens the backup
        page.locator(".jp-Notification-Status").click()
        action = page.locator(".jp-Notification-List button, .jp-toast-button", has_text="Open backup").first
        expect(action).to_be_visible(timeout=10_000)
        _shot(page, "item8-lab-notification-after.png")
        action.click()
        page.wait_for_function("""() => /^backups\\/01-alpha\\..*\\.01-word\\.ipynb$/.test(
            window.jupyterapp.shell.currentWidget?.context?.path || '')""", timeout=30_000)
        expect(page.locator(".jp-NotebookPanel:visible .jp-CodeCell", has_text="word = 'mine'")).to_be_visible()
        _shot(page, "item8-lab-backup-opened-after.png")
