"""A client that stops reading, under a real uvicorn server: the send it holds is not the app's.

uvicorn waits for its write buffer to drain *before* it writes a message, once an earlier
write filled it: the app's ``send`` then stays pending for as long as the client does not
read. The monitor has parsed that message already, so what it holds (the terminal signal)
has not reached the client yet. The client here reads nothing, with a small receive buffer,
after the app has sent a large message, until the moment the test waits for has come.

Time is the middleware's injected clock, moved by the test while the send is held, and
every wait is on an event: no verdict depends on how fast the machine runs the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from streamguard import Outcome, StreamGuardMiddleware, StreamReport

from .asgi_driver import body, sse_start
from .helpers import FakeClock, chat_choice, chat_chunk
from .servers import serve, wait_until

#: streamguard's timers, in seconds of the injected clock (they also set the sweeper's
#: poll interval, in real seconds: a quarter of the shortest).
TIMER = 0.3
#: How far the clock moves while the final send is held: far past every timer.
HELD_FOR = 10 * TIMER
#: One message larger than every buffer between the app and a client that does not read.
LARGE = chat_chunk(choices=[chat_choice(0, content="x" * 1000)]) * 8000
FIRST = chat_chunk(choices=[chat_choice(0, role="assistant", content="")])
LAST = chat_chunk(choices=[chat_choice(0, finish_reason="stop")]) + b"data: [DONE]\n\n"
#: A guard against a hang only: each wait below ends on an event long before it.
HANG = 60.0

FinalSend = Callable[[Send], Awaitable[None]]


class CountedClock(FakeClock):
    """A settable clock that counts its reads: while the final send is held only the
    sweeper's polls read it, so a test can wait until streamguard has looked at the
    stream at a time of its choosing."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self._read = threading.Condition()

    def __call__(self) -> float:
        with self._read:
            self.reads += 1
            self._read.notify_all()
        return self.now

    def advance_and_wait_for_polls(self, seconds: float, polls: int = 3) -> None:
        with self._read:
            self.now += seconds
            seen = self.reads
            assert self._read.wait_for(lambda: self.reads >= seen + polls, HANG), "no poll"


def stream_app(final_send: FinalSend) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send(sse_start())
        await send(body(FIRST))
        await send(body(LARGE))
        await final_send(send)

    return app


def noting_the_final_send(app: ASGIApp, handed_over: threading.Event) -> ASGIApp:
    """``app`` (the middleware) as the server runs it, with ``handed_over`` set when the
    last body message reaches the server's ``send``: streamguard has read it by then, and
    the server holds it until the client reads."""

    async def served(scope: Scope, receive: Receive, send: Send) -> None:
        async def server_send(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                handed_over.set()
            await send(message)

        await app(scope, receive, server_send)

    return served


def read_slowly(url: str, ready: Callable[[], None]) -> bytes:
    """GET /stream, read nothing until ``ready()`` returns, then read to the end."""
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        client.settimeout(HANG)
        client.connect((host, int(port)))
        client.sendall(b"GET /stream HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        ready()
        received = bytearray()
        while chunk := client.recv(1 << 16):
            received += chunk
    return bytes(received)


def watched(
    final_send: FinalSend, clock: FakeClock
) -> tuple[StreamGuardMiddleware, list[StreamReport]]:
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        stream_app(final_send),
        protocol="openai_chat",
        timers={"body_end_grace_s": TIMER, "idle_limit_s": TIMER},
        on_report=reports.append,
        metrics=False,
        logs={"enabled": False},
        clock=clock,
    )
    return middleware, reports


def test_a_final_send_held_by_a_slow_reader_is_no_finding() -> None:
    """The terminal's message waits for the client longer than the grace and the idle
    limit, and streamguard polls the stream meanwhile: the body ended as soon as the
    server took it, and the wait is no stall either."""

    async def final_send(send: Send) -> None:
        await send(body(LAST, more=False))

    clock = CountedClock()
    middleware, reports = watched(final_send, clock)
    handed_over = threading.Event()

    def held_past_every_timer() -> None:
        assert handed_over.wait(HANG)
        clock.advance_and_wait_for_polls(HELD_FOR)

    with serve(noting_the_final_send(middleware, handed_over)) as url:
        received = read_slowly(url, held_past_every_timer)
        wait_until(lambda: reports, timeout=HANG, what="the report")
    assert b"data: [DONE]" in received
    [report] = reports
    assert (report.outcome, report.rules()) == (Outcome.COMPLETED, [])


def test_a_final_send_the_app_cancels_did_not_complete() -> None:
    """The app's own timeout cancels the send a slow reader holds: the client never gets
    the terminal, and the report does not say ``completed``."""
    gave_up = threading.Event()

    async def final_send(send: Send) -> None:
        with contextlib.suppress(TimeoutError):  # the app gives up on this client
            await asyncio.wait_for(send(body(LAST, more=False)), TIMER)
        gave_up.set()

    middleware, reports = watched(final_send, FakeClock())
    with serve(middleware) as url:
        received = read_slowly(url, lambda: gave_up.wait(HANG))
        wait_until(lambda: reports, timeout=HANG, what="the report")
    assert gave_up.is_set()
    assert b"data: [DONE]" not in received
    [report] = reports
    assert (report.outcome, report.rules()) == (Outcome.UNCLOSED, ["response_not_finished"])
