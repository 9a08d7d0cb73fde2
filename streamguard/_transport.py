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
never does: it is counted (``internal_errors``), logged, and that stream is left unwatched,
as in the middleware.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import structlog

from streamguard.config import UNKNOWN_ROUTE, RouteConfig, StreamGuardConfig
from streamguard.liveness import LivenessLimits
from streamguard.monitor import Clock, StreamEnd, StreamMonitor, error_name
from streamguard.protocols import AUTO
from streamguard.report import Finding, StreamReport
from streamguard.request import RequestFacts, request_facts

__all__ = [
    "AsyncGuardedTransport",
    "AsyncWatchedStream",
    "Flavour",
    "GuardedTransport",
    "ReportCallback",
    "Upstream",
    "WatchedStream",
]

ReportCallback = Callable[[StreamReport], None]

_logger = structlog.get_logger("streamguard")


class _SyncStream(Protocol):
    def __iter__(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class _AsyncStream(Protocol):
    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Flavour:
    """What differs between httpx and httpx2: the module's own classes."""

    #: ``"httpx"`` or ``"httpx2"``, for messages.
    module: str
    read_timeout: type[BaseException]
    request_not_read: type[BaseException]
    #: The wrapper classes, subclasses of the module's ``SyncByteStream`` / ``AsyncByteStream``.
    sync_stream: Callable[[_SyncStream, _Watch], Any]
    async_stream: Callable[[_AsyncStream, _Watch], Any]
    #: The module's standard transports, used when none is given.
    sync_transport: Callable[[], Any]
    async_transport: Callable[[], Any]


class Upstream:
    """What every stream of one transport shares: the configuration, the counters and
    the open streams. Per-stream state lives in a ``_Watch``, never here."""

    def __init__(
        self,
        flavour: Flavour,
        config: StreamGuardConfig | None,
        on_report: ReportCallback | None,
        clock: Clock,
        options: dict[str, Any],
    ) -> None:
        if config is None:
            config = StreamGuardConfig(**options)
        elif options:
            raise TypeError(
                f"pass either config= or keyword options, not both (got {sorted(options)})"
            )
        self.flavour = flavour
        self.config = config
        self.on_report = on_report
        self.clock = clock
        #: The responses not watched, by reason (``status``, ``content_type``, ...).
        self.skipped: Counter[str] = Counter()
        #: Failures inside streamguard that were contained (one per stream at most).
        self.internal_errors = 0
        timers = config.timers
        self.liveness = (
            LivenessLimits(**timers.model_dump(exclude={"enabled"})) if timers.enabled else None
        )
        #: The streams still open. Weak: a response the caller drops unread takes its
        #: watch with it rather than keeping it here until the transport closes.
        self.open_streams: weakref.WeakSet[_Watch] = weakref.WeakSet()

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
            watch = self._open(request, response, started_at)
        except Exception as exc:
            self.internal_error("decide", exc, UNKNOWN_ROUTE, "unknown")
            return response
        if watch is not None:
            flavour = self.flavour
            wrap = flavour.sync_stream if sync else flavour.async_stream
            response.stream = wrap(response.stream, watch)
        return response

    def _open(self, request: Any, response: Any, started_at: float) -> _Watch | None:
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
        monitor = StreamMonitor(
            protocol,
            request=facts,
            path=path,
            route=route,
            clock=self.clock,
            started_at=started_at,
            max_event_bytes=config.max_event_bytes,
            excerpt_chars=config.logs.excerpt_chars if config.logs.content_excerpts else 0,
            liveness=self.liveness,
            json_data=spec is not None and spec.json_data,
        )
        if note is not None:
            monitor.add_note(note)
        # As in the middleware: a protocol still to be detected is labelled "auto" for
        # the whole stream, so every series of one stream carries the same labels.
        undecided = protocol == AUTO and monitor.protocol_source == "default"
        watch = _Watch(self, monitor, route, "auto" if undecided else monitor.protocol)
        self.open_streams.add(watch)
        found = monitor.check_head(content_type, content_length, content_encoding)
        if not monitor.inspecting:
            self.skipped["content_encoding"] += 1
        elif config.sample_rate < 1.0 and random.random() >= config.sample_rate:
            monitor.stop_inspecting()
            monitor.add_note("not sampled: only the outcome was recorded")
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
        """The one place a failure inside streamguard is counted and logged."""
        self.internal_errors += 1
        with contextlib.suppress(Exception):
            _logger.error(
                "streamguard_internal_error",
                where=where,
                error=error_name(exc),
                route=route,
                protocol=protocol,
                side="upstream",
            )


class _Watch:
    """One watched response: its monitor, and the hand-off of what it finds."""

    __slots__ = ("__weakref__", "_failed", "_upstream", "monitor", "protocol_label", "route")

    def __init__(
        self, upstream: Upstream, monitor: StreamMonitor, route: str, protocol_label: str
    ) -> None:
        self._upstream = upstream
        self.monitor = monitor
        self.route = route
        self.protocol_label = protocol_label
        self._failed = False

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
        """Hand findings made on the open stream to the sinks (none yet but the report)."""

    def end(self, end: StreamEnd, cause: BaseException | None = None) -> None:
        """Finish the stream once (later calls do nothing) and hand its report over."""
        monitor = self.monitor
        if monitor.report is not None:
            return
        upstream = self._upstream
        upstream.open_streams.discard(self)
        try:
            report = monitor.finish(end, cause=cause, emit=self.emit)
        except Exception as exc:
            self._internal_error("finish", exc)
            report = monitor.fallback_report(end)
        if upstream.on_report is not None:
            try:
                upstream.on_report(report)
            except BaseException as exc:
                if _is_cancellation(exc):
                    raise
                self._internal_error("on_report", exc)

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
        on_report: ReportCallback | None = None,
        clock: Clock = time.monotonic,
        **options: Any,
    ) -> None:
        self.upstream = Upstream(self._flavour, config, on_report, clock, options)
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
        """The number of watched streams open."""
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


def _is_cancellation(exc: BaseException) -> bool:
    """asyncio's or trio's cancellation."""
    return isinstance(exc, asyncio.CancelledError) or type(exc).__name__ == "Cancelled"
