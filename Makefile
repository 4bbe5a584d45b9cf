# Two commands: `make serve` sets everything up and serves the example packs;
# `make test` sets everything up and runs the whole test suite (what CI runs).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXAMPLES := $(sort $(wildcard packs/*/pyproject.toml plugins/*/pyproject.toml))
HOST ?= 127.0.0.1
PORT ?= 8000
SERVE_ARGS ?=

.PHONY: setup postgres serve test lint bench clean

setup: $(VENV)/.installed

# PostgreSQL server binaries for the PostgreSQL half of the tests (Debian's package; skipped
# when initdb is already there). The tests start their own throwaway server from them; the
# tests fail saying why when it cannot start.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql; }

$(VENV)/.installed: pyproject.toml $(EXAMPLES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]" $(foreach p,$(EXAMPLES),-e $(dir $(p)))
	touch $@

serve: setup
	$(VENV)/bin/sa serve --host $(HOST) --port $(PORT) $(SERVE_ARGS)

test: setup postgres
	$(PY) -m pytest tests packs plugins

lint: setup
	$(VENV)/bin/ruff check sa_hooks sa_core sa_providers
	$(VENV)/bin/mypy

bench: setup
	$(PY) benchmarks/engine.py

clean:
	rm -rf $(VENV) .sa .pytest_cache .mypy_cache .ruff_cache
