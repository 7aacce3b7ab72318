# nesyseq: every target creates ./.venv (Python 3.11, pinned) on first use.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.nesyseq-installed
# the installer of make venv, not a dependency (constraints.txt does not list it)
UV_VERSION := 0.13.9
QUIET  := $(VENV)/.nesyseq-quiet

# Python writes the bytecode of what it imports on first use (pip installs with --no-compile): a
# PYTHONDONTWRITEBYTECODE set in the environment would make every process compile torch and
# fairseq again (about 6 s each), so make's commands run without it.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: venv test test-fast static coverage test-gpu gpu-wheels quickstart bench clean-venv

$(STAMP): setup.cfg setup.py pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first and exactly, so no resolver can pull a CUDA build.
	$(PIP) install -q --no-compile torch==2.13.0
	# The rest with uv (PyPI's uv installs the same pins about 4x faster: 48 s -> 15 s of the setup
	# here); pip where uv cannot be had or fails.  torch stays the one installed above.
	@if $(PIP) install -q uv==$(UV_VERSION) >/dev/null 2>&1 && \
		$(VENV)/bin/uv pip install -q --python $(PY) -c constraints.txt -e '.[test]'; then :; \
	else echo "uv not available: installing with pip"; $(PIP) install -q --no-compile -c constraints.txt -e '.[test]'; fi
	@$(PY) -c "import importlib.metadata as m, sys; v = m.version('torch'); v.endswith('+cpu') or sys.exit(f'.venv: torch {v} is not the CPU build (make clean-venv, then make venv)')"
	@touch $(STAMP)

# Quiet by default: fairseq logs "Please install tensorboardX" while it is imported, before any
# plugin loads; this .pth runs nesyseq/common/quiet.py at interpreter start (NESYSEQ_WARNINGS=all: off).
# The suite's fork server (tests/forkserver.py) needs a hook at interpreter start too; it does
# nothing unless the test run sets NESYSEQ_TEST_FORKSERVER_SOCK.
$(QUIET): $(STAMP) Makefile
	@printf '%s\n' 'import os, runpy; p = "$(CURDIR)/nesyseq/common/quiet.py"; os.path.isfile(p) and runpy.run_path(p, run_name="nesyseq_quiet_startup")' \
		> "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nesyseq-quiet.pth"
	@printf '%s\n' 'import os, runpy; p = "$(CURDIR)/tests/forkserver.py"; os.environ.get("NESYSEQ_TEST_FORKSERVER_SOCK") and os.path.isfile(p) and runpy.run_path(p, run_name="nesyseq_forkserver_startup")' \
		> "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nesyseq-test-forkserver.pth"
	@touch $(QUIET)

venv: $(QUIET)

# Three workers on two cores (pytest-xdist): a worker waiting on a SLURM job or a child process
# leaves its core to the others (2 workers: 573 s, 3: 486 s, same tree); tests/conftest.py groups
# tests that share a fixture on one worker.
PYTEST_PAR := -n 3 --dist loadgroup

# test_slurm.py's session fixture starts one local SLURM cluster: its group keeps the file on one
# worker (tests/conftest.py fails the run if xdist cannot group, e.g. under pytest >= 9.2)
# The static check (one core) runs beside pytest and prints when both are done; either failing fails.
# Before pytest, one process imports what every worker and fork server imports, so a fresh venv's
# bytecode is written once rather than compiled by six processes at the same time.
WARM_IMPORTS := torch, torch._dynamo, fairseq, fairseq_cli.train, fairseq_cli.generate, nesyseq.user_dir, \
	nesyseq.cli.main, matplotlib.pyplot, submitit, sympy, pytest, xdist
test: $(QUIET)
	@$(PY) tools/static_check.py > $(VENV)/static-check.log 2>&1 & st=$$!; \
	$(PY) -c "import $(WARM_IMPORTS)" > /dev/null 2>&1 || echo "make test: warming the imports failed (pytest will say why)"; \
	$(PY) -m pytest -q $(PYTEST_PAR) --durations=30 tests; rc=$$?; \
	wait $$st; src=$$?; cat $(VENV)/static-check.log; \
	if [ $$src -ne 0 ]; then echo "make test: the static check failed (above)" >&2; exit 1; fi; exit $$rc

# mypy over the product folders, failing on the errors that mean a line would crash (undefined
# attribute or name, wrong call arguments, calling None): tools/static_check.py, docs/testing.md
static: $(QUIET)
	$(PY) tools/static_check.py

# The CPU suite under coverage.py (xdist workers, the fork server's children and subprocesses
# included): per-folder statements never executed, and device-dependent lines outside the
# GPU-only list (tools/gpu_only.py).  Not part of make test (about twice its time).
coverage: $(QUIET)
	$(PY) tools/coverage_report.py run

test-fast: $(QUIET)
	$(PY) -m pytest -q $(PYTEST_PAR) -m "not slow" tests

# The GPU lane (docs/testing.md).  gpu-wheels: on a machine with network, fill .whl/ with
# the cp312 manylinux wheels of our pins (less torch/triton/CUDA).  test-gpu: on the GPU
# machine (no network, no .venv): GPU_PYTHON is its interpreter with torch and triton.
GPU_PYTHON ?= /opt/torch/.venv/bin/python

gpu-wheels:
	python3 tools/gpu_lane.py wheels

# --budget 480: the whole lane, wheel install included, in 8 minutes; steps that no longer fit
# are skipped and listed in the summary (GPU_LANE_FLAGS= for no budget)
GPU_LANE_FLAGS ?= --budget 480
test-gpu:
	$(GPU_PYTHON) tools/gpu_lane.py run --python $(GPU_PYTHON) $(GPU_LANE_FLAGS)

quickstart: $(QUIET)
	$(VENV)/bin/nesyseq quickstart

bench: $(QUIET)
	$(PY) benchmarks/bench_tp_attention.py

clean-venv:
	rm -rf $(VENV)
