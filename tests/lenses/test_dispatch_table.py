"""The dispatch-table lens against the dispatcher itself: the table's entries by role, and the entry
`choose` predicts is the one that actually runs (kernels that record themselves), under inference mode,
autocast and meta inputs too; bad input gets advice."""

from __future__ import annotations

import pytest
import torch

from torchlens_widgets.lenses.dispatch_table import DispatchTableError, choose, dispatch_table

RAN: list[str] = []


@pytest.fixture(scope="module")
def recorded_op():
    """tlw_dtable::probe with kernels for CPU, Meta and AutogradCPU that record which one ran."""
    lib = torch.library.Library("tlw_dtable", "DEF")
    lib.define("probe(Tensor x) -> Tensor")

    def cpu(x):
        RAN.append("CPU")
        return x.clone()

    def meta(x):
        RAN.append("Meta")
        return torch.empty_like(x)

    def autograd(x):
        RAN.append("AutogradCPU")
        with torch._C._AutoDispatchBelowAutograd():
            return torch.ops.tlw_dtable.probe.default(x)

    lib.impl("probe", cpu, "CPU")
    lib.impl("probe", meta, "Meta")
    lib.impl("probe", autograd, "AutogradCPU")
    yield torch.ops.tlw_dtable.probe.default
    lib._destroy()


def _ran(op, *args) -> str:
    RAN.clear()
    op(*args)
    return RAN[0]


def test_add_has_a_cpu_kernel_an_autograd_kernel_and_fallthroughs() -> None:
    table = dispatch_table(torch.ops.aten.add.Tensor)
    assert table.op == "aten::add.Tensor" and table.schema.startswith("aten::add.Tensor(Tensor self")
    assert table.entry("CPU").role == "kernel" and table.entry("CPU").source.startswith("RegisterCPU")
    assert table.entry("AutogradCPU").role == "autograd"
    assert table.entry("ADInplaceOrView").role == "fallthrough"
    assert table.entry("AutocastCPU").role == "fallthrough"
    assert "CUDA" in table.keys_with("composite")  # a default backend kernel covers backends without their own
    assert dispatch_table("aten::add.Tensor") == table


@pytest.mark.parametrize("where", ["plain", "inference", "meta"])
def test_the_predicted_entry_is_the_one_that_runs(recorded_op, where: str) -> None:
    x = torch.ones(3, device="meta" if where == "meta" else "cpu")
    if where == "inference":
        with torch.inference_mode():
            choice = choose(recorded_op, x)
            assert _ran(recorded_op, x) == choice.chosen.key == "CPU"
        assert "AutogradCPU" in choice.excluded
        assert [s.outcome.split(":")[0] for s in choice.steps][-1] == "runs"
        return
    choice = choose(recorded_op, x)
    expected = "AutogradCPU" if where == "plain" else None
    if where == "meta":  # no autograd kernel for Meta: the autograd fallback runs, then the Meta kernel
        assert choice.chosen.key == "AutogradMeta" and choice.chosen.role == "fallback"
        assert _ran(recorded_op, x) == "Meta"
    else:
        assert _ran(recorded_op, x) == choice.chosen.key == expected


def test_autocast_turns_its_key_on_and_mm_lands_in_the_autocast_kernel() -> None:
    a = torch.ones(2, 2)
    off = choose(torch.ops.aten.mm.default, a, a)
    assert off.chosen.key == "AutogradCPU" and "AutocastCPU" in off.excluded
    with torch.autocast("cpu"):
        on = choose(torch.ops.aten.mm.default, a, a)
        add = choose(torch.ops.aten.add.Tensor, a, a)
    assert on.chosen.key == "AutocastCPU" and on.chosen.role == "kernel"
    assert add.steps[0].key == "AutocastCPU" and add.steps[0].outcome.startswith("skipped")
    assert "runs: autograd kernel" in add.why()


@pytest.mark.parametrize(("op", "args", "match"), [
    (torch.ops.aten.add, (torch.ones(1),), "several overloads"),
    (print, (torch.ones(1),), "operator overload"),
    ("tlw_nowhere::nothing", (torch.ones(1),), "no operator"),
    (torch.ops.aten.add.Tensor, (1, 2), "at least one tensor"),
])
def test_bad_input_gets_advice(op, args, match: str) -> None:
    with pytest.raises(DispatchTableError, match=match):
        choose(op, *args)
