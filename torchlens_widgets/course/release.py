"""Write the student version of a source notebook (nbgrader conventions).

Solution regions become stubs, hidden tests are replaced by a line saying they run at grading, outputs
are removed, test cells are locked, and the
result is checked for leaks before anything is written. Destination notebooks that already exist are
never overwritten without ``force=True``: they may hold a learner's work.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from .markers import HIDDEN_PLACEHOLDER, STUB_MESSAGE

__all__ = [
    "CODE_STUB",
    "TEXT_STUB",
    "for_this_kernel",
    "ReleaseError",
    "ReleaseResult",
    "release_notebook",
    "release_path",
    "answered_release",
]

CODE_STUB = ("# YOUR CODE HERE", f'raise NotImplementedError("{STUB_MESSAGE}")')
TEXT_STUB = ("YOUR ANSWER HERE",)

# Like nbgrader, a marker is any line containing the delimiter text (usually "### BEGIN SOLUTION").
_MARKER = re.compile(r"\b(BEGIN|END) (SOLUTION|HIDDEN TESTS)\b")
_LEAKS = ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS")
# nbgrader's schema allows only these characters in a grade_id (dots make generate_assignment fail).
_GRADE_ID = re.compile(r"[A-Za-z0-9_\-]+")


class ReleaseError(ValueError):
    """A source notebook cannot be released; names the notebook, cell index and grade_id."""

    def __init__(
        self, message: str, notebook: str | None = None, cell_index: int | None = None, grade_id: str | None = None
    ) -> None:
        self.notebook, self.cell_index, self.grade_id, self.reason = notebook, cell_index, grade_id, message
        where = ", ".join(p for p in (notebook, None if cell_index is None else f"cell {cell_index}") if p)
        if grade_id is not None:
            where += f" (grade_id {grade_id!r})"
        super().__init__(f"{where.strip()}: {message}" if where else message)


@dataclass
class ReleaseResult:
    """What :func:`release_path` did: notebooks ``written`` and existing ones ``skipped`` (not overwritten)."""

    written: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)


def _nbgrader(cell: NotebookNode) -> dict[str, Any]:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def _validate(nb: NotebookNode, name: str | None) -> None:
    """Metadata checks: grade_ids present, well-formed and unique; points on graded cells."""
    seen: dict[str, int] = {}
    for i, cell in enumerate(nb.cells):
        meta = _nbgrader(cell)
        grade, solution, locked = bool(meta.get("grade")), bool(meta.get("solution")), bool(meta.get("locked"))
        gid = meta.get("grade_id")
        shown_gid = gid if isinstance(gid, str) else None

        def fail(msg: str, i: int = i, gid: str | None = shown_gid) -> ReleaseError:
            return ReleaseError(msg, name, i, gid)

        if (grade or solution) and (not isinstance(gid, str) or not gid):
            kind = "graded" if grade else "solution"
            raise fail(f"{kind} cell has no nbgrader grade_id; give it a unique one, e.g. 'strides-1'")
        if gid is not None:
            if not isinstance(gid, str) or not _GRADE_ID.fullmatch(gid):
                raise fail(f"grade_id {gid!r} may only contain letters, digits, '_' and '-' (nbgrader's rule), e.g. '02-strides'")
            if gid in seen:
                raise fail(f"duplicate grade_id {gid!r} (also used by cell {seen[gid]}); grade_ids must be unique")
            seen[gid] = i
        if grade:
            pts = meta.get("points")
            if pts is None:
                raise fail("graded cell has no nbgrader points; set metadata.nbgrader.points")
            if isinstance(pts, bool) or not isinstance(pts, (int, float)) or not pts >= 0:
                raise fail(f"graded cell has invalid points {pts!r}; points must be a number >= 0")
        if solution and locked:
            raise fail("a solution cell cannot be locked: the learner must be able to edit it")


def _process_regions(cell: NotebookNode, name: str | None, index: int) -> tuple[str, bool]:
    """Remove hidden-test regions and stub solution regions; returns (new source, found a solution region)."""
    gid = _nbgrader(cell).get("grade_id")
    gid = gid if isinstance(gid, str) else None
    stub = CODE_STUB if cell.cell_type == "code" else TEXT_STUB
    out: list[str] = []
    region: str | None = None  # "SOLUTION" / "HIDDEN TESTS" while inside one
    begun_at = 0
    found_solution = False
    for lineno, line in enumerate(cell.source.split("\n"), start=1):
        markers = _MARKER.findall(line)
        if not markers:
            if region is None:
                out.append(line)
            continue
        if len(markers) > 1:
            raise ReleaseError(f"line {lineno} holds more than one marker: {line.strip()!r}", name, index, gid)
        ((edge, kind),) = markers
        if edge == "BEGIN":
            if region is not None:
                raise ReleaseError(
                    f"line {lineno}: BEGIN {kind} inside the {region} region begun at line {begun_at}; "
                    "regions cannot be nested",
                    name,
                    index,
                    gid,
                )
            region, begun_at = kind, lineno
            indent = line[: len(line) - len(line.lstrip())]
            if kind == "SOLUTION":
                found_solution = True
                out.extend(indent + s for s in stub)
            else:  # the learner's check then knows (and says) that it ran the visible tests only
                out.append(indent + HIDDEN_PLACEHOLDER)
        else:
            if region != kind:
                opened = f"the {region} region begun at line {begun_at} is still open" if region else "none is open"
                raise ReleaseError(
                    f"line {lineno}: END {kind} without a matching BEGIN {kind} ({opened})", name, index, gid
                )
            region = None
    if region is not None:
        raise ReleaseError(f"BEGIN {region} at line {begun_at} has no matching END {region}", name, index, gid)
    return "\n".join(out), found_solution


#: The tag an answer or test cell of a student copy carries: an error there does not stop Run All.
RUNS_ON = "raises-exception"


def release_notebook(nb: NotebookNode, name: str | None = None) -> NotebookNode:
    """Return the student version of ``nb`` (not modified); ``name`` labels errors. Raises ReleaseError."""
    _validate(nb, name)
    out = copy.deepcopy(nb)
    out.metadata.pop("widgets", None)
    for i, cell in enumerate(out.cells):
        meta = _nbgrader(cell)
        grade, solution, locked = bool(meta.get("grade")), bool(meta.get("solution")), bool(meta.get("locked"))
        if cell.get("source") is None:  # a null source (hand-edited JSON) is an empty cell
            cell.source = ""
        elif isinstance(cell.source, list):  # tolerate un-normalised sources
            cell.source = "".join(str(line) for line in cell.source)
        source, found_solution = _process_regions(cell, name, i)
        if found_solution and not solution:
            raise ReleaseError(
                "solution markers in a cell not marked as a solution cell (set metadata.nbgrader.solution = true)",
                name,
                i,
                meta.get("grade_id") if isinstance(meta.get("grade_id"), str) else None,
            )
        if solution and not found_solution:
            source = "\n".join(CODE_STUB if cell.cell_type == "code" else TEXT_STUB)
        cell.source = source
        if solution:
            cell.pop("attachments", None)  # a pasted picture in a written answer is part of the answer
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)  # nbclient timing information
        if cell.cell_type == "code" and (solution or grade):
            # Run All goes on past an unanswered exercise (JupyterLab and nbclient honour this tag), so a fresh copy
            # shows every teaching picture; the failed check still scores 0 (nbgrader and our grader read outcomes)
            tags = cell.metadata.setdefault("tags", [])
            if RUNS_ON not in tags:
                tags.append(RUNS_ON)
        if locked or (grade and not solution):
            cell.metadata.nbgrader["locked"] = True
            cell.metadata["editable"] = False
            cell.metadata["deletable"] = False
    text = nbformat.writes(out)
    for leak in _LEAKS:
        if leak in text:
            raise ReleaseError(f"{leak!r} still appears in the released notebook; refusing to release it", name)
    return out


_SOLUTION_LINE = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def answered_release(source: NotebookNode, answers: dict[str, str] | None = None) -> NotebookNode:
    """The student version with every answer cell filled in: the source's reference answer (markers removed),
    or `answers[answer_grade_id]` where given. What a full-marks submission looks like, to try a grading setup."""
    reference = {_nbgrader(c)["grade_id"]: _SOLUTION_LINE.sub("", "".join(c.source)) for c in source.cells
                 if _nbgrader(c).get("solution")}
    out = release_notebook(source)
    for cell in out.cells:
        gid = str(_nbgrader(cell).get("grade_id"))
        if _nbgrader(cell).get("solution"):
            cell.source = (answers or {}).get(gid, reference[gid])
    return out


def _notebooks(src: Path, exclude: Path | None) -> list[Path]:
    found = []
    for p in sorted(src.rglob("*.ipynb")):
        rel = p.relative_to(src)
        if any(part.startswith(".") for part in rel.parts):  # .ipynb_checkpoints and other hidden dirs
            continue
        if exclude is not None and p.resolve().is_relative_to(exclude):
            continue
        found.append(p)
    return found


#: Beside each released notebook, a pristine copy the learner never edits: "reset exercise" reads its stubs.
PRISTINE_DIR = Path(".torchlens") / "release"


def pristine_path(notebook: Path) -> Path:
    """Where the pristine released copy of a learner's `notebook` is kept."""
    return notebook.parent / PRISTINE_DIR / notebook.name


def _atomic_write(path: Path, text: str, mode: int | None = None) -> None:
    """Write `text` to `path` all at once (a temporary file renamed over it). The file keeps the mode it had
    (0644 when new), or gets `mode`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            mode = 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def for_this_kernel(nb: NotebookNode) -> NotebookNode:
    """`nb` with the kernel metadata JupyterLab would write on opening it here (the python3 kernel's display name,
    this interpreter's version): otherwise Lab rewrites it at once and a notebook nobody touched shows as unsaved."""
    import platform

    try:
        from jupyter_client.kernelspec import KernelSpecManager

        spec = KernelSpecManager().get_kernel_spec("python3")
        kernelspec = {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
    except Exception:  # no jupyter_client, or no python3 kernel: keep what the source says
        kernelspec = dict(nb.metadata.get("kernelspec", {}))
    info = dict(nb.metadata.get("language_info", {}))
    if kernelspec.get("language") == "python":
        try:  # what ipykernel's kernel_info reply holds, which Lab writes into the notebook
            from ipykernel.ipkernel import IPythonKernel

            info = dict(IPythonKernel.language_info)
        except Exception:
            if info.get("name") == "python":
                info["version"] = platform.python_version()
    nb.metadata["kernelspec"] = kernelspec
    if info:
        nb.metadata["language_info"] = info
    return nb


def release_path(src: Path | str, dst: Path | str, force: bool = False) -> ReleaseResult:
    """Release a notebook file or a directory of them (recursively, keeping the layout) into ``dst``.

    ``dst`` is a directory, or a ``.ipynb`` path when ``src`` is a file. Every notebook is released
    (and validated) before any is written. Existing destination notebooks are skipped unless
    ``force``; see :class:`ReleaseResult`. Raises FileNotFoundError for a missing ``src`` and
    ReleaseError for invalid notebooks or a destination that would overwrite a source.
    """
    src, dst = Path(src).expanduser(), Path(dst).expanduser()
    if not src.exists():
        raise FileNotFoundError(f"source {src} does not exist")
    pairs: list[tuple[Path, Path]] = []
    if src.is_dir():
        if dst.suffix == ".ipynb":
            raise ReleaseError(f"source {src} is a directory, so the destination must be a directory, not {dst}")
        dst_res = dst.resolve()
        exclude = dst_res if dst_res != src.resolve() and dst_res.is_relative_to(src.resolve()) else None
        pairs = [(p, dst / p.relative_to(src)) for p in _notebooks(src, exclude)]
        if not pairs:
            raise ReleaseError(f"no notebooks (*.ipynb) found in {src}")
    else:
        if src.suffix != ".ipynb":
            raise ReleaseError(f"source {src} is not a notebook (*.ipynb)")
        pairs = [(src, dst if dst.suffix == ".ipynb" else dst / src.name)]

    released: list[tuple[Path, str]] = []
    owners: dict[str, Path] = {}  # grade_id -> notebook: ids key the progress store, so unique course-wide
    for s, d in pairs:
        if d.resolve() == s.resolve():
            raise ReleaseError(f"destination {d} is the source notebook itself; refusing to overwrite solutions")
        try:
            nb = nbformat.read(s, as_version=4)
        except Exception as exc:  # bad JSON, not a notebook, unreadable
            raise ReleaseError(f"cannot read notebook: {exc}", str(s)) from exc
        text = nbformat.writes(for_this_kernel(release_notebook(nb, name=str(s))))
        for i, cell in enumerate(nb.cells):
            gid = _nbgrader(cell).get("grade_id")
            if gid is None:
                continue
            if gid in owners:
                raise ReleaseError(
                    f"grade_id {gid!r} is also used in {owners[gid]}; grade_ids must be unique", str(s), i, gid
                )
            owners[gid] = s
        released.append((d, text if text.endswith("\n") else text + "\n"))

    result = ReleaseResult()
    for d, text in released:
        _atomic_write(pristine_path(d), text)  # always current: it holds no learner work
        if d.exists() and not force:
            result.skipped.append(d)
            continue
        _atomic_write(d, text)
        result.written.append(d)
    return result
