"""A gateway for the attribution tests: a relay app that reads upstream streams through a
streamguard transport and writes its own OpenAI Chat stream, and the upstream it reads.

``upstream_app()`` serves canned streams from ``tests/fixtures``: ``POST /v1/chat/completions``
(OpenAI Chat) and ``POST /v1/messages`` (Anthropic), the fixture named by the ``x-fixture``
header (``openai_chat/role_repeated``). With ``x-gate: KEY/N`` a request waits until N
requests with the same key have arrived, so that concurrent relay requests are in flight
at the same time for real.

``relay_app(upstream_url, ...)`` is a Starlette app under the middleware (the caller mounts
it) whose ``POST /{lane}/v1/chat/completions`` relays the upstream fixtures named in
``x-upstream`` (comma separated, read in that order) the way ``x-relay`` says:

* ``faithful``: an OpenAI Chat upstream, line by line, as it came;
* ``drop_done``: the same, without ``data: [DONE]`` (a gateway's bug);
* ``repair``: the same, adding ``data: [DONE]`` when the upstream never sent it;
* ``translate``: an Anthropic upstream translated into OpenAI Chat chunks, ``[DONE]`` for
  ``message_stop``; ``translate_drop_done``: the same, forgetting ``[DONE]``;
* ``draft_then_faithful``: two upstream calls: the first read to its end and discarded, the
  second relayed faithfully;
* ``leak``: faithful, but the relay stops reading at ``[DONE]`` and never closes the upstream
  response (kept in ``LEAKED`` so that ``POST /close-leaked`` closes it later);
* ``background_close``: stops at ``[DONE]`` too, and hands the close to a
  ``BackgroundTask``, after the body ended and before the app returns: no leak.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from streamguard.httpx import AsyncStreamGuardTransport

__all__ = ["LEAKED", "relay_app", "upstream_app"]

FIXTURES = Path(__file__).parent / "fixtures"
_PATHS = {"openai_chat": "/v1/chat/completions", "anthropic": "/v1/messages"}
#: Upstream responses the ``leak`` relay left open, until ``/close-leaked`` closes them.
LEAKED: list[httpx.Response] = []
_DONE = "data: [DONE]"


def upstream_app() -> Starlette:
    arrived: dict[str, int] = defaultdict(int)
    gates: dict[str, asyncio.Event] = defaultdict(asyncio.Event)

    async def serve(request: Request) -> Response:
        body = (FIXTURES / f"{request.headers['x-fixture']}.sse").read_bytes()
        gate = request.headers.get("x-gate")
        if gate is not None:
            key, count = gate.rsplit("/", 1)
            arrived[key] += 1
            if arrived[key] >= int(count):
                gates[key].set()
            await gates[key].wait()

        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(body), 97):  # event boundaries fall anywhere
                yield body[start : start + 97]
                await asyncio.sleep(0)

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return Starlette(
        routes=[Route(path, serve, methods=["POST"]) for path in _PATHS.values()],
    )


def _request_body(fixture: str) -> dict[str, Any]:
    """What the relay asks its upstream for: the fixture's request, if it has one."""
    path = FIXTURES / f"{fixture}.request.json"
    if path.exists():
        loaded: dict[str, Any] = json.loads(path.read_text())
        return loaded
    return {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
    chunk = {
        "id": "chatcmpl-relay",
        "object": "chat.completion.chunk",
        "created": 1755012345,
        "model": "relay",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    return f"data: {json.dumps(chunk)}\n\n"


_STOP_REASONS = {"end_turn": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


async def _translate(response: httpx.Response, *, done: bool) -> AsyncIterator[str]:
    """An Anthropic Messages stream as OpenAI Chat chunks (text only)."""
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        event = json.loads(line[5:])
        kind = event.get("type")
        if kind == "message_start":
            yield _chunk({"role": "assistant", "content": ""})
        elif kind == "content_block_delta" and event["delta"].get("type") == "text_delta":
            yield _chunk({"content": event["delta"]["text"]})
        elif kind == "message_delta":
            reason = event["delta"].get("stop_reason")
            yield _chunk({}, _STOP_REASONS.get(reason, "stop"))
        elif kind == "message_stop" and done:
            yield f"{_DONE}\n\n"


async def _lines(response: httpx.Response, *, drop_done: bool = False) -> AsyncIterator[str]:
    async for line in response.aiter_lines():
        if drop_done and line == _DONE:
            continue
        yield f"{line}\n"


@contextlib.asynccontextmanager
async def _closing(response: httpx.Response) -> AsyncIterator[httpx.Response]:
    try:
        yield response
    finally:
        await response.aclose()


def relay_app(upstream_url: str, **transport_options: Any) -> Starlette:
    """The relay; ``transport_options`` go to its ``AsyncStreamGuardTransport``."""
    transport = AsyncStreamGuardTransport(
        routes={
            "/v1/chat/completions": "openai_chat",
            "/v1/messages": "anthropic",
        },
        **transport_options,
    )
    client = httpx.AsyncClient(base_url=upstream_url, transport=transport)

    async def open_upstream(fixture: str, gate: str | None) -> httpx.Response:
        headers = {"x-fixture": fixture}
        if gate is not None:
            headers["x-gate"] = gate
        request = client.build_request(
            "POST",
            _PATHS[fixture.split("/", 1)[0]],
            json=_request_body(fixture),
            headers=headers,
        )
        return await client.send(request, stream=True)

    async def relay(request: Request) -> Response:
        mode = request.headers["x-relay"]
        fixtures = request.headers["x-upstream"].split(",")
        gate = request.headers.get("x-gate")
        await request.body()
        if mode == "draft_then_faithful":
            draft = await open_upstream(fixtures[0], gate)
            async for _line in draft.aiter_lines():
                pass
            await draft.aclose()
            fixtures = fixtures[1:]
        upstream = await open_upstream(fixtures[0], gate)
        background = None

        async def body() -> AsyncIterator[str]:
            if mode in ("faithful", "draft_then_faithful"):
                async with _closing(upstream):
                    async for line in _lines(upstream):
                        yield line
            elif mode == "drop_done":
                async with _closing(upstream):
                    async for line in _lines(upstream, drop_done=True):
                        yield line
            elif mode == "repair":
                done = False
                async with _closing(upstream):
                    async for line in _lines(upstream):
                        done = done or line == f"{_DONE}\n"
                        yield line
                if not done:
                    yield f"\n{_DONE}\n\n"
            elif mode in ("translate", "translate_drop_done"):
                async with _closing(upstream):
                    async for text in _translate(upstream, done=mode == "translate"):
                        yield text
            elif mode in ("leak", "background_close"):
                if mode == "leak":
                    LEAKED.append(upstream)
                lines = _lines(upstream)
                async for line in lines:
                    yield line
                    if line == f"{_DONE}\n":
                        yield "\n"
                        break  # the upstream's body is not read to its end, nor closed here
            else:  # pragma: no cover - a test's typo
                raise ValueError(mode)

        if mode == "background_close":
            background = BackgroundTask(upstream.aclose)
        return StreamingResponse(body(), media_type="text/event-stream", background=background)

    async def close_leaked(request: Request) -> Response:
        while LEAKED:
            await LEAKED.pop().aclose()
        return Response(status_code=204)

    routes: list[Route] = [
        Route("/{lane}/v1/chat/completions", relay, methods=["POST"]),
        Route("/close-leaked", close_leaked, methods=["POST"]),
    ]
    return Starlette(routes=routes)
