"""Shared rules of the fuzz suites: hostile input ends in a true result or the module's own error with advice,
within a time limit, and never takes the process down."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

LIMIT_S = 10.0
# An error "says what to do" when it names an action or an expectation.
ADVICE = re.compile(
    r"\b(use|call|record|pass|check|load|write|export|try|give|expected|request|look|wrap|read|"
    r"reinstall|install|set|run|convert|free)\b|e\.g\.|instead",
    re.I,
)


def outcome(fn: Callable[[], Any], error: type[BaseException] | tuple[type[BaseException], ...]) -> Any:
    """Run fn: return its result, or the module's `error` (checked for advice); anything else fails the test."""
    t0 = time.monotonic()
    try:
        result: Any = fn()
    except error as exc:
        message = str(exc)
        assert ADVICE.search(message), f"{type(exc).__name__} without advice: {message!r}"
        result = exc
    except Exception as exc:
        raise AssertionError(f"raw {type(exc).__module__}.{type(exc).__name__} escaped: {exc}") from exc
    elapsed = time.monotonic() - t0
    assert elapsed < LIMIT_S, f"took {elapsed:.1f} s (limit {LIMIT_S:.0f} s)"
    return result


def in_subprocess(code: str, timeout: float = LIMIT_S + 20) -> str:
    """Run code in a fresh interpreter (a crash there fails this test instead of killing pytest); its stdout."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"the interpreter died (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return proc.stdout
