"""The allocator simulator follows CUDACachingAllocator's rules on hand-computed cases, and keeps its
invariants (tiling, merging, stats = blocks) over random alloc/free/record_stream/sync/empty_cache runs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchlens_widgets.lenses.allocator import (
    AllocatorError,
    CachingAllocatorSim,
    SimulatedOOM,
    _divisions_table,
    _pow2_division_ceil,
    counterfactual,
    replay,
    round_size,
)

KiB, MiB = 1024, 1024 * 1024


def blocks(sim: CachingAllocatorSim, seg: int = 0) -> list[tuple[int, int, str]]:
    """(offset in segment, size, state) of every block of segment number `seg` (by address)."""
    s = sim.segments()[seg]
    return [(b["address"] - s["address"], b["size"], b["state"]) for b in s["blocks"]]


def actions(sim: CachingAllocatorSim) -> list[str]:
    return [e.action for e in sim.log]


def check_invariants(sim: CachingAllocatorSim) -> None:
    """Blocks tile segments, no free neighbours, allocated ≤ active ≤ reserved, stats equal sums over blocks."""
    segs = sim.segments()
    stats = sim.stats()
    sums = {p: dict.fromkeys(("alloc", "active", "reserved", "n_alloc", "requested", "split_bytes", "split", "segs"), 0)
            for p in ("small_pool", "large_pool")}
    addresses = [s["address"] for s in segs]
    assert addresses == sorted(addresses)
    for s in segs:
        pool = sums["small_pool" if s["segment_type"] == "small" else "large_pool"]
        offset = s["address"]
        for b in s["blocks"]:
            assert b["address"] == offset, "blocks must be contiguous"
            assert b["size"] > 0 and b["size"] % 512 == 0
            offset += b["size"]
        assert offset - s["address"] == s["total_size"], "block sizes must sum to the segment size"
        for a, b in zip(s["blocks"], s["blocks"][1:]):
            assert not (a["state"] == b["state"] == "inactive"), f"two adjacent free blocks in {s}"
        assert s["allocated_size"] == sum(b["size"] for b in s["blocks"] if b["state"] == "active_allocated")
        assert s["active_size"] == sum(b["size"] for b in s["blocks"] if b["state"] != "inactive")
        pool["alloc"] += s["allocated_size"]
        pool["active"] += s["active_size"]
        pool["reserved"] += s["total_size"]
        pool["requested"] += s["requested_size"]
        pool["n_alloc"] += sum(b["state"] == "active_allocated" for b in s["blocks"])
        if not s["is_expandable"]:
            pool["segs"] += 1
            if len(s["blocks"]) > 1:
                free = [b["size"] for b in s["blocks"] if b["state"] == "inactive"]
                pool["split_bytes"] += sum(free)
                pool["split"] += len(free)
    for name in ("small_pool", "large_pool"):
        p = sums[name]
        assert stats[f"allocated_bytes.{name}.current"] == p["alloc"]
        assert stats[f"active_bytes.{name}.current"] == p["active"]
        assert stats[f"reserved_bytes.{name}.current"] == p["reserved"]
        assert stats[f"allocation.{name}.current"] == p["n_alloc"]
        assert stats[f"requested_bytes.{name}.current"] == p["requested"]
        assert stats[f"segment.{name}.current"] == p["segs"]
        assert stats[f"inactive_split_bytes.{name}.current"] == p["split_bytes"]
        assert stats[f"inactive_split.{name}.current"] == p["split"]
    for stat in ("allocated_bytes", "active_bytes", "reserved_bytes", "segment", "allocation", "inactive_split_bytes"):
        assert stats[f"{stat}.all.current"] == stats[f"{stat}.small_pool.current"] + stats[f"{stat}.large_pool.current"]
        assert stats[f"{stat}.all.peak"] >= stats[f"{stat}.all.current"]
        assert stats[f"{stat}.all.freed"] == stats[f"{stat}.all.allocated"] - stats[f"{stat}.all.current"]
    assert 0 <= stats["allocated_bytes.all.current"] <= stats["active_bytes.all.current"] <= stats["reserved_bytes.all.current"]
    if sim.capacity is not None:
        assert stats["reserved_bytes.all.current"] <= sim.capacity


# ------------------------------------------------------------------------------------ size rules


def test_one_byte_becomes_512_in_a_2mib_small_segment() -> None:
    assert round_size(1) == 512 and round_size(512) == 512 and round_size(513) == 1024
    sim = CachingAllocatorSim()
    sim.malloc(1)
    assert actions(sim) == ["segment_alloc", "alloc"]
    assert sim.segments()[0]["segment_type"] == "small" and sim.segments()[0]["total_size"] == 2 * MiB
    assert blocks(sim) == [(0, 512, "active_allocated"), (512, 2 * MiB - 512, "inactive")]
    assert "512 B minimum block" in sim.explain(1)


def test_one_mib_is_small_pool_one_more_byte_is_large_pool() -> None:
    sim = CachingAllocatorSim()
    sim.malloc(1 * MiB)
    assert sim.segments()[0]["segment_type"] == "small" and sim.segments()[0]["total_size"] == 2 * MiB
    assert blocks(sim) == [(0, MiB, "active_allocated"), (MiB, MiB, "inactive")]
    sim.malloc(MiB + 1)  # 1,049,088 B after rounding → large pool, 1–10 MiB → a 20 MiB segment, split (> 1 MiB left)
    large = sim.segments()[1]
    assert large["segment_type"] == "large" and large["total_size"] == 20 * MiB
    assert blocks(sim, 1) == [(0, 1_049_088, "active_allocated"), (1_049_088, 20 * MiB - 1_049_088, "inactive")]
    assert sim.stats()["segment.small_pool.current"] == 1 and sim.stats()["segment.large_pool.current"] == 1
    assert "new 20 MiB segment" in sim.explain(-1) and "large pool" in sim.explain(-1)


def test_13_2_mb_request_gets_a_14_mib_segment() -> None:
    sim = CachingAllocatorSim()
    sim.malloc(13_200_000, stream=7)
    # 13,200,000 → 13,200,384 (512 multiple) → ≥ 10 MiB: segment rounded up to 2 MiB = 14 MiB; 1,479,680 B > 1 MiB left
    assert sim.segments()[0]["total_size"] == 14 * MiB and sim.segments()[0]["stream"] == 7
    assert blocks(sim) == [(0, 13_200_384, "active_allocated"), (13_200_384, 1_479_680, "inactive")]
    text = sim.explain(1)
    for part in ("13.2 MB request", "13,200,384 B", "large pool", "no free block ≥ 13,200,384 B on stream 7",
                 "new 14 MiB segment", "1,479,680 B stay free"):
        assert part in text, (part, text)
    assert sim.log[0].to_trace() == {"action": "segment_alloc", "addr": sim.segments()[0]["address"],
                                     "size": 14 * MiB, "stream": 7, "frames": []}
    assert sim.log[1].to_trace()["size"] == 13_200_000  # alloc records the requested size, like torch


def test_split_best_fit_and_merge_with_exact_offsets() -> None:
    sim = CachingAllocatorSim()
    a, b, c = sim.malloc(1000), sim.malloc(3000), sim.malloc(600)  # 1024, 3072, 1024 B
    assert blocks(sim)[:3] == [(0, 1024, "active_allocated"), (1024, 3072, "active_allocated"),
                               (4096, 1024, "active_allocated")]
    sim.free(b)
    assert blocks(sim) == [(0, 1024, "active_allocated"), (1024, 3072, "inactive"), (4096, 1024, "active_allocated"),
                           (5120, 2 * MiB - 5120, "inactive")]
    d = sim.malloc(2000)  # best fit: the 3072 B hole, not the big tail; 1024 B remain (≥ 512: split)
    assert sim.address(d) == sim.address(a) + 1024
    assert blocks(sim)[:4] == [(0, 1024, "active_allocated"), (1024, 2048, "active_allocated"),
                               (3072, 1024, "inactive"), (4096, 1024, "active_allocated")]
    sim.free(d)
    sim.free(a)  # merges with the 3072 B free block after it
    assert blocks(sim) == [(0, 4096, "inactive"), (4096, 1024, "active_allocated"), (5120, 2 * MiB - 5120, "inactive")]
    assert "merged with the free block after it (3,072 B)" in sim.explain(-1)
    sim.free(c)  # merges both ways: one free 2 MiB block
    assert blocks(sim) == [(0, 2 * MiB, "inactive")]
    assert "whole segment is free" in sim.explain(-1)
    assert sim.stats()["inactive_split_bytes.all.current"] == 0 and sim.stats()["inactive_split.all.current"] == 0
    check_invariants(sim)


def test_remainder_rules_small_512_large_more_than_1mib() -> None:
    sim = CachingAllocatorSim()
    sim.malloc(MiB)
    sim.malloc(MiB - 512)  # takes the remaining 1 MiB block; 512 B remain: small pool splits at ≥ 512 B
    assert blocks(sim) == [(0, MiB, "active_allocated"), (MiB, MiB - 512, "active_allocated"),
                           (2 * MiB - 512, 512, "inactive")]

    sim = CachingAllocatorSim()
    sim.malloc(13 * MiB)  # 14 MiB segment, exactly 1 MiB left: not > 1 MiB, the whole segment is handed out
    assert blocks(sim) == [(0, 14 * MiB, "active_allocated")]
    assert sim.stats()["allocated_bytes.all.current"] == 14 * MiB
    assert sim.stats()["requested_bytes.all.current"] == 13 * MiB
    assert "remainder ≤ 1 MiB" in sim.explain(-1)
    sim.malloc(13 * MiB - 512)  # 1 MiB + 512 left: split
    assert blocks(sim, 1) == [(0, 13 * MiB - 512, "active_allocated"), (13 * MiB - 512, MiB + 512, "inactive")]


def test_max_split_size_keeps_oversize_blocks_for_oversize_requests() -> None:
    sim = CachingAllocatorSim(max_split_size_mb=20)
    big = sim.malloc(30 * MiB)
    sim.free(big)  # a cached 30 MiB block (≥ max_split_size)
    sim.malloc(5 * MiB)  # < max_split_size: may not take the oversize block → new 20 MiB segment
    assert [s["total_size"] for s in sim.segments()] == [30 * MiB, 20 * MiB]
    assert "max_split_size" in sim.explain(-1)
    h = sim.malloc(25 * MiB)  # ≥ max_split_size: takes the 30 MiB block whole (30 < 25 + 20), never split
    assert sim.address(h) == sim.segments()[0]["address"] and blocks(sim, 0) == [(0, 30 * MiB, "active_allocated")]
    assert sim.stats()["oversize_allocations.current"] == 1 and sim.stats()["oversize_segments.current"] == 2
    sim.free(h)
    h = sim.malloc(22 * MiB)  # 30 < 22 + 20 (max_non_split_rounding): reused whole as well
    assert len(sim.segments()) == 2 and blocks(sim, 0) == [(0, 30 * MiB, "active_allocated")]

    sim = CachingAllocatorSim(max_split_size_mb=20)
    sim.free(sim.malloc(60 * MiB))
    sim.malloc(22 * MiB)  # 60 ≥ 22 + 20 (max_non_split_rounding): too wasteful → new 22 MiB segment
    assert [s["total_size"] for s in sim.segments()] == [60 * MiB, 22 * MiB]
    assert "max_non_split_rounding" in sim.explain(-1)

    sim = CachingAllocatorSim()  # default: unlimited max_split_size → the 60 MiB block is reused and split
    sim.free(sim.malloc(60 * MiB))
    sim.malloc(22 * MiB)
    assert blocks(sim) == [(0, 22 * MiB, "active_allocated"), (22 * MiB, 38 * MiB, "inactive")]
    with pytest.raises(AllocatorError, match="≥ 20"):
        CachingAllocatorSim(max_split_size_mb=10)


def test_roundup_power2_divisions_matches_the_cpp_formula() -> None:
    # the example in the C++ comment: 1200 with 4 divisions between 1024 and 2048 → 1280
    assert _pow2_division_ceil(1200, 4) == 1280
    # but round_size only uses divisions for sizes > 512 × divisions, so 1200 B still rounds to 512 multiples
    assert round_size(1200, 4) == 1536
    # 1,200,000 lies in [1 MiB, 2 MiB): steps of 256 KiB → 1,310,720
    assert round_size(1_200_000, 4) == 1_310_720
    assert round_size(5 * MiB + 1, 4) == 6 * MiB  # [4, 8) MiB in steps of 1 MiB
    assert round_size(4 * MiB, 4) == 4 * MiB  # powers of two stay
    assert round_size(5 * MiB + 1, 1) == 5 * MiB + 512  # one division means plain 512 B rounding
    # list form: the expectations of c10's AllocatorConfigTest (index = log2(size in MB))
    table = _divisions_table({64: 8, 128: 2, 256: 4, 512: 2, 1024: 4, ">": 1})
    assert [table[i] for i in (5, 6, 7, 8, 9, 10, 11, 12, 13)] == [8, 8, 2, 4, 2, 4, 1, 1, 1]
    table = _divisions_table({128: 8, 256: 16, 512: 1, 2048: 8, ">": 2})
    assert [table[i] for i in (6, 7, 8, 9, 10, 11, 12)] == [8, 8, 16, 1, 0, 8, 2]
    assert round_size(100 * MiB + 1, {256: 4, ">": 1}) == 112 * MiB  # [64, 128) MiB in 16 MiB steps
    assert round_size(300 * MiB + 1, {256: 4, ">": 1}) == 320 * MiB  # [256, 512) MiB in 64 MiB steps
    assert round_size(600 * MiB + 1, {256: 4, ">": 1}) == 600 * MiB + 512  # 1 division from 512 MiB on
    sim = CachingAllocatorSim(roundup_power2_divisions=4)
    sim.malloc(1_200_000)
    assert blocks(sim)[0] == (0, 1_310_720, "active_allocated") and "roundup_power2_divisions" in sim.explain(-1)
    with pytest.raises(AllocatorError, match="power of two"):
        CachingAllocatorSim(roundup_power2_divisions=3)


def test_record_stream_pending_free_is_not_reused_before_sync() -> None:
    sim = CachingAllocatorSim()
    a = sim.malloc(1000, stream=0)
    addr = sim.address(a)
    sim.record_stream(a, 1)
    sim.free(a)
    assert blocks(sim)[0] == (0, 1024, "active_pending_free")
    assert actions(sim)[-1] == "free_requested" and "record_stream" in sim.explain(-1)
    assert sim.stats()["allocated_bytes.all.current"] == 0 and sim.stats()["active_bytes.all.current"] == 1024
    b = sim.malloc(1000, stream=0)
    assert sim.address(b) != addr  # the pending block is skipped
    check_invariants(sim)
    sim.sync(0)  # the other stream is still busy
    assert blocks(sim)[0][2] == "active_pending_free"
    sim.sync(1)
    assert actions(sim)[-1] == "free_completed" and blocks(sim)[0] == (0, 1024, "inactive")
    c = sim.malloc(1000, stream=0)
    assert sim.address(c) == addr
    # a use on the allocation stream itself needs no event: the free completes at once
    sim.record_stream(c, 0)
    sim.free(c)
    assert actions(sim)[-2:] == ["free_requested", "free_completed"]
    check_invariants(sim)


def test_streams_do_not_share_cached_blocks() -> None:
    sim = CachingAllocatorSim()
    sim.free(sim.malloc(1000, stream=0))
    sim.malloc(1000, stream=3)
    assert len(sim.segments()) == 2 and sim.segments()[1]["stream"] == 3
    assert "no free block ≥ 1,024 B on stream 3" in sim.explain(-1)


def test_empty_cache_releases_only_wholly_free_segments() -> None:
    sim = CachingAllocatorSim()
    keep = sim.malloc(3 * MiB)  # 20 MiB segment, stays partly used
    gone = sim.malloc(18 * MiB)  # 17 MiB are free in the first segment: too little → its own 18 MiB segment
    small = sim.malloc(100)
    sim.free(gone)
    sim.free(small)
    sim.empty_cache()
    segs = sim.segments()
    assert [s["total_size"] for s in segs] == [20 * MiB]
    assert [e.size for e in sim.log if e.action == "segment_free"] == [18 * MiB, 2 * MiB]  # large pool, then small
    assert "empty_cache" in sim.explain(-1)
    assert sim.stats()["reserved_bytes.all.current"] == 20 * MiB and sim.stats()["num_device_free"] == 2
    sim.free(keep)
    sim.empty_cache()
    assert sim.segments() == [] and sim.stats()["reserved_bytes.all.current"] == 0
    assert sim.stats()["reserved_bytes.all.peak"] == 40 * MiB


def test_oom_frees_cached_segments_and_retries_then_raises() -> None:
    sim = CachingAllocatorSim(capacity=40 * MiB)
    sim.malloc(15 * MiB)  # 16 MiB segment
    b = sim.malloc(3 * MiB)  # 20 MiB segment → 36 MiB reserved
    sim.free(b)
    sim.malloc(21 * MiB)  # no cached block ≥ 21 MiB; 36 + 22 > 40: free the cached 20 MiB segment, retry: 16 + 22 fits
    st = sim.stats()
    assert st["num_alloc_retries"] == 1 and st["num_ooms"] == 0 and st["reserved_bytes.all.current"] == 38 * MiB
    assert actions(sim)[-3:] == ["segment_free", "segment_alloc", "alloc"]
    assert "cudaMalloc failed" in sim.explain(-1)
    with pytest.raises(SimulatedOOM, match="Tried to allocate 30 MiB") as info:
        sim.malloc(30 * MiB)  # nothing cached is left to free
    assert info.value.stats["num_ooms"] == 1 and info.value.stats["num_alloc_retries"] == 2
    assert [s["total_size"] for s in info.value.segments] == [16 * MiB, 22 * MiB]
    oom = sim.log[info.value.event_index]
    assert oom.to_trace() == {"action": "oom", "device_free": 2 * MiB, "size": 30 * MiB, "stream": 0, "frames": []}
    check_invariants(sim)


def test_garbage_collection_frees_old_cached_blocks_first() -> None:
    sim = CachingAllocatorSim(capacity=100 * MiB, garbage_collection_threshold=0.5)
    sim.free(sim.malloc(30 * MiB))  # cached since search 1
    sim.free(sim.malloc(40 * MiB))  # no GC yet (30 ≤ 50 MiB); cached since search 2; reserved 70 MiB
    sim.malloc(50 * MiB)  # search 3: 70 > 50 → ages 2 and 1, average 1.5 → the 30 MiB block goes
    assert [s["total_size"] for s in sim.segments()] == [40 * MiB, 50 * MiB]
    freed = [e for e in sim.log if e.action == "segment_free"]
    assert [e.size for e in freed] == [30 * MiB] and "garbage collection" in freed[0].explanation
    assert sim.stats()["num_alloc_retries"] == 0


def test_expandable_segments_grow_in_20_mib_pages() -> None:
    sim = CachingAllocatorSim(expandable_segments=True)
    a = sim.malloc(MiB + 1)
    assert [(s["total_size"], s["is_expandable"]) for s in sim.segments()] == [(20 * MiB, True)]
    assert sim.stats()["segment.all.current"] == 0 and sim.stats()["reserved_bytes.all.current"] == 20 * MiB
    b = sim.malloc(25 * MiB)  # 18.99 MiB free at the end + one more 20 MiB page
    assert [s["total_size"] for s in sim.segments()] == [40 * MiB]
    assert sim.address(b) == sim.address(a) + 1_049_088
    assert blocks(sim) == [(0, 1_049_088, "active_allocated"), (1_049_088, 25 * MiB, "active_allocated"),
                           (1_049_088 + 25 * MiB, 40 * MiB - 1_049_088 - 25 * MiB, "inactive")]
    assert actions(sim).count("segment_map") == 2 and "expandable segment" in sim.explain(-1)
    check_invariants(sim)
    sim.free(a)
    sim.empty_cache()  # a's 1 MiB shares the first page with b, and the tail shares b's last page: nothing unmaps
    assert [s["total_size"] for s in sim.segments()] == [40 * MiB] and "segment_unmap" not in actions(sim)
    check_invariants(sim)
    sim.free(b)
    sim.empty_cache()
    assert sim.segments() == [] and sim.stats()["reserved_bytes.all.current"] == 0
    assert "segment_unmap" in actions(sim)


def test_bad_use_is_refused_clearly() -> None:
    sim = CachingAllocatorSim()
    h = sim.malloc(10)
    sim.free(h)
    with pytest.raises(AllocatorError, match="already freed"):
        sim.free(h)
    with pytest.raises(AllocatorError, match="unknown handle"):
        sim.free(12345)
    with pytest.raises(AllocatorError, match="unknown handle"):
        sim.record_stream(999, 1)
    with pytest.raises(AllocatorError, match="positive number of bytes"):
        sim.malloc(0)
    with pytest.raises(AllocatorError, match="does not exist"):
        sim.explain(10_000)
    with pytest.raises(AllocatorError, match="between 0 and 1"):
        CachingAllocatorSim(garbage_collection_threshold=1.5)
    with pytest.raises(AllocatorError, match="capacity"):
        CachingAllocatorSim(capacity=-1)


# ------------------------------------------------------------------------------------------ replay


def fragmenting_run(sim: CachingAllocatorSim) -> None:
    """Batch sizes that grow by one: each step leaves slivers that the next, larger step cannot use."""
    live: list[int] = []
    for n in range(8, 14):
        for width in (3, 5, 7):
            live.append(sim.malloc(n * width * MiB // 2 + 4096, stream=0))
        for h in live[:-1]:
            sim.free(h)
        live = live[-1:]


def test_replaying_own_trace_reproduces_the_state() -> None:
    for kw in ({}, {"expandable_segments": True}, {"max_split_size_mb": 40}):
        sim = CachingAllocatorSim(**kw)
        fragmenting_run(sim)
        h = sim.malloc(5000, stream=2)
        sim.record_stream(h, 5)
        sim.free(h)
        again = replay(sim.trace(), **kw)
        assert again.segments() == sim.segments()
        assert again.stats() == sim.stats()
        assert again.trace() == sim.trace()


def test_replay_tolerates_a_truncated_trace_and_pending_frees() -> None:
    trace: list[dict[str, Any]] = [
        {"action": "free_requested", "addr": 0xDEAD, "size": 8, "stream": 0},  # allocated before recording
        {"action": "free_completed", "addr": 0xDEAD, "size": 8, "stream": 0},
        {"action": "alloc", "addr": 0x100, "size": 4096, "stream": 0},
        {"action": "free_requested", "addr": 0x100, "size": 4096, "stream": 0},  # completes later: other stream
        {"action": "alloc", "addr": 0x200, "size": 4096, "stream": 0},
        {"action": "free_completed", "addr": 0x100, "size": 4096, "stream": 0},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0},
    ]
    sim = replay(trace)
    assert sim.replay_report["skipped_frees"] == 1
    assert [b[1:] for b in blocks(sim)] == [(4096, "inactive"), (4096, "active_allocated"),
                                            (2 * MiB - 8192, "inactive")]


def test_counterfactual_expandable_segments_reduce_reserved_memory() -> None:
    sim = CachingAllocatorSim()
    fragmenting_run(sim)
    base = counterfactual(sim.trace())
    assert base["reserved_peak"] == sim.stats()["reserved_bytes.all.peak"] and base["ooms"] == 0
    grown = counterfactual(sim.trace(), expandable_segments=True)
    assert grown["allocated_peak"] <= base["allocated_peak"]
    assert grown["reserved_peak"] < base["reserved_peak"]
    capped = counterfactual(sim.trace(), capacity=base["reserved_peak"] // 2)
    assert capped["ooms"] > 0


# ------------------------------------------------------------------------------------ property tests

SETTINGS = [
    {},
    {"max_split_size_mb": 20},
    {"roundup_power2_divisions": 4},
    {"expandable_segments": True},
    {"capacity": 96 * MiB, "garbage_collection_threshold": 0.5},
    {"capacity": 64 * MiB, "max_split_size_mb": 24},
    {"capacity": 80 * MiB, "expandable_segments": True},
]

sizes = st.one_of(st.integers(1, 4 * KiB), st.integers(1, 2 * MiB), st.integers(MiB, 48 * MiB))
ops = st.lists(
    st.one_of(
        st.tuples(st.just("malloc"), sizes, st.integers(0, 2)),
        st.tuples(st.just("free"), st.integers(0, 1000)),
        st.tuples(st.just("record_stream"), st.integers(0, 1000), st.integers(0, 2)),
        st.tuples(st.just("sync"), st.one_of(st.none(), st.integers(0, 2))),
        st.tuples(st.just("empty_cache")),
    ),
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(SETTINGS), ops)
def test_invariants_hold_over_random_sequences(kw: dict[str, Any], program: list[tuple[Any, ...]]) -> None:
    sim = CachingAllocatorSim(**kw)
    live: list[int] = []
    seen: set[int] = set()
    ooms = 0
    for op in program:
        if op[0] == "malloc":
            try:
                h = sim.malloc(op[1], op[2])
            except SimulatedOOM:
                ooms += 1
                assert kw.get("capacity") is not None and sim.stats()["num_ooms"] == ooms
                check_invariants(sim)
                continue
            assert h not in seen, "handles must be unique"
            seen.add(h)
            live.append(h)
        elif op[0] == "free" and live:
            sim.free(live.pop(op[1] % len(live)))
        elif op[0] == "record_stream" and live:
            sim.record_stream(live[op[1] % len(live)], op[2])
        elif op[0] == "sync":
            sim.sync(op[1])
        elif op[0] == "empty_cache":
            sim.empty_cache()
            for s in sim.segments():  # only segments with a live allocation survive (pending frees were synced)
                assert any(b["state"] == "active_allocated" for b in s["blocks"]), s
        check_invariants(sim)
    assert sim.stats()["allocation.all.current"] == len(live)
    assert all(e.explanation for e in sim.log)
    assert all(set(t) >= {"action", "size", "stream"} for t in sim.trace())
    for h in live:
        sim.free(h)
    sim.empty_cache()
    assert sim.segments() == [] and sim.stats()["reserved_bytes.all.current"] == 0
    check_invariants(sim)
