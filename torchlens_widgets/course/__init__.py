"""The course layer: graded checks, the progress store, and student releases of the notebooks."""

from .checks import Check, CheckFailed, check, strict_mismatch

__all__ = ["Check", "CheckFailed", "check", "strict_mismatch"]
