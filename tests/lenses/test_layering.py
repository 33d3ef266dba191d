"""The layers only look down: a lens never imports render/, widgets/ or course/, not even lazily."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "torchlens_widgets"
UPPER = ("render", "widgets", "course")


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module an import statement anywhere in the file names, resolved against the package."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: in lenses/x.py, level 1 is torchlens_widgets.lenses, level 2 the package
                base = ["torchlens_widgets", path.parent.name][: 3 - node.level]
                mod = ".".join(base + ([node.module] if node.module else []))
                found += [(node.lineno, f"{mod}.{a.name}") for a in node.names] if not node.module else [(node.lineno, mod)]
            else:
                found.append((node.lineno, node.module or ""))
    return found


@pytest.mark.parametrize("path", sorted((PACKAGE / "lenses").glob("*.py")), ids=lambda p: p.name)
def test_lens_imports_nothing_above_it(path: Path) -> None:
    upward = [f"line {n}: {m}" for n, m in _imports(path)
              if m.startswith(tuple(f"torchlens_widgets.{u}" for u in UPPER))
              or m in ("torchlens_widgets", "torchlens_widgets.widgets")]
    assert not upward, f"{path.name} imports an upper layer: {upward}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "render").glob("*.py")), ids=lambda p: p.name)
def test_renderers_import_neither_widgets_nor_course(path: Path) -> None:
    upward = [f"line {n}: {m}" for n, m in _imports(path)
              if m.startswith(("torchlens_widgets.widgets", "torchlens_widgets.course"))]
    assert not upward, f"{path.name} imports an upper layer: {upward}"


def test_the_checker_sees_a_lazy_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "lenses" / "bad.py"
    bad.parent.mkdir()
    bad.write_text("def show(self):\n    from ..widgets.dispatch import dispatch_widget\n    return dispatch_widget(self)\n")
    assert _imports(bad) == [(2, "torchlens_widgets.widgets.dispatch")]


def test_busy_lines_know_no_layer() -> None:
    """busy.py sits below the lenses: it imports nothing of the package, by statement or by name."""
    path = PACKAGE / "busy.py"
    named = [f"line {n}: {m}" for n, m in _imports(path) if m.startswith("torchlens_widgets")]
    assert not named, f"busy.py imports the package: {named}"
    assert "torchlens_widgets." not in path.read_text(), "busy.py names a package module (an import by string)"
