"""Notebook 05's exercise checks, without a notebook: references pass visible and hidden cases; wrong predictions,
schedulers, in-place fixes, hooks and engines fail saying why, and a hidden case is named by its number only."""

from __future__ import annotations

import math

import torch

from torchlens_widgets.course.exercises import n05

NODES = 9
ORDER = ["SumBackward0", "AddBackward0", "MulBackward0", "ExpBackward0", "TanhBackward0", "AddBackward0",
         "MulBackward0", "AccumulateGrad", "AccumulateGrad"]
HIDDEN_ORDER = [*range(101, 131), "nn.Linear + relu + mse_loss", "a node used many times, in a loop",
                "five leaves ready together, one used twice"]
HIDDEN_GATE = ["float64", "x without grad, w transposed", "w without grad"]
HIDDEN_HOOK = [("mul", 0, 0.5), ("add", 1, 3.0), ("add", 0, -0.5), ("addcmul", 2, 2.0), ("constant", 1, 0.0),
               ("mm", 0, 0.5)]
HIDDEN_ENGINE = [*range(1, 25), "relu at exactly 0", "x + x and y * y", "a chain 3000 nodes deep"]


def engine_order(root, tie=max):  # type: ignore[no-untyped-def]
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
    ready, order = [start], []
    while ready:
        fn = tie(ready, key=lambda node: node._sequence_nr())
        ready.remove(fn)
        order.append(fn)
        for child, _ in fn.next_functions:
            if child is not None:
                deps[child] -= 1
                if deps[child] == 0:
                    ready.append(child)
    return order


def gate_fixed(x, w):  # type: ignore[no-untyped-def]
    h = x @ w
    h.mul_(0.5)
    s = torch.sigmoid(h) * 2
    out = h * s
    out.relu_()
    return out


def scale_input_grad(node, slot, factor, in_place=False):  # type: ignore[no-untyped-def]
    def hook(grad_inputs, grad_outputs):  # type: ignore[no-untyped-def]
        grads = list(grad_inputs)
        if grads[slot] is not None:
            if in_place:
                grads[slot].mul_(factor)
            else:
                grads[slot] = grads[slot] * factor
        return tuple(grads)

    return node.register_hook(hook)


def value_class(relu_at_zero=0.0):  # type: ignore[no-untyped-def]
    class Value:
        def __init__(self, data, children=()):  # type: ignore[no-untyped-def]
            self.data, self.grad = float(data), 0.0
            self._children, self._backward = tuple(children), lambda: None

        def _make(self, data, children, local):  # type: ignore[no-untyped-def]
            out = type(self)(data, children)

            def _backward():  # type: ignore[no-untyped-def]
                for child, d in zip(children, local):
                    child.grad += d * out.grad

            out._backward = _backward
            return out

        def __add__(self, other):  # type: ignore[no-untyped-def]
            other = other if isinstance(other, Value) else type(self)(other)
            return self._make(self.data + other.data, (self, other), (1.0, 1.0))

        def __mul__(self, other):  # type: ignore[no-untyped-def]
            other = other if isinstance(other, Value) else type(self)(other)
            return self._make(self.data * other.data, (self, other), (other.data, self.data))

        __radd__ = __add__
        __rmul__ = __mul__

        def tanh(self):  # type: ignore[no-untyped-def]
            t = math.tanh(self.data)
            return self._make(t, (self,), (1.0 - t * t,))

        def relu(self):  # type: ignore[no-untyped-def]
            slope = 1.0 if self.data > 0 else relu_at_zero if self.data == 0 else 0.0
            return self._make(max(self.data, 0.0), (self,), (slope,))

        def backward(self):  # type: ignore[no-untyped-def]
            order, seen, stack = [], set(), [(self, False)]
            while stack:
                v, done = stack.pop()
                if done:
                    order.append(v)
                elif id(v) not in seen:
                    seen.add(id(v))
                    stack.append((v, True))
                    stack.extend((ch, False) for ch in v._children if id(ch) not in seen)
            self.grad = 1.0
            for v in reversed(order):
                v._backward()

    return Value


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("05-predict-graph", lambda c: n05.predict_graph(c, NODES, ORDER)) is None
    assert verdict("05-ready-queue", lambda c: (n05.ready_queue(c, engine_order),
                                                n05.ready_queue(c, engine_order, hidden=HIDDEN_ORDER))) is None
    assert verdict("05-fix-inplace", lambda c: (n05.fix_inplace(c, gate_fixed),
                                                n05.fix_inplace(c, gate_fixed, hidden=HIDDEN_GATE))) is None
    assert verdict("05-node-hook", lambda c: (n05.node_hook(c, scale_input_grad),
                                              n05.node_hook(c, scale_input_grad, hidden=HIDDEN_HOOK))) is None
    value = value_class()
    assert verdict("05-scalar-engine", lambda c: (n05.scalar_engine(c, value),
                                                  n05.scalar_engine(c, value, hidden=HIDDEN_ENGINE))) is None


def test_a_wrong_prediction_says_which_without_the_answer(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("05-predict-graph", lambda c: n05.predict_graph(c, 10, ORDER))
    assert message.startswith("PREDICTED_NODES: got 10, which is not right") and "9" not in message
    message = verdict("05-predict-graph", lambda c: n05.predict_graph(c, 9, ORDER[::-1]))
    assert message.startswith("PREDICTED_ORDER[0]")


def test_the_lowest_sequence_number_first_fails_on_a_visible_graph(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("05-ready-queue", lambda c: n05.ready_queue(c, lambda root: engine_order(root, tie=min)))
    assert message.startswith("expression_a(): order (ops as") and "expected" in message


def test_a_scheduler_fitted_to_the_visible_graphs_fails_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    calls = [0]

    def fitted(root):  # type: ignore[no-untyped-def]
        calls[0] += 1
        order = engine_order(root)
        return order if calls[0] <= 2 else order[::-1]  # right on the two visible graphs only

    assert verdict("05-ready-queue", lambda c: n05.ready_queue(c, fitted)) is None
    message = verdict("05-ready-queue", lambda c: n05.ready_queue(c, fitted, hidden=HIDDEN_ORDER))
    assert message.startswith("hidden case ") and "order (ops as" in message and "seed" not in message
    assert "expected" not in message.split("\nHint")[0]


def test_calling_the_lens_or_backward_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    def lens(root):  # type: ignore[no-untyped-def]
        graph = n05.grad_graph(root)
        return [graph.fns[i] for i in n05.record_backward(root, graph=graph).order]

    message = verdict("05-ready-queue", lambda c: n05.ready_queue(c, lens))
    assert "which this exercise asks you not to use" in message


def test_the_copy_counted_call_is_checked_too(verdict) -> None:  # type: ignore[no-untyped-def]
    calls = [0]

    def two_faced(x, w):  # type: ignore[no-untyped-def]
        calls[0] += 1
        h = x @ w
        if calls[0] % 2:  # the graded call: all out of place
            h = h * 0.5
            return torch.relu(h * (torch.sigmoid(h) * 2))
        h.mul_(0.5)  # the counted call: the two in-place ops the check wants, nothing else
        return h.relu_()

    message = verdict("05-fix-inplace", lambda c: n05.fix_inplace(c, two_faced))
    assert message.startswith("x 4 x 3, w 3 x 5: gate_fixed(x, w), called again to count its copies")


def test_a_clone_and_the_unfixed_gate_fail(verdict) -> None:  # type: ignore[no-untyped-def]
    def cloned(x, w):  # type: ignore[no-untyped-def]
        h = x @ w
        h.mul_(0.5)
        s = torch.sigmoid(h).clone()
        s.mul_(2)
        out = h * s
        return out.relu_()

    assert "aten.clone" in verdict("05-fix-inplace", lambda c: n05.fix_inplace(c, cloned))

    def unfixed(x, w):  # type: ignore[no-untyped-def]
        h = x @ w
        h.mul_(0.5)
        s = torch.sigmoid(h)
        s.mul_(2)
        return (h * s).relu_()

    message = verdict("05-fix-inplace", lambda c: n05.fix_inplace(c, unfixed, hidden=HIDDEN_GATE))
    assert message.startswith("hidden case 1: backward still fails") and "[2, 3]" not in message


def test_a_hook_scaling_in_place_fails_on_the_hidden_add_case(verdict) -> None:  # type: ignore[no-untyped-def]
    def in_place(node, slot, factor):  # type: ignore[no-untyped-def]
        return scale_input_grad(node, slot, factor, in_place=True)

    assert verdict("05-node-hook", lambda c: n05.node_hook(c, in_place)) is None
    message = verdict("05-node-hook", lambda c: n05.node_hook(c, in_place, hidden=HIDDEN_HOOK))
    assert message.startswith("hidden case 2: gradient of leaf") and "Add" not in message.split("\nHint")[0]


def test_a_tensor_hook_and_a_missing_handle_fail(verdict) -> None:  # type: ignore[no-untyped-def]
    def on_leaf(node, slot, factor):  # type: ignore[no-untyped-def]
        return node.next_functions[slot][0].variable.register_hook(lambda g: g * factor)

    assert "the lens finds no hook on MulBackward0" in verdict("05-node-hook", lambda c: n05.node_hook(c, on_leaf))
    message = verdict("05-node-hook", lambda c: n05.node_hook(c, lambda node, slot, factor: None))
    assert "returned NoneType, not a handle with remove()" in message


def test_a_hook_calling_the_checks_helper_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    def borrowed(node, slot, factor):  # type: ignore[no-untyped-def]
        def hook(grad_inputs, grad_outputs):  # type: ignore[no-untyped-def]
            return tuple(n05._mixed(g, factor) if i == slot and g is not None else g for i, g in enumerate(grad_inputs))

        return node.register_hook(hook)

    assert "the check's own helpers" in verdict("05-node-hook", lambda c: n05.node_hook(c, borrowed))


def test_relu_passing_the_gradient_at_zero_fails_on_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    value = value_class(relu_at_zero=1.0)
    assert verdict("05-scalar-engine", lambda c: n05.scalar_engine(c, value)) is None
    message = verdict("05-scalar-engine", lambda c: n05.scalar_engine(c, value, hidden=HIDDEN_ENGINE))
    assert message.startswith("hidden case 3: 1 gradient differs from torch's; the first one has grad 1.0")
    assert "torch says" not in message and " of " not in message.split("\nHint")[0]


def test_an_engine_asking_torch_or_the_checks_runner_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    class Torchy(value_class()):  # type: ignore[misc]
        def backward(self):  # type: ignore[no-untyped-def]
            torch.ones(1) + 1
            super().backward()

    assert "your Value and its backward() ran aten." in verdict("05-scalar-engine", lambda c: n05.scalar_engine(c, Torchy))

    class Borrowing(value_class()):  # type: ignore[misc]
        def backward(self):  # type: ignore[no-untyped-def]
            n05._torch_gradients([1.0], [], lambda leaves, prog, make: [make(v) for v in leaves])
            super().backward()

    assert "the check's own helpers" in verdict("05-scalar-engine", lambda c: n05.scalar_engine(c, Borrowing))


def test_a_wrong_engine_names_the_node_and_both_gradients_on_a_visible_case(verdict) -> None:  # type: ignore[no-untyped-def]
    class Overwrites(value_class()):  # type: ignore[misc]
        def backward(self):  # type: ignore[no-untyped-def]
            super().backward()
            self._children[0].grad = 0.0  # the last node's first input loses its gradient

    message = verdict("05-scalar-engine", lambda c: n05.scalar_engine(c, Overwrites))
    assert message.startswith("worked example: ") and "has grad 0.0, torch says" in message and "differ" in message
