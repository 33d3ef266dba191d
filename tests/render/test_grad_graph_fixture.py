"""The grad_fn graph model JSON that the TypeScript tests (labextension/test/gradgraph*) draw is the Python contract.

`fixture_models` builds, from a real backward of a small residual net, the picture the widget shows
(with a recording, one collapsed ×3 block) and a focused one; `write_fixture` regenerates the files,
and the tests below fail when `grad_graph_model` / `grad_graph_svg` / `node_details` drift from them.
Timings are replaced by 0.001 s per step and sequence numbers counted from the graph's first op,
so the files are deterministic.

Regenerate after an intended schema/geometry change:
    .venv/bin/python -c "from tests.render.test_grad_graph_fixture import write_fixture; write_fixture()"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from torchlens_widgets.lenses.autograd import GradGraph, grad_graph, record_backward
from torchlens_widgets.render.grad_graph import grad_graph_model, grad_graph_svg
from torchlens_widgets.widgets.grad_graph import node_details

FIXTURES = Path(__file__).resolve().parents[2] / "labextension" / "test" / "fixtures"
MODEL_JSON = FIXTURES / "grad_graph_model.json"
MODEL_SVG = FIXTURES / "grad_graph_model.svg"
FOCUSED_SVG = FIXTURES / "grad_graph_focused.svg"
CASES_JSON = FIXTURES / "grad_graph_cases.json"

FOCUS_NODE, FOCUS_HOPS = 18, 1  # the representative block's AddmmBackward0


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.fc(x))


class Net(nn.Module):
    """tanh(inp(x)) → three identical residual blocks h.0–h.2 → out: collapses to h.0 ×3."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(3, 4)
        self.h = nn.ModuleList(Block() for _ in range(3))
        self.out = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.inp(x))
        for b in self.h:
            x = b(x)
        return self.out(x)


def fixture_graph() -> tuple[GradGraph, dict[str, Any]]:
    """The lens graph (built before backward) and its recording dict, timings normalised."""
    torch.manual_seed(0)
    net = Net()
    loss = net(torch.randn(2, 3)).pow(2).mean()
    graph = grad_graph(loss, params=net)
    rec = record_backward(loss, graph=graph).to_dict()
    rec["seconds"] = [0.001] * len(rec["order"])
    return graph, rec


def fixture_models() -> dict[str, Any]:
    graph, rec = fixture_graph()
    g = graph.to_dict()
    # Sequence numbers come from a process-wide counter: count them from the first op of this graph.
    first = min(n["seq"] for n in g["nodes"] if n["seq"] is not None)
    for n in g["nodes"]:
        if n["seq"] is not None:
            n["seq"] -= first
    model = grad_graph_model(g, rec)
    focused = grad_graph_model(g, rec, focus_node=FOCUS_NODE, hops=FOCUS_HOPS)
    cases = []
    for node in (2, 13, 18, 24, 29, 0):  # op with saved inputs, relu (freed at 19), rep addmm, leaf, group, root
        for step in (-1, 0, 7, 19, 20, len(model["steps"]) - 1):
            cases.append({"node": node, "step": step, "details": node_details(model, node, step)})
    return {"model": model, "focused": focused, "cases": cases}


def write_fixture() -> None:
    m = fixture_models()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    MODEL_JSON.write_text(json.dumps(m["model"], indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    MODEL_SVG.write_text(grad_graph_svg(m["model"]) + "\n", encoding="utf-8")
    FOCUSED_SVG.write_text(grad_graph_svg(m["focused"]) + "\n", encoding="utf-8")
    cases = {"focused": m["focused"], "details": m["cases"]}
    CASES_JSON.write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_fixture_json_matches_grad_graph_model() -> None:
    stored = json.loads(MODEL_JSON.read_text(encoding="utf-8"))
    assert stored == _json(fixture_models()["model"]), "grad_graph_model changed: regenerate with write_fixture()"


def test_fixture_svgs_match_grad_graph_svg() -> None:
    m = fixture_models()
    assert MODEL_SVG.read_text(encoding="utf-8").rstrip("\n") == grad_graph_svg(m["model"])
    assert FOCUSED_SVG.read_text(encoding="utf-8").rstrip("\n") == grad_graph_svg(m["focused"])


def test_fixture_cases_match_node_details() -> None:
    stored = json.loads(CASES_JSON.read_text(encoding="utf-8"))
    m = fixture_models()
    assert stored == _json({"focused": m["focused"], "details": m["cases"]})


def test_fixture_covers_the_cases_the_ts_tests_rely_on() -> None:
    m = fixture_models()
    model, focused = m["model"], m["focused"]
    by_id = {n["id"]: n for n in model["nodes"]}
    assert by_id[29]["kind"] == "group" and by_id[29]["group"]["repeat"] == 3
    assert by_id[18]["block"] == {"group": 29, "prefix": "h", "index": 0, "repeat": 3}
    assert by_id[24]["param"] == "h.0.fc.bias" and by_id[24]["kind"] == "leaf"
    assert model["groups"][0]["box"] is not None
    steps = model["steps"]
    assert len(steps) == 29 and steps[0]["node"] == 0 and steps[3]["leaves"] == [3]
    assert steps[19]["node"] == 13 and steps[19]["freed"] == [13]  # ReluBackward0 of h.0 releases its result
    assert [s["node"] for s in steps[6:18]] == [29] * 12  # the folded blocks run inside the group node
    assert not any(s["freed"] for n in model["nodes"] for s in n["saved"]), "graph built before backward"
    # details: the relu's saved result is held before step 19 and freed from then on
    relu = {(c["node"], c["step"]): c["details"] for c in m["cases"] if c["node"] == 13}
    assert [s["freed"] for s in relu[(13, 7)]["saved"]] == [False]
    assert [s["freed"] for s in relu[(13, 19)]["saved"]] == [True]
    assert relu[(13, 19)]["state"] == "running" and relu[(13, 20)]["state"] == "done"
    assert relu[(13, -1)]["state"] == "waiting" and relu[(13, 19)]["held_nbytes"] == 0
    # the focused view: node 18 with its neighbours; cut nodes count hidden edges
    ids = {n["id"] for n in focused["nodes"]}
    assert FOCUS_NODE in ids and len(ids) < len(model["nodes"])
    assert any("center" in n["cls"].split() for n in focused["nodes"])
    assert any(n["hidden"] for n in focused["nodes"])
