"""One watched stream, the same at every seam: ``Seam`` and ``StreamSession``.

streamguard watches streams at three seams: the ASGI middleware (what the app sends), the
httpx and httpx2 transports (what an upstream sends, as the caller reads it) and the test
collectors (``streamguard.testing.collect``: what a test's client reads). Each seam knows
its own I/O (ASGI messages, httpx byte streams) and nothing else; everything a seam does
with a stream once it holds its bytes is here, once.

Theory of operation
-------------------

A stream session has three steps, always in this order and each at most once, except
``feed``:

* **start** (``StreamSession.start``): the seam has read the response head and built the
  stream's ``StreamMonitor``. The session checks the head (``check_head``), decides whether
  the frames are checked at all (a compressed body cannot be) and how deeply (a stream the
  sample leaves out is framed and judged on its end, ``check_framing_only``), and tells
  every sink the stream started. From here on the stream is open: it is in the seam's
  ``open_streams`` (``in_flight``), its sweeper polls its timers, and whatever fails is
  reported through it, so that its end always reaches the sinks.
* **feed**: each body chunk, before the seam hands it on; findings go to the sinks as soon
  as they are made.
* **end** (``StreamSession.end``): once; later calls do nothing. The monitor turns the end
  into an outcome and builds the report, every sink gets it, and only then does the
  stream leave ``open_streams``: at ``in_flight == 0`` every report has been delivered.
  A stream whose route captures (``streamguard.captures``) is judged for a capture just
  before (``deliver``): its id, when one is written, is on the report every sink gets.

Four decisions would otherwise be made at each seam, slightly differently, so each is made
in one place:

* **Is this response an event stream?** ``read_head`` reads the status and the three
  headers that matter (the first value of each, decoded as Latin-1), and
  ``not_an_event_stream`` says why not (``"status"``, ``"content_type"``) or nothing: a 2xx
  status and the media type ``text/event-stream``, its parameters ignored. A seam adds what
  only it knows (HEAD, excluded paths, unlisted routes) in ``Seam.watched_route``, which
  counts each response it leaves alone in ``skipped``, by reason.
* **How did the stream end?** ``classify_end``: the seam says what it saw (the body
  ended; or it stopped, with the exception that stopped it or with none) and the side it
  watches from, and ``ENDS`` gives the ``StreamEnd``. The sides differ in who stops: at
  the server, the app sends, so an exception is the app's (``app_error``) and a return
  without the end of the body is the app's too (``app_returned``); at the client, the
  caller reads, so an exception while reading is the connection's (``connection_lost``,
  or ``read_timeout`` for the reader's own timeout) and stopping without one is the caller
  leaving (``client_disconnect``). Cancellation is recognised for asyncio and trio
  (``is_cancellation``, by the class name, so trio need not be imported). The monitor then
  turns that end into an outcome with what the stream had delivered (``monitor.OUTCOMES``).
* **What happens when a sink fails?** One fan-out (``StreamSession._tell``) calls every
  sink: one that raises is counted once per stream as an internal error, that stream's
  checking stops, a sink whose start failed hears nothing more of the stream, and nothing
  reaches the app or the caller. Only cancellation propagates: it is the task's, not the
  sink's.
* **Which outcomes are failures?** ``streamguard.report.FAILED_OUTCOMES``, beside the
  outcomes themselves, read by the log sink for its levels.

A gateway's two sides: the middleware publishes each request's session in a context
variable (``DOWNSTREAM``) while the app runs, once a transport exists in the process
(``LINKING``), and a transport that starts watching an upstream stream in that context
links it to the request's session (``link_upstream``) while the app runs, noting the task
that opened it: a task the app left running copies the context too, and its upstream
streams are not the request's (``Relay``). The link (``Relay``) is made by the first
upstream stream, so a stream with none holds ``None`` in one slot; the downstream report
is completed through it (its upstream streams, each finding's attribution and its end's,
the ``upstream_left_open`` leak) and may wait for the request to be over (``Relay``).

Why a base class and not a helper object: the middleware's per-request object *is* the
stream's session (``middleware._Exchange`` subclasses ``StreamSession``), so its per-frame
path reaches the monitor with no call layer in between, and an idle open stream costs one
object, not two (its budget is 2 KiB). The transports' sessions add only a weak reference
(a response dropped unclosed takes its session with it). The test collectors use an
*offline* session, one without a seam: no sinks, and no failure contained, because a
failure in a test's own checking is the test's to see.

What stays at each seam: the I/O, how a request's facts are read (a peeked ASGI body, an
httpx request's content), how a route is named (an ASGI scope, a URL), when the end
happened (an ASGI ``send``, the end of an iteration) and the monitor's construction (the
tests break monitors one step out, in the module that builds them).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, MutableSet, Sequence
from contextvars import ContextVar
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from streamguard import rules
from streamguard._faults import error_name, is_cancellation
from streamguard.attribution import MAX_LINKED_UPSTREAMS, findings_by_rule, linked
from streamguard.config import (
    UNKNOWN_ROUTE,
    CaptureConfig,
    RouteConfig,
    StreamGuardConfig,
    captures_configured,
)
from streamguard.liveness import LivenessLimits
from streamguard.monitor import FEED_WINDOW, Clock, StreamEnd, StreamMonitor
from streamguard.protocols import AUTO, CHECKERS, reader_of
from streamguard.protocols.auto import protocol_for_path
from streamguard.report import Finding, StreamReport, UpstreamSummary
from streamguard.request import RequestFacts
from streamguard.sinks import COMPRESSED, NOT_SAMPLED, ReportCallback, ReportSink, Sink, StreamSink
from streamguard.sweeper import Sweeper, Sweepers

if TYPE_CHECKING:
    from streamguard.captures import Captures, CaptureStore, StreamCapture
    from streamguard.metrics import StreamGuardMetrics

__all__ = [
    "DOWNSTREAM",
    "ENDS",
    "EVENT_STREAM",
    "LINKING",
    "InternalErrors",
    "MonitorSettings",
    "Relay",
    "ResponseHead",
    "Seam",
    "Side",
    "StreamSession",
    "classify_end",
    "configure",
    "current_task",
    "initial_labels",
    "link_upstream",
    "not_an_event_stream",
    "read_head",
]

#: The media type of an event stream.
EVENT_STREAM = "text/event-stream"


# -- is this an event stream ----------------------------------------------------------------


class ResponseHead(NamedTuple):
    """What watching needs of a response head: the status and three header values."""

    status: int
    content_type: str | None
    content_length: str | None
    content_encoding: str | None


def read_head(status: int, headers: Iterable[tuple[bytes, bytes]]) -> ResponseHead:
    """The status and the first Content-Type, Content-Length and Content-Encoding values
    (header names in any case, values decoded as Latin-1), from raw header pairs."""
    content_type = content_length = content_encoding = None
    for name, value in headers:
        name = name.lower()
        if name == b"content-type":
            if content_type is None:
                content_type = value.decode("latin-1")
        elif name == b"content-length":
            if content_length is None:
                content_length = value.decode("latin-1")
        elif name == b"content-encoding" and content_encoding is None:
            content_encoding = value.decode("latin-1")
    return ResponseHead(status, content_type, content_length, content_encoding)


def not_an_event_stream(status: int, content_type: str | None) -> str | None:
    """Why a response is not an event stream, ``"status"`` (not 2xx) or ``"content_type"``
    (a media type other than ``text/event-stream``, parameters ignored), or ``None``."""
    if not 200 <= status < 300:
        return "status"
    if content_type is None or content_type.partition(";")[0].strip().lower() != EVENT_STREAM:
        return "content_type"
    return None


# -- how a stream ended ---------------------------------------------------------------------


class Side(Enum):
    """Where a seam watches a stream from."""

    #: At the server, as the app sends (the middleware).
    SERVER = "server"
    #: At the client, as the caller reads (the transports, the test collectors).
    CLIENT = "client"


class _Stop(Enum):
    """How the watched side stopped before the body ended."""

    #: Without an exception: the app returned, or the caller closed the response.
    RETURNED = "returned"
    #: With one of the seam's read timeouts.
    TIMED_OUT = "timed_out"
    #: With any other ``Exception``.
    RAISED = "raised"
    #: asyncio's or trio's cancellation.
    CANCELLED = "cancelled"
    #: ``GeneratorExit``: the caller dropped the iteration.
    ABANDONED = "abandoned"
    #: ``KeyboardInterrupt``, ``SystemExit``, any other ``BaseException``.
    INTERRUPTED = "interrupted"


_E = StreamEnd
#: The end of a stream that stopped before its body ended, by the side it is watched from
#: and how it stopped: the one place an exception (or its absence) becomes a
#: ``StreamEnd``. A body that ended is ``BODY_ENDED`` from either side, and at the server a
#: client already gone makes any other end ``CLIENT_DISCONNECT`` (``classify_end``).
ENDS: dict[Side, dict[_Stop, StreamEnd]] = {
    Side.SERVER: {
        _Stop.RETURNED: _E.APP_RETURNED,      # the app left the body unfinished
        _Stop.TIMED_OUT: _E.APP_ERROR,        # (no timeout is the server's own)
        _Stop.RAISED: _E.APP_ERROR,
        _Stop.CANCELLED: _E.CANCELLED,        # shutdown, the app's own timeout
        _Stop.ABANDONED: _E.CANCELLED,
        _Stop.INTERRUPTED: _E.CANCELLED,
    },
    Side.CLIENT: {
        _Stop.RETURNED: _E.CLIENT_DISCONNECT,  # the caller closed the response first
        _Stop.TIMED_OUT: _E.READ_TIMEOUT,      # the caller stopped waiting
        _Stop.RAISED: _E.CONNECTION_LOST,      # a network or protocol error mid-body
        _Stop.CANCELLED: _E.CLIENT_DISCONNECT,  # the caller's task stopped reading
        _Stop.ABANDONED: _E.CLIENT_DISCONNECT,  # the caller dropped the iteration
        _Stop.INTERRUPTED: _E.CANCELLED,
    },
}  # fmt: skip


def classify_end(
    side: Side,
    error: BaseException | None = None,
    *,
    body_ended: bool = False,
    client_left: bool = False,
    timeouts: type[BaseException] | tuple[type[BaseException], ...] = (),
) -> StreamEnd:
    """How a stream ended: its body ended (at the server: and the end reached the client),
    or the client was seen leaving first (at the server), or else by ``ENDS``, from the
    exception that stopped it (``None``: it stopped without one)."""
    if body_ended:
        return StreamEnd.BODY_ENDED
    if client_left:
        return StreamEnd.CLIENT_DISCONNECT
    if error is None:
        stop = _Stop.RETURNED
    elif isinstance(error, Exception):
        stop = _Stop.TIMED_OUT if isinstance(error, timeouts) else _Stop.RAISED
    elif is_cancellation(error):
        stop = _Stop.CANCELLED
    elif isinstance(error, GeneratorExit):
        stop = _Stop.ABANDONED
    else:
        stop = _Stop.INTERRUPTED
    return ENDS[side][stop]


# -- what every stream of a seam shares -----------------------------------------------------


class InternalErrors:
    """The one place a failure inside streamguard is counted and told to the sinks."""

    __slots__ = ("_sinks", "count")

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self._sinks = sinks
        self.count = 0

    def __call__(self, where: str, exc: BaseException | str, route: str, protocol: str) -> None:
        """Count a failure ``where``: ``exc`` is the exception, or its ``error_name``."""
        self.count += 1
        error = exc if isinstance(exc, str) else error_name(exc)
        for sink in self._sinks:
            # Separately guarded: the failing sink may be any one, and the others must
            # still say so.
            with contextlib.suppress(Exception):
                sink.internal_error(where, error, route, protocol)


class MonitorSettings(TypedDict):
    """The ``StreamMonitor`` keywords that come from a seam's configuration."""

    clock: Clock
    max_event_bytes: int
    excerpt_chars: int
    liveness: LivenessLimits | None
    json_data: bool
    checking_budget_s: float


class Seam:
    """What every stream watched at one seam (a middleware, a transport) shares: the
    configuration, the sinks, the counters and the open streams. Per-stream state lives in
    a ``StreamSession``, never here."""

    def __init__(
        self,
        config: StreamGuardConfig,
        clock: Clock,
        metrics: StreamGuardMetrics | None,
        *,
        sinks: Sequence[Sink],
        on_report: ReportCallback | None,
        open_streams: MutableSet[StreamSession],
        log_side: str | None = None,
        captures: bool = False,
        capture_store: CaptureStore | None = None,
    ) -> None:
        from streamguard.logs import LogSink  # structlog loads with the first seam

        self.config = config
        self.clock = clock
        self.metrics = metrics
        #: The timing detectors' thresholds; ``None`` with the timers off.
        self.limits = config.timers.limits()
        #: Each configured route's own thresholds, by the route's identity (its
        #: configuration is frozen and held by ``config``), made once here, not per stream.
        timers = {id(spec): spec.timer_config(config.timers) for spec in config.routes.values()}
        self._route_limits = {key: route.limits() for key, route in timers.items()}
        #: The responses not watched (``head``, ``status``, ...) and the streams watched
        #: but not inspected (``content_encoding``), by reason.
        self.skipped: Counter[str] = Counter()
        #: The streams open, or ended and still handing their report to the sinks.
        self.open_streams = open_streams
        shortest_timer = min(
            min(each.body_end_grace_s, each.idle_limit_s)
            for each in (config.timers, *timers.values())
        )
        #: How often open streams are polled: often enough to report within a quarter of
        #: the shortest timer, never busier than 200 times a second.
        self.poll_interval = min(max(shortest_timer / 4, 0.005), 1.0)
        self.sweepers = Sweepers(self.poll_interval, open_streams)
        #: Where findings and reports go, in this order; ``on_report`` comes last.
        self.sinks: tuple[Sink, ...] = (
            *(() if metrics is None else (metrics,)),
            LogSink(config.logs, clock, side=log_side),
            *sinks,
            *(() if on_report is None else (ReportSink(on_report),)),
        )
        self.errors = InternalErrors(self.sinks)
        #: Captures of failed streams (``streamguard.captures``): a seam that records them
        #: (``captures``, the middleware), when any route may capture.
        self.captures: Captures | None = None
        if captures and captures_configured(config):
            from streamguard.captures import Captures

            base = config.capture if config.capture is not None else CaptureConfig()
            self.captures = Captures.configured(base, capture_store, clock, self._capture_counted)
        if metrics is not None and config.zero_series_at_start:
            metrics.initialise(initial_labels(config))

    def _capture_counted(self, result: str) -> None:
        """Tell the sinks that count captures (``capture_counted``: metrics, OTel) one
        ``result``; a sink that raises is skipped (this runs on the writer's thread)."""
        for sink in self.sinks:
            counted = getattr(sink, "capture_counted", None)
            if counted is not None:
                with contextlib.suppress(Exception):
                    counted(result)

    def watched_route(
        self,
        method: str | None,
        head: ResponseHead,
        path: str,
        route_for: Callable[[], tuple[str | None, RouteConfig | None]],
    ) -> tuple[str | None, RouteConfig | None] | None:
        """The route (label, configuration) of a response that is watched, else ``None``,
        counted in ``skipped`` by why: ``head``, ``status``, ``content_type``,
        ``excluded``, ``unlisted``. ``route_for`` is asked only of an event stream."""
        config = self.config
        reason = "head" if method == "HEAD" else not_an_event_stream(head.status, head.content_type)
        if reason is None:
            if config.is_excluded(path):
                reason = "excluded"
            else:
                label, spec = route_for()
                if spec is not None or config.watch_unlisted:
                    return label, spec
                reason = "unlisted"
        self.skipped[reason] += 1
        return None

    def monitor_settings(self, spec: RouteConfig | None) -> MonitorSettings:
        """The monitor keywords this seam's configuration sets for a stream of ``spec``."""
        config = self.config
        logs = config.logs
        return MonitorSettings(
            clock=self.clock,
            max_event_bytes=config.max_event_bytes,
            excerpt_chars=logs.excerpt_chars if logs.content_excerpts else 0,
            liveness=self.limits_for(spec),
            json_data=spec is not None and spec.json_data,
            checking_budget_s=config.checking_budget_ms / 1000,  # (0: none)
        )

    def capture_for(self, spec: RouteConfig | None) -> CaptureConfig | None:
        """How a stream of the route ``spec`` is captured; ``None``: it is not."""
        if self.captures is None:
            return None
        return self.config.capture if spec is None else spec.capture_config(self.config.capture)

    def limits_for(self, spec: RouteConfig | None) -> LivenessLimits | None:
        """The timing thresholds of a stream of ``spec``: its route's, else the global ones."""
        return self.limits if spec is None else self._route_limits.get(id(spec), self.limits)

    def sample_rate_for(self, spec: RouteConfig | None) -> float:
        """The ``sample_rate`` of a stream of ``spec``: its route's, else the global one."""
        if spec is None or spec.sample_rate is None:
            return self.config.sample_rate
        return spec.sample_rate

    def count_reader_faults(self, facts: RequestFacts | None, route: str, protocol: str) -> None:
        """Count each request fact reader that raised on a request (``facts``, as read): an
        internal error named by the reader's protocol; its facts are unknown, the request's
        other facts and its stream are checked as usual."""
        if facts is None:
            return
        for fact, error in facts.reader_faults:
            self.errors(f"request fact reader of {reader_of(fact)}", error, route, protocol)

    def end_open_streams(self, end: StreamEnd, note: str) -> None:
        """End every stream still open as ``end``, saying why on its report (``note``)."""
        for session in list(self.open_streams):
            session.end(end, note=note)


def configure(config: StreamGuardConfig | None, given: Mapping[str, Any]) -> StreamGuardConfig:
    """The configuration a seam's constructor was given (``given``: its ``locals()``):
    ``config``, or the ``StreamGuardConfig`` fields among its keywords (one left at ``None``
    keeps its default); never both."""
    options = {
        name: given[name] for name in StreamGuardConfig.model_fields if given[name] is not None
    }
    if config is None:
        return StreamGuardConfig(**options)
    if options:
        raise TypeError(f"pass either config= or keyword options, not both (got {sorted(options)})")
    return config


def initial_labels(config: StreamGuardConfig) -> list[tuple[str, str]]:
    """The (route, protocol) labels of the configured routes, as their streams will carry
    them: a route left to auto-detection whose path names a protocol is labelled with it."""
    labels = []
    for key, spec in config.routes.items():
        protocol = spec.protocol
        if protocol == AUTO:
            by_path = protocol_for_path(key)
            if by_path is not None and by_path in CHECKERS:
                protocol = by_path
        labels.append((spec.name or key, protocol))
    return labels


# -- one stream -----------------------------------------------------------------------------


class StreamSession:
    """One watched stream: its monitor, each sink's handle on it, and its end.

    ``seam`` is ``None`` for an offline session (the test collectors): it has no sinks and
    contains no failure, which propagates to the caller.
    """

    __slots__ = (
        "_failed",
        "_handles",
        "_seam",
        "app_task",
        "capture",
        "monitor",
        "protocol_label",
        "relay",
        "route",
        "sweeper",
    )

    def __init__(self, seam: Seam | None) -> None:
        self._seam = seam
        #: ``None`` until the stream starts (the middleware makes its session per request,
        #: before it knows whether the response is watched).
        self.monitor: StreamMonitor | None = None
        #: The ``route`` and ``protocol`` labels every series of the stream carries.
        self.route = UNKNOWN_ROUTE
        self.protocol_label = "unknown"
        #: Each sink's handle on this stream, in the order of ``seam.sinks`` (``None`` for
        #: a sink that took no interest, or whose start failed).
        self._handles: tuple[StreamSink | None, ...] = ()
        #: The poller of this stream's event loop while it is open (``None`` without one).
        self.sweeper: Sweeper | None = None
        #: The link between a gateway's downstream stream and the upstream streams it read
        #: for the same request (``Relay``): made by the first upstream stream that links,
        #: so a stream with none holds ``None`` and nothing more.
        self.relay: Relay | None = None
        #: A downstream stream's side only: the task running the request's app, while it
        #: runs (``None`` before it starts, after it returns, and with no transport in the
        #: process). Only the request's own upstream streams link to it (``link_upstream``).
        self.app_task: object | None = None
        #: The stream's body and arrival times while it is open, on a route that captures
        #: (``streamguard.captures``); ``None`` otherwise, and once the stream was judged.
        self.capture: StreamCapture | None = None
        self._failed = False

    def start(
        self,
        monitor: StreamMonitor,
        route: str,
        protocol: str,
        head: ResponseHead,
        *,
        spec: RouteConfig | None = None,
        poll: bool = True,
        request_headers: Iterable[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """Open the stream: check its head, tell the sinks; from here on its end is reported.

        ``protocol`` is the one configured; a stream left to auto-detection that is still
        undecided is labelled ``auto`` for its whole life, so that every series of one
        stream carries the same labels. ``spec``: its route's configuration, if listed.
        ``poll``: whether the loop's sweeper may poll it. ``request_headers``: the request's,
        from which, with ``exemplars`` on, the metrics sink reads the stream's trace (in its
        own start, so a failure there is the sink's, contained as any).
        """
        seam = self._seam
        assert seam is not None, "an offline session has no sinks to start"
        self.route = route
        undecided = protocol == AUTO and monitor.protocol_source == "default"
        self.protocol_label = AUTO if undecided else monitor.protocol
        self.monitor = monitor
        seam.open_streams.add(self)
        if poll and seam.limits_for(spec) is not None:
            sweeper = self.sweeper = seam.sweepers.current()
            if sweeper is not None:
                if DOWNSTREAM.get() is None:
                    sweeper.add(self)
                else:
                    # The sweeper's task, started here, copies this context: without the
                    # request in it, it does not hold this request's objects for its life.
                    token = DOWNSTREAM.set(None)
                    try:
                        sweeper.add(self)
                    finally:
                        DOWNSTREAM.reset(token)
        unchecked = None
        found: Sequence[Finding] = ()
        failure = None
        try:
            found = monitor.check_head(
                head.content_type or "", head.content_length, head.content_encoding
            )
        except Exception as exc:
            failure = exc  # reported once the sinks know of the stream
        else:
            if not monitor.inspecting:
                seam.skipped["content_encoding"] += 1
                unchecked = COMPRESSED
            elif (rate := seam.sample_rate_for(spec)) < 1.0 and random.random() >= rate:
                monitor.check_framing_only()
                monitor.add_note(
                    "not sampled: only the framing, the terminal and the outcome were checked"
                )
                unchecked = NOT_SAMPLED
        route, label = self.route, self.protocol_label
        metrics = seam.metrics
        if metrics is None or request_headers is None or not seam.config.exemplars:
            self._handles = self._tell(
                seam.sinks, lambda sink: sink.stream_started(route, label, unchecked)
            )
        else:
            headers = request_headers
            self._handles = self._tell(
                seam.sinks,
                lambda sink: (
                    metrics.stream_started(route, label, unchecked, headers)
                    if sink is metrics
                    else sink.stream_started(route, label, unchecked)
                ),
            )
        if failure is not None:
            self.fail("decide", failure)
        elif found:
            self.emit(found)
        self._count_faults()

    def feed(self, chunk: bytes) -> None:
        """Check one body chunk (the middleware inlines this on its per-frame path)."""
        monitor = self.monitor
        if monitor is None or monitor.report is not None or monitor.internal_error is not None:
            return
        try:
            data = chunk if type(chunk) is bytes else bytes(chunk)  # a memoryview, bytearray
            # Only a chunk of several windows has its findings emitted as they are made
            # (no bound method per chunk).
            found = (
                monitor.feed(data) if len(data) <= FEED_WINDOW else monitor.feed(data, self.emit)
            )
            if found:
                self.emit(found)
        except BaseException as exc:  # (a plugin's checker may raise anything)
            if is_cancellation(exc):
                raise
            self.fail("check", exc)

    def emit(self, found: Sequence[Finding]) -> None:
        """Hand new findings to the sinks.

        A sink that fails stops the checking of this stream (so no more findings come) but
        still gets the stream's end, so that its own bookkeeping (an open-streams gauge)
        balances.
        """
        if self._handles:
            self._tell(self._handles, lambda handle: handle.findings(found))

    def poll(self) -> None:
        """Called by the sweeper: run the timing detectors and emit what they find."""
        monitor = self.monitor
        if monitor is None:
            return
        try:
            found = monitor.poll()
        except BaseException as exc:  # (a plugin's checker may raise anything)
            if is_cancellation(exc):
                raise
            self.fail("poll", exc)
            return
        if found:
            self.emit(found)

    def end(
        self,
        end: StreamEnd,
        cause: BaseException | None = None,
        *,
        note: str | None = None,
        server_stopping: bool = False,
    ) -> StreamReport | None:
        """End the stream once (later calls, and calls before it started, do nothing and
        return ``None``) and hand its report to the sinks; return it.

        ``cause`` is the exception that ended a client's read; ``note`` says on the report
        why it ended now; ``server_stopping`` as ``StreamMonitor.finish``. A gateway's
        downstream report may be held for its upstream streams (``Relay``): ``None`` is
        returned then, and a later ``end`` delivers it as it is (at server shutdown).
        """
        monitor = self.monitor
        if monitor is None:
            return None
        relay = self.relay
        if monitor.report is not None:
            if relay is not None and relay.downstream is self:
                relay.release(note)  # its report, held for its upstreams, goes now
            return None
        if note is not None:
            monitor.add_note(note)
        if self.sweeper is not None:
            self.sweeper.discard(self)
            self.sweeper = None
        try:
            report = monitor.finish(
                end, cause=cause, emit=self.emit, server_stopping=server_stopping
            )
        except BaseException as exc:  # (a plugin's checker may raise anything)
            if is_cancellation(exc):
                raise
            self.fail("finish", exc)
            report = monitor.fallback_report(end)
        self._count_faults()
        if relay is None:
            self.deliver(report)
            return report
        if relay.downstream is self:
            return relay.downstream_ended(report)
        self.deliver(relay.upstream_ended(self, report))
        relay.upstream_settled()
        return monitor.report

    def deliver(self, report: StreamReport) -> None:
        """Hand the ended stream's final ``report`` to the sinks (once)."""
        monitor = self.monitor
        capture, self.capture = self.capture, None  # the bytes go with the stream
        seam = self._seam
        if capture is not None and seam is not None and seam.captures is not None:
            try:
                report = seam.captures.finish(report, capture)
            except Exception as exc:  # its failure is counted, the report delivered as is
                self.fail("capture", exc)
        if monitor is not None:
            monitor.report = report  # what a relay added to it
        try:
            if self._handles:
                self._tell(self._handles, lambda handle: handle.stream_ended(report))
        finally:
            # Counted open until its report is handed over, so that ``in_flight == 0``
            # means every report has reached the sinks.
            if self._seam is not None:
                self._seam.open_streams.discard(self)

    def fail(self, where: str, error: BaseException) -> None:
        """streamguard failed on this stream (in ``where``): stop checking it; its first
        failure is counted, once. An offline session re-raises ``error``."""
        seam = self._seam
        if seam is None:
            raise error
        if self.monitor is not None:
            self.monitor.fail(error)
        if not self._failed:
            self._failed = True
            seam.errors(where, error, self.route, self.protocol_label)

    def _count_faults(self) -> None:
        """Count what the monitor contained without giving up the stream (a plugin's
        detection signal that raised, ``StreamMonitor.take_faults``): each an internal
        error, named by the hook and its protocol; the stream is still checked."""
        monitor, seam = self.monitor, self._seam
        if monitor is None or seam is None:
            return
        for where, error in monitor.take_faults():
            seam.errors(where, error, self.route, self.protocol_label)

    def _tell(
        self, sinks: Sequence[Any], call: Callable[[Any], Any]
    ) -> tuple[StreamSink | None, ...]:
        """The fail-open fan-out: ``call`` each sink (or sink handle; ``None`` is skipped)
        and return what each returned, ``None`` for one that raised. A sink that raises is
        this stream's internal error, named by the sink; cancellation propagates."""
        assert self._seam is not None
        named = self._seam.sinks
        answers: list[StreamSink | None] = []
        for index, sink in enumerate(sinks):
            answer = None
            if sink is not None:
                try:
                    answer = call(sink)
                except BaseException as exc:
                    if is_cancellation(exc):
                        raise
                    self.fail(named[index].name, exc)
            answers.append(answer)
        return tuple(answers)


# -- a gateway's two sides --------------------------------------------------------------------

#: The downstream session of the request being served in this context: set by the middleware
#: around the app, so the app's code (and the tasks it starts) sees it where it calls its
#: HTTP client; a transport links the upstream streams it watches to it (``link_upstream``).
#: A context variable: concurrent requests each see their own, never another's.
DOWNSTREAM: ContextVar[StreamSession | None] = ContextVar("streamguard_downstream", default=None)


class _Linking:
    """Whether the middleware sets ``DOWNSTREAM``: once a transport was built in this
    process (a transport built while a request is being served links from the next one)."""

    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = False


LINKING = _Linking()


def current_task() -> object | None:
    """The task running the caller: asyncio's, or trio's (looked up only once trio is
    imported); ``None`` on a worker thread or outside any event loop."""
    try:
        return asyncio.current_task()
    except RuntimeError:  # no asyncio loop running in this thread
        pass
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            task: object = trio.lowlevel.current_task()
        except RuntimeError:  # not in trio either
            return None
        return task
    return None


def _task_finished(task: object) -> bool:
    """Whether ``task`` (asyncio's, or trio's) has finished."""
    if isinstance(task, asyncio.Future):
        return task.done()
    # A trio task runs its coroutine to the end, which then drops its frame.
    coro = getattr(task, "coro", None)
    return coro is not None and getattr(coro, "cr_frame", None) is None


def link_upstream(upstream: StreamSession) -> None:
    """Link a started upstream stream to the downstream stream of the request being served
    in this context, if any (``DOWNSTREAM``), while that request's app runs and its report
    is not made yet; the task opening the stream is noted, to tell a task the app awaited
    from one it left running (``Relay``)."""
    downstream = DOWNSTREAM.get()
    if downstream is None or downstream is upstream or downstream.app_task is None:
        # No request, or one whose app has returned: a task it left running (a poller)
        # still sees it in the context it copied, and is not its.
        return
    relay = downstream.relay
    if relay is None:
        monitor = downstream.monitor
        if monitor is not None and monitor.report is not None:
            return  # its report is made: too late to name this stream
        relay = downstream.relay = Relay(downstream)
    relay.add(upstream, current_task())


class Relay:
    """A downstream stream and the upstream streams read for the same request.

    Theory of operation: the middleware's session for a request (``DOWNSTREAM``) gets a
    relay when the first upstream stream links to it (``link_upstream``); each linked
    upstream session points to the same relay. When the downstream stream ends, its report
    is completed here: the upstream streams it names (``UpstreamSummary``: their findings
    so far, and their end if they ended first), each finding's attribution
    (``streamguard.attribution.attribute``), the attribution of its end when that is a
    failure an upstream can cause (``attribute_outcome``) and, when the request is over
    and an upstream stream is still open, the ``upstream_left_open`` finding.

    When is the request over? An upstream stream may be closed after the downstream body
    ended and before the app returns (``BackgroundTask(response.aclose)``, the pattern the
    httpx docs give for relays): that is no leak. So a downstream report is held while an
    upstream stream is still open, until the last one ends (no leak) or the app returns
    (``app_returned``: the ones still open leaked), or the server stops (``release``). The
    stream counts as open (``in_flight``) until then.

    Whose upstream stream is it? A task the app starts copies the request's context, so a
    background task (a poller started with ``asyncio.create_task``) links its upstream
    streams here as the app's own fan-out (``asyncio.gather``, a task group) does. What
    tells them apart is whether the app waited for the task: one it awaited has finished
    by the time the app returns; one still running then was left running, and its
    upstream streams are not the request's: not named, not compared, never a leak. So each
    upstream stream is linked with the task that opened it (its *opener*), and an upstream
    stream is the request's when its opener is the app's task, the task that ended the
    downstream body, a worker thread (``None``: a sync client in the threadpool), or a task
    that has finished. The report is held while an opener is still running (it may yet be
    one the app awaits), until it is decided or the app returns.

    Upstream streams past ``MAX_LINKED_UPSTREAMS`` are counted, not linked.
    """

    __slots__ = (
        "_app_returned",
        "_completed",
        "_linked",
        "_lock",
        "_pending",
        "downstream",
        "dropped",
    )

    def __init__(self, downstream: StreamSession) -> None:
        self.downstream = downstream
        #: Each linked upstream stream with the task that opened it (``None``: a worker
        #: thread). One list of pairs, appended in one step: a sync client links from a
        #: worker thread while the loop may be reading it.
        self._linked: list[tuple[StreamSession, object | None]] = []
        #: Upstream streams of the request past ``MAX_LINKED_UPSTREAMS``.
        self.dropped = 0
        #: The downstream report, held until the request is over.
        self._pending: StreamReport | None = None
        self._app_returned = False
        #: The downstream report was completed: later upstream streams are not linked, and
        #: the ones still open were left running.
        self._completed = False
        #: A sync client's upstream stream ends on a worker thread: the held report is
        #: taken under this lock, so it is delivered once.
        self._lock = threading.Lock()

    def add(self, upstream: StreamSession, opener: object | None = None) -> None:
        if self._completed:
            return
        if len(self._linked) >= MAX_LINKED_UPSTREAMS:
            self.dropped += 1
            return
        upstream.relay = self
        self._linked.append((upstream, opener))

    def _is_the_requests(self, opener: object | None, deciding: object | None) -> bool:
        """Whether an upstream stream opened by ``opener`` is the request's, as far as can
        be told now; ``deciding``: the task now ending the downstream stream or the app."""
        return (
            opener is None
            or opener is self.downstream.app_task
            or opener is deciding
            or _task_finished(opener)
        )

    def _undecided(self, deciding: object | None) -> bool:
        """Whether the request's upstream streams may still change: one is still open, or
        was opened by a task still running that the app may yet be waiting for."""
        return any(
            _still_open(upstream) or not self._is_the_requests(opener, deciding)
            for upstream, opener in list(self._linked)
        )

    # -- the downstream side ---------------------------------------------------------------

    def downstream_ended(self, report: StreamReport) -> StreamReport | None:
        """The downstream stream ended with ``report``: complete and deliver it now if the
        request is over or its upstream streams are decided, else hold it; return it if
        delivered."""
        deciding = current_task()
        if self._app_returned or not self._undecided(deciding):
            return self._deliver(report, deciding)
        self._pending = report
        return None

    def app_returned(self) -> None:
        """The app returned (or raised), in its own task: the request is over; a held
        report goes now."""
        self._app_returned = True
        self.release(None, current_task())

    def release(self, note: str | None, deciding: object | None = None) -> None:
        """Deliver the held downstream report, if any (``note``: why now)."""
        with self._lock:
            report = self._pending
            self._pending = None
        if report is None:
            return
        if note is not None:
            report = dataclasses.replace(report, notes=(*report.notes, note))
        self._deliver(report, deciding)

    def _deliver(self, report: StreamReport, deciding: object | None) -> StreamReport:
        try:
            report = self._complete(report, deciding)
        except Exception as exc:  # the report goes as it is; nothing reaches the app
            self._completed = True
            self.downstream.fail("attribute", exc)
        self.downstream.deliver(report)
        return report

    def _complete(self, report: StreamReport, deciding: object | None) -> StreamReport:
        """``report`` with its upstream streams, its findings' and its end's attribution
        (``linked``) and the leak."""
        self._completed = True
        # The upstream streams opened by tasks the app left running are not the request's:
        # unlinked, so that their end is not ``abandoned`` and holds nothing here.
        opened, self._linked = self._linked, []  # (no task is held past the report)
        upstreams = []
        for upstream, opener in opened:
            if self._is_the_requests(opener, deciding):
                upstreams.append(upstream)
            else:
                upstream.relay = None
        if not upstreams and not self.dropped:
            return report  # none was the request's: a stream with no upstream
        findings = report.findings
        left_open = [u for u in upstreams if _still_open(u)] if self._app_returned else []
        if left_open:
            leak = rules.UPSTREAM_LEFT_OPEN.finding(
                f"{len(left_open)} upstream stream(s) still open when the request ended",
                event_index=report.events,
                byte_offset=report.bytes,
            )
            self.downstream.emit((leak,))
            findings = (*findings, leak)
        summaries = []
        for upstream in upstreams:
            monitor = upstream.monitor
            assert monitor is not None  # linked once started
            ended = monitor.report
            summaries.append(
                UpstreamSummary(
                    protocol=monitor.protocol if ended is None else ended.protocol,
                    route=upstream.route,
                    outcome=None if ended is None else ended.outcome,
                    findings=findings_by_rule(
                        monitor.findings if ended is None else ended.findings
                    ),
                    inspected=monitor.inspecting if ended is None else ended.inspected,
                    started_at=monitor.started_at,
                    ended_at=None if ended is None else ended.ended_at,
                )
            )
        whole = dataclasses.replace(report, findings=findings, upstreams_dropped=self.dropped)
        return linked(whole, summaries)

    # -- the upstream side -----------------------------------------------------------------

    def upstream_ended(self, upstream: StreamSession, report: StreamReport) -> StreamReport:
        """An upstream stream ended with ``report``: abandoned if the downstream stream it
        fed ended first."""
        if self._completed:
            return dataclasses.replace(report, abandoned=True)
        return report

    def upstream_settled(self) -> None:
        """An upstream stream's report was delivered: a held downstream report goes once the
        request's upstream streams are decided (none open, no opener left to wait for)."""
        if self._pending is not None and not self._undecided(None):
            self.release(None)


def _still_open(upstream: StreamSession) -> bool:
    """Whether an upstream stream has not ended (its report not made)."""
    return upstream.monitor is not None and upstream.monitor.report is None
