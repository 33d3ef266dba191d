"""The program-grid widget's model (`program_grid_model`) is the Python ↔ TypeScript contract.

`fixture_cases` builds, from hand-made lens data (no Triton needed), the compact models the TypeScript tests
(labextension/test/tgrid*) draw, each with what Python's static picture says for it: per program, the state
of every element cell (`render.triton_grid._states`, the static renderer's own colouring), so the live view
and the static fallback cannot disagree. `write_fixture` regenerates the file; the tests below fail when
`program_grid_model` drifts from it.

Regenerate after an intended schema change:
    .venv/bin/python -c "from tests.render.test_tgrid_fixture import write_fixture; write_fixture()"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torchlens_widgets.render.triton_grid import (
    _states,
    flat_pid,
    program_grid_model,
    program_grid_text,
    reach,
    tensor_window,
    window_notes,
)

FIXTURE = Path(__file__).resolve().parents[2] / "labextension" / "test" / "fixtures" / "tgrid_cases.json"


def _access(op: str, tensor: str, elements: list, masked: list = (), oob: list = (), lanes: int = 4,
            line: int | None = 7) -> dict[str, Any]:
    return {"op": op, "tensor": tensor, "line": line, "lanes": lanes, "touched": sum(b - a for a, b in elements),
            "elements": [list(r) for r in elements], "masked": [list(r) for r in masked],
            "masked_lanes": sum(b - a for a, b in masked), "out_of_bounds": [list(r) for r in oob]}


def _tensor(name: str, shape: tuple[int, ...], contiguous: bool = True) -> dict[str, Any]:
    n = 1
    for s in shape:
        n *= s
    return {"name": name, "dtype": "float32", "shape": list(shape), "stride": [1] * len(shape), "numel": n,
            "itemsize": 4, "contiguous": contiguous}


def _grid(kernel: str, grid: list[int], tensors: list[dict[str, Any]], programs: list[dict[str, Any]],
          **extra: Any) -> dict[str, Any]:
    total = 1
    for g in grid:
        total *= g
    return {"kernel": kernel, "grid": grid, "num_programs": total, "interpreter": "triton 3.7.1 interpreter",
            "tensors": tensors, "scalars": [["n", "10"]], "programs": programs, "errors": [], "errors_total": 0,
            "left_out": None, "warnings": [], "raw_bits_dtypes": [],
            "source_lines": [[7, "x = tl.load(x_ptr + offs, mask=mask)"], [8, "tl.store(out_ptr + offs, x, mask=mask)"]]
            } | extra


def lens_data() -> dict[str, dict[str, Any]]:
    """Hand-made `ProgramGrid.to_dict()` results covering what the widget draws."""
    add = _grid("add_kernel", [3], [_tensor("x_ptr", (10,)), _tensor("y_ptr", (10,)), _tensor("out_ptr", (10,))], [
        {"pid": [p], "errors": 0, "accesses": [
            _access("load", "x_ptr", [[4 * p, min(4 * p + 4, 10)]], [[10, 12]] if p == 2 else []),
            _access("store", "out_ptr", [[4 * p, min(4 * p + 4, 10)]], [[10, 12]] if p == 2 else [], line=8)]}
        for p in range(3)])
    oob_error = {"program": [0], "op": "load", "tensor": "x_ptr", "line": 7, "indices": [[10, 16]], "lanes": 6,
                 "message": "program (0,): tl.load at line 7 reads x_ptr[10..15], 6 lane(s) outside every tensor "
                            "argument (x_ptr has 10 elements), and no lane of it was masked off -- tl.load(x_ptr + offs)"}
    oob = _grid("copy_unmasked", [2], [_tensor("x_ptr", (10,)), _tensor("out_ptr", (16,))], [
        {"pid": [0], "errors": 1, "accesses": [_access("load", "x_ptr", [[0, 10]], oob=[[10, 16]], lanes=16),
                                               _access("store", "out_ptr", [[0, 16]], lanes=16, line=8)]},
        {"pid": [1], "errors": 0, "accesses": []}],
        errors=[oob_error], errors_total=1, warnings=["out-of-bounds lanes were neither read nor written here"])
    tiles = _grid("tiles", [2, 3], [_tensor("m", (3, 4))], [
        {"pid": [i, j], "errors": 0, "accesses": [_access("store", "m", [[4 * j + 2 * i, 4 * j + 2 * i + 2]],
                                                          lanes=2, line=8)]}
        for i in range(2) for j in range(3)])
    cube = _grid("cube", [2, 2, 2], [_tensor("v", (8,))], [
        {"pid": [i, j, k], "errors": 0, "accesses": [_access("load", "v", [[i + 2 * j + 4 * k, i + 2 * j + 4 * k + 1]],
                                                             lanes=1)]}
        for i in range(2) for j in range(2) for k in range(2)])
    stencil = _grid("stencil", [5], [_tensor("x", (20,)), _tensor("t", (5, 4), contiguous=False)], [
        {"pid": [p], "errors": 0, "accesses": [
            _access("load", "x", [[max(4 * p - 1, 0), min(4 * p + 3, 20)]], [[-1, 0]] if p == 0 else []),
            _access("load", "x", [[4 * p, 4 * p + 4]]),
            _access("store", "x", [[4 * p + 1, 4 * p + 3]], line=8),
            _access("store", "t", [[p, p + 1], [p + 5, p + 6]], line=None)]}
        for p in range(3)],
        left_out="2 of 5 programs ran but were not recorded (max_programs=3); their out-of-bounds accesses are "
                 "still counted")
    long = _grid("long_kernel", [40], [_tensor("x", (1270,))], [
        {"pid": [p], "errors": 0, "accesses": [
            _access("load", "x", [[32 * p, min(32 * p + 32, 1270)]], [[1270, 1280]] if p == 39 else [], lanes=32)]}
        for p in range(40)])
    return {"add": add, "oob": oob, "tiles": tiles, "cube": cube, "stencil": stencil, "long": long}


#: Programs whose expected states are written out (all of them, except in the long case).
SAMPLED = {"long": ([0], [20], [39])}


def fixture_cases() -> dict[str, Any]:
    """Per case: the model, and per recorded program (by flat pid) Python's cell state of each element of each
    tensor it touches (the static picture's classes; untouched elements left out) and its text."""
    cases: dict[str, Any] = {}
    for name, data in lens_data().items():
        expected: dict[str, Any] = {}
        for p in data["programs"]:
            if name in SAMPLED and p["pid"] not in [list(s) for s in SAMPLED[name]]:
                continue
            touched = {a["tensor"] for a in p["accesses"]}
            states = {}
            for t in data["tensors"]:
                if t["name"] in touched:
                    span = reach(p["accesses"], t["name"])
                    cols, start, stop, matrix = tensor_window(t, span)
                    cells, before = _states(data, p, t["name"], stop)
                    states[t["name"]] = {"cells": {str(i): c for i, c in sorted(cells.items()) if i >= start},
                                         "before": before, "window": {"cols": cols, "start": start, "stop": stop,
                                                                      "matrix": matrix},
                                         "notes": window_notes(t, start, stop, span, before)}
            expected[str(flat_pid(p["pid"], data["grid"]))] = {"pid": p["pid"], "states": states,
                                                               "text": program_grid_text(data, p["pid"])}
        cases[name] = {"model": program_grid_model(data), "programs": expected}
    return cases


def write_fixture() -> None:
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(fixture_cases(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _decode(model: dict[str, Any]) -> list[dict[str, Any]]:
    """The model's programs back in the lens's shape (what the TypeScript decodeProgram does)."""
    def runs(flat: list[int]) -> list[list[int]]:
        return [flat[k:k + 2] for k in range(0, len(flat), 2)]

    grid = model["grid"]
    dims = grid + [1] * (3 - len(grid))
    out = []
    for flat, errors, accesses in model["programs"]:
        pid = [flat % dims[0], flat // dims[0] % dims[1], flat // (dims[0] * dims[1])][: len(grid)]
        decoded = []
        for a in accesses:
            a = a + [[], 0, []][len(a) - 3:]
            site = model["sites"][a[0]]
            decoded.append({"op": site["op"], "tensor": model["tensors"][site["tensor"]]["name"], "line": site["line"],
                            "lanes": site["lanes"], "touched": a[1], "elements": runs(a[2]), "masked": runs(a[3]),
                            "masked_lanes": a[4], "out_of_bounds": runs(a[5])})
        out.append({"pid": pid, "errors": errors, "accesses": decoded})
    return out


def test_fixture_matches_program_grid_model() -> None:
    stored = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert stored == json.loads(json.dumps(fixture_cases())), "program_grid_model changed: regenerate with write_fixture()"


def test_the_model_holds_every_access_of_the_lens_data() -> None:
    for name, data in lens_data().items():
        model = program_grid_model(data)
        assert _decode(model) == data["programs"], name
        assert model["kind"] == "tgrid" and model["version"] == 1 and model["grid"] == data["grid"]
        assert [t["name"] for t in model["tensors"]] == [t["name"] for t in data["tensors"]]
        assert model["source"] == data["source_lines"] and model["errors_total"] == data["errors_total"]


def test_flat_pid_runs_axis_0_fastest() -> None:
    assert [flat_pid(p, [2, 3]) for p in ([0, 0], [1, 0], [0, 1], [1, 2])] == [0, 1, 2, 5]
    assert flat_pid([1, 1, 1], [2, 2, 2]) == 7 and flat_pid([9], [10]) == 9


def test_fixture_covers_the_cases_the_ts_tests_rely_on() -> None:
    cases = fixture_cases()
    add = cases["add"]["programs"]["2"]["states"]
    assert add["x_ptr"]["cells"]["10"] == "mk" and add["x_ptr"]["cells"]["0"] == "oth" and "y_ptr" not in add
    oob = cases["oob"]["programs"]["0"]["states"]["x_ptr"]["cells"]
    assert [oob[str(i)] for i in range(10, 16)] == ["oob"] * 6
    stencil = cases["stencil"]["programs"]["1"]["states"]["x"]
    assert stencil["cells"]["5"] == "both" and stencil["cells"]["3"] == "ld" and stencil["cells"]["0"] == "oth"
    assert cases["stencil"]["programs"]["0"]["states"]["x"]["before"] == 1
    assert cases["stencil"]["model"]["left_out"] and len(cases["cube"]["model"]["programs"]) == 8
    long = cases["long"]["programs"]
    assert long["20"]["states"]["x"]["window"] == {"cols": 32, "start": 19 * 32, "stop": 22 * 32, "matrix": False}
    assert long["39"]["states"]["x"]["window"]["stop"] == 1280 and long["39"]["states"]["x"]["cells"]["1275"] == "mk"
