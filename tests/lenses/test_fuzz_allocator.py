"""Fuzzing the caching-allocator simulator and its replays: absurd sizes, wrong handles, random programs,
malformed trace events. Each ends in a true result or AllocatorError/SimulatedOOM with advice, in 10 s."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzzing import outcome
from torchlens_widgets.lenses.allocator import (
    AllocatorError,
    CachingAllocatorSim,
    SimulatedOOM,
    counterfactual,
    replay,
)

OWN = (AllocatorError, SimulatedOOM)


@pytest.mark.parametrize(
    "size",
    [0, -5, 2**70, 10**30, 1.5, float("nan"), float("inf"), True, "10", None, [512]],
    ids=["zero", "negative", "2**70", "1e30", "float", "nan", "inf", "bool", "str", "none", "list"],
)
def test_absurd_sizes_get_advice(size: object) -> None:
    assert isinstance(outcome(lambda: CachingAllocatorSim().malloc(size), AllocatorError), AllocatorError)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "handle", [[1, 2], {"h": 1}, "1", 1.0, None, True, 10**30, -1], ids=["list", "dict", "str", "float", "none",
                                                                         "bool", "huge", "negative"])
def test_wrong_handles_get_advice(handle: object) -> None:
    sim = CachingAllocatorSim()
    sim.malloc(1000)
    for op in (sim.free, lambda h: sim.record_stream(h, 1)):
        assert isinstance(outcome(lambda op=op: op(handle), AllocatorError), AllocatorError)


@pytest.mark.parametrize(
    "settings_",
    [{"capacity": -1}, {"capacity": 1.5}, {"max_split_size_mb": 1}, {"garbage_collection_threshold": 2.0},
     {"roundup_power2_divisions": "x"}, {"expandable_segments": "yes please"}, {"nonsense": 1}],
    ids=["capacity-neg", "capacity-float", "split-small", "gc-2", "divisions-str", "expandable-str", "unknown"],
)
def test_bad_settings_get_advice(settings_: dict) -> None:
    result = outcome(lambda: replay([{"action": "alloc", "addr": 0, "size": 4096}], **settings_), AllocatorError)
    if isinstance(result, CachingAllocatorSim):  # accepted: it must then have worked
        assert result.stats()["allocated_bytes.all.current"] == 4096


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("malloc"), st.integers(1, 300 << 20), st.integers(0, 2)),
        st.tuples(st.just("free"), st.integers(0, 40), st.just(0)),
        st.tuples(st.just("record_stream"), st.integers(0, 40), st.integers(0, 2)),
        st.tuples(st.just("sync"), st.just(0), st.one_of(st.none(), st.integers(0, 2))),
        st.tuples(st.just("empty_cache"), st.just(0), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(ops=OPS, expandable=st.booleans(), capacity=st.sampled_from([None, 64 << 20, 1 << 30]))
def test_random_programs_keep_the_books_straight(ops: list[tuple], expandable: bool, capacity: int | None) -> None:
    sim = CachingAllocatorSim(expandable_segments=expandable, capacity=capacity)
    handles: list[int] = []
    for op, a, b in ops:
        if op == "malloc":
            h = outcome(lambda a=a, b=b: sim.malloc(a, b), OWN)
            if isinstance(h, int):
                handles.append(h)
        elif op in ("free", "record_stream") and handles:
            h = handles[a % len(handles)]
            outcome(lambda h=h, op=op, b=b: sim.free(h) if op == "free" else sim.record_stream(h, b), OWN)
        elif op == "sync":
            sim.sync(b)
        elif op == "empty_cache":
            sim.empty_cache()
    st_ = sim.stats()
    assert 0 <= st_["allocated_bytes.all.current"] <= st_["reserved_bytes.all.current"]
    assert sum(s["total_size"] for s in sim.segments()) == st_["reserved_bytes.all.current"]
    if capacity is not None:
        assert st_["reserved_bytes.all.peak"] <= capacity
    # the simulator's own trace replays to the same books
    again = outcome(lambda: replay(sim.trace(), expandable_segments=expandable, capacity=capacity), OWN)
    assert again.stats()["allocated_bytes.all.current"] == st_["allocated_bytes.all.current"]


@pytest.mark.parametrize(
    "events",
    [
        5,
        "alloc",
        {"action": "alloc"},
        [None],
        [{"action": "alloc"}],
        [{"action": "alloc", "addr": "x", "size": "y"}],
        [{"action": "alloc", "addr": 1, "size": float("nan")}],
        [{"action": "alloc", "addr": 1, "size": 10**30}],
        [{"action": "alloc", "addr": 1, "size": -1}],
        [{"action": "alloc", "addr": 1, "size": 512, "stream": "s"}],
        [{"action": "free_requested"}],
        [{"action": "free_completed", "addr": 99, "size": 512}],
        [{"action": "explode", "addr": 1, "size": 2}],
        [{"action": "alloc", "addr": 1, "size": 512}, {"action": "alloc", "addr": 1, "size": 512}],
    ],
    ids=["int", "str", "dict", "none-event", "missing-keys", "string-fields", "nan", "1e30", "negative",
         "string-stream", "free-no-addr", "free-unknown", "unknown-action", "same-addr-twice"],
)
def test_malformed_events_get_advice(events: object) -> None:
    result = outcome(lambda: counterfactual(events), OWN)  # type: ignore[arg-type]
    if isinstance(result, dict):  # accepted (unknown actions and unknown frees are skipped, as torch's are)
        assert all(isinstance(v, int) and v >= 0 for v in result.values())


EVENT = st.fixed_dictionaries(
    {"action": st.sampled_from(["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                                "segment_map", "segment_unmap", "oom", "snapshot"])},
    optional={"addr": st.one_of(st.integers(-5, 1 << 40), st.text(max_size=3), st.none()),
              "size": st.one_of(st.integers(-5, 1 << 34), st.floats(allow_nan=True), st.none()),
              "stream": st.one_of(st.integers(0, 3), st.text(max_size=2))},
)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(events=st.lists(EVENT, max_size=40))
def test_random_traces_never_escape_as_raw_errors(events: list[dict]) -> None:
    result = outcome(lambda: counterfactual(events, expandable_segments=True), OWN)
    if isinstance(result, dict):
        assert all(isinstance(v, int) and not math.isnan(v) for v in result.values())
