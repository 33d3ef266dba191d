"""Jupyter server extension: the course's outline and the learner's progress over REST (spec: REST.md).

Loaded by Jupyter Server (enabled on install through etc/jupyter/jupyter_server_config.d/); every
endpoint needs Jupyter's own authentication. The course folder is $TORCHLENS_COURSE_DIR, else the
server's root folder; progress comes from the learner's store (course/progress.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from .outline import NotebookOutline, progress_report, read_outline
from .progress import ProgressStore

__all__ = ["course_dir", "outline_payload", "progress_payload"]

ENV_COURSE = "TORCHLENS_COURSE_DIR"
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


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": __name__}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Register the handlers (Jupyter Server calls this once at start)."""
    web_app = serverapp.web_app
    base = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [
        (url_path_join(base, API, "outline"), OutlineHandler),
        (url_path_join(base, API, "progress"), ProgressHandler),
    ])
    serverapp.log.info(f"torchlens course: {url_path_join(base, API)} serves {course_dir(Path(serverapp.root_dir))}")
