"""The async lens: what the host (Python) and the device (CUDA streams) do over time, as plain data.

CUDA work is *asynchronous*: a call such as ``a @ b`` only enqueues a kernel and returns; the host
runs ahead while the device drains its streams. The host waits only at synchronising calls, some
explicit (``torch.cuda.synchronize()``), many hidden (``.item()``, ``.cpu()``, ``torch.nonzero``,
``if t:``). Every source of data here ends in the same `Lanes` model (one host lane with running /
blocked spans, one lane per device stream, the syncs with the time the host lost):

- `StreamSim`: a deterministic discrete-event *model* for CPU-only machines (integers in µs);
- `load_trace`: a Chrome trace saved by ``prof.export_chrome_trace`` on a GPU machine;
- `profile_lanes`: run a function under ``torch.profiler`` with CUDA activity (GPU only);
- `find_syncs`: the ops ``torch.cuda.set_sync_debug_mode("warn")`` flags, with their Python stacks.

What `StreamSim` models: per-stream FIFO order; a host launch cost per kernel (the kernel becomes
ready when its launch call returns); events recorded on a stream complete when the work enqueued
before them completes; ``stream.wait_event`` delays the stream's later work (never the host); a
synchronising call blocks the host until the work it depends on is done. What it does not model:
limits on concurrency (streams run side by side on an unbounded device), copy engines (a copy is
just timed work on its stream), the legacy default stream's implicit syncs (PyTorch's side streams
are created non-blocking, so they do not apply there either), launch queue depth limits, the
caching allocator, and clocks (the model has one exact clock; real host and device clocks differ).
"""

from __future__ import annotations

import bisect
import json
import math
import os
import tempfile
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from .files import read_bounded

__all__ = [
    "CudaUnavailableError",
    "DeviceSpan",
    "EventMark",
    "HostSpan",
    "Lanes",
    "SimEvent",
    "SimStream",
    "StreamLane",
    "StreamSim",
    "SyncFound",
    "SyncPoint",
    "TraceError",
    "find_syncs",
    "load_trace",
    "profile_lanes",
]

EXPLICIT_KINDS = frozenset({"device_synchronize", "stream_synchronize", "event_synchronize"})


class CudaUnavailableError(RuntimeError):
    """Raised by the live CUDA helpers on a machine without CUDA; the message names the CPU routes."""


class TraceError(ValueError):
    """Raised when a Chrome trace cannot be read; the message says what was expected."""


# ---------------------------------------------------------------------------------------------------
# The lanes model (shared by the simulator and the trace reader)


@dataclass(frozen=True)
class HostSpan:
    """A stretch of host time: ``running`` Python / op code, or ``blocked`` in a sync (named by `sync`)."""

    start: float
    end: float
    state: str  # "running" | "blocked"
    label: str
    sync: str | None = None


@dataclass(frozen=True)
class DeviceSpan:
    """Work on one device stream: a kernel, memcpy or memset, with the host time its launch began."""

    name: str
    start: float
    end: float
    stream: int
    device: int = 0
    kind: str = "kernel"  # "kernel" | "memcpy" | "memset"
    launched_at: float | None = None
    op: str | None = None  # the aten op that launched it (traces)
    correlation: int | None = None


@dataclass(frozen=True)
class SyncPoint:
    """One synchronising call: where the host stopped (`start`), resumed (`end`) and what it waited for.

    `kind`: device_synchronize / stream_synchronize / event_synchronize (explicit) or the hidden
    reason (item, copy_to_host, tolist, print, bool, nonzero, mask_index). `call`: the CUDA runtime
    call that blocks (e.g. cudaStreamSynchronize). `stream`: the stream waited on; None = all / unknown.
    """

    name: str
    kind: str
    explicit: bool
    start: float
    end: float
    call: str | None = None
    stream: int | None = None
    waited_for: str | None = None

    @property
    def waited(self) -> float:
        """Host time lost in this sync."""
        return self.end - self.start


@dataclass(frozen=True)
class EventMark:
    """An event recorded (`what="record"`) or waited for (`what="wait"`) on a stream, at device time `time`."""

    name: str
    stream: int
    time: float
    what: str = "record"
    device: int = 0


@dataclass(frozen=True)
class StreamLane:
    """One device lane, in display order."""

    device: int
    stream: int
    name: str


@dataclass(frozen=True)
class Lanes:
    """Host and device lanes over one time axis (µs from 0); `source` is "sim" or "trace"."""

    source: str
    host: tuple[HostSpan, ...]
    streams: tuple[StreamLane, ...]
    device: tuple[DeviceSpan, ...]
    syncs: tuple[SyncPoint, ...]
    marks: tuple[EventMark, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def end(self) -> float:
        """Last instant anything happens on any lane."""
        ends = [s.end for s in self.host] + [d.end for d in self.device] + [m.time for m in self.marks]
        ends += [s.end for s in self.syncs]
        return max(ends, default=0)

    def on_stream(self, stream: int, device: int = 0) -> list[DeviceSpan]:
        """Work on one stream, in start order."""
        return sorted((d for d in self.device if d.stream == stream and d.device == device), key=lambda d: d.start)

    def host_time(self, state: str) -> float:
        """Total host time in one state ("running" or "blocked")."""
        return sum(s.end - s.start for s in self.host if s.state == state)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (kind "async_lanes", version 1) that render.lanes draws."""
        return {
            "kind": "async_lanes",
            "version": 1,
            "source": self.source,
            "unit": "us",
            "end": self.end,
            "streams": [asdict(s) for s in self.streams],
            "host": [asdict(s) for s in self.host],
            "device": [asdict(d) for d in self.device],
            "syncs": [dict(asdict(s), waited=s.waited) for s in self.syncs],
            "marks": [asdict(m) for m in self.marks],
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------------------------------
# The CPU stream model


class SimStream:
    """A FIFO queue of device work; `tail` is when everything enqueued so far (waits included) is done."""

    def __init__(self, sim: StreamSim, stream_id: int, name: str) -> None:
        self.sim, self.id, self.name = sim, stream_id, name
        self.tail = 0

    def __repr__(self) -> str:
        return f"SimStream({self.id}, {self.name!r})"

    def wait_event(self, event: SimEvent) -> None:
        """Later work on this stream starts after `event` completes; the host does not wait.

        As in CUDA, waiting on an event that was never recorded is a no-op.
        """
        if event.time is None:
            return
        self.tail = max(self.tail, event.time)
        self.sim._marks.append(EventMark(event.name, self.id, event.time, "wait"))

    def wait_stream(self, other: SimStream) -> None:
        """Later work here waits for everything enqueued on `other` so far (torch's Stream.wait_stream)."""
        e = self.sim.event(f"{other.name} → {self.name}")
        e.record(other)
        self.wait_event(e)

    def record_event(self, event: SimEvent | None = None) -> SimEvent:
        """Record `event` (a new one if None) on this stream and return it."""
        event = event or self.sim.event()
        event.record(self)
        return event

    def query(self) -> bool:
        """True when all work enqueued on this stream has finished by the host clock."""
        return self.tail <= self.sim.host_clock_us

    def synchronize(self, label: str | None = None) -> SyncPoint:
        """Block the host until this stream drains (cudaStreamSynchronize)."""
        return self.sim._block(label or f"{self.name}.synchronize()", "stream_synchronize", self.tail, self,
                               call="cudaStreamSynchronize")


class SimEvent:
    """A CUDA event in the model: `time` is the device time it completes, None until recorded."""

    def __init__(self, sim: StreamSim, name: str) -> None:
        self.sim, self.name = sim, name
        self.time: int | None = None
        self.stream: SimStream | None = None

    def __repr__(self) -> str:
        return f"SimEvent({self.name!r}, time={self.time})"

    def record(self, stream: SimStream | None = None) -> None:
        """Mark the point after all work enqueued so far on `stream` (the current stream by default)."""
        stream = self.sim._stream(stream)
        self.time = max(stream.tail, self.sim.host_clock_us)
        self.stream = stream
        self.sim._marks.append(EventMark(self.name, stream.id, self.time, "record"))

    def query(self) -> bool:
        """True when the event has completed by the host clock (never-recorded events count as complete)."""
        return self.time is None or self.time <= self.sim.host_clock_us

    def synchronize(self, label: str | None = None) -> SyncPoint:
        """Block the host until the event completes (cudaEventSynchronize); unrecorded: returns at once."""
        until = self.sim.host_clock_us if self.time is None else self.time
        return self.sim._block(label or f"{self.name}.synchronize()", "event_synchronize", until, self.stream,
                               call="cudaEventSynchronize")

    def elapsed_time(self, end: SimEvent) -> int:
        """Device time from this event to `end`, in µs (torch's Event.elapsed_time returns milliseconds)."""
        for e in (self, end):
            if e.time is None:
                raise RuntimeError(f"event {e.name!r} was never recorded; call {e.name}.record(stream) first")
            if e.time > self.sim.host_clock_us:
                raise RuntimeError(
                    f"event {e.name!r} has not completed yet (completes at {e.time} µs, host is at "
                    f"{self.sim.host_clock_us} µs); call {e.name}.synchronize() before elapsed_time, "
                    "as CUDA would report cudaErrorNotReady"
                )
        assert self.time is not None and end.time is not None
        return end.time - self.time


def _nonneg_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a non-negative integer number of µs, got {value!r}")
    return value


class StreamSim:
    """A deterministic model of one host thread driving CUDA streams (times are integer µs).

    >>> sim = StreamSim(launch_overhead_us=5)
    >>> k = sim.launch("matmul", 300)
    >>> sim.item("loss.item()").waited   # host reached the sync at 5 µs, the kernel ends at 305 µs
    300
    """

    def __init__(self, launch_overhead_us: int = 5) -> None:
        self.launch_overhead_us = _nonneg_int(launch_overhead_us, "launch_overhead_us")
        self._host = 0
        self._host_spans: list[HostSpan] = []
        self._device: list[DeviceSpan] = []
        self._syncs: list[SyncPoint] = []
        self._marks: list[EventMark] = []
        self._streams = [SimStream(self, 0, "default stream")]
        self._current = self._streams[0]
        self._n_events = 0

    # --- clocks and streams
    @property
    def host_clock_us(self) -> int:
        """Where the host (Python) is now."""
        return self._host

    @property
    def default_stream(self) -> SimStream:
        return self._streams[0]

    @property
    def current_stream(self) -> SimStream:
        """Where launches go when no stream is named (torch.cuda.current_stream())."""
        return self._current

    def new_stream(self, name: str | None = None) -> SimStream:
        """A new (non-blocking) side stream, like torch.cuda.Stream()."""
        s = SimStream(self, len(self._streams), name or f"stream {len(self._streams)}")
        self._streams.append(s)
        return s

    @contextmanager
    def use_stream(self, stream: SimStream) -> Iterator[SimStream]:
        """Make `stream` current inside the block, like ``with torch.cuda.stream(s):``."""
        previous, self._current = self._current, self._stream(stream)
        try:
            yield stream
        finally:
            self._current = previous

    def event(self, name: str | None = None) -> SimEvent:
        """A new, unrecorded event (torch.cuda.Event(enable_timing=True))."""
        self._n_events += 1
        return SimEvent(self, name or f"event {self._n_events}")

    def _stream(self, stream: SimStream | None) -> SimStream:
        if stream is None:
            return self._current
        if not isinstance(stream, SimStream) or stream.sim is not self:
            raise TypeError(f"expected a stream of this simulator (sim.default_stream or sim.new_stream()), got {stream!r}")
        return stream

    # --- host actions
    def host_work(self, label: str, us: int) -> None:
        """The host runs Python (or any CPU work) for `us` µs; the device keeps draining meanwhile."""
        us = _nonneg_int(us, "us")
        self._run(label, us)

    def _run(self, label: str, us: int) -> None:
        if us:
            self._host_spans.append(HostSpan(self._host, self._host + us, "running", label))
            self._host += us

    def launch(self, name: str, device_us: int, *, stream: SimStream | None = None, host_us: int | None = None,
               kind: str = "kernel") -> DeviceSpan:
        """Enqueue `device_us` of work on `stream`; the host pays `host_us` (default: the launch overhead)."""
        device_us = _nonneg_int(device_us, "device_us")
        cost = self.launch_overhead_us if host_us is None else _nonneg_int(host_us, "host_us")
        s = self._stream(stream)
        began = self._host
        self._run(f"launch {name}", cost)
        start = max(self._host, s.tail)
        span = DeviceSpan(name, start, start + device_us, s.id, kind=kind, launched_at=began)
        s.tail = start + device_us
        self._device.append(span)
        return span

    def _block(self, label: str, kind: str, until: int, stream: SimStream | None, *, call: str) -> SyncPoint:
        began = self._host
        waited_for = self._culprit(until, began, stream) if until > began else None
        if until > began:
            self._host_spans.append(HostSpan(began, until, "blocked", label, sync=label))
            self._host = until
        sp = SyncPoint(label, kind, kind in EXPLICIT_KINDS, began, self._host, call=call,
                       stream=None if stream is None else stream.id, waited_for=waited_for)
        self._syncs.append(sp)
        return sp

    def _culprit(self, until: int, began: int, stream: SimStream | None) -> str | None:
        """The work whose end the host waited for (preferring the stream synchronised)."""
        ending = [d for d in self._device if d.end == until and d.end > began]
        if stream is not None:
            ending = sorted(ending, key=lambda d: d.stream != stream.id)
        return ending[0].name if ending else None

    # --- synchronising calls
    def synchronize(self, label: str = "torch.cuda.synchronize()") -> SyncPoint:
        """Block the host until every stream drains (cudaDeviceSynchronize)."""
        until = max(s.tail for s in self._streams)
        return self._block(label, "device_synchronize", max(until, self._host), None, call="cudaDeviceSynchronize")

    def _read(self, label: str, kind: str, stream: SimStream | None, copy_us: int) -> SyncPoint:
        """A value the host needs: (optionally copy it back, then) wait until the producing stream drains."""
        s = self._stream(stream)
        if _nonneg_int(copy_us, "copy_us"):
            self.launch("Memcpy DtoH (Device -> Pageable)", copy_us, stream=s, kind="memcpy")
        return self._block(label, kind, s.tail, s, call="cudaStreamSynchronize")

    def item(self, label: str = "x.item()", *, stream: SimStream | None = None, copy_us: int = 0) -> SyncPoint:
        """``.item()``: the host needs the value, so it waits until the producing stream drains.

        copy_us=0 treats the read-back as free (the host resumes exactly when the stream drains);
        copy_us>0 enqueues a DtoH copy (one launch cost) and waits for it too.
        """
        return self._read(label, "item", stream, copy_us)

    def cpu(self, label: str = "x.cpu()", *, stream: SimStream | None = None, copy_us: int = 0) -> SyncPoint:
        """``.cpu()`` / ``.to("cpu")`` into pageable memory: a copy the host must wait for."""
        return self._read(label, "copy_to_host", stream, copy_us)

    def tolist(self, label: str = "x.tolist()", *, stream: SimStream | None = None, copy_us: int = 0) -> SyncPoint:
        """``.tolist()``: copies every value to the host, so it waits like ``.cpu()``."""
        return self._read(label, "tolist", stream, copy_us)

    def print_tensor(self, label: str = "print(x)", *, stream: SimStream | None = None, copy_us: int = 0) -> SyncPoint:
        """Printing a device tensor formats its values on the host: a hidden copy and wait."""
        return self._read(label, "print", stream, copy_us)

    def if_tensor(self, label: str = "if x:", *, stream: SimStream | None = None) -> SyncPoint:
        """``if t:`` calls ``bool(t)``, which reads the value: a hidden ``.item()``."""
        return self._read(label, "bool", stream, 0)

    def copy_to_host(self, label: str = "x.to('cpu')", *, copy_us: int, pinned: bool = False,
                     non_blocking: bool = False, stream: SimStream | None = None) -> SyncPoint | DeviceSpan:
        """A device→host copy. Only pinned memory with non_blocking=True stays asynchronous (returns the copy);
        into pageable memory CUDA returns only once the copy is done (returns the sync)."""
        if pinned and non_blocking:
            return self.launch(f"{label}: Memcpy DtoH (Device -> Pinned)", _nonneg_int(copy_us, "copy_us"),
                               stream=stream, kind="memcpy")
        return self._read(label, "copy_to_host", stream, copy_us)

    def nonzero(self, label: str = "torch.nonzero(x)", *, count_us: int = 10, fill_us: int = 10,
                stream: SimStream | None = None, kind: str = "nonzero") -> SyncPoint:
        """Output size depends on the data: a count kernel, a wait for the count, then the fill kernel."""
        s = self._stream(stream)
        self.launch(f"{label}: count", count_us, stream=s)
        sp = self._block(label, kind, s.tail, s, call="cudaStreamSynchronize")
        self.launch(f"{label}: fill", fill_us, stream=s)
        return sp

    def mask_index(self, label: str = "x[mask]", *, count_us: int = 10, fill_us: int = 10,
                   stream: SimStream | None = None) -> SyncPoint:
        """Boolean-mask indexing runs a nonzero on the mask: the same hidden sync."""
        return self.nonzero(label, count_us=count_us, fill_us=fill_us, stream=stream, kind="mask_index")

    # --- timing, wrong and right
    def time_host_only(self, fn: Callable[[], object]) -> int:
        """WRONG: host clock around `fn` only; the kernels it queued may still be running."""
        t0 = self._host
        fn()
        return self._host - t0

    def time_with_sync(self, fn: Callable[[], object]) -> int:
        """Right: synchronize before (earlier work is not counted) and after (`fn`'s work is done)."""
        self.synchronize("sync before timing")
        t0 = self._host
        fn()
        self.synchronize("sync after timing")
        return self._host - t0

    def time_with_events(self, fn: Callable[[], object], stream: SimStream | None = None) -> int:
        """Right: device time between two events recorded around `fn` on `stream` (end.synchronize() first)."""
        start, end = self.event("start"), self.event("end")
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize("end.synchronize()")
        return start.elapsed_time(end)

    # --- results
    def syncs(self) -> list[SyncPoint]:
        """Every synchronising call so far, explicit and hidden, with the host time each one cost."""
        return list(self._syncs)

    def timeline(self) -> Lanes:
        """The lanes so far: host running/blocked spans, work per stream, syncs and event marks."""
        notes = ("StreamSim model: per-stream FIFO, unbounded concurrency between streams, no copy engines; "
                 f"launch overhead {self.launch_overhead_us} µs",)
        return Lanes(
            source="sim",
            host=tuple(self._host_spans),
            streams=tuple(StreamLane(0, s.id, s.name) for s in self._streams),
            device=tuple(sorted(self._device, key=lambda d: (d.stream, d.start))),
            syncs=tuple(self._syncs),
            marks=tuple(self._marks),
            notes=notes,
        )


# ---------------------------------------------------------------------------------------------------
# Chrome traces (torch.profiler / Kineto)

_CATEGORY = {
    "cpu_op": "cpu_op", "operator": "cpu_op",
    "cuda_runtime": "runtime", "runtime": "runtime", "cuda_driver": "runtime", "driver": "runtime",
    "kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset",
}
# Host-blocking runtime / driver calls and the explicit kind each one is.
_SYNC_CALLS = {
    "cudaDeviceSynchronize": "device_synchronize", "cuCtxSynchronize": "device_synchronize",
    "cudaStreamSynchronize": "stream_synchronize", "cuStreamSynchronize": "stream_synchronize",
    "cudaEventSynchronize": "event_synchronize", "cuEventSynchronize": "event_synchronize",
    "cudaMemcpy": "copy_to_host", "cudaMemcpy2D": "copy_to_host", "cuMemcpyDtoH": "copy_to_host",
}
# The aten op that hid a sync → its hidden kind.
_HIDDEN_OPS = {
    "aten::item": "item", "aten::_local_scalar_dense": "item", "aten::is_nonzero": "bool",
    "aten::nonzero": "nonzero", "aten::masked_select": "mask_index", "aten::index": "mask_index",
    "aten::copy_": "copy_to_host", "aten::to": "copy_to_host", "aten::_to_copy": "copy_to_host",
    "aten::tolist": "tolist",
}


@dataclass(frozen=True)
class _Ev:
    cat: str
    name: str
    pid: Any
    tid: Any
    ts: float
    end: float
    args: Mapping[str, Any]


def _num(v: Any) -> float | None:
    """A finite number from a trace field, else None ("inf", NaN and 1e400 are not times)."""
    if isinstance(v, bool):
        return None
    try:
        f = float(v) if isinstance(v, (int, float, str)) else None
    except (ValueError, OverflowError):
        return None
    return f if f is not None and math.isfinite(f) else None


def _base_call(name: str) -> str:
    for suffix in ("_v2", "_ptsz", "_ptds"):
        name = name.removesuffix(suffix)
    return name


def _read_json(source: str | os.PathLike[str] | Mapping[str, Any] | list[Any]) -> Any:
    if isinstance(source, (Mapping, list)):
        return source
    if isinstance(source, str) and source.lstrip()[:1] in ("{", "["):
        text = source
    else:
        path = Path(source)
        if not path.is_file():
            raise TraceError(f"no trace file at {str(path)!r}; pass the path prof.export_chrome_trace(...) wrote, "
                             "the JSON text, or the parsed dict")
        raw = read_bounded(path, repr(str(path)), TraceError)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TraceError(f"{str(path)!r} is not a text trace ({e.reason} at byte {e.start}); expected the JSON "
                             "(or .json.gz) that prof.export_chrome_trace writes") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(f"the trace is not valid JSON ({e}); expected a Chrome trace from prof.export_chrome_trace") from e
    except RecursionError:
        raise TraceError("the trace is nested too deeply to be a Chrome trace; expected the JSON that "
                         "prof.export_chrome_trace writes") from None



def _events(doc: Any) -> tuple[list[_Ev], dict[tuple[Any, Any], str], dict[str, int]]:
    """Complete ("X") events with known categories, thread names, and counts of what was skipped."""
    raw = doc.get("traceEvents") if isinstance(doc, Mapping) else doc
    if not isinstance(raw, list):
        raise TraceError("a Chrome trace is a dict with a 'traceEvents' list (or that list itself); "
                         f"got {type(doc).__name__} without one; load the file prof.export_chrome_trace(path) wrote")
    out: list[_Ev] = []
    names: dict[tuple[Any, Any], str] = {}
    skipped: dict[str, int] = {}
    for e in raw:
        if not isinstance(e, Mapping):
            continue
        args = e.get("args") if isinstance(e.get("args"), Mapping) else {}
        assert isinstance(args, Mapping)
        if e.get("ph") == "M" and e.get("name") == "thread_name" and isinstance(args.get("name"), str):
            names[(e.get("pid"), e.get("tid"))] = args["name"].strip()
            continue
        if e.get("ph") != "X":
            continue
        cat = _CATEGORY.get(str(e.get("cat", "")).lower())
        ts, dur = _num(e.get("ts")), _num(e.get("dur"))
        if cat is None or ts is None or dur is None or dur < 0:
            key = str(e.get("cat", "?")) if cat is None else "events without ts/dur"
            skipped[key] = skipped.get(key, 0) + 1
            continue
        out.append(_Ev(cat, str(e.get("name", "?")), e.get("pid"), e.get("tid"), ts, ts + dur, args))
    return out, names, skipped


def _int_or_none(v: Any) -> int | None:
    n = _num(v)
    return None if n is None else int(n)


def load_trace(source: str | os.PathLike[str] | Mapping[str, Any] | list[Any], *, thread: int | None = None) -> Lanes:
    """Read a Chrome trace (``prof.export_chrome_trace`` output: path, .gz path, JSON text or dict) into lanes.

    The host lane is one thread: `thread` (a tid), else the one that made the most CUDA runtime calls.
    Host-blocking runtime calls (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize,
    cudaMemcpy) become syncs, named after the outermost aten op around them (hidden) or the call itself
    (explicit: made straight from Python). Times are µs from the earliest kept event, rounded to ns.
    """
    events, thread_names, skipped = _events(_read_json(source))
    host_cats = ("cpu_op", "runtime")
    threads: dict[Any, tuple[int, float]] = {}  # tid → (runtime calls, host event time)
    for e in events:
        if e.cat in host_cats:
            calls, busy = threads.get(e.tid, (0, 0.0))
            threads[e.tid] = (calls + (e.cat == "runtime"), busy + e.end - e.ts)
    if not threads:
        raise TraceError("the trace has no host events (cat 'cpu_op' or 'cuda_runtime'); record it with "
                         "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])")
    if thread is None:
        host_tid = max(threads, key=lambda k: (threads[k][0], threads[k][1], -_order(k)))
    elif thread in threads:
        host_tid = thread
    else:
        raise TraceError(f"no host events on thread {thread}; threads with host events: {sorted(threads, key=_order)}")
    host = [e for e in events if e.cat in host_cats and e.tid == host_tid]
    dev = [e for e in events if e.cat in ("kernel", "memcpy", "memset")]
    other_threads = sum(1 for e in events if e.cat in host_cats and e.tid != host_tid)
    t0 = min(e.ts for e in host + dev)

    def rel(t: float) -> float:
        return round(t - t0, 3)

    ops = [e for e in host if e.cat == "cpu_op"]
    tops = _top_ops(ops)  # outermost aten ops: sorted, non-overlapping
    top_starts = [o.ts for o in tops]
    others = [o for o in ops if not o.name.startswith("aten::")]

    def enclosing(t0_: float, t1_: float) -> str | None:
        """Outermost aten op around [t0_, t1_] on the host thread, else the innermost other cpu op, else None."""
        i = bisect.bisect_right(top_starts, t0_) - 1
        if i >= 0 and t1_ <= tops[i].end:
            return tops[i].name
        around = [o for o in others if o.ts <= t0_ and t1_ <= o.end]
        return max(around, key=lambda o: (o.ts, -o.end)).name if around else None

    runtime = [e for e in host if e.cat == "runtime"]
    launches = {c: e for e in runtime if (c := _int_or_none(e.args.get("correlation"))) is not None}
    device: list[DeviceSpan] = []
    for e in dev:
        stream = _int_or_none(e.args.get("stream"))
        stream = stream if stream is not None else _int_or_none(e.tid) or 0
        corr = _int_or_none(e.args.get("correlation"))
        launch = launches.get(corr) if corr is not None else None
        device.append(DeviceSpan(
            e.name, rel(e.ts), rel(e.end), stream,
            device=_int_or_none(e.args.get("device")) or _int_or_none(e.pid) or 0,
            kind=e.cat, launched_at=None if launch is None else rel(launch.ts),
            op=None if launch is None else enclosing(launch.ts, launch.end), correlation=corr,
        ))
    device.sort(key=lambda d: (d.device, d.stream, d.start))

    by_end = sorted(device, key=lambda d: d.end)
    by_end_t = [d.end for d in by_end]
    syncs: list[SyncPoint] = []
    for e in sorted(runtime, key=lambda e: e.ts):
        call = _base_call(e.name)
        if call not in _SYNC_CALLS:
            continue
        op = enclosing(e.ts, e.end)
        hidden = op is not None and op.startswith("aten::")
        kind = _HIDDEN_OPS.get(op or "", _SYNC_CALLS[call]) if hidden else _SYNC_CALLS[call]
        start, end = rel(e.ts), rel(e.end)
        stream = _int_or_none(e.args.get("stream"))
        culprit = None  # the last work to finish before the host resumed (on the synced stream, if known)
        i = bisect.bisect_right(by_end_t, end + 1e-3) - 1
        while i >= 0 and by_end[i].end > start:
            if stream is None or by_end[i].stream == stream:
                culprit = by_end[i].name
                break
            i -= 1
        syncs.append(SyncPoint(op if hidden and op else call, kind, not hidden, start, end, call=call,
                               stream=stream, waited_for=culprit))

    host_spans = _host_spans(tops, syncs, rel, host)
    lanes_keys = sorted({(d.device, d.stream) for d in device})
    streams = tuple(
        StreamLane(dv, st, _stream_name(thread_names, dv, st)) for dv, st in lanes_keys
    )
    notes = []
    if not device:
        notes.append("no CUDA activity in this trace (recorded without ProfilerActivity.CUDA, or on a machine without CUDA)")
    if other_threads:
        notes.append(f"{other_threads} host event{'s' if other_threads != 1 else ''} on other threads left out "
                     f"(host lane: thread {host_tid})")
    if skipped:
        notes.append("not drawn: " + ", ".join(f"{k} ×{n}" for k, n in sorted(skipped.items())))
    return Lanes("trace", tuple(host_spans), streams, tuple(device), tuple(syncs), (), tuple(notes))


def _order(k: Any) -> float:
    n = _num(k)
    return n if n is not None else float("inf")


def _stream_name(names: Mapping[tuple[Any, Any], str], device: int, stream: int) -> str:
    for key in ((device, stream), (str(device), str(stream)), (device, str(stream))):
        if key in names:
            return names[key]
    return f"stream {stream}"


def _top_ops(ops: list[_Ev]) -> list[_Ev]:
    """The outermost aten ops (an aten op nested in another one is skipped), in time order."""
    tops: list[_Ev] = []
    for o in sorted(ops, key=lambda o: (o.ts, -o.end)):
        if o.name.startswith("aten::") and not (tops and o.ts < tops[-1].end):
            tops.append(o)
    return tops


def _cover(starts: list[float], ends: list[float], t: float) -> int | None:
    """Index of the interval (sorted, non-overlapping) that contains t, else None."""
    i = bisect.bisect_right(starts, t) - 1
    return i if i >= 0 and t <= ends[i] else None


def _host_spans(tops: list[_Ev], syncs: list[SyncPoint], rel: Callable[[float], float], host: list[_Ev]) -> list[HostSpan]:
    """Cut the host window at op and sync boundaries: blocked inside syncs, else named by the outermost aten op."""
    top_s, top_e = [rel(o.ts) for o in tops], [rel(o.end) for o in tops]
    sync_s, sync_e = [s.start for s in syncs], [s.end for s in syncs]
    lo, hi = rel(min(e.ts for e in host)), rel(max(e.end for e in host))
    cuts = sorted({lo, hi, *top_s, *top_e, *sync_s, *sync_e})
    spans: list[HostSpan] = []
    keys: list[tuple[str, int | None]] = []  # what each span belongs to, so pieces of one op merge back
    for a, b in zip(cuts, cuts[1:]):
        mid = (a + b) / 2
        k_sync = _cover(sync_s, sync_e, mid)
        k_top = _cover(top_s, top_e, mid)
        if k_sync is not None:
            key: tuple[str, int | None] = ("blocked", k_sync)
            span = HostSpan(a, b, "blocked", syncs[k_sync].name, sync=syncs[k_sync].name)
        else:
            key = ("running", k_top)
            span = HostSpan(a, b, "running", tops[k_top].name if k_top is not None else "(between ops)")
        if keys and keys[-1] == key:
            span = HostSpan(spans.pop().start, b, span.state, span.label, span.sync)
            keys.pop()
        spans.append(span)
        keys.append(key)
    return spans


# ---------------------------------------------------------------------------------------------------
# Live CUDA helpers


def _require_cuda(what: str) -> None:
    if not torch.cuda.is_available():
        raise CudaUnavailableError(
            f"{what} needs a CUDA device, and torch.cuda.is_available() is False here. On a CPU-only "
            "machine, model the same program with StreamSim (sim.launch / sim.item / sim.timeline()), or "
            "read a trace recorded on a GPU machine with load_trace('trace.json') "
            "(saved there by prof.export_chrome_trace)."
        )


def profile_lanes(fn: Callable[..., object], *args: Any, **kwargs: Any) -> Lanes:
    """Run ``fn(*args, **kwargs)`` under torch.profiler (CPU + CUDA activity) and return its lanes.

    One ``torch.cuda.synchronize()`` runs before and after `fn` inside the profile, so every kernel
    `fn` launched is in the trace; the closing one shows up as an explicit sync.
    """
    _require_cuda("profile_lanes")
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn(*args, **kwargs)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory(prefix="tlw-lanes-") as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        lanes = load_trace(path)
    return Lanes(lanes.source, lanes.host, lanes.streams, lanes.device, lanes.syncs, lanes.marks,
                 (*lanes.notes, "profile_lanes added a closing torch.cuda.synchronize() (the last explicit sync)"))


@dataclass(frozen=True)
class SyncFound:
    """One synchronising call flagged by sync debug mode: the aten op (None outside any op) and the user stack."""

    op: str | None
    message: str
    stack: tuple[str, ...]


SYNC_WARNING = "synchronizing CUDA operation"  # c10's warn_or_error_on_sync: "called a synchronizing CUDA operation"
_TORCH_DIR = os.path.dirname(torch.__file__)


def _user_stack() -> tuple[str, ...]:
    """The Python stack outside torch and this module, innermost last, as "file:line in function"."""
    frames = traceback.extract_stack()
    keep = [f for f in frames if not f.filename.startswith(_TORCH_DIR) and f.filename != __file__]
    return tuple(f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in keep)


def _record_sync_warnings(fn: Callable[..., object], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[SyncFound]:
    """Run `fn` with every aten op watched; sync warnings become SyncFound, other warnings pass through."""
    from torch.utils._python_dispatch import TorchDispatchMode

    found: list[SyncFound] = []

    def sort(caught: list[warnings.WarningMessage], op: str | None) -> None:
        for w in caught:
            if SYNC_WARNING in str(w.message):
                # C++ warnings surface when the outermost binding returns, often after the aten op: then the
                # warning's own filename/lineno (the user's line that made the call) is the truthful location.
                where = _user_stack() if op is not None else (f"{w.filename}:{w.lineno}",)
                found.append(SyncFound(op, str(w.message).split("(Triggered internally")[0].strip(), where))
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

    class _Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, a: Any = (), kw: Any = None) -> Any:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = func(*a, **(kw or {}))
            sort(caught, str(func))
            return out

    with warnings.catch_warnings(record=True) as outside:
        warnings.simplefilter("always")
        with _Watch():
            fn(*args, **kwargs)
    sort(outside, None)
    return found


def find_syncs(fn: Callable[..., object], *args: Any, **kwargs: Any) -> list[SyncFound]:
    """Run ``fn(*args, **kwargs)`` with ``torch.cuda.set_sync_debug_mode("warn")``; list the syncs it made.

    Each entry names the aten op that synchronised (e.g. ``aten._local_scalar_dense.default`` for
    ``.item()``) when the warning surfaces inside it, else ``op=None``, and where it was called from (the
    user's line, from the warning itself, when the warning surfaces only after the call returned). The previous debug mode is restored. Torch
    flags most but not all syncs (its docs: not torch.distributed or torch.sparse).
    """
    _require_cuda("find_syncs")
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        return _record_sync_warnings(fn, args, kwargs)
    finally:
        torch.cuda.set_sync_debug_mode(previous)
