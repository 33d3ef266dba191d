"""The autograd lens agrees with a hand walk of grad_fn.next_functions, reports saved tensors and their
release truthfully, records backward in a valid order, and never raises on freed or broken graphs."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from torchlens_widgets.lenses.autograd import GradGraph, grad_graph, record_backward

# ------------------------------------------------------------------------------ hand-walked ground truth


def hand_walk(root_fn: Any) -> tuple[dict[int, Any], set[tuple[int, int, int]]]:
    """Every node reachable from root_fn (by identity) and every (src, dst, slot) edge, recursively."""
    nodes: dict[int, Any] = {}
    edges: set[tuple[int, int, int]] = set()

    def visit(fn: Any) -> None:
        if id(fn) in nodes:
            return
        nodes[id(fn)] = fn
        for slot, (child, _) in enumerate(fn.next_functions):
            if child is not None:
                edges.add((id(fn), id(child), slot))
                visit(child)

    visit(root_fn)
    return nodes, edges


N = 3
UNARY = ["sin", "exp", "relu", "pow", "t", "view", "sum", "mean", "index"]
BINARY = ["add", "mul", "div", "matmul", "cat"]


@st.composite
def programs(draw: st.DrawFn) -> tuple[int, list[tuple[str, int, int, list[int]]]]:
    n_leaves = draw(st.integers(1, 3))
    steps = []
    for k in range(draw(st.integers(1, 12))):
        pool = n_leaves + k
        op = draw(st.sampled_from(UNARY + BINARY))
        i, j = draw(st.integers(0, pool - 1)), draw(st.integers(0, pool - 1))
        perm = draw(st.permutations(list(range(N))))
        steps.append((op, i, j, list(perm)))
    return n_leaves, steps


def apply_op(op: str, a: torch.Tensor, b: torch.Tensor, perm: list[int]) -> torch.Tensor:
    """One step of a random program; unary ops ignore `b`. Every result is N×N again."""
    ops = {
        "sin": lambda: a.sin(),
        "exp": lambda: a.exp(),
        "relu": lambda: a.relu(),
        "pow": lambda: a.pow(2),
        "t": lambda: a.t(),
        "view": lambda: a.reshape(-1).view(N, N),
        "sum": lambda: a.sum(0, keepdim=True).expand(N, N),
        "mean": lambda: a.mean(1, keepdim=True).expand(N, N),
        "index": lambda: a[perm],
        "add": lambda: a + b,
        "mul": lambda: a * b,
        "div": lambda: a / b,
        "matmul": lambda: a @ b,
        "cat": lambda: torch.cat([a, b])[perm[0] : perm[0] + N],
    }
    return ops[op]()


def run_program(
    n_leaves: int, steps: list[tuple[str, int, int, list[int]]]
) -> tuple[list[torch.Tensor], torch.Tensor, set[int]]:
    """Apply the ops to N×N tensors; return the leaves, the root and the indices of leaves it depends on."""
    gen = torch.Generator().manual_seed(0)
    leaves = [torch.rand(N, N, generator=gen).add_(0.5).requires_grad_() for _ in range(n_leaves)]
    pool: list[torch.Tensor] = list(leaves)
    deps: list[set[int]] = [{k} for k in range(n_leaves)]
    for op, i, j, perm in steps:
        pool.append(apply_op(op, pool[i], pool[j], perm))
        deps.append(deps[i] | (deps[j] if op in BINARY else set()))
    return leaves, pool[-1].sum(), deps[-1]


@settings(max_examples=200, deadline=None)
@given(programs())
def test_lens_matches_hand_walk_on_random_programs(program: tuple[int, list[tuple[str, int, int, list[int]]]]) -> None:
    leaves, root, used = run_program(*program)
    names = {f"x{k}": t for k, t in enumerate(leaves)}
    g = grad_graph(root, names=names)
    truth_nodes, truth_edges = hand_walk(root.grad_fn)
    assert len(g.nodes) == len(truth_nodes) == len({id(f) for f in g.fns})
    index = {id(f): k for k, f in enumerate(g.fns)}
    assert set(index) == set(truth_nodes)
    assert {(e.src, e.dst, e.slot) for e in g.edges} == {(index[s], index[d], k) for s, d, k in truth_edges}
    assert len(g.edges) == len(truth_edges)
    for n in g.nodes:
        fn = g.fns[n.id]
        assert n.name == fn.name().replace("torch::autograd::", "")
        assert n.kind == ("leaf" if n.name == "AccumulateGrad" else "op")
    # The leaves in the graph are exactly the leaves the program used, each named after its tensor.
    acc = [n for n in g.nodes if n.kind == "leaf"]
    assert {n.param for n in acc} == {f"x{k}" for k in used}
    for n in acc:
        assert g.fns[n.id].variable is names[n.param]
        assert n.shape == (N, N)
    # ids are breadth-first from the root: every non-root node was discovered from a smaller id.
    assert g.roots == [0] and g.nodes[0].name == "SumBackward0"
    for n in g.nodes[1:]:
        assert min(g.parents(n.id)) < n.id
    assert json.loads(json.dumps(g.to_dict())) == g.to_dict()


def test_edges_keep_slots_and_duplicates() -> None:
    a = torch.randn(3, requires_grad=True)
    g = grad_graph((a * a).sum(), names={"a": a})
    assert [(e.src, e.dst, e.slot) for e in g.edges] == [(0, 1, 0), (1, 2, 0), (1, 2, 1)]
    assert g.children(1) == [2, 2] and g.parents(2) == [1, 1]
    assert [n.name for n in g.nodes] == ["SumBackward0", "MulBackward0", "AccumulateGrad"]


def test_none_next_functions_are_skipped() -> None:
    a = torch.randn(3, requires_grad=True)
    c = torch.randn(3)  # no grad: MulBackward0.next_functions has (None, 0) in slot 1
    g = grad_graph((c * a).sum())
    mul = g.find("MulBackward0")[0]
    assert g.fns[mul.id].next_functions[0][0] is None
    assert [(e.src, e.dst, e.slot) for e in g.edges] == [(0, 1, 0), (1, 2, 1)]


# ------------------------------------------------------------------------------------- saved tensors


def saved_of(g: GradGraph, name: str) -> dict[str, Any]:
    (node,) = g.find(name)
    return {s.name: s for s in node.saved}


def test_mul_saves_both_operands_freed_after_backward() -> None:
    a = torch.randn(3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    y = (a * b).sum()
    before = grad_graph(y)
    s = saved_of(before, "MulBackward0")
    assert set(s) == {"self", "other"}
    for v in s.values():
        assert (v.shape, v.dtype, v.nbytes, v.freed, v.alias) == ((3,), "torch.float32", 12, False, "input")
    assert before.total_saved_bytes() == 24 and before.total_saved_bytes(include_leaves=False) == 0
    y.backward()
    after = grad_graph(y)
    assert all(v.freed for v in saved_of(after, "MulBackward0").values())
    assert after.total_saved_bytes() == 0
    # the graph built before backward is plain data: unchanged
    assert not any(v.freed for v in saved_of(before, "MulBackward0").values())
    d = after.to_dict()["nodes"][1]["saved"]
    assert {x["name"]: x["freed"] for x in d} == {"self": True, "other": True}


def test_retain_graph_keeps_saved_tensors() -> None:
    a = torch.randn(2, 3, requires_grad=True)
    y = (a * a.sin()).sum()
    y.backward(retain_graph=True)
    g = grad_graph(y)
    assert all(not s.freed for n in g.nodes for s in n.saved)
    assert saved_of(g, "SinBackward0")["self"].shape == (2, 3)
    y.backward()
    assert all(s.freed for n in grad_graph(y).nodes for s in n.saved)


def test_exp_saves_its_output_and_keeps_its_shape_after_release() -> None:
    a = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    e = a.exp()
    y = e.sum()
    s = saved_of(grad_graph(y), "ExpBackward0")
    assert list(s) == ["result"]
    assert (s["result"].alias, s["result"].shape, s["result"].nbytes) == ("output", (4, 5), 160)
    y.backward()
    r = saved_of(grad_graph(y), "ExpBackward0")["result"]
    assert (r.freed, r.alias, r.shape, r.dtype) == (True, "output", (4, 5), "torch.float64")


def test_saved_bytes_count_a_shared_tensor_once() -> None:
    x = torch.randn(10, requires_grad=True)
    h = x.sin()  # an activation saved twice by the same mul
    g = grad_graph((h * h).sum())
    mul = saved_of(g, "MulBackward0")
    assert mul["self"].nbytes == mul["other"].nbytes == 40
    assert g.total_saved_bytes(include_leaves=False) == 40  # h once; SinBackward0 saves the leaf x
    assert g.total_saved_bytes() == 80


def test_a_saved_view_of_a_parameter_is_not_activation_memory() -> None:
    # AddmmBackward0 saves x (a leaf) and weight.t(): a view of the parameter, 48 B that cost nothing extra
    lin = nn.Linear(4, 3)
    x = torch.randn(2, 4, requires_grad=True)
    g = grad_graph(lin(x))
    saved = saved_of(g, "AddmmBackward0")
    assert (saved["mat1"].nbytes, saved["mat2"].nbytes) == (32, 48)
    assert saved["mat2"].leaf and saved["mat1"].leaf  # weight.t() lives on the weight's storage
    assert g.total_saved_bytes() == 80
    assert g.total_saved_bytes(include_leaves=False) == 0


@pytest.mark.parametrize("pack", [lambda t: t, lambda t: t.view_as(t)])
def test_identity_saved_tensors_hooks_keep_leaves_out(pack: Callable[[torch.Tensor], Any]) -> None:
    lin = nn.Linear(4, 3)
    x = torch.randn(2, 4, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = lin(torch.relu(x))
    g = grad_graph(y)
    assert all(s.packed for n in g.nodes for s in n.saved)
    assert g.total_saved_bytes() == 32 + 48  # relu's result is AddmmBackward0's mat1: one storage
    assert g.total_saved_bytes(include_leaves=False) == 32  # weight.t() packed as itself: the weight's storage
    d = g.to_dict()
    addmm = next(nd for nd in d["nodes"] if nd["name"] == "AddmmBackward0")
    relu = next(nd for nd in d["nodes"] if nd["name"] == "ReluBackward0")
    assert addmm["saved"][0]["tensor"] == relu["saved"][0]["tensor"]
    assert [s["leaf"] for s in addmm["saved"]] == [False, True]


def test_a_pack_hook_returning_a_tuple_counts_the_tensors_inside_per_slot() -> None:
    x = torch.randn(4, 4, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (t.dtype, t.to(torch.bfloat16)), lambda p: p[1].to(p[0])):
        h = x.exp()
        y = (h * h).sum()  # exp saves h, mul saves h twice: three bf16 copies of 32 B each
    g = grad_graph(y)
    assert [s.nbytes for n in g.nodes for s in n.saved] == [32, 32, 32]
    assert g.total_saved_bytes() == g.total_saved_bytes(include_leaves=False) == 96


def test_views_of_one_storage_count_once_with_the_storage_bytes() -> None:
    a = torch.randn(2, 3, 8, requires_grad=True)
    lin = nn.Linear(8, 8)
    g = grad_graph(lin(torch.relu(a)))  # ReluBackward0 saves r [2, 3, 8]; AddmmBackward0 saves r.view(6, 8)
    assert saved_of(g, "ReluBackward0")["result"].nbytes == saved_of(g, "AddmmBackward0")["mat1"].nbytes == 192
    assert g.total_saved_bytes() == 192 + 256  # not 640: r once, plus fc.weight.t()
    assert g.total_saved_bytes(include_leaves=False) == 192
    numbers = {s["name"]: s["tensor"] for nd in g.to_dict()["nodes"] for s in nd["saved"]}
    assert numbers["result"] == numbers["mat1"] != numbers["mat2"]


def test_a_saved_slice_keeps_its_whole_storage_alive() -> None:
    x = torch.randn(10, requires_grad=True)
    h = x.exp()  # 40 B, saved by ExpBackward0
    g = grad_graph(h[:2].sin().sum())  # SinBackward0 saves the 8-byte slice: same storage, nothing more
    assert saved_of(g, "SinBackward0")["self"].nbytes == 8
    assert g.total_saved_bytes(include_leaves=False) == 40
    g2 = grad_graph((x * 2)[:2].sin().sum())  # only the saved slice holds x * 2 alive
    assert [(s.name, s.nbytes) for n in g2.nodes for s in n.saved] == [("self", 8), ("other", 8)]  # 2 as int64
    assert g2.total_saved_bytes(include_leaves=False) == 40 + 8  # the slice keeps all 10 floats alive


def test_saved_tensors_hooks_are_not_run_by_the_lens() -> None:
    calls: list[str] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        calls.append("pack")
        return t.detach().half()

    def unpack(t: torch.Tensor) -> torch.Tensor:
        calls.append("unpack")
        return t.float()

    a = torch.randn(8, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = a.sin().sum()
    s = saved_of(grad_graph(y), "SinBackward0")["self"]
    assert calls == ["pack"]
    assert (s.packed, s.dtype, s.nbytes, s.shape) == (True, "torch.float16", 16, (8,))


def test_non_tensor_saved_attributes_are_left_out() -> None:
    x = torch.randn(4, 5, requires_grad=True)
    g = grad_graph(x.max(dim=1).values.sum())
    s = saved_of(g, "MaxBackward0")
    assert list(s) == ["indices"]  # _saved_dim, _saved_keepdim, _saved_self_sym_sizes are not tensors
    assert (s["indices"].dtype, s["indices"].shape, s["indices"].nbytes) == ("torch.int64", (4,), 32)
    assert saved_of(g, "SumBackward0") == {}


# ------------------------------------------------------------------------------------ backward recorder


def test_record_backward_order_is_topological_and_leaves_get_grads() -> None:
    torch.manual_seed(0)
    w1 = torch.randn(4, 3, requires_grad=True)
    w2 = torch.randn(2, 4, requires_grad=True)
    x = torch.randn(5, 3)
    y = ((x @ w1.t()).relu() @ w2.t()).exp().mean()
    g = grad_graph(y, names={"w1": w1, "w2": w2})
    rec = record_backward(y, graph=g)
    assert sorted(rec.order) == list(range(len(g.nodes)))  # every node ran once
    pos = {i: k for k, i in enumerate(rec.order)}
    for e in g.edges:
        assert pos[e.src] < pos[e.dst], f"{g.nodes[e.dst].name} ran before its parent {g.nodes[e.src].name}"
    assert len(rec.seconds) == len(rec.order) and all(s >= 0 for s in rec.seconds)
    leaf_steps = {step: ids for step, ids in rec.leaves.items()}
    assert sorted(i for ids in leaf_steps.values() for i in ids) == sorted(n.id for n in g.nodes if n.kind == "leaf")
    for step, ids in leaf_steps.items():
        assert [rec.order[step]] == ids
    assert rec.grads[g.by_name("w1").id] == [[4, 3]] and rec.grads[g.by_name("w2").id] == [[2, 4]]
    assert w1.grad is not None and w1.grad.shape == (4, 3)
    mm = [n.id for n in g.nodes if n.name == "MmBackward0"]
    assert all(len(rec.grads[i]) == 2 for i in mm)
    # every node that saved something released it, right at its own step (CPU engine, one thread)
    with_saved = {n.id for n in g.nodes if n.saved}
    assert set(rec.freed_at) == with_saved and with_saved
    assert all(rec.freed_at[i] == pos[i] for i in with_saved)
    # the graph built before backward still says "not freed"; a fresh walk says freed
    assert not any(s.freed for n in g.nodes for s in n.saved)
    assert all(s.freed for n in grad_graph(y).nodes for s in n.saved)
    d = json.loads(json.dumps(rec.to_dict()))
    assert d["order"] == rec.order and set(d) == {"order", "seconds", "grads", "freed_at", "leaves"}


def test_record_backward_removes_its_hooks_and_retain_graph_frees_nothing() -> None:
    a = torch.randn(3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    y = (a * b).exp().sum()
    g = grad_graph(y)
    hooks_before = [(n.hooks_pre, n.hooks_post) for n in g.nodes]
    assert hooks_before == [(0, 0)] * len(g.nodes)
    rec = record_backward(y, graph=g, retain_graph=True)
    assert rec.freed_at == {}
    assert [(n.hooks_pre, n.hooks_post) for n in grad_graph(y).nodes] == hooks_before
    first = a.grad.clone()  # type: ignore[union-attr]
    rec2 = record_backward(y)  # second backward through the retained graph
    assert rec2.order and torch.allclose(a.grad, 2 * first)  # type: ignore[arg-type]
    assert set(rec2.freed_at) == {n.id for n in g.nodes if n.saved}


def test_record_backward_with_inputs_runs_only_what_is_needed() -> None:
    a = torch.randn(3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    y = (a.sin() * b.cos()).sum()
    g = grad_graph(y, names={"a": a, "b": b})
    rec = record_backward(y, graph=g, inputs=[a])
    ran = {g.nodes[i].name for i in rec.order}
    assert "SinBackward0" in ran and "CosBackward0" not in ran
    assert [g.nodes[i].param for ids in rec.leaves.values() for i in ids] == ["a"]
    assert b.grad is None


# ------------------------------------------------------------------------------------------------ hooks


def test_user_node_hooks_are_counted() -> None:
    a = torch.randn(3, requires_grad=True)
    y = (a * 2).sum()
    y.grad_fn.register_prehook(lambda go: None)  # type: ignore[union-attr]
    h1 = y.grad_fn.register_hook(lambda gi, go: None)  # type: ignore[union-attr]
    y.grad_fn.register_hook(lambda gi, go: None)  # type: ignore[union-attr]
    g = grad_graph(y)
    assert (g.nodes[0].hooks_pre, g.nodes[0].hooks_post) == (1, 2)
    assert [(n.hooks_pre, n.hooks_post) for n in g.nodes[1:]] == [(0, 0), (0, 0)]
    h1.remove()
    assert grad_graph(y).nodes[0].hooks_post == 1
    assert "[hooks pre 1 post 2]" in g.summary()
    assert grad_graph(y, hooks=False).nodes[0].hooks_post == 0


def test_tensor_hooks_do_not_break_the_lens() -> None:
    a = torch.randn(3, requires_grad=True)
    seen: list[tuple[int, ...]] = []
    h = a * 3
    h.register_hook(lambda grad: seen.append(tuple(grad.shape)))
    a.register_hook(lambda grad: grad * 2)
    y = h.sin().sum()
    g = grad_graph(y)
    rec = record_backward(y, graph=g)
    assert seen == [(3,)]
    assert torch.allclose(a.grad, 2 * 3 * (a * 3).cos())  # type: ignore[arg-type]
    assert len(rec.order) == len(g.nodes)


# ----------------------------------------------------------------------------------- custom Functions


class ScaleExp(torch.autograd.Function):
    """y = exp(x) * k; saves the input, the output and a non-saved-for-alias intermediate."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, k: float) -> torch.Tensor:
        e = x.exp()
        y = e * k
        ctx.k = k
        ctx.save_for_backward(x, y, e)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        _, y, _ = ctx.saved_tensors
        return grad * y, None


def test_custom_function_is_custom_with_its_saved_tensors() -> None:
    x = torch.randn(2, 5, requires_grad=True)
    y = ScaleExp.apply(x, 3.0).sum()
    g = grad_graph(y, names={"x": x})
    (node,) = [n for n in g.nodes if n.kind == "custom"]
    assert node.name == "ScaleExpBackward"
    assert [(s.name, s.shape, s.nbytes, s.freed) for s in node.saved] == [
        ("saved_0", (2, 5), 40, False),
        ("saved_1", (2, 5), 40, False),
        ("saved_2", (2, 5), 40, False),
    ]
    assert [s.alias for s in node.saved] == ["input", "output", None]
    assert g.children(node.id) == [g.by_name("x").id]
    y.backward()
    (after,) = [n for n in grad_graph(y).nodes if n.kind == "custom"]
    assert [s.freed for s in after.saved] == [True]  # torch no longer says how many there were
    assert torch.allclose(x.grad, 3 * x.exp())  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- in-place / errors


def test_in_place_version_error_leaves_the_lens_working() -> None:
    a = torch.randn(3, requires_grad=True)
    b = a * 2
    y = b.sin().sum()  # SinBackward0 saves b
    b.add_(1)  # bumps b's version: backward must refuse
    g = grad_graph(y)
    # y's graph was recorded before add_: b's new AddBackward0 is not part of it
    assert [n.name for n in g.nodes] == ["SumBackward0", "SinBackward0", "MulBackward0", "AccumulateGrad"]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        record_backward(y, graph=g)
    assert [(n.hooks_pre, n.hooks_post) for n in grad_graph(y).nodes] == [(0, 0)] * 4  # hooks removed
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    again = grad_graph(y)
    assert [n.name for n in again.nodes] == [n.name for n in g.nodes]
    assert "SinBackward0" in again.summary()


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match=r"requires_grad_\(\)"):
        grad_graph(torch.randn(3))
    with torch.no_grad():
        made = torch.randn(3, requires_grad=True) * 2
    with pytest.raises(ValueError, match="no_grad"):
        grad_graph(made)
    with pytest.raises(TypeError, match="root 0 is a list"):
        grad_graph([1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="at least one root"):
        grad_graph()
    with pytest.raises(TypeError, match="names must map"):
        grad_graph((torch.randn(2, requires_grad=True) * 2).sum(), names=[1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no grad_fn"):
        record_backward(torch.randn(3))
    with pytest.raises(TypeError, match="needs a tensor"):
        record_backward(3.0)  # type: ignore[arg-type]
    a = torch.randn(3, requires_grad=True)
    other = grad_graph((a * 2).sum())
    with pytest.raises(ValueError, match="not in this graph"):
        record_backward((a * 3).sum(), graph=other)
    with pytest.raises(KeyError, match="no node is named 'w'"):
        other.by_name("w")
    with pytest.raises(IndexError, match="out of range"):
        other.node(99)


def test_a_leaf_root_is_its_accumulate_grad_alone() -> None:
    w = torch.zeros(2, 3, requires_grad=True)
    g = grad_graph(w, names={"w": w})
    assert [(n.name, n.kind, n.param, n.shape, n.seq) for n in g.nodes] == [
        ("AccumulateGrad", "leaf", "w", (2, 3), None)
    ]
    assert g.edges == [] and g.roots == [0]


def test_a_tensor_saved_twice_has_one_tensor_number() -> None:
    a = torch.randn(4, requires_grad=True)
    h = a.exp()  # ExpBackward0 saves h; MulBackward0 saves h (as self and other)
    g = grad_graph((h * h).sum())
    numbers = {s["name"]: s["tensor"] for nd in g.to_dict()["nodes"] for s in nd["saved"]}
    assert numbers["self"] == numbers["other"] == numbers["result"]
    assert g.total_saved_bytes() == 16


def test_several_roots_share_one_graph() -> None:
    a = torch.randn(3, requires_grad=True)
    h = a.sin()
    g = grad_graph(h.sum(), h.exp().sum(), h.sum())
    assert g.roots == [0, 1, 2] or len(set(g.roots)) == len(g.roots)
    assert len(g.find("SinBackward0")) == 1 and len(g.find("AccumulateGrad")) == 1


# ---------------------------------------------------------------------------------------- the dict/text


def test_to_dict_schema_and_summary_text_exactly() -> None:
    a = torch.ones(3, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    y = (a * b).sum()
    g = grad_graph(y, names={"a": a, "b": b})
    d = g.to_dict()
    assert set(d) == {"nodes", "edges", "roots"}
    mul = d["nodes"][1]
    assert set(mul) == {"id", "name", "kind", "param", "shape", "saved", "hooks", "seq"}
    assert mul["hooks"] == {"pre": 0, "post": 0} and isinstance(mul["seq"], int)
    assert d["nodes"][0]["seq"] > mul["seq"]  # sequence numbers grow in forward order
    assert mul["saved"][0] == {
        "name": "other",
        "shape": [3],
        "dtype": "torch.float32",
        "nbytes": 12,
        "storage_nbytes": 12,
        "freed": False,
        "alias": "input",
        "leaf": True,
        "tensor": 0,
    }
    assert d["nodes"][2] == {
        "id": 2,
        "name": "AccumulateGrad",
        "kind": "leaf",
        "param": "a",
        "shape": [3],
        "saved": [],
        "hooks": {"pre": 0, "post": 0},
        "seq": None,
    }
    assert d["edges"] == [
        {"src": 0, "dst": 1, "slot": 0},
        {"src": 1, "dst": 2, "slot": 0},
        {"src": 1, "dst": 3, "slot": 1},
    ]
    assert (
        str(g)
        == g.summary()
        == "\n".join(
            [
                "grad graph: 4 nodes, 3 edges, roots [0], saved 24 B",
                "#0 SumBackward0 → #1",
                "#1 MulBackward0 → #2, #3 ← saved other =input [3] float32 (12 B), self =input [3] float32 (12 B)",
                "#2 AccumulateGrad a [3]",
                "#3 AccumulateGrad b [3]",
            ]
        )
    )
    assert grad_graph(y, names={"a": a, "b": b}).to_dict() == d  # deterministic
    rec = record_backward(y, graph=g)
    assert rec.summary().splitlines()[0] == "backward: 4 steps, 1 nodes released saved tensors"
    assert "#1 MulBackward0 → grads [3], [3] (saved released)" in rec.summary()


def test_module_parameters_name_the_leaves_of_a_12_layer_mlp() -> None:
    layers: list[nn.Module] = []
    for k in range(12):
        layers.append(nn.Linear(8, 8))
        if k < 11:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    x = torch.randn(2, 8)
    g = grad_graph(model(x).sum(), params=model)
    counts = Counter(n.name for n in g.nodes)
    # per Linear: AddmmBackward0 + TBackward0 (weight.t()) + two AccumulateGrad; 11 ReLUs; one sum
    assert counts == {
        "AccumulateGrad": 24,
        "AddmmBackward0": 12,
        "TBackward0": 12,
        "ReluBackward0": 11,
        "SumBackward0": 1,
    }
    assert {n.param for n in g.nodes if n.kind == "leaf"} == {name for name, _ in model.named_parameters()}
    assert g.by_name("0.weight").shape == (8, 8) and g.by_name("22.bias").shape == (8,)
    assert g.fns[g.by_name("22.bias").id].variable is model[22].bias
    named = grad_graph(model(x).sum(), params=list(model.named_parameters()))
    assert named.by_name("10.weight").param == "10.weight"


def test_the_pictures_totals_are_the_lens_totals() -> None:
    from torchlens_widgets.render.grad_graph import grad_graph_model

    torch.manual_seed(0)
    a = torch.randn(2, 3, 8, requires_grad=True)
    lin = nn.Linear(8, 8)
    r = torch.relu(a * 2)
    loss = (lin(r) * r[..., :1]).sum()  # r is saved by relu, by addmm (as a view) and by mul (as a slice)
    g = grad_graph(loss, params=lin)
    stats = grad_graph_model(g.to_dict())["stats"]
    assert (stats["saved_nbytes"], stats["activation_nbytes"]) == (g.total_saved_bytes(), g.total_saved_bytes(include_leaves=False))
    # r once (saved whole, as a view and as a slice), lin(r) (mul's self), the int64 2; plus weight.t()
    assert g.total_saved_bytes(include_leaves=False) == 192 + 192 + 8
    assert g.total_saved_bytes() == 192 + 192 + 8 + 256
    loss.backward()
    after = grad_graph(*[g.fns[i] for i in g.roots])  # every saved tensor released: nothing is held
    assert any(s.freed and s.nbytes for n in after.nodes for s in n.saved)
    assert grad_graph_model(after.to_dict())["stats"]["saved_nbytes"] == after.total_saved_bytes() == 0


@pytest.mark.parametrize("params", ["abc", 5, [1, 2], [("a",)], {"w": "not a tensor"}, torch.ones(2)])
def test_bad_params_get_the_modules_own_error(params: object) -> None:
    from torchlens_widgets.lenses.autograd import GradGraphError

    y = (torch.randn(3, requires_grad=True) * 2).sum()
    with pytest.raises(GradGraphError, match="params|names"):
        grad_graph(y, params=params)  # type: ignore[arg-type]
    assert issubclass(GradGraphError, TypeError) and issubclass(GradGraphError, ValueError)


def test_sparse_and_nested_tensors_give_a_true_picture() -> None:
    import json

    from torchlens_widgets.render.grad_graph import grad_graph_model, grad_graph_svg

    s = torch.randn(3, 3).to_sparse().requires_grad_()
    nt = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], requires_grad=True)
    for root in ((s * 2).sum(), nt * 2):
        g = grad_graph(root)
        data = json.loads(json.dumps(g.to_dict()))
        assert "<svg" in grad_graph_svg(grad_graph_model(data))
    leaf = next(n for n in grad_graph(nt * 2).nodes if n.kind == "leaf")
    assert leaf.shape is None  # a nested tensor has no single shape: said, not invented
