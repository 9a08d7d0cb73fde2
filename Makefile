# Two commands for a newcomer: `make test` and `make demo`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint bench docs fuzz clean compiled

$(STAMP): pyproject.toml constraints.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	STREAMGUARD_PURE_PYTHON=1 $(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,bench,docs]'
	touch $(STAMP)

# The sans-I/O core compiled with mypyc (setup.py, streamguard/_build.py), in place beside
# its sources, when a C compiler is here. The stamp says which build resulted: "compiled",
# or "pure" when compiling was not possible (setup.py warns why). Old extension modules
# go first, so a failed build can never leave a stale one to be imported.
# A shell's STREAMGUARD_PURE_PYTHON=1 must not decide the build: `env -u` drops it. A
# "pure" stamp is not retried until a source changes: `rm .venv/.compiled` after
# installing a compiler.
PACKAGE_SOURCES := $(shell find streamguard -name '*.py')
COMPILED_STAMP := $(VENV)/.compiled
$(COMPILED_STAMP): $(STAMP) setup.py $(PACKAGE_SOURCES)
	find streamguard -name '*.so' -delete
	env -u STREAMGUARD_PURE_PYTHON $(BIN)/python setup.py --quiet build_ext --inplace
	env -u STREAMGUARD_PURE_PYTHON $(BIN)/python -c "import streamguard; print('compiled' if streamguard.compiled else 'pure')" > $(COMPILED_STAMP)
	@echo "streamguard core: $$(cat $(COMPILED_STAMP)) build"

compiled: $(COMPILED_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check setup.py streamguard tests examples benchmarks fuzz
	$(BIN)/ruff format --check setup.py streamguard tests examples benchmarks fuzz
	$(BIN)/mypy --strict streamguard

# The JavaScript clients the agent-protocol interop tests run (tests/node), when npm is
# here; without Node those tests skip (CI requires them: .ci/run).
NODE_STAMP := tests/node/node_modules/.installed
$(NODE_STAMP): tests/node/package-lock.json
	if command -v npm >/dev/null 2>&1; then \
	  npm ci --prefix tests/node --no-audit --no-fund --loglevel=error && touch $(NODE_STAMP); \
	fi

# The whole suite runs against both builds of the core: the compiled one (what a normal
# install runs) and the pure-Python one (no C compiler, or STREAMGUARD_PURE_PYTHON=1).
# STREAMGUARD_EXPECT_BUILD makes the suite refuse to run on the other build by mistake.
# Without a C compiler only the pure build is tested, unless STREAMGUARD_REQUIRE_COMPILED=1
# (CI) makes that an error.
test: lint docs $(NODE_STAMP) $(COMPILED_STAMP)
	@if [ "$$(cat $(COMPILED_STAMP))" = compiled ]; then \
	  echo "== the compiled core"; \
	  env -u STREAMGUARD_PURE_PYTHON STREAMGUARD_EXPECT_BUILD=compiled $(BIN)/pytest || exit 1; \
	elif [ -n "$$STREAMGUARD_REQUIRE_COMPILED" ]; then \
	  echo "the compiled core did not build (see setup.py's warning above)" >&2; exit 1; \
	else \
	  echo "== no compiled core here (no C compiler? see setup.py's warning; rm $(COMPILED_STAMP) to retry): testing the pure-Python build only"; \
	fi
	@echo "== the pure-Python core"
	STREAMGUARD_PURE_PYTHON=1 STREAMGUARD_EXPECT_BUILD=pure $(BIN)/pytest

demo: $(COMPILED_STAMP)
	$(BIN)/streamguard demo

# Every benchmark once per build of the core (compiled, then pure Python), then the table
# of every budget for both (benchmarks/budgets.py; docs/performance.md keeps a copy).
BENCHMARKS := parse json_step check_openai check_anthropic timers memory e2e transport
bench: $(COMPILED_STAMP)
	rm -f benchmarks/results/*.json  # budgets.py must never read an earlier run's figures
	@for build in compiled pure; do \
	  if [ $$build = compiled ] && [ "$$(cat $(COMPILED_STAMP))" != compiled ]; then \
	    echo "== no compiled core here: benchmarking the pure-Python build only"; continue; \
	  fi; \
	  for name in $(BENCHMARKS); do \
	    echo "== $$name ($$build build)"; \
	    if [ $$build = pure ]; then export STREAMGUARD_PURE_PYTHON=1; else unset STREAMGUARD_PURE_PYTHON; fi; \
	    $(BIN)/python -m benchmarks.$$name || exit 1; \
	  done; \
	done
	$(BIN)/python -m benchmarks.budgets

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
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis site build
	find streamguard -name '*.so' -delete
