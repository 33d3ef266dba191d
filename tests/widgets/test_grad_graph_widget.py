"""The grad_fn graph widget's Python side: factory inputs, traits, focus recomputation, details, bad input."""

from __future__ import annotations

import json

import pytest
import torch
import traitlets
from torch import nn

from torchlens_widgets.lenses.autograd import grad_graph, record_backward
from torchlens_widgets.render.grad_graph import grad_graph_svg, grad_graph_text
from torchlens_widgets.render.portable import portable_svg
from torchlens_widgets.widgets.grad_graph import GradGraphWidget, node_details, show_grad_graph


def mlp_loss() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    return m, m(torch.randn(5, 3)).pow(2).mean()


def names(w: GradGraphWidget) -> dict[int, str]:
    return {n["id"]: n["name"] for n in w.model["nodes"]}


# Hand-walked graph of mlp_loss (BFS from the loss over next_functions):
# 0 Mean → 1 Pow → 2 Addmm(2.bias, Relu, T(2.weight)) → 3 leaf 2.bias, 4 Relu, 5 T → 6 Addmm(0.bias, x, T(0.weight)),
# 7 leaf 2.weight → 8 leaf 0.bias, 9 T → 10 leaf 0.weight.
MLP_NAMES = {0: "MeanBackward0", 1: "PowBackward0", 2: "AddmmBackward0", 3: "AccumulateGrad", 4: "ReluBackward0",
             5: "TBackward0", 6: "AddmmBackward0", 7: "AccumulateGrad", 8: "AccumulateGrad", 9: "TBackward0",
             10: "AccumulateGrad"}


def test_factory_from_roots_with_recording_keeps_pre_backward_metadata_and_names() -> None:
    m, loss = mlp_loss()
    rec = record_backward(loss)  # its own graph: unnamed, built before backward
    w = show_grad_graph(loss, params=m, recording=rec)
    assert names(w) == MLP_NAMES
    params = {n["id"]: n["param"] for n in w.model["nodes"] if n["param"]}
    assert params == {3: "2.bias", 7: "2.weight", 8: "0.bias", 10: "0.weight"}
    relu = next(n for n in w.model["nodes"] if n["id"] == 4)
    # saved result of relu: [5, 4] float32 = 80 bytes, shown as held before backward
    assert [(s["name"], s["shape"], s["nbytes"], s["freed"]) for s in relu["saved"]] == [("result", [5, 4], 80, False)]
    assert len(w.model["steps"]) == 11 and w.step == -1
    assert [s["node"] for s in w.model["steps"]][:4] == [0, 1, 2, 3]


def test_factory_accepts_a_graph_a_recording_alone_and_a_recording_dict() -> None:
    m, loss = mlp_loss()
    g = grad_graph(loss, params=m)
    rec = record_backward(loss, graph=g)
    a = show_grad_graph(g)
    b = show_grad_graph(recording=rec)
    c = show_grad_graph(recording=rec, params=m)
    assert names(a) == names(b) == MLP_NAMES
    assert a.model["steps"] == [] and len(b.model["steps"]) == 11
    assert {n["param"] for n in c.model["nodes"]} == {n["param"] for n in b.model["nodes"]}  # g was named
    d = show_grad_graph(g, recording=rec.to_dict())
    assert [s["orig"] for s in d.model["steps"]] == rec.order


def test_bad_input_gives_clear_errors() -> None:
    with pytest.raises(ValueError, match="has no grad_fn"):
        show_grad_graph(torch.ones(3))
    with pytest.raises(TypeError, match="needs the output of a computation"):
        show_grad_graph()
    with pytest.raises(TypeError, match="recording must be a BackwardRecording"):
        show_grad_graph(mlp_loss()[1], recording=[1, 2])
    _, loss1 = mlp_loss()
    _, loss2 = mlp_loss()
    rec = record_backward(loss1)
    with pytest.raises(ValueError, match="different graph"):
        show_grad_graph(loss2, recording=rec)
    with pytest.raises(ValueError, match="focus node 99 is not in the graph"):
        show_grad_graph(loss2, focus=99)


def test_select_step_and_details_follow_the_recording() -> None:
    m, loss = mlp_loss()
    w = show_grad_graph(loss, params=m, recording=record_backward(loss))
    d = w.select(4)
    assert w.selected == 4 and d["name"] == "ReluBackward0" and d["state"] == "waiting"
    relu_step = next(s["step"] for s in w.model["steps"] if s["node"] == 4)
    assert w.step_to(relu_step - 1)["node"] != 4
    assert w.details()["saved"][0]["freed"] is False and w.details()["held_nbytes"] == 80
    assert w.step_to(relu_step)["name"] == "ReluBackward0"
    assert w.running() == 4
    d = w.details()
    assert d["state"] == "running" and d["saved"][0]["freed"] is True and d["held_nbytes"] == 0
    assert d["grads"] == [[5, 4]]  # ReLU's input gradient has the input's shape
    w.step_to(len(w.model["steps"]) - 1)
    assert w.details(4)["state"] == "done"
    w.step_to(-1)
    assert w.running() is None
    with pytest.raises(IndexError, match=r"step 11 is out of range: -1 \(before backward\) \.\. 10"):
        w.step_to(11)
    with pytest.raises(KeyError, match="node 42 is not drawn"):
        w.select(42)
    with pytest.raises(traitlets.TraitError, match="out of range"):
        w.step = -2
    assert w.select(None) is None and w.selected is None
    with pytest.raises(ValueError, match="no node is selected"):
        w.details()


def test_step_without_recording_says_how_to_get_one() -> None:
    w = show_grad_graph(mlp_loss()[1])
    with pytest.raises(IndexError, match="no recorded backward"):
        w.step_to(0)


def test_focus_and_hops_recompute_the_model_in_python() -> None:
    m, loss = mlp_loss()
    w = show_grad_graph(loss, params=m, recording=record_backward(loss))
    w.select(1)
    w.focus = 6
    w.hops = 1
    # node 6 (first layer's addmm) and its neighbours: 4 Relu above, 8 bias, 9 T below
    assert sorted(n["id"] for n in w.model["nodes"]) == [4, 6, 8, 9]
    assert w.selected is None  # node 1 is no longer drawn
    assert "center" in next(n for n in w.model["nodes"] if n["id"] == 6)["cls"].split()
    w.hops = 2
    assert sorted(n["id"] for n in w.model["nodes"]) == [2, 4, 6, 8, 9, 10]
    assert len(w.model["steps"]) == 11  # steps keep the full order; out-of-view nodes are null
    assert sum(s["node"] is None for s in w.model["steps"]) == 5
    w.focus = None
    assert len(w.model["nodes"]) == 11
    with pytest.raises(traitlets.TraitError, match="cannot focus on 99"):
        w.focus = 99
    with pytest.raises(traitlets.TraitError, match="hops must be >= 0"):
        w.hops = -1


def test_focus_from_the_browser_is_one_recomputation() -> None:
    """The page sends focus and hops in one message: the picture is computed once, for both."""
    m, loss = mlp_loss()
    w = show_grad_graph(loss, params=m)
    models = []
    w.observe(lambda ch: models.append(ch["new"]), "model")
    w.set_state({"focus": 6, "hops": 1})
    assert len(models) == 1 and sorted(n["id"] for n in models[0]["nodes"]) == [4, 6, 8, 9]


def test_collapsed_group_cannot_be_a_focus() -> None:
    from tests.render.test_grad_graph_fixture import fixture_graph

    graph, rec = fixture_graph()
    w = GradGraphWidget(graph.to_dict(), rec)
    group = next(n["id"] for n in w.model["nodes"] if n["kind"] == "group")
    assert w.details(group)["group"]["repeat"] == 3
    with pytest.raises(traitlets.TraitError, match="a collapsed group"):
        w.focus = group


def test_mimebundle_carries_widget_svg_and_deterministic_text() -> None:
    m, loss = mlp_loss()
    w = show_grad_graph(loss, params=m, recording=record_backward(loss))
    data, _ = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["image/svg+xml"] == portable_svg(grad_graph_svg(w.model))  # the static picture, captioned
    assert data["text/plain"] == grad_graph_text(w.model) == repr(w)
    assert data["text/plain"].startswith("GradGraph: 11 nodes (4 leaf, 7 op), 10 edges, 1 root")
    assert "recorded backward: 11 steps" in data["text/plain"]
    _, loss2 = mlp_loss()
    w2 = show_grad_graph(loss2, params=m, recording=record_backward(loss2))
    assert w2._repr_mimebundle_()[0]["text/plain"] == data["text/plain"]  # no timings or addresses
    json.dumps(w.model)  # the trait is JSON


def test_node_details_is_pure_and_checks_the_node() -> None:
    m, loss = mlp_loss()
    model = show_grad_graph(loss, params=m).model
    d = node_details(model, 3)
    assert d["param"] == "2.bias" and d["kind"] == "leaf" and d["state"] is None and d["ran_at"] == []
    with pytest.raises(KeyError, match="not drawn"):
        node_details(model, 77)


def test_bundle_is_the_built_esm() -> None:
    w = show_grad_graph(mlp_loss()[1])
    assert isinstance(w._esm, str) and "export" in w._esm and "tlw-gnode" in w._esm
