"""OpenAI Chat Completions streaming (``protocol="openai_chat"``).

Theory of operation
-------------------

The stream is data-only SSE: one JSON chunk per event, ended by ``data: [DONE]``
(reference §1). ``[DONE]`` is recognised by prefix before any JSON parsing, as the SDK does
(``data.startswith("[DONE]")``). Every other payload is parsed once by pydantic-core and
then, unless the fast path vouches for its shape, checked against ``CHAT_COMPLETION_CHUNK``,
generated from openai-python's ``ChatCompletionChunk`` (``_generated_openai_chat``: the
fields a rule or the SDK's helper reads, strictly typed) and read through it
(``_fields.declared``: unknown keys are dropped, so providers' additions never matter).

Each event is of one kind (``[DONE]`` is the terminal, a chunk with a truthy top-level
``error`` the error, a usage chunk ``usage``) and takes its step in ``LIFECYCLE``, the
engine's table (printed in ``docs/lifecycles.md``), then its kind's payload handler: its
route (``ROUTES``), which ``classify`` picks, since a chunk names no type. After an in-band
error, only ``[DONE]`` may follow.

After the usage chunk, the first other chunk is ``usage_not_last`` once, and the stream is
checked as before; a second usage chunk is ``usage_repeated``, a payload rule.

Each choice index has its own small machine (``_ChoiceState``): unseen, open (a delta
arrived), finished (its one non-null ``finish_reason`` arrived). Each tool call of a choice
(``_ToolCall``) is opened by its first delta, which must carry the header (``id`` and
``function.name``); later deltas carry only argument fragments, which are kept
(``KeptText``) and parsed as JSON when the choice finishes.

Thousands of chunks per stream are one more piece of text for an open choice; a fast path
(``_fast_path``) recognises them with a few type checks while streaming, where such a chunk
takes no lifecycle step, and sends anything else down the general path. A chunk that fails
the shape check is reported (``schema_mismatch``) and then read leniently
(``_lenient_chunk``): every field whose type is right goes through the same rules as a
valid chunk, so a server that, say, sends ``created`` as text is still checked for repeated
roles, late usage and missing finish reasons. A chunk without its ``id``, ``model`` or
``created`` (or with one null) is read whole by every client: the shape leaves them
optional, and ``envelope_field_missing`` (a warning, once per stream) says so.

A lone choice without ``index`` in a stream of one choice is read as choice 0 (after its
``schema_mismatch``), so its roles and finish are still checked. Two things the SDK's
stream helper (``client.chat.completions.stream()``) fails on have rules of their own, as
errors: a usage chunk whose ``choices`` is null or absent (``usage_without_choices``; on a
chunk that carries choices it is the warning ``usage_nonstandard``), and a tool-call delta
without a ``function`` object (``tool_call_function_missing``).

What the request says (``stream_options.include_usage``, ``n``) sharpens the usage and
finish checks; without a request (``request=None``) the checks that need it are skipped
rather than guessed. The facts chat reads of a request, these and the answer-shape facts
``streamguard conformance`` judges, are declared in its ``SPEC`` (``_read_request``).

Nothing a client or an upstream sends sizes the work or the memory without a bound: an ``n``
above ``MAX_CHECKED_N`` is not used for per-choice checks, at most ``MAX_TRACKED_CHOICES``
choices and ``MAX_TRACKED_TOOL_CALLS`` tool calls are tracked per stream (later ones go
unchecked), tool-call arguments are kept under the stream's shared text budget, and a
message lists at most a few choice indices. Values from the wire appear in messages only as
known tokens, sane integers, or sizes and hashes (``streamguard._wire``).

Azure's prompt-annotation chunk (``choices: []`` with ``prompt_filter_results``, empty
``id``/``object``, ``created: 0``) and its async-filter annotation chunks (choices without
``delta``) are part of the protocol: they are exempt from the ``object``/``id`` checks and
never count as content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from streamguard import _wire, rules
from streamguard.protocols._generated_openai_chat import CHAT_COMPLETION_CHUNK
from streamguard.protocols.engine import (
    ANY,
    END,
    ERROR,
    NO_FINDINGS,
    NO_PAYLOAD,
    OTHER,
    STAY,
    STRING_OR_EXACT_INTEGER,
    TERMINAL,
    Checker,
    EventFindings,
    Holes,
    KeptText,
    ProtocolSpec,
    Route,
    Signal,
    Transcript,
    any_json,
    broken,
    declared,
    go,
    json_object,
    json_string_text,
    listing,
    may_name,
    nested_problem,
    object_problems,
    opt,
    parse_json,
    preview,
    req,
    terminated_lifecycle,
    usable,
)
from streamguard.report import Finding
from streamguard.request import NO_FIELDS, RequestBody, RequestFact, is_mapping
from streamguard.sse import Event

__all__ = [
    "FINISH_REASONS",
    "MAX_CHECKED_N",
    "MAX_STOP_SEQUENCES",
    "MAX_TRACKED_CHOICES",
    "MAX_TRACKED_TOOL_CALLS",
    "SPEC",
    "OpenAIChatChecker",
]

#: The documented ``finish_reason`` values; any other non-null value is non-standard.
FINISH_REASONS: Final = frozenset(
    {"stop", "length", "tool_calls", "content_filter", "function_call"}
)
_CHUNK_OBJECT: Final = "chat.completion.chunk"
_OBJECTS: Final = frozenset({_CHUNK_OBJECT})

#: The largest requested ``n`` the per-choice checks use (``choice_index_invalid`` against
#: ``n``, a finish expected for every index below ``n``). A client may ask for any ``n``
#: (OpenAI's API accepts at most 128); a larger one must not size a loop or a message, so it is
#: ignored: the checks then judge the choices that actually appeared, as without a request.
MAX_CHECKED_N: Final = 128
#: The choices one stream may have tracked; a choice first seen past this bound is not
#: checked at all (a hostile stream must not grow state with its own indices).
MAX_TRACKED_CHOICES: Final = 256
#: The tool calls one stream may have tracked across its choices; later calls go unchecked.
MAX_TRACKED_TOOL_CALLS: Final = 512
#: How many choice indices one message lists before it says "and N more".
_MAX_LISTED: Final = 5

#: The delta fields a content chunk may carry as null beside its text (every one of them
#: may be null; a null one is read as absent by every rule).
_NULLABLE_DELTA_FIELDS: Final = frozenset({"role", "refusal", "tool_calls", "function_call"})
_STR_OR_NONE: Final = frozenset({str, type(None)})
_DICT_OR_NONE: Final = frozenset({dict, type(None)})
_NO_CHOICES: Final = ": field choices: missing or null on a chunk without usage"
#: The envelope fields a client reads a chunk without (the completion it assembles lacks
#: them): missing or null, they are ``envelope_field_missing``, a warning; the shape leaves
#: them optional and checks only their type. ``object`` is not one: the SDK's helper skips
#: a chunk without it.
_ENVELOPE: Final = ("id", "model", "created")


def _only_nulls_beside_content(delta: dict[str, Any]) -> bool:
    """Whether every field of ``delta`` but ``content`` is a known one, and null."""
    for key, value in delta.items():
        if key != "content" and (value is not None or key not in _NULLABLE_DELTA_FIELDS):
            return False
    return True


# -- Reading a chunk that failed the shape check -------------------------------------------


def _lenient_chunk(raw: dict[str, Any]) -> dict[str, Any]:
    """What the rules can use of a chunk that failed its shape check (``usable``): a
    choice's ``delta`` of the wrong type still makes it a content chunk, not an annotation
    chunk."""
    return usable(raw, CHAT_COMPLETION_CHUNK, _PRESENT)


#: Fields whose presence counts even when their value is of the wrong type.
_PRESENT: Final = frozenset({"delta"})


# -- The in-band error payload (openai-python _streaming.py and _exceptions.APIError) ------

#: The error object's fields as openai-python's ``APIError`` reads them. ``message`` is what
#: the SDK raises with (without a string it falls back to a generic text and the reason is
#: lost). ``code`` is typed ``Optional[str]`` by the SDK, but OpenRouter documents integer
#: codes (the HTTP status) in its in-band errors and the SDK stores them unchanged, so an
#: integer is accepted.
_ERROR_FIELDS: Final = (
    req("message"),
    opt("type", nullable=True),
    opt("param", nullable=True),
    opt("code", STRING_OR_EXACT_INTEGER, nullable=True),
)


def _listed(numbers: Sequence[int]) -> str:
    """At most ``_MAX_LISTED`` choice indices, then how many more: messages stay short."""
    return listing(map(_wire.number, numbers), len(numbers), _MAX_LISTED)


def _joined(*named: tuple[str, bool]) -> str:
    """The names whose flag is set, joined with "and" (the parts of a tool call's header)."""
    return " and ".join(name for name, flag in named if flag)


def _shown_id(value: str | None) -> str:
    return "absent" if value is None else _wire.describe(value)


# -- The lifecycle -----------------------------------------------------------------------

_STREAMING: Final = "streaming"
_USAGE_SENT: Final = "usage_sent"
_ERRORED: Final = "errored"
_ENDED: Final = "ended"
#: The usage chunk: a non-null ``usage`` on a chunk with ``choices: []``.
_USAGE: Final = "usage"
#: Data that is not a JSON object (``invalid_json``): it never moves the phase.
_UNREADABLE: Final = "unreadable"
_BASE: Final = terminated_lifecycle()
_ONLY_DONE = "; only [DONE] may follow it"

_LIFECYCLE: Final = replace(
    _BASE,
    phases={
        _STREAMING: "chunks arrive",
        _USAGE_SENT: "the usage chunk arrived: only [DONE] may follow",
        _ERRORED: "an in-band error payload arrived: only [DONE] may follow",
        _ENDED: "[DONE] arrived",
    },
    kinds={
        _USAGE: "the usage chunk (non-null usage, choices [])",
        _UNREADABLE: "data that is not a JSON object",
    },
    table={
        **_BASE.table,
        (_STREAMING, _USAGE): go(_USAGE_SENT),
        (_STREAMING, _UNREADABLE): STAY,
        # A second usage chunk is usage_repeated, a payload rule judged in any phase.
        (_USAGE_SENT, _USAGE): STAY,
        (_USAGE_SENT, _UNREADABLE): STAY,
        (_USAGE_SENT, TERMINAL): go(_ENDED),
        (_USAGE_SENT, ERROR): go(_ERRORED),
        # Reported once, then the stream is checked as before the usage chunk.
        (_USAGE_SENT, OTHER): broken(
            rules.USAGE_NOT_LAST,
            "event {index} follows the usage chunk (event {usage})" + _ONLY_DONE,
            _STREAMING,
        ),
        (_USAGE_SENT, END): _BASE.table[_STREAMING, END],
        (_ERRORED, TERMINAL): go(_ENDED),  # error := E D? EOF; the outcome stays error_event
        (_ERRORED, ANY): broken(
            rules.EVENT_AFTER_TERMINAL,
            "event {index} follows the in-band error payload of event {error}" + _ONLY_DONE,
            checked=False,
        ),
    },
)


# -- State ------------------------------------------------------------------------------


#: A content chunk of an open choice, as ``_fast_path`` vouches for it: the text and the
#: ``obfuscation`` padding differ from chunk to chunk, nothing else.
_CONTENT_DELTA: Final = Holes((("choices", 0, "delta", "content"), ("obfuscation",)))
#: A fragment of a tool call's arguments: read on a repeat, to be kept for the JSON check.
_ARGUMENTS_DELTA: Final = Holes(
    (("obfuscation",),), (("choices", 0, "delta", "tool_calls", 0, "function", "arguments"),)
)


class _ToolCall:
    __slots__ = ("arguments", "has_id", "has_name", "index")

    def __init__(self, index: int) -> None:
        self.index = index
        self.has_id = False
        self.has_name = False
        #: The fragments so far, for the JSON check at the choice's finish.
        self.arguments = KeptText()


class _ArgumentsDelta:
    """What a chunk of one more argument fragment names: its choice and its tool call."""

    __slots__ = ("call", "choice")

    def __init__(self, choice: _ChoiceState, call: _ToolCall) -> None:
        self.choice = choice
        self.call = call


class _ChoiceState:
    __slots__ = (
        "deltas",
        "finish_reason",
        "finished_at",
        "legacy_function",
        "number",
        "role_at",
        "tools",
    )

    def __init__(self, number: int) -> None:
        self.number = number  # the choice's index
        self.deltas = 0  # chunks that carried a delta for this choice
        self.role_at: int | None = None
        self.finish_reason: str | None = None
        self.finished_at: int | None = None
        self.tools: dict[int, _ToolCall] | None = None  # made by the first tool call
        self.legacy_function: _ToolCall | None = None  # the deprecated function_call delta


class OpenAIChatChecker(Checker):
    """Checks an OpenAI Chat Completions stream chunk by chunk (reference §1)."""

    name = "openai_chat"
    REPEAT_READS_EVENT = False  # (its repeat_event reads the token and values only)
    LIFECYCLE = _LIFECYCLE
    JUDGES_END_UNSAMPLED = True
    END_HINTS = (b"[DONE]", b"error", b"\\u")
    RAISES = frozenset(
        {
            rules.CHOICE_INDEX_INVALID,
            rules.CHOICE_OUT_OF_ORDER,
            rules.CONTENT_AFTER_FINISH,
            rules.ENVELOPE_FIELD_MISSING,
            rules.FUNCTION_CALL_MIXED,
            rules.INCONSISTENT_ID,
            rules.INVALID_JSON,
            rules.MISSING_FINISH_REASON,
            rules.MULTIPLE_FINISH_REASON,
            rules.ROLE_NOT_FIRST,
            rules.ROLE_REPEATED,
            rules.SCHEMA_MISMATCH,
            rules.TOOL_CALL_ARGUMENTS_INVALID,
            rules.TOOL_CALL_FUNCTION_MISSING,
            rules.TOOL_CALL_HEADER_MISSING,
            rules.TOOL_CALL_HEADER_REPEATED,
            rules.TOOL_CALL_INDEX_INVALID,
            rules.TOOL_CALLS_FINISHED_AS_STOP,
            rules.UNEXPECTED_EVENT_FIELD,
            rules.UNKNOWN_FINISH_REASON,
            rules.USAGE_MISSING,
            rules.USAGE_NONSTANDARD,
            rules.USAGE_NOT_LAST,
            rules.USAGE_REPEATED,
            rules.USAGE_TOTAL_MISMATCH,
            rules.USAGE_UNREQUESTED,
            rules.USAGE_WITHOUT_CHOICES,
        }
    )

    __slots__ = (
        "_choice0",
        "_choices",
        "_created",
        "_id",
        "_include_usage",
        "_max_choice",
        "_n",
        "_tool_calls",
        "_tools_finish_as_tool_calls",
        "_usage_at",
        "_usage_seen",
    )

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        # Choice 0, which nearly every stream has alone, in a slot of its own; the others
        # in a dict made for the second (a one-entry dict costs more than the checker).
        self._choice0: _ChoiceState | None = None
        self._choices: dict[int, _ChoiceState] | None = None
        self._max_choice: int | None = None  # the highest index seen, kept as they arrive
        self._tool_calls = 0  # tool calls tracked across the stream's choices
        # The first ordinary chunk's id and created; every later one must repeat them.
        self._id: str | None = None
        self._created: int | None = None
        self._usage_at: int | None = None  # the standard usage chunk (empty choices)
        self._usage_seen = False  # any non-null usage, standard or not
        # What the request asked for; None when unknown.
        self._include_usage: bool | None = None
        self._n: int | None = None
        #: Whether the request left the model to choose its tools (``tool_choice`` absent,
        #: auto or required): then a choice that streamed tool calls finishes with
        #: tool_calls. False when unknown, or when a function was forced (``stop`` then).
        self._tools_finish_as_tool_calls = False
        if request is not None:
            self._tools_finish_as_tool_calls = request.get("tool_choice", "auto") in (
                "auto",
                "required",
            )
            options = request.get("stream_options")
            self._include_usage = is_mapping(options) and (options.get("include_usage") is True)
            n = request.get("n", 1)
            # Beyond MAX_CHECKED_N the request does not size any check (see there).
            self._n = n if type(n) is int and 1 <= n <= MAX_CHECKED_N else None

    # -- lifecycle -----------------------------------------------------------------------

    def is_terminal(self, event: Event) -> bool:
        return event.data.startswith("[DONE]")

    def end_kind(self, event: Event, index: int) -> str | None:
        # As ``check_event``: [DONE] ends; a chunk with a truthy top-level error errs.
        data = event.data
        if data.startswith("[DONE]"):
            return TERMINAL
        if not may_name(data, "error"):
            return None
        parsed = any_json(data)
        if type(parsed) is dict and parsed.get("error"):
            return ERROR
        return None

    def check_end(self, events: int, offset: int) -> Sequence[Finding]:
        if self.phase in _LIFECYCLE.sealed:
            return NO_FINDINGS
        return self._unfinished_choices(events, offset, "the body ended")

    @classmethod
    def transcribe(cls, data: str, out: Transcript) -> bool:
        chunk = json_object(data)
        if chunk is None:
            return False
        carried = False
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                carried |= out.add(choice.get("index", 0), delta.get("content"))
            out.finish(choice.get("finish_reason"))
        return carried

    def message_fields(self) -> Mapping[str, object]:
        return {"usage": self._usage_at}  # usage_not_last names the usage chunk

    # -- one event ---------------------------------------------------------------------

    def classify(self, event: Event, found: EventFindings) -> Route | None:
        # Chat's chunks name no type: [DONE] is read by prefix, as the SDK reads it, and a
        # chunk's kind comes out of its fields (a truthy ``error``, a usage chunk, else one
        # more chunk); the common chunk is settled by ``_fast_path`` before any of that.
        data = event.data
        if data.startswith("[DONE]"):
            found.payload = NO_PAYLOAD
            return _ROUTES[TERMINAL]
        try:
            parsed = parse_json(data)
        except ValueError:  # syntax, recursion limit, number out of range
            parsed = None
        if event.event == "message" and type(parsed) is dict and self._fast_path(parsed):
            return None
        return self._general(event, found, parsed)

    def _general(self, event: Event, found: EventFindings, parsed: Any) -> Route | None:
        """Every chunk the fast path did not vouch for: its route after the full shape
        check (a chunk read leniently is ``misshapen``), or None for data that is no
        object."""
        name = event.event
        if name != "message" and not self.reported(rules.UNEXPECTED_EVENT_FIELD):
            routed = " (the SDK routes thread.* names to Assistants)"
            found.add(
                rules.UNEXPECTED_EVENT_FIELD,
                f" is named {_wire.token(name, ())}; chat streams are data-only"
                + (routed if name.startswith("thread.") else ""),
            )
        if type(parsed) is not dict:
            # Rare, so the data is parsed again for the invalid_json finding all protocols share.
            self.parse_object(event, found.index, found.items)
            found.step(_UNREADABLE)  # it stays: no rule, no handler
            return None
        if parsed.get("error"):  # as the SDK: any truthy top-level error is an error
            found.payload = parsed
            return _ROUTES[ERROR]
        choices = parsed.get("choices")
        if type(choices) is list and len(choices) > MAX_TRACKED_CHOICES:
            # Choices past the tracked bound go unchecked anyway; validating (and, when
            # invalid, describing) hundreds of thousands of them would hold the loop.
            parsed = {**parsed, "choices": choices[:MAX_TRACKED_CHOICES]}
        problem = nested_problem(parsed, CHAT_COMPLETION_CHUNK)
        if problem is None:
            chunk = declared(parsed, CHAT_COMPLETION_CHUNK)  # a provider's additions unread
        else:
            # Report the shape, then check what the chunk does carry (no blind spot).
            found.add(rules.SCHEMA_MISMATCH, f": {problem}")
            chunk = _lenient_chunk(self._choice_zero(parsed))
            found.misshapen = True
        if not self.reported(rules.ENVELOPE_FIELD_MISSING):
            missing = [name for name in _ENVELOPE if parsed.get(name) is None]
            if missing:
                detail = f": field {' and '.join(missing)} missing or null"
                found.add(rules.ENVELOPE_FIELD_MISSING, detail)
        found.payload = chunk
        usage_chunk = chunk.get("usage") is not None and chunk.get("choices") == []
        return _ROUTES[_USAGE if usage_chunk else OTHER]

    def _plain_arguments(self, chunk: dict[str, Any], phase: str) -> _ArgumentsDelta | None:
        """The open tool call a valid chunk that found the stream in ``phase`` adds one
        fragment of arguments to, and does nothing else (no other delta key, no id or name
        that counts: an empty one is falsy, as the full path reads it), else None. The
        call's other keys are literals of the skeleton, so a repeat has them unchanged."""
        choices = chunk.get("choices")
        if not choices or len(choices) != 1 or phase != _STREAMING:
            return None
        choice = choices[0]
        delta = choice.get("delta")
        calls = None if delta is None or len(delta) != 1 else delta.get("tool_calls")
        if not calls or len(calls) != 1:
            return None
        call = calls[0]
        function = call.get("function")
        number = call.get("index")
        state = self._choice(choice["index"])
        tools = None if state is None else state.tools
        tool = None if tools is None or type(number) is not int else tools.get(number)
        if (
            tool is None
            or state is None
            or function is None
            or type(function.get("arguments")) is not str
            or call.get("id")
            or function.get("name")
            or state.finished_at is not None
            or state.legacy_function is not None
            or choice.get("finish_reason") is not None
            or choice.get("logprobs") is not None
            or chunk.get("usage") is not None
            or chunk.get("id") != self._id
            or chunk.get("created") != self._created
        ):
            return None
        return _ArgumentsDelta(state, tool)

    def _plain_text_choice(self, chunk: dict[str, Any], phase: str) -> _ChoiceState | None:
        """The choice a chunk read leniently, which found the stream in ``phase``, adds one
        more piece of text to, and does nothing else (``_fast_path``'s step, without its
        shape checks), else None."""
        fields: Mapping[str, Any] = chunk  # read leniently: it may lack any of these
        choices = fields.get("choices")
        if type(choices) is not list or len(choices) != 1 or phase != _STREAMING:
            return None
        choice = choices[0]
        delta = choice.get("delta")
        if type(delta) is not dict or len(delta) != 1 or type(delta.get("content")) is not str:
            return None
        number = choice.get("index")
        state = self._choice(number) if type(number) is int else None
        if (
            state is None
            or state.finished_at is not None
            or choice.get("finish_reason") is not None
            or choice.get("logprobs") is not None
            or fields.get("usage") is not None
            or fields.get("id") != self._id
            or fields.get("created") != self._created
        ):
            return None
        return state

    def _choice_zero(self, raw: dict[str, Any]) -> dict[str, Any]:
        """``raw`` with a lone choice that has no index read as choice 0, in a stream of one
        choice (n is 1 or unknown, and no other index was seen): its missing index is a
        ``schema_mismatch`` already, and dropping the choice would silence every rule about
        it (roles, finish reasons, content after the finish)."""
        choices = raw.get("choices")
        if (
            type(choices) is not list
            or len(choices) != 1
            or self._n not in (None, 1)
            or self._choices is not None
        ):
            return raw
        choice = choices[0]
        if type(choice) is not dict or choice.get("index") is not None:
            return raw
        return {**raw, "choices": [{**choice, "index": 0}]}

    def _fast_path(self, chunk: dict[str, Any]) -> bool:
        """Handle the common chunk by hand; False sends it down the general path.

        Thousands of chunks per stream look alike: one more piece of text for a choice that
        is open and unfinished, with the stream's id, no logprobs and no usage. For such a
        chunk the only transition is "one more delta" (lifecycle-wise an ``other`` chunk
        while streaming, which stays), and a few type checks give the same verdict as the
        full validator at a fraction of its cost. Anything else, or anything doubtful,
        returns False, so this is only ever an optimisation.
        """
        get = chunk.get
        choices = get("choices")
        if type(choices) is not list or len(choices) != 1 or self.phase != _STREAMING:
            return False
        choice = choices[0]
        if type(choice) is not dict:
            return False
        delta = choice.get("delta")
        if type(delta) is not dict or type(delta.get("content")) is not str:
            return False
        if len(delta) != 1 and not _only_nulls_beside_content(delta):
            return False  # (a pydantic server writes every field, {"role": null, ...})
        number = choice.get("index")
        state = self._choice(number) if type(number) is int else None
        if state is None or state.finished_at is not None:
            return False
        created = get("created")
        if not (
            get("id") == self._id
            and type(created) is int
            and created == self._created
            and get("object") == "chat.completion.chunk"
            and type(get("model")) is str
            and get("usage") is None
            and not get("error")
            and choice.get("finish_reason") is None
            and choice.get("logprobs") is None
            and type(get("system_fingerprint")) in _STR_OR_NONE
            and type(get("service_tier")) in _STR_OR_NONE
            and type(get("obfuscation")) in _STR_OR_NONE
            and type(get("moderation")) in _DICT_OR_NONE
        ):
            return False
        state.deltas += 1
        # The next chunk of this shape differs in its text (and padding) only: it takes
        # the same step, which ``repeat_event`` takes again.
        self.repeatable(_CONTENT_DELTA, state)
        return True

    def repeat_event(
        self, event: Event, index: int, token: object, values: Sequence[str]
    ) -> Sequence[Finding] | None:
        """One more content chunk of the choice ``token`` (``_fast_path``'s step), or one
        more fragment of a tool call's arguments (``_plain_arguments``), kept as the first."""
        if type(token) is _ChoiceState:
            token.deltas += 1
            return NO_FINDINGS
        if type(token) is not _ArgumentsDelta:
            return None
        token.choice.deltas += 1
        arguments = json_string_text(values[0])
        if arguments:
            token.call.arguments.add(self, arguments)
        return NO_FINDINGS

    # -- payload handlers, one per kind (``ROUTES``) -----------------------------------------

    def _on_done(self, _: object, found: EventFindings) -> None:
        index, offset = found.index, found.event.offset
        found.items += self._unfinished_choices(index, offset, f"[DONE] (event {index})")
        if self._include_usage and not self._usage_seen:
            detail = (
                f"[DONE] (event {index}) arrived but no chunk carried usage although "
                "stream_options.include_usage was requested"
            )
            found.items.append(rules.USAGE_MISSING.finding(detail, index, offset))

    def _on_error(self, chunk: dict[str, Any], found: EventFindings) -> None:
        """An in-band error payload (truthy top-level ``error``) ends the stream; its shape
        is checked against what the SDK reads from it."""
        error = chunk["error"]
        problems = object_problems(error, _ERROR_FIELDS, "error")
        if problems:
            found.add(rules.SCHEMA_MISMATCH, f": in-band error payload: {'; '.join(problems)}")

    def _on_chunk(self, chunk: dict[str, Any], found: EventFindings) -> None:
        """A chunk, the usage chunk too: every rule on what it carries; then, for one that
        only adds to what is open, the repeat that vouches for the next one like it."""
        strict = not found.misshapen
        # Read as the chunk found the stream: the phase before its step, the choices'
        # states before it changes them.
        plain = None if strict else self._plain_text_choice(chunk, found.phase)
        call = self._plain_arguments(chunk, found.phase) if strict else None
        self._check_chunk(chunk, found)
        if strict and chunk.get("choices") is None and chunk.get("usage") is None:
            found.add(rules.SCHEMA_MISMATCH, _NO_CHOICES)  # (if not strict, it was reported)
        elif call is not None and not found.items:
            # One more fragment of a tool call's arguments, the commonest chunk of an agent's
            # stream after text: the next one like it adds its fragment the same way.
            self.repeatable(_ARGUMENTS_DELTA, call)
        elif plain is not None:
            # One more piece of text, in a chunk whose shape is wrong (a server that omits
            # ``object`` does on every chunk): a chunk of its skeleton makes the same
            # findings again (they name paths and literals, never the text) and takes the
            # same step, so the next one need not be parsed either.
            self.repeatable(_CONTENT_DELTA, plain, again=True)

    def _check_chunk(self, chunk: dict[str, Any], found: EventFindings) -> None:
        choices, usage = chunk.get("choices"), chunk.get("usage")
        if choices is None and usage is None:
            return  # nothing the rules read (the shape finding follows in _on_chunk)
        if not choices and (
            "prompt_filter_results" in chunk or "prompt_annotations" in chunk
        ):  # Azure's prompt-annotation chunk: its own empty id, object and created
            if usage is not None:
                self._on_usage(chunk, usage, found)
            return
        # Azure's async-filter annotation chunks carry no delta (and Azure's empty ids).
        fields: Mapping[str, Any] = chunk  # read leniently, it may lack any of these
        if (
            fields.get("id") != self._id
            or fields.get("created") != self._created
            or fields.get("object") != _CHUNK_OBJECT
        ) and (not choices or any("delta" in choice for choice in choices)):
            self._check_identity(chunk, found)
        if choices:
            for choice in choices:
                self._on_choice(choice, found)
        if usage is not None:
            self._on_usage(chunk, usage, found)

    # -- the parts of a chunk ----------------------------------------------------------

    def _check_identity(self, chunk: dict[str, Any], found: EventFindings) -> None:
        # .get throughout: a chunk read leniently may lack any of these (already reported).
        fields: Mapping[str, Any] = chunk
        kind = fields.get("object")
        if kind is not None and kind != _CHUNK_OBJECT:
            detail = (
                f": field object: expected {_CHUNK_OBJECT!r}, got {_wire.token(kind, _OBJECTS)}"
            )
            found.add(rules.SCHEMA_MISMATCH, detail)
        chunk_id, created = fields.get("id"), fields.get("created")
        if created is not None:
            # Groq, xAI, Perplexity, Ollama and Azure-hosted models move ``created`` on by a
            # second mid-stream; no client keys anything by it, so only the latest is kept
            # (for the fast path) and a change is not a finding.
            self._created = created
        if chunk_id is None:
            return
        if self._id is None:
            self._id = chunk_id
        elif chunk_id != self._id:
            detail = (
                f": id {_shown_id(chunk_id)} differs from the first chunk's {_shown_id(self._id)}"
            )
            found.add(rules.INCONSISTENT_ID, detail)

    def _on_choice(self, choice: dict[str, Any], found: EventFindings) -> None:
        number = choice["index"]
        state = self._choice(number)
        if state is None:
            others = self._choices
            tracked = (self._choice0 is not None) + (0 if others is None else len(others))
            if tracked >= MAX_TRACKED_CHOICES:
                return  # past the bound: this choice goes unchecked
            state = self._new_choice(number, found)
        delta = choice.get("delta")
        if delta is not None:
            if state.finished_at is not None:
                self._content_after_finish(state, delta, found)
            self._on_delta(state, delta, found)
        reason = choice.get("finish_reason")
        if reason is not None:
            self._on_finish(state, reason, found)

    def _new_choice(self, number: int, found: EventFindings) -> _ChoiceState:
        highest = self._max_choice
        shown = _wire.number(number)
        if number < 0 or (self._n is not None and number >= self._n):
            bound = f" (the request asked for n={self._n})" if self._n is not None else ""
            found.add(rules.CHOICE_INDEX_INVALID, f": choice index {shown} is out of range{bound}")
        elif highest is not None and number < highest:
            detail = f": choice {shown} first appears after choice {_wire.number(highest)}"
            found.add(rules.CHOICE_OUT_OF_ORDER, detail)
        if highest is None or number > highest:
            self._max_choice = number
        state = _ChoiceState(number)
        if number == 0:
            self._choice0 = state
        else:
            if self._choices is None:
                self._choices = {}
            self._choices[number] = state
        return state

    def _choice(self, number: int) -> _ChoiceState | None:
        if number == 0:
            return self._choice0
        others = self._choices
        return None if others is None else others.get(number)

    def _all_choices(self) -> dict[int, _ChoiceState]:
        """Every tracked choice by index (a new dict: for the end-of-stream checks)."""
        choices = {} if self._choice0 is None else {0: self._choice0}
        if self._choices is not None:
            choices.update(self._choices)
        return choices

    def _on_delta(self, state: _ChoiceState, delta: dict[str, Any], found: EventFindings) -> None:
        state.deltas += 1
        if delta.get("role") is not None:
            where = f": choice {_wire.number(state.number)} sends delta.role"
            if state.role_at is not None:
                found.add(rules.ROLE_REPEATED, f"{where} again (first at event {state.role_at})")
            elif state.deltas > 1:
                found.add(
                    rules.ROLE_NOT_FIRST, f"{where} on its chunk #{state.deltas}, not its first"
                )
            if state.role_at is None:
                state.role_at = found.index
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            for call in tool_calls:
                self._on_tool_call(state, call, found)
        function_call = delta.get("function_call")
        if function_call is not None:
            self._on_function_call(state, function_call, found)

    def _on_tool_call(
        self, state: _ChoiceState, call: dict[str, Any], found: EventFindings
    ) -> None:
        where = f": choice {_wire.number(state.number)}"
        position = call.get("index")
        if type(position) is not int or position < 0:
            shown = "no index" if position is None else f"index {_wire.number(position)}"
            detail = f"{where}: tool_calls entry has {shown}; an integer >= 0 is required"
            found.add(rules.TOOL_CALL_INDEX_INVALID, detail)
            return
        function = call.get("function")
        if function is None:
            # The SDK stream helper asserts every delta of a function tool call carries one.
            detail = f"{where}: tool call {_wire.number(position)} has a delta without a "
            found.add(rules.TOOL_CALL_FUNCTION_MISSING, detail + "function object")
            function = {}
        has_id, has_name = bool(call.get("id")), bool(function.get("name"))
        tools = state.tools
        if tools is None:
            tools = state.tools = {}
        tool = tools.get(position)
        call_number = _wire.number(position)
        if tool is None:
            if self._tool_calls >= MAX_TRACKED_TOOL_CALLS:
                return  # past the bound: this call goes unchecked
            self._tool_calls += 1
            expected = len(tools)
            if position != expected:
                detail = f"{where}: tool call index {call_number} first appears after {expected} "
                detail += f"call(s); expected index {expected}"
                found.add(rules.TOOL_CALL_INDEX_INVALID, detail)
            tool = tools[position] = _ToolCall(position)
            if not (has_id and has_name):
                missing = _joined(("id", not has_id), ("function.name", not has_name))
                detail = f"{where}: the first delta of tool call {call_number} has no {missing}"
                found.add(rules.TOOL_CALL_HEADER_MISSING, detail)
        elif (has_id and tool.has_id) or (has_name and tool.has_name):
            again = _joined(
                ("id", has_id and tool.has_id), ("function.name", has_name and tool.has_name)
            )
            found.add(
                rules.TOOL_CALL_HEADER_REPEATED,
                f"{where}: tool call {call_number} sends its {again} again",
            )
        tool.has_id = tool.has_id or has_id
        tool.has_name = tool.has_name or has_name
        arguments = function.get("arguments")
        if arguments and state.finished_at is None:  # after the finish nothing checks them
            tool.arguments.add(self, arguments)
        if state.legacy_function is not None:
            self._mixed(state, found)

    def _on_function_call(
        self, state: _ChoiceState, call: dict[str, Any], found: EventFindings
    ) -> None:
        if state.legacy_function is None:
            state.legacy_function = _ToolCall(0)
            if state.tools:
                self._mixed(state, found)
        arguments = call.get("arguments")
        if arguments and state.finished_at is None:
            state.legacy_function.arguments.add(self, arguments)

    def _mixed(self, state: _ChoiceState, found: EventFindings) -> None:
        detail = f": choice {_wire.number(state.number)} mixes function_call and tool_calls deltas"
        found.add(rules.FUNCTION_CALL_MIXED, detail)

    def _content_after_finish(
        self, state: _ChoiceState, delta: dict[str, Any], found: EventFindings
    ) -> None:
        # Empty strings and empty lists carry nothing: only real content counts.
        kinds = [
            kind
            for kind in ("content", "refusal", "tool_calls", "function_call")
            if delta.get(kind)
        ]
        if kinds:
            detail = (
                f": choice {_wire.number(state.number)} sends {', '.join(kinds)} after its "
                f"finish_reason {_wire.token(state.finish_reason, FINISH_REASONS)} "
                f"(event {state.finished_at})"
            )
            found.add(rules.CONTENT_AFTER_FINISH, detail)

    def _on_finish(self, state: _ChoiceState, reason: str, found: EventFindings) -> None:
        where = f": choice {_wire.number(state.number)}"
        if state.finished_at is not None:
            detail = (
                f"{where} finishes again with {_wire.token(reason, FINISH_REASONS)}; it "
                f"finished with {_wire.token(state.finish_reason, FINISH_REASONS)} at event "
                f"{state.finished_at}"
            )
            found.add(rules.MULTIPLE_FINISH_REASON, detail)
            return
        state.finish_reason, state.finished_at = reason, found.index
        if reason not in FINISH_REASONS:
            detail = (
                f"{where} finishes with the non-standard finish_reason {_wire.describe(reason)}"
            )
            found.add(rules.UNKNOWN_FINISH_REASON, detail)
        elif reason == "stop" and state.tools and self._tools_finish_as_tool_calls:
            detail = (
                f"{where} streamed {len(state.tools)} tool call(s) and finishes with stop, "
                "not tool_calls; the request forced no function"
            )
            found.add(rules.TOOL_CALLS_FINISHED_AS_STOP, detail)
        calls = list(state.tools.values()) if state.tools else []
        if state.legacy_function is not None:
            calls.append(state.legacy_function)
        for call in calls:
            text = call.arguments.text()
            if text is None:
                continue  # past the budget, or already checked
            call.arguments.release(self)  # checked below: give the room back now
            try:
                parse_json(text)
            except ValueError as error:
                what = (
                    "function_call"
                    if call is state.legacy_function
                    else f"tool call {_wire.number(call.index)}"
                )
                detail = f"{where} finished but the arguments of {what} are not JSON ({error}): "
                found.add(rules.TOOL_CALL_ARGUMENTS_INVALID, detail + preview(text))

    def _on_usage(self, chunk: dict[str, Any], usage: dict[str, Any], found: EventFindings) -> None:
        choices = chunk.get("choices")
        if self._include_usage is False:
            detail = " carries usage but stream_options.include_usage was not requested"
            found.add(rules.USAGE_UNREQUESTED, detail)
        # .get: a chunk read leniently may carry a usage with missing or mistyped counts.
        counts: Mapping[str, Any] = usage
        prompt, completion = counts.get("prompt_tokens"), counts.get("completion_tokens")
        total = counts.get("total_tokens")
        if (
            type(prompt) is int
            and type(completion) is int
            and type(total) is int
            and total != prompt + completion
        ):
            detail = (
                f": usage.total_tokens {_wire.number(total)} != prompt_tokens "
                f"{_wire.number(prompt)} + completion_tokens {_wire.number(completion)}"
            )
            found.add(rules.USAGE_TOTAL_MISMATCH, detail)
        self._usage_seen = True
        if choices is None:
            # vLLM and other compatible servers; the SDK stream helper iterates choices.
            detail = (
                " carries usage with choices null or absent; OpenAI sends choices: [] (the "
                "SDK stream helper raises TypeError on this chunk)"
            )
            found.add(rules.USAGE_WITHOUT_CHOICES, detail)
            return
        if choices:
            # Compat placements (vLLM's continuous usage, usage on the finish chunk).
            detail = " carries usage on a chunk with choices; OpenAI sends it on a chunk of "
            found.add(rules.USAGE_NONSTANDARD, detail + "its own with choices: []")
            return
        if self._usage_at is not None:
            detail = f" is a second usage chunk (the first was event {self._usage_at})"
            found.add(rules.USAGE_REPEATED, detail)
            return
        self._usage_at = found.index
        unfinished = sorted(
            n for n, state in self._all_choices().items() if state.finished_at is None
        )
        if unfinished:
            detail = f": the usage chunk arrives before choice(s) {_listed(unfinished)} finished"
            found.add(rules.USAGE_NOT_LAST, detail)

    def _unfinished_choices(self, index: int, offset: int, when: str) -> list[Finding]:
        # Bounded: at most MAX_TRACKED_CHOICES tracked, and n is at most MAX_CHECKED_N.
        choices = self._all_choices()
        expected = set(choices)
        if self._n is not None:
            expected.update(range(self._n))
        missing = sorted(n for n in expected if n not in choices or choices[n].finished_at is None)
        if not missing:
            return []
        never = [n for n in missing if n not in choices]
        detail = f" ({_listed(never)} never appeared)" if never else ""
        return [
            rules.MISSING_FINISH_REASON.finding(
                f"{when}: choice(s) {_listed(missing)} have no finish_reason{detail}",
                index,
                offset,
            )
        ]


#: Each kind of event's route: its step, then its handler (``classify`` picks it).
_ROUTES: Final = {
    TERMINAL: Route(TERMINAL, OpenAIChatChecker._on_done),
    ERROR: Route(ERROR, OpenAIChatChecker._on_error),
    _USAGE: Route(_USAGE, OpenAIChatChecker._on_chunk),
    OTHER: Route(OTHER, OpenAIChatChecker._on_chunk),
}
OpenAIChatChecker.ROUTES = _ROUTES


# -- the protocol's declaration ------------------------------------------------------------


def _is_done(event: Event, payload: object) -> bool:
    return event.data.startswith("[DONE]")


def _is_chat_chunk(event: Event, payload: object) -> bool:
    """A chat chunk by its ``object``, or by its shape whatever ``object`` says (a server
    sending ``"object": "text_completion"`` is a broken chat stream, which the checker then
    reports): a ``choices`` entry with a ``delta`` object. Azure's first chunk (``"object":
    ""``, ``choices: []``) and its annotations (no ``delta``) prove nothing."""
    if type(payload) is not dict:
        return False
    if payload.get("object") == _CHUNK_OBJECT:
        return True
    choices = payload.get("choices")
    return type(choices) is list and any(
        type(choice) is dict and type(choice.get("delta")) is dict for choice in choices
    )


#: The largest integer kept for a request fact (``max_tokens``): a JSON number can have
#: 100,000 digits.
_MAX_FACT_INT: Final = 2**53
#: The stop sequences kept (``stop``): OpenAI takes at most 4 (vLLM and llama.cpp more);
#: a longer list, or a sequence longer than ``_MAX_STOP_CHARS``, reads as unknown, so the
#: facts of an open stream stay a few hundred bytes whatever the client sent.
MAX_STOP_SEQUENCES: Final = 4
_MAX_STOP_CHARS: Final = 64
#: The largest ``top_logprobs`` believed (OpenAI takes at most 20).
_MAX_TOP_LOGPROBS: Final = 64
#: The longest forced function name kept (``tool_choice``; OpenAI's names are at most 64).
_MAX_FUNCTION_NAME_CHARS: Final = 64
#: The ``tool_choice`` strings kept as they are; a ``{"type": "function", ...}`` object
#: reads as ``"function"`` (its name is ``tool_choice_function``).
_TOOL_CHOICES: frozenset[str] = frozenset({"none", "auto", "required"})
#: The ``response_format.type`` values kept; any other reads as unknown.
_RESPONSE_FORMATS: frozenset[str] = frozenset({"text", "json_object", "json_schema"})


def _read_request(body: RequestBody, facts: dict[str, Any], attributes: dict[str, Any]) -> None:
    """The request facts chat reads: ``n`` (``None`` when present but not 1 to
    ``MAX_CHECKED_N``: per-choice counts go unchecked), ``stream_options.include_usage``
    (``{"include_usage": bool}``), and what the request asks of the answer's shape, for
    ``streamguard conformance``, each only when well typed and small: ``max_tokens``
    (``max_completion_tokens`` when both are sent, as OpenAI reads them), ``stop`` (a tuple
    of at most ``MAX_STOP_SEQUENCES`` strings; one string is a tuple of one; ``None`` when
    unusable), ``tool_choice`` (``"none"``, ``"auto"``, ``"required"``, ``"function"``
    for a forced function, whose name is ``tool_choice_function``, or ``"other"`` for any
    other value), ``logprobs`` (a bool),
    ``top_logprobs`` and ``response_format`` (its ``type``)."""
    request = NO_FIELDS if isinstance(body, list) else body  # a batch has no fields
    if "n" in request:
        n = request["n"]
        facts["n"] = n if type(n) is int and 1 <= n <= MAX_CHECKED_N else None
    options = request.get("stream_options")
    if is_mapping(options):
        facts["stream_options"] = {"include_usage": options.get("include_usage") is True}
    for key in ("max_tokens", "max_completion_tokens"):  # the newer name wins
        value = request.get(key)
        if type(value) is int and 0 <= value <= _MAX_FACT_INT:
            facts["max_tokens"] = value
    stop = request.get("stop")
    if stop is not None:
        facts["stop"] = _stop_sequences(stop)
    choice = request.get("tool_choice")
    if type(choice) is str and choice in _TOOL_CHOICES:
        facts["tool_choice"] = choice
    elif is_mapping(choice) and choice.get("type") == "function":
        facts["tool_choice"] = "function"
        function = choice.get("function")
        name = function.get("name") if is_mapping(function) else None
        if type(name) is str and len(name) <= _MAX_FUNCTION_NAME_CHARS:
            facts["tool_choice_function"] = name
    elif choice is not None:  # (allowed_tools, a custom tool...): how it finishes is unknown
        facts["tool_choice"] = "other"
    logprobs = request.get("logprobs")
    if type(logprobs) is bool:
        facts["logprobs"] = logprobs
    top = request.get("top_logprobs")
    if type(top) is int and 0 <= top <= _MAX_TOP_LOGPROBS:
        facts["top_logprobs"] = top
    response_format = request.get("response_format")
    if is_mapping(response_format):
        kind = response_format.get("type")
        if type(kind) is str and kind in _RESPONSE_FORMATS:
            facts["response_format"] = kind


def _stop_sequences(value: object) -> tuple[str, ...] | None:
    """A request's ``stop`` as a tuple of strings, or None when unusable (too many, too
    long, not strings): the checks that read it are then skipped."""
    if type(value) is str:
        return (value,) if len(value) <= _MAX_STOP_CHARS else None
    if type(value) is not list or len(value) > MAX_STOP_SEQUENCES:
        return None
    kept: list[str] = []
    for item in value:
        if type(item) is not str or len(item) > _MAX_STOP_CHARS:
            return None
        kept.append(item)
    return tuple(kept)


SPEC: ProtocolSpec = ProtocolSpec(
    name=OpenAIChatChecker.name,
    checker=OpenAIChatChecker,
    summary="OpenAI Chat Completions streaming (`/v1/chat/completions`), ending in `[DONE]`",
    paths=(Signal(20, lambda path: path.endswith("/chat/completions")),),
    events=(Signal(30, _is_done), Signal(70, _is_chat_chunk)),
    request_facts=(
        RequestFact(
            (
                "n",
                "stream_options",
                "max_tokens",
                "stop",
                "tool_choice",
                "tool_choice_function",
                "logprobs",
                "top_logprobs",
                "response_format",
            ),
            _read_request,
        ),
    ),
)
