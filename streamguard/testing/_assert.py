"""``assert_stream_ok``: one assertion on a stream's envelope, with a readable failure."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, overload

from streamguard.protocols import AUTO
from streamguard.report import Finding, Severity, StreamReport
from streamguard.rules import RULES
from streamguard.testing._collect import CollectedStream, collect, collect_bytes

if TYPE_CHECKING:
    import httpx

__all__ = ["assert_stream_ok", "check_allowed", "format_finding", "frame_at", "severity_at_least"]

_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}
FRAME_CHARS = 80


def severity_at_least(severity: Severity, threshold: Severity) -> bool:
    """Whether ``severity`` is ``threshold`` or worse (info < warning < error)."""
    return _RANK[severity] >= _RANK[threshold]


def check_allowed(allow: Iterable[str]) -> frozenset[str]:
    """The allowed rule names; a ``ValueError`` names any that is not in the catalog."""
    if isinstance(allow, str):
        allow = [allow]
    names = frozenset(allow)
    unknown = sorted(names - RULES.keys())
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, RULES, n=1)
            hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ValueError(
            f"unknown streamguard rule name(s) in allow: {', '.join(hints)}; "
            "`streamguard rules` lists them"
        )
    return names


def frame_at(body: bytes, offset: int | None, limit: int = FRAME_CHARS) -> str | None:
    """The frame starting at ``offset`` in ``body``, escaped onto one line and shortened."""
    if offset is None or not 0 <= offset < len(body):
        return None
    raw = body[offset : offset + limit * 4 + 4]
    ends = [raw.find(sep) for sep in (b"\n\n", b"\r\n\r\n", b"\r\r")]
    found = [end for end in ends if end >= 0]
    if found:
        raw = raw[: min(found)]
    text = raw.decode("utf-8", "replace")
    short = text[:limit]
    escaped = "".join(c if c.isprintable() else repr(c)[1:-1] for c in short)
    return escaped + ("…" if len(text) > limit else "")


def format_finding(finding: Finding, body: bytes | None = None) -> str:
    """One finding as a list item: rule, severity, where, message, and the frame.

    The frame is read from ``body`` at the finding's offset; a finding that carries an
    excerpt (the middleware's, with content excerpts on) shows the excerpt instead.
    """
    where = []
    if finding.event_index is not None:
        where.append(f"event {finding.event_index}")
    if finding.byte_offset is not None:
        where.append(f"byte {finding.byte_offset}")
    at = f" at {', '.join(where)}" if where else ""
    line = f"- {finding.rule} [{finding.severity.value}]{at}: {finding.message}"
    if finding.excerpt is not None:  # made by the middleware: the start of the event's data
        line += f"\n    data: {finding.excerpt}"
    elif body is not None:
        frame = frame_at(body, finding.byte_offset)
        if frame is not None:
            line += f"\n    frame: {frame}"
    return line


@overload
def assert_stream_ok(
    stream: httpx.Response | bytes | CollectedStream,
    *,
    protocol: str = ...,
    allow: Iterable[str] = ...,
    request: Mapping[str, Any] | None = ...,
    fail_on: Severity | str = ...,
) -> CollectedStream: ...


@overload
def assert_stream_ok(
    stream: StreamReport,
    *,
    protocol: str = ...,
    allow: Iterable[str] = ...,
    request: Mapping[str, Any] | None = ...,
    fail_on: Severity | str = ...,
) -> StreamReport: ...


def assert_stream_ok(
    stream: httpx.Response | bytes | CollectedStream | StreamReport,
    *,
    protocol: str = AUTO,
    allow: Iterable[str] = (),
    request: Mapping[str, Any] | None = None,
    fail_on: Severity | str = Severity.WARNING,
) -> CollectedStream | StreamReport:
    """Assert that a stream is well framed and ended the way its protocol promises.

    ``stream`` is an httpx streaming response (read to its end with ``collect``), captured
    body bytes, a ``CollectedStream`` or a ``StreamReport``. Findings of ``fail_on``
    severity or worse (default: warnings and errors) fail the assertion, except those of
    the rules named in ``allow``; a name not in the catalog is a ``ValueError``, so a typo
    cannot silently allow everything. ``protocol`` and ``request`` apply when the bytes
    are checked here (a response or bytes). The content of the stream is never judged.

    Returns the record (or the report) that was checked, for further assertions.
    """
    allowed = check_allowed(allow)
    threshold = Severity(fail_on)
    checked: CollectedStream | StreamReport
    if isinstance(stream, CollectedStream | StreamReport):
        if protocol != AUTO or request is not None:
            raise TypeError(
                "protocol= and request= apply only when assert_stream_ok checks a response "
                "or bytes; this stream was already checked"
            )
        checked = stream
    elif isinstance(stream, bytes | bytearray | memoryview):
        checked = collect_bytes(bytes(stream), protocol=protocol, request=request)
    else:
        checked = collect(stream, protocol=protocol, request=request)
    record = checked if isinstance(checked, CollectedStream) else None
    report = checked.report if isinstance(checked, CollectedStream) else checked

    problems: list[str] = []
    if record is not None and not record.is_event_stream:
        problems.append(
            f"- the response is not an event stream: HTTP {record.status_code}, "
            f"content-type {record.content_type!r}"
        )
    if report.internal_error is not None:
        problems.append(f"- streamguard failed while checking: {report.internal_error}")
    body = record.body if record is not None else None
    failing = [
        finding
        for finding in report.findings
        if finding.rule not in allowed and severity_at_least(finding.severity, threshold)
    ]
    problems.extend(format_finding(finding, body) for finding in failing)
    if problems:
        count = f"{len(failing)} finding(s) at {threshold.value} or above"
        if len(problems) > len(failing):
            count = f"{len(problems) - len(failing)} problem(s) and {count}"
        summary = (
            f"stream not ok: {count} (protocol {report.protocol}, outcome "
            f"{report.outcome.value}, {report.events} event(s), {report.bytes} byte(s))"
        )
        raise AssertionError("\n".join([summary, *problems]))
    return checked
