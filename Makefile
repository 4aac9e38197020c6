# Everything starts from python3 and make: `make test` builds .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install tools lint typecheck test pytest demo format clean bench schema

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Test tools that come from outside PyPI (the MCP conformance suite, via npm): installed here, with a
# line saying what is downloaded, so the test run itself never downloads anything.
tools:
	@tests/conformance/install.sh

lint: install
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: install
	$(BIN)/mypy

pytest: install tools
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test: lint typecheck pytest

format: install
	$(BIN)/ruff check --fix src tests benchmarks examples
	$(BIN)/ruff format src tests benchmarks examples

demo: install
	$(BIN)/signoff demo --host $(HOST) --port $(PORT)

# The manifest JSON Schema editors use, regenerated from the pydantic models (a test checks it is current).
schema: install
	$(BIN)/python -c 'from signoff.manifest.schema import render_schema; print(render_schema(), end="")' \
		> src/signoff/manifest/manifest.schema.json.new
	mv src/signoff/manifest/manifest.schema.json.new src/signoff/manifest/manifest.schema.json

bench: install
	$(BIN)/python benchmarks/store_throughput.py

clean:
	rm -rf $(VENV) .tools .mypy_cache .pytest_cache .ruff_cache signoff.db
