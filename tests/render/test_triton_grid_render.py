"""The program grid's static HTML and text: well-formed, themed (no hard-coded colours outside the style
block), the selected program highlighted, cells coloured by state, and the text deterministic."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from torchlens_widgets.render.triton_grid import program_grid_html, program_grid_text, select_program


def _access(op: str, tensor: str, elements: list, masked: list = (), oob: list = (), lanes: int = 4) -> dict:
    touched = sum(b - a for a, b in elements)
    return {"op": op, "tensor": tensor, "line": 7, "lanes": lanes, "touched": touched, "elements": elements,
            "masked": list(masked), "masked_lanes": sum(b - a for a, b in masked), "out_of_bounds": list(oob)}


def _tensor(name: str, n: int, shape: tuple = ()) -> dict:
    return {"name": name, "dtype": "float32", "shape": list(shape or (n,)), "stride": [1], "numel": n, "itemsize": 4,
            "contiguous": True}


ADD: dict[str, Any] = {
    "kernel": "add_kernel", "grid": [3], "num_programs": 3, "interpreter": "triton 3.7.1 interpreter",
    "tensors": [_tensor("x_ptr", 10), _tensor("out_ptr", 10)], "scalars": [["n", "10"]],
    "programs": [{"pid": [p], "errors": 0, "accesses": [
        _access("load", "x_ptr", [[4 * p, min(4 * p + 4, 10)]], [[10, 12]] if p == 2 else []),
        _access("store", "out_ptr", [[4 * p, min(4 * p + 4, 10)]], [[10, 12]] if p == 2 else [])]} for p in range(3)],
    "errors": [], "errors_total": 0, "left_out": None, "warnings": [], "raw_bits_dtypes": [],
}
OOB = ADD | {
    "kernel": "copy_unmasked", "grid": [1], "num_programs": 1,
    "programs": [{"pid": [0], "errors": 1, "accesses": [_access("load", "x_ptr", [[0, 10]], oob=[[10, 16]], lanes=16),
                                                        _access("store", "out_ptr", [[0, 10]], lanes=16)]}],
    "errors": [{"program": [0], "op": "load", "tensor": "x_ptr", "line": 7, "indices": [[10, 16]], "lanes": 6,
                "message": "program (0,): tl.load at line 7 reads x_ptr[10..15], 6 lane(s) outside every tensor "
                           "argument (x_ptr has 10 elements), and no lane of it was masked off -- tl.load(x_ptr + offs) < 1"}],
    "errors_total": 1,
}
TILES = ADD | {"kernel": "tiles", "grid": [2, 2], "num_programs": 4, "tensors": [_tensor("m", 12, (3, 4))],
               "programs": [{"pid": [i, j], "errors": 0, "accesses": [_access("store", "m", [[i + j, i + j + 1]])]}
                            for i in range(2) for j in range(2)]}


def _parse(html: str) -> ET.Element:
    return ET.fromstring(html.replace("<style>", "<style><![CDATA[").replace("</style>", "]]></style>"))


def _cells(root: ET.Element, cls: str) -> list[ET.Element]:
    return [e for e in root.iter("span") if cls in e.attrib.get("class", "").split()]


def _titles(root: ET.Element, cls: str) -> list[str]:
    """The element cells of a state (the legend's swatches have no title)."""
    return [e.attrib["title"] for e in _cells(root, cls) if "title" in e.attrib]


def test_html_is_well_formed_themed_and_has_no_colours_outside_the_style() -> None:
    for data in (ADD, OOB, TILES):
        html = program_grid_html(data)
        root = _parse(html)
        assert "tlw-theme" in root.attrib["class"] and "var(--tlw-" in html
        body = html.split("</style>", 1)[1]
        assert not re.search(r"#[0-9a-fA-F]{3,8}\b", body) and "rgb(" not in body
        style = html.split("<style>", 1)[1].split("</style>", 1)[0]
        assert not re.search(r"#[0-9a-fA-F]{3,8}\b", style.split("[data-jp-theme-light=false] .tlw-theme{", 1)[1]
                             .split("}", 1)[1])  # the picture's own CSS uses only the theme's variables


def test_selected_program_is_highlighted_and_its_elements_coloured() -> None:
    root = _parse(program_grid_html(ADD, program=2))
    selected = _cells(root, "sel")
    assert [e.text for e in selected] == ["2"]
    loaded = _titles(root, "ld")
    assert loaded == ["x_ptr[8]: loaded", "x_ptr[9]: loaded"]
    assert _titles(root, "st") == ["out_ptr[8]: stored", "out_ptr[9]: stored"]
    masked = _titles(root, "mk")
    assert "x_ptr[10]: masked" in masked and "out_ptr[11]: masked" in masked  # drawn past the end
    assert len([t for t in _titles(root, "oth") if t.startswith("x_ptr")]) == 8  # programs 0 and 1
    legend = "".join(root.itertext())
    for word in ("loaded", "stored", "masked off", "out of bounds", "another program", "past the end"):
        assert word in legend
    assert _cells(_parse(program_grid_html(ADD, program=0)), "sel")[0].text == "0"


def test_out_of_bounds_cells_and_the_error_are_shown_escaped() -> None:
    html = program_grid_html(OOB)
    root = _parse(html)
    assert _titles(root, "oob") == [f"x_ptr[{i}]: OUT OF BOUNDS" for i in range(10, 16)]
    text = "".join(root.itertext())
    assert "x_ptr[10..15]" in text and "no lane of it was masked off" in text and "&lt; 1" in html
    assert _cells(root, "err") and _cells(root, "sel")  # the program with the error is the default


def test_two_d_grid_and_matrix_rows() -> None:
    root = _parse(program_grid_html(TILES, program=(1, 1)))
    assert [e.text for e in _cells(root, "sel")] == ["1,1"]
    assert _titles(root, "st") == ["m[2]: stored"]
    rows = [e for e in root.iter("div") if e.attrib.get("class") == "trow"]
    assert len(rows) == 3 and all(len(_titles(r, "c")) == 4 for r in rows)  # (3, 4) drawn as 3 rows of 4


def test_bad_program_choices() -> None:
    with pytest.raises(ValueError, match="tuple"):
        program_grid_html(TILES, program=1)
    with pytest.raises(ValueError, match="not in the grid"):
        program_grid_html(ADD, program=3)
    with pytest.raises(ValueError, match="not recorded"):
        select_program(ADD | {"programs": ADD["programs"][:1], "left_out": "2 of 3 programs ran but were not recorded"},
                       (2,))


def test_text_is_deterministic_and_names_the_problems() -> None:
    text = program_grid_text(ADD, program=2)
    assert text == program_grid_text(dict(ADD), program=(2,))
    assert "program (2,):" in text and "out_ptr[8..9], 2 lane(s) masked" in text and "0x" not in text
    bad = program_grid_text(OOB)
    assert "ERROR: program (0,)" in bad and "OUT OF BOUNDS 10..15" in bad


def test_warnings_are_shown() -> None:
    flagged = ADD | {"warnings": ["the kernel computes in bf16: ... WRONG here"], "raw_bits_dtypes": ["bf16"]}
    html = program_grid_html(flagged)
    assert "WRONG" in "".join(_parse(html).itertext()) and "WARNING" in program_grid_text(flagged)


def test_a_large_grid_draws_the_selected_program_and_the_window_it_reached() -> None:
    n = 40 * 32 - 10
    data = ADD | {"kernel": "long", "grid": [40], "num_programs": 40, "tensors": [_tensor("x_ptr", n)],
                  "programs": [{"pid": [p], "errors": 0, "accesses": [
                      _access("load", "x_ptr", [[32 * p, min(32 * p + 32, n)]], [[n, n + 10]] if p == 39 else [],
                              lanes=32)]} for p in range(40)]}
    root = _parse(program_grid_html(data, program=39))
    assert [e.text for e in _cells(root, "sel")] == ["39"]  # past the first 32 ids, after a gap
    assert _cells(root, "gap") and "axis 0: 3 more" in "".join(root.itertext())
    titles = _titles(root, "ld") + _titles(root, "mk") + _titles(root, "oth")
    indices = sorted(int(t.split("[")[1].split("]")[0]) for t in titles)
    assert indices[0] == 38 * 32 and indices[-1] == 40 * 32 - 1  # a row of context above, the masked lanes past the end
    assert "elements 0..1215 above not drawn" in "".join(root.itertext())
    far = _parse(program_grid_html(data, program=20))
    assert "elements 704..1269 below not drawn" in "".join(far.itertext())
    assert len(_titles(far, "ld")) == 32
