"""Sinks and faults: contained, counted once, visible; nothing but cancellation escapes."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
import structlog
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

import streamguard.middleware
from streamguard import Outcome, StreamGuardMiddleware, StreamReport
from streamguard.handoff import ReportQueue

from .asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start
from .helpers import break_monitors

STEPS = [
    sse_start(),
    body(b"data: one\n\n"),
    body(b"data: \xff\n\n"),  # invalid_utf8: a finding for the sinks
    body(b"", more=False),
]


def _internal_errors(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value(
        "streamguard_internal_errors_total", {"route": "__unknown__", "protocol": "auto"}
    )


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit, RuntimeError])
def test_on_report_raising_anything_but_cancellation_is_contained(
    error: type[BaseException],
) -> None:
    """``on_report`` raising KeyboardInterrupt never reaches the app or the server."""

    def explode(report: StreamReport) -> None:
        raise error()

    middleware = StreamGuardMiddleware(ScriptedApp(STEPS), on_report=explode, metrics=False)
    with capture_logs() as logs:
        recorder, raised = run(middleware)
    assert raised is None
    assert recorder.sent == STEPS
    assert middleware.internal_errors == 1
    assert [entry["where"] for entry in logs if entry["event"] == "streamguard_internal_error"] == [
        "on_report"
    ]


def test_a_raising_on_report_is_logged_with_its_message_and_traceback() -> None:
    """The callback is the application's own code: beside the internal error (type and
    place only), ``streamguard_report_callback_failed`` carries the exception itself, so
    its message and traceback reach the application's log."""

    def store(report: StreamReport) -> None:
        raise RuntimeError(f"the store refused a report of {report.events} events")

    middleware = StreamGuardMiddleware(ScriptedApp(STEPS), on_report=store, metrics=False)
    with capture_logs() as logs:
        run(middleware)
    [failed] = [entry for entry in logs if entry["event"] == "streamguard_report_callback_failed"]
    assert (failed["error"], failed["where"]) == ("RuntimeError", "on_report")
    assert failed["callback"].endswith("store")
    assert str(failed["exc_info"]).startswith("the store refused a report of")
    assert failed["exc_info"].__traceback__ is not None


#: An app whose on_report raises, run under stdlib logging (structlog unconfigured).
_RAISING_CALLBACK = """
import asyncio, logging, sys
from streamguard import StreamGuardMiddleware
from tests.asgi_driver import ScriptedApp, run
from tests.test_faults import STEPS

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")

def store(report):
    raise RuntimeError("the store is down")

run(StreamGuardMiddleware(ScriptedApp(STEPS), on_report=store, metrics=False))
"""


def test_a_raising_on_report_prints_its_traceback_through_stdlib_logging() -> None:
    """Under stdlib logging the traceback is printed as logging prints any: the line, then
    ``Traceback ...`` down to the callback's own ``raise``."""
    done = subprocess.run(
        [sys.executable, "-c", _RAISING_CALLBACK],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    assert "streamguard streamguard_report_callback_failed error='RuntimeError'" in done.stderr
    assert "Traceback (most recent call last):" in done.stderr
    assert "RuntimeError: the store is down" in done.stderr


@pytest.fixture
def raising_processor() -> Iterator[None]:
    """Every structlog event raises in a processor, as a broken log pipeline does."""

    def explode(logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        raise ValueError("log pipeline down")

    processors = structlog.get_config()["processors"]
    processors.insert(1, explode)
    try:
        yield
    finally:
        processors.remove(explode)


@pytest.mark.usefixtures("raising_processor")
def test_a_raising_log_processor_counts_one_stream_once() -> None:
    """A structlog processor that raises on every event counts the stream as one error."""
    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        ScriptedApp(STEPS), on_report=reports.append, metrics=registry
    )
    recorder, raised = run(middleware)
    assert raised is None
    assert recorder.sent == STEPS
    assert middleware.internal_errors == 1
    assert _internal_errors(registry) == 1
    assert reports[0].outcome is Outcome.COMPLETED
    assert middleware.in_flight == 0


def test_raising_prometheus_calls_count_once_and_are_logged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counter and gauge calls that raise: one internal error, and the log still says so."""

    def explode(self: object, amount: float = 1) -> None:
        raise RuntimeError("metrics down")

    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        ScriptedApp(STEPS), on_report=reports.append, metrics=registry
    )
    for owner, method in [
        (prometheus_client.Counter, "inc"),
        (prometheus_client.Gauge, "inc"),
        (prometheus_client.Gauge, "dec"),
    ]:
        monkeypatch.setattr(owner, method, explode)
    with capture_logs() as logs:
        recorder, raised = run(middleware)
    assert raised is None
    assert recorder.sent == STEPS
    assert middleware.internal_errors == 1
    errors = [entry for entry in logs if entry["event"] == "streamguard_internal_error"]
    assert [entry["where"] for entry in errors] == ["metrics"]
    assert len(reports) == 1
    assert middleware.in_flight == 0


def test_a_failing_response_start_decision_leaks_nothing() -> None:
    """A ``str`` header value (not bytes) breaks the decision: counted, nothing left open."""
    start = sse_start((b"content-length", "9"))  # type: ignore[arg-type]
    steps = [start, body(b"data: a\n\n", more=False)]
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(ScriptedApp(steps), on_report=reports.append)
    recorder, raised = run(middleware)
    assert raised is None
    assert recorder.sent == steps
    assert middleware.internal_errors == 1
    assert middleware.in_flight == 0
    assert middleware.open_streams == set()


def test_a_failure_after_the_stream_opened_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure in the head checks of an open stream still ends with a report."""

    def explode(self: object, *args: object) -> list[object]:
        raise RuntimeError("head check bug")

    break_monitors(monkeypatch, streamguard.middleware, "check_head", explode)
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(ScriptedApp(STEPS), on_report=reports.append)
    recorder, raised = run(middleware)
    assert raised is None
    assert recorder.sent == STEPS
    assert middleware.internal_errors == 1
    assert middleware.in_flight == 0
    [report] = reports
    assert report.internal_error is not None
    assert report.internal_error.startswith("RuntimeError in explode")


@pytest.mark.parametrize("kind", [memoryview, bytearray])
def test_memoryview_and_bytearray_bodies_are_checked(kind: type) -> None:
    """A body given as a memoryview or a bytearray (valid ASGI) is checked like bytes."""
    steps = [
        sse_start(),
        body(kind(b"data: one\n\nda")),
        body(kind(b"ta: two\n\n")),
        body(kind(b""), more=False),
    ]
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(ScriptedApp(steps), on_report=reports.append)
    recorder, raised = run(middleware)
    assert raised is None
    assert all(a is b for a, b in zip(recorder.sent, steps, strict=True))
    assert middleware.internal_errors == 0
    [report] = reports
    assert (report.events, report.bytes, report.findings) == (2, 22, ())


# -- the hand-off ------------------------------------------------------------------------


def test_report_queue_never_blocks_the_caller() -> None:
    """A callback that blocks runs on the worker; queuing returns at once."""
    release = threading.Event()
    seen: list[str | None] = []

    def slow(report: StreamReport) -> None:
        release.wait(10)
        seen.append(report.path)

    reports = ReportQueue(slow, maxsize=10)
    middleware = StreamGuardMiddleware(ScriptedApp(STEPS), on_report=reports, metrics=False)
    for _ in range(3):
        run(middleware)  # would wait 10 s per stream if the callback ran inline
    assert seen == []
    release.set()
    reports.close(timeout=10)
    assert seen == ["/stream"] * 3
    assert (reports.dropped, reports.failed) == (0, 0)


def test_report_queue_drops_and_counts_when_full() -> None:
    """Past ``maxsize`` waiting reports, new ones are dropped and counted, never waited for."""
    release = threading.Event()
    delivered: list[StreamReport] = []

    def slow(report: StreamReport) -> None:
        release.wait(10)
        delivered.append(report)

    reports = ReportQueue(slow, maxsize=2)
    middleware = StreamGuardMiddleware(ScriptedApp(STEPS), on_report=reports, metrics=False)
    run(middleware)  # taken by the worker, which then blocks
    deadline = time.monotonic() + 5
    while reports._queue.qsize() and time.monotonic() < deadline:
        time.sleep(0.01)
    for _ in range(4):
        run(middleware)  # two fit in the queue, two are dropped
    assert reports.dropped == 2
    release.set()
    reports.close(timeout=10)
    assert len(delivered) == 3


def test_report_queue_counts_a_raising_callback_and_goes_on() -> None:
    """A callback that raises is counted and logged; later reports are still delivered."""
    calls: list[int] = []

    def flaky(report: StreamReport) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("store down")

    reports = ReportQueue(flaky)
    middleware = StreamGuardMiddleware(ScriptedApp(STEPS), on_report=reports, metrics=False)
    with capture_logs() as logs:
        run(middleware)
        run(middleware)
        reports.close(timeout=10)
    assert (len(calls), reports.failed) == (2, 1)
    assert [e["error"] for e in logs if e["event"] == "streamguard_report_callback_failed"] == [
        "RuntimeError"
    ]


def test_report_queue_drain_delivers_what_is_queued() -> None:
    """``drain`` returns once every queued report was delivered; the queue stays open."""
    release = threading.Event()
    delivered: list[StreamReport] = []

    def slow(report: StreamReport) -> None:
        release.wait(10)
        delivered.append(report)

    reports = ReportQueue(slow)
    middleware = StreamGuardMiddleware(ScriptedApp(STEPS), on_report=reports, metrics=False)
    for _ in range(3):
        run(middleware)
    threading.Timer(0.05, release.set).start()
    assert reports.drain(timeout=10) == 0
    assert (len(delivered), reports.undelivered) == (3, 0)
    run(middleware)
    reports.close(timeout=10)
    assert len(delivered) == 4


def test_report_queue_drain_is_bounded_and_counts_what_it_could_not_deliver() -> None:
    """A stuck callback holds a drain ``shutdown_timeout`` seconds at most; the reports it
    left are counted and logged."""
    release = threading.Event()

    def stuck(report: StreamReport) -> None:
        release.wait(30)

    reports = ReportQueue(stuck, shutdown_timeout=0.1)
    middleware = StreamGuardMiddleware(ScriptedApp(STEPS), on_report=reports, metrics=False)
    for _ in range(3):
        run(middleware)
    with capture_logs() as logs:
        assert reports.drain() == 3
    release.set()
    assert reports.undelivered == 3
    [logged] = [e for e in logs if e["event"] == "streamguard_reports_undelivered"]
    assert (logged["undelivered"], logged["timeout_s"]) == (3, 0.1)
    reports.close(timeout=10)


def test_report_queue_refuses_a_negative_or_nan_shutdown_timeout() -> None:
    """The drain's bound is a number of seconds, 0 or more."""
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="shutdown_timeout"):
            ReportQueue(print, shutdown_timeout=bad)


def test_lifespan_shutdown_drains_the_report_queue() -> None:
    """The lifespan's shutdown waits (off the loop) until the ``ReportQueue`` delivered the
    reports of the streams it closed: a server that then re-raises SIGTERM loses none."""
    delivered: list[StreamReport] = []

    def slow(report: StreamReport) -> None:
        time.sleep(0.2)
        delivered.append(report)

    stream_app = ScriptedApp(["receive", sse_start(), body(b"data: one\n\n"), "receive"])
    middleware = StreamGuardMiddleware(stream_app, on_report=ReportQueue(slow), metrics=False)

    async def main() -> None:
        client = Recorder(incoming=[{"type": "http.request", "body": b""}])
        stream = asyncio.ensure_future(middleware(http_scope(), client.receive, client.send))
        await asyncio.sleep(0.01)
        middleware.app = ScriptedApp(["receive"])
        server = Recorder(incoming=[{"type": "lifespan.shutdown"}])
        await middleware({"type": "lifespan"}, server.receive, server.send)
        assert [r.outcome for r in delivered] == [Outcome.CANCELLED]
        stream.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stream

    asyncio.run(main())


# -- shutdown --------------------------------------------------------------------------------


def test_lifespan_shutdown_reports_open_streams() -> None:
    """Streams still open when the server shuts down are reported as ``cancelled``, once."""
    reports: list[StreamReport] = []
    stream_app = ScriptedApp(["receive", sse_start(), body(b"data: one\n\n"), "receive"])
    middleware = StreamGuardMiddleware(stream_app, on_report=reports.append)
    lifespan_app = ScriptedApp(["receive"])

    async def main() -> None:
        client = Recorder(incoming=[{"type": "http.request", "body": b""}])
        stream = asyncio.ensure_future(middleware(http_scope(), client.receive, client.send))
        await asyncio.sleep(0.01)  # the stream is open, its app waiting on receive
        assert middleware.in_flight == 1
        middleware.app = lifespan_app
        server = Recorder(incoming=[{"type": "lifespan.shutdown"}])
        await middleware({"type": "lifespan"}, server.receive, server.send)
        assert [(r.outcome, r.events) for r in reports] == [(Outcome.CANCELLED, 1)]
        assert "shutdown" in reports[0].notes[-1]
        assert middleware.in_flight == 0
        stream.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stream

    asyncio.run(main())
    assert len(reports) == 1  # the stream's own end, later, reports nothing twice


def test_a_stream_reported_at_shutdown_may_go_on_sending() -> None:
    """After a shutdown report, the app's further body is not ``body_after_end``."""
    logged: list[str] = []
    reports: list[StreamReport] = []
    sent = [sse_start(), body(b"data: one\n\n")]
    middleware = StreamGuardMiddleware(ScriptedApp([]), on_report=reports.append)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        for message in sent:
            await send(message)
        middleware.report_open_streams()
        await send(body(b"data: two\n\n"))
        await send(body(b"", more=False))

    middleware.app = app
    with capture_logs() as logs:
        recorder, raised = run(middleware)
    logged = [entry.get("rule") for entry in logs if entry["event"] == "stream_violation"]
    assert raised is None
    assert len(recorder.sent) == 4
    assert [r.outcome for r in reports] == [Outcome.CANCELLED]
    assert "body_after_end" not in logged
