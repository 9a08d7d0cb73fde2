# Two commands for a newcomer: `make test` and `make demo`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint bench docs fuzz clean

$(STAMP): pyproject.toml constraints.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,bench,docs]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check streamguard tests examples benchmarks fuzz
	$(BIN)/ruff format --check streamguard tests examples benchmarks fuzz
	$(BIN)/mypy --strict streamguard

# The JavaScript clients the agent-protocol interop tests run (tests/node), when npm is
# here; without Node those tests skip (CI requires them: .ci/run).
NODE_STAMP := tests/node/node_modules/.installed
$(NODE_STAMP): tests/node/package-lock.json
	if command -v npm >/dev/null 2>&1; then \
	  npm ci --prefix tests/node --no-audit --no-fund --loglevel=error && touch $(NODE_STAMP); \
	fi

test: lint docs $(NODE_STAMP)
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
	$(BIN)/python -m benchmarks.transport

# The documentation site (mkdocs.yml), built strictly into site/ (gitignored).
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

# Coverage-guided fuzzing of the parser and every checker, FUZZ_SECONDS each; not in `test`.
FUZZ_SECONDS ?= 60
fuzz: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[fuzz]'
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python fuzz/fuzz_parser.py -max_total_time=$(FUZZ_SECONDS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python fuzz/fuzz_checkers.py -max_total_time=$(FUZZ_SECONDS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis site
