"""Shipping an operator as a package, as data: pip run in a subprocess, what a built library needs from the
outside (the shared libraries and C++ symbols it asks the dynamic loader for), a small library compiled
straight with the C++ compiler, a package's metadata read through its build backend, and a pytest suite
run against several implementations of one operator, with the verdict of every test on each.

Everything that builds, installs or runs tests does it in a subprocess: a crash, a hang or a broken
import never reaches the caller's process; `installed` is the one helper that changes the caller's import path,
and it puts it back.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "STABLE_TARGET_2_10",
    "PackageError",
    "SuiteRun",
    "compile_library",
    "dynamic_symbols",
    "installed",
    "needed_libraries",
    "operator_source",
    "pip",
    "project_metadata",
    "run_suite",
    "torch_cxx_symbols",
]

# Captured at import: what these helpers run, whatever a caller later rebinds.
_run = subprocess.run
_loads = json.loads
_token = secrets.token_hex


class PackageError(RuntimeError):
    """A tool this module runs is missing or could not run; the message says which and why."""


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise PackageError(f"{name} is not on PATH (it comes with binutils / the C++ compiler)")
    return found


def pip(*args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    """`python -m pip ARGS` for this interpreter, without pip's cache (nothing written to the home
    directory), its version check or prompts. Returns the finished process (check `returncode`)."""
    cmd = [sys.executable, "-m", "pip", *args, "--no-cache-dir", "--disable-pip-version-check", "--no-input",
           "--no-color"]
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1"}
    return _run(cmd, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def needed_libraries(library: str | Path) -> list[str]:
    """The shared libraries `library` asks the loader for (its DT_NEEDED entries), in order."""
    done = _run([_tool("readelf"), "-d", str(library)], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise PackageError(f"readelf could not read {library}: {done.stderr.strip()[:200]}")
    return [line.split("[", 1)[1].split("]", 1)[0] for line in done.stdout.splitlines() if "(NEEDED)" in line]


def dynamic_symbols(library: str | Path, *, undefined: bool = True, demangle: bool = False) -> list[str]:
    """The dynamic symbols `library` needs from elsewhere (`undefined=True`) or offers (False), sorted.
    Versioned names lose their `@VERSION`; weak undefined symbols are left out. With `demangle` the C++
    names are shown as declarations (`c10::TensorType::get()`)."""
    flag = "--undefined-only" if undefined else "--defined-only"
    cmd = [_tool("nm"), "-D", flag, *(["-C"] if demangle else []), str(library)]
    done = _run(cmd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise PackageError(f"nm could not read {library}: {done.stderr.strip()[:200]}")
    names = set()
    for line in done.stdout.splitlines():
        parts = line.split(None, 2) if not undefined else line.split(None, 1)
        if undefined:
            if len(parts) != 2 or parts[0] != "U":
                continue
            names.add(parts[1].split("@", 1)[0])
        elif len(parts) == 3:
            names.add(parts[2].split("@", 1)[0])
    return sorted(names)


#: The compiler flag that builds against the LibTorch stable ABI of torch 2.10 (torch/csrc/stable/version.h: major
#: in the top byte, minor in the next): the stable headers then offer only what 2.10 had, and every non-stable torch
#: header refuses to compile (#error).
STABLE_TARGET_2_10 = "-DTORCH_TARGET_VERSION=0x020a000000000000"
# A mangled C++ name inside namespace c10, at, torch or caffe2 (a function, or the typeinfo / vtable of a class).
_TORCH_CXX = re.compile(r"^_Z(?:T[IVS])?N[KVRO]*(?:3c10|2at|5torch|6caffe2)(?=\d|[A-Z])")


def torch_cxx_symbols(library: str | Path) -> list[str]:
    """The C++ symbols of torch (names in the c10, at, torch and caffe2 namespaces) that `library` needs from
    elsewhere, demangled and sorted: each one is a mangled name that only a torch with exactly that function can
    satisfy. A library built on the stable ABI needs none; it calls torch through C functions (`aoti_torch_*`)."""
    mangled = [s for s in dynamic_symbols(library) if _TORCH_CXX.match(s)]
    if not mangled:
        return []
    done = _run([_tool("c++filt")], input="\n".join(mangled) + "\n", capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise PackageError(f"c++filt could not demangle the names of {library}: {done.stderr.strip()[:200]}")
    return sorted(done.stdout.splitlines())


@contextlib.contextmanager
def installed(wheel: str | Path, target: str | Path) -> Iterator[Path]:
    """`pip install --no-deps --target TARGET WHEEL`, then TARGET on this process's import path and on PYTHONPATH
    (for its subprocesses) for the block; afterwards both are as they were, the modules imported from TARGET are
    forgotten and TARGET is removed. The environment's own site-packages is never written. Yields TARGET."""
    folder = Path(target)
    done = pip("install", "--no-deps", "--target", str(folder), str(wheel))
    if done.returncode != 0:
        raise PackageError(f"pip could not install {Path(wheel).name}:\n{done.stderr.strip()[-1500:]}")
    old = os.environ.get("PYTHONPATH")
    sys.path.insert(0, str(folder))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), old]))
    importlib.invalidate_caches()
    try:
        yield folder
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(folder))
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
        for name, module in list(sys.modules.items()):
            where = getattr(module, "__file__", None)
            if isinstance(where, str) and Path(where).is_relative_to(folder):
                del sys.modules[name]
        importlib.invalidate_caches()
        shutil.rmtree(folder, ignore_errors=True)


def compile_library(source: str, name: str, directory: str | Path, *, flags: Sequence[str] = (),
                    link_torch: bool = True, timeout: float = 120.0) -> Path:
    """Compile C++ `source` into `directory/lib{name}.so` with the C++ compiler directly (no torch headers
    unless the source includes them). `link_torch` links libc10 and records torch's library folder, as a
    real extension does. Raises PackageError with the compiler's message when it fails."""
    import torch

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    src, out = folder / f"{name}.cpp", folder / f"lib{name}.so"
    src.write_text(source)
    lib_dir = str(Path(torch.__file__).parent / "lib")
    cmd = [os.environ.get("CXX", "c++"), "-shared", "-fPIC", "-O1", "-std=c++17", *map(str, flags), str(src),
           "-o", str(out)]
    if link_torch:
        cmd += [f"-L{lib_dir}", "-lc10", f"-Wl,-rpath,{lib_dir}"]
    done = _run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise PackageError(f"{name} did not compile:\n{done.stderr.strip()[-1500:]}")
    return out


_METADATA = r"""
import email, json, os, sys, tempfile, tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

project, probe = sys.argv[1], json.loads(sys.argv[2])
os.chdir(project)
with open("pyproject.toml", "rb") as f:
    build_requires = tomllib.load(f).get("build-system", {}).get("requires", [])
from setuptools import build_meta
with tempfile.TemporaryDirectory(prefix="tlw-metadata-") as out:  # removed however the backend ends
    info = build_meta.prepare_metadata_for_build_wheel(out)
    with open(os.path.join(out, info, "METADATA")) as f:
        meta = email.message_from_string(f.read())
requires = meta.get_all("Requires-Dist") or []
python = meta.get("Requires-Python")

def admits(reqs, name):
    specs = [Requirement(r) for r in reqs if Requirement(r).name.lower() == name]
    if not specs:
        return None
    return {v: all(s.specifier.contains(Version(v), prereleases=True) for s in specs) for v in probe.get(name, [])}

print("TLW_METADATA=" + json.dumps({
    "name": meta.get("Name"), "version": meta.get("Version"), "requires_dist": requires,
    "requires_python": python, "build_requires": list(build_requires),
    "admits": {n: admits(requires, n) for n in probe if n != "python"},
    "build_admits": {n: admits(build_requires, n) for n in probe if n != "python"},
    "python_admits": None if python is None else {v: SpecifierSet(python).contains(v) for v in probe.get("python", [])},
}))
"""


def project_metadata(project: str | Path, probe: Mapping[str, Sequence[str]] | None = None,
                     timeout: float = 120.0) -> dict[str, Any]:
    """What a package's build backend says about it: name, version, Requires-Dist, Requires-Python and the
    build requirements of `project/pyproject.toml`, read in a subprocess through setuptools'
    `prepare_metadata_for_build_wheel` (nothing compiles). `probe` ({"torch": ["2.13.1", ...], "python":
    ["3.9", ...]}) also asks whether each requirement admits those versions: `admits[name][version]` for
    the runtime requirements, `build_admits` for the build requirements (None when the name is not
    required) and `python_admits` for Requires-Python. Raises PackageError when the backend refuses."""
    spec = {k: [str(v) for v in vs] for k, vs in (probe or {}).items()}
    done = _run([sys.executable, "-c", _METADATA, str(project), json.dumps(spec)], capture_output=True, text=True,
                timeout=timeout, stdin=subprocess.DEVNULL)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("TLW_METADATA=")), None)
    if done.returncode != 0 or line is None:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-6:]
        raise PackageError("the build backend could not read the project:\n" + "\n".join(tail))
    result: dict[str, Any] = _loads(line.split("=", 1)[1])
    return result


# scale_add(x, y, a) = a * x + y registered from Python in the namespace `ns` (see run_suite). Every variant, correct
# or with a planted bug, comes from this one template: the same function names, signatures and lines (no defaults);
# only the expressions differ, so a suite can tell them apart by what they compute, never by how they look.
_OPERATOR = '''
def load(t):
    return LOAD
def kernel(x, y, a):
    return KERNEL
def fake(x, y, a):
    return torch.empty_like(x)
def setup(ctx, inputs, output):
    ctx.a = inputs[2]
def backward(ctx, grad):
    return BACKWARD
lib = torch.library.Library(ns, "DEF")
lib.define("scale_add(Tensor x, Tensor y, float a) -> Tensor")
lib.impl("scale_add", kernel, "CPU")
FAKE
AUTOGRAD
op = getattr(torch.ops, ns).scale_add.default
'''
_REGISTER_FAKE = 'torch.library.register_fake(ns + "::scale_add", fake, lib=lib)'
_REGISTER_AUTOGRAD = 'torch.library.register_autograd(ns + "::scale_add", backward, setup_context=setup, lib=lib)'


def operator_source(kernel: str = "a * load(x) + load(y)", load: str = "t", backward: str = "grad * ctx.a, grad, None",
                    fake: bool = True, autograd: bool = True) -> str:
    """Python source for `run_suite`: scale_add(x, y, a) registered in the namespace `ns`, with a CPU kernel that
    returns `kernel` (inputs read through `load(t)`), the autograd formula `backward` (gradients for x, y, a) and
    a fake kernel; `fake=False` / `autograd=False` leave those out. The defaults are the correct operator."""
    return (_OPERATOR.replace("LOAD", load).replace("KERNEL", kernel).replace("BACKWARD", backward)
            .replace("FAKE", _REGISTER_FAKE if fake else "pass")
            .replace("AUTOGRAD", _REGISTER_AUTOGRAD if autograd else "pass"))


#: The exit status of a test run whose suite looked inside an operator under test instead of calling it.
PEEKED = 87
_PLUGIN = r'''
import _thread, json, os, sys
import pytest
import torch

def _tlw_setup():
    spec = json.loads(sys.stdin.readline())
    fixture, nonce, result = spec["fixture"], spec["nonce"], spec["result"]
    suite = frozenset((spec["suite"], os.path.realpath(spec["suite"])))
    keys, ops, scopes, functions = {}, [], set(), set()
    for ns, source in spec.pop("variants").items():
        scope = {"torch": torch, "ns": ns}
        exec(compile(source, "<operator under test>", "exec"), scope)   # one file name for every variant
        ops.append(scope["op"])
        keys[ns] = ns
        scopes.add(id(scope))
        functions.update(id(v) for v in scope.values() if type(v).__name__ == "function")
    spec = source = scope = None   # the sources are gone: a test sees each operator only by calling it
    # captured now: the test module may rebind builtins, but cannot reach these (nothing refers to _audit)
    exit_, getframe, ident, id_, busy = os._exit, sys._getframe, _thread.get_ident, id, set()

    def _in_suite():
        f = getframe(1)
        while f is not None:
            if f.f_code.co_filename in suite:
                return True
            f = f.f_back
        return False

    def _audit(event, args):
        # a test that reads an operator's code (its code object, defaults, frames, the object graph) instead of
        # calling it ends the run: the checker reports it
        me = ident()
        if me in busy:
            return
        if event == "object.__getattr__":
            obj, name = args
            if name == "__code__" or name == "__defaults__" or name == "__kwdefaults__":
                peek = id_(obj) in functions
            elif name == "f_code":
                peek = id_(obj.f_globals) in scopes
            else:
                return
        elif event == "gc.get_objects" or event == "gc.get_referrers" or event == "gc.get_referents":
            peek = True
        else:
            return
        busy.add(me)
        try:
            if peek and _in_suite():
                exit_(PEEKED)
        finally:
            busy.discard(me)

    sys.addaudithook(_audit)
    seen, names, said = {}, {}, {}

    def pytest_generate_tests(metafunc):
        if fixture in metafunc.fixturenames:
            metafunc.parametrize(fixture, ops, ids=list(keys))

    def pytest_collection_modifyitems(session, config, items):
        for item in items:
            cs = getattr(item, "callspec", None)
            ns = None
            if cs is not None and fixture in cs.params:
                ns = next(k for k, o in zip(keys, ops) if o is cs.params[fixture])
            name = item.nodeid
            if ns is not None:
                for pat, rep in ((f"[{ns}]", ""), (f"-{ns}]", "]"), (f"[{ns}-", "[")):
                    name = name.replace(pat, rep)
            names[item.nodeid] = (ns, name.split("::", 1)[-1])

    def pytest_runtest_logreport(report):
        ns, name = names.get(report.nodeid, (None, report.nodeid))
        key = (ns, name)
        if report.failed:
            seen[key] = "error" if report.when != "call" else "failed"
            crash = getattr(report.longrepr, "reprcrash", None)
            said.setdefault(key, str(getattr(crash, "message", "") or report.longreprtext)[:300])
        elif report.skipped:
            seen.setdefault(key, "skipped")
        elif report.when == "call":
            seen.setdefault(key, "passed")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session, exitstatus):
        rows = [[ns, name, outcome, said.get((ns, name), "")] for (ns, name), outcome in seen.items()]
        with open(result, "w") as f:
            json.dump({"nonce": nonce, "rows": rows, "collected": len(names),
                       "exitstatus": int(exitstatus)}, f)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    return pytest_generate_tests, pytest_collection_modifyitems, pytest_runtest_logreport, pytest_sessionfinish

pytest_generate_tests, pytest_collection_modifyitems, pytest_runtest_logreport, pytest_sessionfinish = _tlw_setup()
del _tlw_setup
'''.replace("PEEKED", str(PEEKED))


@dataclass(frozen=True)
class SuiteRun:
    """The verdicts of one pytest run: `outcomes[variant][test]` is "passed", "failed", "error" (setup or
    teardown failed) or "skipped". A test that does not take the operator fixture counts for every
    variant. `error` says why nothing usable came back (a collection error, no tests, a crash)."""

    tests: tuple[str, ...]
    outcomes: dict[str, dict[str, str]]
    error: str | None = None
    messages: dict[str, dict[str, str]] = field(default_factory=dict)  # the first line of each failure
    output: str = field(default="", repr=False)

    def failed(self, variant: str) -> list[str]:
        """The tests that failed or errored on `variant`, in order."""
        return [t for t, o in self.outcomes.get(variant, {}).items() if o in ("failed", "error")]

    def passed(self, variant: str) -> bool:
        """True when at least one test ran on `variant` and none failed."""
        got = self.outcomes.get(variant, {})
        return any(o == "passed" for o in got.values()) and not self.failed(variant)


def run_suite(test_source: str, variants: Mapping[str, str], *, fixture: str = "op",
              timeout: float = 180.0) -> SuiteRun:
    """Run the pytest module `test_source` once, in a subprocess, against every implementation in
    `variants` ({label: Python source}). Each source runs with `torch` and `ns` (a fresh operator
    namespace) defined and must set `op`; the tests receive it as the fixture `fixture`, parametrized over
    all variants under neutral ids, so a test cannot tell which implementation it is looking at except by
    its behaviour: every source is compiled under one file name and dropped once run, and a suite that reads
    an operator's code (the `__code__` or defaults of a function a source defined, the code of its frames, or
    the interpreter's object graph through `gc`) ends the run, which then reports that as its `error`.
    Third-party pytest plugins are not loaded."""
    if not isinstance(test_source, str) or not test_source.strip():
        raise PackageError("test_source: give the test module's source as a string")
    labels = list(variants)
    names = {f"v{_token(4)}": label for label in labels}
    while len(names) < len(labels):  # pragma: no cover - a 32-bit collision
        names[f"v{_token(4)}"] = labels[len(names)]
    order = sorted(names)  # random ids: their order says nothing about the label either
    with tempfile.TemporaryDirectory(prefix="tlw-suite-") as tmp:
        folder = Path(tmp)
        (folder / "test_suite.py").write_text(test_source)
        plugin = f"_tlw_plugin_{_token(4)}"
        (folder / f"{plugin}.py").write_text(_PLUGIN)
        result = folder / f"result-{_token(8)}.json"
        nonce = _token(16)
        spec = {"fixture": fixture, "nonce": nonce, "result": str(result), "suite": str(folder / "test_suite.py"),
                "variants": {ns: variants[names[ns]] for ns in order}}
        env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": os.pathsep.join([tmp, *filter(None, [os.environ.get("PYTHONPATH")])])}
        cmd = [sys.executable, "-m", "pytest", "-q", "--color=no", "-p", "no:cacheprovider", "-p", plugin, "--rootdir", tmp,
               "test_suite.py"]
        try:
            done = _run(cmd, input=json.dumps(spec) + "\n", capture_output=True, text=True, timeout=timeout,
                        cwd=tmp, env=env)
        except subprocess.TimeoutExpired:
            return SuiteRun((), {}, f"the test run took longer than {timeout:.0f} s and was stopped")
        output = (done.stdout + done.stderr)[-6000:]
        try:
            data = _loads(result.read_text())
        except (OSError, ValueError):
            data = None
    if done.returncode == PEEKED:
        return SuiteRun((), {}, "the suite looked inside an operator under test (its code object, its defaults, its "
                                "frames or the interpreter's object graph) instead of calling it: a test may tell the "
                                "operators apart only by what they compute", output=output)
    if not isinstance(data, dict) or data.get("nonce") != nonce:
        return SuiteRun((), {}, "the test run ended before pytest could report (a crash, or a test that "
                                "exited the process)", output=output)
    outcomes: dict[str, dict[str, str]] = {label: {} for label in labels}
    tests: list[str] = []
    messages: dict[str, dict[str, str]] = {label: {} for label in labels}
    shared: dict[str, str] = {}
    shared_said: dict[str, str] = {}
    for ns, name, outcome, message in data["rows"]:
        if name not in tests:
            tests.append(name)
        if ns is None:
            shared[name], shared_said[name] = outcome, message
        elif ns in names:
            outcomes[names[ns]][name] = outcome
            if message:
                messages[names[ns]][name] = message
    for label in labels:
        outcomes[label] = {**shared, **outcomes[label]}
        messages[label] = {**{k: v for k, v in shared_said.items() if v}, **messages[label]}
    error = None
    if data.get("exitstatus") in (2, 3, 4):
        error = "pytest could not collect or run the tests (an error while importing the test module?)"
    elif not tests:
        error = "pytest found no tests (test functions are named test_...)"
    return SuiteRun(tuple(tests), outcomes, error, messages, output)
