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


def bucket_partition(param_bytes, cap_bytes, first_cap_bytes=None):  # type: ignore[no-untyped-def]
    buckets, current, size = [], [], 0
    limit = cap_bytes if first_cap_bytes is None else first_cap_bytes
    for name, nbytes in param_bytes:
        current.append(name)
        size += nbytes
        if size >= limit:
            buckets.append(current)
            current, size, limit = [], 0, cap_bytes
    if current:
        buckets.append(current)
    return buckets


def fsdp_param_bytes(shapes, world_size, itemsize):  # type: ignore[no-untyped-def]
    held = [0] * world_size
    for shape in shapes:
        rows, row_elements = shape[0], math.prod(shape[1:])
        chunk = -(-rows // world_size)
        for rank in range(world_size):
            held[rank] += max(0, min(chunk, rows - rank * chunk)) * row_elements * itemsize
    return held


HIDDEN_BUCKETS = ["exactly at the cap", "a first cap larger than everything", "no parameters",
                  "23 parameters, a small first cap", "one parameter, the default caps"]
HIDDEN_FSDP = ["3 ranks, float64", "fewer rows than ranks", "one rank", "4 ranks, mixed"]


def test_plain_python_references_pass_visible_and_hidden_cases(verdict) -> None:  # type: ignore[no-untyped-def]
    assert verdict("18-predict-buckets", lambda c: (
        n18.bucket_partition(c, bucket_partition),
        n18.bucket_partition(c, bucket_partition, hidden=HIDDEN_BUCKETS))) is None
    assert verdict("18-fsdp-memory", lambda c: (
        n18.fsdp_memory(c, fsdp_param_bytes), n18.fsdp_memory(c, fsdp_param_bytes, hidden=HIDDEN_FSDP))) is None


def test_a_hidden_bucket_failure_names_its_number_only(verdict) -> None:  # type: ignore[no-untyped-def]
    def above_the_cap(param_bytes, cap_bytes, first_cap_bytes=None):  # type: ignore[no-untyped-def]
        return bucket_partition(param_bytes, cap_bytes + 1, None if first_cap_bytes is None else first_cap_bytes + 1)

    assert verdict("18-predict-buckets", lambda c: n18.bucket_partition(c, above_the_cap)) is None
    message = verdict("18-predict-buckets", lambda c: n18.bucket_partition(c, above_the_cap, hidden=HIDDEN_BUCKETS))
    first = message.split("\n")[0]
    assert first.startswith("hidden case 1") and "1000" not in first and "'a'" not in first
    assert "expected" not in first


def test_a_hidden_fsdp_failure_prints_neither_the_call_nor_the_expected_bytes(verdict) -> None:  # type: ignore[no-untyped-def]
    def array_split(shapes, world_size, itemsize):  # type: ignore[no-untyped-def]
        held = [0] * world_size
        for shape in shapes:
            rows, rest = shape[0], math.prod(shape[1:])
            for rank in range(world_size):
                held[rank] += (rows // world_size + (rank < rows % world_size)) * rest * itemsize
        return held

    message = verdict("18-fsdp-memory", lambda c: n18.fsdp_memory(c, array_split))
    assert message.startswith("fsdp_param_bytes([(5, 8), (5,)], world_size=4, itemsize=2)")
    message = verdict("18-fsdp-memory", lambda c: n18.fsdp_memory(c, array_split, hidden=HIDDEN_FSDP))
    first = message.split("\n")[0]
    assert first.startswith("hidden case 1") and "fsdp_param_bytes(" not in first and "expected" not in first


def test_an_answer_that_reads_the_checks_frame_finds_no_expected_value(verdict) -> None:  # type: ignore[no-untyped-def]
    import sys

    def from_the_frame(param_bytes, cap_bytes, first_cap_bytes=None):  # type: ignore[no-untyped-def]
        frame = sys._getframe(1)
        while frame is not None:
            for value in frame.f_locals.values():
                if type(value) is list and value and all(type(v) is list for v in value):
                    return value
            frame = frame.f_back
        return None

    message = verdict("18-predict-buckets", lambda c: n18.bucket_partition(c, from_the_frame))
    assert message is not None and "bucket_partition(8 parameters, cap_bytes=1048" in message


def test_integer_subclasses_are_refused(verdict) -> None:  # type: ignore[no-untyped-def]
    class Loose(int):
        def __eq__(self, other):  # type: ignore[no-untyped-def]
            return True

        __hash__ = int.__hash__

    message = verdict("18-fsdp-memory", lambda c: n18.fsdp_memory(
        c, lambda shapes, world_size, itemsize: [Loose(0)] * world_size))
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
