"""The conformance battery for Anthropic Messages (``--protocol anthropic``).

Each variant streams ``POST {base}/messages`` with ``max_tokens`` (Anthropic requires it),
the key in ``x-api-key`` and ``anthropic-version: 2023-06-01``, and runs the stream through
the engine's ``anthropic`` checker (``message_start`` first, content blocks started,
delta'd and stopped in index order, a ``message_delta`` with the stop reason and usage,
``message_stop`` last, tool input that joins to JSON), then the variant's checks below.
They read the last ``message_delta`` (``stop_reason``, ``usage.output_tokens``), the text
the ``text_delta`` events streamed and the ``tool_use`` blocks against what the request
asked for. The runner, the reader and the outcomes are ``streamguard.conformance``'s; the
pieces, ``streamguard.conformance_base``'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
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
    "ANTHROPIC_BATTERY",
    "ANTHROPIC_VARIANTS",
    "ANTHROPIC_VERSION",
    "API_KEY_ENV",
    "base_request",
    "check_common",
    "check_parallel_tools",
    "check_stop",
    "check_tools",
    "check_truncation",
    "has_content",
]

API_KEY_ENV = "ANTHROPIC_API_KEY"
#: The API version every request names (``anthropic-version``).
ANTHROPIC_VERSION = "2023-06-01"
#: The documented stop reasons a message names (others show as their type).
STOP_REASONS: frozenset[str] = frozenset(
    {
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    }
)


def _stop(exchange: Exchange) -> tuple[Any, int | None]:
    """The stop reason and output tokens of the last ``message_delta`` (None when absent)."""
    reason: Any = None
    tokens = None
    for chunk in exchange.chunks:
        if chunk.get("type") != "message_delta":
            continue
        reason = mapping(chunk.get("delta")).get("stop_reason")
        output = mapping(chunk.get("usage")).get("output_tokens")
        tokens = output if type(output) is int else tokens
    return reason, tokens


def _text(exchange: Exchange) -> str:
    """The text the ``text_delta`` events streamed, joined."""
    text = ""
    for chunk in exchange.chunks:
        delta = mapping(chunk.get("delta"))
        if chunk.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
            part = delta.get("text")
            text += part if isinstance(part, str) else ""
    return text


def _cap(exchange: Exchange) -> int | None:
    cap = exchange.request.get("max_tokens")
    return cap if type(cap) is int else None


def _reason(value: Any) -> str:
    if isinstance(value, str) and value in STOP_REASONS:
        return value
    return f"({type(value).__name__})"


def check_common(exchange: Exchange) -> Iterator[VariantFinding]:
    """What every Messages stream owes a client beyond the engine's rules: the output
    tokens within ``max_tokens``."""
    _, tokens = _stop(exchange)
    cap = _cap(exchange)
    if tokens is not None and cap is not None and tokens > cap:
        yield found("usage_over_max_tokens", f"output_tokens {tokens} over max_tokens {cap}")


def check_truncation(exchange: Exchange) -> Iterator[VariantFinding]:
    """With a small ``max_tokens``: ``stop_reason`` ``max_tokens``, and the usage says
    exactly that many output tokens."""
    reason, tokens = _stop(exchange)
    cap = _cap(exchange)
    if reason is None:
        return  # no stop reason at all: the engine's missing_message_delta
    if reason == "max_tokens":
        if tokens is not None and cap is not None and tokens != cap:
            yield found(
                "length_token_count",
                f"stop_reason max_tokens with output_tokens {tokens}, max_tokens {cap}",
            )
        return
    if tokens is not None and cap is not None and tokens >= cap:
        yield found(
            "length_not_reported",
            f"output_tokens reached max_tokens {cap}, stop_reason is {_reason(reason)}",
        )
        return
    raise NotExercised("the answer ended before max_tokens")


def check_stop(exchange: Exchange) -> Iterator[VariantFinding]:
    """With ``stop_sequences``: the sequence never appears in the text (the stop reason,
    ``stop_sequence``, is the engine's to judge among the documented ones)."""
    text = _text(exchange)
    for stop in sequence(exchange.request.get("stop_sequences")):
        if isinstance(stop, str) and stop and stop in text:
            yield found(
                "stop_sequence_in_content",
                f"the text holds a stop sequence ({len(stop)} chars)",
            )
            return
    reason, _ = _stop(exchange)
    if reason != "stop_sequence":
        raise NotExercised(f"the answer ended {_reason(reason)} before the stop sequence")


@dataclass
class _ToolBlock:
    id: Any
    name: Any
    start_input: Any
    partial: str | None = None


def _tool_blocks(exchange: Exchange) -> list[_ToolBlock]:
    """The ``tool_use`` blocks the stream started, in order, each with its input deltas."""
    blocks: dict[int, _ToolBlock] = {}
    for chunk in exchange.chunks:
        index = chunk.get("index")
        if type(index) is not int:
            continue
        if chunk.get("type") == "content_block_start":
            block = mapping(chunk.get("content_block"))
            if block.get("type") == "tool_use" and index not in blocks:
                blocks[index] = _ToolBlock(block.get("id"), block.get("name"), block.get("input"))
        elif chunk.get("type") == "content_block_delta" and index in blocks:
            delta = mapping(chunk.get("delta"))
            part = delta.get("partial_json")
            if delta.get("type") == "input_json_delta" and isinstance(part, str):
                blocks[index].partial = (blocks[index].partial or "") + part
    return list(blocks.values())


def _forced_name(request: Mapping[str, Any]) -> str | None:
    choice = mapping(request.get("tool_choice"))
    name = choice.get("name")
    return name if choice.get("type") == "tool" and isinstance(name, str) else None


def check_tools(exchange: Exchange) -> Iterator[VariantFinding]:
    """With tools and a forced ``tool_choice`` (``any``, or a named ``tool``): each
    ``tool_use`` block carries an ``id`` and a declared ``name`` (the forced one, when
    named), its ``input_json_delta`` fragments join to a JSON object, the ids differ, and
    the stop reason is ``tool_use``."""
    request = exchange.request
    blocks = _tool_blocks(exchange)
    reason, _ = _stop(exchange)
    if not blocks:
        if mapping(request.get("tool_choice")).get("type") in ("any", "tool"):
            yield found("feature_ignored", "tool_choice forces a tool, no tool_use block streamed")
            return
        raise NotExercised("the model called no tool")
    if reason == "max_tokens":
        raise NotExercised("the answer hit max_tokens, its tool input cut short")
    declared = {mapping(tool).get("name") for tool in sequence(request.get("tools"))}
    forced = _forced_name(request)
    for position, block in enumerate(blocks):
        name = block.name
        if not (isinstance(name, str) and name) or not (isinstance(block.id, str) and block.id):
            yield found("tool_call_fields_missing", f"tool_use block {position}: no id or no name")
        elif forced is not None and name != forced:
            yield found(
                "tool_choice_not_followed", f"tool_use block {position}: not the forced tool"
            )
        elif declared and name not in declared:
            yield found(
                "tool_call_name_unknown",
                f"tool_use block {position}: a {len(name)}-char name, no tool of the request",
            )
        if block.partial is None or block.partial == "":
            valid = isinstance(block.start_input, dict)  # no deltas: the start's input stands
            size = 0
        else:
            valid = json_object(block.partial) is not None
            size = len(block.partial)
        if not valid:
            yield found(
                "tool_arguments_invalid",
                f"tool_use block {position}: {size} chars of input, no JSON object",
            )
    ids = [json.dumps(block.id) for block in blocks]
    if len(set(ids)) < len(ids):
        yield found("tool_call_id_duplicate", "two tool_use blocks share an id")
    if reason is not None and reason != "tool_use":
        yield found(
            "tool_calls_finish_mismatch",
            f"{len(blocks)} tool_use block(s) streamed, stop_reason {_reason(reason)}",
        )


def check_parallel_tools(exchange: Exchange) -> Iterator[VariantFinding]:
    """Parallel calls: at least two ``tool_use`` blocks (else not exercised)."""
    if len(_tool_blocks(exchange)) == 1:
        raise NotExercised("the model made one tool call, not parallel ones")
    return iter(())


def has_content(data: str) -> bool:
    """Whether an event's data is a text delta with text: where the abort variant leaves."""
    try:
        event = json.loads(data)
    except ValueError:
        return False
    if not isinstance(event, dict) or event.get("type") != "content_block_delta":
        return False
    delta = mapping(event.get("delta"))
    return delta.get("type") == "text_delta" and bool(delta.get("text"))


_COUNT = "Count from one to twenty in words, separated by spaces, nothing else."
_LONG = "Write a long story about a lighthouse keeper."
_WEATHER_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
#: The engine's rules a tool variant is about: a finding of one fails it at any severity.
TOOL_FOCUS: frozenset[str] = frozenset({"tool_input_invalid", "delta_type_mismatch"})


def base_request(model: str) -> dict[str, Any]:
    """The request every Messages variant starts from."""
    return {
        "model": model,
        "max_tokens": 32,
        "messages": [{"role": "user", "content": _COUNT}],
        "stream": True,
        "temperature": 0,
    }


def _asking(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


#: The Messages battery, in the order it runs.
ANTHROPIC_VARIANTS: tuple[Variant, ...] = (
    Variant(
        "plain",
        "a plain stream: message_start first, blocks started, delta'd and stopped in "
        "order, message_delta with stop_reason and usage, message_stop last",
    ),
    Variant(
        "stop",
        "stop_sequences the answer must hit: stop_reason stop_sequence, the sequence not "
        "in the text",
        {"stop_sequences": [" five"]},
        (check_stop,),
        feature="stop_sequences",
    ),
    Variant(
        "truncation",
        "max_tokens 5: stop_reason max_tokens, output_tokens 5",
        {"max_tokens": 5},
        (check_truncation,),
        feature="max_tokens",
    ),
    Variant(
        "tool_any",
        'tool_choice {"type": "any"}: a tool_use block with id and name, input that joins '
        "to JSON, stop_reason tool_use",
        {
            "max_tokens": DEFAULT_TOKEN_CAP,
            "messages": _asking("What is the weather in Paris?"),
            "tools": [_WEATHER_TOOL],
            "tool_choice": {"type": "any"},
        },
        (check_tools,),
        feature="tool_choice",
        focus=TOOL_FOCUS,
    ),
    Variant(
        "tool_named",
        "tool_choice naming a tool: that tool called, its input JSON, stop_reason tool_use",
        {
            "max_tokens": DEFAULT_TOKEN_CAP,
            "messages": _asking("What is the weather in Paris?"),
            "tools": [_WEATHER_TOOL],
            "tool_choice": {"type": "tool", "name": "get_weather"},
        },
        (check_tools,),
        feature="tool_choice",
        focus=TOOL_FOCUS,
    ),
    Variant(
        "tools_parallel",
        "parallel tool calls (two cities): distinct ids, each input parses",
        {
            "max_tokens": DEFAULT_TOKEN_CAP,
            "messages": _asking(
                "What is the weather in Paris and in Tokyo? Call the tool once per city."
            ),
            "tools": [_WEATHER_TOOL],
            "tool_choice": {"type": "any"},
        },
        (check_tools, check_parallel_tools),
        feature="tool_choice",
        focus=TOOL_FOCUS,
    ),
    Variant(
        "abort",
        f"leave after the first text delta; then a health request, {ABORT_CYCLES} "
        "open/close cycles and another health request must complete",
        {"max_tokens": DEFAULT_TOKEN_CAP, "messages": _asking(_LONG)},
        kind="abort",
    ),
)

#: The Messages battery (``--protocol anthropic``).
ANTHROPIC_BATTERY = Battery(
    protocol="anthropic",
    title="Anthropic Messages",
    variants=ANTHROPIC_VARIANTS,
    path="/messages",
    api_key_env=API_KEY_ENV,
    base_request=base_request,
    common=check_common,
    has_content=has_content,
    cap_key="max_tokens",
    key_header="x-api-key",
    fixed_headers={"anthropic-version": ANTHROPIC_VERSION},
)
