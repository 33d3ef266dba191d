"""The compile trace's static HTML and text: the source with graph lines shaded and each break marked with
its explanation and hints (openable without a kernel), guards, recompiles, kernels beside the ops they
fused; themed, escaped, well-formed; the text deterministic."""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET

from torchlens_widgets.render.compile_trace import KERNEL_LINES, compile_html, compile_text

TRACE = {
    "function": "f", "backend": "inductor", "calls": 2, "seconds": 3.2, "filename": "/nb/cell.py", "first_line": 10,
    "source": ["def f(x, n):", "    y = x.sin() * 2", '    print("a < b")', "    return (y + n).relu()"],
    "graphs": [
        {"index": 0, "compile_id": "0/0", "lines": [11], "code": "", "ended_by_break": True,
         "ops": [{"name": "sin", "target": "Tensor.sin", "line": 11, "code": "y = x.sin() * 2"},
                 {"name": "y", "target": "*", "line": 11, "code": "y = x.sin() * 2"}]},
        {"index": 1, "compile_id": "1/0", "lines": [13], "code": "", "ended_by_break": False,
         "ops": [{"name": "add", "target": "+", "line": 13, "code": ""},
                 {"name": "relu", "target": "Tensor.relu", "line": 13, "code": ""}]},
    ],
    "breaks": [{"kind": "Failed to trace builtin operator", "explanation": "Dynamo does not know `print`",
                "hints": ["Avoid calling builtin `print`"], "filename": "/nb/cell.py", "line": 12,
                "code": '    print("a < b")', "function": "f", "compile_id": None}],
    "frames": [{"compile_id": "0/0", "function": "f", "filename": "/nb/cell.py", "first_line": 10, "graph_ops": 2,
                "guards": [{"source": "L['x']", "kind": "TENSOR_MATCH", "checks": [], "line": 11, "code": ""},
                           {"source": "L['n']", "kind": "CONSTANT_MATCH", "checks": ["L['n'] == 1"], "line": 13,
                            "code": ""}],
                "aot_forward": "def forward(self, primals_1): ...", "aot_backward": None, "aot_joint": None,
                "seconds": {"total": 1.25, "dynamo": 0.5}, "cache_size_before": 0}],
    "recompiles": [{"compile_id": "1/1", "function": "resume", "reasons": ["n == 1"], "against": ["1/0"]}],
    "kernels": [{"name": "cpp_fused_mul_sin_0", "stage": "forward", "compile_id": "0/0",
                 "source": "\n".join(f"line {i}" for i in range(KERNEL_LINES + 5)), "fused_nodes": ["sin", "mul"],
                 "lines": [11]}],
}


def _parse(html: str) -> ET.Element:
    return ET.fromstring(html.replace("<style>", "<style><![CDATA[").replace("</style>", "]]></style>"))


def test_source_is_shaded_by_graph_and_the_break_opens_to_its_reasons() -> None:
    html = compile_html(TRACE)
    root = _parse(html)
    assert "tlw-theme" in root.attrib["class"]
    assert not re.search(r"(?<!&)#[0-9a-fA-F]{3,8}\b", html.split("</style>", 1)[1])  # colours only from the theme
    rows = {r.find("span").text: r for r in root.iter("div") if r.attrib.get("class", "").startswith("ln")}
    assert rows["11"].attrib["class"] == "ln g0" and rows["13"].attrib["class"] == "ln g1"
    assert rows["10"].attrib["class"] == "ln" and "graph break" in "".join(rows["12"].itertext())
    why = next(d for d in root.iter("details") if "why" in d.attrib.get("class", ""))
    text = "".join(why.itertext())
    assert "Failed to trace builtin operator" in text and "Avoid calling builtin" in text
    assert 'print(&quot;a &lt; b&quot;)' in html  # the learner's code, escaped
    assert "Avoid calling builtin <code>print</code>" in html and "`" not in text  # torch's backticks set as code


def test_guards_recompiles_and_kernels_are_listed() -> None:
    text = "".join(_parse(compile_html(TRACE)).itertext())
    assert "L['n'] == 1" in text and "TENSOR_MATCH" in text and "static sizes and strides" in text
    assert "AOTAutograd forward graph" in text and "AOTAutograd backward graph" not in text
    assert "1/0: n == 1" in text
    assert "cpp_fused_mul_sin_0" in text and "sin, mul" in text and "5 more lines" in text
    assert f"line {KERNEL_LINES - 1}" in text and f"line {KERNEL_LINES}\n" not in text


def test_no_source_and_no_breaks_still_reads() -> None:
    clean = copy.deepcopy(TRACE) | {"source": [], "breaks": [], "recompiles": [], "kernels": []}
    text = "".join(_parse(compile_html(clean)).itertext())
    assert "no graph breaks" in text and "No source to show" in text


def test_text_is_deterministic() -> None:
    text = compile_text(TRACE)
    assert "1.25" not in text and "/nb/cell.py" not in text
    assert text == compile_text(copy.deepcopy(TRACE) | {"seconds": 9.0})
    assert "break at line 12" in text and "recompile 1/1 of resume: n == 1" in text
