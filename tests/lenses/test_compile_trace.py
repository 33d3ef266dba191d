"""The compile lens against torch's own answers: graph and break counts equal torch._dynamo.explain's on the
same functions; breaks carry the user's line and torch's hints; recompiles name the failing guard; guards,
AOT forward/backward graphs and Inductor kernels (with the nodes each fused) are read back; bad input and a
fullgraph break get the lens's own error; torch's logging is left as it was."""

from __future__ import annotations

import inspect
import json
import logging

import pytest
import torch

from torchlens_widgets.lenses.compile_trace import CompileTrace, CompileTraceError, compile_trace
from torchlens_widgets.lenses.recorded import recording


def no_break(x):
    return (x.sin() * 2 + 1).relu()


def one_break(x):
    y = x.cos() + 1
    print("between graphs")
    return y * y


def data_dependent(x):
    y = x * 2
    if y.sum() > 0:
        return y.exp()
    return y.neg()


def two_breaks(x):
    a = x + 1
    print("one")
    b = a * 2
    print("two")
    return b - 1


def _line_of(fn, text: str) -> int:
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(src) if text in line)


@pytest.mark.parametrize("fn", [no_break, one_break, data_dependent, two_breaks], ids=lambda f: f.__name__)
def test_graph_and_break_counts_agree_with_explain(fn) -> None:
    x = torch.randn(16)
    trace = compile_trace(fn, x, backend="eager")
    explained = torch._dynamo.explain(fn)(x)
    assert trace.graph_count == explained.graph_count
    assert trace.break_count == trace.breaks_ending_a_graph == len(explained.break_reasons)
    assert trace.break_count == explained.graph_break_count
    assert torch.allclose(trace.result, fn(x))  # it ran the function, compiled


def print_first(x):
    print("before any op")
    return x.sin()


def test_a_break_before_any_op_is_counted_where_explain_sees_none() -> None:
    trace = compile_trace(print_first, torch.randn(3), backend="eager")
    explained = torch._dynamo.explain(print_first)(torch.randn(3))
    assert trace.graph_count == explained.graph_count == 1
    assert explained.graph_break_count == 0 and trace.breaks_ending_a_graph == 0  # explain's count, matched
    assert trace.break_count == 1 and trace.breaks[0].line == _line_of(print_first, "print(")  # but it is there


def test_a_break_carries_the_user_s_line_and_torch_s_hints() -> None:
    trace = compile_trace(one_break, torch.randn(4), backend="eager")
    (brk,) = trace.breaks
    assert brk.line == _line_of(one_break, "print(") and brk.code.strip() == 'print("between graphs")'
    assert brk.filename == __file__ and brk.function == "one_break"
    assert "print" in brk.explanation and brk.hints and all("report an issue" not in h for h in brk.hints)
    first, second = trace.graphs
    assert first.ended_by_break and not second.ended_by_break
    assert first.lines == (_line_of(one_break, "x.cos()"),) and second.lines == (_line_of(one_break, "y * y"),)
    assert [o.target for o in first.ops] == ["Tensor.cos", "+"]
    assert f"line {brk.line}" in trace.summary()


def test_recompiles_name_the_guard_that_failed() -> None:
    def scale(x, k):
        return x * k

    static = compile_trace(scale, calls=[(torch.randn(8), 2), (torch.randn(8), 3), (torch.randn(5), 3)],
                           backend="eager", dynamic=False)
    assert static.recompile_count == 2
    by_k, by_shape = static.recompiles
    assert by_k.against == ("0/0",) and "k == 2" in by_k.reasons[0]
    assert any("size mismatch at index 0" in r and "expected 8, actual 5" in r for r in by_shape.reasons)
    # the default (dynamic=None) marks a changed size dynamic on the first recompile, then reuses it
    auto = compile_trace(scale, calls=[(torch.randn(8), 2), (torch.randn(5), 2), (torch.randn(11), 2)],
                         backend="eager")
    assert auto.recompile_count == 1 and auto.graph_count == 2


def test_guards_of_a_frame_point_at_the_user_s_code() -> None:
    trace = compile_trace(no_break, torch.randn(4), backend="eager")
    (frame,) = trace.frames
    assert frame.function == "no_break" and frame.compile_id == "0/0" and frame.graph_ops == 4
    tensor = [g for g in frame.guards if g.kind == "TENSOR_MATCH"]
    assert [g.source for g in tensor] == ["L['x']"] and tensor[0].line == _line_of(no_break, "return")
    assert frame.seconds["total"] > 0 and "dynamo" in frame.seconds


def test_inductor_kernels_aot_graphs_and_the_nodes_each_kernel_fused() -> None:
    x = torch.randn(64, requires_grad=True)
    trace = compile_trace(no_break, x, backward=True)
    (frame,) = trace.frames
    assert frame.aot_forward and frame.aot_backward and "aten.sin" in frame.aot_forward
    assert "aten.cos" in frame.aot_backward  # d/dx sin x, computed in the backward graph
    assert {"inductor", "aot_autograd", "dynamo"} <= set(frame.seconds)
    forward = [k for k in trace.kernels if k.stage == "forward"]
    backward = [k for k in trace.kernels if k.stage == "backward"]
    assert len(forward) == 1 and backward, trace.summary()
    assert {"sin", "mul", "add", "relu"} <= set(forward[0].fused_nodes)  # one kernel for the whole chain
    assert x.grad is not None and not compile_trace(no_break, x).kernels[1:]  # backward: compiled when it runs
    assert forward[0].lines == (_line_of(no_break, "return"),)
    assert "kernel" in forward[0].source and "#include" in forward[0].source
    assert torch.allclose(trace.result, no_break(x))
    json.dumps(trace.to_dict())  # plain data


def test_fullgraph_with_a_break_is_the_lens_s_own_error() -> None:
    with pytest.raises(CompileTraceError, match=r"fullgraph=True.*line \d+"):
        compile_trace(one_break, torch.randn(4), backend="eager", fullgraph=True)


@pytest.mark.parametrize("call, match", [
    (lambda: compile_trace(42), "takes a function"),
    (lambda: compile_trace(no_break, torch.randn(2), backend="tvm"), "backend="),
    (lambda: compile_trace(no_break, torch.randn(2), fullgrpah=True), "unknown option"),
    (lambda: compile_trace(no_break, torch.randn(2), calls=[(torch.randn(2),)]), "not both"),
    (lambda: compile_trace(no_break, calls=[]), "at least one"),
    (lambda: compile_trace(no_break, torch.randn(2), backend="eager", backward=True), "requires_grad"),
    (lambda: compile_trace(no_break, torch.randn(2), backend="eager", mode="max-autotune"), "inductor"),
])
def test_bad_input_is_refused_with_advice(call, match: str) -> None:
    with pytest.raises(CompileTraceError, match=match):
        call()


def test_torch_logging_is_left_as_it_was() -> None:
    from torch._logging._internal import trace_log

    before = (list(trace_log.handlers), trace_log.level, trace_log.propagate)
    compile_trace(no_break, torch.randn(4), backend="eager")
    with pytest.raises(CompileTraceError):
        compile_trace(one_break, torch.randn(4), backend="eager", fullgraph=True)
    assert (list(trace_log.handlers), trace_log.level, trace_log.propagate) == before
    assert trace_log.level != logging.DEBUG or before[1] == logging.DEBUG


def test_a_trace_rebuilds_from_its_dict() -> None:
    """Saved data (a GPU recording) draws with show_compile: from_dict gives back what to_dict came from."""
    trace = compile_trace(one_break, calls=[(torch.randn(4),), (torch.randn(5),)], backend="eager")
    assert trace.breaks and trace.recompiles and trace.frames[0].guards  # every part has something to rebuild
    data = json.loads(json.dumps(trace.to_dict()))  # as saved: tuples become lists
    again = CompileTrace.from_dict(data)
    assert again.to_dict() == trace.to_dict() and again.result is None
    assert again.breaks == trace.breaks and again.frames == trace.frames and again.graphs == trace.graphs
    recorded = CompileTrace.from_dict(recording("compile").load("compile_trace_chain")["trace"])
    assert recorded.kernel_count == 2 and all(k.name.startswith("triton_") for k in recorded.kernels)


def loop_break(x):
    for i in range(3):
        x = x * 2
        print("step", i)
    return x.sin()


def test_a_break_inside_a_loop_skips_the_whole_frame_and_says_why() -> None:
    trace = compile_trace(loop_break, torch.randn(4), backend="eager")
    assert (trace.graph_count, trace.break_count, trace.frames) == (0, 0, ())  # nothing compiled, nothing broke
    (skip,) = trace.skipped
    assert skip.function == "loop_break" and skip.line == _line_of(loop_break, "print") and "print" in skip.code
    assert skip.kind == "Failed to trace builtin operator" and "loop" in skip.why and "skipped" in trace.summary()
    assert not compile_trace(no_break, torch.randn(4), backend="eager").skipped


def test_the_tensor_match_guard_shows_its_size_and_stride_check() -> None:
    trace = compile_trace(no_break, torch.randn(4, 3).t(), backend="eager")
    (tensor,) = [g for g in trace.frames[0].guards if g.kind == "TENSOR_MATCH"]
    assert tensor.checks[0].startswith("check_tensor(L['x'], Tensor, ")
    assert tensor.checks[0].endswith("torch.float32, device=None, requires_grad=False, size=[3, 4], stride=[1, 3])")
    assert "TENSOR_MATCH: check_tensor(L['x']" in trace.frames[0].guard_tree


def test_saved_for_backward_by_partitioner() -> None:
    def sin_cos(x, w):
        return (x.sin().cos() * w).sum()

    x, w = torch.randn(8, requires_grad=True), torch.randn(8)
    mincut = compile_trace(sin_cos, x, w, backend="aot_eager", backward=True).frames[0]
    default = compile_trace(sin_cos, x, w, backend="aot_eager_default_partitioner", backward=True).frames[0]
    assert mincut.saved_for_backward == ("primals_1", "primals_2")  # min-cut recomputes sin in the backward
    assert default.saved_for_backward == ("primals_1", "primals_2", "sin")
    assert "aten.sin" in mincut.aot_graph("backward") and "# File:" not in mincut.aot_graph("joint")
