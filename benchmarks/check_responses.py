"""Full checking of an OpenAI Responses stream: µs per frame against split + ``orjson.loads``.

The stream is shaped like the real API's: ``response.created`` and ``response.in_progress``,
one message item with one ``output_text`` part, thousands of ``response.output_text.delta``
events (``sequence_number``, ``item_id``, ``logprobs`` and a random-length ``obfuscation``
on each), the part's and the item's ``.done`` events with the joined text, and
``response.completed`` with the output.

* anchor — split the same chunks on the blank line and ``orjson.loads`` each payload;
* checked — ``check_stream(chunks, protocol="openai_responses")``: framing, JSON and shape,
  the sequence numbers, the items and parts, the deltas joined and compared with the
  ``.done`` text, every rule, and the report; ``full_check_us_per_frame`` is the same with
  the shape cache off.

Budget (issue 26): checked ≤ 1.2x the anchor. Run: ``python -m benchmarks.check_responses``.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from benchmarks._anchors import against_split
from streamguard import check_stream

__all__ = ["main", "responses_frames"]

DELTAS = 5_000
_WORDS = (" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".")
_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_ITEM = "msg_68c0f7a1e2b48190a5f3c9d2e1b7a6f40123456789abcdef"


def responses_frames(seed: int = 0, deltas: int = DELTAS) -> list[bytes]:
    """One frame per event, as the API writes them, with ``deltas`` text deltas."""
    rng = random.Random(seed)
    frames: list[bytes] = []

    def event(payload: dict[str, Any]) -> None:
        payload = {"type": payload["type"], "sequence_number": len(frames), **payload}
        data = json.dumps(payload, separators=(",", ":"))
        frames.append(f"event: {payload['type']}\ndata: {data}\n\n".encode())

    response = {
        "id": "resp_68c0f7a1d9e08190b2c4e6f8a0b1c2d3",
        "object": "response",
        "created_at": 1757476769,
        "status": "in_progress",
        "model": "gpt-5-mini-2025-08-07",
        "output": [],
        "usage": None,
    }
    event({"type": "response.created", "response": response})
    event({"type": "response.in_progress", "response": response})
    item = {
        "id": _ITEM,
        "type": "message",
        "status": "in_progress",
        "content": [],
        "role": "assistant",
    }
    event({"type": "response.output_item.added", "output_index": 0, "item": item})
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    where = {"item_id": _ITEM, "output_index": 0, "content_index": 0}
    event({"type": "response.content_part.added", **where, "part": part})
    text = []
    for i in range(deltas):
        word = _WORDS[i % len(_WORDS)]
        text.append(word)
        padding = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 15)))
        event(
            {
                "type": "response.output_text.delta",
                **where,
                "delta": word,
                "logprobs": [],
                "obfuscation": padding,
            }
        )
    joined = "".join(text)
    event({"type": "response.output_text.done", **where, "text": joined, "logprobs": []})
    event({"type": "response.content_part.done", **where, "part": {**part, "text": joined}})
    done_item = {**item, "status": "completed", "content": [{**part, "text": joined}]}
    event({"type": "response.output_item.done", "output_index": 0, "item": done_item})
    usage = {"input_tokens": 12, "output_tokens": deltas, "total_tokens": deltas + 12}
    final = {**response, "status": "completed", "output": [done_item], "usage": usage}
    event({"type": "response.completed", "response": final})
    return frames


def checked(chunks: list[bytes]) -> int:
    report = check_stream(chunks, protocol="openai_responses")
    if report.findings or report.outcome.value != "completed":
        raise AssertionError(f"the benchmark stream is not clean: {report.findings[:3]}")
    return report.events


def main() -> int:
    return against_split("check_responses", responses_frames(), checked, 1.2)


if __name__ == "__main__":
    sys.exit(main())
