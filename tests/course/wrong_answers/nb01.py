"""Wrong answers for notebook 01 (runtime): each must fail its check for the reason named in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong

# A correct count_aten_ops, for wrong answers that only get the prediction wrong.
_COUNT_OK = '''
from torch.utils._python_dispatch import TorchDispatchMode as _M


class _C(_M):
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += func.namespace == "aten"
        return func(*args, **(kwargs or {}))


def count_aten_ops(fn):
    with _C() as rec:
        fn()
    return rec.n
'''

WRONG = {
    "01-linear-ops": [
        Wrong("records the construction too", '''
def linear_ops(bias, input_grad):
    with OpLogger() as log:
        lin = torch.nn.Linear(4, 3, bias=bias)
        x = torch.randn(2, 4, requires_grad=input_grad)
        lin(x).sum().backward()
    return {str(func.overloadpacket) for func, _ in log.calls if func.namespace == "aten"}
''', expect="unexpected"),
        Wrong("overload names instead of packets", '''
def linear_ops(bias, input_grad):
    lin = torch.nn.Linear(4, 3, bias=bias)
    x = torch.randn(2, 4, requires_grad=input_grad)
    with OpLogger() as log:
        lin(x).sum().backward()
    return {str(func) for func, _ in log.calls if func.namespace == "aten"}
''', expect="linear_ops(bias=True, input_grad=False)"),
        Wrong("forward only", '''
def linear_ops(bias, input_grad):
    lin = torch.nn.Linear(4, 3, bias=bias)
    x = torch.randn(2, 4, requires_grad=input_grad)
    with OpLogger() as log:
        loss = lin(x).sum()
    loss.backward()
    return {str(func.overloadpacket) for func, _ in log.calls if func.namespace == "aten"}
''', expect="missing"),
        Wrong("always builds the layer with a bias", '''
def linear_ops(bias, input_grad):
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4, requires_grad=input_grad)
    with OpLogger() as log:
        lin(x).sum().backward()
    return {str(func.overloadpacket) for func, _ in log.calls if func.namespace == "aten"}
''', expect="hidden case 1"),
        Wrong("a list with repeats instead of a set", '''
def linear_ops(bias, input_grad):
    lin = torch.nn.Linear(4, 3, bias=bias)
    x = torch.randn(2, 4, requires_grad=input_grad)
    with OpLogger() as log:
        lin(x).sum().backward()
    return [str(func.overloadpacket) for func, _ in log.calls if func.namespace == "aten"]
''', expect="expected a set"),
        Wrong("hard-codes the visible case", '''
def linear_ops(bias, input_grad):
    return {"aten.t", "aten.addmm", "aten.sum", "aten.ones_like", "aten.expand", "aten.mm", "aten.view",
            "aten.detach"}
''', expect="hidden case 1", gaming=True),
        Wrong("calls the test's reference helper", '''
from torchlens_widgets.course.exercises import n01 as _n01


def linear_ops(bias, input_grad):
    return _n01._linear_ops(bias, input_grad)
''', expect="the check's own helpers", gaming=True),
        Wrong("an object equal to everything", '''
class _Yes(set):
    def __eq__(self, other):
        return True


def linear_ops(bias, input_grad):
    return _Yes()
''', expect="expected a set", gaming=True),
        Wrong("leaves a lying dispatch mode entered", '''
from torch.utils._python_dispatch import TorchDispatchMode as _M


class _Liar(_M):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


_Liar().__enter__()


def linear_ops(bias, input_grad):
    return set()
''', expect="a mode was left entered", gaming=True),
    ],
    "01-crossover": [
        Wrong("does not sort by size", '''
def crossover(sizes, seconds):
    (n0, t0), (n1, t1) = (sizes[0], seconds[0]), (sizes[-1], seconds[-1])
    per_element = (t1 - t0) / (n1 - n0)
    if per_element <= 0:
        return None
    return max(1, math.ceil((t0 - per_element * n0) / per_element))
''', expect="hidden case 3"),
        Wrong("least-squares line", '''
import statistics


def crossover(sizes, seconds):
    per_element, overhead = statistics.linear_regression(list(sizes), list(seconds))
    if per_element <= 0:
        return None
    return max(1, math.ceil(overhead / per_element))
''', expect="hidden case 3"),
        Wrong("rounds instead of rounding up", '''
def crossover(sizes, seconds):
    (n0, t0), (n1, t1) = sorted(zip(sizes, seconds))[0], sorted(zip(sizes, seconds))[-1]
    per_element = (t1 - t0) / (n1 - n0)
    if per_element <= 0:
        return None
    return max(1, round((t0 - per_element * n0) / per_element))
''', expect="hidden case 1"),
        Wrong("truncates", '''
def crossover(sizes, seconds):
    (n0, t0), (n1, t1) = sorted(zip(sizes, seconds))[0], sorted(zip(sizes, seconds))[-1]
    per_element = (t1 - t0) / (n1 - n0)
    if per_element <= 0:
        return None
    return max(1, int((t0 - per_element * n0) / per_element))
''', expect="expected 6667"),
        Wrong("returns a float", '''
def crossover(sizes, seconds):
    (n0, t0), (n1, t1) = sorted(zip(sizes, seconds))[0], sorted(zip(sizes, seconds))[-1]
    per_element = (t1 - t0) / (n1 - n0)
    if per_element <= 0:
        return None
    return max(1.0, -(-(t0 - per_element * n0) // per_element))
''', expect="return a Python int"),
        Wrong("overhead = time at the smallest size", '''
def crossover(sizes, seconds):
    (n0, t0), (n1, t1) = sorted(zip(sizes, seconds))[0], sorted(zip(sizes, seconds))[-1]
    per_element = (t1 - t0) / (n1 - n0)
    if per_element <= 0:
        return None
    return max(1, math.ceil(t0 / per_element))
''', expect="expected 6667, got 6668"),
        Wrong("no lower bound of 1", '''
def crossover(sizes, seconds):
    (n0, t0), (n1, t1) = sorted(zip(sizes, seconds))[0], sorted(zip(sizes, seconds))[-1]
    per_element = (t1 - t0) / (n1 - n0)
    if per_element <= 0:
        return None
    return math.ceil((t0 - per_element * n0) / per_element)
''', expect="hidden case 5"),
        Wrong("never returns None", '''
def crossover(sizes, seconds):
    (n0, t0), (n1, t1) = sorted(zip(sizes, seconds))[0], sorted(zip(sizes, seconds))[-1]
    per_element = max((t1 - t0) / (n1 - n0), 1e-30)
    return max(1, math.ceil((t0 - per_element * n0) / per_element))
''', expect="hidden case 6"),
        Wrong("hard-codes the visible answer", '''
def crossover(sizes, seconds):
    return 6667
''', expect="hidden case 1", gaming=True),
        Wrong("patches math.ceil", '''
import math as _m
_m.ceil = lambda v: 6667


def crossover(sizes, seconds):
    return 6667
''', expect="math.ceil was replaced", gaming=True),
    ],
    "01-op-count": [
        Wrong("prediction forgets the copying reshape", _COUNT_OK + "\nPREDICTED_OPS = 5\n", expect="PREDICTED_OPS"),
        Wrong("prediction counts .float()", _COUNT_OK + "\nPREDICTED_OPS = 8\n", expect="PREDICTED_OPS"),
        Wrong("counts every namespace", '''
def count_aten_ops(fn):
    with OpLogger() as log:
        fn()
    return len(log.calls)


PREDICTED_OPS = 7
''', expect="hidden case 2"),
        Wrong("counts distinct ops", '''
def count_aten_ops(fn):
    with OpLogger() as log:
        fn()
    return len({func for func, _ in log.calls if func.namespace == "aten"})


PREDICTED_OPS = 7
''', expect="count_aten_ops((x + 1) + (x + 1))"),
        Wrong("counts Python-level calls", '''
def count_aten_ops(fn):
    with CallLogger() as log:
        fn()
    return len(log.calls)


PREDICTED_OPS = 7
''', expect="count_aten_ops(x.float().contiguous())"),
        Wrong("one logger for every call", '''
_log = OpLogger()


def count_aten_ops(fn):
    with _log:
        fn()
    return sum(1 for func, _ in _log.calls if func.namespace == "aten")


PREDICTED_OPS = 7
''', expect="count_aten_ops("),
        Wrong("calls the test's reference counter", '''
from torchlens_widgets.course.exercises import n01 as _n01


def count_aten_ops(fn):
    return _n01._aten_count(fn)


PREDICTED_OPS = 7
''', expect="the check's own helpers", gaming=True),
        Wrong("memoised first answer", '''
_first = []


def count_aten_ops(fn):
    if not _first:
        with OpLogger() as log:
            fn()
        _first.append(sum(1 for func, _ in log.calls if func.namespace == "aten"))
    return _first[0]


PREDICTED_OPS = 7
''', expect="count_aten_ops((x + 1) + (x + 1))", gaming=True),
    ],
    "01-layer-counts": [
        Wrong("swaps the two numbers", '''
def layer_counts(fn):
    with CallLogger() as py, OpLogger() as at:
        fn()
    return sum(1 for func, _ in at.calls if func.namespace == "aten"), len(py.calls)
''', expect="layer_counts(x3 @ w)"),
        Wrong("counts every dispatch namespace", '''
def layer_counts(fn):
    with CallLogger() as py, OpLogger() as at:
        fn()
    return len(py.calls), len(at.calls)
''', expect="hidden case 5"),
        Wrong("counts distinct names", '''
def layer_counts(fn):
    with CallLogger() as py, OpLogger() as at:
        fn()
    return len(set(py.calls)), len({func for func, _ in at.calls if func.namespace == "aten"})
''', expect="hidden case 3"),
        Wrong("leaves out attribute reads", '''
def layer_counts(fn):
    with CallLogger() as py, OpLogger() as at:
        fn()
    return (sum(1 for name in py.calls if "(attribute)" not in name),
            sum(1 for func, _ in at.calls if func.namespace == "aten"))
''', expect="hidden case 3"),
        Wrong("only the dispatch mode", '''
def layer_counts(fn):
    with OpLogger() as at:
        fn()
    n = sum(1 for func, _ in at.calls if func.namespace == "aten")
    return n, n
''', expect="layer_counts(x3 @ w)"),
        Wrong("calls the test's reference helper", '''
from torchlens_widgets.course.exercises import n01 as _n01


def layer_counts(fn):
    return _n01._layers(fn)
''', expect="the check's own helpers", gaming=True),
        Wrong("hard-codes the visible answer", '''
def layer_counts(fn):
    return (1, 3)
''', expect="hidden case 1", gaming=True),
        Wrong("patches torch.equal and answers nonsense", '''
torch.equal = lambda *a, **k: True


def layer_counts(fn):
    return (0, 0)
''', expect="torch.equal was replaced", gaming=True),
    ],
}
