"""structlog events for people: a summary per notable stream, one event per violation; a sink.

streamguard is a library citizen: it never calls ``structlog.configure()``; it logs
through ``structlog.get_logger("streamguard")`` with constant event names, so the
application's own processors and renderers decide what the lines look like. Until the
application configures structlog, whose default configuration prints to stdout, the events
go to the stdlib logger ``streamguard`` instead, which carries a ``NullHandler`` as a
library's logger should: silent until the application configures ``logging``. So that a
quickstart under plain ``uvicorn app:app`` does not drop its first broken stream without a
word, the first warning or error event a process drops that way prints one line to stderr
saying how to see them (``_notice_unheard``); once per process, never with the event's
values.

Events:

* ``stream_violation`` (warning, or error for an error-severity rule), as each finding is
  made, so a liveness finding shows up while the stream is still open. At most
  ``max_violations_per_stream`` per stream, and ``violations_per_minute`` per (route,
  rule); the number suppressed rides on the next one emitted for that pair.
* ``stream_<outcome>`` (``stream_completed``, ``stream_unclosed``, ...), at the end of each
  stream ``is_notable`` accepts (``summaries="notable"``, the default), or of every stream
  (``summaries="all"``): info when clean, warning or error otherwise; the name is always
  the outcome's, so a completed stream with an error finding is ``stream_completed``
  logged at ``error``.
* ``streamguard_internal_error`` (error), when streamguard itself fails, with ``where``
  and the exception's type and place; logged even with the stream events turned off.

The transports (``streamguard.httpx``) log the same events with ``side="upstream"`` bound:
what a provider sent, told apart from what the app sent (which carries no ``side``).

No message content, header or query string is logged unless content excerpts are turned
on, and then only a shortened, escaped excerpt of the offending frame.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from streamguard.config import LogConfig
from streamguard.report import (
    FAILED_OUTCOMES,
    NOTABLE_OUTCOMES,
    Finding,
    Outcome,
    Severity,
    StreamReport,
)

__all__ = [
    "STDLIB_LOGGER",
    "LogSink",
    "StreamLog",
    "ViolationLimiter",
    "get_logger",
    "is_notable",
    "log_callback_failure",
    "summary_level",
]

#: The stdlib logger events go to while structlog is unconfigured. The ``NullHandler``
#: keeps Python's last-resort handler from printing its warnings to stderr.
STDLIB_LOGGER = logging.getLogger("streamguard")
STDLIB_LOGGER.addHandler(logging.NullHandler())


def _render(logger: Any, method_name: str, event_dict: Any) -> Any:
    """``stream_completed route='/v1/chat' ...``: the event name first, as a message; an
    ``exc_info`` goes to the stdlib logger as its own, which prints the traceback."""
    event = event_dict.pop("event", "")
    exc_info = event_dict.pop("exc_info", None)
    line = " ".join([str(event), *(f"{key}={value!r}" for key, value in event_dict.items())])
    if exc_info is None:
        return line
    return (line,), {"exc_info": exc_info}


#: How much of a callback's name ``log_callback_failure`` shows.
_MAX_NAME_CHARS = 200


def log_callback_failure(
    where: str, callback: object, exc: BaseException, route: str | None, protocol: str
) -> None:
    """``streamguard_report_callback_failed`` (error), with the exception's traceback: an
    application's own callback (``on_report``) raised, as ``ReportQueue`` logs it. Its
    message is the application's own text about what it was given (a report, which holds
    no wire value), so unlike a failure inside streamguard it is shown whole."""
    name = getattr(callback, "__qualname__", None) or type(callback).__qualname__
    get_logger().error(
        "streamguard_report_callback_failed",
        error=type(exc).__name__,
        route=route,
        protocol=protocol,
        where=where,
        callback=str(name)[:_MAX_NAME_CHARS],
        exc_info=exc,
    )


#: What ``_notice_unheard`` prints, once per process.
UNHEARD_NOTICE = (
    "streamguard: a stream finding or a failure was logged, but nothing is listening: "
    "structlog is not configured and the stdlib logger 'streamguard' has no handler. To "
    "see them, call logging.basicConfig(level=logging.INFO) or configure structlog; "
    "logs={'enabled': False} turns them off. (said once per process)"
)
#: Whether ``_notice_unheard`` has decided (printed the notice, or seen a handler): then
#: it costs one check of a flag per event. Set under ``_unheard_lock``, so it prints once.
_unheard_decided = False
_unheard_lock = threading.Lock()


def _heard(logger: logging.Logger) -> bool:
    """Whether a handler other than a ``NullHandler`` gets ``logger``'s warnings."""
    if not logger.isEnabledFor(logging.WARNING):
        return True  # silenced on purpose: the application chose the level
    current: logging.Logger | None = logger
    while current is not None:
        if any(not isinstance(handler, logging.NullHandler) for handler in current.handlers):
            return True
        current = current.parent if current.propagate else None
    return False


def _notice_unheard(logger: Any, method_name: str, event_dict: Any) -> Any:
    """A processor of the stdlib fallback: the first warning or error event that no
    handler would show makes one line on stderr saying how to see them. Decided once per
    process, at the first warning or error: a handler added later is one the application
    chose after being told."""
    global _unheard_decided
    if method_name in ("warning", "error") and not _unheard_decided:
        with _unheard_lock:
            if not _unheard_decided:
                _unheard_decided = True
                if not _heard(STDLIB_LOGGER):
                    print(UNHEARD_NOTICE, file=sys.stderr)
    return event_dict


#: The logger of the stdlib fallback: its processors and logger are streamguard's own, so
#: it is assembled once (``cache_logger_on_first_use``), not at every stream's first event.
_STDLIB_PROXY: Any = structlog.wrap_logger(
    STDLIB_LOGGER,
    processors=[
        _notice_unheard,
        structlog.stdlib.filter_by_level,
        structlog.contextvars.merge_contextvars,
        _render,
    ],
    wrapper_class=structlog.stdlib.BoundLogger,
    cache_logger_on_first_use=True,
)
#: structlog's configuration when ``_configured_proxy`` was made, and that proxy.
_configured_proxy: tuple[tuple[Any, ...], Any] | None = None


def get_logger() -> Any:
    """structlog's logger ``streamguard`` when the application configured structlog, else
    one that renders to the stdlib logger ``streamguard`` (dropping, before rendering,
    events its level filters out).

    The application's logger is one proxy (``structlog.get_logger``) for as long as the
    configuration stays the same: an application that asks structlog to
    ``cache_logger_on_first_use`` has it assembled once, as its own module-level loggers
    are, rather than at every stream (4 us); a new configuration gets a new proxy."""
    global _configured_proxy
    if not structlog.is_configured():
        return _STDLIB_PROXY
    config = tuple(structlog.get_config().values())
    cached = _configured_proxy
    if cached is not None and cached[0] == config:
        return cached[1]
    proxy = structlog.get_logger("streamguard")
    _configured_proxy = (config, proxy)
    return proxy


def summary_level(report: StreamReport) -> str:
    """``error`` for broken streams (``FAILED_OUTCOMES``, or malformed), ``warning`` for
    doubtful ones (``NOTABLE_OUTCOMES``, a failure inside streamguard, an upstream stream
    ``abandoned`` by its gateway, a warning finding), else ``info``."""
    if report.outcome in FAILED_OUTCOMES or report.malformed:
        return "error"
    if report.outcome in NOTABLE_OUTCOMES or report.internal_error is not None:
        return "warning"
    if report.abandoned:  # an upstream stream its gateway left running
        return "warning"
    if any(finding.severity is Severity.WARNING for finding in report.findings):
        return "warning"
    return "info"


def is_notable(report: StreamReport) -> bool:
    """A stream worth a summary under ``summaries="notable"``: any finding (kept or
    dropped), or a summary level above ``info``."""
    return bool(report.findings or report.findings_dropped) or summary_level(report) != "info"


#: Each outcome's name (``Outcome.value`` is a property written in Python, read at every
#: summary), and its summary's event name.
_OUTCOME_NAMES: dict[Outcome, str] = {outcome: outcome.value for outcome in Outcome}
_SUMMARY_EVENTS: dict[str, str] = {name: f"stream_{name}" for name in _OUTCOME_NAMES.values()}


class ViolationLimiter:
    """A fixed one-minute window per (route, rule), shared by all streams of a middleware."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._windows: dict[tuple[str, str], list[float | int]] = {}
        self._lock = threading.Lock()

    def admit(self, route: str, rule: str) -> int | None:
        """``None`` to suppress this event, else how many were suppressed before it."""
        now = self._clock()
        with self._lock:
            window = self._windows.get((route, rule))
            if window is None:
                window = self._windows[(route, rule)] = [now, 0, 0]
            start, emitted, suppressed = window
            if now - start >= 60.0:
                window[0], window[1] = now, 0
                emitted = 0
            if emitted >= self.per_minute:
                window[2] = int(suppressed) + 1
                return None
            window[1] = int(emitted) + 1
            window[2] = 0
            return int(suppressed)


class LogSink:
    """The log sink: a ``StreamLog`` per stream, and streamguard's own failures."""

    name = "logs"

    def __init__(
        self,
        config: LogConfig,
        clock: Callable[[], float] = time.monotonic,
        side: str | None = None,
    ) -> None:
        self.config = config
        #: Shared by every stream of the sink, so the per-minute budget is per (route, rule).
        self.limiter = ViolationLimiter(config.violations_per_minute, clock)
        #: Bound as ``side`` on every event when set (``"upstream"`` for the transports).
        self.side = side

    def stream_started(self, route: str, protocol: str, unchecked: str | None) -> StreamLog | None:
        if not self.config.enabled:
            return None
        return StreamLog(self, route, protocol)

    def internal_error(self, where: str, error: str, route: str, protocol: str) -> None:
        side = {} if self.side is None else {"side": self.side}
        get_logger().error(
            "streamguard_internal_error",
            where=where,
            error=error,
            route=route,
            protocol=protocol,
            **side,
        )


class StreamLog:
    """The log of one stream: a bound logger plus its per-stream violation budget."""

    # The sink's config, limiter and side are read through ``_sink``: one slot where three
    # would be held by every open stream.
    __slots__ = ("_bound", "_logged", "_not_logged", "_protocol", "_route", "_sink")

    def __init__(self, sink: LogSink, route: str, protocol: str) -> None:
        self._sink = sink
        self._route = route
        self._protocol = protocol
        self._bound: Any = None
        self._logged = 0
        self._not_logged = 0
        # Made in the request's context: what it bound (a request id, say) is bound to the
        # stream's logger now, so that an event the sweeper logs from its own task (a
        # ``stalled`` finding) carries this stream's values, not those of the stream that
        # started the sweeper (a bound value wins over ``merge_contextvars``'). Nothing
        # bound, nothing kept: the logger is still made at its first use.
        bound_in_request = structlog.contextvars.get_contextvars()
        if bound_in_request:
            self._bound = self._logger.bind(**bound_in_request)

    @property
    def _config(self) -> LogConfig:
        return self._sink.config

    @property
    def _limiter(self) -> ViolationLimiter:
        return self._sink.limiter

    @property
    def _side(self) -> str | None:
        return self._sink.side

    @property
    def _logger(self) -> Any:
        """The stream's bound logger, bound when first used: an idle stream needs none."""
        if self._bound is None:
            bound = get_logger().bind(route=self._route, protocol=self._protocol)
            self._bound = bound if self._side is None else bound.bind(side=self._side)
        return self._bound

    def findings(self, found: Sequence[Finding]) -> None:
        for finding in found:
            self.violation(finding)

    def stream_ended(self, report: StreamReport) -> None:
        self.ended(report)

    def violation(self, finding: Finding) -> None:
        if self._logged >= self._config.max_violations_per_stream:
            self._not_logged += 1
            return
        suppressed = self._limiter.admit(self._route, finding.rule)
        if suppressed is None:
            self._not_logged += 1
            return
        self._logged += 1
        fields: dict[str, Any] = {
            "rule": finding.rule,
            "severity": finding.severity.value,
            "message": finding.message,
            "event_index": finding.event_index,
            "byte_offset": finding.byte_offset,
        }
        if suppressed:
            fields["suppressed"] = suppressed
        if finding.excerpt is not None:
            fields["excerpt"] = finding.excerpt
        level = "error" if finding.severity is Severity.ERROR else "warning"
        getattr(self._logger, level)("stream_violation", **fields)

    def ended(self, report: StreamReport) -> None:
        if self._config.summaries == "notable" and not is_notable(report):
            return
        errors = warnings = 0
        for finding in report.findings:
            if finding.severity is Severity.ERROR:
                errors += 1
            elif finding.severity is Severity.WARNING:
                warnings += 1
        outcome = _OUTCOME_NAMES[report.outcome]
        fields: dict[str, Any] = {
            "outcome": outcome,
            "duration_s": round(report.duration, 6),
            "events": report.events,
            "bytes": report.bytes,
            "findings": len(report.findings),
            "errors": errors,
            "warnings": warnings,
        }
        first_event = report.time_to_first_event
        if first_event is not None:
            fields["time_to_first_event_s"] = round(first_event, 6)
        if report.findings:
            fields["rules"] = sorted({finding.rule for finding in report.findings})
        if report.capture_id is not None:
            fields["capture_id"] = report.capture_id
        if self._not_logged:
            fields["violations_not_logged"] = self._not_logged
        if report.findings_dropped:
            fields["findings_dropped"] = sum(count for _rule, count in report.findings_dropped)
        if report.client_closed_after_end:
            fields["client_closed_after_end"] = True
        if report.skipped_checks:  # reasons from a closed set: never a wire value
            fields["skipped_checks"] = list(report.skipped_checks)
        if not report.inspected:
            fields["inspected"] = False
        if report.internal_error is not None:
            fields["internal_error"] = report.internal_error
        if report.protocol_source != "configured":
            fields["detected_protocol"] = report.protocol
            fields["protocol_source"] = report.protocol_source
        if report.attribution:  # a gateway's stream: whose each broken rule is
            by_attribution: dict[str, set[str]] = {}
            for finding, attribution in zip(report.findings, report.attribution, strict=False):
                by_attribution.setdefault(attribution, set()).add(finding.rule)
            fields["attribution"] = {
                attribution: sorted(rules) for attribution, rules in by_attribution.items()
            }
        if report.outcome_attribution is not None:  # whose the failed end is
            fields["outcome_attribution"] = report.outcome_attribution
        if report.upstreams:  # bounded: MAX_LINKED_UPSTREAMS, labels and rule names only
            fields["upstreams"] = [
                {
                    "protocol": upstream.protocol,
                    "route": upstream.route,
                    "outcome": "open" if upstream.outcome is None else upstream.outcome.value,
                    "rules": sorted(rule for rule, _count in upstream.findings),
                }
                for upstream in report.upstreams
            ]
        if report.upstreams_dropped:
            fields["upstreams_dropped"] = report.upstreams_dropped
        if report.abandoned:
            fields["abandoned"] = True
        getattr(self._logger, summary_level(report))(_SUMMARY_EVENTS[outcome], **fields)
