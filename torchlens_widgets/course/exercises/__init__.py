"""Each graded exercise's check machinery, one module per notebook (`n01` for `01-runtime.ipynb`).

A test cell shows *what* is checked, in a few lines: `with check("01-crossover", points=2) as c:
exercises.n01.crossover(c, crossover)`. The function holds the how — case generators, reference values, the
ops an answer may run, the hint tiers — so none of it is on the learner's page, and it can be tested without a
notebook. The source notebook's hidden block calls the same function again with extra cases, as data.
Functions here are off limits to answers: a watched answer that calls one fails its check.
"""

from __future__ import annotations

import os
import sys
from importlib import import_module

_HERE = os.path.dirname(os.path.abspath(__file__))


def exercise_files() -> tuple[str, ...]:
    """The source files of the loaded exercise modules: a watched answer may not call into them."""
    return tuple(f for m in list(sys.modules.values())
                 if (f := getattr(m, "__file__", None)) and os.path.dirname(os.path.abspath(f)) == _HERE)


# every notebook's module, loaded now (when the checks are first imported, before any answer cell can patch one);
# `exercise_files` comes first: a module that imports the checks, which import this package, finds it defined
_NOTEBOOKS = sorted(n[:-3] for n in os.listdir(_HERE) if len(n) == 6 and n[0] == "n" and n[1:3].isdigit()
                    and n.endswith(".py"))
for _name in _NOTEBOOKS:
    globals()[_name] = import_module(f".{_name}", __name__)

__all__ = ["exercise_files", *_NOTEBOOKS]
