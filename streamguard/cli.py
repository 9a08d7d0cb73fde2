"""The ``streamguard`` command line: check captured streams, probe a live endpoint, list rules.

Subcommands:

* ``check FILE...``: raw body bytes as ``curl -N`` saves them (``-`` for stdin);
* ``probe URL``: one real request, checked as it arrives, with its timing (needs httpx);
* ``conformance URL``: a battery of Chat Completions, Responses or Anthropic Messages
  requests, one option at a time, each stream read as ``probe`` reads it and judged
  (``streamguard.conformance``; needs httpx);
* ``rules``: the rule catalog, as a table or as the markdown docs page;
* ``info``: which build of the core runs and why, the installed extras, the protocols;
* ``demo``: the demo app under uvicorn, healthy and broken streams (needs the testing extra).

Exit codes: 0 clean, 1 findings at or above ``--fail-on``, a stream that ended with an
outcome ``--fail-on-outcome`` lists, or a probed response that is not an event stream; 2
usage or input errors, an empty capture included (the message names the file and the
problem); 141 when the reader of the output left early (``| head``).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import math
import os
import platform
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib.machinery import EXTENSION_SUFFIXES
from importlib.metadata import PackageNotFoundError, metadata, requires, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO, cast
from urllib.parse import urlsplit, urlunsplit

from streamguard import __version__
from streamguard._build import PURE_PYTHON_ENV, wants_sources
from streamguard._format import FRAME_CHARS, format_finding, frame_at, severity_at_least
from streamguard._table import table
from streamguard._version import version_line
from streamguard._wire import showing_values, token
from streamguard.attribution import ATTRIBUTIONS, linked, summary_of
from streamguard.monitor import StreamEnd, StreamMonitor, check_stream
from streamguard.protocols import AUTO, CHECKERS, PlainSSEChecker, load_plugins
from streamguard.protocols._base import Transcript
from streamguard.report import Finding, Outcome, Severity, StreamReport, UpstreamSummary
from streamguard.request import (
    MAX_REQUEST_CONTAINERS,
    RequestFacts,
    add_http_facts,
    is_jsonrpc_batch,
)
from streamguard.rule_docs.markdown import rules_markdown
from streamguard.rules import ALL_PROTOCOLS, RULES
from streamguard.sse import Event, EventParser
from streamguard.timeline import (
    CAPTURE_FORMAT,
    MAX_CAPTURE_LINE_BYTES,
    Arrival,
    capture_arrivals,
    capture_header,
    capture_lines,
    capture_record,
    read_capture_header,
    render_streams,
    timeline_of,
)
from streamguard.timeline import Stream as TimelineStream

if TYPE_CHECKING:
    from streamguard.conformance_report import ExpectedFailure

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FINDINGS",
    "EXIT_OK",
    "EXIT_USAGE",
    "InputError",
    "main",
    "rules_markdown",
]

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
#: 128 + SIGPIPE: what a shell reports for a filter whose reader left (``cmd | head``).
EXIT_BROKEN_PIPE = 141

#: ``--fail-on-outcome`` of ``probe``: every end a probe can see but ``completed``. A nightly
#: check should go red when the endpoint answered with an in-band error (overloaded, rate
#: limited), never finished, lost its connection, or stalled, even when the stream was well
#: formed. For a probe,
#: ``client_disconnect`` is the probe itself giving up on a stall (``--timeout``): the
#: ``stalled`` finding is only a warning, the outcome fails. ``app_error`` and ``cancelled``
#: are the server's view and never reach a client. ``check`` fails on none: a capture is
#: judged for its structure, and an in-band error is a well-formed end.
PROBE_FAIL_ON_OUTCOME = "error_event,unclosed,client_disconnect,connection_lost"
PROBE_STALL_HELP = (
    "; client_disconnect is the probe giving up on a stall (--timeout) or stopping at "
    "--max-time or --max-bytes"
)
NO_OUTCOME = "none"
#: The largest JSON request parsed for request-aware checks (``--request``, ``--data``), in
#: bytes: the middleware's ``request_peek_bytes`` default. With ``MAX_REQUEST_CONTAINERS``
#: it bounds what a request file can make the parse build.
MAX_REQUEST_BYTES = 1024 * 1024
_INSTALL_HINT = "pip install 'streamguard[testing]'"


class InputError(Exception):
    """An input the command cannot use; the message names it and says what is wrong."""


class _OverBound(InputError):
    """A request past a parsing bound: its size or its count of objects and arrays."""


# -- check ---------------------------------------------------------------------------------


def _read_bytes(name: str) -> bytes:
    """The bytes of a file (``-``: stdin), or an ``InputError`` saying what is wrong."""
    if name == "-":
        return sys.stdin.buffer.read()
    with _reading(name, "a captured stream"):
        return Path(name).read_bytes()


@contextlib.contextmanager
def _reading(name: str, expected: str) -> Iterator[None]:
    """Turn a failure to read ``name`` into an ``InputError`` that says what is wrong."""
    try:
        yield
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{name}: is a directory, not {expected}") from None
    except PermissionError:
        raise InputError(f"{name}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror or exc}") from None


def _read_at_most(name: str, limit: int) -> bytes:
    """The bytes of a file (``-``: stdin), read no further than ``limit``: past it, an
    ``InputError`` that says how large the file is."""
    with _reading(name, "a JSON file"):
        if name == "-":
            data = sys.stdin.buffer.read(limit + 1)
            size = None
        else:
            with open(name, "rb") as file:
                data = file.read(limit + 1)
                status = os.fstat(file.fileno())
                size = status.st_size if stat.S_ISREG(status.st_mode) else None
    if len(data) > limit:
        held = f"more than {limit}" if size is None else str(size)
        raise _OverBound(f"{name}: the file is {held} bytes; at most {limit} are read")
    return data


def _read_request(name: str) -> RequestFacts:
    """The request in the JSON file ``name``, for request-aware checks."""
    try:
        data = _read_at_most(name, MAX_REQUEST_BYTES)
    except InputError as exc:
        raise InputError(f"--request {exc}") from None
    return _request_object(data, f"--request {name}")


def _request_object(data: bytes, where: str) -> RequestFacts:
    """The facts of the JSON object in ``data``, parsed under bounds (its size, and how many
    ``{`` and ``[`` it holds, as the middleware's): the parsed tree is dropped at once."""
    if len(data) > MAX_REQUEST_BYTES:
        raise _OverBound(
            f"{where}: the body is {len(data)} bytes; at most {MAX_REQUEST_BYTES} are parsed"
        )
    containers = data.count(b"{") + data.count(b"[")
    if containers > MAX_REQUEST_CONTAINERS:
        raise _OverBound(
            f"{where}: the body holds {containers} JSON objects and arrays ('{{' and '['); "
            f"at most {MAX_REQUEST_CONTAINERS} are parsed"
        )
    try:
        request = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{where}: invalid JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{where}: the JSON is nested too deeply to parse") from None
    if not isinstance(request, dict) and not is_jsonrpc_batch(request):
        raise InputError(f"{where}: expected a JSON object, got {type(request).__name__}")
    return RequestFacts(request)  # an object, or an MCP request batch


def _finding_json(finding: Finding, frames: Mapping[int, str]) -> dict[str, Any]:
    frame = finding.excerpt
    if frame is None and finding.byte_offset is not None:
        frame = frames.get(finding.byte_offset)
    return {
        "rule": finding.rule,
        "severity": finding.severity.value,
        "message": finding.message,
        "event_index": finding.event_index,
        "byte_offset": finding.byte_offset,
        "frame": frame,
    }


def _report_json(report: StreamReport, frames: Mapping[int, str], failed: bool) -> dict[str, Any]:
    findings = [_finding_json(finding, frames) for finding in report.findings]
    # Attributed (``check --upstream``): each finding says whose it is.
    for finding, attribution in zip(findings, report.attribution, strict=False):
        finding["attribution"] = attribution
    return {
        "protocol": report.protocol,
        "protocol_source": report.protocol_source,
        "outcome": report.outcome.value,
        "events": report.events,
        "bytes": report.bytes,
        "inspected": report.inspected,
        "malformed": report.malformed,
        "failed": failed,
        "findings": findings,
        "notes": list(report.notes),
    }


def _upstream_json(label: str, upstream: UpstreamSummary) -> dict[str, Any]:
    """``check --upstream``: the upstream capture as the downstream's JSON line names it."""
    return {
        "file": label,
        "protocol": upstream.protocol,
        "outcome": None if upstream.outcome is None else upstream.outcome.value,
        "inspected": upstream.inspected,
        "findings": dict(upstream.findings),
    }


def _finding_text(finding: Finding, frames: Mapping[int, str]) -> str:
    """``format_finding`` with the frame read from ``frames`` (the body is not kept)."""
    line = format_finding(finding)
    if finding.excerpt is None and finding.byte_offset is not None:
        frame = frames.get(finding.byte_offset)
        if frame is not None:
            line += f"\n    frame: {frame}"
    return line


#: Bytes ``frame_at`` reads from a finding's offset: all a frame needs of the body.
FRAME_BYTES = FRAME_CHARS * 4 + 4


def _frames(arrivals: Iterable[Arrival], findings: Sequence[Finding]) -> dict[int, str]:
    """The frame at each finding's byte offset, read in one pass over the body's chunks:
    only ``FRAME_BYTES`` per offset are kept (a report keeps a bounded number of findings),
    never the body."""
    wanted = sorted(
        {f.byte_offset for f in findings if f.excerpt is None and f.byte_offset is not None}
    )
    regions = {offset: bytearray() for offset in wanted}
    first_open = position = 0  # wanted[first_open:] still need bytes
    for arrival in arrivals:
        if first_open == len(wanted):
            break
        data = arrival.data
        end = position + len(data)
        for offset in wanted[first_open:]:
            if offset >= end:
                break
            if offset + FRAME_BYTES > position:
                regions[offset] += data[max(offset - position, 0) : offset + FRAME_BYTES - position]
        while first_open < len(wanted) and wanted[first_open] + FRAME_BYTES <= end:
            first_open += 1
        position = end
    frames = {offset: frame_at(bytes(region), 0) for offset, region in regions.items()}
    return {offset: frame for offset, frame in frames.items() if frame is not None}


def _by_rule(report: StreamReport) -> list[tuple[str, list[Finding]]]:
    """The report's findings grouped by rule, in the order each rule first appears."""
    groups: dict[str, list[Finding]] = {}
    for finding in report.findings:
        groups.setdefault(finding.rule, []).append(finding)
    return list(groups.items())


def _counted(rule: str, count: int) -> str:
    return rule if count == 1 else f"{rule} x{count}"


#: Where the repeats of a rule are listed, at most this many are named.
REPEATS_SHOWN = 10


def _grouped_details(report: StreamReport, frames: Mapping[int, str]) -> Iterator[str]:
    """Each rule once: its first finding in full (and whose it is, when attributed), then
    where it repeats."""
    whose = _attribution_by_rule(report)
    for rule, group in _by_rule(report):
        first, *repeats = group
        yield "  " + _finding_text(first, frames).replace("\n", "\n  ")
        if rule in whose:
            yield f"    attribution: {whose[rule]}"
        if repeats:
            places = [
                str(f.event_index) if f.event_index is not None else "the end"
                for f in repeats[:REPEATS_SHOWN]
            ]
            unnamed = len(repeats) - len(places)
            tail = f" and {unnamed} more" if unnamed else ""
            yield f"    {len(repeats)} more {rule}: at event(s) {', '.join(places)}{tail}"


def _attribution_by_rule(report: StreamReport) -> dict[str, str]:
    """Whose each rule's findings are (``report.attribution``): the same for every finding
    of a rule, since ``attribute`` decides by the rule against the same upstreams."""
    return dict(zip((f.rule for f in report.findings), report.attribution, strict=False))


def _attribution_counts(report: StreamReport) -> str:
    """The table's attribution cell: the findings counted by whose they are."""
    counts = [(kind, report.attribution.count(kind)) for kind in ATTRIBUTIONS]
    return ", ".join(f"{count} {kind}" for kind, count in counts if count) or "-"


def _fails(report: StreamReport, threshold: Severity) -> bool:
    return any(severity_at_least(f.severity, threshold) for f in report.findings)


class _Progress:
    """``checking 3/120: name`` on one self-erasing stderr line, on a terminal only."""

    def __init__(self, stream: TextIO, total: int) -> None:
        isatty = getattr(stream, "isatty", None)
        self.enabled = total > 1 and callable(isatty) and bool(isatty())
        self._stream = stream
        self._total = total
        self._shown = False

    def show(self, done: int, name: str) -> None:
        if self.enabled:
            self.show_line(f"checking {done}/{self._total}: {name}")

    def show_line(self, text: str) -> None:
        try:
            width = os.get_terminal_size(self._stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            width = 80
        line = text[: max(width - 1, 10)]
        self._stream.write("\r\x1b[K" + line)
        self._stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False


class _ReadProgress(_Progress):
    """``probe``'s ``reading: 12,345 bytes, 3.2 s`` on one self-erasing stderr line, on a
    terminal only, at most every ``EVERY_S`` seconds: a long stream is no silent wait."""

    EVERY_S = 0.25

    def __init__(self, stream: TextIO, clock: Callable[[], float]) -> None:
        super().__init__(stream, 1)
        isatty = getattr(stream, "isatty", None)
        self.enabled = callable(isatty) and bool(isatty())  # one stream: shown on a terminal
        self._clock = clock
        self._started = self._last = clock()

    def received(self, size: int) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if now - self._last >= self.EVERY_S:
            self._last = now
            self.show_line(f"reading: {size:,} bytes, {now - self._started:.1f} s")


def _cmd_check(args: argparse.Namespace) -> int:
    out, err = sys.stdout, sys.stderr
    threshold = Severity(args.fail_on)
    try:
        request = _read_request(args.request) if args.request else None
    except InputError as exc:
        print(f"streamguard check: error: {exc}", file=err)
        return EXIT_USAGE
    if args.html is not None and len(args.files) != 1:
        print("streamguard check: error: --html draws one stream: give one FILE", file=err)
        return EXIT_USAGE
    upstream: _Upstream | None = None
    if args.upstream is not None:
        if len(args.files) != 1:
            print(
                "streamguard check: error: --upstream is the upstream of one stream: give one FILE",
                file=err,
            )
            return EXIT_USAGE
        try:
            upstream = _upstream(args.upstream, args.upstream_protocol, args.html is not None)
        except InputError as exc:
            print(f"streamguard check: error: --upstream {exc}", file=err)
            return EXIT_USAGE
    wrote: str | None = None
    progress = _Progress(err, len(args.files))
    rows = [["file", "protocol", "outcome", "events", "bytes", "findings"]]
    if upstream is not None:
        rows[0].append("attribution")
    details: list[str] = []
    input_errors = empty = failed = ended_badly = 0
    for done, name in enumerate(args.files):
        label = "<stdin>" if name == "-" else name
        progress.show(done, label)
        try:
            result = _check_file(name, label, args.protocol, request, args.html is not None)
        except InputError as exc:
            input_errors += 1
            progress.clear()
            print(f"streamguard check: error: {exc}", file=err)
            if args.format == "json":
                print(json.dumps({"file": label, "error": str(exc)}), file=out)
            rows.append([label, "", "(input error)", "", "", ""] + [""] * (len(rows[0]) - 6))
            continue
        report, frames = result.report, result.frames
        if upstream is not None:
            report = linked(report, [upstream.summary])
        if report.bytes == 0:
            # Nothing was checked: neither clean nor failing, so an input error (exit 2).
            empty += 1
            progress.clear()
            message = f"{label}: empty: no body bytes to check"
            print(f"streamguard check: error: {message}", file=err)
            if args.format == "json":
                print(json.dumps({"file": label, "error": message}), file=out)
            rows.append([label, "", "(empty)", "0", "0", ""] + [""] * (len(rows[0]) - 6))
            continue
        if result.band is not None:
            if upstream is None:
                page = render_streams([result.band], title=label)
            else:
                assert upstream.band is not None  # drawn when --html is given
                downstream = replace(result.band, label=f"downstream: {label}", report=report)
                page = render_streams(
                    [downstream, upstream.band],
                    title=f"{label} and its upstream {upstream.label}",
                )
            if _write_page(args.html, page, err, "check"):
                wrote = args.html
            else:
                input_errors += 1
        fails = _fails(report, threshold)
        failed += fails
        bad_end = report.outcome in args.fail_on_outcome
        ended_badly += bad_end and not fails
        fails = fails or bad_end
        if args.format == "json":
            progress.clear()
            line = {"file": label, **_report_json(report, frames, fails)}
            if upstream is not None:
                line["upstream"] = _upstream_json(upstream.label, upstream.summary)
            print(json.dumps(line), file=out)
            continue
        rows.append(
            [
                label,
                report.protocol,
                report.outcome.value,
                str(report.events),
                str(report.bytes),
                ", ".join(_counted(rule, len(group)) for rule, group in _by_rule(report)) or "-",
            ]
        )
        if upstream is not None:
            rows[-1].append(_attribution_counts(report))
        if report.findings:
            details.append(label)
            details.extend(_grouped_details(report, frames))
    progress.show(len(args.files), "done")
    progress.clear()
    if args.format == "table":
        print(table(rows), file=out)
        if upstream is not None:
            print(_upstream_line(upstream), file=out)
        if details:
            print("\nFindings:", file=out)
            print("\n".join(details), file=out)
        checked = len(args.files) - input_errors - empty
        summary = (
            f"\n{checked} file(s) checked: {failed} with findings at {threshold.value} or above"
        )
        if ended_badly:
            summary += f"; {ended_badly} more ended {_listed(args.fail_on_outcome)}"
        if empty:
            summary += f"; {empty} empty, nothing to check"
        if input_errors:
            summary += f"; {input_errors} could not be read"
        print(summary, file=out)
    if wrote is not None:
        _say_page(wrote, "check", out if args.format == "table" else err)
    if input_errors or empty:
        return EXIT_USAGE
    return EXIT_FINDINGS if failed or ended_badly else EXIT_OK


#: Bytes read from a file at a time, and the most handed to the checks at once: what
#: ``check`` holds does not grow with the file (nor with one large chunk of a capture).
READ_CHUNK_BYTES = 64 * 1024
#: Standard input (or a pipe) is copied to a temporary file as it is read, to be read
#: again for the frames and the page; this much of it stays in memory, the rest on disk.
SPOOL_MEMORY_BYTES = 1024 * 1024


class _CaptureError(InputError):
    """A capture that does not read as one; the message names the line."""


@contextlib.contextmanager
def _rereadable(name: str) -> Iterator[BinaryIO]:
    """The input ``name`` (``-``: stdin) as a file that can be read more than once: the
    file itself, or what cannot seek (stdin, a pipe) copied to a temporary file."""
    with contextlib.ExitStack() as stack:
        source: BinaryIO = (
            sys.stdin.buffer if name == "-" else stack.enter_context(open(name, "rb"))
        )
        if not source.seekable():
            spool = stack.enter_context(tempfile.SpooledTemporaryFile(SPOOL_MEMORY_BYTES))
            shutil.copyfileobj(source, spool, READ_CHUNK_BYTES)
            spool.seek(0)
            source = cast(BinaryIO, spool)
        yield source


def _is_capture(source: BinaryIO) -> bool:
    """Whether ``source`` is a capture saved by ``probe --save`` (its first line says so);
    else it is a plain body. Reads no further than one capture line, then rewinds."""
    start = source.tell()
    first = source.read(1)
    if first == b"{":
        first += source.readline(MAX_CAPTURE_LINE_BYTES)
    source.seek(start)
    return first.startswith(b"{") and CAPTURE_FORMAT.encode() in first


def _arrivals(source: BinaryIO, capture: bool) -> Iterator[Arrival]:
    """The chunks of the body from the start of ``source``, read one at a time: a plain
    body in ``READ_CHUNK_BYTES`` reads (at time 0: it has no arrival times), a capture line
    by line. A capture line that does not read is a ``_CaptureError`` naming it."""
    source.seek(0)
    if not capture:
        for chunk in iter(lambda: source.read(READ_CHUNK_BYTES), b""):
            yield Arrival(0.0, chunk)
        return
    try:
        lines = capture_lines(source)
        read_capture_header(next(lines, ""))
        yield from capture_arrivals(lines)
    except ValueError as exc:
        raise _CaptureError(f"not a readable capture: {exc}") from None


def _as_captured(source: BinaryIO, protocol: str, request: RequestFacts | None) -> tuple[str, Any]:
    """The protocol and request a capture of a failed stream (``streamguard.captures``:
    its header has a ``capture_id``) was checked with live, where the command line gives
    none (``--protocol auto``, no ``--request``), so that it is judged as it was."""
    start = source.tell()
    try:
        header = read_capture_header(next(capture_lines(source), ""))
    except ValueError:
        return protocol, request
    finally:
        source.seek(start)
    if "capture_id" not in header:
        return protocol, request
    captured = header.get("protocol")
    if protocol == AUTO and isinstance(captured, str) and captured in CHECKERS:
        protocol = captured
    saved = header.get("request")
    if request is None and isinstance(saved, dict) and "facts" in saved:
        request = RequestFacts.restored(saved)
    return protocol, request


def _pieces(arrivals: Iterable[Arrival]) -> Iterator[bytes]:
    """The body's bytes in pieces of at most ``READ_CHUNK_BYTES``: one large chunk of a
    capture is not handed to the checks at once (what one ``feed`` builds grows with it)."""
    for arrival in arrivals:
        data = arrival.data
        for start in range(0, len(data), READ_CHUNK_BYTES):
            yield data[start : start + READ_CHUNK_BYTES]


@dataclass(frozen=True, slots=True)
class _Checked:
    """One file checked: its report, the frames of its findings, its timeline band if
    asked for."""

    report: StreamReport
    frames: dict[int, str]
    band: TimelineStream | None


def _check_file(
    name: str, label: str, protocol: str, request: RequestFacts | None, html: bool
) -> _Checked:
    """Check the file ``name`` in passes over its chunks, never holding it whole: the
    report, then the frames of its findings, then its band of the page when ``html``."""
    with _reading(name, "a captured stream"), _rereadable(name) as source:
        capture = _is_capture(source)
        if capture:
            protocol, request = _as_captured(source, protocol, request)
        try:
            with showing_values():  # the user's own file: its values are theirs to see
                report = check_stream(
                    _pieces(_arrivals(source, capture)), protocol=protocol, request=request
                )
        except _CaptureError as exc:
            raise InputError(f"{label}: {exc}") from None
        # A capture read whole once reads again: the passes below raise nothing new.
        frames = _frames(_arrivals(source, capture), report.findings) if report.findings else {}
        band = _band(report, _arrivals(source, capture), label, capture) if html else None
    return _Checked(report, frames, band)


@dataclass(frozen=True, slots=True)
class _Upstream:
    """``check --upstream``: the upstream capture, as the downstream report names it, and
    its band of the page (with ``--html``)."""

    label: str
    summary: UpstreamSummary
    band: TimelineStream | None


def _upstream(name: str, protocol: str, html: bool) -> _Upstream:
    """The upstream capture checked as its own stream (with its own protocol, no request):
    what the downstream stream's findings are attributed against, and a band of the page
    when ``html``; its findings change neither the output's rows nor the exit code."""
    label = "<stdin>" if name == "-" else name
    checked = _check_file(name, label, protocol, None, html)
    report = checked.report
    if report.bytes == 0:
        raise InputError(f"{label}: empty: no body bytes to check")
    summary = summary_of(report)
    band = None if checked.band is None else replace(checked.band, label=f"upstream: {label}")
    return _Upstream(label, summary, band)


def _upstream_line(upstream: _Upstream) -> str:
    """Under the table: the upstream the attribution column compares against (its findings
    by count only: they are not the downstream's, ``check UPSTREAM_FILE`` lists them)."""
    summary = upstream.summary
    found = sum(count for _, count in summary.findings)
    outcome = "open" if summary.outcome is None else summary.outcome.value
    return (
        f"\nattributed against the upstream {upstream.label}: {summary.protocol}, "
        f"{outcome}, {found} finding(s)"
    )


def _shown_url(url: str, query_names: bool = False) -> str:
    """A URL as a capture or a page shows it: no credentials and no query (Gemini's
    ``?key=`` is an API key), or with ``query_names`` the query's names with their values
    left out (``?api-version=***``). Of a malformed URL, what can be read: a port that is
    not a number is left out (``http://h:sk-KEY/v1`` holds a key where its port should be)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # a bracketed host not closed
        return "(a malformed URL)"
    host = parts.hostname or ""
    with contextlib.suppress(ValueError):
        if parts.port is not None:
            host = f"{host}:{parts.port}"
    query = ""
    if query_names and parts.query:
        names = [field.partition("=")[0] for field in parts.query.split("&") if field]
        query = "&".join(f"{name}=***" for name in names[:_QUERY_NAMES_SHOWN])
        if len(names) > _QUERY_NAMES_SHOWN:
            query += "&..."
    return urlunsplit((parts.scheme, host, parts.path, query, ""))


#: The most query names a shown URL lists (the rest: ``&...``).
_QUERY_NAMES_SHOWN = 10


def _named_url(url: str) -> str:
    """How an error names a URL that cannot be requested: as ``_shown_url`` shows it when
    it is an http(s) URL with a host, else ``URL`` (the text may be anything, a key too)."""
    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
        if parts.scheme.lower() in ("http", "https") and parts.hostname:
            return _shown_url(url)
    return "URL"


def _url_problem(url: str) -> str | None:
    """Why ``url`` cannot be requested, in words that quote none of it (its userinfo, a
    port that is not a number or a query value may be a secret); None when it can."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "not a valid URL: a host in brackets not closed"
    try:
        parts.port  # noqa: B018  (a property that raises on a port it cannot read)
    except ValueError:
        return "not a valid URL: its port is not a number from 0 to 65535"
    if parts.scheme.lower() not in ("http", "https"):
        return "not a valid URL: it must start with http:// or https://"
    if not parts.hostname:
        return "not a valid URL: it names no host"
    try:
        import httpx
    except ImportError:
        return None
    try:
        httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        return "not a valid URL (httpx cannot parse it)"
    return None


def _band(
    report: StreamReport, arrivals: Iterable[Arrival], label: str, timed: bool
) -> TimelineStream:
    """A stream's band of the timeline page, from its chunks (read no further than the
    page's bounds: ``timeline_of``). A plain body has no arrival times (``timed`` False):
    the page lays it out by index."""
    timeline = timeline_of(arrivals, report.protocol)
    return TimelineStream(
        label,
        report,
        timeline.marks,
        timed=timed,
        ended_at=report.duration if timed else None,
        cut_at=None if timeline.complete else timeline.covered_bytes,
        blocks_left_out=timeline.blocks_left_out,
    )


def _say_page(path: str, command: str, stream: TextIO) -> None:
    """Say where the page went (after the report: on stdout with the table, on stderr
    when stdout holds JSON)."""
    print(f"streamguard {command}: timeline page written to {Path(path).resolve()}", file=stream)


def _write_page(path: str, page: str, err: TextIO, command: str) -> bool:
    """Write the timeline page; False (and the error said) when it cannot be written."""
    try:
        Path(path).write_text(page, encoding="utf-8")
    except OSError as exc:
        print(f"streamguard {command}: error: --html {path}: {exc.strerror}", file=err)
        return False
    return True


def _outcomes(value: str) -> frozenset[Outcome]:
    """``--fail-on-outcome``: comma-separated outcomes, or ``none``."""
    names = [name.strip() for name in value.split(",")]
    if names == [NO_OUTCOME]:
        return frozenset()
    known = {outcome.value: outcome for outcome in Outcome}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown outcome {unknown[0]!r}: expected {NO_OUTCOME} or outcomes from "
            f"{', '.join(known)}, separated by commas"
        )
    return frozenset(known[name] for name in names)


def _listed(outcomes: frozenset[Outcome]) -> str:
    """``error_event or unclosed``, in the order of the outcome table."""
    return " or ".join(outcome.value for outcome in Outcome if outcome in outcomes)


# -- probe ---------------------------------------------------------------------------------


#: ``--max-time`` default, in seconds: a probe asks one question, and the longest LLM
#: answers (reasoning models, long generations) take a few minutes; past five a stream is
#: stuck or endless, and a nightly check should say so rather than run on.
DEFAULT_MAX_SECONDS = 300.0
#: ``--max-bytes`` default: eight times the middleware's per-stream ceiling, and far past
#: a real answer (100,000 tokens of OpenAI chat chunks are about 25 MB); the body is
#: recorded on disk, not in memory, so this bounds the temporary file a probe writes.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: The start of the body kept in memory for the preview of a response that is not an
#: event stream (and the compressed input its inflation reads).
PREVIEW_BYTES = 64 * 1024
#: How the note on a probed response that is not an event stream starts.
NOT_AN_EVENT_STREAM = "not an event stream"
#: Finish reasons a probe keeps (an endless stream could send one per event).
MAX_FINISH_REASONS = 100


@dataclass(frozen=True, slots=True)
class _Probed:
    """What a probe read: the response head, what the events said, how the read ended."""

    status_code: int
    content_type: str | None
    content_encoding: str | None
    head: bytes
    deltas: int
    finish_reasons: tuple[str, ...]
    more_finish_reasons: int
    terminal: bool
    body_ended: bool
    error: str | None
    #: The option that stopped the read (``--max-bytes``, ``--max-time``), or None.
    stopped_by: str | None
    report: StreamReport

    @property
    def is_event_stream(self) -> bool:
        media_type = (self.content_type or "").partition(";")[0].strip().lower()
        return 200 <= self.status_code < 300 and media_type == "text/event-stream"


class _ProbeReader:
    """Checks a live response as its chunks arrive, keeping a bounded amount in memory.

    ``streamguard.testing.collect`` keeps the whole body and every event, as a test wants;
    a probe of an endless stream must not. This keeps the monitor (bounded by design), the
    body's first ``PREVIEW_BYTES``, counts of what the events said, and records every
    chunk with its arrival time in ``recording`` (a temporary file: the frames of the
    findings, ``--save`` and ``--html`` read it back).
    """

    def __init__(
        self,
        response: Any,
        protocol: str,
        request: RequestFacts | None,
        started: float,
        recording: BinaryIO,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from streamguard.config import TimerConfig

        # The clock each chunk is read at: the real one, or the arrival times of a capture
        # that ``conformance --replay`` reads again.
        self.clock = clock
        self.end: StreamEnd | None = None
        self.cause: BaseException | None = None
        if request is None:  # the request's head still says its method and Last-Event-ID
            request = add_http_facts(None, response.request.method, response.request.headers.raw)
        self._now = clock()  # one clock reading per chunk, as collect does
        self.started = started
        self.monitor = StreamMonitor(
            protocol,
            request=request,
            path=response.request.url.path,
            clock=lambda: self._now,
            started_at=started,
            liveness=TimerConfig().limits(),  # a live stream: judge its timing too
            on_event=self._received,
        )
        self._recording = recording
        self.received = 0
        self._head = bytearray()
        self._undecided: list[str] = []  # data of events before auto-detection decided
        self._deltas = 0
        self._finish_reasons: list[str] = []
        self._more_finish_reasons = 0
        self._response = response
        self._check_head(response)

    def _check_head(self, response: Any) -> None:
        """The middleware's HTTP checks on the response head (as ``collect`` applies them)."""
        monitor = self.monitor
        content_type = response.headers.get("content-type")
        media_type = (content_type or "").partition(";")[0].strip().lower()
        if not 200 <= response.status_code < 300 or media_type != "text/event-stream":
            monitor.stop_inspecting()
            monitor.add_note(
                f"{NOT_AN_EVENT_STREAM} (HTTP {response.status_code}, content-type "
                f"{content_type!r}): the body was not checked"
            )
            return
        monitor.check_head(
            content_type or "",
            response.headers.get("content-length"),
            response.headers.get("content-encoding"),
        )

    def _received(self, event: Event, index: int) -> None:
        # Events are transcribed by their protocol's checker, known once auto-detection
        # decided (within a few events); until then their data waits, a bounded few.
        if not self.monitor.decided:
            self._undecided.append(event.data)
            return
        self._transcribe_undecided()
        self._transcribe(event.data)

    def _transcribe_undecided(self) -> None:
        held, self._undecided = self._undecided, []
        for data in held:
            self._transcribe(data)

    def _transcribe(self, data: str) -> None:
        # A fresh transcript per event: its text is dropped (a probe shows none, and an
        # endless stream would grow it); the count and the finish reasons are kept.
        said = Transcript()
        self._deltas += CHECKERS.get(self.monitor.protocol, PlainSSEChecker).transcribe(data, said)
        for reason in said.finish_reasons:
            if len(self._finish_reasons) < MAX_FINISH_REASONS:
                self._finish_reasons.append(reason)
            else:
                self._more_finish_reasons += 1

    def feed(self, chunk: bytes) -> None:
        self._now = self.clock()
        self.received += len(chunk)
        if len(self._head) < PREVIEW_BYTES:
            self._head += chunk[: PREVIEW_BYTES - len(self._head)]
        self._recording.write(capture_record(Arrival(self._now - self.started, chunk)).encode())
        for start in range(0, len(chunk), READ_CHUNK_BYTES):
            self.monitor.feed(chunk[start : start + READ_CHUNK_BYTES])

    def finish(
        self, end: StreamEnd, error: BaseException | None = None, stopped_by: str | None = None
    ) -> _Probed:
        self._now = self.clock()
        self.end, self.cause = end, error
        report = self.monitor.finish(end, cause=error)
        self._transcribe_undecided()  # decided at the end of the body
        why_not = None
        if stopped_by is not None:
            why_not = f"the probe stopped reading at {stopped_by}"
        elif error is not None:
            why_not = f"{type(error).__name__}: {_WHY_NOT[end]}"
        response = self._response
        return _Probed(
            status_code=response.status_code,
            content_type=response.headers.get("content-type"),
            content_encoding=response.headers.get("content-encoding"),
            head=bytes(self._head),
            deltas=self._deltas,
            finish_reasons=tuple(self._finish_reasons),
            more_finish_reasons=self._more_finish_reasons,
            terminal=self.monitor.terminal_seen,
            body_ended=why_not is None,
            error=why_not,
            stopped_by=stopped_by,
            report=report,
        )


# -- the --max-time budget of one request -----------------------------------------------------
#
# httpx's ``timeout`` bounds each socket read, not a request: a head sent one byte every
# half second, or a body that trickles a byte just under ``--timeout``, never trips it. The
# overall budget is enforced where the waiting happens, in the reads themselves: the
# client's connection pool gets a network backend (``_DeadlineBackend``) whose streams give
# each connect, read and write as its timeout the smaller of ``--timeout`` and the time
# left before the deadline of the request under way, and refuse to start one past it. So
# the connect, the TLS handshake, the head and every body read are bounded alike, without
# a second thread racing the reader to close a socket under it (closing a socket another
# thread waits on does not wake that thread on every platform), and the clock is a
# parameter, so a test can run the budget on a clock of its own. The deadline is
# per thread (``_read_budget``): the concurrent variant reads one stream per thread.


#: The clock ``probe`` and ``conformance`` run their ``--max-time`` on (and time their
#: chunks by), read through this name at each run: a test sets one of its own, so that a
#: budget is spent after a count of readings, however loaded the machine.
_monotonic: Callable[[], float] = time.monotonic


@dataclass(slots=True)
class _Budget:
    """The deadline of the request this thread is reading, on ``clock``; ``spent`` is set
    when a read was refused or cut short by it (not by ``--timeout``)."""

    deadline: float
    clock: Callable[[], float]
    spent: bool = False

    def left(self) -> float:
        return self.deadline - self.clock()


_BUDGETS = threading.local()
#: What a read refused at the deadline says (httpx's ``ReadTimeout`` carries it).
MAX_TIME_SPENT = "--max-time spent"


@contextlib.contextmanager
def _read_budget(deadline: float, clock: Callable[[], float]) -> Iterator[_Budget]:
    """Bound every socket wait of this thread's requests, through a client of
    ``_bounded_client``, by ``deadline`` (on ``clock``) while the block runs."""
    previous = getattr(_BUDGETS, "current", None)
    budget = _BUDGETS.current = _Budget(deadline, clock)
    try:
        yield budget
    finally:
        _BUDGETS.current = previous


def _budgeted(timeout: float | None, exceeded: type[Exception]) -> tuple[float | None, bool]:
    """The timeout of one socket wait under this thread's budget (if any), and whether the
    budget, not ``timeout``, bounds it; ``exceeded`` (httpcore's timeout error) is raised
    when no time is left."""
    budget: _Budget | None = getattr(_BUDGETS, "current", None)
    if budget is None:
        return timeout, False
    left = budget.left()
    if left <= 0:
        budget.spent = True
        raise exceeded(MAX_TIME_SPENT)
    if timeout is None or left < timeout:
        return left, True
    return timeout, False


def _waited(
    call: Callable[[float | None], Any], timeout: float | None, exceeded: type[Exception]
) -> Any:
    """``call`` with the budgeted timeout; a timeout that the budget set marks it spent."""
    bounded, by_budget = _budgeted(timeout, exceeded)
    try:
        return call(bounded)
    except exceeded:
        if by_budget:
            _BUDGETS.current.spent = True
        raise


class _DeadlineStream:
    """An httpcore network stream whose every wait is bounded by the thread's budget."""

    def __init__(self, inner: Any, httpcore: Any) -> None:
        self._inner = inner
        self._httpcore = httpcore

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        read = self._inner.read
        return cast(
            bytes, _waited(lambda t: read(max_bytes, t), timeout, self._httpcore.ReadTimeout)
        )

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        write = self._inner.write
        _waited(lambda t: write(buffer, t), timeout, self._httpcore.WriteTimeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> _DeadlineStream:
        start = self._inner.start_tls
        inner = _waited(
            lambda t: start(ssl_context, server_hostname, t), timeout, self._httpcore.ConnectTimeout
        )
        return _DeadlineStream(inner, self._httpcore)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend:
    """An httpcore network backend whose connects and streams the thread's budget bounds."""

    def __init__(self, inner: Any, httpcore: Any) -> None:
        self._inner = inner
        self._httpcore = httpcore

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, **options: Any
    ) -> _DeadlineStream:
        connect = self._inner.connect_tcp
        stream = _waited(
            lambda t: connect(host, port, t, **options), timeout, self._httpcore.ConnectTimeout
        )
        return _DeadlineStream(stream, self._httpcore)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, **options: Any
    ) -> _DeadlineStream:
        connect = self._inner.connect_unix_socket
        stream = _waited(
            lambda t: connect(path, t, **options), timeout, self._httpcore.ConnectTimeout
        )
        return _DeadlineStream(stream, self._httpcore)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _bounded_client(httpx: Any, timeout: float) -> Any:
    """An httpx client (``timeout`` per socket wait) whose requests ``_read_budget`` bounds
    overall. httpx has no public way to hand its pool a network backend (httpcore's pool
    takes one): the transport's pool is reached by its private name, and a test of a head
    sent byte by byte fails if a new httpx moves it. Where it has moved, the client is
    httpx's own (``--timeout`` per wait, ``--max-time`` checked as chunks arrive), so the
    command still runs."""
    import httpcore

    transport = httpx.HTTPTransport()
    pool: Any = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is not None:
        pool._network_backend = _DeadlineBackend(backend, httpcore)
    return httpx.Client(timeout=timeout, transport=transport)


#: Why the body did not end, by how the read ended (the exception's own text is not shown:
#: it may quote the peer). The same words as ``streamguard.testing.collect``'s.
_WHY_NOT = {
    StreamEnd.CONNECTION_LOST: "the connection was lost before the body ended",
    StreamEnd.READ_TIMEOUT: "the client stopped waiting for the rest of the body",
}


def _read_response(
    httpx: Any,
    response: Any,
    reader: _ProbeReader,
    max_bytes: int,
    max_seconds: float,
    budget: _Budget | None = None,
    stop_at: Callable[[str], bool] | None = None,
    progress: _ReadProgress | None = None,
) -> _Probed:
    """Read the body to its end, or until ``max_bytes`` were received or ``max_seconds``
    passed since the request: then the probe leaves, as a client that stops reading does
    (the outcome ``client_disconnect``, unless the terminal already arrived), and a note
    says which limit stopped it. No more than ``max_bytes`` are checked or recorded.

    With ``stop_at`` (the abort variant's: whether an event's data carries content), the
    read also leaves after the first event it holds (``stopped_by`` ``abort``), within the
    same bounds: a stream that never sends content stops at a limit too.

    The time is looked at as each chunk arrives, and, through a client of
    ``_bounded_client``, by every socket wait (``budget``, the request's ``_read_budget``):
    a body that trickles a byte just under ``--timeout``, or sends nothing, ends at
    ``max_seconds`` all the same.
    """
    monitor = reader.monitor
    deadline = reader.started + max_seconds
    parser = None if stop_at is None else EventParser()
    stopped_by = None
    try:
        for chunk in response.iter_raw():
            room = max_bytes - reader.received
            piece = chunk[:room] if len(chunk) > room else chunk
            reader.feed(piece)
            if stop_at is not None and parser is not None and _any_event(parser, piece, stop_at):
                return reader.finish(StreamEnd.CLIENT_DISCONNECT, stopped_by="abort")
            if len(chunk) > room:
                stopped_by = f"--max-bytes {max_bytes}"
                break
            if progress is not None:
                progress.received(reader.received)
            if reader.clock() >= deadline:
                stopped_by = f"--max-time {max_seconds:g}"
                break
    except httpx.HTTPError as exc:
        if budget is None or not budget.spent:
            end = (
                StreamEnd.READ_TIMEOUT
                if isinstance(exc, httpx.TimeoutException)
                else StreamEnd.CONNECTION_LOST
            )
            return reader.finish(end, exc)
        stopped_by = f"--max-time {max_seconds:g}"
    if stopped_by is None:
        return reader.finish(StreamEnd.BODY_ENDED)
    if stopped_by.startswith("--max-bytes"):
        monitor.add_note(
            f"the probe stopped reading after --max-bytes ({max_bytes} bytes): the "
            "body had not ended; the rest of the stream was not checked"
        )
    else:
        monitor.add_note(
            f"the probe stopped reading after --max-time ({max_seconds:g} s): the "
            "body had not ended; the rest of the stream was not checked"
        )
    return reader.finish(StreamEnd.CLIENT_DISCONNECT, stopped_by=stopped_by)


def _any_event(parser: EventParser, piece: bytes, holds: Callable[[str], bool]) -> bool:
    """Whether an event that ``piece`` completes has data that ``holds``."""
    return any(holds(event.data) for event in parser.feed(piece))


def _recorded(recording: BinaryIO) -> Iterator[Arrival]:
    """The chunks a probe recorded, read back one at a time."""
    recording.seek(0)
    return capture_arrivals(capture_lines(recording))


def _positive_seconds(value: str) -> float:
    """``--timeout``, ``--max-time``: a finite number of seconds above 0."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {value!r}")
    return seconds


def _positive_bytes(value: str) -> int:
    """``--max-bytes``: a whole number of bytes above 0."""
    try:
        size = int(value)
    except ValueError:
        size = 0
    if size <= 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of bytes above 0, got {value!r}")
    return size


def _parse_header(value: str) -> tuple[str, str]:
    name, sep, rest = value.partition(":")
    if not sep or not name.strip() or name != name.strip():
        raise argparse.ArgumentTypeError(f"expected 'Name: value', got {value!r}")
    return name, rest.strip()


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f} ms"


def _cmd_probe(args: argparse.Namespace) -> int:
    out, err = sys.stdout, sys.stderr
    try:
        import httpx
    except ImportError:
        print(f"streamguard probe: error: probing needs httpx: {_INSTALL_HINT}", file=err)
        return EXIT_USAGE
    problem = _url_problem(args.url)
    if problem is not None:
        print(f"streamguard probe: error: {_named_url(args.url)}: {problem}", file=err)
        return EXIT_USAGE
    # identity: the bytes stay checkable (a compressed stream is passed over uninspected);
    # -H 'Accept-Encoding: gzip' asks for what the SDKs ask for.
    headers: dict[str, str] = {"accept": "text/event-stream", "accept-encoding": "identity"}
    for name, value in args.header:
        headers[name.lower()] = value
    content: bytes | None = None
    request: RequestFacts | None = None
    if args.data is not None:
        try:
            content = (
                _read_bytes(args.data[1:]) if args.data.startswith("@") else args.data.encode()
            )
        except InputError as exc:
            print(f"streamguard probe: error: --data {exc}", file=err)
            return EXIT_USAGE
        json_body = True
        try:
            request = _request_object(content, "--data")
        except _OverBound as exc:
            # Sent whole all the same; the checks get a request without facts (None would
            # have collect parse the body it sends).
            print(f"streamguard probe: note: {exc}: request-aware checks skipped", file=err)
            request = RequestFacts({})
            json_body = content.lstrip()[:1] == b"{"
        except InputError:
            json_body = False  # not a JSON object: sent as is, request-aware checks skipped
        if json_body:
            headers.setdefault("content-type", "application/json")
    method = "POST" if content is not None else "GET"
    with tempfile.SpooledTemporaryFile(SPOOL_MEMORY_BYTES) as spool:
        recording = cast(BinaryIO, spool)
        clock = _monotonic
        started = clock()
        budget = None
        try:
            with (
                _bounded_client(httpx, args.timeout) as client,
                _read_budget(started + args.max_time, clock) as budget,
                client.stream(method, args.url, content=content, headers=headers) as response,
            ):
                reader = _ProbeReader(response, args.protocol, request, started, recording, clock)
                progress = _ReadProgress(err, clock)
                try:
                    probed = _read_response(
                        httpx,
                        response,
                        reader,
                        args.max_bytes,
                        args.max_time,
                        budget,
                        None,
                        progress,
                    )
                finally:
                    progress.clear()
        except httpx.InvalidURL:  # its message may quote the URL: named, never quoted
            print(f"streamguard probe: error: {_shown_url(args.url)}: invalid URL", file=err)
            return EXIT_USAGE
        except (httpx.HTTPError, httpx.UnsupportedProtocol) as exc:
            if budget is not None and budget.spent:  # before the head: nothing to report
                why = f"no response head within --max-time {args.max_time:g} s"
            else:
                why = f"request failed: {type(exc).__name__}: {exc}"
            print(f"streamguard probe: error: {_shown_url(args.url)}: {why}", file=err)
            return EXIT_USAGE
        report = probed.report
        frames = _frames(_recorded(recording), report.findings) if report.findings else {}
        if args.save is not None:
            header = {
                "url": _shown_url(args.url),
                "status": probed.status_code,
                "content_type": probed.content_type,
                "protocol": report.protocol,
            }
            try:
                with open(args.save, "wb") as saved:
                    saved.write(capture_header(header).encode())
                    recording.seek(0)
                    shutil.copyfileobj(recording, saved, READ_CHUNK_BYTES)
            except OSError as exc:
                print(f"streamguard probe: error: --save {args.save}: {exc.strerror}", file=err)
                return EXIT_USAGE
        if args.html is not None:
            title = _shown_url(args.url)
            band = _band(report, _recorded(recording), title, True)
            if not _write_page(args.html, render_streams([band], title=title), err, "probe"):
                return EXIT_USAGE
    code = _print_probe(args, probed, frames, out)
    if args.html is not None:
        _say_page(args.html, "probe", out if args.format == "table" else err)
    return code


def _print_probe(
    args: argparse.Namespace, probed: _Probed, frames: Mapping[int, str], out: TextIO
) -> int:
    """Print the probe's report; the exit code."""
    report = probed.report
    threshold = Severity(args.fail_on)
    # A response that is not an event stream fails already; its outcome says nothing.
    bad_end = probed.is_event_stream and report.outcome in args.fail_on_outcome
    fails = _fails(report, threshold) or not probed.is_event_stream or bad_end
    finish_reasons = list(probed.finish_reasons)
    if probed.more_finish_reasons:
        finish_reasons.append(f"… ({probed.more_finish_reasons} more)")
    if args.format == "json":
        obj = {
            "url": args.url,
            "status": probed.status_code,
            "content_type": probed.content_type,
            "time_to_first_byte_s": _delta(report.first_byte_at, report.started_at),
            "time_to_first_event_s": report.time_to_first_event,
            "duration_s": report.duration,
            "body_ended": probed.body_ended,
            "stopped_by": probed.stopped_by,
            "terminal": probed.terminal,
            "deltas": probed.deltas,
            "finish_reasons": finish_reasons,
            **_report_json(report, frames, fails),
        }
        print(json.dumps(obj), file=out)
        return EXIT_FINDINGS if fails else EXIT_OK
    if not probed.is_event_stream:
        # Said once, first: the stream rows (protocol, outcome, events) would describe a
        # body that was never checked.
        preview = _preview(probed.head, probed.content_encoding, report.bytes)
        print(
            f"not an event stream: HTTP {probed.status_code}, content-type "
            f"{probed.content_type!r}; the body starts: {preview}\n",
            file=out,
        )
    status = f"{probed.status_code} {probed.content_type or '(no content-type)'}"
    rows = [["url", args.url], ["status", status]]
    if probed.is_event_stream:
        rows += [
            ["protocol", f"{report.protocol} ({report.protocol_source})"],
            ["outcome", report.outcome.value],
            ["events", f"{report.events} ({probed.deltas} with text)"],
        ]
    rows.append(["bytes", str(report.bytes)])
    if probed.is_event_stream:
        rows += [
            ["finish reasons", ", ".join(finish_reasons) or "-"],
            ["terminal", "yes" if probed.terminal else "no"],
        ]
    rows += [
        ["body ended", "yes" if probed.body_ended else f"no ({probed.error})"],
        ["first byte", _seconds(_delta(report.first_byte_at, report.started_at))],
    ]
    if probed.is_event_stream:
        rows.append(["first event", _seconds(report.time_to_first_event)])
    rows.append(["duration", _seconds(report.duration)])
    print(table([["probe", ""], *rows]), file=out)
    if report.findings:
        print("\nFindings:", file=out)
        for finding in report.findings:
            print("  " + _finding_text(finding, frames).replace("\n", "\n  "), file=out)
    if bad_end:
        print(
            f"\nthe stream ended {report.outcome.value}, an outcome --fail-on-outcome lists "
            f"({_listed(args.fail_on_outcome)})",
            file=out,
        )
    for note in report.notes:
        if not note.startswith(NOT_AN_EVENT_STREAM):  # already said, first
            print(f"note: {note}", file=out)
    return EXIT_FINDINGS if fails else EXIT_OK


#: How much of a body that is not an event stream ``probe`` shows, in characters.
PREVIEW_CHARS = 200
_INFLATED = frozenset({"gzip", "x-gzip", "deflate"})
_COMPRESSED = frozenset({*_INFLATED, "br", "zstd", "compress"})


def _preview(body: bytes, content_encoding: str | None, size: int | None = None) -> str:
    """The start of ``body`` on one line; decompressed when the server compressed it anyway.

    gzip and deflate are inflated (only as far as the preview needs: a small body cannot
    inflate into a large one here); other codings are named with the body's ``size`` (by
    default ``len(body)``: a probe keeps only the start), not shown as bytes.
    """
    coding = (content_encoding or "").strip().lower()
    if coding not in ("", "identity"):
        inflated = _inflate(body, PREVIEW_CHARS * 4 + 4) if coding in _INFLATED else None
        if inflated is None:
            shown = len(body) if size is None else size
            return f"({shown} bytes, compressed: Content-Encoding {token(coding, _COMPRESSED)})"
        body = inflated
    return frame_at(body, 0, PREVIEW_CHARS) or "(empty)"


def _inflate(data: bytes, limit: int) -> bytes | None:
    """At most ``limit`` bytes of ``data`` decompressed (gzip, zlib or raw deflate), or None."""
    for wbits in (32 + zlib.MAX_WBITS, -zlib.MAX_WBITS):  # a gzip or zlib header; raw deflate
        try:
            return zlib.decompressobj(wbits).decompress(data, limit)
        except zlib.error:
            continue
    return None


def _delta(at: float | None, start: float) -> float | None:
    return None if at is None else at - start


# -- conformance ---------------------------------------------------------------------------


def _positive_count(value: str) -> int:
    """``--max-requests``, ``--budget-tokens``: a whole number above 0."""
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count <= 0:
        raise argparse.ArgumentTypeError(f"expected a whole number above 0, got {value!r}")
    return count


#: The most runs ``--repeat`` asks of each variant.
MAX_REPEAT = 100


def _repeat_count(value: str) -> int:
    """``--repeat``: a whole number of runs from 1 to ``MAX_REPEAT``."""
    try:
        count = int(value)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_REPEAT:
        raise argparse.ArgumentTypeError(
            f"expected a whole number from 1 to {MAX_REPEAT}, got {value!r}"
        )
    return count


def _variant_names(value: str) -> list[str]:
    """``--variants``: names separated by commas, or ``all``."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected variant names separated by commas, or all")
    return names


def _conformance_reader(
    httpx: Any,
    max_bytes: int,
    max_time: float,
    protocol: str,
    keep_arrivals: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> Any:
    """The conformance run's ``StreamReader``: each stream read as ``probe`` reads it
    (``_ProbeReader``, ``_read_response``: ``protocol``'s checker with the request's facts,
    bounded by ``--max-bytes`` and ``--max-time``), for the abort variant until its first
    content within the same bounds. ``--max-time`` bounds the whole request, its head
    too, through a client of ``_bounded_client`` (``clock``: the budget's). The chunks
    are recorded on disk and read back once: the body (at most ``max_bytes``) is kept,
    each chunk with its arrival time only when ``keep_arrivals`` (``--save`` writes them)."""
    from streamguard import conformance

    has_content = conformance.battery(protocol).has_content

    def read(
        client: Any, url: str, body: Mapping[str, Any], headers: Mapping[str, str], abort: bool
    ) -> conformance.StreamRead:
        content = json.dumps(body).encode()
        with tempfile.SpooledTemporaryFile(SPOOL_MEMORY_BYTES) as spool:
            recording = cast(BinaryIO, spool)
            started = clock()
            with _read_budget(started + max_time, clock) as budget, contextlib.ExitStack() as open_:
                try:
                    response = open_.enter_context(
                        client.stream("POST", url, content=content, headers=dict(headers))
                    )
                except httpx.HTTPError:
                    if budget.spent:
                        raise conformance.MaxTimeSpent(
                            f"no response head within --max-time {max_time:g} s"
                        ) from None
                    raise
                reader = _ProbeReader(
                    response, protocol, RequestFacts(body), started, recording, clock
                )
                stop_at = has_content if abort else None
                probed = _read_response(
                    httpx, response, reader, max_bytes, max_time, budget, stop_at
                )
            read = conformance.stream_read(probed, _recorded(recording), started, keep_arrivals)
        read.retry_after = _retry_after(response.headers.get("retry-after"))
        read.content_length = response.headers.get("content-length")
        read.end = None if reader.end is None else reader.end.value
        read.cause = None if reader.cause is None else type(reader.cause).__name__
        return read

    return read


@dataclass(frozen=True, slots=True)
class _SavedRequest:
    url: Any
    method: str = "POST"


@dataclass(frozen=True, slots=True)
class _SavedResponse:
    """What ``_ProbeReader`` reads of a response, from a capture's header."""

    status_code: int
    headers: dict[str, str]
    request: _SavedRequest


def _replay_reader(directory: Path, saved: Mapping[str, Any], protocol: str, max_bytes: int) -> Any:
    """``conformance --replay``'s ``StreamReader``: no network; each request is answered
    by the next capture ``--save`` wrote for the same body (in the order they were read:
    the saved variants', each one's captures in order),
    read again as the run read it (``_ProbeReader`` at the chunks' arrival times, ended as
    the live read ended). A request without one raises ``NotReplayable``."""
    from urllib.parse import urlsplit as split

    from streamguard import conformance

    # Only the headers are read up front (one line each); a capture's chunks are read when
    # its request comes, at most --max-bytes of them.
    queues: dict[str, list[tuple[dict[str, Any], Path]]] = {}
    names = [name for variant in saved["variants"] for name in variant.get("captures", ())]
    for name in names:  # each checked by load_saved: a capture name, in the directory
        path = directory / name
        with _reading(str(path), "a saved capture"), open(path, "rb") as file:
            try:
                header = read_capture_header(next(capture_lines(file), ""))
            except ValueError as exc:
                raise InputError(f"{path}: not a readable capture: {exc}") from None
        if header.get("protocol") != protocol or not isinstance(header.get("request"), dict):
            continue
        key = json.dumps(header["request"], sort_keys=True)
        queues.setdefault(key, []).append((header, path))

    def arrivals_of(path: Path) -> Iterator[Arrival]:
        """The capture's chunks one at a time (never a list of them: the read records
        them again, as a live read does), no further than ``max_bytes``."""
        size = 0
        with _reading(str(path), "a saved capture"), open(path, "rb") as file:
            try:
                lines = capture_lines(file)
                next(lines, "")
                for arrival in capture_arrivals(lines):
                    size += len(arrival.data)
                    if size > max_bytes:
                        raise ValueError(f"more than --max-bytes {max_bytes} body bytes")
                    yield arrival
            except ValueError as exc:
                raise InputError(f"{path}: not a readable capture: {exc}") from None

    def read(
        client: Any, url: str, body: Mapping[str, Any], headers: Mapping[str, str], abort: bool
    ) -> conformance.StreamRead:
        queue = queues.get(json.dumps(body, sort_keys=True))
        if not queue:
            raise conformance.NotReplayable(
                "a request has no capture: it got no answer live (a hang, a connect error)"
            )
        header, path = queue.pop(0)
        now = [0.0]
        media = {
            key.replace("_", "-"): str(header[key])
            for key in ("content_type", "content_encoding", "content_length")
            if isinstance(header.get(key), str)
        }
        status = header.get("status")
        response = _SavedResponse(
            status if type(status) is int else 0, media, _SavedRequest(split(url))
        )
        with tempfile.SpooledTemporaryFile(SPOOL_MEMORY_BYTES) as spool:
            recording = cast(BinaryIO, spool)
            reader = _ProbeReader(
                response, protocol, RequestFacts(body), 0.0, recording, clock=lambda: now[0]
            )
            for arrival in arrivals_of(path):
                now[0] = arrival.at
                reader.feed(arrival.data)
            probed = reader.finish(*_saved_end(header))
            return conformance.stream_read(probed, _recorded(recording), 0.0, keep_arrivals=False)

    return read


def _saved_end(header: Mapping[str, Any]) -> tuple[StreamEnd, BaseException | None, str | None]:
    """How a saved read ended: its ``StreamEnd``, the error that ended it (of the saved
    type's name, which is all a report names of it), and what stopped it."""
    try:
        end = StreamEnd(header.get("end"))
    except ValueError:
        end = StreamEnd.BODY_ENDED
    cause_name = header.get("cause")
    cause = None
    if isinstance(cause_name, str) and cause_name.isidentifier() and len(cause_name) <= 64:
        cause = type(cause_name, (Exception,), {})()
    stopped = header.get("stopped") if end is StreamEnd.CLIENT_DISCONNECT else None
    return end, cause, stopped if isinstance(stopped, str) else None


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` given in seconds (a date, or anything else, is None)."""
    if value is None or not value.strip().isdigit() or len(value.strip()) > 6:
        return None
    return float(value.strip())


def _cmd_conformance(args: argparse.Namespace) -> int:
    from streamguard import conformance, conformance_report

    out, err = sys.stdout, sys.stderr
    try:  # before any request: a malformed file must not cost a run
        expected = conformance_report.read_expected_failures(args.expected_failures)
    except ValueError as exc:
        print(f"streamguard conformance: error: --expected-failures {exc}", file=err)
        return EXIT_USAGE
    if args.replay is not None:
        if args.url is not None or args.save is not None or args.dry_run:
            print(
                "streamguard conformance: error: --replay reads a saved run: no URL, "
                "--save or --dry-run with it",
                file=err,
            )
            return EXIT_USAGE
        return _replay_conformance(args, expected)
    if args.url is None or args.model is None:
        print("streamguard conformance: error: URL and --model are required", file=err)
        return EXIT_USAGE
    problem = _url_problem(args.url)
    if problem is not None:  # before any request, and without quoting what may be a key
        print(f"streamguard conformance: error: {_named_url(args.url)}: {problem}", file=err)
        return EXIT_USAGE
    battery = conformance.battery(args.protocol)
    try:
        variants = conformance.select(args.variants, args.protocol)
    except KeyError as exc:
        names = [v.name for v in battery.variants]
        hints = [
            f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name)
            for name in str(exc.args[0]).split(", ")
            for close in [difflib.get_close_matches(name, names, n=1)]
        ]
        print(
            f"streamguard conformance: error: unknown variant(s) {', '.join(hints)}; "
            f"expected some of: {', '.join(names)}, or all",
            file=err,
        )
        return EXIT_USAGE
    api_key_env = args.api_key_env or battery.api_key_env
    api_key = conformance.api_key_from(api_key_env)
    if api_key is None and args.api_key_env is not None:
        # Named on purpose: a missing key would only show as 401s, variant after variant.
        print(
            f"streamguard conformance: error: --api-key-env {args.api_key_env}: the "
            "environment variable is not set",
            file=err,
        )
        return EXIT_USAGE
    settings = conformance.RunSettings(
        base_url=args.url,
        model=args.model,
        api_key=api_key,
        timeout=args.timeout,
        twin=args.twin,
        fail_on=Severity(args.fail_on),
        max_requests=args.max_requests,
        protocol=args.protocol,
        repeat=args.repeat,
        budget_tokens=args.budget_tokens,
        save=None if args.save is None else Path(args.save),
    )
    if args.dry_run:
        rows = conformance.plan(settings, variants)
        if args.format == "json":
            shown_plan = {
                "endpoint": _shown_url(battery.url(args.url), query_names=True),
                "protocol": args.protocol,
                "plan": rows,
            }
            print(json.dumps(shown_plan), file=out)
            return EXIT_OK
        auth = battery.shown_auth(api_key)
        print(f"POST {_shown_url(battery.url(args.url), query_names=True)} ({auth})", file=out)
        table_rows = [["variant", "requests", "max output tokens", "runs"]]
        table_rows += [
            [
                r["variant"],
                str(r["requests"]),
                str(r["max_output_tokens"]),
                r["not_run"] or "yes",
            ]
            for r in rows
        ]
        run = [r for r in rows if r["not_run"] is None]
        table_rows.append(
            [
                "total (run)",
                str(sum(r["requests"] for r in run)),
                str(sum(r["max_output_tokens"] for r in run)),
                "",
            ]
        )
        print(table(table_rows), file=out)
        for row in rows:
            print(f"\n{row['variant']}: {json.dumps(row['request'])}", file=out)
        return EXIT_OK
    try:
        import httpx
    except ImportError:
        print(f"streamguard conformance: error: needs httpx: {_INSTALL_HINT}", file=err)
        return EXIT_USAGE
    progress = err.isatty() and args.format != "json"

    def shown(result: Any) -> None:
        if progress:
            print(f"{result.name}: {result.outcome.value}", file=err)

    clock = _monotonic
    read = _conformance_reader(
        httpx, args.max_bytes, args.max_time, args.protocol, args.save is not None, clock
    )
    endpoint = _shown_url(battery.url(args.url))
    try:
        if settings.save is not None:
            settings.save.mkdir(parents=True, exist_ok=True)
        summary = conformance.run_conformance(
            settings,
            variants,
            read,
            endpoint,
            shown,
            new_client=lambda timeout: _bounded_client(httpx, timeout),
            request_budget=lambda: _read_budget(clock() + args.max_time, clock),
        )
        if settings.save is not None:
            saved = conformance.saved_json(summary, settings)
            with open(settings.save / conformance.SAVED_SUMMARY, "w", encoding="utf-8") as file:
                json.dump(saved, file, indent=1)
    except OSError as exc:
        print(f"streamguard conformance: error: --save {args.save}: {exc.strerror}", file=err)
        return EXIT_USAGE
    except ValueError as exc:  # httpx.InvalidURL, UnsupportedProtocol's cousins
        print(f"streamguard conformance: error: {_shown_url(args.url)}: {exc}", file=err)
        return EXIT_USAGE
    _print_conformance(args, summary, out)
    code = _conformance_outputs(args, conformance.summary_json(summary), expected)
    missing = _endpoint_missing(summary.results)
    if missing is not None:
        print(f"streamguard conformance: error: {endpoint}: {missing}", file=err)
        return EXIT_USAGE  # as probe says of an unreachable URL: an input error
    return code


#: What an endpoint that does not serve the API answers: no such path, or no POST there.
_NO_SUCH_API = ("HTTP 404 ", "HTTP 405 ")


def _endpoint_missing(results: Sequence[Any]) -> str | None:
    """Why no variant could run at all, when that is the endpoint's fault and not a
    variant's: nothing listens (every request failed to connect), or the URL serves no
    such API (every answer was 404 or 405). None when any variant got a stream."""
    from streamguard.conformance import VariantOutcome

    sent = [r for r in results if r.requests]  # (a variant skipped up front sent nothing)
    if not sent or any(
        r.outcome not in (VariantOutcome.SKIPPED, VariantOutcome.ERROR) for r in sent
    ):
        return None
    reasons = [r.reason for r in sent]
    if all(reason.startswith("request failed: Connect") for reason in reasons):
        return "nothing answered: every request failed to connect (is the server running?)"
    if all(any(code in reason for code in _NO_SUCH_API) for reason in reasons):
        return (
            "the endpoint answered HTTP 404 or 405 to every variant: no such API at this "
            "URL (give the API's base, such as http://host:8000/v1)"
        )
    return None


def _print_conformance(args: argparse.Namespace, summary: Any, out: TextIO) -> None:
    from streamguard import conformance

    if args.format == "json":
        print(json.dumps(conformance.summary_json(summary)), file=out)
    else:
        print(conformance.summary_text(summary), file=out)


def _replay_conformance(args: argparse.Namespace, expected: Sequence[ExpectedFailure]) -> int:
    """``--replay DIR``: the saved run's captures judged again, offline, with the checks
    of this version; the same report."""
    from streamguard import conformance

    err = sys.stderr
    directory = Path(args.replay)
    try:
        saved = conformance.load_saved(directory)
        read = _replay_reader(directory, saved, saved["protocol"], args.max_bytes)
    except (ValueError, InputError) as exc:
        print(f"streamguard conformance: error: --replay: {exc}", file=err)
        return EXIT_USAGE
    try:
        import httpx  # noqa: F401  (the run's client is made, never used)
    except ImportError:
        print(f"streamguard conformance: error: needs httpx: {_INSTALL_HINT}", file=err)
        return EXIT_USAGE
    settings = conformance.replay_settings(saved)
    variants = conformance.replay_variants(saved)
    try:
        summary = conformance.run_conformance(settings, variants, read, str(saved["endpoint"]))
    except InputError as exc:  # a capture that does not read, or reads past --max-bytes
        print(f"streamguard conformance: error: --replay: {exc}", file=err)
        return EXIT_USAGE
    summary = conformance.replayed(saved, summary)
    _print_conformance(args, summary, sys.stdout)
    return _conformance_outputs(args, conformance.summary_json(summary), expected)


def _conformance_outputs(
    args: argparse.Namespace,
    summary: Mapping[str, Any],
    expected: Sequence[ExpectedFailure],
) -> int:
    """``--html``, ``--junit`` and ``--expected-failures`` after a run: write the reports,
    say what the expected failures did, and the exit code (1 for an unexpected failure or
    a stale entry)."""
    from streamguard import conformance_report

    out, err = sys.stdout, sys.stderr
    said = out if args.format == "table" else err  # stdout holds the JSON
    # The captures of the run (--save DIR), or those it re-checked (--replay DIR): each
    # cell of the matrix links to its stream's timeline page, written beside the capture.
    captures = getattr(args, "save", None) or getattr(args, "replay", None)
    try:
        outputs = conformance_report.write_outputs(
            summary,
            html_path=args.html,
            junit_path=args.junit,
            expected=expected,
            captures_dir=captures,
            fail_on=Severity(args.fail_on),
        )
    except OSError as exc:
        option = "--junit" if exc.filename == args.junit else "--html"
        print(
            f"streamguard conformance: error: {option} {exc.filename}: {exc.strerror}",
            file=err,
        )
        return EXIT_USAGE
    if args.expected_failures is not None:
        for line in outputs.verdict.lines(args.expected_failures):
            print(line, file=said)
    for path in outputs.written:
        what = "JUnit XML" if path == args.junit else "HTML matrix"
        print(f"streamguard conformance: {what} written to {Path(path).resolve()}", file=said)
    return EXIT_FINDINGS if outputs.verdict.failed else EXIT_OK


# -- rules ---------------------------------------------------------------------------------


def _cmd_rules(args: argparse.Namespace) -> int:
    if args.format == "markdown":
        sys.stdout.write(rules_markdown())
        return EXIT_OK
    width = _wrap_width(sys.stdout)
    rows = [["rule", "protocols", "severity", "summary"]]
    rows += [
        [rule.name, _shown_protocols(rule.protocols, width), rule.severity.value, rule.summary]
        for rule in RULES.values()
    ]
    print(table(rows, width))
    return EXIT_OK


#: The longest protocols cell a wrapped table shows as a list; a longer one is a count, so
#: the summaries keep room as protocols are added (unwrapped output lists them all).
_MAX_LISTED_PROTOCOLS = 19


def _shown_protocols(protocols: Sequence[str], width: int | None = None) -> str:
    """A rule's protocols, short enough for a table: ``all but sse`` for a rule every
    protocol but plain SSE raises; in a table wrapped to ``width``, a list too long to fit
    as a count (``all but 3``, ``4 protocols``)."""
    missing = sorted(set(CHECKERS) - set(protocols))
    if ALL_PROTOCOLS in protocols or not missing:
        return ALL_PROTOCOLS
    if len(missing) < len(protocols):
        shown = f"all but {', '.join(missing)}"
        short = f"all but {len(missing)}"
    else:
        shown = ", ".join(protocols)
        short = f"{len(protocols)} protocols"
    return short if width is not None and len(shown) > _MAX_LISTED_PROTOCOLS else shown


def _wrap_width(stream: TextIO) -> int | None:
    """The width to wrap a table to: ``COLUMNS`` when set, else a terminal's width.

    Output to a pipe or a file is not wrapped: one row per line, whole, so that ``grep``,
    ``cut`` and ``awk`` see every rule with its summary (``COLUMNS=100`` wraps it anyway).
    """
    isatty = getattr(stream, "isatty", None)
    if "COLUMNS" in os.environ or (callable(isatty) and isatty()):
        return shutil.get_terminal_size().columns
    return None


# -- info ----------------------------------------------------------------------------------


def _compiled_core_installed() -> bool:
    """Whether the core's extension modules sit beside its sources (whichever one runs)."""
    package = Path(__file__).resolve().parent
    return any((package / f"sse{suffix}").is_file() for suffix in EXTENSION_SUFFIXES)


def _core() -> tuple[str, str]:
    """Which build of the core this process runs (``compiled`` or ``pure``), and why."""
    import streamguard

    installed = _compiled_core_installed()
    if streamguard.compiled:
        return "compiled", "the core compiled with mypyc is installed and loaded"
    if wants_sources():
        also = "a compiled core is installed too" if installed else "no compiled core is installed"
        return "pure", f"{PURE_PYTHON_ENV}=1 asks for the pure-Python core ({also})"
    return "pure", (
        "no compiled core is installed: it was built without a C compiler or mypyc "
        "(reinstall with `pip install -v` to see why)"
    )


def _kernel() -> str:
    """Which code runs the per-frame byte scans: the native kernel (C, built with the
    compiled core: ``streamguard/_kernel.c``) or their Python definitions."""
    from streamguard.sse import NATIVE_KERNEL

    if NATIVE_KERNEL:
        return "native: the C kernel built with the compiled core runs the per-frame scans"
    return "python: the per-frame scans run as Python (the kernel comes with the compiled core)"


_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SELF_EXTRAS = re.compile(r"^streamguard\[([^\]]*)\]")


def _extras() -> dict[str, list[str]]:
    """Each extra of the installed distribution with the requirements it lacks (none: it
    is installed); a requirement only some platforms need is never counted as lacking."""
    try:
        extras = metadata("streamguard").get_all("Provides-Extra") or []
        requirements = requires("streamguard") or []
    except PackageNotFoundError:  # run from a source tree that was never installed
        return {}
    needs: dict[str, list[str]] = {extra: [] for extra in extras}
    for requirement in requirements:
        spec, _, marker = requirement.partition(";")
        extra = re.search(r'extra == "([^"]+)"', marker)
        if extra is None or extra.group(1) not in needs:
            continue
        if " and " in marker or " or " in marker:  # a platform condition too: optional
            continue
        needs[extra.group(1)].append(spec.strip())

    def lacking(extra: str, seen: frozenset[str]) -> list[str]:
        missing = []
        for spec in needs.get(extra, []):
            nested = _SELF_EXTRAS.match(spec)
            if nested is not None:  # dev = streamguard[testing,...]: what those lack
                for inner in nested.group(1).split(","):
                    if inner.strip() not in seen:
                        missing += lacking(inner.strip(), seen | {inner.strip()})
                continue
            found = _REQUIREMENT_NAME.match(spec)
            if found is None:
                continue
            try:
                version(found.group(0))
            except PackageNotFoundError:
                missing.append(found.group(0))
        return sorted(set(missing))

    return {extra: lacking(extra, frozenset({extra})) for extra in extras}


def _cmd_info(args: argparse.Namespace) -> int:
    build, why = _core()
    extras = _extras()
    protocols = [AUTO, *CHECKERS]
    python = f"{platform.python_implementation()} {platform.python_version()}"
    if args.format == "json":
        obj = {
            "version": __version__,
            "python": python,
            "core": build,
            "core_why": why,
            "kernel": _kernel().partition(":")[0],
            "extras": {extra: not missing for extra, missing in extras.items()},
            "protocols": protocols,
        }
        print(json.dumps(obj))
        return EXIT_OK
    installed = [extra for extra, missing in extras.items() if not missing]
    lacking = [
        f"{extra} (lacks {', '.join(missing)})" for extra, missing in extras.items() if missing
    ]
    rows = [
        ["version", __version__],
        ["python", python],
        ["core", f"{build}: {why}"],
        ["kernel", _kernel()],
        ["extras", ", ".join(installed) or "-"],
        ["not installed", "; ".join(lacking) or "-"],
        ["protocols", ", ".join(protocols)],
    ]
    print(table([["streamguard", ""], *rows], _wrap_width(sys.stdout)))
    return EXIT_OK


# -- demo ----------------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    try:
        import httpx  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        print(
            f"streamguard demo: error: the demo needs {exc.name}: {_INSTALL_HINT}", file=sys.stderr
        )
        return EXIT_USAGE
    from streamguard._demo import main as demo_main

    return demo_main()


# -- the parser ------------------------------------------------------------------------------

_EXIT_CODES = (
    "Exit codes: 0 clean; 1 findings at or above --fail-on, an outcome listed in "
    "--fail-on-outcome, or (probe) a response that is not an event stream; 2 usage or "
    "input error (for check, an empty capture too); 141 the output's reader left early "
    "(| head)."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamguard",
        description="Check LLM Server-Sent-Event streams: captured files or a live endpoint.",
        epilog=_EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=version_line())
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sub: argparse.ArgumentParser, fail_on_outcome: str, outcome_note: str = "") -> None:
        sub.add_argument(
            "--protocol",
            choices=[AUTO, *CHECKERS],
            default=AUTO,
            help="the wire protocol (default: auto, from the first decisive event)",
        )
        sub.add_argument(
            "--format", choices=["table", "json"], default="table", help="output format"
        )
        sub.add_argument(  # as conformance has it
            "--json",
            dest="format",
            action="store_const",
            const="json",
            help="the same as --format json",
        )
        sub.add_argument(
            "--fail-on",
            choices=[s.value for s in Severity],
            default=Severity.ERROR.value,
            help="exit 1 on findings of this severity or worse (default: error)",
        )
        sub.add_argument(
            "--fail-on-outcome",
            type=_outcomes,
            default=fail_on_outcome,
            metavar="OUTCOME[,OUTCOME...]",
            help="exit 1 when the stream ends with one of these outcomes ("
            + ", ".join(outcome.value for outcome in Outcome)
            + f"), or {NO_OUTCOME} (default: {fail_on_outcome}){outcome_note}",
        )

    check = commands.add_parser(
        "check",
        help="check captured streams",
        description="Check captured stream bodies (raw bytes, as `curl -N` saves them). "
        "--format json prints one JSON object per file, one per line.",
        epilog=_EXIT_CODES,
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="a captured body; - for stdin")
    check.add_argument(
        "--request", metavar="JSON_FILE", help="the JSON request, for request-aware checks"
    )
    check.add_argument(
        "--html",
        metavar="OUT_HTML",
        help="write the stream as a timeline page (one FILE; a probe --save capture keeps "
        "arrival times)",
    )
    check.add_argument(
        "--upstream",
        metavar="UPSTREAM_FILE",
        help="the capture of the same stream upstream of a gateway (one FILE), checked on "
        "its own: each finding of FILE is attributed (upstream, gateway), and with --html "
        "it is drawn as a second band on the same time axis",
    )
    check.add_argument(
        "--upstream-protocol",
        choices=[AUTO, *CHECKERS],
        default=AUTO,
        help="the upstream capture's wire protocol (default: auto)",
    )
    common(check, NO_OUTCOME)
    check.set_defaults(run=_cmd_check)

    probe = commands.add_parser(
        "probe",
        help="send one request to a live endpoint and check the stream",
        description="Send one request (POST with --data, else GET), check the stream and "
        f"its timing as it arrives. Needs httpx ({_INSTALL_HINT}).",
        epilog=_EXIT_CODES,
    )
    probe.add_argument("url", metavar="URL")
    probe.add_argument(
        "-d",
        "--data",
        metavar="BODY",
        help="the request body, or @FILE; when JSON it also enables request-aware checks",
    )
    probe.add_argument(
        "-H",
        "--header",
        action="append",
        type=_parse_header,
        default=[],
        metavar="'NAME: VALUE'",
        help="a request header (repeatable)",
    )
    probe.add_argument(
        "--save",
        metavar="CAPTURE_JSONL",
        help="keep the stream with its arrival times, for a later check (and check --html)",
    )
    probe.add_argument(
        "--html", metavar="OUT_HTML", help="write the stream as a self-contained timeline page"
    )
    probe.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=60.0,
        help="seconds to wait to connect and between bytes (default: 60)",
    )
    probe.add_argument(
        "--max-time",
        type=_positive_seconds,
        default=DEFAULT_MAX_SECONDS,
        metavar="SECONDS",
        help="stop reading this many seconds after the request: the connect, the head and "
        f"every wait for the body (default: {DEFAULT_MAX_SECONDS:g})",
    )
    probe.add_argument(
        "--max-bytes",
        type=_positive_bytes,
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help=f"stop reading after N body bytes (default: {DEFAULT_MAX_BYTES}, 64 MiB)",
    )
    common(probe, PROBE_FAIL_ON_OUTCOME, PROBE_STALL_HELP)
    probe.set_defaults(run=_cmd_probe)

    _conformance_parser(commands)

    _captures_parser(commands)

    rules = commands.add_parser("rules", help="print the rule catalog")
    rules.add_argument("--format", choices=["table", "markdown"], default="table")
    rules.set_defaults(run=_cmd_rules)

    info = commands.add_parser(
        "info",
        help="which build of the core runs and why, the installed extras and the protocols",
    )
    info.add_argument("--format", choices=["table", "json"], default="table")
    info.set_defaults(run=_cmd_info)

    demo = commands.add_parser("demo", help="run the demo: healthy and broken streams, live")
    demo.set_defaults(run=_cmd_demo)
    return parser


def _captures_parser(commands: Any) -> None:
    sub = commands.add_parser(
        "captures",
        help="list, show and prune the captures of failed streams in a directory",
        description="The captures the middleware wrote of failed streams (capture= in its "
        "configuration): list them with a summary by route, rule and day, show one "
        "(its header, its findings checked again, --html its timeline page), or prune them.",
    )
    actions = sub.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the captures, newest first, and a summary")
    listing.add_argument("directory", metavar="DIR")
    listing.add_argument("--format", choices=["table", "json"], default="table")
    listing.set_defaults(run=_cmd_captures_list)
    show = actions.add_parser("show", help="one capture: its header, its findings again")
    show.add_argument("capture", metavar="FILE_OR_ID", help="a capture file, or an id in --dir")
    show.add_argument("--dir", default=".", metavar="DIR", help="where an id is looked up")
    show.add_argument("--html", metavar="OUT_HTML", help="write its timeline page")
    show.set_defaults(run=_cmd_captures_show)
    prune = actions.add_parser("prune", help="delete captures, the oldest first")
    prune.add_argument("directory", metavar="DIR")
    prune.add_argument("--older-than", type=float, metavar="DAYS", help="older than DAYS days")
    prune.add_argument("--keep", type=int, metavar="N", help="keep the newest N")
    prune.add_argument("--dry-run", action="store_true", help="say what would go, delete none")
    prune.set_defaults(run=_cmd_captures_prune)


def _cmd_captures_list(args: argparse.Namespace) -> int:
    from streamguard.captures import list_captures, summarise

    out = sys.stdout
    found = list_captures(args.directory)
    if args.format == "json":
        for info in found:
            print(json.dumps(info.as_json()), file=out)
        return EXIT_OK
    rows = [["capture", "day", "route", "protocol", "outcome", "rules", "redacted"]]
    for info in found:
        rows.append(
            [
                info.capture_id,
                info.day,
                info.route,
                info.protocol,
                info.outcome,
                ", ".join(info.rules) or "-",
                info.redacted,
            ]
        )
    print(table(rows), file=out)
    for title, counts in summarise(found):
        print(f"\nBy {title}:", file=out)
        print(table([[title, "captures"], *([k, str(n)] for k, n in counts)]), file=out)
    print(f"\n{len(found)} capture(s) in {args.directory}", file=out)
    return EXIT_OK


def _cmd_captures_show(args: argparse.Namespace) -> int:
    from streamguard.captures import CAPTURE_SUFFIX

    out, err = sys.stdout, sys.stderr
    path = Path(args.capture)
    if not path.exists():
        path = Path(args.dir) / f"{args.capture}{CAPTURE_SUFFIX}"
    try:
        with open(path, "rb") as file:
            header = read_capture_header(next(capture_lines(file), ""))
        result = _check_file(str(path), str(path), AUTO, None, args.html is not None)
    except (OSError, ValueError, InputError) as exc:
        print(f"streamguard captures: error: {args.capture}: {exc}", file=err)
        return EXIT_USAGE
    live = header.get("report", {})
    print(
        f"capture {header.get('capture_id')}: route {header.get('route')}, "
        f"protocol {header.get('protocol')}, redacted {header.get('redacted')}",
        file=out,
    )
    dropped = header.get("dropped")
    if dropped:
        print(
            f"{dropped.get('bytes')} byte(s) in {dropped.get('chunks')} chunk(s) dropped "
            f"after byte {dropped.get('after_byte')} (the capture's cap)",
            file=out,
        )
    report = result.report
    again = [[f.rule, f.severity.value, f.event_index, f.byte_offset] for f in report.findings]
    same = again == live.get("findings") and report.outcome.value == live.get("outcome")
    print(
        f"live: {live.get('outcome')}, {len(live.get('findings', []))} finding(s); "
        f"checked again: {report.outcome.value}, {len(again)} finding(s)"
        f"{' (the same)' if same else ' (DIFFERENT)'}",
        file=out,
    )
    details = _grouped_details(report, result.frames)
    if details:
        print("\n".join(details), file=out)
    if args.html is not None and result.band is not None:
        page = render_streams([result.band], title=str(header.get("capture_id")))
        if not _write_page(args.html, page, err, "captures"):
            return EXIT_USAGE
        _say_page(args.html, "captures", out)
    return EXIT_OK


def _cmd_captures_prune(args: argparse.Namespace) -> int:
    from streamguard.captures import prune_captures

    out = sys.stdout
    if args.older_than is None and args.keep is None:
        print("streamguard captures: error: prune needs --older-than or --keep", file=sys.stderr)
        return EXIT_USAGE
    gone = prune_captures(
        args.directory,
        older_than_s=None if args.older_than is None else args.older_than * 86400.0,
        keep=args.keep,
        dry_run=args.dry_run,
    )
    verb = "would delete" if args.dry_run else "deleted"
    for path in gone:
        print(f"{verb} {path.name}", file=out)
    print(f"{len(gone)} capture(s) {verb.split()[-1]}", file=out)
    return EXIT_OK


def _conformance_parser(commands: Any) -> None:
    from streamguard.conformance import PROTOCOL, PROTOCOLS, battery

    def listed(protocol: str) -> str:
        variants = battery(protocol).variants
        names = ", ".join(f"{v.name}{' (opt-in)' if v.opt_in else ''}" for v in variants)
        return f"{protocol}: {names}"

    sub = commands.add_parser(
        "conformance",
        help="run a battery of streaming requests against an OpenAI- or "
        "Anthropic-compatible endpoint",
        description="Send streaming requests, one option at a time (Chat Completions: "
        "plain, usage on and off, n, stop, length, tools, logprobs, JSON mode, abort; "
        "Responses and Anthropic Messages: plain, truncation, tools, abort and a few more), "
        "check each stream as probe does and judge what the option asks for. Variants: "
        + "; ".join(listed(protocol) for protocol in PROTOCOLS)
        + f". Needs httpx ({_INSTALL_HINT}).",
        epilog="Exit codes: 0 every variant passed or was skipped (or failed as "
        "--expected-failures lists); 1 a variant failed, errored or was flaky "
        "unexpectedly, or an expected failure is stale; 2 usage error (a malformed "
        "--expected-failures file, an --html or --junit that cannot be written); 141 the "
        "output's reader left early (| head).",
    )
    sub.add_argument("url", metavar="URL", nargs="?", help="the base URL (http://host:8000/v1)")
    sub.add_argument("--model", help="the model name sent in every request (required)")
    sub.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default=PROTOCOL,
        help="the API the endpoint speaks: POST {URL}/chat/completions, {URL}/responses or "
        f"{{URL}}/messages (default: {PROTOCOL})",
    )
    sub.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="the environment variable holding the API key, sent as a bearer token "
        "(anthropic: x-api-key) and never shown (default: OPENAI_API_KEY, anthropic: "
        "ANTHROPIC_API_KEY; the default unset: no key sent)",
    )
    sub.add_argument(
        "--variants",
        type=_variant_names,
        metavar="NAME[,NAME...]",
        help="the variants to run, or all (default: every variant but the opt-in ones)",
    )
    sub.add_argument(
        "--twin",
        action="store_true",
        help="also send plain and tool variants unstreamed; a difference from the "
        "assembled stream fails (stream_differs_from_response)",
    )
    sub.add_argument(
        "--dry-run",
        action="store_true",
        help="print every request and its worst-case output tokens, send nothing",
    )
    sub.add_argument(
        "--max-requests",
        type=_positive_count,
        metavar="N",
        help="send at most N requests; variants past it are skipped (not run)",
    )
    sub.add_argument(
        "--save",
        metavar="DIR",
        help="write each stream read to DIR/<variant>.jsonl (probe --save's capture "
        "format; a variant's later streams <variant>-2.jsonl, ...) and the report, with "
        "every body sent, to DIR/conformance.json",
    )
    sub.add_argument(
        "--replay",
        metavar="DIR",
        help="judge the captures --save wrote to DIR again, offline (no URL, nothing "
        "sent), and print the same report",
    )
    sub.add_argument(
        "--budget-tokens",
        type=_positive_count,
        metavar="N",
        help="stop when the worst-case output tokens of the requests sent (each one's "
        "token cap, summed) would pass N; variants past it are skipped (not run)",
    )
    sub.add_argument(
        "--repeat",
        type=_repeat_count,
        default=1,
        metavar="K",
        help="run each variant K times (at most 100); one whose runs disagree is flaky, "
        "and fails (default: 1)",
    )
    sub.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=30.0,
        help="seconds to wait to connect and between bytes; a health request after an "
        "abort that takes longer is a hang (default: 30)",
    )
    sub.add_argument(
        "--max-time",
        type=_positive_seconds,
        default=120.0,
        metavar="SECONDS",
        help="stop reading a stream this many seconds after its request, its head included "
        "(default: 120)",
    )
    sub.add_argument(
        "--max-bytes",
        type=_positive_bytes,
        default=8 * 1024 * 1024,
        metavar="N",
        help="stop reading a stream after N body bytes (default: 8388608, 8 MiB)",
    )
    sub.add_argument(
        "--fail-on",
        choices=[s.value for s in Severity],
        default=Severity.ERROR.value,
        help="a variant fails on findings of this severity or worse (default: error)",
    )
    sub.add_argument(
        "--html",
        metavar="OUT_HTML",
        help="also write the run as one HTML page: variants x outcomes, findings by rule, "
        "each outcome linked to its stream's timeline page when the captures are saved",
    )
    sub.add_argument(
        "--junit",
        metavar="OUT_XML",
        help="also write the run as JUnit XML: one testcase per variant",
    )
    sub.add_argument(
        "--expected-failures",
        metavar="TOML_FILE",
        help="known failures ([[expected_failure]] variant, rule, reason): a listed failure "
        "does not fail the run, a listed one that no longer fails (stale) does",
    )
    sub.add_argument("--format", choices=["table", "json"], default="table", help="output format")
    sub.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        help="the same as --format json",
    )
    sub.set_defaults(run=_cmd_conformance)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (argparse's usage errors included).

    A reader that leaves early (``streamguard rules | head -2``) ends the output quietly,
    as it ends any Unix filter: no traceback, exit ``EXIT_BROKEN_PIPE``.
    """
    load_plugins()  # an installed protocol is a choice of --protocol, and in `rules`
    try:
        try:
            args = _parser().parse_args(argv)
        except SystemExit as exc:  # --help, --version, usage errors
            code = exc.code if isinstance(exc.code, int) else EXIT_USAGE
        else:
            code = args.run(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    return code


def _discard_stdout() -> None:
    """Point stdout at devnull, so the output still buffered is dropped at exit, not raised.

    The recipe of the Python docs (signal module, "Note on SIGPIPE"); restoring SIGPIPE's
    default action instead would also kill the process on a broken socket.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (a captured stdout in tests)
        pass
