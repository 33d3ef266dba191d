"""Fuzzing the tensor lenses (layout / stride diagram, grad graph, dispatch trace) with unusual tensors.

Every case ends in a true picture (values checked against torch) or the lens's own error with advice,
within 10 s, without taking the interpreter down (crash-prone cases run in a subprocess).
"""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzzing import in_subprocess, outcome
from torchlens_widgets import DispatchTraceError, LayoutError, dispatch_trace, grad_graph, layout, stride_diagram
from torchlens_widgets.lenses.autograd import GradGraphError
from torchlens_widgets.lenses.layout import read_storage

warnings.filterwarnings("ignore", message=".*nested tensors is in prototype.*")

WRAPPER = """
import torch
class Wrapper(torch.Tensor):
    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype)
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(func)
w = Wrapper(torch.randn(2, 3))
"""


def _values(model: dict, k: int) -> list:
    return [e["value"] for e in model["tensors"][k]["elements"]]


def _fmt(v: object) -> str:
    from torchlens_widgets.render.stride import _fmt_value

    return _fmt_value(v)


def test_wrapper_subclass_is_drawn_without_values_in_a_live_interpreter() -> None:
    out = in_subprocess(WRAPPER + """
from torchlens_widgets import stride_diagram, layout
lay = layout(w)
assert not lay.has_values and "wrapper subclass" in lay.no_values
text = stride_diagram(w).static_text()
print(text)
""")
    assert "layout without values" in out and "wrapper subclass" in out


def test_fake_tensor_is_drawn_without_values() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        t = torch.randn(2, 3)
    w = outcome(lambda: stride_diagram(t), LayoutError)
    assert not isinstance(w, Exception)
    assert all(v is None for v in _values(w.model, 0))
    assert "meta device, no memory" in w.static_text()


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.eye(3).to_sparse(),
        lambda: torch.eye(3).to_sparse_csr(),
        lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]),
        lambda: torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8),
        lambda: [1, 2, 3],
        lambda: "a tensor",
        lambda: None,
    ],
    ids=["sparse-coo", "sparse-csr", "nested", "quantized", "list", "str", "none"],
)
def test_tensors_without_one_strided_storage_get_advice(make) -> None:  # type: ignore[no-untyped-def]
    err = outcome(lambda: stride_diagram(make()), LayoutError)
    assert isinstance(err, LayoutError)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.empty(10**4, 10**4, device="meta"),
        lambda: torch.empty(0, 5),
        lambda: torch.tensor(3.5),
        lambda: torch.tensor([True, False, True]),
        lambda: torch.tensor([1 + 2j, -3.5j]).conj(),
        lambda: torch.tensor([1.0, -2.0])._neg_view(),
        lambda: torch.arange(12.0).as_strided((3, 3), (1, 1)),  # overlapping
        lambda: torch.arange(4.0).expand(1000, 4),
        lambda: torch.randn(3, 4) * 1e30,
        lambda: torch.tensor([float("nan"), float("inf"), -float("inf")]),
        lambda: torch.arange(10**6).view(1000, 1000)[::7, ::13],
    ],
    ids=["huge-meta", "zero-size", "0-dim", "bool", "conj", "neg", "overlap", "expand", "1e30", "nan-inf", "big-slice"],
)
def test_unusual_strided_tensors_draw_true_values(make) -> None:  # type: ignore[no-untyped-def]
    t = make()
    w = outcome(lambda: stride_diagram(t), LayoutError)
    assert not isinstance(w, Exception), w
    tm = w.model["tensors"][0]
    assert tm["shown"] <= 384 and len(w.model["storages"][0]["cells"]) <= 512  # never millions of cells
    if t.device.type == "meta":
        return
    resolved = t.resolve_conj().resolve_neg()
    for el in tm["elements"]:
        # what a cell shows is what is in memory at that storage position (a conj/neg view's values are
        # the bits, not the lazily negated value): check against the storage, then the index arithmetic
        assert el["value"] == _fmt(read_storage(t, [el["s"]])[0])
        if not (t.is_conj() or t.is_neg()):
            assert el["value"] == _fmt(resolved[tuple(el["idx"])].item())


def test_dtype_views_and_view_as_real_show_each_dtype_s_true_values() -> None:
    x = torch.tensor([0.0, 1.0, 2.0, 3.0])
    u = x.view(torch.uint8)
    w = outcome(lambda: stride_diagram(x, u, names=["x", "bytes"]), LayoutError)
    assert [s["dtype"] for s in w.model["storages"]] == ["torch.float32", "torch.uint8"]
    assert _values(w.model, 0) == ["0.", "1.", "2.", "3."]
    assert _values(w.model, 1)[:8] == [str(b) for b in u[:8].tolist()]
    assert any("same memory as S0, read as uint8" in n for n in w.model["notes"])
    z = torch.tensor([1 + 2j, 3 - 4j])
    r = torch.view_as_real(z)
    w = outcome(lambda: stride_diagram(z, r, names=["z", "real"]), LayoutError)
    assert _values(w.model, 0) == [_fmt(v) for v in z.tolist()]
    assert _values(w.model, 1) == [_fmt(v) for v in r.flatten().tolist()]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    sizes=st.lists(st.integers(0, 5), min_size=0, max_size=3),
    data=st.data(),
)
def test_random_as_strided_views_are_drawn_as_torch_reads_them(sizes: list[int], data: st.DataObject) -> None:
    strides = [data.draw(st.integers(0, 6)) for _ in sizes]
    offset = data.draw(st.integers(0, 4))
    need = offset + sum((n - 1) * s for n, s in zip(sizes, strides) if n > 0) + 1
    base = torch.arange(float(max(need, 1)))
    t = base.as_strided(sizes, strides, offset)
    w = outcome(lambda: stride_diagram(base, t), LayoutError)
    lay = layout(t)
    assert (lay.shape, lay.stride, lay.offset) == (tuple(sizes), tuple(strides), offset)
    for el in w.model["tensors"][1]["elements"]:
        assert el["value"] == _fmt(t[tuple(el["idx"])].item())
        assert el["s"] == offset + sum(i * s for i, s in zip(el["idx"], strides))


# -- grad_graph ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    ["abc", 5, [1, 2], {"w": "not a tensor"}, [("w",)], object()],
    ids=["str", "int", "ints", "dict-of-str", "short-pair", "object"],
)
def test_grad_graph_bad_params_get_its_own_error(params: object) -> None:
    y = (torch.ones(2, requires_grad=True) * 2).sum()
    assert isinstance(outcome(lambda: grad_graph(y, params=params), GradGraphError), GradGraphError)


@pytest.mark.parametrize(
    "root",
    [lambda: torch.ones(2), lambda: "loss", lambda: None, lambda: 3.0],
    ids=["no-grad-fn", "str", "none", "float"],
)
def test_grad_graph_without_a_graph_gets_advice(root) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(outcome(lambda: grad_graph(root()), GradGraphError), GradGraphError)


def test_grad_graph_of_sparse_and_nested_is_a_true_picture() -> None:
    x = torch.eye(3).to_sparse().requires_grad_()
    g = outcome(lambda: grad_graph(torch.sparse.sum(x * 2)), GradGraphError)
    assert [n.name for n in g.nodes][:1] == ["SumBackward0"] and any(n.kind == "leaf" for n in g.nodes)
    json.dumps(g.to_dict())
    a = torch.randn(2, requires_grad=True)
    nt = torch.nested.nested_tensor([a * 1, torch.ones(3)])
    g = outcome(lambda: grad_graph(nt.values().sum() if hasattr(nt, "values") else nt), GradGraphError)
    if not isinstance(g, Exception):
        json.dumps(g.to_dict())


def test_grad_graph_to_dict_is_json_with_symbolic_shapes() -> None:
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    mode = FakeTensorMode(shape_env=ShapeEnv())
    ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.DYNAMIC])
    x = mode.from_tensor(torch.randn(4, 3), source=ConstantSource("x"), symbolic_context=ctx)
    with mode:
        x.requires_grad_()
        y = (x * 2).sum()
    assert isinstance(x.shape[0], torch.SymInt)
    g = outcome(lambda: grad_graph(y), GradGraphError)
    text = json.dumps(g.to_dict())
    assert "AccumulateGrad" in text


# -- dispatch_trace -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.eye(3).to_sparse(),
        lambda: torch.eye(3).to_sparse_csr(),
        lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]),
        lambda: torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8),
        lambda: torch.tensor([1 + 1j]).conj(),
        lambda: torch.empty(2, 3, device="meta"),
    ],
    ids=["sparse-coo", "sparse-csr", "nested", "quantized", "conj", "meta"],
)
def test_recording_never_changes_what_runs(make) -> None:  # type: ignore[no-untyped-def]
    t = make()
    expected = t.clone()
    with dispatch_trace() as tr:
        got = t.clone()
    assert type(got) is type(expected) and got.layout == expected.layout and got.dtype == expected.dtype
    if t.device.type != "meta" and not t.is_quantized:
        def dense(v: torch.Tensor) -> torch.Tensor:
            return v.to_dense() if v.layout != torch.strided else v

        if t.is_nested:
            assert all(torch.equal(a, b) for a, b in zip(got.unbind(), expected.unbind()))
        else:
            assert torch.equal(dense(got).resolve_conj(), dense(expected).resolve_conj())
    assert len(tr.ops) >= 1 and tr.ops[0].is_copy
    json.dumps(tr.to_dict())
    from torchlens_widgets.render.dispatch import dispatch_summary

    assert "clone" in dispatch_summary(tr)


def test_the_user_s_own_errors_pass_through_the_trace_unchanged() -> None:
    with pytest.raises(RuntimeError, match="size of tensor a"):
        with dispatch_trace():
            torch.ones(2) + torch.ones(3)


def test_reading_a_trace_too_early_is_the_lens_s_own_error() -> None:
    with dispatch_trace() as tr:
        torch.ones(2).clone()
        err = outcome(lambda: tr.counts(), DispatchTraceError)
    assert isinstance(err, DispatchTraceError)
    assert math.isfinite(len(tr.ops))
