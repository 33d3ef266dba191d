"""The build report's static HTML and text: well-formed, themed, errors as the learner's lines, and the
text deterministic (no times, no paths)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from torchlens_widgets.render.build import build_html, build_progress_html, build_text

OK = {
    "name": "axpy", "ok": True, "cache": "miss", "seconds": 7.25,
    "steps": [{"phase": "compile", "output": "main.o", "seconds": 6.9}, {"phase": "link", "output": "axpy_1.so", "seconds": 0.3}],
    "flags": ["-std=c++20", "-fPIC"], "includes": ["ATen/core/Tensor.h", "torch/library.h"],
    "header_files": 995, "header_bytes": 12_300_000,
    "header_groups": [{"group": "ATen", "files": 600, "bytes": 9_000_000}, {"group": "c10", "files": 300, "bytes": 3_000_000}],
    "errors": [], "library": "/cache/axpy_1/axpy_1.so", "directory": "/cache/axpy_1", "log_tail": "",
}
BAD = OK | {"ok": False, "steps": [], "header_files": 0, "header_groups": [], "library": None,
            "errors": [{"line": 2, "column": 14, "kind": "error", "message": "expected ';' before '}' token",
                        "code": "  return x * 2 <"}]}


def _parse(html: str) -> ET.Element:
    return ET.fromstring(html.replace("<style>", "<style><![CDATA[").replace("</style>", "]]></style>"))


def test_success_shows_steps_headers_and_theme() -> None:
    html = build_html(OK)
    root = _parse(html)
    assert "tlw-theme" in root.attrib["class"] and "var(--tlw-" in html
    text = "".join(root.itertext())
    assert "axpy built" in text and "cache miss" in text and "995" in text and "ATen" in text and "main.o" in text
    assert "#" not in html.split("</style>", 1)[1]  # no hard-coded colours outside the theme block


def test_failure_shows_the_learner_s_line_escaped() -> None:
    html = build_html(BAD)
    text = "".join(_parse(html).itertext())
    assert "did not build" in text and "line 2, column 14" in text and "return x * 2 <" in text
    assert "&lt;" in html


def test_text_is_deterministic_without_times_or_paths() -> None:
    text = build_text(OK)
    assert "7.25" not in text and "/cache" not in text and "6.9" not in text
    assert text == build_text(OK | {"seconds": 1.0, "library": "/elsewhere/x.so"})
    assert build_text(BAD).splitlines()[1].startswith("  line 2:14: error:")


def test_progress_line() -> None:
    html = build_progress_html("axpy<", "step 1 of 2: compiling main.cpp", 3.4)
    assert "axpy&lt;" in html and "compiling main.cpp" in html and "(3 s)" in html
    _parse(html)


def test_precompiled_headers_are_said_to_be_loaded_not_read() -> None:
    plain, fast = build_html(OK), build_html(OK | {"precompiled": True})
    assert "the compiler read" in "".join(_parse(plain).itertext()) and "precompiled" not in plain
    text = "".join(_parse(fast).itertext())
    assert "precompiled" in text and "the compiler read" not in text
    assert "precompiled" in build_text(OK | {"precompiled": True}) and "precompiled" not in build_text(OK)
