"""An app whose streams never end, for the SIGTERM test: each report is appended to a file.

Served by ``tests/test_shutdown.py`` in a uvicorn subprocess; ``SHUTDOWN_REPORTS`` names the
file that receives one JSON line per report.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from streamguard import StreamGuardMiddleware, StreamReport


def write_report(report: StreamReport) -> None:
    line = json.dumps({"outcome": report.outcome.value, "events": report.events})
    with open(os.environ["SHUTDOWN_REPORTS"], "a") as reports:
        reports.write(line + "\n")


async def forever(request: Request) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        yield b"data: first\n\n"
        await asyncio.sleep(3600)

    return StreamingResponse(events(), media_type="text/event-stream")


app = StreamGuardMiddleware(
    Starlette(routes=[Route("/forever", forever)]),
    on_report=write_report,
    metrics=False,
    logs={"enabled": False},
)
