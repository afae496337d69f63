# The two commands of the README: `make demo` and `make test`. Both build .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP_QUIET := --quiet --disable-pip-version-check

.PHONY: demo test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install $(PIP_QUIET) -e .
	$(BIN)/python -c "import gpuwatch, server, agent, simulate"
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed
	$(BIN)/pip install $(PIP_QUIET) -e '.[test]'
	$(BIN)/python -c "import pytest"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/gpuwatch demo $(DEMO_ARGS)

test: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
