"""Wrong answers for notebook 07 (caching allocator): each must fail its check for the reason named in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong

_RIGHT_B = "PREDICTED_B = (48 * MiB, 4)\n"

WRONG = {
    "07-predict-reserved": [
        Wrong("thinks d (12 MB) needs a segment of its own", "PREDICTED_A = (34 * MiB, 3)\n" + _RIGHT_B,
              expect="sequence A"),
        Wrong("reads 1 MiB as large", "PREDICTED_A = (42 * MiB, 3)\nPREDICTED_B = (46 * MiB, 3)\n",
              expect="hidden case 1: (reserved_bytes, segments)[0]"),
        Wrong("predicts the allocated bytes", '''
def _r(n):
    return -(-n // 512) * 512
PREDICTED_A = (sum(_r(n) for n in (200_000, 700_000, 12_000_000, 1_100_000, 1_048_576, 9_000_000)), 3)
''' + _RIGHT_B, expect="sequence A"),
        Wrong("segments first, bytes second", "PREDICTED_A = (3, 42 * MiB)\n" + _RIGHT_B, expect="which is not right"),
        Wrong("floats instead of ints", "PREDICTED_A = (42.0 * MiB, 3.0)\n" + _RIGHT_B, expect="tuple of two ints"),
        Wrong("ints of its own class that equal anything", '''
class _Any(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


PREDICTED_A = PREDICTED_B = (_Any(0), _Any(0))
''', expect="got a tuple of _Any, _Any", gaming=True),
        Wrong("fits A with the simulator, guesses B", '''
_s = run_sequence(SEQUENCE_A)
PREDICTED_A = (_s.stats()["reserved_bytes.all.current"], len(_s.segments()))
PREDICTED_B = (44 * MiB, 3)
''', expect="hidden case 1", gaming=True),
        Wrong("patches the shared simulator's stats", '''
CachingAllocatorSim.stats = lambda self: {"reserved_bytes.all.current": 0}
CachingAllocatorSim.segments = lambda self: []
PREDICTED_A = PREDICTED_B = (0, 0)
''', expect="CachingAllocatorSim.stats was replaced", gaming=True),
        Wrong("empties SEQUENCE_A and predicts nothing", '''
SEQUENCE_A = SEQUENCE_B = []
PREDICTED_A = PREDICTED_B = (0, 0)
''', expect="sequence A", gaming=True),
    ],
    "07-construct-fragmentation": [
        Wrong("frees everything", '''
def fragment(sim, x_mib):
    acts = [sim.malloc(9 * MiB) for _ in range(12)]
    for a in acts:
        sim.free(a)
''', expect="empty_cache() returned"),
        Wrong("keeps the activations alive", '''
def fragment(sim, x_mib):
    return [sim.malloc(9 * MiB) for _ in range(12)]
''', expect="are still allocated"),
        Wrong("free pieces fitted to x_mib=24 only", '''
def fragment(sim, x_mib):
    kept, big = [], []
    for _ in range(6):
        kept.append(sim.malloc(3 * MiB // 2))
        big.append(sim.malloc(18 * MiB))
    for b in big:
        sim.free(b)
    return kept
''', expect="hidden case 1: the request fitted one of your cached free blocks"),
        Wrong("too few segments", '''
def fragment(sim, x_mib):
    acts, kept = [], []
    for _ in range(3):
        acts.append(sim.malloc(9 * MiB))
        kept.append(sim.malloc(3 * MiB // 2))
        acts.append(sim.malloc(9 * MiB))
    for a in acts:
        sim.free(a)
    return kept
''', expect="at least 100 MiB needed"),
        Wrong("pins segments with pending frees only", '''
def fragment(sim, x_mib):
    for _ in range(6):
        h = sim.malloc(18 * MiB)
        sim.record_stream(h, 1)
        sim.free(h)
''', expect="empty_cache() returned"),
        Wrong("fakes the counters of the simulator it is given", '''
def fragment(sim, x_mib):
    sim.stats = lambda: {"allocated_bytes.all.current": 0, "reserved_bytes.all.current": 200 * MiB}
    sim._reserved = 200 * MiB
    sim.empty_cache = lambda: None
''', expect="only 0.00 MiB are reserved", gaming=True),
        Wrong("fitted to x_mib=24, and switches the hidden cases off while it runs", '''
def fragment(sim, x_mib):
    globals()["_judge_fragment"] = lambda *args: None
    kept, big = [], []
    for _ in range(6):
        kept.append(sim.malloc(3 * MiB // 2))
        big.append(sim.malloc(18 * MiB))
    for b in big:
        sim.free(b)
    return kept
''', expect="hidden case 1: the request fitted", gaming=True),
        Wrong("swaps the test cell's replay for a simulator of its own", '''
def fragment(sim, x_mib):
    class _Event:
        action = "segment_alloc"

    class _Fragmented:
        log = []

        def sync(self):
            pass

        def stats(self):
            return {"allocated_bytes.all.current": 0, "reserved_bytes.all.current": 120 * MiB}

        def empty_cache(self):
            pass

        def segments(self):
            return []

        def malloc(self, size):
            self.log.append(_Event())

        def explain(self, i):
            return ""
    globals()["_replay"] = lambda trace: _Fragmented()
''', expect="only 0.00 MiB are reserved", gaming=True),
        Wrong("disables empty_cache in the shared simulator class", '''
CachingAllocatorSim.empty_cache = lambda self: None


def fragment(sim, x_mib):
    acts = [sim.malloc(9 * MiB) for _ in range(12)]
    for a in acts:
        sim.free(a)
''', expect="CachingAllocatorSim.empty_cache was replaced", gaming=True),
        Wrong("makes real tensors", '''
def fragment(sim, x_mib):
    import torch
    keep = torch.empty(10)
    for _ in range(6):
        sim.malloc(3 * MiB // 2)
    return keep
''', expect="ran aten.empty", gaming=True),
    ],
    "07-avoid-oom": [
        Wrong("default settings", "MY_SETTINGS = {}\n", expect="still ran out of memory"),
        Wrong("garbage collection threshold", 'MY_SETTINGS = {"garbage_collection_threshold": 0.6}\n',
              expect="still ran out of memory"),
        Wrong("power-of-two rounding", 'MY_SETTINGS = {"roundup_power2_divisions": 4}\n',
              expect="still ran out of memory"),
        Wrong("split limit above every activation", 'MY_SETTINGS = {"max_split_size_mb": 200}\n',
              expect="still ran out of memory"),
        Wrong("split limit fitted to the visible trace", 'MY_SETTINGS = {"max_split_size_mb": 100}\n',
              expect="hidden case 1: with {'max_split_size_mb': 100} the replay still ran out of memory"),
        Wrong("a dict of its own class that reads the check's frame", '''
import sys


class _Settings(dict):
    def items(self):
        frame = sys._getframe(1)
        frame.f_locals.get("result", {}).update(ooms=0)
        return super().items()

    def keys(self):
        return iter(())


MY_SETTINGS = _Settings()
''', expect="MY_SETTINGS must be a dict of allocator settings, got _Settings", gaming=True),
        Wrong("changes the capacity", 'MY_SETTINGS = {"capacity": 10 ** 12}\n', expect="allowed are"),
        Wrong("the limit as a string", 'MY_SETTINGS = {"max_split_size_mb": "20"}\n', expect="numbers or True/False"),
        Wrong("empties the notebook's trace and counterfactual", '''
trace_grow = []
counterfactual = lambda *args, **kwargs: {"ooms": 0, "reserved_peak": 0}
MY_SETTINGS = {}
''', expect="still ran out of memory", gaming=True),
        Wrong("patches the package's counterfactual", '''
import torchlens_widgets.lenses.allocator as _alloc
_alloc.counterfactual = lambda *args, **kwargs: {"ooms": 0, "reserved_peak": 0}
MY_SETTINGS = {}
''', expect="was replaced", gaming=True),
        Wrong("patches the shared simulator's stats to report no OOM", '''
_real_stats = CachingAllocatorSim.stats
CachingAllocatorSim.stats = lambda self: {**_real_stats(self), "num_ooms": 0}
MY_SETTINGS = {}
''', expect="CachingAllocatorSim.stats was replaced", gaming=True),
    ],
}
