"""One stream, start to end: parser + protocol checker + timing + how it ended.

``StreamMonitor`` is sans-I/O: the middleware, the CLI and the test helpers all drive it
the same way (``feed`` body chunks, then ``finish`` once), and it is the only place that
turns "how the bytes stopped" into an ``Outcome`` and builds a ``StreamReport``. The clock
is injected, so tests are deterministic without sleeping.

Auto-detection
--------------

A stream configured as ``"auto"`` is decided once, by the first signal that settles it:
a protocol the response headers declare (``protocol_source`` ``"header"``), else the
request path (``"path"``), else the first decisive event (``"event"``), else plain SSE
(``"default"``) after ``MAX_UNDECIDED_EVENTS`` events, once the held events carry more than
``MAX_UNDECIDED_CHARS`` characters, or at the end of the body. The protocols declare the
signals and ``streamguard.protocols.auto.Detector`` applies them: until it decides, the
monitor hands it each event, and checks nothing; once it has, the monitor feeds the
checker it built. A body never ended by a blank line dispatches nothing: at its end, the
first data line of the event the parser was left with decides the same way.

The checking-time budget
------------------------

A checker (a plugin's, above all) may be slow, and the monitor runs on the server's event
loop: a stream whose checking takes the loop for long stretches would stall every other
stream. So each fed chunk's checking is charged to its stream with the monitor's clock
(one more read a chunk, after its checking, and every ``_BUDGET_STRIDE`` events within a
chunk of more); a stream may spend ``checking_budget_s`` beyond ``CHECK_SHARE`` of its age,
and past it is only watched (``_stop_at_budget``: bytes, timers, outcome), with a note and
the skip reason ``checking_budget`` on its report. Offline there is no budget. A call that
never returns cannot be charged: nothing in the process can stop it. A chunk whose
checking its own bytes bound is not charged, and costs no clock read: one frame fitted
whole to a built-in checker's skeleton, or skimmed on the every-stream tier; every parsed
frame, and every frame a plugin's checker steps, is.

The every-stream tier
---------------------

``sample_rate`` decides deep checking only (``check_framing_only``): a stream left out by
the sample is still parsed, so its framing rules run, and its end is still judged, so an
answer cut before its terminal is ``unclosed`` on every stream. The protocol's checker
is not run on its events: it is asked only which of them end the stream
(``Checker.end_kind``) and steps its lifecycle on those, its findings dropped, so the
terminal and the in-band error are the ones the deep check finds. A protocol whose
checker cannot tell its end without its full checks (``Checker.JUDGES_END_UNSAMPLED``
false: Gemini's last finish, a plugin's) leaves the end unjudged, as before, and the
report says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from enum import Enum
from typing import Any, Final

from streamguard import rules
from streamguard._faults import UndeclaredRule, error_name
from streamguard._wire import describe, token
from streamguard.liveness import Liveness, LivenessLimits
from streamguard.protocols import AUTO, PLUGIN_RULES, PlainSSEChecker, make_checker
from streamguard.protocols._base import Checker
from streamguard.protocols._skeleton import MAX_SKELETON_CHARS, Entry, ShapeCache
from streamguard.protocols.auto import Detector, Fault
from streamguard.report import CHECKING_BUDGET, Finding, Outcome, StreamReport, new_report
from streamguard.request import RequestFacts
from streamguard.sse import DEFAULT_MAX_EVENT_BYTES, Event, EventParser

__all__ = [
    "CHECK_SHARE",
    "FEED_WINDOW",
    "MAX_KEPT_FINDINGS",
    "OUTCOMES",
    "REST_AFTER_S",
    "EventCallback",
    "FindingsCallback",
    "StreamEnd",
    "StreamMonitor",
    "check_stream",
    "error_name",
    "open_monitor",
]

#: Findings a stream keeps on its report. Past it only the first finding of each rule is
#: kept and the rest are counted per rule (``StreamReport.findings_dropped``), so a stream
#: that breaks a rule on every event costs a bounded amount of memory; sinks still see
#: every finding as it is made.
MAX_KEPT_FINDINGS = 100

#: The most bytes of a frame begun that ``StreamMonitor._check`` holds for the next chunk
#: (past it the parser takes the frame: each chunk copies what is held, so a frame cut in
#: many small chunks costs its length times theirs, bounded by this).
_MAX_HELD_BYTES: Final = MAX_SKELETON_CHARS
#: Whether ``StreamMonitor._check`` takes a chunk of several frames, or a frame cut across
#: chunks, a frame at a time: compiled, where the loop costs less than the parse it saves;
#: not in the pure-Python build, where the parser's pass over the whole chunk is cheaper
#: (a chunk that is one frame is fitted whole either way). Tests set it both ways.
_BY_FRAME: Final = [not __file__.endswith(".py")]

#: A body message longer than this is checked a window at a time (``StreamMonitor.feed``):
#: what one message holds at once (its events, their findings) is bounded by the window,
#: not by the message. The parser gives the same events however the bytes are cut.
FEED_WINDOW: Final = 64 * 1024

#: The silence, in seconds, after which a stream's checker forgets its skeletons when the
#: stream is polled (``StreamMonitor.poll``: the middleware's sweeper polls a stream with
#: timers every second or sooner, on asyncio; one not polled keeps them).
REST_AFTER_S: Final = 1.0

#: The checking-time budget's share: a stream may spend on its checking this fraction of
#: its age, beyond the budget itself (``checking_budget_s``). Why a share and not only a
#: total: a stream that lives for hours (an MCP notification stream) accumulates checking
#: time however cheap its frames are, and must not lose its checks for it; what stalls a
#: server is a stream whose checking takes the loop for long stretches. A tenth: the
#: built-in checkers take 2 to 10 µs a frame in pure Python, so a stream would have to send
#: 10,000 to 50,000 frames a second, sustained, to go past it (an LLM stream sends tens to
#: hundreds); the 20 ms a frame of issue 44's plugin goes past it at any pace above five
#: frames a second.
CHECK_SHARE: Final = 0.1
#: Within one chunk of many events, the clock is read every this many events (one read per
#: chunk otherwise): how far past its budget a chunk of slow events can take a stream.
_BUDGET_STRIDE: Final = 8
#: ``_budget_left`` of a stream with no budget (offline: no server to protect), and of one
#: whose checking stopped at its budget.
_UNLIMITED: Final = math.inf
_EXHAUSTED: Final = -math.inf

Clock = Callable[[], float]
#: Receives each dispatched event with its index (``StreamMonitor(on_event=...)``).
EventCallback = Callable[[Event, int], None]
#: Receives the findings ``finish`` made, before the report is built.
FindingsCallback = Callable[[Sequence[Finding]], None]


class StreamEnd(Enum):
    """What the monitor was told about the end; ``finish`` maps it to an ``Outcome``."""

    #: ``http.response.body`` with ``more_body=False``: the app finished the body.
    BODY_ENDED = "body_ended"
    #: The app returned without ever finishing the body.
    APP_RETURNED = "app_returned"
    CLIENT_DISCONNECT = "client_disconnect"
    APP_ERROR = "app_error"
    CANCELLED = "cancelled"
    #: The reader's connection broke before the body ended (a network or protocol error
    #: while reading): the client side of a cut, seen by ``streamguard.testing`` and the
    #: transports (``streamguard.httpx``).
    CONNECTION_LOST = "connection_lost"
    #: The reader stopped waiting for the next bytes (its read timeout) before the body
    #: ended: the client left first, and the silence it gave up on is a ``stalled`` finding.
    READ_TIMEOUT = "read_timeout"

    # ``Enum.__hash__`` is Python code (the hash of the name), run at each lookup of an end
    # in ``OUTCOMES`` and the sets below, every stream. Members are singletons compared by
    # identity, so the identity hash agrees with equality and costs no call.
    __hash__ = object.__hash__


# (Each a ``Final`` of its own: compiled, a constant, not looked up in the module per frame.)
_ERROR: Final = "error"
_TERMINAL: Final = "terminal"
_NEITHER: Final = "neither"
_UNJUDGED: Final = "unjudged"
#: What the stream had delivered to the server when it ended (the columns of ``OUTCOMES``):
#: its in-band error, its terminal signal, neither, or nothing to judge (the protocol has
#: no terminal signal, or the stream was not inspected).
DELIVERED = (_ERROR, _TERMINAL, _NEITHER, _UNJUDGED)
_COLUMN = {state: column for column, state in enumerate(DELIVERED)}

_C, _E, _U = Outcome.COMPLETED, Outcome.ERROR_EVENT, Outcome.UNCLOSED
#: The outcome of every (end, what was delivered) pair: the one place an end becomes an
#: outcome. The end already seen wins over a client that leaves later: a client that
#: closes after the terminal or the in-band error got the whole answer, and its close is a
#: fact on the report (``client_closed_after_end``), not the outcome. Failures on the
#: server's side (the app raising, returning without ending the body, being cancelled)
#: stay what they are even after the terminal: the client's connection still broke. On the
#: client's side, a lost connection is such a break, its own outcome (``connection_lost``:
#: the network or the peer, not the app, is the first suspect), and a reader that gave up
#: waiting is a client that left. A terminal counts only once the message carrying it was
#: handed to the server.
OUTCOMES: dict[StreamEnd, tuple[Outcome, Outcome, Outcome, Outcome]] = {
    #                              error    terminal  neither   unjudged
    StreamEnd.BODY_ENDED:         (_E,      _C,       _U,       _C),
    StreamEnd.CLIENT_DISCONNECT:  (_E,      _C,       Outcome.CLIENT_DISCONNECT,
                                                                Outcome.CLIENT_DISCONNECT),
    StreamEnd.APP_RETURNED:       (_U,      _U,       _U,       _U),
    StreamEnd.APP_ERROR:          (Outcome.APP_ERROR,) * 4,
    StreamEnd.CANCELLED:          (Outcome.CANCELLED,) * 4,
    StreamEnd.CONNECTION_LOST:    (Outcome.CONNECTION_LOST,) * 4,
    StreamEnd.READ_TIMEOUT:       (_E,      _C,       Outcome.CLIENT_DISCONNECT,
                                                                Outcome.CLIENT_DISCONNECT),
}  # fmt: skip

#: Ends at which the sender did not finish sending, or the reader stopped reading: the
#: end-of-stream rules would only restate the outcome, so they are not run.
_ABORTS = frozenset(
    {
        StreamEnd.CLIENT_DISCONNECT,
        StreamEnd.APP_ERROR,
        StreamEnd.CANCELLED,
        StreamEnd.READ_TIMEOUT,
    }
)
#: Ends after which the arrival times are judged as those of a whole stream.
_TIMED_TO_THE_END = frozenset({StreamEnd.BODY_ENDED, StreamEnd.CONNECTION_LOST})
#: Ends at which the client closed: after the terminal or the in-band error, a late close.
_CLIENT_CLOSED = frozenset({StreamEnd.CLIENT_DISCONNECT, StreamEnd.READ_TIMEOUT})


class StreamMonitor:
    """Checks one stream as its body arrives and builds its ``StreamReport``.

    With ``confirms_delivery=True`` the caller confirms, with ``delivered()``, each fed body
    message that reached the server; a terminal signal or in-band error counts for the
    outcome only once it did. Offline, everything fed counts as delivered.

    ``headers`` are the response headers (ASGI pairs of bytes); under ``"auto"`` a protocol
    that declares itself there decides before the path does.

    ``on_event``, if given, receives each dispatched event with its index, in order, once
    its own checks and those before it are done (the checks of later events in the same
    chunk may be done or not: a chunk may be taken a frame at a time). A client-side
    reader that needs the events (``streamguard.testing``) takes them from here rather
    than parsing the bytes again.
    """

    __slots__ = (
        "_budget_left",
        "_bytes",
        "_checker",
        "_clock",
        "_confirms_delivery",
        "_deep",
        "_delivered",
        "_detector",
        "_dropped",
        "_events",
        "_excerpt_chars",
        "_faults",
        "_findings",
        "_held",
        "_inspecting",
        "_kept_rules",
        "_last_byte_at",
        "_liveness",
        "_on_event",
        "_parser",
        "_protocol_source",
        "_unmetered",
        "body_messages",
        "first_byte_at",
        "first_event_at",
        "internal_error",
        "notes",
        "path",
        "report",
        "route",
        "started_at",
    )

    def __init__(
        self,
        protocol: str = AUTO,
        *,
        request: Mapping[str, Any] | None = None,
        path: str | None = None,
        headers: Iterable[tuple[bytes, bytes]] = (),
        clock: Clock = time.monotonic,
        started_at: float | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        route: str | None = None,
        excerpt_chars: int = 0,
        liveness: LivenessLimits | None = None,
        confirms_delivery: bool = False,
        json_data: bool = False,
        on_event: EventCallback | None = None,
        checking_budget_s: float = _UNLIMITED,
    ) -> None:
        if request is not None and type(request) is not RequestFacts:
            request = RequestFacts(request)  # only the bounded facts the checks read
        self._excerpt_chars = excerpt_chars
        self._detector: Detector | None = None
        self._checker: Checker | None = None
        self._protocol_source = "configured"
        detector: Detector | None = None
        if protocol != AUTO:
            self._checker = make_checker(protocol, request, path, json_data=json_data)
        else:
            excerpt = self._excerpt if excerpt_chars else None
            detector = Detector(request, path, headers, excerpt)
            self._protocol_source = detector.source
            self._checker = detector.checker
            if detector.checker is None:
                self._detector = detector
        #: The faults contained on this stream that the seam has yet to count
        #: (``take_faults``): a plugin's detection signals that raised.
        self._faults: list[Fault] | None = None
        self._on_event = on_event
        #: The checking time this stream may still spend beyond its share of its age
        #: (``CHECK_SHARE``), in the clock's seconds: ``_UNLIMITED`` without a budget,
        #: ``_EXHAUSTED`` once its checking stopped at it (``_spend``).
        self._budget_left = checking_budget_s if checking_budget_s > 0 else _UNLIMITED
        self.route = route
        #: Facts about how the stream was checked (``add_note``); a tuple, as most have none.
        self.notes: tuple[str, ...] = ()
        if detector is not None and detector.faults is not None:
            self._keep_faults(detector)
        self._parser = EventParser(max_event_bytes)
        #: The start of a frame, held for the next chunk instead of parsed (``_check``).
        self._held = b""
        self._clock = clock
        #: Every body byte fed, inspected or not, and every event dispatched.
        self._bytes = 0
        self._events = 0
        self._findings: list[Finding] | None = None  # made by the first finding
        self._kept_rules: set[str] | None = None  # built when the cap is first reached
        self._dropped: dict[str, int] | None = None
        self._inspecting = True
        #: False on the every-stream tier (``check_framing_only``): framing and the end only.
        self._deep = True
        #: Whether the chunk just checked took a path whose cost its bytes bound (a frame
        #: skimmed, or fitted whole to a built-in checker's skeleton): not charged to the
        #: checking-time budget, which then needs no clock read (see ``feed``).
        self._unmetered = False
        self._confirms_delivery = confirms_delivery
        self._delivered = _NEITHER
        self.path = path
        opened_at = clock()
        self.started_at = opened_at if started_at is None else started_at
        #: Timing detectors; off offline, where chunks carry no arrival times.
        self._liveness = (
            Liveness(liveness, self.started_at, opened_at) if liveness is not None else None
        )
        self.first_byte_at: float | None = None
        #: When the last body byte arrived, once one did (``_bytes``): ``last_byte_at``. A
        #: plain float, so that each message stores it without making a float object.
        self._last_byte_at = 0.0
        self.first_event_at: float | None = None
        self.body_messages = 0
        self.internal_error: str | None = None
        self.report: StreamReport | None = None

    @property
    def protocol(self) -> str:
        checker = self._checker
        return PlainSSEChecker.name if checker is None else checker.name

    @property
    def protocol_source(self) -> str:
        """How the protocol was chosen: ``configured``, or by ``header``, ``path``, ``event``
        or ``default``."""
        return self._protocol_source

    @property
    def decided(self) -> bool:
        """Whether the protocol is known (always, unless ``"auto"`` is still undecided)."""
        return self._detector is None

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The findings kept so far (see ``MAX_KEPT_FINDINGS``)."""
        return () if self._findings is None else tuple(self._findings)

    @property
    def inspecting(self) -> bool:
        """False once checking stopped (too large, compressed, failed, past its budget);
        a stream on the every-stream tier (``check_framing_only``) is inspected."""
        return self._inspecting

    @property
    def terminal_seen(self) -> bool:
        checker = self._checker
        return checker is not None and checker.terminal_index is not None

    def add_note(self, note: str) -> None:
        """Say something about how the stream was checked, for its report."""
        self.notes += (note,)

    def _record(self, found: Sequence[Finding]) -> None:
        """Keep ``found`` on the report, within ``MAX_KEPT_FINDINGS``; count the rest."""
        if not found:
            return
        kept = self._findings
        if kept is None:
            kept = self._findings = []
        for finding in found:
            if len(kept) < MAX_KEPT_FINDINGS:
                kept.append(finding)
                continue
            rules_kept = self._kept_rules
            if rules_kept is None:
                rules_kept = self._kept_rules = {kept_one.rule for kept_one in kept}
            if finding.rule not in rules_kept:  # every rule broken keeps its first finding
                rules_kept.add(finding.rule)
                kept.append(finding)
                continue
            dropped = self._dropped
            if dropped is None:
                dropped = self._dropped = {}
            dropped[finding.rule] = dropped.get(finding.rule, 0) + 1

    def add_findings(self, findings: Sequence[Finding]) -> Sequence[Finding]:
        """Record findings made outside the body (the response headers, timers)."""
        self._record(findings)
        return findings

    def check_head(
        self,
        content_type: str,
        content_length: str | None = None,
        content_encoding: str | None = None,
    ) -> list[Finding]:
        """The HTTP rules of an event stream's response head (its headers' values).

        Shared by the middleware and the client-side helpers, so both say the same thing.
        A compressed body cannot be parsed: inspection stops, and the finding says why.
        Header values are named by size and hash only (they reach default logs).
        """
        found: list[Finding] = []
        if content_length is not None:
            found.append(
                rules.CONTENT_LENGTH_ON_STREAM.finding(
                    "the event stream was sent with Content-Length: "
                    + (
                        repr(content_length)
                        if _is_short_number(content_length)
                        else describe(content_length)
                    )
                )
            )
        charset = _charset(content_type)
        if charset is not None and charset.lower() not in _UTF8_NAMES:
            found.append(
                rules.BAD_CONTENT_TYPE_CHARSET.finding(
                    f"Content-Type declares a charset other than UTF-8 "
                    f"({describe(charset)}); event streams are always UTF-8"
                )
            )
        if content_encoding is not None and content_encoding.strip().lower() != "identity":
            encoding = token(content_encoding.strip().lower(), _KNOWN_ENCODINGS)
            found.append(
                rules.COMPRESSED_STREAM.finding(
                    f"Content-Encoding {encoding}; the compressed body is passed through "
                    "uninspected"
                )
            )
            self._inspecting = False
        self._record(found)
        return found

    def stop_inspecting(self, finding: Finding | None = None) -> None:
        """Keep counting bytes but check nothing more, optionally saying why."""
        if finding is not None:
            self._record((finding,))
        self._inspecting = False

    def check_framing_only(self) -> None:
        """The every-stream tier, for a stream the sample left out: parse its frames (the
        framing rules run) and judge its end (the terminal, the in-band error, the
        outcome), without the protocol's other rules."""
        self._deep = False

    def fail(self, error: BaseException) -> None:
        """streamguard itself broke on this stream: stop checking it and say so."""
        if self.internal_error is None:
            self.internal_error = error_name(error)
        self._inspecting = False

    def feed(self, data: bytes, emit: FindingsCallback | None = None) -> Sequence[Finding]:
        """Consume one body message's bytes; return the findings it produced.

        A message longer than ``FEED_WINDOW`` is parsed and checked a window at a time, so
        one giant message never holds more than a window's events and findings at once.
        With ``emit``, the findings of such a message go to it window by window and none
        are returned; without, they are all returned (the caller then holds them all).
        """
        now = self._clock()
        self.body_messages += 1
        size = len(data)
        liveness = self._liveness
        if size:
            if not self._bytes:
                self.first_byte_at = now
            self._bytes += size
            self._last_byte_at = now
            if liveness is not None:
                liveness.on_bytes(now)
                if self._confirms_delivery:
                    liveness.sending()
        if not self._inspecting:
            return ()
        if len(data) <= FEED_WINDOW:
            found = self._check(data, now)
            # The checking-time budget (``_spend``), inlined: one more clock read a chunk,
            # and the share of the stream's age looked at only once the budget is spent.
            # Not for a chunk whose checking its bytes bound (``_unmetered``): the budget
            # is there for checking that can take the loop for long, a plugin's above all.
            left = self._budget_left
            if self._unmetered:
                self._unmetered = False
            elif left < _UNLIMITED:
                at = self._clock()
                left -= at - now
                self._budget_left = left
                if (
                    left < 0.0
                    and self._inspecting
                    and left + CHECK_SHARE * (at - self.started_at) < 0.0
                ):
                    self._stop_at_budget()
            return found
        held: list[Finding] = []
        budgeted = self._budget_left < _UNLIMITED
        for start in range(0, len(data), FEED_WINDOW):
            found = self._check(data[start : start + FEED_WINDOW], now)
            self._unmetered = False  # (windows are charged by ``_spend``, each one)
            if found:
                if emit is None:
                    held.extend(found)
                else:
                    emit(found)
            if budgeted and self._inspecting:
                self._spend(now, start + FEED_WINDOW >= len(data))
            if not self._inspecting:
                break  # the rest is counted, not checked
        return held

    def _spend(self, since: float, done: bool) -> bool:
        """Charge the checking of the chunk fed at ``since`` (so far, or ``done``) to the
        stream's budget; past it (its ``checking_budget_s`` beyond ``CHECK_SHARE`` of its
        age), stop checking the stream, note it and return True.

        Measured with the monitor's clock (injectable: tests drive it), read once more per
        chunk fed, after its checking (``feed`` inlines that), and every ``_BUDGET_STRIDE``
        events within a chunk of more: a clock read per event would cost every healthy
        frame. What cannot be measured this way is a single call that never returns (a
        checker that loops): no code in the process can stop it."""
        if self._budget_left == _EXHAUSTED:
            return True  # stopped already: no second note, no more events checked
        at = self._clock()
        left = self._budget_left - (at - since)
        if done:
            self._budget_left = left
        if left + CHECK_SHARE * (at - self.started_at) >= 0.0:
            return False
        self._stop_at_budget()
        return True

    def _stop_at_budget(self) -> None:
        """The stream's checking went past its budget: only watch it from here."""
        self._budget_left = _EXHAUSTED
        self._inspecting = False
        self.add_note(
            f"checking stopped after {self._events} event(s): the stream's checking time went "
            "past its budget (checking_budget_ms beyond a tenth of its age); from there its "
            "bytes were counted and its outcome recorded, its frames not checked"
        )

    def feed_body(self, message: object) -> Sequence[Finding] | None:
        """``feed`` for a server's usual ASGI message, a ``dict`` that is an
        ``http.response.body`` of bytes, at most ``FEED_WINDOW`` of them, with more to come,
        while the stream is open and streamguard is sound; ``None`` for any other message,
        which the caller takes."""
        if type(message) is not dict or self.report is not None or self.internal_error is not None:
            return None
        kind = message.get("type")
        # (A ``str`` compared as one: a generic comparison costs four times as much.)
        if not isinstance(kind, str) or kind != "http.response.body":
            return None
        if not message.get("more_body", False):
            return None
        data = message.get("body", b"")
        if type(data) is not bytes or len(data) > FEED_WINDOW:
            return None
        return self.feed(data)

    def _check(self, data: bytes, now: float) -> Sequence[Finding]:
        """Parse and check bytes that arrived at ``now``; return the findings made.

        A chunk that is one frame fitting a framed skeleton is not parsed (``_repeat``).
        Any other, once the checker has learned skeletons, the compiled build takes a
        frame at a time (``_BY_FRAME``; a frame ends with a blank line of the learned
        framing's line ending): each frame that fits is not parsed either, and any other
        is parsed on its own. What follows the last frame's blank line is held here
        rather than parsed while it is the start of a frame the parser would make
        nothing of yet (``_unfinished_frame``), so a frame cut across chunks is still
        fitted whole. The parser holds nothing meanwhile, and gets the held bytes first
        whenever a frame does not fit, so the events, findings and offsets are the ones
        it would have made from the same bytes however they were cut.
        """
        held = self._held
        if held:
            data = held + data
            self._held = b""
        checker = self._checker
        if not self._deep:
            return self._skim(data, checker, now)
        shapes = checker.frame_cache if checker is not None else None
        if shapes is None or not shapes.entries:
            return self._parse(data, now)
        assert checker is not None
        parser = self._parser
        style = shapes.style
        size = len(data)
        tried = False  # whether the chunk, one frame, was tried whole already
        # (A frame ends with an LF; a byte read costs less than an ``endswith`` call.)
        if style is not None and size and data[size - 1] == 10 and parser.at_boundary(size):
            entry = shapes.fit_frame(data)  # most chunks: exactly one frame
            if entry is not None:
                # (A built-in checker's step on a fitted frame is bounded by its bytes.)
                self._unmetered = checker.name not in PLUGIN_RULES
                return self._repeat(data, checker, shapes, entry, now)
            tried = True
        if not _BY_FRAME[0]:
            return self._parse(data, now)
        crlf = style is not None and style.endswith(b"\r\n\r\n")
        found: list[Finding] = []
        # The held bytes hold no blank line and were read: the search starts at their end
        # (their last byte, with the chunk's first, may be one), so a frame cut in many
        # chunks is searched once, not once per chunk.
        start = 0
        search = max(len(held) - 1, 0)
        while (stop := _frame_end(data, search, crlf)) >= 0:
            frame = data if stop - start == size else data[start:stop]
            whole = parser.at_boundary(stop - start)  # (else it ends an event begun)
            entry = None
            if style is not None and whole and not (tried and frame is data):
                entry = shapes.fit_frame(frame)
            if entry is not None:
                more = self._repeat(frame, checker, shapes, entry, now)
            else:
                more = self._parse(frame, now)
            if more:
                found.extend(more)
            last_size = stop - start
            start = search = stop
            if not self._inspecting or not shapes.entries:
                break
            if entry is None and whole:
                if style is None:
                    style = shapes.style
                    if style is None:
                        break  # the frame taught no framing: the rest is not taken by frame
                    crlf = style.endswith(b"\r\n\r\n")
                elif shapes.wait:
                    break  # the cache is missing: the rest is not taken by frame
            if start == size:
                return found
            # Most chunks end in the next frame's start: held now, that part is not searched
            # for a frame end first (an unfinished frame has no blank line), then read again.
            # Tried only on a rest shorter than the frame before it, which in a stream of
            # alike frames holds no whole one (a chunk of many frames is not read twice).
            if (
                size - start < min(last_size, _MAX_HELD_BYTES + 1)
                and parser.at_boundary(size - start)
                and _unfinished_frame(rest := data[start:])
            ):
                self._held = rest
                return found
        if start < size:
            rest = data[start:] if start else data
            # Lines the held bytes ended were checked when they were held.
            checked = held.rfind(b"\n") + 1 if not start and 0x0A in held else 0
            if (
                self._inspecting
                and shapes.entries
                and len(rest) <= _MAX_HELD_BYTES
                and parser.at_boundary(len(rest))
                and _unfinished_frame(rest, checked)
            ):
                self._held = rest
            else:
                found.extend(self._parse(rest, now))
        return found

    def _skim(self, data: bytes, checker: Checker | None, now: float) -> Sequence[Finding]:
        """``_check`` on the every-stream tier: a chunk that is one plain frame holding none
        of its checker's ``END_HINTS`` is counted unread (``EventParser.skim``): it ends
        nothing and breaks no framing rule. Any other is parsed, its events asked
        ``end_kind``."""
        hints = checker.END_HINTS if checker is not None else None
        if (
            hints is None
            or self._on_event is not None  # (a reader that needs the events)
            or not self._parser.at_boundary(len(data))
            or not self._parser.skim(data, hints)
        ):
            return self._parse(data, now)
        self._unmetered = True
        self._events += 1
        if self.first_event_at is None:
            self.first_event_at = now
        liveness = self._liveness
        if liveness is not None:
            liveness.on_events(now, self.body_messages)
        return ()

    def _parse(self, data: bytes, now: float) -> Sequence[Finding]:
        """``_check`` by the parser: every event it makes is checked in full, or repeated
        by the checker's cache."""
        liveness = self._liveness
        parser = self._parser
        checker = self._checker
        events = parser.feed(data)
        new: list[Finding]
        if parser.has_findings:
            new = parser.take_findings()
            from_parser = len(new)
        elif events:
            new = []
            from_parser = 0
        else:
            return ()
        first = index = self._events
        undecided = checker is None
        excerpts = self._excerpt_chars
        # A chunk of many events looks at the budget as it goes (``_spend``).
        stride = 0
        if len(events) > _BUDGET_STRIDE and self._budget_left < _UNLIMITED:
            stride = _BUDGET_STRIDE
        deep = self._deep
        for event in events:
            if checker is None:
                found = self._hold(event, index)  # replayed findings carry their excerpts
                checker = self._checker
                if not deep:
                    found = ()  # (the detector's replay ran the checker in full)
            elif not deep:
                if checker.JUDGES_END_UNSAMPLED:
                    kind = checker.end_kind(event, index)
                    if kind is not None:
                        checker.advance(kind, event, index)  # the step's finding is dropped
                index += 1
                continue
            else:
                found = checker.on_event(event, index)
                if found and excerpts:
                    found = [replace(f, excerpt=self._excerpt(event.data)) for f in found]
            if found:
                _vet(found, checker)
                new.extend(found)
            index += 1
            if stride and (index - first) % stride == 0:
                self._events = index  # (as the note on a stop names it)
                if self._spend(now, False):
                    index = first + len(events)  # the rest of the chunk: counted, unchecked
                    break
        self._events = index
        if len(events) == 1 and checker is not None and deep and data.endswith(b"\n"):
            shapes = checker.frame_cache
            if shapes is not None and shapes.last is not None:
                shapes.frame(data, events[0].data)  # so the next such chunk is not parsed
        if from_parser and not parser.inspecting:
            self._inspecting = False
        if index > first:
            if self.first_event_at is None:
                self.first_event_at = now
            if liveness is not None:
                liveness.on_events(now, self.body_messages)
            if from_parser and len(new) > from_parser:
                # The parser's findings come first: in event order (stable, so a framing
                # finding stays before its event's own), the findings are the same however
                # the bytes were cut, even when a decision replays the events held before.
                new.sort(key=_event_order)
            on_event = self._on_event
            if on_event is not None:
                for index, event in enumerate(events, first):
                    on_event(event, index)
        if new:
            self._record(new)
            kept = self._findings
            if undecided and checker is not None and kept is not None and len(kept) > len(new):
                # The decision replayed the held events after earlier chunks' framing
                # findings were kept: in event order, as if the bytes had come in one chunk.
                kept.sort(key=_event_order)
        if not self._confirms_delivery:
            self._record_delivered(now)
        return new

    def _repeat(
        self, data: bytes, checker: Checker, shapes: ShapeCache, entry: Entry, now: float
    ) -> Sequence[Finding]:
        """``_check`` for a frame (a chunk, or the part of one ``_check`` cut) that is
        exactly one event fitting a framed skeleton: the parser counts it without reading
        it, and the checker repeats the skeleton's step."""
        index = self._events
        values = shapes.fitted_values
        # Most fitted frames are repeated without their event (``repeat_unread``): nothing
        # reads it but a reader of every event (``on_event``), which then gets it.
        found = None if self._on_event is not None else checker.repeat_unread(index, entry, values)
        event = None
        if found is None:
            event = self._parser.passed(len(data), entry.skeleton.name, shapes.fitted_data)
            found = checker.repeat_frame(event, index, entry, values)
        else:
            self._parser.passed_unread(len(data))
        if found:
            _vet(found, checker)
        self._events = index + 1
        if self.first_event_at is None:
            self.first_event_at = now
        liveness = self._liveness
        if liveness is not None:
            liveness.on_events(now, self.body_messages)
        on_event = self._on_event
        if on_event is not None and event is not None:
            on_event(event, index)
        if found:
            if self._excerpt_chars:
                text = shapes.fitted_data
                found = [replace(f, excerpt=self._excerpt(text)) for f in found]
            self._record(found)
        if not self._confirms_delivery:
            self._record_delivered(now)
        return found

    def delivered(self) -> None:
        """The last body message fed reached the server: its terminal or error counts, and
        the grace for ending the body starts then (``body_not_ended``)."""
        liveness = self._liveness
        now = None
        if liveness is not None and liveness.sent():
            now = self._clock()  # the server held the message past a poll: when it took it
            liveness.resume(now)
        if self._delivered == _NEITHER:
            self._record_delivered(now)

    def _record_delivered(self, now: float | None = None) -> None:
        """Record a terminal or error the server now has; ``now`` is when it took it, or
        ``None`` for the last feed's time (the send took less than a poll)."""
        checker = self._checker
        if checker is None:
            return
        if checker.error_index is not None:
            self._delivered = _ERROR
        elif checker.terminal_index is not None:
            self._delivered = _TERMINAL
        else:
            return
        liveness = self._liveness
        if liveness is not None and checker.terminal_index is not None:
            at = self.last_byte_at if now is None else now
            liveness.on_terminal(self._clock() if at is None else at)

    # -- auto-detection -----------------------------------------------------------------

    def _hold(self, event: Event, index: int) -> Sequence[Finding]:
        """Hand an undecided stream's event to its detector; once decided, check with the
        chosen checker."""
        detector = self._detector
        assert detector is not None
        found = detector.hold(event, index)
        if detector.faults is not None:
            self._keep_faults(detector)
        self._adopt(detector)
        return found

    def _keep_faults(self, detector: Detector) -> None:
        """Take the faults of the detector's signals (each was no match): for the seam to
        count, and said on the report."""
        faults = detector.faults
        if not faults:
            return
        detector.faults = None
        kept = self._faults
        if kept is None:
            kept = self._faults = []
        for where, error in faults:
            kept.append((where, error))
            self.add_note(f"the {where} raised ({error.partition(' ')[0]}): no match")

    def take_faults(self) -> list[Fault]:
        """The faults contained on this stream since the last call, as ``(where, error)``
        (``protocols.auto.Fault``), for the seam to count as internal errors: the stream
        is still checked."""
        faults = self._faults
        if faults is None:
            return []
        self._faults = None
        return faults

    def _adopt(self, detector: Detector) -> None:
        """Take the detector's checker once it decided."""
        if detector.checker is not None:
            self._checker = detector.checker
            self._protocol_source = detector.source
            self._detector = None

    # -- timing and the end -------------------------------------------------------------

    def poll(self, now: float | None = None) -> list[Finding]:
        """Run the timing detectors on the open stream; return the findings they made. A
        stream silent for ``REST_AFTER_S`` lets its checker forget what it keeps only to go
        faster (``Checker.rest``): an idle stream holds less."""
        if self.report is not None or self.internal_error is not None:
            return []
        if now is None:
            now = self._clock()
        checker = self._checker
        last = self.last_byte_at
        if checker is not None and last is not None and now - last >= REST_AFTER_S:
            checker.rest()
        if self._liveness is None:
            return []
        found = self._liveness.poll(now, self._events, self._bytes)
        self._record(found)
        return found

    def after_end(self, data: bytes) -> Finding:
        """Body bytes the app sent after it ended the body (``more_body=False``).

        The report is already built; the finding goes to the sinks only.
        """
        return rules.BODY_AFTER_END.finding(
            f"the app sent a body message of {len(data)} byte(s) after it ended the body "
            "with more_body=False; servers drop or reject it",
            self._events,
            self._bytes,
        )

    def _excerpt(self, text: str) -> str:
        """The start of ``text``, with control characters escaped so a log line stays one."""
        short = text[: self._excerpt_chars]
        escaped = "".join(c if c.isprintable() else repr(c)[1:-1] for c in short)
        return escaped + ("…" if len(text) > self._excerpt_chars else "")

    def finish(
        self,
        end: StreamEnd,
        *,
        cause: BaseException | None = None,
        emit: FindingsCallback | None = None,
        server_stopping: bool = False,
    ) -> StreamReport:
        """Classify the end, run the end-of-stream rules once, and build the report.

        ``cause`` is the exception that ended a client-side read (``CONNECTION_LOST``,
        ``READ_TIMEOUT``); its type is named, never its text, which may quote the peer.
        ``emit`` receives the findings the end made before the report is built, so a sink
        that fails on them (and calls ``fail``) is on the report.
        ``server_stopping`` says the server was shutting down when the app returned: an app
        that returns without ending the body then (sse-starlette ends its open streams so
        at shutdown) ended it for the shutdown, which is ``cancelled``, as a cancelled task
        is, and not a stream the app left unfinished.
        """
        if self.report is not None:
            return self.report
        if server_stopping and end is StreamEnd.APP_RETURNED:
            end = StreamEnd.CANCELLED
            self.add_note("the app returned while the server was shutting down")
        ended_at = self._clock()
        events, offset = self._events, self._bytes
        found: list[Finding] = []
        if end is StreamEnd.CONNECTION_LOST:
            found.append(
                rules.RESPONSE_NOT_FINISHED.finding(
                    f"the connection closed before the body ended, after {offset} byte(s): "
                    f"{_cause_name(cause, 'a transport error')}: reading the body failed",
                    events,
                    offset,
                )
            )
        undecided = self._detector is not None
        if end not in _ABORTS and self._inspecting:
            ended = self._end_of_body(events, offset)
            _vet(ended, self._checker)  # (the parser's: rules of every stream, declared)
            found.extend(ended)
        if end is StreamEnd.BODY_ENDED:
            # The body's end reached the server, so all that was fed did, including a
            # terminal only the end reveals (Gemini's "every candidate finished").
            self._record_delivered()
        delivered = self._delivered
        checker = self._checker
        gave_up = end is StreamEnd.READ_TIMEOUT and (
            checker is None or (checker.terminal_index is None and checker.error_index is None)
        )
        if self._liveness is not None and self.internal_error is None:
            clean = end in _TIMED_TO_THE_END and self._inspecting
            # The silence a reader gave up on is judged once, below, with its cause.
            judged_at = ended_at if not gave_up else self._last_activity()
            found.extend(self._liveness.at_end(judged_at, events, offset, clean))
        if gave_up:
            found.append(
                rules.STALLED.finding(
                    f"no bytes for {ended_at - self._last_activity():.1f} s after byte "
                    f"{offset}: the client stopped waiting "
                    f"({_cause_name(cause, 'a read timeout')})",
                    events,
                    offset,
                )
            )
        if end is StreamEnd.APP_RETURNED:
            found.append(
                rules.RESPONSE_NOT_FINISHED.finding(
                    f"the app returned after {self.body_messages} body message(s) and "
                    f"{offset} byte(s) without sending more_body=False",
                    events,
                    offset,
                )
            )
        has_terminal = checker is not None and checker.has_terminal
        judged = self._inspecting and (self._deep or self._judges_end_unsampled())
        if delivered == _NEITHER and not (has_terminal and judged):
            delivered = _UNJUDGED
        outcome = OUTCOMES[end][_COLUMN[delivered]]
        self._record(found)
        kept = self._findings
        if undecided and self._detector is None and kept is not None:
            # Decided only now, the held events' findings were replayed after the parser's
            # findings of later events: in event order, as if the stream had been decided
            # from its first event (as the same stream configured with its protocol is).
            kept.sort(key=_event_order)
        if emit is not None and found and self.internal_error is None:
            emit(found)  # a sink failing here calls fail(): the report below says so
        dropped = self._dropped
        skipped: tuple[str, ...] = ()
        if self._budget_left == _EXHAUSTED:
            skipped += (CHECKING_BUDGET,)  # (its note was added when it stopped)
        if checker is not None and self._deep and (self._inspecting or events):
            # Checks the request ruled out on frames that were checked: said, and counted.
            for reason, note in checker.checks_skipped():
                if reason not in skipped:
                    skipped += (reason,)
                    self.notes += (note,)
        self.report = new_report(
            protocol=self.protocol,
            outcome=outcome,
            findings=self.findings,
            events=events,
            bytes=offset,
            body_messages=self.body_messages,
            started_at=self.started_at,
            first_byte_at=self.first_byte_at,
            first_event_at=self.first_event_at,
            ended_at=ended_at,
            inspected=self._inspecting,
            internal_error=self.internal_error,
            path=self.path,
            protocol_source=self._protocol_source,
            route=self.route,
            notes=self.notes,
            max_event_gap=self._liveness.max_event_gap if self._liveness is not None else None,
            findings_dropped=tuple(sorted(dropped.items())) if dropped else (),
            client_closed_after_end=end in _CLIENT_CLOSED and delivered in (_ERROR, _TERMINAL),
            skipped_checks=skipped,
        )
        return self.report

    def _judges_end_unsampled(self) -> bool:
        """On the every-stream tier: whether the checker judged the end; a note says so
        when it could not (its protocol needs its full checks to tell its terminal)."""
        checker = self._checker
        if checker is None or checker.JUDGES_END_UNSAMPLED:
            return True
        lifecycle = checker.LIFECYCLE
        if not checker.has_terminal and not lifecycle.ended and not lifecycle.errored:
            return True  # nothing but the body's end ends it
        self.add_note(
            f"the end was not judged: {checker.name} tells its terminal and its in-band "
            "error only with its full checks"
        )
        return False

    def _end_of_body(self, events: int, offset: int) -> list[Finding]:
        """The parser's last word, the decision still owed, and the end-of-stream rules."""
        parser = self._parser
        found: list[Finding] = []
        held = self._held
        if held:
            self._held = b""
            completed = parser.feed(held)
            assert not completed, "held bytes (_unfinished_frame) complete no event"
        last, pending = parser.close()
        detector = self._detector
        if pending is not None and detector is not None:
            found.extend(detector.decide_by(pending))
            self._keep_faults(detector)
            self._adopt(detector)
        found.extend(last)
        if not parser.inspecting:  # close() can still find the last event too large
            self._inspecting = False
            return found
        detector = self._detector
        if detector is not None:
            found.extend(detector.decide_plain())
            self._adopt(detector)
        checker = self._checker
        assert checker is not None
        found.extend(
            checker.on_end(events, offset) if self._deep else checker.end_unsampled(events, offset)
        )
        return found

    @property
    def last_byte_at(self) -> float | None:
        """When the last body byte arrived, or None before the first."""
        return self._last_byte_at if self._bytes else None

    def _last_activity(self) -> float:
        """When the stream last showed life: its last byte, or its start."""
        return self.started_at if self.last_byte_at is None else self.last_byte_at

    def fallback_report(self, end: StreamEnd) -> StreamReport:
        """The report when building the real one failed: the outcome from the end alone."""
        column = _COLUMN[_UNJUDGED if self._delivered == _NEITHER else self._delivered]
        self.report = StreamReport(
            protocol=self.protocol,
            outcome=OUTCOMES[end][column],
            findings=self.findings,
            events=self._events,  # what was counted before the failure still counts
            bytes=self._bytes,
            body_messages=self.body_messages,
            started_at=self.started_at,
            first_byte_at=self.first_byte_at,
            first_event_at=self.first_event_at,
            ended_at=self.started_at,
            inspected=False,
            internal_error=self.internal_error,
            path=self.path,
            route=self.route,
            protocol_source=self._protocol_source,
            notes=self.notes,
        )
        return self.report


_UTF8_NAMES = ("utf-8", "utf8")
#: Content-Encoding values named as they are; anything else is described by size.
_KNOWN_ENCODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd", "compress", "identity"})


def _frame_end(data: bytes, start: int, crlf: bool) -> int:
    """Where the first frame from ``start`` ends, after its blank line (``\\n\\n``, or
    ``\\r\\n\\r\\n`` when ``crlf``), or -1. A line ending is found with a one-byte
    search (``memchr``), far cheaper than a two-byte one, and frames have few lines."""
    if crlf:
        while (at := data.find(b"\r", start)) >= 0:
            if data.startswith(b"\n\r\n", at + 1):
                return at + 4
            start = at + 1
        return -1
    last = len(data) - 1
    while 0 <= (at := data.find(b"\n", start)) < last:
        if data[at + 1] == 10:  # b"\n"
            return at + 2
        start = at + 1
    return -1


def _unfinished_frame(data: bytes, start: int = 0) -> bool:
    """Whether the parser, fed ``data`` at an event boundary, would make nothing of it but
    a frame begun: no line ending but LF, no blank line, and every whole line a ``data:``
    line (its UTF-8 is checked when its event is dispatched) or an ``event:`` line of
    UTF-8 (another line could be a finding as soon as it is read). The lines before
    ``start``, a line's start, are known to be such lines (so they hold no CR). A line is
    read as a slice: ``bytes`` methods given a start parse their arguments as a tuple on
    Python 3.11, and the compiled build calls ``startswith`` without one directly."""
    # (A byte asked for as its value: ``b"\r" in data`` first tries the bytes as an
    # integer, and the TypeError it makes and drops costs more than the scan.)
    if 0x0D in data:
        return False
    if 0x0A not in data:
        return True  # a line begun, no whole one
    while (end := data.find(b"\n", start)) >= 0:
        line = data[start:end]
        if not line.startswith(b"data:"):
            if not line.startswith(b"event:"):
                return False
            try:
                line.decode()
            except UnicodeDecodeError:
                return False
        start = end + 1
    return True


def _vet(found: Sequence[Finding], checker: Checker | None) -> None:
    """Refuse the findings of a plugin's checker that name a rule its protocol does not
    declare (``PLUGIN_RULES``): an ``UndeclaredRule`` before any of them is kept or handed
    on, which the seam counts as the stream's internal error (and stops checking it). A
    built-in checker's findings, and findings of no checker, are not looked up."""
    if checker is None:
        return
    declared = PLUGIN_RULES.get(checker.name)
    if declared is None:
        return
    for finding in found:
        if finding.rule not in declared:
            shown = finding.rule if finding.rule in rules.RULES else describe(finding.rule)
            raise UndeclaredRule(
                f"protocol {checker.name!r} made a finding of rule {shown}, which it does not "
                "declare: add the rule to its checker's RAISES (and, if it is its own, to "
                "its spec's rules)"
            )


def _is_short_number(value: str) -> bool:
    return value.isascii() and value.isdigit() and len(value) <= 18


def _charset(content_type: str) -> str | None:
    for parameter in content_type.split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip('"')
    return None


def _cause_name(cause: BaseException | None, default: str) -> str:
    """The type of the exception that ended a read: its text may quote the peer."""
    return default if cause is None else type(cause).__name__


def _event_order(finding: Finding) -> int:
    return -1 if finding.event_index is None else finding.event_index


def open_monitor(
    protocol: str,
    *,
    request: Mapping[str, Any] | None,
    path: str | None,
    headers: Iterable[tuple[bytes, bytes]],
    route: str | None,
    started_at: float | None,
    confirms_delivery: bool,
    clock: Clock,
    max_event_bytes: int,
    excerpt_chars: int,
    liveness: LivenessLimits | None,
    json_data: bool,
    checking_budget_s: float,
) -> StreamMonitor:
    """``StreamMonitor(...)`` with these keywords, for a seam that opens one per stream.

    The same monitor; what differs is the call. Called from interpreted code, a compiled
    class's constructor parses its keywords from a ``dict`` (about 10,000 instructions
    for these, session 16's count), a compiled function from the call's own stack."""
    return StreamMonitor(
        protocol,
        request=request,
        path=path,
        headers=headers,
        route=route,
        started_at=started_at,
        confirms_delivery=confirms_delivery,
        clock=clock,
        max_event_bytes=max_event_bytes,
        excerpt_chars=excerpt_chars,
        liveness=liveness,
        json_data=json_data,
        checking_budget_s=checking_budget_s,
    )


def check_stream(
    chunks: Iterable[bytes] | bytes,
    *,
    protocol: str = AUTO,
    request: Mapping[str, Any] | None = None,
    path: str | None = None,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    clock: Clock = time.monotonic,
    json_data: bool = False,
) -> StreamReport:
    """Check captured body bytes offline; the body counts as ended after the last chunk.

    ``chunks`` is any iterable of byte strings (one ``bytes`` object is one chunk).
    ``json_data`` is the plain-SSE route option ``{"protocol": "sse", "json": true}``.
    """
    if isinstance(chunks, bytes | bytearray | memoryview):
        chunks = [bytes(chunks)]
    monitor = StreamMonitor(
        protocol,
        request=request,
        path=path,
        clock=clock,
        max_event_bytes=max_event_bytes,
        json_data=json_data,
    )
    for chunk in chunks:
        monitor.feed(chunk)
    return monitor.finish(StreamEnd.BODY_ENDED)
