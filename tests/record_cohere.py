"""Build the healthy streams of ``tests/fixtures/cohere`` with the cohere SDK's own models
(run by hand; not part of the suite): each event is validated as the SDK's
``V2ChatStreamResponse`` (cohere 7.3.1), written back from the model without its unset
fields, and named after its type, as the API frames it::

    python -m tests.record_cohere OUT_DIR

The broken fixtures are these streams edited as each one's sidecar says; the gateway one is
``ok_text`` relayed (CR LF, no names, a keepalive comment, ``[DONE]``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from cohere.core.pydantic_utilities import parse_obj_as
from cohere.v2.types.v2chat_stream_response import V2ChatStreamResponse

Payload = dict[str, Any]


def frame(event: Payload) -> str:
    """One event as the API frames it, after a round trip through the SDK's model."""
    model: Any = parse_obj_as(V2ChatStreamResponse, event)  # type: ignore[arg-type]
    data = json.loads(model.json(exclude_none=True))
    assert data["type"] == event["type"], (data, event)
    return f"event: {data['type']}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def start() -> Payload:
    message = {
        "role": "assistant",
        "content": [],
        "tool_plan": "",
        "tool_calls": [],
        "citations": [],
    }
    return {
        "type": "message-start",
        "id": "c0ffee00-0000-4000-8000-000000000001",
        "delta": {"message": message},
    }


def content_start(index: int, kind: str = "text") -> Payload:
    content = {"type": kind, kind: ""}
    return {"type": "content-start", "index": index, "delta": {"message": {"content": content}}}


def content_delta(index: int, text: str, kind: str = "text") -> Payload:
    return {
        "type": "content-delta",
        "index": index,
        "delta": {"message": {"content": {kind: text}}},
    }


def content_end(index: int) -> Payload:
    return {"type": "content-end", "index": index}


def end(reason: str = "COMPLETE", tokens_in: int = 5, tokens_out: int = 9) -> Payload:
    usage = {
        "billed_units": {"input_tokens": tokens_in, "output_tokens": tokens_out},
        "tokens": {"input_tokens": 70 + tokens_in, "output_tokens": tokens_out},
    }
    return {"type": "message-end", "delta": {"finish_reason": reason, "usage": usage}}


def plan(text: str) -> Payload:
    return {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": text}}}


def call_start(index: int, call_id: str, name: str) -> Payload:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    return {"type": "tool-call-start", "index": index, "delta": {"message": {"tool_calls": call}}}


def call_delta(index: int, arguments: str) -> Payload:
    call = {"function": {"arguments": arguments}}
    return {"type": "tool-call-delta", "index": index, "delta": {"message": {"tool_calls": call}}}


def call_end(index: int) -> Payload:
    return {"type": "tool-call-end", "index": index}


def citation_start(index: int, begin: int, stop: int, text: str) -> Payload:
    source = {
        "type": "document",
        "id": "doc-0",
        "document": {"id": "doc-0", "text": "Paris is the capital."},
    }
    citation = {
        "start": begin,
        "end": stop,
        "text": text,
        "sources": [source],
        "type": "TEXT_CONTENT",
    }
    return {"type": "citation-start", "index": index, "delta": {"message": {"citations": citation}}}


def citation_end(index: int) -> Payload:
    return {"type": "citation-end", "index": index}


TEXT = [
    start(),
    content_start(0),
    content_delta(0, "Hello"),
    content_delta(0, ", world"),
    content_end(0),
    end(),
]
STREAMS: dict[str, list[Payload]] = {
    "ok_text": TEXT,
    "ok_thinking_then_text": [
        start(),
        content_start(0, "thinking"),
        content_delta(0, "The user greets.", "thinking"),
        content_end(0),
        content_start(1),
        content_delta(1, "Hi!"),
        content_end(1),
        end(),
    ],
    "ok_tool_plan_and_calls": [
        start(),
        plan("I will look up"),
        plan(" the weather."),
        call_start(0, "get_weather_1", "get_weather"),
        call_delta(0, '{"city":'),
        call_delta(0, '"Paris"}'),
        call_end(0),
        call_start(1, "get_time_2", "get_time"),
        call_delta(1, "{}"),
        call_end(1),
        end("TOOL_CALL"),
    ],
    "ok_citations": [
        start(),
        content_start(0),
        content_delta(0, "Paris is the capital."),
        citation_start(0, 0, 5, "Paris"),
        citation_end(0),
        content_end(0),
        end(),
    ],
    "ok_max_tokens": [
        start(),
        content_start(0),
        content_delta(0, "A long"),
        content_end(0),
        end("MAX_TOKENS"),
    ],
    "ok_finish_reason_error": [start(), end("ERROR", 5, 0)],
}


if __name__ == "__main__":  # pragma: no cover
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, events in STREAMS.items():
        (out / f"{name}.sse").write_text("".join(frame(event) for event in events))
