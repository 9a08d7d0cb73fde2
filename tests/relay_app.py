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
* ``translate_error_in_band``: translated as LiteLLM translates: an upstream cut (no
  ``message_stop``) or ended by its ``error`` event becomes a clean in-band error payload
  and ``[DONE]`` (the client's stream ends ``error_event``, with no finding);
  ``translate_then_gateway_error``: the same, but the in-band error is written after every
  upstream (the gateway's own failure, a post-call hook that raised);
* ``draft_then_faithful``: two upstream calls: the first read to its end and discarded, the
  second relayed faithfully;
* ``leak``: faithful, but the relay stops reading at ``[DONE]`` and never closes the upstream
  response (kept in ``LEAKED`` so that ``POST /close-leaked`` closes it later);
* ``background_close``: stops at ``[DONE]`` too, and hands the close to a
  ``BackgroundTask``, after the body ended and before the app returns: no leak;
* ``background_poller``: starts a background task (``asyncio.create_task``, not awaited)
  that reads the first upstream fixture to its end, then opens the second and keeps it
  open until ``POST /stop-pollers``; once both were opened the relay reads the third
  upstream, dropping its ``[DONE]`` (the gateway's own bug);
* ``fan_out_gather``, ``fan_out_task_group``: the first upstream read to its end and the
  second opened, each in a task of its own, awaited (``asyncio.gather``, an anyio task
  group); the second is relayed dropping its ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from streamguard.httpx import AsyncStreamGuardTransport

__all__ = ["IN_BAND_ERROR", "LEAKED", "POLLERS", "relay_app", "upstream_app"]

FIXTURES = Path(__file__).parent / "fixtures"
_PATHS = {"openai_chat": "/v1/chat/completions", "anthropic": "/v1/messages"}
#: Upstream responses the ``leak`` relay left open, until ``/close-leaked`` closes them.
LEAKED: list[httpx.Response] = []
#: The ``background_poller`` relays' tasks and what stops each, until ``/stop-pollers``.
POLLERS: list[tuple[asyncio.Task[None], asyncio.Event]] = []
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


#: The in-band error a gateway writes for a failure, as LiteLLM writes it (openai-python
#: raises ``APIError`` with its message).
IN_BAND_ERROR = (
    'data: {"error": {"message": "the upstream stream failed", "type": "upstream_error", '
    '"param": null, "code": "502"}}\n\n'
)


async def _translate(
    response: httpx.Response, *, done: bool, seen: set[str] | None = None
) -> AsyncIterator[str]:
    """An Anthropic Messages stream as OpenAI Chat chunks (text only); the event types read
    go in ``seen``."""
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        event = json.loads(line[5:])
        kind = event.get("type")
        if seen is not None:
            seen.add(kind)
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


async def _relayed(response: httpx.Response, *, drop_done: bool) -> AsyncIterator[str]:
    async with _closing(response):
        async for line in _lines(response, drop_done=drop_done):
            yield line


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

    async def read_to_the_end(fixture: str, gate: str | None) -> None:
        async with _closing(await open_upstream(fixture, gate)) as response:
            async for _line in response.aiter_lines():
                pass

    async def poll(fixtures: list[str], opened: asyncio.Event, stop: asyncio.Event) -> None:
        """A background poller: one upstream read to its end, one kept open until stopped."""
        await read_to_the_end(fixtures[0], None)
        async with _closing(await open_upstream(fixtures[1], None)):
            opened.set()
            await stop.wait()

    async def fan_out(mode: str, fixtures: list[str], gate: str | None) -> httpx.Response:
        """The first upstream read to its end, the second opened: each in its own task."""
        if mode == "fan_out_gather":
            _, opened = await asyncio.gather(
                read_to_the_end(fixtures[0], gate), open_upstream(fixtures[1], gate)
            )
            return opened
        responses: list[httpx.Response] = []

        async def open_one() -> None:
            responses.append(await open_upstream(fixtures[1], gate))

        async with anyio.create_task_group() as group:
            group.start_soon(read_to_the_end, fixtures[0], gate)
            group.start_soon(open_one)
        return responses[0]

    async def relay(request: Request) -> Response:
        mode = request.headers["x-relay"]
        fixtures = request.headers["x-upstream"].split(",")
        gate = request.headers.get("x-gate")
        await request.body()
        if mode == "background_poller":
            opened, stop = asyncio.Event(), asyncio.Event()
            POLLERS.append((asyncio.create_task(poll(fixtures[:2], opened, stop)), stop))
            await opened.wait()  # (the event, not the task: the poller keeps running)
            fixtures, mode = fixtures[2:], "drop_done"
        if mode.startswith("fan_out_"):
            upstream = await fan_out(mode, fixtures, gate)
            return StreamingResponse(
                _relayed(upstream, drop_done=True), media_type="text/event-stream"
            )
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
            elif mode in ("translate_error_in_band", "translate_then_gateway_error"):
                seen: set[str] = set()
                async with _closing(upstream):
                    async for text in _translate(upstream, done=False, seen=seen):
                        yield text
                failed = "message_stop" not in seen or "error" in seen
                if failed or mode == "translate_then_gateway_error":
                    yield IN_BAND_ERROR
                yield f"{_DONE}\n\n"
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

    async def stop_pollers(request: Request) -> Response:
        while POLLERS:
            task, stop = POLLERS.pop()
            stop.set()
            await task
        return Response(status_code=204)

    routes: list[Route] = [
        Route("/{lane}/v1/chat/completions", relay, methods=["POST"]),
        Route("/close-leaked", close_leaked, methods=["POST"]),
        Route("/stop-pollers", stop_pollers, methods=["POST"]),
    ]
    return Starlette(routes=routes)
