"""One stream as a self-contained HTML page: its events on a timeline, its findings on them.

``streamguard probe URL --html out.html`` and ``streamguard check capture --html out.html``
write it. The page needs nothing from the network (no CDN, no font, no script from
elsewhere): one file to attach to a bug report. Each event is a mark at its arrival time,
so gaps, the time to the first event and a burst at the end are visible at a glance; each
finding is marked on the event it is about; selecting a mark (or opening the page with
``#event-N``) shows that event's frame as it was sent.

Unlike a log line, the page shows the stream's content, since showing it is the point:
it is written only when asked for, from a stream the user captured. Everything from the
stream is escaped for HTML, embedded as data (never as markup) and bounded: at most
``MAX_MARKS`` events are drawn (every event with a finding among them), and each frame is
cut at ``MAX_FRAME_BYTES``.

A capture keeps arrival times (``probe --save capture.jsonl``): one JSON header line, then
one line per received chunk, ``{"at": <seconds since the request>, "b64": <bytes>}``.
"""

from __future__ import annotations

import base64
import html
import itertools
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from itertools import pairwise
from string import Template
from typing import Any, BinaryIO, Final, TextIO

from streamguard.report import Finding, StreamReport
from streamguard.sse import EventParser

__all__ = [
    "CAPTURE_FORMAT",
    "MAX_CAPTURE_LINE_BYTES",
    "MAX_FRAME_BYTES",
    "MAX_MARKS",
    "MAX_TIMELINE_BYTES",
    "MAX_TIMELINE_EVENTS",
    "Arrival",
    "Capture",
    "Mark",
    "Timeline",
    "capture_arrivals",
    "capture_header",
    "capture_lines",
    "capture_record",
    "marks_from_arrivals",
    "read_capture",
    "read_capture_header",
    "render_html",
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
    """One event on the timeline: its index, arrival time, byte offset, SSE name and
    frame (cut at ``MAX_FRAME_BYTES``)."""

    index: int
    at: float
    offset: int
    name: str
    frame: bytes


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
    past ``MAX_TIMELINE_BYTES`` or ``MAX_TIMELINE_EVENTS``: the marks then cover only its
    first ``covered_bytes`` bytes (up to where the first event left out starts)."""

    marks: list[Mark]
    covered_bytes: int
    complete: bool


def timeline_of(arrivals: Iterable[Arrival]) -> Timeline:
    """Each event of the body, at the arrival time of the chunk that completed it, for the
    body's first ``MAX_TIMELINE_BYTES`` bytes and ``MAX_TIMELINE_EVENTS`` events: the
    arrivals are read one at a time and no further than that, so a page of a stream of any
    length costs a bounded amount of memory. Every frame kept is whole (cut only at
    ``MAX_FRAME_BYTES``): an event whose frame may go on past the byte bound is left out."""
    parser = EventParser()
    body = bytearray()
    timed: list[tuple[int, float, int, str]] = []
    #: Where the first event left out starts, once a bound stopped the reading.
    stopped_at: int | None = None
    for arrival in arrivals:
        data = arrival.data
        room = MAX_TIMELINE_BYTES - len(body)
        cut = len(data) > room
        if cut:
            data = data[:room]
        body += data
        for event in parser.feed(data):
            if len(timed) == MAX_TIMELINE_EVENTS:
                stopped_at = event.offset
                break
            timed.append((len(timed), arrival.at, event.offset, event.event))
        parser.take_findings()  # framing findings are on the report already
        if stopped_at is None and cut:
            stopped_at = timed.pop()[2] if timed else 0
        if stopped_at is not None:
            del body[stopped_at:]
            break
    marks = []
    for position, (index, at, offset, name) in enumerate(timed):
        end = timed[position + 1][2] if position + 1 < len(timed) else len(body)
        frame = bytes(body[offset : min(end, offset + MAX_FRAME_BYTES)])
        marks.append(Mark(index, at, offset, name, frame))
    return Timeline(marks, len(body), stopped_at is None)


def marks_from_arrivals(arrivals: Iterable[Arrival]) -> list[Mark]:
    """The marks of ``timeline_of``: each event at the arrival time of the chunk that
    completed it."""
    return timeline_of(arrivals).marks


def _drawn(marks: Sequence[Mark], findings: Sequence[Finding]) -> list[Mark]:
    """At most ``MAX_MARKS`` marks: every flagged event (a report keeps a bounded number
    of findings), then an even sample of the rest."""
    if len(marks) <= MAX_MARKS:
        return list(marks)
    flagged = {i for f in findings if (i := f.event_index) is not None and i < len(marks)}
    flagged = set(sorted(flagged)[:MAX_MARKS])
    room = MAX_MARKS - len(flagged)
    step = len(marks) / room if room else 0
    sampled = {int(i * step) for i in range(room)}
    return [m for m in marks if m.index in flagged or m.index in sampled]


def _event_attr(finding: Finding) -> str:
    return "" if finding.event_index is None else str(finding.event_index)


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def render_html(
    report: StreamReport,
    marks: Sequence[Mark],
    *,
    title: str,
    ended_at: float | None = None,
    cut_at: int | None = None,
) -> str:
    """The page for one stream. ``ended_at`` is when the body ended (seconds, on the
    marks' clock); by default the last mark's time. ``cut_at`` is the byte where the marks
    stop when ``timeline_of`` stopped at a bound: the page says what it leaves out."""
    drawn = _drawn(marks, report.findings)
    end = max(ended_at or 0.0, marks[-1].at if marks else 0.0)
    span = end or 1.0
    width, left, right = 1000, 40, 40

    def x(at: float) -> float:
        return round(left + (width - left - right) * at / span, 1)

    by_event: dict[int | None, list[Finding]] = {}
    for finding in report.findings:
        by_event.setdefault(finding.event_index, []).append(finding)
    worst = {"error": 0, "warning": 1, "info": 2}

    shapes = [f'<line class="axis" x1="{left}" y1="60" x2="{width - right}" y2="60"/>']
    times = sorted(mark.at for mark in marks)
    gaps = sorted(b - a for a, b in pairwise(times))
    median = gaps[len(gaps) // 2] if gaps else 0.0
    labelled = 0
    for earlier, later in pairwise(times):
        gap = later - earlier
        if gap >= _GAP_SECONDS and gap >= 5 * median and labelled < MAX_GAPS:
            labelled += 1
            shapes.append(
                f'<rect class="gap" x="{x(earlier)}" y="40" width="{x(later) - x(earlier)}" '
                f'height="40"/><text class="gap-label" x="{(x(earlier) + x(later)) / 2}" '
                f'y="34">{_seconds(gap)} gap</text>'
            )
    if marks:  # the wait for the first event, from the request
        shapes.append(
            f'<line class="first" x1="{left}" y1="92" x2="{x(marks[0].at)}" y2="92"/>'
            f'<text class="tick" x="{left}" y="112">0</text>'
        )
    previous_at, level = None, 0
    for mark in drawn:
        # Events completed by one chunk share its time: spread them up and down a little.
        level = level + 1 if mark.at == previous_at else 0
        previous_at = mark.at
        y = 60 + (0, -14, 14)[level % 3]
        found = by_event.get(mark.index, [])
        severity = min((f.severity.value for f in found), key=worst.__getitem__, default="")
        css = f"mark-event {severity}".strip()
        label = html.escape(f"event {mark.index} at {_seconds(mark.at)}", quote=True)
        shapes.append(
            f'<circle id="event-{mark.index}" class="{css}" data-index="{mark.index}" '
            f'cx="{x(mark.at)}" cy="{y}" r="{7 if found else 4}"><title>{label}</title></circle>'
        )
    shapes.append(
        f'<line class="end" x1="{x(end)}" y1="30" x2="{x(end)}" y2="90"/>'
        f'<text class="end-label" x="{x(end)}" y="104">end: {report.outcome.value}</text>'
    )
    first = _seconds(marks[0].at) if marks else "no event"
    frames = {str(m.index): m.frame.decode("utf-8", "replace") for m in drawn}
    rows = "".join(
        f'<tr class="finding {f.severity.value}" data-event="{_event_attr(f)}">'
        f"<td>{html.escape(f.severity.value)}</td><td><code>{html.escape(f.rule)}</code></td>"
        f"<td>{'' if f.event_index is None else f.event_index}</td>"
        f"<td>{html.escape(f.message)}</td></tr>"
        for f in report.findings
    )
    left_out = len(marks) - len(drawn)
    note = f"<p class=note>{left_out} events without findings not drawn.</p>" if left_out else ""
    if cut_at is not None:
        note += (
            f"<p class=note>The page reads the stream's first {cut_at} bytes "
            f"({len(marks)} events): the rest, {max(report.bytes - cut_at, 0)} bytes and "
            f"{max(report.events - len(marks), 0)} events, is not drawn; its findings are "
            "listed below.</p>"
        )
    # Data, not markup: '<' escaped so no frame can close the script element.
    data = json.dumps({"frames": frames}).replace("<", "\\u003c")
    return _page().substitute(
        title=html.escape(title),
        protocol=html.escape(report.protocol),
        outcome=html.escape(report.outcome.value),
        events=len(marks) if cut_at is None else report.events,
        first=first,
        duration=_seconds(end),
        findings=len(report.findings),
        width=width,
        shapes="".join(shapes),
        rows=rows or '<tr><td colspan="4">no findings</td></tr>',
        note=note,
        data=data,
    )


@cache
def _page() -> Template:
    # The page's markup, style and script live beside this module, as one file.
    return Template(files("streamguard").joinpath("timeline.html").read_text("utf-8"))
