"""Fuzz target: every checker, through ``check_stream``, never raises and ignores the cutting.

Input: 4 control bytes (protocol, request and event size limit, a chunk size, a split
point), then the body. The body is checked whole, split in two at the fuzz-chosen point,
and in fixed-size chunks; the reports must agree, no internal error may occur, and every
finding must name a catalog rule with its catalog severity.
Run: ``python fuzz/fuzz_checkers.py`` (``FUZZ_SECONDS``, or any libFuzzer option).
"""

from __future__ import annotations

import contextlib
from typing import Any

from _runner import main  # the script directory is on sys.path

try:
    import atheris
except ImportError:
    atheris = None

with atheris.instrument_imports(include=["streamguard"]) if atheris else contextlib.nullcontext():
    from streamguard import StreamReport, check_stream
    from streamguard.protocols import CHECKERS
    from streamguard.report import Outcome
    from streamguard.rules import RULES

PROTOCOLS = (*sorted(CHECKERS), "auto")
REQUESTS: tuple[dict[str, Any] | None, ...] = (
    None,
    {"stream": True},
    {"stream": True, "n": 2, "stream_options": {"include_usage": True}},
    {"stream": True, "stream_options": {"include_usage": False}},
    {"starting_after": 3},
)
LIMITS = (1 << 20, 256)


def verdict(report: StreamReport) -> tuple[object, ...]:
    findings = report.findings
    return (report.protocol, report.outcome, findings, report.events, report.bytes,
            report.inspected, report.internal_error)  # fmt: skip


def test_one_input(data: bytes) -> None:
    if len(data) < 4:
        return
    protocol = PROTOCOLS[data[0] % len(PROTOCOLS)]
    request = REQUESTS[data[1] % len(REQUESTS)]
    limit = LIMITS[(data[1] >> 4) % len(LIMITS)]
    step = data[0] // len(PROTOCOLS) % 32 + 1
    body = data[4:]
    split = int.from_bytes(data[2:4], "little") % (len(body) + 1)

    def check(chunks: list[bytes]) -> StreamReport:
        return check_stream(chunks, protocol=protocol, request=request, max_event_bytes=limit)

    whole = check([body])
    assert whole.internal_error is None
    assert whole.outcome in Outcome
    for finding in whole.findings:
        assert finding.rule in RULES, finding
        assert finding.severity is RULES[finding.rule].severity, finding
    expected = verdict(whole)
    two = check([body[:split], body[split:]])
    assert verdict(two) == expected, (protocol, split, two, whole)
    stepped = check([body[i : i + step] for i in range(0, len(body), step)])
    assert verdict(stepped) == expected, (protocol, step, stepped, whole)


if __name__ == "__main__":
    main(test_one_input, "fuzz_checkers")
