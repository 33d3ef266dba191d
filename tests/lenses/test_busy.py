"""Long work shows a busy line (torchlens_widgets.busy): the first update within 2 s of the start, the elapsed
time moving while it runs, a summary that says done (with no time in it) at the end, and no ticker thread left,
however the work ends. Checked with a fake slow phase and through the real entry points: precompiling headers
(the compiler call mocked), torch.compile (compile_trace), a rank run and validation (the runner mocked)."""

from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchlens_widgets import busy

FIRST_S = 2.0  # the bound: the first update within 2 s of starting
_TIME = re.compile(r"\d+(\.\d+)?\s?s\b")


class Recorder:
    """A sink that keeps every update with the time it came (seconds since the recorder was made)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.updates: list[tuple[float, str]] = []
        self.closed: list[str] = []
        self.opened = 0

    def __call__(self) -> Recorder:  # the connector: one sink per busy line, counted
        self.opened += 1
        return self

    def update(self, title: str, phase: str, seconds: float) -> None:
        self.updates.append((time.monotonic() - self.t0, busy.line_text(title, phase, seconds)))

    def close(self, summary: str) -> None:
        self.closed.append(summary)


def _tickers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "torchlens-busy"]


@pytest.fixture
def rec() -> Iterator[Recorder]:
    r = Recorder()
    before = busy.connect(r)
    try:
        yield r
    finally:
        busy.connect(before)
    assert not _tickers(), "a ticker thread outlived its work"


def _first_and_done(rec: Recorder, started: float, title: str) -> None:
    assert rec.opened == 1, "one line per piece of work (nested work reports into it)"
    assert rec.updates, "no update at all"
    assert rec.updates[0][0] - started < FIRST_S, f"first update after {rec.updates[0][0] - started:.2f} s"
    assert rec.updates[0][1].startswith(title)
    assert rec.closed == [f"{title}: done"]
    assert not _TIME.search(rec.closed[-1])


def test_a_slow_phase_shows_its_time_moving(rec: Recorder) -> None:
    started = time.monotonic() - rec.t0
    with busy.working("fake work", "phase one") as line:
        time.sleep(0.6)
        line.phase("phase two")  # shown at once, not at the next tick
        time.sleep(0.6)
    _first_and_done(rec, started, "fake work")
    texts = [t for _, t in rec.updates]
    assert texts[0] == "fake work: phase one (0 s)"
    assert any(t.startswith("fake work: phase two (1 s)") for t in texts), texts
    gaps = [b - a for (a, _), (b, _) in zip(rec.updates, rec.updates[1:])]
    assert gaps and max(gaps) < 1.5  # the ticker rewrites the line about twice a second


def test_nested_work_is_a_phase_of_the_outer_line(rec: Recorder) -> None:
    with busy.working("outer", "first") as line:
        with busy.working("inner", "deep"):
            assert line.now() == "inner: deep"
        assert line.now() == "first"
    assert rec.opened == 1 and rec.closed == ["outer: done"]


@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError])
def test_interrupted_or_failed_work_stops_its_ticker(rec: Recorder, exc: type[BaseException]) -> None:
    with pytest.raises(exc), busy.working("doomed", "going"):
        time.sleep(0.2)
        raise exc()
    assert rec.closed == ["doomed: stopped" if exc is KeyboardInterrupt else "doomed: failed"]
    assert not _tickers()
    with busy.working("after"):  # the next piece of work starts clean (no stale nesting)
        pass
    assert rec.opened == 2


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_carriage_return_line_wiped_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    before = busy.connect(None)
    err, out = _Tty(), io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    try:
        with busy.working("grading", "1 of 2 notebooks graded", every=0.1):
            time.sleep(0.25)
            busy.echo("alice  01.ipynb: 3/3 passed", file=out)
    finally:
        busy.connect(before)
    text = err.getvalue()
    assert text.startswith("\rgrading: 1 of 2 notebooks graded (0 s)") and "\n" not in text
    assert text.endswith("\r") and text.rsplit("\r", 2)[-2].strip() == ""  # wiped: nothing left on the line
    assert out.getvalue() == "alice  01.ipynb: 3/3 passed\n"
    assert not _tickers()


def test_nothing_is_shown_without_a_kernel_or_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    before = busy.connect(None)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    try:
        with busy.working("quiet") as line:
            line.phase("x")
        assert not _tickers()
    finally:
        busy.connect(before)


# --- the real entry points -------------------------------------------------------------------------------------


def test_precompiling_headers_shows_progress(rec: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """prepare() with a build to take the flags from; the compiler call itself is a fake that takes 0.8 s."""
    from torchlens_widgets.lenses import build, precompiled

    if not precompiled.enabled():
        pytest.skip("precompiled headers are off here (no GCC)")
    monkeypatch.setenv(precompiled.ENV_DIR, str(tmp_path / "pch"))
    folder = tmp_path / "build"
    folder.mkdir()
    (folder / "build.ninja").write_text("cflags = -O2 -DTORCH_EXTENSION_NAME=x -fPIC\n")

    def compiler(cmd: list[str], timeout: float, env: dict[str, str]) -> object:
        time.sleep(0.8)
        Path(cmd[-1]).write_bytes(b"gch")
        import subprocess

        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(precompiled, "_run_group", compiler)
    report = build.BuildReport(name="x", ok=True, cache="miss", seconds=1.0, steps=(), flags=(), includes=(),
                               header_files=0, header_bytes=0, header_groups=(), errors=(), library="x.so",
                               directory=str(folder))
    started = time.monotonic() - rec.t0
    said = build.prepare(report)
    assert said.startswith("precompiled the lean headers in")
    _first_and_done(rec, started, "precompiling the lean headers")
    assert any("GCC parses them" in t for _, t in rec.updates), rec.updates


def test_torch_compile_shows_progress(rec: Recorder) -> None:
    import torch

    from torchlens_widgets.lenses.compile_trace import compile_trace

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) + 1

    started = time.monotonic() - rec.t0
    trace = compile_trace(f, torch.ones(3), backend="eager")
    assert trace.graph_count == 1
    _first_and_done(rec, started, "torch.compile of test_torch_compile_shows_progress.<locals>.f")
    assert any("call 1 of 1" in t for _, t in rec.updates), rec.updates


def test_a_rank_run_shows_progress(rec: Recorder) -> None:
    from torchlens_widgets.lenses.distributed import run_ranks

    started = time.monotonic() - rec.t0
    run_ranks("torchlens_widgets.lenses.distributed_scenarios:manual_dp_step", world_size=2, record=False)
    _first_and_done(rec, started, "running manual_dp_step on 2 rank(s)")
    assert any("ranks joined the process group" in t or "ranks finished" in t for _, t in rec.updates), rec.updates
