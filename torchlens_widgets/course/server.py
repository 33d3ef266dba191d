"""Jupyter server extension: the course's outline and the learner's progress over REST (spec: REST.md).

Loaded by Jupyter Server (enabled on install through etc/jupyter/jupyter_server_config.d/); every
endpoint needs Jupyter's own authentication. The course folder is $TORCHLENS_COURSE_DIR, else the
server's root folder; progress comes from the learner's store (course/progress.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from .outline import NotebookOutline, progress_report, read_outline
from .progress import ProgressStore
from .reset import ResetError, reset_exercise

__all__ = ["course_dir", "outline_payload", "progress_payload"]

ENV_COURSE = "TORCHLENS_COURSE_DIR"
ENV_VALIDATE_TIMEOUT = "TORCHLENS_VALIDATE_TIMEOUT"  # most seconds a validation may run (default 120)
API = "torchlens/api"
RESOURCE = "torchlens"  # the authorization resource name (Jupyter's Authorizer sees it)


def course_dir(root: Path) -> Path:
    """The course folder: $TORCHLENS_COURSE_DIR, else the server's root folder."""
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
    """Per exercise: status ("full", "visible", "not passed") and points; per notebook and in total."""
    outline = read_outline(course) if course.is_dir() else []
    report = progress_report(outline, store.passed())
    report["store"] = str(store.path)
    return report


class CoursePathError(ValueError):
    """A notebook path the course API refuses; the message says what was wrong."""


def course_notebook(course: Path, rel: object) -> Path:
    """The notebook `rel` names inside the course folder; anything else is a CoursePathError."""
    if not isinstance(rel, str) or not rel:
        raise CoursePathError("give 'path': a notebook's path relative to the course folder, e.g. '02-views.ipynb'")
    p = Path(rel)
    if p.is_absolute() or ".." in p.parts:
        raise CoursePathError(f"{rel!r}: give a path inside the course folder, relative to it (no '..', not absolute)")
    if p.suffix != ".ipynb":
        raise CoursePathError(f"{rel!r}: give a notebook (.ipynb)")
    full = (course / p).resolve()
    if not full.is_relative_to(course.resolve()):
        raise CoursePathError(f"{rel!r} leads outside the course folder (a symlink?); use notebooks in it")
    if not full.is_file():
        raise CoursePathError(f"{rel!r} is not a notebook in the course folder {course}")
    return full


async def run_validation(notebook: Path, timeout: float) -> dict[str, Any]:
    """Validate in a separate process group (kernel included), killed whole if it overruns."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "torchlens_widgets.course.validate", str(notebook), "--timeout", str(timeout),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout + 15)
    except asyncio.TimeoutError:
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        return {"notebook": str(notebook), "stopped": "timeout", "checks": [],
                "error": f"validation did not finish in {timeout + 15:.0f} s and was stopped"}
    if proc.returncode != 0:
        return {"notebook": str(notebook), "stopped": "error", "checks": [],
                "error": f"validation failed: {err.decode(errors='replace')[-500:]}"}
    report: dict[str, Any] = json.loads(out)
    return report


class _CourseHandler(APIHandler):
    """JSON endpoints under /torchlens/api/, behind Jupyter's authentication and authorization."""

    auth_resource = RESOURCE

    @property
    def _root(self) -> Path:
        return Path(self.settings["server_root_dir"]).expanduser()

    def _json(self, payload: dict[str, Any]) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(payload))


class OutlineHandler(_CourseHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self._json(outline_payload(course_dir(self._root), self._root))


class ProgressHandler(_CourseHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self._json(progress_payload(course_dir(self._root), ProgressStore()))


class ValidateHandler(_CourseHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        course = course_dir(self._root)
        try:
            body = json.loads(self.request.body or b"{}")
            notebook = course_notebook(course, body.get("path") if isinstance(body, dict) else None)
        except (json.JSONDecodeError, CoursePathError) as exc:
            self.set_status(400)
            self._json({"error": str(exc)})
            return
        limit = float(os.environ.get(ENV_VALIDATE_TIMEOUT, "120"))
        asked = body.get("timeout", limit)
        if isinstance(asked, bool) or not isinstance(asked, (int, float)) or not 0 < asked:
            self.set_status(400)
            self._json({"error": f"timeout={asked!r}: give the seconds the run may take (a positive number)"})
            return
        self._json(await run_validation(notebook, min(float(asked), limit)))


class ResetHandler(_CourseHandler):
    @web.authenticated
    @authorized
    def post(self) -> None:
        course = course_dir(self._root)
        try:
            body = json.loads(self.request.body or b"{}")
            if not isinstance(body, dict):
                raise CoursePathError("send a JSON object: {\"path\": ..., \"grade_id\": ...}")
            result = reset_exercise(course_notebook(course, body.get("path")), body.get("grade_id"))
        except (json.JSONDecodeError, CoursePathError, ResetError) as exc:
            self.set_status(400)
            self._json({"error": str(exc)})
            return
        self._json(result)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": __name__}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Register the handlers (Jupyter Server calls this once at start)."""
    web_app = serverapp.web_app
    base = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [
        (url_path_join(base, API, "outline"), OutlineHandler),
        (url_path_join(base, API, "progress"), ProgressHandler),
        (url_path_join(base, API, "validate"), ValidateHandler),
        (url_path_join(base, API, "reset"), ResetHandler),
    ])
    serverapp.log.info(f"torchlens course: {url_path_join(base, API)} serves {course_dir(Path(serverapp.root_dir))}")
