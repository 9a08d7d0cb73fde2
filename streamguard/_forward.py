"""The ``send`` the middleware hands the app: a body message's usual path, with no coroutine.

Theory of operation
-------------------

Most messages of a watched stream are body messages with more to come. A coroutine made,
run and dropped for each of them (the middleware's ``_Exchange.send``) costs more than
the monitor's own work on a frame it has learned (issue 45). ``Forward`` is the app's
``send`` instead; it is compiled with the core, so its calls into the monitor are direct
calls in the compiled build. Called with a body message the monitor takes
(``StreamMonitor.feed_body``), it feeds it, then hands it to the server with
``_handover.hand_over``, which calls the server's ``send`` and runs the coroutine it
returns as far as it goes without waiting:

* it ran to its end (the usual case: uvicorn and hypercorn write to the transport and wait
  only when it is paused, i.e. when the client reads slowly): the message was delivered,
  the monitor is told so at once (as ``_Exchange.send`` tells it after its ``await``), and
  the app gets ``SENT``, an awaitable already done;
* it stopped to wait (back-pressure; trio's sockets on every write): the app gets a
  ``Handing``, which the app's ``await`` drives to the coroutine's end; it then tells this
  ``Forward`` (``landed``), which tells the monitor;
* the server's ``send`` raised: the app gets the exception when it awaits (``OSError``
  first marks the client gone, ASGI spec 2.4); it gave an awaitable that is not a
  coroutine: the app gets a coroutine that awaits it and then lands it.

Every other message (the response head, the body's end, any message the monitor declines,
every message of a stream not watched) goes to ``_Exchange.send``, a coroutine, which
decides, feeds and ends.

What an app could tell apart: the server's ``send`` runs when ``send`` is called, not when
what it returned is first awaited, as an eager task's first step does; so a body message
whose awaitable the app drops unawaited is still sent. The value the server's coroutine
returns is dropped: ASGI's ``send`` returns None, and so did the middleware's always.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Final, Protocol

from streamguard import _handover
from streamguard._faults import is_cancellation
from streamguard.monitor import StreamMonitor
from streamguard.report import Finding

__all__ = ["Exchange", "Forward", "Link"]

#: ``_handover``'s (bound here: a compiled module reads a ``Final`` name as a C static).
_HAND_OVER: Final = _handover.hand_over
_SENT: Final = _handover.SENT
_HANDING: Final = _handover.HANDING


class Exchange(Protocol):
    """What ``Forward`` asks of the request it forwards for (``middleware._Exchange``)."""

    def send(self, message: Any) -> Coroutine[Any, Any, None]:
        """Forward any message ``Forward`` does not take."""

    def emit(self, found: Sequence[Finding]) -> None:
        """Hand findings to the stream's sinks."""

    def fail(self, where: str, error: BaseException) -> None:
        """Count a failure inside streamguard and stop checking the stream."""


class Link:
    """What an exchange and its ``Forward`` both read: the stream's monitor and whether the
    client has gone. The ``Forward`` holds the exchange; the exchange holds this, not the
    ``Forward``, so a request's objects hold no cycle and are freed when it ends, not by
    the garbage collector."""

    def __init__(self) -> None:
        #: The stream's monitor, once the response head made it one worth watching and
        #: while it is the core's own (``watch``).
        self.monitor: StreamMonitor | None = None
        #: Whether the client was seen leaving (``http.disconnect``, or ``OSError`` from
        #: the server's ``send``, ASGI spec 2.4): what is sent from then on is not delivered.
        self.disconnected = False

    def watch(self, monitor: object) -> None:
        """Hand the body messages of ``monitor``'s stream to the ``Forward`` from now on, if
        it is a ``StreamMonitor`` (a test's stand-in is left to the exchange, which feeds
        it)."""
        if isinstance(monitor, StreamMonitor):
            self.monitor = monitor


class Forward:
    """The app's ``send``: a watched stream's body messages go to its monitor, in the order
    sent, then to the server's ``send`` unchanged; every other message to the exchange's."""

    def __init__(
        self, exchange: Exchange, send: Callable[[Any], Awaitable[None]], link: Link
    ) -> None:
        self._exchange = exchange
        self._send = send
        self._link = link

    def __call__(self, message: Any) -> Awaitable[None]:
        monitor = self._link.monitor
        if monitor is None:
            return self._exchange.send(message)
        try:
            found = monitor.feed_body(message)
        except BaseException as exc:
            # A checker may be a plugin's, which may raise anything: all but the task's
            # cancellation is contained (docs/plugins.md, "The boundary").
            if is_cancellation(exc):
                raise
            found = ()
            self._exchange.fail("check", exc)
        if found is None:
            return self._exchange.send(message)
        if found:
            self._exchange.emit(found)
        try:
            answer = _HAND_OVER(self._send, message, self)
        except BaseException as exc:
            return _handover.failed(exc)
        if answer is _SENT:
            self.landed(False)
            return _SENT
        if type(answer) is _HANDING:
            return answer
        return _handover.awaiting(answer, self)

    def landed(self, lost: bool) -> None:
        """The server took the last body message handed over (``lost`` False), or its
        ``send`` raised ``OSError`` (True: the client has gone)."""
        link = self._link
        if lost:
            link.disconnected = True
        elif not link.disconnected and link.monitor is not None:
            # A server may drop sends after a disconnect without raising (uvicorn does):
            # what was sent after the client left did not reach it.
            link.monitor.delivered()
