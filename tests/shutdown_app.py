"""Apps whose streams never end, for the SIGTERM tests: each report is appended to a file.

Served by ``tests/test_shutdown.py`` in a uvicorn subprocess; ``SHUTDOWN_REPORTS`` names the
file that receives one JSON line per report. ``app`` calls ``on_report`` itself;
``queued_app`` hands the reports to a ``ReportQueue`` (the README's way), whose worker
thread must deliver them before uvicorn re-raises SIGTERM. ``/forever`` is Starlette's
``StreamingResponse``, ``/forever-sse`` sse-starlette's ``EventSourceResponse``, which stops
its streams itself when uvicorn shuts down (up to 3.7.0 returning without ending the body,
from 3.7.1 ending it), and ``/forever-sse-chat`` the same with an OpenAI Chat chunk (a
protocol whose terminal, ``[DONE]``, never comes). ``/ends-at-shutdown`` and
``/ends-at-shutdown-chat`` do what sse-starlette 3.7.1 does, whichever version is
installed: when the server's shutdown cancels them, they end the body (an empty last
message) before they return.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from streamguard import StreamGuardMiddleware, StreamReport
from streamguard.handoff import ReportQueue


def write_report(report: StreamReport) -> None:
    line = json.dumps(
        {
            "path": report.path,
            "outcome": report.outcome.value,
            "events": report.events,
            "rules": report.rules(),
            "notes": list(report.notes),
        }
    )
    with open(os.environ["SHUTDOWN_REPORTS"], "a") as reports:
        reports.write(line + "\n")


async def forever(request: Request) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        yield b"data: first\n\n"
        await asyncio.sleep(3600)

    return StreamingResponse(events(), media_type="text/event-stream")


async def forever_sse(request: Request) -> EventSourceResponse:
    async def events() -> AsyncIterator[dict[str, str]]:
        yield {"data": "first"}
        await asyncio.sleep(3600)

    return EventSourceResponse(events())


CHAT_CHUNK = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1755012345,
    "model": "m",
    "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}],
}


async def forever_sse_chat(request: Request) -> EventSourceResponse:
    async def events() -> AsyncIterator[dict[str, str]]:
        yield {"data": json.dumps(CHAT_CHUNK)}
        await asyncio.sleep(3600)

    return EventSourceResponse(events())


class EndsAtShutdown:
    """An endless stream that, cancelled by the server's shutdown, ends its body first:
    sse-starlette 3.7.1's way, without depending on the version installed."""

    def __init__(self, first_event: bytes) -> None:
        self.first_event = first_event

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.first_event, "more_body": True})
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            raise


ROUTES = [
    Route("/forever", forever),
    Route("/forever-sse", forever_sse),
    Route("/forever-sse-chat", forever_sse_chat),
    Route("/ends-at-shutdown", EndsAtShutdown(b"data: first\n\n")),
    Route(
        "/ends-at-shutdown-chat",
        EndsAtShutdown(f"data: {json.dumps(CHAT_CHUNK)}\n\n".encode()),
    ),
]
#: The chat routes are declared, the others left to the default (plain SSE).
CHAT_ROUTES = {"/forever-sse-chat": "openai_chat", "/ends-at-shutdown-chat": "openai_chat"}

app = StreamGuardMiddleware(
    Starlette(routes=ROUTES),
    on_report=write_report,
    metrics=False,
    logs={"enabled": False},
    routes=CHAT_ROUTES,
)

queued_app = StreamGuardMiddleware(
    Starlette(routes=ROUTES),
    on_report=ReportQueue(write_report),
    metrics=False,
    logs={"enabled": False},
    routes=CHAT_ROUTES,
)
