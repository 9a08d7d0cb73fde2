"""Never hurt the stream: byte identity, fail-open, hostile input, cardinality, shutdown."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from structlog.testing import capture_logs

import streamguard.middleware
from streamguard import (
    EventParser,
    Outcome,
    StreamGuardMiddleware,
    StreamMonitor,
    StreamReport,
    check_stream,
    sse,
)
from streamguard.logs import StreamLog
from streamguard.metrics import StreamMetrics
from streamguard.protocols import CHECKERS, Checker
from streamguard.testing import serve

from .asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start
from .helpers import break_monitors, peak_memory
from .slope import peak_slope

PROTOCOLS = sorted(["auto", *CHECKERS])

# -- byte identity -------------------------------------------------------------------------


@st.composite
def bodies(draw: st.DrawFn) -> list[dict[str, Any]]:
    pieces = st.one_of(
        st.binary(max_size=300),
        st.sampled_from([b"data: [DONE]\n\n", b"event: message_stop\n", b"\r", b"\n", b""]),
        st.builds(lambda n: b"data: " + b"x" * n + b"\n\n", st.integers(0, 5000)),
    )
    chunks = draw(st.lists(pieces, max_size=25))
    messages = [body(chunk) for chunk in chunks]
    messages.append(body(draw(pieces), more=False))
    return messages


@settings(max_examples=200, deadline=None)
@given(messages=bodies(), protocol=st.sampled_from(PROTOCOLS))
def test_any_output_reaches_the_client_unchanged(
    messages: list[dict[str, Any]], protocol: str
) -> None:
    """For any bytes and any chunking, the client gets the app's very messages, unaltered."""
    copies = [dict(message) for message in messages]
    steps = [sse_start(), *messages]
    middleware = StreamGuardMiddleware(
        ScriptedApp(steps), protocol=protocol, metrics=False, logs={"enabled": False}
    )
    recorder, raised = run(middleware)
    assert raised is None
    assert len(recorder.sent) == len(steps)
    assert all(a is b for a, b in zip(recorder.sent, steps, strict=True))
    assert messages == copies
    assert middleware.internal_errors == 0


# -- fail-open -----------------------------------------------------------------------------


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("injected fault")


INJECTED = f"RuntimeError in _boom (test_reliability.py:{_boom.__code__.co_firstlineno + 1})"


def _faulty_checker(name: str) -> Callable[[pytest.MonkeyPatch], None]:
    """Registers, in place of a protocol's checker, one with the same name and lifecycle
    whose ``check_event`` fails: the registry is the seam, since a compiled checker's
    methods cannot be patched (a protocol of one's own plugs in the same way)."""

    def inject(monkeypatch: pytest.MonkeyPatch) -> None:
        real = CHECKERS[name]
        attributes = {
            "name": real.name,
            "has_terminal": real.has_terminal,
            "LIFECYCLE": real.LIFECYCLE,
            "check_event": _boom,
        }
        monkeypatch.setitem(CHECKERS, name, type(f"Faulty{real.__name__}", (Checker,), attributes))

    return inject


def _failing(owner: Any, method: str) -> Callable[[pytest.MonkeyPatch], None]:
    return lambda monkeypatch: monkeypatch.setattr(owner, method, _boom)


def _faults() -> Iterator[tuple[str, Callable[[pytest.MonkeyPatch], None]]]:
    yield "monitor", lambda mp: break_monitors(mp, streamguard.middleware, "feed", _boom)
    for name in sorted(CHECKERS):
        yield f"checker:{name}", _faulty_checker(name)
    yield "metrics:start", _failing(StreamMetrics, "stream_started")
    yield "metrics:violation", _failing(StreamMetrics, "violation")
    yield "metrics:end", _failing(StreamMetrics, "stream_ended")
    yield "logs:violation", _failing(StreamLog, "violation")
    yield "logs:end", _failing(StreamLog, "ended")


FAULTS = list(_faults())


@pytest.mark.parametrize(("where", "inject"), FAULTS, ids=[f[0] for f in FAULTS])
def test_a_fault_anywhere_is_contained(
    where: str, inject: Callable[[pytest.MonkeyPatch], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault in the monitor, a checker or a sink: delivered, counted once, logged once."""
    registry = CollectorRegistry()
    protocol = where.split(":")[1] if where.startswith("checker:") else "sse"
    steps = [sse_start(), body(b"data: {}\n\n"), body(b"data: \xff"), body(b"", more=False)]
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        ScriptedApp(steps), protocol=protocol, metrics=registry, on_report=reports.append
    )
    inject(monkeypatch)
    with capture_logs() as logs:
        recorder, raised = run(middleware)
    assert raised is None
    assert recorder.sent == steps
    assert middleware.internal_errors == 1
    errors = [entry for entry in logs if entry["event"] == "streamguard_internal_error"]
    assert len(errors) == 1
    # The type and the place only: an exception's message may quote what the stream sent.
    assert errors[0]["error"] == INJECTED
    assert (
        registry.get_sample_value(
            "streamguard_internal_errors_total", {"route": "__unknown__", "protocol": protocol}
        )
        == 1
    )
    if not where.startswith(("metrics:end", "logs:end")):
        assert reports[0].internal_error == INJECTED
        assert reports[0].inspected is False

    monkeypatch.undo()  # only that stream stopped being watched
    reports.clear()
    run(middleware)
    assert reports[0].internal_error is None
    assert middleware.internal_errors == 1


def test_app_exceptions_propagate_as_the_same_object_under_faults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Even with streamguard failing, the app's own exception reaches the server unchanged."""
    break_monitors(monkeypatch, streamguard.middleware, "feed", _boom)
    error = KeyError("app bug")
    middleware = StreamGuardMiddleware(
        ScriptedApp([sse_start(), body(b"data: a\n\n"), error]), metrics=False
    )
    _, raised = run(middleware)
    assert raised is error


# -- hostile streams -----------------------------------------------------------------------


def feed_all(chunks: Iterator[bytes], protocol: str = "sse", limit: int = 1 << 20) -> StreamReport:
    monitor = StreamMonitor(protocol, max_event_bytes=limit)
    for chunk in chunks:
        monitor.feed(chunk)
    return monitor.finish(__import__("streamguard").StreamEnd.BODY_ENDED)


def test_hundred_megabytes_without_a_line_ending_is_bounded() -> None:
    """100 MB with no line ending: one finding, memory bounded by the event limit."""
    chunk = b"x" * 65536

    def work() -> StreamReport:
        return feed_all((chunk for _ in range(1600)), limit=1 << 20)

    report, peak = peak_memory(work)
    assert report.rules() == ["event_too_large"]
    assert report.bytes == 1600 * 65536
    assert peak < 4 << 20


def test_a_million_tiny_events() -> None:
    """A million minimal events are all dispatched, with memory independent of the count.

    Proven from the slope: every event of runs of 10,000 and 50,000 is dispatched, and the
    peak extended along the line through them to a million stays under 8 MiB. The parser
    keeps nothing per event it has dispatched (no finding, no name: ``data:`` only), so no
    bound past 50,000 could hide growth.
    """
    chunk = b"data:\n\n" * 10_000

    def work(events: int) -> StreamReport:
        return feed_all(chunk for _ in range(events // 10_000))

    slope = peak_slope(lambda events: events, work, 10_000, 50_000)
    assert (slope.result.events, slope.result.findings) == (50_000, ())
    assert slope.extrapolated(1_000_000) < 8 << 20, str(slope)


@pytest.mark.parametrize("protocol", ["openai_chat", "openai_responses", "anthropic", "gemini"])
def test_deeply_nested_json_is_a_finding_not_a_crash(protocol: str) -> None:
    """JSON nested 100,000 deep gives a finding; the recursion limit never crashes a check."""
    nested = b"[" * 100_000 + b"]" * 100_000
    report = check_stream([b"data: " + nested + b"\n\n"], protocol=protocol)
    assert report.internal_error is None
    assert report.malformed


@pytest.mark.parametrize("protocol", ["openai_chat", "anthropic", "gemini"])
def test_huge_json_number_is_a_finding_not_a_crash(protocol: str) -> None:
    """A JSON number with 100,000 digits is handled without crashing or hanging."""
    number = b"9" * 100_000
    report = check_stream(
        [b'data: {"created": ' + number + b', "index": ' + number + b"}\n\n"], protocol=protocol
    )
    assert report.internal_error is None
    assert report.malformed


def test_nul_bytes_invalid_utf8_and_midstream_bom() -> None:
    """NUL bytes are data, invalid UTF-8 is one finding, a mid-stream BOM is an unknown field."""
    body_bytes = b"data: a\x00b\n\n\xef\xbb\xbfdata: c\n\ndata: \xff\xfe\n\n"
    report = check_stream([body_bytes])
    assert report.events == 2
    assert report.rules() == ["unknown_field", "invalid_utf8"]


def test_megabyte_event_name() -> None:
    """A megabyte-long event name is bounded by the limit, and never cached when allowed."""
    name = b"n" * (1 << 20)
    report = check_stream([b"event: " + name + b"\ndata: x\n\n"], max_event_bytes=64 * 1024)
    assert report.rules() == ["event_too_large"]
    parser = EventParser(max_event_bytes=4 << 20)
    [event] = parser.feed(b"event: " + name + b"\ndata: x\n\n")
    assert len(event.event) == 1 << 20
    assert parser._event_names is None
    assert name not in sse._SHARED_EVENT_NAMES


def test_very_long_line_split_in_tiny_chunks_is_linear() -> None:
    """A 4 MB line fed 7 bytes at a time completes (no quadratic re-scanning)."""
    line = b"data: " + b"y" * (4 << 20) + b"\n\n"
    chunks = (line[i : i + 7] for i in range(0, len(line), 7))
    report = feed_all(chunks, limit=8 << 20)
    assert (report.events, report.findings) == (1, ())


# -- cardinality ---------------------------------------------------------------------------


def test_ten_thousand_distinct_paths_add_no_series() -> None:
    """10,000 requests to distinct unmatched paths leave the exported series unchanged."""
    registry = CollectorRegistry()
    steps = [sse_start(), body(b"data: a\n\n", more=False)]
    middleware = StreamGuardMiddleware(
        ScriptedApp(steps), metrics=registry, logs={"enabled": False}, protocol="sse"
    )

    def series() -> set[Any]:
        return {
            (sample.name, tuple(sorted(sample.labels.items())))
            for family in registry.collect()
            for sample in family.samples
        }

    async def many(start: int, count: int) -> None:
        for i in range(start, start + count):
            recorder = Recorder(incoming=[{"type": "http.request", "body": b""}])
            await middleware(
                http_scope(path=f"/u/{i}", query_string=b"k=%d" % i),
                recorder.receive,
                recorder.send,
            )

    asyncio.run(many(0, 1))
    before = series()
    asyncio.run(many(1, 10_000))
    assert series() == before
    labels = {"route": "__unknown__", "protocol": "sse"}
    assert registry.get_sample_value("streamguard_streams_started_total", labels) == 10_001


# -- shutdown ------------------------------------------------------------------------------


def test_server_shutdown_cancels_open_streams_and_flushes_reports() -> None:
    """Stopping uvicorn with streams open reports them ``cancelled`` and leaves no task."""
    reports: list[StreamReport] = []
    opened = threading.Event()

    async def endless(request: Request) -> Response:
        async def frames() -> AsyncIterator[bytes]:
            while True:
                yield b"data: tick\n\n"
                opened.set()
                await asyncio.sleep(0.01)

        return StreamingResponse(frames(), media_type="text/event-stream")

    middleware = StreamGuardMiddleware(
        Starlette(routes=[Route("/endless", endless)]), metrics=False, on_report=reports.append
    )
    outcome: list[str] = []

    def read(url: str) -> None:
        try:
            with httpx.stream("GET", url, timeout=10) as response:
                for _ in response.iter_raw():
                    pass
            outcome.append("ended")
        except httpx.HTTPError as exc:
            outcome.append(type(exc).__name__)

    with serve(middleware, timeout_graceful_shutdown=0.2) as url:
        reader = threading.Thread(target=read, args=(f"{url}/endless",))
        reader.start()
        assert opened.wait(5)
    reader.join(10)
    deadline = time.monotonic() + 5
    while not reports and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [r.outcome for r in reports] in ([Outcome.CANCELLED], [Outcome.CLIENT_DISCONNECT])
    assert middleware.in_flight == 0
    assert all(not s.running for s in middleware._sweepers.values())
