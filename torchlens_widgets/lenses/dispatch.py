"""The dispatch lens: every aten op one block of code runs, under the Python-level call it came from.

`with dispatch_trace() as tr:` stacks three recorders while the block runs:

* a `TorchDispatchMode` sees each aten op as it reaches the dispatcher's Python key, i.e. *after*
  autograd and after CompositeImplicitAutograd decompositions (`F.linear` arrives as `t` + `addmm`);
* a `TorchFunctionMode` sees the Python-level torch calls (`torch.add`, `Tensor.reshape`,
  `F.linear`, attribute reads such as `Tensor.shape`);
* global `nn.Module` forward hooks see module calls, so the calls form a tree:
  module → nested modules → torch call → aten ops.

What PyTorch lets a mode see, stated plainly:

* A `TorchFunctionMode` is switched off while its own handler runs, so it sees the *outermost*
  torch call only: `F.layer_norm`, not the `torch.layer_norm` it calls. Nesting between torch
  calls therefore comes from modules, never from torch functions calling each other.
* `TorchDispatchMode` is switched off (and torch functions are disabled) while its handler runs, so
  the kernels an op calls internally are not recorded, and the lens's own metadata reads
  (`t.shape`, `t.stride()`, `t.untyped_storage()`) dispatch nothing and record nothing.
* `torch._C._dispatch_keys(t)` is a property of the tensor (its key set), the same inside and
  outside the mode: e.g. `CPU, ADInplaceOrView, AutogradCPU, AutocastCPU` for a CPU tensor. Which
  keys *run* also depends on thread-local include/exclude sets; a call's `dispatch_path` is
  `(tensor keys | TLS include) - TLS exclude` read at the torch-function level, highest priority
  first. It contains `PythonTLSSnapshot` and `Python` because this trace is itself a dispatch mode
  (that is how the mode receives the ops). An op's `remaining` keys are the same formula read inside
  the dispatch handler: the keys still to run below Python (usually `BackendSelect` (always in the thread-local include set, skipped for non-factory ops) then the backend, e.g. `CPU`).
* `loss.backward()` inside the block is recorded: the autograd engine runs with the modes active,
  so the backward aten ops appear under the `Tensor.backward` call.

Per op the lens keeps only cheap metadata (no tensor references, no values), so tracing does not
keep activations alive.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .copies import COPY_OPS

__all__ = ["AtenOp", "DispatchTrace", "DispatchTraceError", "PyCall", "TensorMeta", "dispatch_trace"]

_Tensor = torch.Tensor
_dispatch_keys = torch._C._dispatch_keys
_tls_include = torch._C._dispatch_tls_local_include_set
_tls_exclude = torch._C._dispatch_tls_local_exclude_set
_KeySet = torch._C.DispatchKeySet
_NoTorchFunction = torch._C.DisableTorchFunction

Alias = Literal["fresh", "view", "inplace"]


class DispatchTraceError(RuntimeError):
    """Raised when a trace is used the wrong way (entered twice, read before it ended, bad argument)."""


@dataclass(frozen=True)
class TensorMeta:
    """One tensor argument or result of an op: its strided metadata (no values, no addresses)."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str
    device: str
    nbytes: int
    #: inputs: the tensor's dispatch key set, lowest priority first (as torch prints it); outputs: ().
    keys: tuple[str, ...] = ()
    #: outputs: "fresh" (new storage), "view" (shares an input's storage), "inplace" (is an input).
    alias: Alias | None = None
    #: outputs: index (into the op's inputs) of the input whose storage it shares, else None.
    alias_of: int | None = None
    #: "strided", or "sparse_coo", "sparse_csr", "nested", ...: then stride is () and, for nested, shape too;
    #: "symbolic" for a size with no example value (unbacked SymInt): shape and stride left out, see `note`.
    layout: str = "strided"
    #: what could not be described as asked (e.g. symbolic sizes shown at their example values), else None
    note: str | None = None


@dataclass(frozen=True)
class AtenOp:
    """One aten op that reached the dispatcher, with the innermost Python-level call around it."""

    index: int
    name: str  # qualified overload, e.g. "aten.add.Tensor"
    packet: str  # "aten.add"
    overload: str  # "Tensor" ("default" when the op has one overload)
    inputs: tuple[TensorMeta, ...]
    outputs: tuple[TensorMeta, ...]
    call: int | None  # index into DispatchTrace.calls, None when no Python-level call was active
    is_copy: bool  # clone / _to_copy / copy_ (torchlens_widgets.lenses.copies.COPY_OPS)
    keys: tuple[str, ...]  # union of the inputs' key sets, highest priority first
    remaining: tuple[str, ...]  # dispatch keys still to run below the Python key, highest first
    error: str | None = None  # exception type name if the op raised

    @property
    def is_view(self) -> bool:
        """True when every output shares storage with an input without being that input."""
        return bool(self.outputs) and all(o.alias == "view" for o in self.outputs)

    @property
    def is_inplace(self) -> bool:
        return any(o.alias == "inplace" for o in self.outputs)


@dataclass
class PyCall:
    """A Python-level call: an `nn.Module` call or an (outermost) torch function / Tensor method."""

    index: int
    kind: Literal["module", "function"]
    name: str
    parent: int | None
    depth: int
    start: int  # number of aten ops recorded before this call began (orders calls among ops)
    args: tuple[TensorMeta, ...] = ()  # tensor arguments (functions only; keys included)
    dispatch_path: tuple[str, ...] = ()  # keys the dispatcher walks for this call, highest first
    children: list[int] = field(default_factory=list)
    ops: list[int] = field(default_factory=list)  # aten ops recorded directly under this call

    def subtree_ops(self, trace: DispatchTrace) -> list[int]:
        """Every aten op under this call, nested calls included, in execution order."""
        out = list(self.ops)
        for c in self.children:
            out.extend(trace.calls[c].subtree_ops(trace))
        return sorted(out)


# -- hot path helpers: collect raw metadata only, format after the block ends ------------------------


def _raw_tensor(t: Any, with_keys: bool) -> tuple[Any, ...]:
    # Recording must never change what runs: unusual tensors (sparse, nested, storage-less subclasses,
    # subclasses whose properties raise) answer some of these questions with an error, which is recorded
    # as "unknown", never raised.
    try:
        sid = t.untyped_storage()._cdata
    except Exception:
        sid = None
    try:
        nested = bool(t.is_nested)
        kind = "nested" if nested else str(t.layout).replace("torch.", "")
    except Exception:
        nested, kind = False, "unknown"
    try:
        shape = None if nested else tuple(t.shape)  # a nested tensor has no single shape
    except Exception:
        shape = None
    try:
        stride = t.stride() if kind == "strided" else ()
    except Exception:
        stride = ()
    try:
        dtype, device = t.dtype, t.device
    except Exception:
        dtype, device = None, None
    try:
        keys = _dispatch_keys(t).raw_repr() if with_keys else 0
    except Exception:
        keys = 0
    return (shape, stride, dtype, device, sid, keys, kind)


def _raw_tensors(args: Any, kwargs: Any, with_keys: bool) -> list[tuple[Any, ...]]:
    out = []
    for a in args:
        if isinstance(a, _Tensor):
            out.append(_raw_tensor(a, with_keys))
        elif type(a) in (list, tuple):
            for b in a:
                if isinstance(b, _Tensor):
                    out.append(_raw_tensor(b, with_keys))
    if kwargs:
        for a in kwargs.values():
            if isinstance(a, _Tensor):
                out.append(_raw_tensor(a, with_keys))
    return out


def _tls_raw() -> tuple[int, int]:
    return _tls_include().raw_repr(), _tls_exclude().raw_repr()


class _OpRecorder(TorchDispatchMode):
    def __init__(self, trace: DispatchTrace) -> None:
        super().__init__()
        self.raw = trace._raw_ops
        self.stack = trace._stack

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        ins = _raw_tensors(args, kwargs, True)  # before the call: in-place ops may resize their input
        in_ids = [a for a in args if isinstance(a, _Tensor)]
        if kwargs:  # out= tensors: a result that *is* one of them was written in place
            in_ids.extend(a for a in kwargs.values() if isinstance(a, _Tensor))
        tls = _tls_raw()
        call = self.stack[-1] if self.stack else None
        try:
            out = func(*args, **kwargs) if kwargs else func(*args)
        except Exception as e:
            self.raw.append((func, ins, [], call, tls, type(e).__name__))
            raise
        outs = []
        if isinstance(out, _Tensor):
            outs.append((_raw_tensor(out, False), any(out is a for a in in_ids)))
        elif type(out) in (list, tuple):
            for o in out:
                if isinstance(o, _Tensor):
                    outs.append((_raw_tensor(o, False), any(o is a for a in in_ids)))
        self.raw.append((func, ins, outs, call, tls, None))
        return out


class _CallRecorder(TorchFunctionMode):
    def __init__(self, trace: DispatchTrace) -> None:
        super().__init__()
        self.trace = trace

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        tr = self.trace
        stack = tr._stack
        idx = len(tr._raw_calls)
        with _NoTorchFunction():  # an enclosing trace's call recorder must not see these reads
            raw = _raw_tensors(args, kwargs, True)
            tls = _tls_raw()
        tr._raw_calls.append(("function", func, stack[-1] if stack else None, len(tr._raw_ops), raw, tls))
        stack.append(idx)
        try:
            return func(*args, **(kwargs or {}))
        finally:
            _pop_to(stack, idx)


def _pop_to(stack: list[int], idx: int) -> None:
    """Pop `idx` (and anything an exception left above it) off the call stack."""
    while stack:
        if stack.pop() == idx:
            return


# -- formatting, done once per distinct value ---------------------------------------------------------

_KEY_NAMES: dict[int, tuple[str, ...]] = {}


def _key_names(raw: int) -> tuple[str, ...]:
    """Key names of a raw DispatchKeySet, lowest priority first (torch's own print order)."""
    names = _KEY_NAMES.get(raw)
    if names is None:
        text = str(_KeySet.from_raw_repr(raw))
        inner = text[text.find("(") + 1 : text.rfind(")")]
        names = tuple(n.strip() for n in inner.split(",") if n.strip())
        _KEY_NAMES[raw] = names
    return names


def _path(tensor_raw: int, tls: tuple[int, int]) -> tuple[str, ...]:
    """Keys the dispatcher would visit, highest priority first: (tensor keys | include) - exclude."""
    include, exclude = tls
    return tuple(reversed(_key_names((tensor_raw | include) & ~exclude)))


_DTYPE_NAMES: dict[torch.dtype, str] = {}


def _dtype_name(dtype: torch.dtype | None) -> str:
    if dtype is None:
        return "unknown"
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


_METAS: dict[tuple[Any, ...], TensorMeta] = {}


def _ints(dims: Any) -> tuple[tuple[int, ...], list[str]] | None:
    """Sizes or strides as ints, without adding guards to a ShapeEnv: a symbolic one (a FakeTensor under
    dynamic shapes) at its example value, listed as "s0=4"; None when one has no example value."""
    out: list[int] = []
    symbolic: list[str] = []
    for n in dims:
        if type(n) is int:
            out.append(n)
            continue
        node = getattr(n, "node", None)
        known = node.maybe_as_int() if node is not None and hasattr(node, "maybe_as_int") else None
        hint = known if known is not None else getattr(node, "hint", None)
        if not isinstance(hint, int):
            return None
        out.append(int(hint))
        if known is None:
            symbolic.append(f"{n}={hint}")
    return tuple(out), symbolic


def _meta(raw: tuple[Any, ...], keys: bool, alias: Alias | None = None, alias_of: int | None = None) -> TensorMeta:
    """TensorMeta of a raw record; equal records share one (frozen) instance, which keeps finishing cheap."""
    shape, stride, dtype, device, _sid, key_raw, kind = raw
    note = None
    if shape is not None and any(type(n) is not int for n in (*shape, *stride)):
        sizes, strides = _ints(shape), _ints(stride)
        if sizes is None or strides is None:
            note = f"symbolic shape {list(map(str, shape))} without example sizes: shape left out"
            shape, stride, kind = None, (), "symbolic"  # drawn as "symbolic float32", never as a 0-dim tensor
        else:
            (shape, sym), (stride, _) = sizes, strides
            note = f"symbolic sizes {', '.join(sym)}: shown at these example values" if sym else None
    cache_key = (shape, stride, dtype, device, key_raw if keys else None, alias, alias_of, kind, note)
    meta = _METAS.get(cache_key)
    if meta is None:
        known = shape is not None and kind == "strided" and dtype is not None
        meta = TensorMeta(
            tuple(shape or ()),
            tuple(stride),
            _dtype_name(dtype),
            str(device) if device is not None else "unknown",
            math.prod(shape) * dtype.itemsize if known else 0,
            _key_names(key_raw) if keys else (),
            alias,
            alias_of,
            kind,
            note,
        )
        if len(_METAS) < 100_000:
            _METAS[cache_key] = meta
    return meta


_FUNC_NAMES: dict[Any, str] = {}


def _func_name(func: Any) -> str:
    """Readable, stable name of what a TorchFunctionMode received ("Tensor.reshape", "torch.add")."""
    try:
        cached = _FUNC_NAMES.get(func)
    except TypeError:  # unhashable callable
        cached = None
    if cached is not None:
        return cached
    name = getattr(func, "__name__", None) or type(func).__name__
    owner = getattr(func, "__self__", None)
    if name in ("__get__", "__set__") and owner is not None and hasattr(owner, "__objclass__"):
        name = f"Tensor.{owner.__name__}" + (" =" if name == "__set__" else "")  # attribute read / write
    else:
        qual = getattr(func, "__qualname__", name)
        module = getattr(func, "__module__", None) or ""
        if qual.startswith(("TensorBase.", "Tensor.")) or module == "torch._tensor":
            name = "Tensor." + qual.split(".", 1)[-1]
        elif getattr(torch.nn.functional, name, None) is func:
            name = f"torch.nn.functional.{name}"
        elif getattr(torch, name, None) is func:
            name = f"torch.{name}"
        elif module:
            name = f"{module}.{qual}"
        else:
            name = qual
    try:
        _FUNC_NAMES[func] = name
    except TypeError:
        pass
    return name


# -- the trace -----------------------------------------------------------------------------------------


class DispatchTrace:
    """The recorded data: `ops` (aten ops, in order) and `calls` (Python-level calls, a tree)."""

    def __init__(self) -> None:
        self.ops: list[AtenOp] = []
        self.calls: list[PyCall] = []
        self.finished = False
        self._raw_ops: list[tuple[Any, ...]] = []
        self._raw_calls: list[tuple[Any, ...]] = []
        self._stack: list[int] = []

    # public views
    @property
    def roots(self) -> list[int]:
        """Indices of the calls with no enclosing call."""
        self._check_finished("roots")
        return [c.index for c in self.calls if c.parent is None]

    @property
    def copies(self) -> list[AtenOp]:
        """The ops that copied data (clone, _to_copy, copy_)."""
        self._check_finished("copies")
        return [op for op in self.ops if op.is_copy]

    def counts(self) -> Counter[str]:
        """How many times each qualified overload ran, e.g. Counter({"aten.t.default": 2, ...})."""
        self._check_finished("counts()")
        return Counter(op.name for op in self.ops)

    def ops_under(self, call: int) -> list[AtenOp]:
        """Every aten op under one call (nested calls included)."""
        self._check_finished("ops_under()")
        return [self.ops[i] for i in self.calls[call].subtree_ops(self)]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (schema `dispatch_trace` v1, see torchlens_widgets.render.dispatch)."""
        self._check_finished("to_dict()")

        def meta(m: TensorMeta) -> dict[str, Any]:
            d = asdict(m)
            d["shape"], d["stride"], d["keys"] = list(m.shape), list(m.stride), list(m.keys)
            if d["note"] is None:  # present only where something could not be described
                del d["note"]
            return d

        return {
            "kind": "dispatch_trace",
            "version": 1,
            "ops": [
                {
                    "index": op.index,
                    "name": op.name,
                    "packet": op.packet,
                    "overload": op.overload,
                    "call": op.call,
                    "copy": op.is_copy,
                    "view": op.is_view,
                    "inplace": op.is_inplace,
                    "error": op.error,
                    "keys": list(op.keys),
                    "remaining": list(op.remaining),
                    "inputs": [meta(m) for m in op.inputs],
                    "outputs": [meta(m) for m in op.outputs],
                }
                for op in self.ops
            ],
            "calls": [
                {
                    "index": c.index,
                    "kind": c.kind,
                    "name": c.name,
                    "parent": c.parent,
                    "depth": c.depth,
                    "start": c.start,
                    "children": list(c.children),
                    "ops": list(c.ops),
                    "dispatch_path": list(c.dispatch_path),
                    "args": [meta(m) for m in c.args],
                }
                for c in self.calls
            ],
        }

    def __getattr__(self, name: str) -> Any:
        # the lens draws nothing: its pictures and text live in render/ and widgets/
        if name in ("show", "summary"):
            where = ("torchlens_widgets.dispatch_widget(tr)" if name == "show"
                     else "print(torchlens_widgets.render.dispatch.dispatch_summary(tr))")
            raise AttributeError(f"a DispatchTrace holds data only; for its {name} use {where}")
        raise AttributeError(f"'DispatchTrace' object has no attribute {name!r}")

    def __repr__(self) -> str:
        if not self.finished:
            return "<DispatchTrace: recording>"
        n_copies = len(self.copies)
        return f"<DispatchTrace: {len(self.ops)} aten ops ({n_copies} cop{'y' if n_copies == 1 else 'ies'}) under {len(self.calls)} Python calls>"

    def _check_finished(self, what: str) -> None:
        if not self.finished:
            raise DispatchTraceError(f"read {what} after the `with dispatch_trace() as tr:` block has ended")

    # turning raw records into dataclasses, once, after the block
    def _finish(self, module_names: dict[int, str]) -> None:
        calls: list[PyCall] = []
        for idx, (kind, what, parent, start, raw_args, tls) in enumerate(self._raw_calls):
            depth = 0 if parent is None else calls[parent].depth + 1
            if kind == "module":
                path = module_names.get(id(what[0]))
                name = f"{path} ({what[1]})" if path else what[1]
                call = PyCall(idx, "module", name, parent, depth, start)
            else:
                key_raw = 0
                for r in raw_args:
                    key_raw |= r[5]
                call = PyCall(
                    idx,
                    "function",
                    _func_name(what),
                    parent,
                    depth,
                    start,
                    args=tuple(_meta(r, True) for r in raw_args),
                    dispatch_path=_path(key_raw, tls),
                )
            calls.append(call)
            if parent is not None:
                calls[parent].children.append(idx)
        ops: list[AtenOp] = []
        for idx, (func, ins, outs, call, tls, error) in enumerate(self._raw_ops):
            in_sids = [r[4] for r in ins]
            in_metas = tuple(_meta(r, True) for r in ins)
            key_raw = 0
            for r in ins:
                key_raw |= r[5]
            out_metas = []
            for raw, is_input in outs:
                sid = raw[4]
                alias_of = in_sids.index(sid) if sid is not None and sid in in_sids else None
                alias: Alias = "inplace" if is_input else ("view" if alias_of is not None else "fresh")
                out_metas.append(_meta(raw, False, alias, alias_of))
            schema_name = func._schema.name
            packet = schema_name.replace("::", ".")
            overload = func._overloadname
            ops.append(
                AtenOp(
                    index=idx,
                    name=f"{packet}.{overload}",
                    packet=packet,
                    overload=overload,
                    inputs=in_metas,
                    outputs=tuple(out_metas),
                    call=call,
                    is_copy=schema_name in COPY_OPS,
                    keys=tuple(reversed(_key_names(key_raw))),
                    remaining=_path(key_raw, tls),
                    error=error,
                )
            )
            if call is not None:
                calls[call].ops.append(idx)
        self.ops, self.calls = ops, calls
        self._raw_ops, self._raw_calls = [], []
        self.finished = True


class dispatch_trace:
    """`with dispatch_trace() as tr:` records the aten ops and Python-level calls of the block.

    model: optional root `nn.Module`, used only to name module calls by their path ("blocks.0.attn").
    modules: record `nn.Module` calls (global forward hooks) so calls nest module → torch call → ops.
    """

    def __init__(self, model: torch.nn.Module | None = None, *, modules: bool = True) -> None:
        if model is not None and not isinstance(model, torch.nn.Module):
            raise DispatchTraceError(
                f"dispatch_trace(model) takes an nn.Module (used to name module calls), got {type(model).__name__}; "
                "call it as `with dispatch_trace() as tr:` or `with dispatch_trace(my_model) as tr:`"
            )
        self.trace = DispatchTrace()
        self._model = model
        self._modules = modules
        self._entered = False
        self._op_mode = _OpRecorder(self.trace)
        self._call_mode = _CallRecorder(self.trace)
        self._hooks: list[Any] = []

    def __enter__(self) -> DispatchTrace:
        if self._entered:
            raise DispatchTraceError("this dispatch_trace was already used; create a new one for each `with` block")
        self._entered = True
        tr = self.trace
        self._op_mode.__enter__()
        try:
            self._call_mode.__enter__()
        except BaseException:
            self._op_mode.__exit__(None, None, None)
            raise
        if self._modules:
            from torch.nn.modules import module as nn_module

            def pre(mod: torch.nn.Module, args: Any) -> None:
                stack = tr._stack
                tr._raw_calls.append(("module", (mod, type(mod).__name__), stack[-1] if stack else None, len(tr._raw_ops), (), None))
                stack.append(len(tr._raw_calls) - 1)
                mod_stack.append(len(tr._raw_calls) - 1)

            def post(mod: torch.nn.Module, args: Any, out: Any) -> None:
                if mod_stack:
                    _pop_to(tr._stack, mod_stack.pop())

            mod_stack: list[int] = []
            self._hooks = [
                nn_module.register_module_forward_pre_hook(pre),
                nn_module.register_module_forward_hook(post, always_call=True),
            ]
        return tr

    def __exit__(self, *exc: object) -> None:
        try:
            for h in self._hooks:
                h.remove()
            self._hooks = []
        finally:
            try:
                self._call_mode.__exit__(None, None, None)
            finally:
                self._op_mode.__exit__(None, None, None)
                self._finish(user_error=exc[0] is not None)

    def _finish(self, user_error: bool) -> None:
        """Turn the raw records into data; a failure there is the lens's own fault, never the user's code's."""
        try:
            names: dict[int, str] = {}
            if self._model is not None:
                names = {id(m): n for n, m in self._model.named_modules()}
            self.trace._finish(names)
        except Exception as e:
            self.trace.ops, self.trace.calls, self.trace.finished = [], [], True
            if user_error:  # the block's own exception is what the user must see; it propagates unchanged
                return
            raise DispatchTraceError(
                f"the block ran, but its trace could not be described ({type(e).__name__}: {e}); "
                "record a smaller block, or report this with the code that caused it."
            ) from e
