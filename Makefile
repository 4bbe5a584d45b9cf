# Two commands: `make serve` sets everything up and serves the example packs;
# `make test` sets everything up and runs the whole test suite (what CI runs).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXAMPLES := $(sort $(wildcard packs/*/pyproject.toml plugins/*/pyproject.toml))
HOST ?= 127.0.0.1
PORT ?= 8000
SERVE_ARGS ?=
# The keys the built-in providers read. With none of them set, `make serve` answers every model
# offline (`sa serve --test-provider`) instead of failing every turn; `make serve OFFLINE=`
# serves real providers anyway (a keyless one such as ollama). `sa serve` itself never goes
# offline unless told to.
PROVIDER_KEYS := OPENAI_API_KEY ANTHROPIC_API_KEY GOOGLE_API_KEY OPENROUTER_API_KEY GROQ_API_KEY
OFFLINE ?= $(if $(strip $(foreach key,$(PROVIDER_KEYS),$($(key)))),,--test-provider)

.PHONY: setup chromium postgres serve test lint bench clean

setup: $(VENV)/.installed

# The console's browser tests drive Debian's chromium (never a downloaded browser build);
# only `make test` needs it, so `make serve` does not install a browser.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
		else \
			echo "warning: install Debian's chromium (apt-get install chromium) for the console browser tests" >&2; \
		fi; }

# PostgreSQL server binaries for the PostgreSQL half of the tests (Debian's package; skipped
# when initdb is already there). The tests start their own throwaway server from them; the
# tests fail saying why when it cannot start.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql; }

$(VENV)/.installed: pyproject.toml $(EXAMPLES)
	@echo "==> [1/3] creating the virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> [2/3] upgrading pip"
	$(PY) -m pip install --quiet --upgrade pip
	@echo "==> [3/3] installing standard-agents, its test tools and the example packs (about a minute)"
	$(PY) -m pip install --progress-bar off -e ".[test]" $(foreach p,$(EXAMPLES),-e $(dir $(p)))
	@echo "==> set up: $(VENV) is ready"
	touch $@

serve: setup
	@$(if $(OFFLINE),echo "==> no provider key is set ($(PROVIDER_KEYS)): the models answer offline",:)
	$(VENV)/bin/sa serve --host $(HOST) --port $(PORT) $(OFFLINE) $(SERVE_ARGS)

test: setup chromium postgres
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
