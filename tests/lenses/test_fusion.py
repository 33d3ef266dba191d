"""The fusion lens: eager bytes per aten op, Inductor's fused bytes per kernel, intermediates, timing."""

from __future__ import annotations

import json

import pytest
import torch

from torchlens_widgets.lenses.fusion import (
    FusionError,
    FusionReport,
    MemoryAccess,
    Traffic,
    eager_traffic,
    fused_traffic,
    fusion_report,
    memory_accesses,
    time_pair,
    time_until,
    vector_isa,
)
from torchlens_widgets.lenses.recorded import recording

F32 = 4


def silu_affine(x, w, b):
    y = x * w + b
    return y * torch.sigmoid(y)


def softmax_by_hand(x):
    m = x.amax(dim=1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(dim=1, keepdim=True)


def linear_relu(x, w, b):
    return torch.relu(x @ w + b)


def two_outputs(x):
    y = x * 2
    return y.sum(dim=1), y + 1


ROWS, COLS = 16, 64
N = ROWS * COLS * F32


@pytest.fixture
def xwb():
    g = torch.Generator().manual_seed(0)
    return torch.randn(ROWS, COLS, generator=g), torch.randn(COLS, generator=g), torch.randn(COLS, generator=g)


def test_eager_counts_every_op_and_a_broadcast_once(xwb):
    t = eager_traffic(silu_affine, *xwb)
    assert [k.name for k in t.kernels] == ["aten.mul", "aten.add", "aten.sigmoid", "aten.mul"]
    assert t.kernels[0].reads == (("x", N), ("w", COLS * F32))  # w is broadcast: 64 floats, not 16 x 64
    assert t.kernels[0].writes == (("t1", N),)
    assert t.kernels[3].reads == (("t2", N), ("t3", N))
    assert t.kernels[3].writes == (("out", N),)
    assert t.bytes_read == 5 * N + 2 * COLS * F32
    assert t.bytes_written == 4 * N
    assert t.intermediates == (("t1", N), ("t2", N), ("t3", N))
    assert t.inputs == ("x", "w", "b") and t.outputs == ("out",)


def test_fused_pointwise_chain_is_one_kernel_reading_each_input_once(xwb):
    t = fused_traffic(silu_affine, *xwb)
    assert t.kernel_count == 1
    (k,) = t.kernels
    assert k.name.startswith("cpp_fused_") and "sigmoid" in k.name
    assert dict(k.reads) == {"x": N, "w": COLS * F32, "b": COLS * F32}
    assert dict(k.writes) == {"out": N}
    assert t.intermediate_count == 0 and t.graph_breaks == 0
    assert set(k.ops) >= {"mul", "add", "sigmoid"}


def test_reduction_fuses_with_its_pointwise_neighbours(xwb):
    x = xwb[0]
    eager = eager_traffic(softmax_by_hand, x)
    assert eager.kernel_count == 5
    assert [n for n, _ in eager.intermediates] == ["t1", "t2", "t3", "t4"]
    assert dict(eager.intermediates)["t1"] == ROWS * F32  # the row maxima: one float per row
    fused = fused_traffic(softmax_by_hand, x)
    assert fused.kernel_count == 1 and fused.intermediate_count == 0
    assert fused.bytes_moved == 2 * N


def test_a_matmul_is_a_library_call_and_its_result_is_materialised(xwb):
    x = xwb[0]
    w, b = torch.randn(COLS, 32), torch.randn(32)
    fused = fused_traffic(linear_relu, x, w, b)
    names = [k.name for k in fused.kernels]
    assert any(n.startswith("extern_kernels.") for n in names), names
    assert any(n.startswith("cpp_fused_") for n in names), names
    assert fused.intermediate_count == 1  # the matmul's output is written, then read by the relu kernel
    eager = eager_traffic(linear_relu, x, w, b)
    assert eager.intermediate_count == 2 and fused.bytes_moved < eager.bytes_moved


def test_outputs_are_not_intermediates_even_when_read_again(xwb):
    t = eager_traffic(two_outputs, xwb[0])
    assert t.outputs == ("out0", "out1")
    assert t.intermediates == (("t1", N),)  # y is read by sum and add, and never returned
    f = fused_traffic(two_outputs, xwb[0])
    assert f.intermediate_count == 0 and set(f.outputs) == {"out0", "out1"}


def test_views_and_in_place_ops(xwb):
    def f(x):
        y = x.t().contiguous()  # a view is free; contiguous copies
        y.mul_(2)  # in place: reads and writes y
        return y.view(-1)

    t = eager_traffic(f, xwb[0])
    assert [k.name for k in t.kernels] == ["aten.clone", "aten.mul_"]
    assert t.kernels[1].reads == (("out", N),) and t.kernels[1].writes == (("out", N),)
    assert t.intermediate_count == 0


def test_graph_breaks_are_counted(xwb):
    def broken(x):
        y = x * 2
        if y.sum() > 0:  # data-dependent branch: a graph break
            y = y + 1
        return y * 3

    t = fused_traffic(broken, xwb[0])
    assert t.graph_breaks >= 1 and t.kernel_count >= 2


def test_report_times_both_and_compares_bytes(xwb):
    r = fusion_report(silu_affine, *xwb, repeat=3)
    assert r.eager_ms is not None and r.eager_ms > 0 and r.fused_ms is not None and r.fused_ms > 0
    assert r.bytes_ratio == pytest.approx(r.eager.bytes_moved / r.fused.bytes_moved)
    assert r.speedup == pytest.approx(r.eager_ms / r.fused_ms)
    assert "silu_affine" in r.summary()
    d = r.to_dict()
    assert d["eager"]["intermediate_count"] == 3 and d["fused"]["kernel_count"] == 1
    untimed = fusion_report(silu_affine, *xwb, timed=False)
    assert untimed.speedup is None


def test_bad_input_gets_advice():
    with pytest.raises(FusionError, match="function"):
        eager_traffic(3, torch.ones(2))
    with pytest.raises(FusionError, match="requires grad"):
        eager_traffic(silu_affine, torch.ones(2, requires_grad=True), torch.ones(2), torch.ones(2))
    with pytest.raises(FusionError, match="Inductor"):
        fused_traffic(silu_affine, torch.ones(2), torch.ones(2), torch.ones(2), backend="eager")
    with pytest.raises(FusionError, match="repeat"):
        time_pair(lambda: None, lambda: None, repeat=0)


def test_time_pair_alternates_and_restores_threads():
    before = torch.get_num_threads()
    calls: list[str] = []
    time_pair(lambda: calls.append("a"), lambda: calls.append("b"), repeat=2)
    assert calls == ["a", "b", "a", "b", "a", "b"]
    assert torch.get_num_threads() == before


def test_scheduler_hook_is_put_back(xwb):
    from torch._inductor import scheduler

    original = scheduler.Scheduler.codegen
    fused_traffic(silu_affine, *xwb)
    assert scheduler.Scheduler.codegen is original


def test_time_all_is_round_robin():
    from torchlens_widgets.lenses.fusion import time_all

    calls: list[int] = []
    ms = time_all(*(lambda i=i: calls.append(i) for i in range(3)), repeat=2)
    assert calls == [0, 1, 2] * 3 and len(ms) == 3 and all(m >= 0 for m in ms)
    with pytest.raises(FusionError, match="at least one"):
        time_all()


# Inductor's generated lines for one load and one store, as three CPUs get them (torch 2.13)
AVX512 = """auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 1024L*x0), static_cast<int64_t>(16));
auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
tmp6.store(out_ptr0 + static_cast<int64_t>(x1 + 1024L*x0));"""
AVX2 = AVX512.replace("(16)", "(8)")
SCALAR = """auto tmp0 = in_ptr0[static_cast<int64_t>(x1 + 1024L*x0)];
auto tmp1 = in_ptr1[static_cast<int64_t>(x1)];
out_ptr0[static_cast<int64_t>(x1 + 1024L*x0)] = tmp6;"""


@pytest.mark.parametrize(("source", "lanes"), [(AVX512, 16), (AVX2, 8), (SCALAR, None)])
def test_memory_accesses_read_any_vector_width(source, lanes):
    found = memory_accesses(source, lanes)
    assert [(a.kind, a.pointer, a.index, a.lanes) for a in found] == [
        ("load", "in_ptr0", "x1 + 1024L*x0", lanes), ("load", "in_ptr1", "x1", lanes),
        ("store", "out_ptr0", "x1 + 1024L*x0", lanes)]
    # the shared form names the width: the same text on every CPU
    assert [a.normalised() for a in found] == [a.normalised() for a in memory_accesses(AVX512)]


def test_a_vector_store_takes_its_width_from_the_isa_or_the_code():
    (plain,) = memory_accesses("tmp6.store(out_ptr0 + static_cast<int64_t>(x0));")
    assert plain.lanes is None  # no width in the code, none given
    (tail,) = memory_accesses("tmp6.store(out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(3));", 16)
    assert tail.lanes == 3  # a partial store says its count
    (idx,) = memory_accesses("auto t = in_ptr2[static_cast<int64_t>((x0 / 4L) + 8L*(x1 % 3L))];")
    assert idx == MemoryAccess("load", "in_ptr2", "(x0 / 4L) + 8L*(x1 % 3L)", None, idx.line)


def test_fused_traffic_names_the_vector_isa_its_code_was_written_for(xwb, monkeypatch):
    """The lanes in the code are the recorded ISA's; lowering ATEN_CPU_CAPABILITY to default gives scalar loops."""
    t = fused_traffic(silu_affine, *xwb)
    assert t.vector == vector_isa()
    (k,) = t.kernels
    found = k.accesses(t.vector.float_lanes or None)
    assert [(a.kind, a.pointer) for a in found] == [("load", "in_ptr0"), ("load", "in_ptr1"), ("load", "in_ptr2"),
                                                    ("store", "out_ptr0")]
    assert all(a.lanes == (t.vector.float_lanes or None) for a in found)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    scalar = fused_traffic(silu_affine, *xwb)
    assert scalar.vector.bits == 0 and "scalar" in scalar.vector.describe()
    assert [a.normalised() for a in scalar.kernels[0].accesses()] == [a.normalised() for a in found]
    assert all(a.lanes is None for a in scalar.kernels[0].accesses()) and "at::vec" not in scalar.kernels[0].source


def test_a_report_rebuilds_from_its_dict(xwb):
    """Saved data (a GPU recording) draws with show_fusion: from_dict gives back the report to_dict came from."""
    x = xwb[0]
    report = fusion_report(linear_relu, x, torch.randn(COLS, 32), torch.randn(32), timed=False)
    data = json.loads(json.dumps(report.to_dict()))  # as saved: tuples become lists
    again = FusionReport.from_dict(data)
    assert again == report and again.to_dict() == report.to_dict()
    assert again.fused.vector == report.fused.vector and again.fused.kernels[1].source
    assert Traffic.from_dict(data["eager"]) == report.eager


def test_the_recorded_gpu_reports_rebuild():
    rec = recording("fusion")
    for name in ("silu_affine", "linear_relu"):
        data = rec.load(f"fn_{name}")["report"]
        report = FusionReport.from_dict(data)
        assert json.loads(json.dumps(report.to_dict()))["fused"] == data["fused"] and report.fused.vector is None  # Triton: no C++ ISA
        assert report.fused.kernels[-1].name.startswith("triton_")


def guarded_standardise(x):
    m = x.mean(dim=1, keepdim=True)
    c = x - m
    s = (c * c).mean(dim=1, keepdim=True).sqrt()
    if (s == 0).any():  # a graph break: the full-size c crosses it
        s = torch.where(s == 0, torch.ones_like(s), s)
    return c / s


def test_a_tensor_crossing_a_graph_break_is_an_intermediate_named_as_the_function_names_it():
    x = torch.randn(8, 16)
    t = fused_traffic(guarded_standardise, x)
    assert t.graph_breaks == 1 and t.inputs == ("x",) and t.outputs == ("out",)
    mids = dict(t.intermediates)
    assert mids["c"] == 8 * 16 * F32 and mids["s"] == 8 * F32  # written by graph 0, read back by graph 1
    (last,) = [k for k in t.kernels if ("out", 8 * 16 * F32) in k.writes]
    assert dict(last.reads) == {"c": 8 * 16 * F32, "s": 8 * F32}


def test_a_library_call_with_two_results_writes_both():
    def sorted_doubled(x):
        return torch.sort(x, dim=1).values * 2

    x = torch.randn(8, 16)
    t = fused_traffic(sorted_doubled, x)
    sort, mul = t.kernels
    assert sort.name == "torch.ops.aten.sort.stable" and mul.name.startswith("cpp_fused_mul")
    assert sorted(n for _, n in sort.writes) == [8 * 16 * F32, 8 * 16 * 8]  # values (float32), indices (int64)
    (values,) = [b for b, n in sort.writes if n == 8 * 16 * F32]
    assert t.intermediates == ((values, 8 * 16 * F32),) and dict(mul.reads) == {values: 8 * 16 * F32}


def test_time_until_retries_until_the_claim_holds():
    calls = []
    ms, tries = time_until(lambda: None, holds=lambda ms: calls.append(ms) or len(calls) == 2, tries=3, repeat=1)
    assert tries == 2 and len(ms) == 1
    with pytest.raises(FusionError):
        time_until(lambda: None, holds=lambda ms: True, tries=0)
