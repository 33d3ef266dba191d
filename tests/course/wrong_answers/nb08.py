"""Wrong answers for notebook 08 (asynchronous execution): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong

_RIGHT_BLOCKS = '''
BLOCKS = {
    "y = x @ w": False, "s = y.sum()": False, "v = s.item()": True, "print(s)": True, "h = y.cpu()": True,
    "h = y.to('cpu', non_blocking=True)": False, "idx = torch.nonzero(y > 0)": True, "pos = y[y > 0]": True,
    "z = torch.where(y > 0, y, 0)": False, "y.masked_fill_(y < 0, 0)": False, "if s > 0: pass": True,
    "neg = (y < 0).any()": False, "n = y.shape[0]": False, "vals = y.tolist()": True,
    "b = torch.ones(8).to('cuda')": True, "side.wait_event(done)": False, "done.synchronize()": True,
}
'''

_PIPE_HEAD = '''
def pipeline(sim, n, copy_us, compute_us):
    side = sim.new_stream("copy stream")
    for i in range(n):
'''

WRONG = {
    "08-find-hidden-syncs": [
        Wrong("a fixed list of syncing methods", '''
def find_syncs_in(loop, launch_overhead_us=5):
    sim = StreamSim(launch_overhead_us=launch_overhead_us)
    found = {}
    for i, (_, method, kwargs) in enumerate(loop):
        before = sim.host_clock_us
        sp = getattr(sim, method)(**kwargs)
        if method in ("item", "if_tensor", "synchronize"):
            found[i] = sp.waited
    return found
''', expect="the indices of LOOP_A that synchronise"),
        Wrong("leaves out syncs that lost nothing", '''
def find_syncs_in(loop, launch_overhead_us=5):
    sim = StreamSim(launch_overhead_us=launch_overhead_us)
    found = {}
    for i, (_, method, kwargs) in enumerate(loop):
        n = len(sim.syncs())
        getattr(sim, method)(**kwargs)
        if len(sim.syncs()) > n and sim.syncs()[-1].waited > 0:
            found[i] = sim.syncs()[-1].waited
    return found
''', expect="hidden case 1"),
        Wrong("a fresh simulator per entry", '''
def find_syncs_in(loop, launch_overhead_us=5):
    found = {}
    for i, (_, method, kwargs) in enumerate(loop):
        sim = StreamSim(launch_overhead_us=launch_overhead_us)
        getattr(sim, method)(**kwargs)
        if sim.syncs():
            found[i] = sim.syncs()[-1].waited
    return found
''', expect="find_syncs_in(LOOP_A)"),
        Wrong("ignores launch_overhead_us", '''
def find_syncs_in(loop, launch_overhead_us=5):
    sim = StreamSim(launch_overhead_us=5)
    found = {}
    for i, (_, method, kwargs) in enumerate(loop):
        n = len(sim.syncs())
        getattr(sim, method)(**kwargs)
        if len(sim.syncs()) > n:
            found[i] = sim.syncs()[-1].waited
    return found
''', expect="hidden case 1"),
        Wrong("a list of indices", '''
def find_syncs_in(loop, launch_overhead_us=5):
    sim = StreamSim(launch_overhead_us=launch_overhead_us)
    found = []
    for i, (_, method, kwargs) in enumerate(loop):
        n = len(sim.syncs())
        getattr(sim, method)(**kwargs)
        if len(sim.syncs()) > n:
            found.append(i)
    return found
''', expect="must return a dict"),
        Wrong("calls the test's reference helper", '''
from torchlens_widgets.course.exercises import n08 as _n08


def find_syncs_in(loop, launch_overhead_us=5):
    return _n08._expected_syncs(loop, launch_overhead_us)
''', expect="the check's own helpers", gaming=True),
        Wrong("hard-codes the visible answer", '''
def find_syncs_in(loop, launch_overhead_us=5):
    return {3: 105, 8: 1320, 9: 0}
''', expect="find_syncs_in(LOOP_A)", gaming=True),
        Wrong("ignores launch_overhead_us, and makes the test cell's reference itself", '''
def find_syncs_in(loop, launch_overhead_us=5):
    globals()["_expected_syncs"] = lambda loop, launch_overhead_us=5: find_syncs_in(loop)
    sim = StreamSim(launch_overhead_us=5)
    found = {}
    for i, (_, method, kwargs) in enumerate(loop):
        n = len(sim.syncs())
        getattr(sim, method)(**kwargs)
        if len(sim.syncs()) > n:
            found[i] = sim.syncs()[-1].waited
    return found
''', expect="hidden case 1", gaming=True),
        Wrong("a dict of its own class", '''
class _Syncs(dict):
    def __getitem__(self, i):
        return super().__getitem__(i)


def find_syncs_in(loop, launch_overhead_us=5):
    sim = StreamSim(launch_overhead_us=launch_overhead_us)
    found = _Syncs()
    for i, (_, method, kwargs) in enumerate(loop):
        n = len(sim.syncs())
        getattr(sim, method)(**kwargs)
        if len(sim.syncs()) > n:
            dict.__setitem__(found, i, sim.syncs()[-1].waited)
    return found
''', expect="must return a dict {index: µs lost}, got _Syncs"),
        Wrong("empties LOOP_A", '''
LOOP_A = []


def find_syncs_in(loop, launch_overhead_us=5):
    return {}
''', expect="the indices of LOOP_A that synchronise", gaming=True),
        Wrong("patches the shared StreamSim so nothing syncs", '''
StreamSim.syncs = lambda self: []


def find_syncs_in(loop, launch_overhead_us=5):
    return {}
''', expect="StreamSim.syncs was replaced", gaming=True),
    ],
    "08-event-timer": [
        Wrong("host clock only", '''
def time_region(sim, fn):
    t0 = sim.host_clock_us
    fn()
    return sim.host_clock_us - t0
''', expect="measures only the launches"),
        Wrong("host clock with a sync after", '''
def time_region(sim, fn):
    t0 = sim.host_clock_us
    fn()
    sim.synchronize()
    return sim.host_clock_us - t0
''', expect="also counts the work that was queued"),
        Wrong("sync before and after", '''
def time_region(sim, fn):
    sim.synchronize()
    t0 = sim.host_clock_us
    fn()
    sim.synchronize()
    return sim.host_clock_us - t0
''', expect="pipeline stall"),
        Wrong("elapsed time before the end event completed", '''
def time_region(sim, fn):
    start, end = sim.event(), sim.event()
    start.record()
    fn()
    end.record()
    return start.elapsed_time(end)
''', expect="has not completed yet"),
        Wrong("events on the default stream", '''
def time_region(sim, fn):
    start, end = sim.event(), sim.event()
    start.record(sim.default_stream)
    fn()
    end.record(sim.default_stream)
    end.synchronize()
    return start.elapsed_time(end)
''', expect="hidden case 6: time_region(sim, fn)"),
        Wrong("milliseconds instead of µs", '''
def time_region(sim, fn):
    start, end = sim.event(), sim.event()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000
''', expect="time_region(sim, fn)"),
        Wrong("reads the model's clocks instead of events", '''
def time_region(sim, fn):
    stream = sim.current_stream
    begin = max(stream.tail, sim.host_clock_us)
    fn()
    return max(stream.tail, sim.host_clock_us) - begin
''', expect="a copy of _device_window", gaming=True),
        Wrong("records two events but reads the model's clocks", '''
def time_region(sim, fn):
    stream = sim.current_stream
    begin = max(stream.tail, sim.host_clock_us)
    sim.event("start").record()
    fn()
    sim.event("end").record()
    return max(stream.tail, sim.host_clock_us) - begin
''', expect="never waited for the end event", gaming=True),
        Wrong("calls the model's own event timer", '''
def time_region(sim, fn):
    return sim.time_with_events(fn)
''', expect="StreamSim.time_with_events", gaming=True),
        Wrong("calls the test's ground truth", '''
from torchlens_widgets.course.exercises import n08 as _n08


def time_region(sim, fn):
    return _n08._device_window(sim, fn)
''', expect="the check's own helpers", gaming=True),
        Wrong("records and waits for two events, but returns the stream's tail difference", '''
def time_region(sim, fn):
    stream = sim.current_stream
    begin = stream.tail
    start, end = sim.event(), sim.event()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return stream.tail - begin
''', expect="hidden case 7: time_region(sim, fn)", gaming=True),
    ],
    "08-predict-blocking": [
        Wrong("nothing blocks", "BLOCKS = {call: False for call in CALLS}\n", expect="predictions for these calls"),
        Wrong("everything blocks", "BLOCKS = {call: True for call in CALLS}\n", expect="predictions for these calls"),
        Wrong("print is free", _RIGHT_BLOCKS + 'BLOCKS["print(s)"] = False\n', expect="1 of your 4 predictions"),
        Wrong("a pinned non_blocking copy blocks", _RIGHT_BLOCKS + '''BLOCKS["h = y.to('cpu', non_blocking=True)"] = True\n''',
              expect="hidden case 1: 1 of your 13 predictions for the calls checked at grading is wrong"),
        Wrong("wait_event blocks the host", _RIGHT_BLOCKS + 'BLOCKS["side.wait_event(done)"] = True\n',
              expect="hidden case 1"),
        Wrong("a blocking host-to-device copy is free", _RIGHT_BLOCKS + '''BLOCKS["b = torch.ones(8).to('cuda')"] = False\n''',
              expect="hidden case 1"),
        Wrong("ints instead of bools", _RIGHT_BLOCKS + "BLOCKS = {k: int(v) for k, v in BLOCKS.items()}\n",
              expect="True or False"),
        Wrong("a key missing", _RIGHT_BLOCKS + 'del BLOCKS["n = y.shape[0]"]\n', expect="the keys of BLOCKS"),
        Wrong("keys of its own str class", _RIGHT_BLOCKS + '''
class _Call(str):
    pass


BLOCKS = {_Call(k): v for k, v in BLOCKS.items()}
''', expect="the keys of BLOCKS must be the calls (str)", gaming=True),
        Wrong("empties CALLS and BLOCKS", "CALLS = []\nBLOCKS = {}\n", expect="the keys of BLOCKS", gaming=True),
        Wrong("patches the shared StreamSim so nothing blocks", '''
StreamSim.syncs = lambda self: []
BLOCKS = {call: False for call in CALLS}
''', expect="StreamSim.syncs was replaced", gaming=True),
    ],
    "08-overlap-copy": [
        Wrong("everything on one stream", '''
def pipeline(sim, n, copy_us, compute_us):
    for i in range(n):
        sim.launch(f"copy {i}", copy_us, kind="memcpy")
        sim.launch(f"compute {i}", compute_us)
''', expect="ran on the default stream"),
        Wrong("no wait_event: a race", _PIPE_HEAD + '''
        sim.launch(f"copy {i}", copy_us, stream=side, kind="memcpy")
        sim.launch(f"compute {i}", compute_us)
''', expect="before copy"),
        Wrong("synchronizes after each copy", _PIPE_HEAD + '''
        sim.launch(f"copy {i}", copy_us, stream=side, kind="memcpy")
        side.synchronize()
        sim.launch(f"compute {i}", compute_us)
''', expect="which this exercise asks you not to use"),
        Wrong("waits for the event on the host", _PIPE_HEAD + '''
        sim.launch(f"copy {i}", copy_us, stream=side, kind="memcpy")
        ready = sim.event()
        ready.record(side)
        ready.synchronize()
        sim.launch(f"compute {i}", compute_us)
''', expect="which this exercise asks you not to use"),
        Wrong("the copy stream waits for compute", _PIPE_HEAD + '''
        side.wait_stream(sim.default_stream)
        sim.launch(f"copy {i}", copy_us, stream=side, kind="memcpy")
        ready = sim.event()
        ready.record(side)
        sim.default_stream.wait_event(ready)
        sim.launch(f"compute {i}", compute_us)
''', expect="the device finished at"),
        Wrong("wrong names", _PIPE_HEAD + '''
        sim.launch(f"copy_{i}", copy_us, stream=side, kind="memcpy")
        ready = sim.event()
        ready.record(side)
        sim.default_stream.wait_event(ready)
        sim.launch(f"compute_{i}", compute_us)
''', expect="the work enqueued"),
        Wrong("a hidden .item() per batch", _PIPE_HEAD + '''
        sim.launch(f"copy {i}", copy_us, stream=side, kind="memcpy")
        ready = sim.event()
        ready.record(side)
        sim.default_stream.wait_event(ready)
        sim.launch(f"compute {i}", compute_us)
        sim.item("loss.item()")
''', expect="the host waited"),
        Wrong("fakes the simulator's timeline", '''
def pipeline(sim, n, copy_us, compute_us):
    real = sim.timeline

    def fake():
        tl = real()
        return tl
    sim.timeline = fake
''', expect="the work enqueued", gaming=True),
        Wrong("writes the schedule into the simulator's records", '''
from torchlens_widgets.lenses.asyncexec import DeviceSpan


def pipeline(sim, n, copy_us, compute_us):
    for i in range(n):
        sim._device.append(DeviceSpan(f"copy {i}", copy_us * i, copy_us * (i + 1), 1, kind="memcpy", launched_at=0))
        sim._device.append(DeviceSpan(f"compute {i}", copy_us * (i + 1), copy_us * (i + 1) + compute_us, 0,
                                      launched_at=0))
''', expect="did not come from a launch at the model's launch cost", gaming=True),
        Wrong("hard-codes the visible case, and switches the hidden cases off", '''
def pipeline(sim, n, copy_us, compute_us):
    globals()["_judge_pipeline"] = lambda *args: None
    side = sim.new_stream()
    for i in range(4):
        sim.launch(f"copy {i}", 200, stream=side, kind="memcpy")
        ready = sim.event()
        ready.record(side)
        sim.default_stream.wait_event(ready)
        sim.launch(f"compute {i}", 300)
''', expect="hidden case 1: the work enqueued", gaming=True),
        Wrong("hides its syncs from the simulator's record", _PIPE_HEAD + '''
        sim.launch(f"copy {i}", copy_us, stream=side, kind="memcpy")
        side.synchronize()
        sim._syncs.clear()
        sim.launch(f"compute {i}", compute_us)
''', expect="which this exercise asks you not to use", gaming=True),
        Wrong("hard-codes the visible case", '''
def pipeline(sim, n, copy_us, compute_us):
    side = sim.new_stream()
    for i in range(4):
        sim.launch(f"copy {i}", 200, stream=side, kind="memcpy")
        ready = sim.event()
        ready.record(side)
        sim.default_stream.wait_event(ready)
        sim.launch(f"compute {i}", 300)
''', expect="hidden case 1: the work enqueued", gaming=True),
    ],
}
