# Everything starts from python3 and make: `make test` builds .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install tools wheelhouse lint typecheck test check pytest demo format clean bench schema docs docs-tables

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Test tools that come from outside PyPI (the MCP conformance suite, via npm): installed here, with a
# line saying what is downloaded, so the test run itself never downloads anything.
tools: wheelhouse
	@tests/conformance/install.sh

# The base install's wheels, for the fresh-install test (tests/packaging): it installs the built
# wheel into a new virtualenv with --no-index from here, so the test run itself downloads nothing.
WHEELHOUSE := .tools/wheelhouse
wheelhouse: $(WHEELHOUSE)/.complete
$(WHEELHOUSE)/.complete: pyproject.toml | $(STAMP)
	@echo "tools: downloading the base install's wheels with pip into $(WHEELHOUSE)"
	@mkdir -p $(WHEELHOUSE)
	@$(BIN)/python tests/packaging/base_requirements.py > $(WHEELHOUSE)/requirements.txt
	@$(BIN)/python -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
		--dest $(WHEELHOUSE) -r $(WHEELHOUSE)/requirements.txt
	@touch $@

lint: install
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: install
	$(BIN)/mypy

pytest: install tools
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test: lint typecheck pytest

# The fast loop while working: lint, types and the tests that need no server process, browser or
# other database, on both CPUs (pytest-xdist). `make test` is still what lands.
check: lint typecheck
	$(BIN)/python -m pytest -q -p xdist -n 2 -m "not slow" $(PYTEST_ARGS)

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

# The docs site (mkdocs + Material) into site/; tests/docs builds it with --strict.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The generated parts of the docs: the code table (docs/api.md), the settings (docs/settings.md)
# and the captured tasks exchange (docs/mcp.md). Tests fail when they are stale.
docs-tables: install
	$(BIN)/python -m tests.docs.reference

bench: install
	$(BIN)/python benchmarks/store_throughput.py

clean:
	rm -rf $(VENV) .tools .mypy_cache .pytest_cache .ruff_cache signoff.db site
