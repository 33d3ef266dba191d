"""Notebook 01's exercise checks, without a notebook: the reference answers pass, wrong ones fail saying why,
hidden cases are named by number only, and the checks' own helpers and data are off limits."""

from __future__ import annotations

import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchlens_widgets.course.exercises import n01


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.packets: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func.namespace == "aten":
            self.packets.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def linear_ops(bias, input_grad):  # type: ignore[no-untyped-def]
    lin = torch.nn.Linear(4, 3, bias=bias)
    x = torch.randn(2, 4, requires_grad=input_grad)
    with _Ops() as ops:
        lin(x).sum().backward()
    return set(ops.packets)


def crossover(sizes, seconds):  # type: ignore[no-untyped-def]
    (n0, t0), (n1, t1) = sorted(zip(sizes, seconds))[0], sorted(zip(sizes, seconds))[-1]
    per_element = (t1 - t0) / (n1 - n0)
    if per_element <= 0:
        return None
    return max(1, math.ceil((t0 - per_element * n0) / per_element))


def count_aten_ops(fn):  # type: ignore[no-untyped-def]
    with _Ops() as ops:
        fn()
    return len(ops.packets)


HIDDEN_CROSSOVER = [n01.line(8e-6, 1.3e-12, (10**6, 10, 10**9, 1000)), ([1, 100], [1e-9, 2e-7]),
                    ([1, 10, 100], [2e-6, 2e-6, 2e-6])]


def test_reference_answers_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("01-linear-ops", lambda c: (n01.linear_ops(c, linear_ops),
                                               n01.linear_ops(c, linear_ops, hidden=[(False, True)]))) is None
    assert verdict("01-crossover", lambda c: (n01.crossover(c, crossover),
                                              n01.crossover(c, crossover, hidden=HIDDEN_CROSSOVER))) is None
    assert verdict("01-op-count", lambda c: n01.count_aten_ops(c, count_aten_ops, 7, hidden=list(n01.WORKLOADS))
                   ) is None


def test_a_visible_failure_says_which_call_and_both_values(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("01-crossover", lambda c: n01.crossover(c, lambda s, t: 6666))
    assert message.startswith("crossover (2 µs overhead, 0.3 ns per element, sizes 1 to 10^7): expected 6667, got 6666")


def test_a_hidden_failure_names_the_case_by_number_without_its_expected_value(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("01-crossover", lambda c: n01.crossover(c, lambda s, t: 6667, hidden=HIDDEN_CROSSOVER))
    assert message.startswith("hidden case 1:") and "6154" not in message  # ceil(8e-6 / 1.3e-12) is 6153847
    assert "6153847" not in message and "10**6" not in message


def test_hints_unfold_one_tier_per_attempt(verdict) -> None:  # type: ignore[no-untyped-def]
    first = verdict("01-crossover", lambda c: n01.crossover(c, lambda s, t: 1))
    second = verdict("01-crossover", lambda c: n01.crossover(c, lambda s, t: 1))
    assert f"Hint: {n01.CROSSOVER_HINTS[0]}" in first and n01.CROSSOVER_HINTS[1] not in first
    assert f"Hint: {n01.CROSSOVER_HINTS[0]}\nHint 2: {n01.CROSSOVER_HINTS[1]}" in second


def test_a_wrong_prediction_is_not_given_away(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("01-op-count", lambda c: n01.count_aten_ops(c, count_aten_ops, 5))
    assert "PREDICTED_OPS" in message and "7" not in message


def test_the_checks_own_helpers_are_off_limits(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("01-linear-ops", lambda c: n01.linear_ops(c, lambda b, i: n01._linear_ops(b, i)))
    assert "_linear_ops (one of the check's own helpers)" in message
    message = verdict("01-op-count", lambda c: n01.count_aten_ops(c, n01._aten_count, 7))
    assert "one of the check's own helpers" in message


def test_changing_the_checks_data_or_code_is_found_and_undone(verdict) -> None:  # type: ignore[no-untyped-def]
    workloads, reference = n01.WORKLOADS, n01._crossover.__code__
    n01.WORKLOADS = {name: "None" for name in workloads}  # every workload would then run nothing
    message = verdict("01-op-count", lambda c: n01.count_aten_ops(c, lambda fn: 0, 0))
    assert "n01.WORKLOADS was replaced" in message and n01.WORKLOADS is workloads
    n01._crossover.__code__ = (lambda sizes, seconds: 6666).__code__
    message = verdict("01-crossover", lambda c: n01.crossover(c, lambda s, t: 6666))
    assert "the code or defaults of torchlens_widgets.course.exercises.n01._crossover were changed" in message
    assert n01._crossover.__code__ is reference
    assert type(n01.WORKLOADS).__name__ == "mappingproxy"  # its entries cannot be changed in place
