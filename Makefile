# Two commands for a newcomer: `make test` and `make demo`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint bench clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check streamguard tests examples benchmarks
	$(BIN)/ruff format --check streamguard tests examples benchmarks
	$(BIN)/mypy --strict streamguard

test: lint
	$(BIN)/pytest

demo: $(STAMP)
	$(BIN)/streamguard demo

bench: $(STAMP)
	$(BIN)/python -m benchmarks.parse
	$(BIN)/python -m benchmarks.check_openai
	$(BIN)/python -m benchmarks.check_anthropic
	$(BIN)/python -m benchmarks.timers
	$(BIN)/python -m benchmarks.memory
	$(BIN)/python -m benchmarks.e2e

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
