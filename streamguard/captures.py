"""Captures of failed streams (issue 48): the evidence behind an alert, kept bounded.

A stream on a route with ``capture`` configured has its body chunks and their arrival times
recorded while it is open (``Recorder``); when it ends, its report decides whether it
qualifies (``CapturePolicy``: a finding at or above a severity, or an outcome), the
per-process rate allows it (``RateLimit``: at most N captures per rule per minute, on an
injected clock), and then it gets an id, which goes on the report before any sink sees it
(the log line, the span, the exemplar's labels), and is written off the event loop
(``CaptureWriter``, one worker thread) to a store (``DirectoryStore`` with its disk quota,
the oldest deleted first; or ``CallbackStore``). A slow or failing store never holds a
stream: the writer's queue is bounded, and what it cannot take or write is counted
(``CaptureWriter.dropped``, ``failed``; the metrics sink exports them).

The file is the capture ``streamguard check`` and the timeline read (``probe --save``'s
format: one JSON header line, then one line per chunk with its arrival time), its header
holding the capture's id, the route, the protocol, the request's facts, the live report
and, when the body was longer than the cap, what was dropped. Redacted by default
(``streamguard.redact``: structure kept, content replaced, so that ``check`` finds what the
live checks found); ``redact="none"`` keeps the bytes as they were sent.

Memory: a recorded stream holds at most ``max_stream_bytes`` of body (the first half and
the last half of the cap, the middle dropped and counted) plus one small record per chunk
kept, and only while it is open; a route without ``capture`` records nothing.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Final, Protocol

from streamguard.config import CaptureConfig, RouteCaptureConfig
from streamguard.redact import Redactor
from streamguard.report import Severity, StreamReport
from streamguard.request import RequestFacts
from streamguard.timeline import CAPTURE_FORMAT

__all__ = [
    "CAPTURE_SUFFIX",
    "CallbackStore",
    "CaptureInfo",
    "CaptureStore",
    "CaptureWriter",
    "Captures",
    "DirectoryStore",
    "RateLimit",
    "Recorder",
    "StreamCapture",
    "capture_file",
    "list_captures",
    "prune_captures",
    "qualifying_rules",
    "summarise",
]

#: A capture file's name ends so: ``<id>.capture.jsonl``.
CAPTURE_SUFFIX: Final = ".capture.jsonl"
_RANK: Final = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}
#: The rule name a capture qualified by its outcome alone is rated under.
OUTCOME_RULE: Final = "outcome"


#: What one chunk's record costs beside its bytes (a tuple, a float, a bytes object's
#: header), counted against the cap: a stream of one-byte chunks keeps no more records
#: than ``max_stream_bytes / RECORD_COST``.
RECORD_COST: Final = 64


class Recorder:
    """One open stream's chunks and arrival times, within ``max_bytes``: the first half of
    the cap kept whole, then the latest chunks within the other half (the oldest of them
    dropped, counted). Each half also keeps at most ``half / RECORD_COST`` records."""

    __slots__ = (
        "dropped_bytes",
        "dropped_chunks",
        "head",
        "head_bytes",
        "limit",
        "tail",
        "tail_bytes",
    )

    def __init__(self, max_bytes: int) -> None:
        self.limit = max(2, max_bytes)
        self.head: list[tuple[float, bytes]] = []
        self.head_bytes = 0
        self.tail: deque[tuple[float, bytes]] = deque()
        self.tail_bytes = 0
        self.dropped_bytes = 0
        self.dropped_chunks = 0

    def add(self, data: bytes, at: float) -> None:
        half = self.limit // 2
        records = max(1, half // RECORD_COST)
        head = self.head
        if not self.tail and self.head_bytes + len(data) <= half and len(head) < records:
            head.append((at, data))
            self.head_bytes += len(data)
            return
        room = self.limit - half
        if len(data) > room:  # one chunk over the tail's room: its end is kept
            self.dropped_bytes += len(data) - room
            data = data[-room:]
        self.tail.append((at, data))
        self.tail_bytes += len(data)
        while self.tail_bytes > room or len(self.tail) > records:
            _, old = self.tail.popleft()
            self.tail_bytes -= len(old)
            self.dropped_bytes += len(old)
            self.dropped_chunks += 1

    @property
    def held(self) -> int:
        return self.head_bytes + self.tail_bytes


def qualifying_rules(
    report: StreamReport, severity: Severity | None, outcomes: Iterable[str]
) -> list[str]:
    """The rules by which ``report`` qualifies for a capture (its findings at or above
    ``severity``, in order, each once), or ``[OUTCOME_RULE]`` when only its outcome is one
    of ``outcomes``; empty when it does not qualify."""
    rules: list[str] = []
    if severity is not None:
        floor = _RANK[severity]
        for finding in report.findings:
            if _RANK[finding.severity] >= floor and finding.rule not in rules:
                rules.append(finding.rule)
    if not rules and report.outcome.value in outcomes:
        rules.append(OUTCOME_RULE)
    return rules


class RateLimit:
    """At most ``per_minute`` captures per rule in any minute (a sliding window of the
    times granted, per rule, on ``clock``); the rules it follows are bounded by the rule
    catalog and ``OUTCOME_RULE``."""

    __slots__ = ("clock", "granted", "per_minute")

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self.granted: dict[str, deque[float]] = {}

    def allow(self, rules: Iterable[str]) -> bool:
        """Whether a capture of a stream with ``rules`` may be written now: one of its rules
        has room; the capture then counts against each rule with room."""
        now = self.clock()
        open_rules = []
        for rule in rules:
            times = self.granted.setdefault(rule, deque())
            while times and now - times[0] >= 60.0:
                times.popleft()
            if len(times) < self.per_minute:
                open_rules.append(times)
        for times in open_rules:
            times.append(now)
        return bool(open_rules)


class CaptureStore(Protocol):
    """Where capture files go."""

    def write(self, capture_id: str, data: bytes) -> None:
        """Store one capture file; may block (it runs on the writer's thread)."""


class DirectoryStore:
    """Captures as files in ``directory``, within ``quota_bytes`` in all: before a write
    that would pass it, the oldest captures are deleted (by modification time)."""

    def __init__(self, directory: str | os.PathLike[str], quota_bytes: int) -> None:
        self.directory = Path(directory)
        self.quota_bytes = quota_bytes
        self._sizes: dict[Path, int] | None = None  # what is there, read once
        self._total: int | None = None  # their sum, kept as files come and go

    def _present(self) -> dict[Path, int]:
        if self._sizes is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            found = []
            for path in self.directory.glob(f"*{CAPTURE_SUFFIX}"):
                try:
                    stat = path.stat()
                except OSError:
                    continue
                found.append((stat.st_mtime, path, stat.st_size))
            self._sizes = {path: size for _, path, size in sorted(found)}
        return self._sizes

    def write(self, capture_id: str, data: bytes) -> None:
        if len(data) > self.quota_bytes:
            raise ValueError("a capture larger than the whole quota")
        sizes = self._present()
        total = sum(sizes.values()) if self._total is None else self._total
        while sizes and total + len(data) > self.quota_bytes:
            oldest = next(iter(sizes))
            total -= sizes.pop(oldest)
            with contextlib.suppress(FileNotFoundError):
                oldest.unlink()
        path = self.directory / f"{capture_id}{CAPTURE_SUFFIX}"
        partial = path.with_suffix(".part")
        partial.write_bytes(data)
        partial.replace(path)  # whole or absent: a reader never sees half a capture
        total -= sizes.pop(path, 0)  # an id written again replaces its file
        sizes[path] = len(data)
        self._total = total + len(data)


class CallbackStore:
    """Captures handed to ``callback(capture_id, data)``: object storage, a queue, a test."""

    def __init__(self, callback: Callable[[str, bytes], None]) -> None:
        self.callback = callback

    def write(self, capture_id: str, data: bytes) -> None:
        self.callback(capture_id, data)


class CaptureWriter:
    """Writes captures on one daemon thread, so that redaction and I/O never run on the
    event loop. Its queue holds at most ``max_pending`` captures: one more is dropped and
    counted (``dropped``), as a write that raises is (``failed``); ``written`` counts the
    rest. ``flush()`` waits until the queue is empty (tests, shutdown)."""

    def __init__(
        self,
        store: CaptureStore,
        max_pending: int = 16,
        on_count: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        #: Told each result (``written``, ``failed``, ``dropped``): the metrics' counter.
        self.on_count = on_count
        self.written = 0
        self.failed = 0
        self.dropped = 0
        self._queue: queue.Queue[tuple[str, Callable[[], bytes]] | None] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, capture_id: str, build: Callable[[], bytes]) -> bool:
        """Queue a capture (``build`` makes its bytes, on the writer's thread); False when
        the queue is full and it was dropped."""
        self._start()
        try:
            self._queue.put_nowait((capture_id, build))
        except queue.Full:
            self.dropped += 1
            self.count("dropped")
            return False
        return True

    def flush(self) -> None:
        self._queue.join()

    def _start(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="streamguard-captures", daemon=True
                    )
                    self._thread.start()

    def count(self, result: str) -> None:
        """Tell ``on_count`` of one ``result``."""
        if self.on_count is not None:
            with contextlib.suppress(Exception):  # a count never stops the writer
                self.on_count(result)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                capture_id, build = item
                try:
                    self.store.write(capture_id, build())
                except Exception:
                    self.failed += 1
                    self.count("failed")
                else:
                    self.written += 1
                    self.count("written")
            finally:
                self._queue.task_done()


def _report_header(report: StreamReport) -> dict[str, Any]:
    """The live report as the capture's header keeps it: no message (messages may quote
    wire values), the rest a re-check compares."""
    return {
        "protocol": report.protocol,
        "outcome": report.outcome.value,
        "events": report.events,
        "bytes": report.bytes,
        "findings": [
            [f.rule, f.severity.value, f.event_index, f.byte_offset] for f in report.findings
        ],
    }


def capture_file(
    capture_id: str,
    report: StreamReport,
    recorder: Recorder,
    request: Any,
    *,
    redact: bool,
    started_at: float,
) -> bytes:
    """The capture's bytes: header line, then each chunk kept with its arrival time
    (seconds since the stream started), redacted unless ``redact`` is False."""
    redactor = Redactor(report.protocol) if redact else None
    facts: object = None
    if isinstance(request, RequestFacts):
        # The facts as read (``RequestFacts.restored`` reads them back), redacted as the
        # body is, with its tokens: an id the request sent stays equal to the answer's.
        saved = request.saved_form()
        if redactor is not None:
            saved["facts"] = redactor.redact_json(saved["facts"])
        facts = saved
    header: dict[str, Any] = {
        "format": CAPTURE_FORMAT,
        "capture_id": capture_id,
        "route": report.route,
        "protocol": report.protocol,
        "redacted": "structure" if redact else "none",
        "request": facts,
        "report": _report_header(report),
    }
    if recorder.dropped_bytes:
        header["dropped"] = {
            "after_byte": recorder.head_bytes,
            "bytes": recorder.dropped_bytes,
            "chunks": recorder.dropped_chunks,
        }
    lines = [json.dumps(header, default=str)]

    def record(at: float, data: bytes) -> None:
        encoded = base64.b64encode(data).decode("ascii")
        lines.append(json.dumps({"at": round(at - started_at, 6), "b64": encoded}))

    for number, (at, data) in enumerate(recorder.head):
        if redactor is not None:
            data = redactor.feed(data)
            if number == len(recorder.head) - 1 and recorder.tail:
                # What the redactor held goes with the head; the tail reads afresh.
                data += redactor.gap() if recorder.dropped_bytes else b""
        record(at, data)
    tail = list(recorder.tail)
    for number, (at, data) in enumerate(tail):
        if redactor is not None:
            data = redactor.feed(data)
            if number == len(tail) - 1:
                data += redactor.close()
        record(at, data)
    if redactor is not None and not tail:
        rest = redactor.close()
        if rest:
            at = recorder.head[-1][0] if recorder.head else started_at
            record(at, rest)
    return ("\n".join(lines) + "\n").encode()


def new_capture_id() -> str:
    """A capture's id: unique, and sorting by creation time (a millisecond prefix)."""
    return f"{int(time.time() * 1000):013x}-{uuid.uuid4().hex[:12]}"


class StreamCapture:
    """One open stream's capture: its recorder, the request's facts, and how its route
    captures (``settings``)."""

    __slots__ = ("recorder", "request", "settings")

    def __init__(self, settings: RouteCaptureConfig, request: Any) -> None:
        self.settings = settings
        self.request = request
        self.recorder = Recorder(settings.max_stream_bytes)


class Captures:
    """A seam's captures: the rate (on ``clock``) and the writer."""

    def __init__(
        self,
        writer: CaptureWriter,
        *,
        per_rule_per_minute: int,
        clock: Callable[[], float] = time.monotonic,
        new_id: Callable[[], str] = new_capture_id,
    ) -> None:
        self.writer = writer
        self.rate = RateLimit(per_rule_per_minute, clock)
        self.new_id = new_id
        #: Streams that qualified but were over the rate.
        self.rate_limited = 0

    @classmethod
    def configured(
        cls,
        config: CaptureConfig,
        store: CaptureStore | None,
        clock: Callable[[], float],
        on_count: Callable[[str], None] | None = None,
    ) -> Captures:
        """The captures ``config`` asks for, written to ``store`` or its directory, each
        result told to ``on_count``."""
        if store is None:
            store = DirectoryStore(config.directory, config.quota_bytes)
        writer = CaptureWriter(store, config.max_pending, on_count)
        return cls(writer, per_rule_per_minute=config.per_rule_per_minute, clock=clock)

    def finish(self, report: StreamReport, capture: StreamCapture) -> StreamReport:
        """The stream ended: if it qualifies and the rate allows, queue its capture and
        return the report with its ``capture_id``; else the report as it was."""
        settings = capture.settings
        severity = None if settings.severity is None else Severity(settings.severity)
        rules = qualifying_rules(report, severity, settings.outcomes)
        if not rules:
            return report
        if not self.rate.allow(rules):
            self.rate_limited += 1
            self.writer.count("rate_limited")
            return report
        capture_id = self.new_id()
        report = replace(report, capture_id=capture_id)
        redact = settings.redact != "none"
        recorder, request = capture.recorder, capture.request

        def build() -> bytes:
            return capture_file(
                capture_id,
                report,
                recorder,
                request,
                redact=redact,
                started_at=report.started_at,
            )

        if not self.writer.submit(capture_id, build):
            return replace(report, capture_id=None)
        return report


# -- a directory of captures (``streamguard captures``) ----------------------------------


class CaptureInfo:
    """What a capture's header says of it, and its file."""

    __slots__ = (
        "capture_id",
        "day",
        "mtime",
        "outcome",
        "path",
        "protocol",
        "redacted",
        "route",
        "rules",
    )

    def __init__(self, path: Path, header: dict[str, Any], mtime: float) -> None:
        self.path = path
        self.mtime = mtime
        self.capture_id = str(header.get("capture_id", path.name.removesuffix(CAPTURE_SUFFIX)))
        self.day = time.strftime("%Y-%m-%d", time.gmtime(mtime))
        self.route = str(header.get("route"))
        self.protocol = str(header.get("protocol"))
        self.redacted = str(header.get("redacted"))
        report = header.get("report")
        report = report if isinstance(report, dict) else {}
        self.outcome = str(report.get("outcome"))
        findings = report.get("findings")
        rules = (
            [f[0] for f in findings if isinstance(f, list) and f]
            if isinstance(findings, list)
            else []
        )
        self.rules = list(dict.fromkeys(str(rule) for rule in rules))

    def as_json(self) -> dict[str, Any]:
        return {
            "capture_id": self.capture_id,
            "file": str(self.path),
            "day": self.day,
            "route": self.route,
            "protocol": self.protocol,
            "outcome": self.outcome,
            "rules": self.rules,
            "redacted": self.redacted,
        }


def list_captures(directory: str | os.PathLike[str]) -> list[CaptureInfo]:
    """The captures in ``directory``, newest first; a file whose header does not read is
    left out (only its first line is read)."""
    from streamguard.timeline import capture_lines, read_capture_header

    found: list[CaptureInfo] = []
    for path in Path(directory).glob(f"*{CAPTURE_SUFFIX}"):
        try:
            with open(path, "rb") as file:
                header = read_capture_header(next(capture_lines(file), ""))
            mtime = path.stat().st_mtime
        except (OSError, ValueError):
            continue
        found.append(CaptureInfo(path, header, mtime))
    found.sort(key=lambda info: (info.mtime, info.capture_id), reverse=True)
    return found


def summarise(found: Iterable[CaptureInfo]) -> list[tuple[str, list[tuple[str, int]]]]:
    """Captures counted by route, by rule (a capture with several rules counts for each)
    and by day (UTC, of the file's time), each most first."""
    by_route: dict[str, int] = {}
    by_rule: dict[str, int] = {}
    by_day: dict[str, int] = {}
    for info in found:
        by_route[info.route] = by_route.get(info.route, 0) + 1
        for rule in info.rules or [f"({info.outcome})"]:
            by_rule[rule] = by_rule.get(rule, 0) + 1
        by_day[info.day] = by_day.get(info.day, 0) + 1

    def ordered(counts: dict[str, int]) -> list[tuple[str, int]]:
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    return [
        ("route", ordered(by_route)),
        ("rule", ordered(by_rule)),
        ("day", sorted(by_day.items())),
    ]


def prune_captures(
    directory: str | os.PathLike[str],
    *,
    older_than_s: float | None = None,
    keep: int | None = None,
    dry_run: bool = False,
    now: Callable[[], float] = time.time,
) -> list[Path]:
    """Delete the captures older than ``older_than_s`` seconds and those past the newest
    ``keep``; return them (oldest first). ``dry_run``: delete none."""
    found = list_captures(directory)
    limit = None if older_than_s is None else now() - older_than_s
    gone = [
        info.path
        for number, info in enumerate(found)
        if (limit is not None and info.mtime < limit) or (keep is not None and number >= keep)
    ]
    gone.reverse()
    if not dry_run:
        for path in gone:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return gone
