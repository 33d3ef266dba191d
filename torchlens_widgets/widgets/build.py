"""Building a C++ op in a notebook: a status line that moves while the compiler runs (a cold build takes
seconds to tens of seconds), then the build report in place of it. Plain HTML outputs (no widget model),
so a saved notebook shows the report as it was.

The same line serves all long work in a kernel (`torchlens_widgets.busy`): the package's entry point connects
`display_line`, an IPython display handle that starts empty, moves while the work runs and is emptied at its end,
so the saved output holds no time and nbval compares nothing that varies."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import busy
from ..lenses.build import LEAN_HEADERS, BuildReport, build_inline, load_built
from ..render.build import build_html, build_progress_html, build_text, busy_html
from ._base import ReportView

__all__ = ["BuildView", "DisplayLine", "build_op", "display_line"]


class DisplayLine:
    """A busy line in the running cell: one display handle, empty when made (what nbval sees and compares), the
    line while the work runs, empty again at the end (what the saved notebook keeps)."""

    def __init__(self) -> None:
        from IPython.display import display

        self.handle: Any = display({}, raw=True, display_id=True)

    def update(self, title: str, phase: str, seconds: float) -> None:
        self.handle.update({"text/html": busy_html(title, phase, seconds),
                            "text/plain": busy.line_text(title, phase, seconds)}, raw=True)

    def close(self, summary: str) -> None:
        self.handle.update({}, raw=True)


def display_line() -> DisplayLine | None:
    """A `DisplayLine` when running in a kernel, else None (a terminal gets busy's stderr line)."""
    if not busy.in_kernel():
        return None
    try:
        return DisplayLine()
    except ImportError:
        return None


class BuildView(ReportView):
    """A build report for display: HTML in a notebook, deterministic text elsewhere."""

    render_html = staticmethod(build_html)
    render_text = staticmethod(build_text)


def build_op(name: str, source: str, *, headers: Sequence[str] | None = LEAN_HEADERS, load: bool = True,
             extra_cflags: Sequence[str] = (), directory: Path | str | None = None, timeout: float = 180.0,
             show: bool = True, precompiled: bool = True) -> BuildReport:
    """Build `source` (see lenses.build.build_inline) with a live status line, show the report, and (when
    `load` and it built) load it so its TORCH_LIBRARY ops appear under torch.ops. Returns the report."""
    handle = None
    last = [0.0]
    if show:
        try:
            from IPython import get_ipython
            from IPython.display import display

            if get_ipython() is not None:
                handle = display({"text/html": build_progress_html(name, "starting", 0.0),
                                  "text/plain": f"building {name}..."}, raw=True, display_id=True)
        except ImportError:
            handle = None

    def progress(what: str, seconds: float) -> None:
        if handle is not None and time.monotonic() - last[0] >= 0.5:
            last[0] = time.monotonic()
            handle.update({"text/html": build_progress_html(name, what, seconds),
                           "text/plain": f"building {name}..."}, raw=True)

    try:
        report = build_inline(name, source, headers=headers, extra_cflags=extra_cflags, directory=directory,
                              timeout=timeout, on_progress=progress if handle is not None else None,
                              precompiled=precompiled)  # no line of its own: busy's line (show=False)
    except BaseException:  # a stopped or failed build: no moving line (and no time) left behind
        if handle is not None:
            handle.update({"text/plain": f"building {name}: stopped"}, raw=True)
        raise
    if load and report.ok:
        load_built(report)
    if handle is not None:
        view = BuildView(report)._repr_mimebundle_()
        handle.update(view, raw=True)
    return report
