"""The ``send`` the middleware hands the app: a body message's whole path, compiled.

Most messages of a watched stream are body messages with more to come, each fed to the
stream's monitor and handed to the server. ``Forward`` takes those itself, so that in the
compiled build a frame runs no interpreted code of streamguard's: its calls into the
monitor are direct calls within the compiled core (this module is one of it), not calls
through Python's API. Every other message (the response head, the body's end, a message
after it, anything a monitor declines: ``StreamMonitor.feed_body`` says which) goes to
the exchange's ``send_other`` (``streamguard.middleware``), which decides, feeds and ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from streamguard._faults import is_cancellation
from streamguard.report import Finding

__all__ = ["Exchange", "Forward", "Monitored"]


class Monitored(Protocol):
    """What ``Forward`` asks of a stream's monitor (``StreamMonitor``)."""

    def feed_body(self, message: object) -> Sequence[Finding] | None:
        """Feed a body message with more to come; ``None`` for any other message."""

    def delivered(self) -> None:
        """The last body message fed reached the server."""


class Exchange(Protocol):
    """What ``Forward`` asks of the request it forwards for (``middleware._Exchange``)."""

    async def send_other(self, message: Any) -> None:
        """Forward any message but a body message the monitor took."""

    def emit(self, found: Sequence[Finding]) -> None:
        """Hand findings to the stream's sinks."""

    def fail(self, where: str, error: BaseException) -> None:
        """Count a failure inside streamguard and stop checking the stream."""


class Forward:
    """The app's ``send``: feeds a watched stream's body messages to its monitor, in the
    order sent, then hands each to the server's ``send`` unchanged."""

    def __init__(self, exchange: Exchange, send: Callable[[Any], Awaitable[None]]) -> None:
        self._exchange = exchange
        self._send = send
        #: The stream's monitor once the response head made it one worth watching.
        self.monitor: Monitored | None = None
        #: Whether the client was seen leaving (``http.disconnect``, or ``OSError`` from
        #: the server's ``send``, ASGI spec 2.4): what is sent from then on is not delivered.
        self.disconnected = False

    async def __call__(self, message: Any) -> None:
        monitor = self.monitor
        if monitor is not None:
            try:
                found = monitor.feed_body(message)
            except BaseException as exc:
                # A checker may be a plugin's, which may raise anything: all but the task's
                # cancellation is contained (docs/plugins.md, "The boundary").
                if is_cancellation(exc):
                    raise
                found = ()
                self._exchange.fail("check", exc)
            if found is not None:
                if found:
                    self._exchange.emit(found)
                try:
                    await self._send(message)
                except OSError:
                    self.disconnected = True
                    raise
                # A server may drop sends after a disconnect without raising (uvicorn
                # does): what was sent after the client left did not reach it.
                if not self.disconnected:
                    monitor.delivered()
                return
        await self._exchange.send_other(message)
