"""The dispatch renderer: model rows, filters, folding, static HTML/text, and the fixture the TS tests read.

The fixture trace (labextension/test/fixtures/dispatch_trace.json) was recorded once from
`fixture_program`; the model, the filtered cases and the static HTML are regenerated from it, and
the tests below fail when `trace_model` / `filter_model` / `dispatch_html` drift from the files the
browser tests check (so the two sides cannot silently disagree). Torch version changes cannot make
these tests flaky: only the *stored* trace is rendered.

Regenerate after an intended renderer change:
    .venv/bin/python -c "from tests.render.test_dispatch_render import write_fixture; write_fixture()"
Re-record the trace itself (after a lens schema change): write_fixture(record=True).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from torchlens_widgets.render.dispatch import (
    collapse_rows,
    dispatch_html,
    dispatch_model,
    dispatch_text,
    filter_model,
    trace_model,
)

FIXTURES = Path(__file__).resolve().parents[2] / "labextension" / "test" / "fixtures"
TRACE_JSON = FIXTURES / "dispatch_trace.json"
MODEL_JSON = FIXTURES / "dispatch_model.json"
CASES_JSON = FIXTURES / "dispatch_cases.json"

#: Filter / fold combinations the TS tests replay against Python's answer.
CASES: list[dict[str, Any]] = [
    {"filters": {}, "collapsed": []},
    {"filters": {"empty_calls": True}, "collapsed": []},
    {"filters": {"text": "  T.DEF "}, "collapsed": []},
    {"filters": {"hide_views": True}, "collapsed": []},
    {"filters": {"only_copies": True}, "collapsed": []},
    {"filters": {"text": "detach", "empty_calls": True}, "collapsed": []},
    {"filters": {"text": "no such op"}, "collapsed": []},
    {"filters": {}, "collapsed": ["c3"]},
    {"filters": {"hide_views": True}, "collapsed": ["c5", "c9"]},
]


def fixture_program() -> Any:
    """A view, a hidden copy, a module call (Linear + ReLU), backward, and a call with no aten op."""
    import torch
    from torch import nn

    from torchlens_widgets.lenses.dispatch import dispatch_trace

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    x = torch.randn(2, 4)
    with dispatch_trace(model) as tr:
        x.t().reshape(-1)  # t (view); reshape of a non-viewable tensor: clone (copy) + _unsafe_view
        x.view(8)  # a view
        model(x).sum().backward()
        x.shape  # noqa: B018  a torch-function call that runs no aten op
    return tr


def stored_trace() -> dict[str, Any]:
    return json.loads(TRACE_JSON.read_text(encoding="utf-8"))


def case_answer(model: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    shown = filter_model(model, **{**model["filters"], "empty_calls": False, **case["filters"]})
    visible = collapse_rows(shown["rows"], case["collapsed"])
    return {
        **case,
        "filters": shown["filters"],
        "ids": [r["id"] for r in visible],
        "counts": shown["counts"],
        "headline_ops": shown["totals"]["shown_ops"],
        "html": dispatch_html(shown, case["collapsed"]),
    }


def write_fixture(record: bool = False) -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    if record or not TRACE_JSON.exists():
        TRACE_JSON.write_text(json.dumps(fixture_program().to_dict(), indent=1) + "\n", encoding="utf-8")
    model = trace_model(stored_trace())
    MODEL_JSON.write_text(json.dumps(model, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    cases = [case_answer(model, c) for c in CASES]
    CASES_JSON.write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


# -- the fixture is what the renderer computes -----------------------------------------------------


def test_fixture_model_matches_trace_model() -> None:
    stored = json.loads(MODEL_JSON.read_text(encoding="utf-8"))
    assert stored == trace_model(stored_trace()), "trace_model changed: regenerate with write_fixture()"


def test_fixture_cases_match_filter_model_and_html() -> None:
    model = trace_model(stored_trace())
    stored = json.loads(CASES_JSON.read_text(encoding="utf-8"))
    assert [{"filters": c["filters"], "collapsed": c["collapsed"]} for c in stored] == [
        {"filters": case_answer(model, c)["filters"], "collapsed": c["collapsed"]} for c in CASES
    ]
    assert stored == [case_answer(model, c) for c in CASES], "filters or HTML changed: regenerate with write_fixture()"


def test_live_trace_has_the_stored_schema() -> None:
    """The lens still produces what the stored trace (and so the TS fixture) looks like."""
    live, stored = fixture_program().to_dict(), stored_trace()
    assert live.keys() == stored.keys() and live["kind"] == stored["kind"] and live["version"] == stored["version"]
    assert set(live["ops"][0]) == set(stored["ops"][0])
    assert set(live["ops"][0]["inputs"][0]) == set(stored["ops"][0]["inputs"][0])
    assert set(live["calls"][0]) == set(stored["calls"][0])
    assert [c["name"] for c in live["calls"]] == [c["name"] for c in stored["calls"]]


# -- hand-checked facts about the fixture -----------------------------------------------------------


def rows_by_id() -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in trace_model(stored_trace())["rows"]}


def test_rows_nest_calls_over_their_ops_in_execution_order() -> None:
    model = trace_model(stored_trace())
    assert model["filters"]["empty_calls"] is True  # trace_model keeps everything
    names = [(r["depth"], r["name"]) for r in model["rows"]]
    assert names[:5] == [
        (0, "Tensor.t"),
        (1, "aten.t.default"),
        (0, "Tensor.reshape"),
        (1, "aten.clone.default"),
        (1, "aten._unsafe_view.default"),
    ]
    assert (0, "Tensor.view") in names and (1, "aten.view.default") in names
    i = names.index((0, "Sequential"))
    assert names[i + 1 : i + 5] == [
        (1, "0 (Linear)"),
        (2, "torch.nn.functional.linear"),
        (3, "aten.t.default"),
        (3, "aten.addmm.default"),
    ]
    assert names[-1] == (0, "Tensor.shape")
    by_id = rows_by_id()
    for r in model["rows"]:  # every row's parent comes before it
        if r["parent"] is not None:
            assert model["rows"].index(by_id[r["parent"]]) < model["rows"].index(r)


def test_row_text_says_view_copy_and_strides() -> None:
    rows = [r for r in trace_model(stored_trace())["rows"] if r["type"] == "op"]
    t, clone, unsafe = rows[0], rows[1], rows[2]
    assert (t["inputs"], t["outputs"]) == ("float32[2, 4]", "float32[4, 2] stride (1, 4) view of in0")
    assert t["view"] and not t["copy"]
    assert clone["copy"] and clone["outputs"] == "float32[4, 2] fresh"
    assert clone["inputs"] == "float32[4, 2] stride (1, 4)"
    assert unsafe["outputs"] == "float32[8] view of in0"


def test_default_filters_hide_calls_without_ops_and_count_shown_ops() -> None:
    model = dispatch_model(stored_trace())
    names = [r["name"] for r in model["rows"]]
    assert "Tensor.shape" not in names and "Tensor.t" in names
    assert sum(c["count"] for c in model["counts"]) == model["totals"]["shown_ops"] == model["totals"]["ops"]
    assert model["counts"][0]["name"] == "aten.t.default"  # the most frequent overload comes first
    counts = [(c["count"], c["name"]) for c in model["counts"]]
    assert counts == sorted(counts, key=lambda c: (-c[0], c[1]))


def test_only_copies_keeps_the_clone_and_its_call() -> None:
    model = dispatch_model(stored_trace(), only_copies=True)
    assert [(r["type"], r["name"]) for r in model["rows"]] == [("call", "Tensor.reshape"), ("op", "aten.clone.default")]
    assert model["counts"] == [{"name": "aten.clone.default", "count": 1, "copy": True}]


def test_hide_views_drops_pure_views_only() -> None:
    model = dispatch_model(stored_trace(), hide_views=True)
    ops = [r for r in model["rows"] if r["type"] == "op"]
    assert ops and not any(r["view"] for r in ops)
    assert "aten.clone.default" in [r["name"] for r in ops]
    assert "Tensor.t" not in [r["name"] for r in model["rows"]]  # a call whose only op was a view goes too


def test_collapse_rows_hides_descendants_only() -> None:
    model = trace_model(stored_trace())
    seq = next(r["id"] for r in model["rows"] if r["name"] == "Sequential")
    kept = collapse_rows(model["rows"], [seq])
    ids = {r["id"] for r in kept}
    assert seq in ids
    assert not any(r["parent"] == seq for r in kept)
    # 0 (Linear) → F.linear → t, addmm and 1 (ReLU) → F.relu → relu, detach: 8 rows folded away
    assert len(kept) == len(model["rows"]) - 8


# -- static output: deterministic, escaped, bounded; bad input -------------------------------------


def test_html_and_text_are_deterministic_and_script_free() -> None:
    a, b = dispatch_model(stored_trace()), dispatch_model(json.loads(json.dumps(stored_trace())))
    assert dispatch_html(a) == dispatch_html(b) and dispatch_text(a) == dispatch_text(b)
    html = dispatch_html(a)
    assert "<script" not in html.lower() and "0x" not in html and "onclick" not in html
    assert html.count('class="tlw-op') == a["totals"]["shown_ops"] == 21
    assert dispatch_text(a).splitlines()[0] == "DispatchTrace: 21 aten ops (1 copy, 13 views, 0 in-place) under 11 Python calls"


def test_html_escapes_names() -> None:
    trace = stored_trace()
    trace["calls"][0]["name"] = "<img src=x onerror=alert(1)>"
    html = dispatch_html(dispatch_model(trace))
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_static_output_is_bounded() -> None:
    model = dispatch_model(stored_trace())
    html = dispatch_html(model, max_rows=3)
    assert html.count("<tr class=\"tlw-call") + html.count("<tr class=\"tlw-op") == 3
    assert f"… {len(model['rows']) - 3} more rows" in html
    text = dispatch_text(model, max_lines=4)
    assert f"… {len(model['rows']) - 4} more rows" in text


def test_max_ops_truncates_rows_but_not_totals() -> None:
    model = trace_model(stored_trace(), max_ops=3)
    assert model["truncated"] and model["totals"]["ops"] == 21 and model["totals"]["rows_ops"] == 3
    assert [r["id"] for r in model["rows"] if r["type"] == "op"] == ["o0", "o1", "o2"]
    assert model["notes"] == ["showing the first 3 of 21 aten ops"]


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (None, TypeError, "expected a dispatch trace"),
        ({"kind": "stride"}, TypeError, "expected a dispatch trace"),
        ({"kind": "dispatch_trace", "version": 9, "ops": [], "calls": []}, ValueError, "unsupported dispatch_trace version 9"),
    ],
)
def test_bad_input(bad: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        trace_model(bad)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_ops"):
        trace_model(stored_trace(), max_ops=-1)
    with pytest.raises(TypeError, match="unknown filter"):
        dispatch_model(stored_trace(), regex=".*")
    with pytest.raises(TypeError, match="dispatch model"):
        filter_model({"kind": "stride"})
    with pytest.raises(TypeError, match="must be a string"):
        filter_model(trace_model(stored_trace()), text=None)  # type: ignore[arg-type]


def test_empty_trace_renders() -> None:
    model = dispatch_model({"kind": "dispatch_trace", "version": 1, "ops": [], "calls": []})
    assert model["rows"] == [] and model["counts"] == []
    assert dispatch_text(model) == "DispatchTrace: 0 aten ops (0 copies, 0 views, 0 in-place) under 0 Python calls"
    assert "<tbody></tbody>" in dispatch_html(model)


def test_inputs_the_lens_could_not_fully_describe_say_so() -> None:
    from torchlens_widgets.render.dispatch import _fmt_in

    base = {"dtype": "float32", "device": "cpu", "shape": [2, 3], "stride": [3, 1], "layout": "strided"}
    assert _fmt_in(base) == "float32[2, 3]"
    shown = dict(base, note="symbolic sizes s0: shown at these example values")
    assert _fmt_in(shown) == "float32[2, 3] (symbolic sizes s0: shown at these example values)"
    symbolic = dict(base, shape=[], stride=[], layout="symbolic", note="symbolic shape [u0] without example sizes")
    assert _fmt_in(symbolic) == "float32[symbolic] (symbolic shape [u0] without example sizes)"
