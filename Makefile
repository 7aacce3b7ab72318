# nesyseq: every target creates ./.venv (Python 3.11, pinned) on first use.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.nesyseq-installed

.PHONY: venv test test-fast quickstart bench clean-venv

$(STAMP): setup.cfg pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first and exactly, so no resolver can pull a CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c constraints.txt -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q --durations=30 tests

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" tests

quickstart: $(STAMP)
	$(VENV)/bin/nesyseq quickstart

bench: $(STAMP)
	$(PY) benchmarks/bench_tp_attention.py

clean-venv:
	rm -rf $(VENV)
