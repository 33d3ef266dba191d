"""Notebook 17 (Triton on a CPU): a masked kernel for neighbour differences, a row softmax with one program per row,
a 2-D grid read without running it, and a tiled transpose.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). Kernels run in Triton's interpreter through the `program_grid`
lens, which records every program's loads and stores: the check holds a kernel to its values *and* to what it
touched. Triton is imported only when a check runs (the package is imported by every notebook).
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch

from ...lenses import triton_grid
from ...lenses.triton_grid import TritonGridError, format_runs
from ..integrity import clean
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check, Hint

__all__ = ["masked_diff", "predict_tiles", "row_softmax", "tiled_transpose"]

# captured when the package is imported, before any answer cell runs
_PROGRAM_GRID = triton_grid.program_grid
_INTERPRETER_OPS = frozenset({"empty", "new_empty", "set_", "copy_"})  # what the interpreter runs to hand tensors over


# --- launching a learner's kernel, and describing what it touched -------------------------------------------------

def _launch(c: Check, kernel: Any, grid: tuple[int, ...], *args: Any, name: str, hint: Sequence[str],
            forbid: Sequence[Any] = (), **meta: Any) -> Any:
    """`program_grid(kernel, grid, *args, **meta)`, recorded: every aten op the launch runs outside the interpreter's
    own hand-over is refused (the work must be the kernel's), on every case. A stub's NotImplementedError passes
    through (the check reports "not done"); any other failure in the interpreter fails the check."""
    run = c.watch(_PROGRAM_GRID, f"{name}, run by the interpreter,", allow_aten=_INTERPRETER_OPS, forbid=forbid,
                  escapes=True, hint=hint)
    try:
        return run(kernel, grid, *args, **meta)
    except TritonGridError as exc:
        cause = exc.__cause__
        while cause is not None:
            if isinstance(cause, NotImplementedError):
                raise cause from None
            cause = cause.__cause__
        c.fail(str(exc), hint)


def _call_at(kernel: Any, op: str, line: int | None) -> ast.Call | None:
    """The `tl.load` / `tl.store` call of the kernel's source that spans `line` (None when the source is not there)."""
    fn = getattr(kernel, "fn", kernel)
    code = getattr(fn, "__code__", None)
    if code is None or line is None:
        return None
    source = "".join(linecache.getlines(code.co_filename))
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr == op and node.lineno <= line <= (node.end_lineno or node.lineno)]
    return min(calls, key=lambda n: (n.end_lineno or n.lineno) - n.lineno, default=None)


def _mask_note(kernel: Any, op: str, line: int | None) -> str:
    """What the learner's own tl.load / tl.store did about masking, read from its source: its mask, or none."""
    call = _call_at(kernel, op, line)
    if call is None:
        return "no mask switched these lanes off"
    mask = next((k.value for k in call.keywords if k.arg == "mask"), None)
    position = 1 if op == "load" else 2
    if mask is None and len(call.args) > position:
        mask = call.args[position]
    if mask is None:
        return f"this tl.{op} has no mask, so every lane of it is on"
    return f"its mask ({ast.unparse(mask)}) leaves these lanes on"


def _tensor_size(grid: Any, name: str) -> str:
    info = next((t for t in grid.tensors if t.name == name), None)
    return f" ({name} has {info.numel} elements)" if info else ""


def _stores(c: Check, answer: Any, grid: Any, what: str, hints: Hint) -> dict[int, int]:
    """How many times each element of out_ptr was stored; fails on a load outside x_ptr or a store outside out_ptr
    (lanes switched off by a mask touch nothing and are skipped)."""
    stored: dict[int, int] = {}
    for program in grid.programs:
        for access in program.accesses:
            if not access.elements and not access.out_of_bounds:
                continue  # only masked-off lanes point there: nothing was touched
            mine = "x_ptr" if access.op == "load" else "out_ptr"
            if access.tensor != mine or access.out_of_bounds:
                note = _mask_note(answer, access.op, access.line)
                c.fail(f"{what}: {_stray(program, access, mine, note)}; each {access.op} of this kernel must "
                       f"stay inside {mine}", hints)
            for i in (access.indices() if access.op == "store" else ()):
                stored[i] = stored.get(i, 0) + 1
    return stored


def _out_of_bounds(c: Check, kernel: Any, grid: Any, what: str, hint: Sequence[str]) -> None:
    """Fail on the first lane outside every tensor, saying what the learner's access did (its mask, or none)."""
    if grid.errors_total == 0:
        return
    if not grid.errors:
        c.fail(f"{what}: {grid.errors_total} lane(s) outside every tensor argument", hint)
    e = grid.errors[0]
    verb = "reads" if e.op == "load" else "writes"
    where = f" at line {e.line}" if e.line else ""
    more = f" ({grid.errors_total - 1} more such access(es))" if grid.errors_total > 1 else ""
    c.fail(f"{what}: program {e.program}'s tl.{e.op}{where} {verb} {e.tensor}[{format_runs(e.indices)}], "
           f"{e.lanes} lane(s) outside every tensor argument{_tensor_size(grid, e.tensor)}: "
           f"{_mask_note(kernel, e.op, e.line)}{more}", hint)


def _stray(program: Any, access: Any, outside: str, note: str) -> str:
    """An access that touched memory outside the part it may touch: where, and what about it was wrong."""
    return (f"program {program.pid}'s tl.{access.op} at line {access.line} touches {access.tensor}"
            f"[{format_runs(access.elements or access.out_of_bounds)}], outside {outside}: {note}")


def _values(c: Check, got: torch.Tensor, expected: torch.Tensor, what: str, rel_tol: float, secret: bool,
            hint: Sequence[str]) -> None:
    """`got` (a tensor the check made and the kernel wrote) against `expected`. A mismatch says how many values
    differ and, on a visible case, the first one: its index and both values (a hidden case's values stay hidden)."""
    with clean():
        if rel_tol:
            close = torch.isclose(got, expected, rtol=rel_tol, atol=rel_tol, equal_nan=False)
        else:
            close = got.eq(expected)
        wrong = (~close).nonzero()
        count = int(wrong.shape[0])
        if count and not secret:
            first = tuple(int(i) for i in wrong[0])
            g, e = got[first].item(), expected[first].item()
    if count:
        if secret:  # how many would say how large the hidden case is
            c.fail(f"{what}: stored values differ from torch's", hint)
        c.fail(f"{what}: {count} of {got.numel()} stored values differ from torch's; the first, out"
               f"[{', '.join(map(str, first))}]: expected {e:.7g}, got {g:.7g}", hint)
    c.equal(got, expected, what=what, rel_tol=rel_tol, hint=hint, secret=secret)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# --- 17-masked-diff ---------------------------------------------------------------------------------------------

DIFF_HINTS = (
    "run show_program_grid(diff_kernel, ...) on a short x and look at the last program: every tl.load and tl.store "
    "needs a mask that switches off each lane whose pointer would leave its tensor, and out has one element fewer "
    "than x",
    "lane i computes out[i] from x[i] and x[i + 1]; when out[i] exists, both x elements exist too, so one mask "
    "built from the output index, given to all three accesses, covers them",
    "out[i] exists exactly when i < n - 1, and then x[i + 1] is at most x[n - 1]: a mask of offs < n lets the last "
    "lane read x[n]. Each program's lanes start at its program id times BLOCK, whatever the grid",
)
# (n, BLOCK, dtype) by name; each case draws its own values
DIFF_CASES = MappingProxyType({
    "20 elements, BLOCK=8": (20, 8, torch.float32),
    "37 elements, BLOCK=16": (37, 16, torch.float32),
    "100 elements, BLOCK=32": (100, 32, torch.float32),
    "one output element": (2, 4, torch.float32),
    "n - 1 a multiple of BLOCK, n not": (33, 32, torch.float32),
    "float64, 50 elements": (50, 16, torch.float64),
    "1000 elements, BLOCK=128": (1000, 128, torch.float32),
})
DIFF_VISIBLE = ("20 elements, BLOCK=8", "37 elements, BLOCK=16", "100 elements, BLOCK=32")


def masked_diff(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`diff_kernel(x_ptr, out_ptr, n, BLOCK)`: out[i] = x[i + 1] - x[i] on the grid cdiv(n - 1, BLOCK), every
    access inside its own tensor, each output stored once, exact values; hidden cases are named (n, BLOCK, dtype)."""
    for label, name in named(hidden, DIFF_VISIBLE, lambda name: name):
        n, block, dtype = DIFF_CASES[name]
        what = label if hidden is not None else f"diff_kernel on {n} elements ({_dtype_name(dtype)}), BLOCK={block}"
        gen = torch.Generator().manual_seed(1700 + n * block)
        x = (torch.randn(n, generator=gen, dtype=torch.float64) * 10).to(dtype)
        out = torch.full((n - 1,), -7.0, dtype=dtype)  # each element must be written
        grid = _launch(c, answer, ((n - 1 + block - 1) // block,), x, out, n, name="diff_kernel", hint=DIFF_HINTS,
                       BLOCK=block)
        _out_of_bounds(c, answer, grid, what, DIFF_HINTS)
        stored = _stores(c, answer, grid, what, DIFF_HINTS)
        missing = [i for i in range(n - 1) if i not in stored]
        twice = sorted(i for i, k in stored.items() if k > 1)
        c.that(not missing, f"{what}: out[{missing[0] if missing else ''}] (and {max(len(missing) - 1, 0)} more) "
               "was never stored", DIFF_HINTS)
        c.that(not twice, f"{what}: out[{twice[0] if twice else ''}] was stored more than once", DIFF_HINTS)
        with clean():
            expected = x[1:] - x[:-1]  # one subtraction: exact
        _values(c, out, expected, what, 0.0, hidden is not None, DIFF_HINTS)


# --- 17-row-softmax -----------------------------------------------------------------------------------------------

SOFTMAX_HINTS = (
    "one program per row: which program id names the row, and how far past each pointer does that row start? "
    "Section 4's row_max_kernel reads one row of a slice",
    "the masked lanes take part in tl.max and tl.sum: section 4 showed what other= does to a max; ask the same "
    "question for your sum. And x and out each have a row stride of their own",
    "print your kernel's output for a row of large values (the second case has values near 150): inf or nan there "
    "means exp overflowed, and softmax(v) equals softmax(v - c) for any constant c. Then compare the lanes your "
    "store writes with the row's, in show_program_grid",
)
# (rows, cols, scale, shift, x's extra columns, out's extra columns, BLOCK or None for the next power of two, dtype)
SOFTMAX_CASES = MappingProxyType({
    "3 x 37": (3, 37, 1.0, 0.0, 0, 0, None, torch.float32),
    "5 x 100, values up to about ±150, x a slice of a 5 x 128 matrix": (5, 100, 50.0, 0.0, 28, 0, None, torch.float32),
    "one column": (4, 1, 1.0, 0.0, 0, 0, None, torch.float32),
    "a block twice the row": (6, 64, 1.0, 0.0, 0, 0, 128, torch.float32),
    "values near -1000, out a slice": (2, 300, 5.0, -1000.0, 0, 20, None, torch.float32),
    "float64, both slices": (3, 20, 1.0, 0.0, 3, 5, None, torch.float64),
})
SOFTMAX_VISIBLE = ("3 x 37", "5 x 100, values up to about ±150, x a slice of a 5 x 128 matrix")


def row_softmax(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`softmax_kernel(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, BLOCK)`: one program per row, each
    reading and writing only its own row's n_cols elements, values within 1e-5 of torch.softmax, no tl.softmax;
    hidden cases are named shapes, scales, strides and dtypes."""
    import triton.language.standard as standard  # here, not at package import: every notebook imports the package

    banned = [standard.softmax.fn]
    for label, name in named(hidden, SOFTMAX_VISIBLE, lambda name: name):
        n_rows, n_cols, scale, shift, x_pad, out_pad, block, dtype = SOFTMAX_CASES[name]
        block = block or 1 << max(n_cols - 1, 1).bit_length()
        what = label if hidden is not None else (
            f"softmax_kernel on a {n_rows}x{n_cols} {_dtype_name(dtype)} x (row strides {n_cols + x_pad} and "
            f"{n_cols + out_pad}), BLOCK={block}")
        gen = torch.Generator().manual_seed(17 + n_rows * n_cols)
        x = (torch.randn(n_rows, n_cols + x_pad, generator=gen, dtype=dtype) * scale + shift)[:, :n_cols]
        out = torch.full((n_rows, n_cols + out_pad), -7.0, dtype=dtype)[:, :n_cols]
        xs, os_ = x.stride(0), out.stride(0)
        grid = _launch(c, answer, (n_rows,), x, out, xs, os_, n_cols, name="softmax_kernel", hint=SOFTMAX_HINTS,
                       forbid=banned, BLOCK=block)
        c.that("triton.language.standard.softmax" not in grid.helpers,
               f"{what}: the kernel called tl.softmax; build the softmax from tl.max, tl.exp and tl.sum",
               SOFTMAX_HINTS)
        _out_of_bounds(c, answer, grid, what, SOFTMAX_HINTS)
        for program in grid.programs:
            r = program.pid[0]
            rows = {"x_ptr": range(r * xs, r * xs + n_cols), "out_ptr": range(r * os_, r * os_ + n_cols)}
            written: list[int] = []
            for access in program.accesses:
                if not access.elements and not access.out_of_bounds:
                    continue  # only masked-off lanes point there: nothing was touched
                mine = "x_ptr" if access.op == "load" else "out_ptr"
                idx = access.indices()
                row = rows[mine]
                if access.tensor != mine or access.out_of_bounds or not all(i in row for i in idx):
                    if access.tensor == mine and idx and min(idx) != row.start:  # the row's start is off
                        note = f"this access starts at {mine}[{min(idx)}], and row {r} starts at {mine}[{row.start}]"
                    else:  # lanes past the row's end were left on
                        note = _mask_note(answer, access.op, access.line)
                    c.fail(f"{what}: {_stray(program, access, f'row {r} of {mine}', note)} (row {r} is "
                           f"{mine}[{row.start}..{row.stop - 1}])", SOFTMAX_HINTS)
                if access.op == "store":
                    written += idx
            c.that(sorted(written) == list(rows["out_ptr"]),
                   f"{what}: program {program.pid} should store each of the {n_cols} elements of row {r} of out "
                   f"once; it stored {len(written)} value(s)", SOFTMAX_HINTS)
        with clean():
            expected = torch.softmax(x, dim=1)
        _values(c, out, expected, what, 1e-5, hidden is not None, SOFTMAX_HINTS)


# --- 17-predict-tiles ---------------------------------------------------------------------------------------------

TILES_HINTS = (
    "a grid axis needs cdiv(size, block) programs; a program's tile is BR rows by BC columns starting at pid0 * BR "
    "and pid1 * BC, and its mask switches off the lanes whose row or column does not exist",
    "10 rows in tiles of 4 leave the last row-block 2 real rows; 13 columns in tiles of 8 leave the last "
    "column-block 5 real columns; a program masks lanes when it is in the last row-block or the last column-block, "
    "and a tile has BR * BC lanes",
)
TILES_QUESTIONS = ("programs", "program storing out[9, 12]", "its masked lanes", "programs with a masked lane",
                   "masked lanes in all")
# scale_tiles with BR=4, BC=8 written in, compiled per check under a file name of its own
TILES_KERNEL = '''
@triton.jit
def tiles(x_ptr, out_ptr, n_rows, n_cols):
    rows = tl.program_id(0) * 4 + tl.arange(0, 4)[:, None]
    cols = tl.program_id(1) * 8 + tl.arange(0, 8)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    tl.store(out_ptr + rows * n_cols + cols, 2 * tl.load(x_ptr + rows * n_cols + cols, mask=mask), mask=mask)
'''
TILES_MATRICES = MappingProxyType({"float32": torch.float32, "an int32 matrix": torch.int32})


def _tiles_kernel() -> Any:
    import triton
    import triton.language as tl

    filename = "<kernel of 17-predict-tiles>"
    linecache.cache[filename] = (len(TILES_KERNEL), None, TILES_KERNEL.splitlines(True), filename)  # for @triton.jit
    space: dict[str, Any] = {"triton": triton, "tl": tl}
    exec(compile(TILES_KERNEL, filename, "exec"), space)
    return space["tiles"]


def _tiles_truth(dtype: torch.dtype) -> dict[str, Any]:
    """The five answers, from the lens's record of the kernel run on a 10 x 13 matrix of `dtype`."""
    x = torch.ones(10, 13, dtype=dtype)
    grid = _PROGRAM_GRID(_tiles_kernel(), ((10 + 3) // 4, (13 + 7) // 8), x, torch.empty_like(x), 10, 13)
    off = {p.pid: sum(a.masked_lanes for a in p.accesses if a.op == "store") for p in grid.programs}
    owner = next(p.pid for p in grid.programs for a in p.accesses if a.op == "store" and 9 * 13 + 12 in a.indices())
    return {"programs": grid.num_programs, "program storing out[9, 12]": owner, "its masked lanes": off[owner],
            "programs with a masked lane": sum(1 for v in off.values() if v), "masked lanes in all": sum(off.values())}


def predict_tiles(c: Check, predictions: Any, hidden: Iterable[str] | None = None) -> None:
    """`PREDICT_TILES`: five secret predictions about scale_tiles on a 10 x 13 matrix with 4 x 8 tiles, against the
    lens's record; the hidden cases run the same grid on other matrices (the answers do not depend on the values)."""
    c.that(type(predictions) is dict, "PREDICT_TILES should be the dict above, filled in", TILES_HINTS)
    answers = dict(predictions)  # a plain copy: the check reads no object of the learner's twice
    c.equal(set(answers), set(TILES_QUESTIONS), what="the questions you answered", hint=TILES_HINTS)
    for label, matrix in named(hidden, ("float32",), lambda matrix: ""):
        truth = _tiles_truth(TILES_MATRICES[matrix])
        for key in TILES_QUESTIONS:
            what = f"your prediction for {key!r}" + (f" ({label})" if label else "")
            c.equal(answers[key], truth[key], what=what, hint=TILES_HINTS, secret=True)


# --- 17-tiled-transpose -------------------------------------------------------------------------------------------

TRANSPOSE_HINTS = (
    "run show_program_grid(transpose_kernel, ...) on a small matrix whose sides are not multiples of the tile, "
    "and look at a program in the last row of the grid and one in the last column: which lanes it loads, which it "
    "stores",
    "out is x transposed: x[r, c] goes to out[c, r], and out has n_cols rows of n_rows elements. A program can load "
    "its tile of x as section 5 does and store the same block of values, only at other positions",
    "a lane exists only when its row is below n_rows and its column below n_cols, and both accesses need that "
    "mask; then ask where element (r, c) of a contiguous matrix with n_rows columns sits",
)
# (n_rows, n_cols, BR, BC, dtype) by name; each case draws its own values
TRANSPOSE_CASES = MappingProxyType({
    "5 x 7, 2 x 4 tiles": (5, 7, 2, 4, torch.float32),
    "10 x 6, 8 x 4 tiles": (10, 6, 8, 4, torch.float32),
    "a square matrix, whole tiles": (8, 8, 4, 4, torch.float32),
    "tiles larger than the matrix": (3, 5, 8, 16, torch.float32),
    "int64, 9 x 2": (9, 2, 4, 2, torch.int64),
})
TRANSPOSE_VISIBLE = ("5 x 7, 2 x 4 tiles", "10 x 6, 8 x 4 tiles")


def tiled_transpose(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`transpose_kernel(x_ptr, out_ptr, n_rows, n_cols, BR, BC)`: out (n_cols x n_rows) = x.T, one BR x BC tile of x
    per program on the grid (cdiv(n_rows, BR), cdiv(n_cols, BC)); every access inside its tensor, each element of out
    stored once, exact values; hidden cases are named shapes, tiles and dtypes."""
    for label, name in named(hidden, TRANSPOSE_VISIBLE, lambda name: name):
        n_rows, n_cols, br, bc, dtype = TRANSPOSE_CASES[name]
        what = label if hidden is not None else (
            f"transpose_kernel on a {n_rows}x{n_cols} {_dtype_name(dtype)} x, {br}x{bc} tiles")
        gen = torch.Generator().manual_seed(1717 + n_rows * 31 + n_cols)
        x = (torch.randn(n_rows, n_cols, generator=gen, dtype=torch.float64) * 100).to(dtype)
        out = torch.full((n_cols, n_rows), -7, dtype=dtype)  # each element must be written
        grid_shape = ((n_rows + br - 1) // br, (n_cols + bc - 1) // bc)
        grid = _launch(c, answer, grid_shape, x, out, n_rows, n_cols, name="transpose_kernel", hint=TRANSPOSE_HINTS,
                       BR=br, BC=bc)
        _out_of_bounds(c, answer, grid, what, TRANSPOSE_HINTS)
        stored = _stores(c, answer, grid, what, TRANSPOSE_HINTS)
        missing = [i for i in range(n_rows * n_cols) if i not in stored]
        twice = sorted(i for i, k in stored.items() if k > 1)
        c.that(not missing, f"{what}: out[{divmod(missing[0], n_rows) if missing else ''}] (and "
               f"{max(len(missing) - 1, 0)} more) was never stored", TRANSPOSE_HINTS)
        c.that(not twice, f"{what}: out[{divmod(twice[0], n_rows) if twice else ''}] was stored more than once",
               TRANSPOSE_HINTS)
        with clean():
            expected = x.t().contiguous()
        _values(c, out, expected, what, 0.0, hidden is not None, TRANSPOSE_HINTS)
