"""Notebook 17's exercise checks, without a notebook: the reference kernels pass visible and hidden cases; a mask that
is there but wrong is described as that mask, a missing one as missing; a value mismatch names the first differing
element with both values and the count; a hidden case is named by its number only."""

from __future__ import annotations

import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from torchlens_widgets.course.exercises import n17  # noqa: E402


@triton.jit
def diff_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n - 1
    left = tl.load(x_ptr + offs, mask=valid)
    right = tl.load(x_ptr + offs + 1, mask=valid)
    tl.store(out_ptr + offs, right - left, mask=valid)


@triton.jit
def diff_one_too_many(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs + 1, mask=m) - tl.load(x_ptr + offs, mask=m), mask=m)


@triton.jit
def diff_unmasked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs + 1) - tl.load(x_ptr + offs))


@triton.jit
def diff_backwards(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n - 1
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) - tl.load(x_ptr + offs + 1, mask=m), mask=m)


@triton.jit
def diff_in_float32(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n - 1
    left = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs + 1, mask=m).to(tl.float32) - left, mask=m)


@triton.jit
def softmax_kernel(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    v = tl.load(x_ptr + row * x_row_stride + cols, mask=inside, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, e / tl.sum(e, axis=0), mask=inside)


@triton.jit
def softmax_other_zero(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    v = tl.load(x_ptr + row * x_row_stride + cols, mask=inside, other=0.0)
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, e / tl.sum(e, axis=0), mask=inside)


@triton.jit
def softmax_rows_by_n_cols(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    v = tl.load(x_ptr + row * n_cols + cols, mask=inside, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=inside)


@triton.jit
def softmax_store_unmasked(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    v = tl.load(x_ptr + row * x_row_stride + cols, mask=inside, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, e / tl.sum(e, axis=0))


@triton.jit
def softmax_calls_tl(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    v = tl.load(x_ptr + row * x_row_stride + cols, mask=inside, other=-float("inf"))
    tl.store(out_ptr + row * out_row_stride + cols, tl.softmax(v), mask=inside)


TILES = {"programs": 6, "program storing out[9, 12]": (2, 1), "its masked lanes": 22,
         "programs with a masked lane": 4, "masked lanes in all": 62}
HIDDEN_DIFF = ["one output element", "n - 1 a multiple of BLOCK, n not", "float64, 50 elements",
               "1000 elements, BLOCK=128"]
HIDDEN_SOFTMAX = ["one column", "a block twice the row", "values near -1000, out a slice", "float64, both slices"]


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("17-masked-diff", lambda c: (n17.masked_diff(c, diff_kernel),
                                                n17.masked_diff(c, diff_kernel, hidden=HIDDEN_DIFF))) is None
    assert verdict("17-row-softmax", lambda c: (n17.row_softmax(c, softmax_kernel),
                                                n17.row_softmax(c, softmax_kernel, hidden=HIDDEN_SOFTMAX))) is None
    assert verdict("17-predict-tiles", lambda c: (n17.predict_tiles(c, TILES),
                                                  n17.predict_tiles(c, TILES, hidden=["an int32 matrix"]))) is None


def test_a_mask_that_is_there_but_wrong_is_described_as_that_mask(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("17-masked-diff", lambda c: n17.masked_diff(c, diff_one_too_many))
    assert "its mask (m) leaves these lanes on" in message and "without a mask" not in message
    assert message.startswith("diff_kernel on 20 elements (float32), BLOCK=8: program (2,)'s tl.load")


def test_a_missing_mask_is_named_as_missing(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("17-masked-diff", lambda c: n17.masked_diff(c, diff_unmasked))
    assert "has no mask" in message and "outside" in message


def test_a_value_mismatch_names_the_first_element_both_values_and_the_count(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("17-masked-diff", lambda c: n17.masked_diff(c, diff_backwards))
    first = message.split("\n")[0]
    assert first.startswith("diff_kernel on 20 elements (float32), BLOCK=8: 19 of 19 stored values differ")
    assert "the first, out[0]: expected " in first and ", got " in first
    message = verdict("17-row-softmax", lambda c: n17.row_softmax(c, softmax_other_zero))
    assert "stored values differ from torch's; the first, out[" in message


def test_a_hidden_failure_names_the_case_by_number_only(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("17-masked-diff", lambda c: n17.masked_diff(c, diff_in_float32)) is None
    message = verdict("17-masked-diff", lambda c: n17.masked_diff(c, diff_in_float32, hidden=HIDDEN_DIFF))
    first = message.split("\n")[0]
    assert first.startswith("hidden case 3: ") and "float64" not in first and "50" not in first
    assert "expected" not in first  # the hidden case's values stay hidden


def test_softmax_rows_and_stores_are_described(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("17-row-softmax", lambda c: n17.row_softmax(c, softmax_rows_by_n_cols))
    assert "outside row" in message and "row 1 starts at x_ptr[" in message
    message = verdict("17-row-softmax", lambda c: n17.row_softmax(c, softmax_store_unmasked))
    assert "this tl.store has no mask" in message
    message = verdict("17-row-softmax", lambda c: n17.row_softmax(c, softmax_calls_tl))
    assert "softmax" in message


def test_the_last_softmax_hint_is_a_pointer_not_the_kernel() -> None:
    last = n17.SOFTMAX_HINTS[-1]
    assert "tl.load" not in last and "other=-inf" not in last.replace(" ", "") and "out_row_stride" not in last


def test_tile_predictions_are_secret_and_exact(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("17-predict-tiles", lambda c: n17.predict_tiles(c, {**TILES, "its masked lanes": 10}))
    assert message.startswith("your prediction for 'its masked lanes'") and "22" not in message.split("\n")[0]

    class Any(int):
        def __eq__(self, other):  # type: ignore[no-untyped-def]
            return True

        __hash__ = int.__hash__

    message = verdict("17-predict-tiles", lambda c: n17.predict_tiles(c, {k: Any(0) for k in TILES}))
    assert "your prediction for 'programs'" in message
    message = verdict("17-predict-tiles", lambda c: n17.predict_tiles(c, TILES, hidden=["an int32 matrix"]))
    assert message is None


@triton.jit
def transpose_kernel(x_ptr, out_ptr, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr):  # type: ignore[no-untyped-def]
    rows = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    cols = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    inside = (rows < n_rows) & (cols < n_cols)
    tl.store(out_ptr + cols * n_rows + rows, tl.load(x_ptr + rows * n_cols + cols, mask=inside), mask=inside)


@triton.jit
def transpose_copies(x_ptr, out_ptr, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr):  # type: ignore[no-untyped-def]
    rows = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    cols = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    inside = (rows < n_rows) & (cols < n_cols)
    tl.store(out_ptr + rows * n_cols + cols, tl.load(x_ptr + rows * n_cols + cols, mask=inside), mask=inside)


@triton.jit
def transpose_load_unmasked(x_ptr, out_ptr, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr):  # type: ignore[no-untyped-def]
    rows = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    cols = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    inside = (rows < n_rows) & (cols < n_cols)
    tl.store(out_ptr + cols * n_rows + rows, tl.load(x_ptr + rows * n_cols + cols), mask=inside)


@triton.jit
def transpose_shapes_written_in(x_ptr, out_ptr, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr):  # type: ignore[no-untyped-def]
    rows = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    cols = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    if BR == 2:
        inside = (rows < 5) & (cols < 7)
    else:
        inside = (rows < 10) & (cols < 6)
    tl.store(out_ptr + cols * n_rows + rows, tl.load(x_ptr + rows * n_cols + cols, mask=inside), mask=inside)


HIDDEN_TRANSPOSE = ["a square matrix, whole tiles", "tiles larger than the matrix", "int64, 9 x 2"]


def test_transpose_reference_passes_and_mistakes_are_described(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("17-tiled-transpose", lambda c: (
        n17.tiled_transpose(c, transpose_kernel),
        n17.tiled_transpose(c, transpose_kernel, hidden=HIDDEN_TRANSPOSE))) is None
    message = verdict("17-tiled-transpose", lambda c: n17.tiled_transpose(c, transpose_copies))
    assert message.startswith("transpose_kernel on a 5x7 float32 x, 2x4 tiles: ") and "values differ" in message
    message = verdict("17-tiled-transpose", lambda c: n17.tiled_transpose(c, transpose_load_unmasked))
    assert "tl.load" in message and "has no mask" in message and "outside" in message
    assert verdict("17-tiled-transpose", lambda c: n17.tiled_transpose(c, transpose_shapes_written_in)) is None
    message = verdict("17-tiled-transpose",
                      lambda c: n17.tiled_transpose(c, transpose_shapes_written_in, hidden=HIDDEN_TRANSPOSE))
    first = message.split("\n")[0]
    assert first.startswith("hidden case 1: ") and "8x8" not in first


def test_the_last_hints_are_pointers() -> None:
    for hints in (n17.SOFTMAX_HINTS, n17.TRANSPOSE_HINTS):
        last = hints[-1]
        assert "tl.load" not in last and "tl.store(" not in last and "other=" not in last and " * n_rows" not in last
