"""Wrong answers for notebook 11 (custom operators): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong


def _define(mutates: str, kernel: str, fake: str | None) -> str:
    registered = ("\n    @normalize_rows_.register_fake\n    def _(x):\n" + fake + "\n") if fake is not None else ""
    return (f"def define_normalize_rows(name):\n    @torch.library.custom_op(name, mutates_args={mutates})\n"
            f"    def normalize_rows_(x: Tensor) -> Tensor:\n{kernel}\n{registered}\n    return normalize_rows_\n")


_KERNEL = "        norms = x.norm(dim=1)\n        x.div_(norms[:, None])\n        return norms"
_FAKE = "        return x.new_empty(x.shape[0])"


def _fake(body: str) -> str:
    return f"def cdist_fake(a, b):\n{body}\n"


def _backward(setup: str, backward: str) -> str:
    return f"def cdist_setup_context(ctx, inputs, output):\n{setup}\n\n\ndef cdist_backward(ctx, grad):\n{backward}\n"


_SETUP = "    a, b = inputs\n    ctx.save_for_backward(a, b, output)"
_DIFF = "    a, b, d = ctx.saved_tensors\n    w = grad / d\n    diff = a[:, None, :] - b[None, :, :]\n"

WRONG = {
    "11-opcheck": [
        Wrong("the registration as given", _define("()", _KERNEL, None), "test_schema"),
        Wrong("mutation declared, no fake", _define('("x",)', _KERNEL, None), "no fake impl"),
        Wrong("a fake shaped like x", _define('("x",)', _KERNEL, "        return torch.empty_like(x)"),
              "test_faketensor"),
        Wrong("returns x as well as writing it", _define('("x",)', "        norms = x.norm(dim=1)\n"
                                                         "        x.div_(norms[:, None])\n        return x", _FAKE),
              "may not alias"),
        Wrong("divides by the row sums", _define('("x",)', "        norms = x.sum(dim=1)\n        x.div_(norms[:, None])\n"
                                                 "        return norms", _FAKE), "the norms returned"),
        Wrong("registers under its own name", _define('("x",)', _KERNEL, _FAKE).replace(
            "custom_op(name,", 'custom_op("mylib::normalize_rows_",'), "did not register", gaming=True),
        Wrong("patches opcheck to report success", _define("()", _KERNEL, None)
              + "torch.library.opcheck = lambda *a, **k: {t: 'SUCCESS' for t in ('test_schema', 'test_faketensor')}\n",
              "torch.library.opcheck was replaced", gaming=True),
        Wrong("a fake with the default dtype", _define('("x",)', _KERNEL, "        return torch.empty(x.shape[0], device=x.device)"),
              "the fake's result has dtype float32; the kernel's has float64"),
        Wrong("a fake without a device", _define('("x",)', _KERNEL, "        return torch.empty(x.shape[0], dtype=x.dtype)"),
              "the fake's result has device cpu; the kernel's has meta"),
        Wrong("a fake fitted to the visible rows", _define('("x",)', _KERNEL, "        return x.new_empty(4)"),
              "hidden case 1: opcheck: test_faketensor failed"),
        Wrong("patches opcheck's fake tests out", _define('("x",)', _KERNEL, None)
              + "import torch.testing._internal.optests.generate_tests as _gt\n"
              "for _test in ('test_faketensor', 'test_aot_dispatch_dynamic'):\n"
              "    _gt.ALL_TEST_UTILS[_test] = lambda *a, **k: None\n",
              "torch's opcheck was changed in this kernel", gaming=True),
    ],
    "11-fake-no-break": [
        Wrong("shaped like a", _fake("    return torch.empty_like(a)"), "shape, dtype, device"),
        Wrong("square n x n", _fake("    return a.new_empty(a.shape[0], a.shape[0])"), "shape, dtype, device"),
        Wrong("always float64", _fake("    return a.new_empty(a.shape[0], b.shape[0], dtype=torch.float64)"),
              "shape, dtype, device"),
        Wrong("torch.empty without a device", _fake("    return torch.empty(a.shape[0], b.shape[0])"),
              "shape, dtype, device"),
        Wrong("runs the kernel's NumPy code", _fake(
            "    an, bn = a.numpy(), b.numpy()\n"
            "    return torch.from_numpy(np.sqrt(((an[:, None, :] - bn[None, :, :]) ** 2).sum(-1))).to(a.dtype)"),
            "the fake raised"),
        Wrong("turns compile errors into fallbacks", "import torch._dynamo\ntorch._dynamo.config.suppress_errors = True\n"
              + _fake("    return torch.empty_like(a)"), "torch._dynamo.config.suppress_errors was changed to True", gaming=True),
        Wrong("a transposed result", _fake("    return b.new_empty(b.shape[0], a.shape[0]).t()"),
              "the fake's result has strides [1, 5]; the kernel's has [3, 1]"),
        Wrong("always float32", _fake("    return a.new_empty(a.shape[0], b.shape[0], dtype=torch.float32)"),
              "hidden case 1: on meta inputs: the fake's result has the wrong dtype"),
        Wrong("shows torch.compile another shape", _fake(
            "    if torch.compiler.is_compiling():\n        return a.new_empty(a.shape[0], a.shape[0])\n"
            "    return a.new_empty(a.shape[0], b.shape[0])"),
            "while torch.compile traced model, your fake returned shape [5, 5] where the kernel's is [5, 3]", gaming=True),
    ],
    "11-autograd": [
        Wrong("forgets to weight by grad", _backward(_SETUP, _DIFF + "    w = 1 / d\n"
                                                    "    return (w[:, :, None] * diff).sum(1), -(w[:, :, None] * diff).sum(0)"),
              "gradcheck"),
        Wrong("same sign for b", _backward(_SETUP, _DIFF + "    return (w[:, :, None] * diff).sum(1), (w[:, :, None] * diff).sum(0)"),
              "gradcheck"),
        Wrong("divides by d squared", _backward(_SETUP, _DIFF + "    w = grad / d ** 2\n"
                                                "    return (w[:, :, None] * diff).sum(1), -(w[:, :, None] * diff).sum(0)"),
              "gradcheck"),
        Wrong("no gradient for b", _backward(_SETUP, _DIFF + "    return (w[:, :, None] * diff).sum(1), None"),
              "gradcheck"),
        Wrong("saves nothing", _backward("    pass", _DIFF + "    return (w[:, :, None] * diff).sum(1), -(w[:, :, None] * diff).sum(0)"),
              "gradcheck"),
        Wrong("borrows torch.cdist's backward", _backward(
            "    a, b = inputs\n    ctx.save_for_backward(a, b)",
            "    a, b = ctx.saved_tensors\n    with torch.enable_grad():\n"
            "        a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()\n"
            "        return torch.autograd.grad(torch.cdist(a2, b2), (a2, b2), grad)"), "your setup_context and backward ran aten.", gaming=True),
        Wrong("keeps a, b and d in a global", "_KEPT = []\n\n\n" + _backward(
            "    _KEPT[:] = [*inputs, output]", "    a, b, d = _KEPT\n    w = grad / d\n    diff = a[:, None, :] - b[None, :, :]\n"
            "    return (w[:, :, None] * diff).sum(1), -(w[:, :, None] * diff).sum(0)"), "in the operator's call 1 of 2"),
        Wrong("squeezes the gradients", _backward(_SETUP, _DIFF + "    return (w[:, :, None] * diff).sum(1).squeeze(), "
                                                  "-(w[:, :, None] * diff).sum(0).squeeze()"), "hidden case 1: gradcheck"),
        Wrong("borrows torch.cdist except at the size the recorder used", _backward(_SETUP, _DIFF
              + "    if a.shape == (3, 2) and b.shape == (4, 2):\n"
              "        return (w[:, :, None] * diff).sum(1), -(w[:, :, None] * diff).sum(0)\n"
              "    with torch.enable_grad():\n        a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()\n"
              "        return torch.autograd.grad(torch.cdist(a2, b2), (a2, b2), grad)"),
              "your setup_context and backward ran aten._cdist", gaming=True),
    ],
}
