"""Committed outputs that nbval compares hold nothing that depends on the machine that executed them.

nbval compares each cell's saved output with a fresh run on the tester's machine, so a saved output that
prints this CPU's generated vector code (16 floats a load on AVX-512, 8 on AVX2, 4 on NEON), its vector
instruction set, this interpreter's version or this machine's paths passes only where the author's machine
did. Such cells must print a form every machine shares, or be tagged `nbval-ignore-output` (their asserts
still run).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOK_DIR = Path(__file__).parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))

# nbval does not compare these parts of an output (its IPyNbFile.skip_compare without --nbdime)
_NOT_COMPARED = {"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                 "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg"}
_IGNORED = {"nbval-ignore-output", "nbval-skip"}
_MARKERS = {"NBVAL_IGNORE_OUTPUT", "PYTEST_VALIDATE_IGNORE_OUTPUT", "NBVAL_SKIP"}

# (what it is, a pattern found in text and in HTML-escaped text)
HAZARDS: list[tuple[str, re.Pattern[str]]] = [
    ("generated vector code with a hard-coded lane count (the CPU's vector width)",
     re.compile(r"(?:loadu|store|Vectorized(?:&lt;|<)\w+(?:&gt;|>))\(.{0,200}?static_cast(?:&lt;|<)int64_t(?:&gt;|>)"
                r"\(\d+L?\)\)")),
    ("generated vector code (at::vec: its width is the CPU's)", re.compile(r"at::vec::")),
    ("a loop stepping by a vector width in generated code",
     re.compile(r"\+=\s*static_cast(?:&lt;|<)int64_t(?:&gt;|>)\((?:4|8|16|32|64)L\)")),
    ("a CPU vector instruction set's name", re.compile(r"\b(?:avx2|avx512\w*|amx_tile|asimd|sve(?:128|256))\b",
                                                       re.IGNORECASE)),
    ("this interpreter's Python version", re.compile(r"\bPython 3\.\d+")),
    ("a path on the executing machine",
     re.compile(r"(?:/root/|/home/\w+|/Users/\w+|torchinductor_\w+|site-packages/|/\.venv/|/tmp/(?!ipykernel_)\w)")),
]


def compared_outputs(cell: nbformat.NotebookNode) -> list[str]:
    """The texts of a code cell's saved outputs that nbval compares (none for an ignored or skipped cell)."""
    tags = set(cell.get("metadata", {}).get("tags", []))
    comments = {line.strip().lstrip("#").strip() for line in cell.source.splitlines() if line.strip().startswith("#")}
    if tags & _IGNORED or comments & _MARKERS:
        return []
    texts = []
    for out in cell.get("outputs", []):
        for key, value in out.items():
            if key in _NOT_COMPARED:
                continue
            if key == "data":
                texts += [v if isinstance(v, str) else str(v) for k, v in value.items() if k not in _NOT_COMPARED]
            elif isinstance(value, str):
                texts.append(value)
    return texts


def hazards(nb: nbformat.NotebookNode) -> list[str]:
    """Each compared output that depends on the machine: 'cell N: what it is: the text found'."""
    found = []
    for n, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        for text in compared_outputs(cell):
            for what, pattern in HAZARDS:
                m = pattern.search(text)
                if m:
                    found.append(f"code cell {n}: {what}: {m[0][:120]!r}")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_compared_outputs_do_not_depend_on_the_machine(path: Path) -> None:
    """Print a form every CPU shares (e.g. the fusion lens's `MemoryAccess.normalised()`), or tag the cell
    `nbval-ignore-output` and keep its asserts."""
    found = hazards(nbformat.read(path, as_version=4))
    assert not found, f"{path.name}: outputs nbval compares depend on this machine:\n" + "\n".join(found)


def _notebook(source: str, text: str, tags: tuple[str, ...] = (), html: str | None = None) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = list(tags)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    if html is not None:
        cell.outputs.append(nbformat.v4.new_output("display_data", data={"text/html": html, "text/plain": "x"}))
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t"), cell])


AVX512_LOAD = ("auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 1024L*x0), "
               "static_cast<int64_t>(16));")


@pytest.mark.parametrize("text", [
    AVX512_LOAD,
    "for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(1024L); x1+=static_cast<int64_t>(8L))",
    "this CPU: avx512 avx512_vnni amx_tile (512-bit vectors: 16 floats per load)",
    "torch 2.13.0+cpu | Python 3.11",
    "cached in /tmp/torchinductor_root/ab/cab12.py",
])
def test_each_hazard_is_found(text: str) -> None:
    assert hazards(_notebook("print(x)", text))


def test_generated_code_is_found_in_html_too() -> None:
    """A picture's HTML carries its code escaped, and nbval compares HTML."""
    html = "<pre>" + AVX512_LOAD.replace("<", "&lt;").replace(">", "&gt;") + "</pre>"
    found = hazards(_notebook("show(report)", "", html=html))
    assert any("lane count" in f for f in found), found


@pytest.mark.parametrize("how", ["tag", "skip", "comment"])
def test_an_ignored_cell_may_print_them(how: str) -> None:
    source = "# NBVAL_IGNORE_OUTPUT\nprint(x)" if how == "comment" else "print(x)"
    tags = {"tag": ("nbval-ignore-output",), "skip": ("nbval-skip",), "comment": ()}[how]
    assert hazards(_notebook(source, AVX512_LOAD, tags)) == []


def test_shared_forms_pass() -> None:
    """What notebook 13 prints instead: the width named W, the same on every CPU; sizes and kernel names."""
    text = ("the kernel's loads and stores, W elements each:\n  load  in_ptr0[x1 + 1024L*x0 : +W]\n"
            "['extern_kernels.addmm', 'cpp_fused_relu_0']\ntorch 2.13.0+cpu | C++11 ABI: True\n")
    assert hazards(_notebook("print(x)", text)) == []
