"""Prometheus metrics for watched streams: a sink (``streamguard.sinks.Sink``).

All metric objects are built once, in a ``StreamGuardMetrics`` that takes the registry, so
any number of apps (or middleware instances, which Starlette may build more than once) can
share it without registering twice. Per stream, the label children are resolved once, at
the start (``StreamMetrics``, shared by every stream of one route and protocol); nothing is
looked up per frame. Frame and byte counts are added when the stream ends.

Series are created, at 0, for a (route, protocol) pair when it is first known: at
construction for configured routes, on the first stream otherwise. A pair gets every
outcome, only the rules that can fire for its protocol (``rules.rules_for``) and only the
reasons its checker can skip checks for (``rules.skip_reasons_for``); a rule or a reason
of another protocol gets its series when it first counts (a protocol detected late).

Only counters, histograms and a ``livesum`` gauge are used, so the metrics work in
prometheus-client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``).

Exemplars: the counters of failures (``violations_total``, ``malformed_streams_total`` and
the failed outcomes of ``streams_total`` and ``unchecked_streams_total``, those of
``FAILED_OUTCOMES``) carry the trace of a stream that incremented them, when it ran in one:
OpenTelemetry's current span at the stream's start, else the W3C ``traceparent`` header its
request carried (``trace_context``). The trace is read once, when the stream starts; a
stream without one gets the shared handle of its (route, protocol) and costs nothing more,
a stream with one a small handle of its own (``TracedStreamMetrics``) and, once it fails,
one dict of labels. prometheus-client shows exemplars only in the OpenMetrics exposition,
and its multiprocess mode keeps none, so there no trace is read.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import ClassVar

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    make_asgi_app,
    multiprocess,
)
from starlette.types import ASGIApp, Receive, Scope, Send

from streamguard.attribution import ATTRIBUTED_OUTCOMES, ATTRIBUTIONS
from streamguard.report import (
    FAILED_OUTCOMES,
    SKIP_REASONS,
    Finding,
    Outcome,
    Severity,
    StreamReport,
)
from streamguard.rules import RULES, rules_for, skip_reasons_for
from streamguard.sinks import COMPRESSED, NOT_SAMPLED

__all__ = [
    "DURATION_BUCKETS",
    "FIRST_EVENT_BUCKETS",
    "UNCHECKED_REASONS",
    "UPSTREAM_NAMESPACE",
    "MetricsApp",
    "StreamGuardMetrics",
    "StreamMetrics",
    "TracedStreamMetrics",
    "metrics_app",
    "parse_traceparent",
    "trace_context",
]

#: Stream durations: seconds to 20 minutes (long agentic answers stream for minutes).
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200)
#: Time to first event: from milliseconds (cached answers) to a minute (reasoning models).
FIRST_EVENT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

#: The ``reason`` label of ``unchecked_streams_total``.
UNCHECKED_REASONS = (NOT_SAMPLED, COMPRESSED)
#: The namespace of the transports' metrics (``streamguard.httpx``): what an upstream sent
#: is counted apart from what the app sent (``streamguard_upstream_streams_total``, ...),
#: so existing queries on ``streamguard_*`` keep their meaning.
UPSTREAM_NAMESPACE = "streamguard_upstream"

_LABELS = ("route", "protocol")

#: A W3C ``traceparent`` of version ``00``, whole: the version, a trace id and a parent
#: (span) id in lowercase hex, the flags (https://www.w3.org/TR/trace-context/).
_TRACEPARENT = re.compile(rb"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
#: Its length: anything else is not a version-00 header, and is not looked at further.
_TRACEPARENT_LENGTH = 55
_ZERO_TRACE_ID = "0" * 32
_ZERO_SPAN_ID = "0" * 16

#: A trace a stream ran in: its trace id (32 lowercase hex digits) and span id (16).
Trace = tuple[str, str]


def parse_traceparent(value: bytes) -> Trace | None:
    """The (trace id, parent id) of a W3C ``traceparent`` header value, or ``None``.

    Strict, as the value comes from the wire: only version ``00``, exactly 55 bytes, lowercase
    hex, a trace id and a parent id that are not all zeros. Anything else is ignored, never
    repaired (the spec's answer to an invalid header is a new trace, which is not ours).
    """
    if len(value) != _TRACEPARENT_LENGTH:
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    trace_id, span_id = match[1].decode("ascii"), match[2].decode("ascii")
    if trace_id == _ZERO_TRACE_ID or span_id == _ZERO_SPAN_ID:
        return None
    return trace_id, span_id


def trace_context(request_headers: Iterable[tuple[bytes, bytes]]) -> Trace | None:
    """The trace the current stream runs in: OpenTelemetry's current span when it is valid,
    else the request's ``traceparent`` header (``parse_traceparent``), else ``None``.

    OpenTelemetry is looked up only if some code imported it: without ``opentelemetry.trace``
    in ``sys.modules`` no span can be current, and streamguard never imports it here (it is
    no dependency). A request with more than one ``traceparent`` has none (joined, as HTTP
    joins repeated headers, the value is invalid).
    """
    otel = sys.modules.get("opentelemetry.trace")
    if otel is not None:
        context = otel.get_current_span().get_span_context()
        if context.is_valid:
            return format(context.trace_id, "032x"), format(context.span_id, "016x")
    found: bytes | None = None
    for name, value in request_headers:
        # ASGI names are lowercase; an HTTP client's raw names keep the caller's case.
        if len(name) == 11 and name.lower() == b"traceparent":
            if found is not None:
                return None
            found = value
    return None if found is None else parse_traceparent(found)


class StreamGuardMetrics:
    """The metric families, registered once in ``registry`` under ``namespace``; a sink."""

    name = "metrics"

    # Keyed by the registry itself, weakly: an id() could be reused by a new registry
    # once the old one is gone, and would hand it metrics registered elsewhere. Then by
    # namespace: the transports' metrics live beside the middleware's.
    _defaults: ClassVar[
        weakref.WeakKeyDictionary[CollectorRegistry, dict[str, StreamGuardMetrics]]
    ] = weakref.WeakKeyDictionary()
    _defaults_lock = threading.Lock()

    def __init__(
        self, registry: CollectorRegistry | None = REGISTRY, namespace: str = "streamguard"
    ) -> None:
        def counter(name: str, doc: str, *extra: str) -> Counter:
            return Counter(name, doc, (*_LABELS, *extra), namespace=namespace, registry=registry)

        self.streams_started = counter("streams_started", "SSE streams whose response started.")
        self.streams = counter("streams", "SSE streams that ended, by outcome.", "outcome")
        self.unchecked_streams = counter(
            "unchecked_streams",
            "Streams that ended with their frames unchecked, by outcome and reason.",
            "outcome",
            "reason",
        )
        self.malformed_streams = counter(
            "malformed_streams", "Checked streams that ended with an error-severity finding."
        )
        self.violations = counter("violations", "Rule violations found, by rule.", "rule")
        self.attributed_violations = counter(
            "attributed_violations",
            "Rule violations of streams linked to upstream streams (a gateway's), by whose "
            "they are: upstream, gateway or unknown.",
            "attribution",
        )
        self.attributed_streams = counter(
            "attributed_streams",
            "Streams linked to upstream streams (a gateway's) that ended in error_event, "
            "unclosed or app_error, by outcome and whose the end is: upstream, gateway or "
            "unknown.",
            "outcome",
            "attribution",
        )
        self.checks_skipped = counter(
            "checks_skipped",
            "Checked streams on which some checks were skipped, by reason (each reason once "
            "per stream).",
            "reason",
        )
        self.frames = counter("frames", "SSE events dispatched in watched streams.")
        self.bytes = counter("bytes", "Body bytes of watched streams.")
        self.internal_errors = counter(
            "internal_errors",
            "Failures inside streamguard; the stream was left unwatched (unless only a "
            "plugin's detection signal or request reader failed).",
        )
        #: Captures of failed streams (``streamguard.captures``), by what became of them;
        #: no route or protocol label: the store and the rate are the process's.
        self.captures = Counter(
            "captures",
            "Captures of failed streams, by result: written, failed (the store raised), "
            "dropped (the writer's queue was full) or rate_limited.",
            ("result",),
            namespace=namespace,
            registry=registry,
        )
        self.in_progress = Gauge(
            "streams_in_progress",
            "Watched streams currently open.",
            _LABELS,
            namespace=namespace,
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.duration = Histogram(
            "stream_duration_seconds",
            "Seconds from the request to the end of the stream.",
            _LABELS,
            namespace=namespace,
            registry=registry,
            buckets=DURATION_BUCKETS,
        )
        self.time_to_first_event = Histogram(
            "time_to_first_event_seconds",
            "Seconds from the request to the first SSE event.",
            _LABELS,
            namespace=namespace,
            registry=registry,
            buckets=FIRST_EVENT_BUCKETS,
        )
        self._children: dict[tuple[str, str], StreamMetrics] = {}
        self._lock = threading.Lock()
        #: Whether a stream's trace is read for exemplars: not in prometheus-client's
        #: multiprocess mode, whose values keep no exemplar.
        self.exemplars = "PROMETHEUS_MULTIPROC_DIR" not in os.environ

    @classmethod
    def default(
        cls, registry: CollectorRegistry = REGISTRY, namespace: str = "streamguard"
    ) -> StreamGuardMetrics:
        """The one instance for ``registry`` and ``namespace`` in this process, built on
        first use (``UPSTREAM_NAMESPACE`` for the transports')."""
        with cls._defaults_lock:
            by_namespace = cls._defaults.setdefault(registry, {})
            metrics = by_namespace.get(namespace)
            if metrics is None:
                metrics = by_namespace[namespace] = cls(registry, namespace)
            return metrics

    def for_stream(self, route: str, protocol: str) -> StreamMetrics:
        """The label children for one (route, protocol), initialised to 0 on first use."""
        key = (route, protocol)
        children = self._children.get(key)
        if children is None:
            with self._lock:
                children = self._children.get(key)
                if children is None:
                    children = self._children[key] = StreamMetrics(self, route, protocol)
        return children

    def initialise(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Export zeros for known (route, protocol) pairs, so ratios exist before traffic."""
        for route, protocol in pairs:
            self.for_stream(route, protocol)

    # -- the sink ---------------------------------------------------------------------------

    def stream_started(
        self,
        route: str,
        protocol: str,
        unchecked: str | None,
        request_headers: Iterable[tuple[bytes, bytes]] | None = None,
    ) -> StreamMetrics | UncheckedStreamMetrics | TracedStreamMetrics:
        """The sink's start; given the ``request_headers`` (by a seam with exemplars on), the
        stream's trace is read (``trace_context``) and a traced stream gets its own handle,
        whose failure counts carry the trace as an exemplar."""
        children = self.for_stream(route, protocol)
        children.stream_started()
        handle = children if unchecked is None else children.unchecked(unchecked)
        if request_headers is None or not self.exemplars:
            return handle
        trace = trace_context(request_headers)
        return handle if trace is None else TracedStreamMetrics(handle, trace)

    def capture_counted(self, result: str) -> None:
        """A capture's ``result`` (``streamguard.captures``); called from its writer thread."""
        self.captures.labels(result).inc()

    def internal_error(self, where: str, error: str, route: str, protocol: str) -> None:
        self.internal_errors.labels(route, protocol).inc()


class StreamMetrics:
    """The label children of one (route, protocol): what a stream touches, resolved once."""

    __slots__ = (
        "_attributed",
        "_attributed_ends",
        "_outcomes",
        "_parent",
        "_protocol",
        "_route",
        "_skipped",
        "_unchecked",
        "_violations",
        "bytes",
        "duration",
        "frames",
        "in_progress",
        "malformed",
        "started",
        "time_to_first_event",
    )

    def __init__(self, parent: StreamGuardMetrics, route: str, protocol: str) -> None:
        self._parent = parent
        self._route = route
        self._protocol = protocol
        labels = (route, protocol)
        self.started = parent.streams_started.labels(*labels)
        self.malformed = parent.malformed_streams.labels(*labels)
        self.frames = parent.frames.labels(*labels)
        self.bytes = parent.bytes.labels(*labels)
        parent.internal_errors.labels(*labels)  # exported as 0 from the start
        self.in_progress = parent.in_progress.labels(*labels)
        self.duration = parent.duration.labels(*labels)
        self.time_to_first_event = parent.time_to_first_event.labels(*labels)
        self._outcomes = {
            outcome: parent.streams.labels(*labels, outcome.value) for outcome in Outcome
        }
        self._unchecked = {
            reason: UncheckedStreamMetrics(
                self,
                {o: parent.unchecked_streams.labels(*labels, o.value, reason) for o in Outcome},
            )
            for reason in UNCHECKED_REASONS
        }
        self._violations = {
            rule.name: parent.violations.labels(*labels, rule.name) for rule in rules_for(protocol)
        }
        self._skipped = {
            reason: parent.checks_skipped.labels(*labels, reason)
            for reason in skip_reasons_for(protocol)
        }
        #: Made (every attribution at 0) by the first stream of the pair linked to an
        #: upstream: a route that is no gateway's has no such series.
        self._attributed: dict[str, Counter] | None = None
        #: The same for the attributed ends, by (outcome, attribution).
        self._attributed_ends: dict[tuple[Outcome, str], Counter] | None = None

    def unchecked(self, reason: str) -> UncheckedStreamMetrics:
        """The handle of a stream of this pair whose frames are not checked, for ``reason``."""
        return self._unchecked[reason]

    def stream_started(self) -> None:
        self.started.inc()
        self.in_progress.inc()

    def findings(self, found: Sequence[Finding], exemplar: dict[str, str] | None = None) -> None:
        """Count findings; ``exemplar``: the labels of the trace of a stream that ran in one."""
        if len(found) == 1:
            self.violation(found[0], exemplar)
            return
        # A batch (one window of a giant message can hold thousands of findings of one
        # rule) is counted per rule: one increment each, not one per finding.
        counts: dict[str, int] = {}
        for finding in found:
            counts[finding.rule] = counts.get(finding.rule, 0) + 1
        for rule, count in counts.items():
            child = self._violation_counter(rule)
            if child is not None:
                child.inc(count, exemplar)

    def violation(self, finding: Finding, exemplar: dict[str, str] | None = None) -> None:
        child = self._violation_counter(finding.rule)
        if child is not None:
            child.inc(1, exemplar)

    def _violation_counter(self, rule: str) -> Counter | None:
        """The series of ``rule``; ``None`` for a rule the catalog does not hold, which is
        never a label value (the monitor refuses such a plugin finding before it gets here;
        this keeps the label set closed whatever a sink is handed)."""
        child = self._violations.get(rule)
        if child is None:  # a rule of another protocol (auto-detection decided late)
            if rule not in RULES:
                return None
            child = self._violations[rule] = self._parent.violations.labels(
                self._route, self._protocol, rule
            )
        return child

    def skipped(self, reason: str) -> None:
        """Count a stream that skipped checks for ``reason``; one outside ``SKIP_REASONS``
        (the label's closed set) is not counted."""
        child = self._skipped.get(reason)
        if child is None:
            if reason not in SKIP_REASONS:
                return
            # A reason of another protocol (auto-detection decided late).
            child = self._skipped[reason] = self._parent.checks_skipped.labels(
                self._route, self._protocol, reason
            )
        child.inc()

    def attributed(self, attribution: Sequence[str]) -> None:
        """Count a linked stream's findings by attribution (``report.attribution``)."""
        children = self._attributed
        if children is None:
            parent = self._parent
            children = self._attributed = {
                kind: parent.attributed_violations.labels(self._route, self._protocol, kind)
                for kind in ATTRIBUTIONS
            }
        counts: dict[str, int] = {}
        for kind in attribution:
            counts[kind] = counts.get(kind, 0) + 1
        for kind, count in counts.items():
            child = children.get(kind)
            if child is not None:  # a closed set: nothing else is a label
                child.inc(count)

    def attributed_end(self, outcome: Outcome, attribution: str | None) -> None:
        """Count a linked stream's end by whose it is (``report.outcome_attribution``), after
        making the pair's series (every attributed outcome and attribution at 0)."""
        children = self._attributed_ends
        if children is None:
            parent = self._parent
            children = self._attributed_ends = {
                (end, kind): parent.attributed_streams.labels(
                    self._route, self._protocol, end.value, kind
                )
                for end in ATTRIBUTED_OUTCOMES
                for kind in ATTRIBUTIONS
            }
        if attribution is not None:
            child = children.get((outcome, attribution))
            if child is not None:  # closed sets: nothing else is a label
                child.inc()

    def stream_ended(
        self,
        report: StreamReport,
        checked: bool = True,
        exemplar: dict[str, str] | None = None,
    ) -> None:
        """Count the stream's end; ``exemplar`` goes on its failure counts (a failed outcome,
        malformed), never on the others."""
        self.in_progress.dec()
        outcome = report.outcome
        if exemplar is None or outcome not in FAILED_OUTCOMES:
            self._outcomes[outcome].inc()
        else:
            self._outcomes[outcome].inc(1, exemplar)
        # The malformed ratio is over checked streams: an unchecked one can carry only the
        # lifecycle and timing findings, which would count it in the numerator alone.
        if checked and any(finding.severity is Severity.ERROR for finding in report.findings):
            self.malformed.inc(1, exemplar)
        if checked:
            for reason in report.skipped_checks:
                self.skipped(reason)
        if report.attribution:
            self.attributed(report.attribution)
        if report.upstreams or report.upstreams_dropped:  # linked: a gateway's stream
            self.attributed_end(outcome, report.outcome_attribution)
        if report.events:
            self.frames.inc(report.events)
        if report.bytes:
            self.bytes.inc(report.bytes)
        self.duration.observe(max(report.duration, 0.0))
        first_event = report.time_to_first_event
        if first_event is not None:
            self.time_to_first_event.observe(max(first_event, 0.0))


class UncheckedStreamMetrics:
    """The handle of a stream whose frames are not checked: counted, and counted apart.

    ``streams_total`` counts it as any stream; ``unchecked_streams_total`` too, with the
    reason, so that alert ratios can divide by the checked streams alone.
    """

    __slots__ = ("_metrics", "_outcomes")

    def __init__(self, metrics: StreamMetrics, outcomes: dict[Outcome, Counter]) -> None:
        self._metrics = metrics
        self._outcomes = outcomes

    def findings(self, found: Sequence[Finding], exemplar: dict[str, str] | None = None) -> None:
        self._metrics.findings(found, exemplar)

    def stream_ended(self, report: StreamReport, exemplar: dict[str, str] | None = None) -> None:
        self._metrics.stream_ended(report, checked=False, exemplar=exemplar)
        outcome = report.outcome
        if exemplar is None or outcome not in FAILED_OUTCOMES:
            self._outcomes[outcome].inc()
        else:
            self._outcomes[outcome].inc(1, exemplar)


class TracedStreamMetrics:
    """The handle of a stream that ran in a trace: its (route, protocol) handle, whose
    failure counts it gives the trace as an exemplar (``trace_id``, ``span_id``: 63 of
    the 128 characters prometheus-client allows). The labels are made when the stream
    first fails, once; a healthy stream never makes them."""

    __slots__ = ("_exemplar", "_handle", "trace")

    def __init__(self, handle: StreamMetrics | UncheckedStreamMetrics, trace: Trace) -> None:
        self._handle = handle
        #: The stream's (trace id, span id).
        self.trace = trace
        self._exemplar: dict[str, str] | None = None

    def exemplar(self) -> dict[str, str]:
        """The exemplar's labels."""
        labels = self._exemplar
        if labels is None:
            trace_id, span_id = self.trace
            labels = self._exemplar = {"trace_id": trace_id, "span_id": span_id}
        return labels

    def findings(self, found: Sequence[Finding]) -> None:
        self._handle.findings(found, self.exemplar())

    def stream_ended(self, report: StreamReport) -> None:
        handle = self._handle
        # A healthy end makes no labels (``stream_ended`` passes them only to failures).
        if self._exemplar is None and report.outcome not in FAILED_OUTCOMES and not report.findings:
            handle.stream_ended(report)
        elif report.capture_id is not None:
            # The stream's capture (``streamguard.captures``) beside its trace: 99 of the
            # 128 characters.
            labels = {**self.exemplar(), "capture_id": report.capture_id}
            handle.stream_ended(report, exemplar=labels)
        else:
            handle.stream_ended(report, exemplar=self.exemplar())


class MetricsApp:
    """The Prometheus exposition as an ASGI application *object*.

    Starlette serves a ``Route`` endpoint that is a function as ``endpoint(request)`` and
    any other callable as ASGI; prometheus-client's own app is a function. Wrapped in an
    object, ``Route("/metrics", metrics_app())`` and FastAPI's
    ``app.add_route("/metrics", metrics_app())`` answer ``/metrics`` itself, where a
    ``Mount`` would answer it with a ``307`` redirect to ``/metrics/``.
    """

    __slots__ = ("_app", "registry")

    def __init__(self, registry: CollectorRegistry) -> None:
        #: The registry served.
        self.registry = registry
        self._app: ASGIApp = make_asgi_app(registry=registry)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


def metrics_app(registry: CollectorRegistry | None = None) -> MetricsApp:
    """An ASGI app that serves the metrics in the Prometheus text format.

    With ``PROMETHEUS_MULTIPROC_DIR`` set (several workers), it serves the sum over every
    worker through prometheus-client's multiprocess collector; otherwise ``registry`` (the
    default registry unless given). Route it: ``app.add_route("/metrics", metrics_app())``
    (FastAPI) or ``Route("/metrics", metrics_app())`` (Starlette).
    """
    if registry is None and "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return MetricsApp(REGISTRY if registry is None else registry)
