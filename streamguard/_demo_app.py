"""The demo app: healthy and deliberately broken streams of each protocol (Starlette only).

Each route shows one way a stream goes wrong on the wire; streamguard is mounted as
middleware and reports every stream through ``on_report``. ``streamguard demo`` serves it,
and ``examples/plain_sse_app.py`` re-exports it.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from streamguard.middleware import StreamGuardMiddleware
from streamguard.report import StreamReport

__all__ = ["DEMO_TIMERS", "PROTOCOLS", "ROUTES", "build_app"]

#: path -> what the demo expects to see there, for the table and the tests.
ROUTES = {
    "/healthy": "a well-framed stream of five events",
    "/keepalive": "CRLF frames with sse-starlette-style ': ping' comments (clean)",
    "/cut-frame": "the last event has no blank line after it",
    "/invalid-utf8": "a byte that is not UTF-8 inside an event",
    "/content-length": "an event stream sent with a Content-Length header; the client ends it",
    "/gzip": "a compressed stream, passed through uninspected",
    "/never-finished": "the app returns without the final body message",
    "/crash": "the app raises in the middle of the stream",
    "/v1/chat/completions": "a healthy OpenAI chat stream ending in [DONE]",
    "/openai/no-done": "an OpenAI chat stream that never sends [DONE]",
    "/openai/role-repeated": "an OpenAI chat stream repeating the role on every chunk",
    "/openai/held-open": "[DONE] sent, then the body kept open (a hanging client)",
    "/openai/buffered": "a long silence, then the whole answer in one send",
    "/v1/messages": "a healthy Anthropic Messages stream ending in message_stop",
    "/anthropic/delta-before-start": "an Anthropic text delta before its block started",
    "/api/chat": "a healthy AI SDK UI message stream (useChat's protocol) ending in [DONE]",
    "/ai-sdk/delta-before-start": "an AI SDK text-delta for a part that never started",
    "/ag-ui/agent": "a healthy AG-UI run (ag-ui-protocol's EventEncoder framing)",
    "/ag-ui/unclosed-message": "an AG-UI run finished with a text message still open",
    "/mcp": "a healthy MCP standalone GET stream: priming event, server requests, notifications",
    "/mcp/response-on-get": "an MCP GET stream carrying a tool's response (the POST's to carry)",
}

#: The protocol of each LLM-shaped route, as a deployment would configure it.
PROTOCOLS = {
    "/v1/chat/completions": "openai_chat",
    "/openai/no-done": "openai_chat",
    "/openai/role-repeated": "openai_chat",
    "/openai/held-open": "openai_chat",
    "/openai/buffered": "openai_chat",
    "/v1/messages": "anthropic",
    "/anthropic/delta-before-start": "anthropic",
    "/api/chat": "ai_sdk_ui",
    "/ai-sdk/delta-before-start": "ai_sdk_ui",
    "/ag-ui/agent": "ag_ui",
    "/ag-ui/unclosed-message": "ag_ui",
    "/mcp": "mcp",
    "/mcp/response-on-get": "mcp",
}

#: Short liveness timers, so the demo shows them within a second.
DEMO_TIMERS = {"body_end_grace_s": 0.1, "burst_window_s": 0.02}


async def _pause(request: Request, seconds: float) -> None:
    """Every pause of the demo's routes: ``build_app``'s ``sleep`` (``asyncio.sleep``, unless
    a test passes one that also moves the middleware's clock)."""
    sleep: Callable[[float], Awaitable[None]] = request.app.state.sleep
    await sleep(seconds)


async def _paced(
    request: Request, frames: list[bytes], delay: float = 0.002
) -> AsyncIterator[bytes]:
    for frame in frames:
        yield frame
        await _pause(request, delay)


def _events(n: int) -> list[bytes]:
    return [f"data: token {i}\n\n".encode() for i in range(n)]


def _sse(
    request: Request, frames: list[bytes], headers: dict[str, str] | None = None
) -> StreamingResponse:
    body = _paced(request, frames)
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


class _NeverFinished(Response):
    """A response that forgets the final ``more_body=False`` message."""

    def __init__(self) -> None:
        super().__init__()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for frame in _events(2):
            await send({"type": "http.response.body", "body": frame, "more_body": True})


async def _healthy(request: Request) -> Response:
    return _sse(request, _events(5))


async def _keepalive(request: Request) -> Response:
    frames = [b": ping - 2026-11-30 12:00:00\r\n\r\n", b"data: hello\r\n\r\n"]
    return _sse(request, [*frames, b": ping - 2026-11-30 12:00:15\r\n\r\n", b"data: bye\r\n\r\n"])


async def _cut_frame(request: Request) -> Response:
    return _sse(request, [*_events(2), b"data: bye"])


async def _invalid_utf8(request: Request) -> Response:
    return _sse(request, [b"data: caf\xe9\n\n", *_events(1)])


#: How long ``/content-length`` works on after its last event before it ends the body.
CONTENT_LENGTH_HOLD_S = 0.05


async def _content_length(request: Request) -> Response:
    frames = _events(2)

    async def body() -> AsyncIterator[bytes]:
        async for frame in _paced(request, frames):
            yield frame
        # Work after the last event (usage, logs), as real apps do: the client has every
        # byte the Content-Length promised by now, so it, not the app, ends the stream.
        await _pause(request, CONTENT_LENGTH_HOLD_S)

    headers = {"content-length": str(sum(map(len, frames)))}
    return StreamingResponse(body(), media_type="text/event-stream", headers=headers)


async def _gzipped(request: Request) -> Response:
    return _sse(
        request, [gzip.compress(b"".join(_events(3)))], headers={"content-encoding": "gzip"}
    )


async def _never_finished(request: Request) -> Response:
    return _NeverFinished()


async def _crash(request: Request) -> Response:
    async def frames() -> AsyncIterator[bytes]:
        yield b"data: partial answer\n\n"
        await _pause(request, 0.005)
        raise RuntimeError("the model backend went away")

    return StreamingResponse(frames(), media_type="text/event-stream")


def _chat_chunk(delta: str, role: bool = False, finish: str | None = None) -> bytes:
    choice: dict[str, Any] = {
        "index": 0,
        "delta": ({"role": "assistant"} if role else {}) | ({"content": delta} if delta else {}),
        "logprobs": None,
        "finish_reason": finish,
    }
    chunk = {
        "id": "chatcmpl-demo",
        "object": "chat.completion.chunk",
        "created": 1764460800,
        "model": "demo-model",
        "choices": [choice],
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


_WORDS = ["Streams", " are", " checked", " frame", " by", " frame", "."]


def _chat(role_every_chunk: bool = False, done: bool = True, words: int = 7) -> list[bytes]:
    text = (_WORDS * 4)[:words]
    frames = [_chat_chunk("", role=True)]
    frames += [_chat_chunk(word, role=role_every_chunk) for word in text]
    frames.append(_chat_chunk("", finish="stop"))
    return [*frames, b"data: [DONE]\n\n"] if done else frames


def _anthropic(delta_before_start: bool = False) -> list[bytes]:
    def event(name: str, payload: dict[str, Any]) -> bytes:
        body = json.dumps({"type": name, **payload}, separators=(",", ":"))
        return f"event: {name}\ndata: {body}\n\n".encode()

    message: dict[str, Any] = {
        "id": "msg_demo",
        "type": "message",
        "role": "assistant",
        "model": "demo-model",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    text_delta = event(
        "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Hi"}}
    )
    frames = [event("message_start", {"message": message})]
    if delta_before_start:
        frames.append(text_delta)
    frames += [
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        event("ping", {}),
        text_delta,
        event("content_block_stop", {"index": 0}),
        event(
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
        ),
        event("message_stop", {}),
    ]
    return frames


async def _openai(request: Request) -> Response:
    return _sse(request, _chat())


async def _openai_no_done(request: Request) -> Response:
    return _sse(request, _chat(done=False))


async def _openai_role_repeated(request: Request) -> Response:
    return _sse(request, _chat(role_every_chunk=True))


async def _openai_held_open(request: Request) -> Response:
    async def frames() -> AsyncIterator[bytes]:
        for frame in _chat():
            yield frame
        await _pause(request, 0.4)  # a proxy that keeps the connection after [DONE]

    return StreamingResponse(frames(), media_type="text/event-stream")


async def _openai_buffered(request: Request) -> Response:
    async def frames() -> AsyncIterator[bytes]:
        await _pause(request, 0.5)  # the proxy collects the whole answer first ...
        yield b"".join(_chat(words=24))  # ... then flushes it in one piece

    return StreamingResponse(frames(), media_type="text/event-stream")


async def _anthropic_ok(request: Request) -> Response:
    return _sse(request, _anthropic())


async def _anthropic_delta_before_start(request: Request) -> Response:
    return _sse(request, _anthropic(delta_before_start=True))


def _data(payload: object) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _ai_sdk(delta_before_start: bool = False) -> list[bytes]:
    text = [{"type": "text-delta", "id": "txt_1", "delta": word} for word in _WORDS]
    chunks: list[object] = [{"type": "start", "messageId": "msg_demo"}, {"type": "start-step"}]
    if delta_before_start:
        chunks.append(text[0])
    chunks += [{"type": "text-start", "id": "txt_1"}, *text, {"type": "text-end", "id": "txt_1"}]
    chunks += [{"type": "finish-step"}, {"type": "finish", "finishReason": "stop"}]
    return [*map(_data, chunks), b"data: [DONE]\n\n"]


def _ag_ui(unclosed: bool = False) -> list[bytes]:
    run = {"threadId": "thread_demo", "runId": "run_demo"}
    events: list[object] = [{"type": "RUN_STARTED", **run}]
    events.append({"type": "TEXT_MESSAGE_START", "messageId": "msg_1", "role": "assistant"})
    events += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "msg_1", "delta": w} for w in _WORDS]
    if not unclosed:
        events.append({"type": "TEXT_MESSAGE_END", "messageId": "msg_1"})
    events.append({"type": "RUN_FINISHED", **run})
    return [_data(event) for event in events]


#: The response header that marks an AI SDK UI message stream.
_UI_MESSAGE_STREAM = {"x-vercel-ai-ui-message-stream": "v1"}


async def _ai_sdk_ok(request: Request) -> Response:
    return _sse(request, _ai_sdk(), headers=_UI_MESSAGE_STREAM)


async def _ai_sdk_delta_before_start(request: Request) -> Response:
    return _sse(request, _ai_sdk(delta_before_start=True), headers=_UI_MESSAGE_STREAM)


async def _ag_ui_ok(request: Request) -> Response:
    return _sse(request, _ag_ui())


async def _ag_ui_unclosed(request: Request) -> Response:
    return _sse(request, _ag_ui(unclosed=True))


def _mcp(response_on_get: bool = False) -> list[bytes]:
    """A GET's standalone stream as mcp's StreamableHTTPServerTransport writes it (CRLF,
    ``event: message``, an id on each event after a priming event)."""
    messages: list[object] = [
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        {"jsonrpc": "2.0", "id": 0, "method": "roots/list"},
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "index rebuilt"},
        },
    ]
    if response_on_get:
        content = [{"type": "text", "text": "It is 18 degrees in Paris."}]
        messages.append({"jsonrpc": "2.0", "id": 7, "result": {"content": content}})
    frames = [b"id: 0\r\nretry: 1000\r\ndata: \r\n\r\n"]
    for number, message in enumerate(messages, 1):
        data = json.dumps(message, separators=(",", ":"))
        frames.append(f"id: {number}\r\nevent: message\r\ndata: {data}\r\n\r\n".encode())
    return frames


async def _mcp_ok(request: Request) -> Response:
    return _sse(request, _mcp())


async def _mcp_response_on_get(request: Request) -> Response:
    return _sse(request, _mcp(response_on_get=True))


def build_app(
    on_report: Callable[[StreamReport], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    **options: Any,
) -> StreamGuardMiddleware:
    """The demo app with streamguard mounted; ``on_report`` receives every stream's report.

    Every pause of the routes goes through ``sleep``: a test gives one that also moves the
    middleware's ``clock``, so the timing rules judge the pauses written here and not how
    long a busy machine took between them. ``options`` go to ``StreamGuardMiddleware`` (by
    default: the LLM routes configured with their protocols and short liveness timers).
    """
    app = Starlette(
        routes=[
            Route("/healthy", _healthy),
            Route("/keepalive", _keepalive),
            Route("/cut-frame", _cut_frame),
            Route("/invalid-utf8", _invalid_utf8),
            Route("/content-length", _content_length),
            Route("/gzip", _gzipped),
            Route("/never-finished", _never_finished),
            Route("/crash", _crash),
            Route("/v1/chat/completions", _openai),
            Route("/openai/no-done", _openai_no_done),
            Route("/openai/role-repeated", _openai_role_repeated),
            Route("/openai/held-open", _openai_held_open),
            Route("/openai/buffered", _openai_buffered),
            Route("/v1/messages", _anthropic_ok),
            Route("/anthropic/delta-before-start", _anthropic_delta_before_start),
            Route("/api/chat", _ai_sdk_ok),
            Route("/ai-sdk/delta-before-start", _ai_sdk_delta_before_start),
            Route("/ag-ui/agent", _ag_ui_ok),
            Route("/ag-ui/unclosed-message", _ag_ui_unclosed),
            Route("/mcp", _mcp_ok),
            Route("/mcp/response-on-get", _mcp_response_on_get),
        ]
    )
    app.state.sleep = sleep
    options.setdefault("routes", PROTOCOLS)
    options.setdefault("timers", DEMO_TIMERS)
    return StreamGuardMiddleware(app, on_report=on_report, **options)
