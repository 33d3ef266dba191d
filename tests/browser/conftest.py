"""Fixtures for real-browser tests: a private JupyterLab server and headless Debian Chromium.

Nothing is downloaded: the browser is the system's /usr/bin/chromium (CI installs it; the tests are
skipped, visibly, where it is missing), and JupyterLab is the one of the Python running pytest.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "02-storage-views-strides.ipynb"
STATIC = REPO / "torchlens_widgets" / "static"
BUNDLE = STATIC / "stride.js"
CHROMIUM = Path(os.environ.get("TLW_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_TIMEOUT_S = 60

# User settings for the private Lab: no news/update toasts (they can cover outputs and catch clicks),
# and no notebook windowing (every cell stays in the DOM, so off-screen outputs can be located).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
        "doNotDisturbMode": True,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


@dataclass
class Lab:
    url: str  # http://127.0.0.1:<port>
    token: str
    root: Path  # the server's root_dir; the notebook lives here
    notebook: str  # its name under root
    tmp: Path  # scratch dir for logs and screenshots
    log: Path

    def lab_url(self) -> str:
        return f"{self.url}/lab/tree/{self.notebook}?reset&token={self.token}"

    def api(self, path: str, method: str = "GET") -> object:
        req = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return "(no server log)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chromium_executable() -> str:
    if not CHROMIUM.exists():
        pytest.skip(f"browser test needs Chromium at {CHROMIUM} (apt-get install chromium); it is not installed")
    return str(CHROMIUM)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Lab:
    """JupyterLab on a free port of 127.0.0.1 serving a copy of notebook 02, with private config and state.

    A test module may serve its own notebook instead: it defines `write_notebook(root) -> name` (writes
    the notebook into the server's root) and `LAB_BUNDLES` (the widget bundles it needs).
    """
    write_notebook = getattr(request.module, "write_notebook", None)
    bundles = [STATIC / f"{b}.js" for b in getattr(request.module, "LAB_BUNDLES", ())] or [BUNDLE]
    if write_notebook is None and not NOTEBOOK.exists():
        pytest.fail(f"{NOTEBOOK} is missing: the browser test runs that course notebook")
    for bundle in bundles:
        if not bundle.exists():
            pytest.fail(f"{bundle} is missing: build the front end first (`npm run build` in labextension/)")

    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "root"
    root.mkdir()
    if write_notebook is None:
        shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
        notebook = NOTEBOOK.name
    else:
        notebook = write_notebook(root)
    settings = tmp / "user-settings"
    for rel, value in LAB_SETTINGS.items():
        path = settings / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    for d in ("config", "data", "runtime", "ipython", "workspaces"):
        (tmp / d).mkdir()

    env = dict(os.environ)
    env.update(
        # Private user-level Jupyter dirs; sys.prefix/share/jupyter (the ipywidgets and anywidget
        # labextensions, the python3 kernelspec) and sys.prefix/etc/jupyter stay on the search paths.
        JUPYTER_CONFIG_DIR=str(tmp / "config"),
        JUPYTER_DATA_DIR=str(tmp / "data"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        IPYTHONDIR=str(tmp / "ipython"),
        TORCHLENS_PROGRESS=str(tmp / "progress.json"),
        # The kernel imports torchlens_widgets from this checkout, whatever is installed.
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        PYTHONUNBUFFERED="1",
    )
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_CONFIG_PATH", None)

    port = _free_port()
    token = secrets.token_hex(16)
    log = tmp / "jupyterlab.log"
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.disable_check_xsrf=True",
        "--LabApp.expose_app_in_browser=True",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
        "--LabApp.extension_manager=readonly",  # no PyPI queries
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI containers
        cmd.append("--ServerApp.allow_root=True")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = Lab(url=f"http://127.0.0.1:{port}", token=token, root=root, notebook=notebook, tmp=tmp, log=log)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode} before serving:\n{server.log_tail()}")
            try:
                server.api("/api/status")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"jupyter lab did not answer /api/status in {SERVER_START_TIMEOUT_S} s:\n{server.log_tail()}"
                )
            time.sleep(0.25)
        yield server
    finally:
        _stop(server, proc)


def _stop(server: Lab, proc: subprocess.Popen) -> None:
    """Shut the kernels down (they run in sessions of their own), then end the server's process group."""
    if proc.poll() is None:
        try:
            for k in server.api("/api/kernels") or []:
                try:
                    server.api(f"/api/kernels/{k['id']}", method="DELETE")
                except (urllib.error.URLError, OSError):
                    pass
        except (urllib.error.URLError, OSError, ValueError):
            pass
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    # Anything left in the group (e.g. a child that ignored SIGTERM) goes too.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.fixture(scope="module")
def browser(chromium_executable: str):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_executable, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    """A page in a fresh browser context (plain launch: Playwright gives it a throwaway profile)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    p = context.new_page()
    p.set_default_timeout(30_000)
    try:
        yield p
    finally:
        context.close()


@pytest.fixture(scope="module")
def nb_page(browser, lab, request):
    """One page with the module's notebook open and run, shared by the module's tests (the notebook runs once), at
    the module's VIEWPORT (default 1,100 x 1,000 px, with the course side panel open)."""
    from .lab import open_and_run_all, screenshot_on_failure

    context = browser.new_context(viewport=getattr(request.module, "VIEWPORT", {"width": 1100, "height": 1000}))
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        with screenshot_on_failure(page, lab, f"{request.module.__name__.rsplit('.', 1)[-1]}-open"):
            open_and_run_all(page, lab, 150_000, 150_000)
        yield page
    finally:
        context.close()
