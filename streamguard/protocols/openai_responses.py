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
transition is in ``on_event`` (phases) and ``_on_body`` (items and parts)::

    EXPECT_CREATED --response.created--> STREAMING --completed/incomplete--> ENDED
          (a resumed stream starts in STREAMING)  \\--response.failed--------> ENDED (error)
                                                   \\--error--> ERRORED --failed/[DONE]--> ENDED

``sequence_number`` must count up by one from 0 (from ``starting_after + 1`` on a
resumed stream), keepalives included. An item is opened by ``output_item.added`` with the
next ``output_index`` and closed by its ``output_item.done``; parts are opened and closed
by ``content_part.added/done`` (``content_index``) and ``reasoning_summary_part.added/done``
(``summary_index``). Any other event that names an ``output_index`` or ``item_id`` must
point at an open item, and text events at an open part. Deltas are joined per part (up to
a bound) to compare with the ``.done`` text. A gateway's ``data: [DONE]`` after the
terminal is accepted once. Unknown ``response.*`` event types and ``keepalive`` are legal.

Payloads are parsed and shape-checked in one pass by pydantic-core against ``_Event``, a
strict TypedDict of the fields the rules read (unknown keys are ignored); which of those
fields an event type requires is in ``_REQUIRED``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, NotRequired

from pydantic import ConfigDict, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from streamguard import rules
from streamguard.protocols._base import NO_FINDINGS, Checker
from streamguard.protocols._payload import preview, validation_finding
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["TERMINAL_TYPES", "OpenAIResponsesChecker"]

#: The lifecycle events that end a response, with the status each must carry.
TERMINAL_TYPES = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
_OPENING_TYPES = frozenset({"response.created", "response.queued", "response.in_progress"})
_OPENING_STATUSES = frozenset({"in_progress", "queued"})
_DONE_ITEM_STATUSES = frozenset({"completed", "incomplete", "failed"})

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
#: Past this many characters of one part's deltas, stop joining them (bounded memory).
MAX_TEXT_CHARS = 1024 * 1024

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
for _family, (_index, _final) in _TEXT_FAMILIES.items():
    _part = (_index,) if _index else ()
    _REQUIRED[f"{_family}.delta"] = (*_ITEM_FIELDS, *_part, "delta")
    _REQUIRED[f"{_family}.done"] = (*_ITEM_FIELDS, *_part, _final)

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


_EVENT = TypeAdapter(_Event)


class _Phase(Enum):
    EXPECT_CREATED = "expect_created"
    STREAMING = "streaming"
    ERRORED = "errored"  # an error event arrived: only response.failed or [DONE] may follow
    ENDED = "ended"  # the terminal arrived: only one gateway [DONE] may follow


class _Text:
    """The deltas of one part so far; ``pieces`` is None once past MAX_TEXT_CHARS."""

    __slots__ = ("chars", "pieces")

    def __init__(self) -> None:
        self.pieces: list[str] | None = []
        self.chars = 0

    def add(self, delta: str) -> None:
        if self.pieces is None:
            return
        self.chars += len(delta)
        if self.chars > MAX_TEXT_CHARS:
            self.pieces = None
        else:
            self.pieces.append(delta)


class _OpenItem:
    __slots__ = ("adopted", "contents", "id", "summaries", "texts")

    def __init__(self, item_id: str | None, adopted: bool = False) -> None:
        self.id = item_id
        # Opened before a resumed stream's first event: its parts are taken on trust and
        # its text is not compared (the earlier deltas were never seen).
        self.adopted = adopted
        self.contents: set[int] = set()  # open content parts (content_index)
        self.summaries: set[int] = set()  # open reasoning-summary parts (summary_index)
        # Deltas so far per (family, part index).
        self.texts: dict[tuple[str, int | None], _Text] = {}


class OpenAIResponsesChecker(Checker):
    """Checks an OpenAI Responses API stream event by event (reference §2)."""

    name = "openai_responses"

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        starting_after = _starting_after(request, path)
        self._resumed = starting_after is not None
        self._phase = _Phase.STREAMING if self._resumed else _Phase.EXPECT_CREATED
        self._next_sequence = 0 if starting_after is None else starting_after + 1
        self._response_id: str | None = None
        self._items_added = 0
        self._open: dict[int, _OpenItem] = {}
        self._done_seen = False
        self._reported: set[str] = set()  # rules reported once per stream

    # -- lifecycle -----------------------------------------------------------------------

    def is_terminal(self, event: Event) -> bool:
        return _type_of(event) in TERMINAL_TYPES

    def on_event(self, event: Event, index: int) -> Sequence[Finding]:
        if event.data.startswith("[DONE]"):
            return self._on_done(event, index)
        if self._phase is _Phase.ENDED:
            return super().on_event(event, index)  # duplicate_terminal / event_after_terminal
        return self.check_event(event, index)

    def _on_done(self, event: Event, index: int) -> Sequence[Finding]:
        """A gateway's [DONE]: fine once after the terminal (or after an error event)."""
        if self._phase is _Phase.ERRORED:
            self._phase = _Phase.ENDED
            self.terminal_index = index
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

    # -- one event ---------------------------------------------------------------------

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        try:
            payload = _EVENT.validate_json(event.data)
        except ValidationError as error:
            self._next_sequence += 1  # it presumably took its slot: no follow-on gap
            return [validation_finding(error, event, index)]
        kind = payload["type"]
        found: list[Finding] = []
        self._check_sequence(payload["sequence_number"], event, index, found)
        for field in _REQUIRED.get(kind, ()):
            if field not in payload:
                found.append(
                    rules.SCHEMA_MISMATCH.finding(
                        f"event {index}: field {field}: required on {kind} but missing",
                        index,
                        event.offset,
                    )
                )
                return found
        if event.event not in ("message", kind) and "event_type_mismatch" not in self._reported:
            self._reported.add("event_type_mismatch")
            found.append(
                rules.EVENT_TYPE_MISMATCH.finding(
                    f"event {index} is named {event.event[:60]!r} but its type is {kind[:60]!r}",
                    index,
                    event.offset,
                )
            )

        if self._phase is _Phase.EXPECT_CREATED:
            self._phase = _Phase.STREAMING
            if kind != "response.created":
                found.append(
                    rules.MISSING_RESPONSE_CREATED.finding(
                        f"event {index} is {kind[:60]!r}; a stream starts with response.created",
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
                        f"event {index} ({kind[:60]!r}) follows the error event {self.error_index}"
                        "; only response.failed may follow it",
                        index,
                        event.offset,
                    )
                )
            return found

        if kind == "error":
            self._phase = _Phase.ERRORED
            self.error_index = index
        elif kind in TERMINAL_TYPES:
            self._on_terminal(payload, kind, event, index, found)
        elif kind in _OPENING_TYPES:
            self._check_response(payload, kind, event, index, found)
        elif "output_index" in payload or "item_id" in payload:
            self._on_body(payload, kind, event, index, found)
        return found

    # -- transitions -------------------------------------------------------------------

    def _check_sequence(self, number: int, event: Event, index: int, found: list[Finding]) -> None:
        expected, self._next_sequence = self._next_sequence, number + 1
        if number != expected and "sequence_gap" not in self._reported:
            self._reported.add("sequence_gap")
            found.append(
                rules.SEQUENCE_GAP.finding(
                    f"event {index} has sequence_number {number}, expected {expected} "
                    "(reported once per stream)",
                    index,
                    event.offset,
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
        if kind != "response.failed":
            for output_index, item in sorted(self._open.items()):
                found.append(
                    rules.ITEM_NOT_CLOSED.finding(
                        f"event {index} ({kind}): output item {output_index} ({item.id!r}) was "
                        "never done",
                        index,
                        event.offset,
                    )
                )

    def _check_response(
        self, payload: _Event, kind: str, event: Event, index: int, found: list[Finding]
    ) -> None:
        response = payload["response"]
        status = response.get("status")
        problem = None
        if kind in TERMINAL_TYPES:
            wanted = TERMINAL_TYPES[kind]
            if status != wanted:
                problem = f"response.status is {status!r}, expected {wanted!r}"
            elif kind == "response.completed" and response.get("usage") is None:
                problem = "response.usage is null or missing"
            elif kind == "response.incomplete" and not _reason(response):
                problem = "response.incomplete_details.reason is missing"
            elif kind == "response.failed" and not response.get("error"):
                problem = "response.error is null or missing"
        elif status not in _OPENING_STATUSES:
            problem = f"response.status is {status!r}, expected 'in_progress' or 'queued'"
        if problem is not None:
            found.append(
                rules.STATUS_MISMATCH.finding(
                    f"event {index} ({kind}): {problem}", index, event.offset
                )
            )
        response_id = response.get("id")
        if response_id is not None:
            if self._response_id is None:
                self._response_id = response_id
            elif response_id != self._response_id:
                found.append(
                    rules.RESPONSE_ID_CHANGED.finding(
                        f"event {index} ({kind}): response.id {response_id[:60]!r} differs from "
                        f"{self._response_id[:60]!r}",
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
            assert output_index is not None  # _REQUIRED
            self._item_added(output_index, payload["item"], event, index, found)
            return
        item = self._open.get(output_index) if output_index is not None else None
        item_id = payload.get("item_id")
        where = f"event {index} ({kind[:60]})"
        if item is None:
            if output_index is None:  # only an item_id: look it up
                item = next((i for i in self._open.values() if i.id == item_id), None)
            if item is None and self._resumed and (output_index or 0) >= self._items_added:
                item = self._adopt(output_index, item_id)
            if item is None:
                named = f"output_index {output_index}" if output_index is not None else "item_id"
                found.append(
                    rules.ITEM_NOT_OPEN.finding(
                        f"{where}: the item at {named} {item_id or ''!r} is not open (never "
                        "added, or already done)",
                        index,
                        event.offset,
                    )
                )
                return
        if kind == "response.output_item.done":
            item_id = payload["item"].get("id")
        if item_id is not None and item.id is not None and item_id != item.id:
            found.append(
                rules.ITEM_NOT_OPEN.finding(
                    f"{where}: item_id {item_id[:60]!r} is not the open item {item.id[:60]!r} at "
                    f"output_index {output_index}",
                    index,
                    event.offset,
                )
            )
            # and go on as if it named the open item: one finding, not a cascade
        if kind == "response.output_item.done":
            assert output_index is not None
            self._item_done(output_index, item, payload["item"], where, event, index, found)
            return
        if kind.startswith(("response.content_part.", "response.reasoning_summary_part.")):
            self._on_part(payload, kind, item, where, event, index, found)
            return
        family, _, step = kind.rpartition(".")
        if family in _TEXT_FAMILIES and step in ("delta", "done"):
            self._on_text(payload, family, step, item, where, event, index, found)
        elif kind == "response.output_text.annotation.added":
            number = payload.get("content_index")
            if number is not None and number not in item.contents and not item.adopted:
                found.append(
                    rules.ITEM_NOT_OPEN.finding(
                        f"{where}: content part {number} is not open", index, event.offset
                    )
                )

    def _adopt(self, output_index: int | None, item_id: str | None) -> _OpenItem:
        """A resumed stream met an item opened before its first event: take it as open."""
        number = self._items_added if output_index is None else output_index
        self._items_added = number + 1
        item = self._open[number] = _OpenItem(item_id, adopted=True)
        return item

    def _item_added(
        self, output_index: int, item: _Item, event: Event, index: int, found: list[Finding]
    ) -> None:
        where = f"event {index} (response.output_item.added)"
        if output_index != self._items_added:
            found.append(
                rules.ITEM_OUT_OF_ORDER.finding(
                    f"{where}: output_index {output_index}, expected {self._items_added}",
                    index,
                    event.offset,
                )
            )
        if self._open and "item_overlap" not in self._reported:
            self._reported.add("item_overlap")
            found.append(
                rules.ITEM_OVERLAP.finding(
                    f"{where}: item {output_index} opens while item(s) "
                    f"{', '.join(map(str, sorted(self._open)))} are still open",
                    index,
                    event.offset,
                )
            )
        status = item.get("status")
        if status is not None and status != "in_progress":
            found.append(
                rules.ITEM_STATUS_UNEXPECTED.finding(
                    f"{where}: item {output_index} is added with status {status[:40]!r}, "
                    "expected 'in_progress'",
                    index,
                    event.offset,
                )
            )
        self._items_added = max(self._items_added, output_index + 1)
        self._open[output_index] = _OpenItem(item.get("id"))

    def _item_done(
        self,
        output_index: int,
        item: _OpenItem,
        final: _Item,
        where: str,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        del self._open[output_index]
        still_open = [f"content part {n}" for n in sorted(item.contents)]
        still_open += [f"summary part {n}" for n in sorted(item.summaries)]
        if still_open:
            found.append(
                rules.ITEM_NOT_CLOSED.finding(
                    f"{where}: item {output_index} closes with {', '.join(still_open)} still open",
                    index,
                    event.offset,
                )
            )
        status = final.get("status")
        if status is not None and status not in _DONE_ITEM_STATUSES:
            found.append(
                rules.ITEM_STATUS_UNEXPECTED.finding(
                    f"{where}: item {output_index} is done with status {status[:40]!r}, "
                    "expected 'completed' or 'incomplete'",
                    index,
                    event.offset,
                )
            )

    def _on_part(
        self,
        payload: _Event,
        kind: str,
        item: _OpenItem,
        where: str,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        content = kind.startswith("response.content_part.")
        number = payload["content_index"] if content else payload["summary_index"]
        parts = item.contents if content else item.summaries
        if kind.endswith(".added"):
            parts.add(number)
        elif number in parts or item.adopted:
            parts.discard(number)
        else:
            label = "content part" if content else "summary part"
            found.append(
                rules.ITEM_NOT_OPEN.finding(
                    f"{where}: {label} {number} is not open", index, event.offset
                )
            )

    def _on_text(
        self,
        payload: _Event,
        family: str,
        step: str,
        item: _OpenItem,
        where: str,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        field, final = _TEXT_FAMILIES[family]
        number = (
            payload.get("content_index")
            if field == "content_index"
            else payload.get("summary_index")
            if field
            else None
        )
        if field is not None:
            parts = item.contents if field == "content_index" else item.summaries
            if item.adopted and number is not None:
                parts.add(number)
            if number not in parts:
                label = "content part" if field == "content_index" else "summary part"
                found.append(
                    rules.ITEM_NOT_OPEN.finding(
                        f"{where}: {label} {number} is not open", index, event.offset
                    )
                )
                return
        key = (family, number)
        if step == "delta":
            delta = payload.get("delta")
            if isinstance(delta, str):
                item.texts.setdefault(key, _Text()).add(delta)
            return
        pieces = item.texts.pop(key, _Text()).pieces
        text: object = payload.get(final)
        if pieces and isinstance(text, str) and not item.adopted:  # deltas were seen
            joined = "".join(pieces)
            if joined != text:
                found.append(
                    rules.DONE_TEXT_MISMATCH.finding(
                        f"{where}: {final} ({preview(text)}) differs from its joined "
                        f"deltas ({preview(joined)})",
                        index,
                        event.offset,
                    )
                )


def _type_of(event: Event) -> str | None:
    """The event's type, from its name when it has one, else from its JSON."""
    if event.event != "message":
        return event.event
    try:
        return _EVENT.validate_json(event.data)["type"]
    except ValidationError:
        return None


def _reason(response: _Response) -> object:
    details = response.get("incomplete_details")
    return details.get("reason") if isinstance(details, Mapping) else None


def _starting_after(request: Mapping[str, Any] | None, path: str | None) -> int | None:
    """The sequence number a resumed stream continues after, if the request says so."""
    value: object = request.get("starting_after") if request is not None else None
    if value is None and path and "starting_after=" in path:
        value = path.split("starting_after=", 1)[1].split("&", 1)[0]
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if type(value) is int and value >= 0 else None
