"""Rank lanes picture (from recorded 2-rank DDP and FSDP2 runs saved as fixtures): the model places every
bucket and node on one axis, the SVG draws exactly the model with theme colours and unclipped labels, and the
text is deterministic (no times)."""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from torchlens_widgets.render.distributed import (
    CHAR_W,
    LEFT,
    RIGHT,
    default_iteration,
    fmt_bytes,
    ranks_model,
    ranks_svg,
    ranks_text,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "distributed"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def ddp() -> dict[str, Any]:
    return json.loads((FIXTURES / "ddp_trace.json").read_text())


@pytest.fixture(scope="module")
def fsdp() -> dict[str, Any]:
    return json.loads((FIXTURES / "fsdp_trace.json").read_text())


def test_model_places_every_bucket_of_the_iteration_on_one_axis(ddp: dict[str, Any]) -> None:
    m = ranks_model(ddp, width=900)
    assert m["kind"] == "ranks" and m["iteration"] == default_iteration(ddp) == 2
    assert [lane["row"] for lane in m["lanes"]] == ["backward", "comm", "backward", "comm"]
    buckets = [b for r in ddp["ranks"] for b in r["buckets"] if b["iteration"] == 2]
    assert len(m["comms"]) == len(buckets) == 6
    assert all(c["kind"] == "bucket" for c in m["comms"])
    for c in m["comms"]:
        b = next(b for b in ddp["ranks"][c["rank"]]["buckets"] if b["iteration"] == 2 and b["index"] == c["bucket"])
        assert c["x"] == pytest.approx(LEFT + (b["start"] - m["origin"]) * m["scale"], abs=0.01)
        assert c["w"] == pytest.approx(max((b["end"] - b["start"]) * m["scale"], 1), abs=0.01)
        assert c["params"] == b["params"] and c["nbytes"] == b["nbytes"]
        assert LEFT <= c["x"] and c["x"] + c["w"] <= 900 - RIGHT + 0.02
        assert c["cat"] == c["bucket"] % 8 + 1  # the same bucket has the same colour on every rank
    assert [b["params"] for b in m["buckets"]] == ddp["ranks"][0]["result"]["ddp_partition"]
    nodes = [n for n in ddp["ranks"][0]["nodes"] if n["iteration"] == 2]
    assert len([n for n in m["nodes"] if n["rank"] == 0]) == len(nodes)


def test_overlapping_collectives_get_their_own_sub_rows(ddp: dict[str, Any]) -> None:
    m = ranks_model(ddp)
    for rank in (0, 1):
        spans = sorted((c for c in m["comms"] if c["rank"] == rank), key=lambda c: c["x"])
        for a in spans:
            for b in spans:
                if a is not b and a["y"] == b["y"]:
                    assert a["x"] + a["w"] <= b["x"] + 0.02 or b["x"] + b["w"] <= a["x"] + 0.02
        lane = next(la for la in m["lanes"] if la["rank"] == rank and la["row"] == "comm")
        assert all(lane["y"] <= c["y"] and c["y"] + c["h"] <= lane["y"] + lane["h"] for c in spans)


def test_svg_draws_the_model_with_theme_colours_and_unclipped_labels(ddp: dict[str, Any], fsdp: dict[str, Any]) -> None:
    for trace in (ddp, fsdp):
        m = ranks_model(trace)
        svg = ranks_svg(m, selected=0)
        root = ET.fromstring(svg)  # XHTML-parsable
        assert "tlw-theme" in root.get("class", "") and "background:var(--tlw-bg)" in root.get("style", "")
        assert not re.search(r'(fill|stroke)="#', svg) and "var(--tlw-cat1)" in svg
        assert len(root.findall(f".//{SVG}g[@class='tlw-comm-g']")) == len(m["comms"])
        assert len(root.findall(f".//{SVG}rect[@data-rank]")) == len(m["nodes"]) + len(m["lanes"])
        assert len(root.findall(f".//{SVG}g/{SVG}rect")) == len(m["comms"])
        for c in m["comms"]:
            assert not c["short"] or len(c["short"]) * CHAR_W <= c["w"]
        for n in m["nodes"]:
            assert not n["short"] or len(n["short"]) * CHAR_W <= n["w"]
        for text in root.iter(f"{SVG}text"):
            x = float(text.get("x", 0))
            n = len(text.text or "")
            right = x + (n * CHAR_W / 2 if text.get("text-anchor") == "middle" else 0 if text.get("text-anchor") == "end"
                         else n * CHAR_W)
            assert right <= m["width"] + 0.5, text.text
    sel = ET.fromstring(ranks_svg(ddp, selected=1))
    chosen = [g for g in sel.iter(f"{SVG}g") if g.get("data-bucket") == "1"]
    assert len(chosen) == 2 and all("tlw-sel" in g.find(f"{SVG}rect").get("class") for g in chosen)


def test_fsdp_model_has_collectives_and_a_memory_row(fsdp: dict[str, Any]) -> None:
    m = ranks_model(fsdp)
    assert [lane["row"] for lane in m["lanes"]] == ["backward", "comm", "memory"] * 2
    assert {c["kind"] for c in m["comms"]} == {"all_gather", "reduce_scatter"}
    assert all(c["bucket"] is None for c in m["comms"])
    assert [mm["peak"] for mm in m["memory"]] == [max(s["total"] for s in r["memory"]) for r in fsdp["ranks"]]
    tips = [c["tip"] for c in m["comms"] if c["kind"] == "all_gather"]
    assert tips and all("all-gather" in t for t in tips)


def test_text_is_deterministic_and_says_the_partition(ddp: dict[str, Any], fsdp: dict[str, Any]) -> None:
    text = ranks_text(ddp)
    assert text.splitlines()[1:5] == [
        "iterations: 0: 1 bucket; 1 (no_sync): 0 buckets; 2: 3 buckets",
        "bucket partition in iteration 2 (the same on every rank; bucket 0 is all-reduced first):",
        "  bucket 0: 6.bias, 6.weight, 4.bias, 4.weight (4.6 KiB)",
        "  bucket 1: 2.bias, 2.weight (4.1 KiB)",
    ]
    shifted = copy.deepcopy(ddp)  # other timings, same run: the same text
    for r in shifted["ranks"]:
        for b in r["buckets"]:
            b["start"] += 17.5
            b["end"] += 99
    assert ranks_text(shifted) == text
    assert not re.search(r"\d+\.\d+ ?µs|0x[0-9a-f]{6,}", text)
    assert "iteration 1 ran under no_sync" in ranks_text(ddp, iteration=1)
    ft = ranks_text(fsdp)
    assert "  6.weight (4, 32) S(0) -> rank 0 (2, 32), rank 1 (2, 32)" in ft
    assert "all-gathers [8, 8]" in ft and "reduce-scatters [4, 4]" in ft


def test_bad_input_is_refused_clearly(ddp: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="distributed trace"):
        ranks_model({"kind": "lanes"})
    with pytest.raises(ValueError, match="iteration 9 was not recorded"):
        ranks_model(ddp, iteration=9)
    with pytest.raises(ValueError, match="version"):
        ranks_model({**ddp, "version": 2})
    assert fmt_bytes(1000) == "1000 B" and fmt_bytes(4752) == "4.6 KiB" and fmt_bytes(2048) == "2 KiB"


def test_the_js_fixture_is_this_renderers_model(ddp: dict[str, Any], fsdp: dict[str, Any]) -> None:
    """labextension/test/fixtures/ranks_models.json (the vitest input) is what ranks_model gives today."""
    path = Path(__file__).resolve().parents[2] / "labextension" / "test" / "fixtures" / "ranks_models.json"
    got = json.loads(json.dumps({"ddp": ranks_model(ddp), "fsdp": ranks_model(fsdp)}))
    assert json.loads(path.read_text()) == got, "regenerate it: tests/fixtures/distributed/README.md"


def _shifted(trace: dict[str, Any], rank: int, by: float) -> dict[str, Any]:
    """`trace` with every time of `rank` moved by `by` µs."""
    out = copy.deepcopy(trace)
    r = out["ranks"][rank]
    for part in ("iterations", "buckets", "collectives", "nodes"):
        for row in r[part]:
            for key in ("start", "end", "backward_start", "backward_end", "ready"):
                if row.get(key) is not None:
                    row[key] += by
    for sample in r["memory"]:
        sample["t"] += by
    return out


def test_axis_starts_where_both_ranks_run_and_says_what_was_cut(fsdp: dict[str, Any]) -> None:
    """Issue 25 item 5: rank 1 waited ~102 ms in its first all-gather for rank 0 to start; that wait is not drawn."""
    r0 = fsdp["ranks"][0]
    late = min([r0["iterations"][0]["start"]] + [c["start"] for c in r0["collectives"]])
    m = ranks_model(fsdp)
    cut = m["cut"]
    assert cut is not None and (cut["late_rank"], cut["first_rank"]) == (0, 1)
    assert cut["late_by"] == pytest.approx(late)  # rank 1 started first, at the axis's 0
    assert m["zero"] == 0 and late - 0.02 * (m["end"]) <= m["origin"] <= late  # a small margin before rank 0
    assert m["unit"] == "ms" and m["t0"] == pytest.approx(m["origin"] / 1000)
    labels = [float(t["label"]) for t in m["ticks"]]
    assert labels[0] >= m["t0"] and labels == sorted(labels) and len(labels) >= 5  # ticks only after the cut
    for t in m["ticks"]:
        assert t["x"] == pytest.approx(LEFT + (float(t["label"]) * 1000 - m["origin"]) * m["scale"], abs=0.01)
    assert cut["text"].startswith(f"axis starts at {m['origin'] / 1000:.1f} ms: rank 0 started "
                                  f"{late / 1000:.1f} ms after rank 1; the wait before is not drawn")
    # rank 1's first all-gather began before the cut: drawn from the left edge, marked, its tip says so
    (waited,) = [c for c in m["comms"] if c["clipped"]]
    assert (waited["rank"], waited["label"], waited["x"]) == (1, "all-gather 0", LEFT)
    assert "begun before the axis starts" in waited["tip"]
    assert all(LEFT <= c["x"] and c["x"] + c["w"] <= m["width"] - RIGHT + 0.02 for c in m["comms"])
    held = next(mm for mm in m["memory"] if mm["rank"] == 1)
    assert float(held["points"].split(",")[0]) == LEFT  # rank 1's bytes held from the cut on
    svg = ranks_svg(m)
    root = ET.fromstring(svg)
    assert len(root.findall(f".//{SVG}path[@class='tlw-cut-mark']")) == 1
    (note,) = root.findall(f".//{SVG}text[@class='tlw-cut-note']")
    assert note.text == cut["text"] and float(note.get("y")) < m["height"]
    text = ranks_text(fsdp)
    assert ("note: rank 0 started well after rank 1: the picture's time axis starts where every rank is running; "
            "the wait before is not drawn") in text
    assert not re.search(r"\d+\.\d+ ?(µs|ms)", text)  # still no times in the text


def test_no_cut_when_the_ranks_start_together_or_work_would_be_hidden(ddp: dict[str, Any], fsdp: dict[str, Any]) -> None:
    r = [min([x["iterations"][0]["start"]] + [c["start"] for c in x["collectives"]]) for x in fsdp["ranks"]]
    together = _shifted(fsdp, 0, r[1] - r[0])  # rank 0 moved back to rank 1's start
    m = ranks_model(together)
    assert m["cut"] is None and m["t0"] == 0 and m["ticks"][0]["label"] == "0" and m["ticks"][0]["x"] == LEFT
    assert not any(c["clipped"] for c in m["comms"]) and "tlw-cut-note" not in ranks_svg(m)
    assert "time axis starts" not in ranks_text(together)
    # DDP: rank 0's backward started ~3.7 ms after rank 1's, but rank 1 computed gradients meanwhile: nothing is cut
    d = ranks_model(ddp)
    assert d["cut"] is None and d["unit"] == "µs" and d["ticks"][0]["label"] == "0"


def test_comm_labels_are_whole_words_or_nothing(fsdp: dict[str, Any]) -> None:
    """A narrow collective says "AG 0" (the legend says what AG is), never "al…"."""
    for width in (960, 700, 2400):
        m = ranks_model(fsdp, width=width)
        for c in m["comms"]:
            room = c["w"] - (7 if c["clipped"] else 0)  # a clipped span's marker comes before its label
            assert c["short"] in c["texts"] + [""]
            assert not c["short"] or len(c["short"]) * CHAR_W + 4 <= room
            assert c["short"] == next((t for t in c["texts"] if len(t) * CHAR_W + 4 <= room), "")
        if any(c["short"].startswith(("AG ", "RS ")) for c in m["comms"]):
            assert any(f["cls"] == "tlw-legend" and "AG all-gather" in f["text"] for f in m["footer"])
    wide = ranks_model(fsdp, width=2400)
    assert "all-gather 0 2.1 KiB" in [c["short"] for c in wide["comms"]]
