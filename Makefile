PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORE_STAMP := $(VENV)/.installed-core
BENCH_VENV := .venv-bench
BENCH_BIN := $(BENCH_VENV)/bin
BENCH_STAMP := $(BENCH_VENV)/.installed

.PHONY: install bench-env bench bench-smoke chaos demo docs test lint typecheck format clean

# One venv, filled in two steps: `make demo` needs chronoq and its runtime dependencies only
# (CORE_STAMP); `make test` and the tool targets add the dev extra on top (STAMP). A second venv
# would install the runtime dependencies twice; one lets `make demo` then `make test` reuse them.
$(CORE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(CORE_STAMP)

$(STAMP): $(CORE_STAMP)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The benchmarks get an environment of their own, so peers never leak into chronoq's.
$(BENCH_STAMP): pyproject.toml bench/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_BIN)/pip install --quiet --upgrade pip
	$(BENCH_BIN)/pip install --quiet -e '.[uvloop]' -r bench/requirements.txt
	touch $(BENCH_STAMP)

bench-env: $(BENCH_STAMP)

demo: $(CORE_STAMP)
	$(BIN)/chronoq demo --dsn sqlite:///chronoq-demo.db

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

# The documentation site, into site/ (gitignored); --strict makes every warning (a broken link
# or anchor, an API reference that does not resolve) an error.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

test: $(STAMP) lint typecheck docs
	$(BIN)/pytest
	$(MAKE) bench-smoke

# Every figure of the benchmark suite with a few hundred jobs, so the harness cannot rot.
bench-smoke: $(BENCH_STAMP)
	$(BENCH_BIN)/python -m bench --smoke

# The long chaos run: every scenario 3 times at full size; rewrites the table of docs/reliability.md.
chaos: $(STAMP)
	$(BIN)/python -m tests.chaos

# The whole suite (about 41 minutes on 2 cores, from the run times bench/RESULTS.md reports):
# bench/RESULTS.md, results.json and charts.
bench: $(BENCH_STAMP)
	$(BENCH_BIN)/python -m bench

format: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

clean:
	rm -rf $(VENV) $(BENCH_VENV) build dist site src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
