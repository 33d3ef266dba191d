"""The layout lens agrees with torch on random strided views, and refuses bad input clearly."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from torchlens_widgets import LayoutError, layout, shares_storage, storage_index
from torchlens_widgets.lenses.layout import read_storage


@st.composite
def strided_views(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    stride = tuple(draw(st.lists(st.integers(0, 12), min_size=ndim, max_size=ndim)))
    offset = draw(st.integers(0, 10))
    return shape, stride, offset


@settings(max_examples=1000, deadline=None)
@given(strided_views(), st.sampled_from([torch.float32, torch.int16, torch.float64, torch.bool]))
def test_storage_indices_match_torch(view: tuple[tuple[int, ...], tuple[int, ...], int], dtype: torch.dtype) -> None:
    shape, stride, offset = view
    needed = offset + sum((n - 1) * s for n, s in zip(shape, stride)) + 1 if math.prod(shape) else offset
    base = torch.arange(max(needed, 1)).to(dtype) if dtype != torch.bool else torch.zeros(max(needed, 1), dtype=dtype)
    codes = torch.arange(max(needed, 1))  # storage position of each cell, read back through torch
    v = torch.as_strided(codes, shape, stride, offset)
    lay = layout(v)
    assert lay.shape == tuple(v.shape) and lay.stride == tuple(v.stride()) and lay.offset == v.storage_offset()
    assert lay.storage_indices() == v.flatten().tolist() if v.dim() else lay.storage_indices() == [v.item()]
    assert lay.numel == v.numel()
    assert set(lay.expanded_dims) == {d for d in range(v.dim()) if v.stride(d) == 0 and v.size(d) > 1}
    typed = torch.as_strided(base, shape, stride, offset)
    assert layout(typed).itemsize == base.element_size()
    assert layout(typed).storage_size == base.numel()


def test_storage_index_single_elements() -> None:
    x = torch.arange(24.0).reshape(2, 3, 4)
    v = x.permute(2, 0, 1)[1:, :, ::2]
    lay = layout(v)
    for idx in [(0, 0, 0), (2, 1, 1), (1, 0, 1)]:
        assert lay.storage_index(idx) == int(v[idx].item())
    assert storage_index((1, 2), (3, 4), (4, 1), 5) == 11
    with pytest.raises(IndexError, match="out of range"):
        lay.storage_index((3, 0, 0))
    with pytest.raises(IndexError, match="needs 3"):
        lay.storage_index((0, 0))


def test_views_share_storage_copies_do_not() -> None:
    x = torch.arange(12.0).reshape(3, 4)
    assert shares_storage(x, x.t()) and shares_storage(x, x[1:, ::2]) and shares_storage(x, x.expand(2, 3, 4))
    assert not shares_storage(x, x.clone()) and not shares_storage(x, x.t().contiguous())
    assert layout(x.t()).is_view and not layout(x.clone()).is_view


def test_version_and_metadata() -> None:
    x = torch.zeros(4)
    v = x[1:]
    v.add_(1)
    assert layout(x).version == layout(v).version == 1
    with torch.inference_mode():
        inf = torch.ones(3)
    assert layout(inf).version is None
    assert layout(torch.ones(2, requires_grad=True)).requires_grad


def test_meta_tensor_layout_without_values() -> None:
    m = torch.empty(3, 4, device="meta").t()
    lay = layout(m)
    assert lay.shape == (4, 3) and lay.stride == (1, 4) and not lay.has_values
    assert read_storage(m, [0, 1]) is None


def test_zero_dim_and_empty() -> None:
    s = torch.tensor(3.5)
    assert layout(s).storage_indices() == [0] and layout(s).shape == ()
    e = torch.empty(0, 3)
    assert layout(e).storage_indices() == [] and layout(e).numel == 0


def test_read_storage_values_and_bounds() -> None:
    x = torch.arange(6.0).reshape(2, 3).t()
    assert read_storage(x, [5, 0]) == [5.0, 0.0]
    with pytest.raises(IndexError, match="storage positions"):
        read_storage(x, [6])


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda: [1, 2, 3], "expected a torch.Tensor, got list"),
        (lambda: torch.eye(3).to_sparse(), "to_dense"),
        (lambda: torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.quint8), "int_repr"),
        (lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]), "nested"),
    ],
)
def test_bad_input_gets_a_clear_error(bad: Callable[[], object], message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        layout(bad())  # type: ignore[arg-type]


def test_huge_tensor_is_not_enumerated() -> None:
    big = torch.empty(1, device="meta").expand(10_000, 10_000)
    lay = layout(big)
    assert lay.numel == 10**8 and lay.expanded_dims == (0, 1)
    with pytest.raises(LayoutError, match="refused"):
        lay.storage_indices()
    assert next(lay.iter_storage_indices()) == 0


def test_base_index_points_at_the_root() -> None:
    from torchlens_widgets.lenses.layout import base_index

    root = torch.zeros(3, 4)
    v = root.t()[1:]
    assert base_index(v, [root, v]) == 0  # a view of a view records the root as _base
    assert base_index(v, [v]) == -1
    assert base_index(root, [root]) is None
