"""OpenTelemetry for watched streams: a sink (``streamguard.sinks.Sink``) that puts each
stream's report on the request's span and counts streams through the OTel metrics API.

Only the OpenTelemetry *API* is imported (``pip install 'streamguard[otel]'``); the app
brings the SDK, its exporters and the instrumentation that makes the request's spans
(``opentelemetry-instrumentation-asgi``, ``-fastapi``, ``-httpx``). Without an SDK every
call here is the API's no-op.

Which span
----------

The stream's span is the one current when the stream starts: in the middleware, the
server span the ASGI (or FastAPI) instrumentation made for the request, since the response
head passes through the middleware in the app's task; in a transport, the span current
around ``handle_request`` (the client span when the client itself is instrumented,
``HTTPXClientInstrumentor.instrument_client``, else the caller's span).

A report exists only when the stream has ended, and by then that span has usually ended
too: the ASGI instrumentation ends the server span in the same ``send`` that hands the last
body message to the server, before that call returns to the middlewares inside it (so
before streamguard, inside it, sees the end); the httpx instrumentation ends the client
span once the response head arrived, before any body byte is read. An ended span must not
be written (the SDK drops the write with a warning). So at the end of a stream:

* the span still recording (the app returned or raised without ending its body, a
  middleware placed outside the instrumentation's) gets the report;
* otherwise streamguard records a span of its own, ``streamguard.stream``, a child of that
  span (same trace, parented to it), from the response head to the stream's end, and the
  report goes there. A transport's stream always gets its own span: the caller's span
  may be the server span of a gateway's request, which carries the downstream stream's.

A stream that starts with no span, or under one that is not recording (not sampled), is
left alone: its trace is not recorded.

What is exported
----------------

Span attributes, all bounded (``ATTRIBUTES``): the route label, the protocol, the outcome,
counts and times. Each finding the report keeps (at most ``monitor.MAX_KEPT_FINDINGS`` per
stream) is a span event ``streamguard.finding`` with its rule, severity, event index and
byte offset, and nothing else: a finding's message is built from the wire (the built-in
checkers show wire values only as a size and a hash, but a short value's hash is
reversible by guessing, and a plugin protocol's message is not streamguard's to vouch
for), so it is never exported. The span's status is set to ``ERROR`` only with
``error_status=True``: the app may have answered 200 on purpose.

The metrics are the Prometheus sink's (``streamguard.metrics``), counted the same way, as
OTel instruments named in OTel's style (``METRIC_NAMES`` gives each one's Prometheus
name); docs/opentelemetry.md has the table.

Nothing here reaches the stream: the sink runs inside the session's fail-open fan-out, so
a failing exporter, processor or reader stops the watching of that one stream and is
counted as an internal error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

try:
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace
    from opentelemetry.trace import Span, Status, StatusCode
    from opentelemetry.util.types import AttributeValue
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in a subprocess
    raise ModuleNotFoundError(
        "streamguard.otel needs the OpenTelemetry API: pip install 'streamguard[otel]'",
        name=exc.name,
    ) from exc

from streamguard.attribution import ATTRIBUTED_OUTCOMES, ATTRIBUTIONS
from streamguard.metrics import DURATION_BUCKETS, FIRST_EVENT_BUCKETS, UNCHECKED_REASONS
from streamguard.report import (
    FAILED_OUTCOMES,
    SKIP_REASONS,
    Finding,
    Outcome,
    Severity,
    StreamReport,
)
from streamguard.rules import rules_for, skip_reasons_for

__all__ = [
    "ATTRIBUTES",
    "FINDING_EVENT",
    "METRIC_NAMES",
    "STREAM_SPAN",
    "OpenTelemetrySink",
]

#: The name of the span streamguard records when the stream's own span has ended.
STREAM_SPAN = "streamguard.stream"
#: The name of the span event of each finding.
FINDING_EVENT = "streamguard.finding"

#: Every span attribute streamguard writes, with what it holds. All bounded: labels from
#: closed sets, counts, seconds.
ATTRIBUTES: Mapping[str, str] = {
    "streamguard.route": "the route label (a configured name or route template)",
    "streamguard.protocol": "the protocol the stream was checked as (detected, under auto)",
    "streamguard.side": "downstream (the middleware) or upstream (a transport)",
    "streamguard.outcome": "how the stream ended (the outcome label)",
    "streamguard.failed": "the outcome is a failure (streamguard.report.FAILED_OUTCOMES)",
    "streamguard.malformed": "a kept finding has error severity",
    "streamguard.checked": "the frames were checked (not sampled out, not compressed)",
    "streamguard.events": "SSE events dispatched",
    "streamguard.bytes": "body bytes",
    "streamguard.findings": "findings made, kept and dropped",
    "streamguard.findings_dropped": "findings past the per-stream cap, not on the span",
    "streamguard.rules": "the distinct rules broken, sorted",
    "streamguard.duration": "seconds from the request to the end of the stream",
    "streamguard.time_to_first_event": "seconds from the request to the first SSE event",
    "streamguard.upstreams": "a gateway's stream: the upstream streams linked to it "
    "(docs/attribution.md), named and not",
    "streamguard.outcome_attribution": "a gateway's stream that ended in a failure an upstream "
    "can cause: whose the end is (upstream, gateway, unknown)",
    "streamguard.abandoned": "an upstream stream still open when its downstream stream ended",
    "streamguard.capture_id": "the id of the stream's capture (streamguard.captures), if written",
}

#: Each instrument's name (the middleware's; a transport's has ``streamguard.upstream.``
#: for ``streamguard.``) with the Prometheus sink's name it mirrors. The OTel Collector's
#: Prometheus exporters turn the first into the second (dots to underscores, ``_total`` on
#: counters, ``_seconds`` from the unit ``s``); the attributes become labels
#: ``streamguard_route``, ``streamguard_outcome``, ...
METRIC_NAMES: Mapping[str, str] = {
    "streamguard.streams.started": "streamguard_streams_started_total",
    "streamguard.streams": "streamguard_streams_total",
    "streamguard.unchecked_streams": "streamguard_unchecked_streams_total",
    "streamguard.malformed_streams": "streamguard_malformed_streams_total",
    "streamguard.violations": "streamguard_violations_total",
    "streamguard.attributed_violations": "streamguard_attributed_violations_total",
    "streamguard.attributed_streams": "streamguard_attributed_streams_total",
    "streamguard.checks_skipped": "streamguard_checks_skipped_total",
    "streamguard.streams_in_progress": "streamguard_streams_in_progress",
    "streamguard.stream.duration": "streamguard_stream_duration_seconds",
    "streamguard.time_to_first_event": "streamguard_time_to_first_event_seconds",
    "streamguard.frames": "streamguard_frames_total",
    "streamguard.bytes": "streamguard_bytes_total",
    "streamguard.internal_errors": "streamguard_internal_errors_total",
    "streamguard.captures": "streamguard_captures_total",
}

_Attributes = dict[str, str]


class OpenTelemetrySink:
    """Reports on the request's span and OTel metrics; give it to ``sinks=``.

    ``upstream=True`` for a transport's streams: its instruments are named
    ``streamguard.upstream.*`` (as the Prometheus sink's ``streamguard_upstream_*``) and
    each stream gets a span of its own. ``error_status=True`` sets the span's status to
    ``ERROR`` for a stream that ended with an error-severity finding or a failing outcome.
    ``tracer_provider`` and ``meter_provider`` default to the global ones; ``spans=False``
    or ``metrics=False`` turns either half off.
    """

    name = "opentelemetry"

    def __init__(
        self,
        *,
        upstream: bool = False,
        error_status: bool = False,
        spans: bool = True,
        metrics: bool = True,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: otel_metrics.MeterProvider | None = None,
    ) -> None:
        from streamguard import __version__

        self.upstream = upstream
        self.error_status = error_status
        self.side = "upstream" if upstream else "downstream"
        self._tracer = (
            trace.get_tracer("streamguard", __version__, tracer_provider) if spans else None
        )
        self._meters = (
            _Instruments(
                otel_metrics.get_meter("streamguard", __version__, meter_provider),
                "streamguard.upstream" if upstream else "streamguard",
            )
            if metrics
            else None
        )

    def stream_started(self, route: str, protocol: str, unchecked: str | None) -> _StreamHandle:
        span = None
        if self._tracer is not None:
            current = trace.get_current_span()
            if current.is_recording():
                span = current
        labels = {"streamguard.route": route, "streamguard.protocol": protocol}
        if self._meters is not None:
            self._meters.stream_started(labels, protocol)
        return _StreamHandle(self, span, labels, unchecked)

    def capture_counted(self, result: str) -> None:
        """A capture's ``result`` (``streamguard.captures``); from its writer thread."""
        if self._meters is not None:
            self._meters.captures.add(1, {"streamguard.result": result})

    def internal_error(self, where: str, error: str, route: str, protocol: str) -> None:
        if self._meters is not None:
            self._meters.internal_errors.add(
                1, {"streamguard.route": route, "streamguard.protocol": protocol}
            )


class _StreamHandle:
    """The sink's handle on one stream: its span, its labels, when it started."""

    __slots__ = ("_labels", "_sink", "_span", "_started_ns", "_unchecked")

    def __init__(
        self,
        sink: OpenTelemetrySink,
        span: Span | None,
        labels: _Attributes,
        unchecked: str | None,
    ) -> None:
        self._sink = sink
        self._span = span
        self._labels = labels
        self._unchecked = unchecked
        self._started_ns = time.time_ns()

    def findings(self, found: Sequence[Finding]) -> None:
        # Counted as they come, as the Prometheus sink does; the span gets the report's.
        meters = self._sink._meters
        if meters is not None:
            meters.violations(self._labels, found)

    def stream_ended(self, report: StreamReport) -> None:
        sink = self._sink
        # The metrics first: a span processor that raises must not lose the counts.
        if sink._meters is not None:
            sink._meters.stream_ended(self._labels, report, self._unchecked)
        if self._span is not None:
            self._annotate(report)

    def _annotate(self, report: StreamReport) -> None:
        sink = self._sink
        span = self._span
        assert span is not None
        assert sink._tracer is not None
        own = None
        if sink.upstream or not span.is_recording():
            own = span = sink._tracer.start_span(
                STREAM_SPAN,
                context=trace.set_span_in_context(span),
                kind=trace.SpanKind.INTERNAL,
                start_time=self._started_ns,
            )
        try:
            span.set_attributes(self._attributes(report))
            attribution = report.attribution
            for index, finding in enumerate(report.findings):
                event = _finding_attributes(finding)
                if attribution:  # a gateway's stream: whose the finding is
                    event["streamguard.attribution"] = attribution[index]
                span.add_event(FINDING_EVENT, event)
            if sink.error_status and (report.outcome in FAILED_OUTCOMES or report.malformed):
                span.set_status(Status(StatusCode.ERROR, _status_description(report)))
        finally:
            if own is not None:
                own.end()

    def _attributes(self, report: StreamReport) -> dict[str, AttributeValue]:
        dropped = sum(count for _, count in report.findings_dropped)
        attributes: dict[str, AttributeValue] = {
            "streamguard.route": self._labels["streamguard.route"],
            "streamguard.protocol": report.protocol,
            "streamguard.side": self._sink.side,
            "streamguard.outcome": report.outcome.value,
            "streamguard.failed": report.outcome in FAILED_OUTCOMES,
            "streamguard.malformed": report.malformed,
            "streamguard.checked": self._unchecked is None,
            "streamguard.events": report.events,
            "streamguard.bytes": report.bytes,
            "streamguard.findings": len(report.findings) + dropped,
            "streamguard.findings_dropped": dropped,
            "streamguard.duration": max(report.duration, 0.0),
        }
        rules = sorted({finding.rule for finding in report.findings})
        if rules:
            attributes["streamguard.rules"] = rules
        first_event = report.time_to_first_event
        if first_event is not None:
            attributes["streamguard.time_to_first_event"] = max(first_event, 0.0)
        if report.upstreams or report.upstreams_dropped:
            attributes["streamguard.upstreams"] = len(report.upstreams) + report.upstreams_dropped
        if report.outcome_attribution is not None:
            attributes["streamguard.outcome_attribution"] = report.outcome_attribution
        if report.abandoned:
            attributes["streamguard.abandoned"] = True
        if report.capture_id is not None:
            attributes["streamguard.capture_id"] = report.capture_id
        return attributes


def _finding_attributes(finding: Finding) -> dict[str, str | int]:
    """Where a finding is and what rule it broke; never its message (module docstring)."""
    attributes: dict[str, str | int] = {
        "streamguard.rule": finding.rule,
        "streamguard.severity": finding.severity.value,
    }
    if finding.event_index is not None:
        attributes["streamguard.event_index"] = finding.event_index
    if finding.byte_offset is not None:
        attributes["streamguard.byte_offset"] = finding.byte_offset
    return attributes


def _status_description(report: StreamReport) -> str:
    """A bounded description: the outcome, and the first error rule."""
    errors = [f.rule for f in report.findings if f.severity is Severity.ERROR]
    if errors:
        return f"streamguard: {report.outcome.value}, {errors[0]}"
    return f"streamguard: {report.outcome.value}"


class _Instruments:
    """The OTel instruments of one sink, mirroring ``StreamGuardMetrics`` count for count."""

    def __init__(self, meter: otel_metrics.Meter, namespace: str) -> None:
        def counter(name: str, unit: str, description: str) -> otel_metrics.Counter:
            return meter.create_counter(f"{namespace}.{name}", unit, description)

        self.streams_started = counter(
            "streams.started", "{stream}", "SSE streams whose response started."
        )
        self.streams = counter("streams", "{stream}", "SSE streams that ended, by outcome.")
        self.unchecked_streams = counter(
            "unchecked_streams",
            "{stream}",
            "Streams that ended with their frames unchecked, by outcome and reason.",
        )
        self.malformed_streams = counter(
            "malformed_streams",
            "{stream}",
            "Checked streams that ended with an error-severity finding.",
        )
        self.violations_counter = counter("violations", "{violation}", "Rule violations found.")
        self.attributed_violations = counter(
            "attributed_violations",
            "{violation}",
            "Rule violations of streams linked to upstream streams (a gateway's), by whose "
            "they are: upstream, gateway or unknown.",
        )
        self.attributed_streams = counter(
            "attributed_streams",
            "{stream}",
            "Streams linked to upstream streams (a gateway's) that ended in error_event, "
            "unclosed or app_error, by outcome and whose the end is.",
        )
        self.checks_skipped = counter(
            "checks_skipped",
            "{stream}",
            "Checked streams on which some checks were skipped, by reason.",
        )
        self.frames = counter("frames", "{event}", "SSE events dispatched in watched streams.")
        self.bytes = counter("bytes", "By", "Body bytes of watched streams.")
        self.internal_errors = counter(
            "internal_errors", "{error}", "Failures inside streamguard; the stream was unwatched."
        )
        self.captures = counter(
            "captures",
            "{capture}",
            "Captures of failed streams, by result: written, failed, dropped or rate_limited.",
        )
        self.in_progress = meter.create_up_down_counter(
            f"{namespace}.streams_in_progress", "{stream}", "Watched streams currently open."
        )
        self.duration = meter.create_histogram(
            f"{namespace}.stream.duration",
            "s",
            "Seconds from the request to the end of the stream.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        self.time_to_first_event = meter.create_histogram(
            f"{namespace}.time_to_first_event",
            "s",
            "Seconds from the request to the first SSE event.",
            explicit_bucket_boundaries_advisory=list(FIRST_EVENT_BUCKETS),
        )
        #: The (route, protocol) pairs whose series exist, at 0 from their first stream.
        self._known: set[tuple[str, str]] = set()
        #: The pairs whose attributed series exist: made (every attribution at 0) by the
        #: pair's first stream linked to an upstream, as the Prometheus sink makes them, so
        #: a route that is no gateway's has none.
        self._attributed_known: set[tuple[str, str]] = set()
        #: The same for the attributed ends, made by the pair's first linked stream.
        self._attributed_ends_known: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def stream_started(self, labels: _Attributes, protocol: str) -> None:
        key = (labels["streamguard.route"], protocol)
        if key not in self._known:
            with self._lock:
                if key not in self._known:
                    self._known.add(key)
                    self._initialise(labels, protocol)
        self.streams_started.add(1, labels)
        self.in_progress.add(1, labels)

    def _initialise(self, labels: _Attributes, protocol: str) -> None:
        """Export zeros for a new pair, as the Prometheus sink does, so ratios exist."""
        for instrument in (
            self.streams_started,
            self.malformed_streams,
            self.frames,
            self.bytes,
            self.internal_errors,
        ):
            instrument.add(0, labels)
        self.in_progress.add(0, labels)
        for outcome in Outcome:
            self.streams.add(0, {**labels, "streamguard.outcome": outcome.value})
            for reason in UNCHECKED_REASONS:
                self.unchecked_streams.add(
                    0,
                    {**labels, "streamguard.outcome": outcome.value, "streamguard.reason": reason},
                )
        for rule in rules_for(protocol):
            self.violations_counter.add(0, {**labels, "streamguard.rule": rule.name})
        for reason in skip_reasons_for(protocol):
            self.checks_skipped.add(0, {**labels, "streamguard.reason": reason})

    def violations(self, labels: _Attributes, found: Sequence[Finding]) -> None:
        counts: dict[str, int] = {}
        for finding in found:
            counts[finding.rule] = counts.get(finding.rule, 0) + 1
        for rule, count in counts.items():
            self.violations_counter.add(count, {**labels, "streamguard.rule": rule})

    def stream_ended(
        self, labels: _Attributes, report: StreamReport, unchecked: str | None
    ) -> None:
        checked = unchecked is None
        self.in_progress.add(-1, labels)
        self.streams.add(1, {**labels, "streamguard.outcome": report.outcome.value})
        if unchecked is not None:
            self.unchecked_streams.add(
                1,
                {
                    **labels,
                    "streamguard.outcome": report.outcome.value,
                    "streamguard.reason": unchecked,
                },
            )
        if checked and report.malformed:
            self.malformed_streams.add(1, labels)
        if checked:
            for reason in report.skipped_checks:
                if reason in SKIP_REASONS:
                    self.checks_skipped.add(1, {**labels, "streamguard.reason": reason})
        if report.attribution:
            self.attributed(labels, report.attribution)
        if report.upstreams or report.upstreams_dropped:  # linked: a gateway's stream
            self.attributed_end(labels, report.outcome, report.outcome_attribution)
        if report.events:
            self.frames.add(report.events, labels)
        if report.bytes:
            self.bytes.add(report.bytes, labels)
        self.duration.record(max(report.duration, 0.0), labels)
        first_event = report.time_to_first_event
        if first_event is not None:
            self.time_to_first_event.record(max(first_event, 0.0), labels)

    def attributed(self, labels: _Attributes, attribution: Sequence[str]) -> None:
        """Count a linked stream's findings by attribution (``report.attribution``)."""
        key = (labels["streamguard.route"], labels["streamguard.protocol"])
        if key not in self._attributed_known:
            with self._lock:
                if key not in self._attributed_known:
                    self._attributed_known.add(key)
                    for kind in ATTRIBUTIONS:
                        self.attributed_violations.add(
                            0, {**labels, "streamguard.attribution": kind}
                        )
        counts: dict[str, int] = {}
        for kind in attribution:
            counts[kind] = counts.get(kind, 0) + 1
        for kind, count in counts.items():
            if kind in ATTRIBUTIONS:  # a closed set: nothing else is an attribute
                self.attributed_violations.add(count, {**labels, "streamguard.attribution": kind})

    def attributed_end(
        self, labels: _Attributes, outcome: Outcome, attribution: str | None
    ) -> None:
        """Count a linked stream's end by whose it is (``report.outcome_attribution``)."""
        key = (labels["streamguard.route"], labels["streamguard.protocol"])
        if key not in self._attributed_ends_known:
            with self._lock:
                if key not in self._attributed_ends_known:
                    self._attributed_ends_known.add(key)
                    for end in ATTRIBUTED_OUTCOMES:
                        for kind in ATTRIBUTIONS:
                            self.attributed_streams.add(
                                0,
                                {
                                    **labels,
                                    "streamguard.outcome": end.value,
                                    "streamguard.attribution": kind,
                                },
                            )
        # Closed sets: nothing else is an attribute.
        if (
            attribution is not None
            and attribution in ATTRIBUTIONS
            and outcome in ATTRIBUTED_OUTCOMES
        ):
            self.attributed_streams.add(
                1,
                {
                    **labels,
                    "streamguard.outcome": outcome.value,
                    "streamguard.attribution": attribution,
                },
            )
