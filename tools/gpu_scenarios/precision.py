"""Notebook 14 on a GPU: CUDA autocast call by call, the reduced-precision-reduction flags, GradScaler on real underflow."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from record_gpu import Topic


def block(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Notebook 14's `block` (section 2), unchanged."""
    h = F.linear(x, w, b)
    p = torch.softmax(h, -1)
    n = F.layer_norm(h, h.shape[-1:])
    loss = F.mse_loss(p, target)
    both = torch.cat([p, target])
    return loss, n, both


def autocast_lists(t: Topic, dtype: torch.dtype) -> dict[str, Any]:
    """autocast_trace of `block` on the device (CUDA autocast) and the dtype each aten op ran in."""
    from torchlens_widgets.lenses.autocast import autocast_trace, dtypes_ran

    torch.manual_seed(0)
    x, w, b = (torch.randn(8, 32, device=t.device), torch.randn(16, 32, device=t.device),
               torch.randn(16, device=t.device))
    target = torch.softmax(torch.randn(8, 16, device=t.device), -1)
    trace = autocast_trace(block, x, w, b, target, device_type=t.device.type, dtype=dtype)
    with torch.autocast(t.device.type, dtype=dtype):
        ran = dtypes_ran(block, x, w, b, target)
    return {"trace": trace.to_dict(), "summary": trace.summary(), "ops": list(ran.ops), "casts": list(ran.casts)}


def flags() -> dict[str, Any]:
    """The CUDA matmul precision switches as this torch sets them by default."""
    m = torch.backends.cuda.matmul
    return {"allow_tf32": m.allow_tf32, "allow_fp16_reduced_precision_reduction": m.allow_fp16_reduced_precision_reduction,
            "allow_bf16_reduced_precision_reduction": m.allow_bf16_reduced_precision_reduction,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32}


def rounded_once(t: Topic) -> dict[str, Any]:
    """Is a low-precision linear the exact result rounded once? Whole numbers (exact in float32 in any order)
    and randn inputs, for float16 and bfloat16, with the reduced-precision-reduction flag off and on."""
    g = torch.Generator().manual_seed(2)
    whole = (torch.randint(-16, 17, (64, 4096), generator=g).float(), torch.randint(-16, 17, (32, 4096), generator=g).float())
    normal = (torch.randn(64, 4096, generator=g), torch.randn(32, 4096, generator=g))
    m = torch.backends.cuda.matmul
    out: dict[str, Any] = {}
    for dtype, flag in ((torch.float16, "allow_fp16_reduced_precision_reduction"),
                        (torch.bfloat16, "allow_bf16_reduced_precision_reduction")):
        before = getattr(m, flag)
        for inputs_name, (xa, wa) in (("whole numbers", whole), ("randn", normal)):
            exact = (xa.double() @ wa.double().T).to(dtype)
            for setting in (False, True):
                setattr(m, flag, setting)
                try:
                    got = F.linear(xa.to(t.device, dtype), wa.to(t.device, dtype)).cpu()
                finally:
                    setattr(m, flag, before)
                out[f"{str(dtype).removeprefix('torch.')} {inputs_name} {flag}={setting}"] = {
                    "outputs": got.numel(), "differ_from_exact_rounded_once": int((got != exact).sum()),
                    "max_abs_diff": float((got.double() - exact.double()).abs().max())}
    return out


def grad_scaler(t: Topic) -> dict[str, Any]:
    """Cells 26-27 on the device: float16 gradients underflow without a scaler; a huge scale overflows and skips."""
    gen = torch.Generator().manual_seed(3)
    layer = torch.nn.Linear(64, 64)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(64, 64, generator=gen) / 8)
        layer.bias.zero_()
    batch = torch.randn(32, 64, generator=gen).to(t.device)
    layer = layer.to(t.device)
    dev = t.device.type

    def weight_grad(dtype: torch.dtype, scaler: Any = None) -> torch.Tensor:
        layer.zero_grad()
        with torch.autocast(dev, dtype=dtype):
            loss = layer(layer(batch)).float().pow(2).mean() * 1e-6
        (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.unscale_(torch.optim.SGD(layer.parameters(), lr=0.0))
        return layer.weight.grad.clone()

    true_grad = torch.func.grad(lambda wt: F.linear(F.linear(batch, wt, layer.bias), wt, layer.bias).pow(2).mean()
                                * 1e-6)(layer.weight.detach())

    def zero(g: torch.Tensor) -> float:
        return (g == 0).float().mean().item()

    def rel(g: torch.Tensor) -> float:
        return ((g - true_grad).norm() / true_grad.norm()).item()

    plain = weight_grad(torch.float16)
    scaled = weight_grad(torch.float16, torch.amp.GradScaler(dev, init_scale=2.0**16))
    brain = weight_grad(torch.bfloat16)
    out: dict[str, Any] = {"float16 no scaler": {"zeros": zero(plain), "rel_error": rel(plain)},
                           "float16 scaled 2^16": {"zeros": zero(scaled), "rel_error": rel(scaled)},
                           "bfloat16 no scaler": {"zeros": zero(brain), "rel_error": rel(brain)}}
    scaler = torch.amp.GradScaler(dev, init_scale=2.0**40)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    layer.zero_grad()
    with torch.autocast(dev, dtype=torch.float16):
        loss = layer(layer(batch)).float().pow(2).mean()
    scaler.scale(loss).backward()
    before = layer.weight.detach().clone()
    scaler.step(optimizer)
    scaler.update()
    out["overflow"] = {"skipped": bool(torch.equal(before, layer.weight.detach())), "scale_after": scaler.get_scale()}
    return out


class Gram(torch.autograd.Function):
    """Notebook 14's Gram with custom_fwd/custom_bwd for the device type it runs on."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x @ x.T

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad @ x + grad.T @ x


def custom_function_dtypes(t: Topic) -> dict[str, Any]:
    """The matmul dtypes of an unmarked custom Function's forward and backward under CUDA autocast."""
    from torchlens_widgets.lenses.autocast import dtypes_ran

    leaf = torch.randn(6, 4, device=t.device, requires_grad=True)
    with torch.autocast(t.device.type, dtype=torch.float16):
        run = dtypes_ran(Gram.apply, leaf)
    try:
        back = [d for op, d in dtypes_ran(run.result.sum().backward).ops if op == "mm"]
    except RuntimeError as err:
        back = str(err).splitlines()[0]
    return {"forward": [d for op, d in run.ops if op == "mm"], "backward_after_block": back}


def record(t: Topic) -> None:
    for dtype in (torch.float16, torch.bfloat16):
        with t.step(f"autocast lists, {dtype}") as e:
            result = autocast_lists(t, dtype if not t.dry else torch.bfloat16)
            e["calls"] = len(result["trace"].get("calls", []))
            t.json(f"autocast_{str(dtype).removeprefix('torch.')}", result)
    with t.step("matmul precision flags") as e:
        e["flags"] = flags()
        t.json("flags", e["flags"])
    with t.step("rounded once? (reduced-precision reduction off and on)") as e:
        if t.dry:
            e["note"] = "dry run: the CPU has no cuBLAS reduction flags; one small case runs to check the code"
        result = rounded_once(t)
        t.json("rounded_once", result)
    with t.step("GradScaler on float16 underflow and overflow") as e:
        if t.dry:
            e["note"] = "dry run: CPU autocast float16"
        result = grad_scaler(t)
        e["result"] = result
        t.json("grad_scaler", result)
    with t.step("custom Function under autocast") as e:
        result = custom_function_dtypes(t)
        e["result"] = result
        t.json("custom_function", result)
