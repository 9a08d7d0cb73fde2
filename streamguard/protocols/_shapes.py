"""The documented payload shapes pydantic-core checks chat chunks and Responses events against.

These TypedDicts declare only the fields a rule reads (unknown keys are ignored, so a
provider's additions never matter), each strict: a wrong type is a finding, not a coercion.

This module is never compiled. mypyc builds a TypedDict from ``typing.TypedDict``, which
pydantic refuses before Python 3.12, and cannot read a module global in a class body; and
the validators are built once at import, so compiling them would buy nothing. The checkers
that use these shapes are compiled and see them as plain dicts.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from pydantic import ConfigDict, TypeAdapter
from typing_extensions import TypedDict

__all__ = [
    "RESPONSES_EVENT",
    "ChatChoice",
    "ChatChunk",
    "ChatDelta",
    "ChatFunction",
    "ChatLogprobs",
    "ChatToolCallDelta",
    "ChatUsage",
    "ResponsesEvent",
    "ResponsesItem",
    "ResponsesOutputEntry",
    "ResponsesPart",
    "ResponsesResponse",
    "validate_chat_chunk",
]

_CHAT_CONFIG = ConfigDict(strict=True)
_RESPONSES_CONFIG = ConfigDict(strict=True, cache_strings="keys")


# -- Chat Completions chunks (openai-python types/chat/chat_completion_chunk.py) -------------


class ChatFunction(TypedDict, total=False):
    __pydantic_config__ = _CHAT_CONFIG  # type: ignore[misc]
    name: str | None
    arguments: str | None


class ChatToolCallDelta(TypedDict, total=False):
    __pydantic_config__ = _CHAT_CONFIG  # type: ignore[misc]
    index: Any  # checked by hand: its own rule, tool_call_index_invalid
    id: str | None
    type: str | None
    function: ChatFunction | None


class ChatDelta(TypedDict, total=False):
    __pydantic_config__ = _CHAT_CONFIG  # type: ignore[misc]
    role: Literal["developer", "system", "user", "assistant", "tool"] | None
    content: str | None
    refusal: str | None
    tool_calls: list[ChatToolCallDelta] | None
    function_call: ChatFunction | None


class ChatTopLogprob(TypedDict):
    __pydantic_config__ = _CHAT_CONFIG  # type: ignore[misc]
    token: str
    logprob: float
    bytes: NotRequired[list[int] | None]


class ChatTokenLogprob(ChatTopLogprob):
    top_logprobs: list[ChatTopLogprob]


class ChatLogprobs(TypedDict, total=False):
    __pydantic_config__ = _CHAT_CONFIG  # type: ignore[misc]
    content: list[ChatTokenLogprob] | None
    refusal: list[ChatTokenLogprob] | None


class ChatChoice(TypedDict):
    __pydantic_config__ = _CHAT_CONFIG  # type: ignore[misc]
    index: int
    delta: NotRequired[ChatDelta]  # absent on Azure async-filter annotation chunks
    finish_reason: NotRequired[str | None]
    logprobs: NotRequired[ChatLogprobs | None]


class ChatUsage(TypedDict):
    __pydantic_config__ = _CHAT_CONFIG  # type: ignore[misc]
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatChunk(TypedDict):
    __pydantic_config__ = _CHAT_CONFIG  # type: ignore[misc]
    id: str
    object: str  # a Literal, except on Azure's annotation chunk: checked by hand
    created: int
    model: str
    choices: NotRequired[list[ChatChoice] | None]  # null/absent: compat usage chunks only
    usage: NotRequired[ChatUsage | None]
    system_fingerprint: NotRequired[str | None]
    service_tier: NotRequired[str | None]
    obfuscation: NotRequired[str | None]
    # The SDK merges it chunk to chunk as an object (a string breaks its stream helper).
    moderation: NotRequired[dict[str, Any] | None]
    prompt_filter_results: NotRequired[Any]
    prompt_annotations: NotRequired[Any]
    error: NotRequired[Any]  # OpenRouter: a truthy error on an otherwise normal chunk


#: The full chunk shape check, run on the already-parsed chunk (no second parse) whenever
#: the checker's fast check does not vouch for it; it names the field path of the first
#: problem.
validate_chat_chunk = TypeAdapter(ChatChunk).validator.validate_python


# -- Responses events (openai-python types/responses/response_stream_event.py) --------------


class ResponsesOutputEntry(TypedDict):
    """An entry of a lifecycle event's ``response.output`` (the stream helper hashes its
    ``type`` into the entry's identity) or of an item's ``content`` (the helper reads each
    part's ``type`` when it parses a final response rebuilt from the items done)."""

    __pydantic_config__ = _RESPONSES_CONFIG  # type: ignore[misc]
    type: str


class ResponsesResponse(TypedDict, total=False):
    __pydantic_config__ = _RESPONSES_CONFIG  # type: ignore[misc]
    id: str
    status: str
    error: Any
    usage: Any
    incomplete_details: Any
    # Null means "no output yet" to the stream helper (it rebuilds it from the items done).
    output: list[ResponsesOutputEntry] | None


class ResponsesItem(TypedDict, total=False):
    __pydantic_config__ = _RESPONSES_CONFIG  # type: ignore[misc]
    id: str
    type: str
    status: str
    # The stream helper appends each added content part to a message's content; a
    # reasoning item's may be null (a message's null is checked by hand). Each entry is a
    # part, an object with a string type.
    content: list[ResponsesOutputEntry] | None


class ResponsesPart(TypedDict):
    """A content or summary part (``content_part.*``, ``reasoning_summary_part.*``): the
    stream helper copies it with ``to_dict()``, asserts its ``type`` and adds the text
    deltas to its ``text``; a refusal part carries ``refusal`` instead."""

    __pydantic_config__ = _RESPONSES_CONFIG  # type: ignore[misc]
    type: str
    text: NotRequired[str]
    refusal: NotRequired[str]


class ResponsesEvent(TypedDict):
    __pydantic_config__ = _RESPONSES_CONFIG  # type: ignore[misc]
    type: str
    sequence_number: int
    response: NotRequired[ResponsesResponse]
    output_index: NotRequired[int]
    content_index: NotRequired[int]
    summary_index: NotRequired[int]
    item_id: NotRequired[str]
    item: NotRequired[ResponsesItem]
    part: NotRequired[ResponsesPart]
    # Any here: a text delta must be a string (checked by hand, see openai_responses), an
    # unknown ``response.*`` event's delta may be anything.
    delta: NotRequired[Any]
    text: NotRequired[str]
    refusal: NotRequired[str]
    arguments: NotRequired[str]
    input: NotRequired[str]
    # An error event's fields, checked by hand (their types depend on the error's shape).
    code: NotRequired[Any]
    message: NotRequired[Any]
    param: NotRequired[Any]
    error: NotRequired[Any]


RESPONSES_EVENT = TypeAdapter(ResponsesEvent)
