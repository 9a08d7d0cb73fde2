"""The streamed answer, assembled, against the non-streamed response for the same request.

A streaming test's strongest assertion is a relationship that holds for every prompt: the
stream, put together as the official client puts it together, says what the non-streamed
response says. A relay that merges, drops or reorders deltas breaks it, whatever the text.

What "assembled" means is what each official client's accumulator does:

* OpenAI Chat (``openai``'s ``chat.completions.stream``, ``accumulate_delta``): per choice
  index, every string of the delta concatenated (content, and each tool call's ``id``,
  ``function.name`` and ``function.arguments`` per tool-call index), the last non-null
  ``finish_reason``, the last non-null ``usage``;
* OpenAI Responses (``openai``'s ``responses.stream``, ``get_final_response``): the terminal
  event's ``response`` (its ``output``, ``status``, ``incomplete_details`` and ``usage``),
  the ``output_item.done`` items when it has no ``output``; and, as a stream is shown while
  it arrives, the text its ``output_text.delta`` events add up to;
* Anthropic Messages (``anthropic``'s ``messages.stream``, ``accumulate_event``): the
  ``message_start`` message, each ``content_block_start`` block appended in arrival order,
  ``text_delta`` text concatenated, a tool's ``input`` parsed from its concatenated
  ``partial_json``, ``stop_reason`` and ``stop_sequence`` from ``message_delta``, and its
  ``usage`` over the start's (``output_tokens`` always, the others when sent);
* Gemini (``google-genai`` yields chunks and leaves the sum to the caller): per candidate
  index, the text parts concatenated (thought parts apart), every ``functionCall`` part in
  order, the last ``finishReason`` and the last ``usageMetadata``.

Both sides are reduced to the same aspects, and each aspect that differs is one
``Difference``: ``text``, ``tool_calls`` (id, name and arguments; arguments compared as
JSON when both parse, so spacing does not count), ``finish_reason`` and ``usage``. Thinking
and reasoning are not compared: the two calls need not think alike.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamguard.testing._collect import CollectedStream

__all__ = ["ASPECTS", "Difference", "assert_matches_response", "differences_from_response"]

#: What can be compared, and left out with ``ignore=``; ``tool_call_ids`` leaves out only
#: the ids of tool calls (two real calls never share them).
ASPECTS = frozenset({"text", "tool_calls", "tool_call_ids", "finish_reason", "usage"})


@dataclass(frozen=True, slots=True)
class Difference:
    """One aspect on which the assembled stream and the response disagree."""

    #: Where: ``text``, ``choices[1].tool_calls[0].arguments``, ``usage.output_tokens``...
    where: str
    streamed: Any
    response: Any

    def __str__(self) -> str:
        return f"{self.where}: streamed {_shown(self.streamed)}, response {_shown(self.response)}"


@dataclass(frozen=True, slots=True)
class _ToolCall:
    id: str | None
    name: str | None
    arguments: Any


@dataclass(slots=True)
class _Output:
    """One choice (Chat) or candidate (Gemini), or the one answer of the other protocols."""

    text: str = ""
    tool_calls: list[_ToolCall] = field(default_factory=list)
    finish_reason: Any = None


@dataclass(slots=True)
class _Answer:
    outputs: dict[int, _Output] = field(default_factory=dict)
    usage: Mapping[str, Any] | None = None
    #: Said by the stream alone: the text its deltas add up to, when it has a final text too.
    streamed_text: str | None = None

    def output(self, index: int) -> _Output:
        return self.outputs.setdefault(index, _Output())


def differences_from_response(
    collected: CollectedStream,
    response: Mapping[str, Any] | bytes | str,
    *,
    ignore: Collection[str] = (),
) -> list[Difference]:
    """Every way the collected stream, assembled, differs from the non-streamed ``response``
    (its JSON body, parsed or not) for the same request; empty when they agree.

    The protocol is the stream's (``collected.protocol``): ``openai_chat``,
    ``openai_responses``, ``anthropic`` or ``gemini``, the ones with a non-streamed form.
    ``ignore`` leaves aspects out (``ASPECTS``), e.g. ``ignore={"usage"}`` for a stream
    that was not asked for usage.
    """
    unknown = set(ignore) - ASPECTS
    if unknown:
        raise ValueError(f"unknown aspects {sorted(unknown)}; expected some of {sorted(ASPECTS)}")
    protocol = collected.protocol
    try:
        from_stream, from_body, label = _PROTOCOLS[protocol]
    except KeyError:
        raise ValueError(
            f"protocol {protocol!r} has no non-streamed form to compare with; expected one of "
            f"{sorted(_PROTOCOLS)}"
        ) from None
    body = json.loads(response) if isinstance(response, bytes | str) else response
    if not isinstance(body, Mapping):
        raise ValueError("the response body is not a JSON object")
    payloads = [payload for payload in _payloads(collected) if isinstance(payload, dict)]
    return _compare(from_stream(payloads), from_body(body), label, frozenset(ignore))


def assert_matches_response(
    collected: CollectedStream,
    response: Mapping[str, Any] | bytes | str,
    *,
    ignore: Collection[str] = (),
) -> None:
    """Raise ``AssertionError`` listing every ``differences_from_response``, if any."""
    __tracebackhide__ = True  # pytest shows the caller's line and the message, not this body
    differences = differences_from_response(collected, response, ignore=ignore)
    if differences:
        lines = "\n".join(f"  - {difference}" for difference in differences)
        raise AssertionError(
            f"the {collected.protocol} stream, assembled, differs from the response in "
            f"{len(differences)} way(s):\n{lines}"
        )


# -- comparing -------------------------------------------------------------------------------


def _compare(
    streamed: _Answer, response: _Answer, label: str | None, ignore: frozenset[str]
) -> list[Difference]:
    out: list[Difference] = []
    for index in sorted(streamed.outputs.keys() | response.outputs.keys()):
        where = "" if label is None else f"{label}[{index}]."
        mine, theirs = streamed.outputs.get(index), response.outputs.get(index)
        if mine is None or theirs is None:
            shown = ("present" if mine else "absent", "present" if theirs else "absent")
            out.append(Difference(where.rstrip(".") or "answer", *shown))
            continue
        if "text" not in ignore and mine.text != theirs.text:
            out.append(Difference(f"{where}text", mine.text, theirs.text))
        if "tool_calls" not in ignore:
            out += _compare_calls(mine.tool_calls, theirs.tool_calls, where, ignore)
        if "finish_reason" not in ignore and mine.finish_reason != theirs.finish_reason:
            out.append(
                Difference(f"{where}finish_reason", mine.finish_reason, theirs.finish_reason)
            )
    if "text" not in ignore and streamed.streamed_text is not None:
        final = streamed.outputs.get(0, _Output()).text
        if streamed.streamed_text != final:
            out.append(Difference("text (as its deltas arrived)", streamed.streamed_text, final))
    if "usage" not in ignore:
        out += _compare_values("usage", streamed.usage, response.usage)
    return out


def _compare_calls(
    mine: list[_ToolCall], theirs: list[_ToolCall], where: str, ignore: frozenset[str]
) -> list[Difference]:
    out = []
    if len(mine) != len(theirs):
        out.append(Difference(f"{where}tool_calls (count)", len(mine), len(theirs)))
    for n, (a, b) in enumerate(zip(mine, theirs, strict=False)):
        at = f"{where}tool_calls[{n}]"
        if "tool_call_ids" not in ignore and a.id != b.id:
            out.append(Difference(f"{at}.id", a.id, b.id))
        if a.name != b.name:
            out.append(Difference(f"{at}.name", a.name, b.name))
        if _as_json(a.arguments) != _as_json(b.arguments):
            out.append(Difference(f"{at}.arguments", a.arguments, b.arguments))
    return out


def _compare_values(where: str, mine: Any, theirs: Any) -> list[Difference]:
    """Nested objects key by key (a key missing is a null); anything else as a whole."""
    if isinstance(mine, Mapping) and isinstance(theirs, Mapping):
        out = []
        for key in [*mine, *(k for k in theirs if k not in mine)]:
            out += _compare_values(f"{where}.{key}", mine.get(key), theirs.get(key))
        return out
    return [] if mine == theirs else [Difference(where, mine, theirs)]


def _as_json(arguments: Any) -> Any:
    """Arguments sent as JSON text, parsed: spacing and key order are not a difference."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:199] + "…"


def _payloads(collected: CollectedStream) -> Iterable[Any]:
    """Each event's JSON data, in order; data that is not JSON (``[DONE]``) is skipped."""
    for event in collected.events:
        try:
            yield json.loads(event.data)
        except ValueError:
            continue


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _concat(old: Any, new: Any) -> Any:
    """A string delta added to what came before, as the openai SDK's accumulator adds it."""
    if isinstance(new, str):
        return new if old is None else f"{old}{new}"
    return old


# -- OpenAI Chat -----------------------------------------------------------------------------


def _chat_stream(payloads: list[dict[str, Any]]) -> _Answer:
    answer = _Answer()
    calls: dict[int, dict[int, dict[str, Any]]] = {}
    for chunk in payloads:
        if chunk.get("usage") is not None:
            answer.usage = chunk["usage"]
        for choice in _list(chunk.get("choices")):
            choice = _dict(choice)
            index = choice.get("index", 0)
            output = answer.output(index)
            delta = _dict(choice.get("delta"))
            if isinstance(delta.get("content"), str):
                output.text += delta["content"]
            for call in _list(delta.get("tool_calls")):
                call = _dict(call)
                held = calls.setdefault(index, {}).setdefault(call.get("index", 0), {})
                function = _dict(call.get("function"))
                held["id"] = _concat(held.get("id"), call.get("id"))
                held["name"] = _concat(held.get("name"), function.get("name"))
                held["arguments"] = _concat(held.get("arguments"), function.get("arguments"))
            if choice.get("finish_reason") is not None:
                output.finish_reason = choice["finish_reason"]
    for index, by_position in calls.items():
        answer.output(index).tool_calls = [
            _ToolCall(call.get("id"), call.get("name"), call.get("arguments") or "")
            for _, call in sorted(by_position.items())
        ]
    return answer


def _chat_body(body: Mapping[str, Any]) -> _Answer:
    answer = _Answer(usage=body.get("usage"))
    for choice in _list(body.get("choices")):
        choice = _dict(choice)
        message = _dict(choice.get("message"))
        output = answer.output(choice.get("index", 0))
        output.text = message.get("content") or ""
        output.finish_reason = choice.get("finish_reason")
        output.tool_calls = [
            _ToolCall(
                call.get("id"),
                _dict(call.get("function")).get("name"),
                _dict(call.get("function")).get("arguments", ""),
            )
            for call in map(_dict, _list(message.get("tool_calls")))
        ]
    return answer


# -- OpenAI Responses ------------------------------------------------------------------------

_RESPONSES_TERMINALS = ("response.completed", "response.incomplete", "response.failed")


def _responses_stream(payloads: list[dict[str, Any]]) -> _Answer:
    final: Mapping[str, Any] = {}
    done_items: dict[int, Any] = {}
    deltas = ""
    for event in payloads:
        kind = event.get("type")
        if kind in _RESPONSES_TERMINALS:
            final = _dict(event.get("response"))
        elif kind == "response.output_item.done":
            done_items[event.get("output_index", len(done_items))] = event.get("item")
        elif kind == "response.output_text.delta" and isinstance(event.get("delta"), str):
            deltas += event["delta"]
    if final.get("output") is None:  # the SDK falls back on the finished items
        final = {**final, "output": [done_items[i] for i in sorted(done_items)]}
    answer = _responses_body(final)
    answer.streamed_text = deltas
    return answer


def _responses_body(body: Mapping[str, Any]) -> _Answer:
    answer = _Answer(usage=body.get("usage"))
    output = answer.output(0)
    for item in map(_dict, _list(body.get("output"))):
        if item.get("type") == "message":
            for part in map(_dict, _list(item.get("content"))):
                if part.get("type") == "output_text":
                    output.text += str(part.get("text", ""))
        elif item.get("type") == "function_call":
            output.tool_calls.append(
                _ToolCall(item.get("call_id"), item.get("name"), item.get("arguments", ""))
            )
    reason = _dict(body.get("incomplete_details")).get("reason")
    output.finish_reason = (
        body.get("status") if reason is None else f"{body.get('status')}: {reason}"
    )
    return answer


# -- Anthropic Messages ----------------------------------------------------------------------


def _anthropic_stream(payloads: list[dict[str, Any]]) -> _Answer:
    message: dict[str, Any] = {}
    blocks: list[dict[str, Any]] = []
    partial_json: dict[int, str] = {}
    for event in payloads:
        kind = event.get("type")
        if kind == "message_start":
            message = dict(_dict(event.get("message")))
            message["usage"] = dict(_dict(message.get("usage")))
        elif kind == "content_block_start":
            blocks.append(dict(_dict(event.get("content_block"))))  # appended, as the SDK does
        elif kind == "content_block_delta":
            index, delta = event.get("index", 0), _dict(event.get("delta"))
            if not isinstance(index, int) or not 0 <= index < len(blocks):
                continue
            block = blocks[index]
            if delta.get("type") == "text_delta" and block.get("type") == "text":
                block["text"] = str(block.get("text", "")) + str(delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                partial_json[index] = partial_json.get(index, "") + str(delta.get("partial_json"))
                try:
                    block["input"] = json.loads(partial_json[index])
                except ValueError:
                    block["input"] = partial_json[index]  # unparsable: kept as sent
        elif kind == "message_delta":
            delta = _dict(event.get("delta"))
            message["stop_reason"] = delta.get("stop_reason")
            message["stop_sequence"] = delta.get("stop_sequence")
            usage = message.setdefault("usage", {})
            for key, value in _dict(event.get("usage")).items():
                if value is not None or key == "output_tokens":
                    usage[key] = value
    message["content"] = blocks
    return _anthropic_body(message)


def _anthropic_body(body: Mapping[str, Any]) -> _Answer:
    answer = _Answer(usage=body.get("usage"))
    output = answer.output(0)
    for block in map(_dict, _list(body.get("content"))):
        if block.get("type") == "text":
            output.text += str(block.get("text", ""))
        elif block.get("type") == "tool_use":
            output.tool_calls.append(
                _ToolCall(block.get("id"), block.get("name"), block.get("input"))
            )
    output.finish_reason = body.get("stop_reason")
    if body.get("stop_sequence") is not None:
        output.finish_reason = f"{output.finish_reason}: {body['stop_sequence']!r}"
    return answer


# -- Gemini ----------------------------------------------------------------------------------


def _gemini_add(answer: _Answer, chunk: Mapping[str, Any]) -> None:
    if chunk.get("usageMetadata") is not None:
        answer.usage = chunk["usageMetadata"]
    for position, candidate in enumerate(map(_dict, _list(chunk.get("candidates")))):
        output = answer.output(candidate.get("index", position))
        for part in map(_dict, _list(_dict(candidate.get("content")).get("parts"))):
            if isinstance(part.get("text"), str) and not part.get("thought"):
                output.text += part["text"]
            call = part.get("functionCall")
            if isinstance(call, dict):
                output.tool_calls.append(
                    _ToolCall(call.get("id"), call.get("name"), call.get("args"))
                )
        if candidate.get("finishReason") is not None:
            output.finish_reason = candidate["finishReason"]


def _gemini_stream(payloads: list[dict[str, Any]]) -> _Answer:
    answer = _Answer()
    for chunk in payloads:
        _gemini_add(answer, chunk)
    return answer


def _gemini_body(body: Mapping[str, Any]) -> _Answer:
    answer = _Answer()
    _gemini_add(answer, body)
    return answer


#: Per protocol: assemble the stream, reduce the body, and what an output is called
#: (``None``: one output, named by its aspect alone).
_PROTOCOLS = {
    "openai_chat": (_chat_stream, _chat_body, "choices"),
    "openai_responses": (_responses_stream, _responses_body, None),
    "anthropic": (_anthropic_stream, _anthropic_body, None),
    "gemini": (_gemini_stream, _gemini_body, "candidates"),
}
