"""A proxy that serves an Anthropic Messages upstream as an OpenAI Chat Completions stream.

The downstream terminal frames (the ``finish_reason`` chunk, the usage chunk, ``data:
[DONE]``) are *generated* by the proxy, not forwarded: upstream ``message_stop`` becomes
downstream ``[DONE]``. A translation bug there is invisible upstream and fatal downstream,
so streamguard watches both sides:

* downstream, ``StreamGuardMiddleware`` checks what the proxy sends (``openai_chat``);
* upstream, the proxy's httpx client reads through ``AsyncStreamGuardTransport``, which
  checks every upstream chunk as the proxy reads it (``anthropic``), with the same rules;
  its report goes to ``on_upstream_report``, and its metrics are the
  ``streamguard_upstream_*`` series of the same registry.

``?bug=no_done`` switches on a deliberate pass-through bug: the proxy drops ``[DONE]``.
The upstream stays clean and the downstream report says ``missing_terminal``: the fault is
the proxy's. ``?upstream_fault=<name>`` asks the upstream (``examples/fastapi_app.py``) for
one of its faults, to see the opposite case. When the upstream ends without
``message_stop`` or ``error``, the proxy does not invent a ``[DONE]``: it sends an OpenAI
in-band error and ends.

Run it against the example app::

    uvicorn examples.fastapi_app:app --port 8000 &
    UPSTREAM_URL=http://127.0.0.1:8000 uvicorn examples.normalizing_proxy:app --port 8001
    curl -N 'localhost:8001/v1/chat/completions?bug=no_done' \\
        -H 'content-type: application/json' \\
        -d '{"model": "fake", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import structlog
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from examples.asgi_endpoint import ASGIEndpoint
from streamguard import Event, StreamGuardMiddleware, StreamMonitor, StreamReport
from streamguard.httpx import AsyncStreamGuardTransport
from streamguard.metrics import metrics_app

__all__ = ["BUGS", "FINISH_REASONS", "Translator", "app", "build_proxy", "to_anthropic"]

#: Deliberate bugs the proxy can be switched into with ``?bug=``.
BUGS = {"no_done": "the proxy never emits data: [DONE]"}

#: Anthropic ``stop_reason`` -> OpenAI ``finish_reason``.
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}

_logger = structlog.get_logger("examples.normalizing_proxy")


def _frame(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def to_anthropic(chat: dict[str, Any]) -> dict[str, Any]:
    """The Anthropic Messages request for an OpenAI Chat Completions request."""
    system = [m["content"] for m in chat.get("messages", []) if m.get("role") == "system"]
    request: dict[str, Any] = {
        "model": chat.get("model", "fake-claude"),
        "max_tokens": chat.get("max_completion_tokens") or chat.get("max_tokens") or 1024,
        "messages": [m for m in chat.get("messages", []) if m.get("role") != "system"],
        "stream": True,
    }
    if system:
        request["system"] = "\n".join(str(part) for part in system)
    tools = [
        {
            "name": tool["function"]["name"],
            "description": tool["function"].get("description", ""),
            "input_schema": tool["function"].get("parameters", {"type": "object"}),
        }
        for tool in chat.get("tools") or []
        if tool.get("type") == "function"
    ]
    if tools:
        request["tools"] = tools
    return request


class Translator:
    """Turns Anthropic events into OpenAI chunks; one per stream.

    ``done`` says whether the upstream ended properly (``message_stop``) and ``failed``
    whether it sent an ``error``; the proxy needs both to know how to end downstream.
    """

    def __init__(self, model: str, include_usage: bool, bug: str | None) -> None:
        self.id = "chatcmpl-proxy"
        self.model = model
        self.include_usage = include_usage
        self.bug = bug
        self.created = int(time.time())
        self.tool_index: dict[int, int] = {}  # Anthropic block index -> OpenAI tool index
        self.input_tokens = 0
        self.output_tokens = 0
        self.done = False
        self.failed = False

    def chunk(
        self,
        delta: dict[str, Any] | None,
        finish: str | None = None,
        usage: dict[str, int] | None = None,
    ) -> bytes:
        """One chunk for choice 0, or (``delta=None``) the usage chunk with no choices."""
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if self.include_usage:
            body["usage"] = usage
        return _frame(body)

    def on_event(self, event: Event) -> list[bytes]:
        """The downstream frames for one upstream event (often none)."""
        try:
            payload = json.loads(event.data)
        except ValueError:
            return []  # the upstream monitor reports it (invalid_json)
        kind = payload.get("type") if isinstance(payload, dict) else None
        handler = getattr(self, f"_on_{kind}", None)
        return handler(payload) if handler is not None else []

    def _on_message_start(self, payload: dict[str, Any]) -> list[bytes]:
        message = payload.get("message", {})
        self.id = f"chatcmpl-{message.get('id', 'proxy')}"
        self.model = message.get("model", self.model)
        self.input_tokens = message.get("usage", {}).get("input_tokens", 0)
        return [self.chunk({"role": "assistant", "content": "", "refusal": None})]

    def _on_ping(self, payload: dict[str, Any]) -> list[bytes]:
        return [b": ping\n\n"]  # keeps the downstream connection warm, as upstream does

    def _on_content_block_start(self, payload: dict[str, Any]) -> list[bytes]:
        block = payload.get("content_block", {})
        if block.get("type") != "tool_use":
            return []
        index = self.tool_index[payload.get("index", 0)] = len(self.tool_index)
        function = {"name": block.get("name", ""), "arguments": ""}
        call = {"index": index, "id": block.get("id", ""), "type": "function"}
        return [self.chunk({"tool_calls": [{**call, "function": function}]})]

    def _on_content_block_delta(self, payload: dict[str, Any]) -> list[bytes]:
        delta = payload.get("delta", {})
        if delta.get("type") == "text_delta" and delta.get("text"):
            return [self.chunk({"content": delta["text"]})]
        tool = self.tool_index.get(payload.get("index", -1))
        if (
            delta.get("type") == "input_json_delta"
            and delta.get("partial_json")
            and tool is not None
        ):
            call = {"index": tool, "function": {"arguments": delta["partial_json"]}}
            return [self.chunk({"tool_calls": [call]})]
        return []

    def _on_message_delta(self, payload: dict[str, Any]) -> list[bytes]:
        self.output_tokens = payload.get("usage", {}).get("output_tokens", self.output_tokens)
        reason = payload.get("delta", {}).get("stop_reason")
        return [self.chunk({}, FINISH_REASONS.get(reason, "stop"))]

    def _on_message_stop(self, payload: dict[str, Any]) -> list[bytes]:
        self.done = True
        frames = []
        if self.include_usage:
            usage = {
                "prompt_tokens": self.input_tokens,
                "completion_tokens": self.output_tokens,
                "total_tokens": self.input_tokens + self.output_tokens,
            }
            frames.append(self.chunk(None, usage=usage))
        if self.bug != "no_done":
            frames.append(_frame("[DONE]"))
        return frames

    def _on_error(self, payload: dict[str, Any]) -> list[bytes]:
        self.failed = True
        error = payload.get("error", {})
        message = error.get("message", "upstream error")
        return [_frame({"error": {"message": message, "type": error.get("type"), "code": None}})]

    def upstream_cut(self) -> bytes:
        """What to send when the upstream ended without message_stop or error."""
        self.failed = True
        error = {"message": "the upstream stream ended early", "type": "upstream_error"}
        return _frame({"error": {**error, "code": None}})


def build_proxy(
    upstream_url: str,
    *,
    registry: CollectorRegistry | None = None,
    on_report: Callable[[StreamReport], None] | None = None,
    on_upstream_report: Callable[[StreamReport], None] | None = None,
) -> Starlette:
    """The proxy app, forwarding to ``{upstream_url}/v1/messages``.

    ``on_report`` receives each downstream report (from the middleware), and
    ``on_upstream_report`` each upstream one (from the transport); by default the upstream
    report is logged.
    """
    # One client for the app's lifetime: a gateway keeps its upstream connections warm.
    upstream_client = httpx.AsyncClient(
        base_url=upstream_url,
        timeout=httpx.Timeout(30, read=120),
        transport=AsyncStreamGuardTransport(
            routes={"/v1/messages": {"protocol": "anthropic", "name": "upstream_messages"}},
            metrics=registry,
            on_report=on_upstream_report or _log_upstream,
        ),
    )

    async def chat_completions(request: Request) -> Response:
        bug = request.query_params.get("bug")
        if bug is not None and bug not in BUGS:
            return JSONResponse({"error": {"message": f"unknown bug {bug!r}"}}, 400)
        chat = await request.json()
        upstream_request = to_anthropic(chat)
        params = {}
        if "upstream_fault" in request.query_params:
            params["fault"] = request.query_params["upstream_fault"]
        upstream = await upstream_client.send(
            upstream_client.build_request(
                "POST", "/v1/messages", json=upstream_request, params=params
            ),
            stream=True,
        )
        if upstream.status_code != 200:
            body = await upstream.aread()
            await upstream.aclose()
            message = f"upstream answered HTTP {upstream.status_code}: {body[:200]!r}"
            return JSONResponse({"error": {"message": message, "type": "upstream_error"}}, 502)
        include_usage = bool((chat.get("stream_options") or {}).get("include_usage"))
        translator = Translator(chat.get("model", "fake"), include_usage, bug)

        async def frames() -> AsyncIterator[bytes]:
            # The transport checks the upstream; this monitor only hands the proxy the
            # events to translate (plain SSE: no payload rules, its findings unused).
            events: list[Event] = []
            reader = StreamMonitor("sse", on_event=lambda event, _index: events.append(event))
            try:
                async for chunk in upstream.aiter_raw():
                    reader.feed(chunk)
                    for event in events:
                        if not (translator.done or translator.failed):  # nothing after the end
                            for frame in translator.on_event(event):
                                yield frame
                    events.clear()
                if not (translator.done or translator.failed):
                    yield translator.upstream_cut()
            finally:
                # Closing before the body ended (the proxy's own client left) is reported
                # upstream as client_disconnect; a transport error as connection_lost.
                await upstream.aclose()

        return StreamingResponse(frames(), media_type="text/event-stream")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await upstream_client.aclose()

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/metrics", ASGIEndpoint(metrics_app(registry))),  # no redirect to /metrics/
        ],
        middleware=[
            Middleware(
                StreamGuardMiddleware,
                routes={"/v1/chat/completions": {"protocol": "openai_chat", "name": "proxy_chat"}},
                metrics=registry,
                on_report=on_report,
            )
        ],
        lifespan=lifespan,
    )


def _log_upstream(report: StreamReport) -> None:
    log = _logger.warning if report.malformed else _logger.info
    log("upstream_stream_checked", outcome=str(report.outcome), rules=report.rules())


#: The proxy in front of ``UPSTREAM_URL`` (the example app on port 8000 by default).
app = build_proxy(os.environ.get("UPSTREAM_URL", "http://127.0.0.1:8000"))
