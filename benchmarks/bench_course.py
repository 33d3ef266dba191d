"""The course home's figures: lab extension size, sidebar first render with 20 notebooks, validate overhead.

Targets (issue 9): the extension's JavaScript (all chunks) ≤ 150 KB; the sidebar drawn ≤ 300 ms after
JupyterLab is ready (Chromium, a 20-notebook course); validating a notebook that runs 60 s returns within
its run time + 5 s. Starts a private JupyterLab on a scratch course (never the learner's files). Needs
/usr/bin/chromium and playwright. Run: .venv/bin/python benchmarks/bench_course.py [--skip-validate]
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
LABEXT = ROOT / "torchlens_widgets" / "labextension"
CHROMIUM = "/usr/bin/chromium"
SIZE_BUDGET = 150 * 1024
RENDER_BUDGET_MS = 300
VALIDATE_GRACE_S = 5
NOTEBOOKS = 20
RUN_S = 60

# In the page before any script: the time JupyterLab says it is ready (app.restored) and the time the
# sidebar's notebook list first exists in the DOM.
INIT = """(() => {
  const mark = {};
  window.__tlw = mark;
  const poll = () => {
    const app = window.jupyterapp;
    if (app && !mark.hooked) { mark.hooked = true; app.restored.then(() => { mark.ready = performance.now(); }); }
    if (!mark.drawn && document.querySelector('#torchlens-course .tlw-course-list')) mark.drawn = performance.now();
    if (!mark.drawn || !mark.ready) requestAnimationFrame(poll);
  };
  requestAnimationFrame(poll);
})();"""


def _course(folder: Path) -> None:
    """NOTEBOOKS notebooks of 4 exercises and ~100 KB each (outputs included), like the real ones."""
    for n in range(1, NOTEBOOKS + 1):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_markdown_cell(f"# {n:02d} · Notebook {n}\n\n**Thesis.** Notebook {n} in one line.")]
        filler = nbformat.v4.new_code_cell("print('x')")
        filler.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 100_000)]
        nb.cells.append(filler)
        for k in range(4):
            gid = f"{n:02d}-ex{k}"
            cell = nbformat.v4.new_code_cell(f"# test {gid}")
            cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": k + 1,
                                         "grade_id": gid, "schema_version": 3}
            nb.cells.append(cell)
        nbformat.write(nb, folder / f"{n:02d}-notebook-{n}.ipynb")


def _slow_notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    test = nbformat.v4.new_code_cell("from torchlens_widgets.course import check\n"
                                     "with check('01-slow', points=1) as c:\n    c.equal(1, 1, what='one')")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 1,
                                 "grade_id": "01-slow", "schema_version": 3}
    # two halves: a single cell may run at most the server's cell_timeout (60 s by default)
    nb.cells = [nbformat.v4.new_code_cell(f"import time\ntime.sleep({RUN_S / 2})") for _ in range(2)] + [test]
    nbformat.write(nb, path)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lab(root: Path, tmp: Path) -> tuple[subprocess.Popen, str, str]:
    port, token = _port(), secrets.token_hex(8)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp / "cfg"), JUPYTER_RUNTIME_DIR=str(tmp / "rt"),
               JUPYTER_DATA_DIR=str(tmp / "data"), TORCHLENS_PROGRESS=str(tmp / "progress.json"),
               TORCHLENS_VALIDATE_TIMEOUT=str(RUN_S + 60))
    settings = tmp / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
           f"--LabApp.user_settings_dir={tmp / 'settings'}", f"--LabApp.workspaces_dir={tmp / 'ws'}",
           "--LabApp.extension_manager=readonly"]
    if os.geteuid() == 0:
        cmd.append("--ServerApp.allow_root=True")
    proc = subprocess.Popen(cmd, env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            time.sleep(0.25)
    return proc, url, token


def sizes() -> None:
    files = sorted((LABEXT / "static").glob("*.js"))
    if not files:
        raise SystemExit(f"no lab extension build in {LABEXT}: run `make env` (or npm run build:lab in labextension/)")
    total = sum(f.stat().st_size for f in files)
    print(f"lab extension JavaScript: {total / 1024:.1f} KB in {len(files)} files (budget {SIZE_BUDGET // 1024} KB)"
          f" {'OK' if total <= SIZE_BUDGET else 'OVER'}")
    for f in files:
        print(f"  {f.name:48s} {f.stat().st_size / 1024:7.1f} KB")


def first_render(url: str, token: str, runs: int = 5) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        after_ready = []
        for _ in range(runs):
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            page = context.new_page()
            page.add_init_script(INIT)
            page.goto(f"{url}/lab?reset&token={token}")
            page.wait_for_function("() => window.__tlw && window.__tlw.drawn && window.__tlw.ready", timeout=90_000)
            mark = page.evaluate("() => window.__tlw")
            rows = page.locator("#torchlens-course .tlw-course-nb").count()
            assert rows == NOTEBOOKS, rows
            after_ready.append(mark["drawn"] - mark["ready"])
            context.close()
        browser.close()
    after_ready.sort()
    median = after_ready[len(after_ready) // 2]
    print(f"sidebar with {NOTEBOOKS} notebooks drawn {median:.0f} ms after JupyterLab is ready (median of {runs}; "
          f"all: {', '.join(f'{t:.0f}' for t in after_ready)}; budget {RENDER_BUDGET_MS} ms) "
          f"{'OK' if median <= RENDER_BUDGET_MS else 'OVER'}")


def validate(url: str, token: str) -> None:
    req = urllib.request.Request(f"{url}/torchlens/api/validate", data=json.dumps({"path": "01-notebook-1.ipynb"}).encode(),
                                 headers={"Authorization": f"token {token}"}, method="POST")
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=RUN_S + 120) as resp:
        report = json.loads(resp.read())
    took = time.monotonic() - t0
    statuses = [c["status"] for c in report["checks"]]
    print(f"validate of a notebook that sleeps {RUN_S} s: returned in {took:.1f} s (kernel run {report.get('seconds')} s, "
          f"checks {statuses}); overhead {took - RUN_S:.1f} s (budget {VALIDATE_GRACE_S} s) "
          f"{'OK' if took <= RUN_S + VALIDATE_GRACE_S else 'OVER'}")


def main() -> None:
    sizes()
    with tempfile.TemporaryDirectory(prefix="tlw-bench-course-") as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "course"
        root.mkdir()
        _course(root)
        proc, url, token = _lab(root, tmp)
        try:
            first_render(url, token)
            if "--skip-validate" not in sys.argv:
                _slow_notebook(root / "01-notebook-1.ipynb")
                validate(url, token)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)


if __name__ == "__main__":
    main()
