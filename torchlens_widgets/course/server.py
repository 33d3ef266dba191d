"""Jupyter server extension: the course's outline and the learner's progress over REST, validate and
reset (spec: REST.md).

Loaded by Jupyter Server (enabled on install through etc/jupyter/jupyter_server_config.d/); every
endpoint needs Jupyter's own authentication. The course folder is `c.TorchlensCourse.course_dir`, else
$TORCHLENS_COURSE_DIR, else the server's root folder; progress comes from the learner's store
(course/progress.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web
from traitlets import Float, Unicode
from traitlets.config import LoggingConfigurable

from . import sandbox
from .outline import NotebookOutline, progress_report, read_outline
from .progress import ProgressStore
from .reset import ResetError, reset_exercise, visible_backup

__all__ = ["TorchlensCourse", "course_dir", "course_notebook", "outline_payload", "progress_payload",
           "run_validation"]

ENV_COURSE = "TORCHLENS_COURSE_DIR"
ENV_VALIDATE_TIMEOUT = "TORCHLENS_VALIDATE_TIMEOUT"  # most seconds a validation may run (default 120)
ENV_RUN = "TORCHLENS_VALIDATION"  # set in a validation's processes (kernel included): names the run
API = "torchlens/api"
RESOURCE = "torchlens"  # the authorization resource name (Jupyter's Authorizer sees it)
GRACE_S = 6.0  # past the validation's own deadline, the server kills it (and its kernel) itself


class TorchlensCourse(LoggingConfigurable):
    """Settings of the course server extension (`c.TorchlensCourse.<name>` in jupyter_server_config.py,
    or `--TorchlensCourse.<name>=...` on the command line)."""

    course_dir = Unicode("", config=True, help=f"The course folder; empty: ${ENV_COURSE}, else the server's root.")
    validate_timeout = Float(0.0, config=True, help=(
        f"Most seconds one validation may run, kernel start included (0: ${ENV_VALIDATE_TIMEOUT}, else 120); "
        "a request may ask for less."))
    cell_timeout = Float(60.0, config=True, help="Most seconds one cell may run during a validation.")

    def course(self, root: Path) -> Path:
        """The course folder this server serves."""
        return Path(self.course_dir).expanduser().resolve() if self.course_dir else course_dir(root)

    def timeout_limit(self) -> float:
        """The most seconds a validation may take (config, else environment, else 120)."""
        if self.validate_timeout > 0:
            return float(self.validate_timeout)
        try:
            env = float(os.environ.get(ENV_VALIDATE_TIMEOUT, "120"))
        except ValueError:
            env = 120.0
        return env if env > 0 else 120.0


def course_dir(root: Path) -> Path:
    """The course folder without configuration: $TORCHLENS_COURSE_DIR, else the server's root folder."""
    env = os.environ.get(ENV_COURSE)
    return Path(env).expanduser().resolve() if env else root.resolve()


def _relative(path: Path, root: Path) -> str | None:
    """`path` relative to the server root, '/'-separated (what Lab opens), or None outside it."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def outline_payload(course: Path, root: Path) -> dict[str, Any]:
    """Every course notebook in order with its title, thesis, exercises and points."""
    outline = read_outline(course) if course.is_dir() else []
    return {
        "course_dir": str(course),
        "notebooks": [_notebook(nb, root) for nb in outline],
        "problem": None if course.is_dir() else f"course folder {course} does not exist; set {ENV_COURSE}",
    }


def _notebook(nb: NotebookOutline, root: Path) -> dict[str, Any]:
    return {
        "number": nb.number,
        "path": _relative(nb.path, root),
        "name": nb.path.name,
        "title": nb.title,
        "thesis": nb.thesis,
        "points": nb.points,
        "exercises": [{"grade_id": e.grade_id, "points": e.points} for e in nb.exercises],
    }


def progress_payload(course: Path, store: ProgressStore) -> dict[str, Any]:
    """Per exercise: passed, status ("full", "visible", "not passed"), points and when it first and last
    passed; per notebook and in total."""
    outline = read_outline(course) if course.is_dir() else []
    passed = store.passed()
    report = progress_report(outline, passed)
    for row in report["notebooks"]:
        for ex in row["exercises"]:
            entry = passed.get(ex["grade_id"]) or {}
            ex["passed"] = ex["status"] != "not passed"
            ex["first_passed"], ex["last_passed"] = entry.get("first_passed"), entry.get("last_passed")
    report["store"] = str(store.path)
    return report


_MAX_PATH = 1024  # characters in a notebook path the API accepts
_MAX_BODY = 64 * 1024  # bytes in a request body (a path and a few numbers)


class CoursePathError(ValueError):
    """A notebook path the course API refuses; the message says what was wrong."""


def course_notebook(course: Path, rel: object) -> Path:
    """The notebook `rel` names inside the course folder; anything else is a CoursePathError."""
    if not isinstance(rel, str) or not rel:
        raise CoursePathError("give 'path': a notebook's path relative to the course folder, e.g. '02-views.ipynb'")
    if len(rel) > _MAX_PATH or "\0" in rel:
        raise CoursePathError(f"{rel[:60]!r}…: a notebook path has no NUL byte and at most {_MAX_PATH} characters")
    p = Path(rel)
    if p.is_absolute() or ".." in p.parts:
        raise CoursePathError(f"{rel!r}: give a path inside the course folder, relative to it (no '..', not absolute)")
    if p.suffix != ".ipynb":
        raise CoursePathError(f"{rel!r}: give a notebook (.ipynb)")
    try:
        full = (course / p).resolve()
        inside = full.is_relative_to(course.resolve())
        is_file = full.is_file()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a name too long for the file system
        raise CoursePathError(f"{rel[:200]!r} cannot be opened ({type(exc).__name__}: {exc}); use a notebook in "
                              "the course folder") from None
    if not inside:
        raise CoursePathError(f"{rel!r} leads outside the course folder (a symlink?); use notebooks in it")
    if not is_file:
        raise CoursePathError(f"{rel!r} is not a notebook in the course folder {course}")
    return full


def _kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (a kernel is the leader of its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _is_run(pid: int, run: str, overran: bool) -> bool:
    """Whether process `pid` still belongs to validation `run` (its environment says so), so that a pid
    reused by another process is never killed; without /proc, only a run that overran is killed."""
    try:
        return f"{ENV_RUN}={run}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except FileNotFoundError:
        return overran and not Path("/proc/self").exists()
    except OSError:
        return False


def _run_processes(run: str) -> list[int]:
    """Processes still carrying validation `run`'s mark in their environment (read from /proc; none elsewhere)."""
    mark = f"{ENV_RUN}={run}".encode()
    found = []
    for entry in (os.listdir("/proc") if os.path.isdir("/proc") else ()):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if mark in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    found.append(int(entry))
    return found


async def _gone(run: str, within: float = 5.0) -> None:
    """Make sure nothing of validation `run` outlives it: its PID namespace ends asynchronously, and without one a
    notebook's setsid child would stay. Whatever still carries the run's mark is killed, then awaited."""
    deadline = time.monotonic() + within
    while (left := _run_processes(run)) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.05)


async def run_validation(notebook: Path, timeout: float, cell_timeout: float = 60.0) -> dict[str, Any]:
    """Validate `notebook` in a separate process (python -m torchlens_widgets.course.validate) that starts
    a fresh kernel; the server's event loop only waits. The process stops itself at `timeout`; if it
    overruns by GRACE_S it is killed with its kernel (which jupyter_client starts in a session of its own,
    so killing the validation's process group alone would leave it running)."""
    with tempfile.TemporaryDirectory(prefix="torchlens-validate-") as tmp:
        pid_file, out_file, err_file = (Path(tmp) / name for name in ("kernel.pid", "out.json", "err.txt"))
        run = uuid.uuid4().hex
        env = dict(os.environ, **{ENV_RUN: run})
        # files, not pipes: the kernel inherits them, and a pipe would keep the wait going while it lives
        # in a PID namespace of its own where bwrap is there: the kernel and anything the notebook starts (a setsid
        # child, a daemon) die when the validation ends, and all of it when the server stops
        argv = sandbox.contained([sys.executable, "-m", "torchlens_widgets.course.validate", str(notebook),
                                  "--timeout", str(timeout), "--cell-timeout", str(cell_timeout),
                                  "--pid-file", str(pid_file)])
        with out_file.open("wb") as out, err_file.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True, env=env)
        overran = False
        try:
            await asyncio.wait_for(proc.wait(), timeout + GRACE_S)
        except asyncio.TimeoutError:
            overran = True
        finally:
            if proc.returncode is None:  # overran, or the request went away (server stopping)
                _kill_group(proc.pid)
            with contextlib.suppress(OSError, ValueError):
                kernel = int(pid_file.read_text())
                if _is_run(kernel, run, overran):  # the kernel, if it is somehow still there
                    _kill_group(kernel)
        if proc.returncode is None:
            await proc.wait()
        await _gone(run)
        stdout, stderr = out_file.read_bytes(), err_file.read_bytes()
    if overran:
        return {"notebook": str(notebook), "stopped": "timeout", "hidden_tests": None, "notice": None,
                "checks": [], "error": f"validation did not finish in {timeout + GRACE_S:.0f} s and was stopped"}
    if proc.returncode != 0:
        return {"notebook": str(notebook), "stopped": "error", "hidden_tests": None, "notice": None, "checks": [],
                "error": f"validation failed: {stderr.decode(errors='replace')[-500:]}"}
    report: dict[str, Any] = json.loads(stdout)
    return report


class _CourseHandler(APIHandler):
    """JSON endpoints under /torchlens/api/, behind Jupyter's authentication and authorization."""

    auth_resource = RESOURCE

    @property
    def _root(self) -> Path:
        return Path(self.settings["server_root_dir"]).expanduser()

    @property
    def _config(self) -> TorchlensCourse:
        found = self.settings.get("torchlens_course")
        return found if isinstance(found, TorchlensCourse) else TorchlensCourse()

    @property
    def _course(self) -> Path:
        return self._config.course(self._root)

    def _json(self, payload: dict[str, Any]) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(payload))

    def _refuse(self, error: object) -> None:
        """Answer 400 with `{"error": ...}`: what was wrong with the request and what to send instead."""
        self.set_status(400)
        self._json({"error": str(error)})

    def _body(self, shape: str) -> dict[str, Any]:
        """The request's JSON object; anything else is a CoursePathError naming the `shape` to send."""
        raw = self.request.body or b"{}"
        if len(raw) > _MAX_BODY:
            raise CoursePathError(f"send a JSON object {shape} of at most {_MAX_BODY // 1024} KB")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, nested past Python's limit
            raise CoursePathError(f"send a JSON object {shape} ({type(exc).__name__}: {str(exc)[:200]})") from None
        if not isinstance(body, dict):
            raise CoursePathError(f"send a JSON object {shape}, not {type(body).__name__}")
        return body


class OutlineHandler(_CourseHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self._json(outline_payload(self._course, self._root))


class ProgressHandler(_CourseHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self._json(progress_payload(self._course, ProgressStore()))


class ValidateHandler(_CourseHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        course = self._course
        try:
            body = self._body('{"path": ..., "timeout": seconds (optional)}')
            notebook = course_notebook(course, body.get("path"))
        except CoursePathError as exc:
            self._refuse(exc)
            return
        limit = self._config.timeout_limit()
        asked = body.get("timeout", limit)
        if isinstance(asked, bool) or not isinstance(asked, (int, float)) or not 0 < asked:
            self._refuse(f"timeout={asked!r}: give the seconds the run may take (a positive number)")
            return
        self._json(await run_validation(notebook, min(float(asked), limit), self._config.cell_timeout))


class ResetHandler(_CourseHandler):
    @web.authenticated
    @authorized
    def post(self) -> None:
        course = self._course
        try:
            body = self._body('{"path": ..., "grade_id": ...}')
            result = reset_exercise(course_notebook(course, body.get("path")), body.get("grade_id"))
        except (CoursePathError, ResetError) as exc:
            self._refuse(exc)
            return
        self._json(result)


class BackupHandler(_CourseHandler):
    """A copy of a reset's backup where Jupyter opens it (it refuses files in dot folders): its path for Lab."""

    @web.authenticated
    @authorized
    def post(self) -> None:
        course = self._course
        try:
            body = self._body('{"path": ..., "backup": ...}')
            copy_path = visible_backup(course_notebook(course, body.get("path")), body.get("backup"))
        except (CoursePathError, ResetError) as exc:
            self._refuse(exc)
            return
        self._json({"backup": str(copy_path), "path": _relative(copy_path, self._root)})


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": __name__}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Register the handlers (Jupyter Server calls this once at start)."""
    web_app = serverapp.web_app
    config = TorchlensCourse(parent=serverapp)
    web_app.settings["torchlens_course"] = config
    base = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [
        (url_path_join(base, API, "outline"), OutlineHandler),
        (url_path_join(base, API, "progress"), ProgressHandler),
        (url_path_join(base, API, "validate"), ValidateHandler),
        (url_path_join(base, API, "reset"), ResetHandler),
        (url_path_join(base, API, "backup"), BackupHandler),
    ])
    serverapp.log.info(f"torchlens course: {url_path_join(base, API)} serves {config.course(Path(serverapp.root_dir))}")
