# Two commands: `make serve` sets everything up and serves the example packs;
# `make test` sets everything up and runs the whole test suite (what CI runs).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXAMPLES := $(sort $(wildcard packs/*/pyproject.toml plugins/*/pyproject.toml))
HOST ?= 127.0.0.1
PORT ?= 8000
SERVE_ARGS ?=

.PHONY: setup serve test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml $(EXAMPLES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]" $(foreach p,$(EXAMPLES),-e $(dir $(p)))
	touch $@

serve: setup
	$(VENV)/bin/sa serve --host $(HOST) --port $(PORT) $(SERVE_ARGS)

test: setup
	$(PY) -m pytest tests packs plugins

lint: setup
	$(VENV)/bin/ruff check sa_hooks sa_core sa_providers
	$(VENV)/bin/mypy

# `make bench SHORT=1` runs every benchmark in its quick mode.
BENCH_FLAGS := $(if $(SHORT),--short,)

bench: setup
	$(PY) benchmarks/engine.py $(BENCH_FLAGS)
	$(PY) benchmarks/turns.py $(BENCH_FLAGS)
	$(PY) benchmarks/delegation.py $(BENCH_FLAGS)
	$(PY) benchmarks/long_thread.py $(BENCH_FLAGS)
	$(PY) benchmarks/server.py $(BENCH_FLAGS)

clean:
	rm -rf $(VENV) .sa .pytest_cache .mypy_cache .ruff_cache
