"""Hostile and unusual inputs to the lenses of notebooks 09-20 (tests/fuzzing.py rules): a true result or the
lens's own error with advice, no crash, and nothing left running or on disk."""

from __future__ import annotations

import os
import re
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from tests.fuzzing import in_subprocess, outcome
from tests.lenses.leaks import LeakCheck, nothing_left_behind
from torchlens_widgets.lenses import zygote
from torchlens_widgets.lenses.build import BuildError, build_inline
from torchlens_widgets.lenses.contract import contract_matrix
from torchlens_widgets.lenses.dispatch_table import DispatchTableError, dispatch_table
from torchlens_widgets.lenses.distributed import DistributedError, run_ranks
from torchlens_widgets.lenses.profile import ProfileError, record_profile


def test_nested_profiles_are_refused_and_the_kernel_lives() -> None:
    out = in_subprocess("""
        import torch
        from torchlens_widgets.lenses.profile import ProfileError, record_profile
        def inner():
            return torch.ones(8) * 2
        try:
            record_profile(lambda: record_profile(inner))
        except ProfileError as exc:
            print("refused:", exc)
        print("alive", len(record_profile(inner).events) > 0)
    """)
    assert "refused: record_profile was called while a profiler is already recording" in out and "alive True" in out


def test_saving_a_profile_over_a_folder_is_refused(tmp_path: Path) -> None:
    err = outcome(lambda: record_profile(lambda: torch.ones(2) + 1, save=tmp_path), ProfileError)
    assert isinstance(err, ProfileError) and "is a folder" in str(err) and tmp_path.is_dir()
    err = outcome(lambda: record_profile(lambda: torch.ones(2) + 1, save=tmp_path / "no" / "t.json"), ProfileError)
    assert isinstance(err, ProfileError) and "does not exist" in str(err)


def test_a_contract_with_nothing_compared_does_not_pass() -> None:
    def reference(x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("the reference cannot run")

    report = outcome(lambda: contract_matrix(torch.relu, reference, (torch.randn(3, 4),), opcheck=False), Exception)
    assert report.compared == 0 and not report.passed
    assert "nothing was compared" in report.summary()


@pytest.mark.parametrize("name", ["aten::add\x00.Tensor", "aten::add.Tensor; rm -rf", "aten:: add", "/etc/passwd::x"])
def test_operator_names_that_are_not_names_are_refused(name: str) -> None:
    err = outcome(lambda: dispatch_table(name), DispatchTableError)
    assert isinstance(err, DispatchTableError), f"{name!r} gave a table"


_OP = 'at::Tensor f(const at::Tensor& x) { return x.clone(); }\nTORCH_LIBRARY(fuzz_flags, m) { m.def("f(Tensor x) -> Tensor", &f); }\n'


def test_cflags_as_one_string_are_split_like_a_shell_would(tmp_path: Path) -> None:
    report = build_inline("fuzz_flags", _OP, extra_cflags="-O1 -DFUZZ_FLAG=1", directory=tmp_path)
    assert report.ok and "-O1" in report.flags and "-DFUZZ_FLAG=1" in report.flags
    err = outcome(lambda: build_inline("fuzz_flags", _OP, extra_cflags=[1, 2], directory=tmp_path), BuildError)
    assert isinstance(err, BuildError) and "list of strings" in str(err)


def _compilers() -> set[int]:
    return {p for p in zygote.descendants(os.getpid()) if "cc1plus" in _cmd(p) or " ninja" in f" {_cmd(p)}"}


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads processes from /proc")
def test_a_build_stopped_at_its_timeout_leaves_no_compiler_and_no_temp_file(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    slow = "#include <torch/extension.h>\n" + _OP.replace("fuzz_flags", "fuzz_slow")  # the full header: ~30 s here
    t0 = time.monotonic()
    err = outcome(lambda: build_inline("fuzz_slow", slow, headers=None, directory=tmp_path / "b", timeout=3),
                  BuildError)
    assert isinstance(err, BuildError) and "ran past 3 s" in str(err) and time.monotonic() - t0 < 9
    time.sleep(0.5)
    assert _compilers() == set(), "a compiler outlived its build"
    assert list((tmp_path / "tmp").iterdir()) in ([], [tmp_path / "tmp" / "torchinductor_root"]), \
        list((tmp_path / "tmp").iterdir())


def test_a_probe_that_forks_leaves_nothing_running(tmp_path: Path) -> None:
    probe = "import subprocess\nsubprocess.Popen(['sleep', '876543'])\n"
    report = build_inline("fuzz_probe", _OP.replace("fuzz_flags", "fuzz_probe"), directory=tmp_path, probe=probe)
    assert report.ok
    time.sleep(0.3)
    assert not [p for p in Path("/proc").glob("[0-9]*") if "876543" in _cmd(int(p.name))]


_CRASHY = textwrap.dedent("""
    import ctypes

    import torch
    import torch.distributed as dist


    def crash_step(rec):
        if rec.rank == 1:
            ctypes.string_at(0)  # a segmentation fault
        dist.all_reduce(torch.ones(4))
""")


def test_a_rank_that_crashes_is_named_with_its_signal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "crashy_steps.py").write_text(_CRASHY)
    monkeypatch.syspath_prepend(str(tmp_path))
    err = outcome(lambda: run_ranks("crashy_steps:crash_step", world_size=2, timeout=20), DistributedError)
    assert isinstance(err, DistributedError), err
    assert "rank 1 crashed" in str(err) and "SIGSEGV" in str(err), str(err)
    assert f"({int(signal.SIGSEGV)})" in str(err) and sys.platform.startswith("linux")


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), "10", None, True, -1, 0])
def test_run_ranks_refuses_timeouts_that_are_not_seconds(timeout: object) -> None:
    err = outcome(lambda: run_ranks("torchlens_widgets.lenses.distributed_scenarios:ddp_step", timeout=timeout),
                  ValueError)
    assert isinstance(err, ValueError) and "positive, finite number" in str(err)


@pytest.mark.parametrize("trace", [[1, 2], "ranks", {"ranks": []}, {"kind": "ddp"}, 3],
                         ids=["list", "str", "no-rank", "no-ranks-key", "int"])
def test_show_ranks_of_something_else_says_what_it_takes(trace: object) -> None:
    from torchlens_widgets.widgets.distributed import show_ranks

    err = outcome(lambda: show_ranks(trace), (TypeError, ValueError))
    assert isinstance(err, (TypeError, ValueError)) and "run_ranks" in str(err)


@pytest.mark.parametrize("fixture", ["ddp_trace", "fsdp_trace"])
@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), "12", True], ids=str)
def test_show_ranks_names_a_time_that_is_not_a_finite_number(fixture: str, value: object) -> None:
    """An edited trace with an infinite start once wrote ="inf" into the SVG (and -inf raised OverflowError)."""
    import json

    from torchlens_widgets.widgets.distributed import show_ranks

    trace = json.loads((Path(__file__).parents[1] / "fixtures" / "distributed" / f"{fixture}.json").read_text())
    trace["ranks"][0]["iterations"][0]["start"] = value
    err = outcome(lambda: show_ranks(trace).static_svg(), (ValueError,))
    assert isinstance(err, ValueError) and "iterations[0]: start is" in str(err) and "run_ranks" in str(err)


def test_probe_values_names_nan_and_refuses_numbers_past_float64() -> None:
    from torchlens_widgets.lenses.autocast import AutocastError, probe_values

    (nan,) = outcome(lambda: probe_values([float("nan")], torch.float16), AutocastError)
    assert nan.outcome == "not a number" and nan.relative_error == 0.0
    err = outcome(lambda: probe_values([10**400], torch.bfloat16), AutocastError)
    assert isinstance(err, AutocastError) and "fit a float64" in str(err)


def test_a_build_folder_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    err = outcome(lambda: build_inline("fuzz_dir", _OP.replace("fuzz_flags", "fuzz_dir"), directory=tmp_path / "file"),
                  BuildError)
    assert isinstance(err, BuildError) and "cannot make the build folder" in str(err)


def test_a_megabyte_of_source_builds_without_a_command_line_limit(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(zygote.ENV_OFF, "0")  # a plain `python -c` child: where the source once went on its command line
    big = "// " + "x" * 1_000_000 + "\n" + _OP.replace("fuzz_flags", "fuzz_big")
    report = build_inline("fuzz_big", big, directory=tmp_path, timeout=120)  # a real compile: past fuzzing's 10 s
    assert report.ok, report.log_tail


def test_an_expandable_segment_past_its_reservation_is_a_simulated_oom() -> None:
    from torchlens_widgets.lenses.allocator import AllocatorError, CachingAllocatorSim, SimulatedOOM

    sim = CachingAllocatorSim(expandable_segments=True)
    err = outcome(lambda: sim.malloc(10**15), (SimulatedOOM, AllocatorError))
    assert isinstance(err, SimulatedOOM) and "virtual reservation" in str(err)
    sim.free(sim.malloc(1000))  # the simulator goes on


def test_a_probe_of_many_values_shows_a_bounded_picture_and_counts_the_rest() -> None:
    """show_probe of 10^6 values once wrote a 147 MB output in 40 s: the picture shows the first rows and counts
    the others by outcome."""
    from torchlens_widgets.render.autocast import MAX_PROBE_ROWS
    from torchlens_widgets.widgets.autocast import show_probe

    values = [1.0 + 2.0**-10] * 50_000 + [1e9] * 50_000  # exact in float16 (10 stored bits); then past its max
    bundle = show_probe(values, torch.float16)._repr_mimebundle_()
    # the HTML is the portable form (inline styles a sanitizer keeps, ~0.7 KB a row): bounded, not 147 MB
    assert all(len(text) < 250_000 for text in bundle.values()), {k: len(v) for k, v in bundle.items()}
    assert bundle["text/html"].count('style="display:table-row"') == MAX_PROBE_ROWS + 1  # the header and rows shown
    last = bundle["text/plain"].splitlines()[-1]
    assert f"of {len(values):,} values are shown" in last and "50,000 overflow" in last and "49,800" in last, last


def test_a_profile_with_odd_thread_ids_or_many_threads_loads() -> None:
    """A pid/tid that is a list or dict (unhashable) once raised a bare TypeError; 40,000 threads took 39 s to load
    (lanes were ordered by a quadratic search)."""
    from torchlens_widgets.lenses.profile import load_profile

    odd = load_profile({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": [1], "tid": {"x": 1},
                                         "ts": 0, "dur": 1},
                                        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]})
    assert [e.name for e in odd.events] == ["b"] and "pid/tid that is not a number" in odd.notes[0]
    start = time.monotonic()
    wide = load_profile({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": i, "ts": i,
                                          "dur": 1} for i in range(40_000)]})
    assert len(wide.threads) == 40_000 and [t.tid for t in wide.threads[:3]] == [0, 1, 2]
    assert time.monotonic() - start < 10, "the fuzz rule: a lens answers within 10 s"


def test_an_autocast_probe_never_copies_a_huge_expanded_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe copies the call's inputs, and a copy of an expanded tensor is dense: a 1-element tensor expanded to
    16384 x 16384 once made the probe allocate a gigabyte per try. Past PROBE_MAX_BYTES the call is "not probed"."""
    from torchlens_widgets.lenses import autocast as lens
    from torchlens_widgets.render.autocast import autocast_html

    copied: list[int] = []
    real = lens._with_floats

    def watched(args: object, kwargs: object, dtypes: object) -> object:
        copied.append(lens._probe_bytes(args, kwargs))
        return real(args, kwargs, dtypes)  # type: ignore[arg-type]

    monkeypatch.setattr(lens, "_with_floats", watched)
    huge = torch.ones(1).expand(16384, 16384)
    trace = lens.autocast_trace(lambda t: t.sum(), huge)
    assert [c.policy for c in trace.calls] == ["not probed"] and copied == []
    assert "not probed: inputs too big" in autocast_html(trace.to_dict())
    small = lens.autocast_trace(lambda t: t.sum(), torch.ones(1).expand(64, 64))
    assert [c.policy for c in small.calls] == ["unlisted"] and copied and max(copied) <= lens.PROBE_MAX_BYTES


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_dispatch_scenarios_of_quantized_and_nested_inputs_leave_out_only_the_meta_state() -> None:
    """A quantized or strided nested tensor has no meta copy: scenarios once raised torch's NotImplementedError."""
    from torchlens_widgets.lenses.dispatch_table import scenarios

    quantized = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.quint8)
    nested = torch.nested.nested_tensor([torch.randn(2), torch.randn(3)])
    for x in (quantized, nested):
        states = [name for name, _ in scenarios("aten::add.Tensor", x, x)]
        assert states[0] == "as given" and "meta tensors" not in states and len(states) == 5, states
    assert [n for n, _ in scenarios("aten::add.Tensor", torch.ones(2), torch.ones(2))][-1] == "meta tensors"


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_contract_of_a_sparse_or_quantized_example_says_to_pass_dense_tensors() -> None:
    """A sparse example once raised torch's 'Cannot access storage of SparseTensorImpl'."""
    from torchlens_widgets.lenses.contract import ContractError

    for x in (torch.randn(4, 4).to_sparse(), torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.quint8),
              torch.randn(4, 4).to_sparse_csr()):
        err = outcome(lambda x=x: contract_matrix(lambda a: a * 2, lambda a: a * 2, [x]), (ContractError,))
        assert isinstance(err, ContractError) and "dense" in str(err), err


def test_a_pickle_memo_bomb_is_refused_quickly() -> None:
    """One list referenced 3000 times, each holding one dict 3000 times: 12 KB of pickle that kept load_snapshot
    busy for 99 s. No snapshot torch writes shares its lists."""
    import pickle

    from torchlens_widgets.lenses.memory import SnapshotError, load_snapshot

    row = [{"size": 1, "address": 0}] * 3000
    bomb = pickle.dumps({"segments": [{"address": 0, "total_size": 10, "blocks": row}] * 3000, "device_traces": [[]]})
    start = time.monotonic()
    err = outcome(lambda: load_snapshot(bomb), (SnapshotError,))
    assert isinstance(err, SnapshotError) and "crafted" in str(err) and time.monotonic() - start < 10


def test_fusion_of_empty_inputs_keeps_them_apart_and_odd_tensors_are_refused() -> None:
    """Two empty inputs once shared one label (their storages both sit at address 0), so `a + b` read `a` twice and
    "wrote a in place"; a sparse or Tensor-subclass input raised torch's own error."""
    from torch.testing._internal.two_tensor import TwoTensor

    from torchlens_widgets.lenses.fusion import FusionError, eager_traffic

    t = eager_traffic(lambda a, b: a + b, torch.empty(0), torch.empty(0))
    assert (t.inputs, t.outputs, t.kernels[0].reads, t.kernels[0].writes) == (
        ("a", "b"), ("out",), (("a", 0), ("b", 0)), (("out", 0),))
    for x, says in ((torch.randn(4, 4).to_sparse(), "to_dense()"), (TwoTensor(torch.ones(2), torch.ones(2)), "subclass")):
        err = outcome(lambda x=x: eager_traffic(lambda a: a * 2, x), (FusionError,))
        assert isinstance(err, FusionError) and says in str(err), err


def test_a_custom_operator_is_named_as_opaque_not_as_aten() -> None:
    """A two-pass custom op was counted as one aten kernel moving 3 tensors (eager named it aten.two_pass): it is
    named with its namespace and listed as opaque, and the picture says its own passes are not seen."""
    import torch.nn.functional as F

    from torchlens_widgets.lenses.fusion import eager_traffic, fused_traffic
    from torchlens_widgets.render.fusion import traffic_html, traffic_text

    @torch.library.custom_op("tlwfuzz::two_pass", mutates_args=())
    def two_pass(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.gelu(u).mul_(v)

    two_pass.register_fake(lambda u, v: torch.empty_like(u))
    u, v = torch.randn(16, 16), torch.randn(16, 16)
    eager = eager_traffic(lambda a, b: two_pass(a, b), u, v)
    assert [k.name for k in eager.kernels] == ["tlwfuzz.two_pass"] and eager.opaque == ("tlwfuzz.two_pass",)
    assert "passes its own code makes over memory are not seen" in traffic_html(eager.to_dict())
    assert "its own passes are not seen" in traffic_text(eager.to_dict())
    assert eager_traffic(lambda a, b: a * b + 1, u, v).opaque == ()
    fused = fused_traffic(lambda a, b: two_pass(a, b) + 1, u, v)
    assert fused.opaque == ("torch.ops.tlwfuzz.two_pass.default",), [k.name for k in fused.kernels]


def _halve_in_a_loop(x: torch.Tensor) -> torch.Tensor:
    for _ in range(3):
        if x.sum() > 50:  # a graph break inside a loop: Dynamo skips the whole frame
            break
        x = x / 2
    return x


def test_a_skipped_frame_is_in_the_picture_not_only_in_the_data() -> None:
    """compile_trace once said "0 graphs, 0 breaks" for a frame Dynamo skipped; the lens now records the skip and
    the picture and the text say it, with the line and Dynamo's reason."""
    from torchlens_widgets.lenses.compile_trace import compile_trace
    from torchlens_widgets.render.compile_trace import compile_html, compile_text

    torch._dynamo.reset()
    d = compile_trace(_halve_in_a_loop, torch.randn(8)).to_dict()
    assert not d["graphs"] and d["skipped"], d["skipped"]
    html, text = compile_html(d), compile_text(d)
    assert "frame <code>_halve_in_a_loop</code> skipped: it runs eagerly, whole (it stopped at line" in html
    assert "frame skipped: nothing compiled" in html and "no graph breaks" not in html  # not a clean compile
    assert "x.sum() &gt; 50" in html and "for/while loop" in html
    assert "frame _halve_in_a_loop skipped (runs eagerly, whole) at line" in text


def test_the_leak_check_names_each_process_and_temp_file_a_case_leaves(tmp_path: Path, nothing_left: LeakCheck) -> None:
    """The per-case rule "nothing left running or on disk" (tests/lenses/conftest.py) can fail: a child left
    running, a detached grandchild and files in TMPDIR are each named (pid and command line, or path) and removed,
    so the suite goes on clean; what a case cleans up, and what lasts by design, passes."""
    import subprocess
    import tempfile

    assert nothing_left is not None and Path(tempfile.gettempdir()) == nothing_left.folder  # itself under the check
    with pytest.raises(pytest.fail.Exception) as failed, nothing_left_behind(tmp_path / "leaky", grace=0.3) as check:
        child = subprocess.Popen(["sleep", "765432"])
        subprocess.run(["sh", "-c", "sleep 765433 &"], check=True)  # detached: its shell exits at once
        fd, name = tempfile.mkstemp(prefix="leaked-")
        os.close(fd)
        (Path(tempfile.gettempdir()) / "scratch").mkdir()
    message = str(failed.value)
    assert f"process {child.pid} left running: sleep 765432" in message, message
    assert re.search(r"process \d+ left running: sleep 765433", message), message
    assert f"temp file left: {name}" in message and f"temp file left: {tmp_path / 'leaky' / 'scratch'}" in message
    assert child.wait(5) == -signal.SIGKILL and list((tmp_path / "leaky").iterdir()) == [check.keep]  # Inductor's cache
    with nothing_left_behind(tmp_path / "clean", grace=0.3):
        done = subprocess.Popen(["sleep", "0.05"])  # exits within the grace: not a leak
        lasting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",  # as Inductor's workers
                                    "torch/_inductor/compile_worker/__main__.py"])
        with tempfile.TemporaryDirectory():
            pass
    lasting.kill()
    assert lasting.wait(5) == -signal.SIGKILL and done.wait(5) == 0


def test_reading_a_project_s_metadata_leaves_nothing_in_tmpdir(tmp_path: Path, nothing_left: LeakCheck) -> None:
    """project_metadata's subprocess once left setuptools' metadata folder (a tmpXXXX with a .dist-info) in TMPDIR
    on every call, a broken project or not: notebook 19's checks call it once per try."""
    from torchlens_widgets.lenses.package import PackageError, project_metadata

    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = '
                                             '"setuptools.build_meta"\n\n[project]\nname = "leak-op"\nversion = "1.0"\n')
    (tmp_path / "leak_op").mkdir()
    (tmp_path / "leak_op" / "__init__.py").write_text("")
    assert project_metadata(tmp_path)["name"] == "leak-op"
    (tmp_path / "setup.py").write_text("raise SystemExit('setup.py refuses')")  # the backend fails midway
    with pytest.raises(PackageError, match="could not read"):
        project_metadata(tmp_path)
    assert [p for p in nothing_left.folder.iterdir() if p != nothing_left.keep] == []  # this case's own TMPDIR


def _fake_cxx(tmp_path: Path, body: str) -> str:
    """A stand-in for c++ (sh): `body` runs with the output path in $out (the argument after -o)."""
    script = tmp_path / "fake-c++"
    script.write_text("#!/bin/sh\nout=''\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n" + body)
    script.chmod(0o755)
    return str(script)


def test_precompiling_keeps_the_compiler_s_temp_files_out_of_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    nothing_left: LeakCheck) -> None:
    """GCC writes a cc*.s into $TMPDIR while it precompiles the lean headers (~20 s, in a detached job that outlives
    the build that started it): it went into the caller's TMPDIR, and stayed there when the job was killed."""
    from torchlens_widgets.lenses import precompiled as pch
    from torchlens_widgets.lenses.build import LEAN_HEADERS

    seen = tmp_path / "seen"
    monkeypatch.setenv("CXX", _fake_cxx(tmp_path, f'echo "$TMPDIR" > {seen}\nmktemp "$TMPDIR/ccXXXXXX.s"\n'
                                                   'echo state > "$out"\n'))  # its .s left, as by a killed GCC
    pch.generate(tmp_path / "slot", ["-O2"], LEAN_HEADERS)
    used = Path(seen.read_text().strip())
    assert used.parent == tmp_path / "slot" and not used.exists() and pch.usable(tmp_path / "slot")
    assert [p for p in nothing_left.folder.iterdir() if p != nothing_left.keep] == []  # this case's own TMPDIR


def test_precompiling_stopped_at_its_timeout_leaves_no_compiler_running(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiler driver runs cc1plus as its child: a timeout once killed the driver alone, and cc1plus ran on."""
    from torchlens_widgets.lenses import precompiled as pch
    from torchlens_widgets.lenses.build import LEAN_HEADERS

    monkeypatch.setenv("CXX", _fake_cxx(tmp_path, "sleep 654321 &\nwait\n"))  # a driver waiting for its compiler
    t0 = time.monotonic()
    with pytest.raises(pch.PrecompileError, match="ran past 1 s and was stopped"):
        pch.generate(tmp_path / "slot", ["-O2"], LEAN_HEADERS, timeout=1)
    assert time.monotonic() - t0 < 5 and not pch.being_made(tmp_path / "slot")
    time.sleep(0.2)
    assert not [p for p in zygote.descendants(os.getpid()) if "654321" in _cmd(p)], "the compiler outlived its timeout"
