"""Sinks: where what streamguard finds goes (metrics, logs, ``on_report``, your own).

The seams (the middleware, the transports) call sinks through each stream's session
(``streamguard._session``), never a specific one. A sink hears of a stream three times:
when it starts (``Sink.stream_started``, which returns the sink's handle for that stream),
when findings are made (``StreamSink.findings``, a batch at a time, never once per frame),
and when it ends (``StreamSink.stream_ended``, with the ``StreamReport``). Counts such as
frames and bytes are on the report, accumulated per stream, so no sink does work per frame.

A sink that holds what it was told, to deliver later, may also define ``drain()``: the
middleware calls it when the lifespan shuts down, on a worker thread, so that nothing is
lost when the server then ends the process (``ReportSink`` drains a ``ReportQueue``).

A sink that counts may also define ``capture_counted(result)``: the middleware calls it
for each capture of a failed stream (``streamguard.captures``: ``written``, ``failed``,
``dropped``, ``rate_limited``), from the captures' writer thread; one that raises is
skipped. The metrics and OpenTelemetry sinks do.

A sink that raises is contained, in one fan-out (``StreamSession``): the failure is counted
as an internal error, once per stream (logged with ``where=`` the sink's ``name``), and the
stream's checking stops. A sink whose ``stream_started`` raised hears nothing more of that
stream; one that raised later still gets its end, so that its own bookkeeping (an
open-streams gauge) balances. Only cancellation (asyncio's or trio's) propagates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from streamguard._faults import is_cancellation
from streamguard.report import Finding, StreamReport

__all__ = ["COMPRESSED", "NOT_SAMPLED", "ReportCallback", "ReportSink", "Sink", "StreamSink"]

#: Why a stream's frames are not checked (``unchecked``): the sample left it out ...
NOT_SAMPLED = "not_sampled"
#: ... or its body is compressed (``Content-Encoding``) and cannot be parsed.
COMPRESSED = "compressed"

ReportCallback = Callable[[StreamReport], None]


class StreamSink(Protocol):
    """A sink's handle on one stream."""

    def findings(self, found: Sequence[Finding]) -> None:
        """Findings were made on the open stream (liveness findings while it is open)."""

    def stream_ended(self, report: StreamReport) -> None:
        """The stream ended; ``report`` is final."""


class Sink(Protocol):
    """Receives every watched stream of a middleware or a transport.

    ``stream_started`` runs once per stream, at the response start, in the app's task: keep
    it cheap. Return ``None`` to hear nothing more of that stream.
    """

    #: What internal-error logs call this sink when it fails (``where=``).
    name: str

    def stream_started(self, route: str, protocol: str, unchecked: str | None) -> StreamSink | None:
        """A watched stream started on ``route`` (its label) as ``protocol`` (its label).

        ``unchecked`` is ``None`` when its frames are checked in full, else why not
        (``NOT_SAMPLED``: only framed and judged on its end; ``COMPRESSED``: only its
        outcome, its timing and its response-head findings).
        """

    def internal_error(self, where: str, error: str, route: str, protocol: str) -> None:
        """streamguard failed in ``where`` (``error``: the type and place, never a message)."""


class ReportSink:
    """``on_report`` as a sink: the callback gets each stream's report when it ends."""

    __slots__ = ("callback",)

    name = "on_report"

    def __init__(self, callback: ReportCallback) -> None:
        self.callback = callback

    def stream_started(self, route: str, protocol: str, unchecked: str | None) -> ReportSink:
        return self  # nothing per stream

    def findings(self, found: Sequence[Finding]) -> None:
        pass

    def stream_ended(self, report: StreamReport) -> None:
        try:
            self.callback(report)
        except BaseException as exc:
            # Counted as every sink's failure is (one ``streamguard_internal_error``, its
            # type and place only); but this is the application's own code, so it also
            # gets its traceback, message included, as a failing callback does anywhere.
            # What it was given, the report, holds no wire value.
            if not is_cancellation(exc):
                from streamguard.logs import log_callback_failure

                log_callback_failure(self.name, self.callback, exc, report.route, report.protocol)
            raise

    def drain(self) -> None:
        """Deliver what the callback still holds (a ``ReportQueue``), within its bound."""
        drain = getattr(self.callback, "drain", None)
        if callable(drain):
            drain()

    def internal_error(self, where: str, error: str, route: str, protocol: str) -> None:
        pass
