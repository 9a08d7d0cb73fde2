"""Anthropic Messages streaming (``POST /v1/messages`` with ``"stream": true``).

Theory of operation
-------------------

Every event is named (``event: <name>``) and its JSON ``type`` equals the name. With pings
filtered out, a healthy stream is::

    message_start
    ( content_block_start[i]  content_block_delta[i]*  content_block_stop[i] )*   i = 0, 1, 2, ...
    message_delta+
    message_stop

or it ends early with ``event: error`` (outcome ``error_event``) wherever that arrives.

The checker keeps one ``_Phase`` and the blocks that are open, nothing else that grows::

    AWAITING_START --message_start--> IN_BLOCKS --message_delta--> DELTA_SENT
         |                                                              |
         |                                                     message_stop --> (terminal)
         +-- any other documented event: missing_message_start,
             then handled as if message_start had come

``message_stop`` is the terminal signal in every phase (the base class then reports
anything after it); ``error`` sets ``error_index`` in every phase. Pings and event types
the docs do not list change nothing ("your code should handle unknown event types
gracefully"), and neither do unknown block types, delta types or fields.

Why each rule exists, in the words of the official Python SDK (``anthropic``): it
dispatches on the SSE *name* and silently drops unnamed or unknown events
(``event_name_mismatch``); it raises on anything before ``message_start``; it indexes
``snapshot.content[event.index]``, so block indices must be 0, 1, 2, ... and refer to a
started block; it ignores a delta that does not fit its block, so the content is silently
lost (``delta_type_mismatch``). The open ``tool_use`` block that goes straight to
``message_delta`` at ``max_tokens`` is real (the SDK's own fixture) and only a warning.

An event that fails the shape check still counts: its ``schema_mismatch`` comes with the
lifecycle rules run on whatever fields it carries with the right type, so a non-conforming
server does not hide its ordering mistakes behind its shape mistakes.

JSON is parsed with ``pydantic_core.from_json`` and the shapes are checked by hand: the
common event, a text delta, costs one parse, two dict look-ups and a few type checks.

What a message may show
-----------------------

Finding messages reach default logs, so they never quote the stream: an event name, a
block or delta type and a stop reason appear only when they are one of the documented
tokens below, anything else as its size and a short hash (``streamguard._wire``); block
indices and token counts as digits when they are sane integers. Lists (open blocks) show
a few entries and a count. What the checker keeps per stream is bounded the same way: at
most ``_MAX_OPEN_BLOCKS`` open blocks, each with a documented type or none, and short
digests rather than names the stream chose. The one text it keeps, a tool block's
``partial_json`` fragments until its ``content_block_stop`` (``tool_input_invalid``),
counts against the stream's kept-text budget (``Checker.keep_text``): past it the block's
input is dropped and not checked, and a block's room is given back when it stops or is
forgotten.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Any

from streamguard import rules
from streamguard._wire import describe, number, token
from streamguard.protocols._base import LEGACY_LIFECYCLE_RULES, NO_FINDINGS, LegacyChecker
from streamguard.protocols._payload import parse_json, preview
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["STOP_REASONS", "AnthropicChecker"]

#: ``StopReason`` in the SDK (``types/stop_reason.py``), plus the beta ``compaction``.
STOP_REASONS = frozenset(
    {
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
        "compaction",
    }
)
#: Stop reasons that may cut a block off before its ``content_block_stop``.
_LIMIT_STOP_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})

#: For each documented delta type: the block types it may appear in, and the field it
#: must carry with that field's type.
_DELTA_RULES: dict[str, tuple[frozenset[str], str, type]] = {
    "text_delta": (frozenset({"text"}), "text", str),
    "citations_delta": (frozenset({"text"}), "citation", dict),
    "input_json_delta": (
        frozenset({"tool_use", "server_tool_use", "mcp_tool_use"}),
        "partial_json",
        str,
    ),
    "thinking_delta": (frozenset({"thinking"}), "thinking", str),
    "signature_delta": (frozenset({"thinking"}), "signature", str),
}
#: Block types that arrive complete in ``content_block_start`` and take no delta at all.
_NO_DELTA_BLOCKS = frozenset({"redacted_thinking", "container_upload", "fallback"})
#: Documented block types with deltas (the ``_NO_DELTA_BLOCKS`` and ``*_tool_result`` are
#: known too); a delta into any other block type is not judged.
_DELTA_BLOCKS = frozenset({"text", "thinking", "tool_use", "server_tool_use", "mcp_tool_use"})
#: Blocks whose ``input_json_delta`` fragments join into the tool's input object.
_TOOL_BLOCKS = _DELTA_RULES["input_json_delta"][0]
#: What the checker keeps of a ``*_tool_result`` block type it does not list by name: they
#: all take no delta, so one kind stands for them.
_ANY_TOOL_RESULT = "*_tool_result"
#: Fields ``content_block_start`` must carry, per documented block type.
_BLOCK_FIELDS: dict[str, tuple[tuple[str, type], ...]] = {
    "text": (("text", str),),
    "thinking": (("thinking", str),),
    "tool_use": (("id", str), ("name", str)),
    "server_tool_use": (("id", str), ("name", str)),
    "redacted_thinking": (("data", str),),
}

# The closed sets of tokens a finding message may quote (protocols.md §3.2); any other
# value from the wire is shown by ``_wire.describe``.
#: Documented event names, and ``message``, the SSE name of an event without ``event:``.
_EVENT_NAMES = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
        "message",
    }
)
#: Documented block types, beta ones included.
_BLOCK_TYPES = frozenset(
    {
        *_DELTA_BLOCKS,
        *_NO_DELTA_BLOCKS,
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "mcp_tool_result",
        "advisor_tool_result",
        "compaction",
    }
)
#: Documented delta types, the beta ``compaction_delta`` included.
_DELTA_TYPES = frozenset({*_DELTA_RULES, "compaction_delta"})

#: Beyond this many simultaneously open blocks (already a ``block_overlap``), the oldest
#: is forgotten, so a hostile stream cannot make the checker's memory grow.
_MAX_OPEN_BLOCKS = 64
#: Distinct unknown event names reported per stream.
_MAX_UNKNOWN_REPORTED = 8
#: Entries a message lists before it says "and N more".
_LISTED = 3


class _Phase(enum.Enum):
    AWAITING_START = "awaiting message_start"
    IN_BLOCKS = "content blocks"
    DELTA_SENT = "after message_delta"


class _Block:
    """An open content block: what kind it is, how to name it, whether it was signed, and
    for a tool block the ``partial_json`` fragments received so far.

    Only a documented type is kept (``kind``; None for any other): an undocumented one is
    a string the stream chose, as long as it likes, and no rule judges it. The fragments
    count against the stream's kept-text budget (``kept`` characters); ``input_json`` is
    None once the budget ran out, and the block's input is then not checked.
    """

    __slots__ = ("input_json", "kept", "kind", "label", "signed")

    def __init__(self, block_type: str | None) -> None:
        self.kind = _block_kind(block_type)
        self.label = "of unknown type" if block_type is None else token(block_type, _BLOCK_TYPES)
        self.signed = False
        self.input_json: list[str] | None = [] if self.kind in _TOOL_BLOCKS else None
        self.kept = 0


def _block_kind(block_type: str | None) -> str | None:
    if block_type is None:
        return None
    if block_type in _DELTA_BLOCKS or block_type in _NO_DELTA_BLOCKS:
        return block_type
    if block_type.endswith("_tool_result"):
        return _ANY_TOOL_RESULT
    return None


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _name(value: object) -> str:
    """An event name or JSON ``type`` as a message may show it."""
    return token(value, _EVENT_NAMES)


def _kept_reason(stop_reason: str) -> str:
    """A stop reason as the checker keeps it: itself when documented, else its digest (a
    digest is never a documented reason, so ``in`` tests on it stay right)."""
    return stop_reason if stop_reason in STOP_REASONS else describe(stop_reason)


def _shown_reason(kept: str | None) -> str:
    if kept is None:
        return "null"
    return repr(kept) if kept in STOP_REASONS else kept


def _listing(shown: Iterable[str], total: int) -> str:
    """``0, 1, 2 and 5 more``: a few entries, then a count, whatever ``total`` is."""
    text = ", ".join(islice(shown, _LISTED))
    return text if total <= _LISTED else f"{text} and {total - _LISTED} more"


Handler = Callable[["AnthropicChecker", dict[str, Any], Event, int], Sequence[Finding]]


class AnthropicChecker(LegacyChecker):
    """Checks an Anthropic Messages event stream; see the module docstring."""

    name = "anthropic"
    RAISES = LEGACY_LIFECYCLE_RULES | frozenset(
        {
            rules.BLOCK_AFTER_MESSAGE_DELTA,
            rules.BLOCK_INDEX_OUT_OF_ORDER,
            rules.BLOCK_NOT_STARTED,
            rules.BLOCK_NOT_STOPPED,
            rules.BLOCK_OPEN_AT_LIMIT,
            rules.BLOCK_OVERLAP,
            rules.DELTA_TYPE_MISMATCH,
            rules.DUPLICATE_MESSAGE_START,
            rules.EVENT_NAME_MISMATCH,
            rules.INVALID_JSON,
            rules.MISSING_MESSAGE_DELTA,
            rules.MISSING_MESSAGE_START,
            rules.PREPOPULATED_MESSAGE_START,
            rules.SCHEMA_MISMATCH,
            rules.SIGNATURE_NOT_LAST,
            rules.TOOL_INPUT_INVALID,
            rules.UNKNOWN_EVENT_TYPE,
            rules.UNKNOWN_STOP_REASON,
            rules.USAGE_DECREASED,
        }
    )
    has_terminal = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase = _Phase.AWAITING_START
        self._message_start_index: int | None = None
        self._next_block = 0
        self._open: dict[int, _Block] = {}
        #: The first non-null stop reason (from message_delta, or a prepopulated start),
        #: as ``_kept_reason`` keeps it.
        self._stop_reason: str | None = None
        #: The last cumulative ``output_tokens`` seen, to check it never goes down.
        self._output_tokens: int | None = None
        #: Digests of the unknown event names already reported.
        self._unknown_reported: set[str] = set()
        self._late_block_reported = False

    # -- lifecycle ------------------------------------------------------------------------

    def is_terminal(self, event: Event) -> bool:
        return event.event == "message_stop"

    # -- one event ------------------------------------------------------------------------

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        try:
            payload = parse_json(event.data)
        except ValueError as exc:
            return self._unparsable(event, index, str(exc))
        if type(payload) is not dict:
            if event.event == "error":
                self.error_index = index  # the SDK raises on it whatever its data
            return (
                rules.INVALID_JSON.finding(
                    f"event {index} ({_name(event.event)}): data is a JSON "
                    f"{_type_name(payload)}, not an object",
                    index,
                    event.offset,
                ),
            )
        kind = payload.get("type")
        if kind == event.event:  # the common case: a named event that agrees with its JSON
            handler = _HANDLERS.get(kind)
            if handler is None:
                return self._unknown_event(kind, event, index)
            if self._phase is _Phase.AWAITING_START and kind not in _MAY_PRECEDE_START:
                return (
                    *self._missing_start(kind, event, index),
                    *handler(self, payload, event, index),
                )
            return handler(self, payload, event, index)
        return self._disagreeing(payload, kind, event, index)

    def _disagreeing(
        self, payload: dict[str, Any], kind: object, event: Event, index: int
    ) -> Sequence[Finding]:
        """The event name and the JSON ``type`` differ: say so, then follow the JSON
        (or the name, for ``error``, on which the SDK raises whatever the JSON says)."""
        found: list[Finding] = []
        if kind is None:
            # The SDK fills a missing type from the name, but the docs promise both.
            found.append(self._schema(event, index, "the JSON has no 'type'"))
            kind = event.event
        elif not isinstance(kind, str):
            found.append(self._schema(event, index, f"'type' is a {_type_name(kind)}"))
            kind = event.event
        elif event.event == "message":
            found.append(
                rules.EVENT_NAME_MISMATCH.finding(
                    f"event {index} has no event: line but its JSON type is {_name(kind)}; "
                    "the SDK drops unnamed events",
                    index,
                    event.offset,
                )
            )
        else:
            found.append(
                rules.EVENT_NAME_MISMATCH.finding(
                    f"event {index} is named {_name(event.event)} but its JSON type is "
                    f"{_name(kind)}",
                    index,
                    event.offset,
                )
            )
            if event.event == "error":
                kind = "error"
        assert isinstance(kind, str)
        handler = _HANDLERS.get(kind)
        if handler is None:
            found.extend(self._unknown_event(kind, event, index))
            return found
        if self._phase is _Phase.AWAITING_START and kind not in _MAY_PRECEDE_START:
            found.extend(self._missing_start(kind, event, index))
        found.extend(handler(self, payload, event, index))
        return found

    # -- the transitions, one handler per documented event type ---------------------------

    def _on_message_start(
        self, payload: dict[str, Any], event: Event, index: int
    ) -> Sequence[Finding]:
        if self._message_start_index is not None:
            return (
                rules.DUPLICATE_MESSAGE_START.finding(
                    f"event {index} repeats message_start, first sent as event "
                    f"{self._message_start_index}",
                    index,
                    event.offset,
                ),
            )
        self._message_start_index = index
        if self._phase is _Phase.AWAITING_START:
            self._phase = _Phase.IN_BLOCKS
        message = payload.get("message")
        if type(message) is not dict:
            return (self._schema(event, index, f"message is {_type_name(message)}, not an object"),)
        found: list[Finding] = []
        problems = _problems(
            message,
            "message",
            (("id", str), ("role", str), ("model", str), ("content", list), ("usage", dict)),
        )
        usage = message.get("usage")
        if type(usage) is dict:
            problems += _problems(
                usage, "message.usage", (("input_tokens", int), ("output_tokens", int))
            )
            if type(usage.get("output_tokens")) is int:
                self._output_tokens = usage["output_tokens"]
        stop_reason = message.get("stop_reason")
        if stop_reason is not None and not isinstance(stop_reason, str):
            problems.append(f"message.stop_reason is a {_type_name(stop_reason)}")
            stop_reason = None
        if problems:
            found.append(self._schema(event, index, "; ".join(problems)))
        content = message.get("content")
        prepopulated = type(content) is list and len(content) > 0
        if prepopulated or stop_reason is not None:
            # Programmatic tool calling sends finished blocks (and a stop reason) here; the
            # blocks that follow, if any, continue the content array after them.
            blocks = len(content) if type(content) is list else 0
            self._next_block = blocks
            kept = None if stop_reason is None else _kept_reason(stop_reason)
            if kept is not None:
                self._stop_reason = kept
            found.append(
                rules.PREPOPULATED_MESSAGE_START.finding(
                    f"event {index} (message_start) carries {blocks} content block(s) and "
                    f"stop_reason {_shown_reason(kept)}; the docs promise [] and null",
                    index,
                    event.offset,
                )
            )
        return found

    def _on_block_start(
        self, payload: dict[str, Any], event: Event, index: int
    ) -> Sequence[Finding]:
        if self._phase is _Phase.DELTA_SENT:
            return self._after_message_delta("content_block_start", event, index)
        block_index = payload.get("index")
        block = payload.get("content_block")
        problems: list[str] = []
        if type(block_index) is not int:
            problems.append(f"index is {_type_name(block_index)}, expected an integer")
        block_type: str | None = None
        if type(block) is not dict:
            problems.append(f"content_block is {_type_name(block)}, expected an object")
        elif not isinstance(block.get("type"), str):
            problems.append(
                f"content_block.type is {_type_name(block.get('type'))}, expected a string"
            )
        else:
            block_type = block["type"]
            problems += _problems(block, "content_block", _BLOCK_FIELDS.get(block_type, ()))
        found: list[Finding] = []
        if problems:
            found.append(self._schema(event, index, "; ".join(problems)))
        if type(block_index) is not int:
            # Where the block sits cannot be told, so it is not tracked (its deltas and stop
            # will say so); that it overlaps an open block can.
            if self._open:
                found.append(self._overlap("a content block", event, index))
            return found
        expected = self._next_block
        if block_index != expected:
            why = "was already started" if block_index < expected else "skips ahead"
            found.append(
                rules.BLOCK_INDEX_OUT_OF_ORDER.finding(
                    f"event {index} starts content block {number(block_index)}, which {why}; "
                    f"the next block index is {expected}",
                    index,
                    event.offset,
                )
            )
        if self._open:
            found.append(self._overlap(f"content block {number(block_index)}", event, index))
            if len(self._open) >= _MAX_OPEN_BLOCKS:
                self._forget(self._open.pop(next(iter(self._open))))
        self._next_block = max(expected, block_index + 1)
        self._open[block_index] = _Block(block_type)
        return found

    def _on_block_delta(
        self, payload: dict[str, Any], event: Event, index: int
    ) -> Sequence[Finding]:
        if self._phase is _Phase.DELTA_SENT:
            return self._after_message_delta("content_block_delta", event, index)
        block_index = payload.get("index")
        delta = payload.get("delta")
        if type(block_index) is int and type(delta) is dict:
            block = self._open.get(block_index)
            if (
                block is not None
                and block.kind == "text"
                and delta.get("type") == "text_delta"
                and type(delta.get("text")) is str
            ):
                return NO_FINDINGS  # the common case, most of every stream
        problems: list[str] = []
        if type(block_index) is not int:
            problems.append(f"index is {_type_name(block_index)}, expected an integer")
        delta_type: str | None = None
        if type(delta) is not dict:
            problems.append(f"delta is {_type_name(delta)}, expected an object")
        elif not isinstance(delta.get("type"), str):
            problems.append(f"delta.type is {_type_name(delta.get('type'))}, expected a string")
        else:
            delta_type = delta["type"]
            delta_rule = _DELTA_RULES.get(delta_type)
            if delta_rule is not None:
                _, field, field_type = delta_rule
                if type(delta.get(field)) is not field_type:
                    problems.append(
                        f"delta.{field} is {_type_name(delta.get(field))}, expected "
                        f"{field_type.__name__} in a {delta_type}"
                    )
        found: list[Finding] = []
        if problems:
            found.append(self._schema(event, index, "; ".join(problems)))
        if type(block_index) is not int:
            return found  # which block it belongs to cannot be told
        block = self._open.get(block_index)
        if block is None:
            found.append(self._not_open(block_index, "a delta for", event, index))
            return found
        delta_rule = _DELTA_RULES.get(delta_type) if delta_type is not None else None
        if delta_rule is None:
            return found  # an undocumented delta type (or none): legal, not judged
        if block.kind is not None and block.kind not in delta_rule[0]:
            found.append(
                rules.DELTA_TYPE_MISMATCH.finding(
                    f"event {index} sends {delta_type} into content block "
                    f"{number(block_index)} of type {block.label}",
                    index,
                    event.offset,
                )
            )
        if block.signed:
            found.append(
                rules.SIGNATURE_NOT_LAST.finding(
                    f"event {index} sends {delta_type} into thinking block "
                    f"{number(block_index)} after its signature_delta",
                    index,
                    event.offset,
                )
            )
        if delta_type == "signature_delta" and block.kind == "thinking":
            block.signed = True
        elif delta_type == "input_json_delta" and type(delta) is dict:
            self._keep_input(block, delta.get("partial_json"))
        return found

    def _on_block_stop(
        self, payload: dict[str, Any], event: Event, index: int
    ) -> Sequence[Finding]:
        if self._phase is _Phase.DELTA_SENT:
            return self._after_message_delta("content_block_stop", event, index)
        block_index = payload.get("index")
        if type(block_index) is not int:
            return (
                self._schema(
                    event, index, f"index is {_type_name(block_index)}, expected an integer"
                ),
            )
        block = self._open.pop(block_index, None)
        if block is None:
            return (self._not_open(block_index, "content_block_stop for", event, index),)
        if block.input_json is not None:
            return self._check_input(block, block_index, event, index)
        return NO_FINDINGS

    def _on_message_delta(
        self, payload: dict[str, Any], event: Event, index: int
    ) -> Sequence[Finding]:
        found: list[Finding] = []
        delta = payload.get("delta")
        usage = payload.get("usage")
        problems = _problems(payload, "message_delta", (("delta", dict), ("usage", dict)))
        if type(usage) is dict:
            problems += _problems(usage, "usage", (("output_tokens", int),))
        stop_reason = delta.get("stop_reason") if type(delta) is dict else None
        if stop_reason is not None and not isinstance(stop_reason, str):
            problems.append(f"delta.stop_reason is a {_type_name(stop_reason)}")
            stop_reason = None
        if problems:
            found.append(self._schema(event, index, "; ".join(problems)))
        kept = None if stop_reason is None else _kept_reason(stop_reason)
        if kept is not None:
            if kept not in STOP_REASONS:
                found.append(
                    rules.UNKNOWN_STOP_REASON.finding(
                        f"event {index} (message_delta) has stop_reason {kept}, outside "
                        "the documented set",
                        index,
                        event.offset,
                    )
                )
            if self._stop_reason is None:
                self._stop_reason = kept
        if self._open:
            found.append(self._unstopped_blocks(kept, "message_delta", event, index))
            self._forget_open_blocks()
        output_tokens = usage.get("output_tokens") if type(usage) is dict else None
        if type(output_tokens) is int:
            if self._output_tokens is not None and output_tokens < self._output_tokens:
                found.append(
                    rules.USAGE_DECREASED.finding(
                        f"event {index} (message_delta) has usage.output_tokens "
                        f"{number(output_tokens)}, below the {number(self._output_tokens)} "
                        "sent before; the count is cumulative",
                        index,
                        event.offset,
                    )
                )
            self._output_tokens = output_tokens
        self._phase = _Phase.DELTA_SENT
        return found

    def _on_message_stop(
        self, payload: dict[str, Any], event: Event, index: int
    ) -> Sequence[Finding]:
        self.terminal_index = index
        found: list[Finding] = []
        if self._open:
            found.append(self._unstopped_blocks(None, "message_stop", event, index))
            self._forget_open_blocks()
        if self._stop_reason is None:
            found.append(
                rules.MISSING_MESSAGE_DELTA.finding(
                    f"event {index} (message_stop) ends the message, but no message_delta "
                    "carried a non-null stop_reason",
                    index,
                    event.offset,
                )
            )
        return found

    def _on_ping(self, payload: dict[str, Any], event: Event, index: int) -> Sequence[Finding]:
        return NO_FINDINGS

    def _on_error(self, payload: dict[str, Any], event: Event, index: int) -> Sequence[Finding]:
        # The documented shape is ErrorResponse: {"type": "error", "error": {"type": str,
        # "message": str}} (anthropic-sdk-python types/shared/error_response.py); the SDK
        # raises APIStatusError on the event either way, and code that reads
        # ``error.body["error"]["type"]`` to tell overload from a bad request breaks.
        self.error_index = index
        error = payload.get("error")
        if type(error) is not dict:
            return (self._schema(event, index, f"error is {_type_name(error)}, not an object"),)
        problems = _problems(error, "error", (("type", str), ("message", str)))
        if problems:
            return (self._schema(event, index, "; ".join(problems)),)
        return NO_FINDINGS

    # -- a tool block's input -------------------------------------------------------------

    def _keep_input(self, block: _Block, fragment: object) -> None:
        """Keep one ``partial_json`` fragment for the check at the block's stop, within
        the stream's kept-text budget; past it, drop the block's input and its check."""
        if type(fragment) is not str or block.input_json is None:
            return  # a wrong type is already a schema_mismatch
        if self.keep_text(len(fragment)):
            block.input_json.append(fragment)
            block.kept += len(fragment)
        else:
            self._forget(block)

    def _check_input(
        self, block: _Block, block_index: int, event: Event, index: int
    ) -> Sequence[Finding]:
        """A stopped tool block: its fragments must join into a JSON object ("" is {})."""
        assert block.input_json is not None
        text = "".join(block.input_json)
        self._forget(block)
        if not text:
            return NO_FINDINGS  # no input deltas at all: the input is the start's {}
        try:
            value = parse_json(text)
        except ValueError as exc:
            problem = f"not JSON ({exc})"
        else:
            if type(value) is dict:
                return NO_FINDINGS
            problem = f"a JSON {_type_name(value)}"
        return (
            rules.TOOL_INPUT_INVALID.finding(
                f"event {index} stops tool block {number(block_index)} ({block.label}), whose "
                f"input_json_delta fragments ({preview(text)}) do not join into a JSON "
                f"object: {problem}",
                index,
                event.offset,
            ),
        )

    def _forget(self, block: _Block) -> None:
        """Drop what a block kept and give its room back to the stream's budget."""
        if block.kept:
            self.free_text(block.kept)
        block.input_json = None
        block.kept = 0

    def _forget_open_blocks(self) -> None:
        for block in self._open.values():
            self._forget(block)
        self._open.clear()

    # -- findings shared by several handlers ----------------------------------------------

    def _unparsable(self, event: Event, index: int, error: str) -> Sequence[Finding]:
        if event.event == "ping":
            return NO_FINDINGS  # the SDK skips pings by name, unparsed
        if event.event == "error":
            self.error_index = index  # the SDK raises on it even when it is not JSON
        if event.data.startswith("[DONE]"):
            return (
                self._schema(
                    event,
                    index,
                    "data is the OpenAI sentinel [DONE], which has no place in this protocol "
                    "(message_stop ends the stream)",
                ),
            )
        # ``error`` is pydantic-core's description: a fixed text and a position.
        return (
            rules.INVALID_JSON.finding(
                f"event {index} ({_name(event.event)}): data is not JSON ({error}): "
                f"{preview(event.data)}",
                index,
                event.offset,
            ),
        )

    def _schema(self, event: Event, index: int, problem: str) -> Finding:
        return rules.SCHEMA_MISMATCH.finding(
            f"event {index} ({_name(event.event)}): {problem}", index, event.offset
        )

    def _missing_start(self, kind: str, event: Event, index: int) -> Sequence[Finding]:
        # Report once, then carry on as if message_start had come, so that one missing
        # event does not turn into a finding on every event after it.
        self._phase = _Phase.IN_BLOCKS
        return (
            rules.MISSING_MESSAGE_START.finding(
                f"event {index} ({_name(kind)}) arrived before any message_start",
                index,
                event.offset,
            ),
        )

    def _unknown_event(self, kind: str, event: Event, index: int) -> Sequence[Finding]:
        if len(self._unknown_reported) >= _MAX_UNKNOWN_REPORTED:
            return NO_FINDINGS
        # Kept and shown as a digest: the name is the stream's, of any length.
        shown = describe(kind)
        if shown in self._unknown_reported:
            return NO_FINDINGS
        self._unknown_reported.add(shown)
        return (
            rules.UNKNOWN_EVENT_TYPE.finding(
                f"event {index} has the undocumented type {shown} (reported once per stream)",
                index,
                event.offset,
            ),
        )

    def _after_message_delta(self, kind: str, event: Event, index: int) -> Sequence[Finding]:
        # Once per stream: every later block event is the same mistake.
        if self._late_block_reported:
            return NO_FINDINGS
        self._late_block_reported = True
        return (
            rules.BLOCK_AFTER_MESSAGE_DELTA.finding(
                f"event {index} ({kind}) comes after message_delta; content blocks come "
                "before it (reported once per stream)",
                index,
                event.offset,
            ),
        )

    def _not_open(self, block_index: int, what: str, event: Event, index: int) -> Finding:
        why = "was already stopped" if block_index < self._next_block else "was never started"
        return rules.BLOCK_NOT_STARTED.finding(
            f"event {index} is {what} content block {number(block_index)}, which {why}",
            index,
            event.offset,
        )

    def _overlap(self, what: str, event: Event, index: int) -> Finding:
        open_now = _listing((number(i) for i in self._open), len(self._open))
        return rules.BLOCK_OVERLAP.finding(
            f"event {index} starts {what} while block(s) {open_now} are still open",
            index,
            event.offset,
        )

    def _unstopped_blocks(
        self, stop_reason: str | None, kind: str, event: Event, index: int
    ) -> Finding:
        blocks = _listing(
            (f"{number(i)} ({block.label})" for i, block in self._open.items()), len(self._open)
        )
        reason = stop_reason or self._stop_reason
        if reason in _LIMIT_STOP_REASONS:
            return rules.BLOCK_OPEN_AT_LIMIT.finding(
                f"event {index} ({kind}, stop_reason {_shown_reason(reason)}) leaves content "
                f"block(s) {blocks} without content_block_stop",
                index,
                event.offset,
            )
        return rules.BLOCK_NOT_STOPPED.finding(
            f"event {index} ({kind}) arrives while content block(s) {blocks} are still open",
            index,
            event.offset,
        )


def _problems(obj: dict[str, Any], where: str, fields: Sequence[tuple[str, type]]) -> list[str]:
    """What is missing or of the wrong JSON type among ``fields`` of ``obj``."""
    problems = []
    for field, expected in fields:
        value = obj.get(field)
        if value is None:
            problems.append(f"{where}.{field} is missing or null")
        elif type(value) is not expected:
            problems.append(f"{where}.{field} is {_type_name(value)}, expected {expected.__name__}")
    return problems


#: Events allowed before ``message_start`` without a ``missing_message_start``.
_MAY_PRECEDE_START = frozenset({"message_start", "ping", "error"})

_HANDLERS: dict[object, Handler] = {
    "message_start": AnthropicChecker._on_message_start,
    "content_block_start": AnthropicChecker._on_block_start,
    "content_block_delta": AnthropicChecker._on_block_delta,
    "content_block_stop": AnthropicChecker._on_block_stop,
    "message_delta": AnthropicChecker._on_message_delta,
    "message_stop": AnthropicChecker._on_message_stop,
    "ping": AnthropicChecker._on_ping,
    "error": AnthropicChecker._on_error,
}
