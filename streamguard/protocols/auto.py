"""Choosing the protocol of a stream that was not configured with one (``protocol="auto"``).

Theory of operation
-------------------

``AutoChecker`` is a checker that starts *undecided* and becomes a thin wrapper around the
checker of the protocol it picks. It decides once, from the first signal that settles it:

1. the request path (``protocol_source = "path"``): ``/v1/chat/completions`` (and Azure's
   ``…/chat/completions``) → ``openai_chat``, ``/v1/responses`` → ``openai_responses``,
   ``/v1/messages`` → ``anthropic``, ``…:streamGenerateContent`` → ``gemini``;
2. otherwise the first *decisive* event (``protocol_source = "event"``), per protocols.md
   §0: ``event: message_start`` (or another name only Anthropic uses, such as
   ``content_block_delta``) or JSON ``type: "message_start"`` → anthropic; data
   ``[DONE]`` or JSON ``object: "chat.completion.chunk"`` → openai_chat; a JSON ``type``
   starting with ``response.`` → openai_responses; JSON with ``candidates``,
   ``usageMetadata``, ``promptFeedback`` or ``modelVersion`` → gemini. The shape decides
   too, not only exact values: a ``choices`` entry with a ``delta`` object is OpenAI Chat
   whatever ``object`` says (a server sending ``"object": "text_completion"`` is a broken
   chat stream, and the chat checker then says so). Azure's first chat chunk
   (``"object": ""``, ``choices: []``) and anything else decide nothing;
3. otherwise, after ``MAX_UNDECIDED_EVENTS`` events, once the held events carry more than
   ``MAX_UNDECIDED_CHARS`` characters, or at the end of the body, plain SSE
   (``protocol_source = "default"``).

While undecided it holds the events it has seen (at most ``MAX_UNDECIDED_EVENTS`` events and
``MAX_UNDECIDED_CHARS`` characters of names and data, so memory stays bounded) and checks
nothing; when it decides, it replays them once, in order and with
their own indices, into the chosen checker, and from then on forwards every call. The
monitor reads ``name``, ``has_terminal``, ``protocol_source``, ``terminal_seen`` and
``error_seen`` from this object: the first three are set when the decision is made, the
last two read the chosen checker's indices.

A protocol named by a signal but missing from the registry (a checker not installed)
decides nothing: the stream is then judged by the signals that remain.

Frames run together with single line endings reach the checker as one event whose data
holds several payloads: its first line decides. A body never ended by a blank line
dispatches nothing at all; at its end the monitor hands the pending event to
``decide_from_pending``, which judges its first data line the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streamguard.protocols._base import NO_FINDINGS, Checker
from streamguard.protocols._payload import parse_json
from streamguard.protocols.sse import PlainSSEChecker
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = [
    "MAX_UNDECIDED_CHARS",
    "MAX_UNDECIDED_EVENTS",
    "AutoChecker",
    "protocol_for_event",
    "protocol_for_path",
]

#: How many events a stream may send before its protocol is known; then it is plain SSE.
MAX_UNDECIDED_EVENTS = 8
#: How many characters of event names and data may be held while undecided (256 KiB of
#: ASCII); an event that would take the held total past it decides plain SSE at once.
MAX_UNDECIDED_CHARS = 256 * 1024

#: Path endings that name a protocol, most specific first.
_PATH_SUFFIXES = (
    ("/chat/completions", "openai_chat"),
    ("/v1/responses", "openai_responses"),
    ("/v1/messages", "anthropic"),
)
_GEMINI_METHOD = ":streamGenerateContent"
#: SSE event names only Anthropic Messages uses (``ping`` and ``error`` are not decisive).
_ANTHROPIC_EVENT_NAMES = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    }
)
_GEMINI_KEYS = ("candidates", "usageMetadata", "promptFeedback", "modelVersion")


def protocol_for_path(path: str | None) -> str | None:
    """The protocol a request path names, or ``None``."""
    if not path:
        return None
    path = path.rstrip("/")
    if path.endswith(_GEMINI_METHOD):
        return "gemini"
    for suffix, protocol in _PATH_SUFFIXES:
        if path.endswith(suffix):
            return protocol
    return None


def protocol_for_event(event: Event) -> str | None:
    """The protocol one event proves, or ``None`` when it proves nothing."""
    if event.event in _ANTHROPIC_EVENT_NAMES:
        return "anthropic"
    data = event.data
    if data.startswith("[DONE]"):
        return "openai_chat"
    if not data.startswith("{"):
        return None
    try:
        payload = parse_json(data)
    except ValueError:
        # Frames run together with single line endings reach the parser as one event
        # whose data lines are several payloads: its first line still tells.
        first, newline, _ = data.partition("\n")
        if not newline:
            return None
        return protocol_for_event(Event(event.event, first))
    if type(payload) is not dict:
        return None
    kind = payload.get("type")
    if kind == "message_start":
        return "anthropic"
    if kind == "error" and type(payload.get("error")) is dict:
        # Anthropic's error event (an overloaded error before message_start); the
        # Responses error event carries its code and message at the top level instead.
        return "anthropic"
    if isinstance(kind, str) and kind.startswith("response."):
        return "openai_responses"
    if payload.get("object") == "chat.completion.chunk":
        return "openai_chat"
    choices = payload.get("choices")
    if type(choices) is list and any(
        type(choice) is dict and type(choice.get("delta")) is dict for choice in choices
    ):  # the chat chunk's shape, whatever its object says; Azure's annotations have no delta
        return "openai_chat"
    if any(key in payload for key in _GEMINI_KEYS):
        return "gemini"
    return None


class AutoChecker(Checker):
    """Decides the protocol from the path or the first decisive event, then delegates."""

    def __init__(
        self,
        request: Mapping[str, Any] | None = None,
        path: str | None = None,
        checkers: Mapping[str, type[Checker]] | None = None,
    ) -> None:
        self._delegate: Checker | None = None
        self._local_terminal: int | None = None
        self._local_error: int | None = None
        super().__init__(request, path)
        if checkers is None:
            from streamguard.protocols import CHECKERS  # late: that module imports this one

            checkers = CHECKERS
        self._checkers = checkers
        self._held: list[tuple[Event, int]] = []
        self._held_chars = 0
        # Until decided, the stream reads as what it becomes when nothing decides it.
        self.name = PlainSSEChecker.name  # type: ignore[misc]  # until auto moves into the monitor
        self.has_terminal = PlainSSEChecker.has_terminal  # type: ignore[misc]  # until auto moves into the monitor
        self.protocol_source = "default"
        by_path = protocol_for_path(path)
        if by_path is not None and by_path in checkers:
            self._decide(by_path, "path")

    # The monitor reads the terminal and error facts of the checker doing the work.

    @property
    def terminal_index(self) -> int | None:
        delegate = self._delegate
        return self._local_terminal if delegate is None else delegate.terminal_index

    @terminal_index.setter
    def terminal_index(self, value: int | None) -> None:
        if self._delegate is None:
            self._local_terminal = value
        else:
            self._delegate.terminal_index = value

    @property
    def error_index(self) -> int | None:
        delegate = self._delegate
        return self._local_error if delegate is None else delegate.error_index

    @error_index.setter
    def error_index(self, value: int | None) -> None:
        if self._delegate is None:
            self._local_error = value
        else:
            self._delegate.error_index = value

    @property
    def decided(self) -> bool:
        """Whether the protocol has been chosen."""
        return self._delegate is not None

    # -- the checker interface ------------------------------------------------------------

    def on_event(self, event: Event, index: int) -> Sequence[Finding]:
        delegate = self._delegate
        if delegate is not None:
            return delegate.on_event(event, index)
        self._held.append((event, index))
        self._held_chars += len(event.event) + len(event.data)
        protocol = protocol_for_event(event)
        if protocol is not None and protocol in self._checkers:
            return self._decide(protocol, "event")
        if len(self._held) >= MAX_UNDECIDED_EVENTS or self._held_chars > MAX_UNDECIDED_CHARS:
            return self._decide(PlainSSEChecker.name, "default")
        return NO_FINDINGS

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        return self.on_event(event, index)

    def is_terminal(self, event: Event) -> bool:
        return self._delegate is not None and self._delegate.is_terminal(event)

    def on_end(self, events: int, offset: int) -> Sequence[Finding]:
        replayed = NO_FINDINGS
        if self._delegate is None:
            replayed = self._decide(PlainSSEChecker.name, "default")
        assert self._delegate is not None
        return (*replayed, *self._delegate.on_end(events, offset))

    def check_end(self, events: int, offset: int) -> Sequence[Finding]:
        return self.on_end(events, offset)

    def decide_from_pending(self, event: Event) -> Sequence[Finding]:
        """At the end of a body whose last event was never dispatched (its frames run
        together without blank lines): let that event's first data line decide, if it
        can. Returns what replaying the held events found."""
        if self._delegate is not None:
            return NO_FINDINGS
        protocol = protocol_for_event(event)
        if protocol is None or protocol not in self._checkers:
            return NO_FINDINGS
        return self._decide(protocol, "event")

    # -- the decision ---------------------------------------------------------------------

    def _decide(self, protocol: str, source: str) -> Sequence[Finding]:
        """Build the chosen checker, take on its identity, replay the held events once."""
        checker_class = self._checkers.get(protocol, PlainSSEChecker)
        delegate = checker_class(self.request, self.path)
        self._delegate = delegate
        self.name = delegate.name  # type: ignore[misc]  # until auto moves into the monitor
        self.has_terminal = delegate.has_terminal  # type: ignore[misc]  # until auto moves into the monitor
        self.protocol_source = source
        held, self._held, self._held_chars = self._held, [], 0
        found: list[Finding] = []
        for event, index in held:
            found.extend(delegate.on_event(event, index))
        return found
