"""Fixtures shared by the test modules, and the session-wide privacy audit of the logs."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, MutableMapping
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import settings
from structlog.testing import LogCapture

import streamguard
from streamguard.protocols import ProtocolSpec, register, unregister

from .tiers import core_sources, exercises_core
from .toy_protocol import DoneChecker

# Hypothesis runs the same examples every time by default, so a red run never depends on
# luck and a green one cannot be luck either: a seed derived from each test, no example
# database carried between runs, and the blob to reproduce any failure printed. Loaded here,
# before the test modules build their ``settings``, which inherit it. ``explore`` (random,
# more examples) is for hunting new counterexamples by hand: pin what it finds as
# ``@example``s. CI always runs ``ci``.
settings.register_profile(
    "ci", derandomize=True, max_examples=200, database=None, deadline=None, print_blob=True
)
settings.register_profile("explore", max_examples=5000, deadline=None, print_blob=True)
HYPOTHESIS_PROFILE = (
    "ci"
    if os.environ.get("CI", "").lower() in ("true", "1")
    else os.environ.get("HYPOTHESIS_PROFILE", "ci")
)
settings.load_profile(HYPOTHESIS_PROFILE)

#: Every canary a test plants in requests or streams contains this marker; no structlog
#: event of the whole run may carry it (see ``pytest_sessionfinish``).
CANARY_MARKER = "SGCANARY"


class _LogAudit:
    """Sees every structlog event of the session, those of ``capture_logs`` included."""

    def __init__(self) -> None:
        self.events = 0
        self.test = "<outside any test>"
        self.known_bug = False
        #: (test node id, known bug?, the event) for each event that carried the marker.
        self.leaks: list[tuple[str, bool, str]] = []

    def __call__(
        self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        self.events += 1
        text = repr(event_dict)
        if CANARY_MARKER in text:
            self.leaks.append((self.test, self.known_bug, text[:300]))
        return event_dict


LOG_AUDIT = _LogAudit()


def _build_name() -> str:
    return "compiled" if streamguard.compiled else "pure"


def _sources_newer_than_the_compiled_core() -> list[str]:
    """Sources of the compiled core changed after it was built (``core_sources``: the
    compiled modules and the package modules they import, which the Makefile rebuilds on;
    an edit to the CLI or the middleware needs no rebuild). Paths come from the files, not
    from ``__file__``: mypyc sets a wrong one (one package level too deep) on a module first
    imported by another compiled module.
    """
    root = Path(__file__).resolve().parent.parent
    package = root / "streamguard"
    built = [path for path in package.rglob("*") if path.name.endswith(tuple(EXTENSION_SUFFIXES))]
    if not built:
        return []
    oldest = min(path.stat().st_mtime for path in built)
    return [str(p.relative_to(root)) for p in core_sources() if p.stat().st_mtime > oldest]


def pytest_report_header(config: pytest.Config) -> str:
    return f"streamguard core: {_build_name()} build"


def pytest_configure(config: pytest.Config) -> None:
    # The suite runs once per build of the core (Makefile), each run saying which build it
    # expects: running the pure build twice by mistake must not pass as testing both.
    expected = os.environ.get("STREAMGUARD_EXPECT_BUILD")
    if expected and expected != _build_name():
        raise pytest.UsageError(
            f"STREAMGUARD_EXPECT_BUILD={expected}, but the {_build_name()} core was loaded"
        )
    if streamguard.compiled and (changed := _sources_newer_than_the_compiled_core()):
        raise pytest.UsageError(
            f"the compiled core is older than {', '.join(changed[:5])}: run `make compiled`, "
            "or set STREAMGUARD_PURE_PYTHON=1 to test the sources"
        )
    # First of the configured processors (the list object is shared with bound loggers and
    # kept by capture_logs), and inside LogCapture, which capture_logs puts in their place.
    structlog.get_config()["processors"].insert(0, LOG_AUDIT)
    original = LogCapture.__call__

    def audited(self: LogCapture, logger: Any, method_name: str, event_dict: Any) -> Any:
        LOG_AUDIT(logger, method_name, event_dict)
        return original(self, logger, method_name, event_dict)

    LogCapture.__call__ = audited  # type: ignore[method-assign]
    # Outside capture_logs structlog is unconfigured, so streamguard logs to the stdlib
    # logger: audit that too, at every level.
    stdlib = logging.getLogger("streamguard")
    stdlib.addHandler(_StdlibAudit())
    stdlib.setLevel(logging.DEBUG)


class _StdlibAudit(logging.Handler):
    """Hands each record of the stdlib logger ``streamguard`` to the log audit."""

    def emit(self, record: logging.LogRecord) -> None:
        LOG_AUDIT(None, record.levelname.lower(), {"message": record.getMessage()})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``core`` every test of a module that exercises the compiled core (tests/tiers.py
    reads that from the module's source): the pure-Python run of ``make check`` runs those
    only. Never set by hand, so a new test module needs no edit to be tiered."""
    for item in items:
        if exercises_core(item.path):
            item.add_marker(pytest.mark.core)


def pytest_runtest_setup(item: pytest.Item) -> None:
    LOG_AUDIT.test = item.nodeid
    LOG_AUDIT.known_bug = item.get_closest_marker("xfail") is not None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any log event of any test carried a canary (xfail tests excepted)."""
    if not LOG_AUDIT.leaks:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    unexpected = [leak for leak in LOG_AUDIT.leaks if not leak[1]]
    for test, known, text in LOG_AUDIT.leaks:
        if reporter is not None:
            label = "known bug (xfail)" if known else "PRIVACY LEAK"
            reporter.write_line(f"{label}: a log event of {test} carries a canary: {text}")
    if unexpected:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def done_protocol() -> Iterator[str]:
    """Registers the toy protocol (``data: END`` terminal) for the duration of a test."""
    register(ProtocolSpec(name=DoneChecker.name, checker=DoneChecker, summary="a toy"))
    yield DoneChecker.name
    unregister(DoneChecker.name)
