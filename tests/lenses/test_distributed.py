"""Distributed lens: what it records agrees with DDP's own buckets and DTensor's local shapes; a rank that raises
or hangs ends the run fast with an error naming it; no worker process outlives a run.

Each run starts two fresh Python processes (torch import ~3 s each), so the DDP and FSDP runs are shared by
module-scoped fixtures and the failure runs use short timeouts."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from torchlens_widgets.lenses import zygote
from torchlens_widgets.lenses.distributed import (
    DistTrace,
    NotImportableError,
    RankFailed,
    RankTimeout,
    ddp_trace,
    fsdp_trace,
    run_ranks,
    step_reference,
)

S = "torchlens_widgets.lenses.distributed_scenarios"
pytestmark = pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")


def _descendants() -> set[int]:
    """Pids of every live descendant of this process but its zygote (which forks the rank workers and stays for
    the next run)."""
    return set(zygote.descendants(os.getpid())) - {zygote.pid()}


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    before = _descendants()
    yield
    assert _descendants() - before == set(), "a worker process was left behind"


@pytest.fixture(scope="module")
def ddp() -> DistTrace:
    before = _descendants()
    trace = ddp_trace(bucket_cap_mb=0.001, iterations=2, no_sync=True)
    assert _descendants() - before == set()
    return trace


@pytest.fixture(scope="module")
def fsdp() -> DistTrace:
    return fsdp_trace()


def test_bucket_partition_is_ddps_own(ddp: DistTrace) -> None:
    assert ddp.kind == "ddp" and ddp.world_size == 2 and [r.rank for r in ddp.ranks] == [0, 1]
    for rank in ddp.ranks:
        truth = rank.result
        assert rank.partition() == [tuple(b) for b in truth["ddp_partition"]]
        last = [b for b in rank.buckets if b.iteration == rank.buckets[-1].iteration]
        assert [b.nbytes for b in last] == truth["ddp_bucket_bytes"]
        assert all(b.nbytes == sum(truth["param_bytes"][p] for p in b.params) for b in last)
        assert len(last) > 1, "a 1 KB bucket cap must split the MLP's gradients into several buckets"


def test_first_iteration_uses_the_initial_buckets_then_ddp_rebuilds(ddp: DistTrace) -> None:
    r0 = ddp.rank0
    first = [b for b in r0.buckets if b.iteration == 0]
    assert len(first) == 1 and first[0].params[0] == "0.weight"  # registration order, one first bucket
    assert r0.partition()[0][0] == "6.bias"  # rebuilt: the order gradients became ready (last layer first)
    assert any("rebuilds" in n for n in ddp.notes)


def test_no_sync_iteration_has_no_all_reduce(ddp: DistTrace) -> None:
    for rank in ddp.ranks:
        assert [(it.index, it.no_sync) for it in rank.iterations] == [(0, False), (1, True), (2, False)]
        by_it = {it.index: [b for b in rank.buckets if b.iteration == it.index] for it in rank.iterations}
        assert by_it[1] == [] and by_it[0] and by_it[2]
        assert any(n.iteration == 1 for n in rank.nodes), "backward still ran under no_sync"


def test_buckets_fire_during_backward_in_index_order(ddp: DistTrace) -> None:
    for rank in ddp.ranks:
        it = rank.iterations[-1]
        last = [b for b in rank.buckets if b.iteration == it.index]
        assert [b.index for b in last] == list(range(len(last)))
        assert it.backward_start is not None and it.backward_end is not None
        for b in last:
            assert b.ready is not None and b.end is not None
            assert it.backward_start <= b.ready <= b.start < b.end <= it.backward_end + 1
        assert last[0].start < rank.nodes[-1].start, "the first bucket launches before backward's last node"
        names = [n.name for n in rank.nodes if n.iteration == it.index]
        assert "AddmmBackward0" in names and "AccumulateGrad(0.weight)" in names


def test_to_dict_is_json_data(ddp: DistTrace) -> None:
    import json

    d = ddp.to_dict()
    assert d["kind"] == "dist_trace" and d["version"] == 1 and d["mode"] == "ddp"
    assert json.loads(json.dumps(d)) == d
    assert d["ranks"][0]["buckets"][0]["params"][0] == "0.weight"


def test_fsdp_local_shapes_are_dtensors(fsdp: DistTrace) -> None:
    assert fsdp.kind == "fsdp"
    for rank in fsdp.ranks:
        truth = rank.result["local_shapes"]
        assert {s.name: list(s.local_shape) for s in rank.shards} == truth
        assert all(s.placement == "S(0)" for s in rank.shards)
    w0, w1 = (next(s for s in r.shards if s.name == "6.weight") for r in fsdp.ranks)
    assert w0.shape == (4, 32) and w0.local_shape == (2, 32) and w1.local_shape == (2, 32)


def test_fsdp_collectives_and_memory(fsdp: DistTrace) -> None:
    for rank in fsdp.ranks:
        kinds = [c.kind for c in rank.collectives]
        assert kinds.count("all_gather") >= 4 and kinds.count("reduce_scatter") == 4
        assert all(c.end is not None and c.end >= c.start for c in rank.collectives)
        sharded = sum(4 * _numel(s.local_shape) for s in rank.shards)
        assert {m.sharded for m in rank.memory} == {sharded}
        assert max(m.unsharded for m in rank.memory) > 0, "an all-gathered layer is held unsharded in forward"
        assert rank.memory[-1].unsharded == 0


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def test_a_raising_rank_names_itself(no_leftovers: None) -> None:
    t = time.monotonic()
    with pytest.raises(RankFailed) as info:
        run_ranks(f"{S}:raising_step", kwargs={"bad_rank": 1, "message": "bad batch 7"}, timeout=30)
    assert time.monotonic() - t < 25
    e = info.value
    assert e.rank == 1 and e.exc_type == "ValueError" and e.message == "bad batch 7"
    assert "rank 1 raised ValueError: bad batch 7" in str(e) and "distributed_scenarios.py" in str(e)


def test_a_hanging_rank_is_killed_at_the_timeout(no_leftovers: None) -> None:
    t = time.monotonic()
    with pytest.raises(RankTimeout) as info:
        run_ranks(f"{S}:hanging_step", kwargs={"bad_rank": 1}, timeout=3)
    assert time.monotonic() - t < 3 + 15  # start-up (two torch imports) + the step timeout
    e = info.value
    assert e.ranks == [0, 1] and e.started and "did not finish the step within 3 s" in str(e)
    assert "rank 1 was in hanging_step" in str(e)  # asleep in the step itself
    assert "rank 0 was in" in str(e) and "all_reduce" in e.stacks[0]  # waiting for rank 1 in the collective


def _defined_here(rec: object) -> None:
    pass


def test_steps_from_main_or_closures_are_refused_with_a_way_out() -> None:
    def local(rec: object) -> None:
        pass

    with pytest.raises(NotImportableError, match="inside a function"):
        step_reference(local)
    _defined_here.__module__ = "__main__"
    try:
        with pytest.raises(NotImportableError, match=r"__main__.*\.py file next to the notebook"):
            run_ranks(_defined_here)
    finally:
        _defined_here.__module__ = __name__
    with pytest.raises(NotImportableError, match="module:function"):
        step_reference("no_colon")
    with pytest.raises(NotImportableError, match="cannot import"):
        run_ranks("torchlens_widgets.lenses.distributed_scenarios:nope")
    assert step_reference(_defined_here) == f"{__name__}:_defined_here"


def test_ranks_that_do_not_start_in_time_are_killed(no_leftovers: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(zygote.ENV_OFF, "0")  # fresh interpreters: importing torch alone takes longer than 0.3 s
    t = time.monotonic()
    with pytest.raises(RankTimeout) as info:
        run_ranks(f"{S}:raising_step", start_timeout=0.3)
    assert time.monotonic() - t < 5
    assert not info.value.started and info.value.ranks == [0, 1]
    assert "did not start (import, join the process group) within 0.3 s" in str(info.value)


_CAPSTONE = """
def define_fused_op(name):
    @torch.library.custom_op(name, mutates_args=())
    def gelu_gate(u: Tensor, v: Tensor) -> Tensor:
        return F.gelu(u).mul_(v)

    gelu_gate.register_fake(lambda u, v: torch.empty_like(u))
    gelu_gate.register_autograd(
        lambda ctx, g: (torch.ops.aten.gelu_backward(g * ctx.saved_tensors[1], ctx.saved_tensors[0]),
                        F.gelu(ctx.saved_tensors[0]) * g),
        setup_context=lambda ctx, inputs, output: ctx.save_for_backward(*inputs))
    return gelu_gate


def average_gradients(model, all_reduce, world_size):
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.flatten() for g in grads])
    all_reduce(flat)
    flat /= world_size
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()
"""


def test_capstone_dp_step_matches_ddp_with_one_all_reduce_per_iteration(no_leftovers: None) -> None:
    trace = run_ranks(f"{S}:capstone_dp_step", timeout=60, kwargs={"source": _CAPSTONE, "sizes": [5, 12], "batch": 3})
    for rank in trace.ranks:
        res = rank.result
        assert res["params"] == 6 and res["param_bytes"] == 4 * (2 * (5 * 12 + 12) + 12 * 5 + 5)
        assert res["op_calls"] == 2 and res["direct_calls"] == 0 and len(res["iterations"]) == 2
        for it in res["iterations"]:
            assert it["calls"] == 1 and it["bytes"] == res["param_bytes"] and not it["missing"]
            assert it["max_diff"] <= 1e-6 * res["max_grad"] and abs(it["ratio"] - 1) < 1e-5


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_free_heap_goes_back_to_the_os_before_the_ranks_start() -> None:
    import psutil

    from torchlens_widgets.lenses.distributed import _give_back_free_memory

    me = psutil.Process()
    chunks = [bytearray(64 * 1024) for _ in range(1500)]   # ~94 MiB below glibc's mmap threshold: on the heap
    del chunks[:-1]                                          # freed, but the last chunk pins the top of the heap
    before = me.memory_info().rss
    _give_back_free_memory()
    assert me.memory_info().rss <= before - 32 * 2**20   # glibc: most of the 94 MiB leaves the process



def test_ddp_facts_step_no_sync_broadcast_bucket_view_and_unused(no_leftovers: None) -> None:
    f0, f1 = (r.result for r in run_ranks(f"{S}:ddp_facts_step", record=False).ranks)
    assert f0["no_sync"] == f1["no_sync"]
    assert f0["no_sync"]["forward inside, backward outside"] == 0      # the forward decides
    assert f0["no_sync"]["forward outside, backward inside"] == 3      # a backward inside still all-reduces
    assert [r["broadcast"]["kept_own"] for r in (f0, f1)] == [True, False] and f1["broadcast"]["equal_after"]
    params = f0["bucket_view"]["False"]["params"]
    assert f0["bucket_view"]["False"]["grad_and_bucket_storage"] == 2 * params
    assert f0["bucket_view"]["True"]["grad_and_bucket_storage"] == params
    assert f0["unused"]["plain"].startswith("Expected to have finished reduction")
    assert f0["unused"]["find_unused_parameters"]["bucket_bytes"] == [f0["unused"]["find_unused_parameters"]["all_bytes"]] * 3


def test_local_shards_pads_like_fsdp() -> None:
    from torchlens_widgets.lenses.distributed_scenarios import local_shards

    four = [local_shards([16, 32, 32, 3], r, 4)["4.weight"] for r in range(4)]
    assert [shape[0] for shape, _ in four] == [1, 1, 1, 0] and all(nbytes == 32 * 4 for _, nbytes in four)
