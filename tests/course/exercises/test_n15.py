"""Notebook 15's exercise checks, without a notebook: references pass visible and hidden cases; wrong readings,
tables and steps fail saying where; answers of the learner's own classes and timed calls answered from a cache
fail; a hidden case is named by its number only."""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from torchlens_widgets.course.exercises import n15

READ_TRACE = {"calls of aten::addmm": 6, "range with the most total time": "prepare",
              "range with the most self time": "bookkeeping", "child of aten::linear with the most self time": "aten::addmm"}
HIDDEN_FACTS = [[("calls of aten::addmm", 6), ("range with the most self time", "bookkeeping")]]
HIDDEN_TABLES = list(n15.SELF_CASES)
HIDDEN_STEPS = [(3, 2), (200, 3)]
HIDDEN_LANES = list(n15.IDLE_CASES)
HIDDEN_TOPS = list(n15.TOP_CASES)


def self_times(events, by_length=True):  # type: ignore[no-untyped-def]
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    spans.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"] if by_length else 0))
    child_time = [0.0] * len(spans)
    open_spans: list[int] = []
    for i, e in enumerate(spans):
        while open_spans and (spans[open_spans[-1]]["pid"], spans[open_spans[-1]]["tid"]) != (e["pid"], e["tid"]):
            open_spans.pop()
        while open_spans and spans[open_spans[-1]]["ts"] + spans[open_spans[-1]]["dur"] < e["ts"] + e["dur"]:
            open_spans.pop()
        if open_spans:
            child_time[open_spans[-1]] += e["dur"]
        open_spans.append(i)
    table: dict = {}
    for e, inner in zip(spans, child_time):
        count, total, own = table.get(e["name"], (0, 0.0, 0.0))
        table[e["name"]] = (count + 1, total + e["dur"], own + e["dur"] - inner)
    return table


def busy_idle(events):  # type: ignore[no-untyped-def]
    lanes: dict = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            lanes.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    out = {}
    for lane, spans in lanes.items():
        spans.sort()
        busy, reach = 0.0, spans[0][0]
        for start, end in spans:
            if end > reach:
                busy += end - max(start, reach)
                reach = end
        out[lane] = (busy, reach - spans[0][0] - busy)
    return out


def top_self(events, step, k):  # type: ignore[no-untyped-def]
    root = next(e for e in events if e.get("ph") == "X" and e.get("name") == step)
    inside = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
              and (e["pid"], e["tid"]) == (root["pid"], root["tid"]) and e is not root
              and root["ts"] <= e["ts"] and e["ts"] + e["dur"] <= root["ts"] + root["dur"]]
    ops = {e["name"] for e in inside if e["cat"] == "cpu_op"}
    rows = [(name, own) for name, (_, _, own) in self_times(inside).items() if name in ops]
    return sorted(rows, key=lambda r: (-r[1], r[0]))[:k]


def faster_step(model, raw, labels):  # type: ignore[no-untyped-def]
    x = (raw - raw.mean(0)) / raw.std(0)
    loss = F.cross_entropy(model(x), labels)
    loss.backward()
    return loss


def slow_loss_step(model, raw, labels):  # type: ignore[no-untyped-def]
    x = (raw - raw.mean(0)) / raw.std(0)
    logits = model(x)
    loss = sum(F.cross_entropy(logits[i:i + 1], labels[i:i + 1]) for i in range(len(labels))) / len(labels)
    loss.backward()
    return loss


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("15-read-trace", lambda c: (n15.read_trace(c, READ_TRACE),
                                               n15.read_trace(c, READ_TRACE, hidden=HIDDEN_FACTS))) is None
    assert verdict("15-self-time", lambda c: (n15.self_times(c, self_times),
                                              n15.self_times(c, self_times, hidden=HIDDEN_TABLES))) is None
    assert verdict("15-idle-gaps", lambda c: (n15.busy_idle(c, busy_idle),
                                              n15.busy_idle(c, busy_idle, hidden=HIDDEN_LANES))) is None
    assert verdict("15-top-self", lambda c: (n15.top_self(c, top_self),
                                             n15.top_self(c, top_self, hidden=HIDDEN_TOPS))) is None
    assert verdict("15-fix-step", lambda c: (n15.fix_step(c, faster_step),
                                             n15.fix_step(c, faster_step, hidden=HIDDEN_STEPS))) is None


def test_a_wrong_reading_is_not_revealed_on_the_first_try(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("15-read-trace", lambda c: n15.read_trace(c, {**READ_TRACE, "calls of aten::addmm": 3}))
    assert "READ_TRACE['calls of aten::addmm']" in message and "6" not in message.split("Hint")[0]


def test_a_dict_of_the_learners_own_class_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    class Peek(dict):  # answers every lookup from the check's own frames
        def __getitem__(self, key):  # type: ignore[no-untyped-def]
            frame = sys._getframe(1)
            while frame is not None:
                for value in list(frame.f_locals.values()):
                    if type(value) is dict and value is not self and key in value:
                        return value[key]
                frame = frame.f_back
            return dict.__getitem__(self, key)

    message = verdict("15-read-trace", lambda c: n15.read_trace(c, Peek({k: None for k in READ_TRACE})))
    assert "READ_TRACE should be a plain dict" in message
    message = verdict("15-self-time", lambda c: n15.self_times(c, lambda events: Peek(self_times(events))))
    assert "should return a plain dict" in message


def test_a_sort_by_start_alone_fails_on_ties(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("15-self-time", lambda c: n15.self_times(c, lambda events: self_times(events, by_length=False)))
    assert message.startswith("spans that start together, the shorter listed first: self time")


def test_a_hidden_table_failure_names_the_case_number_only(verdict) -> None:  # type: ignore[no-untyped-def]
    def nests_across_processes(events):  # type: ignore[no-untyped-def]
        return self_times([{**e, "pid": 0} for e in events])

    assert verdict("15-self-time", lambda c: n15.self_times(c, nests_across_processes)) is None
    message = verdict("15-self-time", lambda c: n15.self_times(c, nests_across_processes,
                                                               hidden=["no events", "two processes"]))
    assert message.startswith("hidden case 2: self time of one name is")
    assert "'x'" not in message and "expected" not in message.split("Hint")[0]


def test_an_error_on_a_hidden_case_names_its_type_only(verdict) -> None:  # type: ignore[no-untyped-def]
    def needs_a_span(events):  # type: ignore[no-untyped-def]
        return {"first": (1, events[0]["dur"], 0.0)}

    message = verdict("15-self-time", lambda c: n15.self_times(c, needs_a_span, hidden=["no events"]))
    assert message.startswith("hidden case 1: your code raised IndexError")


def test_the_lens_is_off_limits(verdict) -> None:  # type: ignore[no-untyped-def]
    def asks_the_lens(events):  # type: ignore[no-untyped-def]
        from torchlens_widgets.lenses.profile import load_profile

        trace = load_profile({"traceEvents": events})
        return {a.name: (a.count, a.total, a.self_time) for a in trace.averages}

    message = verdict("15-self-time", lambda c: n15.self_times(c, asks_the_lens))
    assert "which this exercise asks you not to use" in message


def test_a_step_that_sums_fails_on_its_loss(verdict) -> None:  # type: ignore[no-untyped-def]
    def sums(model, raw, labels):  # type: ignore[no-untyped-def]
        loss = F.cross_entropy(model((raw - raw.mean(0)) / raw.std(0)), labels, reduction="sum")
        loss.backward()
        return loss

    message = verdict("15-fix-step", lambda c: n15.fix_step(c, sums))
    assert message.startswith("a batch of 64: the loss")
    message = verdict("15-fix-step", lambda c: n15.fix_step(c, sums, hidden=HIDDEN_STEPS))
    assert message.startswith("hidden case 1: the loss") and "batch of 3" not in message


def test_the_per_sample_loop_is_too_slow(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("15-fix-step", lambda c: n15.fix_step(c, slow_loss_step))
    assert "as fast as the original" in message


def test_timed_calls_cannot_be_answered_from_a_cache(verdict) -> None:  # type: ignore[no-untyped-def]
    cache: dict = {}

    def cached(model, raw, labels):  # type: ignore[no-untyped-def]
        key = (id(model), id(raw))
        if key in cache:
            loss, grads = cache[key]
            for p, g in zip(model.parameters(), grads):
                p.grad = g.clone()
            return loss
        loss = slow_loss_step(model, raw, labels)
        cache[key] = (loss, [p.grad.clone() for p in model.parameters()])
        return loss

    message = verdict("15-fix-step", lambda c: n15.fix_step(c, cached))
    assert "as fast as the original" in message


def test_timed_calls_are_checked_too(verdict) -> None:  # type: ignore[no-untyped-def]
    calls = []

    def honest_when_judged(model, raw, labels):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) <= 2:
            return faster_step(model, raw, labels)
        loss = F.cross_entropy(model(raw), labels)  # the timed calls skip the normalisation
        loss.backward()
        return loss

    message = verdict("15-fix-step", lambda c: n15.fix_step(c, honest_when_judged))
    assert message.startswith("timed call 1 (a batch of 256): the loss")


def test_a_loss_of_a_tensor_subclass_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    class Loss(torch.Tensor):
        pass

    def subclass(model, raw, labels):  # type: ignore[no-untyped-def]
        return faster_step(model, raw, labels).detach().as_subclass(Loss)

    message = verdict("15-fix-step", lambda c: n15.fix_step(c, subclass))
    assert "faster_step should return the loss, a 0-d tensor; got Loss" in message


def test_a_reading_of_total_time_for_self_time_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("15-read-trace", lambda c: n15.read_trace(c, {**READ_TRACE,
                                                                   "range with the most self time": "prepare"}))
    assert "READ_TRACE['range with the most self time']" in message


def test_busy_time_is_a_union_not_a_sum(verdict) -> None:  # type: ignore[no-untyped-def]
    def sums(events):  # type: ignore[no-untyped-def]
        out: dict = {}
        for e in events:
            if e.get("ph") == "X" and e.get("cat") == "cpu_op":
                lane = (e["pid"], e["tid"])
                first, last, busy = out.get(lane, (e["ts"], e["ts"] + e["dur"], 0.0))
                out[lane] = (min(first, e["ts"]), max(last, e["ts"] + e["dur"]), busy + e["dur"])
        return {lane: (busy, last - first - busy) for lane, (first, last, busy) in out.items()}

    message = verdict("15-idle-gaps", lambda c: n15.busy_idle(c, sums))
    assert message.startswith("one thread, nested ops, a range, a Python frame and an instant event: busy time")
    message = verdict("15-idle-gaps", lambda c: n15.busy_idle(c, busy_idle, hidden=["no events", "one span"]))
    assert message is None


def test_a_hidden_lane_failure_names_the_case_number_only(verdict) -> None:  # type: ignore[no-untyped-def]
    def one_lane(events):  # type: ignore[no-untyped-def]
        merged = busy_idle([{**e, "pid": 0} for e in events])
        return {(7, 1) if k == (0, 1) else k: v for k, v in merged.items()}

    message = verdict("15-idle-gaps", lambda c: n15.busy_idle(c, one_lane,
                                                              hidden=["one span", "two processes, one tid"]))
    assert message.startswith("hidden case 2: the threads in your dict")
    assert "(1, 1)" not in message and "(2, 1)" not in message  # the case's own threads are not shown


def test_top_self_of_every_step_together_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    def whole_trace(events, step, k):  # type: ignore[no-untyped-def]
        table = self_times(events)
        ops = {e["name"] for e in events if e.get("cat") == "cpu_op"}
        rows = [(name, own) for name, (_, _, own) in table.items() if name in ops]
        return sorted(rows, key=lambda r: (-r[1], r[0]))[:k]

    message = verdict("15-top-self", lambda c: n15.top_self(c, whole_trace))
    assert message.startswith("three steps, the middle one, top 2")


def test_the_traces_the_checks_record_leave_nothing_in_tmpdir(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each call exported a trace into a fresh mkdtemp folder and left it in /tmp (one per check run)."""
    import tempfile

    from torchlens_widgets.course.exercises import n15

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert n15._recorded() and n15._scheduled()
    assert list(tmp_path.iterdir()) == []
