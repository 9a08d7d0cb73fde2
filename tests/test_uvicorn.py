"""The middleware under a real uvicorn server on loopback, read by an httpx client."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.types import Receive, Scope, Send

from streamguard import Outcome, StreamGuardMiddleware, StreamReport

from .servers import serve, wait_until


def random_chunks(seed: int) -> list[bytes]:
    """Arbitrary bytes (not only valid SSE) cut at random sizes, some chunks empty."""
    rng = random.Random(seed)
    chunks = []
    for _ in range(rng.randint(1, 40)):
        size = rng.choice([0, 1, 2, 7, 100, 4096, 70_000])
        chunks.append(
            rng.randbytes(size)
            if rng.random() < 0.3
            else b"data: %d\r\n\n" % size * (size // 10 + 1)
        )
    return chunks


async def random_stream(request: Request) -> Response:
    chunks = random_chunks(int(request.query_params["seed"]))

    async def produce() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
            await asyncio.sleep(0)

    return StreamingResponse(produce(), media_type="text/event-stream")


async def endless(request: Request) -> Response:
    async def ticks() -> AsyncIterator[bytes]:
        while True:
            yield b"data: tick\n\n"
            await asyncio.sleep(0.005)

    return StreamingResponse(ticks(), media_type="text/event-stream")


async def failing(request: Request) -> Response:
    async def events() -> AsyncIterator[bytes]:
        yield b"data: one\n\n"
        await asyncio.sleep(0.01)
        raise RuntimeError("upstream model failed")

    return StreamingResponse(events(), media_type="text/event-stream")


async def healthy(request: Request) -> Response:
    async def events() -> AsyncIterator[bytes]:
        for word in ("Hello", "world"):
            yield f"data: {word}\n\n".encode()
            await asyncio.sleep(0.001)

    return StreamingResponse(events(), media_type="text/event-stream")


async def sse_starlette_endless(request: Request) -> Response:
    from sse_starlette.sse import EventSourceResponse

    async def ticks() -> AsyncIterator[dict[str, str]]:
        while True:
            yield {"data": "tick"}
            await asyncio.sleep(0.005)

    return EventSourceResponse(ticks())


async def raw_endless(scope: Scope, receive: Receive, send: Send) -> None:
    """A raw ASGI app that never calls receive(): it cannot learn that the client left."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})  # fmt: skip
    # OpenAI chat chunks: a protocol whose outcome depends on what was handed over, so
    # "completed" below says the [DONE] that uvicorn dropped was counted as delivered.
    for _ in range(100):
        await send({"type": "http.response.body", "body": RAW_CHUNK, "more_body": True})
        await asyncio.sleep(0.005)
    await send({"type": "http.response.body", "body": RAW_LAST, "more_body": False})


RAW_CHUNK = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":"tick"},"finish_reason":null}]}\n\n'
)
RAW_LAST = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


async def json_endpoint(request: Request) -> Response:
    return JSONResponse({"ok": True})


def make_app() -> Starlette:
    return Starlette(
        routes=[
            Route("/random", random_stream),
            Route("/endless", endless),
            Route("/failing", failing),
            Route("/healthy", healthy),
            Route("/sse-starlette", sse_starlette_endless),
            Mount("/raw", app=raw_endless),
            Route("/json", json_endpoint),
        ]
    )


@pytest.fixture(scope="module")
def guarded_server() -> Iterator[tuple[str, StreamGuardMiddleware, list[StreamReport]]]:
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(make_app(), on_report=reports.append)
    with serve(middleware) as url:
        yield url, middleware, reports


@pytest.fixture(scope="module")
def plain_server() -> Iterator[str]:
    with serve(make_app()) as url:
        yield url


def leave_after_first_bytes(url: str) -> None:
    """Read a stream until its first bytes arrive, then hang up."""
    with httpx.stream("GET", url, timeout=30) as response:
        for chunk in response.iter_raw():
            if chunk:
                return


def raw_body(url: str) -> bytes:
    with httpx.stream("GET", url, timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        return b"".join(response.iter_raw())


@pytest.mark.parametrize("seed", range(12))
def test_body_is_byte_identical_with_and_without_middleware(
    seed: int,
    guarded_server: tuple[str, StreamGuardMiddleware, list[StreamReport]],
    plain_server: str,
) -> None:
    """Randomly chunked bodies, arbitrary bytes included, arrive unchanged through streamguard."""
    url, middleware, reports = guarded_server
    expected = b"".join(random_chunks(seed))
    before = len(reports)
    assert raw_body(f"{plain_server}/random?seed={seed}") == expected
    assert raw_body(f"{url}/random?seed={seed}") == expected
    wait_until(lambda: len(reports) > before)
    assert reports[-1].bytes == len(expected)
    assert middleware.in_flight == 0


def test_healthy_stream_is_completed(
    guarded_server: tuple[str, StreamGuardMiddleware, list[StreamReport]],
) -> None:
    """A stream that ends normally is reported ``completed`` with its events counted."""
    url, middleware, reports = guarded_server
    before = len(reports)
    assert raw_body(f"{url}/healthy") == b"data: Hello\n\ndata: world\n\n"
    wait_until(lambda: len(reports) > before)
    report = reports[-1]
    assert (report.outcome, report.events, report.findings, report.path) == (
        Outcome.COMPLETED,
        2,
        (),
        "/healthy",
    )
    assert report.first_event_at is not None
    assert report.started_at <= report.first_event_at <= report.ended_at
    assert middleware.in_flight == 0


def test_client_closing_mid_stream_is_client_disconnect(
    guarded_server: tuple[str, StreamGuardMiddleware, list[StreamReport]],
) -> None:
    """A client that hangs up mid-stream gives ``client_disconnect``, not ``unclosed``."""
    url, middleware, reports = guarded_server
    before = len(reports)
    leave_after_first_bytes(f"{url}/endless")
    wait_until(lambda: len(reports) > before)
    report = reports[-1]
    assert report.path == "/endless"
    assert report.outcome is Outcome.CLIENT_DISCONNECT
    assert report.findings == ()
    wait_until(lambda: middleware.in_flight == 0)


def test_sse_starlette_client_closing_is_client_disconnect(
    guarded_server: tuple[str, StreamGuardMiddleware, list[StreamReport]],
) -> None:
    """sse-starlette listens for the disconnect too, so its cut streams are not completed."""
    url, middleware, reports = guarded_server
    before = len(reports)
    leave_after_first_bytes(f"{url}/sse-starlette")
    wait_until(lambda: len(reports) > before)
    assert (reports[-1].path, reports[-1].outcome) == ("/sse-starlette", Outcome.CLIENT_DISCONNECT)
    wait_until(lambda: middleware.in_flight == 0)


def test_raw_app_that_never_receives_looks_completed(
    guarded_server: tuple[str, StreamGuardMiddleware, list[StreamReport]],
) -> None:
    """The documented limit: uvicorn drops the sends of an app that never reads receive()."""
    url, _middleware, reports = guarded_server
    before = len(reports)
    leave_after_first_bytes(f"{url}/raw/")
    wait_until(lambda: len(reports) > before, timeout=30)
    report = reports[-1]
    assert (report.path, report.protocol, report.outcome) == (
        "/raw/",
        "openai_chat",
        Outcome.COMPLETED,
    )


def test_app_raising_mid_stream_is_app_error(
    guarded_server: tuple[str, StreamGuardMiddleware, list[StreamReport]],
) -> None:
    """An app that raises mid-stream gives ``app_error``; the client sees a cut response."""
    url, middleware, reports = guarded_server
    before = len(reports)
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("GET", f"{url}/failing", timeout=30) as response,
    ):
        b"".join(response.iter_raw())
    wait_until(lambda: len(reports) > before)
    assert (reports[-1].path, reports[-1].outcome, reports[-1].events) == (
        "/failing",
        Outcome.APP_ERROR,
        1,
    )
    assert middleware.in_flight == 0


def test_non_sse_response_is_skipped(
    guarded_server: tuple[str, StreamGuardMiddleware, list[StreamReport]],
) -> None:
    """A JSON endpoint is served as usual and produces no report."""
    url, middleware, reports = guarded_server
    before = len(reports)
    skipped = middleware.skipped["content_type"]
    response = httpx.get(f"{url}/json")
    assert response.json() == {"ok": True}
    assert middleware.skipped["content_type"] == skipped + 1
    assert len(reports) == before


def test_head_request_is_skipped(
    guarded_server: tuple[str, StreamGuardMiddleware, list[StreamReport]],
) -> None:
    """A HEAD request to a stream route produces no report."""
    url, middleware, reports = guarded_server
    before = len(reports)
    heads = middleware.skipped["head"]
    response = httpx.head(f"{url}/healthy")
    assert response.status_code == 200
    assert middleware.skipped["head"] == heads + 1
    assert len(reports) == before
