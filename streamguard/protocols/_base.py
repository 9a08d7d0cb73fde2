"""The protocol engine: the base every checker runs on, and the helpers they share.

A checker is a small sans-I/O state machine: the monitor hands it each dispatched
``Event`` with its index, then tells it how the stream ended. It returns findings and
exposes two facts the monitor needs to classify the end: whether the protocol's terminal
signal arrived, and whether the stream ended with an in-band error the protocol defines.
It knows nothing of ASGI, clocks, metrics or logging.

Theory of operation
-------------------

A protocol declares its lifecycle as a table (``LIFECYCLE``, see ``_lifecycle``) and the
rules its payload handlers can raise (``RAISES``). The engine here owns the phase: a
checker classifies an event into a kind and calls ``advance``, which looks the step up,
makes the lifecycle finding when the event breaks one, and records the terminal and the
error. Events in a sealed phase (after the terminal, say) never reach the protocol's
code: ``on_event`` asks ``sealed_kind`` for their kind and name, and advances. At the
body's end, ``on_end`` runs the protocol's own end-of-stream rules (``check_end``) and
advances with ``END``, whose finding (a missing terminal) comes first. No protocol
overrides ``on_event`` or ``on_end``; they have hooks instead: ``end_step`` names the END
step's event (Gemini's terminal is known only at the end), and a protocol that sets
``READS_FRAMING`` gets ``framing_finding`` on every event, sealed ones included, and
``framing_at_end`` at the body's end, each finding placed first.

Routes
------

Most protocols name each event's type in one JSON field, and do the same things with
every event: parse it once, find its type, take its lifecycle step, check its shape, then
run what is particular to the type. That sequence is the engine's, as h2's ``stream.py``
keeps one row per transition: a protocol declares ``ROUTES``, one ``Route`` per documented
type (its lifecycle kind, the shape its payload must have, its handler, the field its
handler keys by), its ``SENTINELS`` (data such as ``[DONE]`` that is read as it is), and
what an undocumented type does (``UNKNOWN_TYPES``: its step, and a finding once per
distinct type, for a bounded number of types a stream); the default ``check_event`` runs
``classify`` and then ``follow``. A protocol whose wire really differs overrides
``classify`` alone (LangGraph's kind is in the event's name, not its data; a Gemini
chunk names none, its kind is the state its fields leave the candidates in), and says why
in a comment. Only a checker with nothing to route writes ``check_event`` (plain SSE: no
types, no lifecycle).

The rest is shared so that protocols read the same: ``EventFindings`` holds the findings on the
event being checked, so a handler adds one with ``found.add(rule, detail)``; ``report``
builds a finding for an event (the ``event N`` prefix and the byte offset), honouring
``Rule.once_per_stream``; ``parse_object`` parses a payload or makes the ``invalid_json``
finding; ``KeptText`` holds text for a later check within the stream's budget; ``listing``
shows a few entries and a count. The trackers of things that open and close are
``_entities``'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice
from typing import Any, ClassVar, Final, TypeVar

from streamguard import _wire, rules
from streamguard.protocols._fields import Field, Shape, nested_problem, shape_problem, type_name
from streamguard.protocols._lifecycle import (
    ANY,
    END,
    ERROR,
    OTHER,
    STAY,
    TERMINAL,
    Lifecycle,
    Step,
    broken,
    go,
)
from streamguard.protocols._payload import not_json, parse_json
from streamguard.protocols._skeleton import Again, Entry, Holes, ShapeCache
from streamguard.report import Finding, repeated_finding
from streamguard.rules import Rule
from streamguard.sse import Event

_C = TypeVar("_C")

try:
    from mypy_extensions import mypyc_attr
except ImportError:  # not installed: the decorator only speaks to the compiler anyway

    def mypyc_attr(*attrs: str, **kwattrs: object) -> Callable[[_C], _C]:
        return lambda cls: cls


__all__ = [
    "KNOWN_EVENT_NAMES",
    "MAX_KEPT_TEXT_CHARS",
    "NOT_JSON_DATA",
    "NO_FINDINGS",
    "NO_PAYLOAD",
    "Checker",
    "EventFindings",
    "Handler",
    "KeptText",
    "Route",
    "Transcript",
    "UnknownTypes",
    "any_json",
    "cut_rows",
    "event_name",
    "json_object",
    "listing",
    "may_name",
    "sealed_rows",
    "terminated_lifecycle",
    "type_name",
]

NO_FINDINGS: Final[Sequence[Finding]] = ()
#: The event ``repeat_unread`` hands a checker whose ``repeat_event`` reads none.
_UNREAD: Final = Event("", "")

#: The characters of text one stream may keep for later checks, across everything it keeps
#: (tool-call arguments to parse at the finish, deltas to compare with a ``.done`` text).
#: Part of the documented per-stream ceiling: past it a check is skipped, never the memory.
MAX_KEPT_TEXT_CHARS: Final = 1024 * 1024


#: SSE event names the protocols define, shown as they are in messages; any other name came
#: from the wire and is shown by size and hash only. The registry adds each protocol's
#: ``event_names`` as it registers it (``streamguard.protocols.register``).
KNOWN_EVENT_NAMES: Final[set[str]] = set()


def event_name(name: str) -> str:
    """An event's name as a message may show it."""
    return _wire.token(name, KNOWN_EVENT_NAMES)


def sealed_rows(
    ended: str,
    errored: str | None = None,
    *,
    after_error: str = "follows the in-band error sent as event {error}",
    duplicate: str = "repeats the terminal signal first sent as event {terminal}",
    after_terminal: str = "follows the terminal signal sent as event {terminal}",
) -> dict[tuple[str, str], Step]:
    """The rows of the phase the terminal signal leads to (``ended``) and of the one an
    in-band error leads to (``errored``, if it ends the stream): a second terminal is
    ``duplicate_terminal``, any other event ``event_after_terminal``, neither checked, and
    the body's end changes nothing. A protocol's own rows for those phases (a new run
    after the end, say) override them; the message texts may be reworded per protocol."""
    name_prefix = "event {index} ({name}) "
    rows = {
        (ended, TERMINAL): broken(
            rules.DUPLICATE_TERMINAL, "event {index} " + duplicate, checked=False
        ),
        (ended, ANY): broken(
            rules.EVENT_AFTER_TERMINAL, name_prefix + after_terminal, checked=False
        ),
        (ended, END): STAY,
    }
    if errored is not None:
        rows[errored, ANY] = broken(
            rules.EVENT_AFTER_TERMINAL, name_prefix + after_error, checked=False
        )
        rows[errored, END] = STAY
    return rows


def cut_rows(cut: str, *, terminal: str, reader: str) -> dict[tuple[str, str], Step]:
    """The rows of the phase a ``[DONE]`` before the terminal leads to (``cut``), for a
    protocol whose client stops reading at ``[DONE]`` wherever it comes (``reader``, as
    messages name it; ``terminal`` the event it never sees): every later event is lost to
    it (``event_after_terminal``), and so is the end (``missing_terminal`` at the body's
    end). Messages name the ``[DONE]`` by ``{done}``, a field the checker gives."""
    return {
        (cut, ANY): broken(
            rules.EVENT_AFTER_TERMINAL,
            "event {index} ({name}) follows the [DONE] sent as event {done} before any "
            f"{terminal}; {reader} stops reading at [DONE] and never sees it",
            checked=False,
        ),
        (cut, END): broken(
            rules.MISSING_TERMINAL,
            "the body ended after {index} event(s) and {offset} byte(s) with no "
            f"{terminal} before the [DONE] sent as event {{done}}, where {reader} stops "
            "reading",
        ),
    }


def terminated_lifecycle(
    *,
    terminal: str = "the terminal signal",
    after_error: str = "follows the in-band error sent as event {error}",
    duplicate: str = "repeats the terminal signal first sent as event {terminal}",
    after_terminal: str = "follows the terminal signal sent as event {terminal}",
) -> Lifecycle:
    """The lifecycle of a protocol with a terminal signal and an in-band error that both
    end the stream; the message texts may be reworded per protocol."""
    streaming, ended, errored = "streaming", "ended", "errored"
    return Lifecycle(
        phases={
            streaming: "events arrive",
            ended: f"{terminal} arrived",
            errored: "an in-band error arrived",
        },
        kinds={},
        initial=streaming,
        table={
            (streaming, TERMINAL): go(ended),
            (streaming, ERROR): go(errored),
            (streaming, OTHER): STAY,
            (streaming, END): broken(
                rules.MISSING_TERMINAL,
                "the body ended after {index} event(s) and {offset} byte(s) without the "
                "{protocol} terminal signal",
            ),
            **sealed_rows(
                ended,
                errored,
                after_error=after_error,
                duplicate=duplicate,
                after_terminal=after_terminal,
            ),
        },
        ended=frozenset({ended}),
        errored=frozenset({errored}),
        sealed=frozenset({ended, errored}),
    )


#: A protocol without a terminal signal: the end of the body is the end of the stream.
UNTERMINATED = Lifecycle(
    phases={"streaming": "events arrive; the body's end ends the stream"},
    kinds={},
    initial="streaming",
    table={("streaming", ANY): STAY},
    ended=frozenset(),
    errored=frozenset(),
    sealed=frozenset(),
)


def _findings_again(found: Sequence[Finding], event: Event, index: int) -> tuple[Again, ...] | None:
    """``found`` as findings a frame of the same skeleton makes again, or None when one of
    them cannot be: it is placed elsewhere, carries an excerpt, is reported once per stream
    or does not start as ``report`` words it (``event N``)."""
    prefix = f"event {index}"
    cut = len(prefix)
    again: list[Again] = []
    for finding in found:
        rule = rules.RULES.get(finding.rule)
        message = finding.message
        if (
            rule is None
            or rule.once_per_stream
            or finding.event_index != index
            or finding.byte_offset != event.offset
            or finding.excerpt is not None
            or not message.startswith(prefix)
            or message[cut : cut + 1].isdigit()  # "event 12" is not event 1's
        ):
            return None
        again.append((finding.rule, finding.severity, message[cut:]))
    return tuple(again)


def _again(
    again: tuple[Again, ...], event: Event, index: int, repeated: Sequence[Finding]
) -> list[Finding]:
    """The findings a repeated frame makes: those vouched to come again, then its own."""
    found = [
        repeated_finding(rule, severity, f"event {index}{detail}", index, event.offset)
        for rule, severity, detail in again
    ]
    found.extend(repeated)
    return found


#: A route's handler: ``handler(checker, payload, found)``, the protocol's own checks of
#: an event whose step was taken and whose declared shape was checked; ``payload`` is the
#: parsed object (a ``dict``, or a protocol's ``TypedDict`` of it), and what the handler
#: returns is not read.
Handler = Callable[[Any, Any, "EventFindings"], object]


class Route:
    """One row of a protocol's route table (``Checker.ROUTES``): what an event of one type
    is. ``kind`` is its lifecycle kind; ``shape`` the fields its payload must have, flat
    or a nested ``Shape`` (a mismatch is a ``schema_mismatch``, and the handler still
    runs); ``handler`` the protocol's own checks; ``key`` a field the handler cannot run
    without, a string (the id of the thing the event is about: when the shape finds it
    missing, the event's other rules still apply, but not the handler's); ``name`` how
    messages show the event (None: its type, as it is, since the table lists only
    documented types)."""

    __slots__ = ("handler", "key", "kind", "name", "shape")

    def __init__(
        self,
        kind: str = OTHER,
        handler: Handler | None = None,
        shape: tuple[Field, ...] | Shape | None = None,
        *,
        key: str | None = None,
        name: str | None = None,
    ) -> None:
        self.kind = kind
        self.handler = handler
        self.shape = shape
        self.key = key
        self.name = name


class UnknownTypes:
    """What a protocol does with a type its route table does not list: the lifecycle step
    it takes (``kind``; None: none, as a client that drops it unread), the name a message
    gives that step (None: the type by size and hash), and its finding, ``rule`` with
    ``detail`` (following ``event N``; ``{shown}`` is the type by size and hash), made once
    per distinct type and for at most ``limit`` types a stream, so that a stream of
    made-up types neither floods the log nor sizes what the checker keeps."""

    __slots__ = ("detail", "kind", "limit", "name", "route", "rule")

    def __init__(
        self,
        detail: str,
        *,
        rule: Rule = rules.UNKNOWN_EVENT_TYPE,
        kind: str | None = OTHER,
        name: str | None = None,
        limit: int = 8,
    ) -> None:
        self.detail = detail
        self.rule = rule
        self.kind = kind
        self.name = name
        self.limit = limit
        #: The route such an event follows: its step, then the finding.
        self.route = Route(OTHER if kind is None else kind, _report_unknown_type)


def _report_unknown_type(checker: Checker, payload: dict[str, Any], found: EventFindings) -> None:
    checker.report_unknown_type(found)


# A protocol of one's own is a Checker subclass in plain Python (registered in CHECKERS):
# the compiled build must let interpreted classes inherit from this one.
@mypyc_attr(allow_interpreted_subclasses=True)
class Checker:
    """The engine every protocol checker runs on; see the module docstring.

    A protocol sets ``name``, ``has_terminal``, ``LIFECYCLE`` and ``RAISES``, declares
    ``ROUTES`` (or overrides ``classify``, or writes ``check_event``: see "Routes"), has
    ``is_terminal`` or ``sealed_kind`` when it has a terminal signal and, for rules of its
    own at the body's end, ``check_end``.
    """

    # Slots: one checker lives per open stream, and an idle stream must stay small.
    __slots__ = (
        "_kept_text_left",
        "_reported_once",
        "_shapes",
        "_unknown_types",
        "_vouch_token",
        "_vouched",
        "_vouched_again",
        "_vouched_before",
        "error_index",
        "frame_cache",
        "path",
        "phase",
        "request",
        "terminal_index",
    )

    #: The protocol's name, as reported and used in metric labels.
    name: ClassVar[str] = "sse"
    #: Whether the protocol defines a terminal signal. Without one, the end of the body
    #: is the end of the stream and a clean end counts as ``completed``.
    has_terminal: ClassVar[bool] = True
    #: Whether ``end_kind`` tells the events that end the stream without the full checks,
    #: so a stream the sample leaves out is still judged on its terminal (the every-stream
    #: tier, ``StreamMonitor.check_framing_only``). False: its end is left unjudged.
    JUDGES_END_UNSAMPLED: ClassVar[bool] = False
    #: With ``JUDGES_END_UNSAMPLED``: bytes one of which every event ``end_kind`` does not
    #: answer ``None`` holds in its frame (its ``event:`` line or its data), so that a
    #: frame with none of them is counted unread (``EventParser.skim``). ``None``: every
    #: event is parsed and asked.
    END_HINTS: ClassVar[tuple[bytes, ...] | None] = None
    #: The protocol's lifecycle table.
    LIFECYCLE: ClassVar[Lifecycle] = UNTERMINATED
    #: The rules the protocol's payload handlers can raise (the lifecycle table's rules
    #: are added to them): what the catalog, the docs and the metrics list for it.
    RAISES: ClassVar[frozenset[Rule]] = frozenset()
    #: The reasons (``report.SKIP_REASONS``) ``checks_skipped`` can give: what the metrics
    #: initialise for the protocol and the docs list.
    SKIPS: ClassVar[frozenset[str]] = frozenset()
    #: Whether ``framing_finding`` and ``framing_at_end`` are asked (for a protocol whose
    #: clients read less of SSE than the spec allows).
    READS_FRAMING: ClassVar[bool] = False
    #: Whether ``repeat_event`` reads its ``event`` argument. One that does not (every
    #: built-in's) lets the engine repeat a fitted frame without making its event
    #: (``repeat_unread``); one that may (a plugin's, unless it says otherwise) gets it.
    REPEAT_READS_EVENT: ClassVar[bool] = True
    #: The route table the default ``check_event`` runs (see "Routes" in the module
    #: docstring): each documented value of ``TYPE_FIELD`` -> its ``Route``. Empty: the
    #: protocol writes its own ``check_event``.
    ROUTES: ClassVar[Mapping[str, Route]] = {}
    #: Data that means something as it is, without being a JSON object (a gateway's
    #: ``[DONE]``, empty data) -> its route (whose handler gets an empty payload).
    SENTINELS: ClassVar[Mapping[str, Route]] = {}
    #: The JSON field whose value names an event's type; None: the event's SSE name does
    #: (``event: done``), and its data, a JSON object still, is parsed after its step, so
    #: that data which is not one takes its route's step without its shape or handler.
    TYPE_FIELD: ClassVar[str | None] = "type"
    #: The ``schema_mismatch`` detail (after ``event N``) of a payload without a string
    #: ``TYPE_FIELD``.
    NO_TYPE: ClassVar[str] = ": field `type` is missing or not a string"
    #: What a type ``ROUTES`` does not list does.
    UNKNOWN_TYPES: ClassVar[UnknownTypes] = UnknownTypes(
        ": event type {shown} is not one the protocol defines (each unknown type is reported once)"
    )

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        self.request = request
        self.path = path
        self.phase = self.LIFECYCLE.initial
        self.terminal_index: int | None = None
        self.error_index: int | None = None
        self._kept_text_left = MAX_KEPT_TEXT_CHARS
        self._reported_once: frozenset[str] = _NOTHING_REPORTED
        self._unknown_types: frozenset[str | bytes] = _NONE_UNKNOWN
        #: The skeletons of frames the checker vouched for: made at the second such frame.
        self._shapes: ShapeCache | None = None
        #: The same, for the monitor to fit whole chunks to (``ShapeCache.fit_frame``);
        #: never for a protocol that reads the framing (its ``framing_finding`` must see
        #: every event).
        self.frame_cache: ShapeCache | None = None
        #: What the handler of the frame being checked vouched for (``repeatable``).
        self._vouched: Holes | None = None
        self._vouch_token: object = None
        self._vouched_again = False
        #: Whether a frame was vouched for before: the first teaches nothing (a skeleton
        #: costs tens of microseconds to learn and about a kilobyte while it is held, and
        #: pays back only if the stream goes on), so a stream that waits after it holds
        #: no cache.
        self._vouched_before = False

    # -- what the monitor reads -----------------------------------------------------------

    @property
    def terminal_seen(self) -> bool:
        return self.terminal_index is not None

    @property
    def error_seen(self) -> bool:
        return self.error_index is not None

    # -- the engine ------------------------------------------------------------------------

    def on_event(self, event: Event, index: int) -> Sequence[Finding]:
        """Check one event: its framing when the protocol reads it, then in a sealed phase
        only the lifecycle, else the protocol."""
        framing = self.framing_finding(event, index) if self.READS_FRAMING else None
        if self.phase in self.LIFECYCLE.sealed:
            kind, name = self.sealed_kind(event)
            found = self.step_only(kind, event, index, name)
        else:
            found = self._checked(event, index)
        return found if framing is None else (framing, *found)

    def _checked(self, event: Event, index: int) -> Sequence[Finding]:
        """``check_event``, or ``repeat_event`` for a frame that fits a skeleton (see
        ``_skeleton``): the same findings either way."""
        shapes = self._shapes
        declined = False
        if shapes is not None:
            shapes.last = None
            if shapes.entries:
                hit = shapes.find(event.event, event.data)
                if hit is not None:
                    repeated = self.repeat_event(event, index, hit[0], hit[1])
                    if repeated is not None:
                        return repeated if not hit[2] else _again(hit[2], event, index, repeated)
                    declined = True  # its skeleton is known already
        return self._checked_in_full(event, index, declined)

    def repeat_frame(
        self, event: Event, index: int, entry: Entry, values: Sequence[str]
    ) -> Sequence[Finding]:
        """``on_event`` for an event the monitor did not parse: its chunk fitted the framed
        skeleton of ``entry`` whole (``ShapeCache.fit_frame``), as ``_checked`` would have
        found it. (Never a sealed phase: a change of phase forgets every skeleton.)"""
        repeated = self.repeat_event(event, index, entry.token, values)
        if repeated is not None:
            again = entry.again
            return repeated if not again else _again(again, event, index, repeated)
        return self._checked_in_full(event, index, True)

    def repeat_unread(
        self, index: int, entry: Entry, values: Sequence[str]
    ) -> Sequence[Finding] | None:
        """``repeat_frame`` for a fitted frame whose event was not made: what
        ``repeat_event`` returns, when it reads no event and the entry's findings do not
        come again (they are placed on the event); None when the frame needs its event,
        which the caller then makes for ``repeat_frame`` (``repeat_event`` returns None
        only before it changes anything, so asking twice is asking once)."""
        if self.REPEAT_READS_EVENT or entry.again:
            return None
        return self.repeat_event(_UNREAD, index, entry.token, values)

    def _checked_in_full(self, event: Event, index: int, declined: bool) -> Sequence[Finding]:
        """``check_event``, then learning from a frame the checker vouched for (unless its
        skeleton is known, and ``declined`` its repeat), or forgetting on any change."""
        shapes = self._shapes
        phase = self.phase
        found = self.check_event(event, index)
        vouched = self._vouched
        if vouched is not None:
            self._vouched = None
            if self.phase == phase:
                again: tuple[Again, ...] | None = ()
                if found:
                    again = _findings_again(found, event, index) if self._vouched_again else None
                if again is not None:
                    if not vouched.text and not vouched.values:
                        return found  # ``UNCHANGED``: the skeletons hold, none is learned
                    if shapes is None:
                        if not self._vouched_before:
                            self._vouched_before = True
                            return found
                        shapes = self._shapes = ShapeCache()
                        if not self.READS_FRAMING:  # its framing_finding sees every event
                            self.frame_cache = shapes
                    if not declined:
                        shapes.consider(event.event, event.data, vouched, self._vouch_token, again)
                    return found
        if shapes is not None:
            shapes.forget()
        return found

    def repeatable(self, holes: Holes, token: object = None, again: bool = False) -> None:
        """Vouch that the frame being checked changed nothing a rule reads, beyond what
        ``repeat_event`` does with ``token``, whatever its ``holes`` hold, and found nothing
        (or, with ``again``, that a frame of its skeleton makes the same findings again, in
        the same order: never a rule the checker reports once by its own bookkeeping): a
        frame that fits its skeleton may skip the check. With ``_skeleton.UNCHANGED``
        (no hole), nothing is learned and the skeletons learned before hold."""
        self._vouched = holes
        self._vouch_token = token
        self._vouched_again = again

    def rest(self) -> None:
        """The stream has been silent a while: forget the skeletons (about a kilobyte each)
        rather than hold them while it waits; its next frames learn again. The cache
        itself stays, with its learning wait (a stream whose frames come seconds apart
        learns rarely), and is emptied, not dropped, so that a chunk being taken a frame
        at a time when a poll comes in (from an ``on_event`` callback) sees it empty.
        No finding changes: a skeleton only spares a parse."""
        if self._shapes is not None:
            self._shapes.forget()

    def repeat_event(
        self, event: Event, index: int, token: object, values: Sequence[str]
    ) -> Sequence[Finding] | None:
        """Check a frame that fits the skeleton of one the checker vouched for with
        ``token``: do again what that frame did (nothing, by default); ``values`` are the
        texts of the skeleton's value holes. None when a value asks for the full check
        (a sequence number that did not grow by one): the frame then takes it. The
        findings the checker vouched would come ``again`` precede the ones returned."""
        return NO_FINDINGS

    def step_only(
        self, kind: str, event: Event, index: int, name: str | None = None
    ) -> Sequence[Finding]:
        """``advance`` for an event whose payload is not checked: its findings."""
        finding = self.advance(kind, event, index, name)
        return NO_FINDINGS if finding is None else (finding,)

    def end_unsampled(self, events: int, offset: int) -> Sequence[Finding]:
        """``on_end`` on the every-stream tier (``end_kind``): the lifecycle's end step
        alone (a missing terminal), for a protocol that ``JUDGES_END_UNSAMPLED``; the
        protocol's own end-of-stream rules are deep checks."""
        if not self.JUDGES_END_UNSAMPLED:
            return NO_FINDINGS
        end = Event("", "", offset=offset)
        finding = self.advance(END, end, events)
        return NO_FINDINGS if finding is None else (finding,)

    def on_end(self, events: int, offset: int) -> Sequence[Finding]:
        """The app finished sending: the lifecycle's end step, then the protocol's own
        end-of-stream rules.

        The monitor does not call this when the client left, the app failed or the task
        was cancelled: the missing end is then explained by the outcome.
        """
        end = Event("", "", offset=offset)  # the body's end, where the END step is taken
        framing = self.framing_at_end(end, events) if self.READS_FRAMING else None
        own = self.check_end(events, offset)
        # The END step goes through advance() like any other, at the body's end.
        index, name = self.end_step(events)
        finding = self.advance(END, end, index, name)
        found = [] if framing is None else [framing]
        if finding is not None:
            found.append(finding)
        found.extend(own)
        return found

    def advance(
        self, kind: str, event: Event, index: int, name: str | None = None
    ) -> Finding | None:
        """Take the lifecycle step for an event of ``kind``; the lifecycle finding, if the
        event breaks a rule. ``name`` is the event as the message shows it (by default
        its SSE name, as ``event_name`` shows it)."""
        step = self.LIFECYCLE.step(self.phase, kind)
        if step.rule is None and step.then is None:
            return None  # the common step: an event that changes nothing
        finding = None
        if step.rule is not None:
            shown = event_name(event.event) if name is None else name
            finding = step.rule.finding(
                self._message(step.message, index, shown, event.offset), index, event.offset
            )
        then = step.then
        if then is not None and then != self.phase:
            self.phase = then
            lifecycle = self.LIFECYCLE
            if then in lifecycle.ended and self.terminal_index is None:
                self.terminal_index = index
            if then in lifecycle.errored and self.error_index is None:
                self.error_index = index
        return finding

    def checked_after(self, kind: str) -> bool:
        """Whether an event of ``kind`` in the current phase still has its payload checked
        (ask before ``advance``)."""
        return self.LIFECYCLE.step(self.phase, kind).checked

    def _message(self, template: str, index: int, name: str, offset: int) -> str:
        return template.format(
            index=index,
            name=name,
            terminal=self.terminal_index,
            error=self.error_index,
            offset=offset,
            protocol=self.name,
            **self.message_fields(),
        )

    def message_fields(self) -> Mapping[str, object]:
        """More fields a protocol's step messages name (an event it remembers, say)."""
        return {}

    def checks_skipped(self) -> Sequence[tuple[str, str]]:
        """The checks this stream went without, as ``(reason, note)`` pairs: a reason from
        ``report.SKIP_REASONS`` (counted by the metrics) and a note for people that names
        no wire value. The monitor asks once, when it builds the report."""
        return ()

    # -- helpers for protocols ----------------------------------------------------------

    def finding(self, rule: Rule, event: Event, index: int, detail: str) -> Finding:
        """A finding on event ``index``: ``detail`` follows ``event N`` directly (start it
        with a space or a colon)."""
        return rule.finding(f"event {index}{detail}", index, event.offset)

    def report(
        self, found: list[Finding], rule: Rule, event: Event, index: int, detail: str
    ) -> None:
        """Append a finding on event ``index`` to ``found``; a once-per-stream rule only
        the first time, with a note that later ones are not reported."""
        if rule.once_per_stream:
            if not self.first_time(rule):
                return
            detail += " (reported once per stream)"
        found.append(rule.finding(f"event {index}{detail}", index, event.offset))

    def reported(self, rule: Rule) -> bool:
        """Whether a once-per-stream ``rule`` was reported already: ask before building an
        expensive detail (a digest, a framing check) that ``report`` would drop."""
        return rule.name in self._reported_once

    def first_time(self, rule: Rule) -> bool:
        """Whether ``rule`` is reported for the first time in this stream (and note that it
        now is): ``report``'s bookkeeping, for a message that must end otherwise."""
        if rule.name in self._reported_once:
            return False
        self._reported_once = self._reported_once | {rule.name}
        return True

    def parse_object(
        self,
        event: Event,
        index: int,
        found: list[Finding],
        where: str = "",
        *,
        expected: str = "an object",
    ) -> dict[str, Any] | None:
        """The event's data as a JSON object, or None with the ``invalid_json`` finding in
        ``found``. ``where`` follows ``event N`` in the message (`` (name)``, say);
        ``expected`` names the object the protocol wants (``a JSON-RPC response``)."""
        value = self.parse_value(event, index, found, where)
        if type(value) is dict:
            return value
        if value is not _NOT_JSON:
            problem = f"{where}: data is a JSON {type_name(value)}, not {expected}"
            found.append(self.finding(rules.INVALID_JSON, event, index, problem))
        return None

    def parse_value(
        self, event: Event, index: int, found: list[Finding], where: str = ""
    ) -> object:
        """The event's data as a JSON value, or ``_NOT_JSON`` with the ``invalid_json``
        finding in ``found``."""
        try:
            return parse_json(event.data)
        except ValueError as exc:
            # ``exc`` is pydantic-core's description: a fixed text and a position, never
            # the data; the data itself is shown by size only.
            problem = f"{where}: {not_json(exc, event.data)}"
            found.append(self.finding(rules.INVALID_JSON, event, index, problem))
            return _NOT_JSON

    def keep_text(self, chars: int) -> bool:
        """Reserve room for ``chars`` more kept characters; False when the stream's budget
        is spent (the caller then drops what it kept, ``free_text``s it, and skips its
        check)."""
        if chars > self._kept_text_left:
            return False
        self._kept_text_left -= chars
        return True

    def free_text(self, chars: int) -> None:
        """Give back the room of kept text that was checked or dropped."""
        self._kept_text_left += chars

    @classmethod
    def transcribe(cls, data: str, out: Transcript) -> bool:
        """What one event's data says, for the test helpers and the CLI: its text (by
        choice or candidate) and finish reasons, into ``out``; whether it carried text.
        Plain SSE has no payload rules: the data is the text."""
        return out.add(0, data)

    # -- for subclasses ---------------------------------------------------------------

    def is_terminal(self, event: Event) -> bool:
        """Whether an event in a sealed phase is the terminal signal (sent again)."""
        return False

    def end_kind(self, event: Event, index: int) -> str | None:
        """The every-stream tier's question (``JUDGES_END_UNSAMPLED``): the lifecycle kind
        of an event that may end the stream (``TERMINAL``, ``ERROR``, or a kind of the
        protocol's own that leads to either), read as cheaply as the wire allows and as
        the full check would read it; ``None`` for an event that ends nothing, which
        then takes no step. Only the end matters here: a kind whose steps never reach an
        ended or errored phase, nor change where ``TERMINAL`` and ``ERROR`` lead, may be
        ``None``."""
        return None

    def sealed_kind(self, event: Event) -> tuple[str, str | None]:
        """An event's kind in a sealed phase, read without parsing it, and its name as a
        message shows it (None: as ``event_name`` shows its SSE name)."""
        return (TERMINAL if self.is_terminal(event) else OTHER), None

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        """One event in a phase that is not sealed: through the route table (``classify``,
        then ``follow``), unless the protocol writes its own."""
        if not self.ROUTES:
            raise NotImplementedError(
                f"{type(self).__name__} declares no ROUTES and writes no check_event"
            )
        found = EventFindings(self, event, index)
        route = self.classify(event, found)
        if route is not None:
            self.follow(route, found)
        return found.items

    def classify(self, event: Event, found: EventFindings) -> Route | None:
        """An event's route, its payload and name set on ``found``; None for an event
        settled here, its findings and step in ``found``: data that is no JSON object, a
        payload without a string type, a type the client drops unstepped. The default
        reads a sentinel, else a JSON object and its ``TYPE_FIELD``; a protocol whose wire
        differs overrides this alone, and says why."""
        sentinel = self.SENTINELS.get(event.data) if self.SENTINELS else None
        if sentinel is not None:
            found.payload = NO_PAYLOAD
            found.name = event.data if sentinel.name is None else sentinel.name
            return sentinel
        field = self.TYPE_FIELD
        if field is None:  # the name routes it; ``follow`` parses the data
            name = found.type = event.event
            by_name = self.ROUTES.get(name)
            if by_name is None:
                return self.unknown_type(name, found)
            found.name = name if by_name.name is None else by_name.name  # (a documented one)
            return by_name
        payload = self.parse_object(event, found.index, found.items)
        if payload is None:
            found.step(OTHER, "not JSON")
            return None
        found.payload = payload
        value = payload.get(field)
        if type(value) is not str:
            found.add(rules.SCHEMA_MISMATCH, self.NO_TYPE)
            found.step(OTHER, "no type")
            return None
        found.type = value
        route = self.ROUTES.get(value)
        if route is None:
            return self.unknown_type(value, found)
        found.name = value if route.name is None else route.name
        return route

    def unknown_type(self, value: str, found: EventFindings) -> Route | None:
        """The route of an event whose type ``value`` the table does not list
        (``UNKNOWN_TYPES``): its step, then its finding; or, for a protocol whose client
        drops it unstepped, the finding alone, and None."""
        unknown = self.UNKNOWN_TYPES
        found.name = _wire.describe(value) if unknown.name is None else unknown.name
        if unknown.kind is None:
            self.report_unknown_type(found)
            return None
        return unknown.route

    def follow(self, route: Route, found: EventFindings) -> None:
        """Take the event's step as its route says; if its payload is still checked, then
        its declared shape, then its handler."""
        kind = route.kind
        step = self.LIFECYCLE.step(self.phase, kind)
        if step.rule is not None or step.then is not None:  # (most events' step does nothing)
            found.step(kind, found.name)
        if not step.checked:
            return
        payload = found.payload
        if payload is _UNPARSED:  # routed by its name
            parsed = self.parse_object(found.event, found.index, found.items)
            if parsed is None:
                return
            payload = found.payload = parsed
        shape = route.shape
        if shape is not None:
            problem = (
                nested_problem(payload, shape)
                if isinstance(shape, Shape)
                else shape_problem(payload, shape)
            )
            if problem is not None:
                found.misshapen = True
                found.add(rules.SCHEMA_MISMATCH, f" ({found.name}): {problem}")
                key = route.key
                if key is not None and type(payload.get(key)) is not str:
                    return
        handler = route.handler
        if handler is not None:
            handler(self, payload, found)

    def report_unknown_type(self, found: EventFindings) -> None:
        """``UNKNOWN_TYPES``' finding on ``found.type``, once per distinct type and for a
        bounded number of types a stream."""
        value = found.type
        unknown = self.UNKNOWN_TYPES
        key = _wire.kept_key(value, _MAX_KEPT_TYPE)
        seen = self._unknown_types
        if key in seen or len(seen) >= unknown.limit:
            return
        self._unknown_types = seen | {key}
        found.add(unknown.rule, unknown.detail.format(shown=_wire.describe(value)))

    def check_end(self, events: int, offset: int) -> Sequence[Finding]:
        """The protocol's own rules at the body's end (after the lifecycle's)."""
        return NO_FINDINGS

    def end_step(self, events: int) -> tuple[int, str]:
        """The event index and the name the END step's message gives (by default the
        number of events, and no name); a protocol whose terminal is known only at the end
        (Gemini's last finish) names it here."""
        return events, ""

    def framing_finding(self, event: Event, index: int) -> Finding | None:
        """With ``READS_FRAMING``: a finding on how the event was framed, made before the
        event is checked (every event, sealed phases included)."""
        return None

    def framing_at_end(self, end: Event, events: int) -> Finding | None:
        """With ``READS_FRAMING``: a finding on how the body's last event was framed,
        ``end`` standing for the body's end."""
        return None


#: ``parse_value``'s answer for data that is not JSON.
_NOT_JSON: Final = object()
#: Shared by every stream that has reported no once-per-stream rule (most of them).
_NOTHING_REPORTED: Final[frozenset[str]] = frozenset()
#: Shared by every stream that has met no unknown type (most of them).
_NONE_UNKNOWN: Final[frozenset[str | bytes]] = frozenset()
#: An unknown type longer than this is kept as a digest (what a stream sends sizes nothing).
_MAX_KEPT_TYPE: Final = 64
#: The payload of an event routed as a sentinel, or by a ``classify`` whose handlers read
#: the data themselves: handlers only read it, and ``follow`` parses nothing.
NO_PAYLOAD: Final[dict[str, Any]] = {}
#: The payload of an event routed by its name, until ``follow`` parses it.
_UNPARSED: Final[dict[str, Any]] = {}


class EventFindings:
    """The findings on the event being checked: a handler adds one with ``add`` without
    passing the event and its index along. The route table's engine also keeps here the
    event's parsed ``payload``, its ``type`` (the value it was routed by), the ``name``
    messages give it, the ``phase`` the checker was in when it arrived (before its step),
    and whether its declared shape was found wrong (``misshapen``)."""

    __slots__ = (
        "checker",
        "event",
        "index",
        "items",
        "misshapen",
        "name",
        "payload",
        "phase",
        "type",
    )

    def __init__(
        self, checker: Checker, event: Event, index: int, items: list[Finding] | None = None
    ) -> None:
        self.checker = checker
        self.event = event
        self.index = index
        self.items: list[Finding] = [] if items is None else items
        self.payload = _UNPARSED
        self.name = ""
        self.type = ""
        self.misshapen = False
        self.phase = checker.phase

    def add(self, rule: Rule, detail: str) -> None:
        """A finding on the event (``Checker.report``: ``detail`` follows ``event N``)."""
        self.checker.report(self.items, rule, self.event, self.index, detail)

    def step(self, kind: str, name: str | None = None) -> None:
        """Take the event's lifecycle step as ``kind`` (``Checker.advance``), adding its
        finding, if any."""
        finding = self.checker.advance(kind, self.event, self.index, name)
        if finding is not None:
            self.items.append(finding)


def listing(labels: Iterable[str], total: int, limit: int = 3, separator: str = ", ") -> str:
    """``0, 1, 2 and 5 more``: the first ``limit`` labels, then how many of ``total`` were
    not shown (things past a tracking bound have no label, only a count); empty without
    labels. Labels that are phrases take ``separator="; "``."""
    shown = list(islice(labels, limit))
    if not shown:
        return ""
    rest = total - len(shown)
    return separator.join(shown) + (f" and {rest} more" if rest > 0 else "")


class KeptText:
    """Text kept for a check later in the stream (a tool call's argument fragments, say),
    within the stream's kept-text budget: once the budget refuses a piece, everything
    kept is dropped and ``text()`` is None, so the check is skipped, never the bound."""

    __slots__ = ("_chars", "_pieces")

    def __init__(self) -> None:
        self._pieces: list[str] | None = []
        self._chars = 0

    def add(self, checker: Checker, piece: str) -> None:
        if self._pieces is None:
            return
        if checker.keep_text(len(piece)):
            self._pieces.append(piece)
            self._chars += len(piece)
        else:
            self.release(checker)

    def text(self) -> str | None:
        """What was kept, joined; None once the budget ran out (or after ``release``)."""
        return None if self._pieces is None else "".join(self._pieces)

    def release(self, checker: Checker) -> None:
        """Drop what was kept and give its room back to the stream's budget."""
        if self._chars:
            checker.free_text(self._chars)
        self._pieces = None
        self._chars = 0


def may_name(data: str, *words: str) -> bool:
    """Whether JSON ``data`` may hold one of ``words`` (keys or string values): it holds
    one as it is, or a ``\\u`` escape, which can spell any of them. ``end_kind``'s filter:
    data that passes is parsed; data that does not cannot name them."""
    if "\\u" in data:
        return True
    # A loop, not any(): mypyc builds a generator's list first, an allocation a frame.
    for word in words:  # noqa: SIM110
        if word in data:
            return True
    return False


#: What ``any_json`` returns for data that is not JSON.
NOT_JSON_DATA: Final = object()


def any_json(data: str) -> object:
    """``data`` parsed as the full check parses it, or ``NOT_JSON_DATA`` if it is not JSON."""
    try:
        return parse_json(data)
    except ValueError:  # syntax, recursion limit, number out of range
        return NOT_JSON_DATA


def json_object(data: str) -> dict[str, Any] | None:
    """``data`` as a JSON object, or None (for transcripts, which judge nothing)."""
    if not data.startswith("{"):
        return None
    try:
        value = parse_json(data)
    except ValueError:
        return None
    return value if type(value) is dict else None


class Transcript:
    """What a stream said, as a client would read it: text by choice or candidate index,
    the number of events that carried text, and the finish reasons in arrival order.
    Built by ``Checker.transcribe`` for ``streamguard.testing`` and the CLI, never on the
    middleware's path. Indices past 1,024 count as 0, so a stream cannot size it."""

    __slots__ = ("deltas", "finish_reasons", "parts")

    def __init__(self) -> None:
        self.parts: dict[int, list[str]] = {}
        self.deltas = 0
        self.finish_reasons: list[str] = []

    def add(self, index: object, text: object) -> bool:
        if not isinstance(text, str) or not text:
            return False
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 1024:
            index = 0
        self.parts.setdefault(index, []).append(text)
        return True

    def finish(self, reason: object) -> None:
        if isinstance(reason, str) and reason:
            self.finish_reasons.append(reason)

    def texts(self) -> tuple[str, ...]:
        size = max(self.parts, default=-1) + 1
        return tuple("".join(self.parts.get(i, ())) for i in range(size))
