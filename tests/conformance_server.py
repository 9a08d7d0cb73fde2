"""Fake OpenAI- and Anthropic-compatible endpoints, for ``streamguard conformance`` tests.

``build_chat_app()`` serves every variant of the conformance battery correctly: streamed
and non-streamed answers, ``n``, ``stop``, ``max_tokens`` (``length``), forced and parallel
tool calls, ``logprobs``, JSON mode and structured output, the usage chunk, and it stops
generating when a client leaves. Its answers are deterministic, so a streamed answer
equals the non-streamed one.

Each real bug the conformance command hunts for can be switched on by name (``BUGS``),
modelled on the issue that reported it; ``refuse`` makes the endpoint answer 400 naming a
parameter (an "unsupported" feature) and ``ignore`` drop a feature silently (an "ignored"
one).

``build_responses_app()`` and ``build_anthropic_app()`` do the same for the OpenAI
Responses API (``/v1/responses``) and Anthropic Messages (``/v1/messages``): a healthy
stream for every variant of their batteries, and the bugs of ``RESPONSES_BUGS`` and
``ANTHROPIC_BUGS``. Every fake records each request body it receives (``FakeState.bodies``)
and the credentials it was sent.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = [
    "ANTHROPIC_BUGS",
    "BUGS",
    "RESPONSES_BUGS",
    "FakeState",
    "build_anthropic_app",
    "build_chat_app",
    "build_responses_app",
]

#: The injectable bugs, each after the issue that reported it.
BUGS = frozenset(
    {
        # vllm#19650: the finish_reason key dropped from every chunk, the last one too.
        "finish_reason_dropped",
        # vllm#27572: a tool-call stream that ends with a null finish_reason.
        "null_finish_on_tools",
        # sglang#3912: finish_reason "" instead of null on the chunks before the finish.
        "empty_finish_reason",
        # sglang PR #8417: the finish chunk sent twice.
        "duplicate_finish",
        # sglang PR #8417: with n > 1, only the last index gets a finish.
        "finish_last_index_only",
        # llama.cpp PR #13800, litellm#20480: tool-call id and name on every delta.
        "tool_header_repeated",
        # ollama PR #7963, python-genai#2868: streamed tool calls end "stop", the
        # non-streamed answer says "tool_calls".
        "tool_finish_stop",
        # opencode#42918 (chunks that break clients only with include_usage): the usage
        # rides on the last finish chunk, which has choices, instead of its own chunk.
        "usage_wrong",
        # sglang PR #36552, lmdeploy#548: a client that leaves mid-stream leaves the
        # generation running, and the next request waits behind it.
        "hang_after_disconnect",
    }
)

#: The text every plain answer is made of, one token per word.
_WORDS = [
    "one", "two", "three", "four", "five", "six",
    "seven", "eight", "nine", "ten", "eleven", "twelve",
]  # fmt: skip
_PROMPT_TOKENS = 9


@dataclass
class FakeState:
    """What a test sets and reads on the fake: its bugs, and what it saw."""

    bugs: frozenset[str] = frozenset()
    #: Parameters answered with a 400 naming them ("unsupported").
    refuse: frozenset[str] = frozenset()
    #: Features silently dropped ("ignored"): ``logprobs``, ``n``, ``tool_choice``,
    #: ``max_tokens``, ``parallel_tool_calls`` (then one call: "not exercised").
    ignore: frozenset[str] = frozenset()
    #: Stream without end (no finish, no [DONE]): what ``--max-bytes`` is for.
    endless: bool = False
    #: Concurrent streams mixed up: every stream the same chunk id, and an echo of the
    #: previous request's prompt instead of its own.
    mixed_up: bool = False
    previous_prompt: str = ""
    #: Answer every request with no content at all (a role chunk, then the finish).
    empty: bool = False
    #: Answer only streaming requests (a non-streamed one gets a 501).
    stream_only: bool = False
    requests: int = 0
    #: The output tokens the requests allowed: ``max_tokens`` x ``n``, summed.
    tokens_allowed: int = 0
    #: The Authorization header of the last request (None: none sent).
    authorization: str | None = None
    #: The x-api-key and anthropic-version headers of the last request (Anthropic).
    api_key_header: str | None = None
    anthropic_version: str | None = None
    #: Every request body received, in order.
    bodies: list[dict[str, Any]] = field(default_factory=list)
    #: The bugs show on every ``bug_every``-th request only (an intermittent bug: 2 makes
    #: the first request clean, the second broken, ...).
    bug_every: int = 1
    #: The first ``unavailable`` requests are answered 503 with ``Retry-After: 0`` (or,
    #: with ``unavailable_stream``, a 200 stream cut before its end), before any stream.
    unavailable: int = 0
    unavailable_stream: bool = False

    def active_bugs(self) -> frozenset[str]:
        """The bugs of the request being answered."""
        return self.bugs if self.requests % self.bug_every == 0 else frozenset()

    #: Generations still running after their client left (``hang_after_disconnect``).
    leaked: int = 0
    #: Set by a test at teardown: a leaked generation then ends, so the server can stop.
    release: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Call:
    id: str
    name: str
    arguments: str


@dataclass
class _Answer:
    """One choice's answer: text tokens or tool calls, and why it ended."""

    tokens: list[str]
    calls: list[_Call]
    finish: str


def _prompt(body: dict[str, Any]) -> str:
    messages = body.get("messages") or [{}]
    content = messages[-1].get("content", "")
    return content if isinstance(content, str) else ""


def _answer(body: dict[str, Any], state: FakeState) -> _Answer:
    prompt = _prompt(body)
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", 10_000))
    if "max_tokens" in state.ignore:
        max_tokens = 10_000
    tool_choice = None if "tool_choice" in state.ignore else body.get("tool_choice")
    if body.get("tools") and tool_choice not in (None, "none", "auto"):
        if isinstance(tool_choice, dict):
            names = [tool_choice["function"]["name"]]
        else:
            names = [body["tools"][0]["function"]["name"]]
        cities = ["Paris", "Tokyo"] if "Tokyo" in prompt else ["Paris"]
        single = body.get("parallel_tool_calls") is False or "parallel_tool_calls" in state.ignore
        if single or isinstance(tool_choice, dict):
            cities = cities[:1]
        calls = [
            _Call(f"call_{i}", names[0], json.dumps({"city": city}))
            for i, city in enumerate(cities)
        ]
        return _Answer([], calls, "tool_calls")
    format_type = (body.get("response_format") or {}).get("type")
    if format_type in ("json_object", "json_schema"):
        tokens = ['{"', "city", '":', ' "', "Paris", '"}']
    elif "Repeat exactly:" in prompt:
        echoed = state.previous_prompt if state.mixed_up and state.previous_prompt else prompt
        state.previous_prompt = prompt
        tokens = [f"{word} " for word in echoed.split("Repeat exactly:", 1)[1].split()]
    else:
        count = 200 if "long" in prompt else len(_WORDS)
        tokens = [f"{_WORDS[i % len(_WORDS)]} " for i in range(count)]
    finish = "stop"
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if stops:
        text = ""
        for i, token in enumerate(tokens):
            if any(s in text + token for s in stops):
                tokens = tokens[:i]
                break
            text += token
    if len(tokens) > max_tokens:
        tokens, finish = tokens[:max_tokens], "length"
    if state.empty:
        tokens = []
    return _Answer(tokens, [], finish)


def _usage(answers: list[_Answer]) -> dict[str, int]:
    completion = sum(len(a.tokens) + 4 * len(a.calls) for a in answers)
    return {
        "prompt_tokens": _PROMPT_TOKENS,
        "completion_tokens": completion,
        "total_tokens": _PROMPT_TOKENS + completion,
    }


def _logprobs(token: str, width: int) -> dict[str, Any]:
    top = [{"token": token, "logprob": -0.1, "bytes": None}]
    top += [{"token": f"alt{i}", "logprob": -3.0 - i, "bytes": None} for i in range(width - 1)]
    return {"content": [{"token": token, "logprob": -0.1, "bytes": None, "top_logprobs": top}]}


def _unavailable(state: FakeState) -> Response | None:
    """A 503 before any stream, or a stream cut after its first byte, while
    ``state.unavailable`` requests are left to spoil."""
    if state.requests > state.unavailable:
        return None
    if state.unavailable_stream:

        async def cut() -> AsyncIterator[bytes]:
            yield b": the first byte, then nothing\n\n"

        return StreamingResponse(cut(), media_type="text/event-stream")
    return JSONResponse(
        {"error": {"message": "overloaded"}}, status_code=503, headers={"retry-after": "0"}
    )


async def _received(request: Request, state: FakeState) -> dict[str, Any]:
    """Count and record a request: its body and its credentials."""
    state.requests += 1
    state.authorization = request.headers.get("authorization")
    state.api_key_header = request.headers.get("x-api-key")
    state.anthropic_version = request.headers.get("anthropic-version")
    body: dict[str, Any] = await request.json()
    state.bodies.append(body)
    return body


def build_chat_app(state: FakeState) -> Starlette:
    """The fake endpoint at ``/v1/chat/completions`` (and ``/v1/models``)."""

    async def completions(request: Request) -> Response:
        body = await _received(request, state)
        state.tokens_allowed += int(body.get("max_tokens", 0)) * int(body.get("n", 1))
        unavailable = _unavailable(state)
        if unavailable is not None:
            return unavailable
        while state.leaked and not state.release.is_set():  # a leaked generation holds on
            await asyncio.sleep(0.01)
        for name in state.refuse:
            if name in body:
                return JSONResponse(
                    {"error": {"message": f"{name} is not supported", "param": name}},
                    status_code=400,
                )
        n = 1 if "n" in state.ignore else int(body.get("n", 1))
        answers = [_answer(body, state) for _ in range(n)]
        if not body.get("stream"):
            if state.stream_only:
                return JSONResponse({"error": {"message": "stream only"}}, status_code=501)
            return JSONResponse(_completion(body, answers, state))
        return StreamingResponse(_stream(body, answers, state), media_type="text/event-stream")

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models),
        ]
    )


def _completion(body: dict[str, Any], answers: list[_Answer], state: FakeState) -> dict[str, Any]:
    choices = []
    for index, answer in enumerate(answers):
        message: dict[str, Any] = {"role": "assistant", "content": "".join(answer.tokens)}
        if answer.calls:
            message["content"] = None
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in answer.calls
            ]
        choices.append({"index": index, "message": message, "finish_reason": answer.finish})
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": body.get("model", "fake"),
        "choices": choices,
        "usage": _usage(answers),
    }


async def _stream(
    body: dict[str, Any], answers: list[_Answer], state: FakeState
) -> AsyncIterator[bytes]:
    bugs = state.active_bugs()
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    width = int(body.get("top_logprobs") or 1)
    logprobs = body.get("logprobs") is True and "logprobs" not in state.ignore
    base = {
        "id": "chatcmpl-1" if state.mixed_up else f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": body.get("model", "fake"),
    }
    if include_usage:
        base["usage"] = None
    unfinished = "" if "empty_finish_reason" in bugs else None
    paced = "long" in _prompt(body)

    def chunk(
        index: int, delta: dict[str, Any], finish: str | None, usage: Any = None, **extra: Any
    ) -> bytes:
        choice: dict[str, Any] = {"index": index, "delta": delta, **extra}
        if "finish_reason_dropped" not in bugs:
            choice["finish_reason"] = finish
        payload = {**base, "choices": [choice]}
        if usage is not None:
            payload["usage"] = usage
        return f"data: {json.dumps(payload)}\n\n".encode()

    try:
        while state.endless:
            yield chunk(0, {"content": "more "}, None)
            await asyncio.sleep(0)
        for index in range(len(answers)):
            yield chunk(index, {"role": "assistant", "content": ""}, unfinished)
        longest = max(len(a.tokens) for a in answers)
        for step in range(longest):
            for index, answer in enumerate(answers):
                if step < len(answer.tokens):
                    token = answer.tokens[step]
                    extra = {"logprobs": _logprobs(token, width)} if logprobs else {}
                    yield chunk(index, {"content": token}, unfinished, **extra)
                    # A long answer is paced as a model paces it, so a client that leaves
                    # early leaves while the generation still runs.
                    await asyncio.sleep(0.01 if paced else 0)
        for index, answer in enumerate(answers):
            for position, call in enumerate(answer.calls):
                header = {"id": call.id, "type": "function"}
                name = {"name": call.name}
                yield chunk(
                    index,
                    {
                        "tool_calls": [
                            {"index": position, **header, "function": {**name, "arguments": ""}}
                        ]
                    },
                    unfinished,
                )
                half = len(call.arguments) // 2
                for part in (call.arguments[:half], call.arguments[half:]):
                    repeated = {**header} if "tool_header_repeated" in bugs else {}
                    function = {"arguments": part}
                    if "tool_header_repeated" in bugs:
                        function = {**name, **function}
                    yield chunk(
                        index,
                        {"tool_calls": [{"index": position, **repeated, "function": function}]},
                        unfinished,
                    )
        for index, answer in enumerate(answers):
            if "finish_last_index_only" in bugs and index != len(answers) - 1:
                continue
            finish: str | None = answer.finish
            if answer.calls and "null_finish_on_tools" in bugs:
                finish = None
            elif answer.calls and "tool_finish_stop" in bugs:
                finish = "stop"
            last = index == len(answers) - 1
            misplaced = include_usage and last and "usage_wrong" in bugs
            yield chunk(index, {}, finish, _usage(answers) if misplaced else None)
            if "duplicate_finish" in bugs:
                yield chunk(index, {}, finish)
        if include_usage and "usage_wrong" not in bugs:
            usage = {**base, "choices": [], "usage": _usage(answers)}
            yield f"data: {json.dumps(usage)}\n\n".encode()
        yield b"data: [DONE]\n\n"
    except BaseException:
        # The client left mid-stream (Starlette cancels the generator).
        if "hang_after_disconnect" in bugs:
            state.leaked += 1
        raise


# -- the Responses and Anthropic fakes -----------------------------------------------------

#: The Responses fake's injectable bugs.
RESPONSES_BUGS = frozenset(
    {
        # A stream that ends after its last item, without response.completed (gateways that
        # stop relaying at the last delta; the OpenResponses suite's first check).
        "no_completed",
        # A truncated answer reported as response.completed, status completed, with no
        # incomplete_details (servers that map every finish to "completed").
        "incomplete_as_completed",
        # Function-call arguments that do not parse: the closing brace never streamed.
        "arguments_invalid",
        # The terminal response's output holds the text without its last delta (a gateway
        # that builds the final snapshot from a stale copy).
        "final_output_stale",
        "hang_after_disconnect",
    }
)

#: The Anthropic fake's injectable bugs.
ANTHROPIC_BUGS = frozenset(
    {
        # A stream that ends after message_delta, without message_stop.
        "no_message_stop",
        # A truncated answer reported with stop_reason end_turn (compatibility layers that
        # map every finish to end_turn).
        "end_turn_on_truncation",
        # tool_use input fragments that do not join to JSON.
        "arguments_invalid",
        "hang_after_disconnect",
    }
)

_JSON_TOKENS = ['{"', "city", '":', ' "', "Paris", '"}']


@dataclass
class _Reply:
    """One answer: text tokens or tool calls, whether the cap cut it, the stop hit."""

    tokens: list[str]
    calls: list[_Call]
    truncated: bool = False
    stopped_by: str | None = None

    @property
    def output_tokens(self) -> int:
        return len(self.tokens) + 4 * len(self.calls)


def _reply(
    prompt: str, cap: int, forced: str | None, tools: bool, json_mode: bool, stops: list[str]
) -> _Reply:
    """The answer a deterministic model gives: tool calls when a tool is forced (two when
    the prompt names two cities and the call is not forced by name), JSON in JSON mode,
    else words; cut at a stop sequence, then at ``cap`` tokens."""
    if tools and forced is not None:
        cities = ["Paris", "Tokyo"] if "Tokyo" in prompt and forced == "" else ["Paris"]
        calls = [
            _Call(f"call_{i}", "get_weather", json.dumps({"city": city}))
            for i, city in enumerate(cities)
        ]
        return _Reply([], calls)
    if json_mode:
        tokens = list(_JSON_TOKENS)
    else:
        count = 200 if "long" in prompt else len(_WORDS)
        tokens = [f"{_WORDS[i % len(_WORDS)]} " for i in range(count)]
    text, stopped_by = "", None
    for i, token in enumerate(tokens):
        hit = next((stop for stop in stops if stop in text + token), None)
        if hit is not None:
            tokens, stopped_by = tokens[:i], hit
            break
        text += token
    if len(tokens) > cap:
        return _Reply(tokens[:cap], [], truncated=True)
    return _Reply(tokens, [], stopped_by=stopped_by)


def _refused(body: dict[str, Any], state: FakeState) -> Response | None:
    for name in state.refuse:
        if name in body:
            return JSONResponse(
                {"error": {"message": f"{name} is not supported", "param": name}},
                status_code=400,
            )
    return None


async def _held(state: FakeState) -> None:
    """A leaked generation (``hang_after_disconnect``) holds every later request."""
    while state.leaked and not state.release.is_set():
        await asyncio.sleep(0.01)


async def _guarded(events: AsyncIterator[bytes], state: FakeState) -> AsyncIterator[bytes]:
    """Stream ``events``; a client that leaves mid-stream leaks the generation when the
    server has the bug."""
    try:
        async for event in events:
            yield event
    except BaseException:
        if "hang_after_disconnect" in state.bugs:
            state.leaked += 1
        raise


def build_responses_app(state: FakeState) -> Starlette:
    """The fake Responses endpoint at ``/v1/responses``."""

    async def responses(request: Request) -> Response:
        body = await _received(request, state)
        state.tokens_allowed += int(body.get("max_output_tokens", 0))
        unavailable = _unavailable(state)
        if unavailable is not None:
            return unavailable
        await _held(state)
        refused = _refused(body, state)
        if refused is not None:
            return refused
        prompt = body.get("input") if isinstance(body.get("input"), str) else ""
        cap = int(body.get("max_output_tokens", 10_000))
        if "max_output_tokens" in state.ignore:
            cap = 10_000
        choice = None if "tool_choice" in state.ignore else body.get("tool_choice")
        forced = None
        if choice == "required":
            forced = ""
        elif isinstance(choice, dict):
            forced = str(choice.get("name"))
        json_mode = (body.get("text") or {}).get("format", {}).get("type") == "json_object"
        reply = _reply(prompt, cap, forced, bool(body.get("tools")), json_mode, [])
        events = _responses_stream(body, reply, state)
        return StreamingResponse(_guarded(events, state), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/responses", responses, methods=["POST"])])


async def _responses_stream(
    body: dict[str, Any], reply: _Reply, state: FakeState
) -> AsyncIterator[bytes]:
    bugs = state.active_bugs()
    sequence = 0
    response_id = f"resp_{uuid.uuid4().hex}"
    paced = "long" in str(body.get("input"))

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal sequence
        payload = {"type": kind, **fields, "sequence_number": sequence}
        sequence += 1
        return f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()

    def response(status: str, output: list[Any], usage: Any, details: Any = None) -> Any:
        return {
            "id": response_id,
            "object": "response",
            "created_at": 1700000000,
            "status": status,
            "error": None,
            "incomplete_details": details,
            "model": body.get("model", "fake"),
            "output": output,
            "max_output_tokens": body.get("max_output_tokens"),
            "usage": usage,
        }

    yield event("response.created", response=response("in_progress", [], None))
    yield event("response.in_progress", response=response("in_progress", [], None))
    output: list[Any] = []
    if reply.calls:
        for position, call in enumerate(reply.calls):
            arguments = call.arguments[:-1] if "arguments_invalid" in bugs else call.arguments
            item = {
                "id": f"fc_{position}",
                "type": "function_call",
                "status": "in_progress",
                "arguments": "",
                "call_id": call.id,
                "name": call.name,
            }
            yield event("response.output_item.added", output_index=position, item=item)
            half = len(arguments) // 2
            for part in (arguments[:half], arguments[half:]):
                yield event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=position,
                    delta=part,
                )
            yield event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=position,
                arguments=arguments,
            )
            done = {**item, "status": "completed", "arguments": arguments}
            yield event("response.output_item.done", output_index=position, item=done)
            output.append(done)
    else:
        item_id = "msg_0"
        item = {"id": item_id, "type": "message", "status": "in_progress", "content": [],
                "role": "assistant"}  # fmt: skip
        yield event("response.output_item.added", output_index=0, item=item)
        part = {"type": "output_text", "annotations": [], "text": ""}
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        yield event("response.content_part.added", **where, part=part)
        for token in reply.tokens:
            yield event("response.output_text.delta", **where, delta=token, logprobs=[])
            await asyncio.sleep(0.01 if paced else 0)
        text = "".join(reply.tokens)
        yield event("response.output_text.done", **where, text=text, logprobs=[])
        yield event("response.content_part.done", **where, part={**part, "text": text})
        incomplete = reply.truncated and "incomplete_as_completed" not in bugs
        final_text = "".join(reply.tokens[:-1]) if "final_output_stale" in bugs else text
        done = {
            **item,
            "status": "incomplete" if incomplete else "completed",
            "content": [{**part, "text": final_text}],
        }
        yield event("response.output_item.done", output_index=0, item=done)
        output.append(done)
    if "no_completed" in bugs:
        return
    usage = {
        "input_tokens": _PROMPT_TOKENS,
        "output_tokens": reply.output_tokens,
        "total_tokens": _PROMPT_TOKENS + reply.output_tokens,
    }
    if reply.truncated and "incomplete_as_completed" not in bugs:
        details = {"reason": "max_output_tokens"}
        yield event("response.incomplete", response=response("incomplete", output, usage, details))
    else:
        yield event("response.completed", response=response("completed", output, usage))


def build_anthropic_app(state: FakeState) -> Starlette:
    """The fake Messages endpoint at ``/v1/messages``."""

    async def messages(request: Request) -> Response:
        body = await _received(request, state)
        state.tokens_allowed += int(body.get("max_tokens", 0))
        unavailable = _unavailable(state)
        if unavailable is not None:
            return unavailable
        await _held(state)
        refused = _refused(body, state)
        if refused is not None:
            return refused
        if type(body.get("max_tokens")) is not int:  # Anthropic requires it
            return JSONResponse(
                {"type": "error", "error": {"type": "invalid_request_error",
                                            "message": "max_tokens: Field required"}},
                status_code=400,
            )  # fmt: skip
        messages = body.get("messages") or [{}]
        prompt = messages[-1].get("content", "")
        cap = 10_000 if "max_tokens" in state.ignore else body["max_tokens"]
        choice = {} if "tool_choice" in state.ignore else (body.get("tool_choice") or {})
        forced = None
        if choice.get("type") == "any":
            forced = ""
        elif choice.get("type") == "tool":
            forced = str(choice.get("name"))
        stops = list(body.get("stop_sequences") or [])
        reply = _reply(prompt, cap, forced, bool(body.get("tools")), False, stops)
        events = _anthropic_stream(body, reply, state)
        return StreamingResponse(_guarded(events, state), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])


async def _anthropic_stream(
    body: dict[str, Any], reply: _Reply, state: FakeState
) -> AsyncIterator[bytes]:
    bugs = state.active_bugs()
    paced = "long" in json.dumps(body.get("messages"))

    def event(kind: str, **fields: Any) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()

    message = {
        "id": f"msg_{uuid.uuid4().hex}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake"),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": _PROMPT_TOKENS, "output_tokens": 1},
    }
    yield event("message_start", message=message)
    yield event("ping")
    if reply.calls:
        for index, call in enumerate(reply.calls):
            block = {"type": "tool_use", "id": f"toolu_{index}", "name": call.name, "input": {}}
            yield event("content_block_start", index=index, content_block=block)
            arguments = call.arguments[:-1] if "arguments_invalid" in bugs else call.arguments
            half = len(arguments) // 2
            for part in ("", arguments[:half], arguments[half:]):
                delta = {"type": "input_json_delta", "partial_json": part}
                yield event("content_block_delta", index=index, delta=delta)
            yield event("content_block_stop", index=index)
        stop_reason: str = "tool_use"
    else:
        yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
        for token in reply.tokens:
            delta = {"type": "text_delta", "text": token}
            yield event("content_block_delta", index=0, delta=delta)
            await asyncio.sleep(0.01 if paced else 0)
        yield event("content_block_stop", index=0)
        stop_reason = "end_turn"
        if reply.truncated and "end_turn_on_truncation" not in bugs:
            stop_reason = "max_tokens"
        elif reply.stopped_by is not None:
            stop_reason = "stop_sequence"
    yield event(
        "message_delta",
        delta={"stop_reason": stop_reason, "stop_sequence": reply.stopped_by},
        usage={"output_tokens": reply.output_tokens},
    )
    if "no_message_stop" not in bugs:
        yield event("message_stop")
