"""The landing notebook links every course notebook, and each course notebook ends by linking the next one.

Everything is derived from the files in `notebooks/`: a new `NN-*.ipynb` without links makes these fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOK_DIR = Path(__file__).parents[2] / "notebooks"
START = NOTEBOOK_DIR / "start-here.ipynb"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]-*.ipynb"))
# A markdown link's target: [text](target) — the target up to a space, ')' or '#'.
_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s#>]+)")


def _links(source: str) -> list[str]:
    """Relative link targets in a markdown source, in order (web and anchor-only links left out)."""
    return [t for t in _LINK.findall(source) if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.I)]


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def test_there_are_course_notebooks_and_a_start() -> None:
    """The landing notebook exists beside the course notebooks."""
    assert NOTEBOOKS, f"no [0-9][0-9]-*.ipynb notebooks in {NOTEBOOK_DIR}"
    assert START.is_file(), f"{START} is missing"


def test_start_here_is_reading_matter_and_one_self_check() -> None:
    """start-here.ipynb is markdown but for one code cell, the environment self-check (machine-dependent output,
    so nbval runs it without comparing); every cell has an id."""
    nb = _read(START)
    code = [c for c in nb.cells if c.cell_type != "markdown"]
    assert len(code) == 1 and "environment_report()" in code[0].source, [c.source for c in code]
    assert "nbval-ignore-output" in code[0].metadata.get("tags", [])
    assert all(c.get("id") for c in nb.cells), "start-here.ipynb: a cell has no id"
    nbformat.validate(nb)


def test_builds_on_names_every_earlier_notebook_a_notebook_mentions() -> None:
    """start-here's "Builds on" column lists at least the earlier notebooks that each notebook's text names."""
    rows = {int(m[0]): {int(n) for n in re.findall(r"\d\d", m[1])}
            for c in _read(START).cells if c.cell_type == "markdown"
            for m in re.findall(r"^\| (\d\d) \| \[[^]]+\]\([^)]+\) \| ([^|]*) \|", c.source, re.M)}
    assert sorted(rows) == list(range(1, len(NOTEBOOKS) + 1)), sorted(rows)
    for path in NOTEBOOKS:
        n = int(path.name[:2])
        text = " ".join(c.source for c in _read(path).cells if c.cell_type == "markdown")
        named = {int(m) for m in re.findall(r"[Nn]otebooks? (\d\d)\b", text)}
        named |= {int(a) for a in re.findall(r"[Nn]otebooks (\d\d)[–-]\d\d", text)}
        missing = sorted(m for m in named if m < n and m not in rows[n])
        assert not missing, f"{path.name} builds on notebooks {missing}, which start-here's table does not list"


def test_time_column_states_each_notebooks_estimate() -> None:
    """start-here's "Time" column is outline.estimated_minutes of each notebook (it moves when a notebook grows)."""
    from torchlens_widgets.course.outline import estimated_minutes

    rows = {int(m[0]): m[1] for c in _read(START).cells if c.cell_type == "markdown"
            for m in re.findall(r"^\| (\d\d) \| \[[^]]+\]\([^)]+\) \| [^|]* \| ([^|]*) \|", c.source, re.M)}
    assert sorted(rows) == list(range(1, len(NOTEBOOKS) + 1)), sorted(rows)
    stale = {p.name: rows[int(p.name[:2])].strip() for p in NOTEBOOKS
             if rows[int(p.name[:2])].strip() != f"≈\u00a0{estimated_minutes(p)}\u00a0min"}  # no-break spaces: "min" never wraps alone
    assert not stale, f"start-here's Time column is stale (recompute with outline.estimated_minutes): {stale}"


def test_start_here_links_every_notebook_in_order() -> None:
    """Each course notebook is linked from start-here.ipynb by file name, in number order."""
    links = [t for c in _read(START).cells for t in _links(c.source)]
    course = [t for t in links if re.fullmatch(r"[0-9][0-9]-.*\.ipynb", t)]
    expected = [p.name for p in NOTEBOOKS]
    missing = [n for n in expected if n not in course]
    assert not missing, f"start-here.ipynb does not link {missing}"
    firsts = list(dict.fromkeys(course))  # first mention of each, in order
    assert firsts == expected, f"start-here.ipynb links the notebooks in the order {firsts}, expected {expected}"


@pytest.mark.parametrize("path", [START, *NOTEBOOKS], ids=[START.stem, *(p.stem for p in NOTEBOOKS)])
def test_links_point_to_existing_notebooks(path: Path) -> None:
    """Every relative .ipynb link in start-here and in the Next cells names a file in notebooks/."""
    nb = _read(path)
    cells = nb.cells if path == START else nb.cells[-1:]
    for cell in cells:
        if cell.cell_type != "markdown":
            continue
        for target in _links(cell.source):
            assert (NOTEBOOK_DIR / target).is_file(), f"{path.name} links {target!r}, which is not in notebooks/"


@pytest.mark.parametrize("index", range(len(NOTEBOOKS)), ids=[p.stem for p in NOTEBOOKS])
def test_notebook_ends_with_next_link(index: int) -> None:
    """The last cell is markdown linking the next notebook in number order, or start-here.ipynb after the last."""
    path = NOTEBOOKS[index]
    last = _read(path).cells[-1]
    assert last.cell_type == "markdown", f"{path.name}: the last cell should be the markdown Next cell"
    assert last.get("id"), f"{path.name}: the Next cell has no id"
    links = _links(last.source)
    assert START.name in links, f"{path.name}: the Next cell should link {START.name}; it links {links}"
    others = [t for t in links if t != START.name]
    if index + 1 < len(NOTEBOOKS):
        nxt = NOTEBOOKS[index + 1].name
        assert others == [nxt], f"{path.name}: the Next cell should link {nxt}; it links {others}"
    else:
        assert not others, f"{path.name} is the last notebook; its Next cell links {others}"
