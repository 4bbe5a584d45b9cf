# Two commands: `make serve` sets everything up and serves the example packs;
# `make test` sets everything up and runs the whole test suite (what CI runs).
# `make setup` installs the versions pinned in constraints.txt (the ones the suite last passed
# with); `make test-latest` runs the suite on the newest releases pyproject.toml allows, in a
# venv of its own, and `make lock` pins what that venv holds (see README.md).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CONSTRAINTS := constraints.txt
# The drift check: the newest releases from PyPI alone (no pip configuration of this machine:
# no extra index, no local wheels, no constraints), as a user's fresh install resolves them.
LATEST ?= .venv-latest
PYPI_ONLY := env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT PIP_CONFIG_FILE=/dev/null
# Tests run as users run them: writing bytecode (a __pycache__ beside every imported module).
PYTEST := env -u PYTHONDONTWRITEBYTECODE
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

.PHONY: setup chromium postgres serve test test-latest latest-venv lock lint bench clean

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
# when initdb is already there), and pgvector for them (the pack store's vectors; see
# scripts/install-pgvector.sh). The tests start their own throwaway server from them; the
# tests fail saying why when it cannot start.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql; }
	@bash scripts/install-pgvector.sh

$(VENV)/.installed: pyproject.toml $(CONSTRAINTS) $(EXAMPLES)
	@echo "==> [1/3] creating the virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> [2/3] upgrading pip"
	$(PY) -m pip install --quiet --upgrade pip
	@echo "==> [3/3] installing standard-agents, its test tools and the example packs at the versions of $(CONSTRAINTS) (about a minute)"
	$(PY) -m pip install --progress-bar off -c $(CONSTRAINTS) -e ".[test]" $(foreach p,$(EXAMPLES),-e $(dir $(p)))
	@echo "==> set up: $(VENV) is ready"
	touch $@

# A new $(LATEST) each time: the newest releases the ranges of pyproject.toml allow, today.
latest-venv:
	@echo "==> creating $(LATEST) with the newest releases from PyPI (no constraints)"
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(PYPI_ONLY) $(LATEST)/bin/python -m pip install --quiet --upgrade pip
	$(PYPI_ONLY) $(LATEST)/bin/python -m pip install --progress-bar off -e ".[test]" $(foreach p,$(EXAMPLES),-e $(dir $(p)))
	touch $(LATEST)/.installed

$(LATEST)/.installed:
	$(MAKE) latest-venv

serve: setup
	@$(if $(OFFLINE),echo "==> no provider key is set ($(PROVIDER_KEYS)): the models answer offline",:)
	$(VENV)/bin/sa serve --host $(HOST) --port $(PORT) $(OFFLINE) $(SERVE_ARGS)

test: setup chromium postgres
	$(PYTEST) $(PY) -m pytest tests packs plugins

# Not part of CI: the whole suite on the newest releases, so drift shows before users meet it.
test-latest: chromium postgres
	$(MAKE) latest-venv
	$(PYTEST) $(LATEST)/bin/python -m pytest tests packs plugins

# Pin what $(LATEST) holds (run `make test-latest` first: pin only what passed). The editable
# packages of this repository are left out; pip itself is not pinned.
lock: $(LATEST)/.installed
	{ echo "# The versions the test suite last passed with; \`make setup\` installs them (pip -c)."; \
	  echo "# Made by \`make test-latest && make lock\` from PyPI alone; do not edit by hand."; \
	  $(LATEST)/bin/python -m pip freeze --all --exclude-editable --exclude pip; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)
	@echo "==> $(CONSTRAINTS) pins $$(grep -c '==' $(CONSTRAINTS)) packages; \`make test\` reinstalls $(VENV) from it"

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
	$(PY) benchmarks/store.py $(BENCH_FLAGS)
	$(PY) benchmarks/evals.py $(BENCH_FLAGS)

clean:
	rm -rf $(VENV) $(LATEST) .sa .pytest_cache .mypy_cache .ruff_cache
