"""Notebook 09 (C++ extensions): a ReLU written as a loop, TORCH_CHECKs that refuse bad input, and row maxima
read through an accessor.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). The answer is the learner's C++ source: `c.build` compiles it
in a subprocess (a crash on the visible inputs is caught there) and loads it under a namespace of its own.

What a kernel ran is read twice. Every call the check makes runs under torch's profiler, which sees the aten ops
a C++ kernel calls through the dispatcher (a dispatch mode would not); and the compiled library's imported symbols
say which functions its code can call at all, on any input and any thread: an ATen op called past the dispatcher
(`at::cpu::clamp_min`, `at::_ops::amax::redispatch`), which no recorder sees, or an op kept for the inputs the
check does not try.
"""

from __future__ import annotations

import importlib
import os
import re
import struct
from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch
from torch.autograd import profiler_legacy

from ..integrity import clean
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["input_checks", "relu_loop", "row_max"]

# captured when the package is imported
_open = open
_PROFILE = profiler_legacy.profile
_RANDOM = MappingProxyType({"randn": torch.randn, "rand": torch.rand})
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _torch_made(f: Any) -> bool:
    code = getattr(getattr(f, "__func__", f), "__code__", None)
    return code is not None and code.co_filename.startswith(_TORCH_DIR)


def _recorder() -> Any:
    """torch's legacy profiler (it sees the aten ops inside C++ kernels), from torch's own file: reloaded from there
    if the one captured at import was not torch's (an answer cell ran before the checks were first imported)."""
    if all(_torch_made(getattr(_PROFILE, n, None)) for n in ("__init__", "__enter__", "__exit__", "_start_trace")):
        return _PROFILE
    return importlib.reload(profiler_legacy).profile


def _draw(seed: int, draws: Sequence[tuple[str, tuple[int, ...]]], k: int) -> torch.Tensor:
    """The k-th of a sequence of draws ("randn" or "rand", shape) from one generator seeded `seed` (the earlier
    draws are replayed), as the test cells drew them in turn."""
    gen = torch.Generator().manual_seed(seed)
    for kind, shape in draws[:k]:
        _RANDOM[kind](shape, generator=gen)
    kind, shape = draws[k]
    return _RANDOM[kind](shape, generator=gen)


# --- what a compiled library calls --------------------------------------------------------------------------------

def _imported_symbols(path: str) -> tuple[str, ...] | None:
    """The undefined dynamic symbols of an ELF64 little-endian shared library: the functions its code calls in other
    libraries (None for another file format)."""
    with _open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 11:  # SHT_DYNSYM
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, entsize or 24):
            name, _, _, section = struct.unpack_from("<IBBH", data, at)
            if name and section == 0:  # SHN_UNDEF: defined elsewhere
                start = strings + name
                names.append(data[start:data.index(b"\0", start)].decode(errors="replace"))
    return tuple(names)


def _nested_name(symbol: str) -> list[str]:
    """The qualified name of a mangled C++ function, as parts: `_ZN2at3cpu9clamp_minE...` -> at, cpu, clamp_min."""
    m = re.match(r"_ZN[rVKRO]*", symbol)
    if not m:
        return []
    i, parts = m.end(), []
    while i < len(symbol):
        if symbol.startswith("St", i):
            parts.append("std")
            i += 2
            continue
        digits = re.match(r"\d+", symbol[i:])
        if not digits:
            break
        n, i = int(digits.group()), i + digits.end()
        parts.append(symbol[i:i + n])
        i += n
    return parts


def _struct_names(ops: Iterable[str]) -> frozenset[str]:
    """The names of the `at::_ops` structs for these aten ops, every overload ("empty" -> empty_memory_format, ...)."""
    out = set()
    for op in ops:
        name = op.removeprefix("aten::")
        out.add(name)
        packet = getattr(torch.ops.aten, name, None)
        for overload in packet.overloads() if packet is not None else ():
            if overload != "default":
                out.add(f"{name}_{overload}")
    return frozenset(out)


def _aten_name(struct_name: str) -> str:
    """aten::relu for at::_ops::relu, aten::add.Tensor for at::_ops::add_Tensor."""
    parts = struct_name.split("_")
    for k in range(len(parts), 0, -1):
        name, overload = "_".join(parts[:k]), "_".join(parts[k:])
        if not name:
            continue
        packet = getattr(torch.ops.aten, name, None)
        if packet is not None and (not overload or overload in packet.overloads()):
            return f"aten::{name}" + (f".{overload}" if overload else "")
    return f"at::_ops::{struct_name}"


_PAST_THE_DISPATCHER = ("cpu", "native", "meta")


def _library_calls(path: str | None, allowed: frozenset[str]) -> tuple[list[str], list[str]]:
    """(aten ops outside `allowed` the library calls through the dispatcher, calls that go around it)."""
    symbols = _imported_symbols(path) if path else None
    ops: list[str] = []
    around: list[str] = []
    for symbol in symbols or ():
        parts = _nested_name(symbol)
        if parts[:2] == ["at", "_ops"] and len(parts) >= 4:
            if parts[3] == "redispatch":
                around.append(f"at::_ops::{parts[2]}::redispatch")
            elif parts[3] == "call" and parts[2] not in allowed:
                ops.append(_aten_name(parts[2]))
        elif len(parts) >= 3 and parts[0] == "at" and (parts[1] in _PAST_THE_DISPATCHER
                                                       or parts[1].startswith("composite")):
            around.append("::".join(parts[:3]))
        elif parts[:2] in (["c10", "Dispatcher"], ["c10", "OperatorHandle"]) or parts[:3] == ["c10", "impl",
                                                                                            "OperatorEntry"]:
            around.append("::".join(parts[:3]))
        elif symbol in ("dlsym", "dlvsym", "dlopen", "dlmopen"):
            around.append(f"{symbol} (a function looked up at run time)")
        elif symbol.startswith(("Py", "_Py")):
            around.append(f"{symbol} (Python's C API)")
    return sorted(set(ops)), sorted(set(around))


def _only_allowed_calls(c: Check, fn: str, report: Any, allowed: frozenset[str], rule: str, hint: Sequence[str]) -> None:
    ops, around = _library_calls(getattr(report, "library", None), _struct_names(allowed))
    c.that(not around, f"{fn}'s compiled code calls {', '.join(around)}: ATen's work done past the dispatcher, where "
           f"no recorder sees it; {rule}", hint)
    c.that(not ops, f"{fn}'s compiled code calls {', '.join(ops)}: {rule}", hint)


def _recorded_call(c: Check, op: Any, event: str, args: tuple[Any, ...], what: str, secret: bool,
                   hint: Sequence[str]) -> tuple[Any, set[str]]:
    """op(*args) under the profiler: its result and the aten ops it ran, inside C++ too. The op's own event must be
    there (else something switched the recorder off)."""
    c.that(True, "")  # the guard: torch as imported, no modes left on
    try:
        with _recorder()() as prof:
            out = op(*args)
    except Exception as exc:  # a TORCH_CHECK of its own, or another error, on an input it must take
        said = type(exc).__name__ if secret else f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        c.fail(f"{what} raised {said}; it must accept this input", hint)
    names = [ev.name for ev in prof.function_events]
    c.that(event in names, f"the check's profiler did not see {what} run: something in this kernel switched torch's "
           "profiler off or replaced it. Remove that line (or restart the kernel), then run this check again.")
    return out, {n for n in names if n.startswith("aten::")}


def _same(c: Check, got: Any, expected: torch.Tensor, what: str, secret: bool, hint: Sequence[str]) -> None:
    """`got` equals `expected` exactly. A visible case's mismatch names how many values differ and the first (index,
    both values); a hidden case's dtype and shape are checked without printing them, and its values are not shown."""
    got = c.tensor(got, what)
    if secret:
        c.that(got.dtype == expected.dtype, f"{what}: the dtype is not right ({str(got.dtype).replace('torch.', '')})",
               hint)
        c.that(tuple(got.shape) == tuple(expected.shape), f"{what}: the shape is not right", hint)
    elif got.dtype == expected.dtype and tuple(got.shape) == tuple(expected.shape):
        c.that(True, "")  # the guard
        with clean():
            differ = got.detach().ne(expected.detach())
            count = int(differ.sum())
            if count:
                first = tuple(int(i) for i in differ.nonzero()[0])
                e, g = expected[first].item(), got[first].item()
        if count:
            where = f" at index {list(first)}" if first else ""
            c.fail(f"{what}: {count} of {got.numel()} values differ; the first{where}: expected {e:.6g}, got {g:.6g}",
                   hint)
    c.equal(got, expected, what=what, hint=hint)


# --- 09-relu-loop -------------------------------------------------------------------------------------------------

RELU_HINTS = (
    "read the input through x.contiguous() (a copy only when needed), allocate with at::empty_like, then write each "
    "element of the result from the same element of the input",
    "a transposed or sliced input is not laid out element after element: data_ptr<float>()[i] is element i only "
    "after .contiguous(); and never write into the input",
)
RELU_ALLOWED = frozenset({"aten::empty_like", "aten::empty", "aten::empty_strided", "aten::contiguous", "aten::clone",
                          "aten::copy_", "aten::resolve_conj", "aten::resolve_neg"})
RELU_RULE = "write the max(x, 0) loop yourself; only allocation and layout ops are allowed"
RELU_PROBE = "OPS.relu_loop(torch.randn(5)); OPS.relu_loop(torch.randn(3, 4).t()); OPS.relu_loop(torch.empty(0))"
# one generator, seeded 9, draws these in turn (the notebook's order: visible first, then hidden)
RELU_DRAWS = (("randn", (7,)), ("randn", (4, 6)), ("randn", (2, 8)), ("randn", (64,)), ("randn", (300_000,)),
              ("randn", (10,)))
RELU_CASES = MappingProxyType({
    "a 1-D tensor": lambda: _draw(9, RELU_DRAWS, 0),
    "a transposed tensor": lambda: _draw(9, RELU_DRAWS, 1).t(),
    "every other column": lambda: _draw(9, RELU_DRAWS, 2)[:, ::2],
    "an empty tensor": lambda: torch.empty(0),
    "64 values": lambda: _draw(9, RELU_DRAWS, 3),
    "300,000 values": lambda: _draw(9, RELU_DRAWS, 4),
    "a view with a storage offset": lambda: _draw(9, RELU_DRAWS, 5)[3:],
    "a 0-d tensor": lambda: torch.tensor(-2.0),
})
RELU_VISIBLE = ("a 1-D tensor", "a transposed tensor", "every other column", "an empty tensor", "64 values")


def relu_loop(c: Check, source: Any, hidden: Iterable[str] | None = None) -> None:
    """`RELU_SOURCE`: `relu_loop(x)` returns a new float32 tensor max(x, 0) for any float32 CPU tensor (strided,
    empty, 0-d), leaves x alone, and runs no aten op but allocation and layout ones: on every call (profiled) and in
    its compiled code (imported symbols). Hidden cases are named `RELU_CASES`."""
    secret = hidden is not None
    report = c.build("relu_loop", source, register={"relu_loop": "relu_loop(Tensor x) -> Tensor"}, hint=RELU_HINTS,
                     probe=None if secret else RELU_PROBE)
    _only_allowed_calls(c, "relu_loop", report, RELU_ALLOWED, RELU_RULE, RELU_HINTS)
    op, event = c.ops.relu_loop, f"{c.ops.name}::relu_loop"
    for label, name in named(hidden, RELU_VISIBLE, lambda name: name):
        x = RELU_CASES[name]()
        what = f"relu_loop({label})"
        before = x.clone()
        got, ran = _recorded_call(c, op, event, (x,), what, secret, RELU_HINTS)
        _same(c, x, before, f"the input after {what} (it must stay unchanged)", secret, RELU_HINTS)
        _same(c, got, torch.relu(before), what, secret, RELU_HINTS)
        if x.numel():
            c.shares_storage(got, x, expected=False, what=f"{what} and its input", hint=RELU_HINTS)
        c.that(ran <= RELU_ALLOWED, f"{what} ran {', '.join(sorted(ran - RELU_ALLOWED))}: {RELU_RULE}", RELU_HINTS)


# --- 09-input-checks ----------------------------------------------------------------------------------------------

SCALE_HINTS = (
    "one TORCH_CHECK per rule, before anything reads memory: the dtype (x.scalar_type() == at::kFloat), the device "
    "(x.device().is_cpu()), the layout (x.is_contiguous())",
    "TORCH_CHECK(condition, \"scale: expected ...\", more parts...) puts every part into the message; say what was "
    "expected in the words the exercise asks for, and refuse nothing else",
)
SCALE_PROBE = "OPS.scale(torch.ones(3), 2.0)"


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


# name -> ("scales", the arguments, ()) | ("refuses", the arguments, words its message must hold)
SCALE_CASES = MappingProxyType({
    "scale(a 3x4 float32 tensor, 2.0)": ("scales", lambda: (_randn(3, 4, seed=1), 2.0), ()),
    "an int64 tensor": ("refuses", lambda: (torch.ones(3, dtype=torch.int64), 2.0), ("float32",)),
    "a meta tensor": ("refuses", lambda: (torch.ones(3, device="meta"), 2.0), ("CPU",)),
    "a transposed tensor": ("refuses", lambda: (_randn(4, 3, seed=2).t(), 2.0), ("contiguous",)),
    "a float64 tensor": ("refuses", lambda: (torch.ones(3, dtype=torch.float64), 2.0), ("float32",)),
    "every other column": ("refuses", lambda: (_randn(2, 6, seed=3)[:, ::2], 2.0), ("contiguous",)),
    "scale(an empty tensor, 3.0)": ("scales", lambda: (torch.empty(0, 5), 3.0), ()),
    "scale(a contiguous view at an offset, -1.5)": ("scales", lambda: (_randn(10, seed=4)[4:], -1.5), ()),
    "scale(a 0-d tensor, 4.0)": ("scales", lambda: (torch.tensor(2.0), 4.0), ()),
})
SCALE_VISIBLE = ("scale(a 3x4 float32 tensor, 2.0)", "an int64 tensor", "a meta tensor", "a transposed tensor")


def _refused(c: Check, op: Any, args: tuple[Any, ...], says: Sequence[str], label: str, secret: bool) -> None:
    """A hidden input must be refused like a visible one; the feedback names neither the input nor the words (the
    learner's message can hold the input's dtype or shape)."""
    if not secret:
        c.rejects(op, *args, says=says, what=label, hint=SCALE_HINTS)
        return
    c.that(True, "")  # the guard
    try:
        op(*args)
    except RuntimeError as exc:
        message = str(exc).splitlines()[0] if str(exc) else ""
        missing = [w for w in says if w.lower() not in message.lower()]
        c.that(not missing, f"{label}: refused, but the message does not say what the rule it broke asks it to say",
               SCALE_HINTS)
        return
    except Exception as exc:
        c.fail(f"{label}: raised {type(exc).__name__}, expected a RuntimeError from a TORCH_CHECK", SCALE_HINTS)
    c.fail(f"{label} was accepted; one of the three rules should refuse it", SCALE_HINTS)


def input_checks(c: Check, source: Any, hidden: Iterable[str] | None = None) -> None:
    """`SCALE_SOURCE`: `scale(x, a)` refuses a dtype other than float32, a tensor off the CPU and a non-contiguous
    one, each with a RuntimeError saying so, and returns a * x for every valid input. Hidden cases are named
    `SCALE_CASES`."""
    secret = hidden is not None
    c.build("scale", source, register={"scale": "scale(Tensor x, float a) -> Tensor"}, hint=SCALE_HINTS,
            probe=None if secret else SCALE_PROBE)
    op = c.ops.scale
    for label, name in named(hidden, SCALE_VISIBLE, lambda name: name):
        kind, make, says = SCALE_CASES[name]
        args = make()
        if kind == "refuses":
            _refused(c, op, args, says, label, secret)
            continue
        x, a = args
        c.that(True, "")  # the guard
        try:
            got = op(x, a)
        except Exception as exc:
            said = type(exc).__name__ if secret else f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            c.fail(f"{label} raised {said}: a float32 CPU tensor laid out contiguously is valid input, refuse "
                   "nothing else", SCALE_HINTS)
        _same(c, got, a * x, label, secret, SCALE_HINTS)


# --- 09-row-max ---------------------------------------------------------------------------------------------------

ROWMAX_HINTS = (
    "allocate the result with at::empty({rows}, x.options()), take auto a = x.accessor<float, 2>(), and for each row "
    "keep the largest a[i][j] seen so far",
    "an accessor follows x's strides, so a transposed x needs no copy; start each row's maximum at -infinity "
    "(std::numeric_limits<float>::infinity() in <limits>) or at its first element",
)
ROWMAX_ALLOWED = frozenset({"aten::empty", "aten::empty_like", "aten::empty_strided"})
ROWMAX_RULE = "write the loop yourself (only allocation is allowed)"
ROWMAX_PROBE = "OPS.row_max(torch.randn(3, 4)); OPS.row_max(torch.randn(4, 3).t())"
# one generator, seeded 19, draws these in turn (the notebook's order: visible first, then hidden)
ROWMAX_DRAWS = (("randn", (5, 7)), ("randn", (6, 5)), ("randn", (4, 10)), ("rand", (3, 4)), ("randn", (8, 8)),
                ("randn", (700, 300)), ("randn", (9, 1)))
ROWMAX_CASES = MappingProxyType({
    "a 5x7 tensor": lambda: _draw(19, ROWMAX_DRAWS, 0),
    "a transposed tensor": lambda: _draw(19, ROWMAX_DRAWS, 1).t(),
    "a column slice": lambda: _draw(19, ROWMAX_DRAWS, 2)[:, 1::3],
    "all-negative rows": lambda: -_draw(19, ROWMAX_DRAWS, 3) - 1,
    "a tensor with zero rows": lambda: torch.empty(0, 3),
    "an 8x8 tensor": lambda: _draw(19, ROWMAX_DRAWS, 4),
    "a 700x300 tensor": lambda: _draw(19, ROWMAX_DRAWS, 5),
    "a single column": lambda: _draw(19, ROWMAX_DRAWS, 6),
})
ROWMAX_VISIBLE = ("a 5x7 tensor", "a transposed tensor", "a column slice", "all-negative rows",
                  "a tensor with zero rows", "an 8x8 tensor")


def row_max(c: Check, source: Any, hidden: Iterable[str] | None = None) -> None:
    """`ROWMAX_SOURCE`: `row_max(x)` returns each row's maximum of a 2-D float32 tensor (strided, zero rows, one
    column) as a new 1-D tensor, running no aten op but allocation: on every call (profiled) and in its compiled code
    (imported symbols). Hidden cases are named `ROWMAX_CASES`."""
    secret = hidden is not None
    report = c.build("row_max", source, register={"row_max": "row_max(Tensor x) -> Tensor"}, hint=ROWMAX_HINTS,
                     probe=None if secret else ROWMAX_PROBE)
    _only_allowed_calls(c, "row_max", report, ROWMAX_ALLOWED, ROWMAX_RULE, ROWMAX_HINTS)
    op, event = c.ops.row_max, f"{c.ops.name}::row_max"
    for label, name in named(hidden, ROWMAX_VISIBLE, lambda name: name):
        x = ROWMAX_CASES[name]()
        what = f"row_max({label})"
        got, ran = _recorded_call(c, op, event, (x,), what, secret, ROWMAX_HINTS)
        _same(c, got, x.amax(1), what, secret, ROWMAX_HINTS)
        c.that(ran <= ROWMAX_ALLOWED, f"{what} ran {', '.join(sorted(ran - ROWMAX_ALLOWED))}: {ROWMAX_RULE}",
               ROWMAX_HINTS)

