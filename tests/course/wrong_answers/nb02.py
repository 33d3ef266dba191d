"""Wrong answers for notebook 02 (storage, views, strides): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong

_RIGHT_PREDICTIONS = {
    "A": "((6, 1), 30)", "B": "((30, 1), 12)", "C": "((1, 6, 30), 0)", "D": "((30, 12, 1), 33)",
    "E": "((1, 6), 61)", "F": "((30, 0, 1), 0)", "G": "((30, 10), 5)", "H": "((6, 1), 92)",
}


def _predictions(**changed: str) -> str:
    entries = {**_RIGHT_PREDICTIONS, **changed}
    return "predicted_views = {\n" + "".join(f"    {k!r}: {v},\n" for k, v in entries.items()) + "}\n"


_RIGHT_VIEWS = (
    '{"a.t()", "a[1]", "a[:, ::2]", "a.view(-1, 4)", "a.reshape(2, -1)", "a.flatten()", "a.contiguous()", '
    '"a.expand(2, -1, -1)", "a.detach()", "a.diagonal()", "a.to(torch.float32)", "a.unfold(1, 3, 1)"}'
)

# The reference rule, for wrong answers that change one step of it.
_VIEW_RULE = '''
def view_strides(shape, stride, new_shape):
    numel = 1
    for n in shape:
        numel *= n
    sizes = list(new_shape)
    if -1 in sizes:
        known = 1
        for n in sizes:
            if n != -1:
                known *= n
        sizes[sizes.index(-1)] = NEG_ONE
    if numel == 0 and EMPTY_SPECIAL:
        return tuple(1 for _ in sizes)
    chunks = []
    for n, s in zip(shape, stride):
        if n == 1 and SKIP_ONES:
            continue
        if chunks and chunks[-1][1] == n * s:
            chunks[-1] = (chunks[-1][0] * n, s)
        else:
            chunks.append((n, s))
    out = [1] * len(sizes)
    d = len(sizes) - 1
    for elements, base in reversed(chunks):
        covered = 1
        while covered < elements:
            if d < 0:
                return None
            out[d] = STRIDE
            covered *= sizes[d]
            d -= 1
        if covered != elements:
            return None
    if any(sizes[k] != 1 for k in range(d + 1)):
        return None
    return tuple(out)
'''


def _rule(neg_one: str = "numel // known", empty: str = "True", skip_ones: str = "True",
          stride: str = "base * covered") -> str:
    return (_VIEW_RULE.replace("NEG_ONE", neg_one).replace("EMPTY_SPECIAL", empty)
            .replace("SKIP_ONES", skip_ones).replace("STRIDE", stride))


WRONG = {
    "02-predict-strides": [
        Wrong("forgets the offsets", _predictions(A="((6, 1), 0)", B="((30, 1), 0)", D="((30, 12, 1), 0)"),
              expect="A (y[1]) offset (the stride is right)"),
        Wrong("transpose keeps the strides", _predictions(C="((30, 6, 1), 0)"), expect="C (y.transpose(0, 2))"),
        Wrong("a step does not change the stride", _predictions(D="((30, 6, 1), 33)"), expect="D (y[1:, ::2, 3:])"),
        Wrong("expand keeps the stride", _predictions(F="((30, 6, 1), 0)"), expect="F (y[:, :1].expand(4, 3, 6))"),
        Wrong("offset counted after the transpose", _predictions(E="((1, 6), 66)"), expect="E (y[2].t()[1:])"),
        Wrong("visible cases only", _predictions(E="((6, 1), 0)", F="((0,), 0)", G="((1,), 0)", H="((1,), 0)"),
              expect="E (y[2].t()[1:])", gaming=True),
        Wrong("strides as lists", _predictions(A="([6, 1], 30)"), expect="the stride must be a tuple of ints"),
        Wrong("patches Tensor.stride to agree", '''
predicted_views = {k: ((1,), 0) for k in "ABCDEFGH"}
torch.Tensor.stride = lambda self, *a: (1,)
torch.Tensor.storage_offset = lambda self: 0
''', expect="was replaced", gaming=True),
        Wrong("a dict that claims every key", '''
class _Anything(dict):
    def __contains__(self, key):
        return True

    def __getitem__(self, key):
        return ((6, 1), 30)


predicted_views = _Anything()
''', expect="predicted_views needs an entry", gaming=True),
    ],
    "02-storage-position": [
        Wrong("ignores the offset", '''
def storage_position(index, shape, stride, offset):
    return sum(i * s for i, s in zip(index, stride))
''', expect="storage_position("),
        Wrong("row-major strides from the shape", '''
def storage_position(index, shape, stride, offset):
    pos, acc = offset, 1
    for i, n in zip(reversed(index), reversed(shape)):
        pos += i * acc
        acc *= n
    return pos
''', expect="storage_position("),
        Wrong("strides in reverse order", '''
def storage_position(index, shape, stride, offset):
    return offset + sum(i * s for i, s in zip(index, reversed(stride)))
''', expect="storage_position("),
        Wrong("multiplies by the size", '''
def storage_position(index, shape, stride, offset):
    return offset + sum(i * n for i, n in zip(index, shape))
''', expect="storage_position("),
        Wrong("returns a float", '''
def storage_position(index, shape, stride, offset):
    return float(offset + sum(i * s for i, s in zip(index, stride)))
''', expect="return a plain int"),
        Wrong("replaces the lens, then calls the real one", '''
import sys
_mod = sys.modules["torchlens_widgets.lenses.layout"]
_real = _mod.storage_index
_mod.storage_index = lambda *a, **k: 0


def storage_position(index, shape, stride, offset):
    return _real(tuple(index), tuple(shape), tuple(stride), offset)
''', expect="storage_index was replaced", gaming=True),
        Wrong("calls the layout lens through an alias", '''
from torchlens_widgets import storage_index as _si
_alias = _si


def storage_position(index, shape, stride, offset):
    return _alias(tuple(index), tuple(shape), tuple(stride), offset)
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("reads the position from as_strided via getattr", '''
def storage_position(index, shape, stride, offset):
    cells = offset + sum((n - 1) * s for n, s in zip(shape, stride)) + 1
    positions = torch.arange(cells)
    view = getattr(positions, "as_strided")(tuple(shape), tuple(stride), offset)
    return int(view[tuple(index)])
''', expect="as_strided", gaming=True),
        Wrong("calls the test cell's helper", '''
from torchlens_widgets.course.exercises import n02 as _n02


def storage_position(index, shape, stride, offset):
    return _n02._random_views(0, 0) or offset + sum(i * s for i, s in zip(index, stride))
''', expect="the check's own helpers", gaming=True),
    ],
    "02-which-views": [
        Wrong("reshape and flatten always copy", '''
shares_a = {"a.t()", "a[1]", "a[:, ::2]", "a.view(-1, 4)", "a.contiguous()", "a.expand(2, -1, -1)", "a.detach()",
            "a.diagonal()", "a.to(torch.float32)", "a.unfold(1, 3, 1)"}
''', expect="2 entries missing"),
        Wrong("contiguous and .to always copy", '''
shares_a = {"a.t()", "a[1]", "a[:, ::2]", "a.view(-1, 4)", "a.reshape(2, -1)", "a.flatten()", "a.expand(2, -1, -1)",
            "a.detach()", "a.diagonal()", "a.unfold(1, 3, 1)"}
''', expect="2 entries missing"),
        Wrong("reshape is always a view", "shares_a = " + _RIGHT_VIEWS + ' | {"a.t().reshape(-1)", "a.t().flatten()"}\n',
              expect="2 unexpected"),
        Wrong("advanced indexing makes views", "shares_a = " + _RIGHT_VIEWS + ' | {"a[[0, 2]]", "a[a > 5]"}\n',
              expect="2 unexpected"),
        Wrong("flip is a view, detach a copy", "shares_a = (" + _RIGHT_VIEWS + ' | {"a.flip(0)"}) - {"a.detach()"}\n',
              expect="1 entry missing, 1 unexpected"),
        Wrong("names not in the list", "shares_a = " + _RIGHT_VIEWS + ' | {"a.T"}\n', expect="not in the list"),
        Wrong("a set equal to everything", '''
class _Yes(set):
    def __eq__(self, other):
        return True

    __hash__ = set.__hash__


shares_a = _Yes()
''', expect="answer with a set of names", gaming=True),
        Wrong("patches shares_storage", '''
import sys
sys.modules["torchlens_widgets.lenses.layout"].shares_storage = lambda a, b: True
shares_a = set(VIEW_QUIZ)
''', expect="shares_storage was replaced", gaming=True),
        Wrong("patches the checker's layout reader", '''
import torchlens_widgets.lenses.layout as _lay  # the grader's own modules refuse a rebinding; a lens is caught
_lay.layout = lambda t: type("L", (), {"storage_id": 0})()
shares_a = set(VIEW_QUIZ)
''', expect="was replaced", gaming=True),
    ],
    "02-my-transpose": [
        Wrong("uses t()", '''
def my_transpose(x):
    return x.t()
''', expect="ran aten.t"),
        Wrong("t() through getattr", '''
def my_transpose(x):
    return getattr(x, "t")()
''', expect="ran aten.t", gaming=True),
        Wrong("a copy", '''
def my_transpose(x):
    return x.t().contiguous()
''', expect="ran aten."),
        Wrong("forgets to swap the strides", '''
def my_transpose(x):
    return x.as_strided((x.shape[1], x.shape[0]), x.stride(), x.storage_offset())
''', expect="your code raised RuntimeError"),
        Wrong("offset 0", '''
def my_transpose(x):
    return x.as_strided((x.shape[1], x.shape[0]), (x.stride(1), x.stride(0)), 0)
''', expect="storage offset: expected 12, got 0"),
        Wrong("strides from the shape", '''
def my_transpose(x):
    return x.as_strided((x.shape[1], x.shape[0]), (1, x.shape[1]), x.storage_offset())
''', expect="hidden case 1 has the wrong layout"),
        Wrong("hides t() under _disable_current_modes", '''
from torch.utils._python_dispatch import _disable_current_modes


def my_transpose(x):
    with _disable_current_modes():
        return x.t()
''', expect="stepped outside what this check can observe", gaming=True),
        Wrong("through numpy", '''
def my_transpose(x):
    return torch.from_numpy(x.numpy().T)
''', expect="stepped outside what this check can observe", gaming=True),
        Wrong("patches Tensor.stride", '''
_real_stride = torch.Tensor.stride


def my_transpose(x):
    return x


torch.Tensor.stride = lambda self, *a: (1, 4) if not a else (1, 4)[a[0]]
''', expect="was replaced", gaming=True),
    ],
    "02-reshape-as-view": [
        Wrong("contiguous inputs only", '''
def view_strides(shape, stride, new_shape):
    numel = 1
    for n in shape:
        numel *= n
    sizes = list(new_shape)
    if -1 in sizes:
        known = 1
        for n in sizes:
            if n != -1:
                known *= n
        sizes[sizes.index(-1)] = numel // known
    want, acc = [], 1
    for n in reversed(shape):
        want.append(acc)
        acc *= n
    if any(n != 1 and s != w for n, s, w in zip(shape, stride, reversed(want))) and numel:
        return None
    out, acc = [], 1
    for n in reversed(sizes):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))
''', expect="view_strides((4, 3), (1, 4), (2, 2, 3))"),
        Wrong("size-1 dimensions break a run", _rule(skip_ones="False"), expect="view_strides((2, 1, 3), (3, 1, 1), (6,))"),
        Wrong("-1 resolved to the element count", _rule(neg_one="numel"), expect="-1)"),
        Wrong("no special case for empty tensors", _rule(empty="False"),
              expect="view_strides((1, 0, 4, 2), (32, 8, 2, 1), (2, 4, 0, 1)): torch makes this a view"),
        Wrong("strides counted from the outer end", _rule(stride="base * (elements // covered)"),
              expect="view_strides((3, 4), (4, 1), (12,))"),
        Wrong("asks torch on a meta tensor", '''
def view_strides(shape, stride, new_shape):
    t = torch.empty_strided(shape, stride, device="meta")
    try:
        return tuple(t.view(new_shape).stride())
    except RuntimeError:
        return None
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("torch's own Python copy of the rule, aliased", '''
from torch._subclasses import fake_impls as _fi
_rule = getattr(_fi, "_compute_stride")


def view_strides(shape, stride, new_shape):
    sizes = list(new_shape)
    if -1 in sizes:
        numel = 1
        for n in shape:
            numel *= n
        known = 1
        for n in sizes:
            if n != -1:
                known *= n
        sizes[sizes.index(-1)] = numel // known
    out = _rule(list(shape), list(stride), sizes)
    return None if out is None else tuple(out)
''', expect="_compute_stride", gaming=True),
        Wrong("calls the test's torch helper", '''
from torchlens_widgets.course.exercises import n02 as _n02


def view_strides(shape, stride, new_shape):
    return _n02._torch_says(torch.empty(1000).as_strided(shape, stride), new_shape)[0]
''', expect="the check's own helpers", gaming=True),
    ],
}
