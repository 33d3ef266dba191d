"""Wrong answers for notebook 10 (kernel to operator): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.exercises.test_n10 import SCALE_ADD
from tests.course.wrong_answers import Wrong


def _kernel(body: str, prelude: str = "") -> str:
    return (f'SCALE_ADD_SOURCE = r"""\n{prelude}\nat::Tensor scale_add(const at::Tensor& x, const at::Tensor& y, '
            f'double a) {{\n{body}\n}}\n"""\n')


_LOOP = """  at::Tensor out = at::empty_like({x});
  const float* px = {x}.const_data_ptr<float>();
  const float* py = {y}.const_data_ptr<float>();
  float* po = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < {x}.numel(); ++i) po[i] = static_cast<float>(a) * px[i] + py[i];
  return out;"""
_CHECKS = """  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "scale_add: float32 only");"""
# the reference's stride walk, from the in-process test: the wrong answers below change one line of it
_WALK = SCALE_ADD.split("double a) {\n", 1)[1].rsplit("}", 1)[0].rstrip("\n")
_VECTOR = "#include <vector>"


def _walk(old: str = "", new: str = "") -> str:
    assert old in _WALK
    return _kernel(_WALK.replace(old, new), _VECTOR)


def _tests(body: str) -> str:
    return f"def my_contract_tests(op):\n{body}\n"


_GOOD_CASE = """    a, b = torch.randn(3, 4), torch.randn(3, 4)
    out = op(a.clone(), b.clone())
    failed = [] if torch.allclose(out, 2.0 * a + b) else ["contiguous"]"""

WRONG = {
    "10-fix-kernel": [
        Wrong("the naive kernel as given", _kernel(_CHECKS + "\n" + _LOOP.format(x="x", y="y")),
              "non-contiguous (step 2)"),
        Wrong("section 2's fix: .contiguous() copies", _kernel(_CHECKS + """
  at::Tensor xc = x.contiguous(), yc = y.contiguous();""" + "\n" + _LOOP.format(x="xc", y="yc")),
              "ran aten::clone, aten::contiguous, aten::copy_"),
        Wrong("x's strides used for y too", _walk("at_y += index[d] * y.stride(d);", "at_y += index[d] * x.stride(d);"),
              "case 'first non-contiguous, rest contiguous'"),
        Wrong("adds the storage offset a second time", _walk(
            "const float* px = x.const_data_ptr<float>();",
            "const float* px = x.const_data_ptr<float>() + x.storage_offset();"), "case 'storage offset 3'"),
        Wrong("the result allocated like x", _walk("at::empty(x.sizes(), x.options())", "at::empty_like(x)"),
              "case 'transposed'"),
        Wrong("writes the result into x as well", _kernel(_WALK.replace(
            "const float* px = x.const_data_ptr<float>();", "float* px = x.mutable_data_ptr<float>();").replace(
            "po[i] = static_cast", "po[i] = px[at_x] = static_cast"), _VECTOR),
              "its input x afterwards (it must stay unchanged)"),
        Wrong("calls at::add", _kernel(_CHECKS + "\n  return at::add(y, x, a);", "#include <ATen/ops/add.h>"),
              "aten::add", gaming=True),
        Wrong("mul and add on tensors", _kernel(_CHECKS + "\n  return x.mul(a).add(y);"), "aten::mul", gaming=True),
        # ATen's CPU kernel called directly: no dispatcher, so no profiler event; the library's symbols show it
        Wrong("calls at::cpu::add, past the dispatcher", _kernel(_CHECKS + "\n  return at::cpu::add(y, x, a);",
              "#include <ATen/ops/add_cpu_dispatch.h>"),
              "scale_add's compiled code calls at::cpu::add", gaming=True),
        # the loop for the 8-element inputs of a visible case, at::add for every other input
        Wrong("loops only for the input the recorder profiles", _kernel(
            _CHECKS + "\n  if (x.numel() != 8) return at::add(y, x, a);\n" + _LOOP.format(x="x", y="y"),
            "#include <ATen/ops/add.h>"), "scale_add's compiled code calls aten::add", gaming=True),
        # right for the a = 1.5 of the first visible case only
        Wrong("a fixed at the 1.5 the test uses", _walk("static_cast<float>(a)", "1.5f"),
              "scale_add on (8,) inputs, a = -2.0, case 'as given'", gaming=True),
    ],
    "10-contract-tests": [
        Wrong("never fails anything", _tests("    return []"), "your tests pass an op that"),
        Wrong("contiguous inputs only", _tests(_GOOD_CASE + "\n    return failed"), "your tests pass an op that"),
        Wrong("fails everything", _tests("    return ['everything']"), "your tests fail a correct op"),
        Wrong("uses the package's contract matrix", _tests("""    from torchlens_widgets.lenses.contract import contract_matrix
    r = contract_matrix(op, lambda a, b: 2.0 * a + b, (torch.randn(3, 4), torch.randn(3, 4)), opcheck=False)
    return [x.name for x in r.failures()]"""), "asks you not to use", gaming=True),
        Wrong("values only, never the inputs", _tests("""    failed = []
    base_x, base_y = torch.randn(4, 6), torch.randn(4, 6)
    for name, (a, b) in {"step 2": (base_x[:, ::2], base_y[:, ::2]), "empty": (torch.empty(0, 3), torch.empty(0, 3)),
                         "offset": (base_x.reshape(-1)[5:17], base_y.reshape(-1)[5:17])}.items():
        want = 2.0 * a + b
        out = op(a, b)
        if out.shape != want.shape or not torch.allclose(out, want):
            failed.append(name)
    return failed"""), "writes into x"),
        # the check's own ops, told apart by how they were made rather than by running them
        Wrong("tells the planted bugs by their default arguments", _tests(
            "    return ['planted'] if op.__defaults__ else []"),
            "your tests pass an op that ignores strides", gaming=True),
        Wrong("says the first op it is given is the correct one", "_seen = []\n\n\n" + _tests(
            "    _seen.append(op)\n    return [] if len(_seen) == 1 else ['planted']"),
            "your tests fail a correct op", gaming=True),
        Wrong("a list that is empty and not empty", """class _Either(list):
    def __eq__(self, other):
        return True

    def __len__(self):
        return 1


""" + _tests("    return _Either()"), "returned _Either, expected a list", gaming=True),
    ],
    "10-predict-grid": [
        Wrong("nothing fails", "PREDICT_STRICT_FAILS = set()\n", "the failing cases"),
        Wrong("forgets the catch-all's autograd and meta rows", """PREDICT_STRICT_FAILS = {"dtype float64", "dtype float16",
    "dtype bfloat16", "non-contiguous (step 2)", "expanded (stride 0)", "first non-contiguous, rest contiguous",
    "transposed"}
""", "the failing cases"),
        Wrong("thinks an offset is non-contiguous", """PREDICT_STRICT_FAILS = {"dtype float64", "dtype float16",
    "dtype bfloat16", "non-contiguous (step 2)", "expanded (stride 0)", "first non-contiguous, rest contiguous",
    "transposed", "storage offset 3", "requires_grad", "meta tensors", "fake tensors"}
""", "the failing cases"),
        Wrong("a list instead of a set", """PREDICT_STRICT_FAILS = ["dtype float64"]
""", "give a set of case names"),
        Wrong("every case name", """PREDICT_STRICT_FAILS = {"as given", "dtype float32", "dtype float64", "dtype float16",
    "dtype bfloat16", "non-contiguous (step 2)", "storage offset 3", "expanded (stride 0)",
    "first non-contiguous, rest contiguous", "transposed", "empty (0 rows)", "one element", "0-d",
    "larger (4096 elements per row)", "same tensor twice", "requires_grad", "meta tensors", "fake tensors"}
""", "the failing cases", gaming=True),
        # iterating it reads the check's own verdict (a global of the old test cell, a local of the check now)
        Wrong("a set that reads the check's answer", """import sys as _sys


class _Reads(set):
    def __iter__(self):
        frame = _sys._getframe(1)
        while frame is not None:
            for space in (frame.f_locals, frame.f_globals):
                found = space.get("actual", space.get("_actual"))
                if isinstance(found, set) and found is not self:
                    set.update(self, found)  # what set(answer) copies
                    return set.__iter__(self)
            frame = frame.f_back
        return set.__iter__(self)


PREDICT_STRICT_FAILS = _Reads()
""", "give a set of case names", gaming=True),
        # the public lens replaced before the check reads the kernel's grid with it
        Wrong("makes the contract matrix pass every case", """import torchlens_widgets.lenses.contract as _contract

_contract._run = lambda fn, args, fake: None
_contract._compare = _contract._grad_problem = lambda *args, **kwargs: None
PREDICT_STRICT_FAILS = set()
""", "torchlens_widgets.lenses.contract._run was replaced", gaming=True),
    ],
    "10-promotion-case": [
        Wrong("the example as it is", "def promotion_case(x, y):\n    return x.clone(), y.clone()\n",
              "your case passes an op that gives the result x's dtype"),
        Wrong("x the wider dtype", "def promotion_case(x, y):\n    return x.double(), y.clone()\n",
              "your case passes an op that gives the result x's dtype"),
        # catches the visible bug, not the op that keeps y's dtype
        Wrong("y the wider dtype", "def promotion_case(x, y):\n    return x.clone(), y.double()\n",
              "your case passes the op of hidden case 1"),
        Wrong("shapes that do not broadcast", "def promotion_case(x, y):\n    return x.double(), y[:2, :3]\n",
              "the reference 2.0 * x + y cannot run on your case"),
        Wrong("one tensor", "def promotion_case(x, y):\n    return x.double()\n",
              "expected a tuple of two plain tensors"),
        # a tensor that says it is float64 while it holds float32
        Wrong("a tensor subclass that reports another dtype", """class _Says64(torch.Tensor):
    @property
    def dtype(self):
        return torch.float64


def promotion_case(x, y):
    return x.as_subclass(_Says64), y.clone()
""", "expected a tuple of two plain tensors", gaming=True),
        # the public lens replaced so that every op fails every case
        Wrong("makes the contract matrix fail the planted ops", """import torchlens_widgets.lenses.contract as _contract

_contract._compare = lambda got, want, inputs, values=True: "differs"


def promotion_case(x, y):
    return x.clone(), y.clone()
""", "torchlens_widgets.lenses.contract._compare was replaced", gaming=True),
    ],
}
