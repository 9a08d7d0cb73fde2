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

What is the same at every seam (which responses are event streams, the sinks, how an end
is classified, failing open) is ``streamguard._session``'s: the per-request object here,
``_Exchange``, is a ``StreamSession`` that also wraps ``receive`` and ``send``; the app's
``send`` is a ``Forward`` of it (``streamguard._forward``, compiled with the core), which
feeds a body message to the monitor and hands it to the server with no coroutine of
streamguard's, and sends every other message through the exchange.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import sys
import time
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio.to_thread
from prometheus_client import CollectorRegistry
from pydantic_core import PydanticCustomError, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from streamguard import _session
from streamguard._faults import is_cancellation
from streamguard._forward import Forward, Link
from streamguard._session import (
    DOWNSTREAM,
    Seam,
    Side,
    StreamSession,
    classify_end,
    configure,
    current_task,
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
from streamguard.metrics import StreamGuardMetrics
from streamguard.monitor import FEED_WINDOW, Clock, StreamEnd, StreamMonitor, open_monitor
from streamguard.report import StreamReport
from streamguard.request import RequestFacts, add_http_facts, request_facts
from streamguard.sinks import ReportCallback, Sink

if TYPE_CHECKING:
    from streamguard.captures import CaptureStore

__all__ = ["ReportCallback", "StreamGuardMiddleware"]


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
    * ``clock``: the monotonic clock, for tests (and the captures' rate);
    * ``capture_store``: where the captures of failed streams go (``capture``), in place
      of its directory: a ``streamguard.captures.CaptureStore`` or a callable
      ``(capture_id, data)``, run on the captures' writer thread.

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
        checking_budget_ms: float | None = None,
        zero_series_at_start: bool | None = None,
        exemplars: bool | None = None,
        capture: CaptureConfig | Mapping[str, Any] | None = None,
        metrics: StreamGuardMetrics | CollectorRegistry | Literal[False] | None = None,
        on_report: ReportCallback | None = None,
        sinks: Sequence[Sink] = (),
        clock: Clock = time.monotonic,
        capture_store: CaptureStore | Callable[[str, bytes], None] | None = None,
    ) -> None:
        # Every field of the configuration is a keyword here (a test keeps them in step).
        config = configure(config, locals())
        self.app = app
        self.config = config
        self.on_report = on_report
        self.clock = clock
        self.metrics = _resolve_metrics(metrics)
        #: The watched streams still open, so that shutdown can report them: a server
        #: that re-raises SIGTERM (uvicorn) ends the process before cancelled tasks run.
        self.open_streams: set[StreamSession] = set()
        self._seam = seam = Seam(
            config,
            clock,
            self.metrics,
            sinks=sinks,
            on_report=on_report,
            open_streams=self.open_streams,
            captures=True,
            capture_store=_capture_store(capture_store),
        )
        #: The captures of failed streams (``streamguard.captures``), when configured.
        self.captures = seam.captures
        self.skipped: Counter[str] = seam.skipped
        self.poll_interval = seam.poll_interval
        self._sweepers = seam.sweepers
        #: Where findings and reports go, in this order; ``on_report`` comes last.
        self.sinks: tuple[Sink, ...] = seam.sinks
        _at_exit.add(self)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                receive = self._lifespan_receive(receive)
            await self.app(scope, receive, send)
            return
        if scope.get("method") == "HEAD":  # (the seam's reason; decided before the app runs)
            self.skipped["head"] += 1
            await self.app(scope, receive, send)
            return
        exchange = _Exchange(self._seam, scope, receive, send)
        # The app's code, and the tasks it starts, see this request's exchange: a
        # streamguard transport its HTTP client reads through links the upstream streams
        # to it (``streamguard._session.link_upstream``; ``docs/attribution.md``).
        # Only once a transport exists in the process (``_session.LINKING``): setting a
        # context variable costs every request's context about 120 bytes for its whole
        # life (an idle stream's budget is 2 KiB), which an app with no transport to link
        # never pays. No ``Token`` is kept (it would cost as much again): the app's context
        # is the request's own (a server runs each request in a task of its own), and the
        # variable is cleared when the app is done.
        if _session.LINKING.enabled:  # (no local: the coroutine frame lives as long)
            DOWNSTREAM.set(exchange)
            # A task the app leaves running copies the context too: only the upstream
            # streams of tasks the app awaited are the request's (``_session.Relay``).
            exchange.app_task = current_task()
        try:
            # The exchange is the app's ``receive`` (see ``_Exchange.__call__``); a
            # ``Forward`` of it is the app's ``send``.
            await self.app(scope, exchange, Forward(exchange, send, exchange.link))
        except BaseException as exc:
            exchange.app_ended(exc)
            raise
        finally:
            if _session.LINKING.enabled:
                DOWNSTREAM.set(None)
        exchange.app_ended()

    @property
    def in_flight(self) -> int:
        """The number of watched streams open, or ended and still handing their report
        to the sinks: at zero, every stream's report has been delivered."""
        return len(self.open_streams)

    @property
    def internal_errors(self) -> int:
        """How many failures inside streamguard were contained: one per stream at most for
        its checking and sinks, plus one per plugin hook (a request reader, a detection
        signal) that raised on a request."""
        return self._seam.errors.count

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
                    self._seam.errors(sink.name, exc, UNKNOWN_ROUTE, "unknown")

    def report_open_streams(self) -> None:
        """Report every stream still open as ``cancelled`` (at server shutdown and at
        interpreter exit; the streams' own ends are then no-ops)."""
        self._seam.end_open_streams(
            StreamEnd.CANCELLED, "reported at server shutdown, before the stream ended"
        )

    def route_for(self, scope: Scope) -> tuple[str | None, RouteConfig | None]:
        """The route label and configuration of a request; never raises, never a raw path.

        A configured route matches by exact path first, then by the route template that
        Starlette/FastAPI routing left in ``scope["route"]``. The label of an unconfigured
        route is its template, or ``None`` when there is none.
        """
        return _route_for(self.config, scope)


class _Exchange(StreamSession):
    """One HTTP request through the middleware: the ``receive`` and ``send`` the app is
    given, what the request asked for, and, once its response is an event stream worth
    watching, that stream's session (its monitor is then set)."""

    __slots__ = (
        "_late_body_is_a_bug",
        "_peeking",
        "_receive",
        "_request",
        "_request_body",
        "_scope",
        "_send",
        "decided",
        "link",
        "started_at",
    )

    _seam: Seam  # never offline

    def __init__(self, seam: Seam, scope: Scope, receive: Receive, send: Send) -> None:
        super().__init__(seam)
        self._scope = scope
        self._receive = receive
        self._send = send
        #: What this exchange and the app's ``send``, its ``Forward``, both read: a watched
        #: stream's body messages go from there to the monitor and the server, every
        #: other message comes here (``send``).
        self.link = Link()
        self.started_at = seam.clock()
        #: Whether the response head went by (the watching was decided on it).
        self.decided = False
        #: Whether a body message now would be the app's bug (``body_after_end``): only
        #: after the app ended the body itself, and reported once.
        self._late_body_is_a_bug = False
        #: Whether the request body the app reads is still to be reduced to its facts.
        self._peeking = seam.config.request_peek_bytes > 0
        #: A JSON request body that came in several messages, while it arrives (up to
        #: ``request_peek_bytes``); reduced to its facts, and dropped, by its last message.
        self._request_body: bytearray | None = None
        #: The facts of the body read, and the note saying why they are unknown, if so.
        self._request: tuple[RequestFacts | None, str | None] | None = None

    async def receive(self) -> Message:
        message = await self._receive()
        self.received(message)
        return message

    #: The app's ``receive`` is the exchange itself, not a bound method: one object fewer
    #: held for the whole life of every stream (an idle one costs at most 2 KiB). Calling
    #: an instance costs 0.16 µs more than calling a bound method (Python's slot call
    #: builds an argument tuple and looks ``__call__`` up), paid once or twice a request.
    __call__ = receive

    @property
    def disconnected(self) -> bool:
        """Whether the client was seen leaving (``http.disconnect``, or ``OSError`` from
        send); held by the ``Link``, which the ``Forward`` reads on every body message."""
        return self.link.disconnected

    @disconnected.setter
    def disconnected(self, value: bool) -> None:
        self.link.disconnected = value

    def received(self, message: Message) -> None:
        """The app received ``message``: note a disconnect, read a request body."""
        kind = message["type"]
        if kind == "http.request":
            if self._peeking:
                try:
                    self._peek_request(message)
                except BaseException as exc:  # (a plugin's request reader may raise anything)
                    if is_cancellation(exc):
                        raise
                    self._stop_peeking("reading the request body failed: request checks skipped")
                    self._seam.errors("receive", exc, self.route, "unknown")
        elif kind == "http.disconnect":
            self.disconnected = True

    async def send(self, message: Message) -> None:
        """Forward ``message``: every message ``Forward`` does not hand over itself (the
        response head, deciding whether the stream is watched; the body's end; a message
        after it; a body message the monitor declines, or every one when the monitor is not
        the core's own, a test's stand-in).

        A body message is fed here as ``StreamSession.feed`` would, before it is forwarded,
        and it counts as delivered once the server took it (``delivered``).
        """
        monitor = self.monitor
        body_ended = False
        if monitor is not None:
            if message["type"] == "http.response.body":
                if monitor.report is not None:
                    if self._late_body_is_a_bug:
                        self._after_end(monitor, message)
                else:
                    body_ended = not message.get("more_body", False)
                    if monitor.internal_error is None:
                        # ``StreamSession.feed``, inlined (the last body message, or one
                        # that is not ``bytes`` or is longer than a window).
                        try:
                            data = message.get("body", b"")
                            if type(data) is not bytes:  # a memoryview or bytearray is valid
                                data = bytes(data)
                            if self.capture is not None and data:
                                self.capture.recorder.add(data, self._seam.clock())
                            found = (
                                monitor.feed(data)
                                if len(data) <= FEED_WINDOW
                                else monitor.feed(data, self.emit)
                            )
                            if found:
                                self.emit(found)
                        except BaseException as exc:  # (as above)
                            if is_cancellation(exc):
                                raise
                            self.fail("check", exc)
            elif message["type"] == "http.response.pathsend":
                body_ended = True
                monitor.stop_inspecting()
        elif not self.decided and message["type"] == "http.response.start":
            self.decided = True
            try:
                self._decide(message)
            except BaseException as exc:  # (a plugin's checker is built here)
                if is_cancellation(exc):
                    raise
                self.fail("decide", exc)  # counted; a stream already open is reported
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
            if body_ended and monitor is not None and self.disconnected and is_cancellation(exc):
                monitor.delivered()
                self.end(classify_end(Side.SERVER, body_ended=True))
            raise
        if monitor is not None:
            # A server may drop sends after a disconnect without raising (uvicorn does):
            # what was sent after the client left did not reach it.
            if not self.disconnected:
                monitor.delivered()
            if body_ended:
                self._late_body_is_a_bug = True
                self.end(
                    classify_end(
                        Side.SERVER,
                        body_ended=not self.disconnected,
                        client_left=self.disconnected,
                    )
                )

    def end(
        self,
        end: StreamEnd,
        cause: BaseException | None = None,
        *,
        note: str | None = None,
        server_stopping: bool = False,
    ) -> StreamReport | None:
        """``StreamSession.end``; a body the app ended while the server was shutting down
        says so on its report (``BODY_ENDED_AT_SHUTDOWN``).

        The outcome stays what the client got: sse-starlette ends its open streams' bodies
        at shutdown from 3.7.1 on, and a client then sees a stream that ended, ``completed``
        for plain SSE, and an answer without its terminal (``[DONE]``), ``unclosed`` with
        ``missing_terminal``, for a protocol that has one: its SDK cannot tell the answer
        was cut. The note tells a deploy's cuts from the app's own (docs/reliability.md).
        """
        if (
            end is StreamEnd.BODY_ENDED
            and note is None
            and self.monitor is not None
            and self.monitor.report is None
            and _server_is_stopping()
        ):
            note = BODY_ENDED_AT_SHUTDOWN
        return StreamSession.end(self, end, cause, note=note, server_stopping=server_stopping)

    def app_ended(self, error: BaseException | None = None) -> None:
        """The app returned, or raised ``error``: end the stream if it is still open.

        The request is over: a report held for upstream streams still open goes now, with
        the ``upstream_left_open`` finding (``streamguard._session.Relay``)."""
        if self.relay is not None:
            self.relay.app_returned()
        self.app_task = None  # no upstream stream links to the request from now on
        monitor = self.monitor
        if monitor is None or monitor.report is not None:
            return
        end = classify_end(Side.SERVER, error, client_left=self.disconnected)
        self.end(end, server_stopping=end is StreamEnd.APP_RETURNED and _server_is_stopping())

    # -- deciding -----------------------------------------------------------------------

    def _decide(self, message: Message) -> None:
        seam = self._seam
        config = seam.config
        scope = self._scope
        path = scope.get("path", "")
        headers = message.get("headers", ())
        head = read_head(message["status"], headers)
        route = seam.watched_route(
            scope.get("method"), head, path, lambda: _route_for(config, scope)
        )
        if route is None:
            return
        label, spec = route
        protocol = spec.protocol if spec is not None else config.protocol
        request, note = self._request_facts()
        request = add_http_facts(request, scope.get("method"), scope.get("headers", ()))
        monitor = open_monitor(
            protocol,
            request=request,
            path=path,
            headers=headers,
            route=label or UNKNOWN_ROUTE,
            started_at=self.started_at,
            confirms_delivery=True,  # a terminal counts once its message reached the server
            **seam.monitor_settings(spec),
        )
        if note is not None:
            monitor.add_note(note)
        self.start(
            monitor,
            label or UNKNOWN_ROUTE,
            protocol,
            head,
            spec=spec,
            request_headers=scope.get("headers", ()),
        )
        capturing = seam.capture_for(spec)
        if capturing is None:
            self.link.watch(monitor)
        else:
            # Recorded here, in ``send``: the ``Forward``'s path stays the one of the
            # streams that are not captured, which pay nothing for captures.
            from streamguard.captures import StreamCapture

            self.capture = StreamCapture(capturing, request)

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
        limit = self._seam.config.request_peek_bytes
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
        config = self._seam.config
        if config.is_excluded(self._scope.get("path", "")):
            return False
        return config.watch_unlisted or _route_for(config, self._scope)[1] is not None

    def _reduce_request(self, body: bytes | bytearray) -> None:
        self._request = request_facts(body, self._seam.config.request_peek_bytes)
        self._seam.count_reader_faults(self._request[0], self.route, "unknown")
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

    def _after_end(self, monitor: StreamMonitor, message: Message) -> None:
        """A body message after the body ended: the app's bug, reported once per stream."""
        self._late_body_is_a_bug = False
        try:
            data = message.get("body", b"")
            self.emit((monitor.after_end(data),))
        except Exception as exc:
            self.fail("check", exc)


def _capture_store(
    store: CaptureStore | Callable[[str, bytes], None] | None,
) -> CaptureStore | None:
    """A store as given, or a callable as a ``CallbackStore``."""
    if store is None or hasattr(store, "write"):
        return cast("CaptureStore | None", store)
    from streamguard.captures import CallbackStore

    return CallbackStore(store)


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


#: The note on the report of a stream whose body the app ended while the server was
#: shutting down (sse-starlette 3.7.1 and later end their open streams so).
BODY_ENDED_AT_SHUTDOWN = "the body ended while the server was shutting down"


# ``signal.getsignal`` without its wrapper, which tries to make the handler a ``Handlers``
# member and, for uvicorn's (a bound method), raises and catches a ``ValueError``: 3 us at
# every stream's end. ``_signal`` is the C module ``signal`` wraps (typeshed has no stub).
try:
    from _signal import getsignal as _raw_getsignal  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover (CPython has it)
    _raw_getsignal = signal.getsignal


def _server_is_stopping() -> bool:
    """Whether the server is shutting down; never raises.

    No ASGI message says so before the open streams end (the lifespan's shutdown comes
    after them), so the servers' own flags are read: uvicorn's ``Server.should_exit``,
    through its SIGTERM handler (a bound method of the server), and sse-starlette's
    ``AppStatus.should_exit``. These are the flags sse-starlette itself watches to end
    its streams at shutdown.
    """
    try:
        server = getattr(_raw_getsignal(signal.SIGTERM), "__self__", None)
        if getattr(server, "should_exit", False) is True:
            return True
        sse = sys.modules.get("sse_starlette.sse")
        status = getattr(sse, "AppStatus", None)
        return getattr(status, "should_exit", False) is True
    except Exception:
        return False
