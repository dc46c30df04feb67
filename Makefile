# `make demo` and `make test` work on a fresh machine: each creates (or reuses) .venv.
VENV ?= .venv
PY := $(VENV)/bin/python
# torch is pinned in pyproject.toml: pip takes the CPU build from this machine's disk.
EXTRAS ?= torch,ray,megatron,hf,lightning,torchdata,dev

.PHONY: setup browser demo test test-fast test-slow lint bench

$(VENV)/.installed: pyproject.toml setup.py src/ftaudit/eventlog/hotpath.c
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

setup: $(VENV)/.installed

# Debian's chromium, for the HTML report tests (a no-op once installed).
browser:
	scripts/install_chromium.sh

demo: setup
	rm -rf runs/demo
	$(VENV)/bin/ftaudit demo runs/demo

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples

# pytest-xdist workers: a module's tests stay on one worker (tests/conftest.py)
JOBS ?= 2
XDIST := -n $(JOBS) --dist loadgroup

test-fast: setup browser
	$(PY) -m pytest -q -m "not slow" $(XDIST)

test-slow: setup browser
	$(PY) -m pytest -q -m slow $(XDIST)

test: lint test-fast test-slow

bench: setup
	$(PY) benchmarks/eventlog_bench.py
