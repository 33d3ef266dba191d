"""The memory timeline / state models that the TypeScript tests (labextension/test/memory*) draw are the Python contract.

`fixture_models` builds, from the hand-made snapshots in tests/fixtures/memory, the timeline of
segments.json (two segments, a record_stream free left pending), the same on the wall-clock axis,
plain.json with only its largest band drawn (the rest aggregated), and the state panel after event 4
of segments.json with the simulator's explanation. `write_fixture` regenerates the files; the tests
below fail when `memory_model` / `memory_svg` / `memory_state_model` drift from them.

Regenerate after an intended schema/geometry change:
    .venv/bin/python -c "from tests.render.test_memory_fixture import write_fixture; write_fixture()"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torchlens_widgets.lenses.memory import load_snapshot
from torchlens_widgets.render.memory import memory_model, memory_state_model, memory_state_svg, memory_svg
from torchlens_widgets.widgets.memory import show_memory

SNAPSHOTS = Path(__file__).resolve().parents[1] / "fixtures" / "memory"
FIXTURES = Path(__file__).resolve().parents[2] / "labextension" / "test" / "fixtures"
MODEL_JSON = FIXTURES / "memory_model.json"
MODEL_SVG = FIXTURES / "memory_model.svg"
CASES_JSON = FIXTURES / "memory_cases.json"
STATE_EVENT = 4  # segments.json: free_requested of the stream-0 block, left pending (record_stream)
_SITE = "/usr/lib/python3.12/site-packages"
STACK_FRAMES = [  # innermost first, as torch records them: library, the notebook cell, library, a user file, library
    {"filename": f"{_SITE}/torch/nn/modules/linear.py", "line": 125, "name": "forward"},
    {"filename": "/tmp/ipykernel_4242/3190.py", "line": 7, "name": "step"},
    {"filename": f"{_SITE}/IPython/core/interactiveshell.py", "line": 3577, "name": "run_code"},
    {"filename": "/home/me/train.py", "line": 40, "name": "main"},
    {"filename": f"{_SITE}/ipykernel/kernelbase.py", "line": 400, "name": "dispatch_shell"},
]


def fixture_models() -> dict[str, Any]:
    seg = load_snapshot(SNAPSHOTS / "segments.json")
    model = memory_model(seg)
    time_model = memory_model(seg, x_axis="time")
    aggregated = memory_model(load_snapshot(SNAPSHOTS / "plain.json"), max_bands=1)
    w = show_memory(SNAPSHOTS / "segments.json", simulator=True)
    state = memory_state_model(seg, STATE_EVENT, model, w.explain(STATE_EVENT))
    clicks = [[model["plot"]["x"] + c + 0.5, model["col_event"][c]] for c in (0, 100, 435, len(model["col_event"]) - 1)]
    stacks = memory_model(load_snapshot({"device_traces": [[{
        "action": "alloc", "addr": 4096, "size": 4096, "stream": 0, "frames": STACK_FRAMES}]]}))
    return {"model": model, "time": time_model, "aggregated": aggregated, "state": state, "clicks": clicks,
            "stacks": stacks}


def _svgs(m: dict[str, Any]) -> dict[str, str]:
    return {"time": memory_svg(m["time"]), "aggregated": memory_svg(m["aggregated"]), "state": memory_state_svg(m["state"])}


def write_fixture() -> None:
    m = fixture_models()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    MODEL_JSON.write_text(json.dumps(m["model"], indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    MODEL_SVG.write_text(memory_svg(m["model"]) + "\n", encoding="utf-8")
    cases = {k: m[k] for k in ("time", "aggregated", "state", "clicks", "stacks")} | {"svg": _svgs(m)}
    CASES_JSON.write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_fixture_json_matches_memory_model() -> None:
    stored = json.loads(MODEL_JSON.read_text(encoding="utf-8"))
    assert stored == _json(fixture_models()["model"]), "memory_model changed: regenerate with write_fixture()"


def test_fixture_svg_matches_memory_svg() -> None:
    assert MODEL_SVG.read_text(encoding="utf-8").rstrip("\n") == memory_svg(fixture_models()["model"])


def test_fixture_cases_match() -> None:
    stored = json.loads(CASES_JSON.read_text(encoding="utf-8"))
    m = fixture_models()
    assert stored == _json({k: m[k] for k in ("time", "aggregated", "state", "clicks", "stacks")} | {"svg": _svgs(m)})


def test_fixture_covers_the_cases_the_ts_tests_rely_on() -> None:
    m = fixture_models()
    model, agg, state = m["model"], m["aggregated"], m["state"]
    assert [b["size"] for b in model["bands"]] == [2_000_000, 15_000_000]
    assert model["bands"][0]["pw"] > 0, "the stream-0 allocation's free stays pending from event 4 to 8"
    assert model["others"]["d"] == "" and agg["others"]["d"].endswith("Z")
    assert len(agg["bands"]) == 1 and agg["bands"][0]["size"] == 1000 and agg["others"]["allocations"] == 2
    assert state["index"] == STATE_EVENT and [r["label"] for r in state["rows"]] == ["2.0 MiB s0", "20.0 MiB s7"]
    assert [b["state"] for b in state["rows"][0]["blocks"]] == ["pending", "free"]
    assert state["explanation"] and "record_stream" in state["explanation"][0]
    assert m["time"]["x_axis"] == "time" and m["time"]["x_ticks"][-1]["label"] == "0.008 ms"
    assert model["has_time"] and not m["stacks"]["has_time"], "no times in the stacks trace: the page disables wall clock"
    assert m["stacks"]["bands"][0]["stack"].splitlines() == [
        "step (<cell>:7)", "main (/home/me/train.py:40)", "… 3 library frames (torch, IPython, ipykernel)"]
