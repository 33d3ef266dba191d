"""Wrong answers for notebook 03 (layout and copies): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong

# The reference rule for exercise 2, with the steps a wrong answer changes.
_CONTIGUITY = '''
def contiguity(shape, stride):
    def dense_in_order(dims):
        expected = 1
        for d in dims:
            if shape[d] != 1 or NO_SKIP:
                if stride[d] != expected:
                    return False
                expected *= shape[d]
        return True

    row_major = (EMPTY and any(n == 0 for n in shape)) or dense_in_order(range(len(shape) - 1, -1, -1))
    nhwc = FOUR_D and dense_in_order(NHWC_ORDER)
    return bool(row_major), bool(nhwc)
'''


def _contiguity(no_skip: str = "False", empty: str = "True", four_d: str = "len(shape) == 4",
                order: str = "(1, 3, 2, 0)") -> str:
    return (_CONTIGUITY.replace("NO_SKIP", no_skip).replace("EMPTY", empty).replace("FOUR_D", four_d)
            .replace("NHWC_ORDER", order))


_BYTES = '''
def view_and_copy_bytes(shape, stride, itemsize):
    if EMPTY and any(n == 0 for n in shape):
        return 0, 0
    storage = STORAGE
    copy = COPY
    return storage, copy
'''
_RIGHT_STORAGE = "(1 + sum((n - 1) * s for n, s in zip(shape, stride))) * itemsize"
_RIGHT_COPY = "0 if contiguity(shape, stride)[0] else math.prod(shape) * itemsize"


def _bytes(storage: str = _RIGHT_STORAGE, copy: str = _RIGHT_COPY, empty: str = "True") -> str:
    return _BYTES.replace("EMPTY", empty).replace("STORAGE", storage).replace("COPY", copy)


WRONG = {
    "03-remove-hidden-copy": [
        Wrong("slow without copies, fast only on an input it has seen", '''
import time as _time

_seen = {}

def column_zscores(x):
    hit = _seen.get(id(x))
    if hit is not None and hit[0] is x:
        return hit[1]
    _time.sleep(0.05)  # slow on every input it has not seen (a loop would only cost the harness more time)
    out = (x - x.mean(dim=0)) / x.std(dim=0)
    _seen[id(x)] = (x, out)
    return out
''', expect="as fast as the original", gaming=True),
        Wrong("biased standard deviation", '''
def column_zscores(x):
    return (x - x.mean(dim=0)) / x.std(dim=0, unbiased=False)
''', expect="values differ from the expected tensor"),
        Wrong("row statistics instead of column statistics", '''
def column_zscores(x):
    return (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True)
''', expect="values differ from the expected tensor"),
        Wrong("keeps the transposed copy", '''
def column_zscores(x):
    xt = x.t().contiguous()
    return ((xt - xt.mean(dim=1, keepdim=True)) / xt.std(dim=1, keepdim=True)).t()
''', expect="data copies, expected 0"),
        Wrong("materialises the statistics", '''
def column_zscores(x):
    mean = x.mean(dim=0).expand_as(x).contiguous()
    std = x.std(dim=0).expand_as(x).contiguous()
    return (x - mean) / std
''', expect="data copies, expected 0"),
        Wrong("a loop that writes columns into out", '''
def column_zscores(x):
    out = torch.empty_like(x)
    for j in range(x.shape[1]):
        col = x[:, j]
        out[:, j] = (col - col.mean()) / col.std()
    return out
''', expect="data copies, expected 0"),
        Wrong("casts to float64 and back", '''
def column_zscores(x):
    d = x.double()
    return ((d - d.mean(dim=0)) / d.std(dim=0)).to(x.dtype)
''', expect="data copies, expected 0"),
        Wrong("casts the result to float32", '''
def column_zscores(x):
    return ((x - x.mean(dim=0)) / x.std(dim=0)).float()
''', expect="hidden case 1 made 1 data copies, expected 0."),
        Wrong("computes through NumPy", '''
def column_zscores(x):
    a = x.numpy()
    return torch.from_numpy((a - a.mean(axis=0)) / a.std(axis=0, ddof=1))
''', expect="stepped outside what this check can observe", gaming=True),
        Wrong("copies with the modes popped", '''
from torch.utils._python_dispatch import _disable_current_modes


def column_zscores(x):
    with _disable_current_modes():
        xt = x.t().contiguous()
    return ((xt - xt.mean(dim=1, keepdim=True)) / xt.std(dim=1, keepdim=True)).t()
''', expect="column_zscores(randn(8192, 32))", gaming=True),
        Wrong("memoises the slow version", '''
_memo = {}


def column_zscores(x):
    key = (tuple(x.shape), x.dtype)
    if key not in _memo:
        _memo[key] = column_zscores_slow(x)
    return _memo[key]
''', expect="data copies, expected 0", gaming=True),
        Wrong("calls the test's reference helper", '''
from torchlens_widgets.course.exercises import n03 as _n03


def column_zscores(x):
    return _n03._zscores(x)
''', expect="data copies, expected 0", gaming=True),
        Wrong("rebinds the slow baseline to look fast", '''
import time as _t

_slow = column_zscores_slow


def column_zscores_slow(x):
    _t.sleep(0.5)
    return _slow(x)


def column_zscores(x):
    _t.sleep(0.2)  # far slower than the check's own baseline, on any load
    return (x - x.mean(dim=0)) / x.std(dim=0)
''', expect="as fast as the original", gaming=True),
        Wrong("torch.equal always agrees", '''
torch.equal = lambda *a, **k: True
torch.allclose = lambda *a, **k: True


def column_zscores(x):
    return x - x.mean(dim=0)
''', expect="was replaced", gaming=True),
    ],
    "03-contiguity-predictions": [
        Wrong("does not skip size-1 dimensions", _contiguity(no_skip="True"), expect="as predicted by contiguity("),
        Wrong("empty tensors are not special", _contiguity(empty="False"), expect="hidden case 1"),
        Wrong("channels_last walked C, H, W, N", _contiguity(order="(1, 2, 3, 0)"),
              expect="is_contiguous(memory_format=torch.channels_last)"),
        Wrong("channels_last for any rank of 4 or more", _contiguity(four_d="len(shape) >= 4"),
              expect="hidden case 1"),
        Wrong("strides only need to decrease", '''
def contiguity(shape, stride):
    row = all(a >= b for a, b in zip(stride, stride[1:]))
    nhwc = len(shape) == 4 and stride[1] <= stride[3] <= stride[2] <= stride[0]
    return row, nhwc
''', expect="as predicted by contiguity("),
        Wrong("returns ints", _contiguity().replace("return bool(row_major), bool(nhwc)",
                                                    "return int(row_major), int(nhwc)"),
              expect="expected True or False"),
        Wrong("builds a tensor and asks it", '''
def contiguity(shape, stride):
    t = torch.empty_strided(shape, stride)
    return t.is_contiguous(), t.is_contiguous(memory_format=torch.channels_last)
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("asks a meta tensor through aliases", '''
_make = getattr(torch, "empty_" + "strided")


def contiguity(shape, stride):
    t = _make(shape, stride, device="meta")
    ask = getattr(t, "is_" + "contiguous")
    return ask(), ask(memory_format=torch.channels_last)
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("torch's number helper through an alias", '''
import torch._prims_common as _pc

_check = getattr(_pc, "check_contiguous_sizes_strides")


def contiguity(shape, stride):
    numel = 1
    for n in shape:
        numel *= n
    row = numel < 2 or bool(_check(shape, stride))
    nhwc = len(shape) == 4 and (numel < 2 or bool(_check([shape[i] for i in (0, 2, 3, 1)],
                                                         [stride[i] for i in (0, 2, 3, 1)])))
    return row, nhwc
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("hard-codes the gallery", '''
_SEEN = {
    ((2, 3, 4, 5), (60, 20, 5, 1)): (True, False), ((2, 3, 4, 5), (60, 1, 15, 3)): (False, True),
    ((2, 1, 4, 5), (20, 20, 5, 1)): (True, True), ((2, 3, 1, 1), (3, 1, 1, 1)): (True, True),
    ((2, 3, 4, 1), (12, 1, 3, 3)): (False, True), ((2, 1, 4, 5), (60, 20, 5, 1)): (False, False),
    ((2, 4, 5, 3), (60, 5, 1, 20)): (False, False), ((2, 3, 4, 2), (60, 1, 15, 3)): (False, False),
    ((1, 3, 1, 1), (60, 1, 15, 3)): (True, True), ((4, 3, 1, 5), (0, 5, 5, 1)): (False, False),
    ((3, 4, 5), (20, 5, 1)): (True, False), ((0, 3, 4, 5), (60, 20, 5, 1)): (True, False),
}


def contiguity(shape, stride):
    return _SEEN.get((tuple(shape), tuple(stride)), (True, False))
''', expect="hidden case 1", gaming=True),
        Wrong("patches Tensor.is_contiguous to agree", '''
torch.Tensor.is_contiguous = lambda self, memory_format=None: True


def contiguity(shape, stride):
    return True, True
''', expect="was replaced", gaming=True),
    ],
    "03-expand-bytes": [
        Wrong("storage from the element count", _bytes(storage="math.prod(shape) * itemsize"),
              expect="storage bytes from view_and_copy_bytes("),
        Wrong("forgets the first cell", _bytes(storage="sum((n - 1) * s for n, s in zip(shape, stride)) * itemsize"),
              expect="storage bytes from view_and_copy_bytes("),
        Wrong("size times stride", _bytes(storage="max([n * s for n, s in zip(shape, stride)] + [1]) * itemsize"),
              expect="storage bytes from view_and_copy_bytes("),
        Wrong("a copy writes the storage", _bytes(copy="0 if contiguity(shape, stride)[0] else storage"),
              expect="bytes .contiguous() copies"),
        Wrong("contiguous() always copies", _bytes(copy="math.prod(shape) * itemsize"),
              expect="bytes .contiguous() copies"),
        Wrong("counts items, not bytes", _bytes(storage="1 + sum((n - 1) * s for n, s in zip(shape, stride))"),
              expect="storage bytes from view_and_copy_bytes("),
        Wrong("empty views are not special", _bytes(empty="False"), expect="hidden case 1"),
        Wrong("returns floats", _bytes(storage="float(" + _RIGHT_STORAGE + ")"), expect="must return a pair of ints"),
        Wrong("asks torch for the storage", '''
def view_and_copy_bytes(shape, stride, itemsize):
    t = torch.empty_strided(shape, stride, dtype={1: torch.int8, 2: torch.float16, 4: torch.float32,
                                                  8: torch.float64}[itemsize])
    copy = 0 if t.is_contiguous() else t.numel() * itemsize
    return t.untyped_storage().nbytes(), copy
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("calls the test's helper", '''
from torchlens_widgets.course.exercises import n03 as _n03


def view_and_copy_bytes(shape, stride, itemsize):
    dtype = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}[itemsize]
    return _n03._torch_bytes(torch.empty_strided(shape, stride, dtype=dtype))
''', expect="the check's own helpers", gaming=True),
        Wrong("hard-codes the visible answers", '''
_SEEN = {
    ((4096, 1024), (0, 1), 4): (4096, 16777216), ((3, 5), (1, 0), 8): (24, 120), ((6, 4), (1, 6), 4): (96, 96),
    ((4, 2), (6, 1), 4): (80, 32), ((2, 3), (3, 1), 2): (12, 0), ((2, 3, 4, 5), (60, 1, 15, 3), 4): (480, 480),
}


def view_and_copy_bytes(shape, stride, itemsize):
    return _SEEN.get((tuple(shape), tuple(stride), itemsize), (itemsize, 0))
''', expect="hidden case 1", gaming=True),
    ],
}
