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
    nt = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], requires_grad=True)
    g = outcome(lambda: grad_graph(nt * 2), GradGraphError)
    assert [n.name for n in g.nodes] == ["MulBackward0", "AccumulateGrad"] and g.nodes[1].shape is None
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


# -- more hostile tensors for the layout lens -----------------------------------------------------------

CRASH_PRONE = """
import json, torch
from torchlens_widgets import layout, stride_diagram
from torchlens_widgets.lenses.layout import read_storage
class Wrapper(torch.Tensor):
    @staticmethod
    def __new__(cls, shape, strides, offset):
        return torch.Tensor._make_wrapper_subclass(cls, shape, strides=strides, storage_offset=offset,
                                                   dtype=torch.float32)
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(func)
def resized():
    t = torch.arange(4.0)
    t.untyped_storage().resize_(0)
    return t
def functional():
    from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
    with FunctionalTensorMode():
        return FunctionalTensor.to_functional(torch.arange(3.0))
cases = {
    "strided-wrapper": lambda: Wrapper((2, 3), (1, 2), 1),
    "empty-wrapper": lambda: Wrapper((0, 3), (3, 1), 0),
    "resized-to-0": resized,
    "to_functional": lambda: torch._to_functional_tensor(torch.arange(3.0)),
    "functional": functional,
}
out = {}
for name, make in cases.items():
    t = make()
    lay = layout(t)
    w = stride_diagram(t, torch.ones(2))
    out[name] = {"stride": list(lay.stride), "offset": lay.offset, "has_values": lay.has_values,
                 "no_values": lay.no_values, "read": read_storage(t, [0]) if lay.storage_size else None,
                 "values": [e["value"] for e in w.model["tensors"][0]["elements"]],
                 "text": w.static_text(), "svg": len(w.static_svg())}
print(json.dumps(out))
"""


def test_storage_less_and_freed_tensors_are_drawn_without_values_in_a_live_interpreter() -> None:
    out = json.loads(in_subprocess(CRASH_PRONE).strip().splitlines()[-1])
    assert out["strided-wrapper"]["stride"] == [1, 2] and out["strided-wrapper"]["offset"] == 1
    assert out["empty-wrapper"]["values"] == [] and out["empty-wrapper"]["read"] is None  # nothing to read
    for name, got in out.items():
        if name != "empty-wrapper":
            assert not got["has_values"] and got["read"] is None, name
            assert all(v is None for v in got["values"]) and "layout without values" in got["text"], name
    assert "resize_(0)" in out["resized-to-0"]["no_values"]
    assert "wrapper subclass" in out["to_functional"]["no_values"]


PLAIN_DTYPES = [torch.float16, torch.bfloat16, torch.float64, torch.complex32, torch.complex128, torch.int8,
                torch.uint16, torch.uint32, torch.uint64, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2]


@pytest.mark.parametrize("dtype", PLAIN_DTYPES, ids=str)
def test_every_readable_dtype_shows_torch_s_values(dtype: torch.dtype) -> None:
    src = torch.tensor([[0.0, 1.5, -2.25], [3.0, 100.0, 7.0]])
    t = (src > 1) if dtype == torch.bool else src.abs().to(dtype) if not dtype.is_signed else src.to(dtype)
    w = outcome(lambda: stride_diagram(t.t()), LayoutError)
    for el in w.model["tensors"][0]["elements"]:
        assert el["value"] == _fmt(t.t()[tuple(el["idx"])].item())


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.zeros(6, dtype=torch.uint8).view(torch.bits8),
        lambda: torch.zeros(3, dtype=torch.int16).view(torch.bits16),
        lambda: torch.zeros(4, dtype=torch.uint8).view(torch.float4_e2m1fn_x2),
        lambda: torch.zeros(4, dtype=torch.uint8).view(torch.int4),
    ],
    ids=["bits8", "bits16", "float4x2", "int4"],
)
def test_packed_bit_dtypes_are_drawn_without_values_and_say_how_to_see_the_bytes(make) -> None:  # type: ignore[no-untyped-def]
    t = make()
    w = outcome(lambda: stride_diagram(t), LayoutError)
    assert all(v is None for v in _values(w.model, 0))
    assert any("t.view(torch.uint8)" in n for n in w.model["notes"])
    u = outcome(lambda: stride_diagram(t.view(torch.uint8)), LayoutError)  # what the note advises works
    assert _values(u.model, 0) == [_fmt(v) for v in t.view(torch.uint8).flatten().tolist()]


VIEW_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.float16, torch.bfloat16, torch.int32, torch.float32,
               torch.int64, torch.float64, torch.complex64]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    raw=st.lists(st.integers(0, 255), min_size=16, max_size=48).map(lambda b: b[: len(b) // 16 * 16]),
    a=st.sampled_from(VIEW_DTYPES),
    b=st.sampled_from(VIEW_DTYPES),
    start=st.integers(0, 2),
)
def test_dtype_views_over_one_storage_show_what_each_dtype_reads(raw: list[int], a: torch.dtype, b: torch.dtype,
                                                                 start: int) -> None:
    """Bytes drawn as two dtypes: every cell and element shows what torch reads there, never the other's values."""
    mem = torch.tensor(raw, dtype=torch.uint8)
    base = mem.view(a)
    view = base.view(b)[start:]
    w = outcome(lambda: stride_diagram(base, view, names=["base", "view"]), LayoutError)
    for k, t in enumerate((base, view)):
        tm = w.model["tensors"][k]
        strip = next(s for s in w.model["storages"] if s["id"] == tm["storage"])
        assert strip["dtype"] == str(t.dtype)
        as_dtype = mem.view(t.dtype)  # the storage read by torch itself in this tensor's dtype
        for c in strip["cells"]:
            assert c["value"] == _fmt(as_dtype[c["i"]].item())
        for el in tm["elements"]:
            assert el["value"] == _fmt(t[tuple(el["idx"])].item())
    if a != b:
        assert len(w.model["storages"]) == 2 and any("same memory" in n for n in w.model["notes"])


class _RaisingTorchFunction(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        raise ValueError(f"hostile subclass refuses {func}")


class _LyingMethods(torch.Tensor):
    def stride(self, *dim):  # type: ignore[no-untyped-def,override]
        return (9, 9)

    @property
    def shape(self):  # type: ignore[no-untyped-def,override]
        return (100,)


class _RaisingProperty(torch.Tensor):
    @property
    def is_nested(self):  # type: ignore[no-untyped-def,override]
        raise ValueError("hostile property")


@pytest.mark.parametrize("cls", [_RaisingTorchFunction, _LyingMethods, _RaisingProperty], ids=lambda c: c.__name__)
def test_subclasses_cannot_make_the_picture_lie(cls: type) -> None:
    plain = torch.arange(6.0).reshape(2, 3).t()
    t = plain.as_subclass(cls)
    w = outcome(lambda: stride_diagram(t), LayoutError)
    tm = w.model["tensors"][0]
    assert (tm["shape"], tm["stride"]) == ([3, 2], [1, 3])
    assert _values(w.model, 0) == [_fmt(v) for v in plain.flatten().tolist()]


def _symbolic_fake(*sizes: int, requires_grad: bool = False) -> tuple[torch.Tensor, object]:
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    mode = FakeTensorMode(shape_env=ShapeEnv())
    ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * len(sizes))
    x = mode.from_tensor(torch.randn(*sizes), source=ConstantSource("x"), symbolic_context=ctx)
    if requires_grad:
        with mode:
            x.requires_grad_()
    return x, mode


def test_symbolic_sizes_are_drawn_at_their_example_values_without_guarding_the_program() -> None:
    x, mode = _symbolic_fake(4, 3)
    assert isinstance(x.shape[0], torch.SymInt)
    w = outcome(lambda: stride_diagram(x), LayoutError)
    tm = w.model["tensors"][0]
    assert (tm["shape"], tm["stride"]) == ([4, 3], [3, 1]) and all(v is None for v in _values(w.model, 0))
    assert any("symbolic sizes" in n and "example values" in n for n in w.model["notes"])
    assert mode.shape_env.guards == []  # the lens read the sizes without specialising the user's program


def test_data_dependent_sizes_have_no_picture_and_say_why() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    with FakeTensorMode(shape_env=env):
        t = torch.empty(env.create_unbacked_symint(), 3)
    err = outcome(lambda: stride_diagram(t), LayoutError)
    assert isinstance(err, LayoutError) and "u0" in str(err)


def test_tensors_inside_torch_func_transforms() -> None:
    seen: dict[str, object] = {}

    def look(name: str, x: torch.Tensor) -> None:
        seen[name] = outcome(lambda: stride_diagram(x), LayoutError)

    torch.func.grad(lambda x: (look("grad", x), x.sum())[1])(torch.randn(3))
    torch.vmap(lambda x: (look("vmap", x), x)[1])(torch.randn(2, 3))
    torch.func.functionalize(lambda x: (look("functionalize", x), x)[1])(torch.randn(3))
    assert isinstance(seen["grad"], LayoutError) and "outside the transform" in str(seen["grad"])
    assert isinstance(seen["vmap"], LayoutError)
    assert all(v is None for v in _values(seen["functionalize"].model, 0))  # type: ignore[attr-defined]


@pytest.mark.parametrize("limit", [0, -1, "5", 2.5, True, 10**9], ids=repr)
def test_drawing_limits_are_checked(limit: object) -> None:
    err = outcome(lambda: stride_diagram(torch.ones(3), max_elements=limit), LayoutError)  # type: ignore[arg-type]
    assert isinstance(err, LayoutError)
    err = outcome(lambda: stride_diagram(torch.ones(3), max_storage_cells=limit), LayoutError)  # type: ignore[arg-type]
    assert isinstance(err, LayoutError)


def test_many_dims_and_the_largest_limits_stay_small() -> None:
    w = outcome(lambda: stride_diagram(torch.zeros(()).expand(*[2] * 40)), LayoutError)
    assert w.model["tensors"][0]["shown"] <= 384 and w.model["tensors"][0]["numel"] == 2**40
    w = outcome(lambda: stride_diagram(torch.zeros(()).expand(*[4] * 10), max_elements=4096,
                                       max_storage_cells=8192), LayoutError)
    assert w.model["tensors"][0]["shown"] <= 4096


# -- grad_graph: more roots and arguments --------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.eye(3).to_sparse().requires_grad_(),
        lambda: torch.eye(3).to_sparse_csr().requires_grad_(),
        lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], requires_grad=True),
        lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged, requires_grad=True),
    ],
    ids=["sparse-coo", "sparse-csr", "nested", "jagged"],
)
def test_unusual_leaves_as_roots_are_their_accumulate_grad(make) -> None:  # type: ignore[no-untyped-def]
    x = make()
    g = outcome(lambda: grad_graph(x, names={"x": x}), GradGraphError)
    assert [(n.name, n.kind, n.param) for n in g.nodes] == [("AccumulateGrad", "leaf", "x")]
    assert g.fns[0].variable is x
    json.dumps(g.to_dict())
    g = outcome(lambda: grad_graph(x * 2), GradGraphError)
    assert [n.name for n in g.nodes] == ["MulBackward0", "AccumulateGrad"]
    json.dumps(g.to_dict())


def test_a_jagged_tensor_s_ragged_size_is_its_symbol() -> None:
    x = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged, requires_grad=True)
    g = outcome(lambda: grad_graph((x * 2).values().sum()), GradGraphError)
    leaf = next(n for n in g.nodes if n.kind == "leaf")
    assert leaf.shape == (2, str(x.shape[1]))
    assert json.loads(json.dumps(g.to_dict()))["nodes"][leaf.id]["shape"] == [2, str(x.shape[1])]


_ONE = torch.ones(1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"params": {1: "w"}},
        {"params": [(1, None)]},
        {"names": {("a",): None}},
        {"hooks": "no"},
        {"hooks": None},
        {"params": iter(lambda: ("w", _ONE), None)},  # endless (one tensor: a new one per entry took 5-15 s)
    ],
    ids=["int-key", "int-name-pair", "tuple-key", "hooks-str", "hooks-none", "endless"],
)
def test_grad_graph_wrong_argument_types(kwargs: dict) -> None:
    y = (torch.ones(2, requires_grad=True) * 2).sum()
    assert isinstance(outcome(lambda: grad_graph(y, **kwargs), GradGraphError), GradGraphError)


def test_grad_graph_with_symbolic_sizes_does_not_guard_the_program() -> None:
    x, mode = _symbolic_fake(4, 3, requires_grad=True)
    with mode:  # type: ignore[attr-defined]
        y = (x @ x.t()).relu().sum()
    g = outcome(lambda: grad_graph(y, names={"x": x}), GradGraphError)
    leaf = next(n for n in g.nodes if n.param == "x")
    assert leaf.shape == tuple(str(n) for n in x.shape)
    text = json.dumps(g.to_dict())
    assert "MmBackward0" in text and mode.shape_env.guards == []  # type: ignore[attr-defined]
    from torchlens_widgets.render.grad_graph import grad_graph_model, grad_graph_svg

    assert str(x.shape[0]) in grad_graph_svg(grad_graph_model(g.to_dict()))


# -- dispatch_trace: more unusual tensors -------------------------------------------------------------


def _same(a: object, b: object) -> bool:
    if type(a) is _RaisingProperty and type(b) is _RaisingProperty:
        a, b = a.as_subclass(torch.Tensor), b.as_subclass(torch.Tensor)
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.is_nested:
            return all(torch.equal(x, y) for x, y in zip(a.unbind(), b.unbind()))
        if a.layout != torch.strided:
            return torch.equal(a.to_dense(), b.to_dense())
        return type(a) is type(b) and torch.equal(a, b)
    return bool(a == b)


@pytest.mark.parametrize(
    "run",
    [
        lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged).clone(),
        lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged) * 2,
        lambda: torch.eye(4).to_sparse_bsr((2, 2)).clone(),
        lambda: torch.eye(3).to_sparse_csc().clone(),
        lambda: torch.zeros(3, dtype=torch.uint8).view(torch.bits8).clone().view(torch.uint8),
        lambda: torch.ones(2).as_subclass(_RaisingProperty) + 1,
        lambda: torch.func.grad(lambda x: (x * 2).sum())(torch.ones(3)),
        lambda: torch.vmap(lambda x: x * 2)(torch.ones(2, 3)),
        lambda: torch.func.functionalize(lambda x: x.add_(1))(torch.ones(3)),
    ],
    ids=["jagged-clone", "jagged-mul", "bsr-clone", "csc-clone", "bits", "raising-property", "func-grad",
         "vmap", "functionalize"],
)
def test_recording_unusual_programs_changes_nothing(run) -> None:  # type: ignore[no-untyped-def]
    expected = run()
    tr = None

    def traced() -> object:
        nonlocal tr
        with dispatch_trace() as tr:
            return run()

    got = outcome(traced, DispatchTraceError)
    assert _same(got, expected)
    assert tr is not None and len(tr.ops) >= 1
    json.dumps(tr.to_dict())


def test_symbolic_sizes_in_a_trace_are_json_and_guard_nothing() -> None:
    x, mode = _symbolic_fake(4, 3)
    with dispatch_trace() as tr:
        with mode:  # type: ignore[attr-defined]
            (x * 2).sum(0)
    d = json.loads(json.dumps(tr.to_dict()))
    first = d["ops"][0]["inputs"][0]
    assert first["shape"] == [4, 3] and "symbolic sizes" in first["note"]
    assert mode.shape_env.guards == []  # type: ignore[attr-defined]
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    fm = FakeTensorMode(shape_env=env)
    with fm:
        t = torch.empty(env.create_unbacked_symint(), 3)
    with dispatch_trace() as tr:
        with fm:
            t * 2
    m = tr.ops[0].inputs[0]
    assert m.layout == "symbolic" and m.shape == () and "u0" in (m.note or "")
    from torchlens_widgets.render.dispatch import dispatch_summary

    assert "symbolic" in dispatch_summary(tr)  # never drawn as a 0-dim tensor


def test_the_lens_s_own_failure_is_its_error_and_never_hides_the_user_s(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchlens_widgets.lenses import dispatch as lens

    def broken(self: object, names: object) -> None:
        raise KeyError("internal")

    monkeypatch.setattr(lens.DispatchTrace, "_finish", broken)

    def traced() -> None:
        with dispatch_trace():
            torch.ones(2).clone()

    err = outcome(traced, DispatchTraceError)
    assert isinstance(err, DispatchTraceError) and "KeyError" in str(err)
    with pytest.raises(ZeroDivisionError):  # the block's own exception wins over the lens's
        with dispatch_trace():
            torch.ones(2).clone()
            raise ZeroDivisionError("the block's own")
