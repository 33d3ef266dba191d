"""Wrong answers for notebook 20 (capstone): each must fail its check for the reason in `expect`."""

from __future__ import annotations

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


_KERNEL = "        return F.gelu(u).mul_(v)"
_FAKE = "        return torch.empty_like(u)"
_SETUP = "        ctx.save_for_backward(*inputs)"
_BACKWARD = ("        u, v = ctx.saved_tensors\n"
             "        return torch.ops.aten.gelu_backward(grad * v, u), F.gelu(u).mul_(grad)")


def _op(kernel: str = _KERNEL, fake: str | None = _FAKE, setup: str = _SETUP, backward: str = _BACKWARD,
        name: str = "name") -> str:
    registered = f"\n    @gelu_gate.register_fake\n    def _(u, v):\n{fake}\n" if fake is not None else ""
    return (f"def define_fused_op(name):\n    @torch.library.custom_op({name}, mutates_args=())\n"
            f"    def gelu_gate(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:\n{kernel}\n{registered}\n"
            f"    def setup_context(ctx, inputs, output):\n{setup}\n\n    def backward(ctx, grad):\n{backward}\n\n"
            "    gelu_gate.register_autograd(backward, setup_context=setup_context)\n    return gelu_gate\n")


def _loss(body: str) -> str:
    return f"def fused_loss(model, op, x, y):\n{body}\n"


def _avg(body: str) -> str:
    return f"def average_gradients(model, all_reduce, world_size):\n{body}\n"


def _fast(body: str) -> str:
    return f"def make_fast_step(model, op):\n{body}\n"


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
        Wrong("registers the chain as the kernel", _op(
            kernel="        return 0.5 * u * (1 + torch.erf(u * 0.7071067811865476)) * v"),
            "a fused kernel runs at most 3"),
        Wrong("a fake that is always contiguous", _op(
            fake="        return torch.empty_like(u, memory_format=torch.contiguous_format)"),
            "opcheck on transposed"),
        Wrong("no fake", _op(fake=None), "opcheck on contiguous"),
        Wrong("saves the output for backward too", _op(
            setup="        ctx.save_for_backward(*inputs, output)",
            backward="        u, v, _ = ctx.saved_tensors\n"
                     "        return torch.ops.aten.gelu_backward(grad * v, u), F.gelu(u).mul_(grad)"),
            "the budget is the two inputs"),
        Wrong("no gradient for v", _op(
            backward="        u, v = ctx.saved_tensors\n        return torch.ops.aten.gelu_backward(grad * v, u), None"),
            "the gradients (u, v)"),
        Wrong("the tanh approximation of GELU", _op(kernel="        return F.gelu(u, approximate='tanh').mul_(v)"),
              "gelu_gate on contiguous"),
        Wrong("registers under its own name", _op(name='"mylib::gelu_gate"'), "did not register", gaming=True),
        Wrong("a fake in the default dtype", _op(fake="        return torch.empty_like(u, dtype=torch.float32)"),
              "opcheck on hidden case 2: test_faketensor"),
        Wrong("keeps the GELU on ctx, out of save_for_backward's sight", _op(
            setup="        ctx.save_for_backward(*inputs)\n        ctx.gelu = F.gelu(inputs[0])",
            backward="        u, v = ctx.saved_tensors\n"
                     "        return torch.ops.aten.gelu_backward(grad * v, u), ctx.gelu * grad"),
              "bytes more as attributes of ctx", gaming=True),
        Wrong("patches opcheck to report success", _op(fake=None)
              + "torch.library.opcheck = lambda *a, **k: {'test_schema': 'SUCCESS', 'test_faketensor': 'SUCCESS'}\n",
              "torch.library.opcheck was replaced", gaming=True),
    ],
    "20-no-break": [
        Wrong("calls the block's forward", _loss("    return F.mse_loss(model(x), y)"), "does not call your operator"),
        Wrong("prints the loss", _loss("    loss = F.mse_loss(x + model.down(op(model.gate(x), model.up(x))), y)\n"
                                       "    print(f'loss {loss.item():.4f}')\n    return loss"),
              "(graphs, graph breaks)"),
        Wrong("skips a step whose loss is not finite", _loss(
            "    loss = F.mse_loss(x + model.down(op(model.gate(x), model.up(x))), y)\n"
            "    if not torch.isfinite(loss):\n        return loss * 0\n    return loss"), "(graphs, graph breaks)"),
        Wrong("forgets the residual", _loss("    return F.mse_loss(model.down(op(model.gate(x), model.up(x))), y)"),
              "fused_loss (a 16"),
        Wrong("hides the operator from Dynamo", _loss(
            "    hidden = torch.compiler.disable(op)\n"
            "    return F.mse_loss(x + model.down(hidden(model.gate(x), model.up(x))), y)"),
              "(graphs, graph breaks)", gaming=True),
        Wrong("shows Dynamo another program than eager mode runs", _loss(
            "    if torch.compiler.is_compiling():\n"
            "        return F.mse_loss(model.down(op(model.gate(x), model.up(x))), y)\n"
            "    return F.mse_loss(model(x), y)"), "compiled fused_loss (a 16", gaming=True),
        Wrong("replaces the lens that counts breaks", "import torchlens_widgets.lenses.graph_breaks as _gb\n"
              "_real = _gb.graph_breaks\n\n\ndef _fake_report(fn, *args, **kwargs):\n"
              "    report = _real(fn, *args, **kwargs)\n"
              "    return type(report)(graphs=1, breaks=(), ops=report.ops, error=None)\n\n\n"
              "_gb.graph_breaks = _fake_report\n\n\n"
              + _loss("    loss = F.mse_loss(x + model.down(op(model.gate(x), model.up(x))), y)\n"
                      "    print(float(loss))\n    return loss"), "graph_breaks.graph_breaks was replaced", gaming=True),
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
        Wrong("uses the operator without compiling", _fast(_STEP.format(call="fused_loss(model, op, x, y)")),
              "ran no compiled region"),
        Wrong("compiles the original block", _fast(
            "    compiled = torch.compile(lambda x, y: F.mse_loss(model(x), y))\n\n"
            + _STEP.format(call="compiled(x, y)")), "never called your operator"),
        Wrong("never clears the gradients", _fast(
            "    compiled = torch.compile(fused_loss)\n\n    def step(x, y):\n"
            "        loss = compiled(model, op, x, y)\n        loss.backward()\n        return loss\n\n    return step"),
              "hidden case 2: the gradient of"),
        Wrong("returns the loss as a number", _fast(
            "    compiled = torch.compile(fused_loss)\n\n    def step(x, y):\n        model.zero_grad(set_to_none=True)\n"
            "        loss = compiled(model, op, x, y)\n        loss.backward()\n        return loss.item()\n\n"
            "    return step"), "not the loss"),
        Wrong("replays the first step's gradients", _fast(
            "    compiled = torch.compile(fused_loss)\n    memo = {}\n\n    def step(x, y):\n"
            "        if memo:\n            for p, g in zip(model.parameters(), memo['grads']):\n"
            "                p.grad = g.clone()\n            return memo['loss']\n"
            "        model.zero_grad(set_to_none=True)\n        loss = compiled(model, op, x, y)\n"
            "        loss.backward()\n        memo['loss'] = loss\n"
            "        memo['grads'] = [p.grad.clone() for p in model.parameters()]\n        return loss\n\n"
            "    return step"), "ran no compiled region", gaming=True),
        Wrong("remembers the batch it was timed on", _fast(
            "    region = torch.compile(lambda t: t + 0)\n    seen = {}\n\n    def step(x, y):\n"
            "        if seen.get('x') is x:\n            return seen['loss']\n        time.sleep(0.05)\n"
            "        model.zero_grad(set_to_none=True)\n        loss = region(fused_loss(model, op, x, y))\n"
            "        loss.backward()\n        seen.update(x=x, loss=loss)\n        return loss\n\n    return step",
        ).replace("def make_fast_step", "import time\n\n\ndef make_fast_step"),
              "as fast as the original; the target is", gaming=True),
        Wrong("slows the original step down", "import time\nfrom torchlens_widgets.lenses import capstone\n"
              "_original = capstone.step\n\n\ndef _slow(model, x, y):\n    time.sleep(0.05)\n"
              "    return _original(model, x, y)\n\n\ncapstone.step = _slow\n\n\n"
              + _fast(_STEP.format(call="fused_loss(model, op, x, y)")), "capstone.step was replaced", gaming=True),
    ],
}
