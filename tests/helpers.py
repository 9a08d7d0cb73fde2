"""What several test modules need alike: a settable clock, memory probes, frame builders.

Fixture files are read through ``tests.sse_fixtures``; ways to cut bytes into chunks are in
``tests.chunking``.
"""

from __future__ import annotations

import gc
import json
import socket
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import StreamingResponse

from streamguard.report import Finding
from streamguard.sse import Event, EventParser

from .chunking import cut
from .sse_fixtures import FIXTURES

__all__ = [
    "SDK_CUTS",
    "FakeClock",
    "anthropic_stream",
    "fixture_endpoint",
    "frame",
    "free_port",
    "held_memory",
    "parse",
    "peak_memory",
    "run_checker",
]

T = TypeVar("T")

#: Chunk sizes (cycled) a fixture is served in to the official SDKs, so that event
#: boundaries fall anywhere.
SDK_CUTS = [7, 64, 1, 200, 33]


class FakeClock:
    """A clock that advances only when told to (set ``now``)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def peak_memory(work: Callable[[], T]) -> tuple[T, int]:
    """``work()``'s result and the peak of traced memory while it ran."""
    tracemalloc.start()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def held_memory(work: Callable[[], T]) -> tuple[T, int]:
    """``work()``'s result and the traced memory it still holds when it returns."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = work()
        return result, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def frame(data: object, event: str | None = None) -> bytes:
    """One SSE event: ``event:`` when named, then ``data:`` (a string as is, else its JSON)."""
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "").encode() + f"data: {text}\n\n".encode()


def anthropic_stream(*events: tuple[str, str]) -> bytes:
    """Named events, each ``(name, data)``, as Anthropic sends them."""
    return b"".join(f"event: {name}\ndata: {data}\n\n".encode() for name, data in events)


def parse(body: bytes) -> list[Event]:
    """Every event of ``body``, as the monitor's parser dispatches them."""
    parser = EventParser()
    return [*parser.feed(body), *parser.feed(b"")]


def run_checker(checker: Any, body: bytes) -> list[Finding]:
    """Feed ``body``'s events straight to a protocol checker, numbered from 0."""
    found: list[Finding] = []
    for index, event in enumerate(parse(body)):
        found.extend(checker.on_event(event, index))
    return found


def fixture_endpoint(
    directory: str, headers: Mapping[str, str] | None = None
) -> Callable[[Request], Awaitable[StreamingResponse]]:
    """A Starlette endpoint streaming ``tests/fixtures/<directory>/<fixture>.sse`` in
    ``SDK_CUTS`` pieces, ``fixture`` being a path parameter."""

    async def endpoint(request: Request) -> StreamingResponse:
        body = (FIXTURES / directory / f"{request.path_params['fixture']}.sse").read_bytes()

        async def chunks() -> AsyncIterator[bytes]:
            for chunk in cut(body, SDK_CUTS):
                yield chunk

        return StreamingResponse(chunks(), media_type="text/event-stream", headers=headers)

    return endpoint
