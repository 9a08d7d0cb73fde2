"""The JSON step alone: decoders a checker could use, on the payloads of the OpenAI benchmark.

Issue 15 asked for this measurement before choosing: ``pydantic_core.from_json`` (what the
checkers use), the same plus the shape check and the read through it (run only when the
chat fast path does not vouch for a chunk: ``_fields`` against the shape generated from
openai-python), and msgspec decoding untyped and typed to a ``Struct`` of the
fields the rules read (a decode that skips the rest). Ratios are to ``orjson.loads`` in the
same run. msgspec is a bench-only dependency: the core does not use it (docs/performance.md
says why). Run: ``python -m benchmarks.json_step``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import msgspec
import orjson
from pydantic_core import from_json

from benchmarks._timing import best_of, print_table, write_results
from benchmarks.check_openai import openai_chat_frames
from streamguard.protocols._fields import declared, nested_problem
from streamguard.protocols._generated_openai_chat import CHAT_COMPLETION_CHUNK

__all__ = ["main"]


class _Delta(msgspec.Struct):
    content: str | None = None
    role: str | None = None


class _Choice(msgspec.Struct):
    index: int
    delta: _Delta | None = None
    finish_reason: str | None = None
    logprobs: Any = None


class _Chunk(msgspec.Struct):
    id: str
    object: str
    created: int
    model: str
    choices: list[_Choice] | None = None
    usage: Any = None
    system_fingerprint: str | None = None
    service_tier: str | None = None
    obfuscation: str | None = None


def _checked(chunk: dict[str, Any]) -> object:
    """The general path's shape step: the check, then the read of a chunk that fits."""
    if nested_problem(chunk, CHAT_COMPLETION_CHUNK) is None:
        return declared(chunk, CHAT_COMPLETION_CHUNK)
    return None


def main() -> int:
    payloads = [frame[6:-2].decode() for frame in openai_chat_frames()[:-1]]  # not [DONE]
    typed = msgspec.json.Decoder(_Chunk)
    untyped = msgspec.json.Decoder()
    decoders: dict[str, Callable[[str], object]] = {
        "orjson.loads": orjson.loads,
        "json.loads": json.loads,
        "pydantic_core.from_json (checkers)": lambda p: from_json(p, cache_strings="keys"),
        "from_json + shape check": lambda p: _checked(from_json(p, cache_strings="keys")),
        "msgspec untyped": untyped.decode,
        "msgspec typed Struct": typed.decode,
    }
    seconds = {
        name: best_of(lambda decode=decode: [decode(p) for p in payloads])  # type: ignore[misc]
        for name, decode in decoders.items()
    }
    rows = [
        {
            "decoder": name,
            "us_per_payload": spent / len(payloads) * 1e6,
            "vs_orjson": spent / seconds["orjson.loads"],
        }
        for name, spent in seconds.items()
    ]
    print_table(rows)
    print(f"\nresults in {write_results('json_step', rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
