# FieldOps. The README's two commands are `make run` and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# make run PORT=8080 serves on another loopback port
PORT ?= 8000

.PHONY: run test test-fast lint docs bench bench-quick worker beat clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	@touch $(STAMP)

## run: install, migrate the embedded SQLite database, seed demo data, serve on 127.0.0.1:$(PORT) (default 8000)
run: $(STAMP)
	$(BIN)/python manage.py migrate --noinput -v0
	$(BIN)/python manage.py seed_demo
	$(BIN)/python manage.py serve_embedded 127.0.0.1:$(PORT)

## test: lint, type-check, the whole suite on PostgreSQL, the portable part on SQLite
test: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bash scripts/test.sh

## test-fast: the pure tier (no database, no services): the domain, contracts, adapters
test-fast: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider -q tests/domain

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

## docs: regenerate the docs that are rendered from code (transition table, diagram, packet)
docs: $(STAMP)
	$(BIN)/python manage.py render_docs

bench: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bash bench/run.sh

bench-quick: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bash bench/run.sh --quick

worker: $(STAMP)
	$(BIN)/celery -A fieldops worker -l info --concurrency 2 -Q $(or $(FIELDOPS_QUEUE),fieldops)

beat: $(STAMP)
	$(BIN)/celery -A fieldops beat -l info

clean:
	rm -rf var staticfiles .pytest_cache .mypy_cache .ruff_cache artifacts
