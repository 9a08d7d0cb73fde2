"""The one implementation behind ``streamguard.httpx`` and ``streamguard.httpx2``.

httpx2's transport API mirrors httpx's, class for class, so everything lives here once and
each public module only binds it to its own classes (``ClientLibrary``): the body wrappers
subclass that module's ``SyncByteStream`` / ``AsyncByteStream`` (its client checks the
type) and the transports its ``BaseTransport`` / ``AsyncBaseTransport``. What every seam
does with a stream (the session: start, feed, end, the sinks) is ``streamguard._session``'s.

Theory of operation
-------------------

``handle_request`` forwards the request to the wrapped transport and looks at the response
head it returns: a 2xx ``text/event-stream`` response to a request that is not ``HEAD``,
whose path is not excluded and whose route is watched (``Seam.watched_route``), gets a
``StreamMonitor`` and a session, and its ``response.stream`` is replaced by a wrapper
(``TappedBody``) that feeds every chunk to the session and then yields the same object,
unchanged, as the caller asks for it. Nothing is read ahead, held back, or copied: the
caller's reads drive everything, so checking happens at the pace the caller reads and
costs nothing while it does not.

How the read ends decides the ``StreamEnd`` (``classify_end``, from the client's side):

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

import re
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from prometheus_client import CollectorRegistry

from streamguard._faults import is_cancellation
from streamguard._session import (
    LINKING,
    Seam,
    Side,
    StreamSession,
    classify_end,
    configure,
    link_upstream,
    read_head,
)
from streamguard.config import (
    UNKNOWN_ROUTE,
    CaptureConfig,
    LogConfig,
    RouteConfig,
    StreamGuardConfig,
    TimerConfig,
)
from streamguard.metrics import UPSTREAM_NAMESPACE, StreamGuardMetrics
from streamguard.monitor import Clock, StreamEnd, open_monitor
from streamguard.protocols import request_facts_read_by
from streamguard.request import RequestFacts, add_http_facts, request_facts
from streamguard.sinks import ReportCallback, Sink

__all__ = [
    "SIDE",
    "AsyncGuardedTransport",
    "AsyncTappedBody",
    "ClientLibrary",
    "GuardedTransport",
    "TappedBody",
    "UpstreamSeam",
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
class ClientLibrary:
    """What differs between httpx and httpx2: the library's own classes."""

    read_timeout: type[BaseException]
    request_not_read: type[BaseException]
    #: The body wrappers, subclasses of the library's ``SyncByteStream`` / ``AsyncByteStream``.
    sync_body: Callable[[_SyncStream, _UpstreamSession], Any]
    async_body: Callable[[_AsyncStream, _UpstreamSession], Any]
    #: The library's standard transports, used when none is given.
    sync_transport: Callable[[], Any]
    async_transport: Callable[[], Any]


class UpstreamSeam(Seam):
    """What every stream of one transport shares (``Seam``), and how a transport finds the
    streams it watches in the responses it returns."""

    def __init__(
        self,
        library: ClientLibrary,
        config: StreamGuardConfig,
        *,
        metrics: StreamGuardMetrics | CollectorRegistry | Literal[False] | None,
        on_report: ReportCallback | None,
        sinks: Sequence[Sink],
        clock: Clock,
    ) -> None:
        super().__init__(
            config,
            clock,
            _upstream_metrics(metrics),
            sinks=sinks,
            on_report=on_report,
            # Weak: a response the caller drops unclosed (an httpx misuse) takes its session
            # with it rather than keeping it here until the transport closes; its loop's
            # sweeper then idles until the loop ends.
            open_streams=weakref.WeakSet(),
            log_side=SIDE,
        )
        self.library = library
        LINKING.enabled = True  # the middleware links its requests' streams from now on

    def route_for(self, host: str, port: int | None, path: str) -> tuple[str, RouteConfig | None]:
        """The route label and configuration of a request URL; never a raw path.

        A configured route matches by ``host:port`` + path, then host + path, then path
        alone (``"api.openai.com/v1/chat/completions"``, ``"/v1/chat/completions"``), then
        by the path's template (``upstream_template``). An unconfigured URL is labelled
        with its template, as the middleware labels an unlisted route, else ``__unknown__``:
        a client can call any URL, and a label must stay a bounded set.
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
        template = upstream_template(path)
        if template is None:
            return UNKNOWN_ROUTE, None
        spec = routes.get(template)
        return (template, None) if spec is None else (spec.name or template, spec)

    def watch(self, request: Any, response: Any, started_at: float, sync: bool) -> Any:
        """``response``, its body tapped when it is an event stream worth watching."""
        try:
            session = self._start(request, response, started_at, sync)
        except BaseException as exc:  # (a plugin's checker is built here)
            if is_cancellation(exc):
                raise
            self.errors("decide", exc, UNKNOWN_ROUTE, "unknown")
            return response
        if session is not None:
            library = self.library
            tap = library.sync_body if sync else library.async_body
            response.stream = tap(response.stream, session)
        return response

    def _start(
        self, request: Any, response: Any, started_at: float, sync: bool
    ) -> _UpstreamSession | None:
        """The started session of the response, or ``None`` (counted in ``skipped``)."""
        url = request.url
        path: str = url.path
        head = read_head(response.status_code, response.headers.raw)
        route = self.watched_route(
            request.method, head, path, lambda: self.route_for(url.host, url.port, path)
        )
        if route is None:
            return None
        label, spec = route
        protocol = spec.protocol if spec is not None else self.config.protocol
        facts, note = self._request_facts(request, protocol)
        self.count_reader_faults(facts, label or UNKNOWN_ROUTE, protocol)
        facts = add_http_facts(facts, request.method, request.headers.raw)
        monitor = open_monitor(
            protocol,
            request=facts,
            path=path,
            headers=response.headers.raw,
            route=label,
            started_at=started_at,
            confirms_delivery=False,  # (a client reads what arrived: nothing to confirm)
            **self.monitor_settings(spec),
        )
        if note is not None:
            monitor.add_note(note)
        session = _UpstreamSession(self)
        # A sync client is read on its caller's thread: no loop's sweeper polls it.
        session.start(
            monitor,
            label or UNKNOWN_ROUTE,
            protocol,
            head,
            spec=spec,
            poll=not sync,
            request_headers=request.headers.raw,
        )
        try:
            # Read for a request the middleware serves (a gateway): the two sides are linked
            # (``docs/attribution.md``).
            link_upstream(session)
        except Exception as exc:
            session.fail("link", exc)
        return session

    def _request_facts(self, request: Any, protocol: str) -> tuple[RequestFacts | None, str | None]:
        """What the request the client sent asked for (its body, when it was not streamed):
        the facts the route's ``protocol`` reads (every protocol's under ``"auto"``)."""
        limit = self.config.request_peek_bytes
        if not limit:
            return None, None
        try:
            content = request.content
        except self.library.request_not_read:
            return None, "request body streamed by the client: request checks skipped"
        return request_facts(content, limit, request_facts_read_by(protocol))


class _UpstreamSession(StreamSession):
    """A session held weakly by its transport (``UpstreamSeam.open_streams``)."""

    __slots__ = ("__weakref__",)

    _seam: UpstreamSeam  # never offline

    def read_ended(self, error: BaseException | None = None, *, to_the_end: bool = False) -> None:
        """The caller's read of the body stopped: read ``to_the_end``, or by ``error`` (the
        library's read timeout, any other exception, the caller dropping the iteration),
        or the caller closed the response (neither); a stream already ended stays so."""
        timeouts = self._seam.library.read_timeout
        self.end(classify_end(Side.CLIENT, error, body_ended=to_the_end, timeouts=timeouts), error)


class TappedBody:
    """A sync response body that shows each chunk to its stream's session, then yields it
    as is; how the caller's read ends is the stream's end."""

    def __init__(self, stream: _SyncStream, session: _UpstreamSession) -> None:
        self._stream = stream
        self._session = session

    def __iter__(self) -> Iterator[bytes]:
        session = self._session
        try:
            for chunk in self._stream:
                session.feed(chunk)
                yield chunk
        except BaseException as exc:  # GeneratorExit: the caller abandoned the iteration
            session.read_ended(exc)
            raise
        session.read_ended(to_the_end=True)

    def close(self) -> None:
        self._session.read_ended()  # nothing, if the body ended first
        self._stream.close()


class AsyncTappedBody:
    """``TappedBody`` for an async response body."""

    def __init__(self, stream: _AsyncStream, session: _UpstreamSession) -> None:
        self._stream = stream
        self._session = session

    async def __aiter__(self) -> AsyncIterator[bytes]:
        session = self._session
        try:
            async for chunk in self._stream:
                session.feed(chunk)
                yield chunk
        except BaseException as exc:
            session.read_ended(exc)
            raise
        session.read_ended(to_the_end=True)

    async def aclose(self) -> None:
        self._session.read_ended()
        await self._stream.aclose()


class _GuardedBase:
    #: Bound by each public module.
    _library: ClassVar[ClientLibrary]

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
        checking_budget_ms: float | None = None,
        zero_series_at_start: bool | None = None,
        exemplars: bool | None = None,
        capture: CaptureConfig | Mapping[str, Any] | None = None,
        metrics: StreamGuardMetrics | CollectorRegistry | Literal[False] | None = None,
        on_report: ReportCallback | None = None,
        sinks: Sequence[Sink] = (),
        clock: Clock = time.monotonic,
    ) -> None:
        # Every field of the configuration is a keyword here (a test keeps them in step).
        # ``capture`` too, so that one configuration serves both seams; a transport records
        # no capture of its own: captures are the middleware's (``streamguard.captures``).
        config = configure(config, locals())
        self.upstream = UpstreamSeam(
            self._library, config, metrics=metrics, on_report=on_report, sinks=sinks, clock=clock
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
        return self.upstream.errors.count

    @property
    def in_flight(self) -> int:
        """The number of watched streams open, or ended and still handing their report
        to the sinks: at zero, every stream's report has been delivered."""
        return len(self.upstream.open_streams)


#: The streaming endpoints of the providers' APIs, each a pattern of the whole path and
#: the template that labels it: a fixed set, so the labels stay bounded whatever URL a
#: client calls, and no variable segment (a model, a deployment, a thread id) or any
#: prefix (a proxy's mount) ever reaches a label. First match wins.
_UPSTREAM_TEMPLATES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), template)
    for pattern, template in (
        (r"/v1/chat/completions", "/v1/chat/completions"),
        (
            r"/openai/deployments/[^/]+/chat/completions",
            "/openai/deployments/{deployment}/chat/completions",
        ),
        (r"/.*/chat/completions|/chat/completions", "{prefix}/chat/completions"),
        (r"/v1/responses", "/v1/responses"),
        (r"/.+/v1/responses", "{prefix}/v1/responses"),
        (r"/v1/messages", "/v1/messages"),
        (r"/.+/v1/messages", "{prefix}/v1/messages"),
        (
            r"/v1beta/models/[^/]+:streamGenerateContent",
            "/v1beta/models/{model}:streamGenerateContent",
        ),
        (r"/v1/models/[^/]+:streamGenerateContent", "/v1/models/{model}:streamGenerateContent"),
        (
            r"/.*/models/[^/]+:streamGenerateContent",
            "{prefix}/models/{model}:streamGenerateContent",
        ),
        (r"/v2/chat", "/v2/chat"),
        (r"/threads/[^/]+/runs/stream", "/threads/{thread_id}/runs/stream"),
        (r"/threads/[^/]+/runs/[^/]+/stream", "/threads/{thread_id}/runs/{run_id}/stream"),
        (r"/runs/stream", "/runs/stream"),
        (r"/mcp", "/mcp"),
    )
)


def upstream_template(path: str) -> str | None:
    """The template of a provider's streaming endpoint that ``path`` is, else ``None``."""
    for pattern, template in _UPSTREAM_TEMPLATES:
        if pattern.fullmatch(path):
            return template
    return None


class GuardedTransport(_GuardedBase):
    """``handle_request`` that watches the event streams of the wrapped transport."""

    def _default_transport(self) -> Any:
        return self._library.sync_transport()

    def handle_request(self, request: Any) -> Any:
        upstream = self.upstream
        started_at = upstream.clock()
        response = self.transport.handle_request(request)
        return upstream.watch(request, response, started_at, sync=True)

    def close(self) -> None:
        self.upstream.end_open_streams(StreamEnd.CLIENT_DISCONNECT, _CLOSED)
        self.transport.close()


class AsyncGuardedTransport(_GuardedBase):
    """``handle_async_request`` that watches the event streams of the wrapped transport."""

    def _default_transport(self) -> Any:
        return self._library.async_transport()

    async def handle_async_request(self, request: Any) -> Any:
        upstream = self.upstream
        started_at = upstream.clock()
        response = await self.transport.handle_async_request(request)
        return upstream.watch(request, response, started_at, sync=False)

    async def aclose(self) -> None:
        self.upstream.end_open_streams(StreamEnd.CLIENT_DISCONNECT, _CLOSED)
        await self.transport.aclose()


#: Why a stream still open was reported when its transport closed: the caller leaving.
_CLOSED = "reported when the transport closed"


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
