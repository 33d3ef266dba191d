"""The course layer: graded checks, the progress store, student releases of the notebooks, and grading.

`check` and friends load on first use (they import torch); the server extension and the CLI don't.
`exercises` holds each graded exercise's check machinery, one module per notebook.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["Check", "CheckFailed", "check", "exercises", "strict_mismatch"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'torchlens_widgets.course' has no attribute {name!r}")
    checks = import_module(".checks", __name__)  # loads and protects the exercises too
    value = import_module(".exercises", __name__) if name == "exercises" else getattr(checks, name)
    globals()[name] = value
    return value
