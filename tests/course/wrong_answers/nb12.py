"""Wrong answers for notebook 12 (save or recompute): each must fail its check for the reason named in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong

_SAC = '''
def lean_forward(mlp, x):
    return cp.checkpoint(mlp, x, use_reentrant=False,
                         context_fn=partial(cp.create_selective_checkpoint_contexts, save_matmuls))
'''

_SAVED = '''
def predict_saved(n, d, itemsize):
    full, row = n * d * itemsize, d * itemsize
    return {
        "x.relu().sum()": {"ReluBackward0": {"result": full}},
        "torch.exp(x) * v": {"MulBackward0": {"self": full, "other": row}, "ExpBackward0": {"result": full}},
        "torch.exp(x) * c": {"MulBackward0": {"other": row}, "ExpBackward0": {"result": full}},
        "torch.tanh(x @ w)": {"TanhBackward0": {"result": full}, "MmBackward0": {"self": full, "mat2": d * row}},
        "x.softmax(-1).max(-1).values": {"MaxBackward0": {"indices": n * 8}, "SoftmaxBackward0": {"result": full}},
        "torch.where(x > 0, x, 0.0).pow(3)": {"PowBackward0": {"self": full}, "WhereBackward0": {"condition": n * d}},
        "F.layer_norm(x, (d,))": {"NativeLayerNormBackward0": {"input": full, "result1": n * itemsize,
                                                                "result2": n * itemsize}},
        "(x * x).mean()": {"MulBackward0": {"self": full, "other": full}},
    }
'''


def _saved(old: str, new: str) -> str:
    assert _SAVED.count(old) == 1, old
    return _SAVED.replace(old, new)


_BRUTE = '''
def choose_checkpoints(block_bytes, input_bytes, budget):
    n = len(block_bytes)
    for k in range(n + 1):
        for chosen in combinations(range(n), k):
            if PEAK(block_bytes, input_bytes, set(chosen)) FITS budget:
                return set(chosen)
    return NONE
'''


def _brute(peak: str = "peak_model", fits: str = "<=", none: str = "None") -> str:
    return _BRUTE.replace("PEAK", peak).replace("FITS", fits).replace("NONE", none)


WRONG = {
    "12-cut-saved-memory": [
        Wrong("checkpoints the whole block", '''
def lean_forward(mlp, x):
    return cp.checkpoint(mlp, x, use_reentrant=False)
''', expect="a matmul is being recomputed"),
        Wrong("checkpoints only the pointwise part", '''
def lean_forward(mlp, x):
    u, g = mlp.up(x), mlp.gate(x)
    h = cp.checkpoint(lambda u, g: F.gelu(u) * F.silu(g), u, g, use_reentrant=False)
    return mlp.down(h)
''', expect="bytes alive"),
        Wrong("detaches the output", '''
def lean_forward(mlp, x):
    return mlp(x).detach().requires_grad_()
''', expect="no gradient reached x"),
        Wrong("runs the forward without grad", '''
def lean_forward(mlp, x):
    with torch.no_grad():
        return mlp(x)
''', expect="no gradient reached x"),
        Wrong("stores activations in bfloat16", '''
def lean_forward(mlp, x):
    def pack(t):
        return t.dtype, t.to(torch.bfloat16)

    def unpack(p):
        return p[1].to(p[0])

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        return mlp(x)
''', expect="gradient of"),
        Wrong("a custom Function with the wrong silu derivative", '''
class _Gate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, g):
        ctx.save_for_backward(u, g)
        return F.gelu(u) * F.silu(g)

    @staticmethod
    def backward(ctx, grad):
        u, g = ctx.saved_tensors
        with torch.enable_grad():
            uu = u.detach().requires_grad_()
            (du,) = torch.autograd.grad(F.gelu(uu), uu, grad * F.silu(g))
        return du, grad * F.gelu(u) * torch.sigmoid(g)


def lean_forward(mlp, x):
    return mlp.down(_Gate.apply(mlp.up(x), mlp.gate(x)))
''', expect="gradient of x"),
        Wrong("remembers its first output", '''
_first = {}


def lean_forward(mlp, x):
    if id(mlp) not in _first:
        _first[id(mlp)] = cp.checkpoint(mlp, x, use_reentrant=False,
                                         context_fn=partial(cp.create_selective_checkpoint_contexts, save_matmuls))
    return _first[id(mlp)]
''', expect="lean_forward called a second time (on other tokens) before one backward", gaming=True),
        Wrong("runs the forward with the meter's mode switched off", '''
from torch.utils._python_dispatch import _disable_current_modes


def lean_forward(mlp, x):
    with _disable_current_modes():
        return mlp(x)
''', expect="stepped outside what this check can observe", gaming=True),
        Wrong("patches the package's held_after_forward", '''
import torchlens_widgets.lenses.meters as _meters
_meters.held_after_forward = lambda fn, *args: (fn(*args), 0)


def lean_forward(mlp, x):
    return mlp(x)
''', expect="was replaced", gaming=True),
        Wrong("patches LiveBytes to see nothing", '''
LiveBytes.now = lambda self: 0


def lean_forward(mlp, x):
    return mlp(x)
''', expect="LiveBytes.now was replaced", gaming=True),
        Wrong("rebinds the notebook's meter and model", '''
held_after_forward = lambda fn, *args: (fn(*args), 0)
mlp = GatedMLP(2, 2)


def lean_forward(mlp, x):
    return mlp(x)
''', expect="bytes alive", gaming=True),
        # hint 3's custom Function, keeping u and g in a closure instead of ctx: right for one call at a time
        Wrong("keeps the saved tensors in a closure", '''
def _gate_down():
    kept = {}

    class GateDown(torch.autograd.Function):
        @staticmethod
        def forward(ctx, u, g, w, b):
            kept["ugw"] = (u, g, w)
            return F.linear(F.gelu(u) * F.silu(g), w, b)

        @staticmethod
        def backward(ctx, grad):
            u, g, w = (t.detach().requires_grad_() for t in kept["ugw"])
            with torch.enable_grad():
                h = F.gelu(u) * F.silu(g)
                du, dg = torch.autograd.grad(h, (u, g), grad @ w)
            return du, dg, grad.t() @ h.detach(), grad.sum(0)

    return GateDown


_GateDown = _gate_down()


def lean_forward(mlp, x):
    return _GateDown.apply(mlp.up(x), mlp.gate(x), mlp.down.weight, mlp.down.bias)
''', expect="called a second time (on other tokens) before one backward: the backward raised"),
        Wrong("an empty-input guard read into a Python number", '''
def lean_forward(mlp, x):
    if x.abs().max().item() == 0:
        return mlp(x)
    return cp.checkpoint(mlp, x, use_reentrant=False,
                         context_fn=partial(cp.create_selective_checkpoint_contexts, save_matmuls))
''', expect="lean_forward called Tensor.item, which this exercise asks you not to use"),
        # u and g kept as Python numbers: no storage for the live-storage meter to count
        Wrong("keeps the activations as Python numbers", '''
class _AsNumbers(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, g):
        ctx.shape, ctx.kept = u.shape, [t.reshape(-1).tolist() for t in (u, g)]
        return F.gelu(u) * F.silu(g)

    @staticmethod
    def backward(ctx, grad):
        u, g = (torch.tensor(k, dtype=grad.dtype).view(ctx.shape).requires_grad_() for k in ctx.kept)
        with torch.enable_grad():
            return torch.autograd.grad(F.gelu(u) * F.silu(g), (u, g), grad)


def lean_forward(mlp, x):
    return mlp.down(_AsNumbers.apply(mlp.up(x), mlp.gate(x)))
''', expect="converts to Python lists", gaming=True),
        Wrong("patches torch.allclose and scales the output", '''
torch.allclose = lambda *args, **kwargs: True
''' + _SAC.replace("return cp.checkpoint(", "return 1.01 * cp.checkpoint("), expect="was replaced", gaming=True),
    ],
    "12-checkpoint-budget": [
        Wrong("biggest blocks first", '''
def choose_checkpoints(block_bytes, input_bytes, budget):
    chosen = set()
    order = sorted(range(len(block_bytes)), key=lambda i: -block_bytes[i])
    for i in [None] + order:
        if i is not None:
            chosen.add(i)
        if peak_model(block_bytes, input_bytes, chosen) <= budget:
            return set(chosen)
    return None
''', expect="the example with budget 70000"),
        Wrong("front to back", '''
def choose_checkpoints(block_bytes, input_bytes, budget):
    for k in range(len(block_bytes) + 1):
        if peak_model(block_bytes, input_bytes, set(range(k))) <= budget:
            return set(range(k))
    return None
''', expect="checkpointed blocks suffice"),
        Wrong("looks at the memory after the forward only", '''
def choose_checkpoints(block_bytes, input_bytes, budget):
    n = len(block_bytes)
    for k in range(n + 1):
        for chosen in combinations(range(n), k):
            held = sum(input_bytes[i] if i in chosen else block_bytes[i] for i in range(n))
            if held <= budget:
                return set(chosen)
    return None
''', expect="gives a peak of"),
        Wrong("strictly below the budget", _brute(fits="<"), expect="five equal blocks, budget 25"),
        Wrong("an empty set when nothing fits", _brute(none="set()"), expect="expected None"),
        Wrong("a list instead of a set", _brute().replace("return set(chosen)", "return list(chosen)"),
              expect="expected a set of block indices"),
        Wrong("rebinds peak_model", "peak_model = lambda *args: 0\n" + _brute(),
              expect="gives a peak of", gaming=True),
        Wrong("calls the check's peak model", "from torchlens_widgets.course.exercises import n12 as _n12\n"
              + _brute(peak="_n12._peak"), expect="the check's own helpers", gaming=True),
        Wrong("hard-codes the visible answers", '''
def choose_checkpoints(block_bytes, input_bytes, budget):
    return {70_000: {0, 1, 2}, 25: set(), 4: None}.get(budget, set())
''', expect="a stack of widths", gaming=True),
    ],
    "12-predict-saved": [
        Wrong("relu saves its input", _saved('{"ReluBackward0": {"result": full}}', '{"ReluBackward0": {"self": full}}'),
              expect="x.relu().sum()"),
        Wrong("a product with a constant saves both factors",
              _saved('"torch.exp(x) * c": {"MulBackward0": {"other": row}',
                     '"torch.exp(x) * c": {"MulBackward0": {"self": full, "other": row}'),
              expect="torch.exp(x) * c"),
        Wrong("max's indices at the input's itemsize", _saved('{"indices": n * 8}', '{"indices": n * itemsize}'),
              expect="x.softmax(-1).max(-1).values"),
        Wrong("where's condition at the input's itemsize", _saved('{"condition": n * d}', '{"condition": full}'),
              expect="torch.where(x > 0, x, 0.0).pow(3)"),
        Wrong("layer_norm's statistics per element", _saved('"result1": n * itemsize', '"result1": full'),
              expect="F.layer_norm(x, (d,))"),
        Wrong("lists nodes that save nothing",
              _saved('{"ReluBackward0": {"result": full}}', '{"ReluBackward0": {"result": full}, "SumBackward0": {}}'),
              expect="x.relu().sum()"),
        Wrong("bytes as floats", _saved("full, row = n * d * itemsize, d * itemsize",
                                         "full, row = n * d * itemsize * 1.0, d * itemsize * 1.0"),
              expect="with int bytes"),
        Wrong("runs the expressions through the lens", '''
def predict_saved(n, d, itemsize):
    dtype = {4: torch.float32, 8: torch.float64}[itemsize]
    out = {}
    for expr, fn in saved_expressions(n, d, dtype).items():
        graph = grad_graph(fn())
        out[expr] = {nd.name: {s.name: s.nbytes for s in nd.saved} for nd in graph.nodes if nd.saved}
    return out
''', expect="grad_graph, which this exercise asks you not to use", gaming=True),
        Wrong("empties saved_expressions", '''
saved_expressions = lambda *args: {}


def predict_saved(n, d, itemsize):
    return {}
''', expect="no prediction for", gaming=True),
        Wrong("hard-codes the visible sizes", _saved("full, row = n * d * itemsize, d * itemsize",
                                                      "n, d, itemsize = 64, 32, 4\n    full, row = 8192, 128"),
              expect="hidden case 1['x.relu().sum()']", gaming=True),
    ],
}
