"""One stream, start to end: parser + protocol checker + timing + how it ended.

``StreamMonitor`` is sans-I/O: the middleware, the CLI and the test helpers all drive it
the same way (``feed`` body chunks, then ``finish`` once), and it is the only place that
turns "how the bytes stopped" into an ``Outcome``. The clock is injected, so tests are
deterministic without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from enum import Enum
from typing import Any

from streamguard import rules
from streamguard.liveness import Liveness, LivenessLimits
from streamguard.protocols import AUTO, make_checker
from streamguard.report import Finding, Outcome, StreamReport
from streamguard.sse import DEFAULT_MAX_EVENT_BYTES, EventParser

__all__ = ["StreamEnd", "StreamMonitor", "check_stream"]

Clock = Callable[[], float]


class StreamEnd(Enum):
    """What the monitor was told about the end; ``finish`` maps it to an ``Outcome``."""

    #: ``http.response.body`` with ``more_body=False``: the app finished the body.
    BODY_ENDED = "body_ended"
    #: The app returned without ever finishing the body.
    APP_RETURNED = "app_returned"
    CLIENT_DISCONNECT = "client_disconnect"
    APP_ERROR = "app_error"
    CANCELLED = "cancelled"


_ABORTS = {
    StreamEnd.CLIENT_DISCONNECT: Outcome.CLIENT_DISCONNECT,
    StreamEnd.APP_ERROR: Outcome.APP_ERROR,
    StreamEnd.CANCELLED: Outcome.CANCELLED,
}


class StreamMonitor:
    """Checks one stream as its body arrives and builds its ``StreamReport``."""

    def __init__(
        self,
        protocol: str = AUTO,
        *,
        request: Mapping[str, Any] | None = None,
        path: str | None = None,
        clock: Clock = time.monotonic,
        started_at: float | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        route: str | None = None,
        excerpt_chars: int = 0,
        liveness: LivenessLimits | None = None,
    ) -> None:
        self._checker = make_checker(protocol, request, path)
        self._excerpt_chars = excerpt_chars
        self.route = route
        self.notes: list[str] = []
        self._parser = EventParser(max_event_bytes)
        self._clock = clock
        self._findings: list[Finding] = []
        self._inspecting = True
        self.path = path
        opened_at = clock()
        self.started_at = opened_at if started_at is None else started_at
        #: Timing detectors; off offline, where chunks carry no arrival times.
        self._liveness = (
            Liveness(liveness, self.started_at, opened_at) if liveness is not None else None
        )
        self.first_byte_at: float | None = None
        self.first_event_at: float | None = None
        self.body_messages = 0
        self.internal_error: str | None = None
        self.report: StreamReport | None = None

    @property
    def protocol(self) -> str:
        return self._checker.name

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(self._findings)

    @property
    def inspecting(self) -> bool:
        """False once checking stopped (too large, compressed, not sampled, failed)."""
        return self._inspecting

    @property
    def protocol_source(self) -> str:
        return self._checker.protocol_source

    @property
    def terminal_seen(self) -> bool:
        return self._checker.terminal_seen

    def findings_since(self, start: int) -> list[Finding]:
        """The findings made after the first ``start`` ones, for sinks that stream them."""
        return self._findings[start:]

    def add_findings(self, findings: Iterable[Finding]) -> None:
        """Record findings made outside the body (the response headers, timers)."""
        self._findings.extend(findings)

    def check_head(
        self,
        content_type: str,
        content_length: str | None = None,
        content_encoding: str | None = None,
    ) -> None:
        """The HTTP rules of an event stream's response head (its headers' values).

        Shared by the middleware and the client-side helpers, so both say the same thing.
        A compressed body cannot be parsed: inspection stops, and the finding says why.
        """
        if content_length is not None:
            self._findings.append(
                rules.CONTENT_LENGTH_ON_STREAM.finding(
                    f"the event stream was sent with Content-Length: {content_length!r}"
                )
            )
        charset = _charset(content_type)
        if charset is not None and charset.lower() not in _UTF8_NAMES:
            self._findings.append(
                rules.BAD_CONTENT_TYPE_CHARSET.finding(
                    f"Content-Type declares charset={charset!r}; event streams are always UTF-8"
                )
            )
        if content_encoding is not None and content_encoding.strip().lower() != "identity":
            self.stop_inspecting(
                rules.COMPRESSED_STREAM.finding(
                    f"Content-Encoding: {content_encoding!r}; the compressed body is passed "
                    "through uninspected"
                )
            )

    def stop_inspecting(self, finding: Finding | None = None) -> None:
        """Keep counting bytes but check nothing more, optionally saying why."""
        if finding is not None:
            self._findings.append(finding)
        self._inspecting = False

    def fail(self, error: BaseException) -> None:
        """streamguard itself broke on this stream: stop checking it and say so."""
        if self.internal_error is None:
            self.internal_error = f"{type(error).__name__}: {error}"
        self._inspecting = False

    def feed(self, data: bytes) -> Sequence[Finding]:
        """Consume one body message's bytes; return the findings it produced."""
        now = self._clock()
        self.body_messages += 1
        liveness = self._liveness
        if data:
            if self.first_byte_at is None:
                self.first_byte_at = now
            if liveness is not None:
                liveness.on_bytes(now)
        parser = self._parser
        if not self._inspecting:
            parser.bytes_seen += len(data)
            return ()
        events = parser.feed(data)
        new: list[Finding] = parser.drain_findings() if parser.findings else []
        from_parser = len(new)
        if not parser.inspecting:
            self._inspecting = False
        if events:
            if self.first_event_at is None:
                self.first_event_at = now
            if liveness is not None:
                liveness.on_events(now, self.body_messages)
            checker = self._checker
            index = parser.events_dispatched - len(events)
            for event in events:
                found = checker.on_event(event, index)
                if found:
                    if self._excerpt_chars:
                        found = [replace(f, excerpt=self._excerpt(event.data)) for f in found]
                    new.extend(found)
                index += 1
            if liveness is not None and checker.terminal_index is not None:
                liveness.on_terminal(now)
            if from_parser and len(new) > from_parser:
                # One chunk can finish event N and hold a framing problem of event N+1;
                # in event order, the findings are the same however the bytes were cut.
                new.sort(key=_event_order)
        if new:
            self._findings.extend(new)
        return new

    def poll(self, now: float | None = None) -> list[Finding]:
        """Run the timing detectors on the open stream; return the findings they made."""
        if self._liveness is None or self.report is not None or self.internal_error is not None:
            return []
        found = self._liveness.poll(
            self._clock() if now is None else now,
            self._parser.events_dispatched,
            self._parser.bytes_seen,
        )
        self._findings.extend(found)
        return found

    def _excerpt(self, text: str) -> str:
        """The start of ``text``, with control characters escaped so a log line stays one."""
        short = text[: self._excerpt_chars]
        escaped = "".join(c if c.isprintable() else repr(c)[1:-1] for c in short)
        return escaped + ("…" if len(text) > self._excerpt_chars else "")

    def finish(self, end: StreamEnd) -> StreamReport:
        """Classify the end, run the end-of-stream rules once, and build the report."""
        if self.report is not None:
            return self.report
        ended_at = self._clock()
        checker = self._checker
        parser = self._parser
        events, offset = parser.events_dispatched, parser.bytes_seen
        outcome = _ABORTS.get(end)
        if outcome is None and self._inspecting:
            self._findings.extend(parser.close())
            if parser.inspecting:  # close() can still find the last event too large
                self._findings.extend(checker.on_end(events, offset))
            else:
                self._inspecting = False
        if self._liveness is not None and self.internal_error is None:
            clean = end is StreamEnd.BODY_ENDED and self._inspecting
            self._findings.extend(self._liveness.at_end(ended_at, events, offset, clean))
        if end is StreamEnd.APP_RETURNED:
            self._findings.append(
                rules.RESPONSE_NOT_FINISHED.finding(
                    f"the app returned after {self.body_messages} body message(s) and "
                    f"{offset} byte(s) without sending more_body=False",
                    events,
                    offset,
                )
            )
            outcome = Outcome.UNCLOSED
        elif outcome is None:
            if checker.error_seen:
                outcome = Outcome.ERROR_EVENT
            elif checker.terminal_seen or not checker.has_terminal or not self._inspecting:
                outcome = Outcome.COMPLETED
            else:
                outcome = Outcome.UNCLOSED
        self.report = StreamReport(
            protocol=checker.name,
            outcome=outcome,
            findings=tuple(self._findings),
            events=events,
            bytes=offset,
            body_messages=self.body_messages,
            started_at=self.started_at,
            first_byte_at=self.first_byte_at,
            first_event_at=self.first_event_at,
            ended_at=ended_at,
            inspected=self._inspecting,
            internal_error=self.internal_error,
            path=self.path,
            protocol_source=checker.protocol_source,
            route=self.route,
            notes=tuple(self.notes),
            max_event_gap=self._liveness.max_event_gap if self._liveness is not None else None,
        )
        return self.report


_UTF8_NAMES = ("utf-8", "utf8")


def _charset(content_type: str) -> str | None:
    for parameter in content_type.split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip('"')
    return None


def _event_order(finding: Finding) -> int:
    return -1 if finding.event_index is None else finding.event_index


def check_stream(
    chunks: Iterable[bytes] | bytes,
    *,
    protocol: str = AUTO,
    request: Mapping[str, Any] | None = None,
    path: str | None = None,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    clock: Clock = time.monotonic,
) -> StreamReport:
    """Check captured body bytes offline; the body counts as ended after the last chunk.

    ``chunks`` is any iterable of byte strings (one ``bytes`` object is one chunk).
    """
    if isinstance(chunks, bytes | bytearray | memoryview):
        chunks = [bytes(chunks)]
    monitor = StreamMonitor(
        protocol, request=request, path=path, clock=clock, max_event_bytes=max_event_bytes
    )
    for chunk in chunks:
        monitor.feed(chunk)
    return monitor.finish(StreamEnd.BODY_ENDED)
