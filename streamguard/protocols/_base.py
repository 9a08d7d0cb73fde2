"""The interface every protocol checker implements, and the lifecycle rules they share.

A checker is a small sans-I/O state machine: the monitor hands it each dispatched
``Event`` with its index, then tells it how the stream ended. It returns findings and
exposes two facts the monitor needs to classify the end: whether the protocol's terminal
signal arrived, and whether the stream ended with an in-band error the protocol defines.
It knows nothing of ASGI, clocks, metrics or logging.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streamguard import _wire, rules
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["KNOWN_EVENT_NAMES", "MAX_KEPT_TEXT_CHARS", "NO_FINDINGS", "Checker", "event_name"]

NO_FINDINGS: Sequence[Finding] = ()

#: The characters of text one stream may keep for later checks, across everything it keeps
#: (tool-call arguments to parse at the finish, deltas to compare with a ``.done`` text).
#: Part of the documented per-stream ceiling: past it a check is skipped, never the memory.
MAX_KEPT_TEXT_CHARS = 1024 * 1024


#: SSE event names the protocols define, shown as they are in messages; any other name came
#: from the wire and is shown by size and hash only.
KNOWN_EVENT_NAMES = frozenset(
    {
        "message",
        "error",
        "ping",
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    }
)


def event_name(name: str) -> str:
    """An event's name as a message may show it."""
    return _wire.token(name, KNOWN_EVENT_NAMES)


class Checker:
    """Base class: terminal bookkeeping common to every protocol.

    Subclasses set ``name`` and ``has_terminal`` and implement ``is_terminal`` and
    ``check_event``; those with end-of-stream rules extend ``check_end``.
    """

    # Slots: one checker lives per open stream, and an idle stream must stay small.
    __slots__ = (
        "_kept_text_left",
        "error_index",
        "path",
        "protocol_source",
        "request",
        "terminal_index",
    )

    #: The protocol's name, as reported and used in metric labels. Plain class attributes
    #: rather than constants, so a checker that decides late (auto-detection) can set them.
    name: str = "sse"
    #: Whether the protocol defines a terminal signal. Without one, the end of the body
    #: is the end of the stream and a clean end counts as ``completed``.
    has_terminal: bool = True

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        self.request = request
        self.path = path
        self.terminal_index: int | None = None
        self.error_index: int | None = None
        self._kept_text_left = MAX_KEPT_TEXT_CHARS
        #: How the protocol was chosen: ``configured``, or how auto-detection decided.
        self.protocol_source = "configured"

    def keep_text(self, chars: int) -> bool:
        """Reserve room for ``chars`` more kept characters; False when the stream's budget
        is spent (the caller then drops what it kept, ``free_text``s it, and skips its
        check)."""
        if chars > self._kept_text_left:
            return False
        self._kept_text_left -= chars
        return True

    def free_text(self, chars: int) -> None:
        """Give back the room of kept text that was checked or dropped."""
        self._kept_text_left += chars

    @property
    def terminal_seen(self) -> bool:
        return self.terminal_index is not None

    @property
    def error_seen(self) -> bool:
        return self.error_index is not None

    def on_event(self, event: Event, index: int) -> Sequence[Finding]:
        """Check one event; after the terminal signal only lifecycle rules apply.

        An in-band error ends the stream as surely as the terminal does; a protocol that
        lets something follow its error (OpenAI's ``[DONE]``) overrides this.
        """
        if self.terminal_index is None:
            if self.error_index is None:
                return self.check_event(event, index)
            return (
                rules.EVENT_AFTER_TERMINAL.finding(
                    f"event {index} ({event_name(event.event)}) follows the in-band error sent as "
                    f"event {self.error_index}",
                    index,
                    event.offset,
                ),
            )
        if self.is_terminal(event):
            return (
                rules.DUPLICATE_TERMINAL.finding(
                    f"event {index} repeats the terminal signal first sent as event "
                    f"{self.terminal_index}",
                    index,
                    event.offset,
                ),
            )
        return (
            rules.EVENT_AFTER_TERMINAL.finding(
                f"event {index} ({event_name(event.event)}) follows the terminal signal sent "
                f"as event {self.terminal_index}",
                index,
                event.offset,
            ),
        )

    def on_end(self, events: int, offset: int) -> Sequence[Finding]:
        """The app finished sending: run the end-of-stream rules.

        The monitor does not call this when the client left, the app failed or the task
        was cancelled: the missing end is then explained by the outcome.
        """
        return self.check_end(events, offset)

    def check_end(self, events: int, offset: int) -> Sequence[Finding]:
        if self.has_terminal and self.terminal_index is None and self.error_index is None:
            return (
                rules.MISSING_TERMINAL.finding(
                    f"the body ended after {events} event(s) and {offset} byte(s) without "
                    f"the {self.name} terminal signal",
                    events,
                    offset,
                ),
            )
        return NO_FINDINGS

    # -- for subclasses ---------------------------------------------------------------

    def is_terminal(self, event: Event) -> bool:
        return False

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        raise NotImplementedError
