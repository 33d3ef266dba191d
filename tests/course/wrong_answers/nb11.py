"""Wrong answers for notebook 11 (custom operators): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong


def _define(schema: str, kernel: str, fake: str | None) -> str:
    registered = ("\n    @torch.library.register_fake(name)\n    def _(x):\n" + fake + "\n") if fake is not None else ""
    return (f"def define_normalize_rows(name):\n    torch.library.define(name, {schema!r})\n\n"
            f"    @torch.library.impl(name, 'cpu')\n    def normalize_rows_(x):\n{kernel}\n{registered}")


_WRITES = "(Tensor(a!) x) -> Tensor"
_KERNEL = "        norms = x.norm(dim=1)\n        x.div_(norms[:, None])\n        return norms"
_FAKE = "        return x.new_empty(x.shape[0])"


def _fake(body: str) -> str:
    return f"def keep_rows_fake(x, threshold):\n{body}\n"


def _rule(body: str) -> str:
    return f"def row_norms_vmap(row_norms, info, in_dims, x):\n{body}\n"


def _backward(setup: str, backward: str) -> str:
    return f"def cdist_setup_context(ctx, inputs, output):\n{setup}\n\n\ndef cdist_backward(ctx, grad):\n{backward}\n"


_SETUP = "    a, b = inputs\n    ctx.save_for_backward(a, b, output)"
_DIFF = "    a, b, d = ctx.saved_tensors\n    w = grad / d\n    diff = a[:, None, :] - b[None, :, :]\n"

WRONG = {
    "11-opcheck": [
        Wrong("a schema that reads x only", _define("(Tensor x) -> Tensor", _KERNEL, _FAKE), "the operator's schema"),
        Wrong("the write declared, no fake", _define(_WRITES, _KERNEL, None), "test_faketensor"),
        Wrong("a fake shaped like x", _define(_WRITES, _KERNEL, "        return torch.empty_like(x)"), "test_faketensor"),
        Wrong("the result declared as x too", _define("(Tensor(a!) x) -> Tensor(a!)", _KERNEL, _FAKE),
              "the operator's schema"),
        Wrong("divides by the row sums", _define(_WRITES, "        norms = x.sum(dim=1)\n        x.div_(norms[:, None])\n"
                                                 "        return norms", _FAKE), "the norms returned"),
        Wrong("lets custom_op write the schema", "def define_normalize_rows(name):\n"
              "    @torch.library.custom_op(name, mutates_args=('x',))\n    def normalize_rows_(x: Tensor) -> Tensor:\n"
              + _KERNEL + "\n\n    normalize_rows_.register_fake(lambda x: x.new_empty(x.shape[0]))\n",
              "define_normalize_rows called custom_op", gaming=True),
        Wrong("registers under its own name", _define(_WRITES, _KERNEL, _FAKE).replace(
            "define(name,", 'define("mylib::normalize_rows_",').replace(
            "impl(name,", 'impl("mylib::normalize_rows_",').replace(
            "register_fake(name)", 'register_fake("mylib::normalize_rows_")'), "did not register", gaming=True),
        Wrong("patches opcheck to report success", _define("(Tensor x) -> Tensor", _KERNEL, None)
              + "torch.library.opcheck = lambda *a, **k: {t: 'SUCCESS' for t in ('test_schema', 'test_faketensor')}\n",
              "torch.library.opcheck was replaced", gaming=True),
        Wrong("a fake with the default dtype", _define(_WRITES, _KERNEL, "        return torch.empty(x.shape[0], device=x.device)"),
              "the fake's result has dtype float32; the kernel's has float64"),
        Wrong("a fake without a device", _define(_WRITES, _KERNEL, "        return torch.empty(x.shape[0], dtype=x.dtype)"),
              "the fake's result has device cpu; the kernel's has meta"),
        Wrong("a fake fitted to the visible rows", _define(_WRITES, _KERNEL, "        return x.new_empty(4)"),
              "hidden case 1: opcheck: test_faketensor failed"),
        Wrong("patches opcheck's fake tests out", _define(_WRITES, _KERNEL, None)
              + "import torch.testing._internal.optests.generate_tests as _gt\n"
              "for _test in ('test_faketensor', 'test_aot_dispatch_dynamic'):\n"
              "    _gt.ALL_TEST_UTILS[_test] = lambda *a, **k: None\n",
              "torch's opcheck was changed in this kernel", gaming=True),
    ],
    "11-dynamic-fake": [
        Wrong("as many rows as x", _fake("    return x.new_empty(x.shape[0], x.shape[1])"),
              "returned a fixed row count (12)"),
        Wrong("one dimension", _fake("    return x.new_empty(torch.library.get_ctx().new_dynamic_size())"),
              "returned a 1-d tensor where the kernel returns a 2-d one"),
        Wrong("the default dtype", _fake("    return torch.empty(torch.library.get_ctx().new_dynamic_size(), x.shape[1])"),
              "returned dtype float32 where the kernel's is float64"),
        Wrong("x's rows as columns", _fake("    return x.new_empty(torch.library.get_ctx().new_dynamic_size(), x.shape[0])"),
              "returned 12 columns where the kernel's result has x's 3"),
        Wrong("runs the kernel's NumPy code", _fake(
            "    xn = x.numpy()\n    return torch.from_numpy(xn[np.abs(xn).max(axis=1) > threshold].copy())"),
            "the operator raised"),
        Wrong("the visible case's row count", _fake("    return x.new_empty(3, x.shape[1])"),
              "returned a fixed row count (3)", gaming=True),
        Wrong("turns compile errors into fallbacks", "import torch._dynamo\ntorch._dynamo.config.suppress_errors = True\n"
              + _fake("    return x.new_empty(torch.library.get_ctx().new_dynamic_size(), x.shape[1])"),
              "torch._dynamo.config.suppress_errors was changed to True", gaming=True),
        Wrong("float64 always", _fake(
            "    return x.new_empty(torch.library.get_ctx().new_dynamic_size(), x.shape[1], dtype=torch.float64)"),
            "hidden case 1: on fake tensors, your fake's result could not be the kernel's"),
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
    "11-vmap-rule": [
        Wrong("the elementwise rule of section 6", _rule("    return row_norms(x), in_dims[0]"),
              "row_norms takes a 2-d (rows, columns) tensor"),
        Wrong("a loop over the samples", _rule("    x = x.movedim(in_dims[0], 0)\n"
                                               "    return torch.stack([row_norms(sample) for sample in x]), 0"),
              "the kernel ran 5 times for one vmap call"),
        Wrong("assumes the batch dimension is first", _rule(
            "    batch, rows, cols = x.shape\n    return row_norms(x.reshape(batch * rows, cols)).reshape(batch, rows), 0"),
            "shape (4, 6, 3), dim 1: vmap's result"),
        Wrong("says the batch is last", _rule(
            "    x = x.movedim(in_dims[0], 0)\n    batch, rows, cols = x.shape\n"
            "    return row_norms(x.reshape(batch * rows, cols)).reshape(batch, rows), 1"), "vmap's result"),
        Wrong("computes the norms without the operator", _rule("    return x.movedim(in_dims[0], 0).norm(dim=-1), 0"),
              "the kernel ran 0 times for one vmap call", gaming=True),
        Wrong("fitted to the visible dimensions", _rule(
            "    x = x.movedim(in_dims[0], 0) if in_dims[0] in (0, 1) else x\n    batch, rows, cols = x.shape\n"
            "    return row_norms(x.reshape(batch * rows, cols)).reshape(batch, rows), 0"),
            "hidden case 1: vmap's result", gaming=True),
    ],
}
