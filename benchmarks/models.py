"""Benchmark subjects: GPT-2-small and ResNet-50 in plain torch, and synthetic grad_fn graph dicts.

The torch models are imported lazily (only `gpt2_small()` / `resnet50()` need torch), so the synthetic
graphs can feed the layout benchmark on a machine without torch. Parameter names follow the usual
checkpoints ("h.0.attn.c_attn.weight", "layer1.0.conv1.weight"), which is what collapse_repeats reads.
"""

from __future__ import annotations

import math
import random
from typing import Any

__all__ = ["gpt2_small", "resnet50", "synthetic_graph", "gpt2_like_graph", "random_dag", "GraphTape"]


# ----------------------------------------------------------------------------------------------------------
# Plain-torch models


def gpt2_small(n_layer: int = 12, d: int = 768, n_head: int = 12, vocab: int = 50257, ctx: int = 1024,
               seq: int = 32) -> tuple[Any, Any]:
    """GPT-2 small (~124M parameters, weights tied like the original) and a (1, seq) batch of token ids."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.register_buffer("bias", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)).view(1, 1, ctx, ctx),
                                 persistent=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, c = x.shape
            q, k, v = self.c_attn(x).split(d, dim=2)
            q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
            w = (q @ k.transpose(-2, -1)) / math.sqrt(c // n_head)
            w = w.masked_fill(~self.bias[:, :, :t, :t], float("-inf")).softmax(dim=-1)
            y = (w @ v).transpose(1, 2).contiguous().view(b, t, c)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc = nn.Linear(d, 4 * d)
            self.c_proj = nn.Linear(4 * d, d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.attn, self.ln_2, self.mlp = nn.LayerNorm(d), Attention(), nn.LayerNorm(d), MLP()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT2(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.h = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(d)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            return self.ln_f(x) @ self.wte.weight.t()  # tied head: logits

    torch.manual_seed(0)
    model = GPT2()
    return model, torch.randint(0, vocab, (1, seq))


def resnet50(num_classes: int = 1000, size: int = 64) -> tuple[Any, Any]:
    """ResNet-50 (bottleneck blocks [3, 4, 6, 3], ~25.6M parameters) and a 1×3×size×size image."""
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * 4
            self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
            self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout else None
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + (self.downsample(x) if self.downsample is not None else x))

    class ResNet50(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64)
            self.relu, self.maxpool = nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
            cin = 64
            for k, (blocks, width, stride) in enumerate([(3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)]):
                layer = []
                for b in range(blocks):
                    layer.append(Bottleneck(cin, width, stride if b == 0 else 1))
                    cin = width * 4
                setattr(self, f"layer{k + 1}", nn.Sequential(*layer))
            self.avgpool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(2048, num_classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.avgpool(x).flatten(1))

    torch.manual_seed(0)
    return ResNet50(), torch.randn(1, 3, size, size)


# ----------------------------------------------------------------------------------------------------------
# Synthetic graph dicts (the autograd lens's schema), built by "running" a forward program on a tape.


class GraphTape:
    """Records forward ops as backward nodes: each op's node gets edges to its inputs' nodes (slot order)."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.edges: list[dict[str, int]] = []
        self._params: dict[str, int] = {}

    def _node(self, name: str, kind: str, param: str | None = None, shape: list[int] | None = None,
              saved: list[dict[str, Any]] | None = None) -> int:
        nid = len(self.nodes)
        self.nodes.append({
            "id": nid, "name": name, "kind": kind, "param": param, "shape": shape,
            "saved": saved or [], "hooks": {"pre": 0, "post": 0}, "seq": None if kind == "leaf" else nid,
        })
        return nid

    def param(self, name: str, shape: list[int]) -> int:
        """The AccumulateGrad leaf of a parameter (one per parameter, however often it is used)."""
        if name not in self._params:
            self._params[name] = self._node("AccumulateGrad", "leaf", param=name, shape=shape)
        return self._params[name]

    def op(self, name: str, *inputs: int | None, shape: list[int] | None = None, saved: int = 0) -> int:
        """A backward node for one forward op; `None` inputs (no grad) take a slot but get no edge."""
        nbytes = 4 * math.prod(shape) if shape else 0
        nid = self._node(name, "op", shape=shape, saved=[
            {"name": f"_saved_{k}", "shape": shape, "dtype": "torch.float32", "nbytes": nbytes, "freed": False,
             "alias": None}
            for k in range(saved)
        ])
        for slot, src in enumerate(inputs):
            if src is not None:
                self.edges.append({"src": nid, "dst": src, "slot": slot})
        return nid

    def graph(self, roots: list[int]) -> dict[str, Any]:
        return {"nodes": self.nodes, "edges": self.edges, "roots": roots}


def _linear(g: GraphTape, x: int, name: str, din: int, dout: int, t: int) -> int:
    v = g.op("ViewBackward0", x, shape=[t, din])
    w, b = g.param(f"{name}.weight", [dout, din]), g.param(f"{name}.bias", [dout])
    tw = g.op("TBackward0", w, shape=[din, dout])
    mm = g.op("AddmmBackward0", b, v, tw, shape=[t, dout], saved=2)
    return g.op("ViewBackward0", mm, shape=[1, t, dout])


def _gpt2_block(g: GraphTape, x: int, i: int, d: int, t: int, heads: int) -> int:
    """One pre-LN transformer block as its backward graph (~40 ops + 12 AccumulateGrad leaves)."""
    p = f"h.{i}"
    ln1 = g.op("NativeLayerNormBackward0", x, g.param(f"{p}.ln_1.weight", [d]), g.param(f"{p}.ln_1.bias", [d]),
               shape=[1, t, d], saved=4)
    qkv = _linear(g, ln1, f"{p}.attn.c_attn", d, 3 * d, t)
    split = g.op("SplitBackward0", qkv, shape=[1, t, d])
    q, k, v = (g.op("TransposeBackward0", g.op("ViewBackward0", split, shape=[1, t, heads, d // heads]),
                    shape=[1, heads, t, d // heads]) for _ in range(3))
    kt = g.op("TransposeBackward0", k, shape=[1, heads, d // heads, t])
    s = g.op("UnsafeViewBackward0", g.op("BmmBackward0", g.op("ViewBackward0", g.op("ExpandBackward0", q)),
                                         g.op("ViewBackward0", g.op("ExpandBackward0", kt)), saved=2),
             shape=[1, heads, t, t])
    s = g.op("DivBackward0", s, shape=[1, heads, t, t])
    s = g.op("MaskedFillBackward0", s, None, shape=[1, heads, t, t], saved=1)
    s = g.op("SoftmaxBackward0", s, shape=[1, heads, t, t], saved=1)
    y = g.op("UnsafeViewBackward0", g.op("BmmBackward0", g.op("ViewBackward0", g.op("ExpandBackward0", s)),
                                         g.op("ViewBackward0", g.op("ExpandBackward0", v)), saved=2),
             shape=[1, heads, t, d // heads])
    y = g.op("ViewBackward0", g.op("CloneBackward0", g.op("TransposeBackward0", y)), shape=[1, t, d])
    a = _linear(g, y, f"{p}.attn.c_proj", d, d, t)
    x = g.op("AddBackward0", x, a, shape=[1, t, d])
    ln2 = g.op("NativeLayerNormBackward0", x, g.param(f"{p}.ln_2.weight", [d]), g.param(f"{p}.ln_2.bias", [d]),
               shape=[1, t, d], saved=4)
    h = g.op("GeluBackward0", _linear(g, ln2, f"{p}.mlp.c_fc", d, 4 * d, t), shape=[1, t, 4 * d], saved=1)
    m = _linear(g, h, f"{p}.mlp.c_proj", 4 * d, d, t)
    return g.op("AddBackward0", x, m, shape=[1, t, d])


def gpt2_like_graph(n_blocks: int = 12, d: int = 768, t: int = 32, heads: int = 12) -> dict[str, Any]:
    """A GPT-2-shaped backward graph dict: embeddings, `n_blocks` blocks, ln_f and a tied head."""
    g = GraphTape()
    wte = g.param("wte.weight", [50257, d])
    x = g.op("AddBackward0", g.op("EmbeddingBackward0", wte, shape=[1, t, d], saved=1),
             g.op("EmbeddingBackward0", g.param("wpe.weight", [1024, d]), shape=[1, t, d], saved=1), shape=[1, t, d])
    for i in range(n_blocks):
        x = _gpt2_block(g, x, i, d, t, heads)
    x = g.op("NativeLayerNormBackward0", x, g.param("ln_f.weight", [d]), g.param("ln_f.bias", [d]),
             shape=[1, t, d], saved=4)
    logits = g.op("MmBackward0", g.op("ViewBackward0", x), g.op("TBackward0", wte), shape=[t, 50257], saved=2)
    root = g.op("SumBackward0", logits, shape=[])
    return g.graph([root])


def synthetic_graph(n_nodes: int = 4500) -> dict[str, Any]:
    """A transformer-shaped graph dict with at least `n_nodes` nodes (as many blocks as that takes)."""
    per_block = len(gpt2_like_graph(2)["nodes"]) - len(gpt2_like_graph(1)["nodes"])
    base = len(gpt2_like_graph(0)["nodes"])
    return gpt2_like_graph(max(1, math.ceil((n_nodes - base) / per_block)))


def random_dag(n: int = 4500, edges_per_node: float = 1.3, reach: int = 60, seed: int = 0) -> list[tuple[int, int]]:
    """Random DAG edges u → v (u < v, v within `reach` of u), each node but the last with ≥ 1 out-edge."""
    rng = random.Random(seed)
    edges = [(u, rng.randint(u + 1, min(n - 1, u + reach))) for u in range(n - 1)]
    extra = int(n * edges_per_node) - len(edges)
    for _ in range(max(0, extra)):
        u = rng.randrange(n - 1)
        edges.append((u, rng.randint(u + 1, min(n - 1, u + reach))))
    return edges
