"""Findings for people: which ones a threshold counts, and how one reads on a line.

Shared by the command line, ``assert_stream_ok`` and the pytest plugin, so a finding reads
the same in a terminal, a failed test and a CI log.
"""

from __future__ import annotations

from streamguard.report import Finding, Severity

__all__ = ["FRAME_CHARS", "format_finding", "frame_at", "severity_at_least"]

_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}
#: How much of a frame a finding shows, in characters: a chat chunk whole (about 200), so
#: the part that broke it (a delta after the finish) is on the line. Only the CLI and
#: failed tests show frames, never a log line.
FRAME_CHARS = 240


def severity_at_least(severity: Severity, threshold: Severity) -> bool:
    """Whether ``severity`` is ``threshold`` or worse (info < warning < error)."""
    return _RANK[severity] >= _RANK[threshold]


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
