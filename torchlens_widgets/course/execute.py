"""Run a notebook in a fresh kernel: to refresh committed outputs, to test stubs, and (later) to grade.

Checks record passes in the progress store; executions here point it at a throwaway file unless
told otherwise, so refreshing or testing notebooks never touches a learner's progress.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat import NotebookNode

__all__ = ["Execution", "cell_errors", "execute_notebook", "progress_redirected", "static_outputs"]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_STATIC = ("image/svg+xml", "text/html", "image/png")


@dataclass
class Execution:
    """The executed notebook and how long it took."""

    notebook: NotebookNode
    seconds: float


@contextlib.contextmanager
def progress_redirected(progress_file: Path | None = None) -> Iterator[Path]:
    """Point the progress store (of this process and the kernels it starts) at `progress_file`, or at a
    throwaway file, for the block; the learner's real store is never written."""
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(progress_file or Path(tmp) / "progress.json")
        old = os.environ.get("TORCHLENS_PROGRESS")
        os.environ["TORCHLENS_PROGRESS"] = str(target)  # inherited by kernel processes
        try:
            yield target
        finally:
            if old is None:
                os.environ.pop("TORCHLENS_PROGRESS", None)
            else:
                os.environ["TORCHLENS_PROGRESS"] = old


def execute_notebook(
    path: Path | str,
    *,
    timeout: int = 300,
    allow_errors: bool = False,
    progress_file: Path | None = None,
    kernel_name: str = "python3",
    store_widget_state: bool = True,
) -> Execution:
    """Execute every cell of `path` in a fresh kernel started in the notebook's folder."""
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    with progress_redirected(progress_file):
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name=kernel_name,
            allow_errors=allow_errors,
            store_widget_state=store_widget_state,
            resources={"metadata": {"path": str(path.parent.resolve())}},
        )
        t0 = time.perf_counter()
        client.execute()
        seconds = time.perf_counter() - t0
    return Execution(nb, seconds)


def static_outputs(nb: NotebookNode) -> int:
    """Keep only the static picture of every widget output, and no saved widget state; returns how many.

    Exporters and viewers prefer a widget view whenever one is present and draw nothing without a live
    kernel (nbconvert HTML offline, GitHub, JupyterLab after a restart); the static SVG/HTML fallback
    every widget carries is what a reader without a kernel should see.
    """
    nb.metadata.pop("widgets", None)
    n = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW in data and any(k in data for k in _STATIC):
                del data[WIDGET_VIEW]
                n += 1
    return n


def cell_errors(nb: NotebookNode) -> dict[int, str]:
    """Map cell index → exception name for every code cell whose outputs contain an error."""
    out: dict[int, str] = {}
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                out[i] = o.get("ename", "")
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m torchlens_widgets.course.execute NB...`: re-execute notebooks in place, printing times.

    Saved outputs keep the widgets' static pictures only (see :func:`static_outputs`)."""
    import argparse

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("notebooks", nargs="+", type=Path)
    p.add_argument("--timeout", type=int, default=300)
    args = p.parse_args(argv)
    for nb_path in args.notebooks:
        ex = execute_notebook(nb_path, timeout=args.timeout, store_widget_state=False)
        static_outputs(ex.notebook)
        nbformat.write(ex.notebook, nb_path)
        print(f"{nb_path}: {ex.seconds:.1f} s, {nb_path.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
