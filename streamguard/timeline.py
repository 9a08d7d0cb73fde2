"""Streams as one self-contained HTML page: their events on a timeline, findings on them.

``streamguard probe URL --html out.html`` and ``streamguard check capture --html out.html``
write it (``check --upstream`` adds the other side of a gateway). The page needs nothing
from the network (no CDN, no font, no script from elsewhere): one file to attach to a bug
report. Each stream is a band: one lane per kind of event (``_Kinds``: the checker names
the terminal and the in-band error, the JSON the shared kinds, the protocol's own names
the rest), under a time axis with ticks and units, each event a mark at its arrival time
(a stream without arrival times is laid out by index, and the page says so), sized by
its frame, the first event and the terminal ringed, marks too close to tell apart drawn
as one group with its count. The bands of a page share one time scale. Each finding is
marked on its event and listed in a table whose rows link to it; selecting a mark (or
opening the page with ``#event-N``, ``#bK-event-N`` in band K) says what the event is and
shows its frame as it was sent: its own lines, up to the empty line that dispatched it.

Unlike a log line, the page shows the stream's content, since showing it is the point:
it is written only when asked for, from a stream the user captured. Everything from the
stream is escaped for HTML, embedded as data (never as markup) and bounded: at most
``MAX_MARKS`` marks are drawn per stream (every event with a finding among them), each
frame is cut at ``MAX_FRAME_BYTES``, and the kinds a stream can add as lanes are at most
``MAX_OWN_LANES``, each name cut short.

A capture keeps arrival times (``probe --save capture.jsonl``): one JSON header line, then
one line per received chunk, ``{"at": <seconds since the request>, "b64": <bytes>}``.
"""

from __future__ import annotations

import base64
import bisect
import html
import itertools
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from itertools import pairwise
from string import Template
from typing import Any, BinaryIO, Final, TextIO

from streamguard.attribution import ATTRIBUTIONS, GATEWAY, UNKNOWN, UPSTREAM
from streamguard.protocols import CHECKERS, make_checker
from streamguard.protocols._base import Checker
from streamguard.protocols._lifecycle import ERROR, TERMINAL
from streamguard.report import Finding, StreamReport
from streamguard.sse import Event, EventParser

__all__ = [
    "CAPTURE_FORMAT",
    "MAX_CAPTURE_LINE_BYTES",
    "MAX_FRAME_BYTES",
    "MAX_MARKS",
    "MAX_OWN_LANES",
    "MAX_TIMELINE_BYTES",
    "MAX_TIMELINE_CHUNKS",
    "MAX_TIMELINE_EVENTS",
    "Arrival",
    "Capture",
    "Mark",
    "Stream",
    "Timeline",
    "capture_arrivals",
    "capture_header",
    "capture_lines",
    "capture_record",
    "marks_from_arrivals",
    "read_capture",
    "read_capture_header",
    "render_html",
    "render_streams",
    "timeline_of",
    "write_capture",
]

#: Events drawn at most; past it every event with a finding and an even sample of the
#: rest are drawn, and the page says how many were left out.
MAX_MARKS: Final = 5000
#: Body bytes and events a page reads at most (``timeline_of``): about 8 MiB for the body
#: and frames, and 200 bytes a mark; past either the page says where it stopped, and the
#: findings after it are still listed.
MAX_TIMELINE_BYTES: Final = 4 * 1024 * 1024
MAX_TIMELINE_EVENTS: Final = 20_000
#: Runs of chunks with distinct arrival times a page reads at most (it keeps where each
#: ends, to time the blocks between events): past it the page stops as at the bounds above.
MAX_TIMELINE_CHUNKS: Final = 100_000
#: Bytes of one frame shown at most.
MAX_FRAME_BYTES: Final = 4096
#: The longest capture line read, in bytes. ``probe --save`` writes one line per chunk
#: received (httpx reads at most 64 KiB at a time: about 87 KiB as base64), so a longer
#: line is no capture's, and the bound keeps a corrupt file from sizing what a line costs.
MAX_CAPTURE_LINE_BYTES: Final = 8 * 1024 * 1024
#: The header's format marker; a later incompatible format gets a new number.
CAPTURE_FORMAT: Final = "streamguard-capture/1"
#: A gap between two events at least this long (and 5x the median) is labelled.
_GAP_SECONDS: Final = 0.5
#: Gaps labelled at most (the first ones): a stream cannot size the page by pausing.
MAX_GAPS: Final = 200


@dataclass(frozen=True, slots=True)
class Arrival:
    """One chunk of the body as it arrived: seconds since the request was sent."""

    at: float
    data: bytes


@dataclass(frozen=True, slots=True)
class Capture:
    """A saved stream: where it came from and its chunks with their arrival times."""

    header: dict[str, Any]
    arrivals: tuple[Arrival, ...]


@dataclass(frozen=True, slots=True)
class Mark:
    """One event on the timeline: its index, arrival time, byte offset, SSE name, frame
    (cut at ``MAX_FRAME_BYTES``), kind (its lane: ``_Kinds``) and whole frame's size.

    ``event`` is False for a block of lines that dispatched no event (a comment, a block
    without ``data``): its ``index`` then counts those blocks, apart from the events."""

    index: int
    at: float
    offset: int
    name: str
    frame: bytes
    kind: str = "data"
    size: int = 0
    event: bool = True


def capture_record(arrival: Arrival) -> str:
    """One chunk as a capture line (with its newline)."""
    encoded = base64.b64encode(arrival.data).decode("ascii")
    return json.dumps({"at": round(arrival.at, 6), "b64": encoded}) + "\n"


def capture_header(header: dict[str, Any]) -> str:
    """The first line of a capture (with its newline)."""
    return json.dumps({"format": CAPTURE_FORMAT, **header}) + "\n"


def write_capture(out: TextIO, header: dict[str, Any], arrivals: Iterable[Arrival]) -> None:
    """Write a capture: the header line, then one line per chunk."""
    out.write(capture_header(header))
    for arrival in arrivals:
        out.write(capture_record(arrival))


def capture_lines(file: BinaryIO) -> Iterator[str]:
    """The lines of a capture file as text, each read no further than
    ``MAX_CAPTURE_LINE_BYTES``: a ``ValueError`` names a longer line or one that is not
    UTF-8, so a corrupt file cannot size what one line costs."""
    for number in itertools.count(1):
        line = file.readline(MAX_CAPTURE_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_CAPTURE_LINE_BYTES:
            raise ValueError(
                f"line {number}: longer than {MAX_CAPTURE_LINE_BYTES} bytes, more than a "
                "capture line holds"
            )
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"line {number}: not UTF-8 text") from None


def read_capture_header(line: str) -> dict[str, Any]:
    """The header of a capture from its first line; a ``ValueError`` says what is wrong."""
    header = _json_line(line, 1, "the capture header")
    if not isinstance(header, dict) or header.get("format") != CAPTURE_FORMAT:
        raise ValueError(f"line 1: not a capture header (expected format {CAPTURE_FORMAT})")
    return header


def capture_arrivals(lines: Iterable[str], first_line: int = 2) -> Iterator[Arrival]:
    """The chunks of a capture's record lines (those after the header), one at a time, so
    that a large capture is never held whole; a ``ValueError`` names the first bad line."""
    for number, line in enumerate(lines, start=first_line):
        if not line.strip():
            continue
        record = _json_line(line, number, "a chunk record")
        try:
            data = base64.b64decode(record["b64"], validate=True)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"line {number}: not a chunk record ({type(exc).__name__})") from None
        yield Arrival(_arrival_time(record.get("at"), number), data)


def read_capture(lines: Iterable[str]) -> Capture:
    """Read a capture written by ``write_capture``; a ``ValueError`` says what is wrong
    and on which line. It holds every chunk: ``capture_arrivals`` reads them one by one."""
    iterator = iter(lines)
    try:
        first = next(iterator)
    except StopIteration:
        raise ValueError("the capture is empty") from None
    header = read_capture_header(first)
    return Capture(header, tuple(capture_arrivals(iterator)))


def _json_line(line: str, number: int, what: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"line {number}: {what} is not JSON ({exc.msg})") from None
    except ValueError as exc:  # an integer longer than Python converts (sys.int_info)
        raise ValueError(f"line {number}: {what} is not readable JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"line {number}: {what} is nested too deeply to parse") from None


def _arrival_time(at: object, number: int) -> float:
    """A record's ``at``: a JSON number of seconds since the request, finite and not
    negative (``probe --save`` writes nothing else). Strings, booleans, NaN, Infinity and
    numbers too large for a float are refused, naming the line."""
    if type(at) is not int and type(at) is not float:
        raise ValueError(
            f'line {number}: "at" must be a number of seconds, got {type(at).__name__}'
        )
    try:
        seconds = float(at)
    except OverflowError:  # a JSON integer of hundreds of digits
        raise ValueError(f'line {number}: "at" is too large to be a time') from None
    if not math.isfinite(seconds):
        raise ValueError(f'line {number}: "at" is {json.dumps(seconds)}, not a time')
    if seconds < 0:
        raise ValueError(f'line {number}: "at" is negative ({seconds}), not a time')
    return seconds


@dataclass(frozen=True, slots=True)
class Timeline:
    """The marks of a stream's first events. ``complete`` is False when the stream went
    past ``MAX_TIMELINE_BYTES``, ``MAX_TIMELINE_EVENTS`` or ``MAX_TIMELINE_CHUNKS``: the
    marks then cover only its first ``covered_bytes`` bytes (up to where the first event
    left out starts). ``blocks_left_out`` counts the blocks without data (comments) past
    ``MAX_TIMELINE_EVENTS`` that have no mark."""

    marks: list[Mark]
    covered_bytes: int
    complete: bool
    blocks_left_out: int = 0


# -- the kind of an event: its lane ----------------------------------------------------------

ROLE: Final = "role"
CONTENT: Final = "content"
TOOL_CALL: Final = "tool call"
FINISH: Final = "finish"
USAGE: Final = "usage"
ERROR_KIND: Final = "error"
TERMINAL_KIND: Final = "terminal"
COMMENT: Final = "ping/comment"
NO_DATA: Final = "no data"
UNFINISHED: Final = "unfinished"
OTHER_KIND: Final = "other"
DATA: Final = "data"
#: The lanes every protocol shares, top to bottom; a protocol's own kinds (its event
#: names or types) come after them, then the blocks that are no event.
_SHARED_LANES: Final = (ROLE, CONTENT, TOOL_CALL, FINISH, USAGE, ERROR_KIND, TERMINAL_KIND)
_LAST_LANES: Final = (DATA, OTHER_KIND, COMMENT, NO_DATA, UNFINISHED)
#: A protocol's own kinds (its event names or types) kept as lanes at most per stream;
#: further ones share the lane ``other``, so a stream cannot size the page by its names.
MAX_OWN_LANES: Final = 8
#: The longest own kind kept, in characters (longer ones are cut and marked with ``…``).
_KIND_CHARS: Final = 32
#: Event names or types that are a keep-alive: drawn in the lane of SSE comments.
_PING_NAMES: Final = frozenset(("ping", "heartbeat", "keepalive", "keep-alive", "keep_alive"))
#: An event's data is parsed as JSON for its kind only up to this size; a larger one is
#: named by its SSE event name.
_KIND_PARSE_BYTES: Final = 64 * 1024


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _first(value: object) -> dict[str, Any] | None:
    """The first element of a JSON array, when it is an object."""
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return value[0]
    return None


def _shared_kind(payload: dict[str, Any]) -> str | None:
    """The shared kind a JSON event shows by fields most protocols spell alike: an
    ``error``, a finish reason, tool calls, usage, text, a role. None: none of them."""
    type_name = (_text(payload.get("type")) or "").lower()
    if payload.get("error") not in (None, False, "") or "error" in type_name:
        return ERROR_KIND
    choice = _first(payload.get("choices")) or _first(payload.get("candidates"))
    delta = payload.get("delta")
    delta = delta if isinstance(delta, dict) else {}
    if choice is not None:
        if choice.get("finish_reason") or choice.get("finishReason"):
            return FINISH
        inner = choice.get("delta")
        delta = inner if isinstance(inner, dict) else delta
        content = choice.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        part = _first(parts)
        if part is not None:  # Gemini: content.parts
            return TOOL_CALL if "functionCall" in part else CONTENT
    if delta.get("stop_reason") or "finish" in type_name:
        return FINISH
    block = payload.get("content_block")
    block_type = block.get("type") if isinstance(block, dict) else None
    if (
        delta.get("tool_calls")
        or delta.get("function_call")
        or delta.get("type") == "input_json_delta"
        or block_type == "tool_use"
        or "tool" in type_name
        or "function_call" in type_name
    ):
        return TOOL_CALL
    if _text(delta.get("content")) or _text(delta.get("text")) or "text" in type_name:
        return CONTENT
    if choice is not None and delta.get("role"):
        return ROLE
    if payload.get("usage") or payload.get("usageMetadata"):
        return USAGE
    return None


def _own_kind(event: Event, payload: object) -> str:
    """A protocol's own kind of event: its SSE event name (without a LangGraph subgraph's
    ``|namespace``, which would make a lane per subgraph), else its JSON ``type``
    (``object``, ``kind``, ``event``, ``method``; a JSON-RPC result's own), else ``data``."""
    name = event.event.partition("|")[0] if event.event != "message" else None
    if isinstance(payload, dict) and isinstance(payload.get("result"), dict):
        payload = payload["result"]  # a JSON-RPC response (A2A): what its result is
    if name is None and isinstance(payload, dict):
        for field in ("type", "object", "kind", "event", "method"):
            name = _text(payload.get(field))
            if name is not None:
                break
    if name is None:
        return DATA
    return name if len(name) <= _KIND_CHARS else name[: _KIND_CHARS - 1] + "…"


class _Kinds:
    """What kind of event each one is, for its lane: the protocol's checker says which
    event is its terminal and which its in-band error (``Checker.sealed_kind``, read
    without checking anything); the rest is a shared kind when the JSON shows one
    (``_shared_kind``), else the protocol's own name for it (``_own_kind``), at most
    ``MAX_OWN_LANES`` of those."""

    def __init__(self, protocol: str | None) -> None:
        self._checker: Checker | None = None
        if protocol is not None and protocol in CHECKERS:
            self._checker = make_checker(protocol)
        self._own: set[str] = set()

    def of(self, event: Event) -> str:
        if self._checker is not None:
            kind = self._checker.sealed_kind(event)[0]
            if kind == TERMINAL:
                return TERMINAL_KIND
            if kind == ERROR:
                return ERROR_KIND
        payload: object = None
        if len(event.data) <= _KIND_PARSE_BYTES and event.data[:1] in ("{", "["):
            try:
                payload = json.loads(event.data)
            except (ValueError, RecursionError):
                payload = None
        if isinstance(payload, list):  # a JSON-RPC batch: its first message
            payload = _first(payload)
        if isinstance(payload, dict):
            shared = _shared_kind(payload)
            if shared is not None:
                return shared
        own = _own_kind(event, payload)
        if own.lower() in _PING_NAMES:
            return COMMENT
        if own in self._own or own == DATA:
            return own
        if len(self._own) == MAX_OWN_LANES:
            return OTHER_KIND
        self._own.add(own)
        return own


# -- where each frame ends ---------------------------------------------------------------------

#: A line ending then an empty line: where an event's frame (or any block of lines) ends.
#: A CR followed by an LF is one line ending, never a line ending and an empty line.
_BLANK_LINE: Final = re.compile(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r|\n)")
_LINE_ENDING: Final = re.compile(rb"\r\n|\r|\n")
#: A UTF-8 byte-order mark, which the parser strips at the very start of the body.
_BOM: Final = b"\xef\xbb\xbf"


def _blocks(body: bytearray, start: int, end: int) -> Iterator[tuple[int, int, bool]]:
    """The blocks of lines in ``body[start:end]``, a stretch where no event was
    dispatched: ``(first byte, end, closed)``, closed by an empty line or not (the body's
    unfinished end). Empty lines between blocks are skipped."""
    position = start
    while position < end:
        ending = _LINE_ENDING.match(body, position, end)
        if ending is not None:
            position = ending.end()
            continue
        blank = _BLANK_LINE.search(body, position, end)
        if blank is None:
            yield position, end, False
            return
        yield position, blank.end(), True
        position = blank.end()


def _is_comment(block: bytes | bytearray) -> bool:
    return all(line[:1] == b":" for line in _LINE_ENDING.split(block) if line)


def timeline_of(arrivals: Iterable[Arrival], protocol: str | None = None) -> Timeline:
    """Each event of the body, at the arrival time of the chunk that completed it, for the
    body's first ``MAX_TIMELINE_BYTES`` bytes and ``MAX_TIMELINE_EVENTS`` events: the
    arrivals are read one at a time and no further than that, so a page of a stream of any
    length costs a bounded amount of memory. Every frame kept is whole (cut only at
    ``MAX_FRAME_BYTES``): an event whose frame may go on past the byte bound is left out.

    A frame is the event's lines up to the empty line that dispatched it, no further: the
    blocks between events that dispatch nothing (comments such as pings, a block with no
    ``data``) get marks of their own (kinds ``ping/comment`` and ``no data``), and so does
    the body's unfinished end (``unfinished``, with the index the next event would have
    had: the one ``unterminated_frame`` names). ``protocol`` (the report's) names the
    kinds of the events: see ``_Kinds``."""
    parser = EventParser()
    kinds = _Kinds(protocol)
    body = bytearray()
    timed: list[tuple[int, float, int, str, str]] = []
    #: Where each run of chunks with one arrival time ends, and that time: to time the
    #: blocks that dispatch no event (one entry in all for a body without times).
    chunk_ends: list[int] = []
    chunk_times: list[float] = []
    #: Where the first event left out starts, once a bound stopped the reading.
    stopped_at: int | None = None
    for arrival in arrivals:
        data = arrival.data
        if data and (not chunk_times or chunk_times[-1] != arrival.at):
            if len(chunk_times) == MAX_TIMELINE_CHUNKS:
                # Every event so far is whole; what follows the last one is left out.
                stopped_at = len(body)
                break
            chunk_ends.append(0)
            chunk_times.append(arrival.at)
        room = MAX_TIMELINE_BYTES - len(body)
        cut = len(data) > room
        if cut:
            data = data[:room]
        body += data
        if data:
            chunk_ends[-1] = len(body)
        for event in parser.feed(data):
            if len(timed) == MAX_TIMELINE_EVENTS:
                stopped_at = event.offset
                break
            timed.append((len(timed), arrival.at, event.offset, event.event, kinds.of(event)))
        parser.take_findings()  # framing findings are on the report already
        if stopped_at is None and cut:
            stopped_at = timed.pop()[2] if timed else 0
        if stopped_at is not None:
            del body[stopped_at:]
            break
    complete = stopped_at is None

    def time_of(end: int) -> float:
        """The arrival time of the chunk that brought byte ``end - 1``."""
        found = bisect.bisect_left(chunk_ends, end)
        return chunk_times[min(found, len(chunk_times) - 1)] if chunk_times else 0.0

    marks: list[Mark] = []
    blocks = blocks_left_out = 0

    def between(start: int, end: int, at_end: bool) -> None:
        nonlocal blocks, blocks_left_out
        for first, last, closed in _blocks(body, start, end):
            frame = bytes(body[first : min(last, first + MAX_FRAME_BYTES)])
            if not closed:
                if at_end and complete:  # else the reading stopped there, not the body
                    marks.append(
                        Mark(len(timed), time_of(last), first, "", frame, UNFINISHED, last - first)
                    )
                continue
            if blocks == MAX_TIMELINE_EVENTS:
                blocks_left_out += 1
                continue
            kind = COMMENT if _is_comment(body[first:last]) else NO_DATA
            marks.append(Mark(blocks, time_of(last), first, "", frame, kind, last - first, False))
            blocks += 1

    previous_end = len(_BOM) if body.startswith(_BOM) else 0
    for position, (index, at, offset, name, kind) in enumerate(timed):
        between(previous_end, offset, False)
        limit = timed[position + 1][2] if position + 1 < len(timed) else len(body)
        blank = _BLANK_LINE.search(body, offset, limit)
        end = blank.end() if blank is not None else limit
        frame = bytes(body[offset : min(end, offset + MAX_FRAME_BYTES)])
        marks.append(Mark(index, at, offset, name, frame, kind, end - offset))
        previous_end = end
    between(previous_end, len(body), True)
    return Timeline(marks, len(body), complete, blocks_left_out)


def marks_from_arrivals(arrivals: Iterable[Arrival], protocol: str | None = None) -> list[Mark]:
    """The marks of ``timeline_of``: each event at the arrival time of the chunk that
    completed it (and the blocks between events that dispatch none)."""
    return timeline_of(arrivals, protocol).marks


# -- the page --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stream:
    """One band of a page: a stream's label, report and marks (``timeline_of``).

    ``timed`` says whether the marks carry arrival times (None: they do when any is past
    0); a stream without them is laid out by index, and the page says so. ``ended_at`` is
    when the body ended, on the marks' clock (by default the last mark's time);
    ``cut_at`` is the byte where the marks stop when ``timeline_of`` stopped at a bound."""

    label: str
    report: StreamReport
    marks: Sequence[Mark]
    timed: bool | None = None
    ended_at: float | None = None
    cut_at: int | None = None
    blocks_left_out: int = 0


#: The drawing's width and margins (the lane names sit in the left one), in SVG units.
_WIDTH: Final = 1000
_LEFT: Final = 130
_RIGHT: Final = 40
_LANE_HEIGHT: Final = 24
_BAND_TOP: Final = 34
#: The line a linked band's attribution legend takes under its label.
_LEGEND_HEIGHT: Final = 18
_AXIS_HEIGHT: Final = 44
#: Marks in one lane closer than this (SVG units) are drawn as one group with a count.
_GROUP_UNITS: Final = 8.0
#: Ticks on an axis: about this many.
_TICKS: Final = 8


#: A linked stream's marks and rows: the class of each attribution (``attr-gateway``), and
#: the letter drawn under a mark.
_ATTRIBUTION_CLASS: Final = "attr-"
_ATTRIBUTION_LETTER: Final[dict[str, str]] = {UPSTREAM: "U", GATEWAY: "G", UNKNOWN: "?"}


def _key(mark: Mark) -> str:
    """The mark's name in the page: ``event-N`` (what a finding's link and ``#event-N``
    select) or ``block-N`` for a block without data."""
    return f"event-{mark.index}" if mark.event else f"block-{mark.index}"


def _drawn(marks: Sequence[Mark], findings: Sequence[Finding]) -> list[Mark]:
    """At most ``MAX_MARKS`` marks: the first event, every flagged event (a report keeps
    a bounded number of findings), the terminal and the body's unfinished end, then an even
    sample of the rest."""
    if len(marks) <= MAX_MARKS:
        return list(marks)
    flagged_events = {f.event_index for f in findings if f.event_index is not None}
    kept = [
        position
        for position, m in enumerate(marks)
        if m.event
        and (m.index in flagged_events or m.index == 0 or m.kind in (UNFINISHED, TERMINAL_KIND))
    ][:MAX_MARKS]
    room = MAX_MARKS - len(kept)
    step = len(marks) / room if room else 0
    chosen = set(kept) | {int(i * step) for i in range(room)}
    return [m for position, m in enumerate(marks) if position in chosen]


def _event_attr(finding: Finding) -> str:
    return "" if finding.event_index is None else str(finding.event_index)


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _tick_step(span: float) -> float:
    """A 1-2-5 step giving about ``_TICKS`` ticks over ``span``."""
    raw = span / _TICKS
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for multiple in (1.0, 2.0, 5.0):
        if raw <= multiple * magnitude:
            return multiple * magnitude
    return 10.0 * magnitude


def _tick_label(value: float, milliseconds: bool) -> str:
    if milliseconds:
        return f"{round(value * 1000, 3):g} ms"
    return f"{round(value, 6):g} s"


def _lanes(kinds: Iterable[str]) -> list[str]:
    present = dict.fromkeys(kinds)
    own = [k for k in present if k not in _SHARED_LANES and k not in _LAST_LANES]
    return [
        *(k for k in _SHARED_LANES if k in present),
        *own,
        *(k for k in _LAST_LANES if k in present),
    ]


def _radius(size: int) -> float:
    """A mark's radius grows with its frame's size (log scale): 3 for a few bytes, 9 for
    4 KiB and more."""
    return round(3.0 + min(6.0, math.log2(1 + size / 64)), 1)


class _Band:
    """The SVG of one stream's band, and what its marks show when selected."""

    def __init__(self, number: int, stream: Stream, top: int, span: float) -> None:
        self.number = number
        self.stream = stream
        self.prefix = "" if number == 0 else f"b{number}-"
        report, marks = stream.report, stream.marks
        self.timed = stream.timed if stream.timed is not None else any(m.at > 0 for m in marks)
        self.drawn = _drawn(marks, report.findings)
        self.lanes = _lanes(m.kind for m in self.drawn)
        self.top = top
        # A linked band's legend has a line of its own, under the label.
        self.lanes_top = top + _BAND_TOP + (_LEGEND_HEIGHT if report.attribution else 0)
        self.axis_y = self.lanes_top + _LANE_HEIGHT * max(len(self.lanes), 1) + 8
        self.height = self.axis_y - top + _AXIS_HEIGHT
        self.span = span
        self.positions = {id(m): position for position, m in enumerate(marks)}
        self.count = len(marks)
        self.items: dict[str, dict[str, str]] = {}
        #: A linked stream's events with findings: whose those findings are, each once.
        self.whose: dict[int, list[str]] = {}
        for finding, kind in zip(report.findings, report.attribution, strict=False):
            if finding.event_index is not None:
                kinds = self.whose.setdefault(finding.event_index, [])
                if kind not in kinds:
                    kinds.append(kind)

    def x(self, mark: Mark) -> float:
        usable = _WIDTH - _LEFT - _RIGHT
        if self.timed:
            return round(_LEFT + usable * mark.at / self.span, 1)
        return round(_LEFT + usable * self.positions[id(mark)] / max(self.count - 1, 1), 1)

    def x_at(self, at: float) -> float:
        return round(_LEFT + (_WIDTH - _LEFT - _RIGHT) * at / self.span, 1)

    def lane_y(self, kind: str) -> float:
        return self.lanes_top + _LANE_HEIGHT * self.lanes.index(kind) + _LANE_HEIGHT / 2

    def svg(self) -> str:
        report, stream = self.stream.report, self.stream
        band_attr = f'data-band="{self.number}"'
        label = html.escape(
            f"{stream.label} · {report.protocol} · {report.outcome.value}", quote=True
        )
        shapes = [
            f'<g class="band" id="band-{self.number}" {band_attr}>'
            f'<text class="band-label" x="8" y="{self.top + 20}">{label}</text>'
            f"{self._legend()}"
        ]
        bottom = self.axis_y
        for kind in self.lanes:
            y = self.lane_y(kind)
            shapes.append(
                f'<g class="lane" data-lane="{html.escape(kind, quote=True)}">'
                f'<line class="lane-line" x1="{_LEFT}" y1="{y}" x2="{_WIDTH - _RIGHT}" y2="{y}"/>'
                f'<text class="lane-label" x="{_LEFT - 8}" y="{y + 4}">{html.escape(kind)}</text>'
                "</g>"
            )
        events = [m for m in stream.marks if m.event and m.kind != UNFINISHED]
        if self.timed:
            shapes.extend(self._gaps(events, bottom))
            if events:  # the wait for the first event, from the request
                shapes.append(
                    f'<line class="first-wait" x1="{_LEFT}" y1="{bottom - 4}" '
                    f'x2="{self.x(events[0])}" y2="{bottom - 4}"/>'
                )
        shapes.extend(self._axis())
        shapes.extend(self._marks(events[0] if events else None))
        if self.timed:
            end = max(stream.ended_at or 0.0, stream.marks[-1].at if stream.marks else 0.0)
            x_end = self.x_at(end)
            shapes.append(
                f'<line class="end" x1="{x_end}" y1="{self.lanes_top - 4}" x2="{x_end}" '
                f'y2="{bottom}"/><text class="end-label" x="{x_end}" y="{self.lanes_top - 8}">'
                f"end: {report.outcome.value}</text>"
            )
        shapes.append("</g>")
        return "".join(shapes)

    def _gaps(self, events: Sequence[Mark], bottom: float) -> Iterator[str]:
        times = sorted(mark.at for mark in events)
        gaps = sorted(b - a for a, b in pairwise(times))
        median = gaps[len(gaps) // 2] if gaps else 0.0
        labelled = 0
        for earlier, later in pairwise(times):
            gap = later - earlier
            if gap >= _GAP_SECONDS and gap >= 5 * median and labelled < MAX_GAPS:
                labelled += 1
                left, right = self.x_at(earlier), self.x_at(later)
                yield (
                    f'<rect class="gap" x="{left}" y="{self.lanes_top}" '
                    f'width="{round(right - left, 1)}" height="{bottom - self.lanes_top}"/>'
                    f'<text class="gap-label" x="{round((left + right) / 2, 1)}" '
                    f'y="{self.lanes_top - 8}">{_seconds(gap)} gap</text>'
                )

    def _axis(self) -> Iterator[str]:
        y = self.axis_y
        yield f'<g class="axis" {self._band_attr()}>'
        yield f'<line class="axis-line" x1="{_LEFT}" y1="{y}" x2="{_WIDTH - _RIGHT}" y2="{y}"/>'
        if self.timed:
            step = _tick_step(self.span)
            milliseconds = self.span < 1
            ticks = [i * step for i in range(int(self.span / step + 1e-9) + 1)]
            places = [(self.x_at(t), _tick_label(t, milliseconds)) for t in ticks]
            caption = "time since the request"
        else:
            last = max(self.count - 1, 1)
            step = max(1, int(_tick_step(last)) if last >= _TICKS else 1)
            usable = _WIDTH - _LEFT - _RIGHT
            places = [
                (round(_LEFT + usable * i / last, 1), f"#{i}") for i in range(0, self.count, step)
            ]
            caption = "position in the body (no arrival times)"
        for x, text in places:
            yield (
                f'<line class="tick" x1="{x}" y1="{y}" x2="{x}" y2="{y + 5}"/>'
                f'<text class="tick-label" x="{x}" y="{y + 17}">{text}</text>'
            )
        yield f'<text class="axis-caption" x="{_LEFT}" y="{y + 33}">{caption}</text></g>'

    def _band_attr(self) -> str:
        return f'data-band="{self.number}"'

    def _marks(self, first: Mark | None) -> Iterator[str]:
        report = self.stream.report
        by_event: dict[int, list[Finding]] = {}
        for finding in report.findings:
            if finding.event_index is not None:
                by_event.setdefault(finding.event_index, []).append(finding)
        terminal = next((m for m in self.drawn if m.kind == TERMINAL_KIND), None)
        if terminal is None and report.outcome.value == "completed":
            # A protocol whose terminal is no event of its own (Gemini's is the last chunk
            # with a finish reason): the stream completed on its last finish.
            terminal = next((m for m in reversed(self.drawn) if m.kind == FINISH), None)
        worst = {"error": 0, "warning": 1, "info": 2}
        singles: list[str] = []
        by_lane: dict[str, list[tuple[float, Mark]]] = {}
        for mark in self.drawn:
            found = by_event.get(mark.index, []) if mark.event else []
            special = bool(found) or mark is first or mark is terminal or mark.kind == UNFINISHED
            self.items[_key(mark)] = {"what": self._what(mark, found), "frame": self._frame(mark)}
            if not special:
                by_lane.setdefault(mark.kind, []).append((self.x(mark), mark))
                continue
            severity = min((f.severity.value for f in found), key=worst.__getitem__, default="")
            roles = [
                role
                for role, holds in (("first-event", mark is first), ("terminal", mark is terminal))
                if holds
            ]
            singles.append(self._single(mark, severity, roles))
        yield from self._grouped(by_lane)
        yield from singles  # on top of the groups: flagged events stay selectable
        if f"event-{report.events}" not in self.items:
            self.items[f"event-{report.events}"] = {
                "what": f"The end of the stream, after its last event (event {report.events} "
                "would have been next): a finding here is about the stream as a whole.",
                "frame": "",
            }

    def _grouped(self, by_lane: Mapping[str, list[tuple[float, Mark]]]) -> Iterator[str]:
        groups = 0
        for kind, placed in by_lane.items():
            placed.sort(key=lambda item: item[0])
            runs: list[list[tuple[float, Mark]]] = []
            for item in placed:
                if runs and item[0] - runs[-1][0][0] < _GROUP_UNITS:
                    runs[-1].append(item)
                else:
                    runs.append([item])
            for run in runs:
                if len(run) == 1:
                    yield self._single(run[0][1], "", [])
                else:
                    yield self._group(groups, kind, run)
                    groups += 1

    def _single(self, mark: Mark, severity: str, roles: Sequence[str]) -> str:
        whose = self.whose.get(mark.index, []) if mark.event else []
        css = " ".join(
            ["mark-event", severity, *roles, *(_ATTRIBUTION_CLASS + kind for kind in whose)]
        )
        css = css.replace("  ", " ").strip()
        x, y = self.x(mark), self.lane_y(mark.kind)
        title = html.escape(self._what(mark, ()), quote=True)
        labels = "".join(
            f'<text class="mark-label" x="{x}" y="{y - 11}">'
            f"{'first' if role == 'first-event' else 'terminal'}</text>"
            for role in roles
        )
        attr = ""
        if whose:  # the mark says whose its findings are: a letter under it, and the data
            kinds = html.escape(" ".join(whose), quote=True)
            attr = f' data-attribution="{kinds}"'
            letters = "".join(_ATTRIBUTION_LETTER.get(kind, "?") for kind in whose)
            labels += (
                f'<text class="attribution-mark" id="{self.prefix}attribution-{_key(mark)}" '
                f'x="{x}" y="{y + 19}">{html.escape(letters)}</text>'
            )
        return (
            f'<circle id="{self.prefix}{_key(mark)}" class="{css}" {self._band_attr()} '
            f'data-key="{_key(mark)}" data-index="{mark.index}" data-size="{mark.size}"{attr} '
            f'cx="{x}" cy="{y}" r="{_radius(mark.size)}"><title>{title}</title></circle>{labels}'
        )

    def _group(self, number: int, kind: str, run: Sequence[tuple[float, Mark]]) -> str:
        members = [mark for _, mark in run]
        xs = [x for x, _ in run]
        x, y = round((xs[0] + xs[-1]) / 2, 1), self.lane_y(kind)
        keys = " ".join(_key(m) for m in members)
        size = sum(m.size for m in members)
        first, last = members[0], members[-1]
        where = (
            f"{_seconds(first.at)} to {_seconds(last.at)}"
            if self.timed
            else f"positions {self.positions[id(first)]} to {self.positions[id(last)]}"
        )
        title = html.escape(
            f"{len(members)} {kind} marks, {size} bytes, {where}: select to see the first",
            quote=True,
        )
        return (
            f'<g id="{self.prefix}group-{number}" class="mark-group" {self._band_attr()} '
            f'data-count="{len(members)}" data-keys="{keys}">'
            f'<rect x="{xs[0] - 6}" y="{y - 8}" width="{round(xs[-1] - xs[0] + 12, 1)}" '
            f'height="16" rx="8"/><text class="count" x="{x}" y="{y + 4}">{len(members)}'
            f"</text><title>{title}</title></g>"
        )

    def _what(self, mark: Mark, found: Sequence[Finding]) -> str:
        when = f"at {_seconds(mark.at)}" if self.timed else "no arrival time"
        if not mark.event:
            what = (
                "a comment block (a ping): clients skip it"
                if mark.kind == COMMENT
                else "a block without data: it dispatches no event"
            )
            return f"Block {mark.index}: {what}, {mark.size} bytes, {when}."
        if mark.kind == UNFINISHED:
            return (
                f"Event {mark.index}: the body's unfinished end, {mark.size} bytes after the "
                f"last empty line, {when}: clients discard it."
            )
        name = "" if mark.name == "message" else f" (event: {mark.name})"
        flagged = f", {len(found)} finding(s)" if found else ""
        return f"Event {mark.index}: {mark.kind}{name}, {mark.size} bytes, {when}{flagged}."

    def _frame(self, mark: Mark) -> str:
        text = mark.frame.decode("utf-8", "replace")
        if mark.size > len(mark.frame):
            text += f"\n[… {mark.size - len(mark.frame)} more bytes not shown]"
        return text

    def rows(self) -> str:
        report = self.stream.report
        attribution = report.attribution
        rows = []
        for number, f in enumerate(report.findings):
            if f.event_index is None:
                event, key = "", ""
            else:
                key = f"event-{f.event_index}"
                event = f'<a href="#{self.prefix}{key}">event {f.event_index}</a>'
            whose = attr = ""
            if attribution:  # linked to its upstream: whose bug each finding is
                kind = html.escape(attribution[number], quote=True)
                attr = f' data-attribution="{kind}"'
                whose = f'<td class="attribution {_ATTRIBUTION_CLASS}{kind}">{kind}</td>'
            rows.append(
                f'<tr class="finding {f.severity.value}" {self._band_attr()} data-key="{key}" '
                f'data-event="{_event_attr(f)}"{attr}><td>{html.escape(f.severity.value)}</td>'
                f"<td><code>{html.escape(f.rule)}</code></td><td>{event}</td>"
                f"<td>{html.escape(f.message)}</td>{whose}</tr>"
            )
        columns = 5 if attribution else 4
        return "".join(rows) or f'<tr><td colspan="{columns}">no findings</td></tr>'

    def attribution_counts(self) -> str:
        """The findings counted by whose they are (``1 upstream, 2 gateway``), or ``""``
        when the stream is not linked to an upstream."""
        attribution = self.stream.report.attribution
        counts = [(kind, attribution.count(kind)) for kind in ATTRIBUTIONS]
        return ", ".join(f"{count} {kind}" for kind, count in counts if count)

    def _legend(self) -> str:
        """On a linked band, under its label: whose its findings are, and how a mark shows
        it (a finding at the end of the stream has no mark: the legend counts it)."""
        report = self.stream.report
        if not report.attribution:
            return ""
        linked = len(report.upstreams) + report.upstreams_dropped
        text = (
            f"findings attributed against {linked} upstream stream(s): "
            f"{self.attribution_counts()} (marks: U upstream, G gateway, ? unknown)"
        )
        return (
            f'<text class="attribution-legend" id="attribution-legend-{self.number}" '
            f'x="8" y="{self.top + 38}">{html.escape(text)}</text>'
        )

    def layout_note(self) -> str:
        """Under the drawing: a band without arrival times says how it is laid out."""
        if self.timed:
            return ""
        return (
            f'<p class="note layout-note" id="layout-note-{self.number}">'
            f"{html.escape(self.stream.label)}: this capture has no arrival times, so its "
            "events are laid out by index (in the order they were sent, evenly spaced), "
            "not by time.</p>"
        )

    def section(self) -> str:
        stream, report = self.stream, self.stream.report
        marks = stream.marks
        events = [m for m in marks if m.event and m.kind != UNFINISHED]
        first = _seconds(events[0].at) if events and self.timed else "-"
        end = max(stream.ended_at or 0.0, marks[-1].at if marks else 0.0)
        counted = report.events if stream.cut_at is not None else len(events)
        summary = (
            f"protocol <b>{html.escape(report.protocol)}</b> · outcome "
            f"<b>{html.escape(report.outcome.value)}</b> · {counted} events · "
            f"{report.bytes} bytes · "
            + (
                f"first event after {first} · body ended after {_seconds(end)} · "
                if self.timed
                else ""
            )
            + f"{len(report.findings)} findings"
        )
        attributed = self.attribution_counts()
        if attributed:
            summary += f" · attributed: {html.escape(attributed)}"
        notes = []
        left_out = len(marks) - len(self.drawn)
        if left_out:
            notes.append(f"<p class=note>{left_out} events without findings not drawn.</p>")
        if stream.blocks_left_out:
            notes.append(
                f"<p class=note>{stream.blocks_left_out} more blocks without data "
                "(comments) not drawn.</p>"
            )
        if stream.cut_at is not None:
            notes.append(
                f"<p class=note>The page reads the stream's first {stream.cut_at} bytes "
                f"({len(events)} events): the rest, {max(report.bytes - stream.cut_at, 0)} "
                f"bytes and {max(report.events - len(events), 0)} events, is not drawn; its "
                "findings are listed below.</p>"
            )
        label = html.escape(stream.label)
        return (
            f'<section class="stream" id="stream-{self.number}">'
            f'<h2>{label}</h2><p class="summary" id="summary-{self.number}">{summary}</p>'
            f"{''.join(notes)}"
            f'<h3>Findings</h3><table class="findings" id="findings-{self.number}">'
            "<thead><tr><th>severity</th><th>rule</th><th>event</th><th>message</th>"
            f"{'<th>attribution</th>' if report.attribution else ''}</tr>"
            f"</thead><tbody>{self.rows()}</tbody></table></section>"
        )


def render_streams(streams: Sequence[Stream], *, title: str) -> str:
    """The page for one stream or more (a gateway's two sides), each a band of lanes on
    one time axis: the streams with arrival times share its scale, a stream without them
    is laid out by index (the page says so)."""
    timed_ends = [
        max(s.ended_at or 0.0, s.marks[-1].at if s.marks else 0.0)
        for s in streams
        if (s.timed if s.timed is not None else any(m.at > 0 for m in s.marks))
    ]
    span = max(timed_ends, default=0.0) or 1.0
    bands, top = [], 0
    for number, stream in enumerate(streams):
        band = _Band(number, stream, top, span)
        bands.append(band)
        top += band.height
    svg = "".join(band.svg() for band in bands)
    # Data, not markup: '<' escaped so no frame can close the script element.
    data = json.dumps(
        {"bands": [{"label": b.stream.label, "items": b.items} for b in bands]}
    ).replace("<", "\\u003c")
    return _page().substitute(
        title=html.escape(title),
        width=_WIDTH,
        height=max(top, 1),
        shapes=svg,
        layout="".join(band.layout_note() for band in bands),
        sections="".join(band.section() for band in bands),
        data=data,
    )


def render_html(
    report: StreamReport,
    marks: Sequence[Mark],
    *,
    title: str,
    ended_at: float | None = None,
    cut_at: int | None = None,
    timed: bool | None = None,
) -> str:
    """The page for one stream (``render_streams`` with one band, labelled ``title``)."""
    return render_streams([Stream(title, report, marks, timed, ended_at, cut_at)], title=title)


@cache
def _page() -> Template:
    # The page's markup, style and script live beside this module, as one file.
    return Template(files("streamguard").joinpath("timeline.html").read_text("utf-8"))
