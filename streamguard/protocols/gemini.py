"""Gemini ``streamGenerateContent?alt=sse`` (Gemini API and Vertex AI).

Theory of operation
-------------------

Each event is one ``data: <GenerateContentResponse JSON>`` line and a blank line. There is
no sentinel: the end of the body is the end of the stream, and a ``finishReason`` on a
candidate's last chunk is the only in-band sign that the model stopped. A healthy stream
is one of::

    CHUNK*  FINAL  USAGE_ONLY?  EOF      every candidate index got a finishReason
    BLOCKED EOF                          promptFeedback.blockReason, no candidates
    CHUNK*  ERROR  EOF                   {"error": {"code", "message", "status"}}

So the terminal signal is a *state at the end of the body*, not an event. The checker keeps,
per candidate index, whether it has finished, and decides at the end:

* every candidate seen has finished → ``terminal_index`` is set to the chunk that finished
  the last one, and the monitor reports ``completed``;
* otherwise → ``missing_finish_reason`` (rather than the generic ``missing_terminal``), no
  terminal, and the monitor reports ``unclosed``;
* a BLOCKED chunk is the terminal at once (anything after it is ``event_after_terminal``);
  an ERROR chunk sets ``error_index`` (outcome ``error_event``, anything after it is
  ``event_after_terminal``).

Whether the stream finished is judged only at the end, because legacy (2024) streams
repeat ``finishReason: "STOP"`` on every chunk and some OpenAI→Gemini translators send an
empty ``STOP`` chunk *before* the content: both still end ``completed``, and both are
``finish_reason_not_last`` (a warning, once per candidate), because relays and clients that
stop at the first finishReason lose the content after it (google-genai itself keeps
reading). ``content_after_finish`` (an error) is a chunk that brings content *without* a
finishReason after a finish that itself carried content: the stream said it was done.

A chunk that fails the shape check still counts: its ``schema_mismatch`` comes with the
lifecycle rules run on what it carries with the right type (a candidate whose ``index`` is
unusable is judged at its position in the list, as the SDK's ``response.text`` reads it).
An error chunk's own shape is checked too: google-genai raises its ``APIError`` from
``error.code`` and fails with a ``TypeError`` instead when the code is not an integer.

Finding messages never quote the stream: a ``finishReason`` appears only when it is a
documented one, other values as their size and a short hash (``streamguard._wire``),
indices and counts as digits when they are sane integers; lists show a few entries and a
count.

Framing the official Python SDK cannot read
-------------------------------------------

google-genai's ``_iter_response_stream`` is not a WHATWG parser: it recognises only lines
starting with exactly ``data: ``, brace-counts every other non-empty line as raw JSON and
raises ``UnknownApiResponseError`` on it. So SSE comments (keep-alives), ``event:``,
``id:`` and ``retry:`` lines, ``data:`` without the space and multi-line data, all fine for
a browser, break that client; they are reported once per stream as
``sdk_incompatible_framing`` (a warning: the stream is valid SSE).

The SSE parser does not hand comments to checkers, so the checker finds them from byte
offsets: an event that is exactly ``data: <json>`` and two line endings ends where the next
one begins. The gap is fixed by the first event (2 bytes for LF framing, 4 for CRLF), and
any other gap means lines the SDK cannot read. Known blind spot: bytes after the last event
(the parser reports an unfinished frame there itself).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

from streamguard import rules
from streamguard._wire import number, token
from streamguard.protocols._base import NO_FINDINGS, LegacyChecker
from streamguard.protocols._payload import parse_json, preview
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["FINISH_REASONS", "GeminiChecker"]

#: ``FinishReason`` in google-genai (``types.py``): the values a message may quote.
FINISH_REASONS = frozenset(
    {
        "FINISH_REASON_UNSPECIFIED",
        "STOP",
        "MAX_TOKENS",
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "OTHER",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "MALFORMED_FUNCTION_CALL",
        "IMAGE_SAFETY",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "IMAGE_PROHIBITED_CONTENT",
        "NO_IMAGE",
        "IMAGE_RECITATION",
        "IMAGE_OTHER",
    }
)

_DATA_PREFIX = len("data: ")
#: ``data: {...}`` then LF LF, or CRLF CRLF: the only gaps between events the SDK reads.
_CLEAN_GAPS = (2, 4)
#: Counters of ``usageMetadata`` that are cumulative over the stream.
_USAGE_COUNTERS = (
    "promptTokenCount",
    "candidatesTokenCount",
    "thoughtsTokenCount",
    "totalTokenCount",
)
#: Parts keys that carry no content by themselves (a final ``{"text": "",
#: "thoughtSignature": "…"}`` part is clean after the finish).
_NON_CONTENT_PART_KEYS = frozenset({"thought", "thoughtSignature"})
#: Candidate indices tracked per stream (the API allows at most 8 candidates).
_MAX_CANDIDATES = 64
#: Entries a message lists before it says "and N more".
_LISTED = 3


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
        #: The event index of its latest finishReason; None while generating.
        self.finished_at: int | None = None
        self.finish_reason: str | None = None  # the latest one, to tell a change of mind
        self.finish_had_content = False
        self.content_after_finish_reported = False
        self.finish_not_last_reported = False


class _Problems:
    """The shape problems of one chunk: the first few in words, the rest counted, so a
    chunk with a hundred thousand bad candidates makes a short message."""

    __slots__ = ("shown", "total")

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.total = 0

    def add(self, problem: str) -> None:
        self.total += 1
        if len(self.shown) < _LISTED:
            self.shown.append(problem)

    def __bool__(self) -> bool:
        return self.total > 0

    def __str__(self) -> str:
        text = "; ".join(self.shown)
        return text if self.total <= _LISTED else f"{text}; and {self.total - _LISTED} more"


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _listing(shown: Iterable[str], total: int) -> str:
    """``0, 1, 2 and 5 more``: a few entries, then a count, whatever ``total`` is."""
    text = ", ".join(islice(shown, _LISTED))
    return text if total <= _LISTED else f"{text} and {total - _LISTED} more"


def _has_content(candidate: dict[str, Any]) -> bool:
    """Whether a candidate entry brings content (a non-empty text, a function call, ...)."""
    content = candidate.get("content")
    if type(content) is not dict:
        return False
    parts = content.get("parts")
    if type(parts) is not list:
        return False
    for part in parts:
        if type(part) is not dict:
            continue
        for key, value in part.items():
            if key == "text":
                if value:
                    return True
            elif key not in _NON_CONTENT_PART_KEYS:
                return True
    return False


class GeminiChecker(LegacyChecker):
    """Checks a Gemini ``streamGenerateContent?alt=sse`` stream; see the module docstring."""

    name = "gemini"
    RAISES = frozenset(
        {
            rules.CONTENT_AFTER_FINISH,
            rules.EVENT_AFTER_TERMINAL,
            rules.FINISH_REASON_NOT_LAST,
            rules.INVALID_JSON,
            rules.MISSING_FINISH_REASON,
            rules.SCHEMA_MISMATCH,
            rules.SDK_INCOMPATIBLE_FRAMING,
            rules.USAGE_DECREASED,
        }
    )
    # The terminal is "every candidate finished" at the end of the body: check_end sets
    # terminal_index when it holds, so a truncated stream is unclosed, a finished one
    # completed.
    has_terminal = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._candidates: dict[int, _Candidate] = {}
        self._last_finish_index: int | None = None
        self._usage: dict[str, int] = {}
        self._usage_reported = False
        #: Bytes between one event's data line and the next event in clean framing.
        self._gap: int | None = None
        self._expected_offset = 0
        self._framing_reported = False

    # -- lifecycle ------------------------------------------------------------------------

    def on_event(self, event: Event, index: int) -> Sequence[Finding]:
        if self.error_index is not None:
            return super().on_event(event, index)  # the error chunk ended the stream
        framing = self._check_framing(event, index)
        found = super().on_event(event, index)
        if framing is None:
            return found
        return (framing, *found)

    def check_end(self, events: int, offset: int) -> Sequence[Finding]:
        framing = self._check_trailing_framing(events, offset)
        if self.terminal_index is not None or self.error_index is not None:
            return framing
        unfinished = sorted(i for i, c in self._candidates.items() if c.finished_at is None)
        if self._candidates and not unfinished:
            self.terminal_index = self._last_finish_index
            return framing
        if unfinished:
            listed = _listing(map(number, unfinished), len(unfinished))
            what = f"candidate(s) {listed} never received"
        else:
            what = "no candidate ever received"
        return (
            *framing,
            rules.MISSING_FINISH_REASON.finding(
                f"the body ended after {events} event(s) and {offset} byte(s); {what} a "
                "finishReason, so the response is truncated",
                events,
                offset,
            ),
        )

    # -- one chunk ------------------------------------------------------------------------

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        try:
            chunk = parse_json(event.data)
        except ValueError as exc:
            # ``exc`` is pydantic-core's description: a fixed text and a position.
            return (
                rules.INVALID_JSON.finding(
                    f"event {index}: data is not JSON ({exc}): {preview(event.data)}",
                    index,
                    event.offset,
                ),
            )
        if type(chunk) is not dict:
            return (
                rules.INVALID_JSON.finding(
                    f"event {index}: data is a JSON {_type_name(chunk)}, not an object",
                    index,
                    event.offset,
                ),
            )
        error = chunk.get("error")
        if error is not None:
            return self._on_error(error, event, index)
        found: list[Finding] = []
        problems = _Problems()
        candidates = chunk.get("candidates")
        if candidates is not None:
            if type(candidates) is list:
                for position, candidate in enumerate(candidates):
                    self._on_candidate(candidate, position, event, index, found, problems)
            else:
                problems.add(f"candidates is {_type_name(candidates)}, expected a list")
        usage = chunk.get("usageMetadata")
        if usage is not None:
            self._on_usage(usage, event, index, found, problems)
        feedback = chunk.get("promptFeedback")
        if feedback is not None:
            if type(feedback) is not dict:
                problems.add(f"promptFeedback is {_type_name(feedback)}, expected an object")
            elif feedback.get("blockReason"):
                # A blocked prompt is the whole stream: nothing may follow it.
                self.terminal_index = index
        if problems:
            found.insert(
                0,
                rules.SCHEMA_MISMATCH.finding(f"event {index}: {problems}", index, event.offset),
            )
        return found

    def _on_candidate(
        self,
        candidate: object,
        position: int,
        event: Event,
        index: int,
        found: list[Finding],
        problems: _Problems,
    ) -> None:
        where = f"candidates[{position}]"
        if type(candidate) is not dict:
            problems.add(f"{where} is {_type_name(candidate)}, expected an object")
            return
        # proto3 JSON omits a zero index, and reads null as the default (zero) too.
        number_ = candidate.get("index")
        if number_ is None:
            number_ = 0
        elif type(number_) is not int or number_ < 0:
            problems.add(f"{where}.index is {number(number_)}, expected a non-negative integer")
            # Judged where the SDK's own accessors (``response.text``) read it: by position.
            number_ = position
        finish = candidate.get("finishReason")
        if finish is not None and not isinstance(finish, str):
            problems.add(f"{where}.finishReason is {_type_name(finish)}, expected a string")
            finish = None
        content = candidate.get("content")
        if content is not None and (
            type(content) is not dict or type(content.get("parts", [])) is not list
        ):
            problems.add(f"{where}.content is not an object with a list of parts")
        state = self._candidates.get(number_)
        if state is None:
            if len(self._candidates) >= _MAX_CANDIDATES:
                return
            state = self._candidates[number_] = _Candidate()
        has_content = _has_content(candidate)
        # A contentless repeat of the same finishReason is harmless (the final chunk may
        # carry only a thought signature); a different one contradicts the first.
        if state.finished_at is not None and (
            has_content or (finish is not None and finish != state.finish_reason)
        ):
            if finish is None and state.finish_had_content:
                if not state.content_after_finish_reported:
                    state.content_after_finish_reported = True
                    found.append(
                        rules.CONTENT_AFTER_FINISH.finding(
                            f"event {index}: candidate {number(number_)} brings content after "
                            f"its finishReason in event {state.finished_at}",
                            index,
                            event.offset,
                        )
                    )
            else:
                # A finish repeated on every chunk (legacy), or an empty finish before the
                # content (some translators): the stream goes on, but a relay that stops at
                # the first finishReason does not.
                if not state.finish_not_last_reported:
                    state.finish_not_last_reported = True
                    what = "" if state.finish_had_content else " on a chunk without content"
                    more = "more content" if has_content else "a different finishReason"
                    found.append(
                        rules.FINISH_REASON_NOT_LAST.finding(
                            f"event {index}: candidate {number(number_)} brings {more} "
                            f"after the finishReason sent{what} in event {state.finished_at} "
                            "(reported once per candidate)",
                            index,
                            event.offset,
                        )
                    )
                if finish is None:
                    state.finished_at = None  # that finish was not the end
        if finish is not None:
            state.finished_at = index
            state.finish_reason = finish
            state.finish_had_content = has_content
            self._last_finish_index = index

    def _on_usage(
        self, usage: object, event: Event, index: int, found: list[Finding], problems: _Problems
    ) -> None:
        if type(usage) is not dict:
            problems.add(f"usageMetadata is {_type_name(usage)}, expected an object")
            return
        for counter in _USAGE_COUNTERS:
            value = usage.get(counter)
            if value is None:
                continue  # proto3 JSON omits zeros: an absent counter says nothing
            if type(value) is not int:
                problems.add(f"usageMetadata.{counter} is {_type_name(value)}")
                continue
            before = self._usage.get(counter)
            if before is not None and value < before and not self._usage_reported:
                self._usage_reported = True
                found.append(
                    rules.USAGE_DECREASED.finding(
                        f"event {index}: usageMetadata.{counter} went down from "
                        f"{number(before)} to {number(value)}; usage is cumulative (reported "
                        "once per stream)",
                        index,
                        event.offset,
                    )
                )
            self._usage[counter] = value

    def _on_error(self, error: object, event: Event, index: int) -> Sequence[Finding]:
        """An in-band error ends the stream; its shape is checked as google-genai reads it.

        ``request_streamed`` raises ``APIError.raise_error(error["code"], ...)``, which
        compares the code with 400 and 500: a code that is missing or not an integer (a
        string ``"500"``) raises ``TypeError`` instead of the ``APIError`` the application
        handles. ``message`` is the documented text. ``status`` (``"UNAVAILABLE"``) is
        checked when present; the SDK tolerates its absence.
        """
        self.error_index = index
        problems = _Problems()
        if type(error) is not dict:
            problems.add(f"error is {_type_name(error)}, expected an object")
        else:
            code = error.get("code")
            if type(code) is not int:
                problems.add(f"error.code is {_type_name(code)}, expected an integer")
            if not isinstance(error.get("message"), str):
                problems.add(
                    f"error.message is {_type_name(error.get('message'))}, expected a string"
                )
            status = error.get("status")
            if status is not None and not isinstance(status, str):
                problems.add(f"error.status is {_type_name(status)}, expected a string")
        if not problems:
            return NO_FINDINGS
        return (
            rules.SCHEMA_MISMATCH.finding(
                f"event {index}: the in-band error is not {{code: integer, message: string, "
                f"status: string}}: {problems} ({preview(event.data)})",
                index,
                event.offset,
            ),
        )

    # -- framing the SDK cannot read ------------------------------------------------------

    def _check_framing(self, event: Event, index: int) -> Finding | None:
        """Whether this event is framed other than ``data: <one line>`` and a blank line."""
        data = event.data
        size = len(data) if data.isascii() else len(data.encode())
        expected, self._expected_offset = self._expected_offset, event.offset + _DATA_PREFIX + size
        if self._framing_reported:
            return None
        if event.event != "message":
            problem = f"has an event: line (named {token(event.event, ())})"
        elif event.id is not None or event.retry is not None:
            problem = "has an id: or retry: line"
        elif "\n" in data:
            problem = "splits its data over several data: lines"
        elif index == 0:
            if event.offset == 0:
                return None
            problem = f"has {event.offset} byte(s) before it (a comment or a BOM)"
        elif self._clean_gap(event.offset - expected):
            return None
        else:
            problem = "follows a comment, or a data: line without the space"
        return self._framing_finding(problem, index, event.offset)

    def _check_trailing_framing(self, events: int, offset: int) -> Sequence[Finding]:
        """The last event's framing, seen from the end of the body.

        More bytes than a blank line after the last data line is an unfinished frame,
        which the parser reports itself; fewer means that line lacked the space.
        """
        if self._framing_reported or events == 0:
            return NO_FINDINGS
        gap = offset - self._expected_offset
        if gap >= (self._gap or min(_CLEAN_GAPS)):
            return NO_FINDINGS
        return (self._framing_finding("ends with a data: line without the space", events, offset),)

    def _clean_gap(self, gap: int) -> bool:
        """Whether ``gap`` bytes between a data line and the next event are two line endings."""
        if self._gap is None and gap in _CLEAN_GAPS:
            self._gap = gap  # the first gap fixes the framing: LF or CRLF
        return gap == self._gap

    def _framing_finding(self, problem: str, index: int, offset: int) -> Finding:
        self._framing_reported = True
        return rules.SDK_INCOMPATIBLE_FRAMING.finding(
            f"the stream at event {index} (byte {offset}) {problem}; the google-genai SDK reads "
            "only 'data: ' lines and fails on it (reported once per stream)",
            index,
            offset,
        )
