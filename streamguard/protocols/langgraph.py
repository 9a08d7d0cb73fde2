"""LangGraph Platform / Agent Server run streaming (``langgraph-api``, a Starlette app):
``POST /runs/stream``, ``POST /threads/{id}/runs/stream`` and the join
``GET /threads/{id}/runs/{run_id}/stream``; LangServe's ``/stream`` endpoints speak the same
framing.

Every event is named after the stream mode that produced it and carries JSON data. A run's
stream opens with ``metadata`` (``{"run_id": ..., "attempt": 1}``; a retried run sends it
again with the next attempt), then ``values``, ``updates``, ``messages`` (or
``messages/partial``, ``messages/complete``, ``messages/metadata``), ``custom``, ``debug``,
``events``, ``tasks``, ``checkpoints``, ``tools``, ``lifecycle``, ``feedback``, each
optionally suffixed ``|<namespace>`` for a subgraph (``updates|agent:1f2e``). A failed run
ends with ``error`` (``{"error": <type>, "message": ...}``). The server writes CR LF frames
(``json_to_sse``), an ``id:`` line on resumable runs and a ``: heartbeat`` comment every five
seconds; current servers just end the body when the run ends, while older ones and LangServe
send ``end`` (LangServe's chunks are named ``data``).

The official clients (``langgraph-sdk``'s ``runs.stream``, the JS SDK's ``useStream``) parse
every event's data as JSON (data that is not JSON raises), take the run id from
``metadata``, treat ``end`` and ``error`` as the run's end, and hand other names to the
caller, who dispatches on the mode.

Theory of operation
-------------------

The lifecycle kinds are ``metadata``, the terminal (``end``), the in-band error (``error``)
and any other event, classified by the event's name alone. A run's stream (a POST) must open
with ``metadata``: another first event is ``metadata_not_first`` (once; the stream is then
checked as if it had come). A join (a GET) or a resumption (``Last-Event-ID``) starts mid-run
and owes no ``metadata``, so the checker reads the request's head. After ``end`` another
``end`` is ``duplicate_terminal`` and any other event ``event_after_terminal``; after
``error``, any event is ``event_after_terminal``. The body's end is the stream's end: the
protocol has no terminal the current server sends, so a body that ends is ``completed``
(the SDK itself cannot tell a finished run from a cut one without asking the server).

The payload handlers check that data is JSON (``invalid_json``; empty or blank data reads as
null and is clean), that ``metadata`` is an object with a string ``run_id``
(``schema_mismatch``), and that the name, before its namespace, is a stream mode the server
defines (``unknown_event_type``, info: each distinct name once, at most
``MAX_UNKNOWN_NAMES`` per stream).

The lifecycle is the table ``LIFECYCLE``, printed in ``docs/lifecycles.md`` (generated
from the table, so the page cannot drift from the machine).

Bounded state: the phase, a few flags and at most ``MAX_UNKNOWN_NAMES`` unknown names
reported (each kept by the engine, a long one as a digest). Messages show the documented
names as they are and any other by size and hash.

Under ``protocol="auto"`` (``SPEC``): a path ending ``/runs/stream`` or ``/runs/<id>/stream``,
or a first event named ``metadata`` whose data carries a ``run_id`` (or, later in rank, one
named after a mode only LangGraph uses: ``values``, ``updates``, ``checkpoints``,
``messages/partial``, ``messages/complete``, ``messages/metadata``, namespaced or not).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from streamguard import rules
from streamguard.protocols.engine import (
    END,
    ERROR,
    NO_PAYLOAD,
    NOT_JSON_DATA,
    OTHER,
    STAY,
    TERMINAL,
    Checker,
    EventFindings,
    Lifecycle,
    ProtocolSpec,
    Route,
    Signal,
    UnknownTypes,
    broken,
    event_name,
    go,
    not_json,
    parse_json,
    sealed_rows,
    type_name,
)
from streamguard.report import Severity
from streamguard.rule_docs._base import rule_doc
from streamguard.rules import Rule
from streamguard.sse import Event

__all__ = [
    "EVENT_NAMES",
    "LIFECYCLE",
    "MAX_UNKNOWN_NAMES",
    "METADATA_NOT_FIRST",
    "SPEC",
    "LangGraphChecker",
]

#: Distinct unknown event names reported per stream.
MAX_UNKNOWN_NAMES = 16

METADATA_NOT_FIRST = Rule(
    "metadata_not_first",
    Severity.ERROR,
    "A LangGraph run's stream did not open with the metadata event; clients never learn "
    "the run id.",
)

#: The stream modes ``langgraph-api`` names events after (``StreamMode``, and what
#: ``messages`` expands to), its ``metadata``, ``feedback``, ``error`` and the legacy ``end``,
#: and LangServe's ``data``.
EVENT_NAMES: Final = frozenset(
    {
        "metadata",
        "values",
        "updates",
        "messages",
        "messages/partial",
        "messages/complete",
        "messages/metadata",
        "custom",
        "debug",
        "events",
        "tasks",
        "checkpoints",
        "tools",
        "lifecycle",
        "feedback",
        "error",
        "end",
        "data",
    }
)
#: Names only LangGraph uses: one of them first decides ``auto`` (after stronger signals).
_ONLY_LANGGRAPH: Final = frozenset(
    {
        "values",
        "updates",
        "checkpoints",
        "messages/partial",
        "messages/complete",
        "messages/metadata",
    }
)

# -- the lifecycle ---------------------------------------------------------------------

#: The ``metadata`` event.
METADATA: Final = "metadata"
_AWAITING, _RUNNING, _ENDED, _ERRORED = "awaiting_metadata", "running", "ended", "errored"
_MISSING = "event {index} ({name}) is the first event; a run's stream opens with metadata"

LIFECYCLE: Final = Lifecycle(
    phases={
        _AWAITING: "a run's stream (a POST) before its first event: metadata is owed",
        _RUNNING: "the run streams (a join or a resumption starts here); the body's end ends it",
        _ENDED: "the legacy end event arrived",
        _ERRORED: "the error event arrived: the run failed",
    },
    kinds={METADATA: "the metadata event (the run id and attempt)"},
    initial=_AWAITING,
    table={
        (_AWAITING, METADATA): go(_RUNNING),
        (_AWAITING, TERMINAL): broken(METADATA_NOT_FIRST, _MISSING, _ENDED),
        (_AWAITING, ERROR): go(_ERRORED),
        (_AWAITING, OTHER): broken(METADATA_NOT_FIRST, _MISSING, _RUNNING),
        (_AWAITING, END): STAY,
        (_RUNNING, METADATA): STAY,
        (_RUNNING, TERMINAL): go(_ENDED),
        (_RUNNING, ERROR): go(_ERRORED),
        (_RUNNING, OTHER): STAY,
        (_RUNNING, END): STAY,
        **sealed_rows(
            _ENDED,
            _ERRORED,
            duplicate="repeats the end event sent as event {terminal}",
            after_terminal="follows the end event sent as event {terminal}",
            after_error="follows the error event sent as event {error}; the client ended the "
            "run there",
        ),
    },
    ended=frozenset({_ENDED}),
    errored=frozenset({_ERRORED}),
    sealed=frozenset({_ENDED, _ERRORED}),
)

_KINDS: Final = {"metadata": METADATA, "end": TERMINAL, "error": ERROR}


def _mode(name: str) -> str:
    """An event name without its ``|<namespace>`` suffix."""
    return name.partition("|")[0]


class LangGraphChecker(Checker):
    """Checks one LangGraph run stream; see the module docstring."""

    __slots__ = ()

    name = "langgraph"
    has_terminal = False
    LIFECYCLE = LIFECYCLE
    JUDGES_END_UNSAMPLED = True
    # (The kind is the event's name, which no escape spells.)
    END_HINTS = (b"end", b"error")
    RAISES = frozenset({rules.INVALID_JSON, rules.SCHEMA_MISMATCH, rules.UNKNOWN_EVENT_TYPE})
    UNKNOWN_TYPES = UnknownTypes(
        ": event name {shown} is no LangGraph stream mode; clients that dispatch on the mode "
        "drop it (each unknown name is reported once)",
        limit=MAX_UNKNOWN_NAMES,
    )

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        if request is not None and (
            request.get("http_method") == "GET" or request.get("last_event_id") is True
        ):
            self.phase = _RUNNING  # a join or a resumption starts mid-run

    def end_kind(self, event: Event, index: int) -> str | None:
        # As ``check_event``: the name's mode is the kind; metadata changes nothing about
        # where an end or an error leads.
        kind = _KINDS.get(_mode(event.event))
        return kind if kind in (TERMINAL, ERROR) else None

    def sealed_kind(self, event: Event) -> tuple[str, str | None]:
        return _KINDS.get(_mode(event.event), OTHER), None

    def classify(self, event: Event, found: EventFindings) -> Route | None:
        # The kind is the event's name (its mode, before any ``|<namespace>``), never its
        # data, which may be empty (null to the client): every route's handler reads it.
        name = event.event
        found.name = event_name(name)
        found.payload = NO_PAYLOAD
        route = self.ROUTES.get(_mode(name))
        if route is None:
            found.type = name
            return _UNKNOWN_MODE
        return route

    def _data(self, payload: dict[str, Any], found: EventFindings) -> object:
        """The event's data as the client parses it (``invalid_json`` when it cannot):
        empty or blank data is null; ``NOT_JSON_DATA`` when it is not JSON."""
        data = found.event.data
        if not data or data.isspace():
            return None  # the client reads it as null
        try:
            return parse_json(data)
        except ValueError as exc:
            found.add(rules.INVALID_JSON, f": {not_json(exc, data)}")
            return NOT_JSON_DATA

    def _metadata(self, payload: dict[str, Any], found: EventFindings) -> None:
        value = self._data(payload, found)
        if value is None or value is NOT_JSON_DATA:
            return
        if type(value) is not dict or type(value.get("run_id")) is not str:
            what = (
                f"a JSON {type_name(value)}"
                if type(value) is not dict
                else "an object without a string `run_id`"
            )
            found.add(
                rules.SCHEMA_MISMATCH,
                f" (metadata): data is {what}; the client takes the run id from it",
            )

    def _unknown_mode(self, payload: dict[str, Any], found: EventFindings) -> None:
        self.report_unknown_type(found)
        self._data(payload, found)


_C = LangGraphChecker
#: Each event name the server sends (its mode): its lifecycle kind and handler.
_C.ROUTES = {
    name: Route(_KINDS.get(name, OTHER), _C._metadata if name == "metadata" else _C._data)
    for name in sorted(EVENT_NAMES)
}
#: A name that is no mode: its step as any event's, then the finding and the data's check.
_UNKNOWN_MODE: Final = Route(OTHER, _C._unknown_mode)


# -- auto-detection ----------------------------------------------------------------------


def _runs_stream_path(path: str) -> bool:
    """``.../runs/stream`` (a new run) or ``.../runs/<id>/stream`` (a join)."""
    parts = path.split("/")
    if len(parts) < 3 or parts[-1] != "stream":
        return False
    return parts[-2] == "runs" or (len(parts) >= 4 and parts[-3] == "runs")


def _is_run_metadata(event: Event, payload: object) -> bool:
    return event.event == "metadata" and type(payload) is dict and "run_id" in payload


def _named_after_a_mode(event: Event, payload: object) -> bool:
    return _mode(event.event) in _ONLY_LANGGRAPH


SPEC: ProtocolSpec = ProtocolSpec(
    name=LangGraphChecker.name,
    checker=LangGraphChecker,
    summary="LangGraph Platform run streams (`/runs/stream`): events named after stream modes",
    paths=(Signal(45, _runs_stream_path),),
    events=(Signal(15, _is_run_metadata), Signal(95, _named_after_a_mode)),
    event_names=EVENT_NAMES,
    reads_request_head=True,
    rules=(METADATA_NOT_FIRST,),
    rule_docs=(
        rule_doc(
            "metadata_not_first",
            meaning="""The first event of a run's stream (a POST to `/runs/stream` or
                `/threads/{id}/runs/stream`) is not `metadata`, the event that carries the
                run's `run_id` and attempt. A join (GET) or a stream resumed with
                `Last-Event-ID` starts mid-run and is not judged. Reported once; the rest of
                the stream is checked as if it had come.""",
            clients="""The JS SDK's `useStream` and the Python SDK's callers take the run id
                from `metadata`: without it they cannot join, cancel or resume the run, and
                a reconnect after a dropped connection has nothing to reconnect to.""",
            example="""
                event: values
                data: {"messages": []}
                """,
            fix="""Send `metadata` first (`{"run_id": ..., "attempt": 1}`), as langgraph-api
                does; a proxy that re-streams a run must not drop it.""",
        ),
    ),
)
