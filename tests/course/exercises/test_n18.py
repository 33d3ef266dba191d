"""Notebook 18's exercise checks, without a notebook: the references pass visible and hidden cases; a division by 2
fails on three ranks; collectives run through a process group's own methods are counted; hidden cases are named by
their number only; no rank worker outlives a check."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch

from torchlens_widgets.course.exercises import n18


def _workers() -> list[int]:
    """Rank worker processes still alive anywhere on this machine that this test process started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            status = (entry / "status").read_text()
        except OSError:
            continue
        parent = next((line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), "")
        if b"_worker_main" in cmdline and parent == str(os.getpid()):
            found.append(int(entry.name))
    return found


@pytest.fixture
def no_workers_left() -> None:
    yield
    assert _workers() == [], "a rank worker outlived the check"


def bucket_partition(params, cap_bytes, first_cap_bytes=None):  # type: ignore[no-untyped-def]
    first = cap_bytes if first_cap_bytes is None else first_cap_bytes
    filling = {}  # dtype -> (positions in the open bucket, its bytes, its cap)
    closed = []
    for position, (_name, numel, dtype) in enumerate(params):
        positions, size, limit = filling.get(dtype, ([], 0, first))
        positions.append(position)
        size += numel * dtype.itemsize
        if size >= limit:
            closed.append(positions)
            filling[dtype] = ([], 0, cap_bytes)
        else:
            filling[dtype] = (positions, size, limit)
    buckets = sorted(closed + [positions for positions, _, _ in filling.values() if positions])
    return [[params[i][0] for i in bucket] for bucket in buckets]


def fsdp_peak_bytes(layers, world_size, itemsize):  # type: ignore[no-untyped-def]
    shards, largest = 0, 0
    for layer in layers:
        gathered = 0
        for shape in layer:
            nbytes = -(-shape[0] // world_size) * math.prod(shape[1:]) * itemsize
            shards += nbytes
            gathered += world_size * nbytes
        largest = max(largest, gathered)
    return [shards + largest] * world_size


HIDDEN_BUCKETS = ["float16, exactly at the cap", "a float64 parameter larger than both caps",
                  "23 parameters, three dtypes, a small first cap", "no parameters", "one parameter, the default caps",
                  "section 2's MLP, float32, cap 5242", "bfloat16 and float16 alternating, cap 400"]
HIDDEN_FSDP = ["4 ranks, fewer rows than ranks", "the largest layer last, 3 ranks, float64", "one rank",
               "padding changes which layer is largest, 4 ranks", "a 3-d weight and a one-row layer, 2 ranks"]


def test_plain_python_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("18-predict-buckets", lambda c: (
        n18.bucket_partition(c, bucket_partition),
        n18.bucket_partition(c, bucket_partition, hidden=HIDDEN_BUCKETS))) is None
    assert verdict("18-fsdp-memory", lambda c: (
        n18.fsdp_memory(c, fsdp_peak_bytes), n18.fsdp_memory(c, fsdp_peak_bytes, hidden=HIDDEN_FSDP))) is None


def test_the_bucket_cases_separate_dtype_rules() -> None:
    """Plausible generalisations of the one-dtype rule are wrong on some case: one open bucket for all dtypes, buckets
    keyed by itemsize; and the reference's buckets are DDP's whether or not DDP is given the ready order."""
    def expected(name):  # type: ignore[no-untyped-def]
        params, cap, first = n18.BUCKET_CASES[name]
        return n18._buckets_expected(params, cap, first)

    def walk(params, cap, first, key):  # type: ignore[no-untyped-def]
        first = cap if first is None else first
        filling, closed = {}, []
        for position, (_n, numel, dtype) in enumerate(params):
            k = key(position, dtype)
            positions, size, limit = filling.get(k, ([], 0, first))
            positions.append(position)
            size += numel * dtype.itemsize
            if size >= limit:
                closed.append(positions)
                filling[k] = ([], 0, cap)
            else:
                filling[k] = (positions, size, limit)
        buckets = sorted(closed + [p for p, _, _ in filling.values() if p])
        return [[params[i][0] for i in b] for b in buckets]

    by_itemsize = {name: walk(*n18.BUCKET_CASES[name], key=lambda i, d: d.itemsize) for name in n18.BUCKET_CASES}
    one_bucket = {name: walk(*n18.BUCKET_CASES[name], key=lambda i, d: 0) for name in n18.BUCKET_CASES}
    assert any(by_itemsize[n] != expected(n) for n in n18.BUCKET_CASES)
    assert one_bucket["a bfloat16 block with float32 norms, cap 2000"] != expected(
        "a bfloat16 block with float32 norms, cap 2000")
    # the reference agrees with DDP's function when DDP is given the ready order too, bucket for bucket (in any order)
    import torch.distributed as dist

    for name, (params, cap, first) in n18.BUCKET_CASES.items():
        if not params:
            continue
        tensors = [torch.empty(n, dtype=d) for _, n, d in params]
        caps = [cap if first is None else first, cap]
        indices, _ = dist._compute_bucket_assignment_by_size(tensors, caps, [False] * len(tensors),
                                                             list(range(len(tensors))))
        assert sorted(indices) == sorted(sorted(b) for b in indices)
        assert sorted([params[i][0] for i in b] for b in indices) == sorted(expected(name))


def test_a_hidden_bucket_failure_names_its_number_only(verdict) -> None:  # type: ignore[no-untyped-def]
    def above_the_cap(params, cap_bytes, first_cap_bytes=None):  # type: ignore[no-untyped-def]
        return bucket_partition(params, cap_bytes + 1, None if first_cap_bytes is None else first_cap_bytes + 1)

    assert verdict("18-predict-buckets", lambda c: n18.bucket_partition(c, above_the_cap)) is None
    message = verdict("18-predict-buckets", lambda c: n18.bucket_partition(c, above_the_cap, hidden=HIDDEN_BUCKETS))
    first = message.split("\n")[0]
    assert first.startswith("hidden case 1") and "1000" not in first and "'a'" not in first
    assert "expected" not in first


def test_a_hidden_fsdp_failure_prints_neither_the_call_nor_the_expected_bytes(verdict) -> None:  # type: ignore[no-untyped-def]
    def unpadded(layers, world_size, itemsize):  # type: ignore[no-untyped-def]
        held = [0] * world_size
        largest = max(sum(math.prod(s) for s in layer) for layer in layers) * itemsize
        for layer in layers:
            for shape in layer:
                chunk = -(-shape[0] // world_size)
                for rank in range(world_size):
                    held[rank] += max(0, min(chunk, shape[0] - rank * chunk)) * math.prod(shape[1:]) * itemsize
        return [h + largest for h in held]

    message = verdict("18-fsdp-memory", lambda c: n18.fsdp_memory(c, unpadded))
    assert message.startswith("fsdp_peak_bytes([[(32, 16), (32,)], [(32, 32), (32,)], [(3, 32), (3,)]], "
                              "world_size=2, itemsize=4)[1]: expected 7688")   # rank 1 holds 1 row of 3, padded to 2
    passes_visible = fsdp_peak_bytes

    def no_padding_for_one_rank_only(layers, world_size, itemsize):  # type: ignore[no-untyped-def]
        return unpadded(layers, world_size, itemsize) if world_size == 4 else passes_visible(layers, world_size,
                                                                                                 itemsize)

    message = verdict("18-fsdp-memory", lambda c: n18.fsdp_memory(c, no_padding_for_one_rank_only,
                                                                   hidden=HIDDEN_FSDP))
    first = message.split("\n")[0]
    assert first.startswith("hidden case 1") and "fsdp_peak_bytes(" not in first and "expected" not in first


def test_the_fsdp_measurement_frees_each_layer_after_its_forward() -> None:
    """FSDP2 gathers one layer at a time in forward, padded, and frees it after (reshard_after_forward=True)."""
    samples = n18._fsdp_forward_samples((((3, 32), (3,)), ((5, 4),)), 2, 1, torch.float32)
    assert samples == [("before layer 0", 312, 528), ("after layer 0", 312, 0),
                       ("before layer 1", 312, 96), ("after layer 1", 312, 0)]


def test_an_answer_that_reads_the_checks_frame_finds_no_expected_value(verdict) -> None:  # type: ignore[no-untyped-def]
    import sys

    def from_the_frame(params, cap_bytes, first_cap_bytes=None):  # type: ignore[no-untyped-def]
        frame = sys._getframe(1)
        while frame is not None:
            for value in frame.f_locals.values():
                if type(value) is list and value and all(type(v) is list for v in value):
                    return value
            frame = frame.f_back
        return None

    message = verdict("18-predict-buckets", lambda c: n18.bucket_partition(c, from_the_frame))
    assert message is not None and "bucket_partition(the 10 parameters" in message


def test_integer_subclasses_are_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    class Loose(int):
        def __eq__(self, other):  # type: ignore[no-untyped-def]
            return True

        __hash__ = int.__hash__

    message = verdict("18-fsdp-memory", lambda c: n18.fsdp_memory(
        c, lambda layers, world_size, itemsize: [Loose(0)] * world_size))
    assert "expected a number, got an object of type Loose" in message


def test_hand_dp_reference_passes_and_a_division_by_two_fails_on_three_ranks(verdict, no_workers_left) -> None:  # type: ignore[no-untyped-def]
    def sync_gradients(model, all_reduce, world_size):  # type: ignore[no-untyped-def]
        def average(param):  # type: ignore[no-untyped-def]
            all_reduce(param.grad)
            param.grad.div_(world_size)

        for param in model.parameters():
            param.register_post_accumulate_grad_hook(average)

    assert verdict("18-hand-dp", lambda c: (n18.hand_dp(c, sync_gradients),
                                            n18.hand_dp(c, sync_gradients, hidden=["a 3-layer MLP 6 -> 24 -> 5 -> 1 "
                                                                                   "on 2 ranks"]))) is None
    halved = sync_gradients

    def sync_gradients(model, all_reduce, world_size):  # type: ignore[no-redef,no-untyped-def]
        def average(param):  # type: ignore[no-untyped-def]
            all_reduce(param.grad)
            param.grad.div_(2)

        for param in model.parameters():
            param.register_post_accumulate_grad_hook(average)

    assert halved is not sync_gradients
    message = verdict("18-hand-dp", lambda c: n18.hand_dp(c, sync_gradients))
    assert "on 3 ranks" in message and "yours are 1.500 times DDP's" in message


def test_a_process_groups_own_allreduce_is_counted(verdict, no_workers_left) -> None:  # type: ignore[no-untyped-def]
    def sync_gradients(model, all_reduce, world_size):  # type: ignore[no-untyped-def]
        import torch.distributed as dist

        group = dist.group.WORLD

        def average(param):  # type: ignore[no-untyped-def]
            all_reduce(torch.zeros_like(param.grad))  # counted, carries nothing
            group.allreduce([param.grad]).wait()
            param.grad.div_(world_size)

        for param in model.parameters():
            param.register_post_accumulate_grad_hook(average)

    message = verdict("18-hand-dp", lambda c: n18.hand_dp(c, sync_gradients))
    assert "called torch.distributed's collectives itself" in message


def overlap_gradients(buckets, all_reduce_async, world_size):  # type: ignore[no-untyped-def]
    bucket_of = {p: i for i, bucket in enumerate(buckets) for p in bucket}
    ready = [0] * len(buckets)
    launched = []

    def on_grad(param):  # type: ignore[no-untyped-def]
        index = bucket_of[param]
        ready[index] += 1
        if ready[index] == len(buckets[index]):
            flat = torch.cat([p.grad.reshape(-1) for p in buckets[index]])
            launched.append((index, flat, all_reduce_async(flat)))

    for param in bucket_of:
        param.register_post_accumulate_grad_hook(on_grad)

    def finish():  # type: ignore[no-untyped-def]
        for index, flat, handle in launched:
            handle.wait()
            offset = 0
            for p in buckets[index]:
                n = p.grad.numel()
                p.grad.copy_(flat[offset:offset + n].view_as(p.grad)).div_(world_size)
                offset += n
        launched.clear()
        ready[:] = [0] * len(buckets)

    return finish


HIDDEN_OVERLAP = ["3 ranks, one bucket per gradient", "one bucket for everything",
                  "4 ranks, buckets of 1, 3 and 2 gradients"]


def test_overlap_reference_passes_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("18-overlap", lambda c: (n18.overlap(c, overlap_gradients),
                                            n18.overlap(c, overlap_gradients, hidden=HIDDEN_OVERLAP))) is None


def test_overlap_a_wait_inside_backward_fails_and_says_why(verdict) -> None:  # type: ignore[no-untyped-def]
    def overlap_gradients(buckets, all_reduce_async, world_size):  # type: ignore[no-redef,no-untyped-def]
        def on_grad(param):  # type: ignore[no-untyped-def]
            all_reduce_async(param.grad).wait()
            param.grad.div_(world_size)

        for bucket in buckets:
            for param in bucket:
                param.register_post_accumulate_grad_hook(on_grad)
        return lambda: None

    message = verdict("18-overlap", lambda c: n18.overlap(c, overlap_gradients))
    assert "a handle's wait() ran during backward" in message


def test_overlap_a_hidden_failure_names_its_number_only(verdict) -> None:  # type: ignore[no-untyped-def]
    def one_bucket(buckets, all_reduce_async, world_size):  # type: ignore[no-untyped-def]
        return overlap_gradients([[p for b in buckets for p in b]], all_reduce_async, world_size)

    message = verdict("18-overlap", lambda c: n18.overlap(c, one_bucket, hidden=HIDDEN_OVERLAP))
    first = message.split("\n")[0]
    assert first.startswith("hidden case 1") and "3 ranks" not in first and "bucket per gradient" not in first


def test_overlap_simulated_group_sums_call_k_of_every_rank_once() -> None:
    from torchlens_widgets.lenses.distributed_scenarios import SimulatedGroup

    group = SimulatedGroup(3)
    tensors = [torch.full((2,), float(r + 1)) for r in range(3)]
    handles = [group.all_reduce_async(r)(t) for r, t in enumerate(tensors)]
    handles[1].wait()
    handles[0].wait()
    assert all(torch.equal(t, torch.full((2,), 6.0)) for t in tensors)
    assert [len(w) for w in group.waits] == [1, 1, 0] and not group.unmatched
    group.reset()
    early = group.all_reduce_async(0)(torch.ones(2))  # call 0 of rank 0; ranks 1 and 2 never make it
    with pytest.raises(RuntimeError, match="not made by every rank"):
        early.wait()
    assert group.unmatched == ["call 1"]
    group.rank = 1  # rank 1's backward is running: a wait cannot be served
    with pytest.raises(RuntimeError, match="during backward"):
        early.wait()
    assert group.waited_in_backward
