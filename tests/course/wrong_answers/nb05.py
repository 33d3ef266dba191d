"""Wrong answers for notebook 05 (autograd runtime): each must fail its check for the reason named in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong

_RIGHT_ORDER = '''["SumBackward0", "AddBackward0", "MulBackward0", "ExpBackward0", "TanhBackward0",
                   "AddBackward0", "MulBackward0", "AccumulateGrad", "AccumulateGrad"]'''

# the dependency-counting pass of a correct engine_order, for wrong answers that get only the queue wrong
_COUNT_EDGES = '''
def _edges_into(root):
    start = root.grad_fn
    deps, stack = {start: 0}, [start]
    while stack:
        fn = stack.pop()
        for child, _ in fn.next_functions:
            if child is None:
                continue
            if child not in deps:
                deps[child] = 0
                stack.append(child)
            deps[child] += 1
    return deps
'''

# a correct Value except for backward(), which each wrong answer supplies
_VALUE_BASE = '''
import math


class Value:
    def __init__(self, data, children=()):
        self.data = float(data)
        self.grad = 0.0
        self._children = tuple(children)
        self._backward = lambda: None

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other))

        def _backward():
            self.grad += out.grad
            other.grad += out.grad

        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other))

        def _backward():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad

        out._backward = _backward
        return out

    def __radd__(self, other):
        return self + other

    def __rmul__(self, other):
        return self * other

    def tanh(self):
        t = math.tanh(self.data)
        out = Value(t, (self,))

        def _backward():
            self.grad += (1.0 - t * t) * out.grad

        out._backward = _backward
        return out

    def relu(self):
        out = Value(self.data if self.data > 0 else 0.0, (self,))

        def _backward():
            self.grad += (1.0 if self.data > 0 else 0.0) * out.grad

        out._backward = _backward
        return out
'''

_TOPO_BACKWARD = '''
    def backward(self):
        order, seen, stack = [], set(), [(self, False)]
        while stack:
            v, done = stack.pop()
            if done:
                order.append(v)
                continue
            if id(v) in seen:
                continue
            seen.add(id(v))
            stack.append((v, True))
            stack.extend((ch, False) for ch in v._children if id(ch) not in seen)
        self.grad = 1.0
        for v in reversed(order):
            v._backward()
'''


def _value_with(backward: str, replace: tuple[str, str] | None = None) -> str:
    base = _VALUE_BASE if replace is None else _VALUE_BASE.replace(*replace)
    if replace is not None:
        assert base != _VALUE_BASE, replace
    return base + backward


WRONG = {
    "05-predict-graph": [
        Wrong("counts the constant as a node", f"PREDICTED_NODES = 10\nPREDICTED_ORDER = {_RIGHT_ORDER}\n",
              expect="PREDICTED_NODES"),
        Wrong("one AccumulateGrad per use of a leaf", f"PREDICTED_NODES = 11\nPREDICTED_ORDER = {_RIGHT_ORDER}\n",
              expect="PREDICTED_NODES"),
        Wrong("the order of the forward pass", '''
PREDICTED_NODES = 9
PREDICTED_ORDER = ["AccumulateGrad", "AccumulateGrad", "MulBackward0", "AddBackward0", "TanhBackward0",
                   "ExpBackward0", "MulBackward0", "AddBackward0", "SumBackward0"]
''', expect="PREDICTED_ORDER"),
        Wrong("breadth-first order", '''
PREDICTED_NODES = 9
PREDICTED_ORDER = ["SumBackward0", "AddBackward0", "TanhBackward0", "MulBackward0", "AddBackward0",
                   "ExpBackward0", "AccumulateGrad", "MulBackward0", "AccumulateGrad"]
''', expect="PREDICTED_ORDER"),
        Wrong("leaves at the very end, ops in a wrong order", '''
PREDICTED_NODES = 9
PREDICTED_ORDER = ["SumBackward0", "AddBackward0", "TanhBackward0", "AddBackward0", "MulBackward0",
                   "ExpBackward0", "MulBackward0", "AccumulateGrad", "AccumulateGrad"]
''', expect="PREDICTED_ORDER"),
        Wrong("rebinds expression_a and record_backward to fit a wrong prediction", '''
def expression_a():
    p = torch.tensor([0.5], requires_grad=True)
    return (p * 2).sum()


class _Fake:
    order = [0, 1, 2]


record_backward = lambda root, graph=None: _Fake()
PREDICTED_NODES = 3
PREDICTED_ORDER = ["SumBackward0", "MulBackward0", "AccumulateGrad"]
''', expect="PREDICTED_NODES", gaming=True),
        Wrong("a list that equals everything", '''
class _Yes(list):
    def __eq__(self, other):
        return True


class _One(int):
    def __eq__(self, other):
        return True


PREDICTED_NODES = _One(1)
PREDICTED_ORDER = _Yes()
''', expect="PREDICTED_NODES", gaming=True),
    ],
    "05-ready-queue": [
        Wrong("breadth-first, each node once", '''
def engine_order(root):
    order, queue, seen = [], [root.grad_fn], {root.grad_fn}
    while queue:
        fn = queue.pop(0)
        order.append(fn)
        for child, _ in fn.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                queue.append(child)
    return order
''', expect="order (ops as"),
        Wrong("reverse depth-first post-order (topological, wrong tie-break)", '''
def engine_order(root):
    post, seen, stack = [], set(), [(root.grad_fn, False)]
    while stack:
        fn, done = stack.pop()
        if done:
            post.append(fn)
            continue
        if fn in seen:
            continue
        seen.add(fn)
        stack.append((fn, True))
        for child, _ in fn.next_functions:
            if child is not None and child not in seen:
                stack.append((child, False))
    return post[::-1]
''', expect="order (ops as"),
        Wrong("no dependency counts: ready when first reached", '''
def engine_order(root):
    ready, order, seen = [root.grad_fn], [], {root.grad_fn}
    while ready:
        fn = max(ready, key=lambda n: n._sequence_nr())
        ready.remove(fn)
        order.append(fn)
        for child, _ in fn.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                ready.append(child)
    return order
''', expect="order (ops as"),
        Wrong("lowest sequence number first", _COUNT_EDGES + '''
def engine_order(root):
    deps = _edges_into(root)
    ready, order = [root.grad_fn], []
    while ready:
        fn = min(ready, key=lambda n: n._sequence_nr())
        ready.remove(fn)
        order.append(fn)
        for child, _ in fn.next_functions:
            if child is not None:
                deps[child] -= 1
                if deps[child] == 0:
                    ready.append(child)
    return order
''', expect="order (ops as"),
        Wrong("ops by sequence number, then all leaves", _COUNT_EDGES + '''
def engine_order(root):
    nodes = list(_edges_into(root))
    ops = [n for n in nodes if type(n).__name__ != "AccumulateGrad"]
    leaves = [n for n in nodes if type(n).__name__ == "AccumulateGrad"]
    return sorted(ops, key=lambda n: -n._sequence_nr()) + leaves
''', expect="order (ops as"),
        Wrong("returns names instead of nodes", _COUNT_EDGES + '''
def engine_order(root):
    deps = _edges_into(root)
    ready, order = [root.grad_fn], []
    while ready:
        fn = max(ready, key=lambda n: n._sequence_nr())
        ready.remove(fn)
        order.append(type(fn).__name__)
        for child, _ in fn.next_functions:
            if child is not None:
                deps[child] -= 1
                if deps[child] == 0:
                    ready.append(child)
    return order
''', expect="not a node of this graph"),
        Wrong("runs backward with the lens's recorder", '''
from torchlens_widgets.lenses.autograd import grad_graph as _gg, record_backward as _rb


def engine_order(root):
    g = _gg(root)
    return [g.fns[i] for i in _rb(root, graph=g).order]
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("runs backward with hooks of its own", '''
def engine_order(root):
    seen, order, stack, handles = set(), [], [root.grad_fn], []
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        handles.append(fn.register_prehook(lambda g, fn=fn: order.append(fn)))
        stack += [ch for ch, _ in fn.next_functions if ch is not None]
    root.backward(retain_graph=True)
    for h in handles:
        h.remove()
    return order
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("calls the lens through the check's module", '''
from torchlens_widgets.course.exercises import n05 as _n05


def engine_order(root):
    g = _n05.grad_graph(root)
    return [g.fns[i] for i in _n05.record_backward(root, graph=g).order]
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("memoises its first answer", _COUNT_EDGES + '''
_MEMO = []


def engine_order(root):
    if _MEMO:
        return _MEMO[0]
    deps = _edges_into(root)
    ready, order = [root.grad_fn], []
    while ready:
        fn = max(ready, key=lambda n: n._sequence_nr())
        ready.remove(fn)
        order.append(fn)
        for child, _ in fn.next_functions:
            if child is not None:
                deps[child] -= 1
                if deps[child] == 0:
                    ready.append(child)
    _MEMO.append(order)
    return order
''', expect="not a node of this graph", gaming=True),
    ],
    "05-fix-inplace": [
        Wrong("leaves gate unchanged", '''
def gate_fixed(x, w):
    h = x @ w
    h.mul_(0.5)
    s = torch.sigmoid(h)
    s.mul_(2)
    out = h * s
    out.relu_()
    return out
''', expect="backward still fails"),
        Wrong("fixes with a clone", '''
def gate_fixed(x, w):
    h = x @ w
    h.mul_(0.5)
    s = torch.sigmoid(h).clone()
    s.mul_(2)
    out = h * s
    out.relu_()
    return out
''', expect="aten.clone"),
        Wrong("everything out of place", '''
def gate_fixed(x, w):
    h = (x @ w) * 0.5
    s = torch.sigmoid(h) * 2
    return torch.relu(h * s)
''', expect="the in-place ops gate_fixed runs"),
        Wrong("fixes the wrong write", '''
def gate_fixed(x, w):
    h = (x @ w) * 0.5
    s = torch.sigmoid(h)
    s.mul_(2)
    out = h * s
    out.relu_()
    return out
''', expect="backward still fails"),
        Wrong("hides the write with .data", '''
def gate_fixed(x, w):
    h = x @ w
    h.mul_(0.5)
    s = torch.sigmoid(h)
    s.data.mul_(2)
    out = h * s
    out.relu_()
    return out
''', expect="the gradient for"),
        Wrong("copies through NumPy", '''
def gate_fixed(x, w):
    h = x @ w
    h.mul_(0.5)
    s = torch.sigmoid(h)
    s = s + torch.from_numpy(s.detach().numpy() * 0)
    s.mul_(2)
    out = h * s
    out.relu_()
    return out
''', expect="stepped outside", gaming=True),
        Wrong("clones with the dispatch modes popped", '''
from torch.utils._python_dispatch import _disable_current_modes


def gate_fixed(x, w):
    h = x @ w
    h.mul_(0.5)
    s = torch.sigmoid(h)
    with _disable_current_modes():
        s = s.clone()
    s.mul_(2)
    out = h * s
    out.relu_()
    return out
''', expect="stepped outside", gaming=True),
        Wrong("returns the check's reference", '''
from torchlens_widgets.course.exercises import n05 as _n05


def gate_fixed(x, w):
    return _n05._gate_expected(x, w)
''', expect="the check's own helpers", gaming=True),
        Wrong("out of place when graded, the two in-place ops when its copies are counted", '''
_CALLS = [0]


def gate_fixed(x, w):
    _CALLS[0] += 1
    h = x @ w
    if _CALLS[0] % 2:
        h = h * 0.5
        return torch.relu(h * (torch.sigmoid(h) * 2))
    h.mul_(0.5)
    return h.relu_()
''', expect="gate_fixed(x, w), called again to count its copies", gaming=True),
        Wrong("leaves a mode entered that hides clones", '''
from torch.utils._python_dispatch import TorchDispatchMode


class _Quiet(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


_Quiet().__enter__()


def gate_fixed(x, w):
    h = x @ w
    h.mul_(0.5)
    s = torch.sigmoid(h).clone()
    s.mul_(2)
    out = h * s
    out.relu_()
    return out
''', expect="a mode was left entered", gaming=True),
    ],
    "05-node-hook": [
        Wrong("a pre-hook that scales every incoming gradient", '''
def scale_input_grad(node, slot, factor):
    return node.register_prehook(lambda grad_outputs: tuple(g * factor for g in grad_outputs))
''', expect="gradient of leaf"),
        Wrong("scales every slot", '''
def scale_input_grad(node, slot, factor):
    def hook(grad_inputs, grad_outputs):
        return tuple(None if g is None else g * factor for g in grad_inputs)
    return node.register_hook(hook)
''', expect="gradient of leaf"),
        Wrong("a tensor hook on the leaf", '''
def scale_input_grad(node, slot, factor):
    leaf = node.next_functions[slot][0].variable
    return leaf.register_hook(lambda g: g * factor)
''', expect="tensor hook"),
        Wrong("forgets to return the handle", '''
def scale_input_grad(node, slot, factor):
    def hook(grad_inputs, grad_outputs):
        grads = list(grad_inputs)
        if grads[slot] is not None:
            grads[slot] = grads[slot] * factor
        return tuple(grads)
    node.register_hook(hook)
''', expect="not a handle"),
        Wrong("scales in place (Add shares one tensor between edges)", '''
def scale_input_grad(node, slot, factor):
    def hook(grad_inputs, grad_outputs):
        if grad_inputs[slot] is not None:
            grad_inputs[slot].mul_(factor)
    return node.register_hook(hook)
''', expect="hidden case 2: gradient of leaf"),
        Wrong("crashes on a slot that needs no gradient", '''
def scale_input_grad(node, slot, factor):
    def hook(grad_inputs, grad_outputs):
        grads = list(grad_inputs)
        grads[slot] = grads[slot] * factor
        return tuple(grads)
    return node.register_hook(hook)
''', expect="TypeError"),
        Wrong("a hook that uses the check's helper", '''
from torchlens_widgets.course.exercises import n05 as _n05


def scale_input_grad(node, slot, factor):
    def hook(grad_inputs, grad_outputs):
        return tuple(_n05._mixed(g, factor) if (i == slot and g is not None) else g for i, g in enumerate(grad_inputs))
    return node.register_hook(hook)
''', expect="the check's own helpers", gaming=True),
        Wrong("rebinds the lens to report a hook", '''
class _H:
    def remove(self):
        pass


class _Node:
    hooks_pre, hooks_post, name = 1, 1, "MulBackward0"


class _Graph:
    def __init__(self, fns):
        self.fns, self.nodes = fns, [_Node() for _ in fns]


def grad_graph(root, names=None):
    fns, stack = [], [root.grad_fn]
    while stack:
        fn = stack.pop()
        fns.append(fn)
        stack += [f for f, _ in fn.next_functions if f is not None]
    return _Graph(fns)


def scale_input_grad(node, slot, factor):
    return _H()
''', expect="the lens finds no hook", gaming=True),
        Wrong("patches torch.allclose", '''
torch.allclose = lambda *a, **k: True


def scale_input_grad(node, slot, factor):
    return node.register_hook(lambda grad_inputs, grad_outputs: None)
''', expect="torch.allclose was replaced", gaming=True),
    ],
    "05-scalar-engine": [
        Wrong("overwrites .grad instead of adding", _value_with(_TOPO_BACKWARD, (
            "            self.grad += other.data * out.grad\n            other.grad += self.data * out.grad",
            "            self.grad = other.data * out.grad\n            other.grad = self.data * out.grad")),
            expect="has grad"),
        Wrong("recursive topological sort", _value_with('''
    def backward(self):
        order, seen = [], set()

        def visit(v):
            if id(v) not in seen:
                seen.add(id(v))
                for ch in v._children:
                    visit(ch)
                order.append(v)

        visit(self)
        self.grad = 1.0
        for v in reversed(order):
            v._backward()
'''), expect="RecursionError"),
        Wrong("breadth-first order", _value_with('''
    def backward(self):
        order, seen, queue = [], {id(self)}, [self]
        while queue:
            v = queue.pop(0)
            order.append(v)
            for ch in v._children:
                if id(ch) not in seen:
                    seen.add(id(ch))
                    queue.append(ch)
        self.grad = 1.0
        for v in order:
            v._backward()
'''), expect="has grad"),
        Wrong("relu passes the gradient at 0", _value_with(_TOPO_BACKWARD, (
            "self.grad += (1.0 if self.data > 0 else 0.0) * out.grad",
            "self.grad += (1.0 if self.data >= 0 else 0.0) * out.grad")),
            expect="hidden case 3: 1 gradient differs from torch's; the first one has grad"),
        Wrong("tanh derivative from the input", _value_with(_TOPO_BACKWARD, (
            "self.grad += (1.0 - t * t) * out.grad", "self.grad += (1.0 - self.data * self.data) * out.grad")),
            expect="has grad"),
        Wrong("backward by recursion without an order", _value_with('''
    def backward(self):
        self.grad = 1.0

        def run(v):
            v._backward()
            for ch in v._children:
                run(ch)

        run(self)
'''), expect="has grad"),
        Wrong("asks torch's autograd for the answer", _VALUE_BASE + '''
    def backward(self):
        import torch
        memo = {}

        def as_tensor(v):
            # rebuild v's graph in torch; only + and * and their constants are handled, enough to try
            if id(v) not in memo:
                if not v._children:
                    memo[id(v)] = torch.tensor(v.data, dtype=torch.float64, requires_grad=True)
                else:
                    kids = [as_tensor(ch) for ch in v._children]
                    memo[id(v)] = kids[0] + kids[1] if len(kids) == 2 else kids[0].tanh()
            return memo[id(v)]

        out = as_tensor(self)
        leaves = {}
        stack = [self]
        while stack:
            v = stack.pop()
            if not v._children:
                leaves[id(v)] = v
            stack.extend(v._children)
        grads = torch.autograd.grad(out, [memo[k] for k in leaves], allow_unused=True)
        for v, g in zip(leaves.values(), grads):
            v.grad = 0.0 if g is None else g.item()
        self.grad = 1.0
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("calls the check's torch runner", _VALUE_BASE + '''
    def backward(self):
        from torchlens_widgets.course.exercises import n05 as _n05

        self.grad = 1.0
        _n05._torch_gradients([1.0], [], lambda leaves, prog, make: [make(v) for v in leaves])
''', expect="the check's own helpers", gaming=True),
    ],
}
