"""The official Python clients, each fed a body's bytes and asked for its verdict.

Every client reads the body through an ``httpx.MockTransport`` (the bytes as one response
body: for the oracle only the client's verdict matters, not how the body is cut) and
consumes the stream the way an application does: iterate it and ask for the assembled
result. A client that raises has *failed* the body; the exception's class and the start of
its message are the verdict's ``error``.

- ``openai_chat``: ``client.chat.completions.stream()`` (the helper, to
  ``get_final_completion()``) and plain iteration of ``create(stream=True)``;
- ``openai_responses``: ``client.responses.stream()`` to ``get_final_response()``;
- ``anthropic``: ``client.messages.stream()`` to ``get_final_message()``;
- ``gemini``: google-genai's ``client.models.generate_content_stream()``, reading each
  chunk's ``text`` as applications do (skipped when google-genai is not installed);
- ``ai_sdk_ui``, ``ag_ui``: the ``ai`` package's chat reader and ``@ag-ui/client``'s
  ``HttpAgent`` under Node (``node_clients.mjs``), one Node process for a batch of bodies;
- ``mcp``: each ``message`` event's data through the MCP SDK's ``jsonrpc_message_adapter``, as
  its Streamable HTTP client transport reads it, then by method as its ``ClientSession``
  does: a result against the model of the method the request (the fixture's) called, a
  server request's or notification's params against its method's;
- ``cohere``: ``ClientV2.chat_stream()``, every event iterated. The SDK raises on nothing
  in a stream: it skips an event it cannot build (with a logged warning) and stops at a
  ``[DONE]``, wherever it comes. So its verdict is what the caller lost: fewer events
  yielded than the body sent (non-empty data other than ``[DONE]``) is a failure,
  ``EventsLost``;
- ``a2a``: a2a-sdk's own JSON-RPC client transport, ``JsonRpcTransport`` for the 1.0 wire
  and ``CompatJsonRpcTransport`` for 0.3 (by the fixture request's method), streaming a
  message or subscribing to a task as that request did, to the stream's end.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

__all__ = [
    "NODE",
    "NODE_CLIENTS",
    "PYTHON_CLIENTS",
    "Verdict",
    "available",
    "node_verdicts",
    "python_verdicts",
    "responses_reading",
]

_HEADERS = {"content-type": "text/event-stream"}


@dataclass(frozen=True)
class Verdict:
    """One client's reading of one body: ``error`` is None when it read it without raising."""

    client: str
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


class _Body:
    """The body the mock transport answers with (one per client, replaced per case)."""

    def __init__(self) -> None:
        self.bytes = b""

    def http_client(self, package: Any = httpx) -> Any:
        """A client of ``package`` (httpx, or httpx2 for the SDKs built on it) whose every
        request is answered with the current body."""

        def handler(request: Any) -> Any:
            return package.Response(200, headers=_HEADERS, content=self.bytes)

        return package.Client(transport=package.MockTransport(handler))


_BODY = _Body()
_CACHE: dict[str, Any] = {}


def _described(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error)[:300]}"


def _openai() -> Any:
    if "openai" not in _CACHE:
        import openai

        _CACHE["openai"] = openai.OpenAI(
            api_key="oracle",
            base_url="http://oracle.invalid/v1",
            http_client=_BODY.http_client(),
            max_retries=0,
        )
    return _CACHE["openai"]


_MESSAGES = [{"role": "user", "content": "Hello"}]


def _chat_options(request: Mapping[str, Any] | None) -> dict[str, Any]:
    request = request or {}
    return {key: request[key] for key in ("n", "stream_options") if key in request}


def _chat_helper(request: Mapping[str, Any] | None) -> None:
    client = _openai()
    options = _chat_options(request)
    with client.chat.completions.stream(model="m", messages=_MESSAGES, **options) as stream:
        for _ in stream:
            pass
        stream.get_final_completion()


def _chat_iteration(request: Mapping[str, Any] | None) -> None:
    client = _openai()
    options = _chat_options(request)
    for _ in client.chat.completions.create(model="m", messages=_MESSAGES, stream=True, **options):
        pass


def _responses_helper(request: Mapping[str, Any] | None) -> None:
    client = _openai()
    with client.responses.stream(model="m", input="Hello") as stream:
        for _ in stream:
            pass
        stream.get_final_response()


@dataclass(frozen=True)
class ResponsesReading:
    """What ``responses.stream()`` gives an application that reads a body to the end: the
    event types it yielded, and the final response's output items and text."""

    events: tuple[str, ...]
    output_items: int
    output_text: str


def responses_reading(body: bytes) -> ResponsesReading:
    """Read ``body`` as openai-python's Responses stream helper does (it must not raise):
    the oracle's verdicts see only raises, this sees what was silently lost."""
    _BODY.bytes = body
    client = _openai()
    with client.responses.stream(model="m", input="Hello") as stream:
        events = tuple(event.type for event in stream)
        final = stream.get_final_response()
    return ResponsesReading(events, len(final.output), final.output_text)


def _anthropic_helper(request: Mapping[str, Any] | None) -> None:
    if "anthropic" not in _CACHE:
        import anthropic
        import httpx2

        _CACHE["anthropic"] = anthropic.Anthropic(
            api_key="oracle",
            base_url="http://oracle.invalid",
            http_client=_BODY.http_client(httpx2),
            max_retries=0,
        )
    client = _CACHE["anthropic"]
    with client.messages.stream(model="m", max_tokens=1024, messages=_MESSAGES) as stream:
        for _ in stream:
            pass
        stream.get_final_message()


def _gemini_stream(request: Mapping[str, Any] | None) -> None:
    if "genai" not in _CACHE:
        from google import genai
        from google.genai import types

        _CACHE["genai"] = genai.Client(
            api_key="oracle",
            http_options=types.HttpOptions(
                base_url="http://oracle.invalid/", httpx_client=_BODY.http_client()
            ),
        )
    client = _CACHE["genai"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # .text warns about non-text parts: not a failure
        for chunk in client.models.generate_content_stream(model="m", contents="Hello"):
            _ = chunk.text


#: The protocol version the oracle's MCP client validates at: the SDK's own fallback before
#: (and without) a negotiated version.
_MCP_VERSION = "2025-11-25"


def _mcp_id(value: Any) -> tuple[str, Any]:
    """A JSON-RPC id as the client matches it: by JSON type and value."""
    return ("string" if isinstance(value, str) else "number", value)


def _mcp_asked(request: Mapping[str, Any] | Sequence[Any] | None) -> dict[tuple[str, Any], str]:
    """Request id -> the method it called, for the requests of the POST (a message or a
    2025-03-26 batch): what the client session knows when it validates a result."""
    if request is None:
        return {}
    messages = list(request) if isinstance(request, list) else [request]
    return {
        _mcp_id(message["id"]): message["method"]
        for message in messages
        if isinstance(message, dict) and "id" in message and isinstance(message.get("method"), str)
    }


def _mcp_message(raw: Any, asked: Mapping[tuple[str, Any], str]) -> None:
    """Validate one message by its method, as ``ClientSession`` does: a result against the
    model of the method its request called (``send_request``), a server request's and a
    notification's params against theirs (``_on_request``, ``_on_notify``: an unknown method
    is answered or dropped, not a failure; a known one that does not validate fails the
    request or loses the notification)."""
    from mcp_types import methods

    if not isinstance(raw, dict):
        return
    method = raw.get("method")
    if isinstance(method, str):
        parse = methods.parse_server_request if "id" in raw else methods.parse_server_notification
        # A method the client does not know is answered "not found", or dropped: no failure.
        with contextlib.suppress(KeyError):
            parse(method, _MCP_VERSION, raw.get("params"))
        return
    if "result" in raw and "id" in raw:
        asked_method = asked.get(_mcp_id(raw["id"]))
        if asked_method is not None:
            # A method without a result model: the client returns the result as it is.
            with contextlib.suppress(KeyError):
                methods.parse_server_result(asked_method, _MCP_VERSION, raw["result"])


def _mcp_messages(request: Mapping[str, Any] | None) -> None:
    from httpx_sse import EventSource
    from mcp.types import jsonrpc_message_adapter

    asked = _mcp_asked(request)
    with _BODY.http_client() as client:
        response = client.post("http://oracle.invalid/mcp")
        for sse in EventSource(response).iter_sse():
            # The transport reads message events; an empty data is a priming event.
            if sse.event == "message" and sse.data:
                jsonrpc_message_adapter.validate_json(sse.data, by_name=False)
                _mcp_message(json.loads(sse.data), asked)


class EventsLost(Exception):
    """A client that raises on nothing handed the caller fewer events than were sent."""


def _cohere_stream(request: Mapping[str, Any] | None) -> None:
    from httpx_sse import EventSource

    if "cohere" not in _CACHE:
        import cohere

        _CACHE["cohere"] = cohere.ClientV2(
            api_key="oracle", base_url="http://oracle.invalid", httpx_client=_BODY.http_client()
        )
    with _BODY.http_client() as http:
        response = http.post("http://oracle.invalid/v2/chat")
        sent = sum(1 for sse in EventSource(response).iter_sse() if sse.data not in ("", "[DONE]"))
    stream = _CACHE["cohere"].chat_stream(model="m", messages=_MESSAGES)
    yielded = sum(1 for _ in stream)
    if yielded < sent:
        raise EventsLost(
            f"the SDK yielded {yielded} of the {sent} events sent (it skips an event it "
            "cannot build, and stops reading at [DONE])"
        )


#: A2A request methods -> (the 0.3 wire, a subscription): which transport and call the
#: fixture's request stands for; without a request, a 1.0 ``SendStreamingMessage``.
_A2A_METHODS = {
    "SendStreamingMessage": (False, False),
    "SubscribeToTask": (False, True),
    "message/stream": (True, False),
    "tasks/resubscribe": (True, True),
}


async def _a2a_read(request: Mapping[str, Any] | None) -> None:
    from a2a.client.transports.jsonrpc import JsonRpcTransport
    from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
    from a2a.types.a2a_pb2 import (
        AgentCard,
        Message,
        Part,
        Role,
        SendMessageRequest,
        SubscribeToTaskRequest,
    )

    method = (request or {}).get("method", "SendStreamingMessage")
    v03, subscribe = _A2A_METHODS[method]
    url = "http://oracle.invalid/a2a"

    def handler(sent: Any) -> Any:
        return httpx.Response(200, headers=_HEADERS, content=_BODY.bytes)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        transport: Any = (
            CompatJsonRpcTransport(http, None, url)
            if v03
            else JsonRpcTransport(http, AgentCard(), url)
        )
        if subscribe:
            stream = transport.subscribe(SubscribeToTaskRequest(id="t-1"))
        else:
            message = Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text="text")])
            stream = transport.send_message_streaming(SendMessageRequest(message=message))
        async for _ in stream:
            pass


def _a2a_stream(request: Mapping[str, Any] | None) -> None:
    import asyncio

    asyncio.run(_a2a_read(request))


_Client = Callable[[Mapping[str, Any] | None], None]
#: Protocol -> its official Python clients, by name.
PYTHON_CLIENTS: dict[str, dict[str, _Client]] = {
    "openai_chat": {"openai.chat.stream": _chat_helper, "openai.chat.iterate": _chat_iteration},
    "openai_responses": {"openai.responses.stream": _responses_helper},
    "anthropic": {"anthropic.messages.stream": _anthropic_helper},
    "gemini": {"google-genai.generate_content_stream": _gemini_stream},
    "mcp": {"mcp.messages_by_method": _mcp_messages},
    "a2a": {"a2a-sdk.jsonrpc_transport": _a2a_stream},
    "cohere": {"cohere.chat_stream": _cohere_stream},
}


def available(protocol: str) -> bool:
    """Whether the clients of ``protocol`` are installed."""
    module = {
        "openai_chat": "openai",
        "openai_responses": "openai",
        "anthropic": "anthropic",
        "gemini": "google.genai",
        "mcp": "mcp",
        "a2a": "a2a.client",
        "cohere": "cohere",
    }[protocol]
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def python_verdicts(protocol: str, body: bytes, request: Mapping[str, Any] | None) -> list[Verdict]:
    """Each Python client of ``protocol`` on ``body``."""
    verdicts = []
    _BODY.bytes = body
    for name, read in PYTHON_CLIENTS[protocol].items():
        try:
            read(request)
        except Exception as error:  # the verdict: whatever the client raised
            verdicts.append(Verdict(name, _described(error)))
        else:
            verdicts.append(Verdict(name, None))
    return verdicts


NODE = shutil.which("node")
_NODE_SCRIPT = Path(__file__).with_name("node_clients.mjs")
_NODE_MODULES = Path(__file__).parent.parent / "node" / "node_modules"
#: Protocol -> the name of its JavaScript client.
NODE_CLIENTS = {"ai_sdk_ui": "ai.readUIMessageStream", "ag_ui": "@ag-ui/client.HttpAgent"}


def node_verdicts(cases: Sequence[tuple[str, str, bytes]]) -> dict[str, Verdict]:
    """The JavaScript client's verdict on each ``(id, protocol, body)``, by id."""
    assert NODE is not None, "node is not installed"
    assert _NODE_MODULES.is_dir(), "run `npm ci --prefix tests/node` first"
    with tempfile.TemporaryDirectory() as directory:
        listed = []
        for number, (case_id, protocol, body) in enumerate(cases):
            path = Path(directory) / f"{number}.sse"
            path.write_bytes(body)
            listed.append({"id": case_id, "protocol": protocol, "path": str(path)})
        done = subprocess.run(
            [NODE, str(_NODE_SCRIPT)],
            input=json.dumps(listed),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    by_id = {result["id"]: result for result in results}
    assert len(by_id) == len(cases), done.stdout[-2000:]
    protocols = {case_id: protocol for case_id, protocol, _ in cases}
    return {
        case_id: Verdict(
            NODE_CLIENTS[protocols[case_id]], None if result["ok"] else result["error"]
        )
        for case_id, result in by_id.items()
    }
