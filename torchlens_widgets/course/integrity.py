"""What a check trusts: torch (and math, builtins) as at import, no modes entered, global switches at defaults.

A learner's answer runs in the same process as the check that grades it, so an answer cell can
rebind ``torch.equal``, patch ``torch.Tensor.stride``, leave a lying ``TorchFunctionMode`` entered or
switch grad mode off. Checks call :func:`tampering` before they compare anything: it names what
changed, puts torch's own functions back and pops stray modes, so the check can fail clearly instead
of trusting a lie. Comparisons themselves run inside :func:`clean`, with every mode cleared.
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
import math
import operator
import os
import sys
import time
import types
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional
from torch.utils._python_dispatch import _disable_current_modes

from .trusted import code_changes as _code_changes

__all__ = ["Tampering", "clean", "tampering", "trusted_equal", "trusted_allclose"]

# Captured at import: what checks call, whatever the learner later rebinds.
trusted_equal = torch._C._VariableFunctions.equal  # where torch defines it: right even if torch.equal was patched
trusted_allclose = torch._C._VariableFunctions.allclose
trusted_isclose = torch._C._VariableFunctions.isclose
trusted_eq = torch._C._VariableFunctions.eq
trusted_isnan = torch._C._VariableFunctions.isnan
trusted_nonzero = torch._C._VariableFunctions.nonzero
trusted_logical_not = torch._C._VariableFunctions.logical_not
_DisableTorchFunction = torch._C.DisableTorchFunction
_disable_modes = _disable_current_modes
_len_fn_stack = torch._C._len_torch_function_stack
_len_dispatch_stack = torch._C._len_torch_dispatch_stack
_pop_fn_stack = torch._C._pop_torch_function_stack
_pop_dispatch_stack = torch._C._pop_torch_dispatch_stack
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_fn_enabled = torch._C._is_torch_function_enabled
_grad_enabled = torch.is_grad_enabled
_set_grad_enabled = torch._C._set_grad_enabled
_inference_enabled = torch.is_inference_mode_enabled
_get_default_dtype = torch.get_default_dtype
_set_default_dtype = torch.set_default_dtype
_DEFAULT_DTYPE = torch.get_default_dtype()


def _watched(name: str, value: Any) -> bool:
    if name in ("__dict__", "__weakref__", "__doc__", "__module__", "__annotations__"):
        return False
    if isinstance(value, types.ModuleType) or value is None:
        return False
    return callable(value) or isinstance(
        value, (property, classmethod, staticmethod, types.GetSetDescriptorType, types.MemberDescriptorType)
    )


def _callables(owner: Any) -> dict[str, Any]:
    """The callable attributes of a module or class, as they are now (descriptors included)."""
    return {name: value for name, value in list(vars(owner).items()) if _watched(name, value)}


def _from_a_notebook(value: Any) -> bool:
    """Defined in the notebook (or script) itself: never torch's or the package's own function, so found in
    their namespaces it was patched in before the snapshot was taken. A function that claims another module
    (`fake.__module__ = "torch"`) still has its code from a cell, or from a string."""
    fn = getattr(value, "__func__", value)
    fn = getattr(fn, "func", fn)  # functools.partial
    if getattr(fn, "__module__", None) == "__main__":
        return True
    where = getattr(getattr(fn, "__code__", None), "co_filename", "")
    return isinstance(where, str) and ("ipykernel_" in where or where.startswith("<ipython-input"))


def _torch_original(label: str, name: str) -> Any:
    """torch's own function for `torch.NAME` / `torch.Tensor.NAME`, looked up where torch defines it."""
    if label == "torch":
        return getattr(torch._C._VariableFunctions, name, None)
    if label == "torch.Tensor":
        return vars(torch._C.TensorBase).get(name)
    return None


def _torch_wrapper_of(new: Any, original: Any) -> bool:
    """True for torch's own wrappers of the original (torch._dynamo wraps torch.manual_seed on import)."""
    code = getattr(new, "__code__", None)
    if code is None or not code.co_filename.startswith(_TORCH_DIR):
        return False
    seen = 0
    while new is not None and seen < 8:
        new, seen = getattr(new, "__wrapped__", None), seen + 1
        if new is original:
            return True
    return False


_OWNERS: dict[str, Any] = {
    "torch": torch,
    "torch.Tensor": torch.Tensor,
    "torch.nn.functional": torch.nn.functional,
    "torch.autograd": torch.autograd,
    "torch.UntypedStorage": torch.UntypedStorage,
    "math": math,
    "operator": operator,
    "itertools": itertools,
    "builtins": builtins,
    "time": time,
}
_SNAPSHOT: dict[str, dict[str, Any]] = {label: _callables(owner) for label, owner in _OWNERS.items()}
# The builtins test cells compute with; others (input, display, ...) are legitimately swapped by Jupyter.
_BUILTINS = {
    "abs", "all", "any", "bool", "callable", "dict", "divmod", "enumerate", "filter", "float", "frozenset",
    "getattr", "hasattr", "hash", "id", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max",
    "min", "next", "pow", "range", "repr", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "type",
    "vars", "zip",
}
_SNAPSHOT["builtins"] = {k: v for k, v in _SNAPSHOT["builtins"].items() if k in _BUILTINS}
# The clocks a timed check reads: a patched perf_counter would make any answer fast.
_SNAPSHOT["time"] = {k: v for k, v in _SNAPSHOT["time"].items()
                     if k in ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns")}
# (label, name) of snapshot entries that were already a notebook's function when the snapshot was taken.
_EARLY: set[tuple[str, str]] = set()


def _note_early(label: str) -> None:
    _EARLY.update((label, name) for name, value in _SNAPSHOT[label].items() if _from_a_notebook(value))


for _label in _SNAPSHOT:
    _note_early(_label)


# A protected function's code, defaults and keyword defaults as at protection: swapping `fn.__code__` keeps the
# function object (so the identity check above passes) but changes what it does.
_INSIDES: dict[int, tuple[Any, tuple[Any, Any, Any]]] = {}


def _insides(fn: Any) -> tuple[Any, Any, Any]:
    return fn.__code__, fn.__defaults__, fn.__kwdefaults__


def _keep_insides(values: dict[str, Any]) -> None:
    for value in values.values():
        _keep_inside(value, 3)


def _keep_inside(value: Any, depth: int) -> None:
    """Note a function's insides, and those of the functions a constant holds (a table of cases)."""
    fn = getattr(value, "__func__", value)
    if isinstance(fn, types.FunctionType):
        if id(fn) not in _INSIDES:
            _INSIDES[id(fn)] = (fn, _insides(fn))
    elif depth and isinstance(value, (tuple, types.MappingProxyType)):
        for item in (value.values() if isinstance(value, types.MappingProxyType) else value):
            _keep_inside(item, depth - 1)


def protect(label: str, owner: Any, data: bool = False) -> None:
    """Also watch `owner`'s callables from now on (their code and defaults too); for a module, the methods of
    its classes too. With `data`, every attribute of a module: constants a check reads (cases, hints).
    The first snapshot of an owner stands: one taken as it was imported is not replaced by a later one."""
    if _OWNERS.get(label) is owner:
        return
    _OWNERS[label] = owner
    _SNAPSHOT[label] = _callables(owner)
    if data:
        _SNAPSHOT[label].update({name: value for name, value in list(vars(owner).items()) if not name.startswith("__")})
    _keep_insides(_SNAPSHOT[label])
    _note_early(label)
    if isinstance(owner, types.ModuleType):
        for name, value in list(vars(owner).items()):
            if isinstance(value, type) and value.__module__ == owner.__name__:
                _OWNERS[f"{label}.{name}"] = value
                _SNAPSHOT[f"{label}.{name}"] = _callables(value)
                _keep_insides(_SNAPSHOT[f"{label}.{name}"])
                _note_early(f"{label}.{name}")


# Global switches an answer could leave changed, and their values when torch was loaded.
_autocast_on = torch.is_autocast_enabled
_autocast_dtype = torch.get_autocast_dtype
_set_autocast_on = torch.set_autocast_enabled
_set_autocast_dtype = torch.set_autocast_dtype
_matmul_precision = torch.get_float32_matmul_precision
_set_matmul_precision = torch.set_float32_matmul_precision
_AUTOCAST = {device: _autocast_dtype(device) for device in ("cpu", "cuda")}
_MATMUL_PRECISION = _matmul_precision()
_UNSET = object()


def _dynamo_settings() -> dict[str, Any] | None:
    """torch._dynamo.config's current values (None before torch._dynamo is loaded), read from its entries (no
    deprecation warnings): a value set, or patched in, else the default."""
    config = sys.modules.get("torch._dynamo.config")
    entries = getattr(config, "_config", None)
    unset = getattr(sys.modules.get("torch.utils._config_module"), "_UNSET_SENTINEL", _UNSET)
    if config is None or not isinstance(entries, dict):
        return None
    values = {}
    for name, entry in entries.items():
        override = getattr(entry, "user_override", None)
        value = override.get() if override is not None else unset
        values[name] = getattr(entry, "default", None) if value is unset else value
    return values


def _settings_tampering(found: list[str], repair: bool, inside: bool) -> None:
    """Autocast left on, a changed autocast dtype or float32 matmul precision, and Dynamo's configuration changed
    from its defaults (an answer that switches a compiler setting for every later compile)."""
    for device, dtype in ({} if inside else _AUTOCAST).items():  # a check may run its workload under autocast
        if _autocast_on(device):
            found.append(f"autocast was left on for {device} (torch.autocast(...).__enter__() without its exit)")
            if repair:
                _set_autocast_on(device, False)
        if _autocast_dtype(device) is not dtype:
            found.append(f"the {device} autocast dtype was changed to {_autocast_dtype(device)}")
            if repair:
                _set_autocast_dtype(device, dtype)
    if _matmul_precision() != _MATMUL_PRECISION:
        found.append(f"float32 matmul precision was changed to {_matmul_precision()!r}")
        if repair:
            _set_matmul_precision(_MATMUL_PRECISION)
    frames = sys.modules.get("torch._dynamo.eval_frame")
    stance = getattr(frames, "_stance", None)
    if stance is not None and (getattr(stance, "stance", "default") != "default"
                               or getattr(stance, "backend", None) is not None
                               or getattr(stance, "skip_guard_eval_unsafe", False)):
        found.append(f"torch.compiler.set_stance({getattr(stance, 'stance', '?')!r}) was left on")
        if repair:
            frames._stance = type(stance)()  # type: ignore[union-attr]
    now = _dynamo_settings()
    if now is None:
        return
    config = sys.modules["torch._dynamo.config"]
    for name, entry in list(config._config.items()):
        if name.startswith("_"):  # torch's own bookkeeping (`_save_config_ignore`)
            continue
        then, value = getattr(entry, "default", None), now.get(name, _UNSET)
        if value is not then and not _same_setting(value, then):
            found.append(f"torch._dynamo.config.{name} was changed to {value!r}")
            if repair:
                setattr(config, name, then)


def _same_setting(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # an odd value that cannot compare: count it as changed
        return False


class Tampering(list):  # type: ignore[type-arg]
    """Sentences describing what was found changed (and has been put back); empty when all is well."""


def _type_name(obj: Any) -> str:
    return type(obj).__qualname__


# Modes the checks themselves have entered (a copy recorder around a watched call): not the learner's.
_OWN_MODES = {"function": 0, "dispatch": 0}


@contextlib.contextmanager
def own_modes() -> Iterator[None]:
    """Inside the block, the modes on the stacks now (entered by the check itself) are not tampering."""
    before = dict(_OWN_MODES)
    _OWN_MODES["dispatch"] = _len_dispatch_stack()
    _OWN_MODES["function"] = _len_fn_stack()
    try:
        yield
    finally:
        _OWN_MODES.update(before)


def tampering(repair: bool = True, inside: bool = False, code: bool = True) -> Tampering:
    """Name every patched torch function, entered mode or changed global switch; repair them if asked. `inside` a
    check's block, autocast is the check's own business (it may run a workload under autocast). `code=False` leaves
    out the code and defaults of the grader's own functions: reading each one's `__code__` is an audit event
    (~3 ms for them all), and a notebook cannot swap them anyway (`trusted` refuses it as it happens); a check
    reads them when it starts and ends, and after each call of the learner's code."""
    found = Tampering()
    early = {label for label, _ in _EARLY}
    for label, names in _SNAPSHOT.items():
        owner = _OWNERS[label]
        current = vars(owner)
        # the common case in C: every watched name still the object it was, and no name added since the last scan
        same = label not in early and _all(_map(_is, _map(current.get, names, _repeat(_MISSING)), names.values()))
        if same and (not isinstance(owner, type) or current.keys() == _KEYS.get(label)):
            continue
        for name, original in list(names.items()) if not same else ():
            now = current.get(name, _MISSING)
            if now is original:
                if (label, name) not in _EARLY:
                    continue
                found.append(f"{label}.{name} was replaced before the checks were loaded")
                fixed = _torch_original(label, name)
                if repair and fixed is not None:
                    setattr(owner, name, fixed)
                    names[name] = fixed
                    _EARLY.discard((label, name))
                elif repair and isinstance(owner, type) and any(name in vars(b) for b in owner.__mro__[1:]):
                    delattr(owner, name)  # a shadowing attribute: the inherited method comes back
                    names.pop(name)
                    _EARLY.discard((label, name))
                continue
            if now is not original and _torch_wrapper_of(now, original):
                names[name] = now  # torch rebinding its own function: trust the wrapper from now on
            elif now is not original:
                found.append(f"{label}.{name} was replaced")
                if repair:
                    setattr(owner, name, original)
        if isinstance(owner, type):  # a new class attribute that shadows an inherited method, e.g. Tensor.stride
            shadowing = [
                n for n, v in current.items()
                if n not in names and _watched(n, v) and any(n in vars(b) for b in owner.__mro__[1:])
            ]
            for name in shadowing:
                found.append(f"{label}.{name} was replaced")
                if repair:
                    delattr(owner, name)
            if not shadowing or repair:
                _KEYS[label] = frozenset(current)
    # each grader function's code and defaults, unless no function's code or defaults changed since the last read
    if code and _code_changes() != _CODE_READ[0] + 1:
        before = len(found)
        for fn, kept in list(_INSIDES.values()):
            was, defaults, kwdefaults = kept  # compared by identity: a default may be a tensor
            if fn.__code__ is not was or fn.__defaults__ is not defaults or fn.__kwdefaults__ is not kwdefaults:
                found.append(f"the code or defaults of {fn.__module__}.{fn.__qualname__} were changed")
                if repair:
                    fn.__code__, fn.__defaults__, fn.__kwdefaults__ = kept
        _CODE_READ[0] = _code_changes() if repair or len(found) == before else -10
    elif code:
        _CODE_READ[0] += 1  # the read above, with nothing changed
    own_fn, own_dispatch = _OWN_MODES["function"], _OWN_MODES["dispatch"]
    if _len_fn_stack() > own_fn or _len_dispatch_stack() > own_dispatch:
        modes = []
        while _len_fn_stack() > own_fn:
            modes.append(_type_name(_pop_fn_stack()) if repair else "a TorchFunctionMode")
            if not repair:
                break
        while _len_dispatch_stack() > own_dispatch:
            modes.append(_type_name(_pop_dispatch_stack(None)) if repair else "a TorchDispatchMode")
            if not repair:
                break
        found.append(f"a mode was left entered ({', '.join(modes)})")
    if not _fn_enabled():
        found.append("__torch_function__ handling was left disabled (DisableTorchFunction)")
    if not _grad_enabled():
        found.append("grad mode was left off (torch.set_grad_enabled(False) or no_grad().__enter__())")
        if repair:
            _set_grad_enabled(True)
    if _inference_enabled():
        found.append("inference mode was left on")
    if _get_default_dtype() is not _DEFAULT_DTYPE:
        found.append(f"the default dtype was changed to {_get_default_dtype()}")
        if repair:
            _set_default_dtype(_DEFAULT_DTYPE)
    _settings_tampering(found, repair, inside)
    return found


_MISSING = object()
# What `trusted.code_changes()` returned after the last full read of the grader functions' code found them as kept.
_CODE_READ = [-10]
# A class's attribute names at its last scan with no shadowing found: the scan is skipped while they stay the same.
_KEYS: dict[str, frozenset[str]] = {}
# Captured at import: the scan must not run through functions an answer can replace.
_all, _map, _is, _repeat = all, map, operator.is_, itertools.repeat


@contextlib.contextmanager
def clean() -> Iterator[None]:
    """Run the block with every torch function and dispatch mode cleared (restored afterwards)."""
    with _DisableTorchFunction(), _disable_modes():
        yield
