"""grad_fn graph picture: view transforms, geometry once (layered layout), drawn twice (SVG here, live in JS).

Input is the autograd lens's graph dict (`GradGraph.to_dict()`): nodes with id, name, kind ("op",
"leaf", "custom", "other"), param, shape, saved tensors, hooks and seq; edges src → dst in the
direction gradients flow (roots on top, AccumulateGrad leaves at the bottom); roots. `focus` keeps N
hops around a node, `collapse_repeats` draws one repeated block once (×N) and folds the others into a
group node, `grad_graph_model` lays the result out; `grad_graph_svg` / `grad_graph_text` are the static
fallbacks. No torch imports here.

Model schema (version 1), shared with the TypeScript widget:
  {kind: "grad_graph", version: 1, width, height, node_h,
   nodes: [{id, name, label, sub, kind, cls, x, y, w, h, layer, param, shape, seq,
            hooks: {pre, post}, saved: [{name, shape, dtype, nbytes, storage_nbytes, freed, alias, leaf, tensor}],
            saved_nbytes, freed_nbytes, hidden,
            group: null | {prefix, indices, repeat, representative, members, saved_nbytes},
            block: null | {group, prefix, index, repeat}}],
   edges: [{src, dst, slot, points: [[x, y], ...]}],
   roots: [id], groups: [{id, name, label, repeat, representative, box: {x, y, w, h}}],
   steps: [{step, node, orig, name, leaves: [id], grads: [shape | null], freed: [id], seconds}],
   stats: {nodes, edges, roots, kinds: {kind: count}, saved_count, saved_nbytes, activation_nbytes,
           freed_count, shown_nodes, shown_edges, layers},
   notes: [str]}
x, y, w, h are the node box (top-left corner, size) in SVG user units; an edge's points run from the
bottom centre of src to the top centre of dst (straight segments). `cls` is the space-separated CSS
class list ("k-op", "k-leaf", "k-custom", "k-other", "k-group" plus "freed", "part-freed", "hooked",
"center", "boundary", "rep"). `hidden` counts edges to nodes left out of the view; `block` marks the
nodes of a representative block, `group` the node standing for the other repeats. In `steps`, `node`
is the shown node that ran (a group id if it ran inside a collapsed block, null if out of view) and
`orig` the node id in the input graph; `freed` are shown nodes whose saved tensors were freed then.
Saved entries' `nbytes` are the tensor's own bytes; `stats.saved_nbytes` is what the held (not freed)
saved tensors keep alive, each storage once (lens keys "tensor" and "storage_nbytes"), equal to the
lens's ``total_saved_bytes()``; `stats.activation_nbytes` leaves out leaf storages (``include_leaves=False``).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, deque
from collections.abc import Iterable
from typing import Any

from .graph_layout import layered_layout
from .markup import esc as _esc
from .theme import STYLE as THEME_STYLE

__all__ = ["focus", "collapse_repeats", "grad_graph_model", "grad_graph_svg", "grad_graph_text", "check_graph"]

NODE_H = 34
LAYER_GAP = 28
NODE_GAP = 14
MARGIN = 16
CHAR_W = 6.7  # px per character of 11 px monospace
MAX_LABEL = 34
KINDS = ("op", "leaf", "custom", "other")
_BLOCK_RE = re.compile(r"^(?P<prefix>.+?)\.(?P<index>\d+)\.(?P<rest>.+)$")

Graph = dict[str, Any]


# ----------------------------------------------------------------------------------------------------------
# Input checking


def check_graph(graph: Graph) -> None:
    """Raise ValueError naming the first problem if `graph` is not a grad_fn graph dict."""
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list) or not isinstance(graph.get("edges"), list):
        raise ValueError("expected a grad_fn graph dict {'nodes': [...], 'edges': [...], 'roots': [...]}, "
                         "e.g. torchlens_widgets.grad_graph(loss).to_dict()")
    ids: set[int] = set()
    for k, nd in enumerate(graph["nodes"]):
        if not isinstance(nd, dict) or not isinstance(nd.get("id"), int) or not isinstance(nd.get("name"), str):
            raise ValueError(f"node {k} needs an int 'id' and a str 'name', got {nd!r:.80}")
        if nd["id"] in ids:
            raise ValueError(f"node id {nd['id']} appears twice; node ids must be unique")
        ids.add(nd["id"])
    for k, e in enumerate(graph["edges"]):
        if not isinstance(e, dict) or e.get("src") not in ids or e.get("dst") not in ids:
            raise ValueError(f"edge {k} = {e!r:.80} must join two node ids of the graph ('src' and 'dst')")
    for r in graph.get("roots", []):
        if r not in ids:
            raise ValueError(f"root {r!r} is not a node id of the graph")


def _node_defaults(nd: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "op", "param": None, "shape": None, "saved": [], "hooks": {"pre": 0, "post": 0}, "seq": None}
    out.update(nd)
    if out["kind"] not in KINDS and out["kind"] != "group":
        out["kind"] = "other"
    return out


# ----------------------------------------------------------------------------------------------------------
# View transforms (graph dict → graph dict)


def _subgraph(graph: Graph, keep: set[int], note: str) -> Graph:
    """The nodes in `keep` (input order kept) with edges among them; `hidden` counts edges cut away."""
    hidden: Counter[int] = Counter()
    edges = []
    for e in graph["edges"]:
        a, b = e["src"] in keep, e["dst"] in keep
        if a and b:
            edges.append(e)
        elif a:
            hidden[e["src"]] += 1
        elif b:
            hidden[e["dst"]] += 1
    nodes = [dict(nd, hidden=nd.get("hidden", 0) + hidden[nd["id"]]) for nd in graph["nodes"] if nd["id"] in keep]
    out = dict(graph, nodes=nodes, edges=edges, roots=[r for r in graph.get("roots", []) if r in keep])
    out["notes"] = [*graph.get("notes", []), note]
    return out


def focus(graph: Graph, center: int, hops: int) -> Graph:
    """The subgraph within `hops` undirected steps of node `center`; cut nodes count their hidden edges."""
    check_graph(graph)
    if not isinstance(hops, int) or hops < 0:
        raise ValueError(f"hops must be an int >= 0, got {hops!r}")
    names = {nd["id"]: nd["name"] for nd in graph["nodes"]}
    if center not in names:
        raise ValueError(f"focus node {center!r} is not in the graph; pick one of the node ids in graph['nodes']")
    nbrs: dict[int, list[int]] = {i: [] for i in names}
    for e in graph["edges"]:
        nbrs[e["src"]].append(e["dst"])
        nbrs[e["dst"]].append(e["src"])
    dist = {center: 0}
    queue = deque([center])
    while queue:
        v = queue.popleft()
        if dist[v] == hops:
            continue
        for u in nbrs[v]:
            if u not in dist:
                dist[u] = dist[v] + 1
                queue.append(u)
    out = _subgraph(graph, set(dist), f"focus: {len(dist)} of {len(names)} nodes within {hops} hops of "
                                      f"#{center} {names[center]}")
    out["focus"] = {"center": center, "hops": hops}
    return out


def _reach(start: Iterable[int], adj: dict[int, list[int]], allowed: Any) -> set[int]:
    """Nodes reachable from `start` through `adj`, visiting only nodes for which allowed(node) is true."""
    seen = set(start)
    stack = list(seen)
    while stack:
        v = stack.pop()
        for u in adj[v]:
            if u not in seen and allowed(u):
                seen.add(u)
                stack.append(u)
    return seen


def _wl_signature(members: set[int], nodes: dict[int, dict[str, Any]], succ: dict[int, list[int]],
                  rest: dict[int, str], rounds: int = 3) -> tuple[str, ...]:
    """Weisfeiler-Lehman colour multiset of a block's induced subgraph (names, kinds, param suffixes, shapes)."""
    label = {}
    for v in members:
        nd = nodes[v]
        label[v] = f"{nd['name']}|{nd.get('kind')}|{rest.get(v, '')}|{nd.get('shape')}"
    for _ in range(rounds):
        new = {}
        for v in members:
            kids = sorted(label[u] for u in succ[v] if u in members)
            raw = label[v] + "(" + ",".join(kids) + ")"
            new[v] = hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()
        label = new
    return tuple(sorted(label.values()))


def _blocks_of(graph: Graph) -> tuple[dict[str, dict[int, set[int]]], list[str]]:
    """Member nodes of each numbered block ("h.3.…" parameters), per prefix; plus notes on what failed.

    A block's core is every node on a path between two ops that consume its parameters (ancestors ∩
    descendants of those consumers), plus its parameter leaves; it then grows upwards by nodes whose
    every child is in the block or fed by it (the block's input, e.g. a residual add's skip operand),
    one layer at a time and only by node names that all blocks of the prefix gain in that round (so
    the head above the last block is not swallowed).
    """
    nodes = {nd["id"]: nd for nd in graph["nodes"]}
    succ: dict[int, list[int]] = {i: [] for i in nodes}
    pred: dict[int, list[int]] = {i: [] for i in nodes}
    for e in graph["edges"]:
        succ[e["src"]].append(e["dst"])
        pred[e["dst"]].append(e["src"])
    leaves: dict[str, dict[int, list[int]]] = {}
    for nd in graph["nodes"]:
        m = _BLOCK_RE.match(nd.get("param") or "")
        if m:
            leaves.setdefault(m["prefix"], {}).setdefault(int(m["index"]), []).append(nd["id"])
    # Topological rank bounds the reachability searches to the block's own stretch of the graph.
    indeg = {i: len(pred[i]) for i in nodes}
    queue = deque(i for i in nodes if indeg[i] == 0)
    rank: dict[int, int] = {}
    while queue:
        v = queue.popleft()
        rank[v] = len(rank)
        for u in succ[v]:
            indeg[u] -= 1
            if indeg[u] == 0:
                queue.append(u)
    for i in nodes:  # nodes on a cycle (not expected in autograd graphs) get ranks last
        rank.setdefault(i, len(rank))
    out: dict[str, dict[int, set[int]]] = {}
    notes: list[str] = []
    for prefix, by_index in sorted(leaves.items()):
        if len(by_index) < 2:
            continue
        blocks: dict[int, set[int]] = {}
        for i, ls in sorted(by_index.items()):
            consumers = {p for leaf in ls for p in pred[leaf]}
            if not consumers:
                continue
            lo, hi = min(rank[c] for c in consumers), max(rank[c] for c in consumers)
            down = _reach(consumers, succ, lambda u, hi=hi: rank[u] <= hi)
            up = _reach(consumers, pred, lambda u, lo=lo: rank[u] >= lo)
            blocks[i] = (down & up) | set(ls)
        owner: dict[int, int] = {}
        clash = False
        for i, mem in blocks.items():
            for v in mem:
                if owner.setdefault(v, i) != i:
                    clash = True
        if clash or len(blocks) < 2:
            if clash:
                notes.append(f"collapse: blocks of '{prefix}.*' share nodes; not collapsed")
            continue
        for _ in range(len(nodes)):  # grow upwards, one consistent layer of parents per round
            cands: dict[int, list[int]] = {}
            for i, mem in blocks.items():
                cands[i] = sorted({
                    p for v in mem for p in pred[v]
                    if p not in owner and succ[p] and all(u in mem or any(q in mem for q in pred[u]) for u in succ[p])
                })
            common: Counter[str] | None = None
            for i in blocks:
                c = Counter(nodes[p]["name"] for p in cands[i])
                common = c if common is None else common & c
            if not common:
                break
            for i, mem in blocks.items():
                budget = Counter(common)
                for p in cands[i]:
                    if budget[nodes[p]["name"]] > 0:
                        budget[nodes[p]["name"]] -= 1
                        mem.add(p)
                        owner[p] = i
        out[prefix] = blocks
    return out, notes


def collapse_repeats(graph: Graph) -> Graph:
    """Draw one repeated block once (×N) and fold the other repeats into a single group node.

    Blocks come from parameter names `prefix.<i>.rest` ("h.0.attn.c_attn.weight"); consecutive blocks
    whose induced subgraphs have equal Weisfeiler-Lehman signatures form a run; the run's first block
    stays (its nodes get a `block` marker), the rest become one node of kind "group". Edges into and out
    of the folded blocks are kept, rerouted to the group node. Nothing repeats → the graph is unchanged.
    """
    check_graph(graph)
    blocks, notes = _blocks_of(graph)
    nodes = {nd["id"]: nd for nd in graph["nodes"]}
    succ: dict[int, list[int]] = {i: [] for i in nodes}
    for e in graph["edges"]:
        succ[e["src"]].append(e["dst"])
    next_id = max(nodes, default=-1) + 1
    fold: dict[int, int] = {}  # folded node → group id
    rep_of: dict[int, dict[str, Any]] = {}  # representative node → block marker
    groups: list[dict[str, Any]] = []
    for prefix, by_index in blocks.items():
        rest: dict[int, str] = {}
        for v in set().union(*by_index.values()):
            m = _BLOCK_RE.match(nodes[v].get("param") or "")
            if m:
                rest[v] = m["rest"]
        sig = {i: _wl_signature(mem, nodes, succ, rest) for i, mem in by_index.items()}
        order = sorted(by_index)
        runs: list[list[int]] = []
        for i in order:
            if runs and i == runs[-1][-1] + 1 and sig[i] == sig[runs[-1][0]]:
                runs[-1].append(i)
            else:
                runs.append([i])
        if all(len(r) < 2 for r in runs):
            notes.append(f"collapse: the {len(order)} '{prefix}.*' blocks differ in structure; not collapsed")
            continue
        for run in runs:
            if len(run) < 2:
                continue
            gid = next_id
            next_id += 1
            folded = set().union(*(by_index[i] for i in run[1:]))
            span = f"{prefix}.{run[1]}" if len(run) == 2 else f"{prefix}.{run[1]}–{run[-1]}"
            saved = sum(int(s.get("nbytes") or 0) for v in folded for s in nodes[v].get("saved") or [])
            info = {"prefix": prefix, "indices": run[1:], "repeat": len(run),
                    "representative": f"{prefix}.{run[0]}", "members": len(folded), "saved_nbytes": saved}
            groups.append({"id": gid, "name": span, "kind": "group", "param": None, "shape": None, "saved": [],
                           "hooks": {"pre": 0, "post": 0}, "seq": None, "group": info,
                           "hidden": sum(nodes[v].get("hidden", 0) for v in folded)})
            for v in folded:
                fold[v] = gid
            for v in by_index[run[0]]:
                rep_of[v] = {"group": gid, "prefix": prefix, "index": run[0], "repeat": len(run)}
            plural = "s" if len(run) > 2 else ""
            notes.append(f"collapsed {span} ({len(run) - 1} block{plural} with the same structure as "
                         f"{prefix}.{run[0]}, {len(folded)} nodes) into one group node; {prefix}.{run[0]} "
                         f"is drawn once, ×{len(run)}")
    if not fold:
        return dict(graph, notes=[*graph.get("notes", []), *notes]) if notes else graph
    out_nodes: list[dict[str, Any]] = []
    placed: set[int] = set()
    for nd in graph["nodes"]:
        v = nd["id"]
        if v in fold:
            gid = fold[v]
            if gid not in placed:  # the group node takes the place of its first member
                placed.add(gid)
                out_nodes.append(next(g for g in groups if g["id"] == gid))
        else:
            out_nodes.append(dict(nd, block=rep_of[v]) if v in rep_of else nd)
    edges = []
    seen: set[tuple[int, int]] = set()
    for e in graph["edges"]:
        a, b = fold.get(e["src"], e["src"]), fold.get(e["dst"], e["dst"])
        if a == b or (a, b) in seen:
            continue
        seen.add((a, b))
        edges.append({"src": a, "dst": b, "slot": e.get("slot", 0)})
    roots = list(dict.fromkeys(fold.get(r, r) for r in graph.get("roots", [])))
    return dict(graph, nodes=out_nodes, edges=edges, roots=roots, notes=[*graph.get("notes", []), *notes],
                folded=fold)


def _truncate(graph: Graph, max_nodes: int) -> Graph:
    """Keep the `max_nodes` nodes nearest the roots (breadth-first, then input order)."""
    succ: dict[int, list[int]] = {nd["id"]: [] for nd in graph["nodes"]}
    for e in graph["edges"]:
        succ[e["src"]].append(e["dst"])
    order: list[int] = []
    seen: set[int] = set()
    starts = list(graph.get("roots", [])) + [nd["id"] for nd in graph["nodes"]]
    for s in starts:
        if len(order) >= max_nodes:
            break
        if s in seen:
            continue
        seen.add(s)
        queue = deque([s])
        while queue and len(order) < max_nodes:
            v = queue.popleft()
            order.append(v)
            for u in succ[v]:
                if u not in seen:
                    seen.add(u)
                    queue.append(u)
    n = len(graph["nodes"])
    return _subgraph(graph, set(order), f"truncated: showing the {len(order):,} of {n:,} nodes nearest the roots; "
                                        "focus on a node (focus_node=, hops=) to see the rest")


# ----------------------------------------------------------------------------------------------------------
# The picture model


def _fmt_bytes(n: int) -> str:
    scaled = n / 1024.0
    for unit in ("KiB", "MiB", "GiB"):
        if scaled < 1024 or unit == "GiB":
            return f"{n} B" if n < 1024 else f"{scaled:.1f} {unit}"
        scaled /= 1024
    return f"{n} B"  # pragma: no cover


def _shape_text(shape: Any) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]" if isinstance(shape, list) else ""


def _clip(s: str, n: int = MAX_LABEL) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _describe(nd: dict[str, Any]) -> tuple[str, str, list[str]]:
    """Label, second line and CSS classes of one node."""
    kind = nd["kind"]
    cls = [f"k-{kind}"]
    saved = nd.get("saved") or []
    if kind == "group":
        g = nd["group"]
        label = f"{nd['name']} ×{len(g['indices'])}"
        sub = f"like {g['representative']} · {g['members']} nodes"
    else:
        label = nd["param"] if kind == "leaf" and nd.get("param") else nd["name"]
        parts = [_shape_text(nd.get("shape"))] if nd.get("shape") is not None else []
        if saved:
            parts.append(f"saved {_fmt_bytes(sum(int(s.get('nbytes') or 0) for s in saved))}")
        sub = " · ".join(p for p in parts if p)
    n_freed = sum(1 for s in saved if s.get("freed"))
    if saved and n_freed == len(saved):
        cls.append("freed")
    elif n_freed:
        cls.append("part-freed")
    hooks = nd.get("hooks") or {}
    if hooks.get("pre", 0) or hooks.get("post", 0):
        cls.append("hooked")
    if nd.get("hidden", 0):
        cls.append("boundary")
    if nd.get("block"):
        cls.append("rep")
    return _clip(label), _clip(sub, MAX_LABEL + 8), cls


def _r(v: float) -> float:
    return round(v, 1)


def _stats(graph: Graph) -> dict[str, Any]:
    kinds: Counter[str] = Counter(_node_defaults(nd)["kind"] for nd in graph["nodes"])
    saved = [s for nd in graph["nodes"] for s in nd.get("saved") or []]
    return {
        "nodes": len(graph["nodes"]),
        "edges": len(graph["edges"]),
        "roots": len(graph.get("roots", [])),
        "kinds": {k: kinds[k] for k in sorted(kinds)},
        "saved_count": len(saved),
        "saved_nbytes": _distinct_nbytes(saved),
        "activation_nbytes": _distinct_nbytes([s for s in saved if not s.get("leaf")]),
        "freed_count": sum(1 for s in saved if s.get("freed")),
    }


def _distinct_nbytes(saved: list[dict[str, Any]]) -> int:
    """Bytes the held saved tensors keep alive, each storage once (lens keys "tensor", "storage_nbytes").

    The same rule as the lens's ``total_saved_bytes()``: freed entries count nothing, entries with one
    "tensor" number share a storage and count its bytes once; without "storage_nbytes", "nbytes" is used.
    """
    seen: set[int] = set()
    total = 0
    for k, s in enumerate(saved):
        if s.get("freed"):
            continue
        tid = s.get("tensor")
        key = -1 - k if tid is None else int(tid)
        if key not in seen:
            seen.add(key)
            size = s.get("storage_nbytes")
            total += int((s.get("nbytes") if size is None else size) or 0)
    return total


def _steps(recording: dict[str, Any], full: Graph, shown: Graph) -> list[dict[str, Any]]:
    """Per recorded backward step: the shown node that ran, leaves that got .grad, saved tensors freed.

    `recording` is the backward recorder's dict (order, seconds, grads, freed_at, leaves; keys may be
    strings as JSON has them). Without `leaves`, a step's leaves are the AccumulateGrad node that ran.
    """
    nodes = {nd["id"]: nd for nd in full["nodes"]}
    shown_ids = {nd["id"] for nd in shown["nodes"]}
    fold: dict[int, int] = shown.get("folded", {})

    def to_shown(v: int) -> int | None:
        v = fold.get(v, v)
        return v if v in shown_ids else None

    order = recording.get("order")
    if not isinstance(order, list):
        raise ValueError("recording needs an 'order' list of node ids (the backward recorder's to_dict())")
    seconds = recording.get("seconds") or []
    grads = {int(k): v for k, v in (recording.get("grads") or {}).items()}
    leaves_at = {int(k): [int(u) for u in v] for k, v in (recording.get("leaves") or {}).items()}
    freed_at: dict[int, list[int]] = {}
    for k, step in (recording.get("freed_at") or {}).items():
        freed_at.setdefault(int(step), []).append(int(k))
    steps = []
    for k, v in enumerate(order):
        if v not in nodes:
            raise ValueError(f"recording step {k} ran node {v!r}, which is not in the graph; "
                             "pass the graph and the recording of the same backward call")
        sv = to_shown(v)
        freed = sorted({s for u in freed_at.get(k, []) if u in nodes and (s := to_shown(u)) is not None})
        wrote = leaves_at.get(k, []) if recording.get("leaves") is not None else ([v] if nodes[v].get("kind") == "leaf" else [])
        leaves = list(dict.fromkeys(s for u in wrote if u in nodes and (s := to_shown(u)) is not None))
        steps.append({
            "step": k,
            "node": sv,
            "orig": v,
            "name": nodes[v]["name"],
            "leaves": leaves,
            "grads": grads.get(v, []),
            "freed": freed,
            "seconds": float(seconds[k]) if k < len(seconds) else None,
        })
    return steps


def grad_graph_model(
    graph: Graph,
    recording: dict[str, Any] | None = None,
    *,
    focus_node: int | None = None,
    hops: int | None = None,
    collapse: bool = True,
    max_nodes: int | None = 2000,
) -> dict[str, Any]:
    """Focus, collapse and truncate the graph as asked, lay it out and describe the picture (schema above)."""
    check_graph(graph)
    g: Graph = dict(graph, nodes=[_node_defaults(nd) for nd in graph["nodes"]])
    if focus_node is not None:
        g = focus(g, focus_node, 3 if hops is None else hops)
    elif hops is not None:
        raise ValueError("hops= needs focus_node= (the node to centre the view on)")
    if collapse:
        g = collapse_repeats(g)
    if max_nodes is not None and len(g["nodes"]) > max_nodes:
        g = _truncate(g, max_nodes)
    ids = [nd["id"] for nd in g["nodes"]]
    pos = {v: k for k, v in enumerate(ids)}
    described = [_describe(nd) for nd in g["nodes"]]
    widths = [max(56.0, min(260.0, max(len(lab), len(sub) * 0.82) * CHAR_W + 16)) for lab, sub, _ in described]
    lay = layered_layout(len(ids), [(pos[e["src"]], pos[e["dst"]]) for e in g["edges"]], widths,
                         node_height=NODE_H, layer_gap=LAYER_GAP, node_gap=NODE_GAP)
    center = (g.get("focus") or {}).get("center")
    nodes = []
    for k, nd in enumerate(g["nodes"]):
        label, sub, cls = described[k]
        if nd["id"] == center:
            cls = [*cls, "center"]
        saved = [dict(s) for s in nd.get("saved") or []]
        nodes.append({
            "id": nd["id"], "name": nd["name"], "label": label, "sub": sub, "kind": nd["kind"], "cls": " ".join(cls),
            "x": _r(MARGIN + lay.x[k] - widths[k] / 2), "y": _r(MARGIN + lay.y[k] - NODE_H / 2),
            "w": _r(widths[k]), "h": NODE_H, "layer": lay.layer[k],
            "param": nd.get("param"), "shape": nd.get("shape"), "seq": nd.get("seq"),
            "hooks": dict(nd.get("hooks") or {"pre": 0, "post": 0}), "saved": saved,
            "saved_nbytes": (nd["group"]["saved_nbytes"] if nd.get("group")
                             else sum(int(s.get("nbytes") or 0) for s in saved)),
            "freed_nbytes": sum(int(s.get("nbytes") or 0) for s in saved if s.get("freed")),
            "hidden": nd.get("hidden", 0), "group": nd.get("group"), "block": nd.get("block"),
        })
    edges = [
        {"src": e["src"], "dst": e["dst"], "slot": e.get("slot", 0),
         "points": [[_r(MARGIN + px), _r(MARGIN + py)] for px, py in path]}
        for e, path in zip(g["edges"], lay.paths)
    ]
    groups = []
    for nd in nodes:
        if nd["group"] is None:
            continue
        members = [m for m in nodes if m["block"] and m["block"]["group"] == nd["id"]]
        box = None
        if members:
            x0 = min(m["x"] for m in members) - 6
            y0 = min(m["y"] for m in members) - 6
            box = {"x": _r(x0), "y": _r(y0), "w": _r(max(m["x"] + m["w"] for m in members) + 6 - x0),
                   "h": _r(max(m["y"] + m["h"] for m in members) + 6 - y0)}
        info = nd["group"]
        groups.append({"id": nd["id"], "name": nd["name"], "repeat": info["repeat"],
                       "representative": info["representative"],
                       "label": f"{info['representative']} ×{info['repeat']}", "box": box})
    notes = list(g.get("notes", []))
    if lay.reversed_edges:
        notes.append(f"layout: {lay.reversed_edges} edges close a cycle and point upwards")
    if lay.unrouted:
        notes.append(f"layout: {lay.unrouted} very long edges are drawn straight")
    stats = _stats(graph)
    stats.update(shown_nodes=len(nodes), shown_edges=len(edges), layers=lay.n_layers)
    return {
        "kind": "grad_graph",
        "version": 1,
        "width": _r(lay.width + 2 * MARGIN),
        "height": _r(lay.height + 2 * MARGIN),
        "node_h": NODE_H,
        "nodes": nodes,
        "edges": edges,
        "roots": list(g.get("roots", [])),
        "groups": groups,
        "steps": _steps(recording, graph, g) if recording is not None else [],
        "stats": stats,
        "notes": notes,
    }


# ----------------------------------------------------------------------------------------------------------
# Static renderings

_STYLE = (
    ".tlw-grad text{text-anchor:middle;fill:var(--tlw-fg)}"
    ".tlw-grad .e{fill:none;stroke:var(--tlw-line);stroke-width:1.2;marker-end:url(#tlw-grad-arrow)}"
    ".tlw-grad .arrow{fill:var(--tlw-line)}"
    ".tlw-grad .n rect{stroke:var(--tlw-line);stroke-width:1}"
    ".tlw-grad .k-op rect{fill:var(--tlw-tint1)}.tlw-grad .k-leaf rect{fill:var(--tlw-tint3)}"
    ".tlw-grad .k-custom rect{fill:var(--tlw-tint2)}.tlw-grad .k-other rect{fill:var(--tlw-bg2)}"
    ".tlw-grad .k-group rect{fill:var(--tlw-tint5);stroke:var(--tlw-cat5);stroke-width:2;stroke-dasharray:6 2}"
    ".tlw-grad .freed rect{fill:var(--tlw-bg);stroke:var(--tlw-line);stroke-dasharray:3 2}"
    ".tlw-grad .freed text,.tlw-grad .part-freed .s{fill:var(--tlw-fg2)}"
    ".tlw-grad .hooked rect{stroke:var(--tlw-warn);stroke-width:2.5;stroke-dasharray:5 2}"
    ".tlw-grad .center rect{stroke:var(--tlw-fg);stroke-width:2.5}"
    ".tlw-grad .s{font-size:10px;fill:var(--tlw-fg2)}"
    ".tlw-grad .hid{font-size:10px;fill:var(--tlw-warn);text-anchor:start}"
    ".tlw-grad .grp{fill:none;stroke:var(--tlw-cat5);stroke-dasharray:8 4}"
    ".tlw-grad .badge{fill:var(--tlw-fg);font-weight:bold;text-anchor:start}"
    ".tlw-grad .note{fill:var(--tlw-warn);text-anchor:start}"
    ".tlw-grad .lg rect{stroke:var(--tlw-line);stroke-width:1}"
    ".tlw-grad .lg text{text-anchor:start;fill:var(--tlw-fg2)}"
)

#: Legend entries (the CSS classes of the sample box, what they mean), in drawing order; an entry shows
#: when the picture has a node of that class ("sel" always: the live view selects on click).
LEGEND = (
    ("k-op", "backward of an op"),
    ("k-leaf", "leaf (AccumulateGrad: a parameter/input)"),
    ("k-custom", "custom autograd.Function"),
    ("k-other", "other node"),
    ("k-group", "repeated block, drawn once"),
    ("freed", "saved tensors freed"),
    ("hooked", "has hooks (dashed outline)"),
    ("center", "focus centre"),
)
LEGEND_ROW = 18
LEGEND_W = 18 + max(len(label) for _, label in LEGEND) * CHAR_W + 14 + 2 * MARGIN  # the picture is never narrower


def legend_items(model: dict[str, Any], width: float) -> tuple[list[dict[str, Any]], float]:
    """The legend's entries laid out in rows under the notes (boxes 14×10, then the label); its height."""
    present = {c for nd in model["nodes"] for c in nd["cls"].split()}
    top = model["height"] + 16 * len(model["notes"]) + 4
    x, y, items = float(MARGIN), top, []
    for cls, label in LEGEND:
        if cls not in present:
            continue
        item_w = 18 + len(label) * CHAR_W + 14
        if x > MARGIN and x + item_w > width - MARGIN:
            x, y = float(MARGIN), y + LEGEND_ROW
        items.append({"cls": cls, "label": label, "x": x, "y": y})
        x += item_w
    return items, (y + LEGEND_ROW - top + 4) if items else 0.0


def _n(v: float) -> str:
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s




def grad_graph_svg(model: dict[str, Any]) -> str:
    """Static SVG of a grad_fn graph model: the same boxes and edges the live widget draws."""
    notes = model["notes"]
    w = max(model["width"], max((len(n) for n in notes), default=0) * CHAR_W * 0.92 + 2 * MARGIN, LEGEND_W)
    legend, legend_h = legend_items(model, w)
    h = model["height"] + 16 * len(notes) + legend_h
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(w)}" height="{_n(h)}" viewBox="0 0 {_n(w)} {_n(h)}" '
        'class="tlw-grad tlw-theme" font-family="monospace" font-size="11" style="background:var(--tlw-bg)">',
        f"<style>{THEME_STYLE}{_STYLE}</style>",
        '<defs><marker id="tlw-grad-arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto"><path class="arrow" d="M0,0L8,4L0,8z"/></marker></defs>',
    ]
    for grp in model["groups"]:
        b = grp["box"]
        if b:
            out.append(f'<rect class="grp" x="{_n(b["x"])}" y="{_n(b["y"])}" width="{_n(b["w"])}" '
                       f'height="{_n(b["h"])}" rx="8"/>')
            out.append(f'<text class="badge" x="{_n(b["x"] + 4)}" y="{_n(b["y"] - 3)}">{_esc(grp["label"])}</text>')
    for e in model["edges"]:
        pts = e["points"]
        if len(pts) >= 2:
            d = "M" + "L".join(f"{_n(px)} {_n(py)}" for px, py in pts)
            out.append(f'<path class="e" d="{d}"/>')
    for nd in model["nodes"]:
        x, y, nw, nh = nd["x"], nd["y"], nd["w"], nd["h"]
        cx = x + nw / 2
        title = [f"#{nd['id']} {nd['name']}"]
        if nd["param"]:
            title.append(nd["param"])
        if nd["saved"]:
            n_freed = sum(1 for s in nd["saved"] if s.get("freed"))
            title.append(f"{len(nd['saved'])} saved ({_fmt_bytes(nd['saved_nbytes'])}), {n_freed} freed")
        out.append(f'<g class="n {nd["cls"]}" id="n{nd["id"]}"><title>{_esc(" · ".join(title))}</title>'
                   f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(nw)}" height="{_n(nh)}" rx="4"/>')
        ty = y + (14 if nd["sub"] else 21)
        out.append(f'<text x="{_n(cx)}" y="{_n(ty)}">{_esc(nd["label"])}</text>')
        if nd["sub"]:
            out.append(f'<text class="s" x="{_n(cx)}" y="{_n(y + 27)}">{_esc(nd["sub"])}</text>')
        if nd["hidden"]:
            out.append(f'<text class="hid" x="{_n(x + nw + 3)}" y="{_n(y + 10)}">+{nd["hidden"]}</text>')
        out.append("</g>")
    for k, note in enumerate(notes):
        out.append(f'<text class="note" x="{MARGIN}" y="{_n(model["height"] + 12 + 16 * k)}">{_esc(note)}</text>')
    for it in legend:
        out.append(f'<g class="lg {it["cls"]}"><rect x="{_n(it["x"])}" y="{_n(it["y"] + 2)}" width="14" height="10" '
                   f'rx="2"/><text x="{_n(it["x"] + 18)}" y="{_n(it["y"] + 11)}">{_esc(it["label"])}</text></g>')
    out.append("</svg>")
    return "".join(out)


def grad_graph_text(model: dict[str, Any]) -> str:
    """Deterministic plain-text summary: counts, kinds, saved bytes, collapsed groups (no timings).

    "held" is what the saved tensors keep alive (the lens's ``total_saved_bytes()``), "activations" the
    part not on leaf storages (``total_saved_bytes(include_leaves=False)``).
    """
    st = model["stats"]
    kinds = ", ".join(f"{n} {k}" for k, n in st["kinds"].items())
    lines = [
        f"GradGraph: {st['nodes']} nodes ({kinds}), {st['edges']} edges, {st['roots']} root{'s' if st['roots'] != 1 else ''}",
        f"  saved tensors: {st['saved_count']} ({_fmt_bytes(st['saved_nbytes'])} held, "
        f"{_fmt_bytes(st['activation_nbytes'])} activations), {st['freed_count']} freed",
        f"  drawn: {st['shown_nodes']} nodes, {st['shown_edges']} edges in {st['layers']} layers",
    ]
    for grp in model["groups"]:
        nd = next(n for n in model["nodes"] if n["id"] == grp["id"])
        lines.append(f"  repeated: {grp['representative']} drawn once ×{grp['repeat']}; {grp['name']} "
                     f"folded into one node ({nd['group']['members']} nodes)")
    top = sorted((n for n in model["nodes"] if n["kind"] != "group" and n["saved_nbytes"]),
                 key=lambda n: (-n["saved_nbytes"], n["id"]))[:5]
    if top:
        lines.append("  most saved: " + ", ".join(f"#{n['id']} {n['name']} {_fmt_bytes(n['saved_nbytes'])}"
                                                  for n in top))
    if model["steps"]:
        lines.append(f"  recorded backward: {len(model['steps'])} steps")
    lines.extend("  note: " + n for n in model["notes"])
    return "\n".join(lines)
