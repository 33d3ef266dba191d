"""Notebook 08's exercise checks, without a notebook: references pass visible and hidden cases; wrong sync finders,
timers, predictions and pipelines fail saying why, and a hidden case is named by its number only."""

from __future__ import annotations

import pytest

from torchlens_widgets.course.exercises import n08
from torchlens_widgets.lenses.asyncexec import DeviceSpan, StreamSim

FIND_HIDDEN = [("B", 8), ("B", 0), ("three launches", None)]
TIMER_HIDDEN = [name for name in n08.TIMER_CASES if name != "1000 µs queued before a 640 µs region"]
PIPELINE_HIDDEN = [(3, 500, 200), (1, 50, 50), (6, 120, 120), (4, 200, 300)]
BLOCKS = {
    "y = x @ w": False, "s = y.sum()": False, "v = s.item()": True, "print(s)": True, "h = y.cpu()": True,
    "h = y.to('cpu', non_blocking=True)": False, "idx = torch.nonzero(y > 0)": True, "pos = y[y > 0]": True,
    "z = torch.where(y > 0, y, 0)": False, "y.masked_fill_(y < 0, 0)": False, "if s > 0: pass": True,
    "neg = (y < 0).any()": False, "n = y.shape[0]": False, "vals = y.tolist()": True,
    "b = torch.ones(8).to('cuda')": True, "side.wait_event(done)": False, "done.synchronize()": True,
}


def find_syncs_in(loop, launch_overhead_us=5):  # type: ignore[no-untyped-def]
    sim = StreamSim(launch_overhead_us=launch_overhead_us)
    found = {}
    for i, (_, method, kwargs) in enumerate(loop):
        before = len(sim.syncs())
        getattr(sim, method)(**kwargs)
        if len(sim.syncs()) > before:
            found[i] = sim.syncs()[-1].waited
    return found


def time_region(sim, fn):  # type: ignore[no-untyped-def]
    start, end = sim.event("start"), sim.event("end")
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def pipeline(sim, n, copy_us, compute_us):  # type: ignore[no-untyped-def]
    copy_stream = sim.new_stream("copy stream")
    for i in range(n):
        with sim.use_stream(copy_stream):
            sim.launch(f"copy {i}", copy_us, kind="memcpy")
            ready = sim.event(f"batch {i} ready")
            ready.record()
        sim.default_stream.wait_event(ready)
        sim.launch(f"compute {i}", compute_us)


def test_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("08-find-hidden-syncs", lambda c: (n08.find_hidden_syncs(c, find_syncs_in),
                                                      n08.find_hidden_syncs(c, find_syncs_in, hidden=FIND_HIDDEN))) is None
    assert verdict("08-event-timer", lambda c: (n08.event_timer(c, time_region),
                                                n08.event_timer(c, time_region, hidden=TIMER_HIDDEN))) is None
    assert verdict("08-predict-blocking", lambda c: (n08.predict_blocking(c, BLOCKS),
                                                     n08.predict_blocking(c, BLOCKS, hidden=["grading"]))) is None
    assert verdict("08-overlap-copy", lambda c: (n08.overlap_copy(c, pipeline),
                                                 n08.overlap_copy(c, pipeline, hidden=PIPELINE_HIDDEN))) is None


def test_the_hidden_loop_holds_its_traps() -> None:
    expected = n08._expected_syncs(n08.LOOPS["B"], 8)
    assert 2 not in expected and expected[11] == 0 and 10 in expected
    assert n08._expected_syncs(n08.LOOPS["three launches"], 5) == {}


def test_a_sync_finder_that_empties_the_loop_it_is_given_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    def emptied(loop, launch_overhead_us=5):  # type: ignore[no-untyped-def]
        loop.clear()
        return {}

    message = verdict("08-find-hidden-syncs", lambda c: n08.find_hidden_syncs(c, emptied))
    assert message is not None and "the indices of LOOP_A that synchronise" in message


def test_a_hidden_sync_failure_names_the_case_by_number(verdict) -> None:  # type: ignore[no-untyped-def]
    def fixed_overhead(loop, launch_overhead_us=5):  # type: ignore[no-untyped-def]
        return find_syncs_in(loop)

    assert verdict("08-find-hidden-syncs", lambda c: n08.find_hidden_syncs(c, fixed_overhead)) is None
    message = verdict("08-find-hidden-syncs", lambda c: n08.find_hidden_syncs(c, fixed_overhead, hidden=FIND_HIDDEN))
    expected = n08._expected_syncs(n08.LOOPS["B"], 8)
    assert message is not None and message.startswith("hidden case 1")
    assert "8 µs" not in message and all(f": {v}" not in message for v in expected.values() if v)


def test_a_sync_finder_of_the_learners_own_dict_class_is_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    class Syncs(dict):  # type: ignore[type-arg]
        def __getitem__(self, key):  # type: ignore[no-untyped-def]
            raise AssertionError("the check ran the answer's own __getitem__")

    message = verdict("08-find-hidden-syncs", lambda c: n08.find_hidden_syncs(
        c, lambda loop, launch_overhead_us=5: Syncs(find_syncs_in(loop, launch_overhead_us))))
    assert message is not None and "must return a dict" in message and "got Syncs" in message


def test_a_timer_reading_the_streams_tail_fails_where_the_host_runs_ahead(verdict) -> None:  # type: ignore[no-untyped-def]
    def from_the_tail(sim, fn):  # type: ignore[no-untyped-def]
        stream = sim.current_stream
        begin = stream.tail
        start, end = sim.event(), sim.event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return stream.tail - begin

    assert verdict("08-event-timer", lambda c: n08.event_timer(c, from_the_tail)) is None
    message = verdict("08-event-timer", lambda c: n08.event_timer(c, from_the_tail, hidden=TIMER_HIDDEN))
    assert message is not None and message.startswith(f"hidden case {len(TIMER_HIDDEN) - 1}: time_region(sim, fn)")
    assert "idle" not in message and "105" not in message


def test_a_timer_that_returns_a_number_its_events_do_not_give_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    def model_clock(sim, fn):  # type: ignore[no-untyped-def]
        stream = sim.current_stream
        sim.event().record()
        sim.event().record()  # both before the region: they bracket nothing of it
        begin = max(stream.tail, sim.host_clock_us)
        fn()
        stream.synchronize()
        return max(stream.tail, sim.host_clock_us) - begin

    message = verdict("08-event-timer", lambda c: n08.event_timer(c, model_clock))
    assert message is not None and "not as the time between an event recorded before fn()" in message


@pytest.mark.parametrize(("timer", "says"), [
    (lambda sim, fn: sim.time_host_only(fn), "StreamSim.time_host_only"),
    (lambda sim, fn: (fn(), 640)[1], "recorded 0 event(s)"),
])
def test_wrong_timers_fail_saying_why(verdict, timer, says) -> None:  # type: ignore[no-untyped-def]
    message = verdict("08-event-timer", lambda c: n08.event_timer(c, timer))
    assert message is not None and says in message


def test_a_hidden_host_timer_is_named_without_the_expected_time(verdict) -> None:  # type: ignore[no-untyped-def]
    def sync_after(sim, fn):  # type: ignore[no-untyped-def]
        t0 = sim.host_clock_us
        fn()
        sim.synchronize()
        return sim.host_clock_us - t0

    message = verdict("08-event-timer", lambda c: n08.event_timer(c, sync_after, hidden=["a region containing .item()"]))
    assert message is not None and message.startswith("hidden case 1: time_region returned")
    assert "expected" not in message.split("\n")[0] and ".item()" not in message.split("\n")[0]


def test_predictions_say_how_many_are_wrong_and_hidden_ones_by_number(verdict) -> None:  # type: ignore[no-untyped-def]
    message = verdict("08-predict-blocking", lambda c: n08.predict_blocking(c, {**BLOCKS, "print(s)": False}))
    assert message is not None and message.startswith("1 of your 4 predictions for these calls is wrong")
    wrong = {**BLOCKS, "side.wait_event(done)": True}
    message = verdict("08-predict-blocking", lambda c: n08.predict_blocking(c, wrong, hidden=["grading"]))
    assert message is not None and message.startswith("hidden case 1: 1 of your 13 predictions")
    assert "wait_event" not in message


def test_predictions_of_the_learners_own_classes_are_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    class Call(str):
        pass

    class Blocks(dict):  # type: ignore[type-arg]
        pass

    message = verdict("08-predict-blocking", lambda c: n08.predict_blocking(c, Blocks(BLOCKS)))
    assert message is not None and "BLOCKS must be a dict" in message
    odd = dict(BLOCKS)
    odd[Call("extra")] = True
    message = verdict("08-predict-blocking", lambda c: n08.predict_blocking(c, odd))
    assert message is not None and "the keys of BLOCKS must be the calls (str)" in message


def test_a_pipeline_written_into_the_models_records_fails(verdict) -> None:  # type: ignore[no-untyped-def]
    def forged(sim, n, copy_us, compute_us):  # type: ignore[no-untyped-def]
        for i in range(n):
            sim._device.append(DeviceSpan(f"copy {i}", copy_us * i, copy_us * (i + 1), 1, kind="memcpy", launched_at=0))
            sim._device.append(DeviceSpan(f"compute {i}", copy_us * (i + 1), copy_us * (i + 1) + compute_us, 0,
                                          launched_at=0))

    message = verdict("08-overlap-copy", lambda c: n08.overlap_copy(c, forged))
    assert message is not None and "did not come from a launch at the model's launch cost" in message


def test_a_pipeline_fitted_to_the_visible_case_fails_a_numbered_hidden_case(verdict) -> None:  # type: ignore[no-untyped-def]
    def fitted(sim, n, copy_us, compute_us):  # type: ignore[no-untyped-def]
        pipeline(sim, 4, 200, 300)

    assert verdict("08-overlap-copy", lambda c: n08.overlap_copy(c, fitted)) is None
    message = verdict("08-overlap-copy", lambda c: n08.overlap_copy(c, fitted, hidden=PIPELINE_HIDDEN))
    assert message is not None and message.startswith("hidden case 1: the work enqueued")
    assert "n=3" not in message and "copy 2'" not in message
