"""A Triton kernel's program grid in a notebook, live: click a program id to see which elements each of its
`tl.load` / `tl.store` touched, what its mask switched off, and any access out of bounds, listed by source
line. The `program` trait (a tuple) is what is shown; a click sets it, and so does `view.select((1,))`.

The model sent to the page is compact (`render.triton_grid.program_grid_model`: index runs, not element
lists); the mime bundle also carries the static HTML of the chosen program, so a saved notebook, an HTML
export or GitHub shows the picture without a kernel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import traitlets as t

from ..lenses.triton_grid import ProgramGrid, TritonGridError, program_grid
from ..render.triton_grid import program_grid_html, program_grid_model, program_grid_text, select_program
from ._base import HtmlFallbackWidget, bundle

__all__ = ["ProgramGridView", "ProgramGridWidget", "show_program_grid"]


class ProgramGridWidget(HtmlFallbackWidget):
    """Live program grid. `program` is the program id shown (a tuple, e.g. (3,) or (1, 2); () only when
    nothing was recorded): set by clicks in the page, or from Python with `select`. `.grid` is the ProgramGrid."""

    _esm = bundle("tgrid")
    model = t.Dict().tag(sync=True)
    program = t.Tuple().tag(sync=True)

    def __init__(self, report: ProgramGrid, program: int | Sequence[int] | None = None, **kwargs: Any) -> None:
        self._report = report
        self._data = report.to_dict()
        chosen = _choose(self._data, program)
        super().__init__(model=program_grid_model(self._data), program=chosen or (), **kwargs)

    @t.validate("program")
    def _valid_program(self, proposal: Any) -> tuple[int, ...]:
        value = proposal["value"]
        if value == () and not self._data["programs"]:
            return ()
        try:
            chosen = _choose(self._data, value)
        except TritonGridError as exc:
            raise t.TraitError(str(exc)) from None
        assert chosen is not None
        return chosen

    @property
    def grid(self) -> ProgramGrid:
        """The lens data this widget draws."""
        return self._report

    @property
    def report(self) -> ProgramGrid:
        return self._report

    def select(self, program: int | Sequence[int]) -> ProgramGridWidget:
        """Show another program (an int for a 1-D grid, else a tuple), as a click on it would; returns the
        widget itself, so a cell ending in `view.select(2)` shows it (the earlier output follows too)."""
        self.program = _choose(self._data, program) or ()
        return self

    def static_html(self) -> str:
        return program_grid_html(self._data, self.program or None)

    def static_text(self) -> str:
        return program_grid_text(self._data, self.program or None)


#: The name this class had when it was a static view; the API (`.program`, `.grid`, `.select`) is the same.
ProgramGridView = ProgramGridWidget


def _choose(data: dict[str, Any], program: Any) -> tuple[int, ...] | None:
    """The recorded program to show as a tuple (default: the first with an error, else the first)."""
    if isinstance(program, list):
        program = tuple(program)
    if program == ():
        raise TritonGridError("program=(): name a program id, e.g. (0,)")
    try:
        chosen = select_program(data, program)
    except ValueError as exc:
        raise TritonGridError(str(exc)) from None
    return tuple(int(i) for i in chosen["pid"]) if chosen is not None else None


def show_program_grid(kernel: ProgramGrid | Any, *args: Any, program: int | Sequence[int] | None = None,
                      **kwargs: Any) -> ProgramGridWidget:
    """Show a ProgramGrid, or run `program_grid(kernel, grid, *args, **meta)` first (grid is the first of
    `args`; max_programs= as there). `program`: the program id to show first (default: the first with an
    out-of-bounds error, else the first). The widget's `.grid` is the data, `.program` the program shown."""
    if isinstance(kernel, ProgramGrid):
        if args or kwargs:
            raise TritonGridError("show_program_grid(result) takes the recorded grid alone (and program=); to run "
                                  "the kernel again, pass the kernel, the grid and its arguments")
        return ProgramGridWidget(kernel, program)
    if not args:
        raise TritonGridError("show_program_grid(kernel, grid, *args, **meta): give the grid, e.g. (triton.cdiv(n, "
                              "BLOCK),), then the kernel's arguments")
    return ProgramGridWidget(program_grid(kernel, *args, **kwargs), program)
