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

from . import n01, n02, n03

__all__ = ["exercise_files", "n01", "n02", "n03"]


def exercise_files() -> tuple[str, ...]:
    """The source files of the loaded exercise modules: a watched answer may not call into them."""
    here = os.path.dirname(os.path.abspath(__file__))
    return tuple(f for m in list(sys.modules.values())
                 if (f := getattr(m, "__file__", None)) and os.path.dirname(os.path.abspath(f)) == here)
