"""The fusion picture: eager and fused kernels on one byte scale, intermediates marked; themed, escaped,
well-formed HTML; deterministic text."""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET

from torchlens_widgets.render.fusion import fusion_html, fusion_text, traffic_html, traffic_text

EAGER = {
    "mode": "eager", "inputs": ["x"], "outputs": ["out"], "graph_breaks": 0,
    "kernels": [{"name": "aten.mul", "ops": ["mul"], "reads": [["x", 4000]], "writes": [["t1", 4000]]},
                {"name": "aten.exp", "ops": ["exp"], "reads": [["t1", 4000]], "writes": [["out", 4000]]}],
    "intermediates": [["t1", 4000]], "kernel_count": 2, "bytes_read": 8000, "bytes_written": 8000,
    "bytes_moved": 16000, "intermediate_count": 1, "intermediate_bytes": 4000,
}
FUSED = {
    "mode": "fused", "inputs": ["x"], "outputs": ["out"], "graph_breaks": 0,
    "kernels": [{"name": "cpp_fused_exp_mul_0", "ops": ["mul", "exp"], "reads": [["x", 4000]],
                 "writes": [["out", 4000]]}],
    "intermediates": [], "kernel_count": 1, "bytes_read": 4000, "bytes_written": 4000, "bytes_moved": 8000,
    "intermediate_count": 0, "intermediate_bytes": 0,
}
REPORT = {"function": "f", "eager": EAGER, "fused": FUSED, "eager_ms": 2.0, "fused_ms": 0.5, "bytes_ratio": 2.0,
          "speedup": 4.0}


def _parse(html: str) -> ET.Element:
    return ET.fromstring(re.sub(r"<style>.*?</style>", "", html))


def test_side_by_side_with_bars_on_one_scale() -> None:
    html = fusion_html(REPORT)
    root = _parse(html)
    assert "tlw-theme" in root.get("class", "")
    widths = [int(m) for m in re.findall(r'class="bar [rw]" style="width:(\d+)px"', html)]
    assert len(widths) == 6 and max(widths) == 260 and len(set(widths)) == 1  # every buffer here is 4 KB
    assert "fused moves 2.0x fewer bytes" in html and "4.0x faster fused" in html
    assert "cpp_fused_exp_mul_0" in html and "fuses mul, exp" in html
    assert html.count('class="buf mid"') == 2 + 1  # t1 written, t1 read, and the key's example
    assert "1 intermediate (4.0 KB)" in html and "0 intermediates (0 B)" in html


def test_colours_come_from_the_theme() -> None:
    html = fusion_html(REPORT)
    css = re.findall(r"<style>(.*?)</style>", html, re.S)[0]
    body = re.sub(r"<style>.*?</style>", "", html, flags=re.S)
    assert not re.search(r"#[0-9a-fA-F]{3,6}\b", body)
    assert "var(--tlw-bg)" in css and "var(--tlw-fg)" in css


def test_slower_fused_and_untimed_reports_say_so() -> None:
    slow = dict(REPORT, fused_ms=4.0, speedup=0.5)
    assert "fused was slower here (0.50x" in fusion_html(slow)
    untimed = dict(REPORT, eager_ms=None, fused_ms=None, speedup=None)
    assert "faster" not in fusion_html(untimed) and "ms" not in fusion_text(untimed)


def test_hostile_names_are_escaped() -> None:
    bad = copy.deepcopy(REPORT)
    bad["function"] = "<script>x</script>\x00"
    bad["eager"]["kernels"][0]["name"] = "a<b>&"
    root = _parse(fusion_html(bad))
    assert root.find(".//script") is None


def test_graph_breaks_are_stated() -> None:
    broken = dict(FUSED, graph_breaks=2)
    assert "2 graph break(s)" in traffic_html(broken)


def test_text_is_deterministic_and_marks_intermediates() -> None:
    text = fusion_text(REPORT)
    assert text == fusion_text(copy.deepcopy(REPORT))
    assert "t1* 4.0 KB" in text and "0.5" not in text
    assert traffic_text(EAGER, ms=1.25).splitlines()[0].endswith("1.25 ms")
