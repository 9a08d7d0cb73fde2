"""``StreamGuardMiddleware``: a pure ASGI middleware that watches SSE responses.

Every message passes through unchanged and in order. At ``http.response.start`` the
middleware decides whether the response is a stream worth watching (2xx,
``text/event-stream``, not HEAD, not excluded, not compressed); if it is, each body message
is fed to a ``StreamMonitor`` synchronously, *before* it is forwarded, so the monitor sees
the bytes in exactly the order ``send`` was called even when several tasks send
(sse-starlette's ping task does). ``receive`` is wrapped only to notice ``http.disconnect``
go by and to keep a bounded copy of the request body the app reads, for request-aware
checks; it consumes nothing the app does not ask for.

Findings go to the sinks (metrics, logs) as soon as they are made; the report goes to the
sinks and to ``on_report`` when the stream ends.

Nothing streamguard does may reach the app or the client: checking and sink code runs
inside ``except Exception`` guards, a failure stops the watching of that one stream and is
counted, and every exception of the app (or the server) propagates as the same object.
"""

from __future__ import annotations

import asyncio
import random
import time
import weakref
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import structlog
from pydantic_core import from_json
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from streamguard.config import UNKNOWN_ROUTE, RouteConfig, StreamGuardConfig
from streamguard.liveness import LivenessLimits
from streamguard.logs import StreamLog, ViolationLimiter
from streamguard.metrics import StreamGuardMetrics, StreamMetrics
from streamguard.monitor import Clock, StreamEnd, StreamMonitor
from streamguard.protocols import AUTO
from streamguard.report import Finding, Outcome, StreamReport

__all__ = ["ReportCallback", "StreamGuardMiddleware"]

ReportCallback = Callable[[StreamReport], None]

_logger = structlog.get_logger("streamguard")


class StreamGuardMiddleware:
    """Watch the SSE responses of ``app`` and report on each stream.

    Configure with ``config=StreamGuardConfig(...)`` or the same fields as keywords.
    ``on_report`` is called once per watched stream with its ``StreamReport``, from the
    task that sent the stream's last message. ``skipped`` counts, by reason, the HTTP
    responses that were not watched; ``in_flight`` is the number of watched streams open.
    """

    def __init__(
        self,
        app: ASGIApp,
        config: StreamGuardConfig | None = None,
        *,
        on_report: ReportCallback | None = None,
        clock: Clock = time.monotonic,
        **options: Any,
    ) -> None:
        if config is None:
            config = StreamGuardConfig(**options)
        elif options:
            raise TypeError(
                f"pass either config= or keyword options, not both (got {sorted(options)})"
            )
        self.app = app
        self.config = config
        self.on_report = on_report
        self.clock = clock
        self.metrics = _resolve_metrics(config.metrics)
        self.skipped: Counter[str] = Counter()
        self.in_flight = 0
        self.internal_errors = 0
        self._limiter = ViolationLimiter(config.logs.violations_per_minute, clock)
        timers = config.timers
        self.liveness = (
            LivenessLimits(**timers.model_dump(exclude={"enabled"})) if timers.enabled else None
        )
        #: How often open streams are polled: often enough to report within a quarter of
        #: the shortest timer, never busier than 200 times a second.
        self.poll_interval = min(
            max(min(timers.body_end_grace_s, timers.idle_limit_s) / 4, 0.005), 1.0
        )
        self._sweepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Sweeper] = (
            weakref.WeakKeyDictionary()
        )
        if self.metrics is not None:
            self.metrics.initialise(
                (spec.name or key, spec.protocol) for key, spec in config.routes.items()
            )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("method") == "HEAD":
            self.skipped["head"] += 1
            await self.app(scope, receive, send)
            return
        watch = _StreamWatch(self, scope, receive, send)
        try:
            await self.app(scope, watch.receive, watch.send)
        except BaseException as exc:
            watch.app_raised(exc)
            raise
        watch.app_returned()

    def route_for(self, scope: Scope) -> tuple[str | None, RouteConfig | None]:
        """The route label and configuration of a request; never raises, never a raw path.

        A configured route matches by exact path first, then by the route template that
        Starlette/FastAPI routing left in ``scope["route"]``. The label of an unconfigured
        route is its template, or ``None`` when there is none.
        """
        routes = self.config.routes
        path = scope.get("path", "")
        spec = routes.get(path)
        if spec is not None:
            return spec.name or path, spec
        template = _route_template(scope)
        if template is not None:
            spec = routes.get(template)
            if spec is not None:
                return spec.name or template, spec
        return template, None

    def _sweeper(self) -> _Sweeper | None:
        """The poller of the running event loop; ``None`` outside asyncio (under trio the
        timing detectors then judge only at the end of each stream)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        sweeper = self._sweepers.get(loop)
        if sweeper is None:
            sweeper = self._sweepers[loop] = _Sweeper(self.poll_interval)
        return sweeper

    def _count_internal_error(
        self, where: str, exc: BaseException, route: str, protocol: str
    ) -> None:
        """The one place a failure inside streamguard is counted, metered and logged."""
        self.internal_errors += 1
        try:
            if self.metrics is not None:
                self.metrics.internal_errors.labels(route, protocol).inc()
            _logger.error(
                "streamguard_internal_error",
                where=where,
                error=f"{type(exc).__name__}: {exc}",
                route=route,
                protocol=protocol,
            )
        except Exception:  # the sinks themselves are what failed: counted above
            pass


class _StreamWatch:
    """The per-request state: the wrapped ``receive`` and ``send``, monitor and sinks."""

    __slots__ = (
        "_emitted",
        "_guard",
        "_log",
        "_metrics",
        "_receive",
        "_request_body",
        "_request_complete",
        "_request_size",
        "_scope",
        "_send",
        "_sweeper",
        "decided",
        "disconnected",
        "monitor",
        "protocol_label",
        "route",
        "started_at",
    )

    def __init__(
        self, guard: StreamGuardMiddleware, scope: Scope, receive: Receive, send: Send
    ) -> None:
        self._guard = guard
        self._scope = scope
        self._receive = receive
        self._send = send
        self.started_at = guard.clock()
        self.monitor: StreamMonitor | None = None
        self.route = UNKNOWN_ROUTE
        self.protocol_label = "unknown"
        self.decided = False
        self.disconnected = False
        self._metrics: StreamMetrics | None = None
        self._log: StreamLog | None = None
        self._emitted = 0
        self._sweeper: _Sweeper | None = None
        self._request_body: list[bytes] | None = [] if guard.config.request_peek_bytes else None
        self._request_size = 0
        self._request_complete = False

    async def receive(self) -> Message:
        message = await self._receive()
        kind = message["type"]
        if kind == "http.request":
            if self._request_body is not None:
                self._keep_request_body(message)
        elif kind == "http.disconnect":
            self.disconnected = True
        return message

    async def send(self, message: Message) -> None:
        body_ended = False
        monitor = self.monitor
        if monitor is not None:
            if message["type"] == "http.response.body":
                body_ended = not message.get("more_body", False)
                if monitor.internal_error is None:
                    try:
                        if monitor.feed(message.get("body", b"")):
                            self._emit_findings()
                    except Exception as exc:
                        self._internal_error("check", exc)
            elif message["type"] == "http.response.pathsend":
                body_ended = True
                monitor.stop_inspecting()
        elif not self.decided and message["type"] == "http.response.start":
            self.decided = True
            try:
                self._decide(message)
            except Exception as exc:
                self.monitor = None
                self._guard._count_internal_error("decide", exc, self.route, self.protocol_label)
        try:
            await self._send(message)
        except OSError:
            # ASGI spec 2.4: the server raises OSError from send once the client has gone.
            self.disconnected = True
            raise
        except BaseException:
            # Cancelled while handing over the last body message (hypercorn's trio worker
            # reports the finished response as a disconnect, and Starlette then cancels the
            # sender): the app did end its body, which is what the outcome records.
            if body_ended:
                self._finish(StreamEnd.BODY_ENDED)
            raise
        if body_ended:
            self._finish(StreamEnd.BODY_ENDED)

    def app_returned(self) -> None:
        self._finish(StreamEnd.CLIENT_DISCONNECT if self.disconnected else StreamEnd.APP_RETURNED)

    def app_raised(self, exc: BaseException) -> None:
        if self.disconnected:
            end = StreamEnd.CLIENT_DISCONNECT
        elif isinstance(exc, Exception):
            end = StreamEnd.APP_ERROR
        else:  # asyncio.CancelledError, trio.Cancelled, KeyboardInterrupt, SystemExit
            end = StreamEnd.CANCELLED
        self._finish(end)

    # -- deciding -----------------------------------------------------------------------

    def _decide(self, message: Message) -> None:
        guard = self._guard
        config = guard.config
        status = message["status"]
        if not 200 <= status < 300:
            guard.skipped["status"] += 1
            return
        content_type = content_encoding = content_length = None
        for name, value in message.get("headers", ()):
            name = name.lower()
            if name == b"content-type":
                content_type = value
            elif name == b"content-encoding":
                content_encoding = value
            elif name == b"content-length":
                content_length = value
        if content_type is None:
            guard.skipped["content_type"] += 1
            return
        if content_type.partition(b";")[0].strip().lower() != b"text/event-stream":
            guard.skipped["content_type"] += 1
            return
        path = self._scope.get("path", "")
        if config.is_excluded(path):
            guard.skipped["excluded"] += 1
            return
        label, spec = guard.route_for(self._scope)
        if spec is None and not config.watch_unlisted:
            guard.skipped["unlisted"] += 1
            return
        self.route = label or UNKNOWN_ROUTE
        protocol = spec.protocol if spec is not None else config.protocol

        request, note = self._parsed_request()
        monitor = StreamMonitor(
            protocol,
            request=request,
            path=path,
            route=self.route,
            clock=guard.clock,
            started_at=self.started_at,
            max_event_bytes=config.max_event_bytes,
            excerpt_chars=config.logs.excerpt_chars if config.logs.content_excerpts else 0,
            liveness=guard.liveness,
        )
        if note is not None:
            monitor.notes.append(note)
        self.monitor = monitor
        guard.in_flight += 1
        if guard.liveness is not None:
            self._sweeper = guard._sweeper()
            if self._sweeper is not None:
                self._sweeper.add(self)
        # A protocol still to be detected from events is labelled "auto" for the whole
        # stream, so that every series of one stream carries the same labels.
        undecided = protocol == AUTO and monitor.protocol_source == "default"
        self.protocol_label = "auto" if undecided else monitor.protocol
        self._start_sinks()

        monitor.check_head(
            content_type.decode("latin-1"),
            None if content_length is None else content_length.decode("latin-1"),
            None if content_encoding is None else content_encoding.decode("latin-1"),
        )
        if not monitor.inspecting:
            guard.skipped["content_encoding"] += 1
        elif config.sample_rate < 1.0 and random.random() >= config.sample_rate:
            monitor.stop_inspecting()
            monitor.notes.append("not sampled: only the outcome was recorded")
        self._emit_findings()

    def _keep_request_body(self, message: Message) -> None:
        chunk = message.get("body", b"")
        self._request_size += len(chunk)
        if self._request_size > self._guard.config.request_peek_bytes:
            self._request_body = None  # too large: request-aware checks are skipped
            return
        assert self._request_body is not None
        if chunk:
            self._request_body.append(chunk)
        if not message.get("more_body", False):
            self._request_complete = True

    def _parsed_request(self) -> tuple[Mapping[str, Any] | None, str | None]:
        """The JSON request body the app read, or ``None`` and why it is not available."""
        limit = self._guard.config.request_peek_bytes
        if not limit:
            return None, None
        if self._request_body is None:
            return None, f"request body over request_peek_bytes={limit}: request checks skipped"
        if not self._request_size:
            return None, None
        if not self._request_complete:
            return None, "request body not fully read before the response: request checks skipped"
        try:
            request = from_json(b"".join(self._request_body))
        except ValueError:
            return None, "request body is not JSON: request checks skipped"
        if not isinstance(request, dict):
            return None, "request body is not a JSON object: request checks skipped"
        return request, None

    # -- sinks --------------------------------------------------------------------------

    def _start_sinks(self) -> None:
        guard = self._guard
        label = self.protocol_label
        try:
            if guard.metrics is not None:
                self._metrics = guard.metrics.for_stream(self.route, label)
                self._metrics.stream_started()
            if guard.config.logs.enabled:
                self._log = StreamLog(guard.config.logs, guard._limiter, self.route, label)
        except Exception as exc:
            self._internal_error("sinks", exc)

    def _emit_findings(self) -> None:
        assert self.monitor is not None
        new = self.monitor.findings_since(self._emitted)
        if not new:
            return
        self._emitted += len(new)
        try:
            for finding in new:
                if self._metrics is not None:
                    self._metrics.violation(finding)
                if self._log is not None:
                    self._log.violation(finding)
        except Exception as exc:
            self._internal_error("sinks", exc)

    def poll(self) -> None:
        """Called by the sweeper: run the timing detectors and emit what they find."""
        monitor = self.monitor
        if monitor is None:
            return
        try:
            if monitor.poll():
                self._emit_findings()
        except Exception as exc:
            self._internal_error("poll", exc)

    def _internal_error(self, where: str, exc: Exception) -> None:
        """Stop watching this stream; the failure is counted when the stream ends."""
        if self.monitor is not None:
            self.monitor.fail(exc)
        self._guard._count_internal_error(where, exc, self.route, self.protocol_label)

    def _finish(self, end: StreamEnd) -> None:
        monitor = self.monitor
        if monitor is None or monitor.report is not None:
            return
        guard = self._guard
        guard.in_flight -= 1
        if self._sweeper is not None:
            self._sweeper.discard(self)
            self._sweeper = None
        try:
            report = monitor.finish(end)
        except Exception as exc:
            self._internal_error("finish", exc)
            report = monitor.report = _fallback_report(monitor, end)
        if report.internal_error is None:
            self._emit_findings()
            if monitor.internal_error is not None:  # a sink failed on the last findings
                report = monitor.report = replace(
                    report, internal_error=monitor.internal_error, inspected=False
                )
        try:
            if self._metrics is not None:
                self._metrics.stream_ended(report)
            if self._log is not None:
                self._log.ended(report)
        except Exception as exc:
            guard._count_internal_error("sinks", exc, self.route, self.protocol_label)
        if guard.on_report is not None:
            try:
                guard.on_report(report)
            except Exception as exc:
                guard._count_internal_error("on_report", exc, self.route, self.protocol_label)


class _Sweeper:
    """Polls every open stream of one event loop from a single task.

    One task for thousands of streams: per-stream timer handles would have to be
    rescheduled on every frame. The task starts with the first open stream and is
    cancelled when the last one ends, so nothing outlives the streams it watches.
    """

    __slots__ = ("_interval", "_task", "watches")

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        self.watches: set[_StreamWatch] = set()

    @property
    def running(self) -> bool:
        return self._task is not None

    def add(self, watch: _StreamWatch) -> None:
        self.watches.add(watch)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="streamguard-sweeper"
            )

    def discard(self, watch: _StreamWatch) -> None:
        self.watches.discard(watch)
        if not self.watches and self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            for watch in list(self.watches):
                watch.poll()


def _resolve_metrics(metrics: Any) -> StreamGuardMetrics | None:
    if metrics is False:
        return None
    if metrics is None:
        return StreamGuardMetrics.default()
    if isinstance(metrics, StreamGuardMetrics):
        return metrics
    return StreamGuardMetrics.default(metrics)  # a CollectorRegistry


def _route_template(scope: Scope) -> str | None:
    """The matched route's template, as routing left it in the scope; never raises."""
    try:
        route = scope.get("route")
        if route is None:
            return None
        template = getattr(route, "path_format", None) or getattr(route, "path", None)
        return template if isinstance(template, str) and template else None
    except Exception:
        return None


def _fallback_report(monitor: StreamMonitor, end: StreamEnd) -> StreamReport:
    """A report built without the checkers, for when building the real one failed."""
    outcome = {
        StreamEnd.BODY_ENDED: Outcome.COMPLETED,
        StreamEnd.APP_RETURNED: Outcome.UNCLOSED,
    }.get(end) or Outcome(end.value)
    findings: tuple[Finding, ...] = monitor.findings
    return StreamReport(
        protocol=monitor.protocol,
        outcome=outcome,
        findings=findings,
        events=0,
        bytes=0,
        body_messages=monitor.body_messages,
        started_at=monitor.started_at,
        first_byte_at=monitor.first_byte_at,
        first_event_at=monitor.first_event_at,
        ended_at=monitor.started_at,
        inspected=False,
        internal_error=monitor.internal_error,
        path=monitor.path,
        route=monitor.route,
    )
