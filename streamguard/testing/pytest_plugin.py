"""The streamguard pytest plugin, enabled by installing the package (entry point ``pytest11``).

* Fixture ``streamguard_server``: ``url = streamguard_server.serve(app)`` serves ``app``
  under uvicorn on a free loopback port with ``StreamGuardMiddleware`` mounted and
  collects the report of every stream. A test fails when any stream it produced had an
  ``error``-severity finding, with the findings listed: right after the test body (once
  the streams it read have ended), or at teardown for streams that ended only when the
  server stopped.
* Marker ``@pytest.mark.streamguard_allow("rule", ...)`` and ini option
  ``streamguard_allow`` (one rule name per line): findings of these rules do not fail.
  A name that is not in the rule catalog is an error, so a typo cannot allow everything.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator, Mapping
from contextlib import ExitStack
from typing import Any

import pytest
from starlette.types import ASGIApp

from streamguard._format import format_finding
from streamguard.middleware import StreamGuardMiddleware
from streamguard.report import Severity, StreamReport
from streamguard.testing._assert import check_allowed
from streamguard.testing._server import serve

__all__ = ["StreamGuardServer", "streamguard_server"]

MARKER = "streamguard_allow"
INI_ALLOW = "streamguard_allow"
#: How long the check after the test body waits for the streams it started to end.
SETTLE_TIMEOUT = 5.0

_SERVER_KEY = pytest.StashKey["StreamGuardServer"]()

#: The middleware options the fixture uses unless the test passes its own.
_DEFAULT_OPTIONS: Mapping[str, Any] = {
    "metrics": False,
    "logs": {"enabled": False, "content_excerpts": True},
}


class StreamGuardServer:
    """The apps one test serves, and the reports of the streams they produced."""

    def __init__(self, allowed: frozenset[str], stack: ExitStack) -> None:
        self.allowed = allowed
        self.reports: list[StreamReport] = []
        self.url: str | None = None
        self._stack = stack
        self._guards: list[StreamGuardMiddleware] = []
        self._judged = 0
        self._arrived = threading.Condition()

    def serve(
        self, app: ASGIApp, *, server_options: Mapping[str, Any] | None = None, **options: Any
    ) -> str:
        """Serve ``app`` with the middleware mounted until the test ends; return its URL.

        ``options`` go to ``StreamGuardMiddleware`` (``protocol=``, ``routes=``, ...; by
        default no metrics and no logs), ``server_options`` to ``uvicorn.Config``.
        """
        if _mounted_already(app):
            raise ValueError(
                "streamguard_server.serve() mounts StreamGuardMiddleware itself, and this app "
                "has it already: every stream would be watched twice. Serve the app without "
                "it (build_app() without the middleware), or serve it with "
                "streamguard.testing.serve() and read its reports through your on_report"
            )
        merged = dict(_DEFAULT_OPTIONS)
        merged.update(options)
        guard = StreamGuardMiddleware(app, on_report=self._on_report, **merged)
        self._guards.append(guard)
        self.url = self._stack.enter_context(serve(guard, **dict(server_options or {})))
        return self.url

    def _on_report(self, report: StreamReport) -> None:
        with self._arrived:
            self.reports.append(report)
            self._arrived.notify_all()

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until no watched stream is open; false if some still are after ``timeout``
        (default ``SETTLE_TIMEOUT``)."""
        deadline = time.monotonic() + (SETTLE_TIMEOUT if timeout is None else timeout)
        with self._arrived:
            while any(guard.in_flight for guard in self._guards):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._arrived.wait(min(left, 0.05))
        return True

    def failures(self) -> list[StreamReport]:
        """The reports not judged yet that have an error finding not allowed; marks them."""
        with self._arrived:
            fresh = self.reports[self._judged :]
            self._judged = len(self.reports)
        return [report for report in fresh if self._failing(report)]

    def skip_judging(self) -> None:
        with self._arrived:
            self._judged = len(self.reports)

    def _failing(self, report: StreamReport) -> bool:
        return any(
            finding.severity is Severity.ERROR and finding.rule not in self.allowed
            for finding in report.findings
        )

    def describe(self, failing: list[StreamReport]) -> str:
        """The failure message: each failing stream and its error findings."""
        lines = [f"streamguard: {len(failing)} stream(s) with error findings"]
        for report in failing:
            lines.append(
                f"{report.path or '?'} (protocol {report.protocol}, outcome "
                f"{report.outcome.value}, {report.events} event(s), {report.bytes} byte(s)):"
            )
            for finding in report.findings:
                if finding.severity is Severity.ERROR and finding.rule not in self.allowed:
                    lines.append("  " + format_finding(finding).replace("\n", "\n  "))
        lines.append(
            f'(allow a rule with @pytest.mark.{MARKER}("rule") or the {INI_ALLOW} ini option)'
        )
        return "\n".join(lines)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        INI_ALLOW,
        type="linelist",
        default=[],
        help="streamguard rule names whose findings do not fail streamguard_server tests",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*rules): findings of these streamguard rules do not fail the test",
    )
    try:
        check_allowed(config.getini(INI_ALLOW))
    except ValueError as exc:
        raise pytest.UsageError(f"{INI_ALLOW} ini option: {exc}") from None


def _allowed(node: pytest.Item) -> frozenset[str]:
    names: list[str] = list(node.config.getini(INI_ALLOW))
    for marker in node.iter_markers(MARKER):
        for name in marker.args:
            if not isinstance(name, str):
                raise ValueError(f"@pytest.mark.{MARKER} takes rule names, got {name!r}")
            names.append(name)
    return check_allowed(names)


#: How many ``.app`` links ``_mounted_already`` follows: middleware stacks are shallow,
#: and a cycle must not loop.
_MAX_DEPTH = 64


def _mounted_already(app: Any) -> bool:
    """Whether ``app`` is, or wraps, a ``StreamGuardMiddleware``: the app itself, one of a
    Starlette or FastAPI app's ``user_middleware``, or a middleware down its ``.app`` chain
    (the ASGI convention for a wrapped app)."""
    for _ in range(_MAX_DEPTH):
        if isinstance(app, StreamGuardMiddleware):
            return True
        declared = getattr(app, "user_middleware", None)
        if isinstance(declared, list | tuple) and any(
            getattr(entry, "cls", None) is StreamGuardMiddleware for entry in declared
        ):
            return True
        inner = getattr(app, "app", None)
        if inner is None or inner is app:
            return False
        app = inner
    return False


@pytest.fixture
def streamguard_server(request: pytest.FixtureRequest) -> Iterator[StreamGuardServer]:
    """Serve ASGI apps with streamguard mounted; fail the test on error findings."""
    item = request.node
    assert isinstance(item, pytest.Item)
    try:
        allowed = _allowed(item)
    except ValueError as exc:
        pytest.fail(f"@pytest.mark.{MARKER}: {exc}", pytrace=False)
    with ExitStack() as stack:
        server = StreamGuardServer(allowed, stack)
        item.stash[_SERVER_KEY] = server
        yield server
    # The servers have stopped: streams cut short by the shutdown have reported too.
    failing = server.failures()
    if failing:
        pytest.fail(server.describe(failing), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    try:
        result = yield
    except BaseException:
        server = item.stash.get(_SERVER_KEY, None)
        if server is not None:
            server.skip_judging()  # the test's own failure says enough
        raise
    server = item.stash.get(_SERVER_KEY, None)
    if server is not None:
        server.settle()
        failing = server.failures()
        if failing:
            pytest.fail(server.describe(failing), pytrace=False)
    return result
