"""A Starlette app that streams the captured fixtures over real HTTP, for client-side tests.

``/fixture/{family}/{name}`` streams ``tests/fixtures/{family}/{name}.sse`` one event per
body message (GET or POST); ``/json-error`` answers 500 with JSON; ``/cut`` sends one event
and then raises, so the server drops the connection; ``/gzip`` sends a compressed stream.
``sent_last`` records, per path, the ``time.monotonic()`` reading just before the last
body message was sent.
"""

from __future__ import annotations

import asyncio
import gzip
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["FIXTURES", "build_fixture_app", "fixture_bytes", "frames"]

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_bytes(family: str, name: str) -> bytes:
    return (FIXTURES / family / f"{name}.sse").read_bytes()


def frames(body: bytes) -> list[bytes]:
    """The body cut after each blank line (LF or CRLF), so one message carries one event."""
    return [part for part in re.split(rb"(?<=\n\n)|(?<=\r\n\r\n)", body) if part]


def build_fixture_app(delay: float = 0.002) -> Starlette:
    sent_last: dict[str, float] = {}

    async def paced(path: str, parts: list[bytes]) -> AsyncIterator[bytes]:
        for number, part in enumerate(parts):
            if number == len(parts) - 1:
                await asyncio.sleep(delay)
                sent_last[path] = time.monotonic()
            yield part

    async def fixture(request: Request) -> Response:
        body = fixture_bytes(request.path_params["family"], request.path_params["name"])
        await request.body()
        return StreamingResponse(
            paced(request.url.path, frames(body)), media_type="text/event-stream"
        )

    async def json_error(request: Request) -> Response:
        return JSONResponse({"error": {"message": "overloaded"}}, status_code=500)

    async def cut(request: Request) -> Response:
        async def parts() -> AsyncIterator[bytes]:
            yield b"data: partial\n\n"
            await asyncio.sleep(0.005)
            raise RuntimeError("backend went away")

        return StreamingResponse(parts(), media_type="text/event-stream")

    async def gzipped(request: Request) -> Response:
        body = gzip.compress(b"data: a\n\ndata: b\n\n")
        return StreamingResponse(
            paced(request.url.path, [body]),
            media_type="text/event-stream",
            headers={"content-encoding": "gzip"},
        )

    app = Starlette(
        routes=[
            Route("/fixture/{family}/{name}", fixture, methods=["GET", "POST"]),
            Route("/json-error", json_error),
            Route("/cut", cut),
            Route("/gzip", gzipped),
        ]
    )
    app.state.sent_last = sent_last
    return app
