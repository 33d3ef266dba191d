"""Wrong answers for notebook 13 (fusion): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong


def _bytes(eager: str, fused: str, pre: str = "") -> str:
    return (f"{pre}def eager_bytes(rows, cols, itemsize):\n    full = rows * cols * itemsize\n    return {eager}\n\n\n"
            f"def fused_bytes(rows, cols, itemsize):\n    full = rows * cols * itemsize\n    return {fused}\n")


def _standardise(body: str, pre: str = "") -> str:
    return f"{pre}def standardise_fusable(x):\n{body}\n"


_STATS = "    m = x.mean(dim=1, keepdim=True)\n    c = x - m\n    s = (c * c).mean(dim=1, keepdim=True).sqrt()\n"

def _crossing(body: str) -> str:
    return f"def crossing(rows, cols, itemsize):\n    return {{{body}}}\n"


_RIGHT = {"shift_scale_relu": 1, "rms_scaled": 1, "sorted_doubled": 2, "transposed_copy": 1, "two_matmuls": 2}


def _predict(**changes: int) -> str:
    return f"PREDICT_KERNELS = {({**_RIGHT, **changes})!r}\n"


WRONG = {
    "13-bytes-moved": [
        Wrong("counts only what is written", _bytes("3 * full", "full"), "eager_bytes(64, 32, 4)"),
        Wrong("reads the broadcast bias as a full tensor", _bytes("8 * full", "4 * full"), "eager_bytes(64, 32, 4)"),
        Wrong("forgets the bias altogether", _bytes("7 * full", "3 * full"), "eager_bytes(64, 32, 4)"),
        Wrong("one read per kernel (the multiply reads two tensors)",
              _bytes("6 * full + cols * itemsize", "3 * full + cols * itemsize"), "eager_bytes(64, 32, 4)"),
        Wrong("fused still writes the intermediates",
              _bytes("7 * full + cols * itemsize", "5 * full + cols * itemsize"), "fused_bytes(64, 32, 4)"),
        Wrong("assumes 4-byte floats", _bytes("7 * rows * cols * 4 + cols * 4", "3 * rows * cols * 4 + cols * 4"),
              "hidden case 1: eager_bytes"),
        Wrong("fitted to the visible case", _bytes("57472 if rows == 64 else 0", "24704 if rows == 64 else 0"),
              "hidden case 1: eager_bytes", gaming=True),
        Wrong("asks the lens instead of counting",
              "import torch\nfrom torchlens_widgets.lenses.fusion import eager_traffic, fused_traffic\n\n\n"
              "def _g(x, g, b):\n    return (x + b) * torch.sigmoid(g)\n\n\n"
              "def _t(rows, cols, itemsize):\n    dt = {2: torch.float16, 4: torch.float32, 8: torch.float64}[itemsize]\n"
              "    return torch.ones(rows, cols, dtype=dt), torch.ones(rows, cols, dtype=dt), torch.ones(cols, dtype=dt)\n"
              "\n\ndef eager_bytes(rows, cols, itemsize):\n    return eager_traffic(_g, *_t(rows, cols, itemsize)).bytes_moved\n"
              "\n\ndef fused_bytes(rows, cols, itemsize):\n    return fused_traffic(_g, *_t(rows, cols, itemsize)).bytes_moved\n",
              "eager_bytes", gaming=True),
    ],
    "13-fuse-standardise": [
        Wrong("the original, loop and all",
              _standardise(_STATS + "    for row in (s.flatten() == 0).nonzero().flatten().tolist():\n"
                           "        s[row] = 1.0\n    return c / s"), "(graphs, breaks) when compiled"),
        Wrong("an if around a where (still a graph break)",
              _standardise(_STATS + "    if (s == 0).any():\n        s = torch.where(s == 0, torch.ones_like(s), s)\n"
                           "    return c / s"), "(graphs, breaks) when compiled"),
        Wrong("drops the guard: a constant row gives nan", _standardise(_STATS + "    return c / s"),
              "standardise_fusable(rows with a constant row and a narrow one)"),
        Wrong("guards with a Python max on .item()",
              _standardise(_STATS + "    return c / max(s.min().item(), 1.0)"), "(graphs, breaks) when compiled"),
        Wrong("clamps the deviation instead (changes small but nonzero ones)",
              _standardise(_STATS + "    return c / s.clamp_min(1.0)"), "standardise_fusable(rows with a constant row and a narrow one)"),
        Wrong("forgets to subtract the mean before dividing",
              _standardise(_STATS + "    return x / torch.where(s == 0, torch.ones_like(s), s)"),
              "standardise_fusable(rows with a constant row and a narrow one)"),
        Wrong("hides the if in a function compile skips",
              "@torch.compiler.disable\ndef _guard(s):\n    if (s == 0).any():\n"
              "        s = torch.where(s == 0, torch.ones_like(s), s)\n    return s\n\n\n"
              + _standardise(_STATS + "    return c / _guard(s)"), "(graphs, breaks) when compiled", gaming=True),
        Wrong("calls the check's own reference", _standardise(
            "    return _n13._reference(x)", "from torchlens_widgets.course.exercises import n13 as _n13\n\n\n"),
              "the check's own helpers", gaming=True),
        Wrong("right only while being compiled",
              _standardise(_STATS + "    if torch.compiler.is_compiling():\n"
                           "        return c / torch.where(s == 0, torch.ones_like(s), s)\n    return x * 0"),
              "standardise_fusable(", gaming=True),
        # shows Dynamo a program without the guard except on the visible input: eager and timed results are right
        Wrong("skips the guard when compiled, except for the visible input",
              _standardise(_STATS + "    if torch.compiler.is_compiling() and x.shape[0] != 6:\n        return c / s\n"
                           "    return c / torch.where(s == 0, torch.ones_like(s), s)"),
              "hidden case 2: standardise_fusable, compiled", gaming=True),
        # a sort nobody needs on the timed input, and each later call answered with the first call's result
        Wrong("slow on the timed input, then answers from a cache",
              _standardise("    if x.shape[0] > 1000 and _kept:\n        return _kept[0]\n" + _STATS
                           + "    if x.shape[0] > 1000:\n        m = x.sort(dim=1).values.mean(dim=1, keepdim=True)\n"
                           "        c = x - m\n        s = (c * c).mean(dim=1, keepdim=True).sqrt()\n"
                           "    out = c / torch.where(s == 0, torch.ones_like(s), s)\n"
                           "    if x.shape[0] > 1000:\n        _kept.append(out)\n    return out", "_kept = []\n\n\n"),
              "standardise_fusable compiled, on timed input", gaming=True),
    ],
    "13-predict-kernels": [
        Wrong("a reduction never fuses", _predict(rms_scaled=3), "your prediction for rms_scaled"),
        Wrong("a library call fuses with what follows", _predict(sorted_doubled=1), "your prediction for sorted_doubled"),
        Wrong("a transpose needs its own copy kernel", _predict(transposed_copy=2), "your prediction for transposed_copy"),
        Wrong("two matmuls are one library call", _predict(two_matmuls=1), "your prediction for two_matmuls"),
        Wrong("one kernel per operation", _predict(shift_scale_relu=3), "your prediction for shift_scale_relu"),
        Wrong("an int that equals everything",
              "class _Any(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
              "PREDICT_KERNELS = {k: _Any(1) for k in " + repr(list(_RIGHT)) + "}\n",
              "your prediction", gaming=True),
        # Inductor told not to fuse across a reduction, so the check's count matches the wrong prediction
        Wrong("switches Inductor's fusion off to match its prediction",
              "import torch._inductor.config\n\ntorch._inductor.config.max_fusion_size = 1\n"
              + _predict(rms_scaled=2), "your prediction for rms_scaled", gaming=True),
        Wrong("a dict that reads the check's frame",
              "import sys\n\nfrom torchlens_widgets.lenses.fusion import fused_traffic\n\n\n"
              "class _Peek(dict):\n    def __getitem__(self, name):\n"
              "        space = {**sys._getframe(1).f_globals, **sys._getframe(1).f_locals}\n"
              "        x = space.get(\"_x2\", space[\"_x\"])\n"
              "        args = (x, space[\"_w\"]) if name == \"two_matmuls\" else (x,)\n"
              "        return fused_traffic(space[\"_fns\"][name], *args).kernel_count\n\n\n"
              "PREDICT_KERNELS = _Peek({k: 0 for k in " + repr(list(_RIGHT)) + "})\n",
              "(a plain dict)", gaming=True),
    ],
    "13-break-crossing": [
        Wrong("counts the inputs as crossing too",
              _crossing('"h": rows * cols * itemsize, "r": rows * itemsize, "x": rows * cols * itemsize'),
              "crossing(64, 32, 4): the tensors that cross"),
        Wrong("forgets the row sums", _crossing('"h": rows * cols * itemsize'),
              "crossing(64, 32, 4): the tensors that cross"),
        Wrong("takes the row sums for a full tensor", _crossing('"h": rows * cols * itemsize, "r": rows * cols * itemsize'),
              "crossing(64, 32, 4): bytes of r"),
        Wrong("names what is made after the break", _crossing('"out": rows * cols * itemsize, "r": rows * itemsize'),
              "crossing(64, 32, 4): the tensors that cross"),
        Wrong("assumes 4-byte floats", _crossing('"h": rows * cols * 4, "r": rows * 4'), "hidden case 1: bytes of h"),
        Wrong("fitted to the visible case",
              "def crossing(rows, cols, itemsize):\n    return {\"h\": 8192, \"r\": 256}\n",
              "hidden case 1: bytes of h", gaming=True),
        Wrong("asks the lens instead of working it out",
              "import torch\nfrom torchlens_widgets.lenses.fusion import fused_traffic\n\n\n"
              "def _f(x, w):\n    h = torch.tanh(x) * w\n    r = h.sum(dim=1, keepdim=True)\n"
              "    torch._dynamo.graph_break()\n    return h / (1 + r.abs()) + x\n\n\n"
              "def crossing(rows, cols, itemsize):\n"
              "    t = fused_traffic(_f, torch.ones(rows, cols), torch.ones(cols))\n"
              "    return {n: b // 4 * itemsize for n, b in t.intermediates if '.' not in n}\n",
              "crossing called", gaming=True),
    ],
}
