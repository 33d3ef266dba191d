"""The build lens: a real lean build of a TORCH_LIBRARY op (steps, headers, flags, cache hit on rebuild,
loaded into this process), compiler errors on the learner's own lines, a crash on load that leaves the
caller running, and bad input refused with advice."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from torchlens_widgets.lenses.build import (
    LEAN_HEADERS,
    BuildError,
    BuildReport,
    _map_errors,
    _ninja_steps,
    build_inline,
    load_built,
)

pytestmark = pytest.mark.skipif(shutil.which("c++") is None or shutil.which("ninja") is None,
                                reason="needs a C++ compiler and ninja")

SCALE = """
at::Tensor scale(const at::Tensor& x, double a) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "scale: x must be float32, got ", x.scalar_type());
  return x.mul(a);
}

TORCH_LIBRARY(tlw_build_test, m) {
  m.def("scale(Tensor x, float a) -> Tensor", &scale);
}
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("builds")


@pytest.fixture(scope="module")
def built(cache: Path) -> BuildReport:
    seen: list[tuple[str, float]] = []
    report = build_inline("tlw_scale", SCALE, directory=cache, on_progress=lambda what, s: seen.append((what, s)))
    assert seen and seen[-1][1] > seen[0][1], "progress is reported while the build runs"
    assert any(what == "step 1 of 2: compiling main.cpp" for what, _ in seen), seen
    return report


def test_lean_build_reports_its_steps_headers_and_flags(built: BuildReport) -> None:
    assert built.ok and built.cache == "miss", built.summary()
    assert [s.phase for s in built.steps] == ["compile", "link"]
    assert built.compile_seconds == built.steps[0].seconds  # the property notebook 09 compares builds with
    assert all(s.seconds > 0 for s in built.steps)
    assert built.includes[: len(LEAN_HEADERS)] == LEAN_HEADERS and "torch/extension.h" not in built.includes
    assert built.header_files > 50 and built.header_bytes > 1_000_000
    groups = {g.group for g in built.header_groups}
    assert {"ATen", "c10"} <= groups and "pybind11" not in groups and "Python.h" not in groups
    assert any(f.startswith("-std=") for f in built.flags)
    assert "cache miss" in built.summary() and "headers read" in built.summary()


def test_rebuild_is_a_cache_hit_and_loading_registers_the_op(built: BuildReport, cache: Path) -> None:
    again = build_inline("tlw_scale", SCALE, directory=cache)
    assert again.ok and again.cache == "hit" and not again.steps and again.library == built.library
    load_built(again)
    out = torch.ops.tlw_build_test.scale(torch.ones(3), 2.5)
    assert torch.equal(out, torch.full((3,), 2.5))
    with pytest.raises(RuntimeError, match="must be float32"):
        torch.ops.tlw_build_test.scale(torch.ones(3, dtype=torch.int64), 2.0)


def test_compile_errors_are_the_learner_s_lines(cache: Path) -> None:
    bad = "at::Tensor twice(const at::Tensor& x) {\n  return x * 2\n}\n"  # missing ';' on line 2
    report = build_inline("tlw_broken", bad, directory=cache)
    assert not report.ok and report.library is None
    first = report.errors[0]
    assert first.line in (2, 3) and first.kind == "error", report.errors
    assert first.code == bad.splitlines()[first.line - 1]
    assert "build failed" in report.summary() and f"line {first.line}" in report.summary()
    with pytest.raises(BuildError, match="did not build"):
        load_built(report)


def test_a_library_that_crashes_on_load_leaves_the_caller_running(cache: Path) -> None:
    crash = "#include <cstdlib>\nstatic int boom = (std::abort(), 0);\n"
    with pytest.raises(BuildError, match="kernel is unharmed") as info:
        build_inline("tlw_crash", crash, directory=cache)
    assert info.value.report is not None and info.value.report.steps  # it compiled; loading crashed


def test_a_build_past_its_timeout_is_stopped(cache: Path) -> None:
    with pytest.raises(BuildError, match="ran past 1 s"):
        build_inline("tlw_slow", SCALE.replace("tlw_build_test", "tlw_slow_ns"), directory=cache, timeout=1)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"name": "1bad"}, "C identifier"),
    ({"name": "a-b"}, "C identifier"),
    ({"source": "  "}, "C\\+\\+ code as a string"),
    ({"headers": "ATen/ATen.h"}, "list of header names"),
    ({"timeout": 0}, "seconds a build may take"),
])
def test_bad_input_is_refused_with_advice(kwargs: dict, match: str, cache: Path) -> None:
    args = {"name": "ok_name", "source": SCALE, "directory": cache} | kwargs
    with pytest.raises(BuildError, match=match):
        build_inline(**args)


def test_load_built_refuses_what_is_not_a_report() -> None:
    with pytest.raises(BuildError, match="BuildReport"):
        load_built("lib.so")  # type: ignore[arg-type]


def test_error_mapping_and_ninja_log_reading(tmp_path: Path) -> None:
    source = "int f() {\n  return x;\n}\n"
    main = tmp_path / "main.cpp"
    main.write_text("#include <a.h>\n#include <b.h>\n" + source)
    stderr = (f"{main}:4:10: error: 'x' was not declared in this scope\n"
              f"/usr/include/other.h:1:1: error: elsewhere\n{main}:1:1: warning: in the prelude\n")
    (err,) = _map_errors(stderr, source, main)
    assert (err.line, err.column, err.kind, err.code) == (2, 10, "error", "  return x;")
    (tmp_path / "main.o").write_bytes(b"")
    (tmp_path / "lib.so").write_bytes(b"")
    (tmp_path / ".ninja_log").write_text("# ninja log v5\n0\t7000\t0\tmain.o\tabc\n7000\t7400\t0\tlib.so\tdef\n")
    steps = _ninja_steps(tmp_path, since=0)
    assert [(s.phase, s.output, s.seconds) for s in steps] == [("compile", "main.o", 7.0), ("link", "lib.so", 0.4)]


def test_the_test_run_builds_in_a_throwaway_cache() -> None:
    from torchlens_widgets.lenses.build import build_dir

    assert not str(build_dir()).startswith(str(Path.home() / ".cache")), build_dir()


def test_progress_is_read_from_the_build_folder_not_from_ninja_s_late_output(tmp_path: Path) -> None:
    from torchlens_widgets.lenses.build import _phase

    assert _phase(tmp_path, 0.0) == "starting the compiler"
    (tmp_path / "build.ninja").write_text("rule compile\nrule link\n"
                                          f"build main.o: compile {tmp_path}/main.cpp\nbuild lib.so: link main.o\n")
    (tmp_path / "main.o").write_text("from an earlier build")
    since = (tmp_path / "main.o").stat().st_mtime + 1
    assert _phase(tmp_path, since) == "step 1 of 2: compiling main.cpp"  # a stale object is not progress
    import os
    os.utime(tmp_path / "main.o", (since + 1, since + 1))
    assert _phase(tmp_path, since) == "step 2 of 2: linking the library"
    (tmp_path / "lib.so").write_text("")
    os.utime(tmp_path / "lib.so", (since + 2, since + 2))
    assert _phase(tmp_path, since) == "loading the library"


def test_the_cache_key_holds_the_interpreter_and_the_torch_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two venvs sharing ~/.cache: the same source and flags get two folders (their include paths differ)."""
    from torchlens_widgets.lenses import build as build_lens

    here = build_lens._key("op", ["int x;"], ["-O2"], False)
    assert here == build_lens._key("op", ["int x;"], ["-O2"], False)
    monkeypatch.setattr(build_lens.sys, "executable", "/elsewhere/.venv/bin/python")
    assert build_lens._key("op", ["int x;"], ["-O2"], False) != here
    monkeypatch.undo()
    import torch

    monkeypatch.setattr(torch, "__file__", "/elsewhere/site-packages/torch/__init__.py")
    assert build_lens._key("op", ["int x;"], ["-O2"], False) != here
