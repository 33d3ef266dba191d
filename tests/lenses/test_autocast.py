"""The autocast lens: each call's dtypes, the casts autocast inserted, its list found by probing; and the
low-precision value probe."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from torchlens_widgets.lenses.autocast import AutocastError, AutocastTrace, autocast_trace, dtypes_ran, probe_values
from torchlens_widgets.lenses.recorded import RecordingMissing, recording


def mixed(x, w, b):
    y = F.linear(x, w, b)  # lower precision on CPU
    z = y.relu()  # unlisted: runs in what it is given
    c = torch.cat([y, x[:, :3]])  # promote: bfloat16 and float32 -> float32
    e = torch.mm(x, w.t()).float()  # a user's cast is not autocast's
    return z, c, e


@pytest.fixture
def xwb():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 8, generator=g), torch.randn(3, 8, generator=g), torch.randn(3, generator=g)


def test_calls_casts_and_lists_on_cpu_bfloat16(xwb):
    t = autocast_trace(mixed, *xwb)
    assert (t.device, t.dtype) == ("cpu", "bfloat16")
    lin = t.call("linear")
    assert lin.inputs == ("float32",) * 3 and lin.outputs == ("bfloat16",)
    assert lin.casts == ("float32 -> bfloat16",) * 3 and lin.policy == "lower precision"
    assert any(r.startswith("addmm: bfloat16") for r in lin.ran_as)
    relu = t.call("Tensor.relu")
    assert relu.policy == "unlisted" and not relu.cast and relu.outputs == ("bfloat16",)
    cat = t.call("cat")
    assert cat.policy == "promote" and cat.casts == ("bfloat16 -> float32",) and cat.outputs == ("float32",)
    assert t.call("mm").policy == "lower precision"
    to_float = t.call("Tensor.float")
    assert to_float.casts == () and to_float.outputs == ("float32",)  # the user's cast, not autocast's
    assert t.cast_count == 3 + 1 + 2
    assert "linear: float32, float32, float32 -> bfloat16 [lower precision]" in t.summary()


def test_float16_on_cpu_and_a_float32_list_op():
    def f(x):
        return torch.mm(x, x), torch.nn.functional.mse_loss(x, x.flip(0))

    t = autocast_trace(f, torch.randn(4, 4), dtype=torch.float16)
    assert t.call("mm").outputs == ("float16",)
    # mse_loss is on CPU autocast's float32 list in torch 2.13: low-precision inputs are cast up
    assert t.call("mse_loss").policy == "float32"


def test_probing_keeps_the_random_state(xwb):
    def drop(x):
        return F.dropout(x, 0.5, training=True)

    torch.manual_seed(1)
    autocast_trace(drop, xwb[0])
    after_trace = torch.rand(1)
    torch.manual_seed(1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        drop(xwb[0])
    assert torch.equal(after_trace, torch.rand(1))  # probes drew nothing extra


def test_to_dict_and_lookup(xwb):
    t = autocast_trace(mixed, *xwb)
    d = t.to_dict()
    assert d["cast_count"] == t.cast_count and d["calls"][0]["cast"] is True
    with pytest.raises(KeyError, match="no call 'conv2d'"):
        t.call("conv2d")


def test_from_dict_rebuilds_a_trace_and_reads_the_gpu_recording(xwb):
    t = autocast_trace(mixed, *xwb)
    again = AutocastTrace.from_dict(json.loads(json.dumps(t.to_dict())))  # through JSON: tuples come back as lists
    assert again == t and again.summary() == t.summary()
    try:
        rec = recording("precision")
    except RecordingMissing:
        pytest.skip("no GPU recording of the precision topic in this package")
    for dtype in ("float16", "bfloat16"):
        data = rec.load(f"autocast_{dtype}")
        cuda = AutocastTrace.from_dict(data["trace"])
        assert (cuda.device, cuda.dtype) == ("cuda", dtype) and cuda.summary() == data["summary"]
        assert json.loads(json.dumps(cuda.to_dict())) == data["trace"]


def test_bad_input_gets_advice():
    with pytest.raises(AutocastError, match="function"):
        autocast_trace(3)
    with pytest.raises(AutocastError, match="device_type"):
        autocast_trace(mixed, device_type="mps")
    with pytest.raises(AutocastError, match="bfloat16 or torch.float16"):
        autocast_trace(mixed, dtype=torch.float64)
    if not torch.cuda.is_available():
        with pytest.raises(AutocastError, match="needs a GPU"):
            autocast_trace(mixed, device_type="cuda", dtype=torch.float16)
    with pytest.raises(AutocastError, match="float16, bfloat16 or float32"):
        probe_values([1.0], torch.int8)
    with pytest.raises(AutocastError, match="float8_e4m3fn, float8_e5m2"):
        probe_values([1.0], torch.float8_e4m3fnuz)


def test_probe_values_float16_and_bfloat16():
    h = {p.value: p for p in probe_values([1.0, 0.1, 70000.0, 1e-8, 1e-6], torch.float16)}
    assert h[1.0].outcome == "exact" and h[0.1].outcome == "rounded"
    assert h[0.1].relative_error == pytest.approx(abs(0.0999755859375 - 0.1) / 0.1)
    assert h[70000.0].outcome == "overflow" and math.isinf(h[70000.0].stored)  # float16 tops out at 65504
    assert h[1e-8].outcome == "underflow" and h[1e-8].stored == 0.0  # below float16's smallest subnormal
    assert h[1e-6].outcome == "subnormal"
    b = {p.value: p for p in probe_values([70000.0, 1e-8, 1e-40], torch.bfloat16)}
    assert b[70000.0].outcome == "rounded" and b[70000.0].stored == 70144.0  # bfloat16: float32's range
    assert b[1e-8].outcome == "rounded" and b[1e-40].outcome == "subnormal"


def test_probe_values_float8():
    e4 = {p.value: p for p in probe_values([448.0, 460.0, 464.0, 500.0, math.inf, 2.0**-9, 1e-3, 1e-4],
                                           torch.float8_e4m3fn)}
    assert e4[448.0].outcome == "exact" and e4[460.0].outcome == e4[464.0].outcome == "rounded"  # 464: a tie, to 448
    assert e4[500.0].outcome == "saturated" and e4[500.0].stored == 448.0  # no infinity: clamped to the largest
    assert e4[math.inf].outcome == "saturated" and e4[math.inf].relative_error == math.inf
    assert e4[2.0**-9].outcome == "exact" and e4[1e-3].outcome == "subnormal" and e4[1e-4].outcome == "underflow"
    e5 = {p.value: p for p in probe_values([57344.0, 61440.0, 1e-5, 1e-8], torch.float8_e5m2)}
    assert e5[57344.0].outcome == "exact" and e5[61440.0].outcome == "overflow"  # e5m2 has infinity
    assert e5[1e-5].outcome == "subnormal" and e5[1e-8].outcome == "underflow"


def test_dtypes_ran_sees_the_backward_and_a_custom_function_without_custom_bwd():
    class Scores(torch.autograd.Function):  # forward in float32 (cast_inputs); backward left to the caller's autocast
        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
        def forward(ctx, q, k):
            ctx.save_for_backward(q, k)
            return q @ k.T

        @staticmethod
        def backward(ctx, g):
            q, k = ctx.saved_tensors
            return g @ k, g.T @ q

    q, k = torch.randn(3, 4, requires_grad=True), torch.randn(5, 4, requires_grad=True)

    def step():
        Scores.apply(q, k).sum().backward()

    with torch.autocast("cpu", dtype=torch.bfloat16):
        run = dtypes_ran(step)
    forward_mm, *backward_mms = [d for op, d in run.ops if op == "mm"]
    assert forward_mm == "float32" and backward_mms == ["bfloat16", "bfloat16"]
    assert run.ran_in("bfloat16") == ("mm", "mm") and "float32 -> bfloat16" in run.casts
    outside = dtypes_ran(step)  # no autocast: everything float32, no casts
    assert outside.ran_in("bfloat16") == () and outside.casts == ()
    with pytest.raises(AutocastError, match="give a function"):
        dtypes_ran(3)
