"""Fuzz target: the shape cache changes no report (issue 26).

Input: 4 control bytes (protocol, request, how many times each frame repeats, a chunk
size), then the body. The body's frames are each repeated (a healthy stream is runs of
look-alike frames; a fuzzer's inputs are short), then checked twice, with skeletons learned
and with every frame checked in full (``_skeleton.learning``), each in fixed-size chunks:
the reports must be the same, finding messages included, and no internal error may occur.
Run: ``python fuzz/fuzz_shape_cache.py`` (``FUZZ_SECONDS``, or any libFuzzer option).
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
    from streamguard.protocols import _skeleton

#: The protocols whose checkers vouch for frames (``Checker.repeatable``), and ``auto``.
PROTOCOLS = ("openai_chat", "openai_responses", "anthropic", "ai_sdk_ui", "ag_ui", "gemini", "auto")
REQUESTS: tuple[dict[str, Any] | None, ...] = (
    None,
    {"stream": True, "stream_options": {"include_usage": True}},
    {"stream": True, "n": 2},
)


def verdict(report: StreamReport) -> tuple[object, ...]:
    return (report.protocol, report.outcome, report.findings, report.findings_dropped,
            report.events, report.bytes, report.skipped_checks, report.internal_error)  # fmt: skip


def repeated(body: bytes, times: int) -> bytes:
    """Each frame (up to its blank line) ``times`` times over."""
    frames = body.split(b"\n\n")
    tail = frames.pop()
    return b"".join(frame + b"\n\n" for frame in frames for _ in range(times)) + tail


def test_one_input(data: bytes) -> None:
    if len(data) < 4:
        return
    protocol = PROTOCOLS[data[0] % len(PROTOCOLS)]
    request = REQUESTS[data[1] % len(REQUESTS)]
    body = repeated(data[4:], data[2] % 6 + 1)
    step = data[3] % 64 + 1 if data[3] & 0x80 else len(body) + 1  # or one frame per chunk
    chunks = (
        [body[i : i + step] for i in range(0, len(body), step)]
        if step <= len(body)
        else [frame + b"\n\n" for frame in body.split(b"\n\n")]
    )

    def check() -> StreamReport:
        return check_stream(chunks, protocol=protocol, request=request)

    cached = check()
    try:
        _skeleton.learning(False)
        full = check()
    finally:
        _skeleton.learning(True)
    assert cached.internal_error is None, cached.internal_error
    assert verdict(cached) == verdict(full), (protocol, verdict(cached), verdict(full))


if __name__ == "__main__":
    main(test_one_input, "fuzz_shape_cache")
