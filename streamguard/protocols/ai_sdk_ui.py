"""The AI SDK UI message stream (``ai`` on npm, v5 and later): what ``useChat`` reads.

A server answers a chat request with ``text/event-stream`` and the header
``x-vercel-ai-ui-message-stream: v1``; every event is ``data: <one JSON chunk>`` typed by
``type``, and the stream ends with ``data: [DONE]`` (the SDK's ``JsonToSseTransformStream``
appends it when the chunk stream closes; the protocol page says "The stream ends with a
special ``[DONE]`` marker"). The official reader (``DefaultChatTransport``:
``parseJsonEventStream`` with ``uiMessageChunkSchema``, then ``processUIMessageStream``)
validates every chunk against a zod union and throws on one that does not fit, and throws
again on a delta or an end for a part it has no record of; so does ``readUIMessageStream``.

Theory of operation
-------------------

Each chunk is parsed once and dispatched on its ``type``. The lifecycle (``LIFECYCLE``) tells
four kinds apart: ``finish`` (the message is complete), ``abort`` (the server stopped it), the
``error`` chunk (an in-band error: ``useChat`` throws it and the chat ends in its error
state; the server may still send ``finish-step``, ``finish`` and ``[DONE]`` after it, as
``streamText`` does, so it does not seal the stream) and ``[DONE]`` (the terminal signal).

The payload handlers check each chunk's shape (``CHUNK_SHAPES``, read from
``uiMessageChunkSchema`` of ``ai`` 7.0.173) and the parts it keys by id:

- ``text-*`` and ``reasoning-*`` parts open with a start and close with an end; a delta or
  an end for an id that is not open is ``id_not_open`` (the client throws "Received
  text-delta for missing text part"), a start for an id still open is ``id_already_open``
  (the client replaces its record of the part, and the first one stays ``streaming``);
- ``tool-input-delta`` needs a ``tool-input-start`` for its ``toolCallId`` in this stream
  (the client throws "Received tool-input-delta for missing tool call"); a call whose input
  started streaming must reach ``tool-input-available`` or ``tool-input-error``;
- ``finish-step`` ends the open text and reasoning parts for ``ai`` 5 and 6, whose reader
  resets its records of them there (``ai`` 7 keeps them): a delta or an end for one after
  the ``finish-step`` is ``id_not_open``, since those clients throw on it;
- a ``tool-output-available``, ``tool-output-error``, ``tool-output-denied`` or
  ``tool-approval-request`` inside a step of this stream (after a ``start-step``, before
  its ``finish-step``) for a ``toolCallId`` no chunk of this stream introduced
  (``tool-input-start``, ``tool-input-available``, ``tool-input-error``; a ``reset-step``
  drops the calls its step introduced, as the client drops their parts) is ``id_not_open``:
  the client throws "No tool invocation found". Outside a step it is judged only once the
  stream shows whose call it answered: a stream that continues the previous assistant
  message (after a tool approval, or a client-side tool's output) answers that message's
  calls before its first ``start-step``, as ``streamText`` does, and never introduces them
  again; a later chunk that introduces the answered call shows the answer came before its
  own call, where the client threw, and that chunk is ``id_not_open``;
- at ``finish`` (or at ``[DONE]`` when no ``finish`` came), a text or reasoning part still
  open, or a tool input still streaming, is ``id_not_closed``; after an ``error`` or an
  ``abort`` chunk nothing is expected to be closed;
- a stream that sent ``start`` and reached ``[DONE]`` without ``finish`` (nor ``error``
  or ``abort``) is ``missing_finish``, a warning: the client reads it, but the message has
  no finish reason and code that waits for ``finish`` never runs (``@ai-sdk/langchain``'s
  LangGraph streams before vercel/ai#11624);
- ``reset-step`` drops every open part, as the client does; ``start-step`` and
  ``finish-step`` must alternate, and a step still open at ``finish`` or at ``[DONE]`` is
  unbalanced (``step_not_balanced``, a warning: the client only marks the boundary).

A body in which no event at all was dispatched is most often not an SSE body: the AI SDK
4 data stream protocol (``0:"text"`` lines, served as ``text/plain`` with
``x-vercel-ai-data-stream: v1``) reads as nothing to this protocol's reader, which shows an
empty message and no error, so ``missing_terminal`` says so then.

Deliberately not checked, because the official client accepts them and real servers send
them: tool outputs, approvals and denials outside a step for a ``toolCallId`` this stream
never introduces (see above), a tool call with input and no output at ``finish`` (a
client-side tool, or one awaiting approval), a stream without ``start`` and without
``finish`` (``createUIMessageStream`` sends only what the app writes, and a continuation
may be such a fragment), ``data-*`` chunks of any name (the protocol's extension point),
``message-metadata``, ``source-*``, ``file``, ``custom``, ``steering-message``, repeated
``tool-output-available`` (preliminary outputs), unknown extra keys on a known chunk (the
schema is loose since ``ai`` 7.0.x).

The lifecycle is the table ``LIFECYCLE``, printed in ``docs/lifecycles.md`` (generated
from the table, so the page cannot drift from the machine).

Bounded state: at most ``MAX_OPEN_IDS`` ids per kind of part are tracked, and as many
calls answered outside a step (an id longer than 64 characters by a digest); past that,
checks that need the missing ones are skipped. At most ``MAX_UNKNOWN_TYPES`` distinct
unknown chunk types are reported per stream. Messages name chunk types the SDK defines as
they are and everything else from the wire (ids, unknown types, values) by size and hash.

Under ``protocol="auto"`` (``SPEC``), the response header declares the protocol; the path
``/api/chat`` (``DefaultChatTransport``'s default endpoint) is the weakest sign there is, so
it is tried last; and a first chunk whose type only this protocol sends decides too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from streamguard import _wire, rules
from streamguard.protocols._entities import IdSet, OpenIds, id_key, shown
from streamguard.protocols.engine import ANY as ANY_KIND
from streamguard.protocols.engine import (
    ANY_VALUE,
    ARRAY,
    BOOLEAN,
    END,
    ERROR,
    OBJECT_OF_OBJECTS,
    OTHER,
    STAY,
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
    any_json,
    broken,
    go,
    may_name,
    opt,
    req,
    sealed_rows,
)
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = [
    "CHUNK_SHAPES",
    "CHUNK_TYPES",
    "DONE",
    "HEADER",
    "MAX_OPEN_IDS",
    "MAX_UNKNOWN_TYPES",
    "SPEC",
    "AISDKUIChecker",
    "is_ai_sdk_ui_chunk",
]

#: The terminal signal's data.
DONE: Final = "[DONE]"
#: The response header (name, value) that marks a UI message stream.
HEADER: Final = (b"x-vercel-ai-ui-message-stream", b"v1")
#: The default endpoint of ``DefaultChatTransport`` (``api: '/api/chat'``).
_DEFAULT_PATH = "/api/chat"

#: Open ids tracked per kind of part (text, reasoning, tool input).
MAX_OPEN_IDS = 256
#: Distinct unknown chunk types reported per stream.
MAX_UNKNOWN_TYPES = 16

_PROVIDER_METADATA = opt("providerMetadata", OBJECT_OF_OBJECTS)
_TOOL_CALL = (
    opt("providerExecuted", BOOLEAN),
    _PROVIDER_METADATA,
    opt("toolMetadata", "object"),
    opt("dynamic", BOOLEAN),
    opt("title"),
)
_FINISH_REASONS = (
    "stop",
    "length",
    "content-filter",
    "tool-calls",
    "error",
    "interrupted",
    "other",
)

#: Chunk type -> its shape, from ``uiMessageChunkSchema`` (``ai`` 7.0.173). ``data-*``
#: chunks have ``DATA_SHAPE``.
CHUNK_SHAPES: Final[dict[str, tuple[Field, ...]]] = {
    "start": (opt("messageId"), opt("messageMetadata", ANY_VALUE)),
    "finish": (opt("finishReason", values=_FINISH_REASONS), opt("messageMetadata", ANY_VALUE)),
    "abort": (opt("reason"),),
    "error": (req("errorText"),),
    "message-metadata": (req("messageMetadata", ANY_VALUE),),
    "start-step": (),
    "finish-step": (),
    "reset-step": (),
    "text-start": (req("id"), _PROVIDER_METADATA),
    "text-delta": (req("id"), req("delta"), _PROVIDER_METADATA),
    "text-end": (req("id"), opt("citations", ARRAY), _PROVIDER_METADATA),
    "reasoning-start": (req("id"), _PROVIDER_METADATA),
    "reasoning-delta": (req("id"), req("delta"), _PROVIDER_METADATA),
    "reasoning-end": (req("id"), _PROVIDER_METADATA),
    "tool-input-start": (
        req("toolCallId"),
        req("toolName"),
        opt("inputEncoding", values=("json", "text")),
        *_TOOL_CALL,
    ),
    "tool-input-delta": (req("toolCallId"), req("inputTextDelta")),
    "tool-input-available": (
        req("toolCallId"),
        req("toolName"),
        req("input", ANY_VALUE),
        *_TOOL_CALL,
    ),
    "tool-input-error": (
        req("toolCallId"),
        req("toolName"),
        req("input", ANY_VALUE),
        req("errorText"),
        *_TOOL_CALL,
    ),
    "tool-approval-request": (
        req("approvalId"),
        req("toolCallId"),
        opt("reason"),
        opt("isAutomatic", BOOLEAN),
        opt("signature"),
    ),
    "tool-approval-response": (
        req("approvalId"),
        req("approved", BOOLEAN),
        opt("reason"),
        opt("providerExecuted", BOOLEAN),
        _PROVIDER_METADATA,
    ),
    "tool-output-available": (
        req("toolCallId"),
        req("output", ANY_VALUE),
        opt("providerExecuted", BOOLEAN),
        _PROVIDER_METADATA,
        opt("toolMetadata", "object"),
        opt("dynamic", BOOLEAN),
        opt("preliminary", BOOLEAN),
    ),
    "tool-output-error": (req("toolCallId"), req("errorText"), *_TOOL_CALL[:4]),
    "tool-output-denied": (req("toolCallId"),),
    "source-url": (req("sourceId"), req("url"), opt("title"), _PROVIDER_METADATA),
    "source-document": (
        req("sourceId"),
        req("mediaType"),
        req("title"),
        opt("filename"),
        _PROVIDER_METADATA,
    ),
    "file": (req("url"), req("mediaType"), _PROVIDER_METADATA),
    "reasoning-file": (req("url"), req("mediaType"), _PROVIDER_METADATA),
    "custom": (req("kind"), _PROVIDER_METADATA),
    "steering-message": (req("id"), req("parts", ARRAY)),
}
#: Every chunk type the SDK defines (``data-*`` aside): what a message may quote.
CHUNK_TYPES: Final = frozenset(CHUNK_SHAPES)
#: The shape of a ``data-<name>`` chunk.
DATA_SHAPE: Final = (opt("id"), req("data", ANY_VALUE), opt("transient", BOOLEAN))
_DATA_PREFIX = "data-"

# -- the lifecycle ---------------------------------------------------------------------

#: Kinds this protocol tells apart besides TERMINAL ([DONE]), ERROR and OTHER.
FINISH: Final = "finish"
ABORT: Final = "abort"

_STREAMING, _FINISHED, _AFTER_FINISH = "streaming", "finished", "after_finish"
_ABORTED, _ERRORED, _DONE = "aborted", "errored", "done"
_NAMED = "event {index} ({name}) "
_MISSING_DONE = broken(
    rules.MISSING_TERMINAL,
    "the body ended after {index} event(s) and {offset} byte(s) without the {protocol} "
    "terminal signal (data: [DONE]){hint}",
)
#: What ``missing_terminal`` adds when the body dispatched no event at all.
_NO_EVENTS_HINT: Final = (
    "; no event at all: not an SSE body (an AI SDK 4 data stream, lines such as "
    '0:"text" and d:{...}, reads as nothing to the UI message stream reader, which shows '
    "an empty message without an error)"
)

LIFECYCLE: Final = Lifecycle(
    phases={
        _STREAMING: "chunks arrive",
        _FINISHED: "the finish chunk arrived; only [DONE] follows",
        _AFTER_FINISH: "chunks followed finish (reported once)",
        _ABORTED: "an abort chunk arrived; open parts stay open",
        _ERRORED: "an error chunk arrived; finish-step, finish and [DONE] may follow",
        _DONE: "[DONE] arrived",
    },
    kinds={FINISH: "the finish chunk", ABORT: "the abort chunk"},
    initial=_STREAMING,
    table={
        (_STREAMING, FINISH): go(_FINISHED),
        (_STREAMING, ABORT): go(_ABORTED),
        (_STREAMING, TERMINAL): go(_DONE),
        (_STREAMING, ERROR): go(_ERRORED),
        (_STREAMING, OTHER): STAY,
        (_STREAMING, END): _MISSING_DONE,
        (_FINISHED, TERMINAL): go(_DONE),
        (_FINISHED, ERROR): go(_ERRORED),
        (_FINISHED, END): _MISSING_DONE,
        (_FINISHED, ANY_KIND): broken(
            rules.CHUNK_AFTER_FINISH,
            _NAMED + "follows the finish chunk (later ones are not reported)",
            _AFTER_FINISH,
        ),
        (_AFTER_FINISH, TERMINAL): go(_DONE),
        (_AFTER_FINISH, ERROR): go(_ERRORED),
        (_AFTER_FINISH, END): _MISSING_DONE,
        (_AFTER_FINISH, ANY_KIND): STAY,
        (_ABORTED, TERMINAL): go(_DONE),
        (_ABORTED, ERROR): go(_ERRORED),
        (_ABORTED, END): _MISSING_DONE,
        (_ABORTED, ANY_KIND): STAY,
        (_ERRORED, TERMINAL): go(_DONE),
        (_ERRORED, END): STAY,
        (_ERRORED, ANY_KIND): STAY,
        **sealed_rows(
            _DONE,
            duplicate="repeats the [DONE] first sent as event {terminal}",
            after_terminal="follows the [DONE] sent as event {terminal}",
        ),
    },
    ended=frozenset({_DONE}),
    errored=frozenset({_ERRORED}),
    sealed=frozenset({_DONE}),
)

#: Phases in which parts still open at finish or [DONE] are a finding.
_PARTS_JUDGED_IN = frozenset({_STREAMING})


#: A text or reasoning delta, as ``AISDKUIChecker._continue`` vouches for it.
_DELTA_TEXT = Holes((("delta",),))


class AISDKUIChecker(Checker):
    """Checks one AI SDK UI message stream; see the module docstring."""

    __slots__ = (
        "_answered",
        "_calls",
        "_dispatched",
        "_parts",
        "_started",
        "_step_calls",
        "_step_open",
        "_tools",
    )

    name = "ai_sdk_ui"
    REPEAT_READS_EVENT = False  # (its repeat_event reads the token and values only)
    LIFECYCLE = LIFECYCLE
    JUDGES_END_UNSAMPLED = True
    END_HINTS = (b"[DONE]", b"error", b"\\u")
    NO_TYPE = ": field `type` is missing or not a string; every chunk is typed"
    UNKNOWN_TYPES = UnknownTypes(
        ": chunk type {shown} is not one the AI SDK defines, nor data-*; the client's schema "
        "rejects it (each unknown type is reported once)",
        rule=rules.UNKNOWN_CHUNK_TYPE,
        limit=MAX_UNKNOWN_TYPES,
    )
    RAISES = frozenset(
        {
            rules.INVALID_JSON,
            rules.SCHEMA_MISMATCH,
            rules.UNKNOWN_CHUNK_TYPE,
            rules.ID_NOT_OPEN,
            rules.ID_ALREADY_OPEN,
            rules.ID_NOT_CLOSED,
            rules.STEP_NOT_BALANCED,
            rules.MISSING_FINISH,
        }
    )

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        self._parts = OpenIds(_PARTS, MAX_OPEN_IDS, _ON_REOPEN, _ON_ASIDE)
        #: Tool calls whose input started streaming in this stream; True while it streams.
        self._tools: dict[str | bytes, bool] = {}
        #: Tool calls a chunk of this stream introduced (the client holds a part for each),
        #: and those of them its current step introduced (a reset-step drops those).
        self._calls = IdSet(MAX_OPEN_IDS)
        self._step_calls = IdSet(MAX_OPEN_IDS)
        #: Calls answered outside a step before any chunk introduced them, each with the
        #: index of its first such answer: a continuation's, unless a chunk introduces one.
        self._answered: dict[str | bytes, int] = {}
        self._step_open = False
        self._started = False  # a start chunk came: the stream announced a message
        self._dispatched = False  # an event came at all

    def is_terminal(self, event: Event) -> bool:
        return event.data == DONE

    def end_kind(self, event: Event, index: int) -> str | None:
        # As ``check_event``: [DONE] ends, an error chunk errs (finish and abort change
        # nothing about where those two lead).
        data = event.data
        if data == DONE:
            return TERMINAL
        if not may_name(data, "error"):
            return None
        chunk = any_json(data)
        if type(chunk) is dict and chunk.get("type") == "error":
            return ERROR
        return None

    # -- one event ------------------------------------------------------------------------

    def classify(self, event: Event, found: EventFindings) -> Route | None:
        # The route table's, noting that an event came (``missing_terminal``'s hint).
        self._dispatched = True
        return super().classify(event, found)

    def unknown_type(self, value: str, found: EventFindings) -> Route | None:
        # A ``data-*`` chunk is the app's own: its shape is known, its name shown by size.
        if value.startswith(_DATA_PREFIX):
            found.name = _wire.describe(value)
            return _DATA_ROUTE
        return super().unknown_type(value, found)

    def _done(self, chunk: dict[str, Any], found: EventFindings) -> None:
        if found.phase in _PARTS_JUDGED_IN:
            self._check_closed(found, "[DONE]")
            self._check_ended_without_finish(found)

    # -- parts keyed by id ------------------------------------------------------------------

    def _start(self, chunk: dict[str, Any], found: EventFindings) -> None:
        part_id: str = chunk["id"]
        self._parts.open(found, _part_kind(chunk), part_id, id_key(part_id), found.name)

    def _continue(self, chunk: dict[str, Any], found: EventFindings) -> None:
        part_id: str = chunk["id"]
        closes = chunk["type"].endswith("-end")
        self._parts.need_open(
            found, _part_kind(chunk), part_id, id_key(part_id), found.name, closes
        )
        if not closes:
            # A delta of an open part changes nothing: the next one differs in its text.
            self.repeatable(_DELTA_TEXT)

    def _introduce(self, key: str | bytes, call_id: str, found: EventFindings) -> None:
        """A chunk introduced tool call ``key``: the client holds a part for it. If the call
        was answered before, outside a step, that answer came before its call."""
        if not self._calls.add(key):
            return
        self._step_calls.add(key)
        answered = self._answered.pop(key, None) if self._answered else None
        if answered is not None:
            found.add(
                rules.ID_NOT_OPEN,
                f" ({found.name}): tool call {shown(call_id)} was answered at event {answered}, "
                "outside a step, before any chunk introduced it; reading this stream from its "
                'start the client threw "No tool invocation found" there (a stream that '
                "continues a message answers that message's calls, and never introduces them "
                "again)",
            )

    def _tool_input_start(self, chunk: dict[str, Any], found: EventFindings) -> None:
        call_id: str = chunk["toolCallId"]
        key = id_key(call_id)
        self._introduce(key, call_id, found)
        if key in self._tools or len(self._tools) < MAX_OPEN_IDS:
            self._tools[key] = True

    def _tool_input_delta(self, chunk: dict[str, Any], found: EventFindings) -> None:
        call_id = chunk["toolCallId"]
        if id_key(call_id) not in self._tools and len(self._tools) < MAX_OPEN_IDS:
            found.add(
                rules.ID_NOT_OPEN,
                f" ({found.name}): tool call {shown(call_id)} has no tool-input-start in this "
                "stream; the client throws",
            )

    def _tool_input_done(self, chunk: dict[str, Any], found: EventFindings) -> None:
        call_id: str = chunk["toolCallId"]
        key = id_key(call_id)
        self._introduce(key, call_id, found)
        if key in self._tools:
            self._tools[key] = False

    def _tool_answer(self, chunk: dict[str, Any], found: EventFindings) -> None:
        """An output, an error, a denial or an approval request: it needs the call's part.
        Inside a step of this stream the call must be one this stream introduced; outside
        one, it may be a call of the message this stream continues, unless a later chunk
        introduces it (kept for ``_introduce``)."""
        call_id: str = chunk["toolCallId"]
        key = id_key(call_id)
        if not self._step_open:
            if (
                self._calls.known(key) is False
                and key not in self._answered
                and len(self._answered) < MAX_OPEN_IDS
            ):
                self._answered[key] = found.index
            return
        if self._calls.known(key) is False:
            found.add(
                rules.ID_NOT_OPEN,
                f" ({found.name}): tool call {shown(call_id)} was introduced by no chunk of this "
                "stream (tool-input-start, tool-input-available or tool-input-error; or its "
                "step was reset), yet a step of this stream is open, so it answers no call of "
                'an earlier message; the client throws "No tool invocation found"',
            )

    def _reset_step(self, chunk: dict[str, Any], found: EventFindings) -> None:
        # The client forgets the step's open parts and partial tool calls, and removes the
        # parts of the tool calls the step introduced.
        self._parts.clear()
        self._tools.clear()
        if self._step_calls.overflowed:
            self._calls.overflowed = True  # which calls went is unknown: stop judging
        else:
            for key in self._step_calls.held():
                self._calls.discard(key)
        self._step_calls.clear()

    def _start_step(self, chunk: dict[str, Any], found: EventFindings) -> None:
        if self._step_open:
            found.add(
                rules.STEP_NOT_BALANCED,
                f" ({found.name}): a step is already open (no finish-step since the last "
                "start-step)",
            )
        self._step_open = True
        self._step_calls.clear()

    def _finish_step(self, chunk: dict[str, Any], found: EventFindings) -> None:
        if not self._step_open:
            found.add(rules.STEP_NOT_BALANCED, f" ({found.name}): no step is open")
        self._step_open = False
        # ai 5 and 6 reset their records of the open text and reasoning parts here.
        self._parts.set_aside(_STEP_SCOPED)

    def _message_start(self, chunk: dict[str, Any], found: EventFindings) -> None:
        self._started = True

    def _finish(self, chunk: dict[str, Any], found: EventFindings) -> None:
        if found.phase not in _PARTS_JUDGED_IN:
            return
        self._check_closed(found, "finish")
        if self._step_open:
            found.add(
                rules.STEP_NOT_BALANCED, f" ({found.name}): a step is still open (no finish-step)"
            )
            self._step_open = False

    def _check_ended_without_finish(self, found: EventFindings) -> None:
        """[DONE] in the streaming phase: no finish, error or abort came."""
        if self._step_open:
            found.add(
                rules.STEP_NOT_BALANCED,
                f" ({DONE}): the message ended with a step still open (no finish-step)",
            )
            self._step_open = False
        if self._started:
            found.add(
                rules.MISSING_FINISH,
                f" ({DONE}): the message opened with start ended without the finish chunk; "
                "the client keeps it without a finish reason, and code that waits for finish "
                "never runs",
            )

    def end_unsampled(self, events: int, offset: int) -> Sequence[Finding]:
        self._dispatched = events > 0  # (``missing_terminal`` says whether any event came)
        return super().end_unsampled(events, offset)

    def message_fields(self) -> Mapping[str, object]:
        # {hint}: what missing_terminal adds on a body that dispatched no event at all.
        return {"hint": "" if self._dispatched else _NO_EVENTS_HINT}

    def _check_closed(self, found: EventFindings, what: str) -> None:
        """The parts still open when the message ends: each kind counted, none quoted."""
        streaming = ((sum(self._tools.values()), "tool input"),)
        consequence = "the client leaves them in their streaming state"
        self._parts.check_closed(found, what, "the message ended", consequence, streaming)
        self._tools.clear()


#: The kinds of part opened by id, as messages name them.
_PARTS = {"text": "text part", "reasoning": "reasoning part"}
_ON_REOPEN = "the client forgets the first one, which stays streaming"
_ON_ASIDE = (
    " was still open at a finish-step; ai 5 and 6 reset their records of the open text and "
    "reasoning parts at finish-step and throw on a later delta or end for one (ai 7 keeps "
    "them): end a part before its step finishes"
)
#: The kinds of part the client forgets at finish-step (ai 5 and 6).
_STEP_SCOPED: Final = ("text", "reasoning")


def _part_kind(chunk: dict[str, Any]) -> str:
    return "text" if chunk["type"].startswith("text") else "reasoning"


_C = AISDKUIChecker
#: Each chunk type the SDK defines: its lifecycle kind, its handler, and the field the
#: handler keys its part or call by (the shape is ``CHUNK_SHAPES``').
_ROWS: Final[dict[str, tuple[str, Handler | None, str | None]]] = {
    "start": (OTHER, _C._message_start, None),
    "finish": (FINISH, _C._finish, None),
    "abort": (ABORT, None, None),
    "error": (ERROR, None, None),
    "message-metadata": (OTHER, None, None),
    "start-step": (OTHER, _C._start_step, None),
    "finish-step": (OTHER, _C._finish_step, None),
    "reset-step": (OTHER, _C._reset_step, None),
    "text-start": (OTHER, _C._start, "id"),
    "text-delta": (OTHER, _C._continue, "id"),
    "text-end": (OTHER, _C._continue, "id"),
    "reasoning-start": (OTHER, _C._start, "id"),
    "reasoning-delta": (OTHER, _C._continue, "id"),
    "reasoning-end": (OTHER, _C._continue, "id"),
    "tool-input-start": (OTHER, _C._tool_input_start, "toolCallId"),
    "tool-input-delta": (OTHER, _C._tool_input_delta, "toolCallId"),
    "tool-input-available": (OTHER, _C._tool_input_done, "toolCallId"),
    "tool-input-error": (OTHER, _C._tool_input_done, "toolCallId"),
    "tool-approval-request": (OTHER, _C._tool_answer, "toolCallId"),
    "tool-approval-response": (OTHER, None, None),
    "tool-output-available": (OTHER, _C._tool_answer, "toolCallId"),
    "tool-output-error": (OTHER, _C._tool_answer, "toolCallId"),
    "tool-output-denied": (OTHER, _C._tool_answer, "toolCallId"),
    "source-url": (OTHER, None, None),
    "source-document": (OTHER, None, None),
    "file": (OTHER, None, None),
    "reasoning-file": (OTHER, None, None),
    "custom": (OTHER, None, None),
    "steering-message": (OTHER, None, None),
}
_C.ROUTES = {
    chunk_type: Route(kind, handler, CHUNK_SHAPES[chunk_type], key=key)
    for chunk_type, (kind, handler, key) in _ROWS.items()
}
_C.SENTINELS = {DONE: Route(TERMINAL, _C._done)}
#: A ``data-<name>`` chunk's route.
_DATA_ROUTE: Final = Route(OTHER, shape=DATA_SHAPE)

# -- auto-detection ----------------------------------------------------------------------


def _declared_by_header(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether ASGI response headers mark a UI message stream
    (``x-vercel-ai-ui-message-stream: v1``, the SDK's ``UI_MESSAGE_STREAM_HEADERS``)."""
    name, value = HEADER
    return any(key.lower() == name and raw.strip().lower() == value for key, raw in headers)


def _is_ui_chunk(event: Event, payload: object) -> bool:
    return type(payload) is dict and is_ai_sdk_ui_chunk(payload)


def is_ai_sdk_ui_chunk(chunk: dict[str, Any]) -> bool:
    """Whether a parsed chunk's ``type`` is one only this protocol uses (``start``,
    ``text-start``, ``data-*``, ...; ``error`` only with its ``errorText``, since other
    protocols have an ``error`` type too)."""
    kind = chunk.get("type")
    if type(kind) is not str:
        return False
    if kind == "error":
        return type(chunk.get("errorText")) is str
    return kind in CHUNK_TYPES or kind.startswith(_DATA_PREFIX)


SPEC: ProtocolSpec = ProtocolSpec(
    name=AISDKUIChecker.name,
    checker=AISDKUIChecker,
    summary="the AI SDK's UI message stream (`useChat`), ending in `[DONE]`",
    headers=(Signal(10, _declared_by_header),),
    paths=(Signal(70, lambda path: path.endswith(_DEFAULT_PATH)),),
    events=(Signal(100, _is_ui_chunk),),
)
