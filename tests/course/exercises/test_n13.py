"""Notebook 13's exercise checks, without a notebook: references pass visible and hidden cases; wrong byte counts,
functions that do not fuse or that show Dynamo another program, and predictions that are not plain fail saying
why; a hidden case is named by its number only."""

from __future__ import annotations

import torch

from torchlens_widgets.course.exercises import n13

HIDDEN_BYTES = [("eager", 3, 5, "float64"), ("eager", 1, 7, "float16"), ("eager", 9, 1, "float32"),
                ("fused", 5, 3, "float16")]
HIDDEN_STANDARDISE = [(1, (5, 33), ()), (2, (4, 7), (0, 3)), (3, (1, 9), (0,))]
HIDDEN_KERNELS = [("rms_scaled", (48, 80)), ("sorted_doubled", (48, 80)), ("transposed_copy", (48, 80))]
RIGHT = {"shift_scale_relu": 1, "rms_scaled": 1, "sorted_doubled": 2, "transposed_copy": 1, "two_matmuls": 2}
HIDDEN_CROSSING = [(3, 5, "float64"), (1, 7, "float16")]


def crossing(rows, cols, itemsize):  # type: ignore[no-untyped-def]
    return {"h": rows * cols * itemsize, "r": rows * itemsize}


def eager_bytes(rows, cols, itemsize):  # type: ignore[no-untyped-def]
    return 7 * rows * cols * itemsize + cols * itemsize


def fused_bytes(rows, cols, itemsize):  # type: ignore[no-untyped-def]
    return 3 * rows * cols * itemsize + cols * itemsize


def standardise_fusable(x):  # type: ignore[no-untyped-def]
    m = x.mean(dim=1, keepdim=True)
    c = x - m
    s = (c * c).mean(dim=1, keepdim=True).sqrt()
    return c / torch.where(s == 0, torch.ones_like(s), s)


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("13-bytes-moved", lambda c: (
        n13.bytes_moved(c, eager_bytes, fused_bytes),
        n13.bytes_moved(c, eager_bytes, fused_bytes, hidden=HIDDEN_BYTES))) is None
    assert verdict("13-fuse-standardise", lambda c: (
        n13.fuse_standardise(c, standardise_fusable),
        n13.fuse_standardise(c, standardise_fusable, hidden=HIDDEN_STANDARDISE))) is None
    assert verdict("13-predict-kernels", lambda c: (
        n13.predict_kernels(c, dict(RIGHT)), n13.predict_kernels(c, dict(RIGHT), hidden=HIDDEN_KERNELS))) is None
    assert verdict("13-break-crossing", lambda c: (
        n13.break_crossing(c, crossing), n13.break_crossing(c, crossing, hidden=HIDDEN_CROSSING))) is None


def test_four_byte_floats_fail_on_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    def four_bytes(rows, cols, itemsize):  # type: ignore[no-untyped-def]
        return 7 * rows * cols * 4 + cols * 4

    assert verdict("13-bytes-moved", lambda c: n13.bytes_moved(c, four_bytes, fused_bytes)) is None
    message = verdict("13-bytes-moved", lambda c: n13.bytes_moved(c, four_bytes, fused_bytes, hidden=HIDDEN_BYTES))
    assert message.startswith("hidden case 1: eager_bytes") and "880" not in message and "(3, 5" not in message


def test_asking_the_lens_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    def asks(rows, cols, itemsize):  # type: ignore[no-untyped-def]
        return n13.eager_traffic(n13._gated, *n13._gated_inputs(rows, cols, torch.float32)).bytes_moved

    message = verdict("13-bytes-moved", lambda c: n13.bytes_moved(c, asks, fused_bytes))
    assert "eager_bytes called" in message


def test_a_function_right_only_while_compiled_for_the_visible_input_fails_on_a_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    def shows_dynamo_less(x):  # type: ignore[no-untyped-def]
        m = x.mean(dim=1, keepdim=True)
        c = x - m
        s = (c * c).mean(dim=1, keepdim=True).sqrt()
        if torch.compiler.is_compiling() and x.shape[0] != 6:
            return c / s
        return c / torch.where(s == 0, torch.ones_like(s), s)

    message = verdict("13-fuse-standardise", lambda c: n13.fuse_standardise(c, shows_dynamo_less,
                                                                           hidden=HIDDEN_STANDARDISE))
    assert message.startswith("hidden case 2: standardise_fusable, compiled: values differ")
    assert "(4, 7)" not in message


def test_the_check_s_own_reference_is_off_limits(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("13-fuse-standardise", lambda c: n13.fuse_standardise(c, lambda x: n13._reference(x)))
    assert "the check's own helpers" in message


def test_predictions_must_be_a_plain_dict_of_plain_ints(verdict) -> None:  # type: ignore[no-untyped-def]
    class Peeks(dict):  # type: ignore[type-arg]
        def __getitem__(self, name):  # type: ignore[no-untyped-def]
            raise AssertionError("the check read a prediction through the answer's own code")

    message = verdict("13-predict-kernels", lambda c: n13.predict_kernels(c, Peeks(RIGHT)))
    assert "(a plain dict)" in message and "got Peeks" in message

    class Any(int):
        def __eq__(self, other):  # type: ignore[no-untyped-def]
            return True

        __hash__ = int.__hash__

    message = verdict("13-predict-kernels", lambda c: n13.predict_kernels(c, {k: Any(1) for k in RIGHT}))
    assert message.startswith("your prediction for shift_scale_relu: expected a number, got an object of type Any")


def test_a_wrong_hidden_prediction_is_numbered(verdict) -> None:  # type: ignore[no-untyped-def]
    wrong = {**RIGHT, "sorted_doubled": 1}
    message = verdict("13-predict-kernels", lambda c: n13.predict_kernels(c, wrong, hidden=HIDDEN_KERNELS[1:]))
    assert message.startswith("hidden case 1: your prediction") and "sorted" not in message.split("\n")[0]


def test_crossing_names_are_secret_and_inputs_do_not_cross(verdict) -> None:  # type: ignore[no-untyped-def]
    def with_x(rows, cols, itemsize):  # type: ignore[no-untyped-def]
        return {"h": rows * cols * itemsize, "r": rows * itemsize, "x": rows * cols * itemsize}

    message = verdict("13-break-crossing", lambda c: n13.break_crossing(c, with_x))
    assert message.startswith("crossing(64, 32, 4): the tensors that cross") and "After 3 failed" in message

    def four_bytes(rows, cols, itemsize):  # type: ignore[no-untyped-def]
        return {"h": rows * cols * 4, "r": rows * 4}

    message = verdict("13-break-crossing", lambda c: n13.break_crossing(c, four_bytes, hidden=HIDDEN_CROSSING))
    assert message.startswith("hidden case 1: bytes of h") and "120" not in message
