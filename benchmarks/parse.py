"""Parsing only: µs per event of ``EventParser`` against two anchors in the same run.

The "floor" is the least a framing parser can do in Python: an incremental split of the
same chunks on the blank-line separator with ``bytes.find``, keeping each frame.
``EventParser`` does the whole WHATWG algorithm on top (every line ending, fields, comments,
BOM, UTF-8 decoding, offsets, bounds). The other anchor is httpx-sse's decoder, a popular
client-side parser doing the same job. Run: ``make bench`` or ``python -m benchmarks.parse``.
"""

from __future__ import annotations

import codecs
import json
import sys
from collections.abc import Callable

from benchmarks._anchors import rechunk, split_frames
from benchmarks._timing import best_of, print_table, write_results
from streamguard.sse import EventParser

EVENTS = 5_000


def openai_stream(separator: bytes) -> list[bytes]:
    """Frames shaped like OpenAI chat chunks (one ``data:`` line each), then ``[DONE]``."""
    frames = []
    for i in range(EVENTS):
        chunk = {
            "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
            "object": "chat.completion.chunk",
            "created": 1741570283,
            "model": "gpt-4o-2024-08-06",
            "service_tier": "default",
            "system_fingerprint": "fp_eb9dce56a8",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": f" token{i}"},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
            "usage": None,
            "obfuscation": "Xk2",
        }
        frames.append(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + separator)
    frames.append(b"data: [DONE]" + separator)
    return frames


def anthropic_stream(separator: bytes) -> list[bytes]:
    """Frames shaped like Anthropic ``content_block_delta`` events (``event:`` + ``data:``)."""
    line_end = separator[: len(separator) // 2]
    frames = []
    for i in range(EVENTS):
        payload = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": f" token{i}"},
        }
        frames.append(
            b"event: content_block_delta"
            + line_end
            + b"data: "
            + json.dumps(payload, separators=(",", ":")).encode()
            + separator
        )
    return frames


def httpx_sse(chunks: list[bytes]) -> int:
    """httpx-sse's decoding as ``aiter_sse`` runs it: UTF-8 text, lines, then events."""
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    text_decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    lines, events = SSELineDecoder(), SSEDecoder()
    count = 0
    for chunk in chunks:
        for line in lines.decode(text_decoder.decode(chunk)):
            if events.decode(line) is not None:
                count += 1
    return count


def parse(chunks: list[bytes]) -> int:
    parser = EventParser()
    count = 0
    for chunk in chunks:
        count += len(parser.feed(chunk))
    parser.close()
    return count


def measure(name: str, chunks: list[bytes], separator: bytes, events: int) -> dict[str, object]:
    checks: dict[str, Callable[[], int]] = {
        "parser": lambda: parse(chunks),
        "floor": lambda: split_frames(chunks, separator),
        "httpx_sse": lambda: httpx_sse(chunks),
    }
    counts = {label: check() for label, check in checks.items()}
    assert set(counts.values()) == {events}, (name, counts)
    seconds = {label: best_of(check) for label, check in checks.items()}
    return {
        "case": name,
        "chunks": len(chunks),
        "floor_us": seconds["floor"] / events * 1e6,
        "parser_us": seconds["parser"] / events * 1e6,
        "httpx_sse_us": seconds["httpx_sse"] / events * 1e6,
        "vs_floor": seconds["parser"] / seconds["floor"],
        "vs_httpx_sse": seconds["parser"] / seconds["httpx_sse"],
    }


def main() -> int:
    rows = []
    for shape, build, events in (
        ("openai", openai_stream, EVENTS + 1),
        ("anthropic", anthropic_stream, EVENTS),
    ):
        for ending_name, separator in (("LF", b"\n\n"), ("CRLF", b"\r\n\r\n")):
            frames = build(separator)
            for cut_name, chunks in (
                ("frame-per-chunk", frames),
                ("16KiB-chunks", rechunk(frames, 16 * 1024)),
                ("ragged-97B", rechunk(frames, 97)),
            ):
                rows.append(measure(f"{shape} {ending_name} {cut_name}", chunks, separator, events))
    print_table(rows)
    path = write_results("parse", rows)
    worst_floor = max(float(str(row["vs_floor"])) for row in rows)
    worst_httpx = max(float(str(row["vs_httpx_sse"])) for row in rows)
    print(
        f"\nworst: {worst_floor:.2f}x the floor (budget 2.0x), {worst_httpx:.2f}x httpx-sse "
        f"(for comparison); results in {path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
