"""An operator's contract as a pass/fail grid: the op against a reference over the inputs that break real
kernels (dtypes, non-contiguous, transposed and expanded inputs, storage offsets, empty and 0-d tensors,
the same tensor passed twice, meta and fake tensors, requires_grad, another device where one exists), each
with the difference when it fails; plus `torch.library.opcheck`'s verdicts (schema, fake, autograd
registration, AOT dispatch) as rows for a registered operator, run on inputs that require grad (without one,
opcheck skips its autograd-registration test).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

__all__ = ["GRAD_DIFFERS", "GRAD_MISSING", "Case", "CaseResult", "ContractError", "ContractReport", "contract_cases",
           "contract_matrix"]

OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
# torch.testing.assert_close's default tolerances per dtype (rtol, atol)
_TOL = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float32: (1.3e-6, 1e-5),
        torch.float64: (1e-7, 1e-7), torch.complex64: (1.3e-6, 1e-5), torch.complex128: (1e-7, 1e-7)}
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


class ContractError(ValueError):
    """Inputs the matrix cannot build cases from; the message says what to pass."""


@dataclass(frozen=True)
class Case:
    """One input variant: `make()` returns the positional arguments (fresh tensors every call)."""

    name: str
    group: str
    make: Callable[[], tuple[Any, ...]]


@dataclass(frozen=True)
class CaseResult:
    name: str
    group: str
    passed: bool
    detail: str  # "ok", the difference ("max |diff| 0.5 at (1, 0)"), or the error the op raised


@dataclass(frozen=True)
class ContractReport:
    op: str
    results: tuple[CaseResult, ...]
    seconds: float

    @property
    def compared(self) -> int:
        """How many cases were compared with the reference (a case the reference cannot do is skipped)."""
        return sum(not r.detail.startswith("skipped:") for r in self.results)

    @property
    def passed(self) -> bool:
        """Every case passed, and at least one was compared: no comparison, no pass."""
        return self.compared > 0 and all(r.passed for r in self.results)

    def failures(self) -> list[CaseResult]:
        return [r for r in self.results if not r.passed]

    def result(self, name: str) -> CaseResult:
        found = next((r for r in self.results if r.name == name), None)
        if found is None:
            raise KeyError(f"no case {name!r}; the cases are {[r.name for r in self.results]}")
        return found

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "seconds": self.seconds, "results": [asdict(r) for r in self.results]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContractReport:
        """The report `to_dict` wrote (e.g. one recorded on a GPU and shipped as JSON), rebuilt to show or query."""
        results = tuple(CaseResult(str(r["name"]), str(r["group"]), bool(r["passed"]), str(r["detail"]))
                        for r in data["results"])
        return cls(str(data["op"]), results, float(data["seconds"]))

    def summary(self) -> str:
        bad = self.failures()
        if not self.compared:
            return (f"{self.op}: nothing was compared: the reference raised on every case, so no case says whether "
                    "the op is right; give a reference that runs on the example inputs")
        lines = [f"{self.op}: {len(self.results) - len(bad)} of {len(self.results)} cases pass"]
        lines += [f"  ✗ {r.name}: {r.detail}" for r in bad]
        return "\n".join(lines)


def _fresh(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()


def _offset(t: torch.Tensor, by: int = 3) -> torch.Tensor:
    """The same values in a view that starts `by` elements into a larger storage."""
    buf = torch.empty(t.numel() + by, dtype=t.dtype, device=t.device)
    view = buf[by:].view(t.shape)
    view.copy_(t)
    return view


def _noncontig(t: torch.Tensor) -> torch.Tensor:
    """The same values read with a step of 2 (every other element of a larger storage)."""
    buf = torch.zeros((*t.shape[:-1], t.shape[-1] * 2) if t.dim() else (2,), dtype=t.dtype, device=t.device)
    view = buf[..., ::2] if t.dim() else buf[::2].reshape(())
    view.copy_(t)
    return view


def _transposed(t: torch.Tensor) -> torch.Tensor:
    """The same values in a transposed (column-major) layout; 2-D and up."""
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def _expanded(t: torch.Tensor) -> torch.Tensor:
    """A real broadcast: the first row alone in a storage of its own, `.expand`ed to the full shape (stride 0 along
    the first dimension; every row is the first row, and the reference sees the same values). A kernel that walks
    `numel()` elements from the data pointer reads past this storage's end: undefined behaviour. On the CPU the row's
    storage is the start of a buffer the matrix owns, filled with NaN, so such a read shows as NaN instead of reading
    another allocation's memory or crashing."""
    row = t[:1]
    if t.device.type != "cpu" or not t.numel():
        return row.clone().expand(t.shape)
    raw = bytearray(t.numel() * t.element_size())  # the guard: one row, then NaN up to the full size
    torch.frombuffer(raw, dtype=t.dtype).fill_(float("nan") if t.is_floating_point() or t.is_complex() else 0)
    small = torch.frombuffer(raw, dtype=t.dtype, count=row.numel()).view(row.shape)  # storage: one row, no more
    small.copy_(row)
    return small.expand(t.shape)


def contract_cases(example: Sequence[torch.Tensor], dtypes: Sequence[torch.dtype] = DTYPES,
                   device: str | None = None) -> list[Case]:
    """The standard cases for an op taking `example` (tensors of one shape, at least 1-D)."""
    ex = [_fresh(t) for t in example]
    shape = ex[0].shape
    cases = [Case("as given", "baseline", lambda: tuple(_fresh(t) for t in ex))]
    def cast(dt: torch.dtype) -> Callable[[], tuple[Any, ...]]:
        return lambda: tuple(_fresh(t).to(dt) for t in ex)

    for dt in dtypes:
        cases.append(Case(f"dtype {str(dt).removeprefix('torch.')}", "dtype", cast(dt)))
    cases += [
        Case("non-contiguous (step 2)", "layout", lambda: tuple(_noncontig(t) for t in ex)),
        Case("storage offset 3", "layout", lambda: tuple(_offset(t) for t in ex)),
        Case("expanded (stride 0)", "layout", lambda: tuple(_expanded(t) for t in ex)),
        Case("first non-contiguous, rest contiguous", "layout",
             lambda: (_noncontig(ex[0]), *(_fresh(t) for t in ex[1:]))),
    ]
    if len(shape) >= 2:
        cases.append(Case("transposed", "layout", lambda: tuple(_transposed(t) for t in ex)))
    cases += [
        Case("empty (0 rows)", "size", lambda: tuple(t[:0].clone() for t in ex)),
        Case("one element", "size", lambda: tuple(t.reshape(-1)[:1].reshape([1] * t.dim()).clone() for t in ex)),
        Case("0-d", "size", lambda: tuple(t.reshape(-1)[0].clone() for t in ex)),
        Case("larger (4096 elements per row)", "size",
             lambda: tuple(torch.randn(*shape[:-1], 4096, generator=torch.Generator().manual_seed(i), dtype=t.dtype)
                           for i, t in enumerate(ex))),
    ]
    if len(ex) >= 2:
        cases.append(Case("same tensor twice", "aliasing", lambda: (_fresh(ex[0]),) * len(ex)))
    cases.append(Case("requires_grad", "autograd", lambda: tuple(_fresh(t).requires_grad_(t.is_floating_point())
                                                                   for t in ex)))
    cases.append(Case("meta tensors", "meta", lambda: tuple(_fresh(t).to("meta") for t in ex)))
    cases.append(Case("fake tensors", "meta", lambda: tuple(_fresh(t) for t in ex)))
    other = device or ("cuda" if torch.cuda.is_available() else None)
    if other:
        cases.append(Case(f"on {other}", "device", lambda: tuple(_fresh(t).to(other) for t in ex)))
    return cases


def _where(diff: torch.Tensor) -> str:
    flat = int(diff.reshape(-1).argmax())
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape)) if diff.dim() else ()
    return str(idx)


def _compare(got: Any, want: Any, inputs: Sequence[Any], values: bool = True) -> str | None:
    """None when `got` matches `want` (values, dtype, shape, device) and owns its storage; else what differs.
    Without `values` (fake tensors) only shape, dtype and device are compared."""
    if not isinstance(got, torch.Tensor):
        return f"returned {type(got).__name__}, expected a tensor"
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if got.device != want.device:
        return f"device {got.device}, expected {want.device}"
    if not values:
        return None
    for t in inputs:
        if isinstance(t, torch.Tensor) and got.numel() and t.device.type != "meta" and got.device.type != "meta" \
                and got.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
            return "the output shares an input's storage (a view or the input itself), expected a new tensor"
    if got.device.type == "meta" or got.numel() == 0:
        return None
    g, w = got.detach(), want.detach()
    if g.is_floating_point() or g.is_complex():
        rtol, atol = _TOL.get(g.dtype, (1.3e-6, 1e-5))
        close = torch.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    else:
        close = g == w
    if bool(close.all()):
        return None
    diff = (g.double() - w.double()).abs().nan_to_num(float("inf")) if g.dtype != torch.bool else (~close).double()
    bad = int((~close).sum())
    return f"{bad} of {g.numel()} values differ; max |diff| {float(diff.max()):.3g} at {_where(diff)}"


def _run(fn: Callable[..., Any], args: tuple[Any, ...], fake: bool) -> Any:
    if not fake:
        return fn(*args)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        return fn(*(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args))


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"raised {type(exc).__name__}: {text[0][:200] if text else ''}"


def contract_matrix(op: Callable[..., Any], reference: Callable[..., Any], example: Sequence[torch.Tensor], *,
                    dtypes: Sequence[torch.dtype] = DTYPES, opcheck: bool = True,
                    cases: Sequence[Case] | None = None) -> ContractReport:
    """Run `op` and `reference` on every case (see contract_cases) and compare; with `opcheck` and a
    registered operator (an OpOverload or custom op), add torch.library.opcheck's four verdicts as rows."""
    if not callable(op) or not callable(reference):
        raise ContractError("give the operator and a reference implementation as callables")
    if isinstance(example, torch.Tensor) or not example or not all(isinstance(t, torch.Tensor) for t in example):
        raise ContractError("example: a tuple of the tensors you would call the op with, e.g. (x, y)")
    odd = [t for t in example if t.layout != torch.strided or t.is_nested or t.is_quantized]
    if odd:  # the cases are views of a strided tensor (transposed, sliced, expanded): another layout has none
        what = "quantized" if odd[0].is_quantized else "nested" if odd[0].is_nested else str(odd[0].layout)
        raise ContractError(f"example: a {what} tensor; the contract's cases are strided layouts (transposed, "
                            "sliced, expanded ...): give dense tensors, e.g. x.to_dense()")
    if any(t.dim() == 0 for t in example) or len({tuple(t.shape) for t in example}) != 1:
        raise ContractError("example tensors must share one shape of at least one dimension; the cases derive "
                            "0-d, empty and larger inputs from it")
    name = getattr(op, "__name__", None) or str(op)
    if isinstance(op, torch._ops.OpOverload):
        name = op.name()
    t0 = time.perf_counter()
    results: list[CaseResult] = []
    for case in cases if cases is not None else contract_cases(example, dtypes):
        fake = case.name == "fake tensors"
        try:
            args = case.make()
            before = [a.detach().clone() if isinstance(a, torch.Tensor) and a.device.type != "meta" else None
                      for a in args]
            want = _run(reference, tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args), fake)
        except Exception as exc:  # the reference cannot do this case: not the op's fault
            results.append(CaseResult(case.name, case.group, True, f"skipped: the reference {_error(exc)[7:]}"))
            continue
        try:
            got = _run(op, args, fake)
        except Exception as exc:  # the op's failure is the finding
            results.append(CaseResult(case.name, case.group, False, _error(exc)))
            continue
        problem = _compare(got, want, args, values=not fake)
        if problem is None:
            mutated = [i for i, (a, b) in enumerate(zip(args, before))
                       if b is not None and not torch.equal(a.detach(), b)]
            if mutated:
                problem = f"changed its input {mutated[0]} (a new result was expected, inputs left alone)"
        if problem is None and case.group == "autograd" and any(
                isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            problem = _grad_problem(op, reference, args)
        results.append(CaseResult(case.name, case.group, problem is None, problem or "ok"))
    if opcheck and isinstance(op, torch._ops.OpOverload):
        # inputs that require grad: without one, opcheck skips its autograd-registration test and reports SUCCESS
        results += _opcheck_rows(op, tuple(_fresh(t).requires_grad_(t.is_floating_point() or t.is_complex())
                                           for t in example))
    return ContractReport(name, tuple(results), time.perf_counter() - t0)


GRAD_MISSING = "no gradient"   # the first words of the requires_grad row when backward left an input's .grad None
GRAD_DIFFERS = "the gradient"  # ... and when a gradient arrived but differs from the reference's


def _grad_problem(op: Callable[..., Any], reference: Callable[..., Any], args: tuple[Any, ...]) -> str | None:
    """None when backward through `op` gives every input that requires grad the reference's gradient. Torch's autograd
    fallback (an operator with no autograd kernel) runs backward with a warning and gives the inputs no gradient at
    all (`.grad` stays None): said apart from a gradient that arrived and differs."""
    leaves = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
    ref_leaves = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            out = op(*leaves)
            if not out.requires_grad:
                return "the output does not require grad although its inputs do (no autograd formula registered?)"
            out.sum().backward()
        except Exception as exc:
            return f"backward {_error(exc)}"
    warned = any("autograd kernel was not registered" in str(w.message) for w in said)
    reference(*ref_leaves).sum().backward()
    for i, (a, b) in enumerate(zip(leaves, ref_leaves)):
        if isinstance(a, torch.Tensor) and a.requires_grad and b.grad is not None:
            if a.grad is None:
                return (f"{GRAD_MISSING} for input {i}: its .grad is None after backward"
                        + (" (torch warned: no autograd kernel registered)" if warned else ""))
            if not torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-5):
                return f"{GRAD_DIFFERS} of input {i} differs from the reference's"
    return None


def _opcheck_rows(op: torch._ops.OpOverload, args: tuple[Any, ...]) -> list[CaseResult]:
    try:
        verdicts = torch.library.opcheck(op, args, raise_exception=False)
    except Exception as exc:  # opcheck itself refused the op
        return [CaseResult("opcheck", "opcheck", False, _error(exc))]
    rows = []
    for test in OPCHECK_TESTS:
        said = verdicts.get(test, "not run")
        ok = said == "SUCCESS"
        detail = "ok" if ok else (said if isinstance(said, str) else _error(said))
        rows.append(CaseResult(f"opcheck {test.removeprefix('test_')}", "opcheck", ok, str(detail)[:300]))
    return rows
