"""The modules graded checks trust, noted by integrity the moment each is imported, before learner code can
patch one; and the course's own entry points, which notebook code cannot rebind.

Importing this module needs no torch: the package installs :func:`install` when it is imported, so a lens first
imported by an answer cell is noted as it was defined, not as the answer left it.
"""

from __future__ import annotations

import itertools
import sys
import types
from importlib.machinery import ModuleSpec
from typing import Any

_PACKAGE = __name__.rsplit(".", 2)[0]
#: Lenses whose functions test cells trust: patching one is tampering.
LENSES = ("allocator", "asyncexec", "autocast", "autograd", "capstone", "compile_trace", "contract", "copies", "dispatch",
          "distributed", "distributed_scenarios", "fusion", "graph_breaks", "layout", "memory", "meters",
          "package", "profile", "timing", "triton_grid")
#: The grader itself: notebook code may not rebind a name in these modules, nor in the exercise modules (it would
#: replace the judge).
GRADER = (f"{_PACKAGE}.course", f"{_PACKAGE}.course.checks", f"{_PACKAGE}.course.integrity",
          f"{_PACKAGE}.course.recording", f"{_PACKAGE}.course.exercises", f"{_PACKAGE}.course.trusted",
          f"{_PACKAGE}.course.attest")
_WATCHED = frozenset((*(f"{_PACKAGE}.lenses.{name}" for name in LENSES), *GRADER[1:], "torch._dynamo"))
EXERCISES = f"{_PACKAGE}.course.exercises"


def watched(name: str) -> bool:
    """Is module `name` noted by integrity as soon as it is imported?"""
    return name in _WATCHED or name.startswith(EXERCISES + ".")


def from_notebook_code(depth: int) -> bool:
    """Does the frame `depth` levels up run a notebook's (or a script's) own code?"""
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return False
    name = frame.f_code.co_filename
    return frame.f_globals.get("__name__") == "__main__" or "ipykernel_" in name or name.startswith("<ipython-input")


class GraderModule(types.ModuleType):
    """A grader module: notebook code that rebinds or deletes one of its names gets an error instead."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in vars(self) and not name.startswith("__") and from_notebook_code(1):
            raise AttributeError(_refusal(self.__name__, name))
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if not name.startswith("__") and from_notebook_code(1):
            raise AttributeError(_refusal(self.__name__, name))
        super().__delattr__(name)


class GraderClass(type):
    """The metaclass of the grader's classes: notebook code that sets or deletes one of their attributes (a
    method swapped for one that passes everything) gets an error instead."""

    def __setattr__(cls, name: str, value: Any) -> None:
        if from_notebook_code(1):
            raise AttributeError(_refusal(f"{cls.__module__}.{cls.__qualname__}", name))
        super().__setattr__(name, value)

    def __delattr__(cls, name: str) -> None:
        if from_notebook_code(1):
            raise AttributeError(_refusal(f"{cls.__module__}.{cls.__qualname__}", name))
        super().__delattr__(name)


def _grader_function(obj: Any) -> bool:
    module = getattr(obj, "__module__", None)
    return isinstance(obj, types.FunctionType) and isinstance(module, str) and (
        module in GRADER or module.startswith(EXERCISES + "."))


_INSIDES = frozenset(("__code__", "__defaults__", "__kwdefaults__"))


#: Raw memory through ctypes: what a recording notes as an escape (the dispatcher never sees these writes).
CTYPES_EVENTS = frozenset(("ctypes.call_function", "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.addressof",
                           "ctypes.string_at", "ctypes.wstring_at"))
#: Active listeners (a recording in progress): called with the event and the frame that raised it.
LISTENERS: list[Any] = []


#: Hooks that can watch or change what a check computes: each one set by other code than torch's (its profiler)
#: and the recorder's is noted, for a grading run to report (see attest).
_HOOK_EVENTS = frozenset(("sys.settrace", "sys.setprofile", "sys.addaudithook"))
_HOOKS_SET: list[tuple[str, str]] = []
_HOOK_CODES: list[Any] = []
_TORCH_DIR: list[str] = []


def allow_hooks(codes: Any) -> None:
    """The recorder names the code that sets its profile hook (once, at its import)."""
    if not _HOOK_CODES:
        _HOOK_CODES.extend(codes)


def hooks_set() -> list[tuple[str, str]]:
    """(event, where) of each trace, profile or audit hook set by code other than torch's and the recorder's."""
    return list(_HOOKS_SET)


def _hook_set(event: str, frame: Any) -> None:
    code = frame.f_code
    if code in _HOOK_CODES or len(_HOOKS_SET) >= 50:
        return
    if not _TORCH_DIR and "torch" in sys.modules:
        import os

        _TORCH_DIR.append(os.path.dirname(sys.modules["torch"].__file__ or "") + os.sep)
    if _TORCH_DIR and code.co_filename.startswith(_TORCH_DIR[0]):
        return
    _HOOKS_SET.append((event, f"{code.co_name} ({code.co_filename}:{frame.f_lineno})"))


# Counts every change of any function's code or defaults and every ctypes access (raw memory), and every read
# (`code_changes`): a read one above the last read means nothing changed since, so the integrity scan can skip
# reading each grader function's code (an audit event each). Bound as default arguments, where a change is itself
# such an event.
_CHANGES = itertools.count()


def code_changes(_read: Any = _CHANGES.__next__) -> int:
    """A number one above the last one returned when no function's code or defaults changed in between (and no
    ctypes call ran); larger otherwise."""
    return int(_read())


def _audit(event: str, args: tuple[Any, ...], _changed: Any = _CHANGES.__next__) -> None:
    """Refuse notebook code that swaps the code or defaults of a grader function (the function object stays);
    tell a recording in progress about raw memory access through ctypes; note hooks set (see `hooks_set`)."""
    if event in _HOOK_EVENTS:
        _hook_set(event, sys._getframe(1))
    if event == "object.__setattr__" and len(args) >= 2 and args[1] in _INSIDES:
        _changed()
        if _grader_function(args[0]) and from_notebook_code(1):
            raise AttributeError(_refusal(f"{args[0].__module__}.{args[0].__qualname__}", args[1]))
    if event in CTYPES_EVENTS:
        _changed()
    if LISTENERS and event in CTYPES_EVENTS:
        frame = sys._getframe(1)
        for listen in list(LISTENERS):
            listen(event, frame)


def _refusal(module: str, name: str) -> str:
    return (f"{module}.{name} belongs to the course's grader, and a notebook cannot replace it. Take that line out "
            "of your cell (restart the kernel if it ran) and test your answer with your own code instead.")


def guard_module(module: types.ModuleType) -> None:
    """Make `module` a GraderModule (its attributes stay the same object)."""
    if type(module) is types.ModuleType:
        module.__class__ = GraderModule


def _noted(module: types.ModuleType) -> None:
    if module.__name__ in GRADER or module.__name__.startswith(EXERCISES + "."):
        guard_module(module)
    if "torch" in sys.modules:  # every watched module imports torch first
        from . import integrity

        integrity.protect(module.__name__, module, data=module.__name__.startswith(EXERCISES + "."))


class _NoteOnImport:
    """A meta path finder that lets the normal finders find a watched module, then notes it once it has run."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if not watched(name) and name not in GRADER:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            run(module)
            _noted(module)

        try:
            loader.exec_module = exec_module  # type: ignore[method-assign]  # this module's own loader object
        except AttributeError:  # pragma: no cover - a loader without an instance dict
            pass
        return spec


_AUDITING: list[bool] = []


def install() -> None:
    """Note watched modules at import from now on, and guard the grader (idempotent)."""
    if not any(isinstance(f, _NoteOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoteOnImport())
    if not _AUDITING:  # an audit hook cannot be removed: one per process
        sys.addaudithook(_audit)
        _AUDITING.append(True)
    for name in GRADER:  # already imported (this package's own __init__ first)
        if name in sys.modules:
            guard_module(sys.modules[name])
