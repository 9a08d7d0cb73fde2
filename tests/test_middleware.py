"""The middleware under a scripted ASGI driver: pass-through, outcomes, hygiene, faults."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

import streamguard.middleware
from streamguard import Outcome, StreamGuardMiddleware, StreamReport

from .asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start
from .helpers import break_monitors


def guarded(
    app: ScriptedApp | Starlette, **options: object
) -> tuple[StreamGuardMiddleware, list[StreamReport]]:
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(app, on_report=reports.append, **options)  # type: ignore[arg-type]
    return middleware, reports


HEALTHY = [
    sse_start(),
    body(b"data: one\n\nda"),
    body(b"ta: two\n"),
    body(b"\n"),
    body(b"", more=False),
]


def test_forwards_every_message_unchanged_and_in_order() -> None:
    """The client receives the very message objects the app sent, in the same order."""
    app = ScriptedApp(HEALTHY)
    middleware, _reports = guarded(app)
    recorder, raised = run(middleware)
    assert raised is None
    assert len(recorder.sent) == len(HEALTHY)
    assert all(sent is original for sent, original in zip(recorder.sent, HEALTHY, strict=True))
    assert HEALTHY[1] == body(b"data: one\n\nda")  # not mutated either


def test_completed_stream_report() -> None:
    """A body ended with more_body=False is ``completed``, with exact counts."""
    middleware, reports = guarded(ScriptedApp(HEALTHY))
    run(middleware)
    [report] = reports
    assert report.outcome is Outcome.COMPLETED
    assert report.findings == ()
    assert (report.events, report.bytes, report.body_messages) == (2, 22, 4)
    assert report.path == "/stream"
    assert report.protocol == "sse"
    assert middleware.in_flight == 0


def test_event_split_across_body_messages_is_seen_once() -> None:
    """An event cut at any byte between messages is dispatched once, at its completion."""
    data = b"data: alpha\n\ndata: beta\n\n"
    for cut in range(len(data) + 1):
        steps = [sse_start(), body(data[:cut]), body(data[cut:]), body(b"", more=False)]
        middleware, reports = guarded(ScriptedApp(steps))
        run(middleware)
        assert (reports[0].events, reports[0].findings) == (2, ()), cut


def test_app_returning_without_final_body_is_unclosed() -> None:
    """An app that returns before more_body=False leaves the stream ``unclosed``."""
    middleware, reports = guarded(ScriptedApp([sse_start(), body(b"data: a\n\n")]))
    _, raised = run(middleware)
    assert raised is None
    [report] = reports
    assert report.outcome is Outcome.UNCLOSED
    assert report.rules() == ["response_not_finished"]
    assert middleware.in_flight == 0


def test_partial_frame_at_body_end_is_reported() -> None:
    """A body that ends mid-event is ``completed`` for plain SSE but has ``unterminated_frame``."""
    steps = [sse_start(), body(b"data: a\n\ndata: b"), body(b"", more=False)]
    middleware, reports = guarded(ScriptedApp(steps))
    run(middleware)
    assert reports[0].outcome is Outcome.COMPLETED
    assert reports[0].rules() == ["unterminated_frame"]


def test_disconnect_seen_on_receive_then_return_is_client_disconnect() -> None:
    """A stream the app stops after ``http.disconnect`` is the client's doing, not unclosed."""
    app = ScriptedApp([sse_start(), body(b"data: a\n\n"), "receive", "receive"])
    recorder = Recorder(
        incoming=[{"type": "http.request", "body": b""}, {"type": "http.disconnect"}]
    )
    middleware, reports = guarded(app)
    run(middleware, recorder=recorder)
    assert app.received == [{"type": "http.request", "body": b""}, {"type": "http.disconnect"}]
    [report] = reports
    assert report.outcome is Outcome.CLIENT_DISCONNECT
    assert report.findings == ()


def test_oserror_from_send_is_client_disconnect_and_propagates() -> None:
    """OSError from ``send`` (ASGI 2.4) marks a disconnect and reaches the app unchanged."""
    recorder = Recorder(fail_after=2)
    app = ScriptedApp([sse_start(), body(b"data: a\n\n"), body(b"data: b\n\n")])
    middleware, reports = guarded(app)
    _, raised = run(middleware, recorder=recorder)
    assert raised is recorder.failure
    assert reports[0].outcome is Outcome.CLIENT_DISCONNECT
    assert middleware.in_flight == 0


def test_app_exception_is_app_error_and_same_object_propagates() -> None:
    """An exception from the app is ``app_error`` and is re-raised as the same object."""
    error = ValueError("model crashed")
    middleware, reports = guarded(ScriptedApp([sse_start(), body(b"data: a\n\n"), error]))
    _, raised = run(middleware)
    assert raised is error
    assert reports[0].outcome is Outcome.APP_ERROR
    assert reports[0].findings == ()
    assert middleware.in_flight == 0


def test_cancellation_is_cancelled_and_propagates() -> None:
    """A cancelled task is ``cancelled``, and the CancelledError is re-raised unchanged."""
    cancel = asyncio.CancelledError()
    middleware, reports = guarded(ScriptedApp([sse_start(), body(b"data: a\n\n"), cancel]))
    _, raised = run(middleware)
    assert raised is cancel
    assert reports[0].outcome is Outcome.CANCELLED
    assert middleware.in_flight == 0


def test_exception_after_body_end_keeps_the_stream_outcome() -> None:
    """A failure after the body ended (a background task) does not rewrite the report."""
    error = RuntimeError("background task failed")
    middleware, reports = guarded(ScriptedApp([*HEALTHY, error]))
    _, raised = run(middleware)
    assert raised is error
    assert [r.outcome for r in reports] == [Outcome.COMPLETED]


def test_starlette_streaming_response_cancelled_by_disconnect() -> None:
    """A StreamingResponse that Starlette stops on disconnect is ``client_disconnect``."""

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"data: tick\n\n"
            await asyncio.sleep(0.001)

    async def endpoint(request: Request) -> Response:
        return StreamingResponse(endless(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/stream", endpoint)])
    middleware, reports = guarded(app)

    class DisconnectLater(Recorder):
        async def receive(self) -> Message:
            if not self.incoming:
                await asyncio.sleep(0.02)
                return {"type": "http.disconnect"}
            return self.incoming.pop(0)

    recorder = DisconnectLater(incoming=[{"type": "http.request", "body": b""}])
    _, raised = run(middleware, recorder=recorder)
    assert raised is None
    assert recorder.sent[-1].get("more_body") is True  # the body was never finished
    [report] = reports
    assert report.outcome is Outcome.CLIENT_DISCONNECT
    assert report.events >= 1
    assert report.findings == ()


@pytest.mark.parametrize(
    ("start", "reason"),
    [
        (sse_start(status=404), "status"),
        (sse_start(status=500), "status"),
        (
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            },
            "content_type",
        ),
        ({"type": "http.response.start", "status": 200, "headers": []}, "content_type"),
        (
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-streamx")],
            },
            "content_type",
        ),
    ],
)
def test_unwatched_responses_pass_through_without_report(start: Message, reason: str) -> None:
    """Non-2xx and non-SSE responses are forwarded untouched and only counted as skipped."""
    steps = [start, body(b"data: a\n\ndata: b"), body(b"", more=False)]
    middleware, reports = guarded(ScriptedApp(steps))
    recorder, _ = run(middleware)
    assert recorder.sent == steps
    assert reports == []
    assert middleware.skipped == {reason: 1}
    assert middleware.in_flight == 0


def test_media_type_match_ignores_case_and_parameters() -> None:
    """``Text/Event-Stream; charset=UTF-8`` is an event stream, and utf-8 is fine."""
    start = {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"Content-Type", b'Text/Event-Stream; charset="UTF-8"')],
    }
    middleware, reports = guarded(ScriptedApp([start, body(b"data: a\n\n", more=False)]))
    run(middleware)
    assert [(r.events, r.findings) for r in reports] == [(1, ())]


def test_head_requests_are_not_wrapped() -> None:
    """HEAD requests get the original receive and send, and no report."""
    app = ScriptedApp([sse_start(), body(b"", more=False)])
    middleware, reports = guarded(app)
    recorder = Recorder()
    run(middleware, http_scope(method="HEAD"), recorder)
    assert app.send_used == recorder.send
    assert app.receive_used == recorder.receive
    assert reports == []
    assert middleware.skipped == {"head": 1}


def test_websocket_scopes_pass_straight_through() -> None:
    """websocket scopes see the server's own receive and send."""
    app = ScriptedApp([{"type": "websocket.anything"}])
    middleware, reports = guarded(app)
    recorder = Recorder()
    run(middleware, {"type": "websocket"}, recorder)
    assert app.send_used == recorder.send
    assert app.receive_used == recorder.receive
    assert recorder.sent == [{"type": "websocket.anything"}]
    assert reports == []


def test_lifespan_messages_pass_unchanged() -> None:
    """lifespan sees the server's own send, and every message it receives unchanged."""
    startup, shutdown = {"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}
    app = ScriptedApp(["receive", {"type": "lifespan.startup.complete"}, "receive"])
    middleware, reports = guarded(app)
    recorder = Recorder(incoming=[startup, shutdown])
    run(middleware, {"type": "lifespan"}, recorder)
    assert app.send_used == recorder.send
    assert app.received[0] is startup
    assert app.received[1] is shutdown
    assert recorder.sent == [{"type": "lifespan.startup.complete"}]
    assert reports == []


def test_unknown_message_types_and_pathsend_pass_through() -> None:
    """Messages the middleware does not know are forwarded as they are."""
    odd = {"type": "http.response.debug", "info": {"x": 1}}
    pathsend = {"type": "http.response.pathsend", "path": "/tmp/file"}
    json_start = {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-type", b"application/json")],
    }
    middleware, _ = guarded(ScriptedApp([json_start, odd, pathsend]))
    recorder, _ = run(middleware)
    assert recorder.sent == [json_start, odd, pathsend]


def test_pathsend_ends_a_watched_stream_uninspected() -> None:
    """An event stream sent as a file is reported as ended but not inspected."""
    steps = [sse_start(), {"type": "http.response.pathsend", "path": "/tmp/x"}]
    middleware, reports = guarded(ScriptedApp(steps))
    recorder, _ = run(middleware)
    assert recorder.sent == steps
    assert [(r.outcome, r.inspected) for r in reports] == [(Outcome.COMPLETED, False)]


def test_content_length_on_stream() -> None:
    """An event stream with Content-Length gets a ``content_length_on_stream`` finding."""
    start = sse_start((b"content-length", b"9"))
    middleware, reports = guarded(ScriptedApp([start, body(b"data: a\n\n", more=False)]))
    run(middleware)
    assert reports[0].rules() == ["content_length_on_stream"]
    assert "'9'" in reports[0].findings[0].message


@pytest.mark.parametrize(
    ("charset", "rules"),
    [
        (b"utf-8", []),
        (b"UTF8", []),
        (b'"utf-8"', []),
        (b"iso-8859-1", ["bad_content_type_charset"]),
        (b"latin1", ["bad_content_type_charset"]),
    ],
)
def test_content_type_charset(charset: bytes, rules: list[str]) -> None:
    """Only a utf-8 charset parameter (any case, quoted or not) is accepted."""
    start = {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-type", b"text/event-stream; charset=" + charset)],
    }
    middleware, reports = guarded(ScriptedApp([start, body(b"data: a\n\n", more=False)]))
    run(middleware)
    assert reports[0].rules() == rules


def test_compressed_stream_is_reported_and_not_inspected() -> None:
    """A compressed stream is passed through uninspected with a ``compressed_stream`` finding."""
    start = sse_start((b"content-encoding", b"gzip"))
    steps = [start, body(b"\x1f\x8b\x08\x00garbage"), body(b"", more=False)]
    middleware, reports = guarded(ScriptedApp(steps))
    recorder, _ = run(middleware)
    assert recorder.sent == steps
    [report] = reports
    assert report.rules() == ["compressed_stream"]
    assert (report.inspected, report.outcome, report.bytes) == (False, Outcome.COMPLETED, 11)
    assert middleware.skipped == {"content_encoding": 1}


def test_identity_content_encoding_is_inspected() -> None:
    """``Content-Encoding: identity`` is not compression."""
    start = sse_start((b"content-encoding", b"identity"))
    middleware, reports = guarded(ScriptedApp([start, body(b"data: a\n\n", more=False)]))
    run(middleware)
    assert (reports[0].inspected, reports[0].findings) == (True, ())


def test_internal_error_stops_watching_only_that_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in checking (``feed``) never reaches the app or the client; the report names
    it, nothing more is checked on that stream, and the next stream is watched. (A stand-in
    monitor's messages take the exchange's ``send``; a real monitor's body messages take
    ``Forward``, whose guard ``test_plugin_boundary`` holds with a checker that raises.)"""
    method = "feed"
    calls = 0

    def broken(self: Any, *args: Any) -> object:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ZeroDivisionError("checker bug")
        return getattr(self.real, method)(*args)

    break_monitors(monkeypatch, streamguard.middleware, method, broken)
    middleware, reports = guarded(ScriptedApp(HEALTHY))
    recorder, raised = run(middleware)
    assert raised is None
    assert recorder.sent == HEALTHY
    [report] = reports
    # Type and place only: an exception's message may quote what the stream sent.
    assert report.internal_error is not None
    assert report.internal_error.startswith("ZeroDivisionError in broken (test_middleware.py:")
    assert (report.inspected, report.outcome) == (False, Outcome.COMPLETED)
    assert report.events == 1  # the second event, completed after the failure, was not read
    assert middleware.internal_errors == 1

    monkeypatch.undo()
    run(middleware)  # the next stream is watched normally
    assert (reports[1].internal_error, reports[1].events) == (None, 2)


def test_failing_report_callback_is_contained() -> None:
    """An exception in ``on_report`` is counted, not raised into the app."""

    def explode(report: StreamReport) -> None:
        raise RuntimeError("sink down")

    middleware = StreamGuardMiddleware(ScriptedApp(HEALTHY), on_report=explode)
    recorder, raised = run(middleware)
    assert raised is None
    assert recorder.sent == HEALTHY
    assert middleware.internal_errors == 1


def test_rejects_unknown_protocol() -> None:
    """An unknown protocol name is a construction error that lists the known ones."""
    with pytest.raises(ValueError, match=r"unknown protocol 'gopher'; expected one of: .*\bauto\b"):
        StreamGuardMiddleware(ScriptedApp([]), protocol="gopher")


def test_concurrent_senders_are_fed_in_call_order() -> None:
    """Two tasks sending on one stream are checked in the order they called ``send``."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send(sse_start())

        async def pinger() -> None:
            for _ in range(5):
                await send(body(b": ping\r\n\r\n"))
                await asyncio.sleep(0)

        task = asyncio.create_task(pinger())
        for i in range(5):
            await send(body(b"data: %d\r\n\r\n" % i))
            await asyncio.sleep(0)
        await task
        await send(body(b"", more=False))

    middleware, reports = guarded(app)  # type: ignore[arg-type]
    recorder, _ = run(middleware)
    assert len(recorder.sent) == 12
    assert (reports[0].events, reports[0].findings) == (5, ())


def test_cancelled_while_sending_the_last_body_message_is_completed() -> None:
    """A sender cancelled while handing over more_body=False, once the client's disconnect
    went by (hypercorn's trio worker), still ended its body."""
    cancel = asyncio.CancelledError()
    recorder = Recorder(incoming=[{"type": "http.disconnect"}], fail_after=4, failure=cancel)
    middleware, reports = guarded(ScriptedApp([*HEALTHY[:-1], "receive", HEALTHY[-1]]))
    _, raised = run(middleware, recorder=recorder)
    assert raised is cancel
    assert [(r.outcome, r.events) for r in reports] == [(Outcome.COMPLETED, 2)]
    assert middleware.in_flight == 0


def test_oserror_on_the_last_body_message_is_client_disconnect() -> None:
    """OSError on the final body message means the client never got the end."""
    recorder = Recorder(incoming=[{"type": "http.request", "body": b""}], fail_after=4)
    middleware, reports = guarded(ScriptedApp(HEALTHY))
    _, raised = run(middleware, recorder=recorder)
    assert raised is recorder.failure
    assert [r.outcome for r in reports] == [Outcome.CLIENT_DISCONNECT]


def test_a_stream_counts_in_flight_until_its_report_is_delivered() -> None:
    """in_flight falls to zero only after on_report has the report, not between the two."""
    seen: list[int] = []
    middleware = StreamGuardMiddleware(
        ScriptedApp(HEALTHY), on_report=lambda report: seen.append(middleware.in_flight)
    )
    run(middleware)
    assert seen == [1]
    assert middleware.in_flight == 0
