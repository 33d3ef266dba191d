"""Layered (Sugiyama-style) DAG layout in pure Python, so large autograd graphs need no Graphviz.

Four classic phases, each kept linear or near-linear so thousands of nodes lay out in well under a
second: break cycles (DFS back edges are reversed), assign layers (longest path from the sources,
sources then pulled down next to their children), reduce crossings (barycenter sweeps with the best
order kept, plus adjacent swaps on small graphs) and assign x coordinates (each layer solved exactly
as a weighted isotonic regression: nodes as close as possible to their neighbours, order kept, no
overlaps). Edges spanning several layers get dummy points so they bend around nodes; a budget on
dummies keeps adversarial graphs fast (edges beyond it are drawn direct, counted in `unrouted`).
Everything is deterministic: no hashing, no randomness, ties broken by node index.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from dataclasses import dataclass

__all__ = ["Layout", "layered_layout", "count_crossings"]

Point = tuple[float, float]
_PULL = (0.02, 0.1, 0.4, 1.0)  # pull of a neighbour whose branch is 0, 1, 2, 3+ layers long


@dataclass(frozen=True)
class Layout:
    """Node centres, layers and in-layer order, plus one polyline per input edge (src → dst)."""

    x: list[float]
    y: list[float]
    layer: list[int]
    order: list[int]
    widths: list[float]
    node_height: float
    paths: list[list[Point]]
    width: float
    height: float
    n_layers: int
    crossings: int
    reversed_edges: int
    unrouted: int


def _back_edges(n: int, succ: list[list[int]], indeg: list[int]) -> set[tuple[int, int]]:
    """Edges that close a cycle in an iterative DFS (sources first, then by index): reversing them makes a DAG."""
    state = [0] * n  # 0 new, 1 on stack, 2 done
    back: set[tuple[int, int]] = set()
    starts = [v for v in range(n) if indeg[v] == 0] + list(range(n))
    for s in starts:
        if state[s]:
            continue
        state[s] = 1
        stack = [(s, 0)]
        while stack:
            v, i = stack[-1]
            if i < len(succ[v]):
                stack[-1] = (v, i + 1)
                w = succ[v][i]
                if state[w] == 0:
                    state[w] = 1
                    stack.append((w, 0))
                elif state[w] == 1:
                    back.add((v, w))
            else:
                state[v] = 2
                stack.pop()
    return back


def _layers(n: int, pairs: list[tuple[int, int]]) -> list[int]:
    """Longest path from the sources; then each source moves down to just above its highest child."""
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for a, b in pairs:
        succ[a].append(b)
        indeg[b] += 1
    layer = [0] * n
    queue = [v for v in range(n) if indeg[v] == 0]
    remaining = indeg[:]
    topo: list[int] = []
    head = 0
    while head < len(queue):
        v = queue[head]
        head += 1
        topo.append(v)
        lv = layer[v] + 1
        for w in succ[v]:
            if layer[w] < lv:
                layer[w] = lv
            remaining[w] -= 1
            if remaining[w] == 0:
                queue.append(w)
    for v in reversed(topo):
        if indeg[v] == 0 and succ[v]:
            layer[v] = min(layer[w] for w in succ[v]) - 1
    low = min(layer) if layer else 0
    return [lv - low for lv in layer]


def _pair_crossings(upper: list[int], down: list[list[int]], idx: list[int]) -> int:
    """Crossings between one layer and the next: inversions of the lower endpoints in upper order."""
    seq: list[int] = []
    for u in upper:
        ds = down[u]
        if len(ds) == 1:
            seq.append(idx[ds[0]])
        elif ds:
            seq.extend(sorted(idx[d] for d in ds))
    seen: list[int] = []
    c = 0
    for k, p in enumerate(seq):
        c += k - bisect_right(seen, p)
        insort(seen, p)
    return c


def _total_crossings(layers: list[list[int]], down: list[list[int]], idx: list[int]) -> int:
    return sum(_pair_crossings(layers[lv], down, idx) for lv in range(len(layers) - 1))


def count_crossings(lay: Layout, edges: list[tuple[int, int]]) -> int:
    """Crossings among edges joining adjacent layers, from a finished layout (for tests and reports)."""
    n = len(lay.x)
    down: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        a, b = (u, v) if lay.layer[u] < lay.layer[v] else (v, u)
        if lay.layer[b] == lay.layer[a] + 1:
            down[a].append(b)
    layers: list[list[int]] = [[] for _ in range(lay.n_layers)]
    for v in sorted(range(n), key=lambda v: (lay.layer[v], lay.order[v])):
        layers[lay.layer[v]].append(v)
    return _total_crossings(layers, down, lay.order)


def _sweep(layers: list[list[int]], order_range: range, nbrs: list[list[int]], idx: list[int], size: list[int],
           vlayer: list[int], heft: list[int]) -> None:
    """One barycenter pass: reorder each layer by the mean normalized position of its neighbours.

    Siblings that tie (same neighbours) are arranged heaviest in the middle, so a long branch can run
    straight down under its parent with the short side branches (parameter leaves) on either side.
    """
    for lv in order_range:
        lay = layers[lv]
        m = len(lay)
        if m < 2:
            continue
        keyed = []
        for i, v in enumerate(lay):
            ns = nbrs[v]
            if ns:
                s = 0.0
                for u in ns:
                    s += (idx[u] + 0.5) / size[vlayer[u]]
                keyed.append((s / len(ns), i, v))
            else:
                keyed.append(((i + 0.5) / m, i, v))
        keyed.sort()
        out: list[int] = []
        j = 0
        while j < m:
            k = j + 1
            while k < m and keyed[k][0] == keyed[j][0]:
                k += 1
            run = [v for _, _, v in keyed[j:k]]
            if len(run) >= 3:
                by_heft = sorted(run, key=lambda v: -heft[v])  # stable: ties keep their order
                slots: list[int] = [0] * len(run)
                mid = (len(run) - 1) // 2
                for r, v in enumerate(by_heft):
                    slots[mid + ((r + 1) // 2) * (1 if r % 2 else -1) if r else mid] = v
                run = slots
            out.extend(run)
            j = k
        for i, v in enumerate(out):
            lay[i] = v
            idx[v] = i


def _transpose(layers: list[list[int]], up: list[list[int]], down: list[list[int]], idx: list[int],
               max_passes: int = 8) -> None:
    """Swap adjacent nodes while that lowers crossings with both neighbouring layers (small graphs only)."""

    def cross(u: int, v: int) -> int:
        c = 0
        for nb in (up, down):
            for a in nb[u]:
                ia = idx[a]
                for b in nb[v]:
                    if ia > idx[b]:
                        c += 1
        return c

    for _ in range(max_passes):
        improved = False
        for lay in layers:
            for i in range(len(lay) - 1):
                u, v = lay[i], lay[i + 1]
                if cross(v, u) < cross(u, v):
                    lay[i], lay[i + 1] = v, u
                    idx[u], idx[v] = i + 1, i
                    improved = True
        if not improved:
            break


def _isotonic(z: list[float], w: list[float]) -> list[float]:
    """Weighted least-squares non-decreasing fit (pool adjacent violators), O(len)."""
    vals: list[float] = []
    wts: list[float] = []
    cnts: list[int] = []
    for zi, wi in zip(z, w):
        vals.append(zi)
        wts.append(wi)
        cnts.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            v2, w2, c2 = vals.pop(), wts.pop(), cnts.pop()
            tw = wts[-1] + w2
            vals[-1] = (vals[-1] * wts[-1] + v2 * w2) / tw
            wts[-1] = tw
            cnts[-1] += c2
    out: list[float] = []
    for v, c in zip(vals, cnts):
        out.extend([v] * c)
    return out


def _place(layers: list[list[int]], order_range: range, sides: tuple[tuple[list[list[int]], list[float]], ...],
           x: list[float], offs: list[list[float]], stiff: list[float]) -> None:
    """Move each layer as close as possible to the weighted mean x of its neighbours, keeping order and gaps.

    `sides` pairs an adjacency with a per-neighbour pull (long branches pull hard, short side branches
    barely), so the spine of the graph stays straight instead of drifting sideways at every fork.
    """
    for lv in order_range:
        lay = layers[lv]
        off = offs[lv]
        z: list[float] = []
        wt: list[float] = []
        for i, v in enumerate(lay):
            s = 0.0
            k = 0.0
            for nbrs, pull in sides:
                for u in nbrs[v]:
                    p = pull[u]
                    s += p * x[u]
                    k += p
            if k:
                z.append(s / k - off[i])
                wt.append(k * stiff[v])
            else:
                z.append(x[v] - off[i])
                wt.append(0.05)
        fit = _isotonic(z, wt)
        for i, v in enumerate(lay):
            x[v] = fit[i] + off[i]


def _reach(nv: int, layers: list[list[int]], nbrs: list[list[int]], top_down: bool) -> list[int]:
    """Longest path (in layers) from each node through `nbrs`, capped: tells long branches from stubs."""
    depth = [0] * nv
    for lay in (layers if top_down else reversed(layers)):
        for v in lay:
            m = 0
            for u in nbrs[v]:
                if depth[u] + 1 > m:
                    m = depth[u] + 1
            depth[v] = min(m, 8)
    return depth


def layered_layout(
    n: int,
    edges: list[tuple[int, int]],
    widths: list[float] | None = None,
    *,
    node_height: float = 30.0,
    layer_gap: float = 34.0,
    node_gap: float = 16.0,
    edge_gap: float = 8.0,
    sweeps: int = 8,
    max_dummies: int | None = None,
    transpose_limit: int = 600,
) -> Layout:
    """Lay out nodes 0..n-1 top-down so every edge points down; `widths` are node widths (default 80).

    Coordinates start at 0 (left edge of the leftmost node, top of layer 0); x and y are node centres.
    `paths[k]` is the polyline of `edges[k]` from the bottom of its source to the top of its target
    (empty for a self-loop). `max_dummies` caps the bend points for long edges (default 4·n + 1000).
    """
    if n < 0:
        raise ValueError(f"layered_layout needs n >= 0 nodes, got {n}")
    if widths is None:
        widths = [80.0] * n
    elif len(widths) != n:
        raise ValueError(f"widths has {len(widths)} entries for {n} nodes; pass one width per node (or None)")
    for k, (u, v) in enumerate(edges):
        if not (0 <= u < n and 0 <= v < n):
            raise ValueError(f"edge {k} = ({u}, {v}) names a node outside 0..{n - 1}; renumber nodes to 0..n-1 first")
    if max_dummies is None:
        max_dummies = 4 * n + 1000
    if n == 0:
        return Layout([], [], [], [], [], node_height, [[] for _ in edges], 0.0, 0.0, 0, 0, 0, 0)

    # 1. Unique non-loop pairs; reverse DFS back edges so the graph is acyclic.
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    seen: set[tuple[int, int]] = set()
    for u, v in edges:
        if u != v and (u, v) not in seen:
            seen.add((u, v))
            succ[u].append(v)
            indeg[v] += 1
    back = _back_edges(n, succ, indeg)
    pairs: list[tuple[int, int]] = []
    pair_set: set[tuple[int, int]] = set()
    for u in range(n):
        for v in succ[u]:
            p = (v, u) if (u, v) in back else (u, v)
            if p not in pair_set:
                pair_set.add(p)
                pairs.append(p)

    # 2. Layers.
    layer = _layers(n, pairs)
    n_layers = max(layer) + 1

    # 3. Virtual graph: real nodes, then dummies for long edges (shortest spans first, within budget).
    vlayer = layer[:]
    vwidth = [float(w) for w in widths]
    is_dummy = [False] * n
    up: list[list[int]] = [[] for _ in range(n)]
    down: list[list[int]] = [[] for _ in range(n)]
    chains: dict[tuple[int, int], list[int]] = {}
    budget = max_dummies
    unrouted_pairs: set[tuple[int, int]] = set()
    for a, b in sorted(pairs, key=lambda p: (layer[p[1]] - layer[p[0]], p)):
        span = layer[b] - layer[a]
        if span > 1 and span - 1 > budget:
            unrouted_pairs.add((a, b))
            continue
        chain = [a]
        for lv in range(layer[a] + 1, layer[b]):
            d = len(vlayer)
            vlayer.append(lv)
            vwidth.append(0.0)
            is_dummy.append(True)
            up.append([])
            down.append([])
            chain.append(d)
        budget -= span - 1
        chain.append(b)
        for s, t in zip(chain, chain[1:]):
            down[s].append(t)
            up[t].append(s)
        chains[(a, b)] = chain
    nv = len(vlayer)

    # 4. Order within layers: DFS preorder start, barycenter sweeps keeping the best, then swaps.
    layers: list[list[int]] = [[] for _ in range(n_layers)]
    visited = [False] * nv
    for s in range(nv):
        if visited[s] or up[s]:
            continue
        stack = [s]
        while stack:
            v = stack.pop()
            if visited[v]:
                continue
            visited[v] = True
            layers[vlayer[v]].append(v)
            stack.extend(reversed(down[v]))
    idx = [0] * nv
    for lay in layers:
        for i, v in enumerate(lay):
            idx[v] = i
    size = [max(1, len(lay)) for lay in layers]
    above = _reach(nv, layers, up, True)
    below = _reach(nv, layers, down, False)
    best = _total_crossings(layers, down, idx)
    best_layers = [lay[:] for lay in layers]
    stale = 0
    for _ in range(sweeps):
        if best == 0:
            break
        _sweep(layers, range(1, n_layers), up, idx, size, vlayer, below)
        _sweep(layers, range(n_layers - 2, -1, -1), down, idx, size, vlayer, above)
        c = _total_crossings(layers, down, idx)
        if c < best:
            best, best_layers, stale = c, [lay[:] for lay in layers], 0
        else:
            stale += 1
            if stale >= 2:
                break
    layers = best_layers
    for lay in layers:
        for i, v in enumerate(lay):
            idx[v] = i
    if nv <= transpose_limit and best > 0:
        _transpose(layers, up, down, idx)
        best = _total_crossings(layers, down, idx)

    # 5. x coordinates: packed start, then alternating down/up placement, one final balanced pass.
    x = [0.0] * nv
    offs: list[list[float]] = []
    for lay in layers:
        off = [0.0] * len(lay)
        for i in range(1, len(lay)):
            a, b = lay[i - 1], lay[i]
            gap = node_gap if not (is_dummy[a] or is_dummy[b]) else edge_gap
            off[i] = off[i - 1] + (vwidth[a] + vwidth[b]) / 2 + gap
        offs.append(off)
        mid = off[-1] / 2 if off else 0.0
        for i, v in enumerate(lay):
            x[v] = off[i] - mid
    # A node's pull on a neighbour, and its own resistance to moving, grow with the length of the branch
    # behind it: the long spine stays straight and short side branches (parameter leaves) yield.
    pull_up = [_PULL[min(a, 3)] for a in above]  # a parent's pull on its child
    pull_down = [_PULL[min(b, 3)] for b in below]  # a child's pull on its parent
    stiff_down = [(4.0 if d else 1.0) * p for d, p in zip(is_dummy, pull_down)]
    stiff_up = [(4.0 if d else 1.0) * p for d, p in zip(is_dummy, pull_up)]
    stiff_both = [a + b for a, b in zip(stiff_down, stiff_up)]
    for _ in range(3):
        _place(layers, range(1, n_layers), ((up, pull_up),), x, offs, stiff_down)
        _place(layers, range(n_layers - 2, -1, -1), ((down, pull_down),), x, offs, stiff_up)
    _place(layers, range(n_layers), ((up, pull_up), (down, pull_down)), x, offs, stiff_both)
    left = min(x[v] - vwidth[v] / 2 for v in range(nv))
    right = max(x[v] + vwidth[v] / 2 for v in range(nv))
    x = [xv - left for xv in x]
    pitch = node_height + layer_gap
    half = node_height / 2
    vy = [lv * pitch + half for lv in vlayer]

    # 6. Edge polylines (bottom of source → through dummies, vertical inside each band → top of target).
    paths: list[list[Point]] = []
    for u, v in edges:
        if u == v:
            paths.append([])
            continue
        flipped = (u, v) in back or (u, v) not in pair_set
        a, b = (v, u) if flipped else (u, v)
        chain = chains.get((a, b), [a, b])
        pts: list[Point] = [(x[a], vy[a] + half)]
        for d in chain[1:-1]:
            pts.append((x[d], vy[d] - half))
            pts.append((x[d], vy[d] + half))
        pts.append((x[b], vy[b] - half))
        if flipped:
            pts.reverse()
        paths.append(pts)

    return Layout(
        x=x[:n],
        y=vy[:n],
        layer=layer,
        order=idx[:n],
        widths=[float(w) for w in widths],
        node_height=node_height,
        paths=paths,
        width=right - left,
        height=n_layers * pitch - layer_gap,
        n_layers=n_layers,
        crossings=best,
        reversed_edges=len(back),
        unrouted=len(unrouted_pairs),
    )
