"""The local progress store: which checks a learner has passed, as a small JSON file.

The file is ``{"version": 1, "checks": {grade_id: {...}}}``. Only passes are recorded and a pass is
never erased by a later failure. Each pass says its ``scope``: ``"full"`` when every test ran,
``"visible"`` when the learner's copy ran without the hidden tests (only grading can award those
points for sure). Ids written as ``NN.slug`` by earlier versions are read as ``NN-slug``. Writes are atomic (temp file + ``os.replace``) and read-modify-write
cycles hold an exclusive ``flock`` on a sidecar ``.lock`` file, so several kernels can record at once.
Nothing here raises into a learner's notebook: a corrupt file is moved aside, an unwritable location
only warns (and the passes really are kept for the rest of the process). Only a regular file is ever
read, replaced or moved: ``TORCHLENS_PROGRESS=/dev/null`` (any character device) switches recording
off, and any other non-regular path (a directory, a FIFO) is left alone.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import re
import stat
import tempfile
import warnings
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

try:  # POSIX only; elsewhere we write without the lock (os.replace still keeps the file whole).
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["ENV_VAR", "FORMAT_VERSION", "ProgressStore", "default_path"]

ENV_VAR = "TORCHLENS_PROGRESS"
FORMAT_VERSION = 1
_NO_NOTEBOOK = "(no notebook)"
_SCOPES = ("full", "visible")
_OLD_ID = re.compile(r"^(\d\d)\.(.+)$")  # before nbgrader-valid ids: "02.strides" is now "02-strides"

# Paths we already warned about being unwritable: warn once per path per process, not once per check.
_warned: set[tuple[str, str]] = set()
# Passes that could not be saved, per store path: kept for the whole process (every check makes a new
# ProgressStore, so an instance attribute would forget them at once).
_SESSION: dict[str, dict[str, dict[str, Any]]] = {}


def default_path() -> Path:
    """``$TORCHLENS_PROGRESS`` if set, else ``$XDG_DATA_HOME/torchlens-widgets/progress.json``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).expanduser().is_absolute() else Path.home() / ".local" / "share"
    return base / "torchlens-widgets" / "progress.json"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _is_number(x: Any) -> bool:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(x) and abs(x) < 1e12  # a 400-digit "points" is not a score
    except OverflowError:
        return False


def _valid_entry(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and _is_number(entry.get("points"))
        and _is_number(entry.get("max_points"))
        and (entry.get("notebook") is None or isinstance(entry.get("notebook"), str))
        and isinstance(entry.get("first_passed"), str)
        and isinstance(entry.get("last_passed"), str)
        and entry.get("scope", "full") in _SCOPES
    )


class _Unsupported(Exception):
    """The file was written by a newer format version: leave it alone."""


class ProgressStore:
    """The progress file at ``path`` (default: :func:`default_path`, resolved at construction)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        # Passes that could not be saved (unwritable location): still reported for this session.
        self._unsaved: dict[str, dict[str, Any]] = _SESSION.setdefault(str(self.path), {})

    @property
    def kind(self) -> str:
        """"file", "missing", "off" (a character device such as /dev/null: don't record) or "other"."""
        try:
            mode = os.stat(self.path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return "missing"
        except OSError:
            return "other"
        if stat.S_ISREG(mode):
            return "file"
        return "off" if stat.S_ISCHR(mode) else "other"

    @property
    def _target(self) -> Path:
        """Where writes go: through a symlink to its file, never replacing the link or anything else."""
        return Path(os.path.realpath(self.path)) if self.path.is_symlink() else self.path

    def __repr__(self) -> str:
        return f"ProgressStore({str(self.path)!r})"

    @property
    def lock_path(self) -> Path:
        """The sidecar lock file."""
        return self.path.with_name(self.path.name + ".lock")

    # -- public API ----------------------------------------------------------------------------

    def record_pass(
        self, grade_id: str, points: float, max_points: float, notebook: str | None = None, scope: str = "full"
    ) -> None:
        """Record that check ``grade_id`` passed (``scope`` "full" or "visible"); never raises."""
        try:
            if not isinstance(grade_id, str) or not grade_id:
                raise ValueError(f"grade_id must be a non-empty string, got {grade_id!r}")
            if scope not in _SCOPES:
                raise ValueError(f"scope must be one of {_SCOPES}, got {scope!r}")
            points, max_points = float(points), float(max_points)
            if not (math.isfinite(points) and math.isfinite(max_points)):
                raise ValueError(f"points must be finite, got {points!r}/{max_points!r}")
            notebook = None if notebook is None else str(notebook)
        except (TypeError, ValueError) as exc:
            warnings.warn(f"torchlens progress: not recorded: {exc}", RuntimeWarning, stacklevel=2)
            return
        kind = self.kind
        if kind == "off":
            return  # e.g. TORCHLENS_PROGRESS=/dev/null: recording switched off
        now = _now()
        if kind == "other":
            self._unsaved[grade_id] = self._merge(self._unsaved.get(grade_id), points, max_points, notebook, now, scope)
            self._warn_once(
                "not-a-file",
                f"torchlens progress: {self.path} is not a regular file, so passes are not saved there (they are "
                f"kept for this session). Set {ENV_VAR} to a file path to save them, or to /dev/null to switch "
                "recording off.",
            )
            return
        try:
            with self._locked():
                checks = self._load()
                checks.update(copy.deepcopy(self._unsaved))
                checks[grade_id] = self._merge(checks.get(grade_id), points, max_points, notebook, now, scope)
                self._write(checks)
            self._unsaved.clear()
        except _Unsupported as exc:
            self._unsaved[grade_id] = self._merge(self._unsaved.get(grade_id), points, max_points, notebook, now, scope)
            self._warn_once("newer", str(exc))
        except Exception as exc:  # recording progress must never break a learner's notebook
            self._unsaved[grade_id] = self._merge(self._unsaved.get(grade_id), points, max_points, notebook, now, scope)
            self._warn_once(
                "unwritable",
                f"torchlens progress: cannot save progress to {self.path} ({type(exc).__name__}: {exc}). "
                f"Your checks still run and this session keeps its passes, but they are not saved. Set the {ENV_VAR} "
                f"environment variable to a writable file path (e.g. {ENV_VAR}=/tmp/progress.json) to save them.",
            )

    def passed(self) -> dict[str, dict[str, Any]]:
        """grade_id -> {"points", "max_points", "notebook", "first_passed", "last_passed"} (ISO UTC)."""
        try:
            with self._locked():
                checks = self._load()
        except _Unsupported as exc:
            self._warn_once("newer", str(exc))
            checks = {}
        except OSError as exc:
            self._warn_once("unreadable", f"torchlens progress: cannot read {self.path} ({exc}).")
            checks = {}
        for gid, entry in self._unsaved.items():
            checks[gid] = self._combine(checks.get(gid), entry)
        return copy.deepcopy(checks)

    def summary(self) -> dict[str, dict[str, float | int]]:
        """Per notebook: {"earned", "possible", "count"} over the passed checks.

        ``possible`` sums ``max_points`` of the passed checks only (the store never sees unpassed
        checks); passes recorded without a notebook are grouped under ``"(no notebook)"``.
        """
        out: dict[str, dict[str, float | int]] = {}
        for entry in self.passed().values():
            row = out.setdefault(entry.get("notebook") or _NO_NOTEBOOK, {"earned": 0.0, "possible": 0.0, "count": 0})
            row["earned"] += entry["points"]
            row["possible"] += entry["max_points"]
            row["count"] += 1
        return dict(sorted(out.items()))

    def reset(self, grade_id: str | None = None) -> int:
        """Forget one pass (or all with ``None``); returns how many were removed. Raises OSError if unwritable."""
        if grade_id is None:
            removed = len(self._unsaved)
            self._unsaved.clear()
        else:
            removed = int(self._unsaved.pop(grade_id, None) is not None)
        with self._locked():
            try:
                checks = self._load()
            except _Unsupported as exc:
                raise OSError(str(exc)) from None
            if grade_id is None:
                on_disk = len(checks)
                checks = {}
            else:
                on_disk = int(checks.pop(grade_id, None) is not None)
            if (on_disk or (grade_id is None and self.path.exists())) and self.kind == "file":
                self._write(checks)
        return max(removed, on_disk)

    # -- internals -----------------------------------------------------------------------------

    @staticmethod
    def _merge(
        old: dict[str, Any] | None, points: float, max_points: float, notebook: str | None, now: str, scope: str
    ) -> dict:
        if old is None:
            return {
                "points": points,
                "max_points": max_points,
                "notebook": notebook,
                "first_passed": now,
                "last_passed": now,
                "scope": scope,
            }
        return {
            "points": max(old["points"], points),
            "max_points": max_points,
            "notebook": notebook if notebook is not None else old.get("notebook"),
            "first_passed": old["first_passed"],
            "last_passed": now,
            "scope": "full" if "full" in (old.get("scope", "full"), scope) else "visible",
        }

    @staticmethod
    def _combine(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
        if a is None:
            return b
        return {
            "points": max(a["points"], b["points"]),
            "max_points": b["max_points"],
            "notebook": b.get("notebook") or a.get("notebook"),
            "first_passed": min(a["first_passed"], b["first_passed"]),
            "last_passed": max(a["last_passed"], b["last_passed"]),
            "scope": "full" if "full" in (a.get("scope", "full"), b.get("scope", "full")) else "visible",
        }

    def _warn_once(self, kind: str, message: str) -> None:
        key = (str(self.path), kind)
        if key not in _warned:
            _warned.add(key)
            warnings.warn(message, RuntimeWarning, stacklevel=3)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold an exclusive flock on the sidecar lock file; lock-less where that is impossible."""
        fd = None
        if self.kind not in ("file", "missing"):  # no sidecar next to /dev/null or a directory
            yield
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # reading may still work; writing will fail and be reported by the caller
        if fcntl is not None:
            try:
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                fd = None  # read-only location: no lock to take, nothing can be written anyway
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except OSError:  # e.g. a filesystem without flock support
                    os.close(fd)
                    fd = None
        try:
            yield
        finally:
            if fd is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def _load(self) -> dict[str, dict[str, Any]]:
        """The checks on disk; a corrupt file is moved aside (with a warning) and valid entries kept."""
        if self.kind != "file":
            return {}
        try:
            raw = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return {}
        problem = None
        checks: dict[str, dict[str, Any]] = {}
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            data, problem = None, f"not valid JSON ({exc})"
        except RecursionError:
            data, problem = None, "nested too deeply to be a progress file"
        if problem is None:
            if not isinstance(data, dict) or not isinstance(data.get("checks"), dict):
                problem = 'not a {"version": ..., "checks": {...}} object'
            elif not isinstance(data.get("version"), int) or isinstance(data.get("version"), bool):
                problem = f"bad version {data.get('version')!r}"
            elif data["version"] > FORMAT_VERSION:
                raise _Unsupported(
                    f"torchlens progress: {self.path} was written by a newer torchlens-widgets "
                    f"(format version {data['version']}); leaving it untouched and keeping passes for this "
                    "session only. Upgrade torchlens-widgets to save progress."
                )
            else:
                bad = [gid for gid, entry in data["checks"].items() if not _valid_entry(entry)]
                checks = {}
                for gid, entry in data["checks"].items():
                    if gid in bad:
                        continue
                    old = _OLD_ID.match(gid)
                    new_id = f"{old[1]}-{old[2]}" if old else gid
                    checks[new_id] = self._combine(checks.get(new_id), {"scope": "full", **entry})
                if bad:
                    problem = (
                        f"{len(bad)} malformed entr{'y' if len(bad) == 1 else 'ies'} ({', '.join(map(repr, bad[:5]))})"
                    )
        if problem is not None:
            self._move_aside(problem, kept=len(checks))
        return checks

    def _move_aside(self, problem: str, kept: int) -> None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        target = self._target
        aside = target.with_name(f"{target.name}.corrupt-{stamp}")
        n = 1
        while aside.exists():
            aside = target.with_name(f"{target.name}.corrupt-{stamp}-{n}")
            n += 1
        try:
            if not stat.S_ISREG(os.stat(target).st_mode):
                raise OSError("not a regular file")
            os.replace(target, aside)
            where = f"moved it to {aside}"
        except OSError as exc:
            where = f"could not move it aside ({exc}); it will be overwritten on the next save"
        kept_msg = f"; kept {kept} valid entr{'y' if kept == 1 else 'ies'}" if kept else "; starting fresh"
        warnings.warn(
            f"torchlens progress: {self.path} was unreadable ({problem}); {where}{kept_msg}.",
            RuntimeWarning,
            stacklevel=4,
        )

    def _write(self, checks: dict[str, dict[str, Any]]) -> None:
        """Atomically replace the file: temp file in the same directory, fsync, ``os.replace``.

        Only a regular file (or a missing one) is ever replaced: never a device, directory or FIFO.
        """
        if self.kind not in ("file", "missing"):
            raise OSError(f"{self.path} is not a regular file")
        target = self._target
        target.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"version": FORMAT_VERSION, "checks": checks}, indent=1, sort_keys=True, allow_nan=False)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(OSError, AttributeError):  # make the rename itself durable (POSIX)
            dir_fd = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
