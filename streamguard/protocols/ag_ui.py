"""AG-UI, the Agent User Interaction protocol (``ag-ui-protocol`` on PyPI, ``@ag-ui/client``
on npm), over SSE: each event is ``data: <one JSON object>`` typed by an upper-case ``type``.

A run opens with ``RUN_STARTED`` and ends with ``RUN_FINISHED`` or ``RUN_ERROR``; between
them text messages (``TEXT_MESSAGE_START``/``CONTENT``/``END``), tool calls
(``TOOL_CALL_START``/``ARGS``/``END``), reasoning (``REASONING_START``/``END`` around
``REASONING_MESSAGE_START``/``CONTENT``/``END``), steps (``STEP_STARTED``/``FINISHED``) and
subagents (``SUBAGENT_STARTED``/``FINISHED``/``ERROR``) open and close by id, and state
arrives as ``STATE_SNAPSHOT`` and JSON Patch ``STATE_DELTA``. The Python SDK's
``EventEncoder`` writes ``data: <json>`` and a blank line with LF endings.

What the official client does, and so what is checked (``@ag-ui/client`` 1.0.0,
``HttpAgent.runAgent``): it splits the body into events on LF LF only, parses each data as
JSON (a frame that is not a JSON object with a string ``type`` errors the run), drops an
event type it does not know with a console warning, translates the deprecated
``THINKING_*`` events and a few ``null`` fields (``rawEvent``, ``parentMessageId``,
``RUN_FINISHED.result`` and ``outcome``) in a compatibility layer, validates each event
with the core zod schema (``EventSchema``), expands the ``*_CHUNK`` shorthands into start,
content and end events (``transformChunks``) and then verifies the sequence
(``verifyEvents``): the first event must be ``RUN_STARTED`` (or ``RUN_ERROR``), nothing but
a new ``RUN_STARTED`` may follow ``RUN_ERROR``, nothing but a new ``RUN_STARTED`` or a
``RUN_ERROR`` may follow ``RUN_FINISHED``, a start may not reuse an open id, a content,
args or end event needs its id open, and ``RUN_FINISHED`` needs everything closed. Each of
those is an ``AGUIError`` that ends the run.

Theory of operation
-------------------

Each event is parsed once and dispatched on ``type``. The lifecycle kinds are ``start``
(``RUN_STARTED``), the terminal (``RUN_FINISHED``), the in-band error (``RUN_ERROR``) and
any other event; an unknown type takes no part in it, as the client drops it before
verifying. A stream may carry several runs one after another (the client resets its
records at each new ``RUN_STARTED``, "a replay of a stored thread being the common case"),
so the terminal and error phases are not sealed: a new run reopens the stream. The
stream's ``terminal_index`` and ``error_index`` stay those of the first run that ended
(the engine records them once), so a stream whose second run is cut short reports
``missing_terminal`` but keeps the outcome its first run earned; the engine has no way
yet to take a terminal back.

The payload handlers check the shape (``EVENT_SHAPES``, read from the 1.0 ``EventSchema``:
required fields, their types, integer ``timestamp``, an object ``metadata``, no ``null``
where the schema has an optional field and the compatibility layer does not translate it)
and the ids: ``id_already_open``, ``id_not_open`` and, at ``RUN_FINISHED``,
``id_not_closed``, for messages, tool calls, reasoning messages and spans, steps (by
subagent lane and name, as the client keys them) and subagents. A run's ``usage`` list holds
``TokenUsage`` objects (each entry checked). The deprecated ``THINKING_*`` events carry no
id: the compatibility layer mints a fresh one at each ``THINKING_START`` /
``THINKING_TEXT_MESSAGE_START`` and hands the last one to the next content or end
(``_THINKING``), so a replayed opener leaves a span or message open at ``RUN_FINISHED``,
and a continuation with no opener left is ``id_not_open``. A ``TEXT_MESSAGE_START`` or
``TOOL_CALL_START`` (or a chunk shorthand that opens one) for an id that already started
and ended in this run is ``id_already_open`` too: the verifier lets it through, but the
client finds the message or the call it already holds by that id and appends the new
content or arguments to it (two tool calls' arguments run together into one invalid JSON
document). A ``TOOL_CALL_RESULT`` for a call that no ``TOOL_CALL_START`` (or chunk) of the
stream started, in any of its runs, and that the run's echoed input
(``RUN_STARTED.input.messages``) does not hold is ``tool_result_without_call`` (info: the
client keeps the result as a tool message answering no call, which model APIs refuse in the
next request; but a run that resumes an interrupted one may answer a call of the client's
history, which the stream cannot see). ``RUN_FINISHED`` (and a ``RUN_ERROR`` that carries
them) whose ``runId`` or ``threadId`` differs from its ``RUN_STARTED``'s is
``run_id_mismatch`` (a warning: the client does not compare them; code that tracks runs by
id does). The chunk shorthands are
followed as ``transformChunks`` expands them: a chunk with a new id opens a message or a
call in its lane (the event's ``subagentRunId``), later chunks of that id continue it, and
the next event of another kind (or a run boundary) closes it.

``STATE_DELTA`` and ``ACTIVITY_DELTA`` patches are checked as the 1.0 schema types them
(``invalid_state_patch``: an operation that is not RFC 6902, a path that is not an RFC
6901 pointer; the client rejects the event and the run fails), and a ``STATE_DELTA``
before any ``STATE_SNAPSHOT`` in the stream is noted once (``state_delta_before_snapshot``,
info: legitimate when the client's own state, sent in ``RunAgentInput``, is the baseline;
a patch to a path that is not there is dropped with a console warning).

CR LF framing: the checker sees parsed events, not line endings, so it measures them. An
event that is exactly ``data: <one line>`` ends 6 + len(data) bytes after its offset,
followed by its two line endings: 2 bytes of gap to the next event with LF framing, 4 with
CR LF. The first pair of such events with a gap of 2 or 4 decides; other gaps (a comment,
``data:`` without the space) wait for the next pair. Known blind spots: CR-only framing (a
gap of 2, like LF), a stream of one event (the client reads that one too), and LF framing
with two stray blank lines after the first event (a gap of 4, reported as CR LF).

The lifecycle is the table ``LIFECYCLE``, printed in ``docs/lifecycles.md`` (generated
from the table, so the page cannot drift from the machine).

Bounded state: at most ``MAX_OPEN_IDS`` open ids of each kind and ``MAX_LANES`` subagent
lanes are tracked (ids longer than 64 characters by a digest); past that, the checks that
need what was not kept are skipped. At most ``MAX_UNKNOWN_TYPES`` distinct unknown types
are reported per stream. Messages name event types the protocol defines as they are and
everything else from the wire (ids, names, unknown types) by size and hash.

Under ``protocol="auto"`` (``SPEC``): a path segment ``ag-ui``, ``agui``, ``ag_ui`` or
``awp`` (the quickstart's endpoint), or a first event whose ``type`` is an AG-UI event type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from streamguard import _wire, rules
from streamguard.protocols._entities import IdSet, OpenIds, id_key, shown
from streamguard.protocols.engine import (
    ANY_VALUE,
    ARRAY,
    BOOLEAN,
    END,
    ERROR,
    INTEGER,
    OBJECT,
    OTHER,
    STAY,
    STRING_OR_ARRAY,
    TERMINAL,
    Checker,
    EventFindings,
    Field,
    Handler,
    Holes,
    Lifecycle,
    ProtocolSpec,
    Route,
    Signal,
    UnknownTypes,
    broken,
    go,
    opt,
    req,
    sealed_rows,
    shape_problem,
    type_name,
)
from streamguard.sse import Event

__all__ = [
    "EVENT_SHAPES",
    "EVENT_TYPES",
    "LIFECYCLE",
    "MAX_LANES",
    "MAX_OPEN_IDS",
    "MAX_UNKNOWN_TYPES",
    "SPEC",
    "AGUIChecker",
    "is_ag_ui_event",
]

#: Open ids tracked per kind (messages, tool calls, reasoning, steps, subagents).
MAX_OPEN_IDS = 256
#: Subagent lanes whose chunk streams are followed.
MAX_LANES = 64
#: Distinct unknown event types reported per stream.
MAX_UNKNOWN_TYPES = 16

_ROLES = ("developer", "system", "assistant", "user")
#: Fields every event may carry (``BaseEvent``).
_EVENT_BASE_FIELDS = (
    opt("timestamp", INTEGER),
    opt("rawEvent", ANY_VALUE),
    opt("metadata", OBJECT),
    opt("subagentRunId"),
)
_PARENT = opt("parentMessageId", nullable=True)

#: Event type -> its own fields, from the 1.0 ``EventSchema`` (``@ag-ui/core``); the
#: deprecated ``THINKING_*`` events as the compatibility layer reads them.
EVENT_SHAPES: Final[dict[str, tuple[Field, ...]]] = {
    "RUN_STARTED": (
        req("threadId"),
        req("runId"),
        opt("protocolVersion"),
        opt("parentRunId"),
        opt("input", OBJECT),
    ),
    "RUN_FINISHED": (
        req("threadId"),
        req("runId"),
        opt("result", ANY_VALUE),
        opt("outcome", OBJECT, nullable=True),
        opt("usage", ARRAY),
    ),
    "RUN_ERROR": (req("message"), opt("code"), opt("usage", ARRAY)),
    "STEP_STARTED": (req("stepName"),),
    "STEP_FINISHED": (req("stepName"),),
    "TEXT_MESSAGE_START": (req("messageId"), opt("role", values=_ROLES), opt("name")),
    "TEXT_MESSAGE_CONTENT": (req("messageId"), req("delta")),
    "TEXT_MESSAGE_END": (req("messageId"),),
    "TEXT_MESSAGE_CHUNK": (
        opt("messageId"),
        opt("role", values=_ROLES),
        opt("delta"),
        opt("name"),
    ),
    "TOOL_CALL_START": (req("toolCallId"), req("toolCallName"), _PARENT),
    "TOOL_CALL_ARGS": (req("toolCallId"), req("delta")),
    "TOOL_CALL_END": (req("toolCallId"),),
    "TOOL_CALL_CHUNK": (opt("toolCallId"), opt("toolCallName"), _PARENT, opt("delta")),
    "TOOL_CALL_RESULT": (
        req("messageId"),
        req("toolCallId"),
        req("content", STRING_OR_ARRAY),
        opt("role", values=("tool",)),
    ),
    "STATE_SNAPSHOT": (req("snapshot", ANY_VALUE),),
    "STATE_DELTA": (req("delta", ARRAY),),
    "MESSAGES_SNAPSHOT": (req("messages", ARRAY),),
    "ACTIVITY_SNAPSHOT": (
        req("messageId"),
        req("activityType"),
        req("content", OBJECT),
        opt("replace", BOOLEAN),
    ),
    "ACTIVITY_DELTA": (req("messageId"), req("activityType"), req("patch", ARRAY)),
    "RAW": (req("event", ANY_VALUE), opt("source")),
    "CUSTOM": (req("name"), req("value", ANY_VALUE)),
    "REASONING_START": (req("messageId"),),
    "REASONING_MESSAGE_START": (req("messageId"), req("role", values=("reasoning",))),
    "REASONING_MESSAGE_CONTENT": (req("messageId"), req("delta")),
    "REASONING_MESSAGE_END": (req("messageId"),),
    "REASONING_MESSAGE_CHUNK": (opt("messageId"), opt("delta")),
    "REASONING_END": (req("messageId"),),
    "REASONING_ENCRYPTED_VALUE": (
        req("subtype", values=("tool-call", "message")),
        req("entityId"),
        req("encryptedValue"),
    ),
    "SUBAGENT_STARTED": (
        req("subagentRunId"),
        req("name"),
        opt("description"),
        opt("parentSubagentRunId"),
        opt("parentToolCallId"),
        opt("parentMessageId"),
    ),
    "SUBAGENT_FINISHED": (req("subagentRunId"), opt("result", ANY_VALUE), opt("outcome", OBJECT)),
    "SUBAGENT_ERROR": (req("subagentRunId"), req("message"), opt("code")),
    "THINKING_START": (opt("title"),),
    "THINKING_END": (),
    "THINKING_TEXT_MESSAGE_START": (),
    "THINKING_TEXT_MESSAGE_CONTENT": (req("delta"),),
    "THINKING_TEXT_MESSAGE_END": (),
}
#: Every event type the client reads: what a message may quote.
EVENT_TYPES: Final = frozenset(EVENT_SHAPES)
#: An entry of ``RUN_FINISHED.usage`` / ``RUN_ERROR.usage`` (``TokenUsageSchema``).
_TOKEN_USAGE_FIELDS: Final[tuple[Field, ...]] = (
    opt("provider"),
    opt("model"),
    *(
        opt(name, INTEGER)
        for name in (
            "inputTokens",
            "outputTokens",
            "totalTokens",
            "reasoningTokens",
            "cachedInputTokens",
            "cacheWriteInputTokens",
        )
    ),
)
#: The deprecated ``THINKING_*`` events the client's compatibility layer translates to
#: ``REASONING_*`` -> (the kind of thing, whether it opens it, whether it ends it). The
#: layer mints a fresh id at each opener and gives the next content or end the id of the
#: last opener (forgotten at its end); with no opener left, it mints one nothing opened.
_THINKING: Final[dict[str, tuple[str, bool, bool]]] = {
    "THINKING_START": ("span", True, False),
    "THINKING_END": ("span", False, True),
    "THINKING_TEXT_MESSAGE_START": ("reasoning", True, False),
    "THINKING_TEXT_MESSAGE_CONTENT": ("reasoning", False, False),
    "THINKING_TEXT_MESSAGE_END": ("reasoning", False, True),
}
_THINKING_OPENER: Final[dict[str, str]] = {
    "span": "THINKING_START",
    "reasoning": "THINKING_TEXT_MESSAGE_START",
}
#: The current ``THINKING_*`` id of a kind after a new run: still the compatibility
#: layer's (it lives as long as the client's run call), no longer open to the verifier.
_FORGOTTEN: Final[bytes] = b""
#: ``RUN_FINISHED.outcome.type`` and ``SUBAGENT_FINISHED.outcome.type`` values.
_RUN_OUTCOMES = frozenset({"success", "interrupt", "cancelled"})
_SUBAGENT_OUTCOMES = frozenset({"success", "suspended"})
#: RFC 6902 operations, and RFC 6901 pointers: "" or "/"-prefixed tokens with ~ escaped.
_PATCH_OPS = frozenset({"add", "remove", "replace", "move", "copy", "test"})
_POINTER = re.compile(r"(/([^/~]|~[01])*)*")
_PATH_SEGMENTS = frozenset({"ag-ui", "agui", "ag_ui", "awp"})

# -- the lifecycle ---------------------------------------------------------------------

#: ``RUN_STARTED``.
START: Final = "start"
_IDLE, _UNANNOUNCED = "idle", "unannounced"
_RUNNING, _FINISHED, _ERRORED = "running", "finished", "errored"
_NAMED = "event {index} ({name}) "

LIFECYCLE: Final = Lifecycle(
    phases={
        _IDLE: "no run has started",
        _UNANNOUNCED: "events came before RUN_STARTED (reported once); the rest is checked",
        _RUNNING: "a run is active",
        _FINISHED: "RUN_FINISHED arrived; only a new RUN_STARTED (or RUN_ERROR) follows",
        _ERRORED: "RUN_ERROR arrived; only a new RUN_STARTED follows",
    },
    kinds={START: "RUN_STARTED"},
    initial=_IDLE,
    table={
        (_IDLE, START): go(_RUNNING),
        (_IDLE, TERMINAL): broken(
            rules.MISSING_RUN_STARTED, _NAMED + "ends a run that never started", _FINISHED
        ),
        (_IDLE, ERROR): go(_ERRORED),
        (_IDLE, OTHER): broken(
            rules.MISSING_RUN_STARTED,
            _NAMED + "is the first event; a run opens with RUN_STARTED",
            _UNANNOUNCED,
        ),
        (_IDLE, END): broken(
            rules.MISSING_TERMINAL,
            "the body ended after {index} event(s) and {offset} byte(s) without a run "
            "(no RUN_STARTED, RUN_FINISHED or RUN_ERROR)",
        ),
        (_UNANNOUNCED, START): go(_RUNNING),
        (_UNANNOUNCED, TERMINAL): go(_FINISHED),
        (_UNANNOUNCED, ERROR): go(_ERRORED),
        (_UNANNOUNCED, OTHER): STAY,
        (_UNANNOUNCED, END): broken(
            rules.MISSING_TERMINAL,
            "the body ended after {index} event(s) and {offset} byte(s) without RUN_FINISHED "
            "or RUN_ERROR",
        ),
        (_RUNNING, START): broken(
            rules.DUPLICATE_RUN_STARTED, _NAMED + "starts a run while one is active"
        ),
        (_RUNNING, TERMINAL): go(_FINISHED),
        (_RUNNING, ERROR): go(_ERRORED),
        (_RUNNING, OTHER): STAY,
        (_RUNNING, END): broken(
            rules.MISSING_TERMINAL,
            "the body ended after {index} event(s) and {offset} byte(s) with a run still "
            "active (no RUN_FINISHED or RUN_ERROR)",
        ),
        # A run that ended is sealed but for a new run (or, after RUN_FINISHED, its error).
        **sealed_rows(
            _FINISHED,
            _ERRORED,
            duplicate="repeats the RUN_FINISHED sent as event {terminal}",
            after_terminal="follows the RUN_FINISHED sent as event {terminal}",
            after_error="follows the RUN_ERROR sent as event {error}",
        ),
        (_FINISHED, START): go(_RUNNING),
        (_FINISHED, ERROR): go(_ERRORED),
        (_ERRORED, START): go(_RUNNING),
    },
    ended=frozenset({_FINISHED}),
    errored=frozenset({_ERRORED}),
    sealed=frozenset(),
)

_KINDS = {"RUN_STARTED": START, "RUN_FINISHED": TERMINAL, "RUN_ERROR": ERROR}
#: Events the client's chunk expansion passes without closing an open chunk stream.
_KEEP_CHUNKS = frozenset(
    {"RAW", "ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA", "REASONING_ENCRYPTED_VALUE", "SUBAGENT_STARTED"}
)
#: Events that close every lane's chunk stream.
_CLOSE_ALL = frozenset({"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "MESSAGES_SNAPSHOT"})
#: Chunk shorthand -> (the kind of thing it streams, its id field).
_CHUNKS = {
    "TEXT_MESSAGE_CHUNK": ("text", "messageId"),
    "TOOL_CALL_CHUNK": ("tool", "toolCallId"),
    "REASONING_MESSAGE_CHUNK": ("reasoning", "messageId"),
}
#: Opening type -> (set, id field, what it is); content and end types -> the same.
_OPENS = {
    "TEXT_MESSAGE_START": ("text", "messageId"),
    "TOOL_CALL_START": ("tool", "toolCallId"),
    "REASONING_MESSAGE_START": ("reasoning", "messageId"),
    "REASONING_START": ("span", "messageId"),
}
_CONTINUES = {
    "TEXT_MESSAGE_CONTENT": ("text", "messageId", False),
    "TEXT_MESSAGE_END": ("text", "messageId", True),
    "TOOL_CALL_ARGS": ("tool", "toolCallId", False),
    "TOOL_CALL_END": ("tool", "toolCallId", True),
    "REASONING_MESSAGE_CONTENT": ("reasoning", "messageId", False),
    "REASONING_MESSAGE_END": ("reasoning", "messageId", True),
    "REASONING_END": ("span", "messageId", True),
}
#: The kinds of thing the client keeps in its message list by id, and what of a second
#: one it appends to the first.
_MERGED: Final[dict[str, str]] = {"text": "content", "tool": "arguments"}
_WHAT = {
    "text": "text message",
    "tool": "tool call",
    "reasoning": "reasoning message",
    "span": "reasoning span",
    "step": "step",
    "subagent": "subagent",
}

#: The events that carry one more piece of an open thing's text, and where it is.
_PIECES: Final = frozenset({"TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS", "REASONING_MESSAGE_CONTENT"})
_PIECE_TEXT: Final = Holes((("delta",),))

#: Bytes of an LF-framed simple event after its data line (the two line endings).
_LF_GAP, _CRLF_GAP = 2, 4
_DATA_PREFIX = len("data: ")

Lane = str | bytes | None


class AGUIChecker(Checker):
    """Checks one AG-UI event stream; see the module docstring."""

    __slots__ = (
        "_calls",
        "_end_of_simple",
        "_ended",
        "_framing_decided",
        "_ids",
        "_lanes_overflowed",
        "_pending",
        "_run_ids",
        "_snapshot_seen",
        "_thinking",
        "_thinking_opened",
    )

    name = "ag_ui"
    REPEAT_READS_EVENT = False  # (its repeat_event reads the token and values only)
    LIFECYCLE = LIFECYCLE
    NO_TYPE = (
        ": field `type` is missing, empty or not a string; the client ends the run on an "
        "event without a type"
    )
    # The client drops an unknown type before verifying: it takes no part in the lifecycle.
    UNKNOWN_TYPES = UnknownTypes(
        ": event type {shown} is not an AG-UI event type; the client drops it with a "
        "console warning (each unknown type is reported once)",
        kind=None,
        limit=MAX_UNKNOWN_TYPES,
    )
    RAISES = frozenset(
        {
            rules.INVALID_JSON,
            rules.SCHEMA_MISMATCH,
            rules.UNKNOWN_EVENT_TYPE,
            rules.ID_NOT_OPEN,
            rules.ID_ALREADY_OPEN,
            rules.ID_NOT_CLOSED,
            rules.STATE_DELTA_BEFORE_SNAPSHOT,
            rules.INVALID_STATE_PATCH,
            rules.CRLF_FRAMING,
            rules.TOOL_RESULT_WITHOUT_CALL,
            rules.RUN_ID_MISMATCH,
        }
    )

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        self._ids = OpenIds(_WHAT, MAX_OPEN_IDS, "the client throws")
        #: Lane -> (kind, key) of the chunk stream the client's expansion holds open.
        self._pending: dict[Lane, tuple[str, str | bytes]] = {}
        self._lanes_overflowed = False
        self._snapshot_seen = False
        #: Where the next event starts if the last one was ``data: <line>`` with LF framing
        #: minus the 2 line-ending bytes (None: the last event was not such an event).
        self._end_of_simple: int | None = None
        self._framing_decided = False
        #: Kind ("span", "reasoning") -> the key of the id the compatibility layer would
        #: give the next ``THINKING_*`` continuation or end (absent: none, it mints one).
        self._thinking: dict[str, str | bytes] = {}
        self._thinking_opened = 0  # THINKING_* openers so far: their keys' serial numbers
        #: Kind ("text", "tool") -> the ids that started and ended in this run: the client
        #: holds a message or a call by each, and merges a second start into it.
        self._ended: dict[str, IdSet] = {}
        #: Tool calls started in any run of the stream, or held by a run's echoed input.
        self._calls = IdSet(MAX_OPEN_IDS)
        #: The current run's (threadId, runId) keys, as its RUN_STARTED gave them.
        self._run_ids: tuple[str | bytes | None, str | bytes | None] | None = None

    # -- one event ------------------------------------------------------------------------

    def classify(self, event: Event, found: EventFindings) -> Route | None:
        # The client splits the body into events before it reads one: the framing is
        # judged first, on every event until it is decided.
        if not self._framing_decided:
            self._check_framing(found)
        return super().classify(event, found)

    def unknown_type(self, value: str, found: EventFindings) -> Route | None:
        # An empty type ends the run in the client as a missing one does.
        if not value:
            found.add(rules.SCHEMA_MISMATCH, self.NO_TYPE)
            found.step(OTHER, "no type")
            return None
        return super().unknown_type(value, found)

    # -- the handlers, one per kind of event -------------------------------------------------

    def _passed_on(self, payload: dict[str, Any], found: EventFindings) -> None:
        """What every event does first: the client's chunk expansion passes it on."""
        self._close_chunk_streams(payload, found.type)

    def _on_run_started(self, payload: dict[str, Any], found: EventFindings) -> None:
        phase = found.phase
        if phase in (_FINISHED, _ERRORED):
            self._new_run()
        if phase != _RUNNING:  # (a nested one is duplicate_run_started)
            self._run_started(payload)
        self._passed_on(payload, found)

    def _on_run_finished(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._passed_on(payload, found)
        kind = found.type
        if not found.misshapen:
            problem = self._outcome_problem(payload, kind) or _usage_problem(payload.get("usage"))
            if problem is not None:
                found.add(rules.SCHEMA_MISMATCH, f" ({kind}): {problem}")
        if kind == "RUN_FINISHED":
            self._ids.check_closed(found, kind, "the run finished", "the client throws")
        self._check_run_ids(found, payload, kind)

    def _on_chunk(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._chunk(found, payload, found.type)  # (a chunk closes no chunk stream)

    def _on_open(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._passed_on(payload, found)
        kind = found.type
        what, field = _OPENS[kind]
        value = payload.get(field)
        if type(value) is str:
            self._open(found, what, value, id_key(value), kind)

    def _on_continue(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._passed_on(payload, found)
        kind = found.type
        what, field, closes = _CONTINUES[kind]
        value = payload.get(field)
        if type(value) is str:
            key = id_key(value)
            self._ids.need_open(found, what, value, key, kind, closes)
            if closes:
                self._end(what, key)
        if kind in _PIECES and not found.items and self._framing_decided:
            # One more piece of an open message or call's text changes nothing a rule
            # reads once the framing is decided (it is not checked again): the next one of
            # the same bytes, text aside, need not be parsed.
            self.repeatable(_PIECE_TEXT)

    def _on_tool_result(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._passed_on(payload, found)
        self._tool_result(found, payload.get("toolCallId"))

    def _on_step(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._passed_on(payload, found)
        kind = found.type
        name = payload.get("stepName")
        if type(name) is str:
            key = self._step_key(payload.get("subagentRunId"), name)
            if kind == "STEP_STARTED":
                self._ids.open(found, "step", name, key, kind)
            else:
                self._ids.need_open(found, "step", name, key, kind, True)

    def _on_subagent(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._passed_on(payload, found)
        kind = found.type
        if not found.misshapen:
            problem = self._outcome_problem(payload, kind)
            if problem is not None:
                found.add(rules.SCHEMA_MISMATCH, f" ({kind}): {problem}")
        run = payload.get("subagentRunId")
        if type(run) is str:
            if kind == "SUBAGENT_STARTED":
                self._ids.open(found, "subagent", run, id_key(run), kind)
            else:
                self._ids.need_open(found, "subagent", run, id_key(run), kind, True)

    def _on_thinking(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._passed_on(payload, found)
        self._legacy_thinking(found, found.type)

    def _on_state_snapshot(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._passed_on(payload, found)
        self._snapshot_seen = True

    def _on_state_delta(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._passed_on(payload, found)
        if not self._snapshot_seen:
            found.add(
                rules.STATE_DELTA_BEFORE_SNAPSHOT,
                " (STATE_DELTA): no STATE_SNAPSHOT came before it; it patches the state "
                "the client holds",
            )
        self._check_patch(found, payload.get("delta"), "STATE_DELTA")

    def _on_activity_delta(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._passed_on(payload, found)
        self._check_patch(found, payload.get("patch"), "ACTIVITY_DELTA")

    def _new_run(self) -> None:
        """A new run after one ended: the client forgets everything the last one opened."""
        self._ids.clear()
        self._pending.clear()
        self._lanes_overflowed = False
        self._thinking = dict.fromkeys(self._thinking, _FORGOTTEN)
        self._ended.clear()

    @staticmethod
    def _outcome_problem(payload: dict[str, Any], kind: str) -> str | None:
        if kind not in ("RUN_FINISHED", "SUBAGENT_FINISHED"):
            return None
        outcome = payload.get("outcome")
        if type(outcome) is not dict:
            return None
        allowed = _RUN_OUTCOMES if kind == "RUN_FINISHED" else _SUBAGENT_OUTCOMES
        value = outcome.get("type")
        if type(value) is str and value in allowed:  # (an object or a list is unhashable)
            return None
        listed = ", ".join(sorted(allowed))
        return f"field `outcome.type` is {_wire.token(value, ())}, not one of {listed}"

    # -- ids --------------------------------------------------------------------------------

    def _open(
        self, found: EventFindings, what: str, value: str, key: str | bytes, kind: str
    ) -> None:
        """A start (or a chunk that opens): a text message or a tool call that already
        started and ended in this run is merged into the first by the client."""
        ended = self._ended.get(what)
        if ended is not None and ended.known(key) is True:
            ended.discard(key)
            found.add(
                rules.ID_ALREADY_OPEN,
                f" ({kind}): {_WHAT[what]} {shown(value)} already started and ended in this "
                f"run; the client finds the {_WHAT[what]} it holds by that id and appends "
                f"this one's {_MERGED[what]} to it",
            )
        self._ids.open(found, what, value, key, kind)
        if what == "tool":
            self._calls.add(key)

    def _end(self, what: str, key: str | bytes) -> None:
        """The ``what`` thing kept by ``key`` ended: remembered when the client keys it."""
        if what not in _MERGED:
            return
        ended = self._ended.get(what)
        if ended is None:
            ended = self._ended[what] = IdSet(MAX_OPEN_IDS)
        ended.add(key)

    def _tool_result(self, found: EventFindings, call: object) -> None:
        if type(call) is not str or self._calls.known(id_key(call)) is not False:
            return
        found.add(
            rules.TOOL_RESULT_WITHOUT_CALL,
            f" (TOOL_CALL_RESULT): tool call {shown(call)} was started by no event of this "
            "stream and is not in the run's echoed input; unless the client's history holds "
            "it (a resumed run), the client keeps the result as a tool message that answers "
            "no call",
        )

    def _run_started(self, payload: dict[str, Any]) -> None:
        """Keep the run's ids, and the tool calls its echoed input holds (the first
        ``MAX_OPEN_IDS`` messages of it)."""
        thread, run = payload.get("threadId"), payload.get("runId")
        self._run_ids = (
            id_key(thread) if type(thread) is str else None,
            id_key(run) if type(run) is str else None,
        )
        run_input = payload.get("input")
        messages = run_input.get("messages") if type(run_input) is dict else None
        if type(messages) is not list:
            return
        for message in messages[:MAX_OPEN_IDS]:
            calls = message.get("toolCalls") if type(message) is dict else None
            if type(calls) is not list:
                continue
            for call in calls[:MAX_OPEN_IDS]:
                call_id = call.get("id") if type(call) is dict else None
                if type(call_id) is str:
                    self._calls.add(id_key(call_id))

    def _check_run_ids(self, found: EventFindings, payload: dict[str, Any], kind: str) -> None:
        started = self._run_ids
        if started is None:
            return
        for field, kept in zip(("threadId", "runId"), started, strict=True):
            value = payload.get(field)
            if kept is None or type(value) is not str or id_key(value) == kept:
                continue
            found.add(
                rules.RUN_ID_MISMATCH,
                f" ({kind}): `{field}` {shown(value)} is not the one RUN_STARTED gave; "
                "code that tracks runs by id cannot match the run's end to its start",
            )

    def _legacy_thinking(self, found: EventFindings, kind: str) -> None:
        """A deprecated ``THINKING_*`` event, followed as the compatibility layer translates
        it (``_THINKING``): an opener opens a fresh id, a continuation or an end needs the
        last opener's id still open."""
        what, opens, ends = _THINKING[kind]
        if opens:
            self._thinking_opened += 1
            key = f"\x00{kind} #{self._thinking_opened}".encode()  # never a wire id's key
            self._thinking[what] = key
            self._ids.open(found, what, kind, key, kind)
            return
        current = self._thinking.get(what)
        opener = _THINKING_OPENER[what]
        if current is None or current == _FORGOTTEN:
            how = "no" if current is None else "only an earlier run's"
            found.add(
                rules.ID_NOT_OPEN,
                f" ({kind}): {how} {opener} is open; the client's compatibility layer gives it "
                f"an id no {_WHAT[what]} opened, and the client throws",
            )
        elif ends:
            self._ids.discard(what, current)
        if ends:
            self._thinking.pop(what, None)

    @staticmethod
    def _step_key(lane: object, name: str) -> str | bytes:
        # The client keys steps by subagent lane, then name.
        owner = "-" if type(lane) is not str else f"s{len(lane)}:{lane}"
        return id_key(f"{owner}\x00{name}")

    # -- the chunk shorthands -------------------------------------------------------------

    def _lane(self, payload: dict[str, Any]) -> Lane:
        lane = payload.get("subagentRunId")
        return id_key(lane) if type(lane) is str else None

    def _close_chunk_streams(self, payload: dict[str, Any], kind: str) -> None:
        """What the client's chunk expansion closes before it passes ``kind`` on."""
        if not self._pending or kind in _CHUNKS or kind in _KEEP_CHUNKS:
            return
        if kind in _CLOSE_ALL:
            lanes: list[Lane] = list(self._pending)
        else:
            lanes = [self._lane(payload)]
        for lane in lanes:
            pending = self._pending.pop(lane, None)
            if pending is not None:
                self._ids.discard(pending[0], pending[1])
                self._end(pending[0], pending[1])

    def _chunk(self, found: EventFindings, payload: dict[str, Any], kind: str) -> None:
        what, field = _CHUNKS[kind]
        value = payload.get(field)
        if value is not None and type(value) is not str:
            return  # a schema_mismatch already
        lane = self._lane(payload)
        pending = self._pending.get(lane)
        key = None if value is None else id_key(value)
        if pending is not None and pending[0] == what and (key is None or key == pending[1]):
            return  # continues the open chunk stream
        if pending is None and len(self._pending) >= MAX_LANES:
            self._lanes_overflowed = True
        if self._lanes_overflowed and pending is None:
            return  # a lane this checker could not follow
        if pending is not None:
            del self._pending[lane]
            self._ids.discard(pending[0], pending[1])
            self._end(pending[0], pending[1])
        if value is None or key is None:
            found.add(
                rules.ID_NOT_OPEN,
                f" ({kind}): a chunk without `{field}` continues no open {_WHAT[what]}; "
                "the client throws",
            )
            return
        if what == "tool" and type(payload.get("toolCallName")) is not str:
            found.add(
                rules.SCHEMA_MISMATCH,
                f" ({kind}): the first chunk of tool call {shown(value)} has no "
                "`toolCallName`; the client throws",
            )
            return
        self._open(found, what, value, key, kind)
        self._pending[lane] = (what, key)

    # -- state patches --------------------------------------------------------------------

    def _check_patch(self, found: EventFindings, patch: object, kind: str) -> None:
        if type(patch) is not list:
            return  # a schema_mismatch already
        for number, operation in enumerate(patch):
            problem = _patch_problem(operation)
            if problem is not None:
                detail = f" ({kind}): operation {number} {problem}; the client rejects the event"
                found.add(rules.INVALID_STATE_PATCH, detail)
                return

    # -- framing ----------------------------------------------------------------------------

    def _check_framing(self, found: EventFindings) -> None:
        """CR LF or LF, measured from where events start (see the module docstring)."""
        event = found.event
        expected = self._end_of_simple
        data = event.data
        simple = event.event == "message" and event.id is None and "\n" not in data
        if simple:
            size = len(data) if data.isascii() else len(data.encode())
            self._end_of_simple = event.offset + _DATA_PREFIX + size
        else:
            self._end_of_simple = None
        if expected is None or not simple:
            return
        gap = event.offset - expected
        if gap == _LF_GAP:
            self._framing_decided = True
        elif gap == _CRLF_GAP:
            self._framing_decided = True
            found.add(
                rules.CRLF_FRAMING,
                ": events are framed with CR LF line endings; @ag-ui/client splits the body "
                "on LF LF only, so it reads no event until the body ends and then fails",
            )


_C = AGUIChecker
#: The handler of each event type (any other is only passed on).
_HANDLERS: Final[dict[str, Handler]] = {
    "RUN_STARTED": _C._on_run_started,
    "RUN_FINISHED": _C._on_run_finished,
    "RUN_ERROR": _C._on_run_finished,
    **dict.fromkeys(_CHUNKS, _C._on_chunk),
    **dict.fromkeys(_OPENS, _C._on_open),
    **dict.fromkeys(_CONTINUES, _C._on_continue),
    "TOOL_CALL_RESULT": _C._on_tool_result,
    "STEP_STARTED": _C._on_step,
    "STEP_FINISHED": _C._on_step,
    "SUBAGENT_STARTED": _C._on_subagent,
    "SUBAGENT_FINISHED": _C._on_subagent,
    "SUBAGENT_ERROR": _C._on_subagent,
    **dict.fromkeys(_THINKING, _C._on_thinking),
    "STATE_SNAPSHOT": _C._on_state_snapshot,
    "STATE_DELTA": _C._on_state_delta,
    "ACTIVITY_DELTA": _C._on_activity_delta,
}
#: Each event type the client reads: its lifecycle kind, its shape (the fields every event
#: has, then its own), and its handler.
_C.ROUTES = {
    kind: Route(
        _KINDS.get(kind, OTHER),
        _HANDLERS.get(kind, _C._passed_on),
        _EVENT_BASE_FIELDS + shape,
    )
    for kind, shape in EVENT_SHAPES.items()
}


def _usage_problem(usage: object) -> str | None:
    """What the 1.0 schema refuses in a run's ``usage`` list (a list of ``TokenUsage``
    objects; the list itself is checked with the event's shape), or None. As long as the
    list, which the parse already walked."""
    if type(usage) is not list:
        return None
    for number, entry in enumerate(usage):
        where = f"usage[{number}]"
        if type(entry) is not dict:
            return f"field `{where}` is {type_name(entry)}, not an object"
        problem = shape_problem(entry, _TOKEN_USAGE_FIELDS, where)
        if problem is not None:
            return problem
    return None


def _patch_problem(operation: object) -> str | None:
    """What the 1.0 schema (``JsonPatchOperationSchema``) refuses in one operation, or None."""
    if type(operation) is not dict:
        return "is not an object"
    op = operation.get("op")
    if type(op) is not str or op not in _PATCH_OPS:  # (an object or a list is unhashable)
        return "has no RFC 6902 `op`"
    for field in ("path", "from") if op in ("move", "copy") else ("path",):
        pointer = operation.get(field)
        if type(pointer) is not str:
            return f"has no string `{field}`"
        if _POINTER.fullmatch(pointer) is None:
            return f"has a `{field}` that is not a JSON Pointer (RFC 6901)"
    if op in ("add", "replace", "test") and "value" not in operation:
        return f"is `{op}` without a `value`"
    return None


# -- auto-detection ----------------------------------------------------------------------


def _named_in_path(path: str) -> bool:
    """A path segment names AG-UI. AG-UI has no fixed path: most endpoints are found by
    their first event instead."""
    return any(segment.lower() in _PATH_SEGMENTS for segment in path.split("/"))


def _is_ag_ui_payload(event: Event, payload: object) -> bool:
    return type(payload) is dict and is_ag_ui_event(payload)


def is_ag_ui_event(payload: dict[str, Any]) -> bool:
    """Whether a parsed event's ``type`` is an AG-UI event type (upper-case names no other
    protocol uses)."""
    kind = payload.get("type")
    return type(kind) is str and kind in EVENT_TYPES  # (a list or an object is unhashable)


SPEC: ProtocolSpec = ProtocolSpec(
    name=AGUIChecker.name,
    checker=AGUIChecker,
    summary="AG-UI agent events (`RUN_STARTED` ... `RUN_FINISHED` or `RUN_ERROR`)",
    paths=(Signal(60, _named_in_path),),
    events=(Signal(90, _is_ag_ui_payload),),
)
