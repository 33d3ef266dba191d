"""grad_fn graph picture: focus and collapse keep the right nodes, the model and its SVG agree, text is stable."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import deque
from typing import Any

import pytest

from torchlens_widgets.render.grad_graph import (
    check_graph,
    collapse_repeats,
    focus,
    grad_graph_model,
    grad_graph_svg,
    grad_graph_text,
)
from torchlens_widgets.render.theme import STYLE as THEME_STYLE

SVG = "{http://www.w3.org/2000/svg}"


class Tape:
    """Forward ops recorded as backward nodes (edges op → its inputs), like the autograd lens reports them."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.edges: list[dict[str, int]] = []
        self.params: dict[str, int] = {}

    def _node(self, name: str, kind: str, param: str | None = None, saved: int = 0) -> int:
        nid = len(self.nodes)
        self.nodes.append({
            "id": nid, "name": name, "kind": kind, "param": param, "shape": [4, 8] if kind == "op" else [8],
            "saved": [{"name": f"_saved_{k}", "shape": [4, 8], "dtype": "torch.float32", "nbytes": 128,
                       "freed": False, "alias": None} for k in range(saved)],
            "hooks": {"pre": 0, "post": 0}, "seq": nid if kind == "op" else None,
        })
        return nid

    def param(self, name: str) -> int:
        if name not in self.params:
            self.params[name] = self._node("AccumulateGrad", "leaf", param=name)
        return self.params[name]

    def op(self, name: str, *inputs: int, saved: int = 0) -> int:
        nid = self._node(name, "op", saved=saved)
        self.edges += [{"src": nid, "dst": i, "slot": s} for s, i in enumerate(inputs)]
        return nid


BLOCK_OPS = 9  # ops per block in `block` below
BLOCK_LEAVES = 6


def block(t: Tape, x: int, i: int, extra: bool = False) -> int:
    """x + mlp(ln(x)): 9 ops, 6 parameter leaves; `extra` adds one op (a structurally different block)."""
    p = f"h.{i}"
    h = t.op("NativeLayerNormBackward0", x, t.param(f"{p}.ln.weight"), t.param(f"{p}.ln.bias"), saved=2)
    h = t.op("AddmmBackward0", t.param(f"{p}.fc.bias"), t.op("ViewBackward0", h), t.op("TBackward0", t.param(f"{p}.fc.weight")), saved=2)
    h = t.op("GeluBackward0", h, saved=1)
    if extra:
        h = t.op("MulBackward0", h, saved=1)
    h = t.op("AddmmBackward0", t.param(f"{p}.proj.bias"), h, t.op("TBackward0", t.param(f"{p}.proj.weight")), saved=2)
    h = t.op("ViewBackward0", h)
    return t.op("AddBackward0", x, h)


def model_graph(n_blocks: int, *, head_chain: bool = False, odd: int | None = None) -> dict[str, Any]:
    t = Tape()
    x = t.op("EmbeddingBackward0", t.param("wte.weight"), saved=1)
    for i in range(n_blocks):
        x = block(t, x, i, extra=(i == odd))
    if head_chain:  # no parameters above the last block: its upward growth must stop where the others stop
        root = t.op("SumBackward0", t.op("MulBackward0", x))
    else:
        root = t.op("SumBackward0", t.op("NativeLayerNormBackward0", x, t.param("ln_f.weight"), t.param("ln_f.bias")))
    return {"nodes": t.nodes, "edges": t.edges, "roots": [root]}


def reachable(graph: dict[str, Any]) -> set[int]:
    succ: dict[int, list[int]] = {nd["id"]: [] for nd in graph["nodes"]}
    for e in graph["edges"]:
        succ[e["src"]].append(e["dst"])
    seen = set(graph["roots"])
    queue = deque(seen)
    while queue:
        for u in succ[queue.popleft()]:
            if u not in seen:
                seen.add(u)
                queue.append(u)
    return seen


# ---------------------------------------------------------------------------------------------- focus


def chain_graph(n: int) -> dict[str, Any]:
    t = Tape()
    prev = t.param("w")
    for _ in range(n - 1):
        prev = t.op("MulBackward0", prev)
    return {"nodes": t.nodes, "edges": t.edges, "roots": [prev]}


def test_focus_keeps_the_hops_and_counts_hidden_edges() -> None:
    g = chain_graph(5)  # 4 → 3 → 2 → 1 → 0
    f = focus(g, 2, 1)
    assert [nd["id"] for nd in f["nodes"]] == [1, 2, 3]
    assert {nd["id"]: nd["hidden"] for nd in f["nodes"]} == {1: 1, 2: 0, 3: 1}
    assert [(e["src"], e["dst"]) for e in f["edges"]] == [(2, 1), (3, 2)]
    assert f["roots"] == [] and f["focus"] == {"center": 2, "hops": 1}
    only = focus(g, 2, 0)
    assert [(nd["id"], nd["hidden"]) for nd in only["nodes"]] == [(2, 2)] and only["edges"] == []
    assert len(focus(g, 0, 10)["nodes"]) == 5


def test_focus_is_undirected_and_rejects_bad_input() -> None:
    g = model_graph(2)
    leaf = g["nodes"][0]["id"]  # wte.weight: reached only from EmbeddingBackward0
    f = focus(g, leaf, 2)
    # wte ← embedding, and the embedding's parents: block 0's layer norm and its residual add
    ln0 = next(nd["id"] for nd in g["nodes"] if nd["name"] == "NativeLayerNormBackward0")
    add0 = next(nd["id"] for nd in g["nodes"] if nd["name"] == "AddBackward0")
    assert {nd["id"] for nd in f["nodes"]} == {leaf, 1, ln0, add0}
    assert {nd["id"]: nd["hidden"] for nd in f["nodes"]} == {leaf: 0, 1: 0, ln0: 3, add0: 3}  # 3 = 2 parents in block 1 + 1 child
    with pytest.raises(ValueError, match="not in the graph"):
        focus(g, 999, 1)
    with pytest.raises(ValueError, match="hops must be"):
        focus(g, 0, -1)


# ------------------------------------------------------------------------------------------- collapse


@pytest.mark.parametrize("n_blocks", [3, 12])
def test_collapse_draws_one_block_and_folds_the_rest(n_blocks: int) -> None:
    g = model_graph(n_blocks)
    per_block = BLOCK_OPS + BLOCK_LEAVES
    c = collapse_repeats(g)
    assert len(c["nodes"]) == len(g["nodes"]) - (n_blocks - 1) * per_block + 1
    (grp,) = [nd for nd in c["nodes"] if nd["kind"] == "group"]
    assert grp["name"] == f"h.1–{n_blocks - 1}"
    assert grp["group"]["repeat"] == n_blocks and grp["group"]["indices"] == list(range(1, n_blocks))
    assert grp["group"]["members"] == (n_blocks - 1) * per_block
    assert grp["group"]["saved_nbytes"] == (n_blocks - 1) * 7 * 128
    rep = [nd for nd in c["nodes"] if nd.get("block")]
    assert len(rep) == per_block and {nd["block"]["index"] for nd in rep} == {0}
    assert {nd["param"] for nd in rep if nd["param"]} == {f"h.0.{r}" for r in
                                                         ("ln.weight", "ln.bias", "fc.bias", "fc.weight", "proj.bias", "proj.weight")}
    # Every node outside the blocks is still reachable from the root, through the group node.
    kept = {nd["id"] for nd in c["nodes"]}
    assert reachable(c) == kept
    assert {"wte.weight", "ln_f.weight", "ln_f.bias"} <= {nd["param"] for nd in c["nodes"]}
    assert any(e["dst"] == grp["id"] for e in c["edges"]) and any(e["src"] == grp["id"] for e in c["edges"])
    check_graph(c)


def test_block_boundary_stops_where_the_other_blocks_stop() -> None:
    g = model_graph(12, head_chain=True)
    c = collapse_repeats(g)
    assert len(c["nodes"]) == len(g["nodes"]) - 11 * (BLOCK_OPS + BLOCK_LEAVES) + 1
    assert {nd["name"] for nd in c["nodes"] if not nd.get("block") and nd["kind"] == "op"} == {
        "EmbeddingBackward0", "MulBackward0", "SumBackward0"}


def test_nothing_repeats_nothing_collapses() -> None:
    g = chain_graph(6)
    assert collapse_repeats(g) is g
    odd = model_graph(3, odd=1)  # block 1 has an extra op: no two consecutive blocks are alike
    c = collapse_repeats(odd)
    assert len(c["nodes"]) == len(odd["nodes"]) and not any(nd["kind"] == "group" for nd in c["nodes"])
    assert any("differ in structure" in n for n in c["notes"])


def test_a_different_first_block_is_drawn_and_the_run_after_it_collapses() -> None:
    g = model_graph(4, odd=0)  # like ResNet's first bottleneck of a stage (it has a downsample)
    c = collapse_repeats(g)
    (grp,) = [nd for nd in c["nodes"] if nd["kind"] == "group"]
    assert grp["group"]["representative"] == "h.1" and grp["group"]["indices"] == [2, 3]
    assert len(c["nodes"]) == len(g["nodes"]) - 2 * (BLOCK_OPS + BLOCK_LEAVES) + 1
    assert reachable(c) == {nd["id"] for nd in c["nodes"]}


# --------------------------------------------------------------------------------------- model + SVG


def test_model_and_svg_agree_and_the_svg_parses() -> None:
    m = grad_graph_model(model_graph(3))
    svg = grad_graph_svg(m)
    root = ET.fromstring(svg)
    boxes = {g.get("id"): g.find(f"{SVG}rect") for g in root.iter(f"{SVG}g") if g.get("id")}  # not the legend
    assert len(boxes) == len(m["nodes"]) == m["stats"]["shown_nodes"]
    for nd in m["nodes"]:
        r = boxes[f"n{nd['id']}"]
        assert r is not None
        assert [float(r.get(k) or "nan") for k in ("x", "y", "width", "height")] == [nd["x"], nd["y"], nd["w"], nd["h"]]
        assert 0 <= nd["x"] and nd["x"] + nd["w"] <= m["width"] and nd["y"] + nd["h"] <= m["height"]
    paths = [p.get("d") for p in root.iter(f"{SVG}path") if p.get("class") == "e"]
    assert len(paths) == len(m["edges"])
    pos = {nd["id"]: nd for nd in m["nodes"]}
    for e in m["edges"]:
        s, d = pos[e["src"]], pos[e["dst"]]
        assert e["points"][0] == [pytest.approx(s["x"] + s["w"] / 2, abs=0.11), s["y"] + s["h"]]
        assert e["points"][-1] == [pytest.approx(d["x"] + d["w"] / 2, abs=0.11), d["y"]]
        assert d["layer"] > s["layer"]
    (grp,) = m["groups"]
    assert grp["label"] == "h.0 ×3" and grp["box"] is not None


def test_boxes_in_a_layer_never_overlap() -> None:
    m = grad_graph_model(model_graph(5), collapse=False)
    by_layer: dict[int, list[dict[str, Any]]] = {}
    for nd in m["nodes"]:
        by_layer.setdefault(nd["layer"], []).append(nd)
    for row in by_layer.values():
        row.sort(key=lambda n: n["x"])
        for a, b in zip(row, row[1:]):
            assert a["x"] + a["w"] <= b["x"]


def test_freed_saved_tensors_are_greyed_not_an_error() -> None:
    g = model_graph(1)
    for nd in g["nodes"]:
        if nd["name"] == "AddmmBackward0":
            for s in nd["saved"]:
                s["freed"] = True
        if nd["name"] == "NativeLayerNormBackward0" and nd["saved"]:  # block 0's (ln_f saves nothing here)
            nd["saved"][0]["freed"] = True
    m = grad_graph_model(g, collapse=False)
    cls = {nd["id"]: nd["cls"].split() for nd in m["nodes"]}
    names = {nd["id"]: nd["name"] for nd in m["nodes"]}
    assert all("freed" in cls[i] for i in cls if names[i] == "AddmmBackward0")
    assert [names[i] for i in cls if "part-freed" in cls[i]] == ["NativeLayerNormBackward0"]
    svg = grad_graph_svg(m)
    assert svg.count('class="n k-op freed"') == 2 and ".freed rect{" in svg
    # 8 saved (2 AddmmBackward0 × 2 + 2 of the layer norm), 5 freed: the 3 held ones (128 B each) are counted
    assert "saved tensors: 8 (384 B held, 384 B activations), 5 freed" in grad_graph_text(m)


def test_recording_becomes_steps_mapped_onto_the_collapsed_picture() -> None:
    g = model_graph(3)
    root = g["roots"][0]
    blk2_leaf = next(nd["id"] for nd in g["nodes"] if nd["param"] == "h.2.fc.bias")
    wte = next(nd["id"] for nd in g["nodes"] if nd["param"] == "wte.weight")
    addmm0 = next(nd["id"] for nd in g["nodes"] if nd["name"] == "AddmmBackward0")
    rec = {"order": [root, blk2_leaf, wte], "seconds": [1e-5, 2e-5, 3e-5],
           "grads": {str(wte): [[8]]}, "freed_at": {str(addmm0): 1}}
    m = grad_graph_model(g, rec)
    gid = m["groups"][0]["id"]
    assert [s["node"] for s in m["steps"]] == [root, gid, wte]
    assert [s["leaves"] for s in m["steps"]] == [[], [gid], [wte]]
    assert m["steps"][2]["grads"] == [[8]] and m["steps"][1]["freed"] == [addmm0]
    assert m["steps"][0]["name"] == "SumBackward0" and m["steps"][1]["orig"] == blk2_leaf
    # The recorder's own `leaves` (JSON keys: strings) win over the AccumulateGrad-ran rule.
    m2 = grad_graph_model(g, dict(rec, leaves={"0": [wte]}))
    assert [s["leaves"] for s in m2["steps"]] == [[wte], [], []]
    with pytest.raises(ValueError, match="not in the graph"):
        grad_graph_model(g, {"order": [12345]})


def test_focus_and_truncation_in_the_model() -> None:
    g = model_graph(4)
    center = g["nodes"][5]["id"]
    m = grad_graph_model(g, focus_node=center, hops=1)
    (c,) = [nd for nd in m["nodes"] if "center" in nd["cls"].split()]
    assert c["id"] == center and any(n.startswith("focus:") for n in m["notes"])
    assert all(nd["hidden"] == 0 or "boundary" in nd["cls"] for nd in m["nodes"])
    t = grad_graph_model(g, collapse=False, max_nodes=10)
    assert len(t["nodes"]) == 10 and any(n.startswith("truncated:") for n in t["notes"])
    assert t["stats"]["nodes"] == len(g["nodes"])
    with pytest.raises(ValueError, match="needs focus_node"):
        grad_graph_model(g, hops=2)


def test_bad_graphs_get_a_clear_error() -> None:
    with pytest.raises(ValueError, match="grad_fn graph dict"):
        grad_graph_model({"nodes": 3})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="must join two node ids"):
        check_graph({"nodes": [{"id": 0, "name": "A"}], "edges": [{"src": 0, "dst": 1}], "roots": [0]})
    with pytest.raises(ValueError, match="appears twice"):
        check_graph({"nodes": [{"id": 0, "name": "A"}, {"id": 0, "name": "B"}], "edges": [], "roots": []})


def test_text_and_svg_are_deterministic_and_carry_no_timings() -> None:
    g = model_graph(3)
    rec = {"order": [g["roots"][0]], "seconds": [0.123456]}
    a, b = grad_graph_model(g, rec), grad_graph_model(model_graph(3), {"order": [g["roots"][0]], "seconds": [9.9]})
    assert grad_graph_svg(a) == grad_graph_svg(b)
    text = grad_graph_text(a)
    assert text == grad_graph_text(b)
    n = len(g["nodes"])
    saved = sum(len(nd["saved"]) for nd in g["nodes"])
    assert text.splitlines()[0] == f"GradGraph: {n} nodes (21 leaf, 30 op), {len(g['edges'])} edges, 1 root"
    assert n == 51 and saved == 3 * 7 + 1
    held = f"{saved * 128 / 1024:.1f} KiB"  # no "tensor" numbers: every entry counts, 128 B each
    assert f"saved tensors: {saved} ({held} held, {held} activations), 0 freed" in text
    assert "repeated: h.0 drawn once ×3; h.1–2 folded into one node (30 nodes)" in text
    assert "0.123" not in text and "0.123" not in grad_graph_svg(a)
    assert not re.search(r"0x[0-9a-f]{6,}", grad_graph_svg(a) + text)


def test_gpt2_sized_svg_stays_small() -> None:
    m = grad_graph_model(model_graph(12), collapse=False)
    svg = grad_graph_svg(m)
    assert len(svg.encode()) < 1_000_000
    style = len(THEME_STYLE)  # the same theme block heads both pictures
    assert len(grad_graph_svg(grad_graph_model(model_graph(12)))) - style < (len(svg) - style) / 5


def test_bytes_read_in_binary_units_like_the_lens_summary() -> None:
    from torchlens_widgets.lenses.autograd import _fmt_bytes as lens_fmt
    from torchlens_widgets.render.grad_graph import _fmt_bytes as render_fmt

    cases = {0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 * 1024**2: "5.0 MiB", 3 * 1024**3: "3.0 GiB"}
    assert {n: render_fmt(n) for n in cases} == cases
    assert {n: lens_fmt(n) for n in cases} == cases
