# Two commands for a newcomer: `make test` and `make demo`. Both set up .venv first.
# CI runs `make check` (.ci/run): the full matrix, below `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test check demo lint bench docs fuzz clean compiled shapes

# The editable install is setuptools' compat mode: a .pth file naming this directory, which
# mypy reads, so `.venv/bin/mypy` finds streamguard from any directory (the default mode's
# import hook is invisible to it: import-not-found). It also puts tests/ and examples/ on
# the venv's path; the compiled core, built in place, is found either way.
# PIP_CONSTRAINT pins the isolated build environment too (setuptools, mypy: `-c` does not
# reach it), so a new setuptools release (compat mode is marked transitional) cannot turn
# a fresh clone red.
EDITABLE := --config-settings editable_mode=compat
PINNED := PIP_CONSTRAINT=$(CURDIR)/constraints.txt
$(STAMP): pyproject.toml constraints.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	STREAMGUARD_PURE_PYTHON=1 $(PINNED) $(BIN)/python -m pip install --quiet -c constraints.txt $(EDITABLE) -e '.[dev,bench,docs]'
	touch $(STAMP)

# The sans-I/O core compiled with mypyc (setup.py, streamguard/_build.py), in place beside
# its sources, when a C compiler is here. The stamp says which build resulted: "compiled",
# or "pure" when compiling was not possible (setup.py warns why). Old extension modules
# go first, so a failed build can never leave a stale one to be imported.
# A shell's STREAMGUARD_PURE_PYTHON=1 must not decide the build: `env -u` drops it. A
# "pure" stamp is not retried until a source changes: `rm .venv/.compiled` after
# installing a compiler.
# Rebuilt when a source of the core changes: the compiled modules and the package modules
# they import (`python -m tests.tiers sources`, with setup.py); an edit to the CLI or the
# middleware needs no five-minute rebuild. Without that list, every source counts.
CORE_SOURCES := $(shell $(PYTHON) -m tests.tiers sources 2>/dev/null || find streamguard -name '*.py')
COMPILED_STAMP := $(VENV)/.compiled
$(COMPILED_STAMP): $(STAMP) setup.py $(CORE_SOURCES)
	@echo "== compiling the core with mypyc (2-5 minutes on 2 cores, silent meanwhile; rebuilt only when a core source changes)"
	find streamguard -name '*.so' -delete
	env -u STREAMGUARD_PURE_PYTHON $(BIN)/python setup.py --quiet build_ext --inplace
	env -u STREAMGUARD_PURE_PYTHON $(BIN)/python -c "import streamguard; print('compiled' if streamguard.compiled else 'pure')" > $(COMPILED_STAMP)
	@echo "streamguard core: $$(cat $(COMPILED_STAMP)) build"

compiled: $(COMPILED_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check setup.py streamguard tests tools examples benchmarks fuzz
	$(BIN)/ruff format --check setup.py streamguard tests tools examples benchmarks fuzz
	$(BIN)/mypy --strict streamguard

# The JavaScript clients the agent-protocol interop tests run (tests/node), when npm is
# here; without Node those tests skip (CI requires them: .ci/run). `make check` only.
NODE_STAMP := tests/node/node_modules/.installed
$(NODE_STAMP): tests/node/package-lock.json
	if command -v npm >/dev/null 2>&1; then \
	  npm ci --prefix tests/node --no-audit --no-fund --loglevel=error && touch $(NODE_STAMP); \
	fi

# Two tiers of tests (README, docs/contributing.md):
#
# `make test`, for everyone: lint and type-check, then every test not marked slow, once, on
# the build this machine produced (compiled where a C compiler was found, else pure).
#
# `make check`, the full matrix CI runs (.ci/run): every test, slow ones included, on the
# compiled build; then, on the pure-Python build (STREAMGUARD_PURE_PYTHON=1), the tests
# marked `core`: those that exercise the modules mypyc compiles. tests/conftest.py sets that
# mark from each test module's source (tests/tiers.py, from streamguard/_build.py's
# COMPILED_MODULES), so every core test runs on both builds and every I/O test once. The
# documentation site is built strictly by tests/test_docs.py; the Node clients and
# Prometheus are needed by the slow interop tests (.ci/run installs them).
#
# STREAMGUARD_EXPECT_BUILD makes a run refuse to start on the other build by mistake. A
# shell's STREAMGUARD_PURE_PYTHON=1 must not decide which build `make test` tests: `env -u`.
# Without a C compiler the pure build is all there is, unless STREAMGUARD_REQUIRE_COMPILED=1
# (CI) makes that an error.
# langsmith (installed with langchain-core, which the LangGraph SDK brings) ships a pytest
# plugin no test uses; loaded, it imports and assertion-rewrites some 230 modules of
# langsmith in every pytest process (collecting the core tests: 21.7 s, 19.6 s without it).
PYTEST := $(BIN)/pytest -p no:langsmith_plugin
define require_the_build
	@if [ "$$(cat $(COMPILED_STAMP))" != compiled ] && [ -n "$$STREAMGUARD_REQUIRE_COMPILED" ]; then \
	  echo "the compiled core did not build (see setup.py's warning above)" >&2; exit 1; \
	fi
endef

# `make test` runs its tests as two pytest processes at once, one per core of a small
# machine, each collecting only its own modules (`python -m tests.tiers share 1 2`, `share
# 2 2`): the test modules dealt into two shares of about equal duration, as measured in
# tests/durations.json (`python -m tests.tiers durations` rewrites it from a run's JUnit
# reports; a module new since counts as the mean). The first share's output is printed
# when it finishes, the second's as it runs. Each keeps a cache of its own (`--lf` with
# `-o cache_dir=...`).
TEST_LOG := $(VENV)/test-share1.log
test: lint $(COMPILED_STAMP)
	$(require_the_build)
	@build=$$(cat $(COMPILED_STAMP)); \
	run() { env -u STREAMGUARD_PURE_PYTHON STREAMGUARD_EXPECT_BUILD=$$build $(PYTEST) "$$@"; }; \
	echo "== every test not marked slow, on the $$build core, in two processes (the full matrix: make check)"; \
	run -m "not slow" -o cache_dir=.pytest_cache/share1 $$($(BIN)/python -m tests.tiers share 1 2) > $(TEST_LOG) 2>&1 & first=$$!; \
	echo "== the second share of the test modules (the first runs meanwhile; its output follows)"; \
	run -m "not slow" -o cache_dir=.pytest_cache/share2 $$($(BIN)/python -m tests.tiers share 2 2); second=$$?; \
	wait $$first; status=$$?; \
	echo "== the first share of the test modules"; cat $(TEST_LOG); \
	[ $$status -eq 0 ] && [ $$second -eq 0 ]

check: lint $(NODE_STAMP) $(COMPILED_STAMP)
	$(require_the_build)
	@if [ "$$(cat $(COMPILED_STAMP))" = compiled ]; then \
	  echo "== every test, on the compiled core" && \
	  env -u STREAMGUARD_PURE_PYTHON STREAMGUARD_EXPECT_BUILD=compiled $(PYTEST) && \
	  echo "== the tests that exercise the compiled core (marked core), on the pure-Python core" && \
	  STREAMGUARD_PURE_PYTHON=1 STREAMGUARD_EXPECT_BUILD=pure $(PYTEST) -m core; \
	else \
	  echo "== no compiled core here (no C compiler? see setup.py's warning; rm $(COMPILED_STAMP) to retry): every test, on the pure-Python core" && \
	  env -u STREAMGUARD_PURE_PYTHON STREAMGUARD_EXPECT_BUILD=pure $(PYTEST); \
	fi

demo: $(COMPILED_STAMP)
	$(BIN)/streamguard demo

# Every benchmark once per build of the core (compiled, then pure Python), then the table
# of every budget for both (benchmarks/budgets.py; docs/performance.md keeps a copy).
BENCHMARKS := parse json_step check_openai check_anthropic check_responses parts cuts streams production timers memory idle_rss e2e transport
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

# The payload shapes generated from the official clients' own models, at the versions
# constraints.txt pins (tools/shapes.py): after bumping a pin, run this; the diff of
# streamguard/protocols/_generated_*.py is the review. tests/test_shapes_generated.py fails
# while they drift.
shapes: $(STAMP)
	STREAMGUARD_PURE_PYTHON=1 $(BIN)/python -m tools.shapes

# The documentation site (mkdocs.yml), built strictly into site/ (gitignored).
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

# Coverage-guided fuzzing of the parser, every checker and the shape cache, FUZZ_SECONDS
# each; not in `test`.
FUZZ_SECONDS ?= 60
fuzz: $(STAMP)
	$(PINNED) $(BIN)/python -m pip install --quiet -c constraints.txt $(EDITABLE) -e '.[fuzz]'
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python fuzz/fuzz_parser.py -max_total_time=$(FUZZ_SECONDS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python fuzz/fuzz_checkers.py -max_total_time=$(FUZZ_SECONDS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python fuzz/fuzz_shape_cache.py -max_total_time=$(FUZZ_SECONDS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis site build
	find streamguard -name '*.so' -delete
