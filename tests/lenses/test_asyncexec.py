"""The async lens: hand-computed StreamSim timelines, the Chrome-trace fixture, and the CUDA-only helpers.

Every expected time below is worked out by hand from the model's rules (launch overhead 5 µs unless
said otherwise): a launch runs on the host for the overhead, its work starts at
max(launch return, stream tail), and a sync moves the host to the time its work completes.
"""

from __future__ import annotations

import gzip
import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from torchlens_widgets.lenses.asyncexec import (
    CudaUnavailableError,
    DeviceSpan,
    HostSpan,
    StreamSim,
    SyncPoint,
    TraceError,
    _record_sync_warnings,
    find_syncs,
    load_trace,
    profile_lanes,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lanes" / "step_trace.json"
HAS_CUDA = torch.cuda.is_available()


def three_launches(sim: StreamSim) -> None:
    sim.launch("a", 300)
    sim.launch("b", 200)
    sim.launch("c", 100)


# --- StreamSim: hand-computed timelines


def test_three_launches_then_item_block_until_the_last_kernel_ends() -> None:
    sim = StreamSim(launch_overhead_us=5)
    three_launches(sim)
    assert sim.host_clock_us == 15  # the host ran ahead: 3 launches × 5 µs
    sp = sim.item("loss.item()")
    assert sim.host_clock_us == 605  # c ends at 5 + 300 + 200 + 100
    assert sp == SyncPoint("loss.item()", "item", False, 15, 605, call="cudaStreamSynchronize", stream=0,
                           waited_for="c")
    assert sp.waited == 590
    tl = sim.timeline()
    assert tl.host == (
        HostSpan(0, 5, "running", "launch a"),
        HostSpan(5, 10, "running", "launch b"),
        HostSpan(10, 15, "running", "launch c"),
        HostSpan(15, 605, "blocked", "loss.item()", sync="loss.item()"),
    )
    assert [(d.name, d.start, d.end, d.launched_at) for d in tl.on_stream(0)] == [
        ("a", 5, 305, 0), ("b", 305, 505, 5), ("c", 505, 605, 10)]
    assert tl.host_time("running") == 15 and tl.host_time("blocked") == 590 and tl.end == 605
    assert sim.syncs() == [sp]


def test_host_only_timing_underestimates_by_exactly_the_queued_work() -> None:
    def run(how: str) -> int:
        sim = StreamSim(5)
        return int(getattr(sim, how)(lambda: three_launches(sim)))

    assert run("time_host_only") == 15
    assert run("time_with_sync") == 605
    assert run("time_with_events") == 605  # start recorded on the idle stream at 0, end when c finishes
    assert run("time_with_sync") - run("time_host_only") == 590  # the wait .item() showed above


def test_sync_before_timing_keeps_earlier_work_out() -> None:
    sim = StreamSim(5)
    sim.launch("warmup", 1000)  # host 0–5, device 5–1005
    assert sim.time_host_only(lambda: three_launches(sim)) == 15  # and says nothing about warmup
    sim2 = StreamSim(5)
    sim2.launch("warmup", 1000)
    # sync before: host waits until 1005; launches 1005–1020; kernels 1010–1610; sync after at 1610.
    assert sim2.time_with_sync(lambda: three_launches(sim2)) == 605
    assert [(s.name, s.start, s.end) for s in sim2.syncs()] == [
        ("sync before timing", 5, 1005), ("sync after timing", 1020, 1610)]


def test_events_measure_the_device_span_between_records_gaps_included() -> None:
    sim = StreamSim(5)
    sim.host_work("setup", 100)

    def step() -> None:
        sim.launch("a", 300)  # host 100–105, device 105–405
        sim.host_work("slow python", 500)  # host 105–605: the device idles after 405
        sim.launch("b", 200)  # host 605–610, device 610–810

    assert sim.time_with_events(step) == 710  # start at 100 (idle stream, host time), end at 810
    start, end = (m for m in sim.timeline().marks if m.what == "record")
    assert (start.name, start.time, end.name, end.time) == ("start", 100, "end", 810)
    assert sim.syncs()[-1].kind == "event_synchronize" and sim.syncs()[-1].explicit


def test_elapsed_time_needs_recorded_and_completed_events() -> None:
    sim = StreamSim(5)
    start, end = sim.event("start"), sim.event("end")
    with pytest.raises(RuntimeError, match="never recorded"):
        start.elapsed_time(end)
    start.record()
    sim.launch("k", 100)
    end.record()
    assert not end.query()
    with pytest.raises(RuntimeError, match=r"not completed yet .* end\.synchronize\(\)"):
        start.elapsed_time(end)
    end.synchronize()
    assert end.query() and start.elapsed_time(end) == 105


def test_two_streams_wait_event_orders_consumer_after_producer() -> None:
    sim = StreamSim(5)
    side = sim.new_stream("side")
    sim.launch("produce", 100, stream=side)  # host 0–5, side 5–105
    ready = sim.event("ready")
    ready.record(side)  # completes at 105
    sim.default_stream.wait_event(ready)  # the host does not wait
    assert sim.host_clock_us == 5
    consume = sim.launch("consume", 50)  # host 5–10; default stream gated until 105
    assert (consume.start, consume.end) == (105, 155)
    marks = [(m.name, m.stream, m.time, m.what) for m in sim.timeline().marks]
    assert marks == [("ready", 1, 105, "record"), ("ready", 0, 105, "wait")]

    racy = StreamSim(5)
    s = racy.new_stream()
    racy.launch("produce", 100, stream=s)
    assert racy.launch("consume", 50).start == 10  # no wait: the consumer races the producer


def test_streams_run_side_by_side_and_synchronize_waits_for_all() -> None:
    sim = StreamSim(5)
    side = sim.new_stream()
    sim.launch("long", 400)  # default 5–405
    with sim.use_stream(side):
        assert sim.current_stream is side
        sim.launch("short", 100)  # side 10–110, concurrent with long
    assert sim.current_stream is sim.default_stream
    assert side.synchronize().end == 110  # host 10 → 110
    sp = sim.synchronize()
    assert (sp.start, sp.end, sp.kind, sp.explicit, sp.waited_for, sp.stream) == (
        110, 405, "device_synchronize", True, "long", None)


def test_wait_on_an_unrecorded_event_is_a_noop_and_wait_stream_gates() -> None:
    sim = StreamSim(5)
    side = sim.new_stream()
    sim.default_stream.wait_event(sim.event("never"))
    assert sim.launch("k", 10).start == 5
    sim.launch("long", 200, stream=side)  # host 5–10, side 10–210
    sim.default_stream.wait_stream(side)
    assert sim.launch("after", 10).start == 210  # launched by 15, held back until side drains
    assert sim.event("unrecorded").synchronize().waited == 0


def test_nonzero_is_a_hidden_sync_between_its_two_kernels() -> None:
    sim = StreamSim(5)
    sim.launch("mask", 200)  # host 0–5, device 5–205
    sp = sim.nonzero("torch.nonzero(x)", count_us=10, fill_us=10)
    # count: host 5–10, device 205–215; host waits 10 → 215 for the size; fill: host 215–220, device 220–230
    assert (sp.start, sp.end, sp.kind, sp.explicit, sp.waited_for) == (10, 215, "nonzero", False,
                                                                       "torch.nonzero(x): count")
    assert sim.host_clock_us == 220
    assert [(d.name, d.start, d.end) for d in sim.timeline().on_stream(0)][-1] == ("torch.nonzero(x): fill", 220, 230)
    assert sim.mask_index("x[mask]").kind == "mask_index"


def test_every_hidden_sync_is_named_and_classified() -> None:
    sim = StreamSim(5)
    calls = [
        (lambda: sim.item(), "x.item()", "item"),
        (lambda: sim.cpu(), "x.cpu()", "copy_to_host"),
        (lambda: sim.tolist(), "x.tolist()", "tolist"),
        (lambda: sim.print_tensor(), "print(x)", "print"),
        (lambda: sim.if_tensor(), "if x:", "bool"),
        (lambda: sim.mask_index(), "x[mask]", "mask_index"),
        (lambda: sim.copy_to_host(copy_us=4), "x.to('cpu')", "copy_to_host"),
        (lambda: sim.default_stream.synchronize(), "default stream.synchronize()", "stream_synchronize"),
        (lambda: sim.synchronize(), "torch.cuda.synchronize()", "device_synchronize"),
    ]
    for call, name, kind in calls:
        sim.launch("work", 50)
        before = sim.host_clock_us
        sp = call()
        assert isinstance(sp, SyncPoint) and (sp.name, sp.kind) == (name, kind)
        assert sp.explicit == (kind in ("stream_synchronize", "device_synchronize"))
        assert sp.start >= before and sp.waited > 0
    assert len(sim.syncs()) == len(calls)


def test_pinned_non_blocking_copy_does_not_block_but_pageable_does() -> None:
    sim = StreamSim(5)
    sim.launch("k", 100)  # host 0–5, device 5–105
    copy = sim.copy_to_host("x.to('cpu', non_blocking=True)", copy_us=20, pinned=True, non_blocking=True)
    assert isinstance(copy, DeviceSpan) and (copy.start, copy.end, copy.kind) == (105, 125, "memcpy")
    assert sim.host_clock_us == 10 and sim.syncs() == []
    sp = sim.copy_to_host("x.to('cpu', non_blocking=True)", copy_us=20, pinned=False, non_blocking=True)
    # pageable: launch the copy (host 10–15, device 125–145), then wait for it
    assert isinstance(sp, SyncPoint) and (sp.start, sp.end) == (15, 145)
    assert sp.waited_for == "Memcpy DtoH (Device -> Pageable)"


def test_item_with_copy_cost_waits_for_the_copy_too() -> None:
    sim = StreamSim(5)
    sim.launch("k", 100)  # device 5–105
    sp = sim.item(copy_us=3)  # copy launched host 5–10, runs 105–108
    assert (sp.start, sp.end) == (10, 108)


def test_bad_input_is_refused_clearly() -> None:
    sim = StreamSim()
    with pytest.raises(ValueError, match="device_us must be a non-negative integer"):
        sim.launch("k", -1)
    with pytest.raises(ValueError, match="launch_overhead_us"):
        StreamSim(launch_overhead_us=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="stream of this simulator"):
        sim.launch("k", 1, stream=StreamSim().default_stream)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["launch", "host", "item", "sync", "record_wait", "nonzero"]),
                          st.integers(0, 3), st.integers(0, 400)), max_size=25),
       st.integers(0, 20))
def test_invariants_of_random_programs(program: list[tuple[str, int, int]], overhead: int) -> None:
    sim = StreamSim(overhead)
    streams = [sim.default_stream, sim.new_stream(), sim.new_stream()]
    for op, k, us in program:
        s = streams[k % 3]
        if op == "launch":
            sim.launch(f"k{us}", us, stream=s)
        elif op == "host":
            sim.host_work("py", us)
        elif op == "item":
            tail = s.tail
            assert sim.item(stream=s).end == max(tail, sim.host_clock_us)
        elif op == "sync":
            sim.synchronize()
            assert all(x.tail <= sim.host_clock_us for x in streams)
        elif op == "record_wait":
            e = sim.event()
            e.record(s)
            streams[(k + 1) % 3].wait_event(e)
        else:
            sim.nonzero(stream=s, count_us=us, fill_us=1)
    tl = sim.timeline()
    t: float = 0
    for span in tl.host:  # host spans tile [0, host clock] with positive lengths
        assert span.start == t and span.end > span.start
        t = span.end
    assert t == sim.host_clock_us
    for s in streams:  # FIFO: work on one stream never overlaps and never starts before its launch returns
        work = tl.on_stream(s.id)
        assert all(a.end <= b.start for a, b in zip(work, work[1:]))
        assert all(w.launched_at is not None and w.start >= w.launched_at + overhead for w in work)
    assert all(sp.end >= sp.start for sp in tl.syncs)
    assert tl.host_time("blocked") == sum(sp.waited for sp in tl.syncs)


# --- Chrome traces


def expected_fixture_lanes() -> dict[str, Any]:
    """The fixture's timeline (README.md in the fixture folder tells the story), µs from the first event."""
    return {
        "host": [
            (0, 20, "running", "aten::mm"), (20, 25, "running", "(between ops)"),
            (25, 40, "running", "aten::relu"), (40, 45, "running", "(between ops)"),
            (45, 59, "running", "aten::sum"), (59, 62, "running", "(between ops)"),
            (62, 72, "running", "aten::add_"), (72, 75, "running", "(between ops)"),
            (75, 83, "running", "aten::item"), (83, 383.5, "blocked", "aten::item"),
            (383.5, 386, "running", "aten::item"), (386, 390, "running", "(between ops)"),
            (390, 398, "running", "aten::mul"), (398, 400, "running", "(between ops)"),
            (400, 449, "blocked", "cudaDeviceSynchronize"),
        ],
        "device": [
            (7, 18, 318, "kernel", 10, "aten::mm", 101),
            (7, 318, 358, "kernel", 30, "aten::relu", 102),
            (7, 358, 380, "kernel", 50, "aten::sum", 103),
            (7, 380, 382.5, "memcpy", 78, "aten::item", 105),
            (20, 70, 120, "kernel", 64, "aten::add_", 104),
            (20, 398, 448, "kernel", 392, "aten::mul", 107),
        ],
    }


def test_chrome_trace_fixture_parses_to_exact_lanes() -> None:
    tl = load_trace(FIXTURE)
    want = expected_fixture_lanes()
    assert tl.source == "trace"
    assert [(s.start, s.end, s.state, s.label) for s in tl.host] == want["host"]
    assert [(d.stream, d.start, d.end, d.kind, d.launched_at, d.op, d.correlation) for d in tl.device] == want["device"]
    assert tl.device[0].name == "ampere_sgemm_64x32_sliced1x4_nn" and tl.device[3].name.startswith("Memcpy DtoH")
    assert [(s.device, s.stream, s.name) for s in tl.streams] == [(0, 7, "stream 7"), (0, 20, "stream 20")]
    item, dsync = tl.syncs
    assert (item.name, item.kind, item.explicit, item.call, item.start, item.end, item.waited) == (
        "aten::item", "item", False, "cudaStreamSynchronize", 83, 383.5, 300.5)
    assert item.waited_for == "Memcpy DtoH (Device -> Pageable)"
    assert (dsync.name, dsync.kind, dsync.explicit, dsync.start, dsync.end) == (
        "cudaDeviceSynchronize", "device_synchronize", True, 400, 449)
    assert dsync.waited_for is not None and "MulFunctor" in dsync.waited_for
    assert tl.host_time("blocked") == 349.5 and tl.end == 449
    assert tl.notes == ("1 host event on other threads left out (host lane: thread 4242)",
                        "not drawn: Trace ×1, python_function ×1, user_annotation ×1")


def test_trace_sources_gz_text_dict_and_bare_list_agree(tmp_path: Path) -> None:
    text = FIXTURE.read_text(encoding="utf-8")
    gz = tmp_path / "trace.json.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    doc = json.loads(text)
    ref = load_trace(FIXTURE)
    for src in (str(FIXTURE), gz, text, doc, doc["traceEvents"]):
        assert load_trace(src) == ref


def test_trace_host_thread_can_be_chosen_and_string_timestamps_are_read() -> None:
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    other = load_trace(doc, thread=4250)
    # the time origin is the earliest kept event: the first kernel, at 18 µs of the main thread's clock
    assert [(s.start, s.end, s.label) for s in other.host] == [(82, 84, "aten::empty")]
    assert other.syncs == ()
    for e in doc["traceEvents"]:
        if "ts" in e and isinstance(e["ts"], float):
            e["ts"] = f"{e['ts']:.3f}"
    assert load_trace(doc) == load_trace(FIXTURE)


def test_trace_errors_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no trace file"):
        load_trace(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(TraceError, match="not valid JSON"):
        load_trace(bad)
    with pytest.raises(TraceError, match="traceEvents"):
        load_trace({"events": []})
    with pytest.raises(TraceError, match="ProfilerActivity.CUDA"):
        load_trace({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 1, "pid": 0, "tid": 7}]})
    with pytest.raises(TraceError, match="no host events on thread 1"):
        load_trace(FIXTURE, thread=1)


def test_cpu_only_trace_has_no_device_lanes_and_says_so() -> None:
    tl = load_trace({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 10, "dur": 4,
                                      "pid": 1, "tid": 1}]})
    assert tl.streams == () and tl.syncs == ()
    assert [(s.start, s.end, s.label) for s in tl.host] == [(0, 4, "aten::add")]
    assert "no CUDA activity" in tl.notes[0]


# --- live CUDA helpers


@pytest.mark.skipif(HAS_CUDA, reason="checks the CPU-only error; this machine has CUDA")
def test_cuda_helpers_fail_clearly_without_cuda() -> None:
    for call in (lambda: profile_lanes(lambda: None), lambda: find_syncs(lambda: None)):
        with pytest.raises(CudaUnavailableError, match=r"torch.cuda.is_available\(\) is False") as info:
            call()
        assert "StreamSim" in str(info.value) and "load_trace" in str(info.value)


class _FakeSyncs(TorchDispatchMode):
    """Stands in for CUDA sync debug mode on CPU: warns, as c10 does, when nonzero runs."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten.nonzero.default:
            warnings.warn("called a synchronizing CUDA operation (Triggered internally at fake.cpp:1.)", stacklevel=1)
        return func(*args, **(kwargs or {}))


def test_sync_warnings_are_attributed_to_the_op_and_the_user_stack() -> None:
    def program(x: torch.Tensor) -> None:
        y = x * 2
        torch.nonzero(y)  # the line the stack must point at
        warnings.warn("called a synchronizing CUDA operation", stacklevel=1)  # outside any aten op

    with _FakeSyncs(), warnings.catch_warnings(record=True) as passed:
        warnings.simplefilter("always")
        warnings.warn("unrelated warning", stacklevel=1)
        found = _record_sync_warnings(program, (torch.tensor([0.0, 1.0]),), {})
    assert [f.op for f in found] == ["aten.nonzero.default", None]
    assert found[0].message == "called a synchronizing CUDA operation"
    assert any("in program" in frame for frame in found[0].stack)
    assert [str(w.message) for w in passed] == ["unrelated warning"]


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device (none here): live profiler lanes and sync debug mode")
def test_live_cuda_item_shows_as_a_hidden_sync() -> None:  # pragma: no cover - GPU only
    x = torch.randn(512, 512, device="cuda")

    def step() -> float:
        return float((x @ x).relu().sum().item())

    tl = profile_lanes(step)
    assert any(s.kind == "item" and not s.explicit for s in tl.syncs)
    assert tl.device and tl.host_time("blocked") > 0
    found = find_syncs(step)
    assert any(f.op is not None and "_local_scalar_dense" in f.op for f in found)
    assert torch.cuda.get_sync_debug_mode() == 0


def test_sync_warnings_raised_after_the_op_point_at_the_users_line(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """C++ warnings reach Python when the outer binding returns: the location must come from the warning."""
    import torchlens_widgets.lenses.asyncexec as ae

    monkeypatch.setattr(ae, "SYNC_WARNING", "An output with one or more elements was resized")

    def body(x: torch.Tensor) -> None:
        torch.add(x, x, out=torch.empty(1))  # the line the finding must point at

    (found,) = ae._record_sync_warnings(body, (torch.ones(3),), {})
    assert found.stack[-1].endswith(f":{body.__code__.co_firstlineno + 1}")


def test_hostile_trace_files_get_a_trace_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torchlens_widgets.lenses.files as files

    binary = tmp_path / "binary.json"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(TraceError, match="not a text trace"):
        load_trace(binary)
    whole = gzip.compress(FIXTURE.read_bytes())
    truncated = tmp_path / "truncated.json.gz"
    truncated.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(TraceError, match="damaged gzip"):
        load_trace(truncated)
    corrupt = tmp_path / "corrupt.json.gz"
    corrupt.write_bytes(whole[:10] + b"\x00" * 50 + whole[60:])
    with pytest.raises(TraceError, match="damaged gzip"):
        load_trace(corrupt)
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 1 << 20)  # a 4 MiB bomb against a 1 MiB budget
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (4 << 20)))
    with pytest.raises(TraceError, match="decompresses to over 1 MiB"):
        load_trace(bomb)
    with pytest.raises(TraceError, match="nested too deeply"):
        load_trace("[" * 100_000 + "]" * 100_000)


def test_non_finite_times_are_not_times() -> None:
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    ref = load_trace(doc)
    extra = {"ph": "X", "cat": "cpu_op", "name": "aten::bogus", "pid": 4242, "tid": 4242, "ts": "inf", "dur": 5}
    nan = dict(extra, ts=1716000000010.0, dur=float("nan"))
    huge = dict(extra, ts=1e400)
    doc["traceEvents"] += [extra, nan, huge]
    tl = load_trace(doc)
    assert all(math.isfinite(v) for s in tl.host for v in (s.start, s.end))
    assert all(math.isfinite(v) for d in tl.device for v in (d.start, d.end))
    assert tl.end == ref.end and "aten::bogus" not in [s.label for s in tl.host]
