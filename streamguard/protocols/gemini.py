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

``finishReason`` is judged only at the end because legacy (2024) streams repeat
``finishReason: "STOP"`` on every chunk and some OpenAI→Gemini translators send an empty
``STOP`` chunk *before* the content; both are clean. ``content_after_finish`` is a chunk
that brings content *without* a finishReason after a finish that itself carried content.

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

from collections.abc import Sequence
from typing import Any

from streamguard import rules
from streamguard.protocols._base import NO_FINDINGS, Checker
from streamguard.protocols._payload import parse_json, preview
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["GeminiChecker"]

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


class _Candidate:
    """What the checker knows about one candidate index."""

    __slots__ = ("content_after_finish_reported", "finish_had_content", "finished_at")

    def __init__(self) -> None:
        #: The event index of its latest finishReason; None while generating.
        self.finished_at: int | None = None
        self.finish_had_content = False
        self.content_after_finish_reported = False


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


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


class GeminiChecker(Checker):
    """Checks a Gemini ``streamGenerateContent?alt=sse`` stream; see the module docstring."""

    name = "gemini"
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
            what = f"candidate(s) {', '.join(map(str, unfinished))} never received"
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
        if chunk.get("error"):
            return self._on_error(chunk["error"], event, index)
        found: list[Finding] = []
        problems: list[str] = []
        candidates = chunk.get("candidates")
        if candidates is not None:
            if type(candidates) is list:
                for position, candidate in enumerate(candidates):
                    self._on_candidate(candidate, position, event, index, found, problems)
            else:
                problems.append(f"candidates is {_type_name(candidates)}, expected a list")
        usage = chunk.get("usageMetadata")
        if usage is not None:
            self._on_usage(usage, event, index, found, problems)
        feedback = chunk.get("promptFeedback")
        if feedback is not None:
            if type(feedback) is not dict:
                problems.append(f"promptFeedback is {_type_name(feedback)}, expected an object")
            elif feedback.get("blockReason"):
                # A blocked prompt is the whole stream: nothing may follow it.
                self.terminal_index = index
        if problems:
            found.insert(
                0,
                rules.SCHEMA_MISMATCH.finding(
                    f"event {index}: {'; '.join(problems)}", index, event.offset
                ),
            )
        return found

    def _on_candidate(
        self,
        candidate: object,
        position: int,
        event: Event,
        index: int,
        found: list[Finding],
        problems: list[str],
    ) -> None:
        where = f"candidates[{position}]"
        if type(candidate) is not dict:
            problems.append(f"{where} is {_type_name(candidate)}, expected an object")
            return
        number = candidate.get("index", 0)  # proto3 JSON omits a zero index
        finish = candidate.get("finishReason")
        if type(number) is not int or number < 0:
            problems.append(f"{where}.index is {number!r}, expected a non-negative integer")
            return
        if finish is not None and not isinstance(finish, str):
            problems.append(f"{where}.finishReason is {_type_name(finish)}, expected a string")
            finish = None
        content = candidate.get("content")
        if content is not None and (
            type(content) is not dict or type(content.get("parts", [])) is not list
        ):
            problems.append(f"{where}.content is not an object with a list of parts")
        state = self._candidates.get(number)
        if state is None:
            if len(self._candidates) >= _MAX_CANDIDATES:
                return
            state = self._candidates[number] = _Candidate()
        has_content = _has_content(candidate)
        if state.finished_at is not None and has_content and finish is None:
            if not state.finish_had_content:
                # An empty STOP before the content (some translators): not a real finish.
                state.finished_at = None
            elif not state.content_after_finish_reported:
                state.content_after_finish_reported = True
                found.append(
                    rules.CONTENT_AFTER_FINISH.finding(
                        f"event {index}: candidate {number} brings content after its "
                        f"finishReason in event {state.finished_at}",
                        index,
                        event.offset,
                    )
                )
        if finish is not None:
            state.finished_at = index
            state.finish_had_content = has_content
            self._last_finish_index = index

    def _on_usage(
        self, usage: object, event: Event, index: int, found: list[Finding], problems: list[str]
    ) -> None:
        if type(usage) is not dict:
            problems.append(f"usageMetadata is {_type_name(usage)}, expected an object")
            return
        for counter in _USAGE_COUNTERS:
            value = usage.get(counter)
            if value is None:
                continue  # proto3 JSON omits zeros: an absent counter says nothing
            if type(value) is not int:
                problems.append(f"usageMetadata.{counter} is {_type_name(value)}")
                continue
            before = self._usage.get(counter)
            if before is not None and value < before and not self._usage_reported:
                self._usage_reported = True
                found.append(
                    rules.USAGE_DECREASED.finding(
                        f"event {index}: usageMetadata.{counter} went down from {before} to "
                        f"{value}; usage is cumulative (reported once per stream)",
                        index,
                        event.offset,
                    )
                )
            self._usage[counter] = value

    def _on_error(self, error: object, event: Event, index: int) -> Sequence[Finding]:
        self.error_index = index
        if type(error) is not dict or not isinstance(error.get("message"), str):
            return (
                rules.SCHEMA_MISMATCH.finding(
                    f"event {index}: error is not an object with a string message "
                    f"({preview(event.data)})",
                    index,
                    event.offset,
                ),
            )
        return NO_FINDINGS

    # -- framing the SDK cannot read ------------------------------------------------------

    def _check_framing(self, event: Event, index: int) -> Finding | None:
        """Whether this event is framed other than ``data: <one line>`` and a blank line."""
        data = event.data
        size = len(data) if data.isascii() else len(data.encode())
        expected, self._expected_offset = self._expected_offset, event.offset + _DATA_PREFIX + size
        if self._framing_reported:
            return None
        if event.event != "message":
            problem = f"has an 'event: {event.event}' line"
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
