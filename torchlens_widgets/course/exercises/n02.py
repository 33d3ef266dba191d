"""Notebook 02 (storage, views, strides): predicted strides, storage positions, which ops share storage, a
transpose built with `as_strided`, and when a reshape can be a view.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch
from torch._subclasses.fake_impls import _compute_stride

from ...lenses import layout as _layout_module
from ...lenses.layout import layout
from ._cases import named, numbered

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["my_transpose", "predict_strides", "reshape_as_view", "storage_position", "which_views"]

STRIDE_HINTS = (
    "start from y's strides (30, 6, 1) and apply the steps of the expression one at a time",
    "an integer index drops its dimension; a step k multiplies that dimension's stride by k; transpose and t "
    "swap strides; view regroups them",
    "expand gives the dimensions it grows stride 0; splitting a dimension with view gives the outer part the "
    "inner part's size times the original stride",
)
OFFSET_HINTS = (
    "the offset is the storage position of the view's first element",
    "add start × stride for every dimension that is sliced, narrowed, selected or indexed with an integer, "
    "with the strides in force at that step",
)
# The views of y = torch.zeros(4, 5, 6) the learner predicts, by key: A-D are checked visibly.
VIEWS = MappingProxyType({
    "A": ("y[1]", lambda y: y[1]),
    "B": ("y[:, 2]", lambda y: y[:, 2]),
    "C": ("y.transpose(0, 2)", lambda y: y.transpose(0, 2)),
    "D": ("y[1:, ::2, 3:]", lambda y: y[1:, ::2, 3:]),
    "E": ("y[2].t()[1:]", lambda y: y[2].t()[1:]),
    "F": ("y[:, :1].expand(4, 3, 6)", lambda y: y[:, :1].expand(4, 3, 6)),
    "G": ("y.view(4, 30)[:, 5::10]", lambda y: y.view(4, 30)[:, 5::10]),
    "H": ("y.narrow(2, 2, 3).select(0, 3)", lambda y: y.narrow(2, 2, 3).select(0, 3)),
})


def predict_strides(c: Check, predicted: Any, hidden: Iterable[str] | None = None) -> None:
    """`predicted_views`: {key: (stride, offset)} for each view of `VIEWS`, predicted without running them."""
    y = torch.zeros(4, 5, 6)
    keys = ("A", "B", "C", "D") if hidden is None else tuple(hidden)
    for key in keys:  # a prediction is secret until repeated failures: a key names no expected value
        expr, make = VIEWS[key]
        view = make(y)
        c.that(type(predicted) is dict and key in predicted, f"predicted_views needs an entry {key!r} for {expr}")
        got = predicted[key]
        c.that(type(got) is tuple and len(got) == 2,
               f"{key} ({expr}): answer with a (stride, offset) pair, e.g. ((6, 1), 30); got {got!r}")
        stride, offset = got
        c.that(type(stride) is tuple and all(type(s) is int for s in stride) and type(offset) is int,
               f"{key} ({expr}): the stride must be a tuple of ints and the offset an int; got {got!r}")
        c.equal(stride, tuple(view.stride()), what=f"{key} ({expr}) stride", hint=STRIDE_HINTS, secret=True)
        c.equal(offset, view.storage_offset(), what=f"{key} ({expr}) offset (the stride is right)",
                hint=OFFSET_HINTS, secret=True)


POSITION_HINTS = (
    "start at the offset; each index moves you through storage by its dimension's stride",
    "add index[d] * stride[d] for every dimension d; the shape only bounds the index (a 0-d tensor has no "
    "dimensions at all); return a plain int",
)
NO_TENSOR_OPS = ("compute the position from the numbers yourself: no tensor operation, no lens",)


def _random_views(seed: int, n: int) -> list[tuple[torch.Tensor, list[tuple[int, ...]]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        v = torch.zeros([rng.randint(1, 5) for _ in range(rng.randint(1, 4))])
        v = v[tuple(slice(rng.randint(0, m - 1), None, rng.randint(1, 3)) for m in v.shape)]
        if v.dim() >= 2 and rng.random() < 0.5:
            v = v.transpose(0, -1)
        out.append((v, [tuple(rng.randrange(m) for m in v.shape) for _ in range(4)]))
    return out


def _special_views() -> list[tuple[torch.Tensor, list[tuple[int, ...]]]]:
    """Expanded (stride 0) views, a 0-d tensor, and both with an offset."""
    expanded = torch.zeros(8)[3:7].expand(3, 4)  # stride (0, 1), offset 3
    scalar = torch.zeros(9)[7]  # 0-d, offset 7
    mixed = torch.zeros(2, 6)[1:, 1::2].unsqueeze(0).expand(4, 1, 3).transpose(0, 2)
    return [(expanded, [(0, 0), (2, 1), (1, 3)]), (scalar, [()]), (mixed, [(2, 0, 3), (0, 0, 0), (1, 0, 2)])]


# Case sets by name: random views (seed, count) or the special ones; the visible set is "random 2".
POSITION_CASES = MappingProxyType({
    "random 2": lambda: _random_views(2, 40), "random 7": lambda: _random_views(7, 40), "special": _special_views})


def storage_position(c: Check, answer: Any, hidden: Iterable[tuple[str, str]] | None = None) -> None:
    """`storage_position(index, shape, stride, offset)` against what torch reads, on random views; each hidden
    case is (case set, "tuple" or "list": how index, shape and stride are passed)."""
    mine = c.watch(answer, "storage_position", allow_aten=set(), hint=NO_TENSOR_OPS,
                   forbid=[_layout_module, torch.as_strided, torch.Tensor.as_strided])
    def views(case: tuple[str, str]) -> list[tuple[torch.Tensor, list[tuple[int, ...]], Callable[[Any], Any]]]:
        return [(v, indices, list if case[1] == "list" else tuple) for v, indices in POSITION_CASES[case[0]]()]

    for label, (v, indices, convert) in numbered(hidden, views(("random 2", "tuple")), views):
        cells = v.untyped_storage().nbytes() // v.element_size()
        read = torch.as_strided(torch.arange(cells), v.shape, v.stride(), v.storage_offset())  # torch's answer
        for idx in indices:
            args = (convert(idx), convert(v.shape), convert(v.stride()), v.storage_offset())
            what = label or "storage_position(" + ", ".join(map(repr, args)) + ")"
            got = mine(*args)
            c.that(type(got) is int, f"{what} returned {got!r}; return a plain int", POSITION_HINTS)
            c.equal(got, int(read[idx]), what=what, hint=POSITION_HINTS, secret=bool(label))


def _op(src: str) -> Callable[[torch.Tensor], torch.Tensor]:
    return eval(compile("lambda a: " + src, "<02-which-views op>", "eval"), {"torch": torch})


# Each candidate's name, exactly as the learner spells it, and the op it names.
VIEW_OPS = MappingProxyType({name: _op(name) for name in (
    "a.t()", "a[1]", "a[:, ::2]", "a[[0, 2]]", "a[a > 5]", "a.view(-1, 4)", "a.reshape(2, -1)", "a.t().reshape(-1)",
    "a.flatten()", "a.t().flatten()", "a.contiguous()", "a.t().contiguous()", "a.expand(2, -1, -1)", "a.flip(0)",
    "a.detach()", "a.clone()", "a.diagonal()", "a.to(torch.float32)", "a.to(torch.float64)", "a.unfold(1, 3, 1)",
    "a + 0")})
VIEWS_HINTS = (
    "a result shares storage when it can be written as (shape, stride, offset) over a's own cells; check one "
    "op at a time with shares_storage(result, a)",
    "reordering cells (PyTorch has no negative strides), gathering arbitrary rows (advanced or boolean "
    "indexing), changing the dtype and arithmetic all need new memory",
    "reshape, flatten, contiguous and .to copy only when they must; otherwise they return a view, or a itself",
)


def which_views(c: Check, answer: Any, hidden: Iterable[tuple[int, int]] | None = None) -> None:
    """`shares_a`: the names of `VIEW_OPS` whose result shares storage with a contiguous float32 `a` (4 x 6, and
    each hidden shape: the answer does not depend on the size)."""
    for label, shape in named(hidden, ((4, 6),), lambda shape: "shares_a"):
        a = torch.arange(shape[0] * shape[1], dtype=torch.float32).view(shape).clone()
        storage = layout(a).storage_id
        expected = {name for name, op in VIEW_OPS.items() if layout(op(a)).storage_id == storage}
        c.that(type(answer) in (set, frozenset) and all(type(q) is str for q in answer),
               "answer with a set of names, e.g. {'a.t()', 'a[1]'}")
        unknown = sorted(q for q in answer if q not in VIEW_OPS)
        c.that(not unknown, f"not in the list: {unknown}; copy the names exactly as printed")
        c.equal(set(answer), expected, what=label, hint=VIEWS_HINTS, secret=True)


TRANSPOSE_HINTS = (
    "a transpose changes only metadata: work out the new size, stride and offset from x's own",
    "size (n, m) becomes (m, n) and stride (s0, s1) becomes (s1, s0); as_strided's storage_offset is absolute "
    "(counted from the start of the storage), so keep x's own offset",
)
ONLY_AS_STRIDED = ("describe the transposed view to as_strided yourself, from x's size, stride and offset",)
NO_COPY = ("build the result with x.as_strided(...): no data may be copied",)


def _transpose_inputs() -> MappingProxyType[str, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    """Name -> a fresh (x, the tensor x is a view of): contiguous, a strided slice with an offset, 1 x n, expanded."""
    def sliced() -> tuple[torch.Tensor, torch.Tensor]:
        big = torch.arange(60, dtype=torch.float32).view(6, 10)
        return big[1:5, 2::3], big  # stride (10, 3), offset 12

    def contiguous() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.arange(12, dtype=torch.float32).view(3, 4).clone()
        return x, x

    return MappingProxyType({
        "contiguous 3 x 4": contiguous, "strided slice": sliced,
        "1 x 5": lambda: (torch.arange(5, dtype=torch.float32).view(1, 5),) * 2,
        "expanded": lambda: (torch.arange(4, dtype=torch.float32)[1:].expand(2, 3),) * 2})


TRANSPOSE_INPUTS = _transpose_inputs()


def my_transpose(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`my_transpose(x)`: x.t() as a view built with as_strided alone (no other aten op); writes through it
    reach x."""
    mine = c.watch(answer, "my_transpose", allow_aten={"as_strided"}, hint=ONLY_AS_STRIDED)
    for label, name in named(hidden, ("contiguous 3 x 4",), lambda name: "my_transpose(x)"):
        x, base = TRANSPOSE_INPUTS[name]()
        got = mine(x)
        c.is_view_of(got, x, what=label, hint=NO_COPY)
        c.same_layout(got, x.t(), what=label, hint=TRANSPOSE_HINTS)
        if min(x.shape) > 1 and min(x.stride()) > 0:  # not expanded: a write lands in one element
            before = base.clone()
            got[0, 1] = -1.0
            c.that(bool(x[1, 0] == -1) and int((base != before).sum()) == 1,
                   f"{label}: a write through my_transpose(x) must reach x (and nothing else)")


RESHAPE_HINTS = (
    "think in runs: section 6's merge condition says which neighbouring dimensions form one evenly spaced run "
    "in storage, and a size-1 dimension is never stepped along",
    "merge neighbours (size-1 dimensions left out) into runs, then cover each run, innermost first, with "
    "consecutive new dimensions whose sizes multiply to exactly the run's size, else there is no view; a new "
    "dimension's stride is the run's innermost stride times the sizes already covered",
    "resolve -1 first (the element count divided by the other sizes); an empty tensor is always viewable; "
    "new dimensions left over at the front must all have size 1",
)
NUMBERS_ONLY = ("decide from the numbers alone: no tensor, no view or reshape, no lens; the check records what runs",)


def _torch_says(t: torch.Tensor, new_shape: tuple[int, ...]) -> tuple[Any, Any]:
    try:
        v = t.view(new_shape)
    except RuntimeError:
        return None, None
    return tuple(v.stride()), tuple(v.shape)


def _random_new_shape(rng: random.Random, shape: tuple[int, ...], numel: int) -> list[int]:
    if numel == 0:
        return list(rng.choice([list(shape), [0], [0, rng.randint(1, 3)], list(reversed(shape)), [1, *shape]]))
    if rng.random() < 0.5:  # regroup neighbouring dimensions, split one, add or drop size-1 dimensions
        out, k = [], 0
        while k < len(shape):
            step, size = rng.choice([1, 1, 2, 3]), 1
            for n in shape[k:k + step]:
                size *= n
            out.append(size)
            k += step
        if out and rng.random() < 0.4:
            k = rng.randrange(len(out))
            factors = [f for f in range(2, out[k]) if out[k] % f == 0]
            if factors:
                f = rng.choice(factors)
                out[k:k + 1] = [f, out[k] // f]
        if rng.random() < 0.3:
            out.insert(rng.randint(0, len(out)), 1)
        if rng.random() < 0.3:
            out = [n for n in out if n != 1]
    else:  # any factorisation of the element count
        out, rest = [], numel
        for _ in range(rng.randint(0, 3)):
            f = rng.choice([f for f in range(1, rest + 1) if rest % f == 0])
            out.append(f)
            rest //= f
        out.append(rest)
        rng.shuffle(out)
    if out and rng.random() < 0.25:
        out[rng.randrange(len(out))] = -1
    return out


def _random_layout(rng: random.Random) -> torch.Tensor:
    t = torch.empty([rng.choice([1, 2, 2, 3, 4]) for _ in range(rng.randint(0, 4))])
    if t.dim() >= 2 and rng.random() < 0.5:
        perm = list(range(t.dim()))
        rng.shuffle(perm)
        t = t.permute(perm)
    if t.dim() and rng.random() < 0.4:
        d, index = rng.randrange(t.dim()), [slice(None)] * t.dim()
        index[d] = slice(rng.randint(0, 1), None, rng.choice([1, 2]))
        t = t[tuple(index)]
    if rng.random() < 0.3:
        d = rng.randint(0, t.dim())
        t = t.unsqueeze(d)
        sizes = list(t.shape)
        sizes[d] = rng.choice([2, 3])
        t = t.expand(sizes)
    if t.dim() and rng.random() < 0.08:
        t = t.narrow(rng.randrange(t.dim()), 0, 0)
    return t


def _visible_layouts() -> list[tuple[torch.Tensor, tuple[int, ...]]]:
    base = torch.arange(12.0).view(3, 4)
    cases = [(base, (12,)),  # contiguous: flattening is a view
             (base.t(), (12,)),  # section 6: a transpose cannot be flattened
             (base.t(), (2, 2, 3)),  # but its dimensions can be split
             (base[1].expand(3, 4), (3, 2, 2)), (base[1].expand(3, 4), (12,)),  # stride 0 stays stride 0
             (base.view(3, 1, 4), (2, -1)),  # a size-1 dimension and a -1
             (base[:, 1:3], (6,)),
             (torch.empty(2, 3, 1).permute(0, 2, 1), (6,))]  # a size-1 dimension's stride never matters
    return cases + _random_layouts(20, 40)


def _random_layouts(seed: int, n: int) -> list[tuple[torch.Tensor, tuple[int, ...]]]:
    rng, out = random.Random(seed), []
    for _ in range(n):
        t = _random_layout(rng)
        out.append((t, tuple(_random_new_shape(rng, tuple(t.shape), t.numel()))))
    return out


def reshape_as_view(c: Check, answer: Any,
                    hidden: Iterable[tuple[torch.Tensor, Sequence[int]] | int] | None = None) -> None:
    """`view_strides(shape, stride, new_shape)`: the strides of `t.view(new_shape)`, or None where torch refuses
    (size-1 and empty dimensions' strides are free). A hidden case is (tensor, new shape) or a seed of 400 random
    layouts."""
    mine = c.watch(answer, "view_strides", allow_aten=set(), hint=NUMBERS_ONLY,
                   forbid=[_compute_stride, _layout_module, torch.Tensor.view, torch.Tensor.reshape, torch.as_strided,
                           torch.empty_strided])
    def layouts(case: tuple[torch.Tensor, Sequence[int]] | int) -> list[tuple[torch.Tensor, tuple[int, ...]]]:
        return _random_layouts(case, 400) if isinstance(case, int) else [(case[0], tuple(case[1]))]

    for label, (t, new_shape) in numbered(hidden, _visible_layouts(), layouts):
        shape, stride = tuple(t.shape), tuple(t.stride())
        what = label or f"view_strides({shape}, {stride}, {new_shape})"
        expected, sizes = _torch_says(t, new_shape)
        got = mine(shape, stride, new_shape)
        if expected is None:
            c.equal(got, None, what=what + " (torch cannot view this layout so)", hint=RESHAPE_HINTS,
                    secret=bool(label))
            continue
        c.that(type(got) is tuple and all(type(s) is int for s in got),
               f"{what}: torch makes this a view, so return its strides as a tuple of ints; got {got!r}",
               RESHAPE_HINTS)
        c.that(len(got) == len(sizes), f"{what}: return one stride per entry of new_shape; got {got!r}",
               RESHAPE_HINTS)
        free = t.numel() == 0
        c.equal(tuple("any" if free or n == 1 else s for s, n in zip(got, sizes)),
                tuple("any" if free or n == 1 else s for s, n in zip(expected, sizes)),
                what=what + " (strides; 'any' where every value is accepted)", hint=RESHAPE_HINTS,
                secret=bool(label))
