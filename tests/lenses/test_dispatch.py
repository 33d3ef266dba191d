"""The dispatch lens against hand-written ground truth: op names, views vs copies, nesting, keys, cleanup."""

from __future__ import annotations

import gc
import json
import weakref
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchlens_widgets import DispatchTraceError, dispatch_trace
from torchlens_widgets.lenses.copies import COPY_OPS
from torchlens_widgets.render.dispatch import dispatch_summary


def names(tr) -> list[str]:  # type: ignore[no-untyped-def]
    return [op.name for op in tr.ops]


def stacks_empty() -> bool:
    return torch._C._len_torch_dispatch_stack() == 0 and torch._C._len_torch_function_stack() == 0


def test_transpose_then_reshape_is_a_view_then_a_hidden_copy() -> None:
    x = torch.arange(12.0).reshape(3, 4)
    with dispatch_trace() as tr:
        x.t().reshape(-1)
    assert names(tr) == ["aten.t.default", "aten.clone.default", "aten._unsafe_view.default"]
    t, clone, unsafe = tr.ops
    assert (t.packet, t.overload) == ("aten.t", "default")
    assert t.inputs[0].shape == (3, 4) and t.inputs[0].stride == (4, 1)
    assert (t.outputs[0].shape, t.outputs[0].stride, t.outputs[0].alias, t.outputs[0].alias_of) == ((4, 3), (1, 4), "view", 0)
    assert clone.is_copy and not t.is_copy and not unsafe.is_copy
    assert (clone.outputs[0].stride, clone.outputs[0].alias) == ((3, 1), "fresh")
    assert clone.outputs[0].nbytes == 12 * 4
    assert (unsafe.outputs[0].shape, unsafe.outputs[0].alias) == ((12,), "view")
    assert tr.copies == [clone]
    assert [(c.name, c.ops) for c in tr.calls] == [("Tensor.t", [0]), ("Tensor.reshape", [1, 2])]


def test_view_of_a_contiguous_tensor_copies_nothing() -> None:
    x = torch.zeros(2, 6)
    with dispatch_trace() as tr:
        x.view(3, 4)
        x.reshape(12)  # viewable: reshape is a view too, no clone
    assert names(tr) == ["aten.view.default", "aten.view.default"]
    assert all(op.is_view and not op.is_copy for op in tr.ops)
    assert tr.ops[0].outputs[0].stride == (4, 1)
    assert tr.copies == []


def test_f_linear_is_one_python_call_over_t_and_addmm() -> None:
    x, w, b = torch.randn(2, 4), torch.randn(3, 4), torch.randn(3)
    with dispatch_trace() as tr:
        F.linear(x, w, b)
    (call,) = tr.calls
    assert call.name == "torch.nn.functional.linear" and call.kind == "function" and call.parent is None
    assert [a.shape for a in call.args] == [(2, 4), (3, 4), (3,)]
    assert [op.name for op in tr.ops_under(call.index)] == ["aten.t.default", "aten.addmm.default"]
    addmm = tr.ops[1]
    assert [i.shape for i in addmm.inputs] == [(3,), (2, 4), (4, 3)]  # bias, x, w.t()
    assert addmm.inputs[2].stride == (1, 4)  # the transposed weight is read through its strides
    assert addmm.outputs[0].shape == (2, 3) and addmm.outputs[0].alias == "fresh"


def test_module_calls_nest_over_function_calls_and_backward_is_recorded() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    x = torch.randn(2, 4)
    with dispatch_trace(model) as tr:
        model(x).sum().backward()
    tree = [(c.depth, c.kind, c.name) for c in tr.calls]
    assert tree[:5] == [
        (0, "module", "Sequential"),
        (1, "module", "0 (Linear)"),
        (2, "function", "torch.nn.functional.linear"),
        (1, "module", "1 (ReLU)"),
        (2, "function", "torch.nn.functional.relu"),
    ]
    seq = tr.calls[0]
    assert seq.children == [1, 3] and tr.calls[1].children == [2]
    assert [op.name for op in tr.ops_under(seq.index)][:3] == ["aten.t.default", "aten.addmm.default", "aten.relu.default"]
    backward = next(c for c in tr.calls if c.name == "Tensor.backward")
    bw = [op.name for op in tr.ops_under(backward.index)]
    assert bw[0] == "aten.ones_like.default"  # the seed gradient d(sum)/d(sum) = 1
    assert "aten.threshold_backward.default" in bw  # ReLU's backward
    assert "aten.mm.default" in bw  # grad of the weight: grad_out^T @ x
    assert "aten.sum.dim_IntList" in bw  # grad of the bias: grad_out summed over the batch
    assert model[0].weight.grad is not None


def test_module_names_without_a_root_model_are_class_names() -> None:
    lin, x = nn.Linear(2, 2), torch.ones(1, 2)
    with dispatch_trace() as tr:
        lin(x)
    assert [c.name for c in tr.calls] == ["Linear", "torch.nn.functional.linear"]
    with dispatch_trace(modules=False) as tr2:
        lin(x)
    assert [c.name for c in tr2.calls] == ["torch.nn.functional.linear"]


def test_counts_by_qualified_overload() -> None:
    x = torch.ones(3)
    with dispatch_trace() as tr:
        x + x
        x + x
        x * 2
        x.sum(0)
    assert tr.counts() == Counter({"aten.add.Tensor": 2, "aten.mul.Tensor": 1, "aten.sum.dim_IntList": 1})


def test_in_place_out_and_copy_() -> None:
    x, y, z = torch.ones(3), torch.ones(3), torch.empty(3)
    with dispatch_trace() as tr:
        x.add_(1)
        torch.add(x, y, out=z)
        z.copy_(x)
    add_, add_out, copy_ = tr.ops
    assert add_.name == "aten.add_.Tensor" and add_.outputs[0].alias == "inplace" and add_.outputs[0].alias_of == 0
    assert add_out.name == "aten.add.out" and add_out.outputs[0].alias == "inplace" and add_out.outputs[0].alias_of == 2
    assert copy_.name == "aten.copy_.default" and copy_.is_copy and copy_.is_inplace
    assert {op.packet.replace(".", "::") for op in tr.copies} <= COPY_OPS


def test_nothing_recorded_for_the_lens_itself() -> None:
    """The lens's own metadata reads (shape, stride, storage, keys) dispatch nothing and are not calls."""
    x, y = torch.ones(2), torch.ones(2)
    with dispatch_trace() as empty:
        pass
    assert empty.ops == [] and empty.calls == []
    with dispatch_trace() as tr:
        torch.add(x, y)
    assert names(tr) == ["aten.add.Tensor"]
    assert [c.name for c in tr.calls] == ["torch.add"]


def test_dispatch_keys_of_inputs_and_the_path_of_a_call() -> None:
    x = torch.ones(2, requires_grad=True)
    with dispatch_trace() as tr:
        x * 2
    (call,), (op,) = tr.calls, tr.ops
    assert {"CPU", "AutogradCPU"} <= set(op.inputs[0].keys)  # a property of the tensor itself
    assert set(op.inputs[0].keys) == set(_keys_outside(x))
    path = call.dispatch_path  # highest priority first
    assert path.index("AutogradCPU") < path.index("Python") < path.index("CPU")
    assert "Python" in path  # because this trace is a dispatch mode
    assert "AutogradCPU" not in op.remaining and op.remaining[-1] == "CPU"  # below Python only the kernel is left


def _keys_outside(t: torch.Tensor) -> list[str]:
    text = str(torch._C._dispatch_keys(t))
    return [k.strip() for k in text[text.find("(") + 1 : -1].split(",")]


def test_no_grad_keeps_the_autograd_key_inference_mode_drops_it() -> None:
    x = torch.ones(2, requires_grad=True)
    with dispatch_trace() as tr:
        with torch.no_grad():
            x * 2
    mul = next(c for c in tr.calls if c.name == "Tensor.mul")
    assert "AutogradCPU" in mul.dispatch_path  # no_grad switches recording off, not the dispatch key
    with torch.inference_mode():
        y = torch.ones(2)
        with dispatch_trace() as tr2:
            y * 2
    (op,) = tr2.ops
    assert "AutogradCPU" not in op.inputs[0].keys and "AutogradCPU" not in tr2.calls[0].dispatch_path


def test_an_exception_propagates_and_the_modes_and_hooks_are_removed() -> None:
    hooks_before = (len(nn.modules.module._global_forward_hooks), len(nn.modules.module._global_forward_pre_hooks))
    x = torch.ones(3, 4)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        with dispatch_trace() as tr:
            x + 1
            x @ torch.ones(5, 5)
    assert stacks_empty()
    assert hooks_before == (len(nn.modules.module._global_forward_hooks), len(nn.modules.module._global_forward_pre_hooks))
    assert tr.finished and names(tr)[0] == "aten.add.Tensor"
    assert tr.ops[-1].error == "RuntimeError" and tr.ops[-1].outputs == ()
    with pytest.raises(ValueError, match="user error"):
        with dispatch_trace():
            raise ValueError("user error")
    assert stacks_empty()


def test_an_exception_inside_a_module_leaves_the_call_tree_balanced() -> None:
    bad = nn.Linear(5, 2)
    x = torch.ones(1, 4)
    with dispatch_trace() as tr:
        with pytest.raises(RuntimeError):
            bad(x)
        x + 1
    last = tr.calls[-1]
    assert last.name == "Tensor.add" and last.parent is None and last.depth == 0
    assert stacks_empty()


def test_nested_traces_both_record() -> None:
    x = torch.ones(2)
    with dispatch_trace() as outer:
        x + 1
        with dispatch_trace() as inner:
            x * 2
        x - 1
    assert names(outer) == ["aten.add.Tensor", "aten.mul.Tensor", "aten.sub.Tensor"]
    assert names(inner) == ["aten.mul.Tensor"]
    assert [c.name for c in outer.calls] == ["Tensor.add", "Tensor.mul", "Tensor.sub"]  # not the inner lens's reads
    assert stacks_empty()


def test_misuse_errors_say_what_to_do() -> None:
    rec = dispatch_trace()
    with rec as tr:
        with pytest.raises(DispatchTraceError, match="after the `with dispatch_trace"):
            tr.counts()
    with pytest.raises(DispatchTraceError, match="create a new one"):
        with rec:
            pass
    with pytest.raises(DispatchTraceError, match="takes an nn.Module"):
        dispatch_trace("model")  # type: ignore[arg-type]


def test_tracing_keeps_no_tensor_alive() -> None:
    x = torch.ones(100)
    with dispatch_trace() as tr:
        y = x * 2
        ref = weakref.ref(y)
        del y
    gc.collect()
    assert ref() is None and len(tr.ops) == 1


def test_to_dict_is_json_and_summary_is_deterministic() -> None:
    def run() -> tuple[str, str]:
        torch.manual_seed(0)
        model, x = nn.Sequential(nn.Linear(3, 2)), torch.randn(4, 3)
        with dispatch_trace(model) as tr:
            model(x).t().reshape(-1)  # t, addmm | t | clone, _unsafe_view
        return json.dumps(tr.to_dict()), dispatch_summary(tr)

    (d1, s1), (d2, s2) = run(), run()
    assert d1 == d2 and s1 == s2
    assert "0x" not in s1 and " ms" not in s1
    assert s1.splitlines()[0] == "DispatchTrace: 5 aten ops (1 copy, 3 views, 0 in-place) under 5 Python calls"
    assert "aten.clone.default [COPY]" in s1
    assert repr(dispatch_trace().trace) == "<DispatchTrace: recording>"
