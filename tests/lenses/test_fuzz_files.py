"""Fuzzing the file readers: memory snapshots (load_snapshot) and profiler traces (load_trace).

Damaged, crafted and absurd files end in a MemorySnapshot/Lanes or the module's own error with advice,
within 10 s; a pickle cannot run code; a small file cannot cost minutes or gigabytes.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import os
import pickle
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzzing import outcome
from torchlens_widgets.lenses.asyncexec import TraceError, load_trace
from torchlens_widgets.lenses.memory import MemorySnapshot, SnapshotError, load_snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SEGMENTS = json.loads((FIXTURES / "memory" / "truncated.json").read_text())  # segments, blocks and a trace
STEP_TRACE = (FIXTURES / "lanes" / "step_trace.json").read_text()


def _snap(obj: object) -> MemorySnapshot | SnapshotError:
    result = outcome(lambda: load_snapshot(obj), SnapshotError)
    if isinstance(result, MemorySnapshot):  # a loaded snapshot is usable: its pictures' data build
        result.timeline()
        if result.events:
            result.state_at(len(result.events) - 1)
    return result


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# -- explicit hostile cases ---------------------------------------------------------------------------


def _mutated(path: list[object], value: object) -> dict:
    snap = copy.deepcopy(SEGMENTS)
    target = snap
    for key in path[:-1]:
        target = target[key]  # type: ignore[index]
    target[path[-1]] = value  # type: ignore[index]
    return snap


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (["segments", 0, "total_size"], float("nan")),
        (["segments", 0, "total_size"], 1e400),
        (["segments", 0, "total_size"], -4096),
        (["segments", 0, "segment_pool_id"], "pool-a"),
        (["segments", 0, "device"], -3),
        (["segments", 0, "blocks"], 5),
        (["segments", 0, "blocks", 0, "state"], {"x": 1}),
        (["segments", 0, "frames"], [[[[[]]]]]),
        (["device_traces"], [[{"action": "alloc", "addr": "0x10", "size": "big"}]]),
        (["device_traces"], [[{"action": "free_completed", "addr": 2**80, "size": -1}]]),
        (["device_traces"], [[None, 3, "alloc"]]),
        (["device_traces"], {"0": []}),
        (["segments"], "everything"),
    ],
    ids=["nan-size", "1e400-size", "negative-size", "string-pool", "negative-device", "int-blocks",
         "dict-state", "deep-frames", "string-fields", "huge-addr", "junk-events", "dict-traces", "str-segments"],
)
def test_damaged_fields_load_with_notes_or_fail_with_advice(path: list[object], value: object) -> None:
    _snap(_mutated(path, value))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        os.urandom(2048),
        b"\x80\x04" + os.urandom(200),
        gzip.compress(pickle.dumps(SEGMENTS))[:60],
        b"\x1f\x8b" + os.urandom(100),
        pickle.dumps(SEGMENTS)[:-20],
        json.dumps(SEGMENTS).encode()[:-5],
        b"[" * 100_000 + b"]" * 100_000,
        "ünïcödé".encode("utf-16"),
    ],
    ids=["empty", "random", "pickle-garbage", "truncated-gzip", "bad-gzip", "truncated-pickle", "truncated-json",
         "deep-json", "utf16"],
)
def test_damaged_files_fail_with_advice(tmp_path: Path, data: bytes) -> None:
    err = _snap(_write(tmp_path, "snap.pickle", data))
    assert isinstance(err, SnapshotError)


class _Boom:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, ("echo pwned > /dev/null",))


def test_a_pickle_cannot_run_code(tmp_path: Path) -> None:
    err = _snap(_write(tmp_path, "evil.pickle", pickle.dumps({"segments": [], "device_traces": [[_Boom()]]})))
    assert isinstance(err, SnapshotError) and "os" in str(err)


def test_a_small_crafted_pickle_cannot_cost_minutes(tmp_path: Path) -> None:
    """18 KB that reference one block dict 9 million times (and its 50 frames each)."""
    block = {"address": 0, "size": 512, "requested_size": 512, "state": "active_allocated",
             "frames": [{"filename": "a.py", "line": 1, "name": "f"}] * 50}
    seg = {"device": 0, "address": 0, "total_size": 2**21, "allocated_size": 512, "active_size": 512,
           "requested_size": 512, "stream": 0, "segment_type": "small", "segment_pool_id": [0, 0],
           "is_expandable": False, "frames": [], "blocks": [block] * 3000}
    data = pickle.dumps({"segments": [seg] * 3000, "device_traces": [[]]})
    assert len(data) < 20_000
    t0 = time.monotonic()
    err = _snap(_write(tmp_path, "dos.pickle", data))
    assert isinstance(err, SnapshotError) and "more than" in str(err)
    assert time.monotonic() - t0 < 2


def test_a_gzip_bomb_stops_at_the_bound_without_inflating_it_all(tmp_path: Path) -> None:
    from torchlens_widgets.lenses.files import MAX_FILE_BYTES

    raw = gzip.compress(b"[" + b" " * (MAX_FILE_BYTES + (64 << 20)) + b"]", compresslevel=9)
    assert len(raw) < 3 << 20
    t0 = time.monotonic()
    err = _snap(_write(tmp_path, "bomb.json.gz", raw))
    assert isinstance(err, SnapshotError) and "MiB" in str(err)
    assert time.monotonic() - t0 < 10


def test_pools_never_merge_across_a_small_and_a_large_expandable_segment() -> None:
    mib2 = 2 << 20
    def seg(addr: int, kind: str, pool: list[int]) -> dict:
        return {"device": 0, "address": addr, "total_size": mib2, "allocated_size": 512, "active_size": 512,
                "requested_size": 512, "stream": 0, "segment_type": kind, "segment_pool_id": pool,
                "is_expandable": True, "frames": [],
                "blocks": [{"address": addr, "size": 512, "requested_size": 512, "state": "active_allocated"},
                           {"address": addr + 512, "size": mib2 - 512, "requested_size": 0, "state": "inactive"}]}
    snap = load_snapshot({"segments": [seg(0, "large", [0, 0]), seg(mib2, "small", [0, 1])],
                          "device_traces": [[{"action": "alloc", "addr": 10 * mib2, "size": 512, "stream": 0}]]})
    state = snap.state_at(0)
    assert [(g.address, g.size) for g in state.segments if g.address < 10 * mib2] == [(0, mib2), (mib2, mib2)]


# -- hypothesis: random damage to a real snapshot ------------------------------------------------------

JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _paths(obj: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


PATHS = _paths(SEGMENTS)


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.sampled_from(PATHS), JUNK), min_size=1, max_size=4))
def test_random_field_damage_never_escapes_as_a_raw_error(edits: list[tuple[tuple, object]]) -> None:
    snap = copy.deepcopy(SEGMENTS)
    for path, value in edits:
        target = snap
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
        except (KeyError, IndexError, TypeError):  # an earlier edit replaced a parent
            continue
    _snap(snap)


# -- profiler traces --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("t.json", os.urandom(4096)),
        ("t.json.gz", gzip.compress(STEP_TRACE.encode())[:200]),
        ("t.json", b'{"traceEvents": [{"ph": "X", "ts": Infinity, "dur": 2, "name": "k", "pid": 0, "tid": 0}]}'),
        ("t.json", b'{"traceEvents": [{"ph": "X", "ts": NaN, "dur": NaN, "name": "k", "cat": "cpu_op"}]}'),
        ("t.json", b'{"traceEvents": 5}'),
        ("t.json", b"[1, 2, 3]"),
        ("t.json", b"{" * 50_000),
        ("t.json", b""),
    ],
    ids=["binary", "truncated-gzip", "inf-times", "nan-times", "wrong-shape", "list-of-ints", "deep", "empty"],
)
def test_damaged_traces_fail_with_advice(tmp_path: Path, name: str, data: bytes) -> None:
    err = outcome(lambda: load_trace(_write(tmp_path, name, data)), TraceError)
    assert isinstance(err, TraceError)


def test_the_real_trace_still_loads_and_its_times_are_finite() -> None:
    lanes = outcome(lambda: load_trace(json.loads(STEP_TRACE)), TraceError)
    d = lanes.to_dict()
    times = [x for span in d["host"] + d["device"] for x in (span["start"], span["end"])]
    assert times and all(math.isfinite(t) for t in times)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(events=st.lists(st.dictionaries(st.sampled_from(["ph", "ts", "dur", "name", "cat", "pid", "tid", "args"]),
                                        JUNK, max_size=8), max_size=20))
def test_random_trace_events_never_escape_as_a_raw_error(events: list[dict]) -> None:
    outcome(lambda: load_trace({"traceEvents": events}), TraceError)
