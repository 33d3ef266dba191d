"""Notebook 08 (asynchronous execution): the syncs of a loop body found, a correct event timer, which calls block
the host, and copies overlapped with compute, all on the package's stream model.

Each function grades one exercise inside `with check(...) as c:`; the source notebook's hidden block calls it
again with `hidden=...` (see `exercises.__init__`). The model is the package's `StreamSim`, captured when the
package is imported; a learner's function always gets fresh inputs, and expected values come from the check's
own copies of the programs, never from anything the answer was handed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ...lenses import asyncexec
from ...lenses.asyncexec import SimEvent, SimStream, StreamSim
from ._cases import named

if TYPE_CHECKING:
    from ..checks import Check

__all__ = ["event_timer", "find_hidden_syncs", "overlap_copy", "predict_blocking"]

# captured at import: the check's own handles on the model, whatever a notebook later does to its names
_Sim = StreamSim
_syncs, _timeline, _use_stream = StreamSim.syncs, StreamSim.timeline, StreamSim.use_stream


def _frozen(kwargs: Mapping[str, Any]) -> MappingProxyType[str, Any]:
    return MappingProxyType(dict(kwargs))


# The loops as the notebook prints them (LOOP_A) and as the hidden block names them: (code, method, kwargs).
_LOOP_A = (
    ("x = batch.to('cuda', non_blocking=True)", "launch", _frozen({"name": "H2D batch", "device_us": 80, "kind": "memcpy"})),
    ("out = model(x)", "launch", _frozen({"name": "forward", "device_us": 400})),
    ("loss = F.cross_entropy(out, y)", "launch", _frozen({"name": "loss", "device_us": 30})),
    ("if not torch.isfinite(loss):", "if_tensor", _frozen({"label": "if not torch.isfinite(loss):"})),
    ("loss.backward()", "launch", _frozen({"name": "backward", "device_us": 800})),
    ("opt.step()", "launch", _frozen({"name": "optimizer step", "device_us": 120})),
    ("correct += (out.argmax(1) == y).sum()", "launch", _frozen({"name": "accuracy", "device_us": 10})),
    ("print(f'step {i}')", "host_work", _frozen({"label": "print(f'step {i}')", "us": 20})),
    ("wrong = out[out.argmax(1) != y]", "mask_index", _frozen({"label": "wrong = out[out.argmax(1) != y]"})),
    ("history.append(loss.item())", "item", _frozen({"label": "history.append(loss.item())"})),
)
LOOPS = MappingProxyType({
    "A": _LOOP_A,
    "B": (
        ("logits = model(x)", "launch", _frozen({"name": "forward", "device_us": 250})),
        ("probs = logits.softmax(-1)", "launch", _frozen({"name": "softmax", "device_us": 15})),
        ("h = probs.to('cpu', non_blocking=True)", "copy_to_host", _frozen({
            "label": "h = probs.to('cpu', non_blocking=True)", "copy_us": 40, "pinned": True, "non_blocking": True})),
        ("keep = torch.nonzero(probs.max(-1).values > 0.9)", "nonzero", _frozen({"label": "keep = torch.nonzero(...)"})),
        ("top = probs.cpu()", "cpu", _frozen({"label": "top = probs.cpu()", "copy_us": 30})),
        ("names = top.tolist()", "tolist", _frozen({"label": "names = top.tolist()"})),
        ("log.write(str(names))", "host_work", _frozen({"label": "log.write(...)", "us": 60})),
        ("loss = criterion(logits, y)", "launch", _frozen({"name": "loss", "device_us": 20})),
        ("print(loss)", "print_tensor", _frozen({"label": "print(loss)"})),
        ("loss.backward()", "launch", _frozen({"name": "backward", "device_us": 500})),
        ("torch.cuda.synchronize()", "synchronize", _frozen({"label": "torch.cuda.synchronize()"})),
        ("if loss < best:", "if_tensor", _frozen({"label": "if loss < best:"})),
    ),
    "three launches": _LOOP_A[:3],
})
SYNC_HINTS = (
    "which entries make the host wait for the device, and for how long? Replay the loop on one StreamSim and "
    "watch sim.syncs()",
    "run every entry's method with its keyword arguments, in order, on the same fresh simulator; an entry "
    "synchronised when sim.syncs() grew, and the new SyncPoint's .waited is the host time it lost (0 counts)",
    "launches and host_work never synchronise; `if t:`, .item(), print, .cpu(), .tolist(), nonzero, x[mask] "
    "and an explicit synchronize() do, while a non_blocking copy into pinned memory is only queued. Build the "
    "simulator with the launch_overhead_us you are given",
)


def _expected_syncs(loop: Iterable[tuple[str, str, Mapping[str, Any]]], launch_overhead_us: int) -> dict[int, int]:
    sim = _Sim(launch_overhead_us)
    out: dict[int, int] = {}
    for k, (_, method, kwargs) in enumerate(loop):
        first = len(_syncs(sim))
        getattr(sim, method)(**kwargs)
        out.update((k, int(sp.waited)) for sp in _syncs(sim)[first:])
    return out


def find_hidden_syncs(c: Check, answer: Any, hidden: Iterable[tuple[str, int | None]] | None = None) -> None:
    """`find_syncs_in(loop, launch_overhead_us=5)`: {index: host µs lost} for every entry that synchronises.
    Each call gets a fresh copy of the loop (as lists and dicts); the expected value comes from the check's
    own copy. Hidden: (loop name, launch overhead or None for the default)."""
    mine = c.watch(answer, "find_syncs_in", allow_aten=set())  # the model only: no tensor ops
    secret = hidden is not None
    for label, (name, overhead) in named(hidden, (("A", None),), lambda case: "find_syncs_in(LOOP_A)"):
        expected = _expected_syncs(LOOPS[name], 5 if overhead is None else overhead)
        loop = [(code, method, dict(kwargs)) for code, method, kwargs in LOOPS[name]]
        got = mine(loop) if overhead is None else mine(loop, launch_overhead_us=overhead)
        c.that(type(got) is dict, f"{label} must return a dict {{index: µs lost}}, got {type(got).__name__}",
               SYNC_HINTS)
        items = list(dict.items(got))  # an exact dict: nothing of the answer's own runs from here on
        c.that(all(type(k) is int for k, _ in items),
               f"{label}: the keys must be the entries' indices (int), got {sorted({type(k).__name__ for k, _ in items})}",
               SYNC_HINTS)
        if not secret:  # (a hidden case's count of syncs is its content)
            c.equal(sorted(k for k, _ in items), sorted(expected), what="the indices of LOOP_A that synchronise",
                    hint=SYNC_HINTS)
        c.equal(dict(items), expected, what=label, hint=SYNC_HINTS, secret=secret)


TIMER_HINTS = (
    "which clock measures the device's work? The host clock moves only while Python runs or waits",
    "use two events on the current stream, one recorded before fn() and one after: an event completes when the "
    "stream reaches it, so the pair brackets exactly fn's device work",
    "ask for the elapsed time only once the second event has completed: wait for that event alone, not for the "
    "whole device, and never synchronise before fn()",
)
TIMER_LIBRARY_HINTS = ("write the timer yourself from events, not with the model's own timing methods",)
TIMER_LIBRARY = (StreamSim.time_with_events, StreamSim.time_with_sync, StreamSim.time_host_only)

# The programs to time, compiled under a file name of their own (a watched answer may call nothing defined in
# this module): each `build(sim)` sets up earlier work and returns the region `fn`, or (fn, stream) when the
# region runs with `stream` current. `bracket` hands the answer fn with a note of the event marks before and
# after it ran, so that the check can tell the events around fn from any others.
TIMER_PROGRAMS = '''
def bracket(sim, fn, seen):
    def region():
        seen.append(len(timeline(sim).marks))
        out = fn()
        seen.append(len(timeline(sim).marks))
        return out
    return region


def backlog(sim):
    sim.launch("previous step", 1000)
    return lambda: [sim.launch(n, us) for n, us in [("matmul", 300), ("relu", 40), ("matmul 2", 300)]]


def gaps(sim):
    def fn():
        sim.launch("a", 50)
        sim.host_work("python", 200)           # the device idles inside the region
        sim.launch("b", 70)
    return fn


def hidden_sync_inside(sim):
    sim.launch("previous", 400)

    def fn():
        sim.launch("forward", 300)
        sim.item("loss.item()")
        sim.launch("backward", 500)
    return fn


def side_stream_busy(sim):
    side = sim.new_stream("side")
    sim.launch("unrelated copy", 2000, stream=side, kind="memcpy")
    sim.launch("previous", 100)
    return lambda: [sim.launch("k1", 120), sim.launch("k2", 30)]


def empty(sim):
    sim.launch("previous", 700)
    return lambda: None


def on_side_stream(sim):
    side = sim.new_stream("side")
    sim.launch("default work", 900)

    def fn():
        sim.launch("side kernel", 60, stream=side)  # not on the current stream: events there see none of it
        sim.launch("k", 25)
    return fn


def side_is_current(sim):
    side = sim.new_stream("side")
    sim.launch("default work", 900, stream=sim.default_stream)
    sim.launch("side backlog", 150, stream=side)
    return (lambda: [sim.launch("s1", 80), sim.launch("s2", 20)]), side


def host_ahead(sim):
    sim.launch("short step", 40)
    sim.host_work("data loading", 600)         # the device has long been idle when the region starts
    return lambda: [sim.launch("k1", 90), sim.launch("k2", 10)]
'''
TIMER_CASES = MappingProxyType({
    "1000 µs queued before a 640 µs region": "backlog",
    "a region with host work between kernels": "gaps",
    "a region containing .item()": "hidden_sync_inside",
    "a busy side stream": "side_stream_busy",
    "an empty region behind queued work": "empty",
    "a region that also launches on a side stream": "on_side_stream",
    "a region on a side stream that is the current stream": "side_is_current",
    "a region that starts on an idle device, the host far ahead": "host_ahead",
    "the first program again": "backlog",
})
WRONG_TIMERS = (
    ((False, False), "the host clock around fn() measures only the launches"),
    ((False, True), "a host clock with one synchronize after fn() also counts the work that was queued before the "
                    "region"),
    ((True, True), "synchronizing before the region drains the queue first (a pipeline stall) and then adds the "
                   "first kernel's launch latency"),
)


def _compiled(source: str, exercise: str) -> dict[str, Any]:
    space: dict[str, Any] = {"timeline": _timeline}
    exec(compile(source, f"<programs of {exercise}>", "exec"), space)
    return space


def _device_window(sim: StreamSim, fn: Callable[[], Any]) -> int:
    """Ground truth from the model's clocks: from when the current stream reaches the region (its queue drained,
    and the host there) to when it has finished the region's work."""
    stream = sim.current_stream
    begin = max(stream.tail, sim.host_clock_us)
    fn()
    return max(stream.tail, sim.host_clock_us) - begin


def _host_timer(sim: StreamSim, fn: Callable[[], Any], before: bool, after: bool) -> int:
    if before:
        sim.synchronize()
    t0 = sim.host_clock_us
    fn()
    if after:
        sim.synchronize()
    return sim.host_clock_us - t0


def event_timer(c: Check, answer: Any, hidden: Iterable[str] | None = None) -> None:
    """`time_region(sim, fn)`: fn's device time from two events on the current stream, waited for at the end.
    Each program runs on a fresh model; the result must be the expected window and the elapsed time between an
    event the answer recorded before fn() and one it recorded after. Hidden: names of TIMER_CASES."""
    mine = c.watch(answer, "time_region", allow_aten=set(), forbid=TIMER_LIBRARY, hint=TIMER_LIBRARY_HINTS)
    space = _compiled(TIMER_PROGRAMS, "08-event-timer")
    secret = hidden is not None

    def run(name: str, timer: Callable[..., Any], seen: list[int] | None = None) -> tuple[Any, StreamSim, SimStream]:
        sim = _Sim(launch_overhead_us=5)
        made = space[TIMER_CASES[name]](sim)
        fn, stream = made if type(made) is tuple else (made, sim.default_stream)
        if seen is not None:
            fn = space["bracket"](sim, fn, seen)
        with _use_stream(sim, stream):
            return timer(sim, fn), sim, stream

    for label, name in named(hidden, ("1000 µs queued before a 640 µs region",), lambda name: name):
        expected = run(name, _device_window)[0]
        seen: list[int] = []
        got, sim, stream = run(name, mine, seen)
        if type(got) is int and got != expected:
            for (before, after), why in WRONG_TIMERS:
                if got == run(name, lambda s, f, b=before, a=after: _host_timer(s, f, b, a))[0]:
                    c.fail(f"{label}: time_region returned {got} µs" + ("" if secret else f", expected {expected} µs")
                           + f": {why}", TIMER_HINTS)
        c.equal(got, expected, what=f"{label}: time_region(sim, fn)", hint=TIMER_HINTS, secret=secret)
        marks = _timeline(sim).marks
        records = [m for m in marks if m.what == "record" and m.stream == stream.id]
        c.that(len(records) >= 2, f"{label}: time_region recorded {len(records)} event(s) on the current stream",
               TIMER_HINTS)
        waits = [s.kind for s in _syncs(sim)]
        c.that("event_synchronize" in waits or "stream_synchronize" in waits,
               f"{label}: time_region never waited for the end event (its host waits: {waits or 'none'})", TIMER_HINTS)
        c.that(len(seen) >= 2, f"{label}: time_region never called fn()", TIMER_HINTS)
        starts = {m.time for m in marks[:seen[0]] if m.what == "record" and m.stream == stream.id}
        ends = {m.time for m in marks[seen[-1]:] if m.what == "record" and m.stream == stream.id}
        c.that(any(e - s == expected for s in starts for e in ends),
               f"{label}: time_region returned the right number, but not as the time between an event recorded "
               "before fn() and one recorded after it on the current stream", TIMER_HINTS)


# CALLS as the notebook prints them: each call's model, run after some queued work (x @ w), with `side` a second
# stream and `done` an event recorded behind that work. A call blocks when it adds a sync.
BLOCK_MODELS: MappingProxyType[str, Callable[[StreamSim, SimStream, SimEvent], Any]] = MappingProxyType({
    "y = x @ w": lambda sim, side, done: sim.launch("matmul", 300),
    "s = y.sum()": lambda sim, side, done: sim.launch("sum", 20),
    "v = s.item()": lambda sim, side, done: sim.item("v = s.item()"),
    "print(s)": lambda sim, side, done: sim.print_tensor("print(s)"),
    "h = y.cpu()": lambda sim, side, done: sim.cpu("h = y.cpu()", copy_us=20),
    "h = y.to('cpu', non_blocking=True)": lambda sim, side, done: sim.copy_to_host(
        "h = y.to('cpu', non_blocking=True)", copy_us=20, pinned=True, non_blocking=True),
    "idx = torch.nonzero(y > 0)": lambda sim, side, done: sim.nonzero("idx = torch.nonzero(y > 0)"),
    "pos = y[y > 0]": lambda sim, side, done: sim.mask_index("pos = y[y > 0]"),
    "z = torch.where(y > 0, y, 0)": lambda sim, side, done: sim.launch("where", 10),
    "y.masked_fill_(y < 0, 0)": lambda sim, side, done: sim.launch("masked_fill_", 10),
    "if s > 0: pass": lambda sim, side, done: sim.if_tensor("if s > 0:"),
    "neg = (y < 0).any()": lambda sim, side, done: sim.launch("any", 10),
    "n = y.shape[0]": lambda sim, side, done: sim.host_work("shape lives on the host", 1),
    "vals = y.tolist()": lambda sim, side, done: sim.tolist("vals = y.tolist()", copy_us=20),
    "b = torch.ones(8).to('cuda')": lambda sim, side, done: (  # memcpy_and_sync: copy, then stream sync
        sim.launch("H2D copy", 2, kind="memcpy"), sim.current_stream.synchronize("b = ...to('cuda')")),
    "side.wait_event(done)": lambda sim, side, done: side.wait_event(done),
    "done.synchronize()": lambda sim, side, done: done.synchronize(),
})
_VISIBLE_CALLS = ("y = x @ w", "v = s.item()", "print(s)", "h = y.cpu()")
# the calls checked by name: the visible test's four, and the rest, checked at grading
BLOCK_GROUPS = MappingProxyType({
    "visible": _VISIBLE_CALLS,
    "grading": tuple(call for call in BLOCK_MODELS if call not in _VISIBLE_CALLS),
})
BLOCK_HINTS = (
    "for each call ask one question: does the host need the device's data (a value, a filled CPU tensor, or a size "
    "that depends on the values) before it can go on?",
    "Python values (.item(), bool(), print, .tolist()) and filled CPU tensors (.cpu()) need data; so do outputs "
    "whose size depends on the values (nonzero, boolean-mask indexing). A copy without non_blocking=True waits "
    "in either direction",
    "everything else is only enqueued: reductions and masked ops whose output shape is known, shapes (they "
    "live on the host) and waits between streams (they happen on the device). Waiting for an event on the "
    "host is a sync",
)
KEY_HINTS = ("one entry per string in CALLS, spelled exactly",)


def _blocks_in_model(call: str) -> bool:
    sim = _Sim(launch_overhead_us=5)
    side, done = sim.new_stream("side"), sim.event("done")
    sim.launch("x @ w (earlier)", 400)
    done.record()
    n = len(_syncs(sim))
    BLOCK_MODELS[call](sim, side, done)
    return len(_syncs(sim)) > n


def predict_blocking(c: Check, blocks: Any, hidden: Iterable[str] | None = None) -> None:
    """`BLOCKS`: {call: does it block the host?} for every call of CALLS, predicted without running anything;
    says how many are wrong, not which (named after REVEAL_AFTER failures on the visible calls). Hidden: names
    of BLOCK_GROUPS."""
    c.that(type(blocks) is dict, "BLOCKS must be a dict {call: True or False}", BLOCK_HINTS)
    c.that(all(type(k) is str for k in dict.keys(blocks)), "the keys of BLOCKS must be the calls (str)", KEY_HINTS)
    items = dict(dict.items(blocks))  # an exact dict of exact str keys: a plain copy, nothing of the answer's runs
    c.equal(set(items), set(BLOCK_MODELS), what="the keys of BLOCKS", hint=KEY_HINTS)
    for label, group in named(hidden, ("visible",), lambda group: "these calls"):
        calls = BLOCK_GROUPS[group]
        c.that(all(type(items[k]) is bool for k in calls), "every value of BLOCKS must be True or False (not None)")
        wrong = [k for k in calls if items[k] is not _blocks_in_model(k)]
        if not wrong:
            continue
        said = f"{label}: {len(wrong)} of your {len(calls)} predictions for the calls checked at grading" \
            if hidden is not None else f"{len(wrong)} of your {len(calls)} predictions for {label}"
        reveal = None if hidden is not None else "Predicted wrongly: " + "; ".join(
            f"{k!r} (it {'blocks' if not items[k] else 'does not block'})" for k in wrong)
        c.fail(f"{said} {'is' if len(wrong) == 1 else 'are'} wrong (which ones is not said, so that you can think "
               "again)", BLOCK_HINTS, reveal=reveal)


OVERLAP_HINTS = (
    "one stream runs its work in order: which stream does each copy and each compute go to, and what makes "
    "compute i wait for copy i?",
    "put the copies on a side stream made by sim.new_stream(); after copy i, record an event on that stream and "
    "make the default stream wait for it before compute i is launched",
    "the waiting must happen on the device (a stream waiting for an event), never on the host (no synchronize "
    "of any kind, no .item()); and the copy stream must not wait for compute, or the copies stop overlapping",
)
NAME_HINTS = ("exactly one 'copy i' and one 'compute i' per batch i, named so",)
HOST_WAITS = (StreamSim.synchronize, SimStream.synchronize, SimEvent.synchronize)
OVERLAP_CASES = ((4, 200, 300),)  # (n, copy_us, compute_us)


def _overlapped_end(n: int, copy_us: int, compute_us: int, launch_us: int = 5) -> int:
    """When the device finishes if copies run back to back on their own stream and compute b starts as soon as
    copy b and compute b - 1 are done (launches alternate: copy 0, compute 0, copy 1, ...)."""
    copy_end = compute_end = 0
    for b in range(n):
        copy_end = max(launch_us * (2 * b + 1), copy_end) + copy_us
        compute_end = max(launch_us * (2 * b + 2), copy_end, compute_end) + compute_us
    return compute_end


def _unlaunched(tl: Any, overhead: int) -> list[str]:
    """The device work that no launch of the model at its launch cost explains (free launches, `host_us=0`, or
    spans written into the model's records by hand)."""
    launches = {(h.label, h.start) for h in tl.host if h.state == "running" and h.end - h.start == overhead}
    # (the lens's DeviceSpan, looked up on the protected lens module: a dataclass's generated __init__ is not a
    # function of this module's to fingerprint)
    return [d.name for d in tl.device if type(d) is not asyncexec.DeviceSpan or d.launched_at is None
            or (f"launch {d.name}", d.launched_at) not in launches or d.start < d.launched_at + overhead]


def overlap_copy(c: Check, answer: Any, hidden: Iterable[tuple[int, int, int]] | None = None) -> None:
    """`pipeline(sim, n, copy_us, compute_us)`: copies on a side stream, compute on the default one, ordered by
    events on the device, no host wait, finished no later than the overlapped schedule. Hidden: (n, copy_us,
    compute_us)."""
    mine = c.watch(answer, "pipeline", allow_aten=set(), forbid=HOST_WAITS, hint=OVERLAP_HINTS)
    secret = hidden is not None
    for label, (n, copy_us, compute_us) in named(hidden, OVERLAP_CASES, lambda case: "pipeline(sim, n={}, copy_us={}, "
                                                 "compute_us={})".format(*case)):
        target = _overlapped_end(n, copy_us, compute_us)
        sim = _Sim(launch_overhead_us=5)
        mine(sim, n, copy_us, compute_us)
        tl = _timeline(sim)  # the model's own record, whatever the simulator object now says
        work = {d.name: d for d in tl.device}
        names = sorted(d.name for d in tl.device)
        c.equal(names, sorted([f"copy {b}" for b in range(n)] + [f"compute {b}" for b in range(n)]),
                what=f"{label}: the work enqueued", hint=NAME_HINTS, secret=secret)
        unexplained = _unlaunched(tl, 5)
        c.that(not unexplained, f"{label}: {', '.join(unexplained[:3])} did not come from a launch at the model's "
               "launch cost (sim.launch, without host_us)", OVERLAP_HINTS)
        for b in range(n):
            cp, cu = work[f"copy {b}"], work[f"compute {b}"]
            c.that(cp.end - cp.start == copy_us and cp.kind == "memcpy" and cu.end - cu.start == compute_us,
                   f"{label}: copy {b} must take copy_us with kind='memcpy' and compute {b} compute_us")
            c.that(cu.stream == 0, f"{label}: compute {b} ran on stream {cu.stream}, not the default stream",
                   OVERLAP_HINTS)
            c.that(cp.stream != 0, f"{label}: copy {b} ran on the default stream, so it cannot overlap compute",
                   OVERLAP_HINTS)
            c.that(cu.start >= cp.end, f"{label}: compute {b} starts at {cu.start} µs, before copy {b} ends at "
                   f"{cp.end} µs (it would read a half-copied batch)", OVERLAP_HINTS)
        c.that(tl.syncs == (), f"{label}: the host waited in {[s.name for s in tl.syncs]}", OVERLAP_HINTS)
        c.that(tl.end <= target, f"{label}: the device finished at {tl.end} µs; with overlapped copies it finishes "
               + ("sooner" if secret else f"by {target} µs"), OVERLAP_HINTS)
