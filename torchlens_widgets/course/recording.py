"""Record what a learner's function actually ran, so that "don't use X" rules hold for aliases too.

Reading names (`fn.__code__.co_names`) misses `f = torch.as_strided`, `getattr(x, "t")` and helpers
captured before the check; recording does not. :func:`record` runs a call with two observers:

* a ``TorchDispatchMode`` that sees every aten op the call reaches the dispatcher with;
* a ``sys.setprofile`` hook that sees every Python and builtin call, to catch calls into forbidden
  helpers and *escapes*: ways around the dispatch observer (popping modes, going through NumPy or
  Python lists, other threads, another profile hook).
"""

from __future__ import annotations

import contextlib
import dis
import inspect
import os
import sys
import threading
import types
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch._compile  # _disable_dynamo, see _DYNAMO_GATE
from torch.utils._python_dispatch import TorchDispatchMode

from . import trusted
from .trusted import LISTENERS

__all__ = ["ESCAPES", "Recording", "record"]

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# The standard library and the installed packages (torch's imports of sympy and the like): never a learner's copy.
# Fingerprinting every function a first `import torch._dynamo` runs took ~45 s inside a recorded call.
# The wrapper torch's `_disable_dynamo` puts around a function (its first call imports torch._dynamo).
_DYNAMO_GATE = getattr(torch._compile._disable_dynamo(lambda: None), "__code__", None)
_INSTALLED = tuple(dict.fromkeys(
    [os.path.dirname(os.__file__) + os.sep, *(os.path.join(p, "") for p in (sys.prefix, sys.base_prefix, sys.exec_prefix))]))

#: Builtin calls that step around the dispatch observer, by qualified name, with what they do.
ESCAPES: dict[str, str] = {
    "Tensor.numpy": "converts to NumPy, where the dispatcher cannot see the work",
    "Tensor.tolist": "converts to Python lists, where the dispatcher cannot see the work",
    "Tensor.data_ptr": "reads raw memory addresses",
    "UntypedStorage.data_ptr": "reads raw memory addresses",
    "TypedStorage.data_ptr": "reads raw memory addresses",
    "from_numpy": "builds a tensor from NumPy memory",
    "_pop_torch_dispatch_stack": "pops dispatch modes (the checker's observer among them)",
    "_pop_torch_function_stack": "pops torch function modes",
    "_set_dispatch_mode": "swaps dispatch modes",
    "DisableTorchFunction.__enter__": "switches __torch_function__ off",
    "DisableTorchFunctionSubclass.__enter__": "switches __torch_function__ off",
    "_DisableTorchDispatch.__enter__": "switches Python dispatch off",
    "_ExcludeDispatchKeyGuard.__enter__": "hides dispatch keys",
    "setprofile": "replaces the profile hook the checker records with",
    "settrace": "installs a trace hook",
}

# Python-level escapes, matched by code object.
_ESCAPE_CODE: dict[types.CodeType, str] = {
    torch.Tensor.__array__.__code__: "converts to NumPy through __array__",
    threading.Thread.start.__code__: "starts a thread the checker cannot follow",
}
try:
    from torch.utils._python_dispatch import _disable_current_modes

    _ESCAPE_CODE[getattr(_disable_current_modes, "__wrapped__", _disable_current_modes).__code__] = (
        "pops every dispatch mode (the checker's observer among them)"
    )
except ImportError:  # pragma: no cover - older torch
    pass


@dataclass
class Recording:
    """What one call ran: aten ops by packet name (``"t"``, ``"as_strided"``), forbidden calls and escapes."""

    aten: Counter[str] = field(default_factory=Counter)
    forbidden: list[str] = field(default_factory=list)
    escapes: list[str] = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None  # what the call raised (with raise_errors=False)


class _AtenRecorder(TorchDispatchMode):
    def __init__(self, rec: Recording) -> None:
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.namespace == "aten":
            self.rec.aten[func.__name__.split(".")[0]] += 1
        return func(*args, **(kwargs or {}))


def _c_name(fn: Any) -> str:
    """'Tensor.t' for a tensor method bound or not, '_VariableFunctionsClass.as_strided' → 'as_strided'."""
    qual = str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or "?")
    owner, _, name = qual.rpartition(".")
    if owner in ("TensorBase", "Tensor") or isinstance(getattr(fn, "__self__", None), torch.Tensor):
        return f"Tensor.{name}"
    if owner == "_VariableFunctionsClass":
        return name
    return qual


def _describe(fn: Any) -> str:
    if isinstance(fn, types.FunctionType):
        return fn.__qualname__
    return _c_name(fn)


def _unwrap(f: Any) -> Any:
    """The function a decorator wrapped (torch wraps every mode's __torch_dispatch__ in one shared wrapper)."""
    seen = 0
    while isinstance(getattr(f, "__wrapped__", None), types.FunctionType) and seen < 8:
        f, seen = getattr(f, "__wrapped__"), seen + 1  # noqa: B009
    return f


def _expand_modules(items: Iterable[Any]) -> list[Any]:
    """A module stands for every function and method defined in it."""
    out: list[Any] = []
    for item in items:
        if not isinstance(item, types.ModuleType):
            out.append(item)
            continue
        for value in vars(item).values():
            if getattr(value, "__module__", None) != item.__name__:
                continue
            if isinstance(value, types.FunctionType):
                out.append(value)
            elif isinstance(value, type):
                out += [v for v in vars(value).values() if isinstance(v, types.FunctionType)]
    return out


_MIN_STEPS = 16  # a shorter function (`return t.t()`) is too common to call a copy
_LOCALS = frozenset(("LOAD_FAST", "STORE_FAST", "DELETE_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR"))
_NAMED = frozenset(("LOAD_GLOBAL", "LOAD_ATTR", "LOAD_METHOD", "LOAD_NAME", "STORE_ATTR", "STORE_GLOBAL",
                    "LOAD_DEREF", "STORE_DEREF", "IMPORT_NAME", "IMPORT_FROM"))
_FINGERPRINTS: weakref.WeakKeyDictionary[types.CodeType, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def _fingerprint(code: types.CodeType) -> tuple[Any, ...]:
    """What a function does, without where it came from: the names, constants, operators and calls of its
    bytecode in order (nested functions too), its locals by position; not its name, file, line numbers or the
    compiler's choice of opcode, so a copy renamed or re-executed from the source elsewhere still matches."""
    found = _FINGERPRINTS.get(code)
    if found is not None:
        return found
    steps: list[Any] = [code.co_argcount, code.co_kwonlyargcount]
    for ins in dis.get_instructions(code):
        if ins.opname in _LOCALS:
            steps.append(("local", code.co_varnames.index(ins.argval) if ins.argval in code.co_varnames else 0))
        elif ins.opname in _NAMED:
            steps.append(("name", ins.argval))
        elif ins.opname == "LOAD_CONST":
            value = ins.argval
            steps.append(("const", _fingerprint(value) if isinstance(value, types.CodeType) else repr(value)))
        elif ins.opname in ("BINARY_OP", "COMPARE_OP", "CALL", "CALL_FUNCTION_EX", "BUILD_TUPLE", "BUILD_LIST"):
            steps.append((ins.opname, ins.argrepr))
    found = _FINGERPRINTS[code] = tuple(steps)
    return found


def _codes_of(value: Any, out: dict[types.CodeType, str], name: str, depth: int = 2) -> None:
    fn = getattr(value, "__func__", value)
    if isinstance(fn, types.FunctionType):
        stack = [fn.__code__]
        while stack:
            code = stack.pop()
            out.setdefault(code, name)
            stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    elif isinstance(value, type) and depth:
        for attr in list(vars(value).values()):
            _codes_of(attr, out, f"{value.__qualname__}", depth - 1)


_PRINTS: dict[frozenset[str], dict[tuple[Any, ...], str]] = {}


def _copy_prints(files: frozenset[str], forbid: list[Any]) -> dict[tuple[Any, ...], str]:
    """Fingerprints of the forbidden functions and of every function defined in the modules of `files` (the check's
    own helpers), long enough not to match an honest answer by chance."""
    if files not in _PRINTS:
        codes: dict[types.CodeType, str] = {}
        for module in list(sys.modules.values()):
            if getattr(module, "__file__", None) in files:
                for name, value in list(vars(module).items()):
                    if getattr(value, "__module__", module.__name__) == module.__name__:  # its own, not imported
                        _codes_of(value, codes, name)
        # not code generated from a string (a dataclass's __init__): another class with those fields has the same
        _PRINTS[files] = {p: f"{name} (one of the check's own helpers)" for c, name in codes.items()
                          if c.co_filename != "<string>" and len(p := _fingerprint(c)) >= _MIN_STEPS}
    prints = dict(_PRINTS[files])
    for f in forbid:
        code = getattr(getattr(f, "__func__", f), "__code__", None)
        if isinstance(code, types.CodeType) and len(_fingerprint(code)) >= _MIN_STEPS:
            prints[_fingerprint(code)] = _describe(f)
    return prints


_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_RESUMES: weakref.WeakKeyDictionary[types.CodeType, int] = weakref.WeakKeyDictionary()


def _first_resume(code: types.CodeType) -> int:
    """Where a generator's frame stands when its body starts (a later "call" event on it is a resumption)."""
    where = _RESUMES.get(code)
    if where is None:
        where = _RESUMES[code] = next((i.offset for i in dis.get_instructions(code) if i.opname == "RESUME"), -1)
    return where


def _learner_frame(frame: types.FrameType | None) -> bool:
    f = frame.f_code.co_filename if frame is not None else ""
    return not (f.startswith(_TORCH_DIR) or f.startswith(_PACKAGE_DIR) or f.startswith("<frozen"))


def record(
    fn: Callable[..., Any], *args: Any, forbid: Iterable[Any] = (), escapes: bool = True, aten: bool = True,
    forbid_files: Iterable[str] = (), allow: Iterable[Any] = (), raise_errors: bool = True,
    whole_files: Iterable[str] = (), **kwargs: Any,
) -> Recording:
    """Call ``fn(*args, **kwargs)`` and record its aten ops, its calls into ``forbid`` and any escapes.

    ``forbid`` holds Python functions (matched by code object, so aliases count) and builtins or tensor
    methods (``torch.as_strided``, ``torch.Tensor.t``: matched by name when called from code outside
    torch). With ``escapes=False`` NumPy conversions and the like are allowed; with ``aten=False`` no
    dispatch mode is entered (for callers that observe ops another way, e.g. with the profiler). Any
    Python function compiled from a file in ``forbid_files`` (a test cell's own helpers) is forbidden,
    except those in ``allow`` (workloads handed to ``fn``); one from a file in ``whole_files`` (a subset of
    ``forbid_files``) may not be ``fn`` itself either. A module in ``forbid`` forbids every function and
    method defined in it.
    """
    rec = Recording()
    forbid = [_unwrap(f) for f in _expand_modules(forbid)]
    allowed_codes = {getattr(getattr(f, "__func__", f), "__code__", None) for f in allow}
    codes = {f.__code__: _describe(f) for f in forbid if isinstance(f, types.FunctionType)}
    codes.update({getattr(f, "__func__", f).__code__: _describe(f) for f in forbid if isinstance(f, types.MethodType)})
    c_names = {_c_name(f): _c_name(f) for f in forbid if not isinstance(f, (types.FunctionType, types.MethodType))}
    files = frozenset(f for f in forbid_files if f)
    prints = _copy_prints(files, forbid)
    shapes = frozenset((p[0], p[1]) for p in prints)  # argument counts: a cheap first filter
    whole = files & frozenset(whole_files)
    escape_codes = _ESCAPE_CODE if escapes else {}
    escape_names = ESCAPES if escapes else {}
    previous = sys.getprofile()

    def hook(frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if code is _DYNAMO_GATE and "torch._dynamo" not in sys.modules:
                # torch's first op under a dispatch mode imports Dynamo: done here, where nothing is profiled, it
                # takes ~3 s; under this hook it took ~30 s in a fresh kernel
                import torch._dynamo  # noqa: F401
            if code.co_flags & _RESUMABLE and frame.f_lasti != _first_resume(code):
                return  # a generator resumed (or closed by the garbage collector), not called: whoever made it counts
            if code in codes:
                rec.forbidden.append(codes[code])
            elif code.co_filename in files and code.co_name != "<module>" and code not in allowed_codes:
                caller = frame.f_back
                # called by the answer, or (in `whole_files`) the answer itself: `count = the check's helper`
                if caller is not None and caller.f_code.co_filename not in files and (_learner_frame(caller) or (
                        caller.f_code is _RECORD_CODE and code.co_filename in whole)):
                    rec.forbidden.append(f"{code.co_name} (one of the check's own helpers)")
            elif (code.co_argcount, code.co_kwonlyargcount) in shapes and code not in allowed_codes \
                    and _learner_frame(frame) and not code.co_filename.startswith(_INSTALLED) \
                    and _fingerprint(code) in prints:  # a copy: re-executed from the source, or renamed
                rec.forbidden.append(f"{code.co_name}, a copy of {prints[_fingerprint(code)]}")
            elif code in escape_codes and _learner_frame(frame.f_back):
                rec.escapes.append(f"{code.co_qualname if hasattr(code, 'co_qualname') else code.co_name}: "
                                   f"{escape_codes[code]}")
        elif event == "c_call":
            if not _learner_frame(frame):
                return
            name = _c_name(arg)
            if name in escape_names:
                rec.escapes.append(f"{name}: {escape_names[name]}")
            elif name in c_names:
                rec.forbidden.append(c_names[name])

    def raw_memory(event: str, frame: types.FrameType) -> None:
        if _learner_frame(frame) and "torchinductor" not in frame.f_code.co_filename:
            rec.escapes.append(f"{event}: reaches memory through ctypes, where the dispatcher cannot see it")

    observer = _AtenRecorder(rec) if aten else contextlib.nullcontext()
    with observer:
        sys.setprofile(hook)
        if escapes:
            LISTENERS.append(raw_memory)
        try:
            rec.result = fn(*args, **kwargs)
        except Exception as exc:
            if raise_errors:
                raise
            rec.error = exc
        finally:
            sys.setprofile(previous)
            if raw_memory in LISTENERS:
                LISTENERS.remove(raw_memory)
    return rec


_RECORD_CODE = record.__code__  # the frame that calls the recorded function
trusted.allow_hooks([_RECORD_CODE])  # the one place the checks set a profile hook
