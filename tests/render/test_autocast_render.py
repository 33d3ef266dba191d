"""The autocast table and value probe as themed, escaped, well-formed HTML and deterministic text."""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET

from torchlens_widgets.render.autocast import autocast_html, autocast_text, probe_html, probe_text

TRACE = {
    "function": "f", "device": "cpu", "dtype": "bfloat16", "cast_count": 2,
    "calls": [
        {"index": 0, "name": "linear", "inputs": ["float32", "float32"], "outputs": ["bfloat16"],
         "ran_as": ["mm: bfloat16"], "casts": ["float32 -> bfloat16", "float32 -> bfloat16"],
         "policy": "lower precision", "cast": True},
        {"index": 1, "name": "Tensor.relu", "inputs": ["bfloat16"], "outputs": ["bfloat16"], "ran_as": [],
         "casts": [], "policy": "unlisted", "cast": False},
    ],
}


def _parse(html: str) -> ET.Element:
    return ET.fromstring(re.sub(r"<style>.*?</style>", "", html, flags=re.S))


def test_casts_are_highlighted_and_lists_named() -> None:
    html = autocast_html(TRACE)
    root = _parse(html)
    rows = [r for r in root.iter("tr") if r.find("td") is not None]
    assert rows[0].get("class") == "cast" and rows[1].get("class") == ""
    assert "float32 -&gt; bfloat16, float32 -&gt; bfloat16" in html
    assert 'class="pol lo"' in html and 'class="pol none"' in html
    assert not re.search(r"#[0-9a-fA-F]{3,6}\b", re.sub(r"<style>.*?</style>", "", html, flags=re.S))


def test_hostile_names_are_escaped_and_text_is_stable() -> None:
    bad = copy.deepcopy(TRACE)
    bad["calls"][0]["name"] = "<script>x</script>"
    assert _parse(autocast_html(bad)).find(".//script") is None
    assert autocast_text(TRACE) == autocast_text(copy.deepcopy(TRACE))
    assert autocast_text(TRACE).splitlines()[1] == "  linear: float32, float32 -> bfloat16 [lower precision]  casts " \
        "float32 -> bfloat16, float32 -> bfloat16"


def test_probe_marks_lost_values() -> None:
    probes = [{"value": 70000.0, "stored": float("inf"), "relative_error": float("inf"), "outcome": "overflow"},
              {"value": 0.1, "stored": 0.0999755859375, "relative_error": 2.44e-4, "outcome": "rounded"}]
    html = probe_html(probes, "float16")
    _parse(html)
    assert '<td class="bad">overflow</td>' in html and "2.44e-04" in html
    assert probe_text(probes, "float16").splitlines()[1] == "  70000 -> inf (overflow)"
