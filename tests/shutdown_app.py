"""Apps whose streams never end, for the SIGTERM tests: each report is appended to a file.

Served by ``tests/test_shutdown.py`` in a uvicorn subprocess; ``SHUTDOWN_REPORTS`` names the
file that receives one JSON line per report. ``app`` calls ``on_report`` itself;
``queued_app`` hands the reports to a ``ReportQueue`` (the README's way), whose worker
thread must deliver them before uvicorn re-raises SIGTERM. ``/forever`` is Starlette's
``StreamingResponse``, ``/forever-sse`` sse-starlette's ``EventSourceResponse``, which ends
its streams itself when uvicorn shuts down.
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

from streamguard import StreamGuardMiddleware, StreamReport
from streamguard.handoff import ReportQueue


def write_report(report: StreamReport) -> None:
    line = json.dumps(
        {"outcome": report.outcome.value, "events": report.events, "rules": report.rules()}
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


ROUTES = [Route("/forever", forever), Route("/forever-sse", forever_sse)]

app = StreamGuardMiddleware(
    Starlette(routes=ROUTES),
    on_report=write_report,
    metrics=False,
    logs={"enabled": False},
)

queued_app = StreamGuardMiddleware(
    Starlette(routes=ROUTES),
    on_report=ReportQueue(write_report),
    metrics=False,
    logs={"enabled": False},
)
