"""The client's side of an end: a connection lost mid-body, and a reader that gave up waiting."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from streamguard import Outcome, StreamEnd, StreamMonitor
from streamguard.cli import main
from streamguard.config import TimerConfig
from streamguard.testing import acollect, collect, serve

FIRST = b"data: partial\n\n"  # 15 bytes, one event
DONE = b"data: [DONE]\n\n"
#: Only the exception's type may reach a message: its text can quote the peer.
SECRET = "peer-said-something"
STALL = re.compile(
    r"no bytes for (\d+\.\d) s after byte 15: the client stopped waiting \(ReadTimeout\)"
)


def _stalling(*parts: bytes) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        for part in parts:
            yield part
        await asyncio.sleep(30)  # cancelled when the client leaves

    return StreamingResponse(body(), media_type="text/event-stream")


async def stall(request: Request) -> Response:
    return _stalling(FIRST)


async def stall_after_done(request: Request) -> Response:
    return _stalling(FIRST, DONE)


async def cut(request: Request) -> Response:
    async def body() -> AsyncIterator[bytes]:
        yield FIRST
        await asyncio.sleep(0.005)
        raise RuntimeError(SECRET)

    return StreamingResponse(body(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    app = Starlette(
        routes=[
            Route("/stall", stall),
            Route("/stall-after-done", stall_after_done),
            Route("/cut", cut),
        ]
    )
    with serve(app, log_level="critical") as base:
        yield base


def test_a_read_timeout_is_the_client_giving_up_on_a_stall(url: str) -> None:
    """A read timeout is a client that left (client_disconnect) and a stall, not a cut."""
    with httpx.stream("GET", url + "/stall", timeout=0.3) as response:
        record = collect(response)
    assert (record.body_ended, record.error) == (
        False,
        "ReadTimeout: the client stopped waiting for the rest of the body",
    )
    assert record.outcome is Outcome.CLIENT_DISCONNECT
    assert record.report.rules() == ["stalled"]
    [finding] = record.findings
    found = STALL.fullmatch(finding.message)
    assert found is not None, finding.message
    assert float(found.group(1)) >= 0.3
    assert (finding.event_index, finding.byte_offset) == (1, 15)
    assert record.text == "partial"


def test_the_client_stall_is_reported_once_with_timing_on(url: str) -> None:
    """With timing limits below the client's timeout, the silence is still one finding."""
    limits = TimerConfig(idle_limit_s=0.05)
    with httpx.stream("GET", url + "/stall", timeout=0.3) as response:
        record = collect(response, timers=limits)
    assert record.report.rules() == ["stalled"]
    assert STALL.fullmatch(record.findings[0].message)


def test_a_read_timeout_after_the_terminal_keeps_the_end(url: str) -> None:
    """Giving up after [DONE] is a late close: the stream completed, and no stall is owed."""
    with httpx.stream("GET", url + "/stall-after-done", timeout=0.3) as response:
        record = collect(response, protocol="openai_chat")
    assert (record.body_ended, record.terminal) == (False, True)
    assert record.outcome is Outcome.COMPLETED
    assert record.report.client_closed_after_end is True
    assert record.report.rules() == ["invalid_json"]  # "partial" is not a chat chunk


def test_an_async_read_timeout_is_classified_the_same(url: str) -> None:
    """acollect tells a read timeout from a lost connection as collect does."""

    async def read() -> Outcome:
        async with (
            httpx.AsyncClient(timeout=0.3) as client,
            client.stream("GET", url + "/stall") as response,
        ):
            return (await acollect(response)).outcome

    assert asyncio.run(read()) is Outcome.CLIENT_DISCONNECT


def test_a_lost_connection_names_the_exception_type_only(url: str) -> None:
    """A cut mid-body is response_not_finished and connection_lost; no exception text is shown."""
    with httpx.stream("GET", url + "/cut") as response:
        record = collect(response)
    assert record.outcome is Outcome.CONNECTION_LOST
    assert record.error == "RemoteProtocolError: the connection was lost before the body ended"
    assert [finding.message for finding in record.findings] == [
        "the connection closed before the body ended, after 15 byte(s): RemoteProtocolError: "
        "reading the body failed"
    ]


def test_probe_says_the_client_gave_up(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """probe --timeout on a stalled stream reports the stall, not a closed connection."""
    code = main(["probe", url + "/stall", "--timeout", "0.5"])
    out = capsys.readouterr().out
    assert code == 1  # stalled is a warning; the outcome client_disconnect fails by default
    assert "outcome         client_disconnect\n" in out
    assert "body ended      no (ReadTimeout: the client stopped waiting for the rest of the " in out
    assert "  - stalled [warning] at event 1, byte 15: no bytes for " in out
    assert "the client stopped waiting (ReadTimeout)" in out
    assert "connection closed" not in out


# -- the monitor's ends, offline ------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_monitor_read_timeout_measures_the_silence() -> None:
    """READ_TIMEOUT: the idle time since the last byte, and the cause's type only."""
    clock = FakeClock()
    monitor = StreamMonitor("sse", clock=clock)
    clock.now = 100.5
    monitor.feed(b"data: a\n\ndata: b")
    clock.now = 103.5
    report = monitor.finish(StreamEnd.READ_TIMEOUT, cause=TimeoutError(SECRET))
    assert report.outcome is Outcome.CLIENT_DISCONNECT
    assert [(f.rule, f.message) for f in report.findings] == [
        ("stalled", "no bytes for 3.0 s after byte 16: the client stopped waiting (TimeoutError)")
    ]


def test_monitor_read_timeout_before_any_byte_counts_from_the_start() -> None:
    """A reader that gave up before the first byte waited since the stream started."""
    clock = FakeClock()
    monitor = StreamMonitor(clock=clock)
    clock.now = 102.0
    report = monitor.finish(StreamEnd.READ_TIMEOUT)
    assert report.findings[0].message == (
        "no bytes for 2.0 s after byte 0: the client stopped waiting (a read timeout)"
    )


def test_monitor_connection_lost_runs_the_end_rules() -> None:
    """CONNECTION_LOST is its own outcome; the body's end rules still run, after the cut."""
    monitor = StreamMonitor("sse")
    monitor.feed(b"data: a\n\ndata: b")
    report = monitor.finish(StreamEnd.CONNECTION_LOST, cause=ConnectionResetError(SECRET))
    assert report.outcome is Outcome.CONNECTION_LOST
    assert report.rules() == ["response_not_finished", "unterminated_frame"]
    assert report.findings[0].message == (
        "the connection closed before the body ended, after 16 byte(s): ConnectionResetError: "
        "reading the body failed"
    )
    assert all(SECRET not in finding.message for finding in report.findings)
