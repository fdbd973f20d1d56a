PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORE_STAMP := $(VENV)/.installed-core
BENCH_VENV := .venv-bench
BENCH_BIN := $(BENCH_VENV)/bin
BENCH_STAMP := $(BENCH_VENV)/.installed
# pytest-xdist workers of `make test`. The tests mostly wait (on workers, timers, subprocesses and
# the servers), so more workers than the machine's 2 cores pay; each also collects the suite
# and opens its own databases and etcd cluster. `make test PYTEST_WORKERS=0` runs it serially.
# --dist loadfile: a module's tests run on one worker, one after another, so what a module sets
# up once is set up once: the chaos scenarios share one private cluster and never overlap (each
# starts a fleet of processes and bounds how late a job runs again after a fault: two fleets on
# two cores would measure each other), the packaging tests one build, a browser module one
# Chromium. (--dist loadgroup cannot say it: its xdist_group marks have no effect under pytest
# 9.2, whose node ids xdist 3.8 can no longer suffix.)
PYTEST_WORKERS ?= 4

# Bytecode is written even where the environment forbids it (PYTHONDONTWRITEBYTECODE, as
# container images often set): otherwise every process the suite starts (pytest's workers and
# the hundreds of `python -m chronoq` processes of the tests) compiles chronoq and the tests
# again. Collecting the suite took 11.3 s of CPU without the bytecode, 4.6 s with it.
export PYTHONDONTWRITEBYTECODE :=

.PHONY: install bench-env bench bench-smoke chaos demo docs test lint typecheck format clean \
	suite suite-bench-smoke

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

# The benchmarks get an environment of their own, so peers never leak into chronoq's. It has no
# pip of its own: the project venv's installs into it (pip --python), which spares ensurepip and
# a pip upgrade (7.5 s and 4.3 s).
$(BENCH_STAMP): pyproject.toml bench/requirements.txt | $(CORE_STAMP)
	$(PYTHON) -m venv --without-pip $(BENCH_VENV)
	$(BIN)/pip --python $(BENCH_BIN)/python install --quiet -e '.[uvloop]' -r bench/requirements.txt
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

# Lint, typecheck and docs side by side (15 s in all), then the suite on PYTEST_WORKERS workers
# beside the benchmark smoke run (its venv's install, then the run): both mostly wait, the
# smoke run on its figures' fixed windows (233 s, of which 44 s of CPU, in one run).
# The smoke run's output is shown once it ends, whole if it failed.
# Tests marked `alone` measure a pace (a rate limit kept by a worker at full speed) and run
# last, by themselves, once the parallel suite and the smoke run are over.
test: $(STAMP)
	$(MAKE) --no-print-directory -j3 lint typecheck docs
	$(MAKE) --no-print-directory -j2 suite suite-bench-smoke
	$(BIN)/pytest -m alone

suite: $(STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile -m "not alone"

suite-bench-smoke: $(BENCH_STAMP)
	@log=$$(mktemp); \
	if $(BENCH_BIN)/python -m bench --smoke >$$log 2>&1; then \
		echo "bench-smoke passed: $$(tail -n 1 $$log)"; rm -f $$log; \
	else \
		cat $$log; rm -f $$log; echo "bench-smoke failed"; exit 1; \
	fi

# Every figure of the benchmark suite with a few hundred jobs, so the harness cannot rot.
bench-smoke: $(BENCH_STAMP)
	$(BENCH_BIN)/python -m bench --smoke

# The long chaos run: every scenario 3 times at full size; rewrites the table of docs/reliability.md.
chaos: $(STAMP)
	$(BIN)/python -m tests.chaos

# The whole suite (about 41 minutes on 2 cores, from the run times bench/RESULTS.md reports):
# bench/RESULTS.md, results.json and charts; then figure 11, a fleet of 64, 256 and 1,024 worker
# slots in each dispatch mode (4 minutes more): bench/fleet.md, fleet.json and fleet.png.
bench: $(BENCH_STAMP)
	$(BENCH_BIN)/python -m bench
	$(BENCH_BIN)/python -m bench.fleet

format: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

clean:
	rm -rf $(VENV) $(BENCH_VENV) build dist site src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
