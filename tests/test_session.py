"""The stream session every seam shares: its decisions, each made in one place."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from streamguard import Outcome, check_stream
from streamguard._session import (
    ENDS,
    ResponseHead,
    Side,
    StreamSession,
    classify_end,
    is_cancellation,
    not_an_event_stream,
    read_head,
)
from streamguard.logs import summary_level
from streamguard.monitor import StreamEnd
from streamguard.report import FAILED_OUTCOMES, NOTABLE_OUTCOMES


class Cancelled(BaseException):
    """Named as trio's cancellation is, without importing trio."""


class ReadTimeout(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "server", "client"),
    [
        (None, StreamEnd.APP_RETURNED, StreamEnd.CLIENT_DISCONNECT),
        (ReadTimeout(), StreamEnd.APP_ERROR, StreamEnd.READ_TIMEOUT),
        (OSError(), StreamEnd.APP_ERROR, StreamEnd.CONNECTION_LOST),
        (asyncio.CancelledError(), StreamEnd.CANCELLED, StreamEnd.CLIENT_DISCONNECT),
        (Cancelled(), StreamEnd.CANCELLED, StreamEnd.CLIENT_DISCONNECT),
        (GeneratorExit(), StreamEnd.CANCELLED, StreamEnd.CLIENT_DISCONNECT),
        (KeyboardInterrupt(), StreamEnd.CANCELLED, StreamEnd.CANCELLED),
        (SystemExit(), StreamEnd.CANCELLED, StreamEnd.CANCELLED),
    ],
)
def test_one_table_says_how_a_stream_stopped_before_its_body_ended(
    error: BaseException | None, server: StreamEnd, client: StreamEnd
) -> None:
    """The app's return or exception at the server; the caller's or the connection's at
    the client (a read timeout only where the seam names its timeouts)."""
    assert classify_end(Side.SERVER, error) is server
    assert classify_end(Side.CLIENT, error, timeouts=ReadTimeout) is client
    assert set(ENDS) == set(Side)


def test_a_body_that_ended_wins_and_then_a_client_seen_leaving() -> None:
    for side in Side:
        assert classify_end(side, body_ended=True, client_left=True) is StreamEnd.BODY_ENDED
    assert classify_end(Side.SERVER, ValueError(), client_left=True) is (
        StreamEnd.CLIENT_DISCONNECT
    )


def test_cancellation_is_asyncios_or_trios_only() -> None:
    assert is_cancellation(asyncio.CancelledError())
    assert is_cancellation(Cancelled())
    assert not is_cancellation(KeyboardInterrupt())
    assert not is_cancellation(TimeoutError())


def test_the_head_is_read_once_for_every_seam() -> None:
    """The first value of each header counts, whatever the case of its name."""
    head = read_head(
        200,
        [
            (b"Content-Type", b"text/event-stream; charset=utf-8"),
            (b"content-type", b"application/json"),
            (b"CONTENT-LENGTH", b"9"),
            (b"content-encoding", b"gzip"),
            (b"x-other", b"\xff"),
        ],
    )
    assert head == ResponseHead(200, "text/event-stream; charset=utf-8", "9", "gzip")
    assert read_head(204, []) == ResponseHead(204, None, None, None)


@pytest.mark.parametrize(
    ("status", "content_type", "reason"),
    [
        (200, "text/event-stream", None),
        (299, " Text/Event-Stream ; charset=utf-8", None),
        (199, "text/event-stream", "status"),
        (300, "text/event-stream", "status"),
        (500, "application/json", "status"),
        (200, None, "content_type"),
        (200, "text/event-streams", "content_type"),
        (200, "application/json", "content_type"),
    ],
)
def test_an_event_stream_is_a_2xx_text_event_stream(
    status: int, content_type: str | None, reason: str | None
) -> None:
    assert not_an_event_stream(status, content_type) == reason


def test_failures_are_listed_once_beside_the_outcomes() -> None:
    """The log sink's levels read the report module's lists."""
    assert not FAILED_OUTCOMES & NOTABLE_OUTCOMES
    assert Outcome.COMPLETED not in FAILED_OUTCOMES | NOTABLE_OUTCOMES
    assert Outcome.CLIENT_DISCONNECT not in FAILED_OUTCOMES | NOTABLE_OUTCOMES
    report = check_stream(b"data: clean\n\n", protocol="sse")  # no finding to weigh
    for outcome in Outcome:
        level = summary_level(replace(report, outcome=outcome))
        if outcome in FAILED_OUTCOMES:
            assert level == "error"
        elif outcome in NOTABLE_OUTCOMES:
            assert level == "warning"
        else:
            assert level == "info"


def test_an_offline_session_raises_what_a_seam_would_contain() -> None:
    """A test collector's checking failure is the test's to see."""
    session = StreamSession(None)
    error = RuntimeError("checker bug")
    with pytest.raises(RuntimeError) as raised:
        session.fail("check", error)
    assert raised.value is error
    assert session.end(StreamEnd.BODY_ENDED) is None  # never started: nothing to end
