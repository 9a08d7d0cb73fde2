"""What streamguard tells you about a stream: findings, outcomes and the report.

These are plain frozen values with no behaviour beyond a few derived properties, so they
can cross every layer (parser, checkers, middleware, sinks, CLI) without dragging any of
them along.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, Final

__all__ = [
    "CHECKING_BUDGET",
    "FAILED_OUTCOMES",
    "NOTABLE_OUTCOMES",
    "REQUEST_BODY_UNREAD",
    "REQUEST_IDS_OVER_BOUND",
    "RESUMED_STREAM",
    "SKIP_REASONS",
    "Finding",
    "Outcome",
    "Severity",
    "StreamReport",
    "UpstreamSummary",
    "new_report",
    "repeated_finding",
]

#: Why a check was skipped on a stream whose frames were checked: the closed set of
#: ``StreamReport.skipped_checks`` and of the ``reason`` label of
#: ``streamguard_checks_skipped_total``. Each skip also has a note on the report, for people.
#: MCP: the POST carried more requests than the checker reads (``MAX_REQUEST_IDS``); the
#: responses to the rest cannot be matched.
REQUEST_IDS_OVER_BOUND = "request_ids_over_bound"
#: MCP: a GET that resumes with ``Last-Event-ID`` may replay responses, so
#: ``response_on_standalone_stream`` is not checked on it.
RESUMED_STREAM = "resumed_stream"
#: MCP: a POST whose body was not read (over ``request_peek_bytes``, not JSON, not read by
#: the app before the response, streamed by the client, or peeking off): what it owes is
#: unknown, so ``missing_terminal`` and the response matching are not checked.
REQUEST_BODY_UNREAD = "request_body_unread"
#: Any protocol: the stream's checking took more time than its budget
#: (``checking_budget_ms``, ``monitor.CHECK_SHARE``), so its later frames were not checked.
CHECKING_BUDGET = "checking_budget"
SKIP_REASONS: tuple[str, ...] = (
    REQUEST_IDS_OVER_BOUND,
    RESUMED_STREAM,
    REQUEST_BODY_UNREAD,
    CHECKING_BUDGET,
)


class Severity(StrEnum):
    """How bad a finding is; a stream with an ``error`` finding is *malformed*."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Outcome(StrEnum):
    """How a stream ended: a closed set, used as the ``outcome`` metric label."""

    COMPLETED = "completed"
    ERROR_EVENT = "error_event"
    UNCLOSED = "unclosed"
    CLIENT_DISCONNECT = "client_disconnect"
    APP_ERROR = "app_error"
    CANCELLED = "cancelled"
    #: Client side only: the connection broke while the body was being read (a network or
    #: protocol error mid-body), before the body ended.
    CONNECTION_LOST = "connection_lost"


#: The outcomes of a stream that broke: its body did not end as its sender meant it to (the
#: app left it unfinished or raised, or the connection was lost mid-body). The one list of
#: failures: the log sink logs these ends at ``error``.
FAILED_OUTCOMES = frozenset({Outcome.UNCLOSED, Outcome.APP_ERROR, Outcome.CONNECTION_LOST})
#: The outcomes worth a look that are no break: an in-band error the protocol defines, a
#: stream cancelled (at shutdown). Logged at ``warning``. The rest (``completed``,
#: ``client_disconnect``: never a server fault) are neither.
NOTABLE_OUTCOMES = frozenset({Outcome.ERROR_EVENT, Outcome.CANCELLED})


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule violation, located in the stream.

    ``event_index`` counts dispatched SSE events from 0 (for a finding about the stream
    as a whole it is the number of events seen when it was made, or ``None`` when the
    finding precedes the body); ``byte_offset`` counts body bytes from 0.
    """

    rule: str
    severity: Severity
    message: str
    event_index: int | None = None
    byte_offset: int | None = None
    #: A shortened, escaped excerpt of the offending frame; only with content excerpts on.
    excerpt: str | None = None


# A frozen dataclass's generated ``__init__`` runs as interpreted Python even in the compiled
# build (about 1 us a finding); its slots' own descriptors set a new one in a few calls.
_NEW_FINDING: Final = Finding.__new__
_FINDING_SLOTS: Final[Mapping[str, Any]] = vars(Finding)
_SET_RULE: Final = _FINDING_SLOTS["rule"].__set__
_SET_SEVERITY: Final = _FINDING_SLOTS["severity"].__set__
_SET_MESSAGE: Final = _FINDING_SLOTS["message"].__set__
_SET_EVENT_INDEX: Final = _FINDING_SLOTS["event_index"].__set__
_SET_BYTE_OFFSET: Final = _FINDING_SLOTS["byte_offset"].__set__
_SET_EXCERPT: Final = _FINDING_SLOTS["excerpt"].__set__


def repeated_finding(
    rule: str, severity: Severity, message: str, event_index: int, byte_offset: int
) -> Finding:
    """``Finding(rule, severity, message, event_index, byte_offset)``, made without the
    dataclass's ``__init__``: the engine makes one per frame that repeats a finding (the
    shape cache's ``again``). The same value (equal, with the same hash and repr)."""
    finding: Finding = _NEW_FINDING(Finding)
    _SET_RULE(finding, rule)
    _SET_SEVERITY(finding, severity)
    _SET_MESSAGE(finding, message)
    _SET_EVENT_INDEX(finding, event_index)
    _SET_BYTE_OFFSET(finding, byte_offset)
    _SET_EXCERPT(finding, None)
    return finding


@dataclass(frozen=True, slots=True)
class UpstreamSummary:
    """An upstream stream read for the same request as a downstream one (a gateway reading
    its provider), as the downstream report names it (``StreamReport.upstreams``).

    Made when the downstream report is: an upstream still open then has no ``outcome``
    and the findings it had so far.
    """

    protocol: str
    #: The upstream's ``route`` label (a configured name or an endpoint template).
    route: str | None
    #: How it ended, or ``None``: still open when the downstream report was made.
    outcome: Outcome | None
    #: Its findings by rule, as ``(rule, count)`` pairs in the order first found.
    findings: tuple[tuple[str, int], ...]
    #: Whether its frames were checked (a compressed or unsampled stream's were not).
    inspected: bool
    started_at: float
    #: ``None`` while it is open.
    ended_at: float | None


@dataclass(frozen=True, slots=True)
class StreamReport:
    """Everything streamguard learned about one stream, built once when it ended.

    Times come from the monitor's clock (``time.monotonic`` by default), so only their
    differences mean something.
    """

    protocol: str
    outcome: Outcome
    findings: tuple[Finding, ...]
    events: int
    bytes: int
    body_messages: int
    started_at: float
    first_byte_at: float | None
    first_event_at: float | None
    ended_at: float
    inspected: bool = True
    internal_error: str | None = None
    path: str | None = None
    #: How the protocol was chosen: ``configured``, or under ``auto`` by ``header``,
    #: ``path``, ``event`` or ``default`` (``streamguard.protocols.auto``).
    protocol_source: str = "configured"
    #: The ``route`` label: a configured name or a route template, never a raw path.
    route: str | None = None
    #: Facts about how the stream was checked, e.g. why request-aware checks were skipped.
    notes: tuple[str, ...] = ()
    #: The longest wait between two body messages that carried events (timed streams only).
    max_event_gap: float | None = None
    #: Findings not kept on ``findings`` (past ``MAX_KEPT_FINDINGS``), counted per rule as
    #: ``(rule, count)`` pairs; every broken rule keeps at least its first finding.
    findings_dropped: tuple[tuple[str, int], ...] = ()
    #: The client closed the connection after the terminal signal or the in-band error
    #: had been handed to the server: a fact, not the outcome (the end already seen wins).
    client_closed_after_end: bool = False
    #: Why checks were skipped on this stream, each once, from ``SKIP_REASONS``: what the
    #: notes say in words, for a sink to count (``streamguard_checks_skipped_total``).
    skipped_checks: tuple[str, ...] = ()
    #: A downstream stream's upstream streams: those read through a watched transport for
    #: the same request, in the order they started, at most
    #: ``streamguard.attribution.MAX_LINKED_UPSTREAMS``; empty when none was.
    upstreams: tuple[UpstreamSummary, ...] = ()
    #: Upstream streams of the same request past that bound: counted, not named.
    upstreams_dropped: int = 0
    #: Whose each finding is, in the order of ``findings`` (``upstream``, ``gateway`` or
    #: ``unknown``, ``streamguard.attribution``); empty when no upstream stream was linked,
    #: which means every finding is ``unknown``.
    attribution: tuple[str, ...] = ()
    #: Whose the stream's end is, when it is one an upstream can cause
    #: (``streamguard.attribution.ATTRIBUTED_OUTCOMES``: an in-band error, a body left
    #: unfinished, the app raising) and an upstream stream was linked: ``upstream``,
    #: ``gateway`` or ``unknown`` (``attribute_outcome``); ``None`` otherwise.
    outcome_attribution: str | None = None
    #: An upstream stream still open when the downstream stream it fed had ended (the
    #: gateway left it running): its own report says so when it finally ends.
    abandoned: bool = False
    #: The id of the capture written of this stream (``streamguard.captures``), or None.
    capture_id: str | None = None

    @property
    def malformed(self) -> bool:
        """True when at least one finding has ``error`` severity."""
        return any(finding.severity is Severity.ERROR for finding in self.findings)

    @property
    def duration(self) -> float:
        """Seconds from the start of the request to the end of the stream."""
        return self.ended_at - self.started_at

    @property
    def time_to_first_byte(self) -> float | None:
        """Seconds from the start of the request to the first body byte."""
        if self.first_byte_at is None:
            return None
        return self.first_byte_at - self.started_at

    @property
    def time_to_first_event(self) -> float | None:
        """Seconds from the start of the request to the first dispatched event."""
        if self.first_event_at is None:
            return None
        return self.first_event_at - self.started_at

    def rules(self) -> list[str]:
        """The rule names of the findings, in the order they were found."""
        return [finding.rule for finding in self.findings]


# As for ``Finding``: the dataclass's ``__init__`` sets the report's 25 fields through
# ``object.__setattr__`` in interpreted Python (4 us, at every stream's end); the slots'
# own descriptors set them in a quarter of that.
_NEW_REPORT: Final = StreamReport.__new__
_REPORT_SETTERS: Final[tuple[Any, ...]] = tuple(
    vars(StreamReport)[field.name].__set__ for field in fields(StreamReport)
)


def new_report(
    protocol: str,
    outcome: Outcome,
    findings: tuple[Finding, ...],
    events: int,
    bytes: int,
    body_messages: int,
    started_at: float,
    first_byte_at: float | None,
    first_event_at: float | None,
    ended_at: float,
    inspected: bool,
    internal_error: str | None,
    path: str | None,
    protocol_source: str,
    route: str | None,
    notes: tuple[str, ...],
    max_event_gap: float | None,
    findings_dropped: tuple[tuple[str, int], ...],
    client_closed_after_end: bool,
    skipped_checks: tuple[str, ...],
) -> StreamReport:
    """``StreamReport(...)`` of a stream with no upstream (the monitor's), made without the
    dataclass's ``__init__``: the same value. The parameters are the fields, in order."""
    report: StreamReport = _NEW_REPORT(StreamReport)
    values = (
        protocol,
        outcome,
        findings,
        events,
        bytes,
        body_messages,
        started_at,
        first_byte_at,
        first_event_at,
        ended_at,
        inspected,
        internal_error,
        path,
        protocol_source,
        route,
        notes,
        max_event_gap,
        findings_dropped,
        client_closed_after_end,
        skipped_checks,
        (),  # upstreams
        0,  # upstreams_dropped
        (),  # attribution
        None,  # outcome_attribution
        False,  # abandoned
        None,  # capture_id
    )
    for setter, value in zip(_REPORT_SETTERS, values, strict=True):
        setter(report, value)
    return report
