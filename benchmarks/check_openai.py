"""Full checking of an OpenAI chat stream: µs per frame against two anchors, in one run.

The stream is shaped like the real API's since 2025-08: a role chunk, thousands of content
chunks (``service_tier``, ``system_fingerprint``, ``"usage": null`` and a random-length
``obfuscation`` on every one), the finish chunk, the usage chunk, ``data: [DONE]``.

* (a) split — split the same chunks on the blank line and ``orjson.loads`` each payload:
  the least any check can do;
* (b) sdk — the official ``openai`` SDK's own SSE decoding (``openai._streaming.SSEDecoder``)
  plus ``json.loads`` of each payload, as ``Stream.__iter__`` does before building models;
* checked — ``check_stream(chunks, protocol="openai_chat", request=...)``: framing (the
  WHATWG parser), JSON and shape (pydantic-core, one pass), every chat rule, the report;
  ``full_check_us`` is the same with the shape cache off (every frame parsed).

Budget (issue 26): checked ≤ 1.0x (a) and ≤ 0.2x (b); a stream whose every chunk is
malformed (no ``object``) ≤ 2x the healthy one.
Run: ``python -m benchmarks.check_openai``.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator

from benchmarks._anchors import rechunk, split_and_load, without_shape_cache
from benchmarks._timing import best_of, print_table, write_results
from streamguard import check_stream

__all__ = ["anchor_sdk", "checked", "main", "openai_chat_frames"]

CONTENT_CHUNKS = 5_000
REQUEST = {
    "model": "gpt-5-mini",
    "stream": True,
    "stream_options": {"include_usage": True},
    "messages": [{"role": "user", "content": "Write a long story."}],
}
_WORDS = (" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".")
_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def openai_chat_frames(seed: int = 0, chunks: int = CONTENT_CHUNKS) -> list[bytes]:
    """One frame per chunk, as the API writes them (compact JSON, one ``data:`` line), with
    ``chunks`` content chunks."""
    rng = random.Random(seed)

    def frame(choices: list[dict[str, object]], usage: object = None) -> bytes:
        chunk = {
            "id": "chatcmpl-CBx3mK9qLw7ZrT2yPdVnE5uHa1sG",
            "object": "chat.completion.chunk",
            "created": 1755012345,
            "model": "gpt-5-mini-2025-08-07",
            "service_tier": "default",
            "system_fingerprint": None,
            "choices": choices,
            "usage": usage,
            "obfuscation": "".join(rng.choices(_ALPHABET, k=rng.randint(0, 14))),
        }
        return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"

    def choice(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    frames = [frame([choice({"role": "assistant", "content": "", "refusal": None})])]
    frames += [frame([choice({"content": _WORDS[i % len(_WORDS)]})]) for i in range(chunks)]
    frames.append(frame([choice({}, "stop")]))
    usage = {
        "prompt_tokens": 14,
        "completion_tokens": chunks,
        "total_tokens": 14 + chunks,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }
    frames.append(frame([], usage))
    frames.append(b"data: [DONE]\n\n")
    return frames


def anchor_sdk(chunks: list[bytes]) -> int:
    """(b) The SDK's incremental SSE decoder, then ``json.loads``, as ``Stream`` does."""
    from openai._streaming import SSEDecoder

    count = 0
    iterator: Iterator[bytes] = iter(chunks)
    for sse in SSEDecoder().iter_bytes(iterator):
        if not sse.data.startswith("[DONE]"):
            json.loads(sse.data)
        count += 1
    return count


def checked_malformed(chunks: list[bytes]) -> int:
    """The same check of a stream whose every chunk fails the shape check."""
    report = check_stream(chunks, protocol="openai_chat", request=REQUEST)
    if not report.findings:
        raise AssertionError("the malformed benchmark stream is clean")
    return report.events


def checked(chunks: list[bytes]) -> int:
    report = check_stream(chunks, protocol="openai_chat", request=REQUEST)
    if report.findings or report.outcome.value != "completed":
        raise AssertionError(f"the benchmark stream is not clean: {report.findings[:3]}")
    return report.events


def main() -> int:
    frames = openai_chat_frames()
    events = len(frames)
    rows = []
    for cut_name, chunks in (
        ("frame-per-chunk", frames),
        ("16KiB-chunks", rechunk(frames, 16 * 1024)),
        ("ragged-97B", rechunk(frames, 97)),
    ):
        counts = (split_and_load(chunks), anchor_sdk(chunks), checked(chunks))
        assert counts == (events, events, events), (cut_name, counts)
        split_s = best_of(lambda chunks=chunks: split_and_load(chunks))  # type: ignore[misc]
        sdk_s = best_of(lambda chunks=chunks: anchor_sdk(chunks))  # type: ignore[misc]
        checked_s = best_of(lambda chunks=chunks: checked(chunks))  # type: ignore[misc]
        full_s = best_of(without_shape_cache(lambda chunks=chunks: checked(chunks)))  # type: ignore[misc]
        rows.append(
            {
                "case": f"openai_chat {cut_name}",
                "frames": events,
                "split_orjson_us": split_s / events * 1e6,
                "sdk_decode_us": sdk_s / events * 1e6,
                "checked_us": checked_s / events * 1e6,
                "full_check_us": full_s / events * 1e6,
                "vs_split": checked_s / split_s,
                "vs_sdk": checked_s / sdk_s,
            }
        )
    # A server that omits `object` from every chunk: each one fails the shape check and
    # takes the full path (budget, issue 26: at most twice the healthy stream).
    malformed = [f.replace(b'"object":"chat.completion.chunk",', b"") for f in frames]
    assert checked_malformed(malformed) == events
    malformed_s = best_of(lambda: checked_malformed(malformed))
    healthy_s = best_of(lambda: checked(frames))
    malformed_row = {
        "case": "openai_chat malformed, frame-per-chunk",
        "frames": events,
        "checked_us": malformed_s / events * 1e6,
        "malformed_vs_healthy": malformed_s / healthy_s,
    }
    print_table(rows)
    print()
    print_table([malformed_row])
    rows.append(malformed_row)
    path = write_results("check_openai", rows)
    print(f"\nbudget: vs_split <= 1.0, vs_sdk <= 0.2, malformed <= 2x; results in {path}")
    over = [
        row["case"]
        for row in rows
        if row.get("vs_split", 0) > 1.0
        or row.get("vs_sdk", 0) > 0.2
        or row.get("malformed_vs_healthy", 0) > 2.0
    ]
    if over:
        print(f"over budget: {', '.join(over)}")
    return 0  # a report, not a gate: budgets are judged by reading the ratios


if __name__ == "__main__":
    sys.exit(main())
