"""Busy lines: what a long piece of work (a header precompile, a build, a compile, a rank run, a grading run) is
doing now and for how long, so a cell that runs for tens of seconds does not look frozen.

A lens wraps its work in `working(title)` and names its phases (`line.phase("compiling")`); this module knows
no UI and imports nothing of the package. Whoever draws connects a sink: the package's entry point
(`torchlens_widgets/__init__.py`) connects the widget layer's kernel display, loaded at the first line shown in a
kernel; in a terminal the line goes to stderr, rewritten in place with a carriage return; elsewhere nothing is
shown. A ticker thread rewrites the line with the elapsed time twice a second (and at once when the phase
changes), and stops when the work ends or raises. When it ends the line is emptied (a notebook keeps no time in
its saved output) and the sink is told a short summary.
"""

from __future__ import annotations

import contextlib
import contextvars
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Protocol

__all__ = ["BusyLine", "Sink", "connect", "connected", "echo", "in_kernel", "line_text", "working"]

EVERY_S = 0.5  # how often the elapsed time is rewritten


class Sink(Protocol):
    """Where a busy line is shown: `update` with what is going on, `close` once (the work ended: `summary`
    says how, without times, e.g. "precompiling the lean headers: done")."""

    def update(self, title: str, phase: str, seconds: float) -> None: ...

    def close(self, summary: str) -> None: ...


Connector = Callable[[], "Sink | None"]
_connector: Connector | None = None
_active = threading.local()  # the BusyLine this thread is inside, if any (nested work reports into it)
_terminals: list[_TerminalLine] = []
_print_lock = threading.Lock()


def connect(connector: Connector | None) -> Connector | None:
    """Make `connector` open the sink of each new busy line (it returns None where it does not apply, e.g. a
    kernel display outside a kernel); None disconnects. Returns the one it replaces."""
    global _connector
    before, _connector = _connector, connector
    return before


def connected() -> Connector | None:
    """The connector `connect` set, if any."""
    return _connector


def line_text(title: str, phase: str, seconds: float) -> str:
    """The line in words: "precompiling the lean headers: compiling (12 s)"."""
    return f"{title}: {phase} ({seconds:.0f} s)" if phase else f"{title} ({seconds:.0f} s)"


def in_kernel() -> bool:
    """Running in a Jupyter kernel (looked up without importing IPython)."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    shell = get() if callable(get) else None
    return shell is not None and getattr(shell, "kernel", None) is not None


class _TerminalLine:
    """A line on a terminal's stderr, rewritten with a carriage return and wiped at the end."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream, self.shown = stream, ""

    def update(self, title: str, phase: str, seconds: float) -> None:
        width = max(20, shutil.get_terminal_size((100, 20)).columns - 1)
        self._write(line_text(title, phase, seconds)[:width])

    def _write(self, text: str) -> None:
        with _print_lock:
            pad = " " * max(0, len(self.shown) - len(text))
            self.stream.write("\r" + text + pad + ("\b" * len(pad)))
            self.stream.flush()
            self.shown = text

    def wipe(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * len(self.shown) + "\r")
            self.stream.flush()
            self.shown = ""

    def close(self, summary: str) -> None:
        with _print_lock:
            self.wipe()


def _open_sink() -> Sink | None:
    sink = _connector() if _connector is not None else None
    if sink is None:
        stream = sys.stderr
        with contextlib.suppress(AttributeError, ValueError, OSError):
            if stream is not None and stream.isatty():
                sink = _TerminalLine(stream)
    return sink


class BusyLine:
    """One piece of work in progress: `phase(...)` says what it does now (a string, or a function asked at each
    tick, e.g. "cell 3 of 12"). Thread-safe: worker threads may set the phase."""

    def __init__(self, title: str, phase: str | Callable[[], str] = "") -> None:
        self.title = title
        self._phase: str | Callable[[], str] = phase
        self.start = time.monotonic()
        self._lock = threading.Lock()
        self.wake = threading.Event()  # set when the phase changes: the ticker shows it at once

    def phase(self, what: str | Callable[[], str]) -> None:
        with self._lock:
            changed, self._phase = what != self._phase, what
        if changed:
            self.wake.set()

    def now(self) -> str:
        with self._lock:
            what = self._phase
        if callable(what):
            try:
                return str(what())
            except Exception:  # a phase function must never break the work it describes
                return ""
        return what


class _Nested(BusyLine):
    """Work inside other work on the same thread: shown as a phase of the outer line, no line of its own."""

    def __init__(self, outer: BusyLine, title: str, phase: str | Callable[[], str]) -> None:
        super().__init__(title, phase)
        self.outer = outer
        self.wake = outer.wake
        self.saved = outer._phase
        outer.phase(self._describe)

    def _describe(self) -> str:
        what = self.now()
        if self.title == self.outer.title:  # the same work named twice (an entry point and its worker)
            return what
        return f"{self.title}: {what}" if what else self.title


@contextlib.contextmanager
def working(title: str, phase: str | Callable[[], str] = "", *, every: float = EVERY_S) -> Iterator[BusyLine]:
    """Show "`title`: phase (N s)" while the block runs, rewritten every `every` seconds by a ticker thread that
    stops when the block ends, however it ends (an exception, a KeyboardInterrupt). The first update is shown at
    once. Nested in another `working` on this thread, it becomes that line's phase instead."""
    outer: BusyLine | None = getattr(_active, "line", None)
    if outer is not None:
        inner = _Nested(outer, title, phase)
        try:
            yield inner
        finally:
            outer.phase(inner.saved)
        return
    line = BusyLine(title, phase)
    sink = _open_sink()
    if sink is None:
        _active.line = line
        try:
            yield line
        finally:
            _active.line = None
        return
    stop = threading.Event()

    def tick() -> None:
        while True:
            line.wake.wait(every)  # a tick, or a new phase
            line.wake.clear()
            if stop.is_set():
                return
            with contextlib.suppress(Exception):  # a display that fails must not stop the work
                sink.update(line.title, line.now(), time.monotonic() - line.start)

    if isinstance(sink, _TerminalLine):
        _terminals.append(sink)
    with contextlib.suppress(Exception):
        sink.update(line.title, line.now(), 0.0)
    # the kernel's display knows which cell it writes into through context variables: the ticker runs in a copy
    ticker = threading.Thread(target=contextvars.copy_context().run, args=(tick,), name="torchlens-busy",
                              daemon=True)
    ticker.start()
    _active.line = line
    outcome = "stopped"
    try:
        yield line
        outcome = "done"
    except Exception:
        outcome = "failed"
        raise
    finally:
        _active.line = None
        stop.set()
        line.wake.set()
        ticker.join(timeout=5.0)
        with contextlib.suppress(ValueError):
            _terminals.remove(sink)  # type: ignore[arg-type]
        with contextlib.suppress(Exception):
            sink.close(f"{title}: {outcome}")


def echo(text: str, file: IO[str] | None = None) -> None:
    """Print a line of text while busy lines may be on the terminal: each is wiped first and redrawn by its next
    tick, so the two never overwrite each other."""
    with _print_lock:
        for term in list(_terminals):
            term.wipe()
        print(text, file=file or sys.stdout, flush=True)
