"""Cohere v2 chat streaming (``POST /v2/chat`` with ``"stream": true``; also served by
gateways that front Cohere).

Every event is named after its JSON ``type`` (``event: content-delta`` and ``{"type":
"content-delta", ...}``). A healthy stream::

    message-start
    ( content-start[i]  content-delta[i]*  content-end[i] )*       text or thinking, i = 0, 1, ...
    tool-plan-delta*
    ( tool-call-start[j]  tool-call-delta[j]*  tool-call-end[j] )*
    ( citation-start[k]  citation-end[k] )*
    message-end                                  finish_reason and usage

with ``debug`` events anywhere. The official client (``cohere`` 7.3's ``ClientV2.chat_stream``)
parses each event's data as JSON and builds the event by its ``type`` (it ignores the SSE
name); data that is not JSON is logged as a warning and handed on as an empty
``message-start`` in its place, and an event it cannot build (a ``delta`` that is no
object) is skipped with a warning: either way the event's content is lost. It skips empty
data, stops reading at a ``[DONE]`` that gateways add, wherever it comes, and hands the
events to the caller, who joins the deltas by index.

Theory of operation
-------------------

Each event is parsed once and dispatched on ``type`` through the route table (``ROUTES``,
run by the engine: the step, the declared shape, then the handler). The lifecycle kinds
are the terminal (``message-end``), ``[DONE]``, empty data (the last two are
``SENTINELS``, read unparsed) and any other event. After ``message-end`` another one is
``duplicate_terminal``, a gateway's ``[DONE]`` clean, and any other event
``event_after_terminal``; a body that ends first ``missing_terminal``. A ``[DONE]`` before
``message-end`` is where the client stops: every event after it is lost to the caller
(``event_after_terminal``), and so is the finish reason (``missing_terminal`` at the body's
end, though a ``message-end`` followed). Cohere defines no in-band error event: a failed
generation is a ``message-end`` whose ``finish_reason`` is ``ERROR``.

Content blocks, tool calls and citations are three kinds of numbered things, each opened by
its start, continued by its deltas and closed by its end, tracked apart by the engine's
numbered tracker (``_entities.Entities``, which words the findings as it does Anthropic's):
a delta or an end for an index that is not open is ``block_not_started``, a start for an
index that was already used ``block_index_out_of_order`` (a start may skip indices: the SDK
hands each event to the caller, who joins deltas by ``index``, so a gap loses nothing), and
anything still open at ``message-end`` ``block_not_stopped``, once for each kind.
``message-end`` must carry ``delta.finish_reason`` (``missing_finish_reason``). Every
event's payload is checked against the SDK's own model of it, generated into
``_generated_cohere`` by ``tools/shapes.py`` and read as the SDK reads it (pydantic's lax
mode: an ``index`` of ``"3"`` is 3, usage tokens of ``"75"`` are 75.0, an optional field
may be null): a value the model refuses makes the client skip the event, content and all
(``schema_mismatch``). By hand, since the model has ``index`` optional and any integer:
an indexed event without a non-negative ``index`` (``schema_mismatch``: the caller joins
deltas by index). A ``type`` the SDK does not list is ``unknown_event_type`` (info, each
once).

The lifecycle is the table ``LIFECYCLE``, printed in ``docs/lifecycles.md`` (generated
from the table, so the page cannot drift from the machine).

Bounded state: at most ``MAX_OPEN`` open entries of each kind (``Entities``), at most
``MAX_UNKNOWN_TYPES`` unknown types reported (each kept by the engine, a long one as a
digest); while a kind has more open entries than that, a delta or end for an index it does
not hold is not judged. Messages show documented
types, finish reasons and indices that are sane integers; any other value by size and hash.

Under ``protocol="auto"`` (``SPEC``): a path ending ``/v2/chat``, or a first event whose SSE
name is one only Cohere uses (hyphenated: ``message-start``, ``content-delta``...), or whose
JSON ``type`` is one of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from streamguard import _wire, rules
from streamguard.protocols._entities import Entities, EntityKind
from streamguard.protocols._generated_cohere import EVENTS
from streamguard.protocols.engine import (
    OTHER,
    STAY,
    TERMINAL,
    Checker,
    EventFindings,
    Lifecycle,
    ProtocolSpec,
    Route,
    Signal,
    Transcript,
    UnknownTypes,
    cut_rows,
    go,
    json_object,
    lax_integer,
    terminated_lifecycle,
    type_name,
)
from streamguard.sse import Event

__all__ = ["EVENT_TYPES", "FINISH_REASONS", "LIFECYCLE", "MAX_OPEN", "SPEC", "CohereChecker"]

#: Open entries tracked per kind (content blocks, tool calls, citations).
MAX_OPEN = 64
#: Distinct unknown types reported per stream.
MAX_UNKNOWN_TYPES = 8

#: ``ChatFinishReason``.
FINISH_REASONS: Final = frozenset(
    {"COMPLETE", "STOP_SEQUENCE", "MAX_TOKENS", "TOOL_CALL", "ERROR", "TIMEOUT"}
)

_CONTENT, _TOOL, _CITATION = "content block", "tool call", "citation"
#: Indexed type -> (what it concerns, what it does: start, delta or end).
_INDEXED: Final = {
    "content-start": (_CONTENT, "start"),
    "content-delta": (_CONTENT, "delta"),
    "content-end": (_CONTENT, "end"),
    "tool-call-start": (_TOOL, "start"),
    "tool-call-delta": (_TOOL, "delta"),
    "tool-call-end": (_TOOL, "end"),
    "citation-start": (_CITATION, "start"),
    "citation-end": (_CITATION, "end"),
}


def _kind(noun: str) -> EntityKind:
    return EntityKind(
        noun,
        "index",
        "started",
        "ended",
        not_open=rules.BLOCK_NOT_STARTED,
        not_closed=rules.BLOCK_NOT_STOPPED,
        out_of_order=rules.BLOCK_INDEX_OUT_OF_ORDER,
        gaps=True,
    )


_KINDS: Final = {what: _kind(what) for what in (_CONTENT, _TOOL, _CITATION)}


def _forget(checker: Checker, entry: bool) -> None:
    """An entry keeps nothing."""


# -- the lifecycle ---------------------------------------------------------------------

#: Empty data: the client skips it.
SKIPPED: Final = "skipped"
#: ``[DONE]``, a gateway's: the client stops reading there (``cohere`` 7.3's
#: ``raw_client.py``: ``if _sse.data == "[DONE]": return``).
DONE: Final = "done"

_TERMINATED = terminated_lifecycle(terminal="message-end")
_STREAMING = "streaming"
((_ENDED,), (_ERRORED,)) = (_TERMINATED.ended, _TERMINATED.errored)
_CUT_BY_DONE: Final = "cut_by_done"
LIFECYCLE: Final = Lifecycle(
    phases={
        _STREAMING: "events arrive",
        _ENDED: "message-end arrived",
        _ERRORED: "not reached: Cohere has no in-band error event",
        _CUT_BY_DONE: "[DONE] came before message-end: the client stopped reading there",
    },
    kinds={
        SKIPPED: "empty data: the client skips it",
        DONE: "[DONE] (a gateway's): the client stops reading",
    },
    initial=_STREAMING,
    table={
        **_TERMINATED.table,
        (_STREAMING, SKIPPED): STAY,
        (_STREAMING, DONE): go(_CUT_BY_DONE),
        (_ENDED, SKIPPED): STAY,
        (_ENDED, DONE): STAY,
        (_ERRORED, SKIPPED): STAY,
        (_ERRORED, DONE): STAY,
        (_CUT_BY_DONE, SKIPPED): STAY,
        **cut_rows(_CUT_BY_DONE, terminal="message-end", reader="the SDK"),
    },
    ended=_TERMINATED.ended,
    errored=_TERMINATED.errored,
    sealed=_TERMINATED.sealed | {_CUT_BY_DONE},
)


def _delta_message(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    delta = payload.get("delta")
    message = delta.get("message") if type(delta) is dict else None
    return message if type(message) is dict else {}


class CohereChecker(Checker):
    """Checks one Cohere v2 chat event stream; see the module docstring."""

    __slots__ = ("_done_index", "_open")

    name = "cohere"
    LIFECYCLE = LIFECYCLE
    UNKNOWN_TYPES = UnknownTypes(
        ": event type {shown} is not one the SDK lists; the client builds no typed event "
        "for it (each unknown type is reported once)",
        name="an unknown type",
        limit=MAX_UNKNOWN_TYPES,
    )
    RAISES = frozenset(
        {
            rules.INVALID_JSON,
            rules.SCHEMA_MISMATCH,
            rules.UNKNOWN_EVENT_TYPE,
            rules.BLOCK_NOT_STARTED,
            rules.BLOCK_INDEX_OUT_OF_ORDER,
            rules.BLOCK_NOT_STOPPED,
            rules.MISSING_FINISH_REASON,
        }
    )

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        self._open: dict[str, Entities[bool]] = {
            what: Entities(kind, MAX_OPEN, _forget) for what, kind in _KINDS.items()
        }
        #: The first [DONE]'s index, once one came.
        self._done_index: int | None = None

    def message_fields(self) -> Mapping[str, object]:
        return {"done": self._done_index}  # what the phase [DONE] cut names

    def sealed_kind(self, event: Event) -> tuple[str, str | None]:
        data = event.data
        if not data:
            return SKIPPED, None
        if data == "[DONE]":
            return DONE, "[DONE]"
        payload = json_object(data)
        kind = None if payload is None else payload.get("type")
        if kind == "message-end":
            return TERMINAL, "message-end"
        return OTHER, _wire.token(kind, EVENT_TYPES) if type(kind) is str else None

    @classmethod
    def transcribe(cls, data: str, out: Transcript) -> bool:
        payload = json_object(data)
        if payload is None:
            return False
        kind = payload.get("type")
        if kind == "content-delta":
            content = _delta_message(payload).get("content")
            if type(content) is dict:
                return out.add(0, content.get("text"))
        elif kind == "message-end":
            delta = payload.get("delta")
            if type(delta) is dict:
                out.finish(delta.get("finish_reason"))
        return False

    # -- one event: the route table (``ROUTES``) ---------------------------------------

    def _done(self, payload: dict[str, Any], found: EventFindings) -> None:
        if self._done_index is None:
            self._done_index = found.index

    def _indexed(self, payload: dict[str, Any], found: EventFindings) -> None:
        kind: str = payload["type"]
        what, does = _INDEXED[kind]
        value = payload.get("index")
        number = lax_integer(value)  # as the SDK reads it: "3", 3.0 and true are 3, 3 and 1
        if number is None and value is not None:
            return  # of a type the SDK refuses: the generated shape said so, the event is lost
        if number is None or number < 0:
            # By hand: the SDK's model has ``index`` optional and any integer, and yields
            # such an event; but the caller joins deltas by index, and one without a
            # non-negative index has no block to join.
            detail = f" ({kind}): field `index` is {type_name(value)}, not a non-negative integer"
            found.add(rules.SCHEMA_MISMATCH, detail)
            return
        slots = self._open[what]
        where = f" ({kind})"
        if does == "start":
            slots.check_opening(found, where, number)
            slots.keep(self, number, True)
        elif does == "end":
            if slots.close(number) is None:
                slots.not_open(found, where, number, closes=True)
        elif number not in slots.open:
            slots.not_open(found, where, number)

    def _message_end(self, payload: dict[str, Any], found: EventFindings) -> None:
        for slots in self._open.values():
            slots.check_closed(found, " (message-end)")
        delta = payload.get("delta")
        if type(delta) is not dict:
            return  # a schema_mismatch already, or no delta at all
        reason = delta.get("finish_reason")
        # By hand: the SDK's model takes any ``finish_reason`` or none (an open enum), but
        # without one the caller cannot tell a complete answer from a cut one.
        if type(reason) is not str:
            detail = " (message-end) has no string `delta.finish_reason`; the caller cannot tell "
            detail += "a complete answer from a cut one"
            found.add(rules.MISSING_FINISH_REASON, detail)


#: ``V2ChatStreamResponse``'s members, by type: each one's lifecycle kind, the shape
#: checked (generated from the SDK's own models: ``_generated_cohere``) and its handler.
CohereChecker.ROUTES = {
    "message-start": Route(OTHER, shape=EVENTS["message-start"]),
    "content-start": Route(OTHER, CohereChecker._indexed, EVENTS["content-start"]),
    "content-delta": Route(OTHER, CohereChecker._indexed, EVENTS["content-delta"]),
    "content-end": Route(OTHER, CohereChecker._indexed, EVENTS["content-end"]),
    "tool-plan-delta": Route(OTHER, shape=EVENTS["tool-plan-delta"]),
    "tool-call-start": Route(OTHER, CohereChecker._indexed, EVENTS["tool-call-start"]),
    "tool-call-delta": Route(OTHER, CohereChecker._indexed, EVENTS["tool-call-delta"]),
    "tool-call-end": Route(OTHER, CohereChecker._indexed, EVENTS["tool-call-end"]),
    "citation-start": Route(OTHER, CohereChecker._indexed, EVENTS["citation-start"]),
    "citation-end": Route(OTHER, CohereChecker._indexed, EVENTS["citation-end"]),
    "message-end": Route(TERMINAL, CohereChecker._message_end, EVENTS["message-end"]),
    "debug": Route(OTHER, shape=EVENTS["debug"]),
}
#: The event types the SDK lists.
EVENT_TYPES: Final = frozenset(CohereChecker.ROUTES)
#: The data the client skips or stops at, unparsed.
CohereChecker.SENTINELS = {
    "": Route(SKIPPED, name="empty data"),
    "[DONE]": Route(DONE, CohereChecker._done),
}


# -- auto-detection ----------------------------------------------------------------------

#: Types whose hyphenated names no other built-in protocol uses.
_ONLY_COHERE: Final = EVENT_TYPES - {"debug"}


def _named_as_only_cohere(event: Event, payload: object) -> bool:
    return event.event in _ONLY_COHERE


def _typed_as_only_cohere(event: Event, payload: object) -> bool:
    if type(payload) is not dict:
        return False
    kind = payload.get("type")
    return type(kind) is str and kind in _ONLY_COHERE


SPEC: ProtocolSpec = ProtocolSpec(
    name=CohereChecker.name,
    checker=CohereChecker,
    summary="Cohere v2 chat streaming (`/v2/chat`), ending in `message-end`",
    paths=(Signal(35, lambda path: path.endswith("/v2/chat")),),
    events=(Signal(12, _named_as_only_cohere), Signal(65, _typed_as_only_cohere)),
    event_names=EVENT_TYPES,
)
