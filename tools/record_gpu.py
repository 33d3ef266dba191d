"""Record every CUDA scenario the course replays, in one command on a GPU machine (torch 2.11 or 2.13).

Each topic module in tools/gpu_scenarios/ records what its notebooks show on a GPU into
`torchlens_widgets/data/recorded/<topic>/` (gzip-compressed JSON, or pickles for allocator snapshots),
with `provenance.json` saying where and how. Only torch and the lens layer are imported, so the bare GPU
image needs no widget wheels. A step that fails is written down with its error and the run goes on: one
run of a few minutes is all the GPU time there is.

    python tools/record_gpu.py                 # on a GPU: record everything (about 5 minutes)
    python tools/record_gpu.py --dry-run       # on a CPU: run every scenario's code with CUDA stubbed
    python tools/record_gpu.py --only async_exec   # one topic
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gzip
import importlib
import json
import os
import pickle
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))

import torch  # noqa: E402

DEFAULT_OUT = ROOT / "torchlens_widgets" / "data" / "recorded"
TOPICS = ("allocator", "async_exec", "cuda_operator", "fusion", "precision", "traces", "compile", "triton", "distributed")


def _jsonable(obj: Any) -> Any:
    """Plain JSON data: tuples become lists, dtypes/devices/paths their names, other objects their repr."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else repr(obj)
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().tolist()
    if isinstance(obj, (torch.dtype, torch.device, Path)):
        return str(obj)
    return repr(obj)


class FakeEvent:
    """A CUDA event on the CPU dry run: records nothing, has always completed, measures 0 ms."""

    def __init__(self, enable_timing: bool = False) -> None:
        self.enable_timing = enable_timing

    def record(self, stream: Any = None) -> None: ...

    def synchronize(self) -> None: ...

    def wait(self, stream: Any = None) -> None: ...

    def query(self) -> bool:
        return True

    def elapsed_time(self, other: FakeEvent) -> float:
        return 0.0


class FakeStream:
    """A CUDA stream on the CPU dry run: work runs at once, so waits and syncs have nothing to do."""

    def wait_stream(self, other: Any) -> None: ...

    def wait_event(self, event: Any) -> None: ...

    def synchronize(self) -> None: ...

    def query(self) -> bool:
        return True

    def record_event(self, event: Any = None) -> FakeEvent:
        return event or FakeEvent()


class Cuda:
    """`torch.cuda` on a GPU; on the dry run the few calls the scenarios make, stubbed to do nothing."""

    def __init__(self, real: bool) -> None:
        self.real = real

    def synchronize(self) -> None:
        if self.real:
            torch.cuda.synchronize()

    def Stream(self) -> Any:
        return torch.cuda.Stream() if self.real else FakeStream()

    def Event(self, enable_timing: bool = False) -> Any:
        return torch.cuda.Event(enable_timing=enable_timing) if self.real else FakeEvent(enable_timing)

    def current_stream(self) -> Any:
        return torch.cuda.current_stream() if self.real else FakeStream()

    def stream(self, s: Any) -> contextlib.AbstractContextManager[Any]:
        return torch.cuda.stream(s) if self.real else contextlib.nullcontext(s)

    def sleep(self, cycles: int) -> None:
        if self.real:
            torch.cuda._sleep(cycles)

    def empty_cache(self) -> None:
        if self.real:
            torch.cuda.empty_cache()

    def memory_stats(self) -> dict[str, Any]:
        return dict(torch.cuda.memory_stats()) if self.real else {}

    def memory_allocated(self) -> int:
        return torch.cuda.memory_allocated() if self.real else 0

    def memory_reserved(self) -> int:
        return torch.cuda.memory_reserved() if self.real else 0

    def start_history(self) -> None:
        if self.real:
            torch.cuda.memory._record_memory_history(max_entries=200_000)

    def snapshot(self) -> dict[str, Any]:
        """The allocator's snapshot (history stops); the dry run returns an empty one of the same shape."""
        if not self.real:
            return {"segments": [], "device_traces": [[]], "allocator_settings": {}}
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        return snap

    def set_sync_debug_mode(self, mode: str | int) -> None:
        if self.real:
            torch.cuda.set_sync_debug_mode(mode)


class Topic:
    """One topic's output folder and its step log (what ran, how long, what failed)."""

    def __init__(self, rec: Recorder, name: str) -> None:
        self.rec, self.name = rec, name
        self.dir = rec.out / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.steps: list[dict[str, Any]] = []
        self.files: list[str] = []

    @property
    def device(self) -> torch.device:
        return self.rec.device

    @property
    def cuda(self) -> Cuda:
        return self.rec.cuda

    @property
    def dry(self) -> bool:
        return self.rec.dry

    def json(self, name: str, obj: Any) -> Path:
        """Write `obj` as gzip-compressed JSON `<name>.json.gz` (non-JSON values become their repr)."""
        path = self.dir / f"{name}.json.gz"
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump(_jsonable(obj), f, separators=(",", ":"))
        self.files.append(path.name)
        return path

    def pickle(self, name: str, obj: Any) -> Path:
        """Write `obj` as a gzip-compressed pickle `<name>.pickle.gz` (allocator snapshots, as torch writes them)."""
        path = self.dir / f"{name}.pickle.gz"
        with gzip.open(path, "wb") as f:
            pickle.dump(obj, f)
        self.files.append(path.name)
        return path

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[dict[str, Any]]:
        """Run one step; its time and any error go into the topic's log, and the run goes on after an error."""
        entry: dict[str, Any] = {"step": name}
        self.steps.append(entry)
        t0 = time.perf_counter()
        print(f"[{self.name}] {name} ...", flush=True)
        try:
            yield entry
            entry["ok"] = True
        except Exception as exc:
            entry["ok"] = False
            entry["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            entry["traceback"] = traceback.format_exc()[-4000:]
            print(f"[{self.name}] {name} FAILED: {entry['error'][:300]}", flush=True)
            if self.rec.strict:
                raise
        finally:
            entry["seconds"] = round(time.perf_counter() - t0, 3)

    def chrome_trace(self, fn: Callable[[], object], *, record_shapes: bool = False) -> dict[str, Any]:
        """Profile `fn` (CPU and, on a GPU, CUDA activity; one synchronize after it) and return its Chrome trace."""
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if not self.dry else [])
        self.cuda.synchronize()
        with profile(activities=activities, record_shapes=record_shapes) as prof:
            fn()
            self.cuda.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            prof.export_chrome_trace(path)
            with open(path) as f:
                return json.load(f)

    def run_child(self, code: str, *, env: dict[str, str] | None = None, timeout: float = 120) -> dict[str, Any]:
        """Run `code` in a fresh Python (a new CUDA context); returns its exit code, stdout and stderr."""
        full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tools"),
                                                                  os.environ.get("PYTHONPATH", "")]),
                    **(env or {})}
        try:
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                                  env=full_env, cwd=str(ROOT))
            return {"returncode": done.returncode, "stdout": done.stdout[-20_000:], "stderr": done.stderr[-20_000:]}
        except subprocess.TimeoutExpired as exc:
            return {"returncode": None, "timeout": timeout, "stdout": str(exc.stdout or "")[-5000:],
                    "stderr": str(exc.stderr or "")[-5000:]}

    def close(self) -> None:
        """Write `provenance.json`: where, with what and how this topic was recorded, and its step log."""
        prov = {**self.rec.provenance, "topic": self.name, "steps": self.steps, "files": sorted(set(self.files))}
        (self.dir / "provenance.json").write_text(json.dumps(_jsonable(prov), indent=1) + "\n")


class Recorder:
    """The run: output folder, the device (cuda, or cpu on the dry run) and the provenance every topic shares."""

    def __init__(self, out: Path, dry: bool, strict: bool = False) -> None:
        self.out, self.dry, self.strict = out, dry, strict
        self.device = torch.device("cpu" if dry else "cuda")
        self.cuda = Cuda(real=not dry)
        self.provenance = provenance(dry)

    def topic(self, name: str) -> Topic:
        return Topic(self, name)


def _nvidia_smi() -> dict[str, str]:
    try:
        line = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
        name, driver, memory = (p.strip() for p in line.split(","))
        return {"gpu": name, "driver": driver, "gpu_memory": memory}
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        return {}


def provenance(dry: bool) -> dict[str, Any]:
    """GPU name, driver, CUDA, torch and Triton versions, date and command, as the run saw them."""
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    prov: dict[str, Any] = {
        "dry_run": dry,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python tools/record_gpu.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton_version,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    if not dry:
        props = torch.cuda.get_device_properties(0)
        prov.update({"gpu": props.name, "capability": f"{props.major}.{props.minor}",
                     "multiprocessors": props.multi_processor_count, "gpu_memory_bytes": props.total_memory})
        prov.update({k: v for k, v in _nvidia_smi().items() if k != "gpu"})
    return prov


def run_topics(rec: Recorder, topics: list[str]) -> list[dict[str, Any]]:
    """Record each topic in turn; returns every failed step (topic, step, error)."""
    failed = []
    for name in topics:
        module = importlib.import_module(f"gpu_scenarios.{name}")
        topic = rec.topic(name)
        t0 = time.perf_counter()
        try:
            module.record(topic)
        except Exception as exc:
            topic.steps.append({"step": "(topic)", "ok": False, "error": f"{type(exc).__name__}: {exc}",
                                "traceback": traceback.format_exc()[-4000:]})
            if rec.strict:
                raise
        finally:
            topic.close()
        print(f"[{name}] done in {time.perf_counter() - t0:.1f} s", flush=True)
        failed += [{"topic": name, **s} for s in topic.steps if not s.get("ok")]
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="run every scenario on the CPU with CUDA stubbed")
    parser.add_argument("--out", type=Path, help=f"output folder (default {DEFAULT_OUT}; a temporary one for --dry-run)")
    parser.add_argument("--only", action="append", choices=TOPICS, help="record only this topic (repeatable)")
    parser.add_argument("--strict", action="store_true", help="stop at the first failed step (for tests)")
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA device: record on a GPU machine, or check the scenarios with --dry-run", file=sys.stderr)
        return 2
    out = args.out or (Path(tempfile.mkdtemp(prefix="tlw-dry-")) if args.dry_run else DEFAULT_OUT)
    out.mkdir(parents=True, exist_ok=True)
    rec = Recorder(out, dry=args.dry_run, strict=args.strict)
    t0 = time.perf_counter()
    failed = run_topics(rec, args.only or list(TOPICS))
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"recorded into {out} in {time.perf_counter() - t0:.0f} s: {total:,} bytes; {len(failed)} step(s) failed")
    for f in failed:
        print(f"  {f['topic']}/{f['step']}: {f['error'][:300]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
