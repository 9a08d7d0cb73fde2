"""How a stream's end becomes its outcome: every cell of the table, and the middleware's part."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from starlette.types import Receive, Scope, Send

from streamguard import Outcome, StreamGuardMiddleware, StreamReport
from streamguard.logs import StreamLog
from streamguard.monitor import DELIVERED, OUTCOMES, StreamEnd, StreamMonitor

from .asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start

CHUNK = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
)
DONE = b"data: [DONE]\n\n"
ERROR = b'data: {"error":{"message":"overloaded","type":"server_error"}}\n\n'

#: What each column of the table needs the stream to have sent.
STREAMS = {
    "error": ("openai_chat", [CHUNK, ERROR]),
    "terminal": ("openai_chat", [CHUNK, DONE]),
    "neither": ("openai_chat", [CHUNK]),
    "unjudged": ("sse", [b"data: a\n\n"]),
}

C, E, U, D = (
    Outcome.COMPLETED,
    Outcome.ERROR_EVENT,
    Outcome.UNCLOSED,
    Outcome.CLIENT_DISCONNECT,
)
#: The table as documented in docs/index.md, written out independently of the code.
EXPECTED = {
    StreamEnd.BODY_ENDED: {"error": E, "terminal": C, "neither": U, "unjudged": C},
    StreamEnd.CLIENT_DISCONNECT: {"error": E, "terminal": C, "neither": D, "unjudged": D},
    StreamEnd.APP_RETURNED: dict.fromkeys(DELIVERED, U),
    StreamEnd.APP_ERROR: dict.fromkeys(DELIVERED, Outcome.APP_ERROR),
    StreamEnd.CANCELLED: dict.fromkeys(DELIVERED, Outcome.CANCELLED),
    StreamEnd.CONNECTION_LOST: dict.fromkeys(DELIVERED, Outcome.CONNECTION_LOST),
    StreamEnd.READ_TIMEOUT: {"error": E, "terminal": C, "neither": D, "unjudged": D},
}
#: The ends at which the client closed the connection.
CLIENT_CLOSES = (StreamEnd.CLIENT_DISCONNECT, StreamEnd.READ_TIMEOUT)
CELLS = [(end, column) for end in StreamEnd for column in DELIVERED]


def test_the_table_covers_every_end() -> None:
    """Every end has a row, and every row a cell per column."""
    assert set(OUTCOMES) == set(StreamEnd)
    assert all(len(row) == len(DELIVERED) for row in OUTCOMES.values())


@pytest.mark.parametrize(("end", "column"), CELLS, ids=[f"{e.value}-{c}" for e, c in CELLS])
def test_every_cell(end: StreamEnd, column: str) -> None:
    """The monitor gives each (end, what was delivered) pair its documented outcome."""
    protocol, chunks = STREAMS[column]
    monitor = StreamMonitor(protocol)
    for chunk in chunks:
        monitor.feed(chunk)
    report = monitor.finish(end)
    assert report.outcome is EXPECTED[end][column]
    late_close = end in CLIENT_CLOSES and column in ("error", "terminal")
    assert report.client_closed_after_end is late_close


def test_a_terminal_not_delivered_does_not_count() -> None:
    """With hand-over tracking, a [DONE] fed but never confirmed leaves the stream cut."""
    monitor = StreamMonitor("openai_chat", confirms_delivery=True)
    monitor.feed(CHUNK)
    monitor.delivered()
    monitor.feed(DONE)  # the send carrying it failed: no delivered()
    report = monitor.finish(StreamEnd.CLIENT_DISCONNECT)
    assert (report.outcome, report.client_closed_after_end) == (D, False)


def test_a_terminal_delivered_counts() -> None:
    """The same stream with the [DONE] confirmed is completed, the close a fact."""
    monitor = StreamMonitor("openai_chat", confirms_delivery=True)
    monitor.feed(CHUNK + DONE)
    monitor.delivered()
    report = monitor.finish(StreamEnd.CLIENT_DISCONNECT)
    assert (report.outcome, report.client_closed_after_end) == (C, True)


# -- through the middleware ----------------------------------------------------------------


def _guarded(app: object) -> tuple[StreamGuardMiddleware, list[StreamReport]]:
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        app,  # type: ignore[arg-type]
        protocol="openai_chat",
        on_report=reports.append,
        metrics=False,
    )
    return middleware, reports


@pytest.mark.parametrize(
    ("last", "outcome"), [(DONE, Outcome.COMPLETED), (ERROR, Outcome.ERROR_EVENT)]
)
def test_client_closing_after_the_end_keeps_the_end(last: bytes, outcome: Outcome) -> None:
    """A client that leaves after the terminal or the error does not make it a disconnect."""
    steps = [sse_start(), body(CHUNK), body(last), "receive", body(b"", more=False)]
    recorder = Recorder(
        incoming=[{"type": "http.request", "body": b""}, {"type": "http.disconnect"}],
        fail_after=3,  # the body's end finds the client gone
    )
    middleware, reports = _guarded(ScriptedApp(["receive", *steps]))
    _, raised = run(middleware, recorder=recorder)
    assert isinstance(raised, OSError)
    [report] = reports
    assert (report.outcome, report.client_closed_after_end) == (outcome, True)


def test_client_closing_before_the_end_is_a_disconnect() -> None:
    """Without a terminal delivered, the client leaving is ``client_disconnect``."""
    steps = ["receive", sse_start(), body(CHUNK), "receive", body(DONE)]
    recorder = Recorder(
        incoming=[{"type": "http.request", "body": b""}, {"type": "http.disconnect"}],
        fail_after=2,
    )
    middleware, reports = _guarded(ScriptedApp(steps))
    run(middleware, recorder=recorder)
    [report] = reports
    assert (report.outcome, report.client_closed_after_end) == (D, False)


def test_an_exception_from_the_final_send_is_not_completed() -> None:
    """The server refusing the message that carries [DONE] means the client never got it."""
    failure = RuntimeError("Response content longer than Content-Length")
    recorder = Recorder(
        incoming=[{"type": "http.request", "body": b""}], fail_after=2, failure=failure
    )
    middleware, reports = _guarded(ScriptedApp([sse_start(), body(CHUNK), body(DONE, more=False)]))
    _, raised = run(middleware, recorder=recorder)
    assert raised is failure
    [report] = reports
    assert report.outcome is Outcome.APP_ERROR


def test_cancelled_during_the_final_send_after_a_disconnect_still_ended_the_body() -> None:
    """Cancellation while handing over more_body=False once the client's disconnect went by
    (hypercorn's trio worker, then Starlette cancelling the sender) completes."""
    cancel = asyncio.CancelledError()
    recorder = Recorder(incoming=[{"type": "http.disconnect"}], fail_after=2, failure=cancel)
    steps = [sse_start(), body(CHUNK), "receive", body(DONE, more=False)]
    middleware, reports = _guarded(ScriptedApp(steps))
    _, raised = run(middleware, recorder=recorder)
    assert raised is cancel
    assert [r.outcome for r in reports] == [Outcome.COMPLETED]


def test_the_apps_own_cancel_of_the_final_send_is_not_completed() -> None:
    """The app's timeout cancelling the final send (a slow reader held it) never delivered
    the terminal: the stream is cancelled, not completed."""
    cancel = asyncio.CancelledError()
    recorder = Recorder(
        incoming=[{"type": "http.request", "body": b""}], fail_after=2, failure=cancel
    )
    middleware, reports = _guarded(ScriptedApp([sse_start(), body(CHUNK), body(DONE, more=False)]))
    _, raised = run(middleware, recorder=recorder)
    assert raised is cancel
    assert [r.outcome for r in reports] == [Outcome.CANCELLED]


def test_an_app_that_gives_up_on_its_final_send_left_the_stream_unclosed() -> None:
    """An app that catches its timeout on the final send and returns never delivered the
    terminal: ``unclosed``, with ``response_not_finished``."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send(sse_start())
        await send(body(CHUNK))
        with contextlib.suppress(asyncio.CancelledError):
            await send(body(DONE, more=False))

    cancel = asyncio.CancelledError()
    recorder = Recorder(
        incoming=[{"type": "http.request", "body": b""}], fail_after=2, failure=cancel
    )
    middleware, reports = _guarded(app)
    _, raised = run(middleware, recorder=recorder)
    assert raised is None
    [report] = reports
    assert (report.outcome, report.rules()) == (Outcome.UNCLOSED, ["response_not_finished"])


def test_body_after_the_end_is_the_apps_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """Body sent after more_body=False is a ``body_after_end`` finding, not an internal error."""
    logged: list[str] = []
    monkeypatch.setattr(StreamLog, "violation", lambda self, finding: logged.append(finding.rule))
    steps = [
        sse_start(),
        body(CHUNK + DONE, more=False),
        body(DONE, more=False),
        body(DONE, more=False),
    ]
    middleware, reports = _guarded(ScriptedApp(steps))
    recorder, raised = run(middleware, http_scope())
    assert raised is None
    assert recorder.sent == steps
    assert middleware.internal_errors == 0
    assert logged == ["body_after_end"]  # once per stream
    [report] = reports
    assert report.outcome is Outcome.COMPLETED


@pytest.mark.parametrize(("last", "outcome"), [(b"", D), (DONE, D)])
def test_a_disconnect_seen_before_the_end_wins(last: bytes, outcome: Outcome) -> None:
    """uvicorn drops sends after a disconnect: an app that saw it and ended the body was cut."""
    steps = [sse_start(), body(CHUNK), "receive", body(last, more=False)]
    recorder = Recorder(
        incoming=[{"type": "http.request", "body": b""}, {"type": "http.disconnect"}]
    )
    middleware, reports = _guarded(ScriptedApp(["receive", *steps]))
    run(middleware, recorder=recorder)
    [report] = reports
    assert (report.outcome, report.client_closed_after_end) == (outcome, False)
    assert "missing_terminal" not in report.rules()
