"""The demo app: healthy and deliberately broken plain-SSE streams (Starlette only).

Each route shows one way a stream goes wrong on the wire; streamguard is mounted as
middleware and reports every stream through ``on_report``. ``streamguard demo`` serves it,
and ``examples/plain_sse_app.py`` re-exports it.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from streamguard.middleware import StreamGuardMiddleware
from streamguard.report import StreamReport

__all__ = ["ROUTES", "build_app"]

#: path -> what the demo expects to see there, for the table and the tests.
ROUTES = {
    "/healthy": "a well-framed stream of five events",
    "/keepalive": "CRLF frames with sse-starlette-style ': ping' comments (clean)",
    "/cut-frame": "the last event has no blank line after it",
    "/invalid-utf8": "a byte that is not UTF-8 inside an event",
    "/content-length": "an event stream sent with a Content-Length header",
    "/gzip": "a compressed stream, passed through uninspected",
    "/never-finished": "the app returns without the final body message",
    "/crash": "the app raises in the middle of the stream",
}


async def _paced(frames: list[bytes], delay: float = 0.002) -> AsyncIterator[bytes]:
    for frame in frames:
        yield frame
        await asyncio.sleep(delay)


def _events(n: int) -> list[bytes]:
    return [f"data: token {i}\n\n".encode() for i in range(n)]


def _sse(frames: list[bytes], headers: dict[str, str] | None = None) -> StreamingResponse:
    return StreamingResponse(_paced(frames), media_type="text/event-stream", headers=headers)


class _NeverFinished(Response):
    """A response that forgets the final ``more_body=False`` message."""

    def __init__(self) -> None:
        super().__init__()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for frame in _events(2):
            await send({"type": "http.response.body", "body": frame, "more_body": True})


async def _healthy(request: Request) -> Response:
    return _sse(_events(5))


async def _keepalive(request: Request) -> Response:
    frames = [b": ping - 2026-11-30 12:00:00\r\n\r\n", b"data: hello\r\n\r\n"]
    return _sse([*frames, b": ping - 2026-11-30 12:00:15\r\n\r\n", b"data: bye\r\n\r\n"])


async def _cut_frame(request: Request) -> Response:
    return _sse([*_events(2), b"data: [DONE]"])


async def _invalid_utf8(request: Request) -> Response:
    return _sse([b"data: caf\xe9\n\n", *_events(1)])


async def _content_length(request: Request) -> Response:
    frames = _events(2)
    return _sse(frames, headers={"content-length": str(sum(map(len, frames)))})


async def _gzipped(request: Request) -> Response:
    return _sse([gzip.compress(b"".join(_events(3)))], headers={"content-encoding": "gzip"})


async def _never_finished(request: Request) -> Response:
    return _NeverFinished()


async def _crash(request: Request) -> Response:
    async def frames() -> AsyncIterator[bytes]:
        yield b"data: partial answer\n\n"
        await asyncio.sleep(0.005)
        raise RuntimeError("the model backend went away")

    return StreamingResponse(frames(), media_type="text/event-stream")


def build_app(on_report: Callable[[StreamReport], None] | None = None) -> StreamGuardMiddleware:
    """The demo app with streamguard mounted; ``on_report`` receives every stream's report."""
    app = Starlette(
        routes=[
            Route("/healthy", _healthy),
            Route("/keepalive", _keepalive),
            Route("/cut-frame", _cut_frame),
            Route("/invalid-utf8", _invalid_utf8),
            Route("/content-length", _content_length),
            Route("/gzip", _gzipped),
            Route("/never-finished", _never_finished),
            Route("/crash", _crash),
        ]
    )
    return StreamGuardMiddleware(app, on_report=on_report)
