"""``StreamGuardMiddleware``: a pure ASGI middleware that watches SSE responses.

Every message passes through unchanged and in order. At ``http.response.start`` the
middleware decides whether the response is a stream worth watching (2xx,
``text/event-stream``, not HEAD, not excluded); if it is, each body message is fed to a
``StreamMonitor`` synchronously, *before* it is forwarded, so the monitor sees the bytes in
exactly the order ``send`` was called even when several tasks send (sse-starlette's ping
task does). ``receive`` is wrapped only to notice ``http.disconnect`` go by and to reduce
the request body the app reads to the few facts request-aware checks use, as it arrives;
it consumes nothing the app does not ask for, and holds no copy of a body once it is read.

A compressed stream (a ``Content-Encoding`` other than ``identity``) is watched too, but not
inspected: its bytes cannot be parsed, so it is counted, timed and reported once as
``compressed_stream``, and no framing or protocol rule runs on it.

Findings go to the sinks (``streamguard.sinks``: metrics, logs, any given in ``sinks=``) as
soon as they are made; the report goes to the sinks and then to ``on_report`` when the
stream ends.

Nothing streamguard does may reach the app or the client: checking and sink code runs
inside guards, a failure stops the watching of that one stream and is counted, and every
exception of the app (or the server) propagates as the same object.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import random
import signal
import sys
import time
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio.to_thread
from prometheus_client import CollectorRegistry
from pydantic_core import PydanticCustomError, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from streamguard.config import (
    UNKNOWN_ROUTE,
    LogConfig,
    RouteConfig,
    StreamGuardConfig,
    TimerConfig,
)
from streamguard.liveness import LivenessLimits
from streamguard.logs import LogSink
from streamguard.metrics import StreamGuardMetrics
from streamguard.monitor import FEED_WINDOW, Clock, StreamEnd, StreamMonitor, error_name
from streamguard.protocols import AUTO, CHECKERS
from streamguard.protocols.auto import protocol_for_path
from streamguard.report import Finding
from streamguard.request import RequestFacts, add_http_facts, request_facts
from streamguard.sinks import (
    COMPRESSED,
    NOT_SAMPLED,
    ReportCallback,
    ReportSink,
    Sink,
    StreamSink,
)
from streamguard.sweeper import Sweeper, Sweepers

__all__ = ["ReportCallback", "StreamGuardMiddleware"]

#: The keyword options that are ``StreamGuardConfig`` fields (a test keeps them in step).
_CONFIG_OPTIONS = (
    "routes",
    "watch_unlisted",
    "protocol",
    "exclude_paths",
    "max_event_bytes",
    "request_peek_bytes",
    "timers",
    "logs",
    "sample_rate",
)


class StreamGuardMiddleware:
    """Watch the SSE responses of ``app`` and report on each stream.

    Configure with ``config=StreamGuardConfig(...)`` or the same fields as keywords (a
    keyword left at ``None`` keeps the field's default); the two cannot be mixed. The rest
    are the runtime objects streamguard works with:

    * ``metrics``: a ``StreamGuardMetrics``, a ``prometheus_client.CollectorRegistry`` to
      build one in, ``None`` for the process-wide default, or ``False`` for no metrics;
    * ``on_report``: called once per watched stream with its ``StreamReport``, from the
      task that sent the stream's last message, after every other sink;
    * ``sinks``: more ``streamguard.sinks.Sink`` objects, told of every watched stream;
    * ``clock``: the monotonic clock, for tests.

    ``skipped`` counts, by reason, the HTTP responses whose bytes were not checked: those
    not watched at all (``head``, ``status``, ``content_type``, ``excluded``, ``unlisted``)
    and the compressed streams, watched but not inspected (``content_encoding``); a stream
    left out by ``sample_rate`` is not counted here (``unchecked_streams_total`` counts
    both kinds of unchecked stream). ``in_flight`` is the number of watched streams open;
    ``internal_errors`` the failures contained.
    """

    def __init__(
        self,
        app: ASGIApp,
        config: StreamGuardConfig | None = None,
        *,
        routes: Mapping[str, str | RouteConfig | Mapping[str, Any]] | None = None,
        watch_unlisted: bool | None = None,
        protocol: str | None = None,
        exclude_paths: Sequence[str] | None = None,
        max_event_bytes: int | None = None,
        request_peek_bytes: int | None = None,
        timers: TimerConfig | Mapping[str, Any] | None = None,
        logs: LogConfig | Mapping[str, Any] | None = None,
        sample_rate: float | None = None,
        metrics: StreamGuardMetrics | CollectorRegistry | Literal[False] | None = None,
        on_report: ReportCallback | None = None,
        sinks: Sequence[Sink] = (),
        clock: Clock = time.monotonic,
    ) -> None:
        given = locals()
        options = {name: given[name] for name in _CONFIG_OPTIONS if given[name] is not None}
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
        self.metrics = _resolve_metrics(metrics)
        self.skipped: Counter[str] = Counter()
        shortest_timer = min(config.timers.body_end_grace_s, config.timers.idle_limit_s)
        #: How often open streams are polled: often enough to report within a quarter of
        #: the shortest timer, never busier than 200 times a second.
        self.poll_interval = min(max(shortest_timer / 4, 0.005), 1.0)
        #: The watched streams still open, so that shutdown can report them: a server
        #: that re-raises SIGTERM (uvicorn) ends the process before cancelled tasks run.
        self.open_streams: set[_StreamWatch] = set()
        self._sweepers = Sweepers(self.poll_interval, self.open_streams)
        #: Where findings and reports go, in this order; ``on_report`` comes last.
        self.sinks: tuple[Sink, ...] = (
            *(() if self.metrics is None else (self.metrics,)),
            LogSink(config.logs, clock),
            *sinks,
            *(() if on_report is None else (ReportSink(on_report),)),
        )
        self._errors = _InternalErrors(self.sinks)
        self._watching = _Watching(
            config=config,
            clock=clock,
            limits=config.timers.limits(),
            sinks=self.sinks,
            skipped=self.skipped,
            open_streams=self.open_streams,
            sweeper=self._sweepers.current,
            internal_error=self._errors,
        )
        _at_exit.add(self)
        if self.metrics is not None:
            self.metrics.initialise(_initial_labels(config))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                receive = self._lifespan_receive(receive)
            await self.app(scope, receive, send)
            return
        if scope.get("method") == "HEAD":
            self.skipped["head"] += 1
            await self.app(scope, receive, send)
            return
        watch = _StreamWatch(self._watching, scope, receive, send)
        try:
            await self.app(scope, watch.receive, watch)  # the watch is the app's send
        except BaseException as exc:
            watch.app_raised(exc)
            raise
        watch.app_returned()

    @property
    def in_flight(self) -> int:
        """The number of watched streams open, or ended and still handing their report
        to the sinks: at zero, every stream's report has been delivered."""
        return len(self.open_streams)

    @property
    def internal_errors(self) -> int:
        """How many failures inside streamguard were contained (one per stream at most)."""
        return self._errors.count

    def _lifespan_receive(self, receive: Receive) -> Receive:
        async def lifespan_receive() -> Message:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                self.report_open_streams()
                await self.drain_sinks()
            return message

        return lifespan_receive

    async def drain_sinks(self) -> None:
        """Let the sinks that hold reports deliver them (``drain``), each on a worker
        thread so the loop keeps running; at shutdown, as the server may then end the
        process without running exit handlers. A failure is counted, never raised."""
        for sink in self.sinks:
            drain = getattr(sink, "drain", None)
            if callable(drain):
                try:
                    await anyio.to_thread.run_sync(drain)
                except Exception as exc:
                    self._errors(sink.name, exc, UNKNOWN_ROUTE, "unknown")

    def report_open_streams(self) -> None:
        """Report every stream still open as ``cancelled`` (at server shutdown and at
        interpreter exit; the streams' own ends are then no-ops)."""
        for watch in list(self.open_streams):
            watch.shutdown()

    def route_for(self, scope: Scope) -> tuple[str | None, RouteConfig | None]:
        """The route label and configuration of a request; never raises, never a raw path.

        A configured route matches by exact path first, then by the route template that
        Starlette/FastAPI routing left in ``scope["route"]``. The label of an unconfigured
        route is its template, or ``None`` when there is none.
        """
        return _route_for(self.config, scope)


class _InternalErrors:
    """The one place a failure inside streamguard is counted and told to the sinks."""

    __slots__ = ("_sinks", "count")

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self._sinks = sinks
        self.count = 0

    def __call__(self, where: str, exc: BaseException, route: str, protocol: str) -> None:
        self.count += 1
        error = error_name(exc)
        for sink in self._sinks:
            # Separately guarded: the failing sink may be any one, and the others must
            # still say so.
            with contextlib.suppress(Exception):
                sink.internal_error(where, error, route, protocol)


@dataclass(frozen=True, slots=True, eq=False)
class _Watching:
    """What every stream of one middleware works with: plain collaborators."""

    config: StreamGuardConfig
    clock: Clock
    #: The timing detectors' thresholds; ``None`` with the timers off.
    limits: LivenessLimits | None
    sinks: tuple[Sink, ...]
    skipped: Counter[str]
    open_streams: set[_StreamWatch]
    #: The running loop's sweeper, or ``None`` outside asyncio.
    sweeper: Callable[[], Sweeper | None]
    internal_error: Callable[[str, BaseException, str, str], None]


class _StreamWatch:
    """The per-request state: the wrapped ``receive`` and ``send``, monitor and sinks."""

    __slots__ = (
        "_late_body_is_a_bug",
        "_peeking",
        "_receive",
        "_request",
        "_request_body",
        "_scope",
        "_send",
        "_sink_failed",
        "_sinks",
        "_watching",
        "decided",
        "disconnected",
        "monitor",
        "protocol_label",
        "route",
        "started_at",
        "sweeper",
    )

    def __init__(self, watching: _Watching, scope: Scope, receive: Receive, send: Send) -> None:
        self._watching = watching
        self._scope = scope
        self._receive = receive
        self._send = send
        self.started_at = watching.clock()
        self.monitor: StreamMonitor | None = None
        self.route = UNKNOWN_ROUTE
        self.protocol_label = "unknown"
        self.decided = False
        self.disconnected = False
        #: Each sink's handle on this stream, in the order of ``watching.sinks`` (``None``
        #: for a sink that took no interest, or whose start failed).
        self._sinks: tuple[StreamSink | None, ...] = ()
        #: The poller of this stream's event loop while it is open (``None`` without one).
        self.sweeper: Sweeper | None = None
        self._sink_failed = False
        #: Whether a body message now would be the app's bug (``body_after_end``): only
        #: after the app ended the body itself, and reported once.
        self._late_body_is_a_bug = False
        #: Whether the request body the app reads is still to be reduced to its facts.
        self._peeking = watching.config.request_peek_bytes > 0
        #: A JSON request body that came in several messages, while it arrives (up to
        #: ``request_peek_bytes``); reduced to its facts, and dropped, by its last message.
        self._request_body: bytearray | None = None
        #: The facts of the body read, and the note saying why they are unknown, if so.
        self._request: tuple[RequestFacts | None, str | None] | None = None

    async def receive(self) -> Message:
        message = await self._receive()
        self.received(message)
        return message

    def received(self, message: Message) -> None:
        """The app received ``message``: note a disconnect, read a request body."""
        kind = message["type"]
        if kind == "http.request":
            if self._peeking:
                try:
                    self._peek_request(message)
                except Exception as exc:
                    self._stop_peeking("reading the request body failed: request checks skipped")
                    self._watching.internal_error("receive", exc, self.route, "unknown")
        elif kind == "http.disconnect":
            self.disconnected = True

    async def send(self, message: Message) -> None:
        body_ended = False
        monitor = self.monitor
        if monitor is not None:
            if message["type"] == "http.response.body":
                if monitor.report is not None:
                    if self._late_body_is_a_bug:
                        self._after_end(monitor, message)
                else:
                    body_ended = not message.get("more_body", False)
                    if monitor.internal_error is None:
                        try:
                            data = message.get("body", b"")
                            if type(data) is not bytes:  # a memoryview or bytearray is valid
                                data = bytes(data)
                            # Only a message of several windows has its findings
                            # emitted as they are made (no bound method per frame).
                            found = (
                                monitor.feed(data)
                                if len(data) <= FEED_WINDOW
                                else monitor.feed(data, self._emit)
                            )
                            if found:
                                self._emit(found)
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
                self._abandon("decide", exc)
            # _decide took the facts the checks need, if any; a body read from now on
            # comes too late for them.
            self._peeking = False
            self._request_body = None
        try:
            await self._send(message)
        except OSError:
            # ASGI spec 2.4: the server raises OSError from send once the client has gone.
            self.disconnected = True
            raise
        except BaseException as exc:
            # Cancelled while handing over the last body message after the client's
            # disconnect went by (hypercorn's trio worker reports the finished response
            # as a disconnect, and Starlette then cancels the sender): the app did end its
            # body, which is what the outcome records. Cancelled with no disconnect (the
            # app's own timeout around a send held by a slow reader), or any other
            # exception, means the message never reached the client: the app sees it
            # raised, and the outcome follows from how the app ends.
            if body_ended and monitor is not None and self.disconnected and _is_cancellation(exc):
                monitor.handed_over()
                self._finish(StreamEnd.BODY_ENDED)
            raise
        if monitor is not None:
            # A server may drop sends after a disconnect without raising (uvicorn does):
            # what was sent after the client left did not reach it.
            if not self.disconnected:
                monitor.handed_over()
            if body_ended:
                self._late_body_is_a_bug = True
                self._finish(
                    StreamEnd.CLIENT_DISCONNECT if self.disconnected else StreamEnd.BODY_ENDED
                )

    #: The app's ``send`` is the watch itself: a bound method would be one more object
    #: held for the whole life of every stream (an idle one costs at most 2 KiB).
    __call__ = send

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

    def shutdown(self) -> None:
        """The server is shutting down with this stream still open: report it now."""
        monitor = self.monitor
        if monitor is not None and monitor.report is None:
            monitor.add_note("reported at server shutdown, before the stream ended")
            self._finish(StreamEnd.CANCELLED)

    # -- deciding -----------------------------------------------------------------------

    def _decide(self, message: Message) -> None:
        watching = self._watching
        config = watching.config
        skipped = watching.skipped
        status = message["status"]
        if not 200 <= status < 300:
            skipped["status"] += 1
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
            skipped["content_type"] += 1
            return
        if content_type.partition(b";")[0].strip().lower() != b"text/event-stream":
            skipped["content_type"] += 1
            return
        path = self._scope.get("path", "")
        if config.is_excluded(path):
            skipped["excluded"] += 1
            return
        label, spec = _route_for(config, self._scope)
        if spec is None and not config.watch_unlisted:
            skipped["unlisted"] += 1
            return
        route = label or UNKNOWN_ROUTE
        protocol = spec.protocol if spec is not None else config.protocol
        head = (
            content_type.decode("latin-1"),
            None if content_length is None else content_length.decode("latin-1"),
            None if content_encoding is None else content_encoding.decode("latin-1"),
        )
        request, note = self._request_facts()
        scope = self._scope
        request = add_http_facts(request, scope.get("method"), scope.get("headers", ()))
        monitor = StreamMonitor(
            protocol,
            request=request,
            path=path,
            headers=message.get("headers", ()),
            route=route,
            clock=watching.clock,
            started_at=self.started_at,
            max_event_bytes=config.max_event_bytes,
            excerpt_chars=config.logs.excerpt_chars if config.logs.content_excerpts else 0,
            liveness=watching.limits,
            handover=True,
            json_data=spec is not None and spec.json_data,
        )
        if note is not None:
            monitor.add_note(note)
        # A protocol still to be detected from events is labelled "auto" for the whole
        # stream, so that every series of one stream carries the same labels.
        undecided = protocol == AUTO and monitor.protocol_source == "default"
        self.route = route
        self.protocol_label = AUTO if undecided else monitor.protocol
        # Everything above may fail and leave no trace; from here on the stream is open
        # and counted, and whatever fails is reported through it.
        self.monitor = monitor
        watching.open_streams.add(self)
        if watching.limits is not None:
            sweeper = self.sweeper = watching.sweeper()
            if sweeper is not None:
                sweeper.add(self)
        try:
            found = monitor.check_head(*head)
        except Exception:
            self._start_sinks(None)  # the stream is open: its end must reach the sinks
            raise
        unchecked = None
        if not monitor.inspecting:
            skipped["content_encoding"] += 1
            unchecked = COMPRESSED
        elif config.sample_rate < 1.0 and random.random() >= config.sample_rate:
            monitor.stop_inspecting()
            monitor.add_note("not sampled: only the outcome was recorded")
            unchecked = NOT_SAMPLED
        self._start_sinks(unchecked)
        if found:
            self._emit(found)

    def _abandon(self, where: str, exc: Exception) -> None:
        """Deciding failed: count it; a stream already open is reported, not leaked."""
        if self.monitor is not None:
            self._internal_error(where, exc)
            return
        self._watching.internal_error(where, exc, self.route, self.protocol_label)

    def _peek_request(self, message: Message) -> None:
        """Reduce the request body the app reads to its facts as it arrives.

        Nothing is held for a request no check can use: on a route that is never watched,
        or with a body that does not start as JSON (an upload), peeking stops at the first
        message. A body in one message is reduced at once and never copied; one in several
        is kept only until its last message, at most ``request_peek_bytes``. An app that
        holds the request before it answers (an upload it processes, a queue) therefore
        holds the facts, a few slots, and never a copy of what it read.
        """
        chunk = message.get("body", b"")
        more = message.get("more_body", False)
        limit = self._watching.config.request_peek_bytes
        kept = self._request_body
        if kept is None:
            if not self._may_be_checked():
                self._peeking = False
                return
            if not more:
                self._reduce_request(chunk)
                return
            kept = self._request_body = bytearray()
        if len(kept) + len(chunk) > limit:
            self._stop_peeking(
                f"request body over request_peek_bytes={limit}: request checks skipped"
            )
            return
        if not kept:  # what the body starts with decides whether it is kept
            chunk = chunk.lstrip()  # (whitespace before JSON is not kept, nor counted)
            if chunk[:1] not in (b"{", b"[", b""):
                self._stop_peeking("request body is not JSON: request checks skipped")
                return
        kept += chunk
        if not more:
            self._reduce_request(kept)

    def _may_be_checked(self) -> bool:
        """Whether a response to this request could be watched (its route is)."""
        config = self._watching.config
        if config.is_excluded(self._scope.get("path", "")):
            return False
        return config.watch_unlisted or _route_for(config, self._scope)[1] is not None

    def _reduce_request(self, body: bytes | bytearray) -> None:
        self._request = request_facts(body, self._watching.config.request_peek_bytes)
        self._request_body = None
        self._peeking = False

    def _stop_peeking(self, note: str) -> None:
        self._request = (None, note)
        self._request_body = None
        self._peeking = False

    def _request_facts(self) -> tuple[RequestFacts | None, str | None]:
        """What the request the app read asked for, or ``None`` and why it is unknown."""
        request = self._request
        if request is not None:
            self._request = None  # the checker keeps the facts it reads
            return request
        if self._request_body is not None:
            return None, "request body not fully read before the response: request checks skipped"
        return None, None

    # -- sinks --------------------------------------------------------------------------

    def _start_sinks(self, unchecked: str | None) -> None:
        """Tell every sink the stream started; one whose start fails hears no more of it."""
        route, label = self.route, self.protocol_label
        opened: list[StreamSink | None] = []
        for sink in self._watching.sinks:
            try:
                opened.append(sink.stream_started(route, label, unchecked))
            except BaseException as exc:
                if _is_cancellation(exc):
                    raise
                opened.append(None)
                self._internal_error(sink.name, exc)
        self._sinks = tuple(opened)

    def _emit(self, found: Sequence[Finding]) -> None:
        """Hand new findings to the sinks.

        A sink that fails stops the checking of this stream (so no more findings come) but
        still gets the stream's end, so that its own bookkeeping (an open-streams gauge)
        balances.
        """
        for index, sink in enumerate(self._sinks):
            if sink is not None:
                try:
                    sink.findings(found)
                except BaseException as exc:
                    if _is_cancellation(exc):
                        raise
                    self._internal_error(self._watching.sinks[index].name, exc)

    def poll(self) -> None:
        """Called by the sweeper: run the timing detectors and emit what they find."""
        monitor = self.monitor
        if monitor is None:
            return
        try:
            found = monitor.poll()
        except Exception as exc:
            self._internal_error("poll", exc)
            return
        if found:
            self._emit(found)

    def _after_end(self, monitor: StreamMonitor, message: Message) -> None:
        """A body message after the body ended: the app's bug, reported once per stream."""
        self._late_body_is_a_bug = False
        try:
            data = message.get("body", b"")
            self._emit((monitor.after_end(data),))
        except Exception as exc:
            self._internal_error("check", exc)

    def _internal_error(self, where: str, exc: BaseException) -> None:
        """Stop watching this stream; its first failure is counted, once."""
        if self.monitor is not None:
            self.monitor.fail(exc)
        if not self._sink_failed:
            self._sink_failed = True
            self._watching.internal_error(where, exc, self.route, self.protocol_label)

    def _finish(self, end: StreamEnd) -> None:
        monitor = self.monitor
        if monitor is None or monitor.report is not None:
            return
        watching = self._watching
        if self.sweeper is not None:
            self.sweeper.discard(self)
            self.sweeper = None
        try:
            stopping = end is StreamEnd.APP_RETURNED and _server_is_stopping()
            report = monitor.finish(end, emit=self._emit, server_stopping=stopping)
        except Exception as exc:
            self._internal_error("finish", exc)
            report = monitor.fallback_report(end)
        try:
            for index, sink in enumerate(self._sinks):
                if sink is not None:
                    try:
                        sink.stream_ended(report)
                    except BaseException as exc:
                        if _is_cancellation(exc):
                            raise
                        self._internal_error(watching.sinks[index].name, exc)
        finally:
            # Counted open until its report is handed over, so that ``in_flight == 0``
            # means every report has reached the sinks.
            watching.open_streams.discard(self)


class _AtExit:
    """Reports the open streams of every live middleware when the interpreter exits."""

    def __init__(self) -> None:
        self._guards: weakref.WeakSet[StreamGuardMiddleware] = weakref.WeakSet()
        self._registered = False

    def add(self, guard: StreamGuardMiddleware) -> None:
        self._guards.add(guard)
        if not self._registered:
            self._registered = True
            atexit.register(self._run)

    def _run(self) -> None:
        for guard in list(self._guards):
            with contextlib.suppress(Exception):  # never fail the interpreter's exit
                guard.report_open_streams()


_at_exit = _AtExit()


def _resolve_metrics(metrics: object) -> StreamGuardMetrics | None:
    if metrics is False:
        return None
    if metrics is None:
        return StreamGuardMetrics.default()
    if isinstance(metrics, StreamGuardMetrics):
        return metrics
    if isinstance(metrics, CollectorRegistry):
        return StreamGuardMetrics.default(metrics)
    # The same error as a bad configuration value: every argument is checked at once.
    raise ValidationError.from_exception_data(
        "StreamGuardMiddleware",
        [
            {
                "type": PydanticCustomError(
                    "metrics_type",
                    "metrics must be a StreamGuardMetrics, a CollectorRegistry, None or "
                    "False, not {kind}",
                    {"kind": type(metrics).__name__},
                ),
                "loc": ("metrics",),
                "input": metrics,
            }
        ],
    )


def _initial_labels(config: StreamGuardConfig) -> list[tuple[str, str]]:
    """The (route, protocol) labels of the configured routes, as their streams will carry
    them: a route left to auto-detection whose path names a protocol is labelled with it."""
    labels = []
    for key, spec in config.routes.items():
        protocol = spec.protocol
        if protocol == AUTO:
            by_path = protocol_for_path(key)
            if by_path in CHECKERS:
                protocol = by_path
        labels.append((spec.name or key, protocol))
    return labels


def _route_for(config: StreamGuardConfig, scope: Scope) -> tuple[str | None, RouteConfig | None]:
    """``StreamGuardMiddleware.route_for``."""
    routes = config.routes
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


def _server_is_stopping() -> bool:
    """Whether the server is shutting down; never raises.

    No ASGI message says so before the open streams end (the lifespan's shutdown comes
    after them), so the servers' own flags are read: uvicorn's ``Server.should_exit``,
    through its SIGTERM handler (a bound method of the server), and sse-starlette's
    ``AppStatus.should_exit``. These are the flags sse-starlette itself watches to end
    its streams at shutdown.
    """
    try:
        server = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
        if getattr(server, "should_exit", False) is True:
            return True
        sse = sys.modules.get("sse_starlette.sse")
        status = getattr(sse, "AppStatus", None)
        return getattr(status, "should_exit", False) is True
    except Exception:
        return False


def _is_cancellation(exc: BaseException) -> bool:
    """asyncio's or trio's cancellation, which must propagate; any other exception from a
    sink (even ``KeyboardInterrupt`` raised by a callback) is contained."""
    return isinstance(exc, asyncio.CancelledError) or type(exc).__name__ == "Cancelled"
