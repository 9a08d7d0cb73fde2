"""Reading a streamed response the way a client does, and checking it on the way.

``collect`` (sync) and ``acollect`` (async) read an httpx streaming response's raw body
bytes (``iter_raw``: exactly what came over the wire, nothing decoded) chunk by chunk and
feed each chunk, as it arrives, to a ``StreamMonitor`` (the checking engine the middleware
uses), which hands back each event it dispatches; the record keeps them with their arrival
times. So the record and its report agree with what the middleware sees on the server side.
A response that is not checked (not a 2xx event stream, or compressed) has no events.

What only the client can see is recorded too: the status and headers (checked with the
middleware's HTTP hygiene rules), and whether the body ended cleanly. A connection lost
before the body ends (a server crash, a proxy cut) is reported as ``response_not_finished``
with the transport error's type, and the outcome is ``connection_lost``; a read timeout is the
client giving up: a ``stalled`` finding and the outcome ``client_disconnect``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamguard._session import Side, StreamSession, classify_end, not_an_event_stream, read_head
from streamguard.config import TimerConfig
from streamguard.monitor import StreamEnd, StreamMonitor
from streamguard.protocols import AUTO, CHECKERS, PlainSSEChecker, request_facts_read_by
from streamguard.protocols._base import Transcript
from streamguard.report import Finding, Outcome, StreamReport
from streamguard.request import add_http_facts, request_facts
from streamguard.sse import DEFAULT_MAX_EVENT_BYTES, Event

#: The largest request body read for request-aware checks, as the middleware's default.
MAX_REQUEST_BYTES = 1024 * 1024

if TYPE_CHECKING:
    import httpx

__all__ = ["CollectedStream", "ReceivedEvent", "acollect", "collect", "collect_bytes"]


@dataclass(frozen=True, slots=True)
class ReceivedEvent:
    """One SSE event as the client received it.

    The first five fields are those of ``streamguard.Event``; ``index`` counts events from
    0 and ``at`` is the ``time.monotonic()`` reading when the chunk that completed the event
    arrived.
    """

    event: str
    data: str
    id: str | None
    retry: int | None
    offset: int
    index: int
    at: float


@dataclass(frozen=True, slots=True)
class CollectedStream:
    """What arrived on one streamed response, and streamguard's report on it.

    ``texts`` holds the generated text by choice (OpenAI Chat) or candidate (Gemini)
    index; Anthropic, Responses and plain SSE have one text. ``text`` is the first one.
    ``deltas`` counts the events that carried text. ``finish_reasons`` are the protocol's
    own values in arrival order: Chat ``finish_reason``, Anthropic ``stop_reason``, Gemini
    ``finishReason``, Responses the terminal ``status`` (or the ``incomplete_details``
    reason). ``terminal`` says whether the protocol's terminal signal arrived;
    ``body_ended`` whether the body ended cleanly (``error`` names the exception's type and
    says why not: the connection was lost, or the client stopped waiting).
    """

    status_code: int | None
    content_type: str | None
    body: bytes
    events: tuple[ReceivedEvent, ...]
    texts: tuple[str, ...]
    deltas: int
    finish_reasons: tuple[str, ...]
    terminal: bool
    body_ended: bool
    error: str | None
    report: StreamReport

    @property
    def text(self) -> str:
        """The joined text of the first choice or candidate ("" when none arrived)."""
        return self.texts[0] if self.texts else ""

    @property
    def protocol(self) -> str:
        return self.report.protocol

    @property
    def outcome(self) -> Outcome:
        return self.report.outcome

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.report.findings

    @property
    def is_event_stream(self) -> bool:
        """A 2xx ``text/event-stream`` response (always true for bytes checked offline)."""
        if self.status_code is None:
            return True
        return not_an_event_stream(self.status_code, self.content_type) is None


class _Collector(StreamSession):
    """An offline stream session (no sinks; a failure in checking is the test's, raised)
    that keeps what arrived: the body, and each event with its arrival time."""

    __slots__ = ("_body", "_events", "_now", "content_type", "status_code")

    def __init__(
        self,
        protocol: str,
        request: Mapping[str, Any] | None,
        path: str | None,
        max_event_bytes: int,
        started_at: float | None,
        timers: TimerConfig | None = None,
    ) -> None:
        super().__init__(None)
        # One clock reading per chunk, shared by the monitor and the event times.
        self._now = time.monotonic()
        self._events: list[ReceivedEvent] = []
        self.monitor = StreamMonitor(
            protocol,
            request=request,
            path=path,
            clock=self._clock,
            started_at=started_at,
            max_event_bytes=max_event_bytes,
            liveness=None if timers is None else timers.limits(),
            on_event=self._received,
        )
        self._body: list[bytes] = []
        self.status_code: int | None = None
        self.content_type: str | None = None

    def _clock(self) -> float:
        return self._now

    def _received(self, event: Event, index: int) -> None:
        self._events.append(ReceivedEvent(*event, index, self._now))

    def headers(self, status_code: int, headers: Iterable[tuple[bytes, bytes]]) -> None:
        """Apply the middleware's HTTP checks to the response head (raw header pairs)."""
        monitor = self.monitor
        assert monitor is not None  # set at construction
        head = read_head(status_code, headers)
        self.status_code = status_code
        self.content_type = head.content_type
        if not_an_event_stream(status_code, head.content_type) is not None:
            monitor.stop_inspecting()
            monitor.add_note(
                f"not an event stream (HTTP {status_code}, content-type "
                f"{self.content_type!r}): the body was not checked"
            )
            return
        monitor.check_head(head.content_type or "", head.content_length, head.content_encoding)

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        self._now = time.monotonic()
        self._body.append(chunk)
        super().feed(chunk)

    def finish(
        self,
        error: BaseException | None = None,
        timeouts: type[BaseException] | tuple[type[BaseException], ...] = (),
    ) -> CollectedStream:
        """The record, once the read ended: to the body's end, or by the transport
        ``error`` that cut it (one of ``timeouts``: the client stopped waiting)."""
        monitor = self.monitor
        assert monitor is not None  # set at construction
        self._now = time.monotonic()
        end = classify_end(Side.CLIENT, error, body_ended=error is None, timeouts=timeouts)
        report = self.end(end, error)
        assert report is not None  # ended here, once
        texts, deltas, finish_reasons = _extract(report.protocol, self._events)
        return CollectedStream(
            status_code=self.status_code,
            content_type=self.content_type,
            body=b"".join(self._body),
            events=tuple(self._events),
            texts=texts,
            deltas=deltas,
            finish_reasons=finish_reasons,
            terminal=monitor.terminal_seen,
            body_ended=error is None,
            error=None if error is None else f"{type(error).__name__}: {_WHY_NOT[end]}",
            report=report,
        )


#: Why the body did not end, by how the read ended (the exception's own text is not shown).
_WHY_NOT = {
    StreamEnd.CONNECTION_LOST: "the connection was lost before the body ended",
    StreamEnd.READ_TIMEOUT: "the client stopped waiting for the rest of the body",
}


def collect(
    response: httpx.Response,
    *,
    protocol: str = AUTO,
    request: Mapping[str, Any] | None = None,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    started_at: float | None = None,
    timers: TimerConfig | None = None,
) -> CollectedStream:
    """Read a sync httpx streaming response to its end and return what arrived.

    Use it inside ``with client.stream(...) as response:``. ``request`` is the JSON request
    for request-aware checks; by default the body of ``response.request`` is used when it
    is a JSON object (or a JSON-RPC batch), with its method and ``Last-Event-ID`` header
    (MCP tells a POST's stream from a GET's). ``started_at`` (a ``time.monotonic()``
    reading) is when the request was sent, for timings; by default, when ``collect`` is
    called. A transport error while reading (the connection cut, a read timeout) ends the
    record instead of propagating.
    For a response of an ``httpx.AsyncClient``, use ``await acollect(response)``.
    ``timers`` (e.g. ``TimerConfig()``, the middleware's ``timers``) also judges the
    arrival times at the end:
    ``stalled``, ``body_not_ended`` and ``buffered_flush``, as the middleware does.
    """
    import httpx

    if not isinstance(response.stream, httpx.SyncByteStream):
        raise TypeError("collect() needs a sync response; use `await acollect(response)`")
    collector = _start(response, protocol, request, max_event_bytes, started_at, timers)
    try:
        for chunk in response.iter_raw():
            collector.feed(chunk)
    except httpx.TransportError as exc:
        return collector.finish(exc, httpx.TimeoutException)
    return collector.finish()


async def acollect(
    response: httpx.Response,
    *,
    protocol: str = AUTO,
    request: Mapping[str, Any] | None = None,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    started_at: float | None = None,
    timers: TimerConfig | None = None,
) -> CollectedStream:
    """``collect`` for a response of an ``httpx.AsyncClient`` (``async with client.stream``)."""
    import httpx

    if not isinstance(response.stream, httpx.AsyncByteStream):
        raise TypeError("acollect() needs an async response; use collect(response)")
    collector = _start(response, protocol, request, max_event_bytes, started_at, timers)
    chunks: AsyncIterator[bytes] = response.aiter_raw()
    try:
        async for chunk in chunks:
            collector.feed(chunk)
    except httpx.TransportError as exc:
        return collector.finish(exc, httpx.TimeoutException)
    return collector.finish()


def collect_bytes(
    chunks: bytes | Iterable[bytes],
    *,
    protocol: str = AUTO,
    request: Mapping[str, Any] | None = None,
    path: str | None = None,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
) -> CollectedStream:
    """The record for captured body bytes (one ``bytes`` or an iterable of chunks)."""
    collector = _Collector(protocol, request, path, max_event_bytes, None)
    for chunk in [chunks] if isinstance(chunks, bytes) else chunks:
        collector.feed(chunk)
    return collector.finish()


def _start(
    response: httpx.Response,
    protocol: str,
    request: Mapping[str, Any] | None,
    max_event_bytes: int,
    started_at: float | None,
    timers: TimerConfig | None,
) -> _Collector:
    if request is None:
        request = _request_json(response, protocol)
    collector = _Collector(
        protocol, request, response.request.url.path, max_event_bytes, started_at, timers
    )
    collector.headers(response.status_code, response.headers.raw)
    return collector


def _request_json(response: httpx.Response, protocol: str) -> Mapping[str, Any] | None:
    """The facts of the request sent: its method and ``Last-Event-ID``, and its JSON body's
    when it is one and was not streamed (those ``protocol`` reads; all under ``"auto"``)."""
    import httpx

    request = response.request
    try:
        content = request.content
    except httpx.RequestNotRead:
        facts = None
    else:
        facts, _why_not = request_facts(content, MAX_REQUEST_BYTES, request_facts_read_by(protocol))
    return add_http_facts(facts, request.method, request.headers.raw)


# -- what the events say, per protocol ----------------------------------------------------


def _extract(
    protocol: str, events: Iterable[Event | ReceivedEvent]
) -> tuple[tuple[str, ...], int, tuple[str, ...]]:
    """Text by choice, the number of events that carried text, and the finish reasons:
    each protocol's checker knows what its events say (``Checker.transcribe``)."""
    out = Transcript()
    transcribe = CHECKERS.get(protocol, PlainSSEChecker).transcribe
    for event in events:
        out.deltas += transcribe(event.data, out)
    return out.texts(), out.deltas, tuple(out.finish_reasons)
