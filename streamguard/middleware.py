"""``StreamGuardMiddleware``: a pure ASGI middleware that watches SSE responses.

Every message passes through unchanged and in order. At ``http.response.start`` the
middleware decides whether the response is a stream worth watching (2xx,
``text/event-stream``, not HEAD, not compressed); if it is, each body message is fed to a
``StreamMonitor`` synchronously, *before* it is forwarded, so the monitor sees the bytes in
exactly the order ``send`` was called even when several tasks send (sse-starlette's ping
task does). ``receive`` is wrapped only to notice ``http.disconnect`` go by; it consumes
nothing.

Nothing streamguard does may reach the app or the client: checking code runs inside
``except Exception`` guards, a failure stops the watching of that one stream and is shown
on its report, and every exception of the app (or the server) propagates as the same
object.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from streamguard import rules
from streamguard.monitor import Clock, StreamEnd, StreamMonitor
from streamguard.protocols import AUTO, CHECKERS
from streamguard.report import Outcome, StreamReport
from streamguard.sse import DEFAULT_MAX_EVENT_BYTES

__all__ = ["ReportCallback", "StreamGuardMiddleware"]

ReportCallback = Callable[[StreamReport], None]

_logger = structlog.get_logger("streamguard")

_UTF8_NAMES = (b"utf-8", b"utf8")


class StreamGuardMiddleware:
    """Watch the SSE responses of ``app`` and report on each stream when it ends.

    ``on_report`` is called once per watched stream with its ``StreamReport``, from the
    task that sent the stream's last message. ``skipped`` counts, by reason, the HTTP
    responses that were not watched; ``in_flight`` is the number of watched streams open.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        protocol: str = AUTO,
        on_report: ReportCallback | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        clock: Clock = time.monotonic,
    ) -> None:
        if protocol != AUTO and protocol not in CHECKERS:
            known = ", ".join(sorted([AUTO, *CHECKERS]))
            raise ValueError(f"unknown protocol {protocol!r}; expected one of: {known}")
        if max_event_bytes < 1:
            raise ValueError(f"max_event_bytes must be at least 1, got {max_event_bytes!r}")
        self.app = app
        self.protocol = protocol
        self.on_report = on_report
        self.max_event_bytes = max_event_bytes
        self.clock = clock
        self.skipped: Counter[str] = Counter()
        self.in_flight = 0
        self.internal_errors = 0

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

    def _emit(self, report: StreamReport) -> None:
        if report.internal_error is not None:
            self.internal_errors += 1
        if self.on_report is not None:
            try:
                self.on_report(report)
            except Exception:
                self.internal_errors += 1
                _logger.exception("report_callback_failed", path=report.path)


class _StreamWatch:
    """The per-request state: the wrapped ``receive`` and ``send`` and the monitor."""

    __slots__ = (
        "_guard",
        "_receive",
        "_scope",
        "_send",
        "decided",
        "disconnected",
        "monitor",
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
        self.decided = False
        self.disconnected = False

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.disconnect":
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
                        monitor.feed(message.get("body", b""))
                    except Exception as exc:
                        self._internal_error(exc)
            elif message["type"] == "http.response.pathsend":
                body_ended = True
                monitor.stop_inspecting()
        elif not self.decided and message["type"] == "http.response.start":
            self.decided = True
            try:
                self._decide(message)
            except Exception as exc:
                self._guard.internal_errors += 1
                _logger.exception("watch_decision_failed", error=repr(exc))
        try:
            await self._send(message)
        except OSError:
            # ASGI spec 2.4: the server raises OSError from send once the client has gone.
            self.disconnected = True
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

    # -- internals ----------------------------------------------------------------------

    def _decide(self, message: Message) -> None:
        guard = self._guard
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
        media_type, _, parameters = content_type.partition(b";")
        if media_type.strip().lower() != b"text/event-stream":
            guard.skipped["content_type"] += 1
            return

        monitor = StreamMonitor(
            guard.protocol,
            path=self._scope.get("path"),
            clock=guard.clock,
            started_at=self.started_at,
            max_event_bytes=guard.max_event_bytes,
        )
        if content_length is not None:
            monitor.add_findings(
                [
                    rules.CONTENT_LENGTH_ON_STREAM.finding(
                        f"the event stream was sent with Content-Length: "
                        f"{content_length.decode('latin-1')!r}"
                    )
                ]
            )
        charset = _charset(parameters)
        if charset is not None and charset.lower() not in _UTF8_NAMES:
            monitor.add_findings(
                [
                    rules.BAD_CONTENT_TYPE_CHARSET.finding(
                        f"Content-Type declares charset={charset.decode('latin-1')!r}; "
                        "event streams are always UTF-8"
                    )
                ]
            )
        if content_encoding is not None and content_encoding.strip().lower() != b"identity":
            guard.skipped["content_encoding"] += 1
            monitor.stop_inspecting(
                rules.COMPRESSED_STREAM.finding(
                    f"Content-Encoding: {content_encoding.decode('latin-1')!r}; the compressed "
                    "body is passed through uninspected"
                )
            )
        self.monitor = monitor
        guard.in_flight += 1

    def _internal_error(self, exc: Exception) -> None:
        assert self.monitor is not None
        self.monitor.fail(exc)
        _logger.error("stream_check_failed", path=self._scope.get("path"), error=repr(exc))

    def _finish(self, end: StreamEnd) -> None:
        monitor = self.monitor
        if monitor is None or monitor.report is not None:
            return
        guard = self._guard
        guard.in_flight -= 1
        try:
            report = monitor.finish(end)
        except Exception as exc:
            monitor.fail(exc)
            report = _fallback_report(monitor, end)
            monitor.report = report
        guard._emit(report)


def _charset(parameters: bytes) -> bytes | None:
    for parameter in parameters.split(b";"):
        key, _, value = parameter.partition(b"=")
        if key.strip().lower() == b"charset":
            return value.strip().strip(b'"')
    return None


def _fallback_report(monitor: StreamMonitor, end: StreamEnd) -> StreamReport:
    """A report built without the checkers, for when building the real one failed."""
    outcome = {
        StreamEnd.BODY_ENDED: Outcome.COMPLETED,
        StreamEnd.APP_RETURNED: Outcome.UNCLOSED,
    }.get(end) or Outcome(end.value)
    return StreamReport(
        protocol=monitor.protocol,
        outcome=outcome,
        findings=monitor.findings,
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
    )
