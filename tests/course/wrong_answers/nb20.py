"""Wrong answers for notebook 20 (capstone): each must fail its check for the reason in `expect`. Stage 2's answers
reuse the reference C++ source (built once, cached) except one, so the suite builds one extra library."""

from __future__ import annotations

import json
from pathlib import Path

from tests.course.wrong_answers import Wrong

_READ = {
    "longest forward range": '"activation"',
    "operator with the most self time": '"aten::mul"',
    "calls of aten::mul": "12",
    "backward nodes": "20",
}


def _read(**changed: str) -> str:
    values = dict(_READ)
    for key, value in changed.items():
        values[key.replace("_", " ").replace("aten mul", "aten::mul")] = value
    return "READ_PROFILE = {\n" + "".join(f"    {k!r}: {v},\n" for k, v in values.items()) + "}\n"


def _reference_source() -> str:
    """The reference GELU_GATE_SOURCE assignment, read from the source notebook (one copy of the C++)."""
    nb = json.loads((Path(__file__).parents[3] / "notebooks" / "20-capstone.ipynb").read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "20-fused-op-answer")
    text = "".join(cell["source"])
    return text.split("### BEGIN SOLUTION\n", 1)[1].split("### END SOLUTION", 1)[0]


_SOURCE = _reference_source()
_KERNEL = "        return kernel(u, v)"
_FAKE = "        return u.new_empty(u.shape)"
_SETUP = "        ctx.save_for_backward(*inputs)"
_BACKWARD = ("        u, v = ctx.saved_tensors\n"
             "        return torch.ops.aten.gelu_backward(grad * v, u), F.gelu(u).mul_(grad)")


def _op(kernel: str = _KERNEL, fake: str = _FAKE, setup: str = _SETUP, backward: str = _BACKWARD,
        source: str | None = None) -> str:
    return ((_SOURCE if source is None else source) + "\n\n"
            "def define_fused_op(name, kernel):\n    @torch.library.custom_op(name, mutates_args=())\n"
            f"    def gelu_gate(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:\n{kernel}\n\n"
            f"    @gelu_gate.register_fake\n    def _(u, v):\n{fake}\n\n"
            f"    def setup_context(ctx, inputs, output):\n{setup}\n\n    def backward(ctx, grad):\n{backward}\n\n"
            "    gelu_gate.register_autograd(backward, setup_context=setup_context)\n    return gelu_gate\n")


def _loss(body: str) -> str:
    return f"def checked_loss(model, x, y):\n{body}\n"


def _avg(body: str) -> str:
    return f"def average_gradients(model, all_reduce, world_size):\n{body}\n"


def _fast(body: str) -> str:
    return f"def make_fast_step(model):\n{body}\n"


_G = "    g = capstone.gelu_gate(model.gate(x), model.up(x))\n"
_FLAT = "    grads = [p.grad for p in model.parameters()]\n    flat = torch.cat([g.flatten() for g in grads])\n"
_BACK = ("    offset = 0\n    for g in grads:\n        g.copy_(flat[offset:offset + g.numel()].view_as(g))\n"
         "        offset += g.numel()")
_STEP = ("    def step(x, y):\n        model.zero_grad(set_to_none=True)\n        loss = {call}\n"
         "        loss.backward()\n        return loss\n\n    return step")

WRONG = {
    "20-hot-spot": [
        Wrong("names the range with the matrix products", _read(longest_forward_range='"gate_up"'),
              "READ_PROFILE['longest forward range']"),
        Wrong("counts the forward's aten::mul only", _read(calls_of_aten_mul="4"), "READ_PROFILE['calls of aten::mul']"),
        Wrong("leaves out the AccumulateGrad nodes", _read(backward_nodes="14"), "READ_PROFILE['backward nodes']"),
        Wrong("names the op with the most total time", _read(operator_with_the_most_self_time='"aten::linear"'),
              "READ_PROFILE['operator with the most self time']"),
        Wrong("answers with values equal to anything", "class _Any(str):\n    def __eq__(self, other):\n"
              "        return True\n    __hash__ = str.__hash__\n\n\nREAD_PROFILE = {k: _Any('x') for k in "
              "('longest forward range', 'operator with the most self time', 'calls of aten::mul', "
              "'backward nodes')}\n", "READ_PROFILE['longest forward range']", gaming=True),
    ],
    "20-fused-op": [
        Wrong("copies a strided input with .contiguous() first", _op(source=_SOURCE.replace(
            "  at::Tensor out = at::empty(u.sizes(), u.options());",
            "  if (!u.is_contiguous() || !v.is_contiguous()) return gelu_gate(u.contiguous(), v.contiguous());\n"
            "  at::Tensor out = at::empty(u.sizes(), u.options());")),
            "ran aten::clone, aten::contiguous, aten::copy_ on transposed"),
        Wrong("a fake laid out as u", _op(fake="        return torch.empty_like(u)"), "opcheck on transposed"),
        Wrong("saves the output for backward too", _op(
            setup="        ctx.save_for_backward(*inputs, output)",
            backward="        u, v, _ = ctx.saved_tensors\n"
                     "        return torch.ops.aten.gelu_backward(grad * v, u), F.gelu(u).mul_(grad)"),
            "the budget is the two inputs"),
        Wrong("no gradient for v", _op(
            backward="        u, v = ctx.saved_tensors\n        return torch.ops.aten.gelu_backward(grad * v, u), None"),
            "the gradients (u, v)"),
        Wrong("wraps ATen's two passes and never calls the kernel", _op(kernel="        return F.gelu(u).mul_(v)"),
              "never called the kernel built from GELU_GATE_SOURCE", gaming=True),
    ],
    "20-no-break": [
        Wrong("keeps the guard that raises", _loss(
            _G + "    if not torch.isfinite(g).all():\n        raise FloatingPointError('the GELU overflowed')\n"
            "    return F.mse_loss(x + model.down(g), y), torch.isfinite(g).all()"), "(graphs, graph breaks)"),
        Wrong("returns the flag as a Python bool", _loss(
            _G + "    return F.mse_loss(x + model.down(g), y), bool(torch.isfinite(g).all())"),
              "(graphs, graph breaks)"),
        Wrong("a flag per element", _loss(_G + "    return F.mse_loss(x + model.down(g), y), torch.isfinite(g)"),
              "should be a 0-d bool tensor"),
        Wrong("forgets the residual", _loss(_G + "    return F.mse_loss(model.down(g), y), torch.isfinite(g).all()"),
              "the loss of checked_loss (a 16"),
        Wrong("always says finite", _loss(_G + "    return F.mse_loss(x + model.down(g), y), torch.tensor(True)"),
              "is the activation finite (a 8 -> 32 -> 8 block on 16 rows, one gate bias inf)", gaming=True),
        Wrong("shows Dynamo another program than eager mode runs", _loss(
            _G + "    if torch.compiler.is_compiling():\n"
            "        return F.mse_loss(model.down(g), y), torch.isfinite(g).all()\n"
            "    return F.mse_loss(x + model.down(g), y), torch.isfinite(g).all()"),
              "the loss of compiled checked_loss (a 16", gaming=True),
        Wrong("replaces the lens that counts breaks", "import torchlens_widgets.lenses.graph_breaks as _gb\n"
              "_real = _gb.graph_breaks\n\n\ndef _fake_report(fn, *args, **kwargs):\n"
              "    report = _real(fn, *args, **kwargs)\n"
              "    return type(report)(graphs=1, breaks=(), ops=report.ops, error=None)\n\n\n"
              "_gb.graph_breaks = _fake_report\n\n\n"
              + _loss(_G + "    print(float(g.sum()))\n"
                      "    return F.mse_loss(x + model.down(g), y), torch.isfinite(g).all()"),
              "graph_breaks.graph_breaks was replaced", gaming=True),
    ],
    "20-data-parallel": [
        Wrong("sums without dividing by the world size", _avg(_FLAT + "    all_reduce(flat)\n" + _BACK),
              "times DDP's"),
        Wrong("one all_reduce per parameter", _avg(
            "    for p in model.parameters():\n        all_reduce(p.grad)\n        p.grad /= world_size"),
              "the aim is one bucket"),
        Wrong("all-reduces a copy and never writes it back", _avg(
            _FLAT + "    all_reduce(flat)\n    flat /= world_size"), "gradients differ from DDP's"),
        Wrong("divides by two, the world size of the visible test", _avg(
            _FLAT + "    all_reduce(flat)\n    flat /= 2\n" + _BACK), "hidden case 1: gradients differ from DDP's",
              gaming=True),
        Wrong("calls torch.distributed.all_reduce itself", _avg(
            _FLAT + "    if torch.distributed.is_initialized():\n        torch.distributed.all_reduce(flat)\n"
            "    flat /= world_size\n" + _BACK),
              "called torch.distributed's collectives itself", gaming=True),
    ],
    "20-end-to-end": [
        Wrong("compiles nothing", _fast(_STEP.format(call="checked_loss(model, x, y)[0]")), "ran no compiled region"),
        Wrong("never clears the gradients", _fast(
            "    compiled = torch.compile(checked_loss)\n\n    def step(x, y):\n"
            "        loss, _ = compiled(model, x, y)\n        loss.backward()\n        return loss\n\n    return step"),
              "hidden case 2: the gradient of"),
        Wrong("returns the loss as a number", _fast(
            "    compiled = torch.compile(checked_loss)\n\n    def step(x, y):\n"
            "        model.zero_grad(set_to_none=True)\n        loss, _ = compiled(model, x, y)\n"
            "        loss.backward()\n        return loss.item()\n\n    return step"), "not the loss"),
        Wrong("replays the first step's gradients", _fast(
            "    compiled = torch.compile(checked_loss)\n    memo = {}\n\n    def step(x, y):\n"
            "        if memo:\n            for p, g in zip(model.parameters(), memo['grads']):\n"
            "                p.grad = g.clone()\n            return memo['loss']\n"
            "        model.zero_grad(set_to_none=True)\n        loss, _ = compiled(model, x, y)\n"
            "        loss.backward()\n        memo['loss'] = loss\n"
            "        memo['grads'] = [p.grad.clone() for p in model.parameters()]\n        return loss\n\n"
            "    return step"), "ran no compiled region", gaming=True),
        Wrong("remembers the batch it was timed on", _fast(
            "    region = torch.compile(lambda t: t + 0)\n    seen = {}\n\n    def step(x, y):\n"
            "        if seen.get('x') is x:\n            return seen['loss']\n        time.sleep(0.05)\n"
            "        model.zero_grad(set_to_none=True)\n        loss = region(checked_loss(model, x, y)[0])\n"
            "        loss.backward()\n        seen.update(x=x, loss=loss)\n        return loss\n\n    return step",
        ).replace("def make_fast_step", "import time\n\n\ndef make_fast_step"),
              "as fast as the original; the target is", gaming=True),
        Wrong("slows the original step down", "import time\nfrom torchlens_widgets.lenses import capstone\n"
              "_original = capstone.step\n\n\ndef _slow(model, x, y):\n    time.sleep(0.05)\n"
              "    return _original(model, x, y)\n\n\ncapstone.step = _slow\n\n\n"
              + _fast(_STEP.format(call="checked_loss(model, x, y)[0]")), "capstone.step was replaced",
              gaming=True),
    ],
}
