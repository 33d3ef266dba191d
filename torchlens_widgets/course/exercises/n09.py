"""Notebook 09 (C++ extensions): a ReLU that reads any strided tensor without a copy, checks that refuse bad input
with the right Python exception, NaN-propagating row maxima read through an accessor, and a whole-tensor maximum
reduced on threads with at::parallel_reduce.

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

from ...lenses.timing import threads
from ..integrity import clean
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["input_checks", "parallel_max", "relu_loop", "row_max"]

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
            g_, e_ = got.detach(), expected.detach()
            differ = g_.ne(e_) & ~(g_.isnan() & e_.isnan()) if e_.is_floating_point() else g_.ne(e_)  # NaN = NaN here
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
    "no copy is allowed, so read x where it is: x.const_data_ptr<float>() points at element (0, 0, ...) (the storage "
    "offset is already in it), and element (i0, i1, ...) sits sum(ik * x.stride(k)) floats further on",
    "allocate the result contiguous (at::empty(x.sizes(), x.options())): its element number n is out[n]; for each n, "
    "find the index (i0, i1, ...) it stands for by dividing by the sizes from the last dimension back, or keep an "
    "odometer of indices that you advance after each element",
    "ReLU keeps NaN (torch.relu(nan) is nan): a test like v > 0 ? v : 0 turns NaN into 0, because every comparison "
    "with NaN is false; test for the negative case instead, and remember a 0-d tensor has one element and no sizes",
)
RELU_ALLOWED = frozenset({"aten::empty_like", "aten::empty", "aten::empty_strided"})
RELU_RULE = "read x through its strides yourself; only allocation is allowed (no copy: no contiguous or clone)"
RELU_PROBE = ("OPS.relu_loop(torch.randn(5)); OPS.relu_loop(torch.randn(3, 4).t()); OPS.relu_loop(torch.empty(0)); "
              "OPS.relu_loop(torch.randn(2, 3, 4).permute(2, 0, 1)); OPS.relu_loop(torch.tensor(1.0))")
# one generator, seeded 9, draws these in turn (the notebook's order: visible first, then hidden)
RELU_DRAWS = (("randn", (7,)), ("randn", (4, 6)), ("randn", (2, 8)), ("randn", (64,)), ("randn", (300_000,)),
              ("randn", (10,)), ("randn", (3, 4, 5)), ("randn", (6,)), ("randn", (5, 9)), ("randn", (2, 3, 4, 5)))


def _with_nan(x: torch.Tensor, every: int) -> torch.Tensor:
    x = x.clone()
    x.view(-1)[::every] = float("nan")
    return x


RELU_CASES = MappingProxyType({
    "a 1-D tensor": lambda: _draw(9, RELU_DRAWS, 0),
    "a transposed tensor": lambda: _draw(9, RELU_DRAWS, 1).t(),
    "every other column": lambda: _draw(9, RELU_DRAWS, 2)[:, ::2],
    "an empty tensor": lambda: torch.empty(0),
    "a 3-D tensor, dimensions permuted": lambda: _draw(9, RELU_DRAWS, 6).permute(2, 0, 1),
    "a 1-D tensor with NaN in it": lambda: _with_nan(_draw(9, RELU_DRAWS, 3), 5),
    "300,000 values": lambda: _draw(9, RELU_DRAWS, 4),
    "a view with a storage offset": lambda: _draw(9, RELU_DRAWS, 5)[3:],
    "a 0-d tensor": lambda: torch.tensor(-2.0),
    "a row expanded to 4 rows": lambda: _draw(9, RELU_DRAWS, 7).expand(4, 6),
    "NaN in a transposed slice": lambda: _with_nan(_draw(9, RELU_DRAWS, 8), 7).t()[1::2],
    "a 4-D slice with an offset": lambda: _draw(9, RELU_DRAWS, 9)[1:, ::2, 1:].transpose(1, 3),
})
RELU_VISIBLE = ("a 1-D tensor", "a transposed tensor", "every other column", "an empty tensor",
                "a 3-D tensor, dimensions permuted", "a 1-D tensor with NaN in it")


def relu_loop(c: Check, source: Any, hidden: Iterable[str] | None = None) -> None:
    """`RELU_SOURCE`: `relu_loop(x)` returns a new float32 tensor max(x, 0), NaN kept, for any float32 CPU tensor
    (any number of dimensions, any strides, empty, 0-d), leaves x alone, and reads x where it lies: it runs no aten op
    but allocation, on every call (profiled) and in its compiled code (imported symbols). Hidden cases are named
    `RELU_CASES`."""
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
    "one check per rule, before anything reads memory: the dtype (x.scalar_type()), the device (x.device()), the "
    "layout (x.is_contiguous()); each rule asks for its own Python exception type",
    "plain TORCH_CHECK raises RuntimeError; its variants TORCH_CHECK_TYPE, TORCH_CHECK_VALUE, TORCH_CHECK_INDEX and "
    "TORCH_CHECK_NOT_IMPLEMENTED raise the C++ errors that Python's binding turns into TypeError, ValueError, "
    "IndexError and NotImplementedError (section 4 shows each)",
    "say what was expected in the words the exercise asks for (float32, CPU, contiguous), and refuse nothing else: "
    "a 0-d or empty float32 tensor on the CPU is valid",
)
SCALE_PROBE = "OPS.scale(torch.ones(3), 2.0)"


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


# name -> ("scales", the arguments, (), None) | ("refuses", the arguments, words its message must hold, error type)
SCALE_CASES = MappingProxyType({
    "scale(a 3x4 float32 tensor, 2.0)": ("scales", lambda: (_randn(3, 4, seed=1), 2.0), (), None),
    "an int64 tensor": ("refuses", lambda: (torch.ones(3, dtype=torch.int64), 2.0), ("float32",), TypeError),
    "a meta tensor": ("refuses", lambda: (torch.ones(3, device="meta"), 2.0), ("CPU",), NotImplementedError),
    "a transposed tensor": ("refuses", lambda: (_randn(4, 3, seed=2).t(), 2.0), ("contiguous",), ValueError),
    "a float64 tensor": ("refuses", lambda: (torch.ones(3, dtype=torch.float64), 2.0), ("float32",), TypeError),
    "every other column": ("refuses", lambda: (_randn(2, 6, seed=3)[:, ::2], 2.0), ("contiguous",), ValueError),
    "scale(an empty tensor, 3.0)": ("scales", lambda: (torch.empty(0, 5), 3.0), (), None),
    "scale(a contiguous view at an offset, -1.5)": ("scales", lambda: (_randn(10, seed=4)[4:], -1.5), (), None),
    "scale(a 0-d tensor, 4.0)": ("scales", lambda: (torch.tensor(2.0), 4.0), (), None),
    "a bool tensor": ("refuses", lambda: (torch.ones(3, dtype=torch.bool), 2.0), ("float32",), TypeError),
})
SCALE_VISIBLE = ("scale(a 3x4 float32 tensor, 2.0)", "an int64 tensor", "a meta tensor", "a transposed tensor")


def _refused(c: Check, op: Any, args: tuple[Any, ...], says: Sequence[str], kind: type[Exception], label: str,
             secret: bool) -> None:
    """`op(*args)` must raise exactly `kind` (a NotImplementedError is also a RuntimeError: the type is checked
    exactly) whose first line holds each of `says`. A hidden input's feedback names neither the input nor the words
    (the learner's message can hold the input's dtype or shape)."""
    c.that(True, "")  # the guard
    try:
        op(*args)
    except Exception as exc:
        message = str(exc).splitlines()[0] if str(exc) else ""
        if type(exc) is not kind:
            said = "" if secret else f" ({message[:160]!r})"
            c.fail(f"{label}: raised {type(exc).__name__}{said}; this rule should raise {kind.__name__}", SCALE_HINTS)
        missing = [w for w in says if w.lower() not in message.lower()]
        if missing and secret:
            c.fail(f"{label}: refused, but the message does not say what the rule it broke asks it to say",
                   SCALE_HINTS)
        if missing:
            c.fail(f"{label}: refused, but the message {message[:200]!r} does not say "
                   f"{' or '.join(repr(w) for w in missing)}", SCALE_HINTS)
        return
    c.fail(f"{label} was accepted; one of the three rules should refuse it" if secret else
           f"{label} was accepted; it should be refused with a {kind.__name__} that says "
           f"{', '.join(repr(w) for w in says)}", SCALE_HINTS)


def input_checks(c: Check, source: Any, hidden: Iterable[str] | None = None) -> None:
    """`SCALE_SOURCE`: `scale(x, a)` refuses a dtype other than float32 (TypeError), a tensor off the CPU
    (NotImplementedError) and a non-contiguous one (ValueError), each saying so, and returns a * x for every valid
    input. Hidden cases are named `SCALE_CASES`."""
    secret = hidden is not None
    c.build("scale", source, register={"scale": "scale(Tensor x, float a) -> Tensor"}, hint=SCALE_HINTS,
            probe=None if secret else SCALE_PROBE)
    op = c.ops.scale
    for label, name in named(hidden, SCALE_VISIBLE, lambda name: name):
        kind, make, says, error = SCALE_CASES[name]
        args = make()
        if kind == "refuses" and error is not None:
            _refused(c, op, args, says, error, label, secret)
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
    "amax propagates NaN: a row holding one has NaN as its maximum. Every comparison with NaN is false, so a plain "
    "v > m never takes it in: once std::isnan(v) (in <cmath>) is true, that row's answer is settled",
)
ROWMAX_ALLOWED = frozenset({"aten::empty", "aten::empty_like", "aten::empty_strided"})
ROWMAX_RULE = "write the loop yourself (only allocation is allowed)"
ROWMAX_PROBE = "OPS.row_max(torch.randn(3, 4)); OPS.row_max(torch.randn(4, 3).t())"
# one generator, seeded 19, draws these in turn (the notebook's order: visible first, then hidden)
ROWMAX_DRAWS = (("randn", (5, 7)), ("randn", (6, 5)), ("randn", (4, 10)), ("rand", (3, 4)), ("randn", (8, 8)),
                ("randn", (700, 300)), ("randn", (9, 1)), ("randn", (4, 6)), ("randn", (7, 5)))


def _nan_at(x: torch.Tensor, *where: tuple[int, int]) -> torch.Tensor:
    x = x.clone()
    for i, j in where:
        x[i, j] = float("nan")
    return x


ROWMAX_CASES = MappingProxyType({
    "a 5x7 tensor": lambda: _draw(19, ROWMAX_DRAWS, 0),
    "a transposed tensor": lambda: _draw(19, ROWMAX_DRAWS, 1).t(),
    "a column slice": lambda: _draw(19, ROWMAX_DRAWS, 2)[:, 1::3],
    "all-negative rows": lambda: -_draw(19, ROWMAX_DRAWS, 3) - 1,
    "a tensor with zero rows": lambda: torch.empty(0, 3),
    "an 8x8 tensor": lambda: _draw(19, ROWMAX_DRAWS, 4),
    "a 700x300 tensor": lambda: _draw(19, ROWMAX_DRAWS, 5),
    "a single column": lambda: _draw(19, ROWMAX_DRAWS, 6),
    "rows with a NaN in them": lambda: _nan_at(_draw(19, ROWMAX_DRAWS, 7), (0, 5), (2, 0), (3, 2)),
    "NaN in a transposed tensor": lambda: _nan_at(_draw(19, ROWMAX_DRAWS, 8), (0, 0), (6, 3)).t(),
})
ROWMAX_VISIBLE = ("a 5x7 tensor", "a transposed tensor", "a column slice", "all-negative rows",
                  "a tensor with zero rows", "an 8x8 tensor", "rows with a NaN in them")


def row_max(c: Check, source: Any, hidden: Iterable[str] | None = None) -> None:
    """`ROWMAX_SOURCE`: `row_max(x)` returns each row's maximum of a 2-D float32 tensor (strided, zero rows, one
    column; NaN propagated as amax does) as a new 1-D tensor, running no aten op but allocation: on every call (profiled) and in its compiled code
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



# --- 09-parallel-max ----------------------------------------------------------------------------------------------

PMAX_HINTS = (
    "at::parallel_reduce(begin, end, grain, identity, chunk, combine) calls chunk(b, e, identity) on pieces of "
    "[begin, end) on different threads, then folds the pieces' results with combine, starting from identity",
    "the identity must not change a maximum: combine(identity, v) is v for every v, the most negative float "
    "included; a thread that gets no piece contributes the identity itself",
    "NaN must win in both places, and in either order of the arguments: the chunk's loop and combine(a, b) when a or "
    "b is NaN (every comparison with NaN is false); an empty tensor has no maximum: refuse it with the "
    "TORCH_CHECK variant for a bad value",
)
PMAX_ALLOWED = frozenset({"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::contiguous",
                          "aten::clone", "aten::copy_", "aten::scalar_tensor", "aten::full", "aten::fill_",
                          "aten::resolve_conj", "aten::resolve_neg"})
PMAX_RULE = "reduce with at::parallel_reduce yourself; only allocation and layout ops are allowed"
PMAX_PROBE = "OPS.all_max(torch.randn(1000)); OPS.all_max(torch.randn(3, 4).t()); OPS.all_max(torch.tensor(1.0))"
PMAX_THREADS = 4  # threads for the check's calls: pieces really run apart (OpenMP runs 4 threads on any number of cores)


def _spiked(n: int, seed: int, *nan_at: int, shift: float = 0.0) -> torch.Tensor:
    x = torch.randn(n, generator=torch.Generator().manual_seed(seed)) + shift
    for i in nan_at:
        x[i] = float("nan")
    return x


PMAX_CASES = MappingProxyType({
    "200,000 values": lambda: _spiked(200_000, 1),
    "200,000 negative values": lambda: _spiked(200_000, 2, shift=-10.0),
    "a NaN in the first piece": lambda: _spiked(200_000, 3, 10),
    "a NaN in the last piece": lambda: _spiked(200_000, 4, 199_990),
    "a transposed 300x400 tensor": lambda: _spiked(120_000, 5).view(300, 400).t(),
    "a 0-d tensor": lambda: torch.tensor(-3.5),
    "5 values": lambda: _spiked(5, 6, shift=-20.0),
    "a NaN in the middle, all negative": lambda: _spiked(200_000, 7, 100_001, shift=-10.0),
    "NaN in the last piece of a column slice": lambda: _spiked(400_000, 8, 399_999).view(1000, 400)[:, 1::2],
    "a 3-D tensor": lambda: _spiked(60_000, 9).view(30, 40, 50).permute(2, 0, 1),
})
PMAX_VISIBLE = ("200,000 values", "200,000 negative values", "a NaN in the first piece", "a NaN in the last piece",
                "a transposed 300x400 tensor", "a 0-d tensor")
PMAX_EMPTY = (lambda: torch.empty(0), lambda: torch.empty(3, 0))


def parallel_max(c: Check, source: Any, hidden: Iterable[str] | None = None) -> None:
    """`MAX_SOURCE`: `all_max(x)` returns the maximum of every element of a float32 CPU tensor as a new 0-d float32
    tensor, NaN propagated as torch.amax does, reduced by at::parallel_reduce on threads (built with -fopenmp, called
    with `PMAX_THREADS` threads, its library must start an OpenMP region), and refuses an empty tensor with a
    ValueError. No aten op but allocation and layout, on every call and in the compiled code. Hidden cases are named
    `PMAX_CASES`."""
    secret = hidden is not None
    report = c.build("all_max", source, register={"all_max": "all_max(Tensor x) -> Tensor"}, hint=PMAX_HINTS,
                     probe=None if secret else PMAX_PROBE, flags=("-fopenmp",))
    _only_allowed_calls(c, "all_max", report, PMAX_ALLOWED, PMAX_RULE, PMAX_HINTS)
    symbols = (_imported_symbols(report.library) if report.library else None) or ()
    c.that(any(s.startswith("GOMP_parallel") for s in symbols),
           "all_max's compiled code never starts a parallel region: the whole reduction runs on the calling thread. "
           "Reduce with at::parallel_reduce, so that pieces run on threads and their results are combined",
           PMAX_HINTS)
    op, event = c.ops.all_max, f"{c.ops.name}::all_max"
    with threads(PMAX_THREADS):  # put back when a check fails inside
        if not secret:
            for make in PMAX_EMPTY:
                x = make()
                _refused_empty(c, op, x)
        for label, name in named(hidden, PMAX_VISIBLE, lambda name: name):
            x = PMAX_CASES[name]()
            what = f"all_max({label})"
            got, ran = _recorded_call(c, op, event, (x,), what, secret, PMAX_HINTS)
            _same(c, got, x.amax(), what, secret, PMAX_HINTS)
            c.that(ran <= PMAX_ALLOWED, f"{what} ran {', '.join(sorted(ran - PMAX_ALLOWED))}: {PMAX_RULE}",
                   PMAX_HINTS)


def _refused_empty(c: Check, op: Any, x: torch.Tensor) -> None:
    what = f"all_max(an empty tensor of shape {list(x.shape)})"
    c.that(True, "")  # the guard
    try:
        op(x)
    except Exception as exc:
        c.that(type(exc) is ValueError, f"{what} raised {type(exc).__name__}; an empty tensor has no maximum: "
               "refuse it with a ValueError (TORCH_CHECK_VALUE)", PMAX_HINTS)
        return
    c.fail(f"{what} was accepted; an empty tensor has no maximum: refuse it with a ValueError (TORCH_CHECK_VALUE)",
           PMAX_HINTS)
