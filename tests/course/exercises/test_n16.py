"""Notebook 16's exercise checks, without a notebook: references pass visible and hidden cases; a function that
shows Dynamo another program, or hides its work in an opaque op, fails; compiles start from a fresh Dynamo (the
settings and stance an answer switched do not count); a wrong prediction leaves no expected value in the
traceback; a hidden case is named by its number only."""

from __future__ import annotations

import torch
import torch._dynamo

from torchlens_widgets.course import CheckFailed, check
from torchlens_widgets.course.exercises import n16

PREDICTED = {"new random values": "none", "x.double()": "dtype", "a 5x3 x": "size",
             "x transposed from a 3x4 tensor": "stride", "x.requires_grad_()": "requires_grad", "scale = 3.0": "value",
             'mode = "max"': "value"}
HIDDEN_CENTER = [((64,), torch.float32, 0.0, 0.1), ((8, 5), torch.float64, 4.0, 3.0)]


def center(x):  # type: ignore[no-untyped-def]
    y = x - x.mean()
    return y.clamp(-3, 3) * 2


def prepare(x):  # type: ignore[no-untyped-def]
    torch._dynamo.mark_dynamic(x, 0)
    return x


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("16-no-breaks", lambda c: (n16.no_breaks(c, center),
                                              n16.no_breaks(c, center, hidden=HIDDEN_CENTER))) is None
    assert verdict("16-no-recompiles", lambda c: (n16.no_recompiles(c, prepare),
                                                  n16.no_recompiles(c, prepare, hidden=[(3, 64, 5, 100)]))) is None
    assert verdict("16-predict-guard", lambda c: (n16.predict_guard(c, PREDICTED),
                                                  n16.predict_guard(c, PREDICTED, hidden=[(2, 5)]))) is None


def test_the_hidden_inputs_are_the_old_test_cells(verdict) -> None:  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(16)
    torch.randn(1000, generator=g)
    narrow, shifted = n16._center_inputs(HIDDEN_CENTER)
    assert torch.equal(narrow, torch.randn(64, generator=g) * 0.1)
    assert torch.equal(shifted, (torch.randn(8, 5, generator=g, dtype=torch.float64) + 4) * 3)


def test_a_function_that_shows_dynamo_another_program_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    def two_faced(x):  # type: ignore[no-untyped-def]
        if torch.compiler.is_compiling():
            return (x - x.mean()) * 2  # no clamp where it is compiled
        return center(x)

    message = verdict("16-no-breaks", lambda c: n16.no_breaks(c, two_faced))
    assert message.startswith("center(a spread-out vector), compiled (what the compiled code returned)")


def test_work_hidden_in_an_opaque_custom_op_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    @torch.library.custom_op("tlw_test16::center", mutates_args=())
    def opaque(x: torch.Tensor) -> torch.Tensor:
        m = x.mean().item()
        y = x - m
        if y.abs().max() > 3:
            y = y.clamp(-3, 3)
        return y * 2

    opaque.register_fake(lambda x: torch.empty_like(x))

    def hides(x):  # type: ignore[no-untyped-def]
        return opaque(x) * 1 + 0 - 0

    message = verdict("16-no-breaks", lambda c: n16.no_breaks(c, hides))
    assert "which Dynamo keeps opaque" in message


def test_a_break_fails_and_a_hidden_failure_is_numbered(verdict) -> None:  # type: ignore[no-untyped-def]
    def keeps_item(x):  # type: ignore[no-untyped-def]
        return (x - x.mean().item()).clamp(-3, 3) * 2

    message = verdict("16-no-breaks", lambda c: n16.no_breaks(c, keeps_item))
    assert message.startswith("(graphs, breaks) compiling center(a spread-out vector)")

    def small_only(x):  # type: ignore[no-untyped-def]
        if x.numel() == 1000:
            return center(x)
        return x * 2

    assert verdict("16-no-breaks", lambda c: n16.no_breaks(c, small_only)) is None
    message = verdict("16-no-breaks", lambda c: n16.no_breaks(c, small_only, hidden=HIDDEN_CENTER))
    assert message.startswith("hidden case 1: the values are not right") and "64" not in message


def test_fresh_dynamo_puts_settings_and_stance_back_for_the_block() -> None:
    config = torch._dynamo.config
    config.assume_static_by_default = False
    config.reorderable_logging_functions.add(print)
    try:
        with torch.compiler.set_stance("force_eager"):
            with n16.fresh_dynamo():
                assert config.assume_static_by_default is True and print not in config.reorderable_logging_functions
                assert torch._dynamo.eval_frame._stance.stance == "default"
            assert torch._dynamo.eval_frame._stance.stance == "force_eager"
        assert config.assume_static_by_default is False and print in config.reorderable_logging_functions
    finally:
        config.assume_static_by_default = True
        config.reorderable_logging_functions.discard(print)


def test_prepare_that_marks_only_large_batches_fails_on_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    def large_only(x):  # type: ignore[no-untyped-def]
        if x.shape[0] > 5:
            torch._dynamo.mark_dynamic(x, 0)
        return x

    assert verdict("16-no-recompiles", lambda c: n16.no_recompiles(c, large_only)) is None
    message = verdict("16-no-recompiles", lambda c: n16.no_recompiles(c, large_only, hidden=[(3, 64, 5, 100)]))
    assert message.startswith("(recompiles, graphs) over hidden case 1") and "64" not in message.split("Hint")[0]


def test_prepare_must_return_the_batch_unchanged(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("16-no-recompiles", lambda c: n16.no_recompiles(c, lambda x: prepare(x.clone()).mul_(1.5)))
    assert message.startswith("prepare(x) for a 6x4 batch (the batch itself, unchanged)")


def test_a_forced_eager_stance_does_not_decide_the_truth(verdict) -> None:  # type: ignore[no-untyped-def]
    nothing = dict.fromkeys(PREDICTED, "none")
    with torch.compiler.set_stance("force_eager"):  # left on around the check: tampering, put back
        message = verdict("16-predict-guard", lambda c: n16.predict_guard(c, nothing))
    assert "torch.compiler.set_stance('force_eager') was left on" in message, message
    assert torch._dynamo.eval_frame._stance.stance == "default"


def test_a_wrong_prediction_is_numbered_when_hidden_and_not_revealed(verdict) -> None:  # type: ignore[no-untyped-def]
    wrong = {**PREDICTED, "a 5x3 x": "dtype"}
    message = verdict("16-predict-guard", lambda c: n16.predict_guard(c, wrong, hidden=[(2, 5)]))
    assert message.startswith("hidden case 1: your prediction for a 5x3 x: got 'dtype', which is not right")
    assert "'size'" not in message


def test_a_dict_of_the_learners_own_class_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    class Peek(dict):
        def __getitem__(self, key):  # type: ignore[no-untyped-def]
            return "none"

    message = verdict("16-predict-guard", lambda c: n16.predict_guard(c, Peek(PREDICTED)))
    assert message.startswith("PREDICT_FAILED_GUARD should be the dict above, filled in (a plain dict), got Peek")


def test_the_traceback_of_a_wrong_prediction_holds_no_expected_value() -> None:
    try:
        with check("16-predict-guard", points=2) as c:
            n16.predict_guard(c, {**PREDICTED, "scale = 3.0": "none"})
    except CheckFailed as failure:
        tb = failure.__traceback__
    else:
        raise AssertionError("the wrong prediction passed")
    found = []
    while tb is not None:
        found += [name for name, value in tb.tb_frame.f_locals.items() if value == PREDICTED]
        tb = tb.tb_next
    assert not found


def make_counting_backend():  # type: ignore[no-untyped-def]
    counts = []

    def backend(gm, example_inputs):  # type: ignore[no-untyped-def]
        counts.append(sum(1 for node in gm.graph.nodes if node.op.startswith("call_")))
        return gm.forward

    return backend, counts


def test_the_counting_backend_passes_and_a_run_time_counter_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("16-count-backend", lambda c: (
        n16.count_backend(c, make_counting_backend),
        n16.count_backend(c, make_counting_backend, hidden=["methods", "three_parts", "branchy"]))) is None

    def per_run():  # type: ignore[no-untyped-def]
        counts = []

        def backend(gm, example_inputs):  # type: ignore[no-untyped-def]
            def run(*args):  # type: ignore[no-untyped-def]
                counts.append(len(gm.graph.nodes))
                return gm.forward(*args)
            return run

        return backend, counts

    message = verdict("16-count-backend", lambda c: n16.count_backend(c, per_run))
    assert message.startswith("counts after compiling gelu_ish")
    hidden = verdict("16-count-backend", lambda c: n16.count_backend(c, per_run, hidden=["methods"]))
    assert hidden.startswith("hidden case 1") and "methods" not in hidden
