"""A C++ extension build as data: `torch.utils.cpp_extension.load_inline` run in a subprocess (a compiler
error or a crashing first import never takes the kernel down), then read back: steps and their times
(ninja's log), the flags, every header the compile read (the depfile), cache hit or miss, and compiler
errors mapped to the learner's own lines. Loading into the kernel afterwards is a warm build (no compile).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import busy
from . import precompiled as pch
from . import zygote

__all__ = [
    "LEAN_HEADERS",
    "PRECOMPILED_FLAGS",
    "BuildError",
    "BuildReport",
    "BuildStep",
    "CompileError",
    "HeaderGroup",
    "build_dir",
    "build_inline",
    "load_built",
    "precompiled_header",
    "prepare",
]

ENV_CACHE = "TORCHLENS_BUILD_DIR"
#: What a custom operator written against ATen needs: the Tensor class, parallel_for, allocating a result
#: (empty, empty_like) and TORCH_LIBRARY.
#: torch/extension.h (what load_inline adds by default) also pulls in pybind11, Python.h and the C++
#: frontend (torch/nn, optimizers, data loaders): several times the headers, several times the time.
LEAN_HEADERS = ("ATen/core/Tensor.h", "ATen/Parallel.h", "ATen/ops/empty.h", "ATen/ops/empty_like.h",
                "torch/library.h")
# The flag sets that get a precompiled state of their own (~300 MB each): the default, and -fopenmp (notebook 09's
# threaded kernels: _OPENMP changes what ATen/Parallel.h declares, so they cannot share the default's)
PRECOMPILED_FLAGS: tuple[tuple[str, ...], ...] = (("-O2",), ("-O2", "-fopenmp"))
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_DIAG = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<kind>fatal error|error|warning): (?P<msg>.*)$")


class BuildError(RuntimeError):
    """A build that could not run or did not produce a library; `report` holds what is known."""

    def __init__(self, message: str, report: BuildReport | None = None) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class BuildStep:
    """One ninja edge: compiling one source (`compile`) or linking the library (`link`)."""

    phase: str
    output: str
    seconds: float


@dataclass(frozen=True)
class HeaderGroup:
    """Headers the compile read, grouped by where they come from (e.g. "torch/csrc/api", "pybind11")."""

    group: str
    files: int
    bytes: int


@dataclass(frozen=True)
class CompileError:
    """One compiler diagnostic in the learner's source: its line there (1-based), column and message."""

    line: int
    column: int
    kind: str
    message: str
    code: str  # the learner's line itself


@dataclass(frozen=True)
class BuildReport:
    """What one `build_inline` did. `cache` is "hit" when nothing was compiled (an identical build existed)."""

    name: str
    ok: bool
    cache: str
    seconds: float
    steps: tuple[BuildStep, ...]
    flags: tuple[str, ...]
    includes: tuple[str, ...]  # the headers the source includes directly, implicit ones first
    header_files: int  # every header file the compile read
    header_bytes: int
    header_groups: tuple[HeaderGroup, ...]
    errors: tuple[CompileError, ...]
    library: str | None
    directory: str
    log_tail: str = field(repr=False, default="")
    probe_error: str | None = None  # what the probe (a first call in the build process) raised, if anything
    precompiled: bool = False  # the compile loaded the lean headers' precompiled state instead of reading them

    @property
    def compile_seconds(self) -> float:
        """Seconds spent compiling (reading headers included), linking and loading left out: what a precompiled
        header or a leaner include list saves."""
        return sum(step.seconds for step in self.steps if step.phase == "compile")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (for widgets and tests)."""
        return asdict(self)

    def summary(self) -> str:
        """A few lines: outcome, time per step, headers read, first errors."""
        if not self.ok:
            head = f"{self.name}: build failed after {self.seconds:.1f} s"
            errs = [f"  line {e.line}:{e.column}: {e.kind}: {e.message}\n    {e.code.strip()}" for e in self.errors[:5]]
            return "\n".join([head, *errs] if errs else [head, self.log_tail[-800:]])
        lines = [f"{self.name}: cache {self.cache}, {self.seconds:.1f} s"]
        lines += [f"  {s.phase:8s} {s.output:28s} {s.seconds:6.2f} s" for s in self.steps]
        if self.header_files:
            top = ", ".join(f"{g.group} {g.files}" for g in self.header_groups[:6])
            lines.append(f"  headers read: {self.header_files} files, {self.header_bytes / 1e6:.1f} MB ({top})")
        if self.precompiled:
            lines.append("  the lean headers came precompiled: the compiler loaded their parsed state (see prepare)")
        return "\n".join(lines)


def build_dir() -> Path:
    """The course-wide build cache: $TORCHLENS_BUILD_DIR, else ~/.cache/torchlens-widgets/extensions."""
    env = os.environ.get(ENV_CACHE)
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "torchlens-widgets" / "extensions"
    return root


def _key(name: str, sources: Sequence[str], flags: Sequence[str], implicit: bool) -> str:
    """The cache folder's name: the source and flags, and the interpreter and torch build the library links against
    (two checkouts or venvs sharing ~/.cache must not reuse each other's builds: their include paths differ)."""
    import torch

    build = [torch.__version__, getattr(torch.version, "git_version", ""), getattr(torch.version, "cuda", None),
             os.path.dirname(torch.__file__), sys.version, sys.executable, sys.prefix]
    h = hashlib.sha256(json.dumps([list(sources), list(flags), implicit, build]).encode())
    return f"{name}_{h.hexdigest()[:10]}"


def _ninja_steps(directory: Path, since: float) -> list[BuildStep]:
    """Edges ninja ran in this build (its log: start ms, end ms, mtime, output, hash)."""
    log = directory / ".ninja_log"
    if not log.is_file() or log.stat().st_mtime < since:
        return []
    rows: dict[str, BuildStep] = {}
    for line in log.read_text(errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) < 4 or line.startswith("#"):
            continue
        try:
            start, end = int(parts[0]), int(parts[1])
        except ValueError:
            continue
        out = parts[3]
        phase = "link" if out.endswith((".so", ".pyd", ".dylib")) else "compile"
        rows[out] = BuildStep(phase, out, (end - start) / 1000)  # a rebuilt output: its last run counts
    built = [out for out in rows if (directory / out).is_file() and (directory / out).stat().st_mtime >= since]
    return [rows[o] for o in built]


def _flags(directory: Path) -> tuple[str, ...]:
    ninja = directory / "build.ninja"
    if not ninja.is_file():
        return ()
    found: list[str] = []
    for line in ninja.read_text(errors="replace").splitlines():
        for var in ("cflags", "post_cflags", "ldflags"):
            if line.startswith(f"{var} = "):
                found += [f for f in line.split(" = ", 1)[1].split() if not f.startswith("-isystem")
                          and not f.startswith("-I") and not f.startswith("-L")]
    return tuple(dict.fromkeys(found))


def _group(path: str) -> str:
    """Where a header comes from, in a word: an ATen/c10/torch subtree, pybind11, Python, the C++ library."""
    p = path.replace("\\", "/")
    if "/include/c++/" in p:
        return "C++ standard library"
    if "/torch/csrc/api/include/" in p:
        return "torch C++ frontend (torch/csrc/api)"
    if re.search(r"/include/python3[^/]*/", p):
        return "Python.h"
    rel = p.rsplit("/include/", 1)[-1]
    top = rel.split("/", 1)[0]
    if top == "torch":
        return "torch/csrc" if rel.startswith("torch/csrc/") else "torch"
    return top if top in ("ATen", "c10", "caffe2", "pybind11", "fmt", "nlohmann") else "system"


def _cflags_for_listing(directory: Path) -> list[str] | None:
    """The compile's own flags from build.ninja (include paths included), to list its headers."""
    ninja = directory / "build.ninja"
    if not ninja.is_file():
        return None
    for line in ninja.read_text(errors="replace").splitlines():
        if line.startswith("cflags = "):
            return line.split(" = ", 1)[1].split()
    return None


def _headers(directory: Path) -> tuple[int, int, tuple[HeaderGroup, ...]]:
    """Every header the compile reads (the preprocessor's -M list: ninja keeps only user headers): how
    many, their bytes, by group. Listed once per build folder (about a second) and kept in headers.json."""
    kept = directory / "headers.json"
    names: list[str] | None = None
    if kept.is_file():
        try:
            names = [str(h) for h in json.loads(kept.read_text())]
        except (ValueError, OSError):
            names = None
    if names is None:
        flags = _cflags_for_listing(directory)
        if flags is None or not (directory / "main.cpp").is_file():
            return 0, 0, ()
        cxx = os.environ.get("CXX", "c++")
        try:
            done = subprocess.run([cxx, *flags, "-M", "main.cpp"], cwd=directory, capture_output=True, text=True,
                                  timeout=120, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return 0, 0, ()
        if done.returncode != 0:
            return 0, 0, ()
        tokens = done.stdout.replace("\\\n", " ").split(":", 1)[-1].split()
        names = sorted({t for t in tokens if t not in ("main.cpp", "\\") and Path(t).name != pch.HEADER})
        try:
            kept.write_text(json.dumps(names))
        except OSError:
            pass
    files, size = Counter[str](), Counter[str]()
    for h in names:
        g = _group(h)
        files[g] += 1
        try:
            size[g] += os.path.getsize(h)
        except OSError:
            pass
    groups = tuple(HeaderGroup(g, n, size[g]) for g, n in files.most_common())
    return len(names), sum(size.values()), groups


def _map_errors(stderr: str, source: str, main: Path) -> tuple[CompileError, ...]:
    """Diagnostics in main.cpp, moved to the learner's line numbers (load_inline adds lines before it)."""
    try:
        generated = main.read_text(errors="replace")
    except OSError:
        return ()
    at = generated.find(source)
    offset = generated[:at].count("\n") if at >= 0 else 0
    mine = source.splitlines()
    errors: list[CompileError] = []
    for line in stderr.splitlines():
        m = _DIAG.match(line.strip())
        if not m or Path(m["file"]).name != main.name:
            continue
        n = int(m["line"]) - offset
        if 1 <= n <= len(mine):
            errors.append(CompileError(n, int(m["col"]), m["kind"], m["msg"], mine[n - 1]))
    return tuple(dict.fromkeys(errors))


def _phase(folder: Path, since: float) -> str:
    """What the build in `folder` is doing now, read from its files ("step 1 of 2: compiling main.cpp").

    Not from ninja's output: without a terminal ninja prints a step only once it has finished."""
    try:
        edges = re.findall(r"^build (\S+): (\w+) (\S+)", (folder / "build.ninja").read_text(), re.M)
    except OSError:
        return "starting the compiler"
    for i, (out, rule, src) in enumerate(edges, 1):
        try:
            done = (folder / out).stat().st_mtime >= since
        except OSError:
            done = False
        if not done:
            what = f"compiling {Path(src).name}" if rule == "compile" else "linking the library"
            return f"step {i} of {len(edges)}: {what}"
    return "loading the library" if edges else "starting the compiler"


MARKER = "built.json"  # written once a build compiled and its library loaded in the build process


def _cached(folder: Path) -> tuple[str, bool] | None:
    """The library of an earlier successful build in `folder`, if it is still there, and whether that build
    used the precompiled lean headers."""
    try:
        marker = json.loads((folder / MARKER).read_text())
        lib = marker["library"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (lib, marker.get("precompiled") is True) if isinstance(lib, str) and Path(lib).is_file() else None


def _precompiled_slot(headers: Sequence[str] | None, flags: Sequence[str]) -> Path | None:
    """Where the precompiled lean headers for a build with these headers and flags live, or None when such a
    build cannot use them (not the lean set, a flag set not in PRECOMPILED_FLAGS, precompiling off or not GCC)."""
    if headers is None or not set(LEAN_HEADERS) <= set(headers) or tuple(flags) not in PRECOMPILED_FLAGS \
            or not pch.enabled():
        return None
    env = os.environ.get(pch.ENV_DIR)
    root = Path(env).expanduser() if env else build_dir() / "precompiled"
    return pch.slot(root, LEAN_HEADERS, flags)


_CHILD = r"""
import json, sys
spec = json.loads(open(sys.argv[1], encoding="utf-8").read())
probe = open(sys.argv[2], encoding="utf-8").read()
from torch.utils.cpp_extension import load_inline
lib = load_inline(**spec)
print("TLW_LIBRARY=" + json.dumps(lib if isinstance(lib, str) else getattr(lib, "__file__", "")), flush=True)
if probe:
    import torch
    try:
        exec(compile(probe, "<probe>", "exec"), {"torch": torch})
    except Exception as exc:
        print("TLW_PROBE_ERROR=" + json.dumps(f"{type(exc).__name__}: {exc}"[:2000]), flush=True)
    else:
        print("TLW_PROBE_OK", flush=True)
"""


def build_inline(name: str, source: str, *, headers: Sequence[str] | None = LEAN_HEADERS,
                 extra_cflags: Sequence[str] | str = (), directory: Path | str | None = None, timeout: float = 180.0,
                 on_progress: Callable[[str, float], None] | None = None, probe: str | None = None,
                 precompiled: bool = True) -> BuildReport:
    """Build `source` (C++ that registers its ops with TORCH_LIBRARY) as a library named `name`.

    `headers`: includes put before the source (default LEAN_HEADERS); None keeps load_inline's own
    `#include <torch/extension.h>`. Compiled with -O2 unless `extra_cflags` names another -O level.
    Each distinct source/flag set gets its own folder under `directory`
    (default `build_dir()`), so an unchanged cell is a cache hit. The compile and a first load run in a
    subprocess; `on_progress(what, seconds)` is called about 4 times a second while it runs. `probe`: Python
    code run there after loading (e.g. a first call of the op): a crash in it ends in BuildError, not in the
    caller's process, and an exception it raises is in `report.probe_error`. A probe always runs the
    subprocess, even when the build itself is cached. `precompiled`: with the lean headers and default flags, use
    their precompiled state when this machine has it (see `prepare`), and start making it in the background
    after a build that had none; False reads the headers as usual. Without `on_progress`, the build shows a busy
    line (`torchlens_widgets.busy`) while it runs."""
    if on_progress is None:
        with busy.working(f"building {name}", "starting") as line:
            return build_inline(name, source, headers=headers, extra_cflags=extra_cflags, directory=directory,
                                timeout=timeout, on_progress=lambda what, _s: line.phase(what), probe=probe,
                                precompiled=precompiled)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise BuildError(f"name {name!r}: use a C identifier (letters, digits, '_'; not starting with a digit)")
    if not isinstance(source, str) or not source.strip():
        raise BuildError("source: give the C++ code as a string (with its TORCH_LIBRARY block)")
    if headers is not None and (isinstance(headers, str) or not all(isinstance(h, str) for h in headers)):
        raise BuildError(f"headers={headers!r}: give a list of header names such as {list(LEAN_HEADERS)}, or None")
    if not (isinstance(timeout, (int, float)) and 1 <= timeout <= 3600):
        raise BuildError(f"timeout={timeout!r}: give the seconds a build may take (1 to 3600)")
    if isinstance(extra_cflags, str):  # "-O3 -march=native": one string of flags, split as a shell would
        extra_cflags = shlex.split(extra_cflags)
    elif not all(isinstance(f, (str, os.PathLike)) for f in extra_cflags):
        raise BuildError(f"extra_cflags={extra_cflags!r}: give the flags as a list of strings, e.g. ['-O3']")
    flags = [str(f) for f in extra_cflags]
    if not any(f.startswith("-O") for f in flags):
        flags.insert(0, "-O2")  # load_inline passes no optimisation level: loops ran ~15x slower at -O0 here
    implicit = headers is None
    prelude = "" if implicit else "".join(f"#include <{h}>\n" for h in headers or ())
    cpp = prelude + source
    key = _key(name, [cpp], flags, implicit)
    root = Path(directory).expanduser() if directory is not None else build_dir()
    folder = root / key
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError, PermissionError) as exc:
        raise BuildError(f"cannot make the build folder {folder} ({type(exc).__name__}: {exc.strerror}); give "
                         f"directory= a folder you can write, or set ${ENV_CACHE}") from None
    spec: dict[str, Any] = {"name": key, "cpp_sources": [cpp], "extra_cflags": flags, "build_directory": str(folder),
                            "is_python_module": False, "no_implicit_headers": not implicit, "verbose": True}
    slot = _precompiled_slot(headers, flags) if precompiled else None
    use_pch = slot is not None and pch.usable(slot)
    if use_pch:  # the same code, its lean includes replaced by the one precompiled header (first, as GCC needs)
        rest = "".join(f"#include <{h}>\n" for h in headers or () if h not in LEAN_HEADERS)
        spec.update(cpp_sources=[f'#include "{pch.HEADER}"\n' + rest + source], extra_include_paths=[str(slot)],
                    extra_cflags=[*flags, "-Winvalid-pch"])
    includes = (("torch/extension.h",) if implicit else ()) + tuple(re.findall(r"^\s*#\s*include\s*[<\"]([^>\"]+)[>\"]",
                                                                               cpp, re.M))
    mono = time.monotonic()
    hit = _cached(folder) if probe is None else None
    if hit is not None:  # built and loaded before with this very source and flags: nothing to compile
        count, size, groups = _headers(folder)
        return BuildReport(name=name, ok=True, cache="hit", seconds=time.monotonic() - mono, steps=(),
                           flags=_flags(folder), includes=includes, header_files=count, header_bytes=size,
                           header_groups=groups, errors=(), library=hit[0], directory=str(folder),
                           precompiled=hit[1])
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="tlw-build-") as logs:
        out_file, err_file = Path(logs) / "stdout", Path(logs) / "stderr"
        # the compiler's temporary files (cc*.s) go into this folder, removed with it even when the build is stopped
        env = dict(os.environ, TMPDIR=logs)
        # the spec and probe go in files: a large source on a command line fails with "Argument list too long"
        (Path(logs) / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        (Path(logs) / "probe.py").write_text(probe or "", encoding="utf-8")
        try:  # forked from a Python that already imported torch (see zygote): ~2 s less per build
            proc = zygote.spawn(_CHILD, [str(Path(logs) / "spec.json"), str(Path(logs) / "probe.py")], env=env,
                                stdout=out_file, stderr=err_file)
        except OSError as exc:
            raise BuildError(f"could not start the build ({exc})") from exc
        while proc.poll() is None:
            elapsed = time.monotonic() - mono
            if elapsed > timeout:  # the build, ninja and the compilers it started in groups of their own
                zygote.kill_all(proc.pid)
                proc.wait()
                raise BuildError(f"{name}: the build ran past {timeout:.0f} s and was stopped; give it a longer "
                                 f"timeout= (a lean build, headers=LEAN_HEADERS, takes ~10 s here, torch/extension.h "
                                 f"~30 s)")
            if on_progress is not None:
                on_progress(_phase(folder, t0), elapsed)
            time.sleep(0.25)
        returncode = proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):  # what a probe forked and left running
            os.killpg(proc.pid, signal.SIGKILL)
        stdout = out_file.read_text(errors="replace") if out_file.exists() else ""
        stderr = err_file.read_text(errors="replace") if err_file.exists() else ""
    seconds = time.monotonic() - mono
    steps = tuple(_ninja_steps(folder, t0 - 1))
    library = next((json.loads(ln.split("=", 1)[1]) for ln in stdout.splitlines() if ln.startswith("TLW_LIBRARY=")),
                   None)
    ok = returncode == 0 and bool(library)
    count, size, groups = _headers(folder) if ok else (0, 0, ())
    compiled = bool(steps) or not ok
    used_pch = use_pch and compiled and not pch.rejected(stdout + stderr)
    if use_pch and compiled and not used_pch and slot is not None:  # GCC found it stale or damaged: make it again
        (slot / (pch.HEADER + ".gch")).unlink(missing_ok=True)
        if not ok:  # a damaged one fails the compile itself: build again, reading the headers
            return build_inline(name, source, headers=headers, extra_cflags=extra_cflags, directory=directory,
                                timeout=timeout, on_progress=on_progress, probe=probe, precompiled=precompiled)
    if slot is not None and not used_pch and ok and compiled:
        cflags = pch.cflags_of(folder)
        if cflags is not None:
            pch.start_generating(slot, cflags, LEAN_HEADERS)
    report = BuildReport(
        name=name, ok=ok, cache="hit" if ok and not steps else "miss", seconds=seconds, steps=steps, flags=_flags(folder),
        includes=includes, header_files=count, header_bytes=size, header_groups=groups,
        errors=_map_errors(stdout + "\n" + stderr, source, folder / "main.cpp"), library=library or None,
        directory=str(folder), log_tail=(stdout + stderr)[-4000:], precompiled=used_pch,
    )
    loaded = library is not None
    probe_error = next((json.loads(ln.split("=", 1)[1]) for ln in stdout.splitlines()
                        if ln.startswith("TLW_PROBE_ERROR=")), None)
    if probe and loaded and "TLW_PROBE_OK" not in stdout and probe_error is None:
        raise BuildError(f"{name}: your op crashed the build process on its first call (exit "
                         f"{-returncode if returncode < 0 else returncode}; a segmentation fault "
                         "is signal 11); your kernel is unharmed. Look for reads or writes past the end of a "
                         "tensor's data: sizes, strides, an empty input", report)
    if probe_error is not None:
        report = replace(report, probe_error=str(probe_error))
    if ok:
        (folder / MARKER).write_text(json.dumps({"library": library, "precompiled": used_pch}))
    if not ok and returncode not in (0, 1):
        raise BuildError(f"{name}: loading the built library crashed the build process (signal "
                         f"{-returncode if returncode < 0 else returncode}); your kernel is unharmed. "
                         "Look for static initialisers or a TORCH_LIBRARY block that throws", report)
    return report


def load_built(report: BuildReport) -> str:
    """Load a successful build into this process (a warm build: nothing compiles) and return its path;
    its TORCH_LIBRARY ops then appear under torch.ops."""
    if not isinstance(report, BuildReport):
        raise BuildError(f"load_built takes the BuildReport build_inline returned, not {type(report).__name__}")
    if not report.ok or not report.library:
        raise BuildError(f"{report.name} did not build; fix the errors it lists (report.summary()) and build again")
    import torch

    try:
        torch.ops.load_library(report.library)
    except (OSError, RuntimeError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        hint = ("an operator with this name is already registered in this kernel (an earlier version of your "
                "code?): restart the kernel, or give the new version another namespace"
                if "registered" in text or "same name" in text else "build it again")
        raise BuildError(f"{report.name}: loading {report.library} failed ({text}); {hint}", report) from None
    return report.library


_TINY = """
at::Tensor tlw_prepare_twice(const at::Tensor& x) { return x.add(x); }
TORCH_LIBRARY(tlw_prepare, m) { m.def("twice(Tensor x) -> Tensor", &tlw_prepare_twice); }
"""


def precompiled_header(flags: Sequence[str] = ("-O2",)) -> Path | None:
    """This machine's precompiled lean headers (the `.gch` file) for builds with these flags (one of
    PRECOMPILED_FLAGS), or None while there are none."""
    if isinstance(flags, str) or tuple(flags) not in PRECOMPILED_FLAGS:
        raise BuildError(f"flags={flags!r}: precompiled headers exist for these flag sets only: "
                         f"{[list(f) for f in PRECOMPILED_FLAGS]}")
    slot = _precompiled_slot(LEAN_HEADERS, flags)
    return slot / (pch.HEADER + ".gch") if slot is not None and pch.usable(slot) else None


def prepare(report: BuildReport | None = None, timeout: float = 600.0) -> str:
    """Precompile the lean headers for this machine now, once (~20 s and ~0.9 GB here, ~300 MB on disk), so
    every later cold lean build skips reading them; waits for one being made in the background. `report`: an
    earlier lean build to take the compile flags from (otherwise a tiny op is built first, ~15 s)."""
    with busy.working("precompiling the lean headers", "looking for them") as line:
        return _prepare(report, timeout, line)


def _prepare(report: BuildReport | None, timeout: float, line: busy.BusyLine) -> str:
    slot = _precompiled_slot(LEAN_HEADERS, ["-O2"])
    if slot is None:
        return (f"precompiled headers are off here (${pch.ENV_OFF}=0, or the compiler is not GCC): "
                "every build reads its headers")
    if report is not None and not isinstance(report, BuildReport):
        raise BuildError(f"prepare takes a BuildReport from build_inline or build_op (or nothing), not "
                         f"{type(report).__name__}")
    start = time.monotonic()
    if pch.being_made(slot):
        line.phase("waiting for the background job that is making them")
    while pch.being_made(slot) and time.monotonic() - start < timeout:
        time.sleep(0.5)
    if pch.usable(slot):
        waited = time.monotonic() - start
        return ("the lean headers are precompiled (precompiled_header() gives the file)" +
                (f" (made in the background; waited {waited:.1f} s for it)" if waited > 1 else ""))
    cflags = pch.cflags_of(Path(report.directory)) if report is not None and report.ok else None
    if cflags is not None and ([f for f in cflags if f.startswith("-O")] != ["-O2"] or "-Winvalid-pch" in cflags):
        cflags = None  # built with other flags (or already with the precompiled header): not this slot's flags
    if cflags is None:
        line.phase("building a first lean op to take its compile flags from")
        with tempfile.TemporaryDirectory(prefix="tlw-prepare-") as scratch:  # a lean build's own flags
            tiny = build_inline("tlw_prepare", _TINY, directory=scratch, precompiled=False, timeout=timeout)
            cflags = pch.cflags_of(Path(tiny.directory)) if tiny.ok else None
        if cflags is None:
            raise BuildError("could not build a first lean op to take its flags from: " + tiny.summary(), tiny)
    try:
        seconds = pch.generate(slot, cflags, LEAN_HEADERS, timeout=timeout)
    except pch.PrecompileError as exc:
        # another process began making them while the flags were taken (a build's background job): wait for it
        line.phase("waiting for the background job that is making them")
        while pch.being_made(slot) and time.monotonic() - start < timeout:
            time.sleep(0.5)
        if not pch.usable(slot):
            raise BuildError(str(exc)) from None
        return (f"the lean headers are precompiled (precompiled_header() gives the file) (made by another "
                f"process; waited {time.monotonic() - start:.1f} s for it)")
    size = (slot / (pch.HEADER + ".gch")).stat().st_size / 1e6
    return (f"precompiled the lean headers in {seconds:.1f} s ({size:.0f} MB: precompiled_header() gives the file); "
            "a cold lean build now compiles only your code")
