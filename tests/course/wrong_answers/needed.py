"""Which of a notebook's code cells its exercises need: the cells that define, directly or through other cells,
a name an exercise's answer, wrong answers or test cell uses. The wrong-answer harness runs only these (the
teaching cells that draw pictures, compile demos or profile are nbval's to run), so each notebook's setup runs
once, quickly, before its wrong answers."""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from collections.abc import Iterable

from IPython.core.inputtransformer2 import TransformerManager

_PYTHON = TransformerManager()
# A library namespace a cell registers (`TORCH_LIBRARY(nb10, m)`, `"nb10::axpy"`): used as `torch.ops.nb10`.
_NAMESPACE_DEFINED = re.compile(r"\bTORCH_LIBRARY(?:_FRAGMENT)?\(\s*(\w+)|[\"'](\w+)::\w+")
_BUILTIN = frozenset(dir(builtins)) | {"get_ipython", "display", "In", "Out", "__file__", "__name__"}


# Magics whose argument is Python the cell runs: read it as the cell's own code.
_CODE_MAGIC = re.compile(r"^(\s*)%{1,2}(?:time|timeit|capture|prun)\b(?:\s+-\S+)*[ \t]*", re.MULTILINE)


def _python(source: str) -> str:
    return _PYTHON.transform_cell(_CODE_MAGIC.sub(r"\1", source))


def _tree(source: str) -> ast.Module:
    try:
        return ast.parse(_python(source))
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def defined(source: str) -> set[str]:
    """Names a cell binds in the notebook's namespace (assignments, defs, classes, imports, loop and with targets,
    `global` writes inside its functions; not a comprehension's or a function's own locals), and the
    `torch.ops.<ns>` namespaces it registers."""
    try:
        names = _globals_written(symtable.symtable(_python(source), "<cell>", "exec"), True)
    except SyntaxError:
        names = set()
    names.update(f"torch.ops.{a or b}" for a, b in _NAMESPACE_DEFINED.findall(source))
    return names


def _globals_written(table: symtable.SymbolTable, top: bool) -> set[str]:
    names = {sym.get_name() for sym in table.get_symbols()
             if (sym.is_assigned() or sym.is_imported()) and (top or sym.is_declared_global())}
    for child in table.get_children():
        names |= _globals_written(child, False)
    return names


def _globals_read(table: symtable.SymbolTable, top: bool) -> set[str]:
    names = {sym.get_name() for sym in table.get_symbols()
             if sym.is_referenced() and (top or sym.is_global() or sym.is_declared_global())}
    for child in table.get_children():
        names |= _globals_read(child, False)
    return names


def used(source: str) -> set[str]:
    """Global names a cell reads (inside its functions too: they read globals when called, but not their own
    locals), and the `torch.ops.<ns>` namespaces it uses."""
    python = _python(source)
    try:
        names = _globals_read(symtable.symtable(python, "<cell>", "exec"), True)
    except SyntaxError:
        return set()
    for node in ast.walk(_tree(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "torch" \
                and node.value.attr == "ops":
            names.add(f"torch.ops.{node.attr}")
    return names - _BUILTIN


def needed_cells(cells: list[str], always: Iterable[int], extra_uses: Iterable[str] = ()) -> list[int]:
    """Indices of `cells` (code sources, in order) to run: those in `always`, and every earlier cell that defines
    a name one of them (or `extra_uses`) reads, transitively."""
    keep = set(always)
    wanted = [(i, used(cells[i])) for i in keep]
    last = max(keep, default=len(cells) - 1)
    wanted.append((last + 1, set(extra_uses)))
    defs = [defined(s) for s in cells]
    while wanted:
        position, names = wanted.pop()
        for name in names:
            for j in range(position - 1, -1, -1):  # the nearest earlier cell that binds it (one that amends
                if name in defs[j]:                  # it, `x = x + 1`, reads it too: the one before follows)
                    if j not in keep:
                        keep.add(j)
                        wanted.append((j, used(cells[j])))
                    break
    return sorted(keep)
