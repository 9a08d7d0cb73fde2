"""A fake OpenAI-compatible Chat Completions endpoint, for ``streamguard conformance`` tests.

``build_chat_app()`` serves every variant of the conformance battery correctly: streamed
and non-streamed answers, ``n``, ``stop``, ``max_tokens`` (``length``), forced and parallel
tool calls, ``logprobs``, JSON mode and structured output, the usage chunk, and it stops
generating when a client leaves. Its answers are deterministic, so a streamed answer
equals the non-streamed one.

Each real bug the conformance command hunts for can be switched on by name (``BUGS``),
modelled on the issue that reported it; ``refuse`` makes the endpoint answer 400 naming a
parameter (an "unsupported" feature) and ``ignore`` drop a feature silently (an "ignored"
one).
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

__all__ = ["BUGS", "FakeState", "build_chat_app"]

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


def build_chat_app(state: FakeState) -> Starlette:
    """The fake endpoint at ``/v1/chat/completions`` (and ``/v1/models``)."""

    async def completions(request: Request) -> Response:
        state.requests += 1
        state.authorization = request.headers.get("authorization")
        body = await request.json()
        state.tokens_allowed += int(body.get("max_tokens", 0)) * int(body.get("n", 1))
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
    bugs = state.bugs
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
