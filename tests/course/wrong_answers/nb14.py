"""Wrong answers for notebook 14 (mixed precision): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong

_FWD = """scores = q @ k.T
        top = scores.amax(-1, keepdim=True)
        out = (scores - top).exp().sum(-1).log() + top.squeeze(-1)
        ctx.save_for_backward(q, k, scores, out)
        return out"""
_BWD = """q, k, scores, out = ctx.saved_tensors
        weights = (scores - out[:, None]).exp() * grad[:, None]
        return weights @ k, weights.T @ q"""
_CAST = '@torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)'
_STATE = '@torch.amp.custom_bwd(device_type="cpu")'


def _lse(fwd_decorator: str = _CAST, bwd_decorator: str = _STATE, forward: str = _FWD, backward: str = _BWD,
         pre: str = "") -> str:
    return f'''{pre}
class ScoreLSE(torch.autograd.Function):
    @staticmethod
    {fwd_decorator}
    def forward(ctx, q, k):
        {forward}

    @staticmethod
    {bwd_decorator}
    def backward(ctx, grad):
        {backward}
'''


def _accumulate(body: str) -> str:
    return f"def accumulate(chunks):\n{body}\n"


def _bound(body: str) -> str:
    return f"def linear_error_bound(x, w):\n{body}\n"


def _policies(body: str) -> str:
    return f"def give_policies(norm, project):\n{body}\n"


WRONG = {
    "14-lse-autocast": [
        Wrong("no decorators: the forward is lowered", _lse("", ""), "your forward returned bfloat16"),
        Wrong("custom_fwd without cast_inputs", _lse('@torch.amp.custom_fwd(device_type="cpu")'),
              "your forward returned bfloat16"),
        Wrong("no custom_bwd: the backward is lowered inside autocast", _lse(bwd_decorator=""),
              "your backward ran aten.mm"),
        Wrong("casts the inputs by hand, autocast still on", _lse("", _STATE, _FWD.replace(
            "scores = q @ k.T", "q, k = q.float(), k.float()\n        scores = q @ k.T")),
              "your forward returned bfloat16"),
        Wrong("no max subtraction: exp overflows", _lse(forward="""scores = q @ k.T
        out = scores.exp().sum(-1).log()
        ctx.save_for_backward(q, k, scores, out)
        return out"""), "scores in the hundreds: values off by"),
        Wrong("backward forgets the incoming gradient", _lse(backward=_BWD.replace(" * grad[:, None]", "")),
              "gradients off by"),
        Wrong("backward weights by exp(score), not by the softmax", _lse(backward=_BWD.replace(
            "(scores - out[:, None]).exp()", "scores.exp()")), "gradients off by"),
        Wrong("a Function whose apply is plain autograd", '''
class ScoreLSE(torch.autograd.Function):
    @staticmethod
    def apply(q, k):
        with torch.autocast("cpu", enabled=False):
            return torch.logsumexp(q.float() @ k.float().T, -1)
''', "not ScoreLSE's backward node", gaming=True),
        Wrong("not a Function at all", '''
class ScoreLSE:
    @staticmethod
    def apply(q, k):
        return torch.logsumexp(q.float() @ k.float().T, -1)
''', "deriving from torch.autograd.Function", gaming=True),
        # float32 inside forward, and in the backward too, because autocast is never switched back on
        Wrong("switches autocast off inside forward and leaves it off", _lse("", "", """torch.set_autocast_enabled("cpu", False)  # float32 from here on
        wide = torch.float64 if q.dtype == torch.float64 else torch.float32
        q, k = q.to(wide), k.to(wide)
        """ + _FWD), "after ScoreLSE.apply returned, still inside the autocast block, autocast was off"),
        Wrong("computes in Python floats through .item()", _lse("", "", """wide = torch.float64 if q.dtype == torch.float64 else torch.float32
        q, k = q.to(wide), k.to(wide)
        rows = []
        for i in range(q.shape[0]):
            scores = [sum(q[i, t].item() * k[j, t].item() for t in range(q.shape[1])) for j in range(k.shape[0])]
            top = max(scores)
            rows.append(top + math.log(sum(math.exp(s - top) for s in scores)))
        out = torch.tensor(rows, dtype=wide)
        ctx.save_for_backward(q, k, out)
        return out""", """q, k, out = ctx.saved_tensors
        n, m, d = q.shape[0], k.shape[0], q.shape[1]
        dq = [[0.0] * d for _ in range(n)]
        dk = [[0.0] * d for _ in range(m)]
        for i in range(n):
            for j in range(m):
                s = sum(q[i, t].item() * k[j, t].item() for t in range(d))
                p = math.exp(s - out[i].item()) * grad[i].item()
                for t in range(d):
                    dq[i][t] += p * k[j, t].item()
                    dk[j][t] += p * q[i, t].item()
        return torch.tensor(dq, dtype=q.dtype), torch.tensor(dk, dtype=k.dtype)""", pre="import math\n"),
              "ScoreLSE.apply ran aten._local_scalar_dense", gaming=True),
    ],
    "14-accumulate": [
        Wrong("a bfloat16 total", _accumulate("""    total = torch.zeros_like(chunks[0])
    for chunk in chunks:
        total += chunk
    return total"""), "expected a float32 tensor"),
        Wrong("a bfloat16 total, converted at the end", _accumulate("""    total = torch.zeros_like(chunks[0])
    for chunk in chunks:
        total += chunk
    return total.float()"""), "relative to the chunks' total size"),
        Wrong("a float16 total", _accumulate("""    total = torch.zeros(chunks[0].shape, dtype=torch.float16)
    for chunk in chunks:
        total += chunk
    return total.float()"""), "relative to the chunks' total size"),
        Wrong("one bfloat16 sum of the stacked chunks", _accumulate(
            "    return torch.stack(chunks).sum(0).float()"), "relative to the chunks' total size"),
        Wrong("a float64 total", _accumulate("""    total = torch.zeros(chunks[0].shape, dtype=torch.float64)
    for chunk in chunks:
        total += chunk
    return total.float()"""), "in float64"),
        Wrong("sums Python floats", _accumulate("""    import math
    flat = [c.flatten().tolist() for c in chunks]
    sums = [math.fsum(col) for col in zip(*flat)]
    return torch.tensor(sums, dtype=torch.float32).reshape(chunks[0].shape)"""), "stepped outside", gaming=True),
        Wrong("a Python-float total through .item()", _accumulate("""    flat = [c.flatten() for c in chunks]
    sums = [sum(f[i].item() for f in flat) for i in range(flat[0].numel())]
    return torch.tensor(sums, dtype=torch.float32).reshape(chunks[0].shape)"""),
              "accumulate ran aten._local_scalar_dense", gaming=True),
        Wrong("a bfloat16 total whose own .double() gives the exact sum", """
class _Exact(torch.Tensor):
    def double(self):
        return torch.stack([c.to(torch.float64) for c in self._chunks]).sum(0)


def accumulate(chunks):
    total = torch.zeros_like(chunks[0])
    for chunk in chunks:
        total += chunk
    out = total.float().as_subclass(_Exact)
    out._chunks = chunks
    return out
""", "expected a plain torch.Tensor, got _Exact", gaming=True),
    ],
    "14-error-bound": [
        Wrong("a whole step (eps) per rounding", _bound(
            "    u = torch.finfo(torch.bfloat16).eps\n    return ((1 + u) ** 3 - 1) * (x.abs() @ w.abs().T)"),
              "times a bound that holds"),
        Wrong("inputs' roundings only", _bound(
            "    u = 2.0 ** -8\n    return ((1 + u) ** 2 - 1) * (x.abs() @ w.abs().T)"), "above your bound"),
        Wrong("the output's rounding only", _bound("    return 2.0 ** -8 * (x.abs() @ w.abs().T)"),
              "above your bound"),
        Wrong("relative to the result, not to the sum of |x||w|", _bound(
            "    u = 2.0 ** -8\n    return ((1 + u) ** 3 - 1) * (x @ w.T).abs()"), "above your bound"),
        Wrong("float16's unit roundoff", _bound(
            "    u = 2.0 ** -11\n    return ((1 + u) ** 3 - 1) * (x.abs() @ w.abs().T)"), "above your bound"),
        Wrong("assumes the sum is kept in bfloat16", _bound(
            "    u = 2.0 ** -8\n    return (3 * u + x.shape[-1] * u) * (x.abs() @ w.abs().T)"),
              "times a bound that holds"),
        Wrong("measures the real error", _bound("""    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.nn.functional.linear(x, w)
    return (y.double() - x.double() @ w.double().T).abs()"""), "ran aten._to_copy", gaming=True),
        Wrong("a bound too large to be wrong", _bound("    return x.abs() @ w.abs().T"),
              "times a bound that holds", gaming=True),
        Wrong("a tensor whose own .double() measures the real error", """
class _Measured(torch.Tensor):
    def double(self):
        x, w = self._inputs
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.nn.functional.linear(x, w)
        return (y.to(torch.float64) - x.to(torch.float64) @ w.to(torch.float64).T).abs()


def linear_error_bound(x, w):
    out = (x.abs() @ w.abs().T).as_subclass(_Measured)
    out._inputs = (x, w)
    return out
""", "expected a plain torch.Tensor, got _Measured", gaming=True),
    ],
    "14-autocast-policy": [
        Wrong("registers nothing: custom operators are on no list", _policies("    pass"),
              "project's kernel received x, w, rows in float32, float32, int64"),
        Wrong("both raised to float32", _policies("""    torch.library.register_autocast(norm, "cpu", torch.float32)
    torch.library.register_autocast(project, "cpu", torch.float32)"""), "project's kernel received x, w, rows in float32"),
        Wrong("the two dtypes swapped", _policies("""    torch.library.register_autocast(norm, "cpu", torch.bfloat16)
    torch.library.register_autocast(project, "cpu", torch.float32)"""), "norm's kernel received x in bfloat16"),
        Wrong("rules for CUDA's autocast, not the CPU's", _policies("""    torch.library.register_autocast(norm, "cuda", torch.float32)
    torch.library.register_autocast(project, "cuda", torch.bfloat16)"""), "project's kernel received x, w, rows in float32"),
        Wrong("float16 for the projection", _policies("""    torch.library.register_autocast(norm, "cpu", torch.float32)
    torch.library.register_autocast(project, "cpu", torch.float16)"""), "project's kernel received x, w, rows in float16"),
        Wrong("kernels of its own that cast whenever autocast is on", _policies("""    def own_norm(x):
        if torch.is_autocast_enabled("cpu"):
            x = x.float()
        return x.pow(2).sum(-1).sqrt()

    def own_project(x, w, rows):
        if torch.is_autocast_enabled("cpu"):
            x, w = x.bfloat16(), w.bfloat16()
        return x[rows] @ w.T

    torch.library.register_kernel(norm, "cpu", own_norm)
    torch.library.register_kernel(project, "cpu", own_project)"""), "the operators' own kernels did not run", gaming=True),
    ],
}
