"""The one implementation behind ``streamguard.httpx`` and ``streamguard.httpx2``.

httpx2's transport API mirrors httpx's, class for class, so everything lives here once and
each public module only binds it to its own classes (``Flavour``): the stream wrappers
subclass that module's ``SyncByteStream`` / ``AsyncByteStream`` (its client checks the
type) and the transports its ``BaseTransport`` / ``AsyncBaseTransport``.

Theory of operation
-------------------

``handle_request`` forwards the request to the wrapped transport and looks at the response
head it returns: a 2xx ``text/event-stream`` response to a request that is not ``HEAD``,
whose path is not excluded and whose route is watched, gets a ``StreamMonitor``, and its
``response.stream`` is replaced by a wrapper that feeds every chunk to the monitor and
then yields the same object, unchanged, as the caller asks for it. Nothing is read ahead,
held back, or copied: the caller's reads drive everything, so checking happens at the
pace the caller reads and costs nothing while it does not.

How the read ends decides the ``StreamEnd``:

* the wrapped stream is exhausted: ``BODY_ENDED``;
* the caller closes the response first (the SDKs close it after ``[DONE]``, or when they
  raise on an in-band error), or abandons the iteration: ``CLIENT_DISCONNECT``, the client
  side of a disconnect (after the terminal it is a late close: the end already seen wins);
* the read raises the module's ``ReadTimeout``: ``READ_TIMEOUT``;
* any other exception while reading (a network or protocol error): ``CONNECTION_LOST``;
  the caller's task being cancelled is the caller leaving (``CLIENT_DISCONNECT``), and
  ``KeyboardInterrupt`` / ``SystemExit`` are ``CANCELLED``.

The exception always reaches the caller as the same object. A failure inside streamguard
never does: it is counted (``internal_errors``), told to the sinks, and that stream is left
unchecked, as in the middleware.

Findings and reports go to the sinks, as the middleware's do: the metrics under their own
names (``streamguard_upstream_*``, ``streamguard.metrics.UPSTREAM_NAMESPACE``), the log
events with ``side="upstream"`` bound, any ``sinks=``, and ``on_report`` last.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from prometheus_client import CollectorRegistry

from streamguard.config import (
    UNKNOWN_ROUTE,
    LogConfig,
    RouteConfig,
    StreamGuardConfig,
    TimerConfig,
)
from streamguard.logs import LogSink
from streamguard.metrics import UPSTREAM_NAMESPACE, StreamGuardMetrics
from streamguard.monitor import Clock, StreamEnd, StreamMonitor, error_name
from streamguard.protocols import AUTO, CHECKERS
from streamguard.protocols.auto import protocol_for_path
from streamguard.report import Finding
from streamguard.request import RequestFacts, add_http_facts, request_facts
from streamguard.sinks import COMPRESSED, NOT_SAMPLED, ReportCallback, ReportSink, Sink, StreamSink
from streamguard.sweeper import Sweeper, Sweepers

__all__ = [
    "SIDE",
    "AsyncGuardedTransport",
    "AsyncWatchedStream",
    "Flavour",
    "GuardedTransport",
    "Upstream",
    "WatchedStream",
]

#: Bound as ``side`` on the transports' log events.
SIDE = "upstream"


class _SyncStream(Protocol):
    def __iter__(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class _AsyncStream(Protocol):
    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Flavour:
    """What differs between httpx and httpx2: the module's own classes."""

    read_timeout: type[BaseException]
    request_not_read: type[BaseException]
    #: The wrapper classes, subclasses of the module's ``SyncByteStream`` / ``AsyncByteStream``.
    sync_stream: Callable[[_SyncStream, _Watch], Any]
    async_stream: Callable[[_AsyncStream, _Watch], Any]
    #: The module's standard transports, used when none is given.
    sync_transport: Callable[[], Any]
    async_transport: Callable[[], Any]


class Upstream:
    """What every stream of one transport shares: the configuration, the sinks, the
    counters and the open streams. Per-stream state lives in a ``_Watch``, never here."""

    def __init__(
        self,
        flavour: Flavour,
        config: StreamGuardConfig,
        *,
        metrics: StreamGuardMetrics | CollectorRegistry | Literal[False] | None,
        on_report: ReportCallback | None,
        sinks: Sequence[Sink],
        clock: Clock,
    ) -> None:
        self.flavour = flavour
        self.config = config
        self.clock = clock
        self.metrics = _upstream_metrics(metrics)
        #: The responses not watched, by reason (``status``, ``content_type``, ...).
        self.skipped: Counter[str] = Counter()
        #: Failures inside streamguard that were contained (one per stream at most).
        self.internal_errors = 0
        self.limits = config.timers.limits()
        #: The streams still open. Weak: a response the caller drops unclosed (an httpx
        #: misuse) takes its watch with it rather than keeping it here until the transport
        #: closes; its loop's sweeper then idles until the loop ends.
        self.open_streams: weakref.WeakSet[_Watch] = weakref.WeakSet()
        shortest_timer = min(config.timers.body_end_grace_s, config.timers.idle_limit_s)
        # As the middleware's: a quarter of the shortest timer, within [5 ms, 1 s].
        self.sweepers = Sweepers(min(max(shortest_timer / 4, 0.005), 1.0), self.open_streams)
        #: Where findings and reports go, in this order; ``on_report`` comes last.
        self.sinks: tuple[Sink, ...] = (
            *(() if self.metrics is None else (self.metrics,)),
            LogSink(config.logs, clock, side=SIDE),
            *sinks,
            *(() if on_report is None else (ReportSink(on_report),)),
        )
        if self.metrics is not None:
            self.metrics.initialise(_initial_labels(config))

    def route_for(self, host: str, port: int | None, path: str) -> tuple[str, RouteConfig | None]:
        """The route label and configuration of a request URL; never a raw path.

        A configured route matches by ``host:port`` + path, then host + path, then path
        alone (``"api.openai.com/v1/chat/completions"``, ``"/v1/chat/completions"``). An
        unconfigured URL is labelled ``__unknown__``: a client can call any URL, and a
        label must stay a bounded set.
        """
        routes = self.config.routes
        keys = (
            (f"{host}{path}", path)
            if port is None
            else (f"{host}:{port}{path}", f"{host}{path}", path)
        )
        for key in keys:
            spec = routes.get(key)
            if spec is not None:
                return spec.name or key, spec
        return UNKNOWN_ROUTE, None

    def watch(self, request: Any, response: Any, started_at: float, sync: bool) -> Any:
        """``response``, its stream wrapped when it is an event stream worth watching."""
        try:
            watch = self._open(request, response, started_at, sync)
        except Exception as exc:
            self.internal_error("decide", exc, UNKNOWN_ROUTE, "unknown")
            return response
        if watch is not None:
            flavour = self.flavour
            wrap = flavour.sync_stream if sync else flavour.async_stream
            response.stream = wrap(response.stream, watch)
        return response

    def _open(self, request: Any, response: Any, started_at: float, sync: bool) -> _Watch | None:
        """A watch for the response, or ``None`` (counted in ``skipped``) if not watched."""
        config = self.config
        if request.method == "HEAD":
            self.skipped["head"] += 1
            return None
        if not 200 <= response.status_code < 300:
            self.skipped["status"] += 1
            return None
        content_type, content_length, content_encoding = _head(response.headers.raw)
        if content_type is None or _media_type(content_type) != "text/event-stream":
            self.skipped["content_type"] += 1
            return None
        url = request.url
        path: str = url.path
        if config.is_excluded(path):
            self.skipped["excluded"] += 1
            return None
        route, spec = self.route_for(url.host, url.port, path)
        if spec is None and not config.watch_unlisted:
            self.skipped["unlisted"] += 1
            return None
        protocol = spec.protocol if spec is not None else config.protocol
        facts, note = self._request_facts(request)
        facts = add_http_facts(facts, request.method, request.headers.raw)
        monitor = StreamMonitor(
            protocol,
            request=facts,
            path=path,
            headers=response.headers.raw,
            route=route,
            clock=self.clock,
            started_at=started_at,
            max_event_bytes=config.max_event_bytes,
            excerpt_chars=config.logs.excerpt_chars if config.logs.content_excerpts else 0,
            liveness=self.limits,
            json_data=spec is not None and spec.json_data,
        )
        if note is not None:
            monitor.add_note(note)
        # As in the middleware: a protocol still to be detected is labelled "auto" for
        # the whole stream, so every series of one stream carries the same labels.
        undecided = protocol == AUTO and monitor.protocol_source == "default"
        found = monitor.check_head(content_type, content_length, content_encoding)
        unchecked = None
        if not monitor.inspecting:
            self.skipped["content_encoding"] += 1
            unchecked = COMPRESSED
        elif config.sample_rate < 1.0 and random.random() >= config.sample_rate:
            monitor.stop_inspecting()
            monitor.add_note("not sampled: only the outcome was recorded")
            unchecked = NOT_SAMPLED
        # Everything above may fail and leave no trace; from here on the stream is open
        # and counted, and whatever fails is reported through it.
        watch = _Watch(self, monitor, route, AUTO if undecided else monitor.protocol)
        sweeper = None if sync or self.limits is None else self.sweepers.current()
        watch.start(unchecked, sweeper)
        if found:
            watch.emit(found)
        return watch

    def _request_facts(self, request: Any) -> tuple[RequestFacts | None, str | None]:
        """What the request the client sent asked for (its body, when it was not streamed)."""
        limit = self.config.request_peek_bytes
        if not limit:
            return None, None
        try:
            content = request.content
        except self.flavour.request_not_read:
            return None, "request body streamed by the client: request checks skipped"
        return request_facts(content, limit)

    def report_open_streams(self, note: str) -> None:
        """Report every stream still open as the caller leaving (the transport closed)."""
        for watch in list(self.open_streams):
            watch.monitor.add_note(note)
            watch.end(StreamEnd.CLIENT_DISCONNECT)

    def internal_error(self, where: str, exc: BaseException, route: str, protocol: str) -> None:
        """The one place a failure inside streamguard is counted and told to the sinks."""
        self.internal_errors += 1
        error = error_name(exc)
        for sink in self.sinks:
            # Separately guarded: the failing sink may be any one, and the others must
            # still say so.
            with contextlib.suppress(Exception):
                sink.internal_error(where, error, route, protocol)


class _Watch:
    """One watched response: its monitor, and each sink's handle on it."""

    __slots__ = (
        "__weakref__",
        "_failed",
        "_sinks",
        "_upstream",
        "monitor",
        "protocol_label",
        "route",
        "sweeper",
    )

    def __init__(
        self, upstream: Upstream, monitor: StreamMonitor, route: str, protocol_label: str
    ) -> None:
        self._upstream = upstream
        self.monitor = monitor
        self.route = route
        self.protocol_label = protocol_label
        self._failed = False
        #: Each sink's handle on this stream, in the order of ``upstream.sinks`` (``None``
        #: for a sink that took no interest, or whose start failed).
        self._sinks: tuple[StreamSink | None, ...] = ()
        #: The poller of this stream's event loop while it is open (async clients only).
        self.sweeper: Sweeper | None = None

    def start(self, unchecked: str | None, sweeper: Sweeper | None) -> None:
        """Open the stream: tell every sink; one whose start fails hears no more of it."""
        upstream = self._upstream
        opened: list[StreamSink | None] = []
        for sink in upstream.sinks:
            try:
                opened.append(sink.stream_started(self.route, self.protocol_label, unchecked))
            except BaseException as exc:
                if _is_cancellation(exc):
                    raise
                opened.append(None)
                self._internal_error(sink.name, exc)
        self._sinks = tuple(opened)
        upstream.open_streams.add(self)
        if sweeper is not None:
            self.sweeper = sweeper
            sweeper.add(self)

    def feed(self, chunk: bytes) -> None:
        monitor = self.monitor
        if monitor.report is not None or monitor.internal_error is not None:
            return
        try:
            found = monitor.feed(chunk if type(chunk) is bytes else bytes(chunk))
            if found:
                self.emit(found)
        except Exception as exc:
            self._internal_error("check", exc)

    def emit(self, found: Sequence[Finding]) -> None:
        """Hand new findings to the sinks (a failing one stops the checking, as downstream)."""
        for index, sink in enumerate(self._sinks):
            if sink is not None:
                try:
                    sink.findings(found)
                except BaseException as exc:
                    if _is_cancellation(exc):
                        raise
                    self._internal_error(self._upstream.sinks[index].name, exc)

    def poll(self) -> None:
        """Called by the sweeper: run the timing detectors and emit what they find."""
        try:
            found = self.monitor.poll()
        except Exception as exc:
            self._internal_error("poll", exc)
            return
        if found:
            self.emit(found)

    def end(self, end: StreamEnd, cause: BaseException | None = None) -> None:
        """Finish the stream once (later calls do nothing) and hand its report over."""
        monitor = self.monitor
        if monitor.report is not None:
            return
        upstream = self._upstream
        if self.sweeper is not None:
            self.sweeper.discard(self)
            self.sweeper = None
        try:
            report = monitor.finish(end, cause=cause, emit=self.emit)
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
                        self._internal_error(upstream.sinks[index].name, exc)
        finally:
            upstream.open_streams.discard(self)  # open until its report is handed over

    def ended_by(self, exc: BaseException) -> StreamEnd:
        """How an exception raised while reading the body ended the stream."""
        if isinstance(exc, self._upstream.flavour.read_timeout):
            return StreamEnd.READ_TIMEOUT
        if isinstance(exc, Exception):
            return StreamEnd.CONNECTION_LOST
        if _is_cancellation(exc):
            return StreamEnd.CLIENT_DISCONNECT  # the caller's task stopped reading
        return StreamEnd.CANCELLED  # KeyboardInterrupt, SystemExit

    def _internal_error(self, where: str, exc: BaseException) -> None:
        """Stop checking this stream; its first failure is counted, once."""
        self.monitor.fail(exc)
        if not self._failed:
            self._failed = True
            self._upstream.internal_error(where, exc, self.route, self.protocol_label)


class WatchedStream:
    """A sync response body that shows each chunk to the monitor, then yields it as is."""

    def __init__(self, stream: _SyncStream, watch: _Watch) -> None:
        self._stream = stream
        self._watch = watch

    def __iter__(self) -> Iterator[bytes]:
        watch = self._watch
        try:
            for chunk in self._stream:
                watch.feed(chunk)
                yield chunk
        except GeneratorExit:  # the caller abandoned the iteration
            watch.end(StreamEnd.CLIENT_DISCONNECT)
            raise
        except BaseException as exc:
            watch.end(watch.ended_by(exc), exc)
            raise
        watch.end(StreamEnd.BODY_ENDED)

    def close(self) -> None:
        self._watch.end(StreamEnd.CLIENT_DISCONNECT)  # nothing, if the body ended first
        self._stream.close()


class AsyncWatchedStream:
    """``WatchedStream`` for an async response body."""

    def __init__(self, stream: _AsyncStream, watch: _Watch) -> None:
        self._stream = stream
        self._watch = watch

    async def __aiter__(self) -> AsyncIterator[bytes]:
        watch = self._watch
        try:
            async for chunk in self._stream:
                watch.feed(chunk)
                yield chunk
        except GeneratorExit:
            watch.end(StreamEnd.CLIENT_DISCONNECT)
            raise
        except BaseException as exc:
            watch.end(watch.ended_by(exc), exc)
            raise
        watch.end(StreamEnd.BODY_ENDED)

    async def aclose(self) -> None:
        self._watch.end(StreamEnd.CLIENT_DISCONNECT)
        await self._stream.aclose()


class _GuardedBase:
    #: Bound by each public module.
    _flavour: ClassVar[Flavour]

    def __init__(
        self,
        transport: Any = None,
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
        # Every field of the configuration is a keyword here (a test keeps them in step).
        options = {
            name: given[name] for name in StreamGuardConfig.model_fields if given[name] is not None
        }
        if config is None:
            config = StreamGuardConfig(**options)
        elif options:
            raise TypeError(
                f"pass either config= or keyword options, not both (got {sorted(options)})"
            )
        self.upstream = Upstream(
            self._flavour, config, metrics=metrics, on_report=on_report, sinks=sinks, clock=clock
        )
        self.transport = transport if transport is not None else self._default_transport()

    def _default_transport(self) -> Any:
        raise NotImplementedError

    @property
    def config(self) -> StreamGuardConfig:
        return self.upstream.config

    @property
    def skipped(self) -> Counter[str]:
        """The responses not watched, by reason."""
        return self.upstream.skipped

    @property
    def internal_errors(self) -> int:
        """How many failures inside streamguard were contained."""
        return self.upstream.internal_errors

    @property
    def in_flight(self) -> int:
        """The number of watched streams open, or ended and still handing their report
        to the sinks: at zero, every stream's report has been delivered."""
        return len(self.upstream.open_streams)


class GuardedTransport(_GuardedBase):
    """``handle_request`` that watches the event streams of the wrapped transport."""

    def _default_transport(self) -> Any:
        return self._flavour.sync_transport()

    def handle_request(self, request: Any) -> Any:
        upstream = self.upstream
        started_at = upstream.clock()
        response = self.transport.handle_request(request)
        return upstream.watch(request, response, started_at, sync=True)

    def close(self) -> None:
        self.upstream.report_open_streams("reported when the transport closed")
        self.transport.close()


class AsyncGuardedTransport(_GuardedBase):
    """``handle_async_request`` that watches the event streams of the wrapped transport."""

    def _default_transport(self) -> Any:
        return self._flavour.async_transport()

    async def handle_async_request(self, request: Any) -> Any:
        upstream = self.upstream
        started_at = upstream.clock()
        response = await self.transport.handle_async_request(request)
        return upstream.watch(request, response, started_at, sync=False)

    async def aclose(self) -> None:
        self.upstream.report_open_streams("reported when the transport closed")
        await self.transport.aclose()


def _head(raw: Iterable[tuple[bytes, bytes]]) -> tuple[str | None, str | None, str | None]:
    """The first Content-Type, Content-Length and Content-Encoding values, as the
    middleware reads them."""
    found: dict[bytes, str] = {}
    for name, value in raw:
        name = name.lower()
        if name in _HEAD_NAMES and name not in found:
            found[name] = value.decode("latin-1")
    return (
        found.get(b"content-type"),
        found.get(b"content-length"),
        found.get(b"content-encoding"),
    )


_HEAD_NAMES = frozenset({b"content-type", b"content-length", b"content-encoding"})


def _media_type(content_type: str) -> str:
    return content_type.partition(";")[0].strip().lower()


def _upstream_metrics(metrics: object) -> StreamGuardMetrics | None:
    """The transports' metrics: the process-wide ``streamguard_upstream_*`` by default."""
    if metrics is False:
        return None
    if metrics is None:
        return StreamGuardMetrics.default(namespace=UPSTREAM_NAMESPACE)
    if isinstance(metrics, StreamGuardMetrics):
        return metrics  # its own namespace: the caller chose where upstream streams go
    if isinstance(metrics, CollectorRegistry):
        return StreamGuardMetrics.default(metrics, UPSTREAM_NAMESPACE)
    raise TypeError(
        "metrics must be a StreamGuardMetrics, a CollectorRegistry, None or False, "
        f"not {type(metrics).__name__}"
    )


def _initial_labels(config: StreamGuardConfig) -> list[tuple[str, str]]:
    """The (route, protocol) labels of the configured routes, as their streams will carry
    them (a route left to auto-detection whose path names a protocol is labelled with it)."""
    labels = []
    for key, spec in config.routes.items():
        protocol = spec.protocol
        by_path = protocol_for_path(key) if protocol == AUTO else None
        if by_path is not None and by_path in CHECKERS:
            protocol = by_path
        labels.append((spec.name or key, protocol))
    return labels


def _is_cancellation(exc: BaseException) -> bool:
    """asyncio's or trio's cancellation."""
    return isinstance(exc, asyncio.CancelledError) or type(exc).__name__ == "Cancelled"
