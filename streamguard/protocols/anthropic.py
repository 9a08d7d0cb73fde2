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

Each event's JSON ``type`` names its kind in the lifecycle and the handler that checks its
payload (its route, ``ROUTES``, run by the engine): ``start`` is the first
``message_start`` and ``second_start`` any later one, ``block`` a ``content_block_*``
event, ``delta`` ``message_delta``, ``terminal`` ``message_stop``, ``error`` an ``error``,
``other`` a ping or an undocumented type. The
lifecycle is the table ``LIFECYCLE``, printed in ``docs/lifecycles.md`` (generated from it).

A missing ``message_start`` is reported once, at the first event that needed it, and the
stream is then checked as if it had come: a ``message_start`` after that is the first, not
a duplicate. ``message_stop`` is the terminal signal; ``error`` ends the stream whatever
its data (the SDK raises on it), even when it is not JSON or its JSON ``type`` differs.
Pings and event types the docs do not list change nothing ("your code should handle
unknown event types gracefully"), and neither do unknown block types, delta types or
fields. A content block event after ``message_delta`` is ``block_after_message_delta``
(once per stream) and its payload is not checked.

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
common event, a text delta, costs one parse, a few dict look-ups and type checks, and no
lifecycle step (the engine takes a step only when it does something).

What a message may show
-----------------------

Finding messages reach default logs, so they never quote the stream: an event name, a
block or delta type and a stop reason appear only when they are one of the documented
tokens below, anything else as its size and a short hash (``streamguard._wire``); block
indices and token counts as digits when they are sane integers. Lists (open blocks) show
a few entries and a count. What the checker keeps per stream is bounded the same way: at
most ``_MAX_OPEN_BLOCKS`` open blocks (``_entities.Entities``, owner of the rules ``_BLOCKS``
declares), each with a documented type or none, and short digests rather than names the
stream chose. The one text it keeps, a tool
block's ``partial_json`` fragments until its ``content_block_stop``
(``tool_input_invalid``), is a ``KeptText`` within the stream's kept-text budget: past it
the block's input is dropped and not checked, and a block's room is given back when it
stops or is forgotten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from streamguard import rules
from streamguard._wire import describe, number, token
from streamguard.protocols._entities import Entities, EntityKind
from streamguard.protocols.engine import (
    ANY,
    ARRAY,
    END,
    ERROR,
    INTEGER,
    OBJECT,
    OTHER,
    STAY,
    TERMINAL,
    UNCHANGED,
    Checker,
    EventFindings,
    Field,
    Holes,
    KeptText,
    Lifecycle,
    ProtocolSpec,
    Route,
    Signal,
    Step,
    Transcript,
    UnknownTypes,
    any_json,
    broken,
    event_name,
    go,
    json_object,
    may_name,
    object_problems,
    parse_json,
    preview,
    req,
    shape_problems,
    terminated_lifecycle,
    type_name,
)
from streamguard.sse import Event

__all__ = ["ANTHROPIC_EVENT_NAMES", "EVENT_NAMES", "SPEC", "STOP_REASONS", "AnthropicChecker"]

#: ``StopReason`` in the SDK (``types/stop_reason.py``), plus the beta ``compaction``.
STOP_REASONS: Final = frozenset(
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
_LIMIT_STOP_REASONS: Final = frozenset({"max_tokens", "model_context_window_exceeded"})

#: For each documented delta type: the block types it may appear in, and the field it
#: must carry with that field's type.
_DELTA_RULES: Final[dict[str, tuple[frozenset[str], tuple[Field, ...]]]] = {
    "text_delta": (frozenset({"text"}), (req("text"),)),
    "citations_delta": (frozenset({"text"}), (req("citation", OBJECT),)),
    "input_json_delta": (
        frozenset({"tool_use", "server_tool_use", "mcp_tool_use"}),
        (req("partial_json"),),
    ),
    "thinking_delta": (frozenset({"thinking"}), (req("thinking"),)),
    "signature_delta": (frozenset({"thinking"}), (req("signature"),)),
}
#: Block types that arrive complete in ``content_block_start`` and take no delta at all.
_NO_DELTA_BLOCKS: Final = frozenset({"redacted_thinking", "container_upload", "fallback"})
#: Documented block types with deltas (the ``_NO_DELTA_BLOCKS`` and ``*_tool_result`` are
#: known too); a delta into any other block type is not judged.
_DELTA_BLOCKS: Final = frozenset(
    {"text", "thinking", "tool_use", "server_tool_use", "mcp_tool_use"}
)
#: Blocks whose ``input_json_delta`` fragments join into the tool's input object.
_TOOL_BLOCKS: Final = _DELTA_RULES["input_json_delta"][0]
#: What the checker keeps of a ``*_tool_result`` block type it does not list by name: they
#: all take no delta, so one kind stands for them.
_ANY_TOOL_RESULT: Final = "*_tool_result"
#: Fields ``content_block_start`` must carry, per documented block type.
_BLOCK_FIELDS: Final[dict[str, tuple[Field, ...]]] = {
    "text": (req("text"),),
    "thinking": (req("thinking"),),
    "tool_use": (req("id"), req("name")),
    "server_tool_use": (req("id"), req("name")),
    "redacted_thinking": (req("data"),),
}
#: The fields of the payloads and objects the handlers check, beside the blocks'.
_MESSAGE_FIELDS: Final = (
    req("id"),
    req("role"),
    req("model"),
    req("content", ARRAY),
    req("usage", OBJECT),
)
_START_USAGE_FIELDS: Final = (req("input_tokens", INTEGER), req("output_tokens", INTEGER))
_MESSAGE_DELTA_FIELDS: Final = (req("delta", OBJECT), req("usage", OBJECT))
_DELTA_USAGE_FIELDS: Final = (req("output_tokens", INTEGER),)
#: The documented error event: ``{"type": "error", "error": {"type": str, "message": str}}``
#: (the SDK's ``ErrorResponse``).
_ERROR_FIELDS: Final = (req("type"), req("message"))

# The closed sets of tokens a finding message may quote (protocols.md §3.2), besides the
# event names (``event_name``); any other value from the wire is shown by ``_wire.describe``.
#: Documented block types, beta ones included.
_BLOCK_TYPES: Final = frozenset(
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

#: Beyond this many simultaneously open blocks (already a ``block_overlap``), the oldest
#: is forgotten, so a hostile stream cannot make the checker's memory grow.
_MAX_OPEN_BLOCKS: Final = 64
#: The content blocks' lifecycle rules, and how their messages name a block.
_BLOCKS: Final[EntityKind] = EntityKind(
    "content block",
    "index",
    "started",
    "stopped",
    not_open=rules.BLOCK_NOT_STARTED,
    not_closed=rules.BLOCK_NOT_STOPPED,
    out_of_order=rules.BLOCK_INDEX_OUT_OF_ORDER,
    overlap=rules.BLOCK_OVERLAP,
    open_at_limit=rules.BLOCK_OPEN_AT_LIMIT,
)
#: A text delta into an open text block, as ``_on_block_delta`` vouches for it.
_TEXT_DELTA: Final = Holes((("delta", "text"),))
#: Distinct unknown event names reported per stream.
_MAX_UNKNOWN_REPORTED: Final = 8

# -- the lifecycle -------------------------------------------------------------------------

_AWAITING: Final = "awaiting_start"
_IN_BLOCKS: Final = "in_blocks"
_DELTA_SENT: Final = "delta_sent"
_START: Final = "start"
_SECOND_START: Final = "second_start"
_BLOCK: Final = "block"
_DELTA: Final = "delta"


def _missing_start(then: str) -> Step:
    return broken(
        rules.MISSING_MESSAGE_START, "event {index} ({name}) arrived before any message_start", then
    )


_TERMINATED = terminated_lifecycle(terminal="message_stop")
((_ENDED,), (_ERRORED,)) = (_TERMINATED.ended, _TERMINATED.errored)
# ``{start}`` is the first message_start's index (``AnthropicChecker.message_fields``).
_DUPLICATE_START = broken(
    rules.DUPLICATE_MESSAGE_START,
    "event {index} repeats message_start, first sent as event {start}",
    checked=False,
)
#: The steps every phase before the end takes alike.
_ANYWHERE = {ERROR: go(_ERRORED), OTHER: STAY, END: _TERMINATED.table["streaming", END]}

_LIFECYCLE: Final = Lifecycle(
    phases={
        _AWAITING: "no message_start yet",
        _IN_BLOCKS: "message_start came (or was reported missing): content blocks open and close",
        _DELTA_SENT: "message_delta came: only message_delta and message_stop belong",
        **{phase: what for phase, what in _TERMINATED.phases.items() if phase != "streaming"},
    },
    kinds={
        _START: "the first message_start",
        _SECOND_START: "any later message_start",
        _BLOCK: "content_block_start, content_block_delta or content_block_stop",
        _DELTA: "message_delta",
    },
    initial=_AWAITING,
    table={
        **{
            (phase, kind): step
            for phase in (_AWAITING, _IN_BLOCKS, _DELTA_SENT)
            for kind, step in _ANYWHERE.items()
        },
        (_AWAITING, _START): go(_IN_BLOCKS),
        (_AWAITING, _DELTA): _missing_start(_DELTA_SENT),
        (_AWAITING, TERMINAL): _missing_start(_ENDED),
        # A content block (a second message_start cannot come before a first).
        (_AWAITING, ANY): _missing_start(_IN_BLOCKS),
        (_IN_BLOCKS, _START): STAY,
        (_IN_BLOCKS, _SECOND_START): _DUPLICATE_START,
        (_IN_BLOCKS, _BLOCK): STAY,
        (_IN_BLOCKS, _DELTA): go(_DELTA_SENT),
        (_IN_BLOCKS, TERMINAL): go(_ENDED),
        (_DELTA_SENT, _START): STAY,
        (_DELTA_SENT, _SECOND_START): _DUPLICATE_START,
        # block_after_message_delta is a payload rule: it is reported once per stream.
        (_DELTA_SENT, _BLOCK): STAY,
        (_DELTA_SENT, _DELTA): STAY,
        (_DELTA_SENT, TERMINAL): go(_ENDED),
        **{key: step for key, step in _TERMINATED.table.items() if key[0] != "streaming"},
    },
    ended=_TERMINATED.ended,
    errored=_TERMINATED.errored,
    sealed=_TERMINATED.sealed,
)


class _Block:
    """An open content block: what kind it is, how to name it, whether it was signed, and
    for a tool block the ``partial_json`` fragments received so far (``input``).

    Only a documented type is kept (``kind``; None for any other): an undocumented one is
    a string the stream chose, as long as it likes, and no rule judges it.
    """

    __slots__ = ("input", "kind", "label", "signed")

    def __init__(self, block_type: str | None) -> None:
        self.kind = _block_kind(block_type)
        self.label = "of unknown type" if block_type is None else token(block_type, _BLOCK_TYPES)
        self.signed = False
        self.input = KeptText() if self.kind in _TOOL_BLOCKS else None


def _block_kind(block_type: str | None) -> str | None:
    if block_type is None:
        return None
    if block_type in _DELTA_BLOCKS or block_type in _NO_DELTA_BLOCKS:
        return block_type
    if block_type.endswith("_tool_result"):
        return _ANY_TOOL_RESULT
    return None


def _forget(checker: Checker, block: _Block) -> None:
    """Drop what a block kept and give its room back to the stream's budget."""
    if block.input is not None:
        block.input.release(checker)


def _described(block_index: int, block: _Block) -> str:
    return f"{number(block_index)} ({block.label})"


def _kept_reason(stop_reason: str) -> str:
    """A stop reason as the checker keeps it: itself when documented, else its digest (a
    digest is never a documented reason, so ``in`` tests on it stay right)."""
    return stop_reason if stop_reason in STOP_REASONS else describe(stop_reason)


def _shown_reason(kept: str | None) -> str:
    if kept is None:
        return "null"
    return repr(kept) if kept in STOP_REASONS else kept


def _is_json(data: str) -> bool:
    try:
        parse_json(data)
    except ValueError:
        return False
    return True


#: The SSE event names only Anthropic Messages uses: auto-detection reads them as decisive.
ANTHROPIC_EVENT_NAMES = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    }
)
#: Every SSE event name the protocol documents.
EVENT_NAMES = ANTHROPIC_EVENT_NAMES | {"message", "error", "ping"}

#: What ``parse_object`` puts after ``event N`` for each documented event name (shown as
#: ``event_name`` shows a known name).
_WHERE: Final = {name: f" ({name!r})" for name in EVENT_NAMES}

_Payload = dict[str, Any]
Handler = Callable[["AnthropicChecker", _Payload, EventFindings], None]


class AnthropicChecker(Checker):
    """Checks an Anthropic Messages event stream; see the module docstring."""

    __slots__ = ("_blocks", "_output_tokens", "_start_index", "_stop_reason")

    name = "anthropic"
    REPEAT_READS_EVENT = False  # (its repeat_event reads the token and values only)
    LIFECYCLE = _LIFECYCLE
    JUDGES_END_UNSAMPLED = True
    END_HINTS = (b"message_stop", b"error", b"\\u")
    UNKNOWN_TYPES = UnknownTypes(
        " has the undocumented type {shown} (reported once per stream)",
        limit=_MAX_UNKNOWN_REPORTED,
    )
    UNKNOWN_TYPES = UnknownTypes(
        " has the undocumented type {shown} (reported once per stream)",
        limit=_MAX_UNKNOWN_REPORTED,
    )
    RAISES = frozenset(
        {
            rules.BLOCK_AFTER_MESSAGE_DELTA,
            rules.BLOCK_INDEX_OUT_OF_ORDER,
            rules.BLOCK_NOT_STARTED,
            rules.BLOCK_NOT_STOPPED,
            rules.BLOCK_OPEN_AT_LIMIT,
            rules.BLOCK_OVERLAP,
            rules.DELTA_TYPE_MISMATCH,
            rules.EVENT_NAME_MISMATCH,
            rules.INVALID_JSON,
            rules.MISSING_MESSAGE_DELTA,
            rules.PREPOPULATED_MESSAGE_START,
            rules.SCHEMA_MISMATCH,
            rules.SIGNATURE_NOT_LAST,
            rules.TOOL_INPUT_INVALID,
            rules.UNKNOWN_EVENT_TYPE,
            rules.UNKNOWN_STOP_REASON,
            rules.USAGE_DECREASED,
        }
    )

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        #: The first message_start's index, once one came.
        self._start_index: int | None = None
        self._blocks: Entities[_Block] = Entities(
            _BLOCKS, _MAX_OPEN_BLOCKS, _forget, _described, forget_oldest=True
        )
        #: The first non-null stop reason (from message_delta, or a prepopulated start),
        #: as ``_kept_reason`` keeps it.
        self._stop_reason: str | None = None
        #: The last cumulative ``output_tokens`` seen, to check it never goes down.
        self._output_tokens: int | None = None

    def is_terminal(self, event: Event) -> bool:
        return event.event == "message_stop"

    def end_kind(self, event: Event, index: int) -> str | None:
        # As ``check_event`` (and ``_disagreeing``, ``_unparsable``) reads the kind; after
        # the end nothing changes the outcome.
        if self.phase in _LIFECYCLE.sealed:
            return None
        name = event.event
        data = event.data
        if name not in _ENDING_NAMES and not may_name(data, *_ENDING_NAMES):
            return None
        payload = any_json(data)
        if type(payload) is not dict:
            return ERROR if name == "error" else None  # the SDK raises on it, whatever its data
        kind = payload.get("type")
        if kind != name:
            if not isinstance(kind, str):
                kind = name
            elif name == "error":
                kind = "error"
        route = AnthropicChecker.ROUTES.get(kind)
        return route.kind if route is not None and route.kind in (TERMINAL, ERROR) else None

    def message_fields(self) -> Mapping[str, object]:
        return {"start": self._start_index}  # duplicate_message_start names the first

    # -- one event ------------------------------------------------------------------------

    @classmethod
    def transcribe(cls, data: str, out: Transcript) -> bool:
        payload = json_object(data)
        delta = None if payload is None else payload.get("delta")
        if payload is None or not isinstance(delta, dict):
            return False
        kind = payload.get("type")
        if kind == "content_block_delta" and delta.get("type") == "text_delta":
            return out.add(0, delta.get("text"))
        if kind == "message_delta":
            out.finish(delta.get("stop_reason"))
        return False

    def classify(self, event: Event, found: EventFindings) -> Route | None:
        # An event is typed twice, by its SSE name and its JSON type: the two are compared,
        # and the one the SDK follows routes it (``_disagreeing``); data that is not an
        # object may still be an error or a ping (``_unparsable``). Two kinds depend on the
        # stream so far: a message_start after the first is a second start, and a content
        # block event after message_delta a late block.
        name = event.event
        where = _WHERE.get(name) or f" ({event_name(name)})"
        payload = self.parse_object(event, found.index, found.items, where)
        if payload is None:
            self._unparsable(found)
            return None
        found.payload = payload
        kind = payload.get("type")
        if kind != name:
            kind = self._disagreeing(kind, found)
        found.type = kind
        found.name = event_name(kind)
        route = self.ROUTES.get(kind)
        if route is None:
            return self.UNKNOWN_TYPES.route
        if route.kind == _START and self._start_index is not None:
            return _SECOND_START_ROUTE
        if route.kind == _BLOCK and self.phase == _DELTA_SENT:
            return _LATE_BLOCK
        return route

    def _unparsable(self, found: EventFindings) -> None:
        """Data that is not a JSON object, ``found`` holding its ``invalid_json``."""
        # Parsed again to tell "not JSON" from "not an object": rare, and only for a ping.
        event = found.event
        if event.event == "ping" and not _is_json(event.data):
            found.items.clear()  # the SDK skips pings by name, unparsed
            return
        if event.data.startswith("[DONE]"):
            found.items.clear()
            problem = "data is the OpenAI sentinel [DONE], which has no place in this protocol"
            self._schema(found, problem + " (message_stop ends the stream)")
        if event.event == "error":  # the SDK raises on it whatever its data
            found.step(ERROR, "error")

    def _disagreeing(self, kind: object, found: EventFindings) -> str:
        """The event name and the JSON ``type`` differ: say so; the kind to follow is the
        JSON's (or the name's, for ``error``, on which the SDK raises whatever the JSON
        says)."""
        event = found.event
        if kind is None:
            # The SDK fills a missing type from the name, but the docs promise both.
            self._schema(found, "the JSON has no 'type'")
            return event.event
        if not isinstance(kind, str):
            self._schema(found, f"'type' is a {type_name(kind)}")
            return event.event
        if event.event == "message":
            detail = f" has no event: line but its JSON type is {event_name(kind)}; the SDK "
            detail += "drops unnamed events"
        else:
            detail = f" is named {event_name(event.event)} but its JSON type is {event_name(kind)}"
        found.add(rules.EVENT_NAME_MISMATCH, detail)
        return "error" if event.event == "error" else kind

    # -- the payload handlers, one per documented event type ------------------------------

    def _on_message_start(self, payload: _Payload, found: EventFindings) -> None:
        self._start_index = found.index
        message = payload.get("message")
        if type(message) is not dict:
            self._schema(found, f"message is {type_name(message)}, not an object")
            return
        problems = shape_problems(message, _MESSAGE_FIELDS, "message")
        usage = message.get("usage")
        if type(usage) is dict:
            problems += shape_problems(usage, _START_USAGE_FIELDS, "message.usage")
            if type(usage.get("output_tokens")) is int:
                self._output_tokens = usage["output_tokens"]
        stop_reason = message.get("stop_reason")
        if stop_reason is not None and not isinstance(stop_reason, str):
            problems.append(f"message.stop_reason is a {type_name(stop_reason)}")
            stop_reason = None
        self._schema(found, "; ".join(problems))
        content = message.get("content")
        if (type(content) is list and len(content) > 0) or stop_reason is not None:
            # Programmatic tool calling sends finished blocks (and a stop reason) here; the
            # blocks that follow, if any, continue the content array after them.
            blocks = len(content) if type(content) is list else 0
            self._blocks.opened = blocks
            kept = None if stop_reason is None else _kept_reason(stop_reason)
            if kept is not None:
                self._stop_reason = kept
            detail = f" (message_start) carries {blocks} content block(s) and stop_reason "
            detail += f"{_shown_reason(kept)}; the docs promise [] and null"
            found.add(rules.PREPOPULATED_MESSAGE_START, detail)

    def _on_block_start(self, payload: _Payload, found: EventFindings) -> None:
        block_index = payload.get("index")
        block = payload.get("content_block")
        problems: list[str] = []
        if type(block_index) is not int:
            problems.append(f"index is {type_name(block_index)}, expected an integer")
        block_type: str | None = None
        if type(block) is not dict:
            problems.append(f"content_block is {type_name(block)}, expected an object")
        elif not isinstance(block.get("type"), str):
            problems.append(
                f"content_block.type is {type_name(block.get('type'))}, expected a string"
            )
        else:
            block_type = block["type"]
            problems += shape_problems(block, _BLOCK_FIELDS.get(block_type, ()), "content_block")
        self._schema(found, "; ".join(problems))
        # Where a block without an integer index sits cannot be told, so it is not tracked
        # (its deltas and stop will say so); that it overlaps an open block can.
        index = block_index if type(block_index) is int else None
        self._blocks.check_opening(found, " (content_block_start)", index)
        if index is not None:
            self._blocks.keep(self, index, _Block(block_type))

    def _on_block_delta(self, payload: _Payload, found: EventFindings) -> None:
        block_index = payload.get("index")
        delta = payload.get("delta")
        if type(block_index) is int and type(delta) is dict:
            block = self._blocks.open.get(block_index)
            if (
                block is not None
                and block.kind == "text"
                and delta.get("type") == "text_delta"
                and type(delta.get("text")) is str
            ):
                # The common case, most of every stream: only the text differs next time.
                self.repeatable(_TEXT_DELTA)
                return
        problems: list[str] = []
        if type(block_index) is not int:
            problems.append(f"index is {type_name(block_index)}, expected an integer")
        delta_type: str | None = None
        if type(delta) is not dict:
            problems.append(f"delta is {type_name(delta)}, expected an object")
        elif not isinstance(delta.get("type"), str):
            problems.append(f"delta.type is {type_name(delta.get('type'))}, expected a string")
        else:
            delta_type = delta["type"]
            delta_rule = _DELTA_RULES.get(delta_type)
            if delta_rule is not None:
                wrong = shape_problems(delta, delta_rule[1], "delta")
                problems += [f"{problem} in a {delta_type}" for problem in wrong]
        self._schema(found, "; ".join(problems))
        if type(block_index) is not int:
            return  # which block it belongs to cannot be told
        block = self._blocks.open.get(block_index)
        if block is None:
            self._blocks.not_open(found, " (content_block_delta)", block_index)
            return
        delta_rule = _DELTA_RULES.get(delta_type) if delta_type is not None else None
        if delta_rule is None:
            return  # an undocumented delta type (or none): legal, not judged
        where = f" sends {delta_type} into"
        if block.kind is not None and block.kind not in delta_rule[0]:
            detail = f"{where} content block {number(block_index)} of type {block.label}"
            found.add(rules.DELTA_TYPE_MISMATCH, detail)
        if block.signed:
            detail = f"{where} thinking block {number(block_index)} after its signature_delta"
            found.add(rules.SIGNATURE_NOT_LAST, detail)
        if delta_type == "signature_delta" and block.kind == "thinking":
            block.signed = True
        elif delta_type == "input_json_delta" and type(delta) is dict:
            fragment = delta.get("partial_json")
            # Kept for the check at the block's stop; a wrong type is a schema_mismatch.
            if block.input is not None and type(fragment) is str:
                block.input.add(self, fragment)

    def _on_block_stop(self, payload: _Payload, found: EventFindings) -> None:
        block_index = payload.get("index")
        if type(block_index) is not int:
            problem = f"index is {type_name(block_index)}, expected an integer"
            self._schema(found, problem)
            return
        block = self._blocks.close(block_index)
        if block is None:
            self._blocks.not_open(found, " (content_block_stop)", block_index)
        elif block.input is not None:
            # A tool block: its fragments must join into a JSON object ("" is {}).
            text = block.input.text()
            block.input.release(self)
            if text:  # None: past the budget, not checked; "": no deltas, the start's {}
                self._check_input(found, text, block, block_index)

    def _on_message_delta(self, payload: _Payload, found: EventFindings) -> None:
        delta = payload.get("delta")
        usage = payload.get("usage")
        problems = shape_problems(payload, _MESSAGE_DELTA_FIELDS)
        if type(usage) is dict:
            problems += shape_problems(usage, _DELTA_USAGE_FIELDS, "usage")
        stop_reason = delta.get("stop_reason") if type(delta) is dict else None
        if stop_reason is not None and not isinstance(stop_reason, str):
            problems.append(f"delta.stop_reason is a {type_name(stop_reason)}")
            stop_reason = None
        self._schema(found, "; ".join(problems))
        kept = None if stop_reason is None else _kept_reason(stop_reason)
        if kept is not None:
            if kept not in STOP_REASONS:
                detail = f" (message_delta) has stop_reason {kept}, outside the documented set"
                found.add(rules.UNKNOWN_STOP_REASON, detail)
            if self._stop_reason is None:
                self._stop_reason = kept
        self._unstopped_blocks(found, kept, "message_delta")
        output_tokens = usage.get("output_tokens") if type(usage) is dict else None
        if type(output_tokens) is int:
            last = self._output_tokens
            if last is not None and output_tokens < last:
                detail = f" (message_delta) has usage.output_tokens {number(output_tokens)}, "
                detail += f"below the {number(last)} sent before; the count is cumulative"
                found.add(rules.USAGE_DECREASED, detail)
            self._output_tokens = output_tokens

    def _on_message_stop(self, payload: _Payload, found: EventFindings) -> None:
        self._unstopped_blocks(found, None, "message_stop")
        if self._stop_reason is None:
            detail = " (message_stop) ends the message, but no message_delta carried a "
            detail += "non-null stop_reason"
            found.add(rules.MISSING_MESSAGE_DELTA, detail)

    def _on_ping(self, payload: _Payload, found: EventFindings) -> None:
        # A keepalive changes nothing: vouched for, the text deltas' skeleton survives it
        # (a frame checked in full and not vouched for forgets every skeleton).
        self.repeatable(UNCHANGED)

    def _on_error(self, payload: _Payload, found: EventFindings) -> None:
        # The documented shape is ErrorResponse: {"type": "error", "error": {"type": str,
        # "message": str}} (anthropic-sdk-python types/shared/error_response.py); the SDK
        # raises APIStatusError on the event either way, and code that reads
        # ``error.body["error"]["type"]`` to tell overload from a bad request breaks.
        problems = object_problems(payload.get("error"), _ERROR_FIELDS, "error")
        self._schema(found, "; ".join(problems))

    def _late_block(self, payload: _Payload, found: EventFindings) -> None:
        detail = f" ({found.name}) comes after message_delta; content blocks come before it"
        found.add(rules.BLOCK_AFTER_MESSAGE_DELTA, detail)

    # -- a tool block's input -------------------------------------------------------------

    def _check_input(
        self, found: EventFindings, text: str, block: _Block, block_index: int
    ) -> None:
        try:
            value = parse_json(text)
        except ValueError as exc:
            problem = f"not JSON ({exc})"
        else:
            if type(value) is dict:
                return
            problem = f"a JSON {type_name(value)}"
        detail = f" stops tool block {number(block_index)} ({block.label}), whose input_json_delta "
        detail += f"fragments ({preview(text)}) do not join into a JSON object: {problem}"
        found.add(rules.TOOL_INPUT_INVALID, detail)

    # -- findings shared by several handlers ----------------------------------------------

    def _schema(self, found: EventFindings, problem: str) -> None:
        """A ``schema_mismatch`` for ``problem``, if there is one."""
        if problem:
            detail = f" ({event_name(found.event.event)}): {problem}"
            found.add(rules.SCHEMA_MISMATCH, detail)

    def _unstopped_blocks(self, found: EventFindings, stop_reason: str | None, kind: str) -> None:
        """Blocks still open at ``message_delta`` or ``message_stop``: say so, forget them."""
        reason = stop_reason or self._stop_reason
        cut_off = ""
        if reason in _LIMIT_STOP_REASONS:
            cut_off = f"stop_reason {_shown_reason(reason)}"
        self._blocks.check_closed(found, f" ({kind})", cut_off)


_C = AnthropicChecker
#: Each documented event type: its kind in the lifecycle, and the handler of its payload
#: (``AnthropicChecker.classify`` reads a message_start after the first, and a content
#: block event after message_delta, as the two routes below).
_C.ROUTES = {
    "message_start": Route(_START, _C._on_message_start),
    "content_block_start": Route(_BLOCK, _C._on_block_start),
    "content_block_delta": Route(_BLOCK, _C._on_block_delta),
    "content_block_stop": Route(_BLOCK, _C._on_block_stop),
    "message_delta": Route(_DELTA, _C._on_message_delta),
    "message_stop": Route(TERMINAL, _C._on_message_stop),
    "ping": Route(OTHER, _C._on_ping),
    "error": Route(ERROR, _C._on_error),
}
_SECOND_START_ROUTE: Final = Route(_SECOND_START, _C._on_message_start)
#: A content block event after message_delta: reported, its payload not checked.
_LATE_BLOCK: Final = Route(_BLOCK, _C._late_block)
#: The event types that end a stream (``AnthropicChecker.end_kind`` parses only these).
_ENDING_NAMES: Final = ("message_stop", "error")


# -- the protocol's declaration ------------------------------------------------------------


def _names_only_anthropic_uses(event: Event, payload: object) -> bool:
    return event.event in ANTHROPIC_EVENT_NAMES


def _is_anthropic_payload(event: Event, payload: object) -> bool:
    """``message_start``, or Anthropic's error event (an overloaded error may come before
    ``message_start``): its ``error`` is an object, where the Responses error event carries
    its code and message at the top level."""
    if type(payload) is not dict:
        return False
    kind = payload.get("type")
    return kind == "message_start" or (kind == "error" and type(payload.get("error")) is dict)


SPEC: ProtocolSpec = ProtocolSpec(
    name=AnthropicChecker.name,
    checker=AnthropicChecker,
    summary="Anthropic Messages streaming (`/v1/messages`), ending in `message_stop`",
    paths=(Signal(40, lambda path: path.endswith("/v1/messages")),),
    events=(Signal(10, _names_only_anthropic_uses), Signal(50, _is_anthropic_payload)),
    event_names=EVENT_NAMES,
)
