"""Layout, picture-model and SVG cost of the grad_fn graph view (targets: 4,500 nodes ≤ 2 s; GPT-2 lens + layout ≤ 0.5 s).

Run: .venv/bin/python benchmarks/bench_grad_graph.py
Synthetic graphs need no torch; the lens is also timed on GPT-2 small, ResNet-50 and a 4,500-node deep chain
(see models.py), side by side with torchviz + Graphviz `dot` on the same graphs when those are installed
(benchmark only: `pip install torchviz graphviz` and `apt-get install graphviz`).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from models import gpt2_like_graph, random_dag, synthetic_graph
from timing import best_of

from torchlens_widgets.render.grad_graph import grad_graph_model, grad_graph_svg
from torchlens_widgets.render.graph_layout import layered_layout


def layout_only(graph: dict[str, Any]) -> None:
    pos = {nd["id"]: k for k, nd in enumerate(graph["nodes"])}
    layered_layout(len(pos), [(pos[e["src"]], pos[e["dst"]]) for e in graph["edges"]],
                   [7.0 * len(nd["name"]) + 16 for nd in graph["nodes"]])


def row(name: str, graph: dict[str, Any], lens_s: float | None = None) -> None:
    n, e = len(graph["nodes"]), len(graph["edges"])
    lay_s = best_of(lambda: layout_only(graph), repeat=3)
    full_s = best_of(lambda: grad_graph_model(graph, collapse=False, max_nodes=None), repeat=3)
    coll_s = best_of(lambda: grad_graph_model(graph, collapse=True, max_nodes=None), repeat=3)
    full_svg = len(grad_graph_svg(grad_graph_model(graph, collapse=False, max_nodes=None)).encode())
    coll = grad_graph_model(graph, collapse=True, max_nodes=None)
    coll_svg = len(grad_graph_svg(coll).encode())
    lens = f"{lens_s * 1e3:9.1f}" if lens_s is not None else f"{'-':>9}"
    print(f"{name:<22} {n:>6,} {e:>6,} {lens} {lay_s * 1e3:10.1f} {full_s * 1e3:10.1f} {full_svg:>10,} "
          f"{coll_s * 1e3:10.1f} {len(coll['nodes']):>6,} {coll_svg:>9,}")


def torchviz_row(name: str, loss: Any, params: dict[str, Any]) -> None:
    """torchviz + Graphviz `dot` on the same graph: make_dot (graph walk) then dot's layout to SVG."""
    try:
        from torchviz import make_dot
    except ImportError:
        print(f"{name + ' (torchviz)':<22} skipped: pip install torchviz graphviz, apt-get install graphviz")
        return
    if not shutil.which("dot"):
        print(f"{name + ' (torchviz)':<22} skipped: the Graphviz `dot` binary is not installed")
        return
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 100_000))  # make_dot recurses once per graph level
    t0 = time.perf_counter()
    try:
        dot = make_dot(loss, params=params)
    except RecursionError:
        print(f"{name + ' (torchviz)':<22} make_dot failed: RecursionError (it walks the graph recursively)")
        return
    finally:
        sys.setrecursionlimit(old_limit)
    walk_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        svg = dot.pipe(format="svg")
    except Exception as err:  # dot may time out or run out of memory on big graphs
        print(f"{name + ' (torchviz)':<22} make_dot {walk_s * 1e3:.1f} ms; dot failed: {type(err).__name__}")
        return
    dot_s = time.perf_counter() - t0
    height = _svg_height(svg.decode(errors="replace"))
    print(f"{name + ' (torchviz)':<22} {'':>6} {'':>6} {walk_s * 1e3:9.1f} {dot_s * 1e3:10.1f} {'':>10} "
          f"{len(svg):>10,}   (walk, dot layout+SVG; picture {height:,.0f} pt tall)")


def _svg_height(svg: str) -> float:
    import re

    m = re.search(r'<svg[^>]*height="([0-9.]+)pt"', svg)
    return float(m.group(1)) if m else float("nan")


def deep_model(blocks: int) -> tuple[Any, Any]:
    """A real torch graph of 4 nodes a block (mul, sin, add, the parameter): ~4,600 nodes at 1,150 blocks."""
    import torch

    ws = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(8)) for _ in range(blocks)])
    y = torch.randn(8)
    for w in ws:
        y = y + (y * w).sin()
    return y.pow(2).sum(), ws


def lens_rows() -> None:
    try:
        import torch

        from torchlens_widgets.lenses.autograd import grad_graph
    except ImportError as err:  # the autograd lens is optional for this benchmark
        print(f"(lens rows skipped: {err})")
        return
    from models import gpt2_small, resnet50

    torch.set_num_threads(max(1, torch.get_num_threads()))
    for name, make in (("GPT-2 small (lens)", gpt2_small), ("ResNet-50 (lens)", resnet50)):
        model, x = make()
        out = model(x)
        loss = out.float().pow(2).mean()
        lens_s = best_of(lambda loss=loss, model=model: grad_graph(loss, params=model), repeat=3)
        graph = grad_graph(loss, params=model).to_dict()
        row(name, graph, lens_s)
        torchviz_row(name, loss, dict(model.named_parameters()))
    loss, ws = deep_model(1150)
    named = {f"w.{i}": w for i, w in enumerate(ws)}
    lens_s = best_of(lambda: grad_graph(loss, params=named), repeat=3)
    row("deep chain (lens)", grad_graph(loss, params=named).to_dict(), lens_s)
    torchviz_row("deep chain", loss, named)


def main() -> None:
    print("times in ms (best of 3); 'layout' = layered_layout alone; 'model' = focus/collapse + layout + picture")
    print(f"{'graph':<22} {'nodes':>6} {'edges':>6} {'lens':>9} {'layout':>10} {'model':>10} {'SVG bytes':>10} "
          f"{'collapsed':>10} {'nodes':>6} {'SVG bytes':>9}")
    row("GPT-2-sized synthetic", gpt2_like_graph(12))
    row("synthetic 4,500", synthetic_graph(4500))
    n = 4500
    edges = random_dag(n)
    t = best_of(lambda: layered_layout(n, edges), repeat=3)
    print(f"{'random DAG 4,500':<22} {n:>6,} {len(edges):>6,} {'-':>9} {t * 1e3:10.1f}  (layout only)")
    lens_rows()


if __name__ == "__main__":
    main()
