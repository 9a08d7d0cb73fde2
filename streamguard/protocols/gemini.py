"""Gemini ``streamGenerateContent?alt=sse`` (Gemini API and Vertex AI).

Theory of operation
-------------------

Each event is one ``data: <GenerateContentResponse JSON>`` line and a blank line. There is
no sentinel: a ``finishReason`` on a candidate's last chunk is the only in-band sign that
the model stopped, so the terminal is a *state at the end of the body*, not an event. The
checker keeps, per candidate index, whether it has finished, and classifies each chunk by
the state it leaves (``all_finished``: every candidate seen has a finishReason); a blocked
prompt (``promptFeedback.blockReason``) is the ``terminal`` at once, an error chunk
(``{"error": {"code", "message", "status"}}``) the ``error``. At the body's end,
``finished`` is ``completed``, its terminal the chunk that finished the last candidate;
``generating`` is a truncated response: ``missing_finish_reason`` (rather than the generic
``missing_terminal``), outcome ``unclosed``.

The lifecycle is the table ``LIFECYCLE``, printed in ``docs/lifecycles.md`` (generated
from the table, so the page cannot drift from the machine).

Whether the stream finished is judged only at the end, because legacy (2024) streams
repeat ``finishReason: "STOP"`` on every chunk and some OpenAI→Gemini translators send an
empty ``STOP`` chunk *before* the content: both still end ``completed``, and both are
``finish_reason_not_last`` (a warning, once per candidate), because relays and clients that
stop at the first finishReason lose the content after it (google-genai itself keeps
reading). ``content_after_finish`` (an error) is a chunk that brings content *without* a
finishReason after a finish that itself carried content: the stream said it was done.

A chunk's fields are checked by one handler each (``_FIELDS``), in ``classify``: a chunk
names no type, its kind is the state its fields leave the candidates in, so they run
before the step, which the kind's route (``ROUTES``) then takes. A chunk that fails the
shape check still counts: its ``schema_mismatch`` comes with the lifecycle rules run on
what it carries with the right type (a candidate whose ``index`` is unusable is judged at
its position in the list, as the SDK's ``response.text`` reads it). An error chunk's own
shape is checked too: google-genai raises its ``APIError`` from ``error.code`` and fails
with a ``TypeError`` instead when the code is not an integer.

Finding messages never quote the stream: indices and counts appear as digits when they
are sane integers, other values as their size and a short hash (``streamguard._wire``);
lists show a few entries and a count.

Field types the official Python SDK refuses
-------------------------------------------

google-genai validates every chunk into its pydantic ``GenerateContentResponse`` (lax
mode), so one field of the wrong type (``content.role`` a number, a ``parts`` entry that is
not an object, ``modelVersion`` a list, ``functionCall.args`` a list, a streamed
argument's ``functionCall.partialArgs[].jsonPath`` a number, a ``thoughtSignature`` that is
not base64, ...) fails the whole stream. The fields it types are declared once as
nested shapes in the shared vocabulary (``_fields``: ``_RESPONSE``, ``_CANDIDATE``,
``_CONTENT``, ``_PART``, ``_USAGE``, ``_FEEDBACK``) and walked by ``nested_problem``: a
chunk's refused values make one ``schema_mismatch`` naming their paths (the first of each
part of the chunk), never a value. Null, unknown keys, unknown enum strings and what lax
mode converts (``"3"`` or ``"3.0"`` for a count, ``1`` for a boolean) stay clean, as the
SDK reads them; ``tests/test_oracle.py`` checks every declared field against the SDK
itself. Lists are walked on their first ``_fields.MAX_SHAPE_ITEMS`` entries only.

Framing the official Python SDK cannot read
-------------------------------------------

google-genai's ``_iter_response_stream`` is not a WHATWG parser: it recognises only lines
starting with exactly ``data: ``, brace-counts every other non-empty line as raw JSON and
raises ``UnknownApiResponseError`` on it. So SSE comments (keep-alives), ``event:``,
``id:`` and ``retry:`` lines, ``data:`` without the space and multi-line data, all fine for
a browser, break that client; they are reported once per stream as
``sdk_incompatible_framing`` (an error although the stream is valid SSE: severity follows
the official client, which fails; ``docs/rules.md``). The check reads every
event, those after a blocked prompt included (the SDK yields it and reads on), until an
error chunk (the SDK raises there).

The SSE parser does not hand comments to checkers, so the checker finds them from byte
offsets: an event that is exactly ``data: <json>`` and two line endings ends where the next
one begins. The gap is fixed by the first event (2 bytes for LF framing, 4 for CRLF), and
any other gap means lines the SDK cannot read. Known blind spot: bytes after the last event
(the parser reports an unfinished frame there itself).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from streamguard import rules
from streamguard._wire import number, token
from streamguard.protocols.engine import (
    ANY,
    BASE64,
    EACH,
    END,
    ERROR,
    LAX_BOOLEAN,
    LAX_INTEGER,
    LAX_NUMBER,
    NO_FINDINGS,
    NUMBER,
    OBJECT,
    OTHER,
    STAY,
    TERMINAL,
    Checker,
    EventFindings,
    Holes,
    Lifecycle,
    ProtocolSpec,
    Route,
    Shape,
    Signal,
    Transcript,
    broken,
    event_name,
    go,
    json_object,
    lax_integer,
    listing,
    may,
    may_hold,
    nested_problem,
    object_problems,
    opt,
    preview,
    req,
    terminated_lifecycle,
    type_name,
)
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["SPEC", "GeminiChecker"]

_DATA_PREFIX = len("data: ")
#: ``data: {...}`` then LF LF, or CRLF CRLF: the only gaps between events the SDK reads.
_CLEAN_GAPS = (2, 4)
#: The counters of ``usageMetadata`` that are cumulative over the stream.
_CUMULATIVE = "promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "totalTokenCount"
#: A text chunk's holes by the usage counters it carries (at most 16 sets: made on use).
_TEXT_HOLES: dict[tuple[str, ...], Holes] = {}


def _text_holes(counters: tuple[str, ...]) -> Holes:
    """The holes of a chunk of one candidate's text: the text, and each counter it carries
    as a value read again."""
    holes = _TEXT_HOLES.get(counters)
    if holes is None:
        text = (("candidates", 0, "content", "parts", 0, "text"),)
        values = tuple(("usageMetadata", counter) for counter in counters)
        holes = _TEXT_HOLES[counters] = Holes(text, values)
    return holes


#: Parts keys that carry no content by themselves (a final ``{"text": "",
#: "thoughtSignature": "…"}`` part is clean after the finish).
_NON_CONTENT_PART_KEYS = frozenset({"thought", "thoughtSignature"})
#: Candidate indices tracked per stream (the API allows at most 8 candidates).
_MAX_CANDIDATES = 64
#: Entries a message lists before it says "and N more".
_LISTED = 3

_GENERATING, _FINISHED = "generating", "finished"
_COMPLETED, _BLOCKED, _ERRORED = "completed", "blocked", "errored"
_ALL_FINISHED = "all_finished"
#: The steps after the terminal and after the error, as every terminated protocol words them.
_AFTER = terminated_lifecycle().table

_LIFECYCLE = Lifecycle(
    phases={
        _GENERATING: "chunks arrive; a candidate lacks its finishReason, or none was seen",
        _FINISHED: "every candidate seen has a finishReason (a later chunk may reopen one)",
        _COMPLETED: "the body ended with every candidate finished",
        _BLOCKED: "the prompt was blocked (promptFeedback.blockReason)",
        _ERRORED: "an error chunk arrived",
    },
    kinds={_ALL_FINISHED: "a chunk after which every candidate seen has a finishReason"},
    initial=_GENERATING,
    table={
        (_GENERATING, _ALL_FINISHED): go(_FINISHED),
        (_GENERATING, TERMINAL): go(_BLOCKED),
        (_GENERATING, ERROR): go(_ERRORED),
        (_GENERATING, OTHER): STAY,
        # ``name`` says which candidates lack a finishReason (GeminiChecker.end_step).
        (_GENERATING, END): broken(
            rules.MISSING_FINISH_REASON,
            "the body ended after {index} event(s) and {offset} byte(s); {name} a "
            "finishReason, so the response is truncated",
        ),
        (_FINISHED, _ALL_FINISHED): STAY,
        (_FINISHED, TERMINAL): go(_BLOCKED),
        (_FINISHED, ERROR): go(_ERRORED),
        (_FINISHED, OTHER): go(_GENERATING),
        (_FINISHED, END): go(_COMPLETED),
        (_COMPLETED, ANY): STAY,
        (_BLOCKED, END): STAY,
        (_BLOCKED, ANY): _AFTER["ended", ANY],
        (_ERRORED, END): STAY,
        (_ERRORED, ANY): _AFTER["errored", ANY],
    },
    ended=frozenset({_COMPLETED, _BLOCKED}),
    errored=frozenset({_ERRORED}),
    sealed=frozenset({_BLOCKED, _ERRORED}),
)


class _Candidate:
    """What the checker knows about one candidate index."""

    __slots__ = (
        "content_after_finish_reported",
        "finish_had_content",
        "finish_not_last_reported",
        "finish_reason",
        "finished_at",
    )

    def __init__(self) -> None:
        self.finished_at: int | None = None  # the event of the finish that stands; None: generating
        self.finish_reason: str | None = None  # the latest one, to tell a change of mind
        self.finish_had_content = False
        # Both rules are reported once per candidate (at most _MAX_CANDIDATES times).
        self.content_after_finish_reported = False
        self.finish_not_last_reported = False


class _Problems:
    """The shape problems of one chunk: the first few in words, the rest counted, so a
    chunk with a hundred thousand bad candidates makes a short message."""

    __slots__ = ("shown", "total")

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.total = 0

    def add(self, problem: str | None) -> None:
        if problem is None:
            return
        self.total += 1
        if len(self.shown) < _LISTED:
            self.shown.append(problem)

    def __str__(self) -> str:
        return listing(self.shown, self.total, _LISTED, "; ")


# -- Field types as google-genai's models enforce them -------------------------------------
#
# google-genai validates each chunk into ``GenerateContentResponse`` (pydantic, lax mode),
# so a field of the wrong type fails the whole stream with a ValidationError, and an enum
# field that is not a string with an AttributeError (its lenient enum calls ``.upper()``).
# Every field is optional and null reads as absent (``may``); what lax mode converts (``"7"``
# for an integer, ``1`` for a boolean) is accepted, as the ``_fields`` lax kinds read it.
# The shapes hold only the fields ``_on_candidates``, ``_on_usage`` and ``_on_feedback`` do
# not read themselves.

_SAFETY_RATING: Final = Shape(
    (
        may("category"),
        may("probability"),
        may("blocked", LAX_BOOLEAN),
        may("probabilityScore", LAX_NUMBER),
        may("severity"),
        may("severityScore", LAX_NUMBER),
    )
)
#: One piece of a function call's arguments streamed by path (Gemini 3's
#: ``streamFunctionCallArguments``): ``PartialArg``, whose ``nullValue`` is a ``Literal``
#: (any other string is refused, unlike the lenient enums).
_PARTIAL_ARG: Final = Shape(
    (
        may("jsonPath"),
        may("stringValue"),
        may("numberValue", LAX_NUMBER),
        may("boolValue", LAX_BOOLEAN),
        may("nullValue", values=("NULL_VALUE",)),
        may("willContinue", LAX_BOOLEAN),
    )
)
_FUNCTION_CALL: Final = Shape(
    (may("id"), may("name"), may("args", OBJECT), may("willContinue", LAX_BOOLEAN)),
    (may_hold("partialArgs", _PARTIAL_ARG, EACH),),
)
_PART: Final = Shape(
    (may("text"), may("thought", LAX_BOOLEAN), may("thoughtSignature", BASE64)),
    (
        may_hold("functionCall", _FUNCTION_CALL),
        may_hold("functionResponse", Shape((may("id"), may("name"), may("response", OBJECT)))),
        may_hold("inlineData", Shape((may("mimeType"), may("data", BASE64)))),
        may_hold("fileData", Shape((may("mimeType"), may("fileUri")))),
        may_hold("executableCode", Shape((may("code"), may("language")))),
        may_hold("codeExecutionResult", Shape((may("outcome"), may("output")))),
    ),
)
#: A candidate's fields beyond those ``_on_candidates`` reads itself (index, finishReason,
#: content's own type). Not ``finishMessage`` (the Gemini API converter drops it) nor
#: ``citationMetadata`` (converted leniently: a string or a list reads as empty).
_CANDIDATE: Final = Shape(
    (
        may("avgLogprobs", LAX_NUMBER),
        may("tokenCount", LAX_INTEGER),
        may("groundingMetadata", OBJECT),
        may("urlContextMetadata", OBJECT),
        may("logprobsResult", OBJECT),
    ),
    # The Gemini API converter iterates it, so an empty object reads as an empty list.
    (may_hold("safetyRatings", _SAFETY_RATING, EACH, empty_object_is_list=True),),
)
_CONTENT: Final = Shape((may("role"),), (may_hold("parts", _PART, EACH),))
_TOKENS_DETAILS: Final = Shape((may("modality"), may("tokenCount", LAX_INTEGER)))
#: usageMetadata's fields beyond the cumulative counters ``_on_usage`` reads.
_USAGE: Final = Shape(
    (
        may("cachedContentTokenCount", LAX_INTEGER),
        may("toolUsePromptTokenCount", LAX_INTEGER),
        may("trafficType"),
    ),
    tuple(
        may_hold(details, _TOKENS_DETAILS, EACH)
        for details in (
            "promptTokensDetails",
            "cacheTokensDetails",
            "candidatesTokensDetails",
            "toolUsePromptTokensDetails",
        )
    ),
)
_FEEDBACK: Final = Shape(
    (may("blockReason"), may("blockReasonMessage")),
    (may_hold("safetyRatings", _SAFETY_RATING, EACH),),
)
#: The in-band error's fields as ``request_streamed`` reads them (``_on_error``).
_ERROR_FIELDS: Final = (
    req("code", NUMBER),
    req("message"),
    opt("status", nullable=True),
)
#: The chunk's own fields beyond candidates, usageMetadata and promptFeedback.
_RESPONSE: Final = Shape((may("modelVersion"), may("responseId"), may("modelStatus", OBJECT)))


def _has_content(candidate: dict[str, Any]) -> bool:
    """Whether a candidate entry brings content (a non-empty text, a function call, ...)."""
    content = candidate.get("content")
    if type(content) is not dict:
        return False
    parts = content.get("parts")
    if type(parts) is not list:
        return False
    for part in parts:
        if type(part) is dict:
            for key, value in part.items():
                if key not in _NON_CONTENT_PART_KEYS and (value or key != "text"):
                    return True
    return False


class GeminiChecker(Checker):
    """Checks a Gemini ``streamGenerateContent?alt=sse`` stream; see the module docstring."""

    # Slots, and the per-stream tables made on first use: one checker lives per open stream.
    __slots__ = ("_candidates", "_data_end", "_gap", "_unfinished", "_usage")

    name = "gemini"
    REPEAT_READS_EVENT = False  # (its repeat_event reads the token and values only)
    # The terminal is "every candidate finished" at the end of the body (the END step into
    # ``completed`` records it), so a truncated stream is unclosed, a finished one completed.
    has_terminal = True
    LIFECYCLE = _LIFECYCLE
    # google-genai reads only ``data: `` lines (the module docstring's second part).
    READS_FRAMING = True
    RAISES = frozenset(
        {
            rules.CONTENT_AFTER_FINISH,
            rules.FINISH_REASON_NOT_LAST,
            rules.INVALID_JSON,
            rules.SCHEMA_MISMATCH,
            rules.SDK_INCOMPATIBLE_FRAMING,
            rules.USAGE_DECREASED,
        }
    )

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        self._candidates: dict[int, _Candidate] | None = None
        self._unfinished = 0  # how many tracked candidates have no finishReason now
        self._usage: dict[str, int] | None = None
        self._gap: int | None = None  # bytes from a data line to the next event, when clean
        self._data_end = 0

    # -- the engine's entry points ----------------------------------------------------------

    def framing_finding(self, event: Event, index: int) -> Finding | None:
        # Every event, those after a blocked prompt included (a sealed phase): the SDK
        # yields a blocked prompt's chunk and reads on.
        if self.error_index is not None or self.reported(rules.SDK_INCOMPATIBLE_FRAMING):
            return None  # nothing more to find, nor to track
        problem = self._framing_problem(event, index)
        return None if problem is None else self._framing(event, index, problem)

    def framing_at_end(self, end: Event, events: int) -> Finding | None:
        if events and end.offset - self._data_end < (self._gap or min(_CLEAN_GAPS)):
            # Fewer bytes than a blank line after the last data line: it lacked the space
            # (more is an unfinished frame, which the parser reports itself).
            return self._framing(end, events, "ends with a data: line without the space")
        return None

    def end_step(self, events: int) -> tuple[int, str]:
        """The step into ``completed`` records the chunk that finished the last candidate as
        the terminal (decided only now); ``missing_finish_reason`` names the unfinished
        candidates."""
        index, shown = events, ""
        states = (self._candidates or {}).items()
        if self.phase == _FINISHED:  # the terminal: the chunk that finished the last one
            index = max(state.finished_at or 0 for _, state in states)
        elif self.phase == _GENERATING:
            unfinished = sorted(i for i, state in states if state.finished_at is None)
            shown = "no candidate ever received"
            if unfinished:
                listed = listing(map(number, unfinished), len(unfinished))
                shown = f"candidate(s) {listed} never received"
        return index, shown

    # -- one chunk --------------------------------------------------------------------------

    @classmethod
    def transcribe(cls, data: str, out: Transcript) -> bool:
        chunk = json_object(data)
        if chunk is None:
            return False
        carried = False
        candidates = chunk.get("candidates")
        for position, candidate in enumerate(candidates if isinstance(candidates, list) else ()):
            if not isinstance(candidate, dict):
                continue
            given = candidate.get("index")
            # As the checker reads it (``_on_candidates``); one it cannot read is filed by
            # its position, as the checker judges it.
            number = 0 if given is None else lax_integer(given)
            if number is None or number < 0:
                number = position
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            for part in parts if isinstance(parts, list) else ():
                if isinstance(part, dict) and not part.get("thought"):
                    carried |= out.add(number, part.get("text"))
            out.finish(candidate.get("finishReason"))
        return carried

    def classify(self, event: Event, found: EventFindings) -> Route | None:
        # A chunk names no type: its kind (an error, a blocked prompt, every candidate
        # finished, other) is the state its fields' handlers (``_FIELDS``) leave the
        # candidates in, so they run here, before the step, and the kind picks the route.
        chunk = self.parse_object(event, found.index, found.items)
        if chunk is None:
            return None  # nothing it says is known: no step
        found.payload = chunk
        found.name = event_name(event.event)  # (as ``advance`` names an event by default)
        error = chunk.get("error")
        if error is not None:
            self._on_error(error, found)
            return self.ROUTES[ERROR]
        states = self._candidates
        tracked = 0 if states is None else len(states)
        kind = None
        problems = _Problems()
        for field, handler in _FIELDS:
            value = chunk.get(field)
            if value is not None:
                kind = handler(self, value, found, problems) or kind
        problems.add(nested_problem(chunk, _RESPONSE))
        if problems.total:
            shape = self.finding(rules.SCHEMA_MISMATCH, event, found.index, f": {problems}")
            found.items.insert(0, shape)
        if kind is not None:
            return self.ROUTES[kind]
        states = self._candidates
        if states and not self._unfinished:
            return self.ROUTES[_ALL_FINISHED]
        if states is not None and len(states) != tracked:
            return _STARTED
        return self.ROUTES[OTHER]

    def _on_more(self, chunk: dict[str, Any], found: EventFindings) -> None:
        """After the step of an other chunk that started no candidate: one that only adds a
        piece of a candidate's text, and found nothing, vouches that the next chunk like it
        takes the same step, its usage counters read again (they must not go down)."""
        if found.items:
            return
        counters = self._more_text(chunk)
        if counters is not None:
            self.repeatable(_text_holes(counters), counters)

    def _more_text(self, chunk: dict[str, Any]) -> tuple[str, ...] | None:
        """The usage counters of a chunk that only adds text to one open candidate (it
        finished none; one that started a candidate never gets here), else None."""
        candidates = chunk.get("candidates")
        states = self._candidates
        if type(candidates) is not list or len(candidates) != 1 or states is None:
            return None
        candidate = candidates[0]
        if type(candidate) is not dict or "finishReason" in candidate:
            return None
        state = states.get(candidate.get("index") or 0)
        content = candidate.get("content")
        parts = content.get("parts") if type(content) is dict else None
        if (
            state is None
            or state.finished_at is not None
            or type(parts) is not list
            or len(parts) != 1
            or type(parts[0]) is not dict
            or parts[0].keys() != {"text"}
            or type(parts[0]["text"]) is not str
        ):
            return None
        usage = chunk.get("usageMetadata")
        if usage is None:
            return ()
        if type(usage) is not dict:
            return None
        counters = []
        for counter in _CUMULATIVE:
            count = usage.get(counter)
            if type(count) is int:
                counters.append(counter)
            elif count is not None:
                return None  # read laxly ("7", 7.0): a hole reads plain digits only
        return tuple(counters)

    def repeat_event(
        self, event: Event, index: int, token: object, values: Sequence[str]
    ) -> Sequence[Finding] | None:
        """One more piece of text (``_more_text``): its usage counters, named by ``token``,
        are kept as the full check keeps them; one that went down asks for the full check,
        which reports it."""
        if type(token) is not tuple:
            return None
        if values:
            counts = [int(value) for value in values]
            seen = self._usage
            if seen is None:
                return None
            for counter, count in zip(token, counts, strict=True):
                before = seen.get(counter)
                if before is not None and count < before:
                    return None
            for counter, count in zip(token, counts, strict=True):
                seen[counter] = count
        return NO_FINDINGS

    def _on_candidates(self, value: object, found: EventFindings, problems: _Problems) -> None:
        if type(value) is not list:
            if value != {}:  # (the converter iterates it: an empty object reads as [])
                problems.add(f"candidates is {type_name(value)}, expected a list")
            return
        for position, candidate in enumerate(value):
            where = f"candidates[{position}]"
            if type(candidate) is not dict:
                problems.add(f"{where} is {type_name(candidate)}, expected an object")
                continue
            # proto3 JSON omits a zero index, and reads null as the default (zero) too; the
            # SDK reads ``"1"`` or ``1.0`` as 1, and so does the checker.
            given = candidate.get("index")
            number_ = 0 if given is None else lax_integer(given)
            if number_ is None or number_ < 0:
                problems.add(f"{where}.index is {number(given)}, expected a non-negative integer")
                # Judged where the SDK's own accessors (``response.text``) read it: by position.
                number_ = position
            finish = candidate.get("finishReason")
            if finish is not None and not isinstance(finish, str):
                problems.add(f"{where}.finishReason is {type_name(finish)}, expected a string")
                finish = None
            content = candidate.get("content")
            parts = content.get("parts") if type(content) is dict else None
            if content is not None and (
                type(content) is not dict or (parts is not None and type(parts) is not list)
            ):
                problems.add(f"{where}.content is not an object with a list of parts")
            elif content is not None:
                problems.add(nested_problem(content, _CONTENT, f"{where}.content"))
            problems.add(nested_problem(candidate, _CANDIDATE, where))
            states = self._candidates
            if states is None:
                states = self._candidates = {}
            state = states.get(number_)
            if state is None:
                if len(states) >= _MAX_CANDIDATES:
                    continue
                state = states[number_] = _Candidate()
                self._unfinished += 1
            has_content = _has_content(candidate)
            # A contentless repeat of the same finishReason is harmless (the final chunk may
            # carry only a thought signature); a different one contradicts the first.
            if state.finished_at is not None and (
                has_content or (finish is not None and finish != state.finish_reason)
            ):
                shown = number(number_)
                if finish is None and state.finish_had_content:
                    if not state.content_after_finish_reported:
                        state.content_after_finish_reported = True
                        detail = (
                            f": candidate {shown} brings content after its finishReason in event "
                            f"{state.finished_at}"
                        )
                        found.add(rules.CONTENT_AFTER_FINISH, detail)
                else:
                    # A finish repeated on every chunk (legacy), or an empty finish before the
                    # content (some translators): the stream goes on, but a relay that stops at
                    # the first finishReason does not.
                    if not state.finish_not_last_reported:
                        state.finish_not_last_reported = True
                        what = "" if state.finish_had_content else " on a chunk without content"
                        more = "more content" if has_content else "a different finishReason"
                        detail = (
                            f": candidate {shown} brings {more} after the finishReason sent{what} "
                            f"in event {state.finished_at} (reported once per candidate)"
                        )
                        found.add(rules.FINISH_REASON_NOT_LAST, detail)
                    if finish is None:
                        state.finished_at = None  # that finish was not the end
                        self._unfinished += 1
            if finish is not None:
                if state.finished_at is None:
                    self._unfinished -= 1
                state.finished_at = found.index
                state.finish_reason = finish
                state.finish_had_content = has_content

    def _on_usage(self, value: object, found: EventFindings, problems: _Problems) -> None:
        if type(value) is not dict:
            problems.add(f"usageMetadata is {type_name(value)}, expected an object")
            return
        problems.add(nested_problem(value, _USAGE, "usageMetadata"))
        seen = self._usage
        if seen is None:
            seen = self._usage = {}
        for counter in _CUMULATIVE:
            given = value.get(counter)
            if given is None:
                continue  # proto3 JSON omits zeros: an absent counter says nothing
            count = lax_integer(given)  # as the SDK reads it: "7" and 7.0 are 7
            if count is None:
                problems.add(f"usageMetadata.{counter} is {type_name(given)}")
                continue
            before = seen.get(counter)
            # Once per stream here (in Gemini only): first_time keeps the note.
            if before is not None and count < before and self.first_time(rules.USAGE_DECREASED):
                detail = (
                    f": usageMetadata.{counter} went down from {number(before)} to "
                    f"{number(count)}; usage is cumulative (reported once per stream)"
                )
                found.add(rules.USAGE_DECREASED, detail)
            seen[counter] = count

    def _on_feedback(self, value: object, found: EventFindings, problems: _Problems) -> str | None:
        if type(value) is not dict:
            problems.add(f"promptFeedback is {type_name(value)}, expected an object")
            return None
        problems.add(nested_problem(value, _FEEDBACK, "promptFeedback"))
        if value.get("blockReason"):
            return TERMINAL  # a blocked prompt is the whole stream: nothing may follow it
        return None

    def _on_error(self, error: object, found: EventFindings) -> None:
        """An in-band error ends the stream; its shape is checked as google-genai reads it.

        ``request_streamed`` raises ``APIError.raise_error(error["code"], ...)``, which
        compares the code with 400 and 500: a code that is missing or not a number (a
        string ``"500"``, null) raises ``TypeError`` instead of the ``APIError`` the
        application handles (``503.0`` raises its ``ServerError``; ``true``, no code, is
        refused though the SDK compares it too). ``message`` is the documented text.
        ``status`` (``"UNAVAILABLE"``) is checked when present; the SDK tolerates its
        absence.
        """
        problems = object_problems(error, _ERROR_FIELDS, "error")
        if problems:
            detail = (
                ": the in-band error is not {code: number, message: string, status: "
                f"string}}: {'; '.join(problems)} ({preview(found.event.data)})"
            )
            found.add(rules.SCHEMA_MISMATCH, detail)

    # -- framing the SDK cannot read ------------------------------------------------------

    def _framing_problem(self, event: Event, index: int) -> str | None:
        """How the event is framed other than ``data: <one line>`` and a blank line, if so."""
        data = event.data
        size = len(data) if data.isascii() else len(data.encode())
        expected, self._data_end = self._data_end, event.offset + _DATA_PREFIX + size
        if event.event != "message":
            return f"has an event: line (named {token(event.event, ())})"
        if event.id is not None or event.retry is not None:
            return "has an id: or retry: line"
        if "\n" in data:
            return "splits its data over several data: lines"
        if index == 0:
            if event.offset:
                return f"has {event.offset} byte(s) before it (a comment or a BOM)"
            return None
        gap = event.offset - expected
        if self._gap is None and gap in _CLEAN_GAPS:
            self._gap = gap  # the first gap fixes the framing: LF or CRLF
        return None if gap == self._gap else "follows a comment, or a data: line without the space"

    def _framing(self, event: Event, index: int, problem: str) -> Finding | None:
        """The stream's one ``sdk_incompatible_framing`` (None once it was reported)."""
        found: list[Finding] = []
        detail = f" (byte {event.offset}) {problem}; the google-genai SDK reads only 'data: ' lines"
        self.report(
            found, rules.SDK_INCOMPATIBLE_FRAMING, event, index, f"{detail} and fails on it"
        )
        return found[0] if found else None


_Handler = Callable[[GeminiChecker, Any, EventFindings, _Problems], str | None]
#: A chunk's fields and their handlers, in the order of their findings (a tuple walks faster
#: than a dict); a handler returns the kind its field makes the chunk (blocked: TERMINAL).
_FIELDS: tuple[tuple[str, _Handler], ...] = (
    ("candidates", GeminiChecker._on_candidates),
    ("usageMetadata", GeminiChecker._on_usage),
    ("promptFeedback", GeminiChecker._on_feedback),
)

#: The route of each kind ``classify`` finds: its step, and for an other chunk the check
#: that it only adds text (``_on_more``). No shape: the field handlers checked it already.
GeminiChecker.ROUTES = {
    _ALL_FINISHED: Route(_ALL_FINISHED),
    TERMINAL: Route(TERMINAL),
    ERROR: Route(ERROR),
    OTHER: Route(OTHER, GeminiChecker._on_more),
}
#: An other chunk that started a candidate: its step alone (it adds to no open one).
_STARTED: Final = Route(OTHER)


# -- the protocol's declaration ------------------------------------------------------------

#: Keys only a ``GenerateContentResponse`` chunk has at its top level.
_CHUNK_KEYS = ("candidates", "usageMetadata", "promptFeedback", "modelVersion")


def _is_gemini_chunk(event: Event, payload: object) -> bool:
    return type(payload) is dict and any(key in payload for key in _CHUNK_KEYS)


SPEC: ProtocolSpec = ProtocolSpec(
    name=GeminiChecker.name,
    checker=GeminiChecker,
    summary="Gemini `streamGenerateContent?alt=sse`, ending with a finish reason",
    paths=(Signal(10, lambda path: path.endswith(":streamGenerateContent")),),
    events=(Signal(80, _is_gemini_chunk),),
)
