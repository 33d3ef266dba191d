"""The packaging lens: pip in a subprocess, what a library needs from the loader (C++ symbols of torch or none),
an install on the import path for a block, metadata through the build backend, and a pytest suite run against
several implementations of one operator."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys
from pathlib import Path

import pytest

from torchlens_widgets.lenses.package import (
    STABLE_TARGET_2_10,
    PackageError,
    compile_library,
    dynamic_symbols,
    installed,
    needed_libraries,
    operator_source,
    pip,
    project_metadata,
    run_suite,
    torch_cxx_symbols,
)

needs_cxx = pytest.mark.skipif(shutil.which("c++") is None or shutil.which("nm") is None, reason="no C++ toolchain")

_CALLER = """
#include <cstdint>
#include <string>
namespace c10::detail {
[[noreturn]] void torchCheckFail(const char* func, const char* file, uint32_t line, const std::string& msg);
}
extern "C" void fail_with(const char* m) { c10::detail::torchCheckFail("f", "f.cpp", 1, std::string(m)); }
"""


def test_pip_runs_this_interpreters_pip() -> None:
    done = pip("--version")
    assert done.returncode == 0 and "pip" in done.stdout


@needs_cxx
def test_compile_library_and_read_what_it_needs(tmp_path: Path) -> None:
    lib = compile_library(_CALLER, "caller", tmp_path, flags=["-D_GLIBCXX_USE_CXX11_ABI=1"])
    assert lib.is_file() and "libc10.so" in needed_libraries(lib)
    wanted = [s for s in dynamic_symbols(lib) if "torchCheckFail" in s]
    assert wanted == ["_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"]
    readable = dynamic_symbols(lib, demangle=True)
    assert any(s.startswith("c10::detail::torchCheckFail(char const*") for s in readable)
    assert "fail_with" in dynamic_symbols(lib, undefined=False)
    old = compile_library(_CALLER, "caller_old", tmp_path, flags=["-D_GLIBCXX_USE_CXX11_ABI=0"])
    assert [s for s in dynamic_symbols(old) if "torchCheckFail" in s] == ["_ZN3c106detail14torchCheckFailEPKcS2_jRKSs"]


@needs_cxx
def test_compile_errors_say_what_the_compiler_said(tmp_path: Path) -> None:
    with pytest.raises(PackageError, match="did not compile"):
        compile_library("int f() { return }", "broken", tmp_path, link_torch=False)


def test_reading_a_missing_library_is_a_package_error(tmp_path: Path) -> None:
    if shutil.which("readelf") is None:
        pytest.skip("no readelf")
    with pytest.raises(PackageError):
        needed_libraries(tmp_path / "nothing.so")


def _project(tmp_path: Path, deps: str, python: str = "") -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64", "torch==2.13.*"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "demo-op"\nversion = "1.2.0"\n{python}dependencies = {deps}\n')
    (tmp_path / "demo_op").mkdir()
    (tmp_path / "demo_op" / "__init__.py").write_text("")
    return tmp_path


def test_project_metadata_reads_requirements_and_what_they_admit(tmp_path: Path) -> None:
    project = _project(tmp_path, '["torch>=2.13,<2.14", "numpy"]', 'requires-python = ">=3.10"\n')
    meta = project_metadata(project, probe={"torch": ["2.13.1+cpu", "2.14.0"], "numpy": ["1.0"], "python": ["3.9", "3.12"]})
    assert (meta["name"], meta["version"]) == ("demo-op", "1.2.0")
    assert meta["requires_dist"] == ["torch<2.14,>=2.13", "numpy"]
    assert meta["admits"] == {"torch": {"2.13.1+cpu": True, "2.14.0": False}, "numpy": {"1.0": True}}
    assert meta["build_admits"] == {"torch": {"2.13.1+cpu": True, "2.14.0": False}, "numpy": None}
    assert meta["python_admits"] == {"3.9": False, "3.12": True}


def test_project_metadata_refuses_a_broken_project(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("this is not toml")
    with pytest.raises(PackageError, match="could not read"):
        project_metadata(tmp_path)


_VARIANT = """
lib = torch.library.Library(ns, "DEF")
lib.define("twice(Tensor x) -> Tensor")
lib.impl("twice", lambda x: {body}, "CPU")
op = getattr(torch.ops, ns).twice.default
"""
_SUITE = """
import torch

def test_values(op):
    x = torch.arange(4.0)
    assert torch.equal(op(x), 2 * x)

def test_shape(op):
    assert op(torch.ones(2, 3)).shape == (2, 3)

def test_without_the_op():
    assert True
"""


def test_run_suite_reports_each_test_on_each_variant() -> None:
    run = run_suite(_SUITE, {"right": _VARIANT.format(body="2 * x"), "wrong": _VARIANT.format(body="x + 1")})
    assert run.error is None, run.output
    assert set(run.tests) == {"test_values", "test_shape", "test_without_the_op"}
    assert run.passed("right") and run.failed("right") == []
    assert run.failed("wrong") == ["test_values"] and not run.passed("wrong")
    assert run.outcomes["wrong"]["test_without_the_op"] == "passed"   # a test without the fixture counts for all
    assert "assert" in run.messages["wrong"]["test_values"]
    # a suite that leaves the process early, or has no tests, reports that instead of passing
    early = run_suite("import os\nos._exit(0)\n", {"right": _VARIANT.format(body="2 * x")})
    assert early.error is not None and "ended before pytest could report" in early.error
    with pytest.raises(PackageError):
        run_suite("  ", {})


@needs_cxx
def test_torch_cxx_symbols_tell_an_ordinary_build_from_a_stable_one(tmp_path: Path) -> None:
    import torch

    include = f"-I{Path(torch.__file__).parent / 'include'}"
    ordinary = compile_library('#include <c10/util/Exception.h>\nvoid f() { TORCH_CHECK(false, "no"); }\n', "ordinary",
                               tmp_path, flags=[include])
    stable = compile_library('#include <torch/headeronly/util/Exception.h>\nvoid f() { STD_TORCH_CHECK(false, "no"); }\n',
                             "stable", tmp_path, flags=[include, STABLE_TARGET_2_10])
    assert [s for s in torch_cxx_symbols(ordinary) if s.startswith("c10::detail::torchCheckFail(")]
    assert torch_cxx_symbols(stable) == []
    with pytest.raises(PackageError, match="#error"):   # the target version shuts the non-stable headers out
        compile_library("#include <ATen/core/Tensor.h>\n", "aten", tmp_path, flags=[include, STABLE_TARGET_2_10])


def test_installed_puts_a_wheel_on_the_path_for_the_block_only(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "src" / "tlw_tiny").mkdir(parents=True)
    (project / "src" / "tlw_tiny" / "__init__.py").write_text("ANSWER = 42\n")
    (project / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = '
                                            '"setuptools.build_meta"\n[project]\nname = "tlw-tiny"\nversion = "1.0"\n')
    built = pip("wheel", "--no-build-isolation", "--no-deps", "--wheel-dir", str(tmp_path / "dist"), str(project))
    assert built.returncode == 0, built.stderr[-1000:]
    wheel = next((tmp_path / "dist").glob("*.whl"))
    before = (list(sys.path), os.environ.get("PYTHONPATH"))
    with installed(wheel, tmp_path / "site") as site:
        import tlw_tiny  # type: ignore[import-not-found]

        assert tlw_tiny.ANSWER == 42 and Path(tlw_tiny.__file__).parent.parent == site
        assert importlib.metadata.version("tlw-tiny") == "1.0" and str(site) in os.environ["PYTHONPATH"]
    assert (list(sys.path), os.environ.get("PYTHONPATH")) == before
    assert "tlw_tiny" not in sys.modules and not (tmp_path / "site").exists()
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("tlw-tiny")


def test_operator_source_makes_the_correct_operator_and_planted_bugs() -> None:
    run = run_suite("import torch\n\ndef test_values(op):\n    x, y = torch.ones(2), torch.ones(2)\n"
                    "    assert torch.equal(op(x, y, 2.0), 3 * torch.ones(2))\n",
                    {"correct": operator_source(), "minus": operator_source(kernel="a * load(x) - load(y)")})
    assert run.passed("correct") and run.failed("minus") == ["test_values"]
    assert "register_fake" not in operator_source(fake=False) and "register_autograd" in operator_source(fake=False)
