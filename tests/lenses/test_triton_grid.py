"""The Triton program-grid lens: which elements each program touched, what its mask switched off, and
unmasked accesses past a tensor's end reported as errors (which Triton's interpreter alone does not raise)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from triton.runtime import interpreter as interp  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from torchlens_widgets.lenses.triton_grid import (  # noqa: E402
    RUN_LIMIT,
    ProgramGrid,
    TritonGridError,
    expand,
    program_grid,
)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def row_softmax(x_ptr, out_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out_ptr + row * row_stride + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def scale_tiles(x_ptr, out_ptr, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    cols = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    tl.store(out_ptr + rows * n_cols + cols, tl.load(x_ptr + rows * n_cols + cols, mask=mask) * 2, mask=mask)


@triton.jit
def copy_unmasked(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def _twice(v):
    return v * 2


@triton.jit
def twice_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, _twice(tl.load(x_ptr + offs, mask=mask)), mask=mask)


def _builder_state() -> tuple:
    """What the lens patches: the builder's own attributes (the interpreter adds grid_dim/grid_idx itself),
    JITFunction.__call__, the reduce/scan ops, and triton.language (patched by the interpreter)."""
    own = set(vars(interp.interpreter_builder)) - {"grid_dim", "grid_idx"}
    return (own, JITFunction.__dict__["__call__"], "apply" in vars(interp.ReduceOps), "apply" in vars(interp.ScanOps),
            tl.load, tl.store, tl.program_id)


def test_masked_vector_add_records_masked_lanes_and_stores_each_element_once() -> None:
    n, block = 10, 4
    x, y, out = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.zeros(n)
    before = _builder_state()
    grid = program_grid(add_kernel, (triton.cdiv(n, block),), x, y, out, n, BLOCK=block)
    assert _builder_state() == before  # everything patched was put back
    assert torch.equal(out, x + y)  # the kernel ran as written
    assert grid.grid == (3,) and grid.num_programs == 3 and len(grid.programs) == 3 and grid.ok
    assert [t.name for t in grid.tensors] == ["x_ptr", "y_ptr", "out_ptr"]
    last = grid.program(2)
    assert [(a.op, a.tensor) for a in last.accesses] == [("load", "x_ptr"), ("load", "y_ptr"), ("store", "out_ptr")]
    store = last.accesses[-1]
    assert store.indices() == [8, 9] and store.masked_lanes == 2 and expand(store.masked) == [10, 11]
    assert store.lanes == 4 and store.touched == 2 and store.out_of_bounds == ()
    assert all(a.masked_lanes == 0 for p in grid.programs[:2] for a in p.accesses)
    stored = Counter(i for p in grid.programs for a in p.accesses if a.op == "store" for i in a.indices())
    assert stored == Counter(range(n))  # every output element stored exactly once across the programs
    assert all(a.line is not None for p in grid.programs for a in p.accesses)


def test_row_softmax_one_program_per_row() -> None:
    x = torch.randn(4, 6)
    out = torch.empty_like(x)
    grid = program_grid(row_softmax, (4,), x, out, x.stride(0), 6, BLOCK=8)
    assert torch.allclose(out, x.softmax(-1))
    for row, p in enumerate(grid.programs):
        load, store = p.accesses
        assert load.indices() == list(range(6 * row, 6 * row + 6)) == store.indices()
        assert load.masked_lanes == 2 and expand(load.masked) == [6 * row + 6, 6 * row + 7]
    assert grid.errors_total == 0 and ("row_stride", "6") in grid.scalars


def test_two_d_grid_of_tiles_covers_the_matrix_once() -> None:
    x = torch.randn(5, 7)
    out = torch.empty_like(x)
    grid = program_grid(scale_tiles, lambda args: (triton.cdiv(5, args["BR"]), triton.cdiv(7, args["BC"])),
                        x, out, 5, 7, BR=2, BC=4)
    assert grid.grid == (3, 2) and torch.allclose(out, 2 * x)
    assert [p.pid for p in grid.programs][:3] == [(0, 0), (0, 1), (1, 0)]  # the interpreter's order: axis 0 slowest
    corner = grid.program((2, 1)).accesses[1]
    assert corner.indices() == [32, 33, 34] and corner.masked_lanes == 5
    stored = Counter(i for p in grid.programs for a in p.accesses if a.op == "store" for i in a.indices())
    assert stored == Counter(range(35))


def test_unmasked_load_past_the_end_is_an_error_the_interpreter_does_not_raise() -> None:
    # The interpreter alone: no exception, and lanes 10..15 read whatever lies after x's 40 bytes (inside the
    # allocator's block here, so this read is safe to make in a test).
    x, out = torch.arange(10, dtype=torch.float32), torch.full((16,), -1.0)
    interp.InterpretedFunction(copy_unmasked.fn).run(x, out, BLOCK=16, grid=(1,), warmup=False)
    assert torch.equal(out[:10], x)
    # The lens: the same launch reports the lanes, and neither reads nor writes them.
    out = torch.full((16,), -1.0)
    grid = program_grid(copy_unmasked, (1,), x, out, BLOCK=16)
    assert not grid.ok and grid.errors_total == 1
    err = grid.errors[0]
    assert (err.program, err.op, err.tensor, expand(err.indices), err.lanes) == ((0,), "load", "x_ptr",
                                                                                  list(range(10, 16)), 6)
    assert "program (0,)" in err.message and "x_ptr[10..15]" in err.message and "no lane of it was masked off" in err.message
    assert err.line is not None and f"line {err.line}" in err.message
    load = grid.programs[0].accesses[0]
    assert load.indices() == list(range(10)) and expand(load.out_of_bounds) == list(range(10, 16))
    assert torch.equal(out, torch.cat([x, torch.zeros(6)]))  # out-of-bounds lanes loaded 0 here
    assert "ERROR" in grid.summary() and "x_ptr[10..15]" in grid.summary()


@triton.jit
def far_read(x_ptr, y_ptr, out_ptr, FAR: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + FAR + offs) + tl.load(y_ptr + offs))


def test_a_mask_that_is_present_but_off_by_one_is_not_called_no_mask() -> None:
    """add_kernel with n one past x's end: the mask switches off 5 of 16 lanes and leaves lane 10 on."""
    x, y, out = torch.arange(10.0), torch.ones(10), torch.zeros(10)
    grid = program_grid(add_kernel, (1,), x, y, out, 11, BLOCK=16)
    assert not grid.ok
    message = grid.errors[0].message
    assert "x_ptr[10]" in message and "left on by a mask that switched off 5 other lane(s)" in message, message
    assert "no lane of it was masked off" not in message


def test_bounds_are_the_tensor_passed_not_the_storage_under_it() -> None:
    """A kernel reading 16 elements of buf[:8] goes past the tensor it was given: an error, though the storage
    holds 16 (the bug the lens exists to catch is an ignored shape)."""
    buf = torch.arange(16, dtype=torch.float32)
    out = torch.zeros(16)
    grid = program_grid(copy_unmasked, (1,), buf[:8], out, BLOCK=16)
    assert not grid.ok and grid.errors_total == 1
    err = grid.errors[0]
    assert (err.tensor, expand(err.indices)) == ("x_ptr", list(range(8, 16))), err.message
    assert torch.equal(out, torch.cat([buf[:8], torch.zeros(8)]))  # the lanes past the view were switched off
    assert program_grid(copy_unmasked, (1,), buf[:16], torch.zeros(16), BLOCK=16).ok


def test_an_access_far_past_one_tensor_is_blamed_on_that_tensor() -> None:
    """The pointers' own tensor is followed through pointer arithmetic: a read far past x is x's error even when
    y lies closer to the address, and landing inside y is still out of x's bounds."""
    x, y = torch.zeros(8), torch.ones(8)
    far = program_grid(far_read, (1,), x, y, torch.zeros(8), FAR=1 << 30, BLOCK=8)
    assert not far.ok and {e.tensor for e in far.errors} == {"x_ptr"}, [e.message for e in far.errors]
    assert expand(far.errors[0].indices)[0] == 1 << 30
    into_y = (y.data_ptr() - x.data_ptr()) // 4  # x + this offset is y[0]
    inside = program_grid(far_read, (1,), x, y, torch.zeros(8), FAR=into_y, BLOCK=8)
    assert not inside.ok and inside.errors[0].tensor == "x_ptr" and "x_ptr[" in inside.errors[0].message


def test_kernel_defined_with_the_interpreter_on_and_nested_jit_helpers() -> None:
    x, out = torch.arange(6, dtype=torch.float32), torch.zeros(6)
    grid = program_grid(interp.InterpretedFunction(twice_kernel.fn), (2,), x, out, 6, BLOCK=4)
    assert torch.equal(out, 2 * x) and len(grid.programs) == 2
    out.zero_()
    program_grid(twice_kernel, (2,), x, out, 6, BLOCK=4)  # a compiled JITFunction calling another one
    assert torch.equal(out, 2 * x)


def test_bfloat16_arithmetic_is_flagged_because_the_interpreter_gets_it_wrong() -> None:
    a = torch.tensor([1.5, 2.25, -3.0]).bfloat16()
    b = torch.ones(3, dtype=torch.bfloat16)
    out = torch.zeros(3, dtype=torch.bfloat16)
    grid = program_grid(add_kernel, (1,), a, b, out, 3, BLOCK=4)
    if triton.__version__ == "3.7.1":  # observed: adds the raw 16-bit patterns
        assert not torch.equal(out, a + b)
    assert grid.raw_bits_dtypes == ("bf16",) and not grid.ok
    assert "WRONG" in grid.warnings[0] and "WRONG" in grid.summary()
    ok = program_grid(add_kernel, (1,), a.float(), b.float(), torch.zeros(3), 3, BLOCK=4)
    assert ok.raw_bits_dtypes == () and ok.ok


def test_cap_on_recorded_programs_says_what_was_left_out() -> None:
    n = 40
    x, out = torch.arange(n, dtype=torch.float32), torch.zeros(n)
    grid = program_grid(add_kernel, (10,), x, x, out, n, BLOCK=4, max_programs=3)
    assert len(grid.programs) == 3 and grid.num_programs == 10 and torch.equal(out, 2 * x)
    assert grid.left_out is not None and "7 of 10" in grid.left_out
    with pytest.raises(TritonGridError, match="not recorded"):
        grid.program(5)


def test_results_are_json_able() -> None:
    x, out = torch.arange(10, dtype=torch.float32), torch.zeros(16)
    grid = program_grid(copy_unmasked, (1,), x, out, BLOCK=16)
    data = json.loads(json.dumps(grid.to_dict()))
    assert data["errors"][0]["tensor"] == "x_ptr" and data["programs"][0]["pid"] == [0]
    assert isinstance(grid, ProgramGrid) and "0x" not in json.dumps(data)  # no addresses


@pytest.mark.parametrize("bad, match", [
    (3, r"\(3,\)"), ((0,), "positive"), ((2, 2, 2, 2), "1 to 3"), ((1.5,), "positive ints"), ("4", "tuple"),
    ((RUN_LIMIT + 1,), "at most"),
])
def test_bad_grids(bad: object, match: str) -> None:
    with pytest.raises(TritonGridError, match=match):
        program_grid(add_kernel, bad, torch.zeros(4), torch.zeros(4), torch.zeros(4), 4, BLOCK=4)


def test_bad_kernels_and_arguments() -> None:
    def plain(x_ptr):
        pass

    with pytest.raises(TritonGridError, match="@triton.jit"):
        program_grid(plain, (1,), torch.zeros(4))
    with pytest.raises(TritonGridError, match="autotune"):
        program_grid(triton.autotune([triton.Config({"BLOCK": 4})], key=["n"])(add_kernel), (1,),
                     torch.zeros(4), torch.zeros(4), torch.zeros(4), 4)
    with pytest.raises(TritonGridError, match="BLOCK"):
        program_grid(add_kernel, (1,), torch.zeros(4), torch.zeros(4), torch.zeros(4), 4)  # constexpr missing
    with pytest.raises(TritonGridError, match="CPU"):
        program_grid(add_kernel, (1,), torch.zeros(4, device="meta"), torch.zeros(4), torch.zeros(4), 4, BLOCK=4)
    with pytest.raises(TritonGridError, match="max_programs"):
        program_grid(add_kernel, (1,), torch.zeros(4), torch.zeros(4), torch.zeros(4), 4, BLOCK=4, max_programs=0)


def test_a_failing_kernel_names_the_program_and_everything_is_restored() -> None:
    before = _builder_state()
    x = torch.ones(3, dtype=torch.bfloat16)

    @triton.jit
    def scale(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)

    with pytest.raises(TritonGridError, match=r"program \(0,\).*float32"):
        program_grid(scale, (1,), x, 3, BLOCK=4)
    assert _builder_state() == before


@triton.jit
def add_in_float32(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, total.to(tl.bfloat16), mask=mask)


_twice_interpreted = interp.InterpretedFunction(_twice.fn)  # a helper as @triton.jit makes it under TRITON_INTERPRET=1


@triton.jit
def calls_interpreted(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, _twice_interpreted(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


def test_a_downcast_to_bfloat16_is_flagged_because_the_interpreter_rounds_it_toward_zero() -> None:
    # 0.1 + 1 in float32 is 1.1000977; the bfloat16 steps around it are 1.09375 and 1.1015625 (nearer)
    a, b = torch.tensor([0.1, -0.1, 1.5]).bfloat16(), torch.tensor([1.0, -1.0, 1.0]).bfloat16()
    out = torch.zeros(3, dtype=torch.bfloat16)
    grid = program_grid(add_in_float32, (1,), a, b, out, 3, BLOCK=4)
    if triton.__version__ == "3.7.1":  # observed: the top 16 bits are kept
        assert out.tolist() == [1.09375, -1.09375, 2.5] and (a + b).tolist() == [1.1015625, -1.1015625, 2.5]
    assert grid.raw_bits_dtypes == () and grid.truncated_casts == ("fp32 -> bf16",) and not grid.ok
    assert any("toward zero" in w for w in grid.warnings)
    f32 = program_grid(add_kernel, (1,), a.float(), b.float(), torch.zeros(3), 3, BLOCK=4)
    assert f32.truncated_casts == () and f32.ok
    half = program_grid(add_kernel, (1,), a.half(), b.half(), torch.zeros(3, dtype=torch.half), 3, BLOCK=4)
    assert half.truncated_casts == () and half.raw_bits_dtypes == () and half.ok  # numpy has float16: right


def test_jit_helpers_the_kernel_called_are_listed_whichever_way_they_were_defined() -> None:
    x = torch.randn(2, 5)
    out = torch.empty_like(x)
    grid = program_grid(row_softmax, (2,), x, out, 5, 5, BLOCK=8)
    assert grid.helpers == ("triton.language.standard.max", "triton.language.standard.sum")
    assert torch.allclose(out, x.softmax(-1))
    y, o = torch.arange(6, dtype=torch.float32), torch.zeros(6)
    assert program_grid(twice_kernel, (2,), y, o, 6, BLOCK=4).helpers == (f"{__name__}._twice",)
    before = _builder_state()
    o.zero_()
    grid = program_grid(calls_interpreted, (1,), y, o, 6, BLOCK=8)
    assert grid.helpers == (f"{__name__}._twice",) and torch.equal(o, 2 * y)
    assert _builder_state() == before and "__call__" in vars(interp.InterpretedFunction)
