"""Many concurrent streams under a real uvicorn server, live timers, and trio."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from streamguard import Outcome, StreamGuardMiddleware, StreamReport

from .asgi_driver import Recorder, body, http_scope, sse_start
from .servers import serve, wait_until

ENDINGS = ("complete", "unclosed", "crash", "leave")


class _Unfinished(Response):
    """Sends a few events and returns without the final body message."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        await send({"type": "http.response.body", "body": b"data: 0\n\n", "more_body": True})


async def stream(request: Request) -> Response:
    ending = request.path_params["ending"]
    if ending == "unclosed":
        return _Unfinished()

    async def frames() -> AsyncIterator[bytes]:
        for i in range(5):
            yield b"data: %d\n\n" % i
            await asyncio.sleep(0.01)
        if ending == "crash":
            raise RuntimeError("model failed")
        if ending == "leave":
            await asyncio.sleep(30)  # the client hangs up long before this

    return StreamingResponse(frames(), media_type="text/event-stream")


@pytest.mark.slow
def test_thousand_concurrent_streams_each_get_their_own_report() -> None:
    """1,000 concurrent streams with mixed endings: every outcome right, nothing left over."""
    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    lock = threading.Lock()

    def on_report(report: StreamReport) -> None:
        with lock:
            reports.append(report)

    app = Starlette(routes=[Route("/s/{ending}/{n}", stream)])
    middleware = StreamGuardMiddleware(
        app,
        metrics=registry,
        logs={"enabled": False},
        protocol="sse",
        routes={"/s/{ending}/{n}": {"protocol": "sse", "name": "soak"}},
        on_report=on_report,
    )
    total = 1000

    async def client(url: str) -> None:
        limits = httpx.Limits(max_connections=total, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:

            async def one(n: int) -> None:
                ending = ENDINGS[n % len(ENDINGS)]
                try:
                    async with http.stream("GET", f"/s/{ending}/{n}") as response:
                        async for chunk in response.aiter_raw():
                            if ending == "leave" and chunk:
                                return  # hang up mid-stream
                except httpx.RemoteProtocolError:
                    assert ending in ("crash", "unclosed")

            await asyncio.gather(*(one(n) for n in range(total)))

    with serve(middleware, log_level="critical", limit_concurrency=total + 100) as url:
        asyncio.run(client(url))
        wait_until(lambda: len(reports) == total and middleware.in_flight == 0, timeout=60)

    by_ending = Counter((r.path or "").split("/")[2] for r in reports)
    assert by_ending == {ending: total // len(ENDINGS) for ending in ENDINGS}
    expected = {
        "complete": Outcome.COMPLETED,
        "unclosed": Outcome.UNCLOSED,
        "crash": Outcome.APP_ERROR,
        "leave": Outcome.CLIENT_DISCONNECT,
    }
    for report in reports:
        ending = (report.path or "").split("/")[2]
        assert report.outcome is expected[ending], report
        assert report.route == "soak"
        events = 1 if ending == "unclosed" else 5
        assert report.events >= (1 if ending == "leave" else events)
    labels = {"route": "soak", "protocol": "sse"}
    assert registry.get_sample_value("streamguard_streams_in_progress", labels) == 0
    assert registry.get_sample_value("streamguard_streams_started_total", labels) == total
    for ending, outcome in expected.items():
        counted = registry.get_sample_value(
            "streamguard_streams_total", {**labels, "outcome": outcome.value}
        )
        assert counted == total // len(ENDINGS), ending
    sweepers = [s for s in middleware._sweepers.values() if s.running or s.watches]
    assert sweepers == []


def test_live_body_not_ended_under_uvicorn(done_protocol: str) -> None:
    """Under uvicorn, a body held open after the terminal is counted before it closes."""
    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    release = threading.Event()

    async def endpoint(request: Request) -> Response:
        async def frames() -> AsyncIterator[bytes]:
            yield b"data: a\n\ndata: END\n\n"
            # Hold the body open, as a buggy proxy does, until the test has seen the
            # finding: it can only have been counted while the stream was open. Bounded,
            # so a failing run still ends.
            deadline = time.monotonic() + 30
            while not release.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)

        return StreamingResponse(frames(), media_type="text/event-stream")

    middleware = StreamGuardMiddleware(
        Starlette(routes=[Route("/held", endpoint)]),
        protocol=done_protocol,
        metrics=registry,
        timers={"body_end_grace_s": 0.1},
        on_report=reports.append,
    )
    labels = {"route": "/held", "protocol": done_protocol, "rule": "body_not_ended"}
    seen_while_open: list[tuple[float | None, int]] = []
    try:
        with serve(middleware) as url, httpx.stream("GET", f"{url}/held", timeout=10) as response:
            chunks = response.iter_raw()
            assert next(chunks) == b"data: a\n\ndata: END\n\n"
            wait_until(
                lambda: registry.get_sample_value("streamguard_violations_total", labels) == 1,
                timeout=5,
                what="body_not_ended counted while the body is held open",
            )
            seen_while_open.append(
                (registry.get_sample_value("streamguard_violations_total", labels), len(reports))
            )
            release.set()
            assert b"".join(chunks) == b""
            wait_until(lambda: len(reports) == 1 and middleware.in_flight == 0, timeout=5)
    finally:
        release.set()
    assert seen_while_open == [(1.0, 0)]  # counted, and the stream not yet reported
    assert [report.rules() for report in reports] == [["body_not_ended"]]


def test_runs_under_trio_with_end_of_stream_timing() -> None:
    """Under trio there is no sweeper; the timing detectors still judge at the end."""
    trio = pytest.importorskip("trio")
    reports: list[StreamReport] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(sse_start())
        await send(body(b"data: a\n\n"))
        await trio.sleep(0.15)
        await send(body(b"data: b\n\n", more=False))

    middleware = StreamGuardMiddleware(
        app, metrics=False, timers={"idle_limit_s": 0.05}, on_report=reports.append
    )

    async def main() -> None:
        recorder = Recorder(incoming=[{"type": "http.request", "body": b""}])
        await middleware(http_scope(), recorder.receive, recorder.send)

    trio.run(main)
    [report] = reports
    assert (report.outcome, report.rules()) == (Outcome.COMPLETED, ["stalled"])
    assert len(middleware._sweepers) == 0
