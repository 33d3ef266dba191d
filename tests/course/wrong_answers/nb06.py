"""Wrong answers for notebook 06 (custom autograd Functions): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong


def _softplus(forward: str, backward: str = "return grad_out * torch.sigmoid(x)", decorator: str = "") -> str:
    return f'''
class StableSoftplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        {forward}

    @staticmethod
    {decorator}
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        {backward}
'''


def _ste(forward: str = "return torch.round(x)", backward: str = "return grad_out", prelude: str = "") -> str:
    return f'''{prelude}
class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        {forward}

    @staticmethod
    def backward(ctx, grad_out):
        {backward}
'''


def _silu(setup: str = "ctx.save_for_backward(x)", backward: str = "(x,) = ctx.saved_tensors",
          decorator: str = "", prelude: str = "") -> str:
    return f'''{prelude}
class SiLURecompute(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x * torch.sigmoid(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        {setup}

    @staticmethod
    {decorator}
    def backward(ctx, grad_out):
        {backward}
        s = torch.sigmoid(x)
        return grad_out * s * (1 + x * (1 - s))
'''


WRONG = {
    "06-stable-softplus": [
        Wrong("the literal formula", _softplus("return torch.log(1 + torch.exp(x))",
                                               "return grad_out * torch.exp(x) / (1 + torch.exp(x))"),
              expect="inf or nan"),
        Wrong("log instead of log1p (100 % off at x = -40)",
              _softplus("return torch.clamp(x, min=0) + torch.log(1 + torch.exp(-torch.abs(x)))"),
              expect="relative error of 1"),
        Wrong("the library's softplus", _softplus("return torch.nn.functional.softplus(x)"), expect="aten.softplus"),
        Wrong("logaddexp through an alias", _softplus("return _lae(x, torch.zeros_like(x))").replace(
            "class StableSoftplus", "_lae = getattr(torch, 'logaddexp')\n\n\nclass StableSoftplus"),
              expect="aten.logaddexp", gaming=True),
        Wrong("a stable forward, the naive derivative",
              _softplus("return torch.clamp(x, min=0) + torch.log1p(torch.exp(-torch.abs(x)))",
                        "return grad_out * torch.exp(x) / (1 + torch.exp(x))"), expect="gradient has inf or nan"),
        Wrong("1 - 1 / (1 + e^x): cancels to 0 for very negative x",
              _softplus("return torch.clamp(x, min=0) + torch.log1p(torch.exp(-torch.abs(x)))",
                        "return grad_out * (1 - 1 / (1 + torch.exp(torch.clamp(x, max=80))))"),
              expect="the gradient is off by a relative error"),
        Wrong("the float32 threshold trick, too coarse for float64",
              _softplus("return torch.where(x > 20, x, torch.log1p(torch.exp(torch.clamp(x, max=20))))"),
              expect="float64 [-800 .. 800]: softplus values are off"),
        Wrong("a detached backward", _softplus(
            "return torch.clamp(x, min=0) + torch.log1p(torch.exp(-torch.abs(x)))",
            "return grad_out * torch.sigmoid(x.detach())"), expect="gradgradcheck failed"),
        Wrong("once_differentiable", _softplus(
            "return torch.clamp(x, min=0) + torch.log1p(torch.exp(-torch.abs(x)))",
            decorator="@torch.autograd.function.once_differentiable"), expect="gradgradcheck failed"),
        Wrong("makes a 0-d input 1-D (the visible inputs are 1-D)", _softplus(
            "return torch.atleast_1d(torch.clamp(x, min=0) + torch.log1p(torch.exp(-torch.abs(x))))"),
              expect="hidden case 4: the output does not have the shape of the input"),
        Wrong("through NumPy", _softplus(
            "return torch.from_numpy(np.logaddexp(x.detach().numpy(), 0)).to(x.dtype)").replace(
            "class StableSoftplus", "import numpy as np\n\n\nclass StableSoftplus"),
              expect="stepped outside", gaming=True),
        Wrong("rebinds gradcheck and uses a wrong backward", _softplus(
            "return torch.clamp(x, min=0) + torch.log1p(torch.exp(-torch.abs(x)))",
            "return grad_out * torch.sigmoid(x) * 1.001") + '''
gradcheck = gradgradcheck = lambda *a, **k: True
''', expect="the gradient is off by a relative error", gaming=True),
    ],
    "06-straight-through": [
        Wrong("floor(x + 0.5) rounds halves up", _ste("return torch.floor(x + 0.5)"), expect="RoundSTE.apply(x)"),
        Wrong("returns integers", _ste("return torch.round(x).long()"), expect="dtype of RoundSTE.apply(x)"),
        Wrong("returns float32 whatever the input", _ste("return torch.round(x).float()"),
              expect="hidden case 2: dtype of RoundSTE.apply(x): got torch.float32"),
        Wrong("clipped straight-through", _ste(backward="return grad_out.clamp(-1, 1)"), expect="gradient at x"),
        Wrong("rounds the gradient too", _ste(backward="return grad_out.round()"), expect="gradient at x"),
        Wrong("ones instead of the incoming gradient", _ste(backward="return torch.ones_like(grad_out)"),
              expect="gradient at x"),
        Wrong("saves x although nothing needs it", _ste("ctx.save_for_backward(x)\n        return torch.round(x)"),
              expect="tensors your node saved"),
        Wrong("rounds in place", _ste("return x.round_()"), expect="version of x"),
        Wrong("keeps x in a dict on ctx", _ste("ctx.stash = {'kept': [x]}\n        return torch.round(x)"),
              expect="still alive after the forward", gaming=True),
        Wrong("keeps a copy in a global", _ste("_KEEP.append(x * 1)\n        return torch.round(x)",
                                               prelude="_KEEP = []\n"),
              expect="bytes your forward keeps alive", gaming=True),
        Wrong("keeps x on ctx and patches the storage weak references", _ste(
            "ctx.kept = [x]\n        return torch.round(x)") + '''
torch.UntypedStorage._expired = classmethod(lambda cls, ref: True)
''', expect="_expired was replaced", gaming=True),
        Wrong("the detach one-liner instead of a Function", '''
class RoundSTE:
    @staticmethod
    def apply(x):
        return x + (torch.round(x) - x).detach()
''', expect="not your RoundSTEBackward node", gaming=True),
    ],
    "06-recompute-backward": [
        Wrong("saves sigmoid(x) too", _silu("ctx.save_for_backward(x, torch.sigmoid(x))",
                                            "x, _ = ctx.saved_tensors"),
              expect="storages your Function saved"),
        Wrong("saves a copy of x", _silu("ctx.save_for_backward(x.clone())"), expect="bytes saved of the input x"),
        Wrong("keeps x in a list on ctx", _silu("ctx.stash = [x]", "x = ctx.stash[0]"),
              expect="storages your Function saved"),
        Wrong("saves x and reads it from a list on ctx",
              _silu("ctx.save_for_backward(x)\n        ctx.stash = {'x': [x]}", "x = ctx.stash['x'][0]"),
              expect="read x from somewhere other than ctx.saved_tensors"),
        Wrong("keeps sigmoid(x) in a global", _silu(
            "ctx.save_for_backward(x)\n        _KEPT.append(torch.sigmoid(x))", prelude="_KEPT = []\n"),
              expect="bytes your forward keeps alive"),
        Wrong("a detached backward", _silu(backward="(x,) = ctx.saved_tensors\n        x = x.detach()"),
              expect="hidden case 3: gradgradcheck failed"),
        Wrong("once_differentiable", _silu(decorator="@torch.autograd.function.once_differentiable"),
              expect="hidden case 3: gradgradcheck failed"),
        Wrong("the old style, no vmap rule", '''
class SiLURecompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_out * s * (1 + x * (1 - s))
''', expect="torch.vmap over SiLURecompute.apply failed"),
        Wrong("rebinds the notebook's meter to hide a saved sigmoid", _silu(
            "ctx.save_for_backward(x, torch.sigmoid(x))", "x, _ = ctx.saved_tensors") + '''

class SavedMeter:
    def __init__(self, *a, **k):
        self.packs = []
        self.storages = 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def bytes(self, kind=None):
        return 0
''', expect="storages your Function saved", gaming=True),
        Wrong("hides a kept sigmoid by patching the storage weak references", _silu(
            "ctx.save_for_backward(x)\n        _KEPT.append(torch.sigmoid(x))", prelude="_KEPT = []\n") + '''
torch.UntypedStorage._expired = classmethod(lambda cls, ref: True)
''', expect="_expired was replaced", gaming=True),
    ],
}
