"""A FastAPI app with three LLM streaming APIs, a deterministic fake model and fault injection.

Endpoints (all ``POST``, all streaming ``text/event-stream``):

* ``/v1/chat/completions``: OpenAI Chat Completions (``stream: true``); honours ``n``,
  ``stream_options.include_usage`` and ``tools`` (the model then calls the first tool);
* ``/v1/messages``: Anthropic Messages (a text block, plus a ``tool_use`` block with ``tools``);
* ``/v1/responses``: OpenAI Responses (a message item, or a ``function_call`` item with
  ``tools``).

The fake model always streams (whatever ``stream`` says) the same answer (``ANSWER``), split
into word tokens sent a few milliseconds apart, so the official ``openai`` and ``anthropic``
SDKs can consume the endpoints through ``base_url``. ``?fault=<name>`` breaks a stream in
one chosen way: the catalog is ``FAULTS`` (fault -> what goes wrong, per endpoint).
streamguard is configured with ``routes=`` for the three endpoints, and ``/metrics`` serves
the Prometheus metrics.

Run it::

    uvicorn examples.fastapi_app:app --port 8000
    curl -N localhost:8000/v1/chat/completions -H 'content-type: application/json' \\
        -d '{"model": "fake", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    curl -N 'localhost:8000/v1/messages?fault=delta_before_start' \\
        -H 'content-type: application/json' -d '{"model": "fake", "max_tokens": 64,
        "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    curl localhost:8000/metrics | grep streamguard_violations_total

The module-level ``app`` uses ``DEMO_TIMERS`` (2 s idle limit, 0.5 s body-end grace, so the
``stalled`` and ``body_open`` faults show within seconds); ``build_app(**options)`` builds
one with other timers, pacing, a ``sleep`` and ``clock`` pair, metrics registry or
``on_report`` callback, as the tests do.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import anyio
from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field
from starlette.routing import Route

from streamguard import StreamGuardMiddleware, StreamReport
from streamguard.config import TimerConfig
from streamguard.metrics import metrics_app

__all__ = [
    "ANSWER",
    "DEMO_TIMERS",
    "FAULTS",
    "ROUTES",
    "TOOL_ARGUMENTS",
    "app",
    "build_app",
    "tokenize",
]

#: The fake model's one answer.
ANSWER = (
    "Streams should end the way their protocol promises: one terminal event, sent once, "
    "and then the body closes without delay."
)
#: The arguments of the fake model's tool call, as streamed in fragments.
TOOL_ARGUMENTS = '{"city": "Paris", "unit": "celsius"}'
_TOOL_FRAGMENTS = ['{"city"', ': "Paris"', ', "unit": ', '"celsius"}']
_TOOL_PREFACE = "Let me check the weather."

#: The watched routes and their protocols, as given to ``StreamGuardMiddleware(routes=...)``.
ROUTES = {
    "/v1/chat/completions": "openai_chat",
    "/v1/messages": "anthropic",
    "/v1/responses": "openai_responses",
}

_GENERIC_FAULTS = {
    "no_terminal": "the terminal signal is never sent",
    "double_terminal": "the terminal signal is sent twice",
    "invalid_json": "one event's JSON is cut in half",
    "cut_frame": "the last event lacks its blank line",
    "body_open": "the body stays open after the terminal signal",
    "stalled": "no byte for longer than the idle limit, mid-stream",
    "buffered": "a pause, then every event in one send",
    "error": "an in-band error event ends the stream early",
}

#: path -> fault name -> what the fault does to the stream.
FAULTS: dict[str, dict[str, str]] = {
    "/v1/chat/completions": {
        **_GENERIC_FAULTS,
        "role_repeated": "delta.role is sent again mid-stream",
        "tool_name_repeated": "every tool-call fragment repeats function.name",
        "content_after_finish": "a content delta follows the finish_reason",
        "usage_wrong_chunk": "the usage chunk comes before the finish chunk",
        "missing_finish": "no chunk carries a finish_reason",
    },
    "/v1/messages": {
        **_GENERIC_FAULTS,
        "delta_before_start": "a text delta arrives before its content_block_start",
        "event_name_mismatch": "content_block_stop is sent under the name content_block_delta",
        "block_not_stopped": "the text block is never stopped",
    },
    "/v1/responses": {
        **_GENERIC_FAULTS,
        "event_name_mismatch": "output_text.done is sent under the name output_text.delta",
        "sequence_gap": "one sequence_number is skipped",
        "item_not_open": "a text delta points at an item id that was never added",
    },
}

_CREATED = 1764500000
_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def tokenize(text: str) -> list[str]:
    """Split ``text`` into word tokens that keep their leading space ("a b" -> "a", " b")."""
    return re.findall(r"\s*\S+", text)


def _frame(payload: Mapping[str, Any] | str, event: str | None = None) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {data}\n\n".encode()


def _prompt_tokens(messages: Any) -> int:
    """A deterministic stand-in for a tokenizer: the words of the request's text."""
    return max(1, len(json.dumps(messages).split()))


def _tool_name(tools: list[dict[str, Any]] | None) -> str | None:
    """The name of the first tool in an OpenAI (nested) or Anthropic/Responses (flat) list."""
    if not tools:
        return None
    tool = tools[0]
    function = tool.get("function")
    name = function.get("name") if isinstance(function, dict) else tool.get("name")
    return name if isinstance(name, str) and name else "get_weather"


def _break_json(frame: bytes) -> bytes:
    """The same event with its JSON cut in half (the blank line kept)."""
    head, _, data = frame.rstrip(b"\n").rpartition(b"data: ")
    return head + b"data: " + data[: len(data) // 2] + b"\n\n"


# -- OpenAI Chat Completions --------------------------------------------------------------


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    """The fields of a Chat Completions request the fake model reads."""

    model_config = ConfigDict(extra="allow")
    model: str = "fake-gpt"
    messages: list[dict[str, Any]] = Field(default_factory=list)
    stream: bool = False
    n: int = Field(default=1, ge=1, le=8)
    stream_options: _StreamOptions | None = None
    tools: list[dict[str, Any]] | None = None


def chat_frames(request: ChatRequest, fault: str | None) -> list[bytes]:
    """The frames of one Chat Completions stream, with ``fault`` applied."""
    include_usage = request.stream_options is not None and request.stream_options.include_usage
    tool = _tool_name(request.tools)
    if fault == "tool_name_repeated" and tool is None:
        tool = "get_weather"
    tokens = tokenize(ANSWER)

    def chunk(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> bytes:
        body: dict[str, Any] = {
            "id": "chatcmpl-fake0001",
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": request.model,
            "system_fingerprint": "fp_fake",
            "choices": choices,
        }
        if include_usage or usage is not None:
            body["usage"] = usage
        return _frame(body)

    def choice(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}

    n = request.n
    completion = len(_TOOL_FRAGMENTS) + 1 if tool else len(tokens)
    prompt = _prompt_tokens(request.messages)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion * n,
        "total_tokens": prompt + completion * n,
    }
    frames = [
        chunk([choice(i, {"role": "assistant", "content": None if tool else "", "refusal": None})])
        for i in range(n)
    ]
    if tool:
        for i in range(n):
            header = {"index": 0, "id": f"call_fake{i}", "type": "function"}
            header["function"] = {"name": tool, "arguments": ""}
            frames.append(chunk([choice(i, {"tool_calls": [header]})]))
            for fragment in _TOOL_FRAGMENTS:
                function = {"arguments": fragment}
                if fault == "tool_name_repeated":
                    function = {"name": tool, **function}
                frames.append(
                    chunk([choice(i, {"tool_calls": [{"index": 0, "function": function}]})])
                )
    else:
        for position, token in enumerate(tokens):
            for i in range(n):
                delta = {"content": token}
                if fault == "role_repeated" and i == 0 and position == len(tokens) // 2:
                    delta = {"role": "assistant", **delta}
                frames.append(chunk([choice(i, delta)]))
    finish = "tool_calls" if tool else "stop"
    finishing = [chunk([choice(i, {}, finish)]) for i in range(n)]
    usage_frame = [chunk([], usage)] if include_usage or fault == "usage_wrong_chunk" else []
    if fault == "missing_finish":
        finishing = []
    elif fault == "content_after_finish":
        finishing.append(chunk([choice(0, {"content": " Also, one more thing."})]))
    if fault == "usage_wrong_chunk":
        frames += usage_frame + finishing
    else:
        frames += finishing + usage_frame
    if fault == "error":
        error = {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
        return [*frames[: len(frames) // 2], _frame({"error": error})]
    return _terminate(frames, _frame("[DONE]"), fault)


def _terminate(frames: list[bytes], terminal: bytes, fault: str | None) -> list[bytes]:
    """Append the terminal frame(s), then apply the faults every protocol shares."""
    if fault != "no_terminal":
        frames = [*frames, terminal]
    if fault == "double_terminal":
        frames.append(terminal)
    elif fault == "invalid_json":
        middle = len(frames) // 2
        frames[middle] = _break_json(frames[middle])
    elif fault == "cut_frame":
        frames[-1] = frames[-1].rstrip(b"\n")
    return frames


# -- Anthropic Messages -------------------------------------------------------------------


class MessagesRequest(BaseModel):
    """The fields of an Anthropic Messages request the fake model reads."""

    model_config = ConfigDict(extra="allow")
    model: str = "fake-claude"
    max_tokens: int = 1024
    messages: list[dict[str, Any]] = Field(default_factory=list)
    stream: bool = False
    tools: list[dict[str, Any]] | None = None


def anthropic_frames(request: MessagesRequest, fault: str | None) -> list[bytes]:
    """The frames of one Anthropic Messages stream, with ``fault`` applied."""
    tool = _tool_name(request.tools)
    text_tokens = tokenize(_TOOL_PREFACE if tool else ANSWER)
    prompt = _prompt_tokens(request.messages)

    def event(name: str, payload: dict[str, Any], sent_as: str | None = None) -> bytes:
        return _frame({"type": name, **payload}, sent_as or name)

    message: dict[str, Any] = {
        "id": "msg_fake0001",
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": 1},
    }
    start_text = event(
        "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
    )
    deltas = [
        event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": t}})
        for t in text_tokens
    ]
    stop_text = event(
        "content_block_stop",
        {"index": 0},
        "content_block_delta" if fault == "event_name_mismatch" else None,
    )
    frames = [event("message_start", {"message": message}), event("ping", {})]
    if fault == "delta_before_start":
        frames += [deltas[0], start_text, *deltas[1:]]
    else:
        frames += [start_text, *deltas]
    if fault == "error":
        error = {"type": "overloaded_error", "message": "Overloaded"}
        return [*frames[: len(frames) // 2], event("error", {"error": error})]
    if fault != "block_not_stopped":
        frames.append(stop_text)
    output_tokens = len(text_tokens)
    if tool:
        block = {"type": "tool_use", "id": "toolu_fake0001", "name": tool, "input": {}}
        frames.append(event("content_block_start", {"index": 1, "content_block": block}))
        for fragment in ["", *_TOOL_FRAGMENTS]:
            delta = {"type": "input_json_delta", "partial_json": fragment}
            frames.append(event("content_block_delta", {"index": 1, "delta": delta}))
        frames.append(event("content_block_stop", {"index": 1}))
        output_tokens += len(_TOOL_FRAGMENTS)
    stop = {"stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None}
    usage = {"input_tokens": prompt, "output_tokens": output_tokens}
    frames.append(event("message_delta", {"delta": stop, "usage": usage}))
    return _terminate(frames, event("message_stop", {}), fault)


# -- OpenAI Responses ---------------------------------------------------------------------


class ResponsesRequest(BaseModel):
    """The fields of a Responses request the fake model reads."""

    model_config = ConfigDict(extra="allow")
    model: str = "fake-gpt"
    input: str | list[dict[str, Any]] = ""
    stream: bool = False
    tools: list[dict[str, Any]] | None = None


def responses_frames(request: ResponsesRequest, fault: str | None) -> list[bytes]:
    """The frames of one Responses stream, with ``fault`` applied."""
    tool = _tool_name(request.tools)
    tokens = tokenize(ANSWER)
    events: list[tuple[str, dict[str, Any], str | None]] = []  # (type, fields, sent as)

    def add(kind: str, sent_as: str | None = None, **fields: Any) -> None:
        events.append((kind, fields, sent_as))

    def response(status: str, output: list[Any], usage: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "id": "resp_fake0001",
            "object": "response",
            "created_at": _CREATED,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": request.model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": request.tools or [],
            "usage": usage,
        }

    add("response.created", response=response("in_progress", [], None))
    add("response.in_progress", response=response("in_progress", [], None))
    item: dict[str, Any]
    if tool:
        item = {
            "id": "fc_fake0001",
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": "call_fake0",
            "name": tool,
        }
        add("response.output_item.added", output_index=0, item=item)
        for fragment in _TOOL_FRAGMENTS:
            add(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=0,
                delta=fragment,
            )
        add(
            "response.function_call_arguments.done",
            item_id=item["id"],
            output_index=0,
            arguments=TOOL_ARGUMENTS,
            name=tool,
        )
        done = {**item, "status": "completed", "arguments": TOOL_ARGUMENTS}
        output_tokens = len(_TOOL_FRAGMENTS)
    else:
        item = {
            "id": "msg_fake0001",
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        }
        part: dict[str, Any] = {
            "type": "output_text",
            "annotations": [],
            "logprobs": [],
            "text": "",
        }
        where: dict[str, Any] = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        add("response.output_item.added", output_index=0, item=item)
        add("response.content_part.added", **where, part=part)
        for position, token in enumerate(tokens):
            at = where
            if fault == "item_not_open" and position == len(tokens) // 2:
                at = {**where, "item_id": "msg_never_added"}
            add("response.output_text.delta", **at, delta=token, logprobs=[])
        text_done_name = "response.output_text.delta" if fault == "event_name_mismatch" else None
        add("response.output_text.done", text_done_name, **where, text=ANSWER, logprobs=[])
        add("response.content_part.done", **where, part={**part, "text": ANSWER})
        done = {**item, "status": "completed", "content": [{**part, "text": ANSWER}]}
        output_tokens = len(tokens)
    add("response.output_item.done", output_index=0, item=done)
    prompt = _prompt_tokens(request.input)
    usage = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + output_tokens,
    }
    if fault == "error":
        del events[len(events) // 2 :]
        error = {"type": "server_error", "code": "server_error", "message": "Overloaded"}
        add("error", error=error, param=None)
        failed = response("failed", [], None)
        failed["error"] = {"code": "server_error", "message": "Overloaded"}
        add("response.failed", response=failed)
    else:
        add("response.completed", response=response("completed", [done], usage))

    frames: list[bytes] = []
    sequence = 0
    for kind, fields, sent_as in events:
        if fault == "sequence_gap" and kind == "response.output_item.done":
            sequence += 1  # one number skipped
        frames.append(
            _frame({"type": kind, **fields, "sequence_number": sequence}, sent_as or kind)
        )
        sequence += 1
    if fault == "error":
        return frames
    terminal = frames.pop()
    return _terminate(frames, terminal, fault)


# -- pacing and the app -------------------------------------------------------------------


async def paced(
    frames: list[bytes],
    fault: str | None,
    token_delay: float,
    hold_s: float,
    stall_s: float,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> AsyncIterator[bytes]:
    """Send the frames one per body message, ``token_delay`` apart, with timing faults.

    ``stalled`` goes silent for ``stall_s`` mid-stream; ``body_open`` keeps the body open
    for ``hold_s`` after the terminal; ``buffered`` waits ``hold_s`` and sends everything at
    once, as a buffering proxy does. Every pause goes through ``sleep``.
    """
    if fault == "buffered":
        await sleep(hold_s)
        yield b"".join(frames)
        return
    for position, frame in enumerate(frames):
        if fault == "stalled" and position == len(frames) // 2:
            await sleep(stall_s)
        yield frame
        if position < len(frames) - 1:
            await sleep(token_delay)
    if fault == "body_open":
        await sleep(hold_s)


#: The example's timers: short enough that ``stalled`` and ``body_open`` show within
#: seconds; production keeps the defaults (60 s idle limit, 5 s grace).
DEMO_TIMERS = TimerConfig(idle_limit_s=2.0, body_end_grace_s=0.5)


def build_app(
    *,
    token_delay: float = 0.004,
    timers: TimerConfig = DEMO_TIMERS,
    registry: CollectorRegistry | None = None,
    on_report: Callable[[StreamReport], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    clock: Callable[[], float] | None = None,
) -> FastAPI:
    """The example app, with streamguard mounted and ``/metrics`` served.

    ``token_delay`` is the pause between two frames; every pause goes through ``sleep``,
    and ``clock`` (``time.monotonic`` when ``None``) is streamguard's: a test gives a pair
    where only the app's pauses move the clock, so the timing rules judge the pauses
    written here and not how long a busy machine took between them. ``timers`` are
    streamguard's liveness timers; the timing faults are sized from them: ``stalled`` stays
    silent for 1.5 times the idle limit, ``body_open`` and ``buffered`` hold for 3 times
    the body-end grace (which must stay under the idle limit, so that they are not also
    stalls). ``registry`` is where the metrics live (the process-wide default when
    ``None``); ``on_report`` receives every stream's ``StreamReport``.
    """
    hold_s = 3 * timers.body_end_grace_s
    stall_s = 1.5 * timers.idle_limit_s
    if hold_s >= timers.idle_limit_s:
        raise ValueError("timers: 3 * body_end_grace_s must be below idle_limit_s")

    api = FastAPI(title="streamguard example: fake LLM streaming APIs")

    def stream(
        path: str, frames: Callable[[str | None], list[bytes]], fault: str | None
    ) -> Response:
        if fault is not None and fault not in FAULTS[path]:
            known = ", ".join(sorted(FAULTS[path]))
            return JSONResponse(
                {"error": {"message": f"unknown fault {fault!r}; known: {known}"}}, 400
            )
        media_type = "text/event-stream"
        if path == "/v1/messages":
            media_type += "; charset=utf-8"  # as Anthropic sends it
        body = paced(frames(fault), fault, token_delay, hold_s, stall_s, sleep)
        return StreamingResponse(body, media_type=media_type, headers=_HEADERS)

    @api.post("/v1/chat/completions")
    async def chat_completions(request: ChatRequest, fault: str | None = Query(None)) -> Response:
        return stream("/v1/chat/completions", lambda f: chat_frames(request, f), fault)

    @api.post("/v1/messages")
    async def messages(request: MessagesRequest, fault: str | None = Query(None)) -> Response:
        return stream("/v1/messages", lambda f: anthropic_frames(request, f), fault)

    @api.post("/v1/responses")
    async def responses(request: ResponsesRequest, fault: str | None = Query(None)) -> Response:
        return stream("/v1/responses", lambda f: responses_frames(request, f), fault)

    api.routes.append(Route("/metrics", metrics_app(registry)))  # /metrics itself, no redirect
    api.add_middleware(
        StreamGuardMiddleware,
        routes=ROUTES,
        timers=timers,
        metrics=registry,
        on_report=on_report,
        **({} if clock is None else {"clock": clock}),
    )
    return api


#: The example app with the demo timers and the process-wide metrics registry.
app = build_app()
