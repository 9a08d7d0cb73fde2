"""OpenAI Responses API streaming (``protocol="openai_responses"``).

Theory of operation
-------------------

Every event is a JSON object with a ``type`` and a ``sequence_number`` (reference §2). The
stream is a response lifecycle wrapped around output items, each wrapping content parts
(or reasoning-summary parts)::

    STREAM   := created queued? in_progress? BODY* TERMINAL [DONE]?
    BODY     := output_item.added[k] ITEMBODY output_item.done[k] | keepalive | response.*
    TERMINAL := completed | incomplete | failed | error failed? | error

The checker keeps one phase for the stream and a small record per open item; every
transition is in ``_check`` (phases) and ``_on_body`` (items and parts)::

    EXPECT_CREATED --response.created--> STREAMING --completed/incomplete--> ENDED
          (a resumed stream starts in STREAMING)  \\--response.failed--------> ENDED (error)
                                                   \\--error--> ERRORED --failed/[DONE]--> ENDED

``response.created`` comes once. ``sequence_number`` must count up by one from 0 (from
``starting_after + 1`` on a resumed stream), keepalives included; a skip ahead and a step
back are each reported once. An item is opened by ``output_item.added`` with the next
``output_index`` (an index already used is out of order) and closed by its
``output_item.done``; parts are opened and closed by ``content_part.added/done``
(``content_index``) and ``reasoning_summary_part.added/done`` (``summary_index``). Any
other event that names an ``output_index`` or ``item_id`` must point at an open item, with
that item's id, and text events at an open part whose text is not done yet. Deltas are
kept per part to compare with the ``.done`` text. A gateway's ``data: [DONE]`` after the
terminal is accepted once. Unknown ``response.*`` event types and ``keepalive`` are legal.
In-band errors (``error`` events, ``response.failed``'s ``response.error``) are checked
against the shape the openai-python SDK reads.

Payloads are parsed and shape-checked in one pass by pydantic-core against ``_Event``, a
strict TypedDict of the fields the rules read (unknown keys are ignored); which of those
fields an event type requires is in ``_REQUIRED``. A payload that fails that check is
reported (``schema_mismatch``) and then checked like any other on the fields that do have
the right type (``_salvage``): a non-conforming server is where the lifecycle rules matter.

Bounded state
-------------

Whatever a stream sends, a checker holds at most ``MAX_OPEN_ITEMS`` open items, each with
at most ``MAX_OPEN_PARTS`` open parts; items and parts past those bounds are counted, not
followed, and the events that name them are not checked. Deltas kept for the ``.done``
comparison count against the stream's kept-text budget (``Checker.keep_text``): a part
whose deltas do not fit is not compared. Ids longer than ``_MAX_ID_CHARS`` are kept as a
digest. Indices outside ``0 <= i < _MAX_INDEX`` are never used as keys. No finding message
quotes the wire: types and statuses appear only when they are documented tokens, ids as a
size and hash, numbers through ``_wire.number``, and lists of items are cut short.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from hashlib import blake2b
from itertools import islice
from typing import Any, NotRequired, cast

from pydantic import ConfigDict, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from streamguard import rules
from streamguard._wire import describe, number, token
from streamguard.protocols._base import LEGACY_LIFECYCLE_RULES, NO_FINDINGS, LegacyChecker
from streamguard.protocols._payload import parse_json, preview, validation_finding
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["MAX_OPEN_ITEMS", "MAX_OPEN_PARTS", "TERMINAL_TYPES", "OpenAIResponsesChecker"]

#: The lifecycle events that end a response, with the status each must carry.
TERMINAL_TYPES = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
_OPENING_TYPES = frozenset({"response.created", "response.queued", "response.in_progress"})
_OPENING_STATUSES = frozenset({"in_progress", "queued"})
_DONE_ITEM_STATUSES = frozenset({"completed", "incomplete", "failed"})
#: Every status the SDK types define, for a response or an output item: the only status
#: values a message quotes.
_STATUSES = frozenset(
    {
        "completed",
        "failed",
        "in_progress",
        "cancelled",
        "queued",
        "incomplete",
        "searching",
        "interpreting",
        "generating",
        "calling",
    }
)

#: Per text family: which part index it uses, and the field of its .done event that must
#: equal the joined deltas.
_TEXT_FAMILIES = {
    "response.output_text": ("content_index", "text"),
    "response.refusal": ("content_index", "refusal"),
    "response.reasoning_text": ("content_index", "text"),
    "response.reasoning_summary_text": ("summary_index", "text"),
    "response.function_call_arguments": (None, "arguments"),
    "response.custom_tool_call_input": (None, "input"),
}
#: Text event type -> (its part index field, the .done field, whether it is a delta): one
#: dict lookup per event instead of splitting the type.
_TEXT_EVENTS: dict[str, tuple[str | None, str, bool]] = {}
for _family, (_field, _final) in _TEXT_FAMILIES.items():
    _TEXT_EVENTS[f"{_family}.delta"] = (_field, _final, True)
    _TEXT_EVENTS[f"{_family}.done"] = (_field, _final, False)
#: Part event type -> (whether it is a content part rather than a summary part, whether it
#: opens the part).
_PART_EVENTS = {
    "response.content_part.added": (True, True),
    "response.content_part.done": (True, False),
    "response.reasoning_summary_part.added": (False, True),
    "response.reasoning_summary_part.done": (False, False),
}
_HOSTED_TOOL_EVENTS = {
    "response.file_search_call": ("in_progress", "searching", "completed"),
    "response.web_search_call": ("in_progress", "searching", "completed"),
    "response.code_interpreter_call": ("in_progress", "interpreting", "completed"),
    "response.code_interpreter_call_code": ("delta", "done"),
    "response.image_generation_call": ("in_progress", "generating", "partial_image", "completed"),
    "response.mcp_call": ("in_progress", "completed", "failed"),
    "response.mcp_call_arguments": ("delta", "done"),
    "response.mcp_list_tools": ("in_progress", "completed", "failed"),
    "response.shell_call_command": ("added", "delta", "done"),
    "response.shell_call_output_content": ("delta", "done"),
    "response.audio": ("delta", "done"),
    "response.audio.transcript": ("delta", "done"),
}
#: Every event type the SDK's ``ResponseStreamEvent`` union defines, and the observed
#: ``keepalive``: the only types a message quotes (any other is shown by size and hash).
_KNOWN_TYPES = frozenset(
    {
        *_OPENING_TYPES,
        *TERMINAL_TYPES,
        *_TEXT_EVENTS,
        *_PART_EVENTS,
        "response.output_item.added",
        "response.output_item.done",
        "response.output_text.annotation.added",
        *(f"{tool}.{step}" for tool, steps in _HOSTED_TOOL_EVENTS.items() for step in steps),
        "error",
        "keepalive",
    }
)

_ITEM_FIELDS = ("item_id", "output_index")
_REQUIRED: dict[str, tuple[str, ...]] = {
    **dict.fromkeys((*_OPENING_TYPES, *TERMINAL_TYPES), ("response",)),
    "response.output_item.added": ("output_index", "item"),
    "response.output_item.done": ("output_index", "item"),
    "response.content_part.added": (*_ITEM_FIELDS, "content_index", "part"),
    "response.content_part.done": (*_ITEM_FIELDS, "content_index", "part"),
    "response.reasoning_summary_part.added": (*_ITEM_FIELDS, "summary_index", "part"),
    "response.reasoning_summary_part.done": (*_ITEM_FIELDS, "summary_index", "part"),
}
for _family, (_field, _final) in _TEXT_FAMILIES.items():
    _part = (_field,) if _field else ()
    _REQUIRED[f"{_family}.delta"] = (*_ITEM_FIELDS, *_part, "delta")
    _REQUIRED[f"{_family}.done"] = (*_ITEM_FIELDS, *_part, _final)

#: Open output items followed at once. Real streams have one, a few with parallel tool
#: calls; past this, new items are counted but not followed.
MAX_OPEN_ITEMS = 32
#: Open parts (content and summary together) followed per item.
MAX_OPEN_PARTS = 32
#: Output and part indices at or past this (or negative) are never used as keys: a wire
#: integer can have a million digits.
_MAX_INDEX = 2**31
#: Ids up to this long are kept as they are (real ones are about 50 characters); longer
#: ones as a 16-byte digest, so an id costs bounded memory and still compares.
_MAX_ID_CHARS = 128
#: Items or parts a message lists before "and N more".
_SHOWN = 3

# Rules reported once per stream, as bits of ``_once``.
_ONCE_EVENT_TYPE_MISMATCH = 1
_ONCE_SEQUENCE_AHEAD = 2
_ONCE_SEQUENCE_BACK = 4
_ONCE_ITEM_OVERLAP = 8

_STRICT = ConfigDict(strict=True, cache_strings="keys")


class _Response(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    id: str
    status: str
    error: Any
    usage: Any
    incomplete_details: Any


class _Item(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    id: str
    type: str
    status: str


class _Event(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    type: str
    sequence_number: int
    response: NotRequired[_Response]
    output_index: NotRequired[int]
    content_index: NotRequired[int]
    summary_index: NotRequired[int]
    item_id: NotRequired[str]
    item: NotRequired[_Item]
    part: NotRequired[Any]
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


_EVENT = TypeAdapter(_Event)

#: ``_Event``'s scalar fields and their types, for reading a payload that failed the
#: strict check (``type(value) is`` matches strict mode: a bool is not an int).
_SCALAR_FIELDS: dict[str, type] = {
    "type": str,
    "sequence_number": int,
    "output_index": int,
    "content_index": int,
    "summary_index": int,
    "item_id": str,
    "text": str,
    "refusal": str,
    "arguments": str,
    "input": str,
}
_ANY_FIELDS = ("part", "delta", "code", "message", "param", "error")


class _Phase(Enum):
    EXPECT_CREATED = "expect_created"
    STREAMING = "streaming"
    ERRORED = "errored"  # an error event arrived: only response.failed or [DONE] may follow
    ENDED = "ended"  # the terminal arrived: only one gateway [DONE] may follow


class _Text:
    """One part's text (or one tool call's input) so far: its deltas, kept to compare with
    its ``.done`` while they fit in the stream's kept-text budget."""

    __slots__ = ("chars", "done", "final", "pieces")

    def __init__(self, compare: bool) -> None:
        #: The deltas so far; None once they will not be compared (not kept, not seen).
        self.pieces: list[str] | None = [] if compare else None
        #: Characters of ``pieces``, reserved in the stream's budget.
        self.chars = 0
        #: The ``.done`` field the deltas are compared with, set by the first text event.
        self.final: str | None = None
        #: Its ``.done`` arrived: a later delta is out of place.
        self.done = False


class _OpenItem:
    __slots__ = ("adopted", "contents", "id", "summaries", "text", "untracked_parts")

    def __init__(self, item_id: str | bytes | None, adopted: bool = False) -> None:
        self.id = item_id  # as ``_id_key`` keeps it; None when the item had none
        # Opened before a resumed stream's first event: its parts are taken on trust and
        # its text is not compared (the earlier deltas were never seen).
        self.adopted = adopted
        self.contents: dict[int, _Text] = {}  # open content parts by content_index
        self.summaries: dict[int, _Text] = {}  # open reasoning-summary parts by summary_index
        self.text: _Text | None = None  # a tool call's input, which has no part
        self.untracked_parts = 0  # open parts past MAX_OPEN_PARTS, counted, not followed


class OpenAIResponsesChecker(LegacyChecker):
    """Checks an OpenAI Responses API stream event by event (reference §2)."""

    name = "openai_responses"
    RAISES = LEGACY_LIFECYCLE_RULES | frozenset(
        {
            rules.DONE_TEXT_MISMATCH,
            rules.DUPLICATE_RESPONSE_CREATED,
            rules.EVENT_TYPE_MISMATCH,
            rules.INVALID_JSON,
            rules.ITEM_NOT_CLOSED,
            rules.ITEM_NOT_OPEN,
            rules.ITEM_OUT_OF_ORDER,
            rules.ITEM_OVERLAP,
            rules.ITEM_STATUS_UNEXPECTED,
            rules.MISSING_RESPONSE_CREATED,
            rules.RESPONSE_ID_CHANGED,
            rules.SCHEMA_MISMATCH,
            rules.SEQUENCE_GAP,
            rules.STATUS_MISMATCH,
        }
    )

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        starting_after = _starting_after(request, path)
        self._resumed = starting_after is not None
        self._phase = _Phase.EXPECT_CREATED if starting_after is None else _Phase.STREAMING
        self._next_sequence = 0 if starting_after is None else starting_after + 1
        self._created_index: int | None = None
        self._response_id: str | bytes | None = None
        self._items_added = 0  # the next output_index
        # Every item so far came at the next index, so every index below _items_added was
        # used: a message may say "already done" or "already used".
        self._indices_in_order = True
        self._open: dict[int, _OpenItem] = {}
        self._untracked_items = 0  # open items past MAX_OPEN_ITEMS, counted, not followed
        self._done_seen = False
        self._once = 0  # bits: rules reported once per stream
        self._event_malformed = False  # the current event failed the strict shape check

    # -- lifecycle -----------------------------------------------------------------------

    def is_terminal(self, event: Event) -> bool:
        return _type_of(event) in TERMINAL_TYPES

    def on_event(self, event: Event, index: int) -> Sequence[Finding]:
        if event.data.startswith("[DONE]"):
            return self._on_done(event, index)
        if self._phase is _Phase.ENDED:
            return self._after_end(event, index)
        return self.check_event(event, index)

    def _on_done(self, event: Event, index: int) -> Sequence[Finding]:
        """A gateway's [DONE]: fine once after the terminal (or after an error event)."""
        if self._phase is _Phase.ERRORED:
            self._phase = _Phase.ENDED
            self.terminal_index = index
            self._release()
        if self._phase is _Phase.ENDED and not self._done_seen:
            self._done_seen = True
            return NO_FINDINGS
        if self._phase is _Phase.ENDED:
            return (
                rules.DUPLICATE_TERMINAL.finding(
                    f"event {index} is a second [DONE]", index, event.offset
                ),
            )
        # Before any terminal: not an event this protocol defines; missing_terminal says it.
        return NO_FINDINGS

    def _after_end(self, event: Event, index: int) -> Sequence[Finding]:
        """After the terminal only lifecycle rules apply (the base class's, with messages
        that name the event by its documented type only)."""
        kind = _type_of(event)
        if kind in TERMINAL_TYPES:
            return (
                rules.DUPLICATE_TERMINAL.finding(
                    f"event {index} ({_kind(kind)}) repeats the terminal signal first sent as "
                    f"event {self.terminal_index}",
                    index,
                    event.offset,
                ),
            )
        return (
            rules.EVENT_AFTER_TERMINAL.finding(
                f"event {index} ({_kind(kind)}) follows the terminal signal sent as event "
                f"{self.terminal_index}",
                index,
                event.offset,
            ),
        )

    # -- one event ---------------------------------------------------------------------

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        try:
            payload = _EVENT.validate_json(event.data)
        except ValidationError as error:
            return self._check_malformed(error, event, index)
        self._event_malformed = False
        return self._check(payload, event, index, [])

    def _check_malformed(
        self, error: ValidationError, event: Event, index: int
    ) -> Sequence[Finding]:
        """Report a payload that failed the strict check, then check what it carries."""
        shape = validation_finding(error, event, index)
        payload = _salvage(event.data) if shape.rule == rules.SCHEMA_MISMATCH.name else None
        if payload is None:  # not JSON, not an object, or no string type: nothing to go on
            self._next_sequence += 1  # it presumably took its slot: no follow-on gap
            return [shape]
        self._event_malformed = True
        return self._check(payload, event, index, [shape])

    def _check(
        self, payload: _Event, event: Event, index: int, found: list[Finding]
    ) -> list[Finding]:
        kind = payload["type"]
        sequence = payload.get("sequence_number")
        if sequence is None:  # the wrong type: it presumably took its slot
            self._next_sequence += 1
        else:
            self._check_sequence(sequence, event, index, found)
        if not self._event_malformed:  # else schema_mismatch was reported for this event
            for field in _REQUIRED.get(kind, ()):
                if field not in payload:
                    found.append(
                        rules.SCHEMA_MISMATCH.finding(
                            f"event {index}: field {field}: required on {_kind(kind)} but missing",
                            index,
                            event.offset,
                        )
                    )
                    break
        name = event.event
        if name != "message" and name != kind and not self._once & _ONCE_EVENT_TYPE_MISMATCH:
            self._once |= _ONCE_EVENT_TYPE_MISMATCH
            found.append(
                rules.EVENT_TYPE_MISMATCH.finding(
                    f"event {index} is named {_kind(name)} but its type is {_kind(kind)}",
                    index,
                    event.offset,
                )
            )

        if self._phase is _Phase.EXPECT_CREATED:
            self._phase = _Phase.STREAMING
            if kind != "response.created":
                found.append(
                    rules.MISSING_RESPONSE_CREATED.finding(
                        f"event {index} is {_kind(kind)}; a stream starts with response.created",
                        index,
                        event.offset,
                    )
                )
        if self._phase is _Phase.ERRORED:
            if kind == "response.failed":
                self._on_terminal(payload, kind, event, index, found)
            else:
                found.append(
                    rules.EVENT_AFTER_TERMINAL.finding(
                        f"event {index} ({_kind(kind)}) follows the error event "
                        f"{self.error_index}; only response.failed may follow it",
                        index,
                        event.offset,
                    )
                )
            return found

        if kind == "error":
            self._on_error(payload, event, index, found)
        elif kind in TERMINAL_TYPES:
            self._on_terminal(payload, kind, event, index, found)
        elif kind in _OPENING_TYPES:
            self._on_opening(payload, kind, event, index, found)
        elif (
            "output_index" in payload
            or "item_id" in payload
            or kind == "response.output_item.done"  # without output_index: found by item.id
        ):
            self._on_body(payload, kind, event, index, found)
        return found

    # -- transitions -------------------------------------------------------------------

    def _check_sequence(
        self, sequence: int, event: Event, index: int, found: list[Finding]
    ) -> None:
        expected, self._next_sequence = self._next_sequence, sequence + 1
        if sequence == expected:
            return
        ahead = sequence > expected
        flag = _ONCE_SEQUENCE_AHEAD if ahead else _ONCE_SEQUENCE_BACK
        if self._once & flag:
            return
        self._once |= flag
        how = "skips ahead" if ahead else "repeats or goes back"
        found.append(
            rules.SEQUENCE_GAP.finding(
                f"event {index} has sequence_number {number(sequence)}, expected "
                f"{number(expected)}: the numbering {how} (reported once per stream in each "
                "direction)",
                index,
                event.offset,
            )
        )

    def _on_opening(
        self, payload: _Event, kind: str, event: Event, index: int, found: list[Finding]
    ) -> None:
        if kind == "response.created":
            if self._created_index is None:
                self._created_index = index
            else:
                found.append(
                    rules.DUPLICATE_RESPONSE_CREATED.finding(
                        f"event {index} is a second response.created (the first was event "
                        f"{self._created_index})",
                        index,
                        event.offset,
                    )
                )
        self._check_response(payload, kind, event, index, found)

    def _on_error(self, payload: _Event, event: Event, index: int, found: list[Finding]) -> None:
        self._phase = _Phase.ERRORED
        self.error_index = index
        self._release()  # only response.failed or [DONE] may follow: no item is checked
        problem = _error_event_problem(payload)
        if problem is not None and not self._event_malformed:
            found.append(
                rules.SCHEMA_MISMATCH.finding(
                    f"event {index}: field {problem}", index, event.offset
                )
            )

    def _on_terminal(
        self, payload: _Event, kind: str, event: Event, index: int, found: list[Finding]
    ) -> None:
        self._phase = _Phase.ENDED
        self.terminal_index = index
        if kind == "response.failed" and self.error_index is None:
            self.error_index = index
        self._check_response(payload, kind, event, index, found)
        still_open = len(self._open) + self._untracked_items
        if kind != "response.failed" and still_open:
            found.append(
                rules.ITEM_NOT_CLOSED.finding(
                    f"event {index} ({_kind(kind)}): {still_open} output item(s) were never "
                    f"done{_listing(sorted(self._open), still_open)}",
                    index,
                    event.offset,
                )
            )
        self._release()

    def _check_response(
        self, payload: _Event, kind: str, event: Event, index: int, found: list[Finding]
    ) -> None:
        response = payload.get("response")
        if response is None:  # missing or not an object: schema_mismatch said so
            return
        status = response.get("status")
        problem = None
        if kind in TERMINAL_TYPES:
            wanted = TERMINAL_TYPES[kind]
            if status != wanted:
                problem = f"response.status is {_status(status)}, expected {wanted!r}"
            elif kind == "response.completed" and response.get("usage") is None:
                problem = "response.usage is null or missing"
            elif kind == "response.incomplete" and not _reason(response):
                problem = "response.incomplete_details.reason is missing"
            elif kind == "response.failed" and not response.get("error"):
                problem = "response.error is null or missing"
        elif status not in _OPENING_STATUSES:
            problem = f"response.status is {_status(status)}, expected 'in_progress' or 'queued'"
        if problem is not None:
            found.append(
                rules.STATUS_MISMATCH.finding(
                    f"event {index} ({_kind(kind)}): {problem}", index, event.offset
                )
            )
        if kind == "response.failed" and not self._event_malformed:
            shape = _response_error_problem(response.get("error"))
            if shape is not None:
                found.append(
                    rules.SCHEMA_MISMATCH.finding(
                        f"event {index}: field {shape}", index, event.offset
                    )
                )
        response_id = response.get("id")
        if response_id is not None:
            key = _id_key(response_id)
            if self._response_id is None:
                self._response_id = key
            elif key != self._response_id:
                found.append(
                    rules.RESPONSE_ID_CHANGED.finding(
                        f"event {index} ({_kind(kind)}): response.id {describe(response_id)} "
                        "differs from the id of the earlier lifecycle events",
                        index,
                        event.offset,
                    )
                )

    def _on_body(
        self, payload: _Event, kind: str, event: Event, index: int, found: list[Finding]
    ) -> None:
        """An event inside the item structure: items, parts, deltas, hosted-tool progress."""
        output_index = payload.get("output_index")
        if kind == "response.output_item.added":
            if output_index is not None:  # without one the item cannot be placed
                item_fields = payload.get("item")
                self._item_added(output_index, item_fields or {}, event, index, found)
            return
        item_id = payload.get("item_id")
        final_item = None
        if kind == "response.output_item.done":
            final_item = payload.get("item")
            item_id = final_item.get("id") if final_item is not None else None
        if output_index is None and item_id is not None:  # only an item_id: look it up
            output_index = self._index_of(item_id)
        item = self._open.get(output_index) if output_index is not None else None
        if item is None:
            if self._resumed and (output_index or 0) >= self._items_added:
                if output_index is None:
                    output_index = self._items_added
                item = self._adopt(output_index, item_id)
                if item is None:  # past the bounds: taken on trust, not followed
                    return
            if item is None:
                if self._untracked_items:  # presumably an item past the bound: not followed
                    if kind == "response.output_item.done":
                        self._untracked_items -= 1
                else:
                    found.append(self._not_open(kind, output_index, item_id, event, index))
                return
        if item_id is not None and item.id is not None and _id_key(item_id) != item.id:
            found.append(
                rules.ITEM_NOT_OPEN.finding(
                    f"{_where(kind, index)}: item_id {describe(item_id)} is not the id of the "
                    f"item open at output_index {number(output_index)}",
                    index,
                    event.offset,
                )
            )
            # and go on as if it named the open item: one finding, not a cascade
        text_event = _TEXT_EVENTS.get(kind)
        if text_event is not None:
            self._on_text(payload, kind, text_event, item, event, index, found)
            return
        assert output_index is not None  # set above, or the item would not have been found
        if kind == "response.output_item.done":
            self._item_done(output_index, item, final_item or {}, kind, event, index, found)
            return
        part_event = _PART_EVENTS.get(kind)
        if part_event is not None:
            self._on_part(payload, kind, part_event, item, event, index, found)
        elif kind == "response.output_text.annotation.added":
            part = payload.get("content_index")
            if (
                part is not None
                and part not in item.contents
                and not item.adopted
                and not item.untracked_parts
            ):
                found.append(
                    rules.ITEM_NOT_OPEN.finding(
                        f"{_where(kind, index)}: content part {number(part)} is not open",
                        index,
                        event.offset,
                    )
                )

    def _not_open(
        self, kind: str, output_index: int | None, item_id: str | None, event: Event, index: int
    ) -> Finding:
        if output_index is None:
            what = "it names no open item"
            if item_id is not None:
                what = f"no open item has item_id {describe(item_id)}"
        else:
            if output_index >= self._items_added:
                state = "was never added"
            elif output_index >= 0 and self._indices_in_order:
                state = "is already done"
            else:
                state = "was never added, or is already done"
            what = f"the item at output_index {number(output_index)} {state}"
        return rules.ITEM_NOT_OPEN.finding(f"{_where(kind, index)}: {what}", index, event.offset)

    def _index_of(self, item_id: str) -> int | None:
        """The output_index of the open item with this id (at most MAX_OPEN_ITEMS to look
        through, and only for events that name no output_index)."""
        key = _id_key(item_id)
        for output_index, item in self._open.items():
            if item.id == key:
                return output_index
        return None

    def _adopt(self, output_index: int, item_id: str | None) -> _OpenItem | None:
        """A resumed stream met an item opened before its first event: take it as open."""
        if not 0 <= output_index < _MAX_INDEX or len(self._open) >= MAX_OPEN_ITEMS:
            return None
        self._items_added = output_index + 1
        key = None if item_id is None else _id_key(item_id)
        item = self._open[output_index] = _OpenItem(key, adopted=True)
        return item

    def _item_added(
        self,
        output_index: int,
        fields: _Item,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        where = _where("response.output_item.added", index)
        expected = self._items_added
        if output_index != expected:
            if output_index in self._open:
                how = "is already open (an index is used once)"
            elif 0 <= output_index < expected and self._indices_in_order:
                how = "was already used by an earlier item (an index is used once)"
            else:
                how = f"expected {number(expected)}"
            found.append(
                rules.ITEM_OUT_OF_ORDER.finding(
                    f"{where}: output_index {number(output_index)}, {how}", index, event.offset
                )
            )
        still_open = len(self._open) + self._untracked_items
        if still_open and not self._once & _ONCE_ITEM_OVERLAP:
            self._once |= _ONCE_ITEM_OVERLAP
            found.append(
                rules.ITEM_OVERLAP.finding(
                    f"{where}: item {number(output_index)} opens while {still_open} other "
                    f"item(s) are still open{_listing(sorted(self._open), still_open)}",
                    index,
                    event.offset,
                )
            )
        status = fields.get("status")
        if status is not None and status != "in_progress":
            found.append(
                rules.ITEM_STATUS_UNEXPECTED.finding(
                    f"{where}: item {number(output_index)} is added with status "
                    f"{_status(status)}, expected 'in_progress'",
                    index,
                    event.offset,
                )
            )
        if not 0 <= output_index < _MAX_INDEX:
            self._untracked_items += 1
            return
        if output_index > expected:
            self._indices_in_order = False
        self._items_added = max(expected, output_index + 1)
        replaced = self._open.pop(output_index, None)
        if replaced is not None:  # the index was reused while open: follow the new item
            self._drop_item(replaced)
        if len(self._open) >= MAX_OPEN_ITEMS:
            self._untracked_items += 1
            return
        item_id = fields.get("id")
        self._open[output_index] = _OpenItem(None if item_id is None else _id_key(item_id))

    def _item_done(
        self,
        output_index: int,
        item: _OpenItem,
        final: _Item,
        kind: str,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        del self._open[output_index]
        open_parts = len(item.contents) + len(item.summaries) + item.untracked_parts
        if open_parts:
            labels = [f"content part {n}" for n in sorted(item.contents)]
            labels += [f"summary part {n}" for n in sorted(item.summaries)]
            found.append(
                rules.ITEM_NOT_CLOSED.finding(
                    f"{_where(kind, index)}: item {number(output_index)} closes with "
                    f"{open_parts} part(s) still open{_listing(labels, open_parts)}",
                    index,
                    event.offset,
                )
            )
        status = final.get("status")
        if status is not None and status not in _DONE_ITEM_STATUSES:
            found.append(
                rules.ITEM_STATUS_UNEXPECTED.finding(
                    f"{_where(kind, index)}: item {number(output_index)} is done with status "
                    f"{_status(status)}, expected 'completed', 'incomplete' or 'failed'",
                    index,
                    event.offset,
                )
            )
        self._drop_item(item)

    def _on_part(
        self,
        payload: _Event,
        kind: str,
        part_event: tuple[bool, bool],
        item: _OpenItem,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        content, opens = part_event
        part = payload.get("content_index") if content else payload.get("summary_index")
        if part is None:  # missing: schema_mismatch said so, and no part can be named
            return
        parts = item.contents if content else item.summaries
        if opens:
            self._open_part(item, parts, part, compare=not item.adopted)
            return
        text = parts.pop(part, None)
        if text is not None:
            self._forget(text)
        elif item.untracked_parts:  # presumably a part past the bound
            item.untracked_parts -= 1
        elif not item.adopted:
            found.append(_part_not_open(kind, index, event, content, part))

    def _open_part(
        self, item: _OpenItem, parts: dict[int, _Text], part: int, compare: bool
    ) -> _Text | None:
        replaced = parts.pop(part, None)
        if replaced is not None:  # added again: its text starts over
            self._forget(replaced)
        elif (
            not 0 <= part < _MAX_INDEX or len(item.contents) + len(item.summaries) >= MAX_OPEN_PARTS
        ):
            item.untracked_parts += 1
            return None
        text = parts[part] = _Text(compare)
        return text

    def _on_text(
        self,
        payload: _Event,
        kind: str,
        text_event: tuple[str | None, str, bool],
        item: _OpenItem,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        field, final, is_delta = text_event
        part = None
        if field is None:  # a tool call's input: one text per item
            text = item.text
            if text is None:
                text = item.text = _Text(compare=not item.adopted)
        else:
            content = field == "content_index"
            part = payload.get("content_index") if content else payload.get("summary_index")
            if part is None:  # missing: schema_mismatch said so, and no part can be named
                return
            parts = item.contents if content else item.summaries
            found_text = parts.get(part)
            if found_text is None:
                if item.adopted:  # opened before a resumed stream's first event
                    found_text = self._open_part(item, parts, part, compare=False)
                elif not item.untracked_parts:
                    found.append(_part_not_open(kind, index, event, content, part))
                if found_text is None:
                    return
            text = found_text
        if text.final is None:
            text.final = final
        if is_delta:
            if text.done:
                label = "input" if part is None else f"{field} {number(part)}"
                found.append(
                    rules.ITEM_NOT_OPEN.finding(
                        f"{_where(kind, index)}: a delta follows the .done of its {label}",
                        index,
                        event.offset,
                    )
                )
                return
            pieces = text.pieces
            if pieces is not None:
                delta = payload.get("delta")
                if type(delta) is str and text.final == final:
                    size = len(delta)
                    if self.keep_text(size):
                        pieces.append(delta)
                        text.chars += size
                        return
                self._forget(text)  # not a string, another family's delta, or past the budget
            return
        text.done = True
        pieces = text.pieces
        done_text = payload.get(final)
        if (
            pieces  # deltas were seen and kept
            and type(done_text) is str
            and text.final == final
            and not _same_text(pieces, done_text)
        ):
            found.append(
                rules.DONE_TEXT_MISMATCH.finding(
                    f"{_where(kind, index)}: {final} ({preview(done_text)}) differs from "
                    f"its joined deltas ({text.chars} characters)",
                    index,
                    event.offset,
                )
            )
        self._forget(text)

    # -- kept state ----------------------------------------------------------------------

    def _forget(self, text: _Text) -> None:
        """Stop keeping a text's deltas and give their room back to the stream's budget."""
        self.free_text(text.chars)
        text.chars = 0
        text.pieces = None

    def _drop_item(self, item: _OpenItem) -> None:
        for text in item.contents.values():
            self._forget(text)
        for text in item.summaries.values():
            self._forget(text)
        if item.text is not None:
            self._forget(item.text)

    def _release(self) -> None:
        """The response ended: nothing more is checked, so keep nothing more."""
        for item in self._open.values():
            self._drop_item(item)
        self._open.clear()
        self._untracked_items = 0


# -- helpers -----------------------------------------------------------------------------


def _kind(value: object) -> str:
    """An event type (or event name) as a message may show it."""
    return "no type" if value is None else token(value, _KNOWN_TYPES)


def _status(value: object) -> str:
    # A status of the wrong type was dropped by _salvage (and reported as schema_mismatch).
    return "missing or not a string" if value is None else token(value, _STATUSES)


def _where(kind: str, index: int) -> str:
    return f"event {index} ({_kind(kind)})"


def _listing(labels: Iterable[object], total: int) -> str:
    """``: 0, 1, 2 and 5 more``: the first few of ``total`` things, then how many others
    (items past the tracking bound have no label, only a count); empty without labels."""
    shown = [label if isinstance(label, str) else number(label) for label in islice(labels, _SHOWN)]
    if not shown:
        return ""
    rest = total - len(shown)
    return ": " + ", ".join(shown) + (f" and {rest} more" if rest > 0 else "")


def _id_key(value: str) -> str | bytes:
    """An id as kept for comparisons: itself when short, else a digest of fixed size."""
    if len(value) <= _MAX_ID_CHARS:
        return value
    return blake2b(value.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _same_text(pieces: list[str], text: str) -> bool:
    """Whether the deltas joined equal ``text``, without building the joined copy."""
    position = 0
    for piece in pieces:
        if not text.startswith(piece, position):
            return False
        position += len(piece)
    return position == len(text)


def _type_of(event: Event) -> str | None:
    """The event's type, from its name when it has one, else from its JSON."""
    if event.event != "message":
        return event.event
    try:
        return _EVENT.validate_json(event.data)["type"]
    except ValidationError:
        payload = _salvage(event.data)
        return None if payload is None else payload["type"]


def _salvage(data: str) -> _Event | None:
    """The fields of a payload that failed the strict check that do have ``_Event``'s types
    (nested objects keep their well-typed fields); None without a string ``type``."""
    try:
        raw = parse_json(data)
    except ValueError:
        return None
    if not isinstance(raw, dict) or type(raw.get("type")) is not str:
        return None
    kept: dict[str, Any] = {}
    for field, kind in _SCALAR_FIELDS.items():
        value = raw.get(field)
        if type(value) is kind:
            kept[field] = value
    for field in _ANY_FIELDS:
        if field in raw:
            kept[field] = raw[field]
    response = raw.get("response")
    if isinstance(response, dict):
        kept["response"] = {
            **_strings(response, ("id", "status")),
            **{k: response[k] for k in ("error", "usage", "incomplete_details") if k in response},
        }
    item = raw.get("item")
    if isinstance(item, dict):
        kept["item"] = _strings(item, ("id", "type", "status"))
    return cast(_Event, kept)


def _strings(source: dict[str, Any], fields: tuple[str, ...]) -> dict[str, str]:
    return {field: source[field] for field in fields if type(source.get(field)) is str}


def _error_event_problem(payload: _Event) -> str | None:
    """Where an ``error`` event differs from what openai-python reads, as
    ``<field path>: <problem>``; None when it fits.

    Two shapes are real (reference §2.6): the documented flat one (``message``, ``code``,
    ``param`` on the event) and the observed nested one (an ``error`` object). The SDK
    raises with ``error.message`` when ``error`` is truthy, else builds a
    ``ResponseErrorEvent`` (``message: str``, ``code``/``param``: string or null).
    """
    nested = payload.get("error")
    if nested:
        if not isinstance(nested, dict):
            return "error: expected an object"
        return _fields_problem(nested, "error.", ("code", "param", "type"))
    return _fields_problem(cast(Mapping[str, Any], payload), "", ("code", "param"))


def _response_error_problem(error: object) -> str | None:
    """Where ``response.failed``'s ``response.error`` differs from the SDK's
    ``ResponseError`` (``message: str``, ``code``: a string; null is tolerated); a
    missing or null error is status_mismatch's."""
    if not error:
        return None
    if not isinstance(error, dict):
        return "response.error: expected an object"
    return _fields_problem(error, "response.error.", ("code",))


def _fields_problem(
    fields: Mapping[str, Any], prefix: str, optional_strings: tuple[str, ...]
) -> str | None:
    if type(fields.get("message")) is not str:
        problem = "missing" if "message" not in fields else "expected a string"
        return f"{prefix}message: {problem}"
    for field in optional_strings:
        value = fields.get(field)
        if value is not None and type(value) is not str:
            return f"{prefix}{field}: expected a string or null"
    return None


def _reason(response: _Response) -> object:
    details = response.get("incomplete_details")
    return details.get("reason") if isinstance(details, Mapping) else None


#: Digits of a ``starting_after`` read from the path: more than this is no sequence
#: number (and ``int()`` of a long digit string is slow or raises).
_MAX_SEQUENCE_DIGITS = 18


def _starting_after(request: Mapping[str, Any] | None, path: str | None) -> int | None:
    """The sequence number a resumed stream continues after, if the request says so."""
    value: object = request.get("starting_after") if request is not None else None
    if value is None and path and "starting_after=" in path:
        value = path.split("starting_after=", 1)[1].split("&", 1)[0]
    if (
        isinstance(value, str)
        and value.isascii()
        and value.isdigit()
        and len(value) <= _MAX_SEQUENCE_DIGITS
    ):
        value = int(value)
    return value if type(value) is int and value >= 0 else None


def _part_not_open(kind: str, index: int, event: Event, content: bool, part: int) -> Finding:
    """``item_not_open`` for an event naming a content or summary part that is not open."""
    label = "content part" if content else "summary part"
    return rules.ITEM_NOT_OPEN.finding(
        f"{_where(kind, index)}: {label} {number(part)} is not open", index, event.offset
    )
