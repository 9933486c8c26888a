# Two commands set up a fresh machine:
#   make run    creates .venv, installs, migrates the SQLite store and starts `infermeter up`
#   make test   creates .venv, installs the test tools, starts PostgreSQL if needed, runs pytest
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: run test install lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch is pinned to the CPU build that pip finds locally; a loose requirement would pull a
# multi-GB CUDA build. On a GPU machine, install a CUDA torch into .venv first (README).
TORCH ?= torch==2.13.0

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install --quiet "$(TORCH)"
	$(BIN)/pip install --quiet -e ".[dev,worker]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/infermeter db upgrade
	$(BIN)/infermeter up

test: $(STAMP)
	scripts/ensure-postgres.sh
	scripts/ensure-test-tools.sh
	OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
typecheck: $(STAMP)
	$(BIN)/mypy store promql infermeter collector alerts cost forecast reports dashboard worker remote ha access moe drift releases

# Every benchmark in turn (python -m benchmarks.run_all), then all their target lines;
# QUICK=1 passes --quick (a few minutes), BENCH_ARGS more (e.g. --only parse_bench,store_bench).
bench: $(STAMP)
	scripts/ensure-postgres.sh
	$(BIN)/pip install --quiet "pmdarima>=2.0"  # forecast_bench's Taylor electricity series
	scripts/fetch-bench-data.sh  # forecast_bench's flight series (npm; skipped where it cannot)
	$(BIN)/python -m benchmarks.run_all $(if $(filter-out 0,$(QUICK)),--quick) $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache
