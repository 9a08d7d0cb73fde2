"""Liveness and timing: the failures no check of the bytes alone can see.

Theory of operation
-------------------

``Liveness`` is sans-I/O and clock-free: the monitor tells it *when* things happened (body
bytes, events, the terminal signal, the end) and asks it, with a time, what is wrong.
Three detectors share the bookkeeping:

``body_not_ended``
    The protocol's terminal signal reached the server at ``terminal_at`` (when the server
    accepted the message carrying it, not when it was parsed: a slow reader may hold a
    large final write) but the body is still open ``body_end_grace_s`` later. Reported
    once. ``poll`` reports it while the stream is still open (the middleware's sweeper
    polls every open stream), and ``at_end`` reports it when the stream ends, if no poll
    did (under trio, or offline).

``stalled``
    No body byte for longer than ``idle_limit_s``: keepalive comments count, since they
    keep proxies alive. Reported once per stall while open (new bytes end the stall); at
    the end, one finding if the longest gap exceeded the limit and no poll reported it.
    Silence after the terminal signal is not a stall: nothing more is owed by then. Nor is
    the time a message waits for the server to accept it (``sending``/``sent``): that is
    the client reading slowly, and the clock restarts when the server takes the message.

``buffered_flush``
    The stream did not arrive incrementally: with at least ``burst_min_events`` events,
    either every event arrived in one body message, or every event arrived within
    ``burst_window_s`` of the first while the first took more than
    ``burst_first_event_ratio`` windows to arrive *and* the events came in few body
    messages (at most two, or ``burst_min_events_per_message`` events per message on
    average). A proxy that collects an answer and flushes it looks like that: a long
    silence, then everything at once, in one or a few writes. Timing alone cannot tell it
    from a fast generator after a slow first token (33 events in 20 ms, each its own
    ``send``), so the message count decides; ``burst_timing_only`` restores the
    timing-only judgement for an app known to re-send a buffered answer event by event.
    A fast healthy provider (2,000 tokens/s spreads 200 events over 100 ms) and a short
    answer (fewer events than the minimum) are never a flush. Judged once, at a clean end.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamguard import rules
from streamguard.report import Finding

__all__ = ["Liveness", "LivenessLimits"]


@dataclass(frozen=True, slots=True)
class LivenessLimits:
    """The detectors' thresholds, in seconds (``streamguard.config.TimerConfig``)."""

    body_end_grace_s: float = 5.0
    idle_limit_s: float = 60.0
    burst_window_s: float = 0.02
    burst_first_event_ratio: float = 20.0
    burst_min_events: int = 16
    #: A burst in more than two body messages is a flush only with at least this many
    #: events per message on average (a generator sends one per message).
    burst_min_events_per_message: float = 8.0
    #: Judge a burst by its timing alone, however many body messages carried it.
    burst_timing_only: bool = False


class Liveness:
    """The timing state of one stream and the three detectors over it."""

    __slots__ = (
        "_body_not_ended_reported",
        "_event_messages",
        "_first_event_message",
        "_held",
        "_last_activity",
        "_last_event_message",
        "_limits",
        "_sending",
        "_stalled",
        "_stalls_reported",
        "_started_at",
        "first_event_at",
        "last_event_at",
        "max_byte_gap",
        "max_event_gap",
        "terminal_at",
    )

    def __init__(self, limits: LivenessLimits, started_at: float, opened_at: float) -> None:
        self._limits = limits
        self._started_at = started_at
        #: The last time the stream showed life: the response start, then each byte.
        self._last_activity = opened_at
        #: A body message is with the server and not yet accepted (``sending``): the app
        #: is waiting on the client, not silent. ``_held``: a poll saw it still waiting.
        self._sending = False
        self._held = False
        self._stalled = False
        self._stalls_reported = 0
        self._body_not_ended_reported = False
        self._first_event_message = 0
        self._last_event_message = 0
        #: How many body messages completed at least one event.
        self._event_messages = 0
        self.first_event_at: float | None = None
        self.last_event_at: float | None = None
        self.terminal_at: float | None = None
        self.max_byte_gap = 0.0
        self.max_event_gap: float | None = None

    def on_bytes(self, now: float) -> None:
        gap = now - self._last_activity
        if gap > self.max_byte_gap and self.terminal_at is None:
            self.max_byte_gap = gap
        self._last_activity = now
        self._stalled = False

    def on_events(self, now: float, body_message: int) -> None:
        """Events were completed by body message number ``body_message`` (once per message)."""
        if body_message != self._last_event_message:
            self._event_messages += 1
        last = self.last_event_at
        if last is None:
            self.first_event_at = now
            self._first_event_message = body_message
            self.max_event_gap = 0.0
        elif now - last > (self.max_event_gap or 0.0):
            self.max_event_gap = now - last
        self.last_event_at = now
        self._last_event_message = body_message

    def on_terminal(self, now: float) -> None:
        if self.terminal_at is None:
            self.terminal_at = now

    def sending(self) -> None:
        """A body message was handed to the server, which has not accepted it yet."""
        self._sending = True

    def sent(self) -> bool:
        """The server accepted the message ``sending`` announced. True when a poll saw it
        still waiting: the caller then tells ``resume`` when (a send quicker than a poll
        needs no clock, and its feed time stands for it)."""
        held = self._held
        self._sending = self._held = False
        return held

    def resume(self, now: float) -> None:
        """A message held by the server (a client reading slowly: back-pressure) was
        accepted at ``now``: the wait was neither the app's silence nor a gap between its
        bytes, so the silence is counted from here."""
        self._last_activity = now

    def poll(self, now: float, events: int, offset: int) -> list[Finding]:
        """What is wrong with the open stream at ``now``; each finding is made once."""
        found: list[Finding] = []
        limits = self._limits
        terminal_at = self.terminal_at
        if (
            terminal_at is not None
            and not self._body_not_ended_reported
            and now - terminal_at > limits.body_end_grace_s
        ):
            self._body_not_ended_reported = True
            found.append(
                rules.BODY_NOT_ENDED.finding(
                    f"the terminal signal was sent {now - terminal_at:.1f} s ago but the body "
                    f"is still open (grace {limits.body_end_grace_s:g} s)",
                    events,
                    offset,
                )
            )
        if self._sending:
            self._held = True
        idle = now - self._last_activity
        # After the terminal signal nothing more is owed: a quiet open body is
        # body_not_ended's to report, not a stall.
        if (
            not self._stalled
            and terminal_at is None
            and not self._sending
            and idle > limits.idle_limit_s
        ):
            self._stalled = True
            self._stalls_reported += 1
            found.append(
                rules.STALLED.finding(
                    f"no bytes for {idle:.1f} s after byte {offset} (idle limit "
                    f"{limits.idle_limit_s:g} s)",
                    events,
                    offset,
                )
            )
        return found

    def at_end(self, now: float, events: int, offset: int, clean: bool) -> list[Finding]:
        """The detectors' verdicts that only the end can give, and any no poll gave."""
        found = self.poll(now, events, offset)
        if self._stalls_reported == 0 and self.max_byte_gap > self._limits.idle_limit_s:
            found.append(
                rules.STALLED.finding(
                    f"the stream went {self.max_byte_gap:.1f} s without a byte (idle "
                    f"limit {self._limits.idle_limit_s:g} s)",
                    events,
                    offset,
                )
            )
        if clean:
            burst = self._burst(events)
            if burst is not None:
                found.append(rules.BUFFERED_FLUSH.finding(burst, events, offset))
        return found

    def _burst(self, events: int) -> str | None:
        limits = self._limits
        first, last = self.first_event_at, self.last_event_at
        if events < limits.burst_min_events or first is None or last is None:
            return None
        if self._first_event_message == self._last_event_message:
            return (
                f"all {events} events arrived in one body message; the stream was buffered "
                "and flushed at once"
            )
        to_first = first - self._started_at
        span = last - first
        if span > limits.burst_window_s or to_first <= (
            limits.burst_first_event_ratio * limits.burst_window_s
        ):
            return None
        messages = self._event_messages
        if not (
            limits.burst_timing_only
            or messages <= 2
            or events >= limits.burst_min_events_per_message * messages
        ):
            return None  # one event or so per send: a fast generator, not a buffer
        return (
            f"all {events} events arrived within {span * 1000:.0f} ms in {messages} body "
            f"messages after {to_first:.2f} s of silence; the stream was buffered and "
            "flushed at once"
        )
