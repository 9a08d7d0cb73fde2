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
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from itertools import pairwise
from string import Template
from typing import Any, Final, TextIO

from streamguard.report import Finding, StreamReport
from streamguard.sse import Event, EventParser

__all__ = [
    "CAPTURE_FORMAT",
    "MAX_FRAME_BYTES",
    "MAX_MARKS",
    "Arrival",
    "Capture",
    "Mark",
    "marks_from_arrivals",
    "read_capture",
    "render_html",
    "write_capture",
]

#: Events drawn at most; past it every event with a finding and an even sample of the
#: rest are drawn, and the page says how many were left out.
MAX_MARKS: Final = 5000
#: Bytes of one frame shown at most.
MAX_FRAME_BYTES: Final = 4096
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


def write_capture(out: TextIO, header: dict[str, Any], arrivals: Iterable[Arrival]) -> None:
    """Write a capture: the header line, then one line per chunk."""
    out.write(json.dumps({"format": CAPTURE_FORMAT, **header}) + "\n")
    for arrival in arrivals:
        encoded = base64.b64encode(arrival.data).decode("ascii")
        out.write(json.dumps({"at": round(arrival.at, 6), "b64": encoded}) + "\n")


def read_capture(lines: Iterable[str]) -> Capture:
    """Read a capture written by ``write_capture``; a ``ValueError`` says what is wrong
    and on which line."""
    iterator = iter(lines)
    try:
        header = json.loads(next(iterator))
    except StopIteration:
        raise ValueError("the capture is empty") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"line 1: the capture header is not JSON ({exc.msg})") from None
    if not isinstance(header, dict) or header.get("format") != CAPTURE_FORMAT:
        raise ValueError(f"line 1: not a capture header (expected format {CAPTURE_FORMAT})")
    arrivals = []
    for number, line in enumerate(iterator, start=2):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            at, data = float(record["at"]), base64.b64decode(record["b64"], validate=True)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"line {number}: not a chunk record ({type(exc).__name__})") from None
        arrivals.append(Arrival(at, data))
    return Capture(header, tuple(arrivals))


def marks_from_arrivals(arrivals: Sequence[Arrival]) -> list[Mark]:
    """Each event of the body, at the arrival time of the chunk that completed it."""
    parser = EventParser()
    body = bytearray()
    timed: list[tuple[int, float, int, str]] = []
    for arrival in arrivals:
        body += arrival.data
        for item in parser.feed(arrival.data):
            if isinstance(item, Event):  # framing findings are on the report already
                timed.append((len(timed), arrival.at, item.offset, item.event))
    parser.close()
    marks = []
    for position, (index, at, offset, name) in enumerate(timed):
        end = timed[position + 1][2] if position + 1 < len(timed) else len(body)
        frame = bytes(body[offset : min(end, offset + MAX_FRAME_BYTES)])
        marks.append(Mark(index, at, offset, name, frame))
    return marks


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
    report: StreamReport, marks: Sequence[Mark], *, title: str, ended_at: float | None = None
) -> str:
    """The page for one stream. ``ended_at`` is when the body ended (seconds, on the
    marks' clock); by default the last mark's time."""
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
    # Data, not markup: '<' escaped so no frame can close the script element.
    data = json.dumps({"frames": frames}).replace("<", "\\u003c")
    return _page().substitute(
        title=html.escape(title),
        protocol=html.escape(report.protocol),
        outcome=html.escape(report.outcome.value),
        events=len(marks),
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
