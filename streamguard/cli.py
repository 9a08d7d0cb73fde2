"""The ``streamguard`` command line: check captured streams, probe a live endpoint, list rules.

Subcommands:

* ``check FILE...``: raw body bytes as ``curl -N`` saves them (``-`` for stdin);
* ``probe URL``: one real request, checked as it arrives, with its timing (needs httpx);
* ``rules``: the rule catalog, as a table or as the markdown docs page;
* ``demo``: the demo app under uvicorn, healthy and broken streams (needs the testing extra).

Exit codes: 0 clean, 1 findings at or above ``--fail-on``, a stream that ended with an
outcome ``--fail-on-outcome`` lists, or a probed response that is not an event stream; 2
usage or input errors (the message names the file and the problem); 141 when the reader of
the output left early (``| head``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import stat
import sys
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit, urlunsplit

from streamguard import __version__
from streamguard._format import format_finding, frame_at, severity_at_least
from streamguard._table import table
from streamguard._wire import token
from streamguard.monitor import check_stream
from streamguard.protocols import AUTO, CHECKERS
from streamguard.report import Finding, Outcome, Severity, StreamReport
from streamguard.request import MAX_REQUEST_CONTAINERS, RequestFacts, is_jsonrpc_batch
from streamguard.rule_docs.markdown import rules_markdown
from streamguard.rules import ALL_PROTOCOLS, RULES
from streamguard.timeline import (
    CAPTURE_FORMAT,
    Arrival,
    Capture,
    marks_from_arrivals,
    read_capture,
    render_html,
    write_capture,
)

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

PROTOCOLS = [AUTO, *CHECKERS]
#: ``--fail-on-outcome`` of ``probe``: every end a probe can see but ``completed``. A nightly
#: check should go red when the endpoint answered with an in-band error (overloaded, rate
#: limited), never finished, lost its connection, or stalled, even when the stream was well
#: formed. For a probe,
#: ``client_disconnect`` is the probe itself giving up on a stall (``--timeout``): the
#: ``stalled`` finding is only a warning, the outcome fails. ``app_error`` and ``cancelled``
#: are the server's view and never reach a client. ``check`` fails on none: a capture is
#: judged for its structure, and an in-band error is a well-formed end.
PROBE_FAIL_ON_OUTCOME = "error_event,unclosed,client_disconnect,connection_lost"
PROBE_STALL_HELP = "; client_disconnect is the probe giving up on a stall (--timeout)"
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


def _finding_json(finding: Finding, body: bytes | None) -> dict[str, Any]:
    frame = finding.excerpt
    if frame is None and body is not None:
        frame = frame_at(body, finding.byte_offset)
    return {
        "rule": finding.rule,
        "severity": finding.severity.value,
        "message": finding.message,
        "event_index": finding.event_index,
        "byte_offset": finding.byte_offset,
        "frame": frame,
    }


def _report_json(report: StreamReport, body: bytes | None, failed: bool) -> dict[str, Any]:
    return {
        "protocol": report.protocol,
        "protocol_source": report.protocol_source,
        "outcome": report.outcome.value,
        "events": report.events,
        "bytes": report.bytes,
        "inspected": report.inspected,
        "malformed": report.malformed,
        "failed": failed,
        "findings": [_finding_json(finding, body) for finding in report.findings],
        "notes": list(report.notes),
    }


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
        if not self.enabled:
            return
        try:
            width = os.get_terminal_size(self._stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            width = 80
        line = f"checking {done}/{self._total}: {name}"[: max(width - 1, 10)]
        self._stream.write("\r\x1b[K" + line)
        self._stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False


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
    progress = _Progress(err, len(args.files))
    rows = [["file", "protocol", "outcome", "events", "bytes", "findings"]]
    details: list[str] = []
    input_errors = failed = ended_badly = 0
    for done, name in enumerate(args.files):
        label = "<stdin>" if name == "-" else name
        progress.show(done, label)
        try:
            body = _read_bytes(name)
        except InputError as exc:
            input_errors += 1
            progress.clear()
            print(f"streamguard check: error: {exc}", file=err)
            if args.format == "json":
                print(json.dumps({"file": label, "error": str(exc)}), file=out)
            rows.append([label, "", "(input error)", "", "", ""])
            continue
        try:
            capture = _as_capture(body)
        except InputError as exc:
            input_errors += 1
            progress.clear()
            print(f"streamguard check: error: {label}: {exc}", file=err)
            rows.append([label, "", "(input error)", "", "", ""])
            continue
        if capture is not None:  # a capture keeps the chunks as they arrived
            chunks = [arrival.data for arrival in capture.arrivals]
            body = b"".join(chunks)
        else:
            chunks = [body]
        report = check_stream(chunks, protocol=args.protocol, request=request)
        if args.html is not None:
            arrivals = capture.arrivals if capture is not None else (Arrival(0.0, body),)
            if not _write_html(args.html, report, arrivals, label, err, "check"):
                input_errors += 1
        fails = _fails(report, threshold)
        failed += fails
        bad_end = report.outcome in args.fail_on_outcome
        ended_badly += bad_end and not fails
        fails = fails or bad_end
        if args.format == "json":
            progress.clear()
            print(json.dumps({"file": label, **_report_json(report, body, fails)}), file=out)
            continue
        rows.append(
            [
                label,
                report.protocol,
                report.outcome.value,
                str(report.events),
                str(report.bytes),
                ", ".join(report.rules()) or "-",
            ]
        )
        if report.findings:
            details.append(label)
            details.extend(
                "  " + format_finding(f, body).replace("\n", "\n  ") for f in report.findings
            )
    progress.show(len(args.files), "done")
    progress.clear()
    if args.format == "table":
        print(table(rows), file=out)
        if details:
            print("\nFindings:", file=out)
            print("\n".join(details), file=out)
        checked = len(args.files) - input_errors
        summary = (
            f"\n{checked} file(s) checked: {failed} with findings at {threshold.value} or above"
        )
        if ended_badly:
            summary += f"; {ended_badly} more ended {_listed(args.fail_on_outcome)}"
        if input_errors:
            summary += f"; {input_errors} could not be read"
        print(summary, file=out)
    if input_errors:
        return EXIT_USAGE
    return EXIT_FINDINGS if failed or ended_badly else EXIT_OK


def _as_capture(body: bytes) -> Capture | None:
    """A capture saved by ``probe --save`` (its header line says so), else None: the
    file is a plain body. A file whose header says it is a capture but which does not
    read as one is an ``InputError`` naming the line, never checked as a body."""
    if not body.startswith(b"{"):
        return None
    first = body.split(b"\n", 1)[0]
    if CAPTURE_FORMAT.encode() not in first:
        return None
    try:
        return read_capture(body.decode("utf-8").splitlines())
    except UnicodeDecodeError:
        raise InputError("the capture is not UTF-8 text") from None
    except ValueError as exc:
        raise InputError(f"not a readable capture: {exc}") from None


def _shown_url(url: str) -> str:
    """A URL as a capture or a page shows it: no query (Gemini's ``?key=`` is an API key)
    and no credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _write_html(
    path: str,
    report: StreamReport,
    arrivals: Sequence[Arrival],
    title: str,
    err: TextIO,
    command: str,
) -> bool:
    """Write the timeline page; False (and the error said) when it cannot be written."""
    marks = marks_from_arrivals(arrivals)
    page = render_html(report, marks, title=title, ended_at=report.duration)
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


def _recording(httpx: Any, stream: Any, started: float, arrivals: list[Arrival]) -> Any:
    """The response's byte stream, keeping each chunk with its arrival time (for
    ``--save`` and ``--html``)."""

    class Recording(httpx.SyncByteStream):  # type: ignore[misc]
        def __iter__(self) -> Iterator[bytes]:
            for chunk in stream:
                arrivals.append(Arrival(time.monotonic() - started, bytes(chunk)))
                yield chunk

        def close(self) -> None:
            stream.close()

    return Recording()


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
    from streamguard.config import TimerConfig
    from streamguard.testing import collect

    threshold = Severity(args.fail_on)
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
    arrivals: list[Arrival] = []
    try:
        with httpx.Client(timeout=args.timeout) as client:
            started = time.monotonic()
            with client.stream(method, args.url, content=content, headers=headers) as response:
                encoding = response.headers.get("content-encoding")
                if args.save is not None or args.html is not None:
                    response.stream = _recording(httpx, response.stream, started, arrivals)
                record = collect(
                    response,
                    protocol=args.protocol,
                    request=request,
                    started_at=started,
                    timers=TimerConfig(),  # a live stream: judge its timing too
                )
    except httpx.InvalidURL as exc:
        print(f"streamguard probe: error: {args.url}: invalid URL: {exc}", file=err)
        return EXIT_USAGE
    except (httpx.HTTPError, httpx.UnsupportedProtocol) as exc:
        print(
            f"streamguard probe: error: {args.url}: request failed: {type(exc).__name__}: {exc}",
            file=err,
        )
        return EXIT_USAGE
    report = record.report
    if args.save is not None:
        header = {
            "url": _shown_url(args.url),
            "status": record.status_code,
            "content_type": record.content_type,
            "protocol": report.protocol,
        }
        try:
            with open(args.save, "w", encoding="utf-8") as saved:
                write_capture(saved, header, arrivals)
        except OSError as exc:
            print(f"streamguard probe: error: --save {args.save}: {exc.strerror}", file=err)
            return EXIT_USAGE
    if args.html is not None and not _write_html(
        args.html, report, arrivals, _shown_url(args.url), err, "probe"
    ):
        return EXIT_USAGE
    # A response that is not an event stream fails already; its outcome says nothing.
    bad_end = record.is_event_stream and report.outcome in args.fail_on_outcome
    fails = _fails(report, threshold) or not record.is_event_stream or bad_end
    if args.format == "json":
        obj = {
            "url": args.url,
            "status": record.status_code,
            "content_type": record.content_type,
            "time_to_first_byte_s": _delta(report.first_byte_at, report.started_at),
            "time_to_first_event_s": report.time_to_first_event,
            "duration_s": report.duration,
            "body_ended": record.body_ended,
            "terminal": record.terminal,
            "deltas": record.deltas,
            "finish_reasons": list(record.finish_reasons),
            **_report_json(report, record.body, fails),
        }
        print(json.dumps(obj), file=out)
        return EXIT_FINDINGS if fails else EXIT_OK
    rows = [
        ["url", args.url],
        ["status", f"{record.status_code} {record.content_type or '(no content-type)'}"],
        ["protocol", f"{report.protocol} ({report.protocol_source})"],
        ["outcome", report.outcome.value],
        ["events", f"{report.events} ({record.deltas} with text)"],
        ["bytes", str(report.bytes)],
        ["finish reasons", ", ".join(record.finish_reasons) or "-"],
        ["terminal", "yes" if record.terminal else "no"],
        ["body ended", "yes" if record.body_ended else f"no ({record.error})"],
        ["first byte", _seconds(_delta(report.first_byte_at, report.started_at))],
        ["first event", _seconds(report.time_to_first_event)],
        ["duration", _seconds(report.duration)],
    ]
    print(table([["probe", ""], *rows]), file=out)
    if not record.is_event_stream:
        print(
            f"\nnot an event stream: HTTP {record.status_code}, content-type "
            f"{record.content_type!r}; the body starts: {_preview(record.body, encoding)}",
            file=out,
        )
    if report.findings:
        print("\nFindings:", file=out)
        for finding in report.findings:
            print("  " + format_finding(finding, record.body).replace("\n", "\n  "), file=out)
    if bad_end:
        print(
            f"\nthe stream ended {report.outcome.value}, an outcome --fail-on-outcome lists "
            f"({_listed(args.fail_on_outcome)})",
            file=out,
        )
    for note in report.notes:
        print(f"note: {note}", file=out)
    return EXIT_FINDINGS if fails else EXIT_OK


#: How much of a body that is not an event stream ``probe`` shows, in characters.
PREVIEW_CHARS = 200
_INFLATED = frozenset({"gzip", "x-gzip", "deflate"})
_COMPRESSED = frozenset({*_INFLATED, "br", "zstd", "compress"})


def _preview(body: bytes, content_encoding: str | None) -> str:
    """The start of ``body`` on one line; decompressed when the server compressed it anyway.

    gzip and deflate are inflated (only as far as the preview needs: a small body cannot
    inflate into a large one here); other codings are named, not shown as bytes.
    """
    coding = (content_encoding or "").strip().lower()
    if coding not in ("", "identity"):
        inflated = _inflate(body, PREVIEW_CHARS * 4 + 4) if coding in _INFLATED else None
        if inflated is None:
            return f"({len(body)} bytes, compressed: Content-Encoding {token(coding, _COMPRESSED)})"
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


# -- rules ---------------------------------------------------------------------------------


def _cmd_rules(args: argparse.Namespace) -> int:
    if args.format == "markdown":
        sys.stdout.write(rules_markdown())
        return EXIT_OK
    rows = [["rule", "protocols", "severity", "summary"]]
    rows += [
        [rule.name, _shown_protocols(rule.protocols), rule.severity.value, rule.summary]
        for rule in RULES.values()
    ]
    print(table(rows, _wrap_width(sys.stdout)))
    return EXIT_OK


def _shown_protocols(protocols: Sequence[str]) -> str:
    """A rule's protocols, short enough for a table: ``all but sse`` for a rule every
    protocol but plain SSE raises."""
    missing = sorted(set(CHECKERS) - set(protocols))
    if ALL_PROTOCOLS in protocols or not missing:
        return ALL_PROTOCOLS
    if len(missing) < len(protocols):
        return f"all but {', '.join(missing)}"
    return ", ".join(protocols)


def _wrap_width(stream: TextIO) -> int | None:
    """The width to wrap a table to: ``COLUMNS`` when set, else a terminal's width.

    Output to a pipe or a file is not wrapped: one row per line, whole, so that ``grep``,
    ``cut`` and ``awk`` see every rule with its summary (``COLUMNS=100`` wraps it anyway).
    """
    isatty = getattr(stream, "isatty", None)
    if "COLUMNS" in os.environ or (callable(isatty) and isatty()):
        return shutil.get_terminal_size().columns
    return None


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
    "input error; 141 the output's reader left early (| head)."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamguard",
        description="Check LLM Server-Sent-Event streams: captured files or a live endpoint.",
        epilog=_EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"streamguard {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sub: argparse.ArgumentParser, fail_on_outcome: str, outcome_note: str = "") -> None:
        sub.add_argument(
            "--protocol",
            choices=PROTOCOLS,
            default=AUTO,
            help="the wire protocol (default: auto, from the first decisive event)",
        )
        sub.add_argument(
            "--format", choices=["table", "json"], default="table", help="output format"
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
        type=float,
        default=60.0,
        help="seconds to wait to connect and between bytes (default: 60)",
    )
    common(probe, PROBE_FAIL_ON_OUTCOME, PROBE_STALL_HELP)
    probe.set_defaults(run=_cmd_probe)

    rules = commands.add_parser("rules", help="print the rule catalog")
    rules.add_argument("--format", choices=["table", "markdown"], default="table")
    rules.set_defaults(run=_cmd_rules)

    demo = commands.add_parser("demo", help="run the demo: healthy and broken streams, live")
    demo.set_defaults(run=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (argparse's usage errors included).

    A reader that leaves early (``streamguard rules | head -2``) ends the output quietly,
    as it ends any Unix filter: no traceback, exit ``EXIT_BROKEN_PIPE``.
    """
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
