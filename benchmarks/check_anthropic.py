"""Full checking of an Anthropic stream: µs per frame against split + ``orjson.loads``.

The stream is shaped like the real API's: ``message_start``, one text block of thousands
of ``text_delta`` events (JSON padded with trailing spaces, as captures show), a ``ping``
now and then, ``content_block_stop``, ``message_delta``, ``message_stop``.

* anchor — split the same chunks on the blank line and ``orjson.loads`` each payload;
* checked — ``check_stream(chunks, protocol="anthropic")``: framing (the WHATWG parser),
  JSON (pydantic-core), shapes, the grammar and every rule, and the report;
  ``full_check_us_per_frame`` is the same with the shape cache off (every frame parsed).

Budget (issue 26): checked ≤ 1.2x the anchor. Run: ``python -m benchmarks.check_anthropic``.
"""

from __future__ import annotations

import json
import sys

from benchmarks._anchors import against_split
from streamguard import check_stream

__all__ = ["anthropic_frames", "main"]

DELTAS = 5_000
PING_EVERY = 200
_WORDS = ("The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".")


def _event(name: str, payload: dict[str, object], padding: int) -> bytes:
    data = json.dumps(payload, separators=(",", ":"))
    data = data[:-1] + " " * padding + "}"
    return f"event: {name}\ndata: {data}\n\n".encode()


def anthropic_frames(deltas: int = DELTAS) -> list[bytes]:
    """One frame per event, as the API writes them, with ``deltas`` text deltas."""
    frames = [
        _event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 472,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "output_tokens": 1,
                        "service_tier": "standard",
                    },
                },
            },
            10,
        ),
        _event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            5,
        ),
    ]
    for i in range(deltas):
        if i % PING_EVERY == 0:
            frames.append(b'event: ping\ndata: {"type": "ping"}\n\n')
        delta = {"type": "text_delta", "text": _WORDS[i % len(_WORDS)]}
        frames.append(
            _event(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": delta},
                i % 13,
            )
        )
    frames.append(_event("content_block_stop", {"type": "content_block_stop", "index": 0}, 8))
    frames.append(
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": deltas},
            },
            3,
        )
    )
    frames.append(_event("message_stop", {"type": "message_stop"}, 7))
    return frames


def checked(chunks: list[bytes]) -> int:
    report = check_stream(chunks, protocol="anthropic")
    if report.findings or report.outcome.value != "completed":
        raise AssertionError(f"the benchmark stream is not clean: {report.findings[:3]}")
    return report.events


def main() -> int:
    return against_split("check_anthropic", anthropic_frames(), checked, 1.2)


if __name__ == "__main__":
    sys.exit(main())
