"""Starlette with sse-starlette's ``EventSourceResponse``, watched by streamguard.

sse-starlette frames every event with CRLF line endings (its default separator) and, from
a concurrent task, sends keep-alive comments (``: ping - <timestamp>``) between events.
Both are legal SSE (reference §5): streamguard parses CR, LF and CRLF alike and ignores
comments, so these streams are clean. Two routes show it:

* ``GET /events``: plain SSE (``protocol="sse"``): named events with ids, one of them with
  a multi-line ``data`` (sse-starlette splits it into several ``data:`` lines);
* ``POST /v1/chat/completions``: an OpenAI Chat stream ending in ``data: [DONE]``.

The ping interval is short here (``build_app(ping_s=...)``; sse-starlette's default is
15 s) so that pings land between tokens. Needs ``pip install sse-starlette``. Run it::

    uvicorn examples.starlette_app:app --port 8000
    curl -N localhost:8000/events
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from prometheus_client import CollectorRegistry
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from streamguard import StreamGuardMiddleware, StreamReport
from streamguard.metrics import metrics_app

__all__ = ["ANSWER", "ROUTES", "TICKS", "app", "build_app"]

#: The watched routes and their protocols.
ROUTES = {"/events": "sse", "/v1/chat/completions": "openai_chat"}

#: The data of the events ``/events`` sends.
TICKS = ["tick 0", "tick 1", "a multi-line\nevent", "tick 3", "tick 4"]

#: The text the OpenAI-shaped route streams, one word per chunk.
ANSWER = "Carriage returns and ping comments are part of SSE."


def build_app(
    *,
    ping_s: float = 0.05,
    token_delay: float = 0.12,
    registry: CollectorRegistry | None = None,
    on_report: Callable[[StreamReport], None] | None = None,
) -> Starlette:
    """The app with streamguard mounted; ``ping_s`` is sse-starlette's ping interval and
    ``token_delay`` the pause between events (longer than ``ping_s``, so pings interleave)."""

    async def ticks() -> AsyncIterator[ServerSentEvent]:
        for number, data in enumerate(TICKS):
            yield ServerSentEvent(data=data, event="tick", id=str(number))
            await anyio.sleep(token_delay)

    async def events(request: Request) -> Response:
        return EventSourceResponse(ticks(), ping=ping_s)

    async def chunks(model: str) -> AsyncIterator[dict[str, Any]]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {
                "data": json.dumps(
                    {
                        "id": "chatcmpl-sse0001",
                        "object": "chat.completion.chunk",
                        "created": 1764500000,
                        "model": model,
                        "choices": [choice],
                    }
                )
            }

        yield chunk({"role": "assistant", "content": ""})
        for position, word in enumerate(ANSWER.split(" ")):
            await anyio.sleep(token_delay)
            yield chunk({"content": word if position == 0 else f" {word}"})
        yield chunk({}, "stop")
        yield {"data": "[DONE]"}

    async def chat_completions(request: Request) -> Response:
        body = await request.json()
        return EventSourceResponse(chunks(body.get("model", "fake")), ping=ping_s)

    return Starlette(
        routes=[
            Route("/events", events),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/metrics", metrics_app(registry)),  # /metrics itself, no redirect
        ],
        middleware=[
            Middleware(StreamGuardMiddleware, routes=ROUTES, metrics=registry, on_report=on_report)
        ],
    )


#: The example app (process-wide metrics registry).
app = build_app()
