"""Wrong answers for notebook 04 (the dispatcher): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong

_COUNTER = '''
class OverloadCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        BODY
'''


def _counter(body: str) -> str:
    return _COUNTER.replace("BODY", body.strip().replace("\n", "\n        "))


_RIGHT_A = '''
def predicted_key_sets():
    return {
        "torch.ones(2, 3)": {"CPU", "ADInplaceOrView", "AutogradCPU", "AutocastCPU"},
        "torch.ones(2, 3, device='meta', requires_grad=True)": {"Meta", "ADInplaceOrView", "AutogradMeta"},
        "torch.ones(2, 3).to_sparse()": {"SparseCPU", "ADInplaceOrView", "AutogradCPU", "AutocastCPU"},
        "torch.ones(2, 3, dtype=torch.complex64).conj()": {"CPU", "Conjugate", "ADInplaceOrView", "AutogradCPU",
                                                           "AutocastCPU"},
    }
'''

# The reference rule, with the steps a wrong answer changes.
_RULE = '''
def predict_keys(t):
    device = {"cpu": "CPU", "meta": "Meta"}[t.device.type]
    prefix = {torch.strided: "", torch.sparse_coo: "Sparse", torch.sparse_csr: CSR}[t.layout]
    keys = {prefix + device}
    if t.is_conj():
        keys.add("Conjugate")
    if t.is_neg() and NEG:
        keys.add("Negative")
    if AUTOGRAD:
        keys |= {"ADInplaceOrView", "Autograd" + device}
    if AUTOCAST:
        keys.add("AutocastCPU")
    return keys
'''


def _rule(csr: str = '"SparseCsr"', neg: str = "True", autograd: str = "not torch.is_inference(t)",
          autocast: str = 'device == "CPU"') -> str:
    return _RIGHT_A + (_RULE.replace("CSR", csr).replace("NEG", neg).replace("AUTOGRAD", autograd)
                       .replace("AUTOCAST", autocast))


_FLOPS = '''
def count_flops(fn, *args):
    aten = torch.ops.aten
    products = {aten.mm, aten.addmm, aten.bmm, aten.baddbmm}

    class FlopMode(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            packet = func.overloadpacket
            if DECOMPOSE and packet not in products and torch._C._dispatch_has_kernel_for_dispatch_key(
                    func.name(), "CompositeImplicitAutograd"):
                with self:
                    return func.decompose(*args, **kwargs)
            out = func(*args, **kwargs)
            if packet in TWO_D_PRODUCTS:
                a, b = (args[0], args[1]) if packet is aten.mm else (ADDMM_ARGS)
                self.total += FACTOR * a.shape[0] * a.shape[1] * b.shape[1]
            elif packet in BATCHED_PRODUCTS:
                a, b = (args[0], args[1]) if packet is aten.bmm else (args[1], args[2])
                self.total += FACTOR * BATCH a.shape[1] * a.shape[2] * b.shape[2]
            return out

    with FlopMode() as mode:
        fn(*args)
    return mode.total
'''


def _flops(decompose: str = "True", mm_family: str = "(aten.mm, aten.addmm)", addmm_args: str = "args[1], args[2]",
           factor: str = "2", bmm_family: str = "(aten.bmm, aten.baddbmm)", batch: str = "a.shape[0] *") -> str:
    return (_FLOPS.replace("DECOMPOSE", decompose).replace("TWO_D_PRODUCTS", mm_family).replace("ADDMM_ARGS", addmm_args)
            .replace("FACTOR", factor).replace("BATCHED_PRODUCTS", bmm_family).replace("BATCH", batch))


WRONG = {
    "04-count-by-overload": [
        Wrong("counts overload packets", _counter('''
self.counts[str(func.overloadpacket)] += 1
return func(*args, **(kwargs or {}))
'''), expect="nn.Linear forward + backward: counts"),
        Wrong("counts bare names", _counter('''
self.counts[func.__name__] += 1
return func(*args, **(kwargs or {}))
'''), expect="nn.Linear forward + backward: counts"),
        Wrong("counts aten ops only", _counter('''
if func.namespace == "aten":
    self.counts[str(func)] += 1
return func(*args, **(kwargs or {}))
'''), expect="hidden case 2: counts"),
        Wrong("marks each op once", _counter('''
self.counts[str(func)] = 1
return func(*args, **(kwargs or {}))
'''), expect="counts"),
        Wrong("decomposes composites like the flop counter", _counter('''
kwargs = kwargs or {}
if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd"):
    with self:
        return func.decompose(*args, **kwargs)
self.counts[str(func)] += 1
return func(*args, **kwargs)
'''), expect="hidden case 3: counts"),
        Wrong("forgets to return the result", _counter('''
self.counts[str(func)] += 1
func(*args, **(kwargs or {}))
'''), expect="04-count-by-overload failed"),
        Wrong("one Counter for every mode", '''
class OverloadCounter(TorchDispatchMode):
    counts = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))
''', expect="the same workload again, with a new OverloadCounter: counts"),
        Wrong("lets the course's lens count", '''
from torchlens_widgets import dispatch_trace as _trace


class OverloadCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def __enter__(self):
        self._lens = _trace()
        self._recorded = self._lens.__enter__()
        return self

    def __exit__(self, *exc):
        self._lens.__exit__(*exc)
        self.counts = Counter(self._recorded.counts())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("hard-codes the visible counts", '''
class OverloadCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = Counter({
            "aten.t.default": 4, "aten.addmm.default": 1, "aten.sum.default": 1, "aten.ones_like.default": 1,
            "aten.expand.default": 1, "aten.mm.default": 1, "aten.sum.dim_IntList": 1, "aten.view.default": 1,
            "aten.detach.default": 2,
        })

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))
''', expect=": counts", gaming=True),
        Wrong("leaves a lying mode entered", '''
class _Quiet(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


_Quiet().__enter__()


class OverloadCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))
''', expect="a mode was left entered", gaming=True),
    ],
    "04-predict-keys": [
        Wrong("predictions without ADInplaceOrView", _rule().replace('"ADInplaceOrView", "AutogradCPU", "AutocastCPU"}',
                                                                     '"AutogradCPU", "AutocastCPU"}', 1),
              expect="predicted_key_sets()['torch.ones(2, 3)']: 1 entry missing"),
        Wrong("requires_grad decides the autograd keys", _rule(autograd="t.requires_grad"),
              expect="predict_keys(torch.ones(2, 3))"),
        Wrong("autocast for every device", _rule(autocast="True"),
              expect="predict_keys(torch.ones(2, 3, device='meta', requires_grad=True))"),
        Wrong("inference tensors lose autocast too", _rule(autocast='device == "CPU" and not torch.is_inference(t)'),
              expect="hidden case 1: 1 entry missing"),
        Wrong("CSR is just sparse", _rule(csr='"Sparse"'), expect="hidden case 1"),
        Wrong("forgets lazy negation", _rule(neg="False"), expect="hidden case 1"),
        Wrong("asks the dispatcher through an alias", _RIGHT_A + '''
_keys = torch._C._dispatch_keys


def predict_keys(t):
    text = str(_keys(t))
    return {n.strip() for n in text[text.index("(") + 1:text.rindex(")")].split(",") if n.strip()}
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("asks the dispatcher through getattr", _RIGHT_A + '''
def predict_keys(t):
    text = str(getattr(torch._C, "_dispatch_" + "keys")(t))
    return {n.strip() for n in text[text.index("(") + 1:text.rindex(")")].split(",") if n.strip()}
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("reads the lens's captured copy", _RIGHT_A + '''
from torchlens_widgets.lenses.dispatch import _dispatch_keys as _captured, _key_names as _names


def predict_keys(t):
    return set(_names(_captured(t).raw_repr()))
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("computes the predictions from tensors", _rule().replace('''
def predicted_key_sets():
    return {''', '''
def predicted_key_sets():
    return {
        "torch.ones(2, 3)": predict_keys(torch.ones(2, 3)),
        "torch.ones(2, 3, device='meta', requires_grad=True)": predict_keys(
            torch.ones(2, 3, device="meta", requires_grad=True)),
        "torch.ones(2, 3).to_sparse()": predict_keys(torch.ones(2, 3).to_sparse()),
        "torch.ones(2, 3, dtype=torch.complex64).conj()": predict_keys(
            torch.ones(2, 3, dtype=torch.complex64).conj()),
    }


def _unused():
    return {'''), expect="predicted_key_sets ran aten.", gaming=True),
        Wrong("rebinds torch._C._dispatch_keys to agree", _RIGHT_A.replace(
            '"AutogradCPU", "AutocastCPU"}', '"AutocastCPU"}') + '''
_real_keys = torch._C._dispatch_keys


def _agreeing(t):
    return _real_keys(t) - torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradCPU)


torch._C._dispatch_keys = _agreeing


def predict_keys(t):
    return {"CPU", "ADInplaceOrView", "AutocastCPU"}
''', expect="predicted_key_sets()[", gaming=True),
    ],
    "04-flop-counter": [
        Wrong("multiply-adds, not flops", _flops(factor="1"), expect="count_flops(a @ b.t())"),
        Wrong("counts mm only", _flops(mm_family="(aten.mm,)", bmm_family="()"), expect="count_flops("),
        Wrong("takes addmm's bias for a matrix", _flops(addmm_args="args[0], args[1]"),
              expect="your code raised IndexError"),
        Wrong("forgets the batch", _flops(batch=""), expect="count_flops(batched matmul)"),
        Wrong("no decomposition under inference_mode", _flops(decompose="False"),
              expect="hidden case 8"),
        Wrong("a total kept across calls", '''
_TOTAL = {"flops": 0}
''' + _flops().replace("    with FlopMode() as mode:\n        fn(*args)\n    return mode.total",
                       "    with FlopMode() as mode:\n        fn(*args)\n    _TOTAL['flops'] += mode.total\n"
                       "    return _TOTAL['flops']"), expect="count_flops("),
        Wrong("returns a float", _flops().replace("return mode.total", "return float(mode.total)"),
              expect="return a plain int"),
        Wrong("uses torch's FlopCounterMode", '''
from torch.utils.flop_counter import FlopCounterMode as _FCM


def count_flops(fn, *args):
    with _FCM(display=False) as counter:
        fn(*args)
    return counter.get_total_flops()
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("calls the check's own helper", '''
from torchlens_widgets.course.exercises import n04 as _n04


def count_flops(fn, *args):
    mode, _ = _n04._trusted_flop_counter()
    with mode(display=False) as counter:
        fn(*args)
    return counter.get_total_flops()
''', expect="the check's own helpers", gaming=True),
        Wrong("patches FlopCounterMode to agree", '''
import torch.utils.flop_counter as _fc

_fc.FlopCounterMode.get_total_flops = lambda self: 7


def count_flops(fn, *args):
    return 7
''', expect="torch.utils.flop_counter was changed in this kernel", gaming=True),
        Wrong("hard-codes the visible answers", '''
_SEEN = iter([210, 480, 630, 630])


def count_flops(fn, *args):
    return next(_SEEN, 0)
''', expect="hidden case 1: got 0", gaming=True),
    ],
}
