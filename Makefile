# `make demo` and `make test` work on a fresh machine: each creates (or reuses) .venv.
VENV ?= .venv
PY := $(VENV)/bin/python
# torch is pinned: pip takes the CPU build from this machine's disk.
EXTRAS ?= torch,dev

.PHONY: setup demo test test-fast test-slow lint bench

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	rm -rf runs/example
	$(PY) examples/torch_loop.py runs/example
	$(VENV)/bin/ft-verify runs/example

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

test-slow: setup
	$(PY) -m pytest -q -m slow

test: lint test-fast test-slow

bench: setup
	$(PY) benchmarks/eventlog_bench.py
