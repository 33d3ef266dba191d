"""Every pytest run (unit tests and nbval over the notebooks) records progress in a throwaway file, builds C++
extensions in a throwaway cache and keeps IPython's profile (its history database) in a throwaway folder.

Kernels that nbval starts inherit this environment, so running the suite never touches a learner's
real progress store or build cache (tests/course/test_progress_isolation.py proves it for progress).
"""

import os
import sys
import tempfile
import time
from pathlib import Path

_scratch = tempfile.mkdtemp(prefix="tlw-test-")
os.environ["TORCHLENS_PROGRESS"] = os.path.join(_scratch, "progress.json")
# `make test` names one build cache for its whole run (TORCHLENS_TEST_BUILD_DIR, emptied when it starts): a C++ op that
# the unit tests, the wrong-answer suite and nbval all build (a reference answer, a notebook's teaching ops) compiles
# once. Builds are keyed by their source, flags, torch and Python, and torch's load_inline locks a build folder, so
# processes can share it. Without it each pytest process gets a throwaway cache of its own.
os.environ["TORCHLENS_BUILD_DIR"] = os.environ.get("TORCHLENS_TEST_BUILD_DIR") or os.path.join(_scratch, "extensions")
# IPython's profile and its history database too: kernels of two workers never share (and lock) ~/.ipython's sqlite
# file, and the suite never writes the learner's home
os.environ["IPYTHONDIR"] = os.path.join(_scratch, "ipython")
# The lean headers' precompiled state (~300 MB, ~20 s to make) is kept for the checkout, not per process: every
# pytest run and worker shares it, and it never lands in the learner's cache. It is made on first need.
os.environ.setdefault("TORCHLENS_PCH_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".test-cache",
                                                        "precompiled"))

# The few tests that execute whole notebooks take most of the suite's time. xdist's worksteal hands each worker
# one contiguous share of the collection and steals from a share's end, so heavy tests at one end finished on
# one worker while the other idled (a 7-minute tail in CI). Heaviest first, dealt to the start of every share.
_HEAVY_FIRST = ("19-", "09-", "18-", "20-", "test_grade", "10-", "11-", "13-", "17-", "16-", "07-", "12-", "test_wheel")


def _cost(item) -> int:
    heavy = item.get_closest_marker("notebooks") is not None or "test_wheel" in item.nodeid
    if not heavy:
        return 0
    for rank, key in enumerate(_HEAVY_FIRST):
        if key in item.nodeid:
            return 100 - rank
    return 50


def pytest_collection_modifyitems(config, items) -> None:
    if any(type(i).__name__ == "NbCellItem" for i in items):
        return  # nbval: a notebook's cells must stay in order
    workers = config.getoption("numprocesses", None) or 1
    workers = os.cpu_count() or 1 if workers == "auto" else int(workers)
    heavy = sorted((i for i in items if _cost(i)), key=_cost, reverse=True)
    if not heavy:
        return
    light = [i for i in items if not _cost(i)]
    sizes, left = [], len(items)
    for k in range(workers):  # the shares worksteal will send, in order
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    shares = [heavy[k::workers] for k in range(workers)]
    for k, share in enumerate(shares):
        take = max(sizes[k] - len(share), 0)
        share.extend(light[:take])
        del light[:take]
    items[:] = [i for share in shares for i in share] + light


def _live_descendants() -> dict[int, str]:
    """{pid: command line} of this process's live descendants, read from /proc (Linux; elsewhere: none)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").glob("[0-9]*"):
        try:
            stat = (d / "stat").read_text()
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if state != "Z":  # a zombie is already gone, only not yet reaped
                parents[int(d.name)] = int(ppid)
        except (OSError, ValueError, IndexError):
            pass
    found: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - found
        found |= frontier
    out = {}
    for pid in sorted(found):
        try:
            out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
        except OSError:
            pass
    return out


def pytest_sessionfinish(session, exitstatus) -> None:
    """No test may leave a process behind (kernels, compilers, distributed ranks, servers): each pytest process
    checks its own descendants at the end (an xdist controller leaves that to its workers, its children)."""
    if not session.config.getoption("numprocesses", None) or hasattr(session.config, "workerinput"):
        zygote = sys.modules.get("torchlens_widgets.lenses.zygote")
        if zygote is not None:  # it stays for the next build or rank run while a process lives: let it go first
            zygote.stop()
        deadline = time.monotonic() + 15  # a kernel or server told to stop may take a moment
        left = _live_descendants()
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            left = _live_descendants()
        if left:
            lines = "\n".join(f"  pid {pid}: {cmd}" for pid, cmd in left.items())
            print(f"\nprocesses left behind by this test run:\n{lines}")
            session.exitstatus = 1
