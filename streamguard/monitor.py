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
from streamguard._wire import describe, token
from streamguard.liveness import Liveness, LivenessLimits
from streamguard.protocols import AUTO, AutoChecker, make_checker
from streamguard.report import Finding, Outcome, StreamReport
from streamguard.request import RequestFacts
from streamguard.sse import DEFAULT_MAX_EVENT_BYTES, EventParser

__all__ = [
    "MAX_KEPT_FINDINGS",
    "OUTCOMES",
    "StreamEnd",
    "StreamMonitor",
    "check_stream",
    "error_name",
]

#: Findings a stream keeps on its report. Past it only the first finding of each rule is
#: kept and the rest are counted per rule (``StreamReport.findings_dropped``), so a stream
#: that breaks a rule on every event costs a bounded amount of memory; sinks still see
#: every finding as it is made.
MAX_KEPT_FINDINGS = 100

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


#: What the stream had handed to the server when it ended (the columns of ``OUTCOMES``):
#: its in-band error, its terminal signal, neither, or nothing to judge (the protocol has
#: no terminal signal, or the stream was not inspected).
HANDED_OVER = ("error", "terminal", "neither", "unjudged")
_ERROR, _TERMINAL, _NEITHER, _UNJUDGED = HANDED_OVER
_COLUMN = {handed: column for column, handed in enumerate(HANDED_OVER)}

_C, _E, _U = Outcome.COMPLETED, Outcome.ERROR_EVENT, Outcome.UNCLOSED
#: The outcome of every (end, what was handed over) pair: the one place an end becomes an
#: outcome. The end already seen wins over a client that leaves later: a client that
#: closes after the terminal or the in-band error got the whole answer, and its close is a
#: fact on the report (``client_closed_after_end``), not the outcome. Failures on the
#: server's side (the app raising, returning without ending the body, being cancelled)
#: stay what they are even after the terminal: the client's connection still broke.
#: A terminal counts only once the message carrying it was handed to the server.
OUTCOMES: dict[StreamEnd, tuple[Outcome, Outcome, Outcome, Outcome]] = {
    #                              error    terminal  neither   unjudged
    StreamEnd.BODY_ENDED:         (_E,      _C,       _U,       _C),
    StreamEnd.CLIENT_DISCONNECT:  (_E,      _C,       Outcome.CLIENT_DISCONNECT,
                                                                Outcome.CLIENT_DISCONNECT),
    StreamEnd.APP_RETURNED:       (_U,      _U,       _U,       _U),
    StreamEnd.APP_ERROR:          (Outcome.APP_ERROR,) * 4,
    StreamEnd.CANCELLED:          (Outcome.CANCELLED,) * 4,
}  # fmt: skip

#: How much of an event never ended by a blank line auto-detection reads at the body's end.
_PENDING_DETECTION_BYTES = 64 * 1024

#: Ends at which the app did not finish sending: the end-of-stream rules would only
#: restate the outcome, so they are not run.
_ABORTS = frozenset({StreamEnd.CLIENT_DISCONNECT, StreamEnd.APP_ERROR, StreamEnd.CANCELLED})


class StreamMonitor:
    """Checks one stream as its body arrives and builds its ``StreamReport``.

    With ``handover=True`` the caller confirms, with ``handed_over()``, each fed body
    message that reached the server; a terminal signal or in-band error counts for the
    outcome only once it did. Offline, everything fed counts as delivered.
    """

    __slots__ = (
        "_checker",
        "_clock",
        "_dropped",
        "_excerpt_chars",
        "_findings",
        "_handed",
        "_handover",
        "_inspecting",
        "_kept_rules",
        "_liveness",
        "_parser",
        "body_messages",
        "findings_at_end",
        "first_byte_at",
        "first_event_at",
        "internal_error",
        "notes",
        "path",
        "report",
        "route",
        "started_at",
    )

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
        handover: bool = False,
        json_data: bool = False,
    ) -> None:
        if request is not None and not isinstance(request, RequestFacts):
            request = RequestFacts(request)  # only the bounded facts the checks read
        self._checker = make_checker(protocol, request, path, json_data=json_data)
        self._excerpt_chars = excerpt_chars
        self.route = route
        #: Facts about how the stream was checked (``add_note``); a tuple, as most have none.
        self.notes: tuple[str, ...] = ()
        self._parser = EventParser(max_event_bytes)
        self._clock = clock
        self._findings: list[Finding] | None = None  # made by the first finding
        self._kept_rules: set[str] | None = None  # built when the cap is first reached
        self._dropped: dict[str, int] | None = None
        self._inspecting = True
        self._handover = handover
        self._handed = _NEITHER
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
        #: The findings ``finish`` made (end-of-stream rules, timers), for sinks.
        self.findings_at_end: Sequence[Finding] = ()

    @property
    def protocol(self) -> str:
        return self._checker.name

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The findings kept so far (see ``MAX_KEPT_FINDINGS``)."""
        return () if self._findings is None else tuple(self._findings)

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

    def add_note(self, note: str) -> None:
        """Say something about how the stream was checked, for its report."""
        self.notes += (note,)

    def _record(self, found: Sequence[Finding]) -> None:
        """Keep ``found`` on the report, within ``MAX_KEPT_FINDINGS``; count the rest."""
        if not found:
            return
        kept = self._findings
        if kept is None:
            kept = self._findings = []
        for finding in found:
            if len(kept) < MAX_KEPT_FINDINGS:
                kept.append(finding)
                continue
            rules_kept = self._kept_rules
            if rules_kept is None:
                rules_kept = self._kept_rules = {kept_one.rule for kept_one in kept}
            if finding.rule not in rules_kept:  # every rule broken keeps its first finding
                rules_kept.add(finding.rule)
                kept.append(finding)
                continue
            dropped = self._dropped
            if dropped is None:
                dropped = self._dropped = {}
            dropped[finding.rule] = dropped.get(finding.rule, 0) + 1

    def add_findings(self, findings: Sequence[Finding]) -> Sequence[Finding]:
        """Record findings made outside the body (the response headers, timers)."""
        self._record(findings)
        return findings

    def check_head(
        self,
        content_type: str,
        content_length: str | None = None,
        content_encoding: str | None = None,
    ) -> list[Finding]:
        """The HTTP rules of an event stream's response head (its headers' values).

        Shared by the middleware and the client-side helpers, so both say the same thing.
        A compressed body cannot be parsed: inspection stops, and the finding says why.
        Header values are named by size and hash only (they reach default logs).
        """
        found: list[Finding] = []
        if content_length is not None:
            found.append(
                rules.CONTENT_LENGTH_ON_STREAM.finding(
                    "the event stream was sent with Content-Length: "
                    + (
                        repr(content_length)
                        if _is_short_number(content_length)
                        else describe(content_length)
                    )
                )
            )
        charset = _charset(content_type)
        if charset is not None and charset.lower() not in _UTF8_NAMES:
            found.append(
                rules.BAD_CONTENT_TYPE_CHARSET.finding(
                    f"Content-Type declares a charset other than UTF-8 "
                    f"({describe(charset)}); event streams are always UTF-8"
                )
            )
        if content_encoding is not None and content_encoding.strip().lower() != "identity":
            encoding = token(content_encoding.strip().lower(), _KNOWN_ENCODINGS)
            found.append(
                rules.COMPRESSED_STREAM.finding(
                    f"Content-Encoding {encoding}; the compressed body is passed through "
                    "uninspected"
                )
            )
            self._inspecting = False
        self._record(found)
        return found

    def stop_inspecting(self, finding: Finding | None = None) -> None:
        """Keep counting bytes but check nothing more, optionally saying why."""
        if finding is not None:
            self._record((finding,))
        self._inspecting = False

    def fail(self, error: BaseException) -> None:
        """streamguard itself broke on this stream: stop checking it and say so."""
        if self.internal_error is None:
            self.internal_error = error_name(error)
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
            self._record(new)
        if not self._handover:
            self._handed_over()
        return new

    def handed_over(self) -> None:
        """The last body message fed reached the server: its terminal or error counts."""
        if self._handed == _NEITHER:
            self._handed_over()

    def _handed_over(self) -> None:
        checker = self._checker
        if checker.error_index is not None:
            self._handed = _ERROR
        elif checker.terminal_index is not None:
            self._handed = _TERMINAL

    def poll(self, now: float | None = None) -> list[Finding]:
        """Run the timing detectors on the open stream; return the findings they made."""
        if self._liveness is None or self.report is not None or self.internal_error is not None:
            return []
        found = self._liveness.poll(
            self._clock() if now is None else now,
            self._parser.events_dispatched,
            self._parser.bytes_seen,
        )
        self._record(found)
        return found

    def after_end(self, data: bytes) -> Finding:
        """Body bytes the app sent after it ended the body (``more_body=False``).

        The report is already built; the finding goes to the sinks only.
        """
        parser = self._parser
        return rules.BODY_AFTER_END.finding(
            f"the app sent a body message of {len(data)} byte(s) after it ended the body "
            "with more_body=False; servers drop or reject it",
            parser.events_dispatched,
            parser.bytes_seen,
        )

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
        found: list[Finding] = []
        if end not in _ABORTS and self._inspecting:
            if isinstance(checker, AutoChecker) and not checker.decided:
                pending = parser.pending_event(_PENDING_DETECTION_BYTES)
                if pending is not None:
                    found.extend(checker.decide_from_pending(pending))
            found.extend(parser.close())
            if parser.inspecting:  # close() can still find the last event too large
                found.extend(checker.on_end(events, offset))
            else:
                self._inspecting = False
        if self._liveness is not None and self.internal_error is None:
            clean = end is StreamEnd.BODY_ENDED and self._inspecting
            found.extend(self._liveness.at_end(ended_at, events, offset, clean))
        if end is StreamEnd.APP_RETURNED:
            found.append(
                rules.RESPONSE_NOT_FINISHED.finding(
                    f"the app returned after {self.body_messages} body message(s) and "
                    f"{offset} byte(s) without sending more_body=False",
                    events,
                    offset,
                )
            )
        if end is StreamEnd.BODY_ENDED:
            # The body's end reached the server, so all that was fed did, including a
            # terminal only the end reveals (Gemini's "every candidate finished").
            self._handed_over()
        handed = self._handed
        if handed == _NEITHER and not (checker.has_terminal and self._inspecting):
            handed = _UNJUDGED
        outcome = OUTCOMES[end][_COLUMN[handed]]
        self._record(found)
        self.findings_at_end = found
        dropped = self._dropped
        self.report = StreamReport(
            protocol=checker.name,
            outcome=outcome,
            findings=self.findings,
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
            notes=self.notes,
            max_event_gap=self._liveness.max_event_gap if self._liveness is not None else None,
            findings_dropped=tuple(sorted(dropped.items())) if dropped else (),
            client_closed_after_end=(
                end is StreamEnd.CLIENT_DISCONNECT and handed in (_ERROR, _TERMINAL)
            ),
        )
        return self.report

    def fallback_report(self, end: StreamEnd) -> StreamReport:
        """The report when building the real one failed: the outcome from the end alone."""
        column = _COLUMN[_UNJUDGED if self._handed == _NEITHER else self._handed]
        self.report = StreamReport(
            protocol=self.protocol,
            outcome=OUTCOMES[end][column],
            findings=self.findings,
            events=0,
            bytes=0,
            body_messages=self.body_messages,
            started_at=self.started_at,
            first_byte_at=self.first_byte_at,
            first_event_at=self.first_event_at,
            ended_at=self.started_at,
            inspected=False,
            internal_error=self.internal_error,
            path=self.path,
            route=self.route,
        )
        return self.report


_UTF8_NAMES = ("utf-8", "utf8")
#: Content-Encoding values named as they are; anything else is described by size.
_KNOWN_ENCODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd", "compress", "identity"})


def _is_short_number(value: str) -> bool:
    return value.isascii() and value.isdigit() and len(value) <= 18


def _charset(content_type: str) -> str | None:
    for parameter in content_type.split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip('"')
    return None


def error_name(exc: BaseException) -> str:
    """An exception as its type and where it was raised; its message may quote the wire."""
    traceback = exc.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    if traceback is None:
        return type(exc).__name__
    code = traceback.tb_frame.f_code
    where = f"{code.co_filename.rsplit('/', 1)[-1]}:{traceback.tb_lineno}"
    return f"{type(exc).__name__} in {code.co_name} ({where})"


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
    json_data: bool = False,
) -> StreamReport:
    """Check captured body bytes offline; the body counts as ended after the last chunk.

    ``chunks`` is any iterable of byte strings (one ``bytes`` object is one chunk).
    ``json_data`` is the plain-SSE route option ``{"protocol": "sse", "json": true}``.
    """
    if isinstance(chunks, bytes | bytearray | memoryview):
        chunks = [bytes(chunks)]
    monitor = StreamMonitor(
        protocol,
        request=request,
        path=path,
        clock=clock,
        max_event_bytes=max_event_bytes,
        json_data=json_data,
    )
    for chunk in chunks:
        monitor.feed(chunk)
    return monitor.finish(StreamEnd.BODY_ENDED)
