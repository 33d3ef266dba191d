"""The profile lens against ground truth: torch.profiler's own key_averages() of the same run (counts exact,
times to the ns the trace keeps), nesting by time containment, record_function ranges, Python stacks with
with_stack=True, a saved trace reading the same as the live one, hostile files, and downsampling that keeps
the top level and says what it dropped."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from torchlens_widgets.lenses.asyncexec import TraceError
from torchlens_widgets.lenses.profile import (
    ProfileError,
    ProfileTrace,
    downsample,
    key_averages,
    load_profile,
    profile_trace_of,
    record_profile,
)

MODEL = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
X = torch.randn(8, 16)


def train_step(x: torch.Tensor) -> None:
    with record_function("forward"):
        y = MODEL(x)
    with record_function("backward"):
        y.sum().backward()


@pytest.fixture(scope="module")
def measured() -> tuple[ProfileTrace, dict[str, Any]]:
    """One profiled run (no stacks: key_averages() is then reliable) and what torch says of it."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        train_step(X)
        train_step(X)
    truth = {k.key: (k.count, k.cpu_time_total, k.self_cpu_time_total) for k in prof.key_averages()}
    return profile_trace_of(prof), truth


@pytest.fixture(scope="module")
def with_stacks(tmp_path_factory: pytest.TempPathFactory) -> tuple[ProfileTrace, Path]:
    path = tmp_path_factory.mktemp("prof") / "trace.json"
    return record_profile(train_step, X, save=path), path


def test_the_table_agrees_with_key_averages(measured: tuple[ProfileTrace, dict[str, Any]]) -> None:
    trace, truth = measured
    mine = {a.name: a for a in trace.averages}
    assert set(mine) == set(truth)
    for name, (count, total, self_time) in truth.items():
        a = mine[name]
        assert a.count == count, name
        assert a.total == pytest.approx(total, abs=0.01, rel=1e-4), name
        assert a.self_time == pytest.approx(self_time, abs=0.01, rel=1e-4), name
    ops = trace.key_averages("cpu_op")
    assert {a.name for a in ops} >= {"aten::linear", "aten::addmm", "aten::relu"}
    assert [a.self_time for a in key_averages(trace)] == sorted((a.self_time for a in trace.averages), reverse=True)
    assert mine["forward"].count == mine["backward"].count == 2


def test_spans_nest_by_time_containment(measured: tuple[ProfileTrace, dict[str, Any]]) -> None:
    trace, _ = measured
    for e in trace.events:
        if e.parent is None:
            assert e.depth == 0
            continue
        p = trace.events[e.parent]
        assert (p.thread, p.depth + 1) == (e.thread, e.depth)
        assert p.start <= e.start and e.end <= p.end + 1e-3
    linear = trace.by_name("aten::linear")
    assert len(linear) == 4
    assert all("aten::addmm" in {c.name for c in trace.children(e)} for e in linear)


def test_record_function_ranges_hold_the_ops(measured: tuple[ProfileTrace, dict[str, Any]]) -> None:
    trace, _ = measured
    forward = trace.by_name("forward")
    assert len(forward) == 2 and all(f.is_range and f.category == "user_annotation" and f.depth == 0 for f in forward)
    for lin in trace.by_name("aten::linear"):
        top = lin
        while top.parent is not None:
            top = trace.events[top.parent]
        assert top.name == "forward"
    addmm = trace.by_name("aten::addmm")[0]
    assert addmm.shapes == ((32,), (8, 16), (16, 32), (), ())


def test_with_stack_gives_each_op_its_python_stack(with_stacks: tuple[ProfileTrace, Path]) -> None:
    trace, _ = with_stacks
    assert trace.with_stack and trace.python_frames > 0
    stack = trace.by_name("aten::linear")[0].stack
    assert any("test_profile.py" in f and "train_step" in f for f in stack), stack
    assert not any("torch/profiler" in f or "lenses/profile.py" in f or " at 0x" in f for f in stack)
    assert not any("_pytest" in f or "pluggy" in f for f in stack)  # a live run's stacks end at the function it ran
    assert trace.by_name("forward")[0].stack  # ranges get stacks too
    assert all(not e.stack for e in load_profile(_chrome([("aten::mm", "cpu_op", 0, 5)])).events)


def test_a_saved_trace_reads_as_the_live_one(with_stacks: tuple[ProfileTrace, Path], tmp_path: Path) -> None:
    live, path = with_stacks
    loaded = load_profile(path)
    assert loaded.source == "file" and live.source == "live"
    assert loaded.events == live.events and loaded.averages == live.averages and loaded.threads == live.threads
    gz = tmp_path / "trace.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert load_profile(gz).events == loaded.events
    assert load_profile(path.read_text()).averages == live.averages
    assert load_profile(json.loads(path.read_text())).events == loaded.events
    assert json.loads(json.dumps(live.to_dict()))["kind"] == "profile_trace"


def _chrome(spans: list[tuple[Any, ...]]) -> dict[str, Any]:
    """A Chrome trace from (name, cat, ts, dur[, tid]) tuples."""
    return {"traceEvents": [{"ph": "X", "name": s[0], "cat": s[1], "ts": s[2], "dur": s[3], "pid": 1,
                             "tid": s[4] if len(s) > 4 else 1, "args": {}} for s in spans]
            + [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}]}


def test_nesting_and_self_time_of_a_hand_made_trace() -> None:
    doc = _chrome([("step", "user_annotation", 100, 50), ("aten::sum", "cpu_op", 105, 20),
                   ("aten::sum", "cpu_op", 106, 18), ("aten::fill_", "cpu_op", 110, 4),
                   ("aten::mm", "cpu_op", 130, 10), ("aten::add", "cpu_op", 300, 5, 2),
                   ("PyTorch Profiler (0)", "Trace", 0, 999)])
    t = load_profile(doc)
    assert [(e.name, e.start, e.depth) for e in t.events] == [
        ("step", 0, 0), ("aten::sum", 5, 1), ("aten::sum", 6, 2), ("aten::fill_", 10, 3), ("aten::mm", 30, 1),
        ("aten::add", 200, 0)]
    assert [th.name for th in t.threads] == ["main", "thread 2"] and t.events[-1].thread == 1
    rows = {a.name: a for a in t.averages}
    assert (rows["step"].count, rows["step"].total, rows["step"].self_time) == (1, 50, 20)
    # torch folds an op that is the only child of an op of the same name into it: one call
    assert (rows["aten::sum"].count, rows["aten::sum"].total, rows["aten::sum"].self_time) == (1, 20, 16)


@pytest.mark.parametrize("bad, says", [
    ("no/such/trace.json", "no trace file"),
    ("{not json", "not valid JSON"),
    ({"foo": 1}, "traceEvents"),
    ([1, "x", {"ph": "X", "name": "a"}], "no timed spans"),
    ({"traceEvents": [{"ph": "X", "name": "a", "ts": "inf", "dur": 1}]}, "no timed spans"),
    (42, "path, JSON text or a parsed trace"),
    (b"{}", "not bytes"),
])
def test_hostile_input_gets_advice(bad: Any, says: str) -> None:
    with pytest.raises(ProfileError, match=says) as info:
        load_profile(bad)
    assert isinstance(info.value, TraceError) and isinstance(info.value, ValueError)


def test_hostile_files(tmp_path: Path) -> None:
    (tmp_path / "bin.json").write_bytes(b"\x00\xff\xfe garbage")
    (tmp_path / "bad.json.gz").write_bytes(b"\x1f\x8b\x08 truncated")
    for name in ("bin.json", "bad.json.gz"):
        with pytest.raises(ProfileError):
            load_profile(tmp_path / name)
    with pytest.raises(ProfileError, match="callable"):
        record_profile(42)  # type: ignore[arg-type]
    with pytest.raises(ProfileError, match="torch.profiler.profile"):
        profile_trace_of(object())


def _wide(n_steps: int, ops_per_step: int) -> ProfileTrace:
    spans: list[tuple[Any, ...]] = []
    t = 0
    for s in range(n_steps):
        spans.append((f"step{s % 3}", "user_annotation", t, ops_per_step * 10 + 2))
        for k in range(ops_per_step):
            spans.append(("aten::linear", "cpu_op", t + 1 + 10 * k, 8 + (k % 3)))
            spans.append(("aten::addmm", "cpu_op", t + 2 + 10 * k, 5))
        t += ops_per_step * 10 + 5
    spans.append(("aten::item", "cpu_op", t + 1, 1))
    return load_profile(_chrome(spans))


def test_downsample_keeps_the_top_level_and_reports_what_it_dropped() -> None:
    full = _wide(20, 30)  # 20 ranges + 1 top-level op, 600 linear, 600 addmm
    assert len(full.events) == 1221 and downsample(full, 5000) is full
    small = downsample(full, 300)
    assert len(small.events) == 300 and small.averages == full.averages
    assert {e.name for e in small.events if e.depth == 0} == {"step0", "step1", "step2", "aten::item"}
    assert sum(e.depth == 0 for e in small.events) == 21
    kept_linear = [e for e in small.events if e.name == "aten::linear"]
    kept_starts = {e.start for e in kept_linear}
    dropped_linear = [e for e in full.events if e.name == "aten::linear" and e.start not in kept_starts]
    assert min(e.duration for e in kept_linear) >= max(e.duration for e in dropped_linear)  # the longest first
    assert not any(e.name == "aten::addmm" for e in small.events)  # shorter than every linear
    for e in small.events:  # indices renumbered, nesting whole
        assert e.index == small.events.index(e)
        assert e.parent is None or small.events[e.parent].depth == e.depth - 1
    lo = small.left_out
    assert lo is not None and lo.events == 921 and lo.names[0] == ("aten::addmm", 600)
    # the time covered: the dropped linears, and the addmm inside each kept linear (not double counted)
    assert lo.time == pytest.approx(sum(e.duration for e in dropped_linear) + 5 * len(kept_linear))
    again = downsample(small, 100)
    assert again.left_out is not None and again.left_out.events == 1121
    with pytest.raises(ProfileError, match="positive"):
        downsample(full, 0)


def test_a_profiler_already_exported_is_read_again(tmp_path: Path) -> None:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        train_step(X)
    prof.export_chrome_trace(str(tmp_path / "mine.json"))  # kineto writes its trace once only
    again = profile_trace_of(prof)
    saved = load_profile(tmp_path / "mine.json")
    assert [(a.name, a.count) for a in sorted(again.averages, key=lambda a: a.name)] == \
        [(a.name, a.count) for a in sorted(saved.averages, key=lambda a: a.name)]


def test_the_lens_quiets_kinetos_start_and_stop_lines() -> None:
    """Importing the lens sets KINETO_LOG_LEVEL before the process's first profiler run: torch 2.13's Kineto then
    writes no profiler_start / profiler_stop line on stderr (without it, it writes both, checked too)."""
    import os
    import subprocess
    import sys

    run = ("import torch\nfrom torch.profiler import profile\n{lens}"
           "with profile() as p:\n    torch.ones(3) + 1\n")
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    quiet = subprocess.run([sys.executable, "-c", run.format(lens="import torchlens_widgets.lenses.profile\n")],
                           env=env, capture_output=True, text=True, timeout=120)
    loud = subprocess.run([sys.executable, "-c", run.format(lens="")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert quiet.returncode == 0 and loud.returncode == 0, quiet.stderr + loud.stderr
    assert "profiler_start" in loud.stderr and "profiler_stop" in loud.stderr
    assert "profiler_start" not in quiet.stderr and "profiler_stop" not in quiet.stderr
