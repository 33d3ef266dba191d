"""The course layer: graded checks, the progress store, student releases of the notebooks, and grading.

`check` and friends load on first use (they import torch); the server extension and the CLI don't.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["Check", "CheckFailed", "check", "strict_mismatch"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'torchlens_widgets.course' has no attribute {name!r}")
    value = getattr(import_module(".checks", __name__), name)
    globals()[name] = value
    return value
