"""The OpenAI protocols' shape step alone: the shapes generated from openai-python
(``_generated_openai_chat``, ``_generated_openai_responses``) checked by ``_fields``, and
the payload read through them, as the checkers run it.

Issue 47 asked for one way to declare a payload's shape. This benchmark first compared the
pydantic-core TypedDict checks of chat and Responses with the same shapes in ``_fields``
(docs/performance.md, "One shape mechanism or two", has those figures); the TypedDict path
is gone since, so it now times the one mechanism left, per payload: chat on an
already-parsed chunk (the checker parses first, and its fast path vouches for most content
chunks before any of this) for a content chunk, the role chunk, a tool-call chunk, the
finish chunk, the usage chunk and one with a wrong ``created`` (the check that fails, then
``usable``); Responses with the parse (``from_json``, then the check and ``declared``) on a
text delta, an item added, a part added and ``response.completed``. Run:
``python -m benchmarks.shapes``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic_core import from_json

from benchmarks._timing import best_of, print_table, write_results
from benchmarks.check_openai import openai_chat_frames
from benchmarks.check_responses import responses_frames
from streamguard.protocols._fields import Shape, declared, nested_problem, usable
from streamguard.protocols._generated_openai_chat import CHAT_COMPLETION_CHUNK
from streamguard.protocols._generated_openai_responses import RESPONSE_STREAM_EVENT

__all__ = ["main"]


def _events() -> dict[str, bytes]:
    frames = responses_frames(deltas=2)
    data = [frame.split(b"\ndata: ", 1)[1][:-2] for frame in frames]
    return {
        "text delta": data[4],
        "item added": data[2],
        "part added": data[3],
        "completed": data[-1],
    }


def _chunks() -> dict[str, dict[str, Any]]:
    frames = openai_chat_frames(chunks=3)
    parsed = [from_json(frame[6:-2], cache_strings="keys") for frame in frames[:-1]]
    role, content, finish, usage = parsed[0], parsed[1], parsed[-2], parsed[-1]
    tool = json.loads(json.dumps(content))
    tool["choices"][0]["delta"] = {
        "tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Par'}}]
    }
    wrong = {**content, "created": "1755012345"}
    return {
        "content": content,
        "role": role,
        "tool-call arguments": tool,
        "finish": finish,
        "usage": usage,
        "wrong created (fails)": wrong,
    }


def _read(payload: dict[str, Any], shape: Shape) -> dict[str, Any]:
    """The checkers' shape step: the check, then the payload read through the shape."""
    if nested_problem(payload, shape) is None:
        return declared(payload, shape)
    return usable(payload, shape)


def _read_event(data: bytes) -> dict[str, Any]:
    return _read(from_json(data, cache_strings="keys"), RESPONSE_STREAM_EVENT)


def main() -> int:
    rows = []
    repeat = 20_000
    for name, chunk in _chunks().items():
        spent = best_of(
            lambda c=chunk: [_read(c, CHAT_COMPLETION_CHUNK) for _ in range(repeat)]  # type: ignore[misc]
        )
        fits = nested_problem(chunk, CHAT_COMPLETION_CHUNK) is None
        rows.append({"payload": f"chat {name}", "fits": fits, "us": spent / repeat * 1e6})
    for name, data in _events().items():
        spent = best_of(lambda d=data: [_read_event(d) for _ in range(repeat)])  # type: ignore[misc]
        fits = nested_problem(from_json(data), RESPONSE_STREAM_EVENT) is None
        rows.append(
            {
                "payload": f"responses {name} (with the parse)",
                "fits": fits,
                "us": spent / repeat * 1e6,
            }
        )
    print_table(rows)
    print(f"\nresults in {write_results('shapes', rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
