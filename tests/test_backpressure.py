"""A client that stops reading, under a real uvicorn server: the send it holds is not the app's.

uvicorn waits for its write buffer to drain *before* it writes a message, once an earlier
write filled it: the app's ``send`` then stays pending for as long as the client does not
read. The monitor has parsed that message already, so what it holds (the terminal signal)
has not reached the client yet. The client here reads nothing for ``PAUSE`` seconds, with a
small receive buffer, after the app has sent a large message.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Awaitable, Callable

from starlette.types import Receive, Scope, Send

from streamguard import Outcome, StreamGuardMiddleware, StreamReport

from .asgi_driver import body, sse_start
from .helpers import chat_choice, chat_chunk
from .servers import serve, wait_until

#: How long the client reads nothing, against timers of ``TIMER`` seconds.
PAUSE = 1.5
TIMER = 0.3
#: One message larger than every buffer between the app and a client that does not read.
LARGE = chat_chunk(choices=[chat_choice(0, content="x" * 1000)]) * 8000
FIRST = chat_chunk(choices=[chat_choice(0, role="assistant", content="")])
LAST = chat_chunk(choices=[chat_choice(0, finish_reason="stop")]) + b"data: [DONE]\n\n"

FinalSend = Callable[[Send], Awaitable[None]]


def stream_app(final_send: FinalSend) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send(sse_start())
        await send(body(FIRST))
        await send(body(LARGE))
        await final_send(send)

    return app


def read_slowly(url: str) -> bytes:
    """GET /stream, read nothing for ``PAUSE`` seconds, then read to the end."""
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        client.settimeout(10)
        client.connect((host, int(port)))
        client.sendall(b"GET /stream HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        time.sleep(PAUSE)
        received = bytearray()
        while chunk := client.recv(1 << 16):
            received += chunk
    return bytes(received)


def watched(final_send: FinalSend) -> tuple[StreamGuardMiddleware, list[StreamReport]]:
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        stream_app(final_send),
        protocol="openai_chat",
        timers={"body_end_grace_s": TIMER, "idle_limit_s": TIMER},
        on_report=reports.append,
        metrics=False,
        logs={"enabled": False},
    )
    return middleware, reports


def test_a_final_send_held_by_a_slow_reader_is_no_finding() -> None:
    """The terminal's message waits for the client longer than the grace: the body ended
    as soon as the server took it, and the wait is no stall either."""

    async def final_send(send: Send) -> None:
        await send(body(LAST, more=False))

    middleware, reports = watched(final_send)
    with serve(middleware) as url:
        received = read_slowly(url)
        wait_until(lambda: reports, what="the report")
    assert b"data: [DONE]" in received
    [report] = reports
    assert (report.outcome, report.rules()) == (Outcome.COMPLETED, [])


def test_a_final_send_the_app_cancels_did_not_complete() -> None:
    """The app's own timeout cancels the send a slow reader holds: the client never gets
    the terminal, and the report does not say ``completed``."""

    async def final_send(send: Send) -> None:
        with contextlib.suppress(TimeoutError):  # the app gives up on this client
            await asyncio.wait_for(send(body(LAST, more=False)), TIMER)

    middleware, reports = watched(final_send)
    with serve(middleware) as url:
        received = read_slowly(url)
        wait_until(lambda: reports, what="the report")
    assert b"data: [DONE]" not in received
    [report] = reports
    assert (report.outcome, report.rules()) == (Outcome.UNCLOSED, ["response_not_finished"])
