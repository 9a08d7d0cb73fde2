"""``assert_stream_ok``: one assertion on a stream's envelope, with a readable failure."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, overload

from streamguard._format import format_finding, severity_at_least
from streamguard.protocols import AUTO
from streamguard.report import Severity, StreamReport
from streamguard.rules import RULES
from streamguard.testing._collect import CollectedStream, collect, collect_bytes

if TYPE_CHECKING:
    import httpx

__all__ = ["assert_stream_ok", "check_allowed"]


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
    __tracebackhide__ = True  # pytest shows the caller's line and the message, not this body
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
