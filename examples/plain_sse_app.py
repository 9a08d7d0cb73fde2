"""A FastAPI app with healthy and deliberately broken plain-SSE streams.

Each route shows one way a stream goes wrong on the wire; streamguard is mounted as
middleware and reports every stream through ``on_report``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from fastapi import FastAPI
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from streamguard import StreamGuardMiddleware, StreamReport

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


def build_app(on_report: Callable[[StreamReport], None] | None = None) -> StreamGuardMiddleware:
    app = FastAPI()

    @app.get("/healthy")
    async def healthy() -> StreamingResponse:
        return _sse(_events(5))

    @app.get("/keepalive")
    async def keepalive() -> StreamingResponse:
        frames = [b": ping - 2026-11-30 12:00:00\r\n\r\n", b"data: hello\r\n\r\n"]
        return _sse([*frames, b": ping - 2026-11-30 12:00:15\r\n\r\n", b"data: bye\r\n\r\n"])

    @app.get("/cut-frame")
    async def cut_frame() -> StreamingResponse:
        return _sse([*_events(2), b"data: [DONE]"])

    @app.get("/invalid-utf8")
    async def invalid_utf8() -> StreamingResponse:
        return _sse([b"data: caf\xe9\n\n", *_events(1)])

    @app.get("/content-length")
    async def content_length() -> StreamingResponse:
        frames = _events(2)
        return _sse(frames, headers={"content-length": str(sum(map(len, frames)))})

    @app.get("/gzip")
    async def gzipped() -> StreamingResponse:
        import gzip

        return _sse([gzip.compress(b"".join(_events(3)))], headers={"content-encoding": "gzip"})

    @app.get("/never-finished")
    async def never_finished() -> _NeverFinished:
        return _NeverFinished()

    @app.get("/crash")
    async def crash() -> StreamingResponse:
        async def frames() -> AsyncIterator[bytes]:
            yield b"data: partial answer\n\n"
            await asyncio.sleep(0.005)
            raise RuntimeError("the model backend went away")

        return StreamingResponse(frames(), media_type="text/event-stream")

    return StreamGuardMiddleware(app, on_report=on_report)
