"""Fuzz target: the SSE parser never raises, and its events do not depend on the cutting.

Input: 4 control bytes (event size limit, a chunk size, a split point), then the body.
The body is parsed whole, split in two at the fuzz-chosen point, in fixed-size chunks, one
event per chunk (as servers send, which is what takes the parser's one-event fast path),
one byte at a time, and whole with tiny windows and eager data-line compaction; events,
findings and byte counts must agree, and every finding must name a catalog rule.
Run: ``python fuzz/fuzz_parser.py`` (``FUZZ_SECONDS``, or any libFuzzer option).
"""

from __future__ import annotations

import contextlib
import re

from _runner import main  # the script directory is on sys.path

try:
    import atheris
except ImportError:
    atheris = None

with atheris.instrument_imports(include=["streamguard"]) if atheris else contextlib.nullcontext():
    from streamguard import sse
    from streamguard.report import Finding
    from streamguard.rules import RULES
    from streamguard.sse import EventParser

LIMITS = (1 << 20, 4096, 64, 7)
#: After each blank line: where a server's one-event chunks end.
FRAME_ENDS = re.compile(rb"(?<=\n\n)|(?<=\r\r)|(?<=\r\n\r\n)")


def parse(chunks: list[bytes], limit: int) -> tuple[object, ...]:
    """The events ``feed`` returned and the findings taken, then ``close``'s leftover."""
    parser = EventParser(max_event_bytes=limit)
    items: list[object] = []
    findings: list[Finding] = []
    for chunk in chunks:
        items.extend(parser.feed(chunk))
        findings.extend(parser.take_findings())
    leftover = parser.close()
    findings += leftover.findings
    return tuple(items), tuple(findings), leftover.pending, parser.events_dispatched


def parse_with_small_buffers(chunks: list[bytes], limit: int) -> tuple[object, ...]:
    saved = sse._WINDOW, sse._MAX_HELD_DATA_LINES
    sse._WINDOW, sse._MAX_HELD_DATA_LINES = 16, 1
    try:
        return parse(chunks, limit)
    finally:
        sse._WINDOW, sse._MAX_HELD_DATA_LINES = saved


def test_one_input(data: bytes) -> None:
    if len(data) < 4:
        return
    limit = LIMITS[data[0] % len(LIMITS)]
    step = data[1] % 16 + 1
    body = data[4:]
    split = int.from_bytes(data[2:4], "little") % (len(body) + 1)
    whole = parse([body], limit)
    for finding in whole[1]:
        assert finding.rule in RULES, finding
        assert finding.severity is RULES[finding.rule].severity, finding
    two = parse([body[:split], body[split:]], limit)
    assert two == whole, (split, two, whole)
    stepped = parse([body[i : i + step] for i in range(0, len(body), step)], limit)
    assert stepped == whole, (step, stepped, whole)
    framewise = parse(FRAME_ENDS.split(body), limit)
    assert framewise == whole, (framewise, whole)
    small = parse_with_small_buffers([body], limit)
    assert small == whole, (small, whole)
    bytewise = parse([body[i : i + 1] for i in range(len(body))], limit)
    assert bytewise == whole, (bytewise, whole)


if __name__ == "__main__":
    main(test_one_input, "fuzz_parser")
