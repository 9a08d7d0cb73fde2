"""Under hypercorn: asyncio workers get live timers, trio workers end-of-stream timing."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from streamguard import Outcome, StreamGuardMiddleware, StreamReport

from .helpers import free_port
from .servers import wait_until

hypercorn = pytest.importorskip("hypercorn")


@contextmanager
def hypercorn_server(app: Any, worker: str) -> Iterator[str]:
    """Serve ``app`` with hypercorn's asyncio or trio worker in a thread; yield its URL."""
    from hypercorn.config import Config

    port = free_port()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.loglevel = "WARNING"
    stop = threading.Event()

    if worker == "asyncio":
        from hypercorn.asyncio import serve as asyncio_serve

        async def asyncio_stopped() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.01)

        def run() -> None:
            asyncio.run(asyncio_serve(app, config, shutdown_trigger=asyncio_stopped))

    else:
        trio = pytest.importorskip("trio")
        from hypercorn.trio import serve as trio_serve

        async def trio_stopped() -> None:
            while not stop.is_set():
                await trio.sleep(0.01)

        def run() -> None:
            trio.run(lambda: trio_serve(app, config, shutdown_trigger=trio_stopped))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            httpx.get(f"{url}/ready", timeout=1)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    try:
        yield url
    finally:
        stop.set()
        thread.join(timeout=10)


def app_with(held: Callable[[], Any]) -> Starlette:
    async def ready(request: Request) -> Response:
        return Response("ok")

    async def stream(request: Request) -> Response:
        async def frames() -> AsyncIterator[bytes]:
            yield b"data: a\n\ndata: END\n\n"
            await held()  # the body stays open after the terminal

        return StreamingResponse(frames(), media_type="text/event-stream")

    return Starlette(routes=[Route("/ready", ready), Route("/stream", stream)])


def held_until(release: threading.Event, limit_s: float = 30.0) -> Callable[[], Any]:
    """An awaitable factory that holds the body open until the test releases it.

    The test releases it only after its assertion, so a finding it saw was made while the
    stream was open (by the sweeper), never at the end. Bounded, so a failing run ends.
    """

    async def held() -> None:
        deadline = time.monotonic() + limit_s
        while not release.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    return held


def test_asyncio_worker_reports_body_not_ended_while_open(done_protocol: str) -> None:
    """Under hypercorn's asyncio worker the sweeper counts body_not_ended before the end."""
    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    labels = {"route": "/stream", "protocol": done_protocol, "rule": "body_not_ended"}
    release = threading.Event()
    middleware = StreamGuardMiddleware(
        app_with(held_until(release)),
        protocol=done_protocol,
        metrics=registry,
        timers={"body_end_grace_s": 0.1},
        on_report=reports.append,
    )
    seen_while_open: list[tuple[float | None, int]] = []
    try:
        with hypercorn_server(middleware, "asyncio") as url:
            with httpx.stream("GET", f"{url}/stream", timeout=10) as response:
                chunks = response.iter_raw()
                assert next(chunks) == b"data: a\n\ndata: END\n\n"
                wait_until(
                    lambda: registry.get_sample_value("streamguard_violations_total", labels) == 1,
                    timeout=5,
                    what="body_not_ended counted while the body is held open",
                )
                seen_while_open.append(
                    (
                        registry.get_sample_value("streamguard_violations_total", labels),
                        len(reports),
                    )
                )
                release.set()
                assert b"".join(chunks) == b""
            wait_until(lambda: len(reports) == 1)
    finally:
        release.set()
    assert seen_while_open == [(1.0, 0)]  # counted, and the stream not yet reported
    assert (reports[0].outcome, reports[0].rules()) == (Outcome.COMPLETED, ["body_not_ended"])
    assert middleware.in_flight == 0


def test_trio_worker_judges_timing_at_the_end(done_protocol: str) -> None:
    """Under hypercorn's trio worker nothing fails, and body_not_ended is found at the end."""
    trio = pytest.importorskip("trio")
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        app_with(lambda: trio.sleep(0.3)),
        protocol=done_protocol,
        metrics=False,
        timers={"body_end_grace_s": 0.1},
        on_report=reports.append,
    )
    with hypercorn_server(middleware, "trio") as url:
        with httpx.stream("GET", f"{url}/stream", timeout=10) as response:
            assert b"".join(response.iter_raw()) == b"data: a\n\ndata: END\n\n"
        wait_until(lambda: len(reports) == 1)
    assert (reports[0].outcome, reports[0].rules()) == (Outcome.COMPLETED, ["body_not_ended"])
    assert len(middleware._sweepers) == 0  # no asyncio loop, so no sweeper
    assert middleware.in_flight == 0
