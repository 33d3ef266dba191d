"""Notebook 04's exercise checks, without a notebook: references pass visible and hidden cases; wrong counters,
key rules and FLOP counts fail saying where, and a hidden case is named by its number only."""

from __future__ import annotations

from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchlens_widgets.course.exercises import n04

aten = torch.ops.aten


class OverloadCounter(TorchDispatchMode):
    def __init__(self):  # type: ignore[no-untyped-def]
        super().__init__()
        self.counts = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))


class AtenOnly(OverloadCounter):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func.namespace == "aten":
            self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))


def predicted_key_sets():  # type: ignore[no-untyped-def]
    return {
        "torch.ones(2, 3)": {"CPU", "ADInplaceOrView", "AutogradCPU", "AutocastCPU"},
        "torch.ones(2, 3, device='meta', requires_grad=True)": {"Meta", "ADInplaceOrView", "AutogradMeta"},
        "torch.ones(2, 3).to_sparse()": {"SparseCPU", "ADInplaceOrView", "AutogradCPU", "AutocastCPU"},
        "torch.ones(2, 3, dtype=torch.complex64).conj()": {"CPU", "Conjugate", "ADInplaceOrView", "AutogradCPU",
                                                           "AutocastCPU"},
    }


def predict_keys(t):  # type: ignore[no-untyped-def]
    device = {"cpu": "CPU", "meta": "Meta"}[t.device.type]
    prefix = {torch.strided: "", torch.sparse_coo: "Sparse", torch.sparse_csr: "SparseCsr"}[t.layout]
    keys = {prefix + device}
    if t.is_conj():
        keys.add("Conjugate")
    if t.is_neg():
        keys.add("Negative")
    if not torch.is_inference(t):
        keys |= {"ADInplaceOrView", "Autograd" + device}
    if device == "CPU":
        keys.add("AutocastCPU")
    return keys


def count_flops(fn, *args, decompose=True):  # type: ignore[no-untyped-def]
    products = {aten.mm, aten.addmm, aten.bmm, aten.baddbmm}

    class FlopMode(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            packet = func.overloadpacket
            if decompose and packet not in products and torch._C._dispatch_has_kernel_for_dispatch_key(
                    func.name(), "CompositeImplicitAutograd"):
                with self:
                    return func.decompose(*args, **kwargs)
            out = func(*args, **kwargs)
            if packet in (aten.mm, aten.addmm):
                a, b = (args[0], args[1]) if packet is aten.mm else (args[1], args[2])
                self.total += 2 * a.shape[0] * a.shape[1] * b.shape[1]
            elif packet in (aten.bmm, aten.baddbmm):
                a, b = (args[0], args[1]) if packet is aten.bmm else (args[1], args[2])
                self.total += 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
            return out

    with FlopMode() as mode:
        fn(*args)
    return mode.total


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("04-count-by-overload", lambda c: (
        n04.count_by_overload(c, OverloadCounter),
        n04.count_by_overload(c, OverloadCounter, hidden=list(n04.COUNT_CASES)))) is None
    assert verdict("04-predict-keys", lambda c: (
        n04.predict_keys(c, predicted_key_sets, predict_keys),
        n04.predict_keys(c, predicted_key_sets, predict_keys, hidden=["the gallery"]))) is None
    hidden_flops = ["(4, 5, 6) @ (6, 2), folded into one mm", "einsum bij,bjk->bik", "baddbmm",
                    "a 3-D MLP forward + backward", "linear and matmul under inference_mode"]
    assert verdict("04-flop-counter", lambda c: (n04.flop_counter_exercise(c, count_flops),
                                                 n04.flop_counter_exercise(c, count_flops, hidden=hidden_flops))) is None


def test_a_counter_that_skips_other_namespaces_fails_on_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("04-count-by-overload", lambda c: n04.count_by_overload(c, AtenOnly)) is None
    message = verdict("04-count-by-overload", lambda c: n04.count_by_overload(c, AtenOnly,
                                                                               hidden=["two SGD training steps"]))
    assert message.startswith("hidden case 1: counts") and "SGD" not in message


def test_a_class_that_is_not_a_mode_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("04-count-by-overload", lambda c: n04.count_by_overload(c, Counter))
    assert "subclass of torch.utils._python_dispatch.TorchDispatchMode" in message


def test_a_rule_without_the_inference_case_fails_only_on_the_hidden_gallery(verdict) -> None:  # type: ignore[no-untyped-def]
    def always_autograd(t):  # type: ignore[no-untyped-def]
        return predict_keys(t) | ({"ADInplaceOrView", "Autograd" + {"cpu": "CPU", "meta": "Meta"}[t.device.type]})

    assert verdict("04-predict-keys", lambda c: n04.predict_keys(c, predicted_key_sets, always_autograd)) is None
    message = verdict("04-predict-keys", lambda c: n04.predict_keys(c, predicted_key_sets, always_autograd,
                                                                     hidden=["the gallery"]))
    assert message.startswith("hidden case 1") and "inference" not in message


def test_asking_the_dispatcher_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    def asks(t):  # type: ignore[no-untyped-def]
        return set(str(torch._C._dispatch_keys(t)).split())

    message = verdict("04-predict-keys", lambda c: n04.predict_keys(c, predicted_key_sets, asks))
    assert "which this exercise asks you not to use" in message


def test_flop_counts_without_decomposition_fail_on_hidden_case_numbers(verdict) -> None:  # type: ignore[no-untyped-def]
    def no_decomposition(fn, *args):  # type: ignore[no-untyped-def]
        return count_flops(fn, *args, decompose=False)

    message = verdict("04-flop-counter", lambda c: n04.flop_counter_exercise(
        c, no_decomposition, hidden=["a non-square mm (m, k, n all different)", "linear and matmul under inference_mode"]))
    assert message.startswith("hidden case 2") and "inference_mode" not in message.split("Hint")[0]


def test_a_float_count_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("04-flop-counter", lambda c: n04.flop_counter_exercise(c, lambda fn, *a: float(count_flops(fn, *a))))
    assert "returned float; return a plain int" in message
