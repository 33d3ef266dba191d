"""Wrong answers for notebook 15 (reading traces): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong


def _read(addmm: str = "6", total: str = '"prepare"', rng: str = '"bookkeeping"', child: str = '"aten::addmm"') -> str:
    return (f'READ_TRACE = {{"calls of aten::addmm": {addmm}, "range with the most total time": {total}, '
            f'"range with the most self time": {rng}, "child of aten::linear with the most self time": {child}}}\n')


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


_BUSY = '''def busy_idle(events):
    lanes = {{}}
    for e in events:
        if {keep}:
            lanes.setdefault({lane}, []).append((e["ts"], e["ts"] + e["dur"]))
    out = {{}}
    for lane, spans in lanes.items():
        {order}
        busy, reach = 0.0, spans[0][0]
        for start, end in spans:
            {cover}
        out[lane] = (busy, reach - spans[0][0] - busy)
    return out
'''
_UNION = '''if end > reach:
                busy += end - max(start, reach)
                reach = end'''


def _busy(keep: str = 'e.get("ph") == "X" and e.get("cat") == "cpu_op"', lane: str = '(e["pid"], e["tid"])',
          order: str = "spans.sort()", cover: str = _UNION) -> str:
    return _BUSY.format(keep=keep, lane=lane, order=order, cover=cover)


_TOP = '''def top_self(events, step, k):
    root = next(e for e in events if e.get("ph") == "X" and e.get("name") == step)
    inside = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
              and {lane} and e is not root
              and {within}]
    ops = {{e["name"] for e in inside if {ranked}}}
    rows = [(name, own) for name, (_, _, own) in self_times(inside).items() if name in ops]
    return sorted(rows, key=lambda row: {key})[:k]
'''


def _top(lane: str = '(e["pid"], e["tid"]) == (root["pid"], root["tid"])',
         within: str = 'root["ts"] <= e["ts"] and e["ts"] + e["dur"] <= root["ts"] + root["dur"]',
         ranked: str = 'e["cat"] == "cpu_op"', key: str = "(-row[1], row[0])") -> str:
    return _TOP.format(lane=lane, within=within, ranked=ranked, key=key)


def _step(body: str) -> str:
    return f"def faster_step(model, raw, labels):\n{body}\n"


WRONG = {
    "15-read-trace": [
        Wrong("counts one forward's addmm only", _read(addmm="3"), "calls of aten::addmm"),
        Wrong("total time where self time is asked", _read(rng='"prepare"'), "range with the most self time"),
        Wrong("self time where total time is asked", _read(total='"bookkeeping"'), "range with the most total time"),
        Wrong("the first child of linear", _read(child='"aten::t"'), "child of aten::linear"),
        Wrong("a count as text", _read(addmm='"6"'), "calls of aten::addmm"),
        Wrong("values that equal anything", '''
class _Any(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__
READ_TRACE = {"calls of aten::addmm": _Any(), "range with the most total time": _Any(),
              "range with the most self time": _Any(), "child of aten::linear with the most self time": _Any()}
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

READ_TRACE = _Peek({"calls of aten::addmm": 0, "range with the most total time": "?",
                    "range with the most self time": "?", "child of aten::linear with the most self time": "?"})
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
    "15-idle-gaps": [
        Wrong("sums the durations: nested ops count twice", _busy(cover="busy += end - start\n            "
                                                                       "reach = max(reach, end)"), "busy time of"),
        Wrong("counts the ranges as busy", _busy(keep='e.get("ph") == "X" and e.get("cat") in ("cpu_op", '
                                                      '"user_annotation")'), "busy time of"),
        Wrong("one lane per thread id, whatever the process", _busy(lane='(0, e["tid"])'), "the threads in your dict"),
        Wrong("assumes the events come sorted", _busy(order="pass"), "time of"),
        Wrong("idle as the window minus nothing", _busy(cover="reach = max(reach, end)"), "busy time of"),
        Wrong("asks the lens", '''
def busy_idle(events):
    from torchlens_widgets.lenses.profile import load_profile
    trace = load_profile({"traceEvents": events})
    return {(t.pid, t.tid): (0.0, 0.0) for t in trace.threads}
''', "which this exercise asks you not to use", gaming=True),
        Wrong("a dict whose items read the check's frames", '''
import sys

class _Lanes(dict):
    def items(self):
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if type(value) is dict and value is not self and value and all(type(k) is tuple for k in value):
                    return value.items()
            frame = frame.f_back
        return dict.items(self)

def busy_idle(events):
    return _Lanes()
''', "busy_idle should return a plain dict", gaming=True),
    ],
    "15-top-self": [
        Wrong("ranks the ranges too", _top(ranked="True"), "the names, in order"),
        Wrong("every step together", _top(within="True"), "self time of 'aten::addmm'"),
        Wrong("every thread during the step", _top(lane="True"), "hidden case 4: the names, in order"),
        Wrong("smallest first", _top(key="(row[1], row[0])"), "the names, in order"),
        Wrong("no tie-break on the name", _top(key="-row[1]"), "hidden case 3: the names, in order"),
        Wrong("total time instead of self", _top().replace("(name, own) for name, (_, _, own)",
                                                           "(name, total) for name, (_, total, _)"),
              "the names, in order[0]: expected 'aten::addmm', got 'aten::linear'"),
        Wrong("asks the lens", '''
def top_self(events, step, k):
    from torchlens_widgets.lenses.profile import load_profile
    trace = load_profile({"traceEvents": events})
    rows = [(a.name, a.self_time) for a in trace.key_averages("cpu_op")]
    return sorted(rows, key=lambda row: (-row[1], row[0]))[:k]
''', "which this exercise asks you not to use", gaming=True),
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
    hit = _cache.get(id(raw))
    if hit is not None and hit[0] is raw and hit[1] is model:  # the same objects, kept alive: no reused id
        loss, grads = hit[2], hit[3]
        for p, g in zip(model.parameters(), grads):
            p.grad = g.clone()
        return loss
    loss = slow_step(model, raw, labels)
    _cache[id(raw)] = (raw, model, loss, [p.grad.clone() for p in model.parameters()])
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
