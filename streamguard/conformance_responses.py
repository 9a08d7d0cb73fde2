"""The conformance battery for the OpenAI Responses API (``--protocol openai_responses``).

Each variant streams ``POST {base}/responses`` with ``max_output_tokens`` set and runs the
stream through the engine's ``openai_responses`` checker (``response.created`` first, one
terminal, ``sequence_number`` in order, items and parts added and done in pairs, the done
text equal to its deltas), then the variant's checks below. They read the terminal event's
``response`` (its status, ``incomplete_details``, ``usage`` and ``output``) against what
the deltas streamed and what the request asked for. The runner, the reader and the
outcomes are ``streamguard.conformance``'s; the pieces, ``streamguard.conformance_base``'s.

A Responses stream has no finish reason: a truncated answer ends with
``response.incomplete`` and ``incomplete_details.reason: "max_output_tokens"``, a function
call is an output item of type ``function_call`` whose arguments stream in
``response.function_call_arguments.delta`` events and whose response still ends
``completed``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from streamguard.conformance_base import (
    ABORT_CYCLES,
    DEFAULT_TOKEN_CAP,
    Battery,
    Exchange,
    NotExercised,
    Variant,
    VariantFinding,
    found,
    json_object,
    mapping,
    sequence,
)

__all__ = [
    "API_KEY_ENV",
    "RESPONSES_BATTERY",
    "RESPONSES_VARIANTS",
    "base_request",
    "check_common",
    "check_json",
    "check_parallel_tools",
    "check_tools",
    "check_truncation",
    "has_content",
]

API_KEY_ENV = "OPENAI_API_KEY"
#: The event types that end a Responses stream, each with the status it reports.
TERMINALS: dict[str, str] = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
#: The ``incomplete_details.reason`` values a message names (others show as their type).
INCOMPLETE_REASONS: frozenset[str] = frozenset({"max_output_tokens", "content_filter"})


def _terminal(exchange: Exchange) -> tuple[str, Mapping[str, Any]] | None:
    """The last terminal event's type and its ``response`` object."""
    found_terminal = None
    for chunk in exchange.chunks:
        kind = chunk.get("type")
        if isinstance(kind, str) and kind in TERMINALS:
            found_terminal = (kind, mapping(chunk.get("response")))
    return found_terminal


def _streamed_text(exchange: Exchange) -> str:
    """The text the ``response.output_text.delta`` events streamed, joined."""
    return "".join(
        chunk["delta"]
        for chunk in exchange.chunks
        if chunk.get("type") == "response.output_text.delta" and isinstance(chunk.get("delta"), str)
    )


def _final_text(response: Mapping[str, Any]) -> str | None:
    """The text of the terminal response's message items, joined (None: no message)."""
    text = None
    for item in sequence(response.get("output")):
        if mapping(item).get("type") != "message":
            continue
        for part in sequence(mapping(item).get("content")):
            part_text = mapping(part).get("text")
            if mapping(part).get("type") == "output_text" and isinstance(part_text, str):
                text = (text or "") + part_text
    return text


def _output_tokens(response: Mapping[str, Any]) -> int | None:
    tokens = mapping(response.get("usage")).get("output_tokens")
    return tokens if type(tokens) is int else None


def _cap(exchange: Exchange) -> int | None:
    cap = exchange.request.get("max_output_tokens")
    return cap if type(cap) is int else None


def _reason(value: Any) -> str:
    if isinstance(value, str) and value in INCOMPLETE_REASONS:
        return value
    return f"({type(value).__name__})"


def check_common(exchange: Exchange) -> Iterator[VariantFinding]:
    """What every Responses stream owes a client beyond the engine's rules: the usage
    within ``max_output_tokens``, and the terminal response's output text the text the
    deltas streamed (a client that keeps the final snapshot sees that one)."""
    terminal = _terminal(exchange)
    if terminal is None:
        return  # the engine's missing_terminal
    _, response = terminal
    tokens, cap = _output_tokens(response), _cap(exchange)
    if tokens is not None and cap is not None and tokens > cap:
        yield found("usage_over_max_tokens", f"output_tokens {tokens} over max_output_tokens {cap}")
    final = _final_text(response)
    streamed = _streamed_text(exchange)
    if final is not None and final != streamed:
        yield found(
            "final_output_mismatch",
            f"the terminal response holds {len(final)} chars of text, the deltas "
            f"streamed {len(streamed)}",
        )


def check_truncation(exchange: Exchange) -> Iterator[VariantFinding]:
    """With a small ``max_output_tokens``: the stream ends ``response.incomplete`` with
    ``incomplete_details.reason`` ``max_output_tokens``, and the usage says exactly that
    many output tokens."""
    terminal = _terminal(exchange)
    if terminal is None:
        return
    kind, response = terminal
    tokens, cap = _output_tokens(response), _cap(exchange)
    if kind == "response.incomplete":
        reason = mapping(response.get("incomplete_details")).get("reason")
        if reason != "max_output_tokens":
            yield found(
                "length_not_reported",
                f"response.incomplete with reason {_reason(reason)}, not max_output_tokens",
            )
        elif tokens is not None and cap is not None and tokens != cap:
            yield found(
                "length_token_count",
                f"incomplete at max_output_tokens with output_tokens {tokens}, cap {cap}",
            )
        return
    if kind == "response.completed" and tokens is not None and cap is not None and tokens >= cap:
        yield found(
            "length_not_reported",
            f"output_tokens reached max_output_tokens {cap}, the response says completed",
        )
        return
    raise NotExercised("the answer ended before max_output_tokens")


def _function_calls(exchange: Exchange) -> dict[str, Mapping[str, Any]]:
    """The ``function_call`` items the stream added, by item id, in order."""
    calls: dict[str, Mapping[str, Any]] = {}
    for chunk in exchange.chunks:
        if chunk.get("type") != "response.output_item.added":
            continue
        item = mapping(chunk.get("item"))
        if item.get("type") == "function_call" and isinstance(item.get("id"), str):
            calls.setdefault(item["id"], item)
    return calls


def _arguments(exchange: Exchange) -> tuple[dict[str, str], dict[str, str]]:
    """Each item's argument deltas joined, and the arguments its done event gives."""
    streamed: dict[str, str] = {}
    done: dict[str, str] = {}
    for chunk in exchange.chunks:
        kind, item_id = chunk.get("type"), chunk.get("item_id")
        if not isinstance(item_id, str):
            continue
        if kind == "response.function_call_arguments.delta" and isinstance(chunk.get("delta"), str):
            streamed[item_id] = streamed.get(item_id, "") + chunk["delta"]
        elif kind == "response.function_call_arguments.done" and isinstance(
            chunk.get("arguments"), str
        ):
            done[item_id] = chunk["arguments"]
    return streamed, done


def _forced_name(request: Mapping[str, Any]) -> str | None:
    choice = request.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice.get("name")
        return name if isinstance(name, str) else None
    return None


def check_tools(exchange: Exchange) -> Iterator[VariantFinding]:
    """With tools and a forced ``tool_choice``: each function call carries its
    ``call_id`` and a declared ``name`` (the forced one, when named), its argument deltas
    join to a JSON object equal to its done event's arguments, the call ids differ, and
    the response ends ``completed``."""
    request = exchange.request
    calls = _function_calls(exchange)
    if not calls:
        if request.get("tool_choice") not in (None, "auto", "none"):
            yield found("feature_ignored", "tool_choice forces a call, no function call streamed")
            return
        raise NotExercised("the model called no tool")
    terminal = _terminal(exchange)
    if terminal is not None and terminal[0] == "response.incomplete":
        raise NotExercised("the response ended incomplete, its arguments cut short")
    declared = {mapping(tool).get("name") for tool in sequence(request.get("tools"))}
    forced = _forced_name(request)
    streamed, done = _arguments(exchange)
    call_ids: list[Any] = []
    for position, (item_id, item) in enumerate(calls.items()):
        name, call_id = item.get("name"), item.get("call_id")
        call_ids.append(call_id)
        if not (isinstance(name, str) and name) or not (isinstance(call_id, str) and call_id):
            yield found(
                "tool_call_fields_missing", f"function call {position}: no call_id or no name"
            )
        elif forced is not None and name != forced:
            yield found("tool_choice_not_followed", f"function call {position}: not the forced one")
        elif declared and name not in declared:
            yield found(
                "tool_call_name_unknown",
                f"function call {position}: a {len(name)}-char name, no tool of the request",
            )
        arguments = streamed.get(item_id, done.get(item_id, ""))
        if json_object(arguments) is None:
            yield found(
                "tool_arguments_invalid",
                f"function call {position}: {len(arguments)} chars of arguments, no JSON object",
            )
        elif item_id in done and done[item_id] != arguments:
            yield found(
                "tool_arguments_invalid",
                f"function call {position}: the done event's arguments differ from the deltas",
            )
    if len({json.dumps(i) for i in call_ids}) < len(call_ids):
        yield found("tool_call_id_duplicate", "two function calls share a call_id")
    if terminal is not None and terminal[0] != "response.completed":
        yield found(
            "tool_calls_finish_mismatch",
            f"{len(calls)} function call(s) streamed, the response ended {TERMINALS[terminal[0]]}",
        )


def check_parallel_tools(exchange: Exchange) -> Iterator[VariantFinding]:
    """Parallel calls: at least two function calls (else not exercised); each is judged
    by ``check_tools``."""
    if len(_function_calls(exchange)) == 1:
        raise NotExercised("the model made one function call, not parallel ones")
    return iter(())


def check_json(exchange: Exchange) -> Iterator[VariantFinding]:
    """JSON mode (``text.format`` ``json_object``): a completed response's streamed text
    parses as a JSON object."""
    terminal = _terminal(exchange)
    if terminal is None or terminal[0] != "response.completed":
        raise NotExercised("the response did not complete")
    text = _streamed_text(exchange)
    if json_object(text) is None:
        yield found("json_content_invalid", f"{len(text)} chars of text, no JSON object")


def has_content(data: str) -> bool:
    """Whether an event's data is a text delta with text: where the abort variant leaves."""
    try:
        event = json.loads(data)
    except ValueError:
        return False
    return (
        isinstance(event, dict)
        and event.get("type") == "response.output_text.delta"
        and bool(event.get("delta"))
    )


_COUNT = "Count from one to twenty in words, separated by spaces, nothing else."
_LONG = "Write a long story about a lighthouse keeper."
_WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
#: The engine's rules a tool variant is about: a finding of one fails it at any severity.
TOOL_FOCUS: frozenset[str] = frozenset({"done_text_mismatch"})


def base_request(model: str) -> dict[str, Any]:
    """The request every Responses variant starts from. No ``temperature`` (reasoning
    models refuse it); ``store: false``, so a hosted API keeps nothing of the run."""
    return {
        "model": model,
        "input": _COUNT,
        "stream": True,
        "store": False,
        "max_output_tokens": 32,
    }


#: The Responses battery, in the order it runs. (OpenAI refuses a ``max_output_tokens``
#: below 16: the truncation variant asks for a long answer within 16.)
RESPONSES_VARIANTS: tuple[Variant, ...] = (
    Variant(
        "plain",
        "a plain stream: response.created first, one terminal, sequence numbers, items "
        "paired, the final output the text streamed",
    ),
    Variant(
        "truncation",
        "max_output_tokens 16 on a long answer: response.incomplete, reason "
        "max_output_tokens, output_tokens 16",
        {"max_output_tokens": 16, "input": _LONG},
        (check_truncation,),
        feature="max_output_tokens",
    ),
    Variant(
        "tool_required",
        "tool_choice required: a function_call item with call_id and name, arguments "
        "that join to JSON, status completed",
        {
            "max_output_tokens": DEFAULT_TOKEN_CAP,
            "input": "What is the weather in Paris?",
            "tools": [_WEATHER_TOOL],
            "tool_choice": "required",
        },
        (check_tools,),
        feature="tool_choice",
        focus=TOOL_FOCUS,
    ),
    Variant(
        "tool_named",
        "tool_choice naming a function: that function called, its arguments JSON",
        {
            "max_output_tokens": DEFAULT_TOKEN_CAP,
            "input": "What is the weather in Paris?",
            "tools": [_WEATHER_TOOL],
            "tool_choice": {"type": "function", "name": "get_weather"},
        },
        (check_tools,),
        feature="tool_choice",
        focus=TOOL_FOCUS,
    ),
    Variant(
        "tools_parallel",
        "parallel function calls (two cities): distinct call ids, each parses",
        {
            "max_output_tokens": DEFAULT_TOKEN_CAP,
            "input": "What is the weather in Paris and in Tokyo? Call the tool once per city.",
            "tools": [_WEATHER_TOOL],
            "tool_choice": "required",
            "parallel_tool_calls": True,
        },
        (check_tools, check_parallel_tools),
        feature="parallel_tool_calls",
        focus=TOOL_FOCUS,
    ),
    Variant(
        "json_object",
        "JSON mode (text.format json_object): the streamed text parses as a JSON object",
        {
            "max_output_tokens": DEFAULT_TOKEN_CAP,
            "input": 'Answer in JSON: {"city": <the capital of France>}',
            "text": {"format": {"type": "json_object"}},
        },
        (check_json,),
        feature="text",
    ),
    Variant(
        "abort",
        f"leave after the first output_text delta; then a health request, {ABORT_CYCLES} "
        "open/close cycles and another health request must complete",
        {"max_output_tokens": DEFAULT_TOKEN_CAP, "input": _LONG},
        kind="abort",
    ),
)

#: The Responses battery (``--protocol openai_responses``).
RESPONSES_BATTERY = Battery(
    protocol="openai_responses",
    title="OpenAI Responses",
    variants=RESPONSES_VARIANTS,
    path="/responses",
    api_key_env=API_KEY_ENV,
    base_request=base_request,
    common=check_common,
    has_content=has_content,
    cap_key="max_output_tokens",
)
