"""What `torch.autocast` did to each operation of a function, as data, and how float16 / bfloat16 hold values.

Two modes record a run: a TorchFunctionMode sees each call as written (`F.linear`, `torch.cat`) with the
dtypes it was given; a TorchDispatchMode, which sits below autocast, sees the casts autocast inserted and
the dtypes the kernels really ran in. A call's autocast list is then found by probing the same call under
the same autocast with its floating inputs all in the low dtype, all in float32, and mixed:
- lower precision: float32 inputs are cast down;
- float32: low-precision inputs are cast up;
- promote: mixed inputs are cast to the widest; matching inputs are left alone;
- unlisted: autocast leaves the call alone (it runs in whatever dtype its inputs have);
- not probed: the call's inputs are too big to copy for a probe (PROBE_MAX_BYTES); probe it on smaller ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

__all__ = ["AutocastCall", "AutocastError", "AutocastTrace", "DtypeRun", "ValueProbe", "autocast_trace", "dtypes_ran",
           "probe_values"]

POLICIES = ("lower precision", "float32", "promote", "unlisted", "not probed")
# A probe copies the call's tensors (an expanded 1-element tensor becomes its full size): past this, no probe
PROBE_MAX_BYTES = 256 * 2**20
_LOW = {"bfloat16": torch.bfloat16, "float16": torch.float16}
# explicit conversions the user wrote: their casts are the user's, not autocast's
_USER_CASTS = {"to", "type", "float", "double", "half", "bfloat16", "__get__"}


class AutocastError(ValueError):
    """A function, device or dtype the autocast lens cannot trace, with what to do instead."""


@dataclass(frozen=True)
class AutocastCall:
    """One call as written, under autocast: its dtypes in and out, the casts autocast made, its list."""

    index: int
    name: str  # the call as written: "linear", "cat", "Tensor.relu"
    inputs: tuple[str, ...]  # dtypes of its floating tensor inputs, as given
    outputs: tuple[str, ...]  # dtypes of its tensor outputs
    ran_as: tuple[str, ...]  # the aten ops that ran for it, with the dtype each ran in ("addmm: bfloat16")
    casts: tuple[str, ...]  # casts autocast inserted for it ("float32 -> bfloat16")
    policy: str  # one of POLICIES

    @property
    def cast(self) -> bool:
        return bool(self.casts)


@dataclass(frozen=True)
class AutocastTrace:
    """Every call of one run under autocast, in order."""

    function: str
    device: str
    dtype: str
    calls: tuple[AutocastCall, ...]

    @property
    def cast_count(self) -> int:
        return sum(len(c.casts) for c in self.calls)

    def call(self, name: str, nth: int = 0) -> AutocastCall:
        """The nth call named `name` ("linear", "Tensor.relu")."""
        found = [c for c in self.calls if c.name == name]
        if nth >= len(found):
            raise KeyError(f"no call {name!r} number {nth}; the calls are {[c.name for c in self.calls]}")
        return found[nth]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for c, call in zip(d["calls"], self.calls):
            c["cast"] = call.cast
        d["cast_count"] = self.cast_count
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AutocastTrace:
        """The trace `to_dict` wrote (a recorded one, say), rebuilt: `cast` and `cast_count` are recomputed."""
        calls = tuple(AutocastCall(index=int(c["index"]), name=str(c["name"]), inputs=tuple(c["inputs"]),
                                   outputs=tuple(c["outputs"]), ran_as=tuple(c["ran_as"]), casts=tuple(c["casts"]),
                                   policy=str(c["policy"])) for c in d["calls"])
        return cls(function=str(d["function"]), device=str(d["device"]), dtype=str(d["dtype"]), calls=calls)

    def summary(self) -> str:
        lines = [f"{self.function} under autocast({self.device}, {self.dtype}): {len(self.calls)} call(s), "
                 f"{self.cast_count} cast(s) inserted"]
        for c in self.calls:
            cast = f"  casts {', '.join(c.casts)}" if c.casts else ""
            lines.append(f"  {c.name}: {', '.join(c.inputs) or '-'} -> {', '.join(c.outputs) or '-'} "
                         f"[{c.policy}]{cast}")
        return "\n".join(lines)


def _name(func: Any) -> str:
    name = getattr(func, "__name__", None) or str(func)
    if name == "__get__":  # a property such as x.T
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    qual = getattr(func, "__qualname__", "") or ""
    return f"Tensor.{name}" if qual.startswith(("TensorBase.", "Tensor.", "_TensorBase.")) else name


def _dtypes(tree: Any) -> tuple[str, ...]:
    return tuple(str(t.dtype).removeprefix("torch.") for t in tree_leaves(tree)
                 if isinstance(t, torch.Tensor) and t.is_floating_point())


class _Runs(TorchDispatchMode):
    """Below autocast: every aten op with the dtype it ran in, and each cast (`_to_copy` of dtype)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, str | None, str | None]] = []  # (op, ran in dtype, cast "a -> b" or None)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        ins = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor) and t.is_floating_point()]
        outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()]
        cast = None
        if name == "_to_copy" and ins and outs and ins[0].dtype != outs[0].dtype:
            cast = f"{str(ins[0].dtype).removeprefix('torch.')} -> {str(outs[0].dtype).removeprefix('torch.')}"
        ran = str((outs or ins)[0].dtype).removeprefix("torch.") if (outs or ins) else None
        self.ops.append((name, ran, cast))
        return out


class _Calls(TorchFunctionMode):
    """Above autocast: each top-level call as written, with the aten ops (and casts) that ran under it."""

    def __init__(self, runs: _Runs) -> None:
        super().__init__()
        self.runs = runs
        self.depth = 0
        self.calls: list[tuple[Any, Any, Any, Any, list[tuple[str, str | None, str | None]]]] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.depth:
            return func(*args, **kwargs)
        start = len(self.runs.ops)
        self.depth += 1
        try:
            out = func(*args, **kwargs)
        finally:
            self.depth -= 1
        self.calls.append((func, args, kwargs, out, self.runs.ops[start:]))
        return out


def _with_floats(args: Any, kwargs: Any, dtypes: Callable[[int], torch.dtype]) -> tuple[Any, Any]:
    """A copy of the call's arguments with the i-th floating tensor converted to dtypes(i)."""
    counter = [0]

    def convert(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            i = counter[0]
            counter[0] += 1
            return t.detach().to(dtypes(i)).clone()
        if isinstance(t, torch.Tensor):
            return t.detach().clone()
        return t

    return tree_map(convert, args), tree_map(convert, kwargs)


def _probe(func: Any, args: Any, kwargs: Any, device: str, low: torch.dtype,
           dtypes: Callable[[int], torch.dtype]) -> tuple[list[str], tuple[str, ...]] | None:
    """Run the call under autocast with converted inputs: (casts autocast made, output dtypes), None if it fails."""
    a, k = _with_floats(args, kwargs, dtypes)
    runs = _Runs()
    try:  # the random state is put back: probing dropout must not change what the learner's run draws next
        with torch.random.fork_rng(devices=[]), torch.no_grad(), torch.autocast(device, dtype=low), runs:
            out = func(*a, **k)
    except Exception:  # a call that cannot take these dtypes (an int index, a dtype= argument): no verdict
        return None
    return [c for _, _, c in runs.ops if c], _dtypes(out)


def _probe_bytes(args: Any, kwargs: Any) -> int:
    """What a probe's copies of the call's tensors take (float32 at most per element: a copy is dense)."""
    return sum(t.numel() * max(t.element_size(), 4) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor))


def _policy(func: Any, args: Any, kwargs: Any, device: str, low: torch.dtype, floats: int) -> str:
    lowname = str(low).removeprefix("torch.")
    if floats == 0:
        return "unlisted"
    if _probe_bytes(args, kwargs) > PROBE_MAX_BYTES:
        return "not probed"
    all_low = _probe(func, args, kwargs, device, low, lambda i: low)
    all_f32 = _probe(func, args, kwargs, device, low, lambda i: torch.float32)
    if all_f32 is not None and any(c == f"float32 -> {lowname}" for c in all_f32[0]):
        return "lower precision"
    if all_low is not None and any(c == f"{lowname} -> float32" for c in all_low[0]):
        return "float32"
    if floats >= 2:
        mixed = _probe(func, args, kwargs, device, low, lambda i: low if i == 0 else torch.float32)
        if mixed is not None and any(c == f"{lowname} -> float32" for c in mixed[0]):
            return "promote"
    return "unlisted"


def autocast_trace(fn: Callable[..., Any], *args: Any, device_type: str = "cpu",
                   dtype: torch.dtype = torch.bfloat16) -> AutocastTrace:
    """Run fn(*args) under torch.autocast(device_type, dtype) and report every call with its dtypes, the casts
    autocast inserted for it, and its autocast list (found by probing each call; see the module docstring)."""
    if not callable(fn):
        raise AutocastError(f"give a function and its inputs, not {type(fn).__name__}")
    if device_type not in ("cpu", "cuda"):
        raise AutocastError(f"device_type={device_type!r}: the lens traces 'cpu' (bfloat16 or float16) or 'cuda'")
    if device_type == "cuda" and not torch.cuda.is_available():
        raise AutocastError("device_type='cuda' needs a GPU, and torch sees none here: use device_type='cpu' "
                            "(autocast on a CPU lowers to bfloat16)")
    if dtype not in _LOW.values():
        raise AutocastError(f"dtype={dtype}: autocast lowers to torch.bfloat16 or torch.float16")
    runs = _Runs()
    calls = _Calls(runs)
    with torch.autocast(device_type, dtype=dtype), calls, runs:
        fn(*args)
    out: list[AutocastCall] = []
    policies: dict[tuple[str, int], str] = {}  # an op's list does not depend on its values: probe it once
    for func, a, k, result, ops in calls.calls:
        name = _name(func)
        user_cast = name.removeprefix("Tensor.") in _USER_CASTS
        casts = () if user_cast else tuple(c for _, _, c in ops if c)
        ran = tuple(f"{op}: {d}" for op, d, c in ops if c is None and d is not None)
        floats = len(_dtypes((a, k)))
        if user_cast:
            policy = "unlisted"
        elif (name, floats) in policies:
            policy = policies[name, floats]
        else:
            policy = policies[name, floats] = _policy(func, a, k, device_type, dtype, floats)
        out.append(AutocastCall(index=len(out), name=name, inputs=_dtypes((a, k)), outputs=_dtypes(result),
                                ran_as=ran, casts=casts, policy=policy))
    fname = getattr(fn, "__qualname__", None) or type(fn).__name__
    return AutocastTrace(function=fname, device=device_type, dtype=str(dtype).removeprefix("torch."),
                         calls=tuple(out))


@dataclass(frozen=True)
class DtypeRun:
    """Every aten op one call ran (backward included, when the call runs it), in order, with its dtype."""

    ops: tuple[tuple[str, str], ...]  # (aten op, floating dtype it ran in), casts left out
    casts: tuple[str, ...]  # every dtype conversion that ran ("float32 -> bfloat16"), whoever asked for it
    result: Any = field(repr=False, compare=False, default=None)

    def ran_in(self, dtype: str) -> tuple[str, ...]:
        """The ops that ran in `dtype` ("bfloat16"), views and copies included."""
        return tuple(op for op, d in self.ops if d == dtype)


def dtypes_ran(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> DtypeRun:
    """Call fn(*args, **kwargs) as it is (under whatever autocast is on) and record the dtype every aten op ran
    in: where autocast is in force, this is what it really computed in, forward and backward alike."""
    if not callable(fn):
        raise AutocastError(f"give a function and its inputs, not {type(fn).__name__}")
    runs = _Runs()
    with runs:
        result = fn(*args, **kwargs)
    return DtypeRun(ops=tuple((op, d) for op, d, c in runs.ops if c is None and d is not None),
                    casts=tuple(c for _, _, c in runs.ops if c), result=result)


@dataclass(frozen=True)
class ValueProbe:
    """One value stored in a low-precision dtype: what comes back, and what happened to it."""

    value: float
    stored: float
    relative_error: float  # |stored - value| / |value| (0 for 0; inf when the value was lost)
    outcome: str  # "exact", "rounded", "subnormal" (precision lost), "underflow" (became 0), "overflow" (inf),
    # "saturated" (out of range, clamped to the largest finite value: float8_e4m3fn has no infinity), "not a number"


_PROBED = (torch.float16, torch.bfloat16, torch.float32, torch.float8_e4m3fn, torch.float8_e5m2)


def probe_values(values: Sequence[float], dtype: torch.dtype) -> tuple[ValueProbe, ...]:
    """Store each value in `dtype` (float16, bfloat16, float32, float8_e4m3fn, float8_e5m2) and say what comes back:
    rounded, subnormal, flushed to zero, overflowed to infinity, or saturated at the largest finite value."""
    if dtype not in _PROBED:
        raise AutocastError(f"dtype={dtype}: probe float16, bfloat16 or float32 (or float8_e4m3fn, float8_e5m2)")
    info = torch.finfo(dtype)
    # beyond this a value is out of range: rounding to nearest would need the step above the largest finite value
    edge = info.max + 2.0 ** math.floor(math.log2(info.max)) * info.eps / 2
    try:
        floats = [float(v) for v in values]
    except (OverflowError, TypeError, ValueError) as exc:  # 10**400 does not fit a float64 either
        raise AutocastError(f"probe_values: give numbers that fit a float64 ({type(exc).__name__}: {exc})") from None
    exact = torch.tensor(floats, dtype=torch.float64)
    stored = exact.to(dtype).to(torch.float64)
    out = []
    for v, s in zip(exact.tolist(), stored.tolist()):
        if math.isnan(v):
            outcome, err = "not a number", 0.0  # NaN is stored as NaN in every floating dtype
        elif math.isinf(s) and not math.isinf(v):
            outcome, err = "overflow", math.inf
        elif abs(s) == info.max and abs(v) > edge:
            outcome, err = "saturated", math.inf if math.isinf(v) else abs(s - v) / abs(v)
        elif s == 0 and v != 0:
            outcome, err = "underflow", math.inf if v else 0.0
        elif s == v:
            outcome, err = "exact", 0.0
        else:
            outcome = "subnormal" if 0 < abs(s) < info.smallest_normal else "rounded"
            err = abs(s - v) / abs(v) if v else 0.0
        out.append(ValueProbe(value=v, stored=s, relative_error=err, outcome=outcome))
    return tuple(out)
