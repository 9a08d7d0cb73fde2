"""The app served by ``benchmarks/e2e.py``: raw ASGI, one frame per ``send``.

``STREAMGUARD_BENCH_MIDDLEWARE`` picks what wraps it: ``none``, ``noop`` (a pure ASGI
middleware that only forwards, the floor of any middleware) or ``streamguard`` (default
configuration: metrics and logs on).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any

import structlog
from starlette.types import ASGIApp, Receive, Scope, Send

from streamguard import StreamGuardMiddleware
from streamguard.metrics import metrics_app
from streamguard.protocols._skeleton import learning

FRAMES = int(os.environ.get("STREAMGUARD_BENCH_FRAMES", "30000"))


def _chunk(i: int) -> bytes:
    payload = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1741570283,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_eb9dce56a8",
        "choices": [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": ""} if i == 0 else {"content": f" t{i}"},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
        "usage": None,
        "obfuscation": "Xk2",
    }
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


_FINISH = (
    b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1741570283,'
    b'"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"logprobs":null,'
    b'"finish_reason":"stop"}],"usage":null}\n\n'
)
STREAM = [_chunk(i) for i in range(FRAMES - 2)] + [_FINISH, b"data: [DONE]\n\n"]
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
_JSON_HEADERS = [(b"content-type", b"application/json")]


PACED_EVENTS = int(os.environ.get("STREAMGUARD_BENCH_PACED_EVENTS", "100"))
#: 10 events/s per stream: 1,000 concurrent streams make the 10,000 chunks/s of the budget.
PACED_INTERVAL = 1 / 10


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    if scope["path"] == "/metrics":
        await metrics_app()(scope, receive, send)
        return
    if scope["path"] == "/paced":
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        for frame in STREAM[: PACED_EVENTS - 2] + STREAM[-2:]:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            await asyncio.sleep(PACED_INTERVAL)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    if scope["path"] in ("/idle", "/idle-listed"):  # two frames, then open and idle
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        for frame in STREAM[:2]:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass
        return
    if scope["path"] == "/json":
        await send({"type": "http.response.start", "status": 200, "headers": _JSON_HEADERS})
        await send({"type": "http.response.body", "body": b'{"ok":true}'})
        return
    await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
    for frame in STREAM:
        await send({"type": "http.response.body", "body": frame, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class NoopMiddleware:
    """Wraps ``send`` and ``receive`` and does nothing else."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def wrapped_receive() -> Any:
            return await receive()

        async def wrapped_send(message: Any) -> None:
            await send(message)

        await self.app(scope, wrapped_receive, wrapped_send)


# Logs go through the standard library at INFO, as a production service would have them.
logging.basicConfig(level=logging.INFO, format="%(message)s", filename=os.devnull)
structlog.configure(logger_factory=structlog.stdlib.LoggerFactory())

_choice = os.environ.get("STREAMGUARD_BENCH_MIDDLEWARE", "none")
served: ASGIApp
if _choice == "streamguard-full":  # every frame parsed: the shape cache's own figure
    learning(False)
    _choice = "streamguard"
#: The parts of the load run (``benchmarks/load_parts.py``): streamguard with its sinks and
#: timers off, the same on a route checked as plain SSE (no JSON read), and a route it
#: excludes (the middleware's shell alone).
_QUIET: dict[str, Any] = {
    "logs": {"enabled": False},
    "metrics": False,
    "timers": {"enabled": False},
}
_ROUTES = {"/stream": "openai_chat", "/paced": "openai_chat", "/idle-listed": "openai_chat"}
if _choice == "streamguard":
    # /idle is left to auto-detection (watch_unlisted); the others are declared.
    served = StreamGuardMiddleware(app, routes=_ROUTES)
elif _choice == "streamguard-quiet":
    served = StreamGuardMiddleware(app, routes=_ROUTES, **_QUIET)
elif _choice == "streamguard-quiet-sse":
    served = StreamGuardMiddleware(app, routes={**_ROUTES, "/paced": "sse"}, **_QUIET)
elif _choice == "streamguard-excluded":
    served = StreamGuardMiddleware(app, routes=_ROUTES, exclude_paths=["/paced"], **_QUIET)
elif _choice == "noop":
    served = NoopMiddleware(app)
else:
    served = app
