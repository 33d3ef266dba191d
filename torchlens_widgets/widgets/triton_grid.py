"""A Triton kernel's program grid in a notebook: which elements each program loaded and stored, what its
mask switched off, and any access out of bounds. Plain HTML outputs (no widget model), so a saved notebook
shows it as it was; another program is shown by asking for it (`view.select((1,))` or `program=`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..lenses.triton_grid import ProgramGrid, TritonGridError, program_grid
from ..render.triton_grid import program_grid_html, program_grid_text, select_program
from ._base import ReportView

__all__ = ["ProgramGridView", "show_program_grid"]


class ProgramGridView(ReportView):
    """A program grid for display, one program selected: HTML in a notebook, deterministic text elsewhere."""

    render_html = staticmethod(program_grid_html)
    render_text = staticmethod(program_grid_text)

    def __init__(self, report: ProgramGrid, program: int | Sequence[int] | None = None) -> None:
        super().__init__(report)
        data = report.to_dict()
        try:
            chosen = select_program(data, program)
        except ValueError as exc:
            raise TritonGridError(str(exc)) from None
        self.program: tuple[int, ...] | None = tuple(chosen["pid"]) if chosen is not None else None
        self._data = data

    @property
    def grid(self) -> ProgramGrid:
        return self.report  # type: ignore[no-any-return]

    def select(self, program: int | Sequence[int]) -> ProgramGridView:
        """The same grid with another program shown."""
        return ProgramGridView(self.report, program)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": program_grid_html(self._data, self.program),
                "text/plain": program_grid_text(self._data, self.program)}

    def __repr__(self) -> str:
        return program_grid_text(self._data, self.program)


def show_program_grid(kernel: ProgramGrid | Any, *args: Any, program: int | Sequence[int] | None = None,
                      **kwargs: Any) -> ProgramGridView:
    """Show a ProgramGrid, or run `program_grid(kernel, grid, *args, **meta)` first (grid is the first of
    `args`; max_programs= as there). `program`: the program id to draw (default: the first with an error,
    else the first). The view's `.grid` is the data."""
    if isinstance(kernel, ProgramGrid):
        if args or kwargs:
            raise TritonGridError("show_program_grid(result) takes the recorded grid alone (and program=); to run "
                                  "the kernel again, pass the kernel, the grid and its arguments")
        return ProgramGridView(kernel, program)
    if not args:
        raise TritonGridError("show_program_grid(kernel, grid, *args, **meta): give the grid, e.g. (triton.cdiv(n, "
                              "BLOCK),), then the kernel's arguments")
    return ProgramGridView(program_grid(kernel, *args, **kwargs), program)
