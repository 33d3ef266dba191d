"""Wrong answers for notebook 15 (reading traces): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong


def _read(addmm: str = "6", rng: str = '"bookkeeping"', child: str = '"aten::addmm"') -> str:
    return (f'READ_TRACE = {{"calls of aten::addmm": {addmm}, "range with the most self time": {rng}, '
            f'"child of aten::linear with the most self time": {child}}}\n')


_WALK = '''def self_times(events):
    spans = [e for e in events if {keep}]
    spans.sort(key=lambda e: ({key}))
    child_time = [0.0] * len(spans)
    open_spans = []
    for i, e in enumerate(spans):
        while open_spans and {same_lane}:
            open_spans.pop()
        while open_spans and spans[open_spans[-1]]["ts"] + spans[open_spans[-1]]["dur"] < e["ts"] + e["dur"]:
            open_spans.pop()
        {charge}
        open_spans.append(i)
    table = {{}}
    for e, inner in zip(spans, child_time):
        count, total, own = table.get(e["name"], (0, 0.0, 0.0))
        table[e["name"]] = (count + 1, total + e["dur"], own + e["dur"] - inner)
    return table
'''
_KEEP = 'e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")'
_KEY = 'e["pid"], e["tid"], e["ts"], -e["dur"]'
_LANE = '(spans[open_spans[-1]]["pid"], spans[open_spans[-1]]["tid"]) != (e["pid"], e["tid"])'
_DIRECT = 'if open_spans:\n            child_time[open_spans[-1]] += e["dur"]'


def _walk(keep: str = _KEEP, key: str = _KEY, same_lane: str = _LANE, charge: str = _DIRECT) -> str:
    return _WALK.format(keep=keep, key=key, same_lane=same_lane, charge=charge)


def _step(body: str) -> str:
    return f"def faster_step(model, raw, labels):\n{body}\n"


WRONG = {
    "15-read-trace": [
        Wrong("counts one forward's addmm only", _read(addmm="3"), "calls of aten::addmm"),
        Wrong("the range with the most total time", _read(rng='"forward"'), "range with the most self time"),
        Wrong("the first child of linear", _read(child='"aten::t"'), "child of aten::linear"),
        Wrong("a count as text", _read(addmm='"6"'), "calls of aten::addmm"),
        Wrong("values that equal anything", '''
class _Any(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__
READ_TRACE = {"calls of aten::addmm": _Any(), "range with the most self time": _Any(),
              "child of aten::linear with the most self time": _Any()}
''', "calls of aten::addmm", gaming=True),
        Wrong("a dict whose lookups read the check's frames", '''
import sys

class _Peek(dict):
    def __getitem__(self, key):
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if type(value) is dict and value is not self and key in value and set(value) == set(dict.keys(self)):
                    return value[key]
            frame = frame.f_back
        return dict.__getitem__(self, key)

READ_TRACE = _Peek({"calls of aten::addmm": 0, "range with the most self time": "?",
                    "child of aten::linear with the most self time": "?"})
''', "READ_TRACE should be a plain dict", gaming=True),
    ],
    "15-self-time": [
        Wrong("self is the total", _walk(charge="pass"), "self time of"),
        Wrong("subtracts every descendant, not only the children", _walk(
            charge="for k in open_spans:\n            child_time[k] += e[\"dur\"]"), "self time of"),
        Wrong("nests across threads", _walk(same_lane="False"), "two threads"),
        Wrong("keeps the Python frames and instants", _walk(keep='e.get("ph") in ("X", "i") and "dur" in e'),
              "the names in your table"),
        Wrong("assumes the events come sorted", _walk(key="0"), "self time of"),
        Wrong("asks the lens", '''
def self_times(events):
    from torchlens_widgets.lenses.profile import load_profile
    trace = load_profile({"traceEvents": events})
    return {a.name: (a.count, a.total, a.self_time) for a in trace.averages}
''', "which this exercise asks you not to use", gaming=True),
        Wrong("sorts by start only, no tie-break on length", _walk(key='e["pid"], e["tid"], e["ts"]'),
              "spans that start together, the shorter listed first: self time"),
        Wrong("a table whose lookups read the check's frames", '''
import sys

class _Table(dict):
    def __getitem__(self, name):
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if type(value) is dict and value is not self and name in value and type(value[name]) is tuple:
                    return value[name]
            frame = frame.f_back
        return dict.__getitem__(self, name)

def self_times(events):
    names = {e["name"] for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")}
    return _Table({name: (0, 0.0, 0.0) for name in names})
''', "self_times should return a plain dict", gaming=True),
    ],
    "15-fix-step": [
        Wrong("still one loss per sample, stacked", _step('''    x = (raw - raw.mean(0)) / raw.std(0)
    logits = model(x)
    loss = torch.stack([F.cross_entropy(logits[i:i + 1], labels[i:i + 1]) for i in range(len(labels))]).mean()
    loss.backward()
    return loss'''), "as fast as the original"),
        Wrong("sums instead of averaging", _step('''    x = (raw - raw.mean(0)) / raw.std(0)
    loss = F.cross_entropy(model(x), labels, reduction="sum")
    loss.backward()
    return loss'''), "the loss"),
        Wrong("drops the normalisation", _step('''    loss = F.cross_entropy(model(raw), labels)
    loss.backward()
    return loss'''), "the loss"),
        Wrong("no backward", _step('''    x = (raw - raw.mean(0)) / raw.std(0)
    return F.cross_entropy(model(x), labels)'''), "no .grad"),
        Wrong("takes an optimizer step too", _step('''    x = (raw - raw.mean(0)) / raw.std(0)
    loss = F.cross_entropy(model(x), labels)
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    return loss'''), "changed the model's parameters"),
        Wrong("remembers the first answer", '''
_memo = {}
def faster_step(model, raw, labels):
    if "loss" not in _memo:
        x = (raw - raw.mean(0)) / raw.std(0)
        loss = F.cross_entropy(model(x), labels)
        loss.backward()
        _memo["loss"] = loss
        _memo["grads"] = [p.grad.clone() for p in model.parameters()]
        return loss
    for p, g in zip(model.parameters(), _memo["grads"]):
        p.grad = g.clone()
    return _memo["loss"]
''', "a batch of", gaming=True),
        Wrong("answers the timed calls from a cache", '''
_cache = {}

def faster_step(model, raw, labels):
    key = (id(model), id(raw))
    if key in _cache:
        loss, grads = _cache[key]
        for p, g in zip(model.parameters(), grads):
            p.grad = g.clone()
        return loss
    loss = slow_step(model, raw, labels)
    _cache[key] = (loss, [p.grad.clone() for p in model.parameters()])
    return loss
''', "as fast as the original", gaming=True),
        Wrong("honest only while the check records it", '''
import sys

def faster_step(model, raw, labels):
    if sys.getprofile() is not None:  # the check's recorder: do the whole step
        x = (raw - raw.mean(0)) / raw.std(0)
    else:  # timed: skip the normalisation
        x = raw
    loss = F.cross_entropy(model(x), labels)
    loss.backward()
    return loss
''', "timed call 1 (a batch of 256): the loss", gaming=True),
        Wrong("a loss whose detach() reads the check's frames", '''
import sys

class _Loss(torch.Tensor):
    def detach(self):
        frame = sys._getframe(1)
        while frame is not None:
            for name, value in list(frame.f_locals.items()):
                if "expected" in name and type(value) is torch.Tensor and value.dim() == 0:
                    return value.detach()
            frame = frame.f_back
        return torch.Tensor.detach(self)

def faster_step(model, raw, labels):
    x = (raw - raw.mean(0)) / raw.std(0)
    loss = F.cross_entropy(model(x), labels)
    loss.backward()
    return (loss * len(labels)).detach().as_subclass(_Loss)  # the summed loss, dressed as the mean
''', "faster_step should return the loss, a 0-d tensor; got _Loss", gaming=True),
    ],
}
