"""One shape mechanism or two: the pydantic-core TypedDict checks of chat and Responses
against the same shapes declared in ``_fields``, on the payloads those checkers validate.

Issue 47 asks for one way to declare a payload's shape (``_fields``, where the shapes
generated from the clients land), keeping the TypedDict path of chat and Responses
(``_shapes``) only if it is measured faster on the hot path. This declares chat's
``ChatChunk`` in ``_fields`` (every field ``_shapes`` declares, with the same kinds and the
same optional and nullable ones) and times both checks on already-parsed chunks, the
parse left out (chat parses first, then validates): a content chunk, the role chunk, a
tool-call chunk, the finish chunk, the usage chunk, and one with a wrong ``created`` (the
check that fails). Responses' ``ResponsesEvent`` likewise, where the checker parses and
validates in one pass (``validate_json``): that pass against ``from_json`` and the
``_fields`` walk, on a text delta, an item added, a part added and ``response.completed``.
Ratios are to the TypedDict check of the same payload, same run. Run:
``python -m benchmarks.shapes``.

The two do not say the same thing when a chunk is wrong (pydantic-core names the first
problem's path its way; ``_fields`` its own), so this measures cost only; which findings a
switch would change is the equivalence harness's question, not this one's.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

from pydantic_core import from_json

from benchmarks._timing import best_of, print_table, write_results
from benchmarks.check_openai import openai_chat_frames
from benchmarks.check_responses import responses_frames
from streamguard.protocols._fields import (
    ANY_VALUE,
    ARRAY,
    EACH,
    INTEGER,
    NUMBER,
    OBJECT,
    STRING,
    Nested,
    Shape,
    may,
    may_hold,
    nested_problem,
    opt,
    req,
)
from streamguard.protocols._shapes import RESPONSES_EVENT, validate_chat_chunk

__all__ = ["CHAT_CHUNK", "RESPONSES_EVENT_SHAPE", "main"]

_FUNCTION = Shape(fields=(may("name"), may("arguments")))
_TOOL_CALL = Shape(
    fields=(req("index", ANY_VALUE), may("id"), may("type")),
    nested=(may_hold("function", _FUNCTION),),
)
_ROLES = ("developer", "system", "user", "assistant", "tool")
_DELTA = Shape(
    fields=(may("role", STRING, _ROLES), may("content"), may("refusal")),
    nested=(may_hold("tool_calls", _TOOL_CALL, EACH), may_hold("function_call", _FUNCTION)),
)
_TOP_LOGPROB = Shape(fields=(req("token"), req("logprob", NUMBER), may("bytes", ARRAY)))
_TOKEN_LOGPROB = Shape(
    fields=_TOP_LOGPROB.fields, nested=(Nested("top_logprobs", _TOP_LOGPROB, EACH),)
)
_LOGPROBS = Shape(
    nested=(may_hold("content", _TOKEN_LOGPROB, EACH), may_hold("refusal", _TOKEN_LOGPROB, EACH))
)
_CHOICE = Shape(
    fields=(req("index", INTEGER), may("finish_reason")),
    nested=(Nested("delta", _DELTA, required=False), may_hold("logprobs", _LOGPROBS)),
)
_USAGE = Shape(
    fields=(
        req("prompt_tokens", INTEGER),
        req("completion_tokens", INTEGER),
        req("total_tokens", INTEGER),
    )
)
#: ``_shapes.ChatChunk``, declared in ``_fields``.
CHAT_CHUNK = Shape(
    fields=(
        req("id"),
        req("object"),
        req("created", INTEGER),
        req("model"),
        may("system_fingerprint"),
        may("service_tier"),
        may("obfuscation"),
        may("moderation", OBJECT),
        opt("prompt_filter_results", ANY_VALUE),
        opt("prompt_annotations", ANY_VALUE),
        opt("error", ANY_VALUE),
    ),
    nested=(may_hold("choices", _CHOICE, EACH), may_hold("usage", _USAGE)),
)

_ENTRY = Shape(fields=(req("type"),))
_RESPONSE = Shape(
    fields=(
        opt("id"),
        opt("status"),
        opt("error", ANY_VALUE),
        opt("usage", ANY_VALUE),
        opt("incomplete_details", ANY_VALUE),
    ),
    nested=(may_hold("output", _ENTRY, EACH),),
)
_ITEM = Shape(
    fields=(opt("id"), opt("type"), opt("status")), nested=(may_hold("content", _ENTRY, EACH),)
)
_PART = Shape(fields=(req("type"), opt("text"), opt("refusal")))
#: ``_shapes.ResponsesEvent``, declared in ``_fields``.
RESPONSES_EVENT_SHAPE = Shape(
    fields=(
        req("type"),
        req("sequence_number", INTEGER),
        opt("output_index", INTEGER),
        opt("content_index", INTEGER),
        opt("summary_index", INTEGER),
        opt("item_id"),
        opt("delta", ANY_VALUE),
        opt("text"),
        opt("refusal"),
        opt("arguments"),
        opt("input"),
        opt("code", ANY_VALUE),
        opt("message", ANY_VALUE),
        opt("param", ANY_VALUE),
        opt("error", ANY_VALUE),
    ),
    nested=(
        Nested("response", _RESPONSE, required=False),
        Nested("item", _ITEM, required=False),
        Nested("part", _PART, required=False),
    ),
)


def _events() -> dict[str, bytes]:
    frames = responses_frames(deltas=2)
    data = [frame.split(b"\ndata: ", 1)[1][:-2] for frame in frames]
    return {
        "text delta": data[4],
        "item added": data[2],
        "part added": data[3],
        "completed": data[-1],
    }


def _responses_typed(data: bytes) -> None:
    with contextlib.suppress(ValueError):
        RESPONSES_EVENT.validate_json(data)


def _responses_fields(data: bytes) -> None:
    nested_problem(from_json(data, cache_strings="keys"), RESPONSES_EVENT_SHAPE)


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


def _typed(chunk: dict[str, Any]) -> None:
    with contextlib.suppress(ValueError):  # (a ValidationError is one)
        validate_chat_chunk(chunk)


def main() -> int:
    rows = []
    repeat = 20_000
    for name, chunk in _chunks().items():
        typed_ok = True
        try:
            validate_chat_chunk(chunk)
        except ValueError:
            typed_ok = False
        fields_ok = nested_problem(chunk, CHAT_CHUNK) is None
        if typed_ok != fields_ok:  # the two must agree on every chunk timed here
            raise SystemExit(f"{name}: TypedDict says {typed_ok}, _fields says {fields_ok}")
        typed = best_of(lambda c=chunk: [_typed(c) for _ in range(repeat)])  # type: ignore[misc]
        fields = best_of(
            lambda c=chunk: [nested_problem(c, CHAT_CHUNK) for _ in range(repeat)]  # type: ignore[misc]
        )
        rows.append(
            {
                "payload": f"chat {name}",
                "typeddict_us": typed / repeat * 1e6,
                "fields_us": fields / repeat * 1e6,
                "fields_vs_typeddict": fields / typed,
            }
        )
    for name, data in _events().items():
        typed_ok = True
        try:
            RESPONSES_EVENT.validate_json(data)
        except ValueError:
            typed_ok = False
        fields_ok = nested_problem(from_json(data), RESPONSES_EVENT_SHAPE) is None
        if typed_ok != fields_ok:
            raise SystemExit(f"{name}: TypedDict says {typed_ok}, _fields says {fields_ok}")
        typed = best_of(lambda d=data: [_responses_typed(d) for _ in range(repeat)])  # type: ignore[misc]
        fields = best_of(lambda d=data: [_responses_fields(d) for _ in range(repeat)])  # type: ignore[misc]
        rows.append(
            {
                "payload": f"responses {name} (with the parse)",
                "typeddict_us": typed / repeat * 1e6,
                "fields_us": fields / repeat * 1e6,
                "fields_vs_typeddict": fields / typed,
            }
        )
    print_table(rows)
    print(f"\nresults in {write_results('shapes', rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
