"""1,000 concurrent streams of mixed protocols and endings under uvicorn: no cross-talk, no leak."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from streamguard import Outcome, StreamEnd, StreamGuardMiddleware, StreamMonitor, StreamReport

from .servers import serve, wait_until
from .sse_fixtures import FIXTURES
from .stream_apps import frames

PROTOCOLS = ("openai_chat", "openai_responses", "anthropic", "gemini")
#: complete: every frame, then the end of the body; crash: half the frames, then the app
#: raises; leave: one frame, then the client hangs up while the app waits.
ENDINGS = ("complete", "crash", "leave")
END_OF = {
    "complete": StreamEnd.BODY_ENDED,
    "crash": StreamEnd.APP_ERROR,
    "leave": StreamEnd.CLIENT_DISCONNECT,
}
#: Timing findings depend on the server's load, not on the bytes: left out of the comparison.
TIMING_RULES = {"stalled", "buffered_flush", "body_not_ended"}
TOTAL = 1000
#: ``make test``'s size: every fixture served once at least, 200 streams open at once.
QUICK = 200


def _fixtures() -> list[tuple[str, str, bytes, bytes | None]]:
    found = []
    for protocol in PROTOCOLS:
        for path in sorted((FIXTURES / protocol).glob("*.sse")):
            request = path.with_name(path.stem + ".request.json")
            body = request.read_bytes() if request.exists() else None
            found.append((protocol, path.stem, path.read_bytes(), body))
    return found


FIXTURE_LIST = _fixtures()
BY_NAME = {(protocol, name): (body, request) for protocol, name, body, request in FIXTURE_LIST}


def sent_frames(body: bytes, ending: str) -> list[bytes]:
    parts = frames(body)
    if ending == "crash":
        return parts[: max(1, len(parts) // 2)]
    if ending == "leave":
        return parts[:1]
    return parts


async def fixture_stream(request: Request) -> Response:
    protocol = request.url.path.split("/")[1]
    ending, name = request.path_params["ending"], request.path_params["name"]
    body, _ = BY_NAME[(protocol, name)]
    await request.body()  # as a real endpoint does: the middleware peeks at it

    async def parts() -> AsyncIterator[bytes]:
        for number, part in enumerate(sent_frames(body, ending)):
            if number % 4 == 3:
                await asyncio.sleep(0.001)  # let the other streams interleave
            yield part
        if ending == "crash":
            raise RuntimeError("model backend failed")
        if ending == "leave":
            await asyncio.sleep(30)  # the client hangs up long before this

    return StreamingResponse(parts(), media_type="text/event-stream")


def expected_report(protocol: str, name: str, ending: str) -> StreamReport:
    """What the engine says offline about the very bytes this stream was sent."""
    body, request = BY_NAME[(protocol, name)]
    monitor = StreamMonitor(protocol, request=json.loads(request) if request else None)
    for part in sent_frames(body, ending):
        monitor.feed(part)
    return monitor.finish(END_OF[ending])


@pytest.mark.parametrize(
    "total",
    [QUICK, pytest.param(TOTAL, marks=pytest.mark.slow)],  # a thousand connections: make check
)
def test_thousand_concurrent_mixed_protocol_streams_each_get_their_own_report(total: int) -> None:
    """1,000 concurrent fixture streams of four protocols: each report is its own stream's
    (200 in ``make test``: cross-talk between streams shows with far fewer than 1,000)."""
    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    lock = threading.Lock()

    def on_report(report: StreamReport) -> None:
        with lock:
            reports.append(report)

    templates = {f"/{protocol}/{{ending}}/{{name}}": protocol for protocol in PROTOCOLS}
    app = Starlette(
        routes=[Route(template, fixture_stream, methods=["POST"]) for template in templates]
    )
    middleware = StreamGuardMiddleware(
        app,
        metrics=registry,
        logs={"enabled": False},
        routes={template: {"protocol": protocol} for template, protocol in templates.items()},
        on_report=on_report,
    )
    plan = [
        (*FIXTURE_LIST[n % len(FIXTURE_LIST)][:2], ENDINGS[n % len(ENDINGS)]) for n in range(total)
    ]

    async def client(url: str) -> None:
        limits = httpx.Limits(max_connections=total, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:

            async def one(protocol: str, name: str, ending: str) -> None:
                request = BY_NAME[(protocol, name)][1] or b""
                try:
                    async with http.stream(
                        "POST", f"/{protocol}/{ending}/{name}", content=request
                    ) as response:
                        async for chunk in response.aiter_raw():
                            if ending == "leave" and chunk:
                                return  # hang up mid-stream
                except httpx.RemoteProtocolError:
                    assert ending == "crash"

            await asyncio.gather(*(one(*step) for step in plan))

    with serve(middleware, log_level="critical", limit_concurrency=total + 100) as url:
        asyncio.run(client(url))
        wait_until(lambda: len(reports) == total and middleware.in_flight == 0, timeout=60)

    outcomes: Counter[tuple[str, str]] = Counter()
    malformed = 0
    for report in reports:
        protocol, ending, name = (report.path or "").split("/")[1:]
        expected = expected_report(protocol, name, ending)
        got = [f for f in report.findings if f.rule not in TIMING_RULES]
        assert (report.protocol, report.outcome) == (protocol, expected.outcome), report.path
        assert got == list(expected.findings), report.path
        assert (report.events, report.bytes) == (expected.events, expected.bytes), report.path
        assert report.internal_error is None
        outcomes[(protocol, report.outcome.value)] += 1
        malformed += report.malformed
    assert malformed > total // 10  # the comparison covers many findings, not only clean runs
    assert Counter((r.path or "").split("/")[1] for r in reports) == Counter(p for p, _, _ in plan)
    # connection_lost is a reader's outcome (the transports, collect): a server never sees it.
    server_side = {o.value for o in Outcome} - {"cancelled", "connection_lost"}
    assert {outcome for _, outcome in outcomes} >= server_side

    in_progress = [
        sample.value
        for family in registry.collect()
        if family.name == "streamguard_streams_in_progress"
        for sample in family.samples
    ]
    assert in_progress
    assert set(in_progress) == {0}
    started = sum(
        sample.value
        for family in registry.collect()
        if family.name == "streamguard_streams_started"
        for sample in family.samples
        if sample.name == "streamguard_streams_started_total"
    )
    assert started == total
    assert [s for s in middleware._sweepers.values() if s.running or s.watches] == []
    gc.collect()
    watches = [o for o in gc.get_objects() if type(o).__name__ == "_Exchange"]
    assert watches == []
    assert not [t for t in threading.enumerate() if t.name == "streamguard-uvicorn"]


def test_plan_mixes_every_protocol_healthy_and_broken() -> None:
    """The fixture pool behind the concurrency test holds healthy and broken streams of each."""
    for protocol in PROTOCOLS:
        names = [name for p, name, _, _ in FIXTURE_LIST if p == protocol]
        assert any(name.startswith(("ok", "clean")) for name in names), protocol
        assert any(not name.startswith(("ok", "clean", "warn")) for name in names), protocol
    assert len(FIXTURE_LIST) < QUICK < TOTAL  # every fixture is served at least once
