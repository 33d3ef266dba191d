"""Driving JupyterLab from Playwright for the browser tests: run cells, wait for the kernel, read errors."""

from __future__ import annotations

from contextlib import contextmanager

CELL_TIMEOUT_S = 30

JS_KERNEL_IDLE = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.sessionContext || !panel.content || !panel.content.model) return false;
  const ctx = panel.sessionContext;
  const kernel = ctx.session && ctx.session.kernel;
  return ctx.isReady && !!kernel && kernel.status === 'idle' && kernel.connectionStatus === 'connected';
}"""

JS_RUN = """async ([command, timeoutMs]) => {
  const app = window.jupyterapp;
  const timeout = new Promise((_, reject) =>
    setTimeout(() => reject(new Error(`${command} did not finish in ${timeoutMs} ms`)), timeoutMs));
  return await Promise.race([app.commands.execute(command), timeout]);
}"""

JS_APPEND_CELL = """([source, tag]) => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  const n = nb.model.sharedModel.cells.length;
  nb.model.sharedModel.insertCell(n, {cell_type: 'code', source});
  return n;
}"""

JS_MARK_AND_SELECT = """([index, tag]) => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  const cell = nb.widgets[index];
  if (!cell) return false;
  cell.node.setAttribute('data-tlw-e2e', tag);
  nb.activeCellIndex = index;
  nb.deselectAll();
  return nb.activeCell === cell;
}"""

# Every code cell executed, the kernel idle, no cell still queued/running.
JS_ALL_EXECUTED = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  if (!kernel || kernel.status !== 'idle') return false;
  for (const cell of panel.content.widgets) {
    if (cell.model.type !== 'code') continue;
    if (cell.model.executionCount === null) return false;
    if (cell.model.executionState && cell.model.executionState !== 'idle') return false;
  }
  return true;
}"""

# Error outputs of cells not tagged raises-exception: [cell index, ename, evalue].
JS_ERRORS = """() => {
  const out = [];
  window.jupyterapp.shell.currentWidget.content.widgets.forEach((cell, i) => {
    if (cell.model.type !== 'code') return;
    const tags = cell.model.getMetadata('tags') || [];
    if (tags.includes('raises-exception')) return;
    const outputs = cell.model.outputs;
    for (let k = 0; k < outputs.length; k++) {
      const o = outputs.get(k).toJSON();
      if (o.output_type === 'error') out.push([i, o.ename, o.evalue]);
    }
  });
  return out;
}"""


@contextmanager
def screenshot_on_failure(page, lab, name: str):
    try:
        yield
    except Exception as exc:
        shot = lab.tmp / f"{name}-failure.png"
        try:
            page.screenshot(path=str(shot), full_page=True)
            where = f"screenshot: {shot}"
        except Exception as shot_exc:  # the page may be gone
            where = f"no screenshot ({shot_exc!r})"
        raise AssertionError(
            f"{exc}\n\n{where}\nserver log: {lab.log}\n--- server log tail ---\n{lab.log_tail(2000)}"
        ) from exc


def wait_kernel_idle(page, timeout_s: float = 60) -> None:
    page.wait_for_function(JS_KERNEL_IDLE, timeout=timeout_s * 1000, polling=200)


def append_and_run(page, source: str, tag: str):
    """Append a code cell, run it, wait for the kernel to finish it; return a locator of the cell."""
    index = page.evaluate(JS_APPEND_CELL, [source, tag])
    page.wait_for_function(
        "(i) => window.jupyterapp.shell.currentWidget.content.widgets.length > i", arg=index, polling=100
    )
    assert page.evaluate(JS_MARK_AND_SELECT, [index, tag]), f"could not make the appended cell {index} active"
    page.evaluate(JS_RUN, ["notebook:run-cell", CELL_TIMEOUT_S * 1000])
    page.wait_for_function(JS_ALL_EXECUTED, timeout=CELL_TIMEOUT_S * 1000, polling=100)
    errors = page.evaluate(JS_ERRORS)
    assert not errors, f"cells raised: {errors}"
    return page.locator(f'[data-tlw-e2e="{tag}"]')


def open_and_run_all(page, lab, run_timeout_ms: int = 120_000, settle_timeout_ms: int = 60_000) -> None:
    """Open the lab's notebook, wait for its kernel, run every cell; fail on any cell error."""
    page.goto(lab.lab_url(), wait_until="domcontentloaded", timeout=60_000)
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function("() => !!window.jupyterapp", timeout=30_000)
    wait_kernel_idle(page)
    page.evaluate(JS_RUN, ["notebook:run-all-cells", run_timeout_ms])
    page.wait_for_function(JS_ALL_EXECUTED, timeout=settle_timeout_ms, polling=200)
    errors = page.evaluate(JS_ERRORS)
    assert not errors, f"notebook cells raised: {errors}"
