"""OpenAI Responses API streaming (``protocol="openai_responses"``).

Theory of operation
-------------------

Every event is a JSON object with a ``type`` and a ``sequence_number`` (reference §2). The
stream is a response lifecycle wrapped around output items, each wrapping content parts
(or reasoning-summary parts)::

    STREAM   := created queued? in_progress? BODY* TERMINAL [DONE]?
    BODY     := output_item.added[k] ITEMBODY output_item.done[k] | keepalive | response.*
    TERMINAL := completed | incomplete | failed | error failed? | error

The lifecycle is the table ``LIFECYCLE``, printed in ``docs/lifecycles.md``. Its kinds
are ``created`` (``response.created``), ``terminal`` (``response.completed`` and
``response.incomplete``), ``failed`` (``response.failed``: the terminal and an in-band
error), ``error`` (the ``error`` event) and ``[DONE]`` (a gateway's ``data: [DONE]``).
A ``[DONE]`` belongs after the terminal: openai-python stops reading at it (openai-node
reads on and ignores the rest), so a ``[DONE]`` before any terminal ends the stream for the
client, unfinished (``missing_terminal`` at the body's end), and every event after it,
the terminal included, is ``event_after_terminal``: the body looks complete, the client
raises "Didn't receive a `response.completed` event".

Each event is checked whole and its sequence judged (``classify``), then it follows its
type's route (``ROUTES``, from ``_KINDS`` and ``_HANDLERS``: its step, then its handler);
an event inside an item goes through ``_on_item_event``, which finds the open item it
names and hands it to ``_ITEM_HANDLERS``. ``sequence_number`` must count up by one from 0 (from
``starting_after + 1`` on a resumed stream), keepalives included; a skip ahead and a step
back are each reported once. An item is opened by ``output_item.added`` with the next
``output_index`` (an index already used is out of order) and closed by its
``output_item.done``; parts are opened and closed by ``content_part.added/done``
(``content_index``) and ``reasoning_summary_part.added/done`` (``summary_index``). Any
other event that names an ``output_index`` or ``item_id`` must point at an open item, with
that item's id, and text events at an open part whose text is not done yet. Deltas are
kept per part to compare with the ``.done`` text; a part (or a tool call's input) whose
deltas streamed owes that ``.done`` before it closes (``text_not_done``, a warning: the
helper's final response is intact, its ``.done`` event never fires). The items done are
counted: a ``response.completed`` whose ``output`` is an empty list after any was done
loses them all in the stream helper's final response (``completed_output_empty``; a null
``output`` is rebuilt by the helper and is fine). Unknown ``response.*`` event types and
``keepalive`` are legal. In-band errors (``error`` events, ``response.failed``'s
``response.error``) are checked against the shape the openai-python SDK reads.

Payloads are parsed, then checked against ``RESPONSE_STREAM_EVENT``, one shape for every
event type (``_generated_openai_responses``: the fields the rules read, typed as
openai-python's event models all type them, strictly) and read through it
(``_fields.declared``: unknown keys are dropped); which of those fields an event type
requires is in ``_REQUIRED``. Its hand-written part holds what the SDK's stream helper
reads and would raise on: ``response.output`` a list
(or null) of entries with a string ``type``, an item's ``content`` a list (null only off a
message) of parts, each an object with a string ``type``, a part an object with a string
``type`` and ``text``; a text delta must be a string (checked by hand: the shape leaves
``delta`` untyped, since an unknown event's may be anything). A payload that fails that
check is reported (``schema_mismatch``) and then checked like any other on the fields
that do have the right type (``_fields.usable``): a non-conforming server is where the
lifecycle rules matter. A payload that is not JSON at all takes no lifecycle step.

Bounded state
-------------

Whatever a stream sends, a checker holds at most ``MAX_OPEN_ITEMS`` open items, each with
at most ``MAX_OPEN_PARTS`` open parts (``_entities.Entities``, owner of the rules ``_ITEMS``
and ``_PARTS`` declare); items and parts past those bounds are counted, not followed, and
the events that name them are not checked. Deltas kept for the ``.done`` comparison count
against the stream's kept-text budget (``KeptText``): a part whose deltas do not fit is not
compared. Ids longer than ``_MAX_ID_CHARS`` are kept as a digest. Indices outside
``0 <= i < _MAX_INDEX`` are never used as keys. No finding message quotes the wire: types
and statuses appear only when they are documented tokens, ids as a size and hash, numbers
through ``_wire.number``, and lists of items are cut short.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from streamguard import rules
from streamguard._wire import describe, kept_key, number, token
from streamguard.protocols._entities import Entities, EntityKind
from streamguard.protocols._generated_openai_responses import RESPONSE_STREAM_EVENT
from streamguard.protocols.engine import (
    ANY,
    END,
    ERROR,
    NO_FINDINGS,
    NO_PAYLOAD,
    OTHER,
    STAY,
    TERMINAL,
    Checker,
    EventFindings,
    Holes,
    KeptText,
    Lifecycle,
    ProtocolSpec,
    Route,
    Signal,
    Transcript,
    any_json,
    broken,
    cut_rows,
    declared,
    go,
    json_object,
    json_string_text,
    may_name,
    nested_problem,
    object_problems,
    opt,
    parse_json,
    preview,
    req,
    shape_problem,
    terminated_lifecycle,
    type_name,
    usable,
)
from streamguard.report import Finding
from streamguard.request import RequestBody, RequestFact
from streamguard.sse import Event

__all__ = ["MAX_OPEN_ITEMS", "MAX_OPEN_PARTS", "SPEC", "TERMINAL_TYPES", "OpenAIResponsesChecker"]

#: The lifecycle events that end a response, with the status each must carry.
TERMINAL_TYPES: Final = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
_OPENING_TYPES = frozenset({"response.created", "response.queued", "response.in_progress"})
_OPENING_STATUSES: Final = frozenset({"in_progress", "queued"})
_DONE_ITEM_STATUSES: Final = frozenset({"completed", "incomplete", "failed"})
#: Every status the SDK types define, for a response or an output item: the only status
#: values a message quotes.
_STATUSES: Final = frozenset(
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
_TEXT_EVENTS: Final[dict[str, tuple[str | None, str, bool]]] = {}
for _family, (_field, _final) in _TEXT_FAMILIES.items():
    _TEXT_EVENTS[f"{_family}.delta"] = (_field, _final, True)
    _TEXT_EVENTS[f"{_family}.done"] = (_field, _final, False)
#: The text deltas: their ``delta`` must be a string.
_TEXT_DELTAS: Final[frozenset[str]] = frozenset(
    kind for kind, (_, _, is_delta) in _TEXT_EVENTS.items() if is_delta
)
#: Part event type -> (whether it is a content part rather than a summary part, whether it
#: opens the part).
_PART_EVENTS: Final = {
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
_KNOWN_TYPES: Final = frozenset(
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
_REQUIRED: Final[dict[str, tuple[str, ...]]] = {
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
MAX_OPEN_ITEMS: Final = 32
#: Open parts (content and summary together) followed per item.
MAX_OPEN_PARTS: Final = 32
#: Output and part indices at or past this (or negative) are never used as keys: a wire
#: integer can have a million digits.
_MAX_INDEX: Final = 2**31
#: Ids up to this long are kept as they are (real ones are about 50 characters); longer
#: ones as a 16-byte digest, so an id costs bounded memory and still compares.
_MAX_ID_CHARS: Final = 128
#: The lifecycle rules of output items and of their content and summary parts, and how
#: their messages name them.
_ITEMS: Final[EntityKind] = EntityKind(
    "output item",
    "output_index",
    "added",
    "done",
    not_open=rules.ITEM_NOT_OPEN,
    not_closed=rules.ITEM_NOT_CLOSED,
    out_of_order=rules.ITEM_OUT_OF_ORDER,
    overlap=rules.ITEM_OVERLAP,
)
_PARTS: Final[EntityKind] = EntityKind(
    "part", "content_index", "added", "done", not_open=_ITEMS.not_open, not_closed=_ITEMS.not_closed
)

# The lifecycle's kinds besides TERMINAL (completed, incomplete), ERROR and OTHER, and its
# phases; ``_KINDS`` classifies event types (any other is OTHER).
_CREATED: Final = "created"
_FAILED: Final = "failed"
_DONE: Final = "[DONE]"
_KINDS: Final = {
    "response.created": _CREATED,
    "response.completed": TERMINAL,
    "response.incomplete": TERMINAL,
    "response.failed": _FAILED,
    "error": ERROR,
}
#: The types that end a stream (``OpenAIResponsesChecker.end_kind`` parses only these).
_ENDING_TYPES: Final = tuple(kind for kind, step in _KINDS.items() if step != _CREATED)
#: ``OpenAIResponsesChecker.END_HINTS``: a frame that may end the stream names one of them.
_END_HINTS: Final = (b"[DONE]", *[kind.encode() for kind in _ENDING_TYPES], b"\\u")
_AWAITING: Final = "awaiting_created"
_UNCREATED: Final = "uncreated"
_STREAMING: Final = "streaming"
_ERRORED: Final = "errored"
_ENDED: Final = "ended"
_ENDED_FAILED: Final = "ended_failed"
_CLOSED: Final = "closed"
_CUT_BY_DONE = "cut_by_done"


def _lifecycle() -> Lifecycle:
    shared = terminated_lifecycle(  # its messages, for this protocol's own phases
        after_error="follows the error event {error}; only response.failed may follow it",
        duplicate="({name}) repeats the terminal signal first sent as event {terminal}",
    ).table
    no_terminal, after_error = shared[_STREAMING, END], shared[_ERRORED, ANY]
    duplicate, after_terminal = shared[_ENDED, TERMINAL], shared[_ENDED, ANY]
    missing = "event {index} is {name}; a stream starts with response.created"
    table = {
        (_AWAITING, _CREATED): go(_STREAMING),
        (_AWAITING, TERMINAL): broken(rules.MISSING_RESPONSE_CREATED, missing, _ENDED),
        (_AWAITING, _FAILED): broken(rules.MISSING_RESPONSE_CREATED, missing, _ENDED_FAILED),
        (_AWAITING, ERROR): broken(rules.MISSING_RESPONSE_CREATED, missing, _ERRORED),
        (_AWAITING, OTHER): broken(rules.MISSING_RESPONSE_CREATED, missing, _UNCREATED),
        # openai-python stops reading at [DONE] (openai-node reads on and ignores the
        # rest): a [DONE] before the terminal ends the stream there, unfinished.
        (_AWAITING, _DONE): go(_CUT_BY_DONE),
        (_AWAITING, END): no_terminal,
        (_UNCREATED, _CREATED): go(_STREAMING),
        (_STREAMING, _CREATED): broken(
            rules.DUPLICATE_RESPONSE_CREATED,
            "event {index} is a second response.created (the first was event {created})",
        ),
        (_ERRORED, _FAILED): go(_ENDED_FAILED),
        (_ERRORED, _DONE): go(_CLOSED),
        (_ERRORED, ANY): after_error,
        (_ERRORED, END): STAY,
        (_CLOSED, _DONE): broken(
            rules.DUPLICATE_TERMINAL, "event {index} is a second [DONE]", checked=False
        ),
        **cut_rows(_CUT_BY_DONE, terminal="terminal event", reader="openai-python"),
    }
    for phase in (_UNCREATED, _STREAMING):
        table[phase, _DONE] = go(_CUT_BY_DONE)
        table[phase, TERMINAL] = go(_ENDED)
        table[phase, _FAILED] = go(_ENDED_FAILED)
        table[phase, ERROR] = go(_ERRORED)
        table[phase, ANY] = STAY  # OTHER
        table[phase, END] = no_terminal
    for phase in (_ENDED, _ENDED_FAILED, _CLOSED):
        table[phase, TERMINAL] = table[phase, _FAILED] = duplicate
        table.setdefault((phase, _DONE), go(_CLOSED))
        table[phase, ANY] = after_terminal
        table[phase, END] = STAY
    return Lifecycle(
        phases={
            _AWAITING: "no event yet (a resumed stream starts in uncreated)",
            _UNCREATED: "events arrive before any response.created",
            _STREAMING: "response.created arrived; events arrive",
            _ERRORED: "an error event arrived: only response.failed (or [DONE]) may follow",
            _ENDED: "response.completed or response.incomplete arrived",
            _ENDED_FAILED: "response.failed arrived",
            _CLOSED: "a gateway's [DONE] followed the terminal or the error event",
            _CUT_BY_DONE: "a [DONE] came before any terminal event: openai-python reads "
            "nothing after it",
        },
        kinds={_CREATED: "response.created", _FAILED: "response.failed", _DONE: "[DONE]"},
        initial=_AWAITING,
        table=table,
        ended=frozenset({_ENDED, _ENDED_FAILED, _CLOSED}),
        errored=frozenset({_ERRORED, _ENDED_FAILED}),
        sealed=frozenset({_ENDED, _ENDED_FAILED, _CLOSED, _CUT_BY_DONE}),
    )


_LIFECYCLE: Final = _lifecycle()


#: A text delta, as ``_on_text`` vouches for it: its sequence number and its text are read
#: on a repeat (the text is kept for the check at its .done), its padding is not.
_TEXT_DELTA: Final = Holes((("obfuscation",),), (("sequence_number",), ("delta",)))


class _Text:
    """One part's text (or one tool call's input), its deltas kept to compare with its
    ``.done`` text."""

    __slots__ = ("compare", "deltas", "done", "final", "kind")

    def __init__(self, compare: bool) -> None:
        self.compare = compare  # False: deltas not kept (an adopted item's, or given up)
        self.deltas: KeptText | None = None  # from the first delta on
        self.final: str | None = None  # the .done field compared, set by the first event
        # The type of its first text event (a known type): names the .done it owes.
        self.kind: str | None = None
        self.done = False  # its .done arrived: a later delta is out of place

    def owed_done(self) -> str | None:
        """The ``.done`` event type this text still owes: its deltas arrived, its ``.done``
        did not; None when it owes nothing."""
        kind = self.kind
        if kind is None or self.done:
            return None
        return kind[: kind.rfind(".")] + ".done"


def _forget(checker: Checker, text: _Text) -> None:
    """Stop keeping a text's deltas and give their room back to the stream's budget."""
    if text.deltas is not None:
        text.deltas.release(checker)
        text.deltas = None
    text.compare = False


def _part_label(key: int, text: _Text) -> str:
    """A part as a message lists it, from its ``_part_key``."""
    return f"{'summary' if key & 1 else 'content'} part {key >> 1}"


class _OpenItem:
    __slots__ = ("adopted", "id", "number", "parts", "text")

    def __init__(self, number: int, item_id: str | bytes | None, adopted: bool = False) -> None:
        self.number = number  # its output_index
        self.id = item_id  # as ``_id_key`` keeps it; None when the item had none
        # Opened before a resumed stream's first event: its parts are taken on trust and
        # its text is not compared (the earlier deltas were never seen).
        self.adopted = adopted
        # Content and summary parts, by _part_key; those past MAX_OPEN_PARTS are counted.
        self.parts: Entities[_Text] = Entities(_PARTS, MAX_OPEN_PARTS, _forget, _part_label)
        self.text: _Text | None = None  # a tool call's input, which has no part


def _drop_item(checker: Checker, item: _OpenItem) -> None:
    """Stop keeping an item's texts (its parts', and a tool call's input)."""
    item.parts.forget_all(checker)
    if item.text is not None:
        _forget(checker, item.text)


_Handler = Callable[["OpenAIResponsesChecker", dict[str, Any], EventFindings], None]
_ItemHandler = Callable[["OpenAIResponsesChecker", dict[str, Any], _OpenItem, EventFindings], None]


class OpenAIResponsesChecker(Checker):
    """Checks an OpenAI Responses API stream event by event (reference §2)."""

    __slots__ = (
        "_created_index",
        "_done_index",
        "_event_malformed",
        "_gaps",
        "_items",
        "_items_done",
        "_next_sequence",
        "_response_id",
        "_resumed",
    )

    name = "openai_responses"
    REPEAT_READS_EVENT = False  # (its repeat_event reads the token and values only)
    LIFECYCLE = _LIFECYCLE
    JUDGES_END_UNSAMPLED = True
    END_HINTS = _END_HINTS
    RAISES = frozenset(
        {
            rules.COMPLETED_OUTPUT_EMPTY,
            rules.DONE_TEXT_MISMATCH,
            rules.EVENT_TYPE_MISMATCH,
            rules.INVALID_JSON,
            rules.ITEM_NOT_CLOSED,
            rules.ITEM_NOT_OPEN,
            rules.ITEM_OUT_OF_ORDER,
            rules.ITEM_OVERLAP,
            rules.ITEM_STATUS_UNEXPECTED,
            rules.RESPONSE_ID_CHANGED,
            rules.SCHEMA_MISMATCH,
            rules.SEQUENCE_GAP,
            rules.STATUS_MISMATCH,
            rules.TEXT_NOT_DONE,
        }
    )

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        starting_after = _starting_after(request, path)
        self._resumed = starting_after is not None
        if self._resumed:  # its response.created came before the events it asked for
            self.phase = _UNCREATED
        self._next_sequence = 0 if starting_after is None else starting_after + 1
        self._gaps = 0  # bits: sequence_gap reported ahead (1), back (2)
        self._created_index: int | None = None
        self._done_index: int | None = None  # the first [DONE], for the lifecycle messages
        self._response_id: str | bytes | None = None
        # .opened: the next output_index; items past MAX_OPEN_ITEMS are counted, not followed.
        self._items: Entities[_OpenItem] = Entities(_ITEMS, MAX_OPEN_ITEMS, _drop_item)
        # Items done in this stream: a response.completed with an empty output drops them.
        self._items_done = 0
        self._event_malformed = False  # the current event failed the strict shape check

    # -- lifecycle -----------------------------------------------------------------------

    def sealed_kind(self, event: Event) -> tuple[str, str | None]:
        # A gateway's [DONE] is a kind of its own (check_event takes it in every other
        # phase), allowed once after the terminal; other events are named by their type.
        if event.data.startswith("[DONE]"):
            return _DONE, "[DONE]"
        kind = _type_of(event)
        return (OTHER if kind is None else _KINDS.get(kind, OTHER)), _kind(kind)

    def end_kind(self, event: Event, index: int) -> str | None:
        # As ``check_event`` reads the kind (the JSON's type, validated or salvaged: a
        # string either way), in phases where the end is still open; response.created
        # changes nothing about where an ending event leads.
        if self.terminal_index is not None or self.error_index is not None:
            return None
        if self.phase == _CUT_BY_DONE:
            return None
        data = event.data
        if data.startswith("[DONE]"):
            if self._done_index is None:
                self._done_index = index
            return _DONE
        if not may_name(data, *_ENDING_TYPES):
            return None
        payload = any_json(data)
        if type(payload) is not dict:
            return None
        kind = payload.get("type")
        if type(kind) is not str:
            return None
        lifecycle = _KINDS.get(kind)
        return None if lifecycle == _CREATED else lifecycle

    def message_fields(self) -> Mapping[str, object]:
        # "a second response.created (the first ...)", "follows the [DONE] sent as event ..."
        return {"created": self._created_index, "done": self._done_index}

    # -- one event ---------------------------------------------------------------------

    @classmethod
    def transcribe(cls, data: str, out: Transcript) -> bool:
        payload = json_object(data)
        if payload is None:
            return False
        kind = payload.get("type")
        if kind == "response.output_text.delta":
            return out.add(0, payload.get("delta"))
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            response = payload.get("response")
            if isinstance(response, dict):
                details = response.get("incomplete_details")
                reason = details.get("reason") if isinstance(details, dict) else None
                out.finish(reason or response.get("status"))
        return False

    def classify(self, event: Event, found: EventFindings) -> Route | None:
        # Every event is checked whole against one shape (not a route's: an unknown type
        # is checked too), an invalid one's fields of the right type read on (``usable``),
        # and its sequence number, required fields and name judged before its step. An
        # undocumented type is no finding (the SDK passes it on): one that names an item
        # goes to the item's route.
        data = event.data
        if data.startswith("[DONE]"):
            if self._done_index is None:
                self._done_index = found.index
            found.name = "[DONE]"
            found.payload = NO_PAYLOAD
            return _DONE_ROUTE
        try:
            raw = parse_json(data)
        except ValueError:  # syntax, recursion limit, number out of range
            raw = None
        if type(raw) is not dict:  # parsed again for the invalid_json finding all share
            self.parse_object(event, found.index, found.items)
            self._next_sequence += 1  # it presumably took its slot: no follow-on gap
            return None
        problem = nested_problem(raw, RESPONSE_STREAM_EVENT)
        if problem is None:
            self._event_malformed = False
            payload = declared(raw, RESPONSE_STREAM_EVENT)  # a provider's additions unread
        else:  # report it, then check what it carries
            found.add(rules.SCHEMA_MISMATCH, f": {problem}")
            if type(raw.get("type")) is not str:  # no string type: nothing to go on
                self._next_sequence += 1  # it presumably took its slot: no follow-on gap
                return None
            self._event_malformed = True
            payload = usable(raw, RESPONSE_STREAM_EVENT)
        found.payload = payload
        return self._route(payload, found)

    def _route(self, payload: dict[str, Any], found: EventFindings) -> Route:
        """The rules of every event, then its route."""
        kind = payload["type"]
        fields: Mapping[str, Any] = payload  # salvaged, it may lack a required field
        sequence = fields.get("sequence_number")
        if sequence is None:  # the wrong type: it presumably took its slot
            self._next_sequence += 1
        else:
            self._check_sequence(sequence, found)
        if not self._event_malformed:  # else schema_mismatch was reported for this event
            for field in _REQUIRED.get(kind, ()):
                if field not in payload:
                    detail = f": field {field}: required on {_kind(kind)} but missing"
                    found.add(rules.SCHEMA_MISMATCH, detail)
                    break
            # The shape leaves ``delta`` untyped (an unknown event's may be
            # anything); a text delta is a string: the stream helper adds it to a string.
            if kind in _TEXT_DELTAS and "delta" in payload and type(payload["delta"]) is not str:
                detail = (
                    f": field delta: a string on {_kind(kind)}, got {type_name(payload['delta'])}"
                )
                found.add(rules.SCHEMA_MISMATCH, detail)
        name = found.event.event
        if name != "message" and name != kind and not self.reported(rules.EVENT_TYPE_MISMATCH):
            detail = f" is named {_kind(name)} but its type is {_kind(kind)}"
            found.add(rules.EVENT_TYPE_MISMATCH, detail)
        found.type = kind
        found.name = _kind(kind)
        route = self.ROUTES.get(kind)
        if route is not None:
            return route
        return _ITEM_ROUTE if "output_index" in payload or "item_id" in payload else _OTHER_ROUTE

    def _check_sequence(self, sequence: int, found: EventFindings) -> None:
        expected, self._next_sequence = self._next_sequence, sequence + 1
        if sequence == expected:
            return
        ahead = sequence > expected
        bit = 1 if ahead else 2
        if self._gaps & bit:  # once per stream in each direction
            return
        self._gaps |= bit
        how = "skips ahead" if ahead else "repeats or goes back"
        detail = (
            f" has sequence_number {number(sequence)}, expected {number(expected)}: the "
            f"numbering {how} (reported once per stream in each direction)"
        )
        found.add(rules.SEQUENCE_GAP, detail)

    # -- the response's lifecycle events --------------------------------------------------

    def _on_opening(self, payload: dict[str, Any], found: EventFindings) -> None:
        if payload["type"] == "response.created" and self._created_index is None:
            self._created_index = found.index
        self._check_response(payload, found)

    def _on_error(self, payload: dict[str, Any], found: EventFindings) -> None:
        # Only response.failed or [DONE] may follow: no item is checked any more.
        self._items.forget_all(self)
        problem = _error_event_problem(payload)
        if problem is not None and not self._event_malformed:
            found.add(rules.SCHEMA_MISMATCH, f": {problem}")

    def _on_terminal(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._check_response(payload, found)
        kind = payload["type"]
        if kind != "response.failed":
            self._items.check_closed(found, _named(kind))
        if kind == "response.completed" and self._items_done:
            response = payload.get("response")
            output = None if response is None else response.get("output")
            if output is not None and not output:
                # The stream helper's final response is this event's output when it is a
                # list (it rebuilds it from the items done only when it is null).
                detail = (
                    f"{_named(kind)}: response.output is empty after {self._items_done} "
                    "output item(s) were done; the stream helper's final response has none "
                    "of them"
                )
                found.add(rules.COMPLETED_OUTPUT_EMPTY, detail)
        self._items.forget_all(self)  # the response ended: nothing more is checked

    def _check_response(self, payload: dict[str, Any], found: EventFindings) -> None:
        response = payload.get("response")
        if response is None:  # missing or not an object: schema_mismatch said so
            return
        kind = payload["type"]
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
            found.add(rules.STATUS_MISMATCH, f"{_named(kind)}: {problem}")
        if kind == "response.failed" and not self._event_malformed:
            shape = _response_error_problem(response.get("error"))
            if shape is not None:
                found.add(rules.SCHEMA_MISMATCH, f": {shape}")
        response_id = response.get("id")
        if response_id is not None:
            key = _id_key(response_id)
            if self._response_id is None:
                self._response_id = key
            elif key != self._response_id:
                detail = (
                    f"{_named(kind)}: response.id {describe(response_id)} differs from the id "
                    "of the earlier lifecycle events"
                )
                found.add(rules.RESPONSE_ID_CHANGED, detail)

    # -- output items ------------------------------------------------------------------

    def _on_item_added(self, payload: dict[str, Any], found: EventFindings) -> None:
        output_index = payload.get("output_index")
        if output_index is None:  # the item cannot be placed: schema_mismatch said so
            return
        where = _named("response.output_item.added")
        self._items.check_opening(found, where, output_index)
        fields = payload.get("item") or {}
        if fields.get("type") == "message" and "content" in fields and fields["content"] is None:
            detail = (
                f"{where}: field item.content: null on a message, expected a list (the stream "
                "helper appends each content part to it)"
            )
            found.add(rules.SCHEMA_MISMATCH, detail)
        status = fields.get("status")
        if status is not None and status != "in_progress":
            detail = (
                f"{where}: item {number(output_index)} is added with status "
                f"{_status(status)}, expected 'in_progress'"
            )
            found.add(rules.ITEM_STATUS_UNEXPECTED, detail)
        if not 0 <= output_index < _MAX_INDEX:
            self._items.untracked += 1
            return
        item_id = fields.get("id")
        item = _OpenItem(output_index, None if item_id is None else _id_key(item_id))
        # An item open at that index (reused while open) is dropped: the new one is followed.
        self._items.keep(self, output_index, item)

    def _on_item_event(self, payload: dict[str, Any], found: EventFindings) -> None:
        """An event inside an item (parts, deltas, hosted-tool progress, its done): find
        the open item it names, then hand it to its type's item handler."""
        kind = payload["type"]
        output_index = payload.get("output_index")
        item_id = payload.get("item_id")
        if kind == "response.output_item.done":
            final_item = payload.get("item")
            item_id = final_item.get("id") if final_item is not None else None
        if output_index is None and item_id is not None:  # only an item_id: look it up
            output_index = self._index_of(item_id)
        item = None if output_index is None else self._items.open.get(output_index)
        if item is None:
            if not self._resumed or (output_index or 0) < self._items.opened:
                if self._items.untracked:  # presumably an item past the bound: not followed
                    if kind == "response.output_item.done":
                        self._items.untracked -= 1
                        self._items_done += 1
                elif output_index is not None:
                    self._items.not_open(found, _named(kind), output_index)
                else:
                    what = "it names no open item"
                    if item_id is not None:
                        what = f"no open item has item_id {describe(item_id)}"
                    found.add(_ITEMS.not_open, f"{_named(kind)}: {what}")
                return
            item = self._adopt(
                self._items.opened if output_index is None else output_index, item_id
            )
            if item is None:  # past the bounds: taken on trust, not followed
                return
        if item_id is not None and item.id is not None and _id_key(item_id) != item.id:
            detail = (
                f"{_named(kind)}: item_id {describe(item_id)} is not the id of the item open "
                f"at output_index {number(item.number)}"
            )
            found.add(rules.ITEM_NOT_OPEN, detail)
            # and go on as if it named the open item: one finding, not a cascade
        handler = _ITEM_HANDLERS.get(kind)
        if handler is not None:
            handler(self, payload, item, found)

    def _index_of(self, item_id: str) -> int | None:
        """The output_index of the open item with this id (at most MAX_OPEN_ITEMS to look
        through, and only for events that name no output_index)."""
        key = _id_key(item_id)
        for output_index, item in self._items.open.items():
            if item.id == key:
                return output_index
        return None

    def _adopt(self, output_index: int, item_id: str | None) -> _OpenItem | None:
        """A resumed stream met an item opened before its first event: take it as open."""
        if not 0 <= output_index < _MAX_INDEX or len(self._items.open) >= MAX_OPEN_ITEMS:
            return None
        item = _OpenItem(output_index, None if item_id is None else _id_key(item_id), True)
        self._items.keep(self, output_index, item)
        return item

    def _on_item_done(self, payload: dict[str, Any], item: _OpenItem, found: EventFindings) -> None:
        self._items.close(item.number)
        self._items_done += 1
        where = f"{_named(payload['type'])}: item {number(item.number)}"
        owed = None if item.text is None else item.text.owed_done()
        if owed is not None:  # a tool call's input streamed, never done
            found.add(rules.TEXT_NOT_DONE, f"{where} is done without its {_kind(owed)}")
        item.parts.check_closed(found, f"{_named(payload['type'])} for item {number(item.number)}")
        status = (payload.get("item") or {}).get("status")
        if status is not None and status not in _DONE_ITEM_STATUSES:
            detail = (
                f"{where} is done with status {_status(status)}, expected 'completed', "
                "'incomplete' or 'failed'"
            )
            found.add(rules.ITEM_STATUS_UNEXPECTED, detail)
        _drop_item(self, item)

    # -- parts and texts ---------------------------------------------------------------

    def _on_part(self, payload: dict[str, Any], item: _OpenItem, found: EventFindings) -> None:
        content, opens = _PART_EVENTS[payload["type"]]
        part = payload.get("content_index") if content else payload.get("summary_index")
        if part is None:  # missing: schema_mismatch said so, and no part can be named
            return
        if opens:
            self._open_part(item, content, part, compare=not item.adopted)
            return
        text = item.parts.close(_part_key(content, part))
        if text is not None:
            owed = text.owed_done()
            if owed is not None:
                label = "content part" if content else "summary part"
                detail = (
                    f"{_named(payload['type'])}: {label} {number(part)} closes without its "
                    f"{_kind(owed)}"
                )
                found.add(rules.TEXT_NOT_DONE, detail)
            _forget(self, text)
        elif not item.adopted or item.parts.untracked:  # an adopted item's parts: on trust
            _part_not_open(payload, item, found, content, part, closes=True)

    def _open_part(self, item: _OpenItem, content: bool, part: int, compare: bool) -> _Text | None:
        key = _part_key(content, part)
        text = _Text(compare)
        if key < 0:
            item.parts.untracked += 1
            return None
        # A part added again is replaced: its text starts over.
        return text if item.parts.keep(self, key, text) else None

    def _on_annotation(
        self, payload: dict[str, Any], item: _OpenItem, found: EventFindings
    ) -> None:
        part = payload.get("content_index")
        if part is not None and _part_key(True, part) not in item.parts.open and not item.adopted:
            _part_not_open(payload, item, found, True, part)

    def _on_text(self, payload: dict[str, Any], item: _OpenItem, found: EventFindings) -> None:
        kind = payload["type"]
        field, final, is_delta = _TEXT_EVENTS[kind]
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
            found_text = item.parts.open.get(_part_key(content, part))
            if found_text is None:
                if item.adopted:  # opened before a resumed stream's first event
                    found_text = self._open_part(item, content, part, compare=False)
                else:
                    _part_not_open(payload, item, found, content, part)
                if found_text is None:
                    return
            text = found_text
        if text.final is None:
            text.final, text.kind = final, kind
        if is_delta:
            if text.done:
                label = "input" if part is None else f"{field} {number(part)}"
                detail = f"{_named(kind)}: a delta follows the .done of its {label}"
                found.add(rules.ITEM_NOT_OPEN, detail)
            elif text.compare:
                delta = payload.get("delta")
                if type(delta) is str and text.final == final:
                    if text.deltas is None:
                        text.deltas = KeptText()
                    text.deltas.add(self, delta)  # past the stream's budget: none compared
                    self.repeatable(_TEXT_DELTA, text)
                else:  # not a string, or another family's delta
                    _forget(self, text)
            else:
                self.repeatable(_TEXT_DELTA, text)
            return
        text.done = True
        done_text = payload.get(final)
        if type(done_text) is str and text.final == final and text.compare and text.deltas:
            kept = text.deltas.text()
            if kept is not None and kept != done_text:
                detail = (
                    f"{_named(kind)}: {final} ({preview(done_text)}) differs from its joined "
                    f"deltas ({len(kept)} characters)"
                )
                found.add(rules.DONE_TEXT_MISMATCH, detail)
        _forget(self, text)

    # -- kept state ----------------------------------------------------------------------

    def repeat_event(
        self, event: Event, index: int, token: object, values: Sequence[str]
    ) -> Sequence[Finding] | None:
        """One more delta of the text ``token`` (``_on_text``'s step): its sequence number
        must be the next one, and its text is kept as the first was."""
        if type(token) is not _Text or token.done:
            return None
        sequence = int(values[0])
        if sequence != self._next_sequence:
            return None  # the full check reports the gap
        self._next_sequence = sequence + 1
        if token.compare and token.deltas is not None:
            token.deltas.add(self, json_string_text(values[1]))
        return NO_FINDINGS


_C = OpenAIResponsesChecker
#: The payload handler of each event type that has one; any other type that names an item
#: goes to ``_on_item_event`` (``_ITEM_ROUTE``), the rest to none.
_HANDLERS: Final[dict[str, _Handler]] = {
    **dict.fromkeys(_OPENING_TYPES, _C._on_opening),
    **dict.fromkeys(TERMINAL_TYPES, _C._on_terminal),
    "error": _C._on_error,
    "response.output_item.added": _C._on_item_added,
    "response.output_item.done": _C._on_item_event,  # even without an index
}
#: Each of those types' route: its lifecycle kind (``_KINDS``, else ``OTHER``) and handler.
_C.ROUTES = {kind: Route(_KINDS.get(kind, OTHER), handler) for kind, handler in _HANDLERS.items()}
_ITEM_ROUTE: Final = Route(OTHER, _C._on_item_event)
_OTHER_ROUTE: Final = Route(OTHER)
#: ``[DONE]``: its step alone.
_DONE_ROUTE: Final = Route(_DONE)

#: The handler of each event type inside an item, once ``_on_item_event`` found the item.
_ITEM_HANDLERS: Final[dict[str, _ItemHandler]] = {
    **dict.fromkeys(_TEXT_EVENTS, OpenAIResponsesChecker._on_text),
    **dict.fromkeys(_PART_EVENTS, OpenAIResponsesChecker._on_part),
    "response.output_item.done": OpenAIResponsesChecker._on_item_done,
    "response.output_text.annotation.added": OpenAIResponsesChecker._on_annotation,
}


# -- helpers -----------------------------------------------------------------------------


def _part_not_open(
    payload: dict[str, Any],
    item: _OpenItem,
    found: EventFindings,
    content: bool,
    part: int,
    closes: bool = False,
) -> None:
    """An event (a closing one when ``closes``) names a content or summary part that is not
    open (``Entities.not_open``)."""
    label = f"{'content' if content else 'summary'} part {number(part)}"
    item.parts.not_open(found, _named(payload["type"]), _part_key(content, part), label, closes)


def _kind(value: object) -> str:
    """An event type (or event name) as a message may show it."""
    return "no type" if value is None else token(value, _KNOWN_TYPES)


def _status(value: object) -> str:
    # A status of the wrong type was dropped by ``usable`` (and reported as schema_mismatch).
    return "missing or not a string" if value is None else token(value, _STATUSES)


def _named(kind: str) -> str:
    """An event's type as it follows ``event N`` in a message: `` ('response.completed')``."""
    return f" ({_kind(kind)})"


def _part_key(content: bool, part: int) -> int:
    """A part's key in its item's ``parts`` (content and summary parts share the item's
    bound); -1, never a key, for an index outside ``0 <= i < _MAX_INDEX``."""
    if not 0 <= part < _MAX_INDEX:
        return -1
    return part * 2 + (0 if content else 1)


def _id_key(value: str) -> str | bytes:
    return kept_key(value, _MAX_ID_CHARS)


def _type_of(event: Event) -> str | None:
    """The event's type, from its name when it has one, else from its JSON."""
    if event.event != "message":
        return event.event
    try:
        raw = parse_json(event.data)
    except ValueError:
        return None
    kind = raw.get("type") if type(raw) is dict else None
    return kind if type(kind) is str else None


#: An ``error`` event's fields, flat (documented) or in a nested ``error`` object (observed),
#: and ``response.failed``'s ``response.error``: what openai-python reads (``message`` a
#: string; ``code``, ``param`` and ``type`` a string or null).
_ERROR_EVENT_FIELDS: Final = (
    req("message"),
    opt("code", nullable=True),
    opt("param", nullable=True),
)
_NESTED_ERROR_FIELDS: Final = (*_ERROR_EVENT_FIELDS, opt("type", nullable=True))
_RESPONSE_ERROR_FIELDS: Final = (req("message"), opt("code", nullable=True))


def _error_event_problem(payload: dict[str, Any]) -> str | None:
    """Where an ``error`` event differs from what openai-python reads; None when it fits.

    Two shapes are real (reference §2.6): the documented flat one (``message``, ``code``,
    ``param`` on the event) and the observed nested one (an ``error`` object). The SDK
    raises with ``error.message`` when ``error`` is truthy, else builds a
    ``ResponseErrorEvent``.
    """
    fields: Mapping[str, Any] = payload
    nested = fields.get("error")
    if nested:
        return next(iter(object_problems(nested, _NESTED_ERROR_FIELDS, "error")), None)
    return shape_problem(fields, _ERROR_EVENT_FIELDS)


def _response_error_problem(error: object) -> str | None:
    """Where ``response.failed``'s ``response.error`` differs from the SDK's
    ``ResponseError``; a missing or null error is status_mismatch's."""
    if not error:
        return None
    return next(iter(object_problems(error, _RESPONSE_ERROR_FIELDS, "response.error")), None)


def _reason(response: Mapping[str, Any]) -> object:
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


#: The largest ``starting_after`` kept as a request fact: a JSON number can have 100,000
#: digits.
_MAX_STARTING_AFTER: int = 2**53


def _read_request(body: RequestBody, facts: dict[str, Any], attributes: dict[str, Any]) -> None:
    """The request fact Responses reads: ``starting_after``, the sequence number a resumed
    stream continues after (an integer from 0 to ``_MAX_STARTING_AFTER``)."""
    if not isinstance(body, list):
        value = body.get("starting_after")
        if type(value) is int and 0 <= value <= _MAX_STARTING_AFTER:
            facts["starting_after"] = value


# -- the protocol's declaration ------------------------------------------------------------


def _is_responses_event(event: Event, payload: object) -> bool:
    if type(payload) is not dict:
        return False
    kind = payload.get("type")
    return isinstance(kind, str) and kind.startswith("response.")


SPEC: ProtocolSpec = ProtocolSpec(
    name=OpenAIResponsesChecker.name,
    checker=OpenAIResponsesChecker,
    summary="OpenAI Responses streaming (`/v1/responses`), ending in `response.completed` "
    "or another terminal event",
    paths=(Signal(30, lambda path: path.endswith("/v1/responses")),),
    events=(Signal(60, _is_responses_event),),
    event_names=_KNOWN_TYPES,
    request_facts=(RequestFact(("starting_after",), _read_request),),
)
