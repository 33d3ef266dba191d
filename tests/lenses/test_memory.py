"""The memory lens reads hand-made CUDA snapshots exactly as worked out by hand (timeline, bands, state at an
event), survives truncated traces and unknown keys, reads every file form, profiles CPU memory with torch's
categories without stderr noise, and says clearly when CUDA is absent."""

from __future__ import annotations

import gzip
import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from torchlens_widgets.lenses import memory
from torchlens_widgets.lenses.memory import (
    NO_CUDA,
    CudaUnavailableError,
    MemorySnapshot,
    SnapshotError,
    load_snapshot,
    profile_memory,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "memory"
S = 2097152  # base address used in plain.json and unknown_keys.json
MiB2 = 2097152


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def snap(name: str) -> MemorySnapshot:
    return load_snapshot(FIXTURES / f"{name}.json")


def blocks(state: memory.MemoryState) -> list[tuple[int, int, str, int | None]]:
    return [(b.address, b.size, b.state, b.allocation) for b in state.blocks()]


def check_invariants(s: MemorySnapshot) -> None:
    """allocated <= active <= reserved everywhere, and every segment is tiled exactly by its blocks."""
    tl = s.timeline()
    assert len(tl) == len(s.events)
    for a, c, r in zip(tl.allocated, tl.active, tl.reserved):
        assert 0 <= a <= c <= r
    for i in range(len(s.events)):
        st = s.state_at(i)
        for seg in st.segments:
            cursor = seg.address
            for b in seg.blocks:
                assert b.address == cursor and b.size > 0
                cursor += b.size
            assert cursor == seg.address + seg.size
        assert sum(b.size for b in st.blocks("active")) == tl.allocated[i]
        assert sum(b.size for b in st.blocks() if b.state != "free") == tl.active[i]
        assert sum(seg.size for seg in st.segments) == tl.reserved[i]


# ------------------------------------------------------------------------------ plain alloc / free


def test_plain_trace_timeline_bands_and_state() -> None:
    s = snap("plain")
    assert [e.action for e in s.events] == [
        "segment_alloc", "alloc", "alloc", "free_requested", "free_completed", "alloc", "snapshot"]
    tl = s.timeline()
    # +1000, +512, request frees 1000 (active keeps it), completes, +700; snapshot changes nothing
    assert tl.allocated == [0, 1000, 1512, 512, 512, 1212, 1212]
    assert tl.active == [0, 1000, 1512, 1512, 512, 1212, 1212]
    assert tl.reserved == [MiB2] * 7
    assert tl.time_us == [100.0, 101.0, 102.0, 103.0, 103.0, 104.0, 105.0]
    assert not tl.truncated and tl.preexisting_allocated == 0 and tl.preexisting_reserved == 0
    assert tl.peak_allocated == 1512 and tl.peak_reserved == MiB2
    assert tl.notes == ()  # the replay's end state agrees with the final segments

    bands = [(a.addr, a.size, a.start, a.end, a.completed, a.preexisting) for a in s.allocations()]
    assert bands == [(S, 1000, 1, 3, 4, False), (S + 1024, 512, 2, None, None, False), (S, 700, 5, None, None, False)]
    first = s.allocations()[0]
    assert first.stack == "linear (torch/nn/functional.py:2380)\nforward (train.py:10)"
    assert first.allocated_at(2) and not first.allocated_at(3) and first.pending_at(3) and not first.pending_at(4)

    assert blocks(s.state_at(0)) == [(S, MiB2, "free", None)]
    assert blocks(s.state_at(3)) == [
        (S, 1000, "pending", 0), (S + 1000, 24, "free", None), (S + 1024, 512, "active", 1),
        (S + 1536, MiB2 - 1536, "free", None)]
    assert blocks(s.state_at(-1)) == [
        (S, 700, "active", 2), (S + 700, 324, "free", None), (S + 1024, 512, "active", 1),
        (S + 1536, MiB2 - 1536, "free", None)]
    check_invariants(s)


def test_plain_parsed_fields() -> None:
    s = snap("plain")
    (seg,) = s.segments
    assert (seg.address, seg.total_size, seg.allocated_size, seg.requested_size, seg.segment_type) == (
        S, MiB2, 1536, 1212, "large")
    assert seg.segment_pool_id == (0, 0) and not seg.is_expandable
    assert [(b.size, b.requested_size, b.state) for b in seg.blocks] == [
        (1024, 700, "active_allocated"), (512, 512, "active_allocated"), (MiB2 - 1536, 0, "inactive")]
    assert s.allocator_settings is not None and s.allocator_settings["max_split_size"] == -1
    assert s.device == 0 and s.devices == [0] and s.notes == [] and s.extra == {}


# ------------------------------------------------------------------------------ segments, streams, pending frees


def test_segment_alloc_free_and_pending_free() -> None:
    s = snap("segments")
    A, B = 4194304, 20971520
    tl = s.timeline()
    assert tl.allocated == [0, 2000000, 2000000, 17000000, 15000000, 0, 0, 0, 0, 0]
    assert tl.active == [0, 2000000, 2000000, 17000000, 17000000, 17000000, 2000000, 2000000, 0, 0]
    assert tl.reserved == [MiB2, MiB2, MiB2 + 20971520, MiB2 + 20971520, MiB2 + 20971520, MiB2 + 20971520,
                           MiB2 + 20971520, MiB2, MiB2, 0]
    assert not tl.truncated

    st = s.state_at(3)
    assert [(g.address, g.size, g.stream) for g in st.segments] == [(A, MiB2, 0), (B, 20971520, 7)]
    assert blocks(st) == [(A, 2000000, "active", 0), (A + 2000000, 97152, "free", None),
                          (B, 15000000, "active", 1), (B + 15000000, 5971520, "free", None)]
    # empty_cache released B; A's block still waits for another stream, so A stays reserved
    st = s.state_at(7)
    assert [(g.address, g.size) for g in st.segments] == [(A, MiB2)]
    assert blocks(st) == [(A, 2000000, "pending", 0), (A + 2000000, 97152, "free", None)]
    assert s.state_at(9).segments == ()
    a = s.allocations()[0]
    assert (a.start, a.end, a.completed, a.stream) == (1, 4, 8, 0)
    assert s.allocations()[1].stream == 7
    check_invariants(s)


# ------------------------------------------------------------------------------ ring-buffer truncation


def test_truncated_trace_counts_preexisting_and_reconciles() -> None:
    s = snap("truncated")
    P, Q = 8388608, 16777216
    tl = s.timeline()
    assert tl.truncated
    # before the trace: X (4096 at P, freed in the trace) + Y (512 at P+4096, live in the final segments)
    assert tl.preexisting_allocated == 4096 + 512
    # ... and Q (freed in the trace, never reserved in it) + P (in the final segments, never reserved in it)
    assert tl.preexisting_reserved == 2 * MiB2
    assert tl.allocated == [4608, 512, 512, 512, 1536, 1664]
    assert tl.active == [4608, 4608, 512, 512, 1536, 1664]  # starts at 4864 with Z's pending 256 bytes
    assert tl.reserved == [2 * MiB2] * 3 + [MiB2] * 3
    assert any("never saw allocated" in n for n in tl.notes)
    assert any("never saw reserved" in n for n in tl.notes)
    assert any("before the trace began" in n for n in tl.notes)
    assert not any("differ" in n for n in tl.notes)  # end state matches the final segments

    bands = [(a.addr, a.size, a.start, a.end, a.completed, a.preexisting) for a in s.allocations()]
    assert bands == [(P, 4096, None, 1, 2, True), (P, 1024, 4, None, None, False),
                     (P + 8192, 128, 5, None, None, False), (P + 4096, 512, None, None, None, True)]
    assert s.allocations()[3].stack == "setup (old.py:1)"

    st0 = s.state_at(0)
    assert [(g.address, g.size, g.preexisting) for g in st0.segments] == [(P, MiB2, True), (Q, MiB2, True)]
    assert blocks(st0) == [(P, 4096, "active", 0), (P + 4096, 512, "active", 3),
                           (P + 4608, MiB2 - 4608, "free", None), (Q, MiB2, "free", None)]
    assert blocks(s.state_at(1))[0] == (P, 4096, "pending", 0)
    st3 = s.state_at(3)
    assert [g.address for g in st3.segments] == [P]
    assert blocks(st3) == [(P, 4096, "free", None), (P + 4096, 512, "active", 3), (P + 4608, MiB2 - 4608, "free", None)]
    check_invariants_except_pending_before(s)


def check_invariants_except_pending_before(s: MemorySnapshot) -> None:
    """The truncated fixture's first event completes a free requested before the trace: no block shows it."""
    tl = s.timeline()
    for i in range(1, len(s.events)):
        st = s.state_at(i)
        assert sum(b.size for b in st.blocks("active")) == tl.allocated[i]
        assert sum(g.size for g in st.segments) == tl.reserved[i]


def test_trace_only_no_segments_and_free_of_unknown_segment() -> None:
    raw = {"device_traces": [[{"action": "free_requested", "addr": 4096, "size": 100},
                              {"action": "segment_unmap", "addr": 0, "size": 8192},
                              {"action": "alloc", "addr": 4096, "size": 50}]]}
    s = load_snapshot(raw)
    tl = s.timeline()
    # reusing 4096 proves the pending free completed (its free_completed is missing): the old block ends there
    assert tl.truncated and tl.allocated == [0, 0, 50] and tl.active == [100, 100, 50]
    assert any("still held" in n for n in tl.notes)
    assert tl.reserved == [8192, 0, 0] and tl.preexisting_reserved == 8192
    assert any("no 'segments'" in n for n in s.notes)
    st = s.state_at(0)  # the range unmapped at event 1 was there before, holding the pending block
    assert [(g.address, g.size, g.preexisting) for g in st.segments] == [(0, 8192, True)]
    assert blocks(st) == [(0, 4096, "free", None), (4096, 100, "pending", 0), (4196, 3996, "free", None)]
    assert s.state_at(2).unplaced[0].size == 50  # no known segment holds it


def test_alloc_at_live_address_ends_old_band() -> None:
    s = load_snapshot({"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 0, "size": 10}, {"action": "alloc", "addr": 0, "size": 20}]]})
    assert s.timeline().allocated == [10, 20]
    assert [(a.start, a.end) for a in s.allocations()] == [(0, 1), (1, None)]
    assert any("still held" in n for n in s.timeline().notes)


# ------------------------------------------------------------------------------ unknown keys, actions, frames


def test_unknown_keys_action_and_missing_frames() -> None:
    s = snap("unknown_keys")
    assert s.extra == {"external_annotations": [{"stage": "forward", "device": 0, "time_us": 11}],
                       "my_tool_version": "0.0.1"}
    assert s.segments[0].extra == {"cookie": 1}
    assert s.segments[0].frames == () and s.segments[0].blocks[0].frames == ()
    assert s.segments[0].blocks[0].extra == {"note": "x"}
    ev = s.events
    assert ev[0].extra == {"pool_id": [0, 0]} and ev[0].frames == ()
    assert ev[1].extra == {"user_metadata": "step 1"}
    assert (ev[2].action, ev[2].raw_action) == ("unknown", "segment_defrag")
    assert [str(f) for f in ev[3].frames] == ["f (a.py:3)"]  # the malformed frame is skipped
    assert s.timeline().allocated == [0, 512, 512, 768]
    assert s.timeline().reserved == [MiB2] * 4
    assert any("segment_defrag" in n for n in s.notes)
    assert any("malformed frames" in n for n in s.notes)
    assert any("my_tool_version" in n for n in s.notes)
    d = json.loads(json.dumps(s.to_dict()))
    assert d["events"][2] == {"index": 2, "action": "unknown", "addr": S, "size": 0, "stream": 0, "time_us": 12.0,
                              "frames": [], "raw_action": "segment_defrag"}
    assert d["timeline"]["allocated"] == [0, 512, 512, 768]
    check_invariants(s)


def test_odd_values_do_not_crash() -> None:
    raw = {"segments": [{"address": "x", "blocks": [{"size": 512, "state": "active_awaiting_free"}, "junk"]}, 7],
           "device_traces": [[{"action": "alloc", "size": 5}, "junk", {"size": 3}]]}
    s = load_snapshot(raw)
    assert s.segments[0].blocks[0].state == "active_pending_free"  # docstring spelling normalised
    assert s.segments[0].blocks[0].address == 0 and s.segments[0].total_size == 512
    assert [e.action for e in s.events] == ["alloc", "unknown", "unknown"]
    assert s.timeline().allocated == [0, 0, 0]  # an alloc without an address changes nothing
    assert len(s.notes) >= 4


# ------------------------------------------------------------------------------ expandable segments and OOM


def test_expandable_segments_and_oom() -> None:
    s = snap("expandable_oom")
    V = 1099511627776
    tl = s.timeline()
    assert tl.allocated == [0, 1500000, 1500000, 3500000, 3500000, 1500000, 1500000, 1500000, 1500000]
    assert tl.active == [0, 1500000, 1500000, 3500000, 3500000, 3500000, 1500000, 1500000, 1500000]
    assert tl.reserved == [MiB2, MiB2, 2 * MiB2, 2 * MiB2, 2 * MiB2, 2 * MiB2, 2 * MiB2, MiB2, MiB2]
    assert tl.notes == () and not tl.truncated
    oom = s.events[4]
    assert (oom.action, oom.addr, oom.device_free, oom.size) == ("oom", None, 1048576, 8589934592)
    assert str(oom.frames[0]) == "huge (big.py:7)"
    st = s.state_at(3)  # two mapped pieces that touch are one segment
    assert [(g.address, g.size, g.expandable) for g in st.segments] == [(V, 2 * MiB2, True)]
    assert blocks(st) == [(V, 1500000, "active", 0), (V + 1500000, 160, "free", None),
                          (V + 1500160, 2000000, "active", 1), (V + 3500160, 694144, "free", None)]
    st = s.state_at(7)
    assert [(g.address, g.size) for g in st.segments] == [(V, MiB2)]
    assert blocks(st) == [(V, 1500000, "active", 0), (V + 1500000, 597152, "free", None)]
    assert s.segments[0].is_expandable
    check_invariants(s)


def test_partial_unmap_splits_a_mapped_piece() -> None:
    s = load_snapshot({"segments": [], "device_traces": [[
        {"action": "segment_map", "addr": 0, "size": 300},
        {"action": "segment_unmap", "addr": 100, "size": 100}]]})
    assert s.timeline().reserved == [300, 200]
    assert [(g.address, g.size) for g in s.state_at(1).segments] == [(0, 100), (200, 100)]


# ------------------------------------------------------------------------------ loading


@pytest.mark.parametrize("form", ["pickle", "pickle.gz", "json", "json.gz", "bytes", "dict"])
def test_every_file_form_loads_the_same(tmp_path: Path, form: str) -> None:
    raw = fixture("plain")
    raw["segments"][0]["segment_pool_id"] = (0, 0)  # torch writes a tuple
    path = tmp_path / f"snap.{form}"
    data = pickle.dumps(raw) if form.startswith("pickle") or form == "bytes" else json.dumps(raw).encode()
    if form.endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    obj: Any = {"dict": raw, "bytes": data}.get(form, str(path))
    s = load_snapshot(obj)
    assert s.timeline().allocated == [0, 1000, 1512, 512, 512, 1212, 1212]
    assert s.segments[0].segment_pool_id == (0, 0)
    assert load_snapshot(s) is s


def test_pickle_with_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [], "x": os.getcwd}))
    with pytest.raises(SnapshotError, match="plain data only"):
        load_snapshot(path)


def test_bad_inputs_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="no snapshot file"):
        load_snapshot(tmp_path / "missing.pickle")
    with pytest.raises(SnapshotError, match="neither 'segments' nor 'device_traces'"):
        load_snapshot({"foo": 1})
    with pytest.raises(SnapshotError, match="expected a snapshot dict"):
        load_snapshot(42)
    (tmp_path / "junk.bin").write_bytes(b"\x00\x01not a snapshot")
    with pytest.raises(SnapshotError, match="neither a pickle nor JSON"):
        load_snapshot(tmp_path / "junk.bin")
    s = snap("plain")
    with pytest.raises(IndexError, match="events 0..6"):
        s.state_at(7)
    with pytest.raises(SnapshotError, match="device 3 is not in this snapshot"):
        load_snapshot(fixture("plain"), device=3)


def test_device_selection() -> None:
    raw = {"segments": [], "device_traces": [[], [{"action": "alloc", "addr": 0, "size": 8}],
                                             [{"action": "alloc", "addr": 0, "size": 16}]]}
    s = load_snapshot(raw)
    assert s.device == 1 and s.timeline().allocated == [8]
    assert any("devices [1, 2]" in n for n in s.notes)
    assert load_snapshot(raw, device=2).timeline().allocated == [16]


def test_empty_snapshot() -> None:
    s = load_snapshot({"segments": [], "device_traces": [[]]})
    tl = s.timeline()
    assert len(tl) == 0 and tl.peak_allocated == 0 and s.allocations() == []
    with pytest.raises(IndexError):
        s.state_at(0)


def test_to_dict_is_json_ready() -> None:
    for name in ("plain", "segments", "truncated", "unknown_keys", "expandable_oom"):
        d = snap(name).to_dict()
        again = json.loads(json.dumps(d))
        assert again["timeline"]["allocated"] == snap(name).timeline().allocated
        assert len(again["allocations"]) == len(snap(name).allocations())
    assert "timeline" not in snap("plain").to_dict(derived=False)


# ------------------------------------------------------------------------------ CUDA absent


def test_live_helpers_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert NO_CUDA == "no CUDA device: load a recorded snapshot with load_snapshot(...) or use the simulator"
    for call in (memory.start_recording, memory.stop_recording, memory.snapshot):
        with pytest.raises(CudaUnavailableError) as info:
            call()
        assert str(info.value) == NO_CUDA


# ------------------------------------------------------------------------------ CPU profiler


def tiny_training() -> tuple[nn.Module, Any, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, opt, torch.randn(32, 8), torch.randn(32, 4)


def make_step(model: nn.Module, opt: Any, x: torch.Tensor, y: torch.Tensor) -> Any:
    def step() -> float:
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return float(loss.item())

    return step


@pytest.fixture(scope="module")
def cpu_profile() -> tuple[memory.MemoryProfile, nn.Module, torch.Tensor, torch.Tensor]:
    model, opt, x, y = tiny_training()
    step = make_step(model, opt, x, y)
    step()  # warm-up: momentum buffers and gradients exist before the profiled step
    return profile_memory(step), model, x, y


def test_cpu_profile_totals_are_consistent(cpu_profile: Any) -> None:
    prof, model, x, y = cpu_profile
    assert isinstance(prof.result, float)
    assert prof.kind == "cpu" and prof.segments == []
    assert {e.action for e in prof.events} == {"alloc", "free_completed"}
    assert all(e.size > 0 for e in prof.events)
    allocs = prof.allocations()
    # every free matches an allocation at the same address with the same size, and ends its band
    for a in allocs:
        if a.end is not None:
            ev = prof.events[a.end]
            assert (ev.action, ev.addr, ev.size) == ("free_completed", a.addr, a.size)
            assert a.completed == a.end and a.start is not None and a.start < a.end
    frees = sum(1 for e in prof.events if e.action == "free_completed")
    assert frees == sum(1 for a in allocs if a.end is not None)
    tl = prof.timeline()
    assert tl.reserved == tl.allocated and not tl.truncated
    assert tl.peak_allocated >= tl.allocated[-1] >= tl.preexisting_allocated
    live_new = [a for a in allocs if not a.preexisting and a.end is None]
    assert tl.allocated[-1] == tl.preexisting_allocated + sum(a.size for a in live_new)
    # what the step leaves behind is exactly one gradient per parameter
    param_bytes = sorted(p.numel() * p.element_size() for p in model.parameters())
    assert sorted(a.size for a in live_new) == param_bytes
    assert {a.category for a in live_new} == {"gradient"}
    # the first allocation is the first Linear's output, 32 x 16 float32
    first = prof.events[0]
    assert (first.action, first.size, first.category, first.extra["op"]) == ("alloc", 32 * 16 * 4, "activation",
                                                                              "aten::addmm")
    assert any(f.name == "step" and f.filename.endswith("test_memory.py") for f in first.frames)
    check_times = [e.time_us for e in prof.events]
    assert check_times == sorted(check_times) and check_times[0] == 0


def test_cpu_profile_categories(cpu_profile: Any) -> None:
    prof, model, x, y = cpu_profile
    cats = prof.categories()
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    # what torch 2.13 assigns on the CPU for one SGD-with-momentum step
    assert cats["parameter"] == param_bytes  # pre-existing
    assert cats["optimizer_state"] == param_bytes  # pre-existing momentum buffers
    assert cats["gradient"] == param_bytes  # new gradients (the old ones were freed by zero_grad)
    assert cats["input"] >= x.nbytes + y.nbytes
    for c in ("activation", "temporary", "autograd_detail"):
        assert cats[c] > 0
    assert "unknown" not in cats
    pre = {a.category for a in prof.allocations() if a.preexisting}
    assert pre == {"parameter", "optimizer_state", "input"}
    assert any("zero_grad" in n for n in prof.notes)
    d = json.loads(json.dumps(prof.to_dict()))
    assert d["kind"] == "cpu" and d["categories"] == cats


def test_cpu_profile_keeps_stderr_clean_but_keeps_other_output(capfd: pytest.CaptureFixture[str]) -> None:
    model, opt, x, y = tiny_training()
    step = make_step(model, opt, x, y)
    step()
    capfd.readouterr()
    profile_memory(step)
    err = capfd.readouterr().err
    assert err == ""

    def noisy() -> None:
        os.write(2, b"from the step\n")

    profile_memory(noisy)
    err = capfd.readouterr().err
    assert err == "from the step\n"


def test_cpu_profile_errors() -> None:
    with pytest.raises(TypeError, match="expects a callable"):
        profile_memory(42)  # type: ignore[arg-type]

    def boom() -> None:
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        profile_memory(boom)
    os.write(2, b"")  # fd 2 is usable again after the failure


def test_cpu_profile_without_autograd() -> None:
    prof = profile_memory(lambda a: (a @ a).sum(), torch.ones(16, 16))
    assert prof.result.item() == 16 * 16 * 16
    sizes = [e.size for e in prof.events if e.action == "alloc"]
    assert 16 * 16 * 4 in sizes
    tl = prof.timeline()
    assert tl.peak_allocated >= tl.allocated[-1]


def _hostile_snapshots() -> dict[str, object]:
    import copy

    base = json.loads((Path(__file__).parents[1] / "fixtures" / "memory" / "plain.json").read_text())
    cases: dict[str, object] = {}
    for label, field_path, value in [
        ("nan size", ("segments", 0, "total_size"), float("nan")),
        ("1e400 size", ("segments", 0, "blocks", 0, "size"), float("inf")),
        ("string pool id", ("segments", 0, "segment_pool_id"), "pool"),
        ("list address", ("segments", 0, "address"), [1, 2]),
        ("negative device", ("segments", 0, "device"), -3),
        ("dict block", ("segments", 0, "blocks"), {"a": 1}),
    ]:
        snap = copy.deepcopy(base)
        target = snap
        for key in field_path[:-1]:
            target = target[key]
        target[field_path[-1]] = value
        cases[label] = snap
    return cases


@pytest.mark.parametrize("label", list(_hostile_snapshots()))
def test_hostile_snapshots_give_snapshot_error_or_a_true_picture(label: str) -> None:
    snap = _hostile_snapshots()[label]
    try:
        loaded = load_snapshot(snap)
    except SnapshotError as exc:
        assert "snapshot" in str(exc)
        return
    for seg in loaded.segments:  # loaded: every number in the picture is a real, finite one
        assert isinstance(seg.total_size, int) and seg.total_size >= 0 and seg.device >= 0
    if label in ("negative device", "list address", "dict block"):
        assert loaded.notes, "a field that was skipped or replaced is said in the notes"


def test_hostile_snapshot_files_and_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip
    import pickle

    import torchlens_widgets.lenses.files as files

    good = pickle.dumps(json.loads((Path(__file__).parents[1] / "fixtures" / "memory" / "plain.json").read_text()))
    for name, data, message in [
        ("truncated.pickle", good[: len(good) // 2], "damaged pickle"),
        ("garbage.pickle", b"\x80\x04" + bytes(range(250)), "damaged pickle"),
        ("truncated.pickle.gz", gzip.compress(good)[:40], "damaged gzip"),
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ]:
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(SnapshotError, match=message):
            load_snapshot(path)
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (4 << 20)))
    with pytest.raises(SnapshotError, match="decompresses to over 1 MiB"):
        load_snapshot(bomb)
    for device in (-1, "0", 1.5):
        with pytest.raises(SnapshotError, match="device must be a CUDA device index"):
            load_snapshot(json.loads((Path(__file__).parents[1] / "fixtures" / "memory" / "plain.json").read_text()),
                          device=device)  # type: ignore[arg-type]
