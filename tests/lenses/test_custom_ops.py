"""The custom-operator lens against torch itself: opcheck's verdicts as lines, the graphs AOT autograd hands a
compiler (an undeclared write deleted, a declared one functionalized), and C++ warnings read from stderr."""

from __future__ import annotations

import torch
from torch import Tensor

from torchlens_widgets.lenses.custom_ops import aot_graphs, native_warnings, opcheck_report


@torch.library.custom_op("tlw_lens_test::fill_undeclared", mutates_args=())
def fill_undeclared(x: Tensor, out: Tensor) -> None:
    out.copy_(x + 1)


@torch.library.custom_op("tlw_lens_test::fill", mutates_args=("out",))
def fill(x: Tensor, out: Tensor) -> None:
    out.copy_(x + 1)


fill_undeclared.register_fake(lambda x, out: None)


@torch.library.custom_op("tlw_lens_test::double", mutates_args=())
def double(x: Tensor) -> Tensor:
    return x * 2


double.register_fake(lambda x: torch.empty_like(x))


def _model(op):  # type: ignore[no-untyped-def]
    def run(x):  # type: ignore[no-untyped-def]
        out = torch.zeros_like(x)
        op(x, out)
        return out * 2
    return run


def test_opcheck_report_keeps_one_line_per_test() -> None:
    x = torch.randn(4)
    good = opcheck_report(double, (x,))
    assert good.passed and good.op == "tlw_lens_test::double" and good.failed == ()
    assert list(good.verdicts) == ["test_schema", "test_autograd_registration", "test_faketensor",
                                   "test_aot_dispatch_dynamic"]
    bad = opcheck_report(fill_undeclared, (x, torch.zeros(4)))
    assert bad.failed == ("test_schema",)
    assert bad["test_schema"] == "RuntimeError: Argument out is not defined as mutable but was mutated"
    assert "1 failed" in bad.summary() and "SUCCESS" in bad.summary()


def test_aot_graphs_show_an_undeclared_write_deleted_and_a_declared_one_functionalized() -> None:
    x = torch.randn(6)
    undeclared = aot_graphs(_model(fill_undeclared), x)
    declared = aot_graphs(_model(fill), x)
    assert undeclared.ops == (("aten::zeros_like", "aten::mul"),) and not undeclared.result.any()
    assert declared.calls("auto_functionalized_v2") and torch.allclose(declared.result, (x + 1) * 2)
    assert "torch.ops.tlw_lens_test.fill.default" in declared.codes[0]
    assert all(line == line.rstrip() for line in declared.codes[0].splitlines())


def test_native_warnings_reads_what_cpp_prints_on_every_call() -> None:
    @torch.library.custom_op("tlw_lens_test::square", mutates_args=())
    def square(x: Tensor) -> Tensor:
        return x * x

    found = native_warnings(torch.vmap(square), torch.randn(3, 2), calls=2)
    assert len(found) == 2 and all("batching rule for tlw_lens_test::square" in w for w in found)
    assert all(w.startswith("Warning: ") for w in found)
    assert native_warnings(lambda: None) == ()
