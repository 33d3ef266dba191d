"""What a grading run believes about a check: its outcome as the grader recorded it, not as a cell displayed it.

At the start of a grading run, before any student code, the run gives the kernel a secret key (`start`, sent as
a user expression: input transformers never see those). From then on every graded check records its outcome here,
and after each restored test cell the run asks for a report (`report`, again a user expression, with a fresh
nonce): the outcomes recorded since the last report and what has changed in the interpreter since the start that
could take over execution or results (input/AST transformers, trace, profile and audit hooks, replaced display or
execution machinery, event callbacks, custom exception handlers, patched grader code, swapped builtins), signed
with the key. A display that claims a pass, a test cell rewritten on its way in, a trace hook that edits a check's
locals: none of them produces a signed report of exactly one pass with nothing changed.

Code that subverts the interpreter itself (reading the key out of this module's closures, say) is always possible
in a grader that runs in the student's kernel; the sandbox keeps everything else out of its reach.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import json
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["grading", "record", "report", "start", "verify"]

_SHELL_METHODS = ("run_cell", "run_cell_async", "should_run_async", "run_code", "run_ast_nodes", "transform_cell",
                  "transform_ast", "user_expressions", "ev", "ex", "showtraceback", "_showtraceback",
                  "showsyntaxerror", "get_exception_only", "_format_user_obj")
_SHELL_PARTS = ("displayhook", "display_pub", "display_formatter", "CustomTB", "custom_exceptions", "compile",
                "InteractiveTB", "SyntaxTB", "input_transformer_manager")
_BUILTINS = ("__import__", "exec", "eval", "compile", "isinstance", "getattr", "type", "print", "__build_class__")
_KERNEL_METHODS = ("do_execute", "execute_request", "dispatch_shell", "send_response")


def sign(key: str, nonce: str, grade_id: str, outcomes: list[bool], findings: list[str]) -> str:
    """The MAC over one report's content (the grading run checks it with the key it gave)."""
    body = json.dumps([nonce, grade_id, outcomes, findings])
    return hmac.new(key.encode(), body.encode(), hashlib.sha256).hexdigest()


def verify(key: str, nonce: str, grade_id: str, text: str) -> tuple[list[bool], list[str]] | None:
    """(outcomes, findings) from a report's text when it is signed with `key` for this nonce and item, else None."""
    try:
        doc = json.loads(text)
        outcomes, findings, mac = doc["outcomes"], doc["findings"], doc["mac"]
        if doc["nonce"] != nonce or doc["grade_id"] != grade_id or not isinstance(mac, str):
            return None
        if not (isinstance(outcomes, list) and all(isinstance(o, bool) for o in outcomes)
                and isinstance(findings, list) and all(isinstance(f, str) for f in findings)):
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return (outcomes, findings) if hmac.compare_digest(mac, sign(key, nonce, grade_id, outcomes, findings)) else None


def _ident(obj: Any) -> Any:
    """What identifies a piece of machinery: the function behind a bound method, else the object."""
    return getattr(obj, "__func__", obj)


_LIBRARIES = ("matplotlib", "matplotlib_inline", "ipywidgets", "IPython", "ipykernel", "comm", "anywidget", "tqdm",
              __name__.split(".")[0])


def _library_owned(fn: Any) -> bool:
    """A callback that a library the course uses registers itself (its code in that library's installed files)."""
    import os

    module = getattr(fn, "__module__", None) or ""
    code = getattr(fn, "__code__", None)
    if module.split(".")[0] not in _LIBRARIES or code is None:
        return False
    top = sys.modules.get(module.split(".")[0])
    folder = os.path.dirname(getattr(top, "__file__", None) or "") + os.sep
    return folder != os.sep and code.co_filename.startswith(folder)


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _machinery() -> dict[str, Any]:
    """Every piece of the interpreter and kernel that decides what a cell runs or what its results look like."""
    found: dict[str, Any] = {"sys.displayhook": sys.displayhook, "sys.excepthook": sys.excepthook}
    found.update({f"builtins.{n}": getattr(builtins, n, None) for n in _BUILTINS})
    shell = _shell()
    if shell is None:
        return found
    for name in _SHELL_METHODS:
        found[f"shell.{name}"] = _ident(getattr(shell, name, None))
        found[f"shell.{name} (instance)"] = name in vars(shell)
    for name in _SHELL_PARTS:
        found[f"shell.{name}"] = getattr(shell, name, None)
    for name in ("input_transformers_cleanup", "input_transformers_post", "ast_transformers"):
        found[f"shell.{name}"] = tuple(getattr(shell, name, ()))
    manager = getattr(shell, "input_transformer_manager", None)
    for name in ("cleanup_transforms", "line_transforms", "token_transformers"):
        found[f"input_transformer_manager.{name}"] = tuple(getattr(manager, name, ()))
    events = getattr(shell, "events", None)
    for event, callbacks in getattr(events, "callbacks", {}).items():  # a library's own (matplotlib's) may come
        found[f"events.{event}"] = tuple(f for f in map(_ident, callbacks) if not _library_owned(f))
    kernel = getattr(shell, "kernel", None)
    for name in _KERNEL_METHODS:
        found[f"kernel.{name}"] = _ident(getattr(kernel, name, None))
    handlers = getattr(kernel, "shell_handlers", {})
    found["kernel.shell_handlers"] = tuple((k, _ident(v)) for k, v in sorted(handlers.items()))
    try:
        from IPython.core import display_functions

        found["IPython display"] = (display_functions.display, display_functions.publish_display_data)
    except ImportError:
        pass
    return found


def _grader_modules() -> dict[str, Any]:
    from . import trusted

    return {name: sys.modules.get(name) for name in trusted.GRADER}


def _make() -> tuple[Callable[[str], str], Callable[[str, bool], None], Callable[[str, str], str],
                     Callable[[Any], None], Callable[[], bool]]:
    key: list[str] = []
    pristine: dict[str, Any] = {}
    modules: dict[str, Any] = {}
    outcomes: list[tuple[str, bool]] = []
    notes: list[str] = []
    callers: list[Any] = []  # the code objects allowed to record an outcome (the check's own)

    def start(secret: str) -> str:
        """Called by the grading run before any student code: keep the key, note the machinery as it is."""
        if key:
            notes.append("the grader's start was called a second time")
            return "already started"
        key.append(secret)
        pristine.update(_machinery())
        modules.update(_grader_modules())
        return "started"

    def allow(code: Any) -> None:
        """The checks name the code objects that record outcomes (once, when they are imported)."""
        if not callers:
            callers.extend(code)

    def record(grade_id: str, passed: bool) -> None:
        """A check's outcome, from the check itself; a call from anywhere else is noted as tampering. Kept only in a
        kernel the grader started."""
        if not key:
            return
        caller = sys._getframe(1).f_code
        if callers and caller not in callers:
            notes.append(f"an outcome for {grade_id} was recorded by {caller.co_name} in {caller.co_filename}, "
                         "not by a check")
            return
        outcomes.append((str(grade_id), bool(passed)))

    def findings() -> list[str]:
        out = list(notes)
        now = _machinery()
        for name, before in pristine.items():
            after = now.get(name)
            if after is not before and after != before:
                out.append(f"{name} was changed")
        for name in now.keys() - pristine.keys():
            if now[name]:
                out.append(f"{name} was added")
        for name, before in modules.items():
            after = sys.modules.get(name)
            if before is not None and after is not before:
                out.append(f"the grader module {name} was replaced in sys.modules")
        if sys.gettrace() is not None:
            out.append("a trace function is set (sys.settrace)")
        if sys.getprofile() is not None:
            out.append("a profile function is set (sys.setprofile)")
        if getattr(threading, "_trace_hook", None) is not None or getattr(threading, "_profile_hook", None) is not None:
            out.append("a trace or profile function is set for new threads (threading.settrace / setprofile)")
        from . import trusted

        out += [f"{what} was called by {where}" for what, where in trusted.hooks_set()]
        checks = sys.modules.get(f"{__package__}.checks")
        integrity = sys.modules.get(f"{__package__}.integrity")
        if checks is not None and integrity is not None:
            try:
                out += [f"grader code was changed: {f}" for f in integrity.tampering(repair=False)]
            except Exception as exc:  # a broken guard is itself a finding
                out.append(f"the grader's integrity scan failed ({type(exc).__name__})")
        return sorted(set(out))

    def report(nonce: str, grade_id: str) -> str:
        """The outcomes for `grade_id` recorded since the last report, and the findings, signed."""
        mine = [passed for gid, passed in outcomes if gid == grade_id]
        outcomes.clear()
        found = findings() if key else ["the grader was not started before the student's code"]
        mac = sign(key[0], nonce, grade_id, mine, found) if key else ""
        return json.dumps({"nonce": nonce, "grade_id": grade_id, "outcomes": mine, "findings": found, "mac": mac})

    def grading() -> bool:
        """Is this kernel run by the grader (started before any student code)?"""
        return bool(key)

    return start, record, report, allow, grading


start, record, report, allow_recorders, grading = _make()
