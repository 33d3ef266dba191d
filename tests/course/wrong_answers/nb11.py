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
              + _fake("    return torch.empty_like(a)"), "shape, dtype, device", gaming=True),
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
            "        return torch.autograd.grad(torch.cdist(a2, b2), (a2, b2), grad)"), "your backward ran", gaming=True),
    ],
}
